"""Benchmark: the pricing heuristic's calls with the tie-robust choice of best swaps, against
``np.argpartition``, in the same process.

    python benchmarks/bench_climb.py [--calls N] [--repeats R] [CASE ...]

For each case of ``bench_pricing.py`` (default: facility location, coverage and its untuned
families, the mixture, concave ``sqrt``), the heuristic of the exact pricing oracle
(:class:`fairsched.lp.pricing.greedy.GreedyPricing`: greedy, then best-improvement 1-swap
climbs from the greedy set and from remembered sets) is called at ``N`` prices near the
continuous relaxation's duals (the duals times one random factor, so that equal prices, as
the floor groups' are, stay equal), each call from the same remembered sets (one call at those
duals fills them).  Each climb ends by picking its ``max_columns`` best swaps as extra
columns: :func:`fairsched.solvers.selection.largest` (the package's), or
``np.argpartition`` (the code before), which is several times slower where most swap values
tie.  The two alternate ``R`` times; printed: milliseconds per call (median over repeats) and
their ratio, and whether both found sets of the same best value at every price (they may
return different tied swaps, never a different best set: the climbs themselves are the same).

First, the choice alone: the swap values ``f(S − u + v) − f(S) − λ_u + λ_v`` of the greedy
set of facility location (``n = 400``, ``k = 40``) at the relaxation's duals, where the
fillers' swaps among themselves are all exactly 0, timed for both (microseconds, median of
200), with how many values tie at the largest.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

import fairsched.lp.pricing.greedy as greedy  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402
from fairsched.solvers.selection import largest  # noqa: E402

CASES = ("facility-location", "coverage", "coverage-geometric", "coverage-powerlaw", "mixture", "concave-sqrt")


def argpartition_largest(values: np.ndarray, count: int) -> np.ndarray:
    """The choice before: ``np.argpartition`` of the negated values."""
    count = min(count, values.size)
    return np.argpartition(-values, count - 1)[:count]


def timed_calls(primed, prices: list[np.ndarray], choose) -> tuple[float, list[float]]:
    """Seconds per call and the best ``f + λ`` of each, every call from ``primed``'s state."""
    greedy.largest = choose
    seconds, best = 0.0, []
    try:
        for lam in prices:
            heuristic = copy.deepcopy(primed)
            began = time.perf_counter()
            result = heuristic.price(lam)
            seconds += time.perf_counter() - began
            best.append(float(result.values[0] + np.asarray(result.columns[0]) @ lam))
    finally:
        greedy.largest = largest
    return seconds / len(prices), best


def choice_alone(seed: int = 0, count: int = 10) -> dict:
    """Microseconds to pick the ``count`` best of one climb's swap values (docstring)."""
    problem = bench_pricing.problem("facility-location", seed)
    oracle = pricing_oracle(problem, bench_pricing.GAP)
    duals = oracle.relaxation_duals(np.asarray(problem.r, dtype=float))
    mask = np.asarray(oracle.heuristic.price(duals).columns[0], dtype=bool)
    swaps = oracle.heuristic.priced_swap_gains(mask, duals).ravel()

    def microseconds(choose) -> float:
        times = []
        for _ in range(200):
            began = time.perf_counter()
            choose(swaps, count)
            times.append(time.perf_counter() - began)
        return 1e6 * statistics.median(times)

    return {"size": swaps.size, "tied": int((swaps == swaps.max()).sum()),
            "largest_us": microseconds(largest), "argpartition_us": microseconds(argpartition_largest)}


def run(case: str, calls: int, repeats: int, seed: int = 0) -> dict:
    problem = bench_pricing.problem(case, seed)
    oracle = pricing_oracle(problem, bench_pricing.GAP)
    r = np.asarray(problem.r, dtype=float)
    duals = oracle.relaxation_duals(r) if hasattr(oracle, "relaxation_duals") else np.zeros(problem.n)
    heuristic = oracle.heuristic
    heuristic.price(duals)
    rng = np.random.default_rng(seed)
    # one factor per call, so that equal prices stay equal (as the floor groups' are)
    prices = [duals * (1.0 + 0.05 * rng.standard_normal()) for _ in range(calls)]
    new, old, same = [], [], True
    for _ in range(repeats):
        seconds_new, best_new = timed_calls(heuristic, prices, largest)
        seconds_old, best_old = timed_calls(heuristic, prices, argpartition_largest)
        new.append(seconds_new)
        old.append(seconds_old)
        same = same and np.allclose(best_new, best_old, rtol=1e-12, atol=1e-12)
    row = {"case": case, "n": problem.n, "k": problem.k, "new_ms": 1e3 * statistics.median(new),
           "old_ms": 1e3 * statistics.median(old), "same_best": same}
    row["ratio"] = row["old_ms"] / row["new_ms"]
    return row


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("cases", nargs="*", default=list(CASES))
    args = parser.parse_args()
    alone = choice_alone()
    print(f"one climb's swap values (facility location, {alone['size']} values, {alone['tied']} tied at the "
          f"largest): largest {alone['largest_us']:.0f} us, argpartition {alone['argpartition_us']:.0f} us", flush=True)
    for case in args.cases:
        row = run(case, args.calls, args.repeats)
        print(f"{row['case']:22s} n={row['n']:5d} k={row['k']:3d}  largest {row['new_ms']:8.1f} ms/call  "
              f"argpartition {row['old_ms']:8.1f} ms/call  ratio {row['ratio']:.2f}  "
              f"same best values: {row['same_best']}", flush=True)
