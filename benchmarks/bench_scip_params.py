"""Benchmark: SCIP's concave pricing with the package's parameters against SCIP's defaults, in one process.

    python benchmarks/bench_scip_params.py [CASE[:SEED] ...]

For each case of ``bench_pricing.py`` (default: the concave cases of every family, seed 0) it
prices the continuous relaxation's duals (what column generation prices first) exactly on a
fresh :class:`~fairsched.lp.pricing.ConcavePricing` with the SCIP backend twice: with SCIP's
own defaults (``fairsched.lp.pricing.concave_scip.SCIP_PARAMS`` emptied for the call, the
baseline) and with the package's parameters, and prints the seconds, the branch-and-bound
nodes, the milliseconds per node, the maximum and the certified bound of each.  Both calls
must find the same maximum (to the MIP gap); the ratio of the seconds is the figure
(``benchmarks/README.md``, "No bound propagation of the concave rows in SCIP").  Needs the
``scip`` extra.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_concave_cuts  # noqa: E402

import fairsched.lp.pricing.concave as concave  # noqa: E402
import fairsched.lp.pricing.concave_scip as concave_scip  # noqa: E402

DEFAULT_CASES = ["concave-sqrt-quality", "concave-log1p-quality", "concave-sqrt-sparse", "concave-log1p-sparse",
                 "concave-sqrt", "concave-log1p"]


@contextlib.contextmanager
def scip_params(params: dict[str, object]) -> Iterator[None]:
    """Inside the block SCIP's concave pricing runs with ``params`` over SCIP's defaults."""
    saved, concave_scip.SCIP_PARAMS = concave_scip.SCIP_PARAMS, params
    try:
        yield
    finally:
        concave_scip.SCIP_PARAMS = saved


@contextlib.contextmanager
def scip_backend() -> Iterator[None]:
    """Inside the block the concave pricing is SCIP's (restored after: the pytest run of this
    benchmark shares its process with the others)."""
    saved, concave.BACKEND = concave.BACKEND, "scip"
    try:
        yield
    finally:
        concave.BACKEND = saved


def compare(case: str, seed: int = 0) -> dict[str, Any]:
    if not concave_scip.scip_installed():
        raise SystemExit("this benchmark needs the scip extra (pip install 'fairsched[scip]')")
    with scip_backend():
        lam = bench_concave_cuts.relaxation_duals(case, seed)
        with scip_params({}):
            defaults = bench_concave_cuts.price_once(case, seed, lam, True)
        package = bench_concave_cuts.price_once(case, seed, lam, True)
    if abs(defaults["best"] - package["best"]) > 2 * bench_concave_cuts.REL_GAP * max(1.0, abs(defaults["best"])):
        raise AssertionError(f"{case}: the two calls disagree on the maximum: {defaults['best']} and {package['best']}")
    for name, row in (("SCIP defaults", defaults), ("package", package)):
        print(f"{case}:{seed} {name:13s} exact call {row['seconds']:6.1f} s {row['nodes']:6d} nodes "
              f"{1e3 * row['seconds'] / max(1, row['nodes']):6.1f} ms/node  max {row['best']:.6f}  "
              f"bound {row['bound']:.6f}  exact {row['exact']}", flush=True)
    print(f"{case}:{seed} time ratio (SCIP defaults / package) {defaults['seconds'] / package['seconds']:.2f}",
          flush=True)
    return {"case": case, "seed": seed, "defaults": defaults, "package": package}


def test_scip_params(benchmark) -> None:
    row = benchmark.pedantic(compare, args=("concave-sqrt-sparse",), rounds=1, iterations=1)
    assert row["package"]["bound"] >= row["package"]["best"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cases", nargs="*", metavar="CASE[:SEED]", help=f"default: {' '.join(DEFAULT_CASES)}")
    args = parser.parse_args()
    for spec in args.cases or DEFAULT_CASES:
        name, _, seed = spec.partition(":")
        compare(name, int(seed or 0))
