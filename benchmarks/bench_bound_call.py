"""Benchmark: the exact pricing call for the bound at a run's late duals, run to its end.

    python benchmarks/bench_bound_call.py [--seed S] [--seconds T] [--rounds R] CASE ...

For each case of ``bench_pricing.py``, column generation runs for ``T`` seconds (default 120,
the goal's budget) with the package's defaults, and keeps the duals ``λ`` and the master's
value ``LB`` of its last exact pricing call made for the bound. At those duals, in the same
process:

- **the search**: the pricing heuristic's iterated local search
  (:meth:`fairsched.lp.pricing.greedy.GreedyPricing.perturbed`, ``R`` rounds, default 3,000)
  from the heuristic's best set; the Lagrangian value ``f(S) + λ(S) − λ·r`` of the best set
  it finds, a lower bound on ``L(λ) = max_{|S|=k}[f(S) + λ(S)] − λ·r``;
- **the exact call**: a fresh exact pricing oracle, as ``fairsched.optimum`` builds it, asked
  for the bound that certifies the gap (``enough``) and given no deadline; its seconds,
  branch-and-bound nodes and certified ``L(λ)``.

Printed per case: both, and the gap ``(L(λ) − LB)/LB`` each stands for. Where the search
reaches the exact call's ``L(λ)`` in seconds, the call's time is all proof; where ``L(λ)`` is
above ``LB·(1 + 1e-4)``, even a finished call at those duals cannot certify the goal's gap:
the master lacks columns (their reduced cost is ``L(λ) − LB``), not only the bound.
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

from fairsched.lp.pricing.greedy import GreedyPricing  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402
from fairsched.solvers.colgen import certifying_pricing_bound  # noqa: E402


def best_searched(problem: Any, lam: np.ndarray, rounds: int) -> tuple[float, float]:
    """``max f(S) + λ(S)`` over the sets the pricing heuristic and its iterated local search
    reach in ``rounds`` rounds, and the seconds it took. The heuristic is the exact oracle's
    own (with its utility's swap values), on an oracle of its own."""
    heuristic: GreedyPricing = pricing_oracle(problem, bench_pricing.GAP).heuristic
    started = time.perf_counter()
    warm = heuristic.price(lam)  # its columns ranked by f + λ, best first
    best = float(warm.values[0] + warm.columns[0] @ lam)
    found = heuristic.perturbed(lam, warm.columns[0], rounds=rounds)  # the sets that improved, best last
    if found:
        best = max(best, float(problem.utility.values(found[-1][None, :])[0] + found[-1] @ lam))
    return best, time.perf_counter() - started


def run(case: str, seed: int = 0, seconds: float = bench_pricing.TIME_LIMIT, rounds: int = 3000) -> dict[str, Any]:
    opt, lam, lower, at = bench_pricing.last_bound_call(case, seconds, seed)
    problem = bench_pricing.problem(case, seed)
    r = np.asarray(problem.r, dtype=float)
    offset = float(lam @ r)
    print(f"{case} seed {seed}: run of {seconds:.0f} s ended at gap {opt.gap:.3e}; its last call for the bound "
          f"began at {at:.1f} s, master value LB {lower:.6f}", flush=True)
    searched, search_seconds = best_searched(problem, lam, rounds)
    print(f"  search ({rounds} rounds): L(λ) >= {searched - offset:.6f} (gap {(searched - offset - lower) / abs(lower):.3e}) "
          f"in {search_seconds:.1f} s", flush=True)
    pricing = pricing_oracle(problem, bench_pricing.GAP)
    enough = certifying_pricing_bound(lower, bench_pricing.GAP, lam, r)
    started = time.perf_counter()
    result = pricing(lam, enough=enough)
    call_seconds = time.perf_counter() - started
    upper = float(result.upper_bound) - offset
    gap = (upper - lower) / abs(lower)
    nodes = pricing.stats.get("nodes", 0)
    verdict = "certifies" if gap <= bench_pricing.GAP else "does not certify"
    print(f"  exact call: L(λ) <= {upper:.6f} (gap {gap:.3e}, {verdict} 1e-4), exact {bool(result.exact)}, "
          f"{call_seconds:.1f} s, {nodes} nodes", flush=True)
    return {"case": case, "seed": seed, "lower": lower, "searched": searched - offset, "search_seconds": search_seconds,
            "upper": upper, "gap": gap, "exact": bool(result.exact), "seconds": call_seconds, "nodes": nodes}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="+", metavar="CASE", choices=sorted(bench_pricing.CASES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=bench_pricing.TIME_LIMIT,
                        help="how long column generation runs before the call is replayed (default 120)")
    parser.add_argument("--rounds", type=int, default=3000, help="rounds of the iterated local search (default 3,000)")
    args = parser.parse_args(argv)
    for case in args.cases:
        run(case, args.seed, args.seconds, args.rounds)


if __name__ == "__main__":
    main()
