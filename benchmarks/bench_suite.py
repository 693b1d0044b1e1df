"""The benchmark suite: utility oracles, the LP, column generation and every policy.

    python -m pytest benchmarks/bench_suite.py --benchmark-only -s

Groups (select one with ``-k``, e.g. ``-k oracle``):

- **oracle**: ``values`` of a batch of 256 random ``k``-sets and ``gains`` at a random
  ``k``-set, for each family of :mod:`fairsched.bench.families` at ``n = 100`` and
  ``n = 1000`` (``k = n/10``);
- **greedy**: :func:`fairsched.submodular.lazy_greedy.lazy_greedy` against the plain
  :func:`fairsched.submodular.greedy.greedy_complete` on the same instances, same set, ratio printed;
- **lp**: ``fairsched.optimum`` on the four bundled instances;
- **colgen**: ``optimum(problem, method="column-generation")`` against
  ``method="enumeration"`` (skipped, with the reason, where ``optimum`` has no ``method``);
- **policy**: every registered policy for ``T = 10^4`` rounds on the paper instance.

Times are the minimum over the rounds (``Min`` column), on a 2-core machine.
"""

from __future__ import annotations

import inspect
import time
from pathlib import Path

import numpy as np
import pytest

from fairsched.bench.families import FAMILIES, family
from fairsched.submodular.greedy import greedy_complete
from fairsched.instances import load_instance, problem_from_table
from fairsched.submodular.lazy_greedy import lazy_greedy
from fairsched.lp.solve import optimum
from fairsched.policies import POLICIES, make_policy
from fairsched.runtime.simulation import run

INSTANCES = Path(__file__).resolve().parent.parent / "instances"
BUNDLED = ("paper.toml", "coverage.toml", "facility-location.toml", "concave-modular.toml")
SIZES = (100, 1000)
BATCH = 256
POLICY_ROUNDS = 10_000

_problems: dict = {}


def problem_of(kind: str, n: int):
    if (kind, n) not in _problems:
        _problems[kind, n] = problem_from_table(family(kind, n, seed=0))
    return _problems[kind, n]


def random_sets(n: int, k: int, count: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    masks = np.zeros((count, n), dtype=bool)
    rows = np.repeat(np.arange(count), k)
    masks[rows, np.argsort(rng.random((count, n)), axis=1)[:, :k].ravel()] = True
    return masks


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", list(FAMILIES))
def test_oracle_values(benchmark, kind, n):
    problem = problem_of(kind, n)
    masks = random_sets(n, problem.k, BATCH)
    values = benchmark.pedantic(problem.utility.values, args=(masks,), rounds=5, iterations=1, warmup_rounds=1)
    assert values.shape == (BATCH,) and np.isfinite(values).all()


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("kind", list(FAMILIES))
def test_oracle_gains(benchmark, kind, n):
    problem = problem_of(kind, n)
    S = np.flatnonzero(random_sets(n, problem.k, 1, seed=1)[0])
    gains = benchmark.pedantic(problem.utility.gains, args=(S,), rounds=20, iterations=1, warmup_rounds=1)
    assert gains.shape == (n,) and (gains[S] == 0).all()


@pytest.mark.parametrize("kind", list(FAMILIES))
def test_greedy_lazy_against_plain(benchmark, kind):
    problem = problem_of(kind, 1000)
    utility, k = problem.utility, problem.k
    start = time.perf_counter()
    plain = greedy_complete(utility, k)
    plain_seconds = time.perf_counter() - start
    lazy = benchmark.pedantic(lazy_greedy, args=(utility, k), rounds=3, iterations=1)
    fast = benchmark.stats.stats.min
    assert np.array_equal(lazy, plain)
    benchmark.extra_info.update(plain_seconds=plain_seconds, speedup=plain_seconds / fast)
    print(f"\ngreedy {kind} n=1000 k={k}: lazy {fast * 1e3:.1f} ms, plain {plain_seconds * 1e3:.1f} ms, "
          f"speed-up {plain_seconds / fast:.1f}x, same set")


@pytest.mark.parametrize("name", BUNDLED)
def test_lp_optimum(benchmark, name):
    problem = load_instance(INSTANCES / name)
    opt = benchmark.pedantic(optimum, args=(problem,), rounds=5, iterations=1, warmup_rounds=1)
    assert opt.gap <= 1e-7 * max(1.0, abs(opt.value))


COLGEN_CASES = [("paper.toml", None), ("coverage.toml", None), ("accuracy", 40), ("coverage", 30), ("concave-modular", 30)]


@pytest.mark.parametrize("name, n", COLGEN_CASES)
def test_colgen_against_enumeration(benchmark, name, n):
    if "method" not in inspect.signature(optimum).parameters:
        pytest.skip("optimum() has no method= yet: column generation is not in this tree")
    problem = load_instance(INSTANCES / name) if n is None else problem_of(name, n)
    start = time.perf_counter()
    exact = optimum(problem, method="enumeration")
    enumeration_seconds = time.perf_counter() - start
    opt = benchmark.pedantic(optimum, args=(problem,), kwargs={"method": "column-generation"}, rounds=3,
                             iterations=1)
    fast = benchmark.stats.stats.min
    assert opt.value <= exact.value + 1e-9 * abs(exact.value) <= opt.upper_bound + 2e-9 * abs(exact.value)
    benchmark.extra_info.update(enumeration_seconds=enumeration_seconds, ratio=enumeration_seconds / fast)
    label = name if n is None else f"{name} n={n}"
    print(f"\nU_opt {label} (k={problem.k}): column generation {fast:.3f} s ({opt.method}), enumeration "
          f"{enumeration_seconds:.3f} s; enumeration / column generation = {enumeration_seconds / fast:.2f}")


@pytest.mark.parametrize("name", sorted(POLICIES))
def test_policy_paper_instance(benchmark, name):
    problem = load_instance(INSTANCES / "paper.toml")
    schedule = benchmark.pedantic(lambda: run(problem, make_policy(name), POLICY_ROUNDS, seed=0), rounds=3,
                                  iterations=1)
    assert schedule.rounds == POLICY_ROUNDS
