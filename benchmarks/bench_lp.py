"""Benchmarks: enumerate all k-subsets, evaluate a concave utility, solve the LP with HiGHS.

Run with ``python -m pytest benchmarks/bench_lp.py --benchmark-only``; the file name keeps it
out of default collection, the test_ function names let pytest collect it when named.
The utility is f(S) = 0.95 - 0.5 * (sum_{u in S} size_u) ** -0.2 and the floors are a
0.6 * k / n for three workers in four and 0 for the rest (feasible).
"""

from __future__ import annotations

import numpy as np
import pytest
from fairsched.solvers import k_subset_masks, solve_distribution_lp


def build_and_solve(n: int, k: int):
    sizes = np.linspace(1.0, 3.0, n)
    masks = k_subset_masks(n, k)
    values = 0.95 - 0.5 * (masks @ sizes) ** -0.2
    r = np.full(n, 0.6 * k / n)
    r[::4] = 0.0
    return solve_distribution_lp(values, masks, r)


@pytest.mark.parametrize("n,k", [(16, 8), (20, 10)])
def test_build_and_solve(benchmark, n: int, k: int) -> None:
    result = benchmark.pedantic(build_and_solve, args=(n, k), rounds=5, iterations=1, warmup_rounds=1)
    assert result.status == "optimal"
    assert abs(result.dual_bound - result.value) < 1e-7


@pytest.mark.parametrize("n,k", [(16, 8), (22, 11)])
def test_k_subset_masks(benchmark, n: int, k: int) -> None:
    masks = benchmark(k_subset_masks, n, k)
    assert masks.shape[1] == n

