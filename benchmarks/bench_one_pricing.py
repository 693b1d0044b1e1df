"""Benchmark: one exact pricing call, ``max_{|S|=k} f(S) + λ(S)``, on a case of ``bench_pricing.py``.

    python benchmarks/bench_one_pricing.py CASE [--seed S] [--at zero|relaxation|run:SECONDS]
                                                [--time-limit T]

The duals ``λ``:

- ``zero``: ``λ = 0``, the unconstrained problem ``max_{|S|=k} f(S)`` (no floors), whose value
  bounds ``U_opt`` from above and which every certificate at small ``λ`` must solve;
- ``relaxation``: the duals of the continuous relaxation, the first exact call of
  ``fairsched.optimum``;
- ``run:SECONDS``: the duals of the last exact call made for the bound by a column generation
  run of ``SECONDS`` with the defaults (near the master's optimum, where the certificate
  comes from).

The call is the package's pricing oracle (``pricing_for(..., "auto")``, a fresh MILP at the
relative MIP gap ``fairsched.optimum`` asks of it, 1e-5) stopped at ``T`` seconds (default
600). Printed: seconds, the best set's ``f(S) + λ(S)``, the certified upper bound on the
maximum, their relative gap and whether the call is exact; with ``run:`` also the Lagrangian
bound on ``U_opt`` (upper bound minus ``λ·r``) and its gap against the run's value.

Why: where a 120 s run of ``bench_pricing.py`` stops far from 1e-4 with its bound at the
first call's, the question is whether any exact call at all can finish; this measures one
call with a budget far above the run's (``benchmarks/README.md``, "Plain random instances:
where exact pricing is out of reach").
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

from fairsched.lp.pricing import pricing_for  # noqa: E402
from fairsched.problem import Problem  # noqa: E402


def duals(problem: Problem, case: str, seed: int, at: str, oracle: Any) -> tuple[np.ndarray, float | None]:
    """``λ`` for ``--at`` on ``problem`` (``case`` of the generators' ``seed``; ``oracle`` its
    pricing, whose relaxation gives ``relaxation``) and, for ``run:SECONDS``, that run's value
    (else None)."""
    if at == "zero":
        return np.zeros(problem.n), None
    if at == "relaxation":
        return np.asarray(oracle.relaxation_duals(problem.r), dtype=float), None
    if at.startswith("run:"):
        seconds = float(at.split(":", 1)[1])
        result, lam, _, began = bench_pricing.last_bound_call(case, seconds, seed)
        print(f"{case}/seed{seed}: a {seconds:.0f} s run ended {result.status} at gap {result.gap:.3e} "
              f"(value {result.value:.6f}); its last exact call for the bound began at {began:.1f} s", flush=True)
        return lam, float(result.value)
    raise ValueError(f"--at must be zero, relaxation or run:SECONDS, not {at!r}")


def run(case: str, seed: int = 0, at: str = "zero", time_limit: float = 600.0) -> dict:
    problem = bench_pricing.problem(case, seed)
    pricing = pricing_for(problem.utility, problem.k, "auto", max_columns=50)
    lam, value = duals(problem, case, seed, at, pricing)
    pricing.set_rel_gap(bench_pricing.GAP / 10)  # what fairsched.optimum asks of it
    pricing.time_budget = time_limit
    started = time.perf_counter()
    result = pricing(lam)
    seconds = time.perf_counter() - started
    best = float(result.values[0] + lam @ result.columns[0]) if len(result.values) else -np.inf
    upper = float(result.upper_bound)
    row = {"case": case, "seed": seed, "at": at, "seconds": seconds, "best": best, "upper": upper,
           "gap": (upper - best) / max(abs(best), 1e-12), "exact": bool(result.exact)}
    print(f"{case}/seed{seed} at {at}: {seconds:.1f} s, best {best:.6f}, bound {upper:.6f}, "
          f"gap {row['gap']:.3e}, exact {row['exact']}", flush=True)
    if value is not None:
        row["lagrangian"] = upper - float(lam @ problem.r)
        row["run_gap"] = (row["lagrangian"] - value) / abs(value)
        print(f"  Lagrangian bound on U_opt {row['lagrangian']:.6f}, gap against the run's value "
              f"{row['run_gap']:.3e}", flush=True)
    return row


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="One exact pricing call on a case of bench_pricing.py")
    parser.add_argument("case", choices=list(bench_pricing.CASES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--at", default="zero", help="zero, relaxation or run:SECONDS (default zero)")
    parser.add_argument("--time-limit", type=float, default=600.0, metavar="T")
    args = parser.parse_args()
    run(args.case, args.seed, args.at, args.time_limit)
