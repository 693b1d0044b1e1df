"""FairDG (Li, Liu and Ji 2021, Algorithm 3): short-term fairness, debt < 1 in every round."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import INSTANCES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairsched.instances import load_instance
from fairsched.instances.generators import PAPER_BETAS
from fairsched.lp.solve import optimum
from fairsched.metrics import evaluate
from fairsched.policies import FairDG, make_policy
from fairsched.policies.cache import ENTRY_OVERHEAD, ArrayLRU, mask_digest
from fairsched.problem import Problem
from fairsched.runtime.simulation import run
from fairsched.utilities import FacilityLocation, Modular


def floors_always_met(schedule, r) -> bool:
    """N_u(t) >= floor(r_u·t) for all u, t: the debt r_u·t − N_u(t) stays below 1."""
    counts = np.cumsum(schedule.masks(), axis=0)
    t = np.arange(1, schedule.rounds + 1)[:, None]
    return bool((counts >= np.floor(t * np.asarray(r)[None, :] + 1e-9)).all())


@st.composite
def fair_instances(draw):
    n = draw(st.integers(2, 8))
    k = draw(st.integers(1, n))
    denominator = draw(st.integers(2, 24))
    numerators = draw(st.lists(st.integers(0, denominator), min_size=n, max_size=n))
    tight = draw(st.booleans())
    budget = k * denominator
    # shrink to Σ r <= k, and for "tight" instances grow to Σ r = k exactly
    for u in range(n):
        excess = sum(numerators) - budget
        if excess > 0:
            numerators[u] -= min(numerators[u], excess)
    if tight:
        for u in range(n):
            missing = budget - sum(numerators)
            numerators[u] += min(denominator - numerators[u], missing)
    r = np.array(numerators, dtype=float) / denominator
    similarity = np.asarray(draw(st.lists(st.floats(0, 1), min_size=3 * n, max_size=3 * n))).reshape(3, n)
    rounds = draw(st.integers(1, 300))
    return Problem(FacilityLocation(similarity), k, r), rounds


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fair_instances())
def test_debt_below_one_every_round(instance):
    problem, rounds = instance
    schedule = run(problem, FairDG(), rounds)
    assert floors_always_met(schedule, problem.r)
    assert (schedule.sizes() == problem.k).all()
    assert evaluate(schedule, problem).max_debt < 1


def test_seed_rule_counterexample_is_fixed_by_deadline_ranking():
    """Ranking A_t by debt alone (the paper's rule) lets a debt reach 1 here; the deadline ranking does not."""
    # found by random search over tight (Σ r = k) heterogeneous instances
    for numerators, k in (([1, 4, 1, 1, 1, 4], 1), ([2, 2, 8, 8, 8, 8], 3)):
        r = np.array(numerators) / 12
        problem = Problem(FacilityLocation(np.ones((1, 6))), k, r)
        seed_rule = run(problem, FairDG(rank="debt"), 300)
        assert not floors_always_met(seed_rule, r)
        assert evaluate(seed_rule, problem).max_debt == pytest.approx(1.0)
        assert floors_always_met(run(problem, FairDG(), 300), r)


def test_homogeneous_floors_seed_rule_holds():
    """Li, Liu and Ji (2021), Theorem 5: with a homogeneous r the paper's debt ranking keeps debt < 1."""
    problem = Problem(FacilityLocation(np.eye(7)), 3, np.full(7, 3 / 7))
    assert floors_always_met(run(problem, FairDG(rank="debt"), 500), problem.r)


def test_unknown_rank_is_an_error():
    with pytest.raises(ValueError, match="unknown rank"):
        FairDG(rank="coin")


@pytest.mark.parametrize("beta", PAPER_BETAS)
def test_paper_instance_fair_and_near_optimal(beta):
    problem = load_instance(INSTANCES / "paper.toml", beta=beta)
    u_opt = optimum(problem).value
    report = evaluate(run(problem, make_policy("fairdg"), 100_000), problem, u_opt)
    assert (report.selection_fraction >= problem.r).all()
    assert report.ratio >= 0.99
    assert report.max_debt < 1


def test_greedy_is_unfair_on_the_paper_instance():
    problem = load_instance(INSTANCES / "paper.toml")
    report = evaluate(run(problem, make_policy("greedy"), 1000), problem, optimum(problem).value)
    assert report.ratio > 1
    assert np.flatnonzero(report.selection_fraction == 0).tolist() == [0, 4, 8, 9]


def test_completion_cache_is_bounded_in_bytes_and_changes_no_decision():
    """Availability makes many distinct (A_t, available) pairs; a tiny byte budget evicts, never decides."""
    problem = load_instance(INSTANCES / "paper.toml")
    rng = np.random.default_rng(2)
    masks = rng.random((3000, problem.n)) < 0.7
    budget = 3 * (16 + problem.k * 8 + ENTRY_OVERHEAD)  # room for three completions
    small, large = FairDG(cache_bytes=budget), FairDG()
    for policy in (small, large):
        policy.reset(problem, 0)
    for mask in masks:
        a, b = small.select(mask), large.select(mask)
        assert np.array_equal(a, b)
        small.observe(a)
        large.observe(b)
        assert small._completions.nbytes <= budget
    assert len(small._completions) <= 3 < len(large._completions)


def test_array_lru_evicts_the_least_recently_used():
    cache = ArrayLRU(max_bytes=3 * (1 + 8 + ENTRY_OVERHEAD))
    for key in (b"a", b"b", b"c"):
        cache.put(key, np.zeros(1, dtype=np.int64))
    assert cache.get(b"a") is not None  # a is now the most recent
    cache.put(b"d", np.zeros(1, dtype=np.int64))
    assert cache.get(b"b") is None and cache.get(b"a") is not None and len(cache) == 3
    cache.put(b"huge", np.zeros(1000, dtype=np.int64))  # larger than the whole budget: not kept
    assert cache.get(b"huge") is None and len(cache) == 3
    assert mask_digest(np.array([True, False])) != mask_digest(np.array([True, False, False]))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["deadline", "debt"]))
