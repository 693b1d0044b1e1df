"""The online learners on instances no constant was chosen on: freshly generated costly instances.

    python -m fairsched.experiments.online_untuned [--rounds 100000] [--seeds 3]

The linear-features learner's exploration factor was chosen on the bundled coverage and
facility-location instances (``docs/online.md``). This runs lp-sequenced with it on other
draws of the generators of :mod:`fairsched.instances.generators` (``n = 14``, ``k = 5``, a
different seed, coverage with 80 elements, facility location with 60 points, concave of
modular with the ``log1p`` form it was not run on) and prints the same columns as
:mod:`fairsched.experiments.online_regret`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from fairsched.experiments.online_regret import _mean_se
from fairsched.instances import problem_from_table
from fairsched.instances.generators import concave_modular_instance, coverage_instance, facility_location_instance
from fairsched.online.simulate import simulate_online


def instances() -> list[tuple[str, object]]:
    """The untuned instances: (label, problem)."""
    concave = concave_modular_instance(n=14, k=5, seed=7)
    concave["utility"]["concave"] = "log1p"
    return [("coverage n=14 k=5 80 elements seed 7", problem_from_table(coverage_instance(14, 5, 80, seed=7))),
            ("facility-location n=14 k=5 60 points seed 7",
             problem_from_table(facility_location_instance(14, 5, 60, seed=7))),
            ("concave-modular log1p n=14 k=5 seed 7", problem_from_table(concave))]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fairsched.experiments.online_untuned")
    parser.add_argument("--rounds", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--noise", type=float, default=0.05)
    args = parser.parse_args(argv)
    print(f"| instance | regret/round ÷ U_opt at T = 10⁴ | at T = {args.rounds:,} | slope (T ≥ 10³) | max debt |")
    print("|---|---|---|---|---|")
    for label, problem in instances():
        runs = [simulate_online(problem, "lp-sequenced", "linear-features", args.rounds, args.noise, seed)
                for seed in range(args.seeds)]
        at = [next((r for t, r in run["regret_curve"] if t == 10_000), None) for run in runs]
        early = [None if r is None else r / 10_000 / run["U_opt"] for r, run in zip(at, runs)]
        late = [run["regret_per_round"] / run["U_opt"] for run in runs]
        print(f"| {label} | {_mean_se(early)} | {_mean_se(late)} | {_mean_se([run['slope'] for run in runs])} | "
              f"{max(run['max_debt'] for run in runs):.3g} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
