"""``fairsched simulate utility-validity``: does a utility predict the target loss of the set it scores?

    fairsched simulate utility-validity --dgp NAME [--seeds N] [--sets M]
                                        [--enrollment-model M] [--json] [--quiet]

runs :func:`fairsched.fl.utility_validity.run` on one DGP (``bundled``, ``unequal``,
``misspecified``, ``cps``, ``proxy``; ``--enrollment-model`` is the model behind the
estimated shares ``π̂`` where the frame has continuous covariates, default ``spline``) and
reports, per utility, the Spearman correlation of its value with the negative realised
target excess loss of federated training on random worker sets (higher is better), mean ±
standard error over the seeds, and the same for the reference predictor
``trained_validation`` (the validation loss of the trained model itself). ``--json`` prints
exactly one object ``{"dgp", "enrollment_model", "utilities": {name: {"spearman", "se"}},
"reference": {name: {"spearman", "se"}}}`` (``se`` null for one seed); progress goes to
stderr unless ``--quiet``. Bad input raises (the caller's error contract: exit code 2).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fairsched.cli.errors import EXIT_OK
from fairsched.cli.output import Output

DEFAULT_SEEDS = 8
DEFAULT_SETS = 50


def add_validity_parser(simulate_subparsers: Any, **kwargs: Any) -> argparse.ArgumentParser:
    """Add ``utility-validity`` to the ``simulate`` subparsers object; returns its parser."""
    from fairsched.fl.validity_dgps import DGPS, ENROLLMENT_MODEL
    from fairsched.propensity.flexible import MODELS

    parser = simulate_subparsers.add_parser(
        "utility-validity", help="rank correlation of utilities with realised target loss",
        description="Spearman correlation of each utility's value with the negative realised "
                    "target-population excess loss of FL training on random worker sets.", **kwargs)
    parser.add_argument("--dgp", required=True, metavar="NAME", help=f"data-generating process: {', '.join(DGPS)}")
    parser.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help=f"seeds 0..N-1 (default {DEFAULT_SEEDS})")
    parser.add_argument("--sets", type=int, default=DEFAULT_SETS,
                        help=f"random worker sets per seed (default {DEFAULT_SETS})")
    parser.add_argument("--enrollment-model", default=ENROLLMENT_MODEL, metavar="M",
                        help=f"model behind π̂ on misspecified, proxy and cps: {', '.join(MODELS)} "
                             f"(default {ENROLLMENT_MODEL})")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--quiet", action="store_true", help="no progress on stderr")
    return parser


def validity_command(args: argparse.Namespace, output: Output) -> int:
    """Run the validation ``args`` describe and emit its result through ``output``; bad input raises."""
    from fairsched.extras import require
    from fairsched.fl.utility_validity import AGGREGATION, run

    require("sklearn", "fairsched simulate utility-validity (its propensity models)")

    def progress(done: int, total: int, seconds: float) -> None:
        print(f"utility-validity {args.dgp}: seed {done}/{total} done ({seconds:.1f} s)", file=sys.stderr, flush=True)

    result = run(args.dgp, args.seeds, args.sets, enrollment_model=args.enrollment_model,
                 progress=None if getattr(args, "quiet", False) else progress)
    lines = [f"utility validity, DGP {args.dgp} (enrollment model {args.enrollment_model}): "
             f"{args.seeds} seeds × {args.sets} sets",
             f"{'utility':<24} {'aggregation':<15} Spearman(utility, −loss)  (mean ± se over seeds)"]
    for name, v in result["utilities"].items():
        se = "n/a" if v["se"] is None else f"{v['se']:.3f}"
        lines.append(f"{name:<24} {AGGREGATION[name]:<15} {v['spearman']:+.3f} ± {se}")
    for name, v in result.get("reference", {}).items():
        se = "n/a" if v["se"] is None else f"{v['se']:.3f}"
        lines.append(f"{name + ' (reference)':<24} {'poststratified':<15} {v['spearman']:+.3f} ± {se}")
    output.emit(result, "\n".join(lines))
    return EXIT_OK
