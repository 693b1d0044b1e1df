"""Benchmark: the concave pricing MILP with and without its submodular cuts, in one process.

    python benchmarks/bench_concave_cuts.py [--backend auto|highs|scip] [CASE[:SEED] ...]

For each case of ``bench_pricing.py`` (default: ``concave-sqrt-sparse``,
``concave-log1p-sparse``, ``concave-sqrt``, ``concave-log1p``, seed 0) it prices the
continuous relaxation's duals (what column generation prices first; taken with tangents
only, so that both calls price the same λ) exactly on a fresh
:class:`~fairsched.lp.pricing.ConcavePricing` twice, with the submodular cuts of
:mod:`fairsched.lp.pricing.concave` switched off through ``SUBMODULAR_CUTS`` (tangents only,
the baseline) and on, and prints for each: the root LP bound after the cut rounds, its gap to the maximum found, the
seconds and branch-and-bound nodes of the exact call, the maximum and the certified bound.
Both calls must find the same maximum (to the MIP gap); the ratio of the seconds is the figure.
The exact call is made by the backend given (default ``auto``: SCIP where the ``scip`` extra
is installed, which takes the cuts through its separator, else HiGHS's cut loop); the root
LP bound is HiGHS's either way.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

from fairsched.lp.pricing import pricing_for  # noqa: E402
import fairsched.lp.pricing.concave as concave  # noqa: E402

DEFAULT_CASES = ["concave-sqrt-sparse", "concave-log1p-sparse", "concave-sqrt", "concave-log1p"]
#: the MIP gap column generation asks of the pricing at the benchmarks' gap of 1e-4
REL_GAP = 1e-5


@contextlib.contextmanager
def submodular_cuts(on: bool) -> Iterator[None]:
    """Inside the block the concave terms add their submodular cuts only if ``on``."""
    saved, concave.SUBMODULAR_CUTS = concave.SUBMODULAR_CUTS, on
    try:
        yield
    finally:
        concave.SUBMODULAR_CUTS = saved


def relaxation_duals(case: str, seed: int) -> np.ndarray:
    """The continuous relaxation's duals with tangents only (the same λ for both calls: the
    cuts tighten the relaxation too, which would move it)."""
    problem = bench_pricing.problem(case, seed)
    with submodular_cuts(False):
        oracle = pricing_for(problem.utility, problem.k, "auto", max_columns=50)
        return oracle.relaxation_duals(np.asarray(problem.r, dtype=float))


def price_once(case: str, seed: int, lam: np.ndarray, submodular: bool) -> dict[str, Any]:
    """The exact call at ``lam`` on a fresh oracle, cuts on or off."""
    with submodular_cuts(submodular):
        problem = bench_pricing.problem(case, seed)
        oracle = pricing_for(problem.utility, problem.k, "auto", max_columns=50)
        oracle.set_rel_gap(REL_GAP)
        root = oracle.relaxation_bound(lam)
        started = time.perf_counter()
        result = oracle(lam)
        seconds = time.perf_counter() - started
    best = float(result.values[0] + result.columns[0] @ lam)
    return {"root": root, "root_gap": (root - best) / abs(best), "seconds": seconds,
            "nodes": oracle.stats["nodes"], "best": best, "bound": float(result.upper_bound),
            "exact": bool(result.exact)}


def compare(case: str, seed: int = 0) -> dict[str, Any]:
    lam = relaxation_duals(case, seed)
    off, on = price_once(case, seed, lam, False), price_once(case, seed, lam, True)
    if abs(off["best"] - on["best"]) > 2 * REL_GAP * max(1.0, abs(off["best"])):
        raise AssertionError(f"{case}: the two calls disagree on the maximum: {off['best']} and {on['best']}")
    for name, row in (("tangents", off), ("submodular", on)):
        print(f"{case}:{seed} {name:10s} root gap {row['root_gap']:.3e}  exact call {row['seconds']:6.1f} s "
              f"{row['nodes']:6d} nodes  max {row['best']:.6f}  bound {row['bound']:.6f}  exact {row['exact']}",
              flush=True)
    print(f"{case}:{seed} time ratio (tangents / submodular) {off['seconds'] / on['seconds']:.2f}", flush=True)
    return {"case": case, "seed": seed, "off": off, "on": on}


def test_concave_cuts(benchmark) -> None:
    row = benchmark.pedantic(compare, args=("concave-sqrt-sparse",), rounds=1, iterations=1)
    assert row["on"]["root"] <= row["off"]["root"] + 1e-9 * abs(row["off"]["root"])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", metavar="CASE[:SEED]", help=f"default: {' '.join(DEFAULT_CASES)}")
    parser.add_argument("--backend", choices=concave.ConcavePricing.BACKENDS, default="auto",
                        help="who makes the exact call (default auto: SCIP where installed)")
    args = parser.parse_args()
    concave.BACKEND = args.backend
    for spec in args.cases or DEFAULT_CASES:
        name, _, seed = spec.partition(":")
        compare(name, int(seed or 0))
