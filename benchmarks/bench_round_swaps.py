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

    python benchmarks/bench_round_swaps.py --values-against REV [CASE ...] [--seed S]

times the sweeps' swap values (:meth:`~fairsched.lp.pricing.round_swaps.CoverageSwaps.swap_values`,
every pair of one sweep over a schedule of 3,200 random rounds) against the same method at git
revision ``REV`` of this repository, in the same process on the same pairs, alternating, and
prints the median seconds of each, their ratio and the largest difference of the values.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402
from bench_swap_deltas import module_at  # noqa: E402

from fairsched.lp.pricing import round_swaps  # noqa: E402
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


def values_against(case: str, seed: int, revision: str, rounds: int = 3_200, repeat: int = 7) -> None:
    """Print the swap values' median seconds per sweep, here and at ``revision`` (module docstring)."""
    problem = bench_pricing.problem(case, seed)
    utility, k = problem.utility, problem.k
    rng = np.random.default_rng(seed)
    masks = np.zeros((rounds, utility.n), dtype=bool)
    for row in masks:
        row[rng.choice(utility.n, k, replace=False)] = True
    order = rng.permutation(rounds)
    a, b = order[: rounds // 2], order[rounds // 2: 2 * (rounds // 2)]
    old_module = module_at("fairsched/lp/pricing/round_swaps.py", revision)
    states = {"here": round_swaps.CoverageSwaps(utility, masks.copy(), k),
              revision: old_module.CoverageSwaps(utility, masks.copy(), k)}
    # the blocks sweep() would use here, the same for both
    per_block = max(1, min(round_swaps.BLOCK_WORK // (k * k),
                           round_swaps.BLOCK_WORK // (2 * k * int(states["here"].degree.mean() + 1))))
    blocks = [(a[i:i + per_block], b[i:i + per_block]) for i in range(0, a.size, per_block)]
    values = {name: [state.swap_values(x, y) for x, y in blocks] for name, state in states.items()}
    finite = [np.isfinite(v) for v in values["here"]]
    same_pattern = all(np.array_equal(f, np.isfinite(v)) for f, v in zip(finite, values[revision]))
    difference = max(float(np.abs(h[f] - o[f]).max(initial=0.0))
                     for h, o, f in zip(values["here"], values[revision], finite))
    seconds: dict[str, list[float]] = {name: [] for name in states}
    for _ in range(repeat):
        for name, state in states.items():
            started = time.perf_counter()
            for x, y in blocks:
                state.swap_values(x, y)
            seconds[name].append(time.perf_counter() - started)
    here, there = float(np.median(seconds["here"])), float(np.median(seconds[revision]))
    print(f"{case:20s} degree {states['here'].degree.mean():6.1f}  here {here:.3f} s  {revision} {there:.3f} s  "
          f"ratio {there / here:.2f}  same -inf {same_pattern}  largest difference {difference:.1e}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", nargs="*", default=list(CASES), metavar="CASE")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, nargs="+", default=[12.0, 48.0],
                        help="budgets (default: 0.1 and 0.4 of the 120 s goal)")
    parser.add_argument("--values-against", metavar="REV",
                        help="time the sweeps' swap values against git revision REV instead (module docstring)")
    args = parser.parse_args()
    if args.values_against:
        for case in args.cases:
            values_against(case, args.seed, args.values_against)
        return
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
