"""Benchmark: the first schedules of the schedule search, side by side.

    python benchmarks/bench_assigned_schedule.py [--seed S] [CASE ...]

For each case of ``bench_pricing.py`` (default: those whose start the schedule search
builds), the schedule of ``T`` rounds that meets the rounded-up floors is built twice, in the
same process: by McNaughton's wrap-around rule on the deficits, blind to ``f``
(:func:`~fairsched.lp.pricing.schedule_search.initial_schedule`, the only one before session
45), greedily on ``f`` (:func:`~fairsched.lp.pricing.schedule_search.assigned_schedule`),
and greedily with each worker also asking for the rounds the continuous relaxation of the
pricing gives it beyond its floor (:func:`~fairsched.lp.pricing.schedule_search.wished_schedule`,
session 48).  Printed per case: ``T``, the systematic sample's value
(:func:`~fairsched.lp.pricing.initial.initial_pool`), each schedule's value (its mean ``f``
over the rounds, a lower bound on ``U_opt``; ``nan`` where none is built) and seconds, and
the ratios of the assigned and the wished schedules to the blind one.  The search then
starts from the best.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

from fairsched.lp.pricing.initial import initial_pool, priority_order  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402
from fairsched.lp.pricing.schedule_search import (  # noqa: E402
    assigned_schedule,
    default_rounds,
    floor_counts,
    initial_schedule,
    wished_schedule,
)

CASES = ("coverage", "coverage-powerlaw", "coverage-geometric", "coverage-uniform",
         "facility-location-uniform", "facility-location-gaussian", "facility-location-lognormal",
         "concave-sqrt", "concave-log1p", "concave-sqrt-sparse", "concave-sqrt-quality",
         "concave-log1p-sparse", "concave-log1p-quality", "mixture", "mixture-untuned")


def compare(case: str, seed: int = 0) -> dict:
    """The schedules of ``case`` (seed ``seed``): their values and seconds."""
    problem = bench_pricing.problem(case, seed)
    utility, k, r = problem.utility, problem.k, np.asarray(problem.r, dtype=float)
    rounds = default_rounds(utility.n, k)
    counts = floor_counts(r, rounds)
    priority = priority_order(utility, k)
    started = time.perf_counter()
    blind = initial_schedule(utility, k, counts, rounds, np.random.default_rng([0, 29]), priority)
    blind_seconds = time.perf_counter() - started
    started = time.perf_counter()
    assigned = assigned_schedule(utility, k, counts, rounds, np.random.default_rng([0, 31]), priority)
    assigned_seconds = time.perf_counter() - started
    _, marginals = pricing_oracle(problem, bench_pricing.GAP).relaxation_solution(r)
    started = time.perf_counter()
    wished = None if marginals is None else wished_schedule(utility, k, counts, rounds, marginals,
                                                            np.random.default_rng([0, 37]), priority)
    wished_seconds = time.perf_counter() - started
    row = {"case": case, "seed": seed, "rounds": rounds, "sample": initial_pool(utility, k, r).value(),
           "blind": float(utility.values(blind).mean()), "blind_seconds": blind_seconds,
           "assigned": float("nan") if assigned is None else float(utility.values(assigned).mean()),
           "assigned_seconds": assigned_seconds,
           "wished": float("nan") if wished is None else float(utility.values(wished).mean()),
           "wished_seconds": wished_seconds}
    print(f"{case:27s} seed {seed}  T {rounds:5d}  sample {row['sample']:10.4f}  "
          f"blind {row['blind']:10.4f} ({blind_seconds:4.1f} s)  assigned {row['assigned']:10.4f} "
          f"({assigned_seconds:4.1f} s)  wished {row['wished']:10.4f} ({wished_seconds:4.1f} s)  "
          f"ratios {row['assigned'] / row['blind']:.4f} {row['wished'] / row['blind']:.4f}", flush=True)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"cases (default: {', '.join(CASES)})")
    parser.add_argument("--seed", type=int, default=0, metavar="S", help="the instances' seed (default 0)")
    args = parser.parse_args(argv)
    for case in args.cases or CASES:
        compare(case, args.seed)


if __name__ == "__main__":
    main()
