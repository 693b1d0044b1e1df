"""Continuous greedy (FairCG1) speed: the fractional point y, exact or closed-form gradients.

    python -m pytest benchmarks/bench_continuous_greedy.py --benchmark-only -s

Targets (issue 3): the paper instance with exact gradients under 1 s; a coverage instance
with n = 200 and closed-form gradients under 10 s. The baseline in the same run is the same
ascent with Monte-Carlo gradients (common random samples: 2,000 on the paper instance, 100 at
n = 200, where 2,000 took 506 s), the only option a utility without exact or closed forms has.
"""

from __future__ import annotations

import time
from pathlib import Path

from fairsched.instances.generators import coverage_instance
from fairsched.instances import load_instance, problem_from_table
from fairsched.policies import FairCG1

PAPER = Path(__file__).resolve().parent.parent / "instances" / "paper.toml"


def fractional_point(problem, method: str, samples: int = 2000):
    policy = FairCG1(steps=100, samples=samples, method=method)
    policy.reset(problem, 0)
    return policy.result


def _compare(benchmark, problem, method: str, label: str, target: float, samples: int) -> None:
    result = benchmark.pedantic(fractional_point, args=(problem, method), rounds=3, iterations=1)
    fast = benchmark.stats.stats.min
    start = time.perf_counter()
    baseline = fractional_point(problem, "monte-carlo", samples)
    slow = time.perf_counter() - start
    benchmark.extra_info.update(monte_carlo_seconds=slow, speedup=slow / fast)
    print(f"\n{label}: {method} {fast:.3f} s (F(y) = {result.value:.6g}); Monte Carlo {slow:.3f} s "
          f"with {samples} samples (F(y) = {baseline.value:.6g} ± {baseline.value_stderr:.2g}); speed-up {slow / fast:.1f}x")
    assert fast < target


def test_paper_instance_exact(benchmark):
    _compare(benchmark, load_instance(PAPER), "exact", "paper n=10 k=6", 1.0, 2000)


def test_coverage_n200_closed_form(benchmark):
    problem = problem_from_table(coverage_instance(n=200, k=20, elements=2000, seed=0))
    _compare(benchmark, problem, "closed-form", "coverage n=200 k=20", 10.0, 100)
