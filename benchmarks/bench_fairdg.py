"""FairDG speed on the paper instance (Li, Liu and Ji 2021, Section VI) against a naive reference, in the same run.

    python -m pytest benchmarks/bench_fairdg.py --benchmark-only -s

The naive reference is Algorithm 3 written plainly: each round it recomputes the debts in
Python and completes ``A_t`` greedily with one oracle call ``f(S ∪ {u})`` per candidate
per step. fairsched's FairDG computes debts with numpy and caches the greedy completion
per distinct ``A_t``. Target: at least 10× faster for T = 10^5.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from fairsched.instances import load_instance
from fairsched.policies import FairDG
from fairsched.runtime.simulation import run

PAPER = Path(__file__).resolve().parent.parent / "instances" / "paper.toml"
ROUNDS = 100_000


def naive_fairdg(problem, rounds: int) -> list[tuple[int, ...]]:
    """Li, Liu and Ji (2021), Algorithm 3 with the deadline ranking, one oracle call per candidate per step."""
    n, k, r, f = problem.n, problem.k, problem.r, problem.utility.value
    counts = [0] * n
    schedule = []
    for t in range(1, rounds + 1):
        debt = [r[u] * t - counts[u] for u in range(n)]
        behind = [u for u in range(n) if r[u] > 0 and debt[u] >= -1e-9]
        if len(behind) >= k:
            behind.sort(key=lambda u: ((1 - debt[u]) / r[u], -debt[u], u))
            chosen = sorted(behind[:k])
        else:
            chosen = list(behind)
            while len(chosen) < k:
                base = f(chosen) if chosen else 0.0
                best, best_gain = -1, -np.inf
                for u in range(n):
                    if u not in chosen:
                        gain = f(chosen + [u]) - base
                        if gain > best_gain:
                            best, best_gain = u, gain
                chosen.append(best)
            chosen.sort()
        for u in chosen:
            counts[u] += 1
        schedule.append(tuple(chosen))
    return schedule


def test_fairdg_against_naive_reference(benchmark):
    problem = load_instance(PAPER)
    start = time.perf_counter()
    reference = naive_fairdg(problem, ROUNDS)
    naive_seconds = time.perf_counter() - start

    schedule = benchmark.pedantic(run, args=(problem, FairDG(), ROUNDS), rounds=3, iterations=1)
    fast_seconds = benchmark.stats.stats.min
    assert [tuple(S.tolist()) for S in schedule] == reference
    speedup = naive_seconds / fast_seconds
    benchmark.extra_info.update(naive_seconds=naive_seconds, speedup=speedup)
    print(f"\nFairDG T={ROUNDS:,}: fairsched {fast_seconds:.3f} s, naive {naive_seconds:.3f} s, "
          f"speed-up {speedup:.1f}x")
    assert speedup >= 10
