"""Benchmark: column generation's master LP solved by the simplex, HiGHS's interior point and Clarabel.

    python benchmarks/bench_master_solvers.py [CASE] [--seed S] [--time-limit T] [--solves N]

Runs ``fairsched.optimum`` on a case of ``bench_pricing.py`` (default ``coverage-geometric``)
for ``T`` seconds and keeps the master LP, with its basis, as each of its first ``N`` solves
found it.  Then, in the same process, each kept LP is solved on fresh HiGHS objects by the
primal simplex from the slack basis, by the primal simplex from the kept basis (the warm
start the master uses), by HiGHS's interior point (IPX) with crossover, and by Clarabel
(:mod:`fairsched.solvers.interior`); printed: seconds, iterations and objective of each, and
each one's time as a ratio to the warm-started simplex.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import highspy

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

import fairsched  # noqa: E402
from fairsched.solvers import colgen  # noqa: E402
from fairsched.solvers.interior import solve_interior  # noqa: E402
from fairsched.solvers.lp import new_highs  # noqa: E402

VARIANT_SECONDS = 120.0


def kept_masters(case: str, seed: int, time_limit: float, solves: int) -> list[tuple[highspy.HighsLp, highspy.HighsBasis]]:
    """The master's LP and basis before each of its first ``solves`` solves in a run of ``case``."""
    kept = []
    original = colgen._Master.solve

    def solve(self, limit):
        if len(kept) < solves:
            kept.append((self.h.getLp(), self.h.getBasis()))
        return original(self, limit)

    colgen._Master.solve = solve
    try:
        fairsched.optimum(bench_pricing.problem(case, seed), gap=bench_pricing.GAP, time_limit=time_limit)
    finally:
        colgen._Master.solve = original
    return kept


def timed(lp: highspy.HighsLp, basis: highspy.HighsBasis | None, variant: str) -> tuple[float, int, float]:
    """(seconds, iterations, objective) of one variant on a fresh HiGHS object."""
    h = new_highs()
    h.passModel(lp)
    h.setOptionValue("time_limit", VARIANT_SECONDS)
    if variant == "clarabel":
        started = time.perf_counter()
        solution = solve_interior(h, VARIANT_SECONDS)
        seconds = time.perf_counter() - started
        objective = float(lp.col_cost_ @ solution.col_value) if solution is not None else float("nan")
        return seconds, solution.iterations if solution is not None else -1, objective
    h.setOptionValue("presolve", "off")
    if variant == "ipx":
        h.setOptionValue("solver", "ipm")
        h.setOptionValue("run_crossover", "on")
    else:
        h.setOptionValue("solver", "simplex")
        h.setOptionValue("simplex_strategy", 4)
        if variant == "warm simplex" and basis.valid:
            h.setBasis(basis)
    started = time.perf_counter()
    h.run()
    seconds = time.perf_counter() - started
    info = h.getInfo()
    iterations = info.ipm_iteration_count if variant == "ipx" else info.simplex_iteration_count
    return seconds, iterations, info.objective_function_value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", nargs="?", default="coverage-geometric", choices=list(bench_pricing.CASES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=90.0, metavar="T")
    parser.add_argument("--solves", type=int, default=3, metavar="N")
    args = parser.parse_args()
    kept = kept_masters(args.case, args.seed, args.time_limit, args.solves)
    print(f"{args.case} seed {args.seed}: {len(kept)} master LPs kept")
    for number, (lp, basis) in enumerate(kept, 1):
        print(f"solve {number}: {lp.num_row_} rows, {lp.num_col_} columns, {len(lp.a_matrix_.value_)} nonzeros, "
              f"{'a' if basis.valid else 'no'} basis")
        results = {variant: timed(lp, basis, variant)
                   for variant in ("warm simplex", "cold simplex", "ipx", "clarabel")}
        reference = results["warm simplex"][0]
        for variant, (seconds, iterations, objective) in results.items():
            print(f"  {variant:13s} {seconds:7.2f} s  {iterations:6d} iterations  objective {objective:.10f}  "
                  f"time / warm simplex {seconds / reference:6.2f}", flush=True)


if __name__ == "__main__":
    main()
