"""Gale's condition (``fairsched.lp.gale``): the inequalities detect exactly the distributions
whose members can be placed, and the realisation places them (sizes kept, every floor met,
each set's count in every group kept, so ``f`` is unchanged where groups hold equal sizes)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fairsched.lp.floor_groups import group_counts
from fairsched.lp.gale import _staircase, most_even, realise, violated_cuts
from fairsched.solvers.columns import Columns


def draw(seed: int, realisable: bool):
    """Sets with weights and groups; floors met by the sets as drawn (``realisable``) or drawn
    inside each group's total only (then Gale's condition may fail)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 25))
    k = int(rng.integers(1, min(8, n)))
    groups = np.unique(rng.integers(0, max(1, n // 4), n), return_inverse=True)[1]
    m = int(rng.integers(1, 10))
    masks = np.zeros((m, n), dtype=bool)
    for i in range(m):
        masks[i, rng.choice(n, k, replace=False)] = True
    weights = rng.dirichlet(np.ones(m) * rng.uniform(0.2, 2.0))
    if realisable:
        r = (weights @ masks) * rng.uniform(0.5, 1.0, n)
        for i in range(m):  # the members of each group exchanged at random, set by set
            for g in np.unique(groups):
                members = np.flatnonzero(groups == g)
                count = masks[i, members].sum()
                masks[i, members] = False
                masks[i, rng.choice(members, count, replace=False)] = True
    else:
        totals = np.bincount(groups, weights=weights @ masks)
        r = np.zeros(n)
        for g in np.unique(groups):
            members = np.flatnonzero(groups == g)
            shares = rng.dirichlet(np.ones(members.size) * rng.uniform(0.2, 3.0))
            r[members] = np.minimum(shares * totals[g] * rng.uniform(0.7, 1.0), 1.0)
    return Columns.from_masks(masks), weights, groups, r


def check_realised(columns: Columns, weights: np.ndarray, groups: np.ndarray, r: np.ndarray, made) -> None:
    support, probabilities = made
    masks = support.to_masks()
    assert (masks.sum(axis=1) == columns.sizes()[0]).all()
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-12) and (probabilities >= 0).all()
    assert (probabilities @ masks >= r - 1e-9).all()
    # the distribution of every group's count is kept: only members of a group were exchanged
    count = int(groups.max()) + 1
    before = group_counts(columns, groups, count).toarray()
    after = group_counts(support, groups, count).toarray()
    for g in range(count):
        for c in range(int(before[:, g].max()) + 1):
            assert probabilities[after[:, g] == c].sum() == pytest.approx(weights[before[:, g] == c].sum(), abs=1e-9)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_realisable_distribution_violates_no_cut_and_is_realised(seed):
    columns, weights, groups, r = draw(seed, realisable=True)
    counts = group_counts(columns, groups, int(groups.max()) + 1).tocsc()
    assert violated_cuts(counts, weights, groups, r, set()) == []
    made = realise(columns, weights, groups, r)
    assert made is not None
    check_realised(columns, weights, groups, r, made)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
@example(3406)  # a set of weight 1.3e-12 whose group's jobs outlived its place (round-off)
def test_the_cuts_say_exactly_when_a_distribution_can_be_realised(seed):
    columns, weights, groups, r = draw(seed, realisable=False)
    counts = group_counts(columns, groups, int(groups.max()) + 1).tocsc()
    cuts = violated_cuts(counts, weights, groups, r, set())
    made = realise(columns, weights, groups, r)
    assert (made is None) == bool(cuts)
    if made is not None:
        check_realised(columns, weights, groups, r, made)
    for g, j, floor in cuts:  # a cut names the j largest floors of its group
        assert floor == pytest.approx(np.sort(r[groups == g])[::-1][:j].sum())


def test_known_cuts_are_not_reported_again():
    columns, weights, groups, r = next(d for d in (draw(s, realisable=False) for s in range(100))
                                       if violated_cuts(group_counts(d[0], d[2], int(d[2].max()) + 1).tocsc(),
                                                        d[1], d[2], d[3], set()))
    counts = group_counts(columns, groups, int(groups.max()) + 1).tocsc()
    cuts = violated_cuts(counts, weights, groups, r, set())
    assert violated_cuts(counts, weights, groups, r, {(g, j) for g, j, _ in cuts}) == []


def test_most_even_raises_the_smallest_floors_to_one_level():
    x = most_even(np.array([0.5, 0.1, 0.2, 0.05]), 1.2)
    assert x.sum() == pytest.approx(1.2)
    assert x[0] == 0.5 and np.allclose(x[1:], 0.7 / 3)
    assert np.array_equal(most_even(np.array([0.3, 0.2]), 0.4), [0.3, 0.2])  # nothing to add


def test_staircase_schedule_and_its_limit():
    # places free on [0, 1), [0, 0.5): jobs 0.9 and 0.6 fit (0.9 + 0.6 = 1.5, each <= 1)
    pieces = _staircase(np.array([1.0, 0.5]), np.array([0.9, 0.6]))
    assert pieces is not None
    for job, length in zip(pieces, (0.9, 0.6)):
        assert sum(end - start for _, start, end in job) == pytest.approx(length)
        spans = sorted((start, end) for _, start, end in job)
        assert all(a[1] <= b[0] + 1e-12 for a, b in zip(spans, spans[1:]))  # never on two places at once
    assert _staircase(np.array([1.0, 0.5]), np.array([1.2, 0.3])) is None  # longer than any place


def test_slivers_of_round_off_are_dropped_and_the_floors_checked():
    """One set ``{u, 2}`` where ``u`` in the group ``{0, 1}`` is 0 on ``[0, 1/2)`` and 1 on
    ``[1/2 + δ, 1)``: the piece of width ``δ`` holds one member too few.  Several such slivers
    of 2e-11 each failed a real two-class draw when each had to stay under 1e-11; together
    under :data:`SLIVERS` they are dropped, the rest renormalised, and the floors still decide."""
    from fairsched.lp.gale import SLIVERS, _pieces

    columns = Columns.from_sets([np.array([0, 2])], 3)
    keep = sp.csr_array((np.ones(1), np.array([2]), np.array([0, 1])), shape=(1, 3))
    for delta, met in ((3e-11, True), (10 * SLIVERS, False)):
        records = [(np.array([0]), np.array([0.0]), np.array([0.5]), np.array([0])),
                   (np.array([0]), np.array([0.5 + delta]), np.array([1.0]), np.array([1]))]
        made = _pieces(columns, np.array([1.0]), keep, records, np.array([0.5 - 1e-10, 0.5 - 1e-10, 1.0]))
        if not met:
            assert made is None
            continue
        sets, probabilities = made
        assert len(sets) == 2 and (sets.sizes() == 2).all()
        assert probabilities.sum() == pytest.approx(1.0, abs=1e-15)
        assert (sets.marginals(probabilities) >= np.array([0.5, 0.5, 1.0]) - 1e-9).all()


@pytest.mark.parametrize("short", [5e-10, 1e-8])
def test_a_cut_violated_within_the_lp_tolerance_is_repaired(short):
    """Workers 0, 1, 2 of equal size with floors 0.6, 0.6 and 0.1 in sets holding 3, 2 and 1 of
    them with weights 0.1 + s/2, 0.1 − s and 0.8 + s/2: Gale's inequality for the two largest
    floors is short by ``s/2`` (``1 + p_2 + p_3 = 1.2 − s/2``), every other holds.  The LP
    solver meets known cuts only to its feasibility tolerance (a two-class draw lost its
    distribution to 1.15e-10): within :data:`REPAIR` the distribution is realised with every
    floor met to 1e-9; beyond it, none is."""
    from fairsched.lp.gale import REPAIR

    columns = Columns.from_sets([np.array([0, 1, 2]), np.array([0, 1, 3]), np.array([0, 3, 4])], 5)
    weights = np.array([0.1 + short / 2, 0.1 - short, 0.8 + short / 2])
    groups = np.array([0, 0, 0, 1, 2])
    r = np.array([0.6, 0.6, 0.1, 0.5, 0.5])
    counts = group_counts(columns, groups, 3).tocsc()
    assert [j for _, j, _ in violated_cuts(counts, weights, groups, r, set())] == [2]
    made = realise(columns, weights, groups, r)
    if short / 2 > REPAIR:
        assert made is None
        return
    assert made is not None
    check_realised(columns, weights, groups, r, made)