def test_most_urgent_partition_agrees_with_a_full_sort(seed, rank):
    """The partition keeps exactly the k first of (deadline, −debt, index), ties included."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    k = int(rng.integers(1, n + 1))
    policy = FairDG(rank=rank)
    policy.reset(Problem(Modular(np.ones(n)), k=k, r=rng.choice([1, 2, 4], size=n) * k / (4 * n)), 0)
    debt = rng.choice([-0.5, 0.0, 0.25, 0.5], size=n)  # coarse values: many exact ties
    members = np.sort(rng.choice(n, size=int(rng.integers(k, n + 1)), replace=False))
    d = debt[members]
    keys = ((1 - d) / policy._r[members], -d, members) if rank == "deadline" else (-d, members)
    expected = np.sort(members[np.lexsort(keys[::-1])[:k]])
    assert np.array_equal(policy._most_urgent(members, debt, k), expected)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(["one value fills most", "few values", "spread"]))
def test_most_urgent_equals_a_full_sort_however_many_workers_tie(seed, shape):
    """``most_urgent`` cuts each tie level (key, then debt, then index) without sorting it; on
    keys where one value fills most of the pool (the case ``kth_smallest`` sorts instead of
    partitioning), on few values and on spread ones, it returns exactly the first ``count``
    of a full lexicographic sort, in that order, whatever the order of the pool."""
    from fairsched.policies.refill import most_urgent
    from fairsched.solvers.selection import kth_smallest
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4000))
    if shape == "one value fills most":
        keys = np.where(rng.random(n) < 0.85, 21.0, rng.integers(1, 40, n).astype(float))
    elif shape == "few values":
        keys = rng.choice([0.5, 1.0, 2.0, np.inf], size=n)
    else:
        keys = rng.random(n)
    debt = rng.choice([-0.5, 0.0, 0.25], size=n)
    pool = rng.permutation(n)[:int(rng.integers(0, n + 1))]
    if seed % 2:
        pool = np.sort(pool)
    count = int(rng.integers(0, n + 2))
    expected = pool[np.lexsort((pool, -debt[pool], keys[pool]))[:count]]
    assert np.array_equal(most_urgent(pool, keys, debt, count), expected)
    if pool.size:
        index = int(rng.integers(0, pool.size))
        assert kth_smallest(keys[pool], index) == np.sort(keys[pool])[index]
