"""Benchmark: one exact pricing call with and without the certifying bound as its cutoff.

    python benchmarks/bench_cutoff.py [CASE] [SECONDS] [BUDGET]

Column generation on a case of ``bench_pricing.py`` (default ``facility-location``, seed 0)
runs for ``SECONDS`` (default 120) with the defaults and records the arguments (``λ``,
``target``, ``enough``) of its last exact pricing call (on facility location with the
default 120 s, one that the limit cuts short; which call is last depends on the run's
timing).  The call is then replayed in the same
process on fresh pricing models (the pricing ``fairsched.optimum`` builds, with its MIP gap),
each given ``BUDGET`` seconds (default 400), in this order:

- ``cutoff``: the package as it is: ``enough`` is HiGHS's cutoff (its ``objective_bound``)
  and the interrupt of the branch and bound once the global dual bound reaches it;
- ``interrupt only``: HiGHS's ``objective_bound`` left unset, so ``enough`` only interrupts
  (the package before the cutoff).

Printed per variant: seconds, cut-loop rounds, branch-and-bound nodes, the best set's value,
the certified pricing bound, and which job the call did (a set worth its target, a bound at
or below ``enough``, or the maximum; the cutoff matters only while no set above ``enough``
is known).  Why: see the module docstring of
:mod:`fairsched.lp.pricing.milp`, on ``enough``.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

import fairsched.lp.pricing.milp as milp  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402


@contextlib.contextmanager
def without_cutoff() -> Iterator[None]:
    """Inside the block the pricing never sets HiGHS's ``objective_bound``."""
    original = milp.set_option

    def set_option(h, name, value):
        if name != "objective_bound":
            original(h, name, value)

    milp.set_option = set_option
    try:
        yield
    finally:
        milp.set_option = original


def replay(case: str, call: dict, budget: float, cutoff: bool) -> dict:
    """The recorded call on a fresh oracle, with ``budget`` seconds, with or without the cutoff."""
    problem = bench_pricing.problem(case)
    with contextlib.nullcontext() if cutoff else without_cutoff():
        oracle = pricing_oracle(problem, bench_pricing.GAP)  # as fairsched.optimum builds it
        oracle.deadline = time.perf_counter() + budget
        started = time.perf_counter()
        result = oracle(call["lam"], **call["options"])
        seconds = time.perf_counter() - started
    best = float(result.values[0] + result.columns[0] @ call["lam"])
    return {"seconds": seconds, "rounds": oracle.stats["rounds"], "nodes": oracle.stats["nodes"],
            "upper": float(result.upper_bound), "best": best, "exact": bool(result.exact)}


def outcome(row: dict, options: dict) -> str:
    """Which job the call did: a set worth its target, a bound at or below ``enough``, the
    maximum (exact), or none (its budget ran out)."""
    target, enough = options.get("target"), options.get("enough")
    if target is not None and row["best"] >= target:
        return "target reached"
    if enough is not None and row["upper"] <= enough:
        return "enough certified"
    return "maximum found" if row["exact"] else "none (budget)"


def run(case: str = "facility-location", seconds: float = 120.0, budget: float = 400.0) -> list[dict]:
    call = bench_pricing.last_exact_call(case, seconds)
    print(bench_pricing.call_header(case, call, seconds), flush=True)
    rows = []
    for name, cutoff in (("cutoff", True), ("interrupt only", False)):
        row = {"variant": name, **replay(case, call, budget, cutoff)}
        print(f"  {name:15s} {row['seconds']:6.1f} s  {row['rounds']:2d} rounds  {row['nodes']:6d} nodes  "
              f"best set {row['best']:.6f}  bound {row['upper']:.6f}  {outcome(row, call['options'])}", flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    run(args[0] if args else "facility-location", float(args[1]) if len(args) > 1 else 120.0,
        float(args[2]) if len(args) > 2 else 400.0)
