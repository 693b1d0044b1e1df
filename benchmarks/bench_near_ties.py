"""Benchmark: the accuracy pricing at prices tied to round-off, with and without the look-ahead.

    python benchmarks/bench_near_ties.py [--k K] [--seeds S ...]

The draw: ``n = 1,000`` Pareto(1.2) sizes (``(pareto + 1)·20``, generator seed 1001), floors
pinned at ``k/n``, ``k = 100`` (one giant; the draw of ``tests/test_class_relaxation.py``).
The prices are the class relaxation's (:mod:`fairsched.lp.pricing.class_relaxation`): the
duals of about 900 workers inside its rest class are tied in theory and only to round-off in
HiGHS's answer. They are priced as they come and perturbed by relative noise uniform on
``±1e-15`` (one row per seed), each by :class:`~fairsched.lp.pricing.accuracy.AccuracyPricing`
with the look-ahead (both children of a split node bounded before either is explored, the
default) and without it (depth first, the search before session 39), in the same process.
Printed per row: CPU seconds, branch-and-bound nodes, whether the call is exact, and how far
its certified bound is above the best set found (relative).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from fairsched.lp.pricing.accuracy import AccuracyPricing
from fairsched.lp.pricing.balanced import level_classes
from fairsched.lp.pricing.class_relaxation import class_relaxation
from fairsched.lp.pricing.initial import starting_point
from fairsched.utilities import AccuracyUtility


def relaxation_prices(k: int) -> tuple[AccuracyUtility, np.ndarray]:
    rng = np.random.default_rng(1001)
    n = 1000
    utility = AccuracyUtility((rng.pareto(1.2, n) + 1.0) * 20.0)
    r = np.full(n, k / n)
    _, x, _ = starting_point(utility, k, r)
    classes = level_classes(utility.sizes, x, k)
    if classes is None:
        raise SystemExit(f"no giant at k = {k}: nothing to measure")
    starts = np.append(classes.fills @ utility.sizes, classes.level)
    relaxation = class_relaxation(utility, k, r, classes.giants, x[classes.giants], starts)
    if relaxation is None:
        raise SystemExit("the class relaxation was not solved")
    return utility, relaxation.prices


def price(utility: AccuracyUtility, k: int, lam: np.ndarray, look_ahead: bool) -> dict:
    pricing = AccuracyPricing(utility, k)
    pricing.look_ahead = look_ahead
    started = time.process_time()
    result = pricing.price(lam)
    seconds = time.process_time() - started
    best = float(result.values[0] + lam @ result.columns[0])
    return {"seconds": seconds, "nodes": pricing.stats["nodes"], "exact": bool(result.exact),
            "loose": (float(result.upper_bound) - best) / abs(best)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs="*", default=[0, 1, 2, 3])
    args = parser.parse_args()
    utility, prices = relaxation_prices(args.k)
    rows = [("as HiGHS gave them", prices)]
    for seed in args.seeds:
        noise = np.random.default_rng(seed).uniform(-1e-15, 1e-15, prices.size)
        rows.append((f"perturbed, seed {seed}", np.maximum(prices * (1 + noise), 0.0)))
    for label, lam in rows:
        for look_ahead in (True, False):
            row = price(utility, args.k, lam, look_ahead)
            print(f"{label:20s} look-ahead {'on ' if look_ahead else 'off'}: {row['seconds']:5.2f} s CPU, "
                  f"{row['nodes']:5d} nodes, exact {row['exact']!s:5s}, bound above the best {row['loose']:.2e}",
                  flush=True)


if __name__ == "__main__":
    main()
