"""The schedule search behind column generation's starting pool
(:mod:`fairsched.lp.pricing.schedule_search`).

Every schedule it builds meets the rounded-up floors (a property test over random floors,
``Σ r = k`` exactly included); every swap it makes is the best one of its round, found by
brute force over all single and paired swaps, and its bookkeeping (values, counts) matches a
recomputation; the pool it returns is a distribution that meets ``r`` and is worth at least
the schedule it started from; and column generation started from it still equals
enumeration.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fairsched
from fairsched.lp.pricing import GreedyPricing, pricing_for
from fairsched.lp.pricing.initial import StartingPool, initial_pool
from fairsched.lp.pricing.round_gains import round_gains_for
from fairsched.lp.pricing.schedule_search import (
    _best_swap,
    _fill,
    assigned_schedule,
    better_start,
    floor_counts,
    initial_schedule,
    schedule_search,
    wished_schedule,
)
from fairsched.problem import Problem
from fairsched.solvers.columns import Columns
from fairsched.utilities import ConcaveModular, Coverage, FacilityLocation


def facility(n: int, points: int, seed: int) -> FacilityLocation:
    rng = np.random.default_rng(seed)
    strength = np.where(np.arange(n) < 2, 1.0, 0.3)
    return FacilityLocation(rng.uniform(size=(points, n)) ** 2 * strength)


def small_utility(kind: str, n: int, seed: int, rng: np.random.Generator, elements: int):
    """A small facility-location, coverage (``elements``, drawn from ``rng``) or concave sqrt utility."""
    if kind == "facility-location":
        return facility(n, 7, seed)
    if kind == "coverage":
        covers = rng.random((n, elements)) < 0.3
        return Coverage([np.flatnonzero(row).tolist() for row in covers], rng.uniform(0.5, 2.0, elements))
    return ConcaveModular(rng.exponential(size=(5, n)), "sqrt")


def costly_floors(n: int, k: int, load: float = 0.8) -> np.ndarray:
    """0.1 for the first two workers, the rest of ``load·k`` shared by the others."""
    return np.array([0.1, 0.1] + [(load * k - 0.2) / (n - 2)] * (n - 2))


def test_floor_counts_round_up_but_not_round_off():
    assert floor_counts(np.array([0.1, 1 / 3, 0.0778, 0.0, 1.0]), 1600).tolist() == [160, 534, 125, 0, 1600]
    assert floor_counts(np.array([1 / 3] * 3), 3).tolist() == [1, 1, 1]


def drawn_counts(data, n: int) -> tuple[int, int, np.ndarray]:
    """``(k, T, counts)``: random counts with ``Σ c <= k·T`` and ``c <= T``."""
    k = data.draw(st.integers(1, n - 1))
    rounds = data.draw(st.integers(1, 60))
    counts = np.array(data.draw(st.lists(st.integers(0, rounds), min_size=n, max_size=n)))
    while counts.sum() > k * rounds:
        counts[int(np.argmax(counts))] -= 1
    return k, rounds, counts


def assert_meets_every_count(masks: np.ndarray, k: int, counts: np.ndarray, rounds: int) -> None:
    assert masks.shape == (rounds, counts.size)
    assert (masks.sum(axis=1) == k).all()
    assert (masks.sum(axis=0) >= counts).all()


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 14), st.data())
def test_initial_schedule_meets_every_count(n, data):
    k, rounds, counts = drawn_counts(data, n)
    if data.draw(st.booleans()):  # often Σ c = k·T exactly
        order = np.argsort(counts)
        for u in order:
            counts[u] += min(rounds - counts[u], k * rounds - counts.sum())
    utility = facility(n, 6, data.draw(st.integers(0, 10)))
    masks = initial_schedule(utility, k, counts, rounds, np.random.default_rng(0))
    assert_meets_every_count(masks, k, counts, rounds)


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 14), st.data())
def test_assigned_schedule_meets_every_count_or_gives_none(n, data):
    k, rounds, counts = drawn_counts(data, n)
    utility = facility(n, 6, data.draw(st.integers(0, 10)))
    masks = assigned_schedule(utility, k, counts, rounds, np.random.default_rng(0))
    if masks is None:  # a worker found too few rounds with room: the caller falls back
        return
    assert_meets_every_count(masks, k, counts, rounds)


@settings(max_examples=200, deadline=None)
@given(st.integers(3, 14), st.data())
def test_extra_rounds_never_cost_a_floor(n, data):
    """With ``extra`` rounds asked for, a schedule is either not given (a later floor found too
    few rounds with room) or meets every count with ``k`` workers in every round."""
    k, rounds, counts = drawn_counts(data, n)
    extra = np.array(data.draw(st.lists(st.integers(0, rounds), min_size=n, max_size=n)))
    utility = facility(n, 6, data.draw(st.integers(0, 10)))
    masks = assigned_schedule(utility, k, counts, rounds, np.random.default_rng(0), extra=extra)
    if masks is not None:
        assert_meets_every_count(masks, k, counts, rounds)


def test_without_extra_rounds_the_assigned_schedule_is_unchanged():
    n, k, rounds = 12, 4, 30
    utility = facility(n, 8, 3)
    counts = floor_counts(costly_floors(n, k), rounds)
    plain = assigned_schedule(utility, k, counts, rounds, np.random.default_rng(5))
    zero = assigned_schedule(utility, k, counts, rounds, np.random.default_rng(5), extra=np.zeros(n, dtype=np.int64))
    np.testing.assert_array_equal(plain, zero)


def test_wished_schedule_gives_the_relaxation_its_extra_rounds():
    """Two big covers, small ones, and one worker whose elements the first big cover holds
    (worth nothing beside it, so the fill never picks it): wished into 20 rounds beyond its
    floor, it gets exactly those; the extras are ``⌊x*·T⌋ − c`` (the same schedule as
    :func:`assigned_schedule` given them), every floor is met."""
    rng = np.random.default_rng(2)
    small = [rng.choice(40, size=3, replace=False).tolist() for _ in range(13)]
    covers = [list(range(0, 20)), list(range(20, 40))] + small + [[0, 1]]
    utility = Coverage(covers, np.ones(40))
    k, rounds = 4, 40
    r = np.full(len(covers), 0.1)
    counts = floor_counts(r, rounds)
    marginals = np.concatenate([[1.0, 1.0], np.full(13, 0.1), [0.6]])
    masks = wished_schedule(utility, k, counts, rounds, marginals, np.random.default_rng(0))
    assert_meets_every_count(masks, k, counts, rounds)
    extra = np.maximum(0, np.floor(marginals * rounds + 1e-9).astype(np.int64) - counts)
    assert extra.tolist() == [36, 36] + [0] * 13 + [20]
    np.testing.assert_array_equal(
        masks, assigned_schedule(utility, k, counts, rounds, np.random.default_rng(0), extra=extra))
    assert masks[:, -1].sum() == counts[-1] + 20
    plain = assigned_schedule(utility, k, counts, rounds, np.random.default_rng(0))
    assert plain[:, -1].sum() == counts[-1]  # without the wish, only its floor
    # nothing to wish for: no schedule of its own
    assert wished_schedule(utility, k, counts, rounds, r, np.random.default_rng(0)) is None


def test_wished_schedule_halves_the_extras_where_they_crowd_out_a_floor():
    """A small cover (found by a random search) where the full extra rounds leave a later
    floor too few rounds with room: the wished schedule is then the one with half of them,
    and it meets every floor."""
    rng = np.random.default_rng(681)
    n = int(rng.integers(4, 9))
    k, rounds = int(rng.integers(2, n)), int(rng.integers(2, 8))
    covers = [np.flatnonzero(rng.random(8) < 0.4).tolist() or [0] for _ in range(n)]
    utility = Coverage(covers, rng.uniform(0.5, 2, 8))
    counts = np.array([1, 2, 3, 0, 0, 2, 0])
    extra = np.array([2, 0, 0, 2, 0, 1, 2])
    assert (n, k, rounds) == (7, 4, 3)
    marginals = (counts + extra) / rounds
    masks = wished_schedule(utility, k, counts, rounds, marginals, np.random.default_rng(0))
    assert_meets_every_count(masks, k, counts, rounds)
    # the same two tries by hand, on one generator as wished_schedule draws them
    tries = np.random.default_rng(0)
    assert assigned_schedule(utility, k, counts, rounds, tries, extra=extra) is None
    halved = assigned_schedule(utility, k, counts, rounds, tries, extra=extra // 2)
    np.testing.assert_array_equal(masks, halved)


def clustered_coverage(clusters: int, copies: int, seed: int) -> Coverage:
    """``clusters`` groups of ``copies`` workers that cover the same elements (distinct weights
    per cluster): only spreading a cluster over different rounds avoids covering twice."""
    rng = np.random.default_rng(seed)
    covers = [list(range(3 * c, 3 * c + 3)) for c in range(clusters) for _ in range(copies)]
    return Coverage(covers, rng.uniform(0.5, 2.0, 3 * clusters))


def test_assigned_schedule_spreads_workers_that_overlap():
    clusters, copies, k, rounds = 5, 4, 5, 8
    utility = clustered_coverage(clusters, copies, 0)
    n = clusters * copies
    counts = np.full(n, 2)  # Σ c = 40 = k·T: every round full of floors
    masks = assigned_schedule(utility, k, counts, rounds, np.random.default_rng(0))
    assert masks is not None and (masks.sum(axis=0) >= counts).all() and (masks.sum(axis=1) == k).all()
    # one worker of each cluster in every round: every element covered in every round
    np.testing.assert_allclose(utility.values(masks), utility.weights.sum())
    blind = initial_schedule(utility, k, counts, rounds, np.random.default_rng(0))
    assert utility.values(blind).mean() < utility.weights.sum() - 1e-9


@pytest.mark.parametrize("kind", ["facility-location", "coverage", "concave"])
@pytest.mark.parametrize("seed", range(3))
def test_fill_adds_the_greedy_worker_each_time(kind, seed):
    rng = np.random.default_rng(seed)
    n, k, rounds = 10, 4, 6
    utility = small_utility(kind, n, seed, rng, elements=25)
    masks = np.zeros((rounds, n), dtype=bool)
    for t in range(rounds):  # some rounds start partly filled, one full
        masks[t, rng.choice(n, size=min(t, k), replace=False)] = True
    state = round_gains_for(utility, rounds)
    for t in range(rounds):
        members = np.flatnonzero(masks[t])
        state.add(members, np.full(members.size, t))
    expected = masks.copy()
    for t in range(rounds):  # plain greedy, round by round, from the utility's values
        while expected[t].sum() < k:
            grown = np.repeat(expected[t][None, :], n, axis=0)
            grown[np.arange(n), np.arange(n)] = True
            gains = np.where(expected[t], -np.inf, utility.values(grown))
            expected[t, int(np.argmax(gains))] = True
    _fill(state, masks, masks.sum(axis=1), k)
    np.testing.assert_array_equal(masks, expected)


def test_the_search_starts_from_the_better_of_the_two_schedules():
    clusters, copies, k = 5, 4, 5
    utility = clustered_coverage(clusters, copies, 1)
    n = clusters * copies
    r = np.full(n, 0.24)
    swap_gains = GreedyPricing(utility, k).swap_gains
    counts = floor_counts(r, 25)
    blind = utility.values(initial_schedule(utility, k, counts, 25, np.random.default_rng([0, 29]))).mean()
    assigned = utility.values(assigned_schedule(utility, k, counts, 25, np.random.default_rng([0, 31]))).mean()
    assert assigned > blind + 1e-9
    pool = schedule_search(utility, k, r, swap_gains, rounds=25, max_passes=0)
    assert pool.value() == pytest.approx(assigned, rel=1e-12)
    assert (pool.columns.marginals(pool.probabilities) >= r - 1e-12).all()


def test_sum_of_floors_equal_to_k_with_periodic_floors():
    n, k = 10, 3
    r = np.array([1 / 3] * 3 + [2 / 7] * 7)  # Σ r = 1 + 2 = k
    utility = facility(n, 8, 1)
    swap_gains = GreedyPricing(utility, k).swap_gains
    pool = schedule_search(utility, k, r, swap_gains, rounds=21)
    assert pool is not None
    assert (pool.columns.marginals(pool.probabilities) >= r - 1e-12).all()
    # 22 rounds cannot meet ⌈r_u·22⌉ for every u when Σ r = k: no schedule, no pool
    assert schedule_search(utility, k, r, swap_gains, rounds=22) is None


def brute_best_swap(utility, masks, counts, t, partner) -> float:
    """The best gain of a single swap in round ``t`` (members with spare rounds only) or of a
    paired swap with ``partner``, by evaluating every such pair of sets."""
    chosen = masks.sum(axis=0)
    f = lambda mask: float(utility.values(mask[None, :])[0])  # noqa: E731
    base_t, base_p = f(masks[t]), f(masks[partner])
    best = 0.0
    for u, v in itertools.product(np.flatnonzero(masks[t]), np.flatnonzero(~masks[t])):
        moved = masks[t].copy()
        moved[u], moved[v] = False, True
        gain = f(moved) - base_t
        if chosen[u] > counts[u]:
            best = max(best, gain)
        if masks[partner, v] and not masks[partner, u]:
            other = masks[partner].copy()
            other[v], other[u] = False, True
            best = max(best, gain + f(other) - base_p)
    return best


@pytest.mark.parametrize("kind", ["facility-location", "coverage", "concave"])
@pytest.mark.parametrize("seed", range(4))
def test_each_swap_is_the_best_and_its_bookkeeping_matches(kind, seed):
    rng = np.random.default_rng(seed)
    n, k, rounds = 9, 3, 12
    utility = small_utility(kind, n, seed, rng, elements=20)
    swap_gains = pricing_for(utility, k, kind).heuristic.swap_gains
    counts = floor_counts(costly_floors(n, k), rounds)
    masks = initial_schedule(utility, k, counts, rounds, rng)
    values = utility.values(masks)
    chosen = masks.sum(axis=0)
    for step in range(30):
        t, partner = (int(x) for x in rng.choice(rounds, size=2, replace=False))
        expected = brute_best_swap(utility, masks, counts, t, partner)
        before = values.sum()
        gain = _best_swap(masks, values, chosen, counts, t, partner, swap_gains, 1e-12)
        assert gain == pytest.approx(expected, abs=1e-9)
        assert values.sum() - before == pytest.approx(gain, abs=1e-9)
        np.testing.assert_allclose(values, utility.values(masks), atol=1e-9)
        assert (masks.sum(axis=1) == k).all()
        np.testing.assert_array_equal(chosen, masks.sum(axis=0))
        assert (chosen >= counts).all()


def test_pool_is_a_feasible_distribution_worth_at_least_its_start():
    n, k = 30, 4
    utility = facility(n, 40, 3)
    r = costly_floors(n, k)
    rounds = 200
    start = initial_schedule(utility, k, floor_counts(r, rounds), rounds, np.random.default_rng([0, 29]))
    pool = schedule_search(utility, k, r, GreedyPricing(utility, k).swap_gains, rounds=rounds)
    assert pool is not None
    assert pool.probabilities.sum() == pytest.approx(1.0, abs=1e-12)
    assert (pool.columns.marginals(pool.probabilities) >= r - 1e-12).all()
    np.testing.assert_allclose(pool.values, utility.values(pool.columns.to_masks()), rtol=1e-12)
    assert len(np.unique(pool.columns.to_masks(), axis=0)) == len(pool.columns)
    assert pool.value() > utility.values(start).mean() + 1e-6


def test_no_pool_without_swap_values_or_a_feasible_schedule():
    utility = facility(6, 5, 0)
    r = costly_floors(6, 2)
    assert schedule_search(utility, 2, r, lambda mask: None) is None
    assert schedule_search(utility, 2, np.full(6, 0.5), GreedyPricing(utility, 2).swap_gains) is None


def test_deadline_in_the_past_returns_the_initial_schedule():
    n, k = 20, 3
    utility = facility(n, 10, 2)
    r = costly_floors(n, k)
    pool = schedule_search(utility, k, r, GreedyPricing(utility, k).swap_gains, rounds=50, deadline=0.0)
    start = initial_schedule(utility, k, floor_counts(r, 50), 50, np.random.default_rng([0, 29]))
    assert pool.value() == pytest.approx(utility.values(start).mean(), rel=1e-12)


def test_a_schedule_worth_less_than_beat_after_its_first_pass_is_abandoned():
    n, k = 20, 3
    utility = facility(n, 10, 5)
    r = costly_floors(n, k)
    swap_gains = GreedyPricing(utility, k).swap_gains
    kept = schedule_search(utility, k, r, swap_gains, rounds=40, max_passes=1)
    assert schedule_search(utility, k, r, swap_gains, rounds=40, max_passes=1,
                           beat=kept.value() + 1e-9) is None
    again = schedule_search(utility, k, r, swap_gains, rounds=40, max_passes=1, beat=kept.value() - 1e-9)
    assert again.value() == kept.value()
    np.testing.assert_array_equal(again.columns.to_masks(), kept.columns.to_masks())
    # the deadline does not bypass it
    assert schedule_search(utility, k, r, swap_gains, rounds=40, deadline=0.0, beat=np.inf) is None


def test_better_start_keeps_both_pools_and_weights_the_better():
    utility = facility(8, 6, 4)
    low_sets = Columns.from_sets([np.array([4, 5]), np.array([6, 7])], 8)
    low = StartingPool(low_sets, utility.values(low_sets.to_masks()), np.array([0.5, 0.5]))
    high_sets = Columns.from_sets([np.array([0, 1])], 8)
    high = StartingPool(high_sets, utility.values(high_sets.to_masks()), np.array([1.0]))
    assert high.value() > low.value()
    for first, second, weights in [(low, high, [0, 0, 1]), (high, low, [1, 0, 0])]:
        merged = better_start(first, second)
        assert len(merged.columns) == 3
        np.testing.assert_array_equal(merged.probabilities, weights)
        assert merged.value() == pytest.approx(high.value())
    assert better_start(low, None) is low


def test_a_start_too_large_for_the_master_keeps_only_the_better_pool(monkeypatch):
    """Where the start enters column generation's master as one aggregated column (more than
    POOL_NONZEROS members), only the better pool is kept, its sets and weights as they were;
    where its distribution misses a floor or a cap, or the pools are small, both pools
    (better_start's)."""
    from fairsched.lp import solve

    utility = facility(8, 6, 4)
    low_sets = Columns.from_sets([np.array([4, 5]), np.array([6, 7])], 8)
    low = StartingPool(low_sets, utility.values(low_sets.to_masks()), np.array([0.5, 0.5]))
    high_sets = Columns.from_sets([np.array([0, 1]), np.array([2, 3]), np.array([1, 2])], 8)
    high = StartingPool(high_sets, utility.values(high_sets.to_masks()), np.array([0.6, 0.4, 0.0]))
    r = np.full(8, 0.1)
    r[4:] = 0.0
    assert high.value() > low.value()
    both = solve._joined_start(low, high, r, None)
    assert len(both.columns) == 5 and both.value() == pytest.approx(high.value())
    assert solve._joined_start(low, None, r, None) is low
    monkeypatch.setattr(solve, "POOL_NONZEROS", 9)  # the two pools hold 10 members
    assert solve._joined_start(low, high, r, None) is high
    assert solve._joined_start(high, low, r, None) is high
    missed = r.copy()
    missed[0] = 0.7  # the better distribution gives worker 0 only 0.6
    assert len(solve._joined_start(low, high, missed, None).columns) == 5
    capped = np.full(8, 0.5)  # and 0.6, above this cap
    assert len(solve._joined_start(low, high, r, capped).columns) == 5


@pytest.mark.parametrize("seed", range(3))
def test_column_generation_from_the_schedule_equals_enumeration(seed):
    n, k = 12, 3
    utility = facility(n, 15, seed)
    r = costly_floors(n, k)
    problem = Problem(utility=utility, k=k, r=r)
    exact = fairsched.optimum(problem, method="enumeration")
    generated = fairsched.optimum(problem, method="column-generation", pricing="facility-location",
                                  gap=1e-9)
    assert generated.value == pytest.approx(exact.value, rel=1e-7)
    start = initial_pool(utility, k, r)
    schedule = schedule_search(utility, k, r,
                               pricing_for(utility, k, "facility-location").heuristic.swap_gains)
    assert schedule is not None and schedule.value() <= exact.value + 1e-9
    assert start.value() <= exact.value + 1e-9
