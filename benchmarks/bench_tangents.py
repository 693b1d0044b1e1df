"""Benchmark: the exact concave pricing call at near-converged duals, by initial tangents per term.

    python benchmarks/bench_tangents.py [CASE] [SECONDS] [TANGENTS ...]

Column generation on a case of ``bench_pricing.py`` (default ``concave-sqrt``) runs for
``SECONDS`` (default 60) with the defaults and keeps the duals ``λ`` and the master's value
``LB`` at its last exact call made for the bound. At those duals, in the same process, a
fresh pricing MILP with ``TANGENTS`` initial tangents per concave term (default 24, the
package's :data:`fairsched.lp.pricing.concave.INITIAL_TANGENTS`, 100 and 400) is solved to
the relative MIP gap ``fairsched.optimum`` asks of it (``1e-5``). Printed per count: seconds,
MILP rounds of the cut loop (each a full branch and bound after adding the tangents at the
incumbents the model over-estimated), the certified Lagrangian bound ``UB`` and whether
``(UB − LB)/LB <= 1e-4``.

Why: near the optimum of the master the exact call for the bound is what a 120 s run of
``bench_pricing.py`` cannot finish (``benchmarks/README.md``, "What limits the concave
cases"); its cost is the number of cut-loop rounds times one branch and bound.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

import fairsched.lp.pricing.concave as concave  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402


def run(case: str = "concave-sqrt", seconds: float = 60.0, counts: tuple[int, ...] = (24, 100, 400)) -> list[dict]:
    problem = bench_pricing.problem(case)
    _, lam, lower, at = bench_pricing.last_bound_call(case, seconds)
    offset = float(lam @ problem.r)
    print(f"{case}: duals of the exact call at {at:.1f} s, master value {lower:.6f}", flush=True)
    rows = []
    default = concave.INITIAL_TANGENTS
    try:
        for count in counts:
            concave.INITIAL_TANGENTS = count
            pricing = pricing_oracle(problem, bench_pricing.GAP)  # as fairsched.optimum builds it
            started = time.perf_counter()
            result = pricing(lam)
            seconds_taken = time.perf_counter() - started
            upper = float(result.upper_bound) - offset
            row = {"tangents": count, "seconds": seconds_taken, "rounds": pricing.stats["rounds"],
                   "upper": upper, "gap": (upper - lower) / abs(lower), "exact": bool(result.exact)}
            verdict = "certifies" if row["gap"] <= bench_pricing.GAP else "does not certify"
            print(f"  tangents {count:4d}: {seconds_taken:6.1f} s, {row['rounds']:2d} MILP rounds, "
                  f"UB {upper:.6f}, gap {row['gap']:.2e} ({verdict} 1e-4)", flush=True)
            rows.append(row)
    finally:
        concave.INITIAL_TANGENTS = default
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    case = args[0] if args else "concave-sqrt"
    seconds = float(args[1]) if len(args) > 1 else 60.0
    counts = tuple(int(a) for a in args[2:]) or (24, 100, 400)
    run(case, seconds, counts)
