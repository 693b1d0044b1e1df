"""Benchmark: finding the best column near the LP optimum, by the pricing MILP and by the
iterated local search that now runs before it.

    python benchmarks/bench_perturbed.py [CASE] [SECONDS]

Column generation on a case of ``bench_pricing.py`` (default ``concave-sqrt``) runs for
``SECONDS`` (default 60) *without* the local search (as before it existed), keeping the
duals of its last exact call made for the bound. At those duals, in the same process:

- the pricing MILP alone (``perturbations=0``, no time limit): seconds and the best
  column's ``f(S) + λ(S) − λ·r``;
- the 1-swap heuristic (greedy, multi-start 1-swaps) and then
  :meth:`~fairsched.lp.pricing.greedy.GreedyPricing.perturbed` from its best set: seconds and
  the same value.

Printed with the master's value at the end of the run: a column is worth adding when its
value exceeds the master's.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

import fairsched.lp.pricing.greedy as greedy  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402


def run(case: str = "concave-sqrt", seconds: float = 60.0) -> dict[str, float]:
    problem = bench_pricing.problem(case)
    default = greedy.PERTURBATIONS
    greedy.PERTURBATIONS = 0
    try:
        opt, lam, _, _ = bench_pricing.last_bound_call(case, seconds)
    finally:
        greedy.PERTURBATIONS = default
    offset = float(lam @ problem.r)

    def best(result) -> float:
        return float(np.max(result.values + result.columns.astype(float) @ lam)) - offset

    exact = pricing_oracle(problem, bench_pricing.GAP)  # as fairsched.optimum builds it
    exact.perturbations = 0
    start = time.perf_counter()
    priced = exact(lam)
    exact_s = time.perf_counter() - start
    search = exact.heuristic
    start = time.perf_counter()
    warm = search(lam)
    heuristic_s = time.perf_counter() - start
    start_set = warm.columns[int(np.argmax(warm.values + warm.columns.astype(float) @ lam))]
    start = time.perf_counter()
    found = search.perturbed(lam, start_set, seed=0)
    perturbed_s = time.perf_counter() - start
    perturbed_value = (best(warm) if not found else
                       float(problem.utility.values(found[-1][None, :])[0] + found[-1] @ lam) - offset)
    row = {"master": opt.value, "milp_s": exact_s, "milp": best(priced), "milp_bound": priced.upper_bound - offset,
           "heuristic_s": heuristic_s, "heuristic": best(warm), "perturbed_s": perturbed_s,
           "perturbed": perturbed_value}
    print(f"{case}: master value after {seconds:g} s {row['master']:.6f}; at its last bound call's duals:\n"
          f"  pricing MILP      {row['milp']:.6f} in {exact_s:6.1f} s (bound {row['milp_bound']:.6f})\n"
          f"  1-swap heuristic  {row['heuristic']:.6f} in {heuristic_s:6.2f} s\n"
          f"  perturbed search  {row['perturbed']:.6f} in {perturbed_s:6.2f} s", flush=True)
    return row


if __name__ == "__main__":
    run(sys.argv[1] if len(sys.argv) > 1 else "concave-sqrt",
        float(sys.argv[2]) if len(sys.argv) > 2 else 60.0)
