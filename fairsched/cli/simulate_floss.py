"""``fairsched simulate floss``: does FLOSS flag a violated shadow-variable assumption?

    fairsched simulate floss --violation none|direct|irrelevant|quadratic|interaction|step|d-squared
                             --sims N [--n UNITS]
                             [--seed S] [--shadows 1|2] [--informed] [--j-alpha A] [--json] [--quiet]

runs :func:`fairsched.propensity.floss_validity.run` and reports the share of simulated
populations whose :func:`~fairsched.propensity.floss_diagnostics.fit_shadow_checked` fit was
flagged, and the bias (mean ± se) of the FLOSS-weighted mean satisfaction over the runs
not flagged. ``--json`` prints one object ``{"violation", "flag_rate", "bias": {"mean",
"se"}, "sims", "n", "seed", "shadows", "j_alpha", "flags", "bias_all", "informed_power", "seconds"}``
(``bias`` fields null when every run is flagged).  ``--informed`` (``quadratic`` and
``direct``) also reports how often a Wald test *told* the missing term rejects, the yardstick
of what any diagnostic can detect (:mod:`fairsched.propensity.floss_validity`); without it
``informed_power`` is null. ``--j-alpha`` is the level of the fit's J test (default 0.025;
the curvature test runs at 0.05). Bad input raises a ``FairschedError`` (exit code 2 under
the command line's error contract).

Wiring (in :mod:`fairsched.cli.simulate`): ``add_floss_parser(inner, **kwargs)`` on the
``simulate`` subparsers, and dispatch ``args.simulation == "floss"`` to
``floss_command(args, output)``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fairsched.cli.errors import EXIT_OK
from fairsched.cli.output import Output

DEFAULT_N = 10_000


def add_floss_parser(simulate_subparsers: Any, **kwargs: Any) -> argparse.ArgumentParser:
    """Add the ``floss`` subcommand to the ``simulate`` subparsers; ``kwargs`` go to ``add_parser``."""
    from fairsched.propensity.floss_diagnostics import J_ALPHA
    from fairsched.propensity.floss_validity import VIOLATIONS

    floss = simulate_subparsers.add_parser(
        "floss", help="FLOSS shadow-variable diagnostics under assumption violations (Goetze et al. 2025)",
        description="Simulate populations in which FLOSS's shadow-variable assumption holds or fails, "
                    "and report how often the fit is flagged and the bias of the unflagged estimates.",
        **kwargs)
    floss.add_argument("--violation", required=True, choices=VIOLATIONS, help="which assumption fails (none: it holds)")
    floss.add_argument("--sims", type=int, required=True, metavar="N", help="number of simulated populations")
    floss.add_argument("--n", type=int, default=DEFAULT_N, metavar="UNITS",
                       help=f"users per population (default {DEFAULT_N:,})")
    floss.add_argument("--seed", type=int, default=0, help="seed (default 0)")
    floss.add_argument("--shadows", type=int, default=2, choices=(1, 2),
                       help="shadow variables given to the estimator (default 2; 1 is just identified)")
    floss.add_argument("--informed", action="store_true",
                       help="also run the Wald test told the missing term (quadratic and direct only): "
                            "the power any diagnostic can hope for")
    floss.add_argument("--j-alpha", type=float, default=J_ALPHA, metavar="A",
                       help=f"level of the fit's J test (default {J_ALPHA}; the curvature test runs at 0.05)")
    floss.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    floss.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return floss


def floss_command(args: argparse.Namespace, output: Output) -> int:
    """Run the experiment ``args`` describe and emit its result through ``output``; bad input raises."""
    from fairsched.propensity.errors import ShapeError
    from fairsched.propensity.floss_validity import run

    if args.sims < 1:
        raise ShapeError(f"--sims must be a positive integer, got {args.sims}")
    if args.n < 50:
        raise ShapeError(f"--n must be at least 50, got {args.n}")
    j_alpha = args.j_alpha
    if not 0 < j_alpha < 1:
        raise ShapeError(f"--j-alpha must be a level in (0, 1), got {j_alpha}")
    if not getattr(args, "quiet", False):
        print(f"floss {args.violation}: {args.sims} simulations of {args.n:,} users ...", file=sys.stderr, flush=True)
    data = run(args.violation, args.sims, args.n, args.seed, shadows=getattr(args, "shadows", 2),
               informed=getattr(args, "informed", False), j_alpha=j_alpha)
    data = {"violation": data["violation"], "flag_rate": data["flag_rate"], "bias": data["bias"],
            "sims": data["sims"], "n": data["n"], "seed": args.seed, "shadows": data["shadows"],
            "j_alpha": data["j_alpha"],
            "flags": data["flags"], "bias_all": data["bias_all"], "informed_power": data["informed_power"],
            "seconds": data["seconds"]}
    b = data["bias"]
    bias = "n/a (every run flagged)" if b["mean"] is None else (
        f"{b['mean']:+.4f}" + ("" if b["se"] is None else f" ± {b['se']:.4f}"))
    flags = ", ".join(f"{k} {v}" for k, v in sorted(data["flags"].items())) or "none"
    text = "\n".join([f"FLOSS, violation {args.violation}: {args.sims} simulations of {args.n:,} users, "
                      f"{data['shadows']} shadow variable(s), seed {args.seed}, {data['seconds']:.1f} s",
                      f"flag rate {data['flag_rate']:.3f}   (flags: {flags})",
                      f"bias of the FLOSS-weighted mean satisfaction over unflagged runs: {bias}"]
                     + ([] if data["informed_power"] is None else
                        [f"a Wald test told the missing term rejects in {data['informed_power']:.3f} of runs"]))
    output.emit(data, text)
    return EXIT_OK
