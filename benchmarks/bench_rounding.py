"""Randomized pipage rounding: batched draws against one draw at a time, in the same run.

    python -m pytest benchmarks/bench_rounding.py --benchmark-only -s
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from fairsched.submodular.rounding import pipage_round, pipage_round_batch


@pytest.mark.parametrize("n, draws", [(10, 100_000), (200, 10_000)])
def test_batched_against_single_draws(benchmark, n, draws):
    rng = np.random.default_rng(0)
    y = rng.uniform(size=n)
    y *= (n / 10) / y.sum()
    y = np.minimum(y, 1.0)
    masks = benchmark.pedantic(pipage_round_batch, args=(y, draws, 1), rounds=3, iterations=1)
    fast = benchmark.stats.stats.min
    single_rng = np.random.default_rng(1)
    start = time.perf_counter()
    for _ in range(draws):
        pipage_round(y, single_rng)
    slow = time.perf_counter() - start
    benchmark.extra_info.update(single_draw_seconds=slow, speedup=slow / fast)
    print(f"\npipage n={n}, {draws:,} draws: batched {fast * 1e3:.1f} ms, one at a time {slow:.2f} s, "
          f"speed-up {slow / fast:.1f}x")
    assert masks.shape == (draws, n)
