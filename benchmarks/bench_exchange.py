"""Benchmark: column generation for the accuracy utility with and without exchange columns.

Run as a plain script (one line per instance; each solved twice in this process by
``fairsched.lp.solve.optimum`` with its default settings and the given time limit, with the
trades of :mod:`fairsched.lp.pricing.exchange` and with them turned off)::

    python benchmarks/bench_exchange.py                          # both families, seeds 0-3
    python benchmarks/bench_exchange.py --family pareto --seeds 0 1 2 3 4

Families:

- ``fit-one-at-a-time`` (``n = 300``, ``k = 20``, floors summing to ``k``): 294 workers of
  size uniform on ``[20, 60]`` and six of size ``500·U(0.6, 1)`` with half the floor weight.
  Built after the failure below to show its pattern: each large worker fits alone in a set
  of the common size ``L·x``, no two do, so the balanced start's sets holding one are too
  large and the master, degenerate with every floor pinned, creeps.
- ``pareto`` (``n = 1,000``, ``k = 50``): ``benchmarks/bench_balanced.py``'s draws with
  floors summing to ``k`` (``pareto-sparse``, ``-uniform``, ``-equal``), on which the
  failure was found (``pareto-uniform`` seed 0: "tailing-off" at 1.05e-4).

Each line gives ``fits`` (every worker with a positive marginal fits alone in a set of size
``L·x``, with the ``k − 1`` smallest), ``classes`` (whether the balanced start split the
marginals by giants, :func:`~fairsched.lp.pricing.balanced.level_classes`: the trades run
only without), and for both runs the status, certified relative gap, seconds and
iterations.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from fairsched.lp.pricing.balanced import level_classes
from fairsched.lp.pricing.initial import starting_point
from fairsched.problem import Problem
from fairsched.solvers.columns import Columns
from fairsched.utilities import AccuracyUtility

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_balanced import fits, instance, solve_with  # noqa: E402

FAMILIES = ("fit-one-at-a-time", "pareto")


def fit_one_at_a_time(seed: int) -> Problem:
    """The first family of the module docstring."""
    rng = np.random.default_rng(seed)
    n, k = 300, 20
    sizes = rng.uniform(20.0, 60.0, n)
    sizes[:6] = 500.0 * rng.uniform(0.6, 1.0, 6)
    r = rng.uniform(0.5, 1.0, n)
    r[:6] *= 0.5
    return Problem(AccuracyUtility(sizes), k, r * k / r.sum())


def instances(family: str, seeds: list[int]) -> list[tuple[str, Problem]]:
    if family == "fit-one-at-a-time":
        return [(f"{family} s{seed}", fit_one_at_a_time(seed)) for seed in seeds]
    return [(f"{case}-n1000-k50 s{seed}", instance(case, 1000, 50, seed))
            for seed in seeds for case in ("pareto-sparse", "pareto-uniform", "pareto-equal")]


def has_classes(problem: Problem) -> bool:
    _, x, _ = starting_point(problem.utility, problem.k, problem.r)
    return level_classes(problem.utility.sizes, x, problem.k) is not None


def solve(problem: Problem, trades: bool, time_limit: float) -> str:
    no_trades = {"exchange_columns": lambda sizes, columns, probabilities: Columns.empty(columns.n)}
    return solve_with(problem, time_limit, {} if trades else no_trades)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", choices=FAMILIES, nargs="+", default=list(FAMILIES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3])
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()
    for family in args.family:
        for name, problem in instances(family, args.seeds):
            print(f"{name} fits={fits(problem)} classes={has_classes(problem)}: with trades {solve(problem, True, args.time_limit)}; "
                  f"without {solve(problem, False, args.time_limit)}", flush=True)


if __name__ == "__main__":
    main()
