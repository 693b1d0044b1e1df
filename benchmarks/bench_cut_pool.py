"""Benchmark: one exact concave pricing call with the cuts of earlier calls all kept, trimmed, or none.

    python benchmarks/bench_cut_pool.py [CASE] [SECONDS]

Column generation on a concave case of ``bench_pricing.py`` (default ``concave-log1p``) runs
for ``SECONDS`` (default 60) with the defaults, except that its pricing keeps every cut
(:data:`fairsched.lp.pricing.milp.CUT_POOL_ROWS` unlimited), and records, for its last exact
pricing call, the arguments (``λ``, ``target``, ``enough``), when it began and the cut pool
(the tangents and when each was last used).  That call is then replayed in the same
process on fresh pricing models holding:

- ``all``: every cut the pool held (the pool with no limit, as before the pool was trimmed);
- ``limit``: the pool trimmed as the package does it (``CUT_POOL_ROWS`` rows, least
  recently used idle cuts dropped first);
- ``idle dropped``: the cuts used since the call before only (a limit of 0);
- ``none``: the built model only (24 tangents per term and the chords).

Printed per variant: seconds, MILP rounds of the cut loop, branch-and-bound nodes, rows at
the start and at the end of the call, and the certified pricing bound.  Each replay has the
time left to the 120 s limit of ``bench_pricing.py`` from when the call began, as in the run.
Why: see the module docstring of :mod:`fairsched.lp.pricing.milp`, "Cut pool".
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

import fairsched.lp.pricing.milp as milp  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402

UNLIMITED = 10**9


def last_call(case: str, seconds: float) -> dict:
    """Column generation with an unlimited pool; the last exact call and the pool before it."""

    def pool(oracle) -> dict:
        keys, last_used, epoch, noted = oracle.model.cut_pool()
        return {"keys": [(key[1], key[2]) for key in keys], "last_used": last_used, "epoch": epoch,
                "noted": noted}

    limit, milp.CUT_POOL_ROWS = milp.CUT_POOL_ROWS, UNLIMITED
    try:
        return bench_pricing.last_exact_call(case, seconds, snapshot=pool)
    finally:
        milp.CUT_POOL_ROWS = limit


def replay(case: str, call: dict, cuts: bool, limit: int) -> dict:
    """The recorded call on a fresh oracle holding the recorded pool (``cuts``) trimmed to ``limit``."""
    problem = bench_pricing.problem(case)
    oracle = pricing_oracle(problem, bench_pricing.GAP)  # as fairsched.optimum builds it
    model, term = oracle.model, oracle.terms[0][1]
    if cuts and call["keys"]:
        terms, at = (np.array(column) for column in zip(*call["keys"]))
        term._tangents(model, terms.astype(int), at.astype(float))
        model.restore_usage(call["last_used"], call["epoch"], call["noted"])
    before = milp.CUT_POOL_ROWS
    milp.CUT_POOL_ROWS = limit
    try:
        rows = model.num_row
        oracle.deadline = time.perf_counter() + bench_pricing.TIME_LIMIT - call["at"]
        started = time.perf_counter()
        result = oracle(call["lam"], **call["options"])
        seconds = time.perf_counter() - started
    finally:
        milp.CUT_POOL_ROWS = before
    return {"seconds": seconds, "rounds": oracle.stats["rounds"], "nodes": oracle.stats["nodes"],
            "rows": rows - oracle.stats["dropped"], "rows_end": model.num_row,
            "upper": float(result.upper_bound)}


def run(case: str = "concave-log1p", seconds: float = 60.0) -> list[dict]:
    call = last_call(case, seconds)
    print(f"{bench_pricing.call_header(case, call, seconds)}, pool {len(call['keys'])} cuts", flush=True)
    rows = []
    for name, cuts, limit in (("all", True, UNLIMITED), ("limit", True, milp.CUT_POOL_ROWS),
                              ("idle dropped", True, 0), ("none", False, UNLIMITED)):
        row = {"variant": name, **replay(case, call, cuts, limit)}
        print(f"  {name:12s} {row['seconds']:6.1f} s  {row['rounds']:2d} rounds  {row['nodes']:6d} nodes  "
              f"rows {row['rows']:6d} -> {row['rows_end']:6d}  bound {row['upper']:.6f}", flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    run(args[0] if args else "concave-log1p", float(args[1]) if len(args) > 1 else 60.0)
