"""``fairsched simulate fedipw | online | floss | utility-validity``: simulation experiments from the command line.

``floss`` (:mod:`fairsched.cli.simulate_floss`) measures how often the checked FLOSS fit flags
a violated shadow-variable assumption; ``utility-validity`` (:mod:`fairsched.cli.simulate_validity`)
measures how well each utility ranks worker sets by their realised target loss.

    fairsched simulate online INSTANCE --policy NAME [--learner NAME] --rounds T --noise SIGMA [--seed S] [--json]

hides the instance's utility from the policy, feeds back noisy rewards from it
(:mod:`fairsched.online.simulate`) and reports the regret against the true ``U_opt``, the
fitted slope of log regret against log T, max debt, fairness slack and what was learned.

    fairsched simulate fedipw --bias LEVEL --seeds N [--rounds R] [--json] [--quiet]

runs the six aggregation rules of :mod:`fairsched.fl.experiment` (FedIPW, Morishita 2026) at one
enrollment-bias level and reports the final target-population excess loss
``F(θ_R) − F*`` per rule, mean ± standard error over the seeds. ``--json`` prints exactly
one object ``{"bias", "seeds", "rounds", "excess_loss": {rule: {"mean", "se"}}}`` on stdout
(``se`` is null for one seed); progress goes to stderr unless ``--quiet``. Bad input (an
unknown level, ``--seeds`` or ``--rounds`` below 1, scikit-learn not installed) is one line
on stderr and exit code 2.

Wiring (in :mod:`fairsched.cli`): call ``add_simulate_parser(sub, ...)`` on the top-level
subparsers and dispatch ``args.command == "simulate"`` to ``simulate_command(args, output)``
(errors raise, for the caller's error contract), or to ``run_simulate(args)``, which applies
the contract itself and returns the exit code.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from fairsched.cli.errors import EXIT_OK, guarded
from fairsched.cli.output import Output
from fairsched.errors import FairschedError
from fairsched.extras import require

DEFAULT_SEEDS = 10


def add_simulate_parser(subparsers: Any, **kwargs: Any) -> argparse.ArgumentParser:
    """Add ``simulate`` (with its ``fedipw`` subcommand) to an argparse subparsers object.

    ``kwargs`` are forwarded to every ``add_parser`` call (e.g. ``parser_class`` is taken
    from the subparsers object; pass ``formatter_class`` and the like here).
    """
    from fairsched.fl.population import BIAS_LEVELS
    from fairsched.fl.training import TrainConfig

    simulate = subparsers.add_parser("simulate", help="run a simulation experiment", **kwargs)
    inner = simulate.add_subparsers(dest="simulation", required=True, metavar="EXPERIMENT")
    fedipw = inner.add_parser(
        "fedipw", help="FedIPW under enrollment and participation bias (Morishita 2026)",
        description="Federated logistic regression under enrollment and participation selection "
                    "bias: final target-population excess loss F(θ_R) − F* of six aggregation rules.",
        **kwargs)
    fedipw.add_argument("--bias", required=True, metavar="LEVEL",
                        help=f"enrollment bias level: {', '.join(BIAS_LEVELS)}")
    fedipw.add_argument("--seeds", type=int, default=DEFAULT_SEEDS,
                        help=f"number of seeds (0..N-1; default {DEFAULT_SEEDS})")
    fedipw.add_argument("--rounds", type=int, default=TrainConfig.rounds,
                        help=f"communication rounds R (default {TrainConfig.rounds})")
    fedipw.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    fedipw.add_argument("--quiet", action="store_true", help="no progress on stderr")
    from fairsched.online.simulate import LEARNERS, POLICY_NAMES

    online = inner.add_parser(
        "online", help="learn an unknown utility inside the floors: regret against U_opt",
        description="Hide the instance's utility from the policy, feed back rewards f(S_t) + noise, "
                    "and report the regret T·U_opt − Σ f(S_t) against the true U_opt.", **kwargs)
    online.add_argument("instance", metavar="INSTANCE", help="instance file or bundled name")
    online.add_argument("--policy", required=True, metavar="NAME", help=f"one of {', '.join(POLICY_NAMES)}")
    online.add_argument("--learner", metavar="NAME", help=f"one of {', '.join(LEARNERS)} (for the learning policies)")
    online.add_argument("--rounds", type=int, required=True, metavar="T", help="rounds to play")
    online.add_argument("--noise", type=float, default=0.05, metavar="SIGMA",
                        help="reward noise standard deviation as a fraction of U_opt (default 0.05)")
    online.add_argument("--seed", type=int, default=0, help="seed of the policy and of the noise (default 0)")
    online.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    online.add_argument("--quiet", action="store_true", help="no progress on stderr")
    from fairsched.cli.simulate_validity import add_validity_parser

    add_validity_parser(inner, **kwargs)
    from fairsched.cli.simulate_floss import add_floss_parser

    add_floss_parser(inner, **kwargs)
    return simulate


def run_simulate(args: argparse.Namespace) -> int:
    """Run the experiment ``args`` describe under the error contract; returns the exit code (2 on bad input)."""

    def execute() -> int:
        with Output(getattr(args, "json", False)) as output:
            return simulate_command(args, output)

    return guarded(execute)


def simulate_command(args: argparse.Namespace, output: Output) -> int:
    """Run the experiment ``args`` describe, its result through ``output``; bad input raises."""
    simulation = getattr(args, "simulation", None)
    if simulation == "online":
        return _online(args, output)
    if simulation == "floss":
        from fairsched.cli.simulate_floss import floss_command

        return floss_command(args, output)
    if simulation == "utility-validity":
        from fairsched.cli.simulate_validity import validity_command

        return validity_command(args, output)
    if simulation != "fedipw":
        raise FairschedError(f"unknown simulation {simulation!r}; known: fedipw, online, floss, utility-validity")
    return _fedipw(args, output)


def _online(args: argparse.Namespace, output: Output) -> int:
    from fairsched.instances import load_instance
    from fairsched.online.simulate import simulate_online

    problem = load_instance(args.instance)

    def progress(t: int) -> None:
        print(f"online {args.policy}: round {t:,}/{args.rounds:,}", file=sys.stderr, flush=True)

    data = simulate_online(problem, args.policy, args.learner, args.rounds, args.noise, args.seed,
                           progress=None if args.quiet else progress)
    slope = "n/a" if data["slope"] is None else f"{data['slope']:.3f}"
    lines = [f"{args.policy}" + (f" + {args.learner}" if args.learner else "") + f" on {args.instance}: "
             f"{args.rounds:,} rounds, noise {args.noise:g}·U_opt, seed {args.seed}, {data['seconds']:.1f} s",
             f"U_opt {data['U_opt']:.6f}   regret {data['regret']:.4f}   per round {data['regret_per_round']:.3g} "
             f"({data['regret_per_round'] / data['U_opt']:.3g} of U_opt)   slope of log regret {slope}",
             f"max debt {data['max_debt']:.4f}   fairness slack {data['fairness_slack']:+.4f}"]
    if data["parameter_error"] is not None:
        lines.append(f"parameter error {data['parameter_error']:.3g}")
    output.emit(data, "\n".join(lines))
    return EXIT_OK


def _fedipw(args: argparse.Namespace, output: Output) -> int:
    from fairsched.fl.errors import SimulationError
    from fairsched.fl.experiment import RULES, run_experiment
    from fairsched.fl.population import bias_strength

    bias_strength(args.bias)
    if args.seeds < 1:
        raise SimulationError(f"--seeds must be a positive integer, got {args.seeds}")
    if args.rounds < 1:
        raise SimulationError(f"--rounds must be a positive integer, got {args.rounds}")
    require("sklearn", "fairsched simulate fedipw (its propensity models)")

    def progress(done: int, total: int, seconds: float) -> None:
        print(f"fedipw {args.bias}: seed {done}/{total} done ({seconds:.1f} s)", file=sys.stderr, flush=True)

    result = run_experiment(args.bias, args.seeds, args.rounds, progress=None if args.quiet else progress)
    summary = result.summary()
    data = {"bias": args.bias, "seeds": args.seeds, "rounds": args.rounds, "excess_loss": summary}
    lines = [f"FedIPW, bias {args.bias}: {args.seeds} seeds, {args.rounds} rounds, {result.seconds:.1f} s",
             f"{'rule':<18}  final excess loss F(θ_R) − F*  (mean ± se over seeds)"]
    for rule in RULES:
        s = summary[rule]
        se = "n/a" if s["se"] is None else f"{s['se']:.5f}"
        lines.append(f"{rule:<18}  {s['mean']:.5f} ± {se}")
    output.emit(data, "\n".join(lines))
    return EXIT_OK
