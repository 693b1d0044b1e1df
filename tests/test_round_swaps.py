"""Swaps between rounds of a coverage schedule (fairsched.lp.pricing.round_swaps): every swap value
against f evaluated before and after, the element counts and the floors kept by sweeps."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairsched.lp.pricing import round_swaps
from fairsched.lp.pricing.round_swaps import (
    CoverageSwaps,
    apportioned_rounds,
    round_swaps_for,
    swept_distribution,
    sweeps,
)
from fairsched.lp.pricing.schedule_search import floor_counts, schedule_search
from fairsched.lp.pricing.greedy import GreedyPricing
from fairsched.solvers.columns import Columns
from fairsched.utilities import Coverage, FacilityLocation


def random_schedule(seed: int) -> tuple[Coverage, np.ndarray, int]:
    """A random coverage (some workers with no element, some covering all) and ``T`` random
    rounds of ``k`` workers."""
    rng = np.random.default_rng(seed)
    n, elements, rounds = int(rng.integers(3, 12)), int(rng.integers(1, 15)), int(rng.integers(2, 9))
    k = int(rng.integers(1, n))
    covers = [sorted(rng.choice(elements, size=int(rng.integers(0, elements + 1)), replace=False).tolist())
              for _ in range(n)]
    utility = Coverage(covers=covers, weights=rng.uniform(0.0, 2.0, elements))
    masks = np.zeros((rounds, n), dtype=bool)
    for t in range(rounds):
        masks[t, rng.choice(n, k, replace=False)] = True
    return utility, masks, k


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_every_swap_value_is_the_change_of_f(seed):
    utility, masks, k = random_schedule(seed)
    state = CoverageSwaps(utility, masks.copy(), k)
    order = np.random.default_rng(seed).permutation(masks.shape[0])
    half = masks.shape[0] // 2
    a, b = order[:half], order[half:2 * half]
    delta = state.swap_values(a, b)
    assert delta.shape == (half, k, k)
    for p in range(half):
        for i, u in enumerate(state.members[a[p]]):
            for j, v in enumerate(state.members[b[p]]):
                if masks[b[p], u] or masks[a[p], v]:
                    assert delta[p, i, j] == -np.inf
                    continue
                pair = masks[[a[p], b[p]]].copy()
                before = utility.values(pair).sum()
                pair[0, u], pair[0, v], pair[1, v], pair[1, u] = False, True, False, True
                assert delta[p, i, j] == pytest.approx(utility.values(pair).sum() - before, abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_sweeps_keep_counts_sizes_and_element_counts_and_never_lose(seed):
    utility, masks, k = random_schedule(seed)
    state = CoverageSwaps(utility, masks.copy(), k)
    start = float(utility.values(masks).sum())
    reached, done = sweeps(state, start, np.random.default_rng(seed), max_sweeps=6)
    assert 1 <= done <= 6
    assert reached == pytest.approx(float(utility.values(state.masks).sum()), abs=1e-9)
    assert reached >= start - 1e-9
    assert (state.masks.sum(axis=0) == masks.sum(axis=0)).all()      # every worker's rounds
    assert (state.masks.sum(axis=1) == k).all()
    incidence = utility.sparse_incidence().toarray()
    assert (state.counts == state.masks.astype(int) @ incidence.astype(int)).all()
    assert (np.sort(state.members, axis=1) == np.sort(np.flatnonzero(state.masks.ravel()).reshape(-1, k)
                                                       % masks.shape[1], axis=1)).all()


def test_a_sweep_separates_two_workers_that_cover_the_same_elements():
    # workers 0 and 1 cover the same two elements, 2 and 3 two others: two rounds of two
    # are worth most when each holds one of each pair
    utility = Coverage(covers=[[0, 1], [0, 1], [2, 3], [2, 3]], weights=[1.0, 1.0, 1.0, 1.0])
    masks = np.array([[True, True, False, False], [False, False, True, True]])
    state = CoverageSwaps(utility, masks, 2)
    reached, _ = sweeps(state, 4.0, np.random.default_rng(0), max_sweeps=1)
    assert reached == pytest.approx(8.0)
    assert utility.values(masks).tolist() == [4.0, 4.0]


def test_blocks_of_pairs_give_the_same_sweep(monkeypatch):
    utility, masks, k = random_schedule(7)
    whole = CoverageSwaps(utility, masks.copy(), k)
    gains = whole.sweep(np.array([0]), np.array([1]), 1e-12)
    monkeypatch.setattr(round_swaps, "BLOCK_WORK", 1)
    blocked = CoverageSwaps(utility, masks.copy(), k)
    assert np.array_equal(blocked.sweep(np.array([0]), np.array([1]), 1e-12), gains)
    assert np.array_equal(blocked.masks, whole.masks)


def test_only_coverage_within_the_cell_limit_gets_a_state(monkeypatch):
    utility, masks, k = random_schedule(3)
    assert isinstance(round_swaps_for(utility, masks, k), CoverageSwaps)
    facility = FacilityLocation(similarity=np.eye(masks.shape[1]))
    assert round_swaps_for(facility, masks, k) is None
    monkeypatch.setattr(round_swaps, "MAX_COUNT_CELLS", masks.shape[0] * utility.weights.size - 1)
    assert round_swaps_for(utility, masks, k) is None


def test_schedule_search_with_sweeps_meets_every_floor():
    rng = np.random.default_rng(5)
    n, k, elements = 40, 6, 80
    centres, points = rng.uniform(size=(n, 2)), rng.uniform(size=(elements, 2))
    covers = [np.flatnonzero(((points - c) ** 2).sum(axis=1) < 0.04).tolist() for c in centres]
    utility = Coverage(covers=covers, weights=rng.uniform(0.5, 1.5, elements))
    r = np.full(n, 0.8 * k / n)
    pool = schedule_search(utility, k, r, GreedyPricing(utility, k).swap_gains, rounds=50, seed=1)
    assert pool is not None
    marginals = pool.probabilities @ pool.columns.to_masks()
    assert (marginals >= floor_counts(r, 50) / 50 - 1e-12).all()
    assert pool.values == pytest.approx(utility.values(pool.columns.to_masks()))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=30), st.integers(1, 500))
def test_apportioned_rounds_sum_to_the_rounds_and_stay_within_one_of_each_share(weights, rounds):
    weights = np.array(weights)
    if weights.sum() == 0.0:
        weights[0] = 1.0
    counts = apportioned_rounds(weights, rounds)
    assert counts.sum() == rounds
    assert (np.abs(counts - weights / weights.sum() * rounds) < 1.0 + 1e-9).all()


def test_swept_distribution_gives_sets_with_less_overlap_and_their_values():
    # the master's support holds each pair of alike workers together; the swept schedule
    # separates them, so its sets cover all four elements where the master's covered two
    utility = Coverage(covers=[[0, 1], [0, 1], [2, 3], [2, 3]], weights=[1.0, 1.0, 1.0, 1.0])
    support = Columns.from_masks(np.array([[True, True, False, False], [False, False, True, True]]))
    columns, values = swept_distribution(utility, 2, 10, seconds=5.0)(support, np.array([0.5, 0.5]))
    masks = columns.to_masks()
    assert len(np.unique(masks, axis=0)) == len(masks) >= 1
    assert (masks.sum(axis=1) == 2).all()
    assert values.tolist() == utility.values(masks).tolist()
    assert values.max() == 4.0


def test_swept_distribution_gives_nothing_without_a_coverage_state():
    facility = FacilityLocation(similarity=np.eye(4))
    support = Columns.from_masks(np.array([[True, True, False, False]]))
    columns, values = swept_distribution(facility, 2, 10)(support, np.array([1.0]))
    assert len(columns) == 0 and values.size == 0


@pytest.mark.parametrize("weights", [[0.0, 0.0], [1.0, -0.5], [np.inf, 1.0]])
def test_apportioned_rounds_refuses_weights_without_a_positive_finite_sum(weights):
    with pytest.raises(ValueError, match="non-negative"):
        apportioned_rounds(np.array(weights), 4)
