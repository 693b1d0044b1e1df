"""Benchmark: the schedule search on coverage with and without sweeps of swaps between rounds.

    python benchmarks/bench_round_swaps.py [CASE ...] [--seed S] [--seconds S ...]

For each coverage case of ``bench_pricing.py`` and each budget, column generation's schedule
search (:func:`~fairsched.lp.pricing.schedule_search.schedule_search`, with the relaxation's
``x*`` for the wished schedule, as column generation calls it) runs twice in the same
process with the same deadline: as the package runs it (the sweeps of
:mod:`~fairsched.lp.pricing.round_swaps` first, then the round-by-round swaps), and with the
sweeps turned off (the search before session 49).  Printed: the schedule's value (the
uniform distribution over its rounds, a lower bound on ``U_opt``), the seconds taken (the
first schedules are built inside the budget), and the ratio of the values' gains over the
best first schedule.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

from fairsched.lp.pricing import schedule_search as search_module  # noqa: E402
from fairsched.lp.pricing.initial import priority_order  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402

CASES = ("coverage-geometric", "coverage-powerlaw", "coverage-uniform", "coverage")


def searched(case: str, seed: int, seconds: float, with_sweeps: bool) -> tuple[float, float, float]:
    """(the first schedule's value, the searched schedule's value, seconds)."""
    problem = bench_pricing.problem(case, seed)
    utility, k, r = problem.utility, problem.k, np.asarray(problem.r, dtype=float)
    oracle = pricing_oracle(problem, 1e-4, "auto", None)
    _, marginals = oracle.relaxation_solution(r)
    heuristic = oracle.heuristic
    priority = priority_order(utility, k)
    original = search_module.round_swaps_for
    search_module.round_swaps_for = lambda *args: None
    try:
        first = search_module.schedule_search(utility, k, r, heuristic.swap_gains, max_passes=0, priority=priority,
                                              marginals=marginals, seed=seed)
        if with_sweeps:
            search_module.round_swaps_for = original
        started = time.perf_counter()
        pool = search_module.schedule_search(utility, k, r, heuristic.swap_gains, deadline=started + seconds,
                                             priority=priority, marginals=marginals, seed=seed)
        elapsed = time.perf_counter() - started
    finally:
        search_module.round_swaps_for = original
    return first.value(), pool.value(), elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", default=list(CASES), metavar="CASE")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, nargs="+", default=[12.0, 48.0],
                        help="budgets (default: 0.1 and 0.4 of the 120 s goal)")
    args = parser.parse_args()
    print(f"{'case':20s} {'budget':>7s} {'first':>11s} {'without sweeps':>15s} {'s':>6s} "
          f"{'with sweeps':>12s} {'s':>6s} {'gain ratio':>10s}", flush=True)
    for case in args.cases:
        for seconds in args.seconds:
            first, without, without_seconds = searched(case, args.seed, seconds, with_sweeps=False)
            _, with_, with_seconds = searched(case, args.seed, seconds, with_sweeps=True)
            ratio = (with_ - first) / (without - first) if without > first else float("nan")
            print(f"{case:20s} {seconds:7.1f} {first:11.4f} {without:15.4f} {without_seconds:6.1f} "
                  f"{with_:12.4f} {with_seconds:6.1f} {ratio:10.2f}", flush=True)


if __name__ == "__main__":
    main()
