"""The balanced decomposition behind the accuracy utility's starting pool
(:mod:`fairsched.lp.pricing.balanced`).

Whatever stops it (its end, the work cap, the deadline), the distribution it returns has
``k``-sets only, probabilities summing to 1 and marginals equal to ``x`` (a property test over
random sizes and marginals, ``Σ r = k`` with zeros and ones included); Jensen's bound it is
measured against is an upper bound on ``U_opt`` (enumeration); on pinned floors with
heavy-tailed sizes it reaches that bound where the systematic sample does not, and column
generation then certifies ``U_opt`` at once and still equals enumeration on small cases.
The trades that fit a step's remainder (many pairs at once towards the band, the uneven
ones where no pair straddles it) move it as far as they should and no further (property
tests), and large workers are filled largest first.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fairsched.lp.pricing.accuracy import AccuracyPricing
from fairsched.lp.pricing.balanced import (
    _Fractional,
    _large,
    _move,
    _towards,
    _trades,
    balanced_columns,
    balanced_pool,
    jensen_bound,
    level_classes,
    level_duals,
)
from fairsched.lp.pricing.initial import column_values, initial_pool, starting_point
from fairsched.lp.solve import optimum
from fairsched.problem import Problem
from fairsched.solvers import k_subset_masks
from fairsched.utilities import AccuracyUtility


def marginals_of(sizes: np.ndarray, x: np.ndarray, k: int, **options) -> tuple[np.ndarray, np.ndarray]:
    """Checks the decomposition's invariants; returns each set's total size and probability."""
    columns, probabilities = balanced_columns(sizes, x, k, **options)
    assert (columns.sizes() == k).all()
    assert (probabilities > 0).all() and abs(probabilities.sum() - 1.0) <= 1e-12
    np.testing.assert_allclose(columns.marginals(probabilities), x, rtol=0, atol=1e-12)
    assert len(np.unique(columns.hashes())) == len(columns)  # equal sets merged
    return columns.dot(sizes), probabilities


def pinned(n: int, k: int, seed: int, *, zeros: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """Pareto sizes (index 1.2, scale 20, truncated at 2,500, a third of the ``L·r`` of
    ``n = 1,000``, ``k = 100``) and floors summing to exactly ``k`` (a share of them 0), all
    below 1."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum((rng.pareto(1.2, n) + 1.0) * 20.0, 2500.0)
    r = np.where(rng.random(n) < zeros, 0.0, rng.uniform(0.5, 1.0, n))
    r *= k / r.sum()
    assert r.max() < 1
    return sizes, r


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 30), st.data())
def test_marginals_are_exact_whatever_the_sizes_and_floors(n, data):
    k = data.draw(st.integers(1, n - 1))
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    sizes = data.draw(st.sampled_from(["equal", "ties", "spread", "pareto"]))
    L = {"equal": np.full(n, 3.0), "ties": rng.integers(1, 4, n).astype(float),
         "spread": rng.uniform(1, 1000, n), "pareto": (rng.pareto(1.0, n) + 1) * 10}[sizes]
    x = rng.uniform(0, 1, n)
    x[rng.random(n) < 0.2] = 0.0
    x[rng.random(n) < 0.1] = 1.0
    ones = int((x == 1).sum())
    if ones > k:
        x[np.flatnonzero(x == 1)[k:]] = 0.5
        ones = k
    fractional = (x > 0) & (x < 1)
    if k - ones > fractional.sum():
        x = np.full(n, k / n)  # the drawn zeros and ones leave no room: spread k evenly
    elif k > ones:
        x[fractional] *= (k - ones) / x[fractional].sum()
        while (x > 1).any():  # cap at 1, spread the excess over the fractional ones
            over = x > 1
            x[over] = 1.0
            fractional = (x > 0) & (x < 1)
            x[fractional] *= (k - (x >= 1).sum()) / x[fractional].sum()
    else:
        x[fractional] = 0.0
    assert abs(x.sum() - k) < 1e-9
    marginals_of(L, x, k)
    marginals_of(L, x, k, work=n)  # one step, then the systematic sample of the rest


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(["ties", "spread"]))
def test_a_single_swap_keeps_the_outsiders_ordered_by_size_then_index(data, sizes):
    """:func:`_move` replaces one outsider by a member in place: the result is the sorted
    order (by size, then index) of the outsiders after the swap, whatever the sizes and ties."""
    L, members, outside = _members_and_outsiders(data, sizes)
    if not (members.size and outside.size):
        return
    taken = data.draw(st.integers(0, outside.size - 1))
    out = int(members[data.draw(st.integers(0, members.size - 1))])
    swapped = np.append(np.delete(outside, taken), out)
    expected = swapped[np.lexsort((swapped, L[swapped]))]
    spread = L[outside].copy()
    moved = outside.copy()
    _move(moved, spread, taken, out, float(L[out]))
    np.testing.assert_array_equal(moved, expected)
    np.testing.assert_array_equal(spread, L[expected])


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.data())
def test_the_fractional_record_drops_exactly_the_settled_workers(n, data):
    """:class:`_Fractional` keeps the workers with ``0 < y < 1`` by index and by size (then
    index) with their ``y`` and sizes; after a step it drops those now at 0 or 1 and adds those
    at 1 to ``ones``, as a fresh record of the new ``y`` would."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    L = rng.integers(1, 6, n).astype(float)  # ties, ordered by index
    y = rng.choice([0.0, 0.3, 0.7, 1.0], n)
    by_size = np.argsort(L, kind="stable")
    record = _Fractional.of(L, y, by_size)
    ones = np.flatnonzero(y >= 1.0)
    moved = rng.choice([0.0, 0.4, 1.0], record.ids.size)
    y[record.ids] = moved
    ones = record.settle(moved, ones)
    fresh = _Fractional.of(L, y, by_size)
    for name in ("ids", "y", "sizes", "by_size", "sizes_by_size", "free"):
        np.testing.assert_array_equal(getattr(record, name), getattr(fresh, name))
    np.testing.assert_array_equal(ones, np.flatnonzero(y >= 1.0))


def _members_and_outsiders(data, sizes: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sizes ``L`` and a random split of the workers into members of ``A`` and outsiders,
    the outsiders sorted by size (then index), as :func:`_vertex` keeps them."""
    n = data.draw(st.integers(2, 40))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    L = {"ties": rng.integers(1, 4, n).astype(float), "spread": rng.uniform(1, 1000, n),
         "pareto": (rng.pareto(1.0, n) + 1) * 10}[sizes]
    inside = rng.random(n) < data.draw(st.floats(0.05, 0.95))
    members = np.flatnonzero(inside)
    outside = np.flatnonzero(~inside)
    return L, members, outside[np.argsort(L[outside], kind="stable")]


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(["ties", "spread", "pareto"]), st.floats(-3000, 3000))
def test_bulk_trades_approach_the_target_without_passing_it(data, sizes, target):
    L, members, outside = _members_and_outsiders(data, sizes)
    remainder = float(data.draw(st.floats(-5000, 5000)))
    out, into = _towards(L, members, outside, L[outside], remainder, target)
    assert out.size == into.size and np.isin(out, members).all() and np.isin(into, outside).all()
    moved = remainder + float(L[out].sum() - L[into].sum())
    low = remainder < target
    assert (remainder <= moved <= target) if low else (target <= moved <= remainder)
    # maximal: the next pair in the same order would pass the target or not move towards it,
    # once the members (below) or outsiders (above) that pass it traded alone are set aside
    order = members[np.argsort(-L[members] if low else L[members], kind="stable")]
    others = outside if low else outside[::-1]
    if order.size and others.size:
        if low:
            order = order[L[order] - L[others[0]] <= target - remainder]
        else:
            others = others[L[order[0]] - L[others] >= target - remainder]
    assert np.isin(out, order).all() and np.isin(into, others).all()
    if out.size < min(order.size, others.size):
        step = L[order[out.size]] - L[others[out.size]]
        assert (step <= 0 or moved + step > target) if low else (step >= 0 or moved + step < target)


def test_bulk_trades_go_round_a_member_too_large_to_trade():
    """A member of size 19,265 among members of 180 with ``R`` 1,500 short of the target: the
    giant for the smallest outsider alone would pass the target by far, so it stays and the
    small members are traded (two-class draws: stopping at it left each step to single swaps)."""
    L = np.array([19_265.0] + [180.0] * 10 + [30.0] * 20)
    members, outside = np.arange(11), np.arange(11, 31)
    out, into = _towards(L, members, outside, L[outside], -1_500.0, 100.0)
    assert 0 not in out and out.size == 10 and into.size == 10
    assert -1_500.0 + float(L[out].sum() - L[into].sum()) == 0.0
    # above the target, an outsider too large to take in is left out
    L2 = np.array([50.0] * 5 + [19_265.0] + [150.0] * 10)
    outside2 = np.arange(5, 16)[np.argsort(L2[5:], kind="stable")]
    out2, into2 = _towards(L2, np.arange(5), outside2, L2[outside2], 1_000.0, 500.0)
    assert 5 not in into2 and out2.size == 5 and 1_000.0 + float(L2[out2].sum() - L2[into2].sum()) == 500.0


@settings(max_examples=300, deadline=None)
@given(st.data(), st.sampled_from(["ties", "spread", "pareto"]), st.booleans())
def test_uneven_trades_stop_once_the_remainder_is_among_the_other_sizes(data, sizes, low):
    L, members, outside = _members_and_outsiders(data, sizes)
    assume(outside.size > 0)
    # a remainder outside the outsiders' sizes, on the side ``low`` says
    gap = float(data.draw(st.floats(0.0, 5000.0)))
    remainder = float(L[outside[0]]) - 1.0 - gap if low else float(L[outside[-1]]) + 1.0 + gap
    places = data.draw(st.integers(1, members.size + 1))
    out, into = _trades(L, members, outside, low, remainder, places)
    assert out.size == into.size <= places
    moved = remainder + float(L[out].sum() - L[into].sum())
    others = np.concatenate([np.setdiff1d(outside, into), out])
    within = L[others].min() <= moved <= L[others].max() if others.size else False
    order = members[np.argsort(-L[members] if low else L[members], kind="stable")]
    ends = outside if low else outside[::-1]
    can_go_on = out.size < min(members.size, ends.size, places) and (
        L[order[out.size]] > L[ends[out.size]] if low else L[order[out.size]] < L[ends[out.size]])
    # it stops when the remainder is among the other sizes, or when no trade helps any more
    assert within or not can_go_on
    # and it does not go on once it is among them: one trade fewer was still outside
    if out.size:
        before = moved - float(L[out[-1]] - L[into[-1]])
        others_before = np.concatenate([np.setdiff1d(outside, into[:-1]), out[:-1]])
        assert not L[others_before].min() <= before <= L[others_before].max()


def test_integral_marginals_give_their_one_set():
    x = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    columns, probabilities = balanced_columns(np.arange(1.0, 6.0), x, 3)
    assert columns.to_sets()[0].tolist() == [0, 2, 4] and probabilities.tolist() == [1.0]


def test_a_deadline_already_past_leaves_an_exact_systematic_sample():
    sizes, r = pinned(200, 20, 0)
    totals, _ = marginals_of(sizes, r, 20, deadline=time.perf_counter() - 1.0)
    assert totals.size > 1


@pytest.mark.parametrize("seed", range(4))
def test_jensen_bound_is_above_the_optimum(seed):
    rng = np.random.default_rng(seed)
    n, k = 10, 4
    utility = AccuracyUtility(rng.uniform(10, 500, n))
    r = rng.dirichlet(np.ones(n)) * k * rng.choice([0.6, 1.0])
    r = np.minimum(r, 1.0)
    _, x, _ = starting_point(utility, k, r)
    exact = optimum(Problem(utility, k, r), method="enumeration")
    bound = jensen_bound(utility, x)
    assert bound >= exact.value - 1e-12
    # the decomposition is a feasible distribution, so never above U_opt
    pool, _ = balanced_pool(utility, k, r, gap=1e-6)
    assert pool.value() <= exact.value + 1e-12
    assert (pool.columns.marginals(pool.probabilities) >= r - 1e-12).all()


@pytest.mark.parametrize("seed", range(3))
def test_pinned_heavy_tailed_floors_reach_jensen_bound(seed):
    """n = 1,000, k = 100, Σ r = k, Pareto sizes that fit in sets of size L·r (a worker above
    it is in sets larger than L·r, and Jensen's bound is out of reach): the sample misses
    Jensen's bound by 1e-5 or more, the decomposition by less than 1e-9, and the optimum is
    certified at iteration 0 (before, "tailing-off" at a gap of 4.8e-5 after 36 s)."""
    n, k = 1000, 100
    sizes, r = pinned(n, k, seed)
    utility = AccuracyUtility(sizes)
    _, x, _ = starting_point(utility, k, r)
    bound = jensen_bound(utility, x)
    assert sizes.max() + np.sort(sizes[x > 0])[: k - 1].sum() < sizes @ x
    sample = initial_pool(utility, k, r)
    assert bound - sample.value() > 1e-5 * bound
    totals, probabilities = marginals_of(sizes, x, k)
    value = probabilities @ utility.curve(totals)
    assert bound - value < 1e-9 * bound
    result = optimum(Problem(utility, k, r))
    assert result.status == "optimal" and result.iterations == 0
    assert result.relative_gap <= 1e-6 and result.upper_bound <= bound + 1e-15


def test_large_workers_take_the_smallest_fill_largest_first():
    """Pareto sizes (index 1.2, scale 20) with six *large* workers (1,514 to 2,757 against a
    level of 3,843: no two fit one set, each fits alone) and uniform floors summing to
    ``k``: the largest of them needs the 49 smallest others, so the decomposition must fill
    the large workers' sets from the largest down while the small workers' mass is all
    there.  Taken in order of ``y`` the smaller ones used it up and the decomposition ended
    1.1e-4 below Jensen's bound; largest first it reaches the bound to round-off."""
    n, k = 1000, 50
    rng = np.random.default_rng(1000)
    sizes = (rng.pareto(1.2, n) + 1.0) * 20.0
    r = rng.uniform(0.0, 1.0, n)
    r *= k / r.sum()
    utility = AccuracyUtility(sizes)
    _, x, _ = starting_point(utility, k, r)
    assert level_classes(sizes, x, k) is None  # every worker fits alone: no giant
    large = np.flatnonzero(_large(sizes, x, k))
    assert large.size == 6
    # the largest one's sets are at the level only with nearly the smallest fill
    assert sizes[large].max() + np.sort(sizes)[: k - 1].sum() > 0.95 * (sizes @ x)
    totals, probabilities = marginals_of(sizes, x, k)
    bound = jensen_bound(utility, x)
    assert bound - probabilities @ utility.curve(totals) < 1e-9 * bound


def test_nothing_to_win_returns_none():
    sizes, r = pinned(300, 30, 1)
    utility = AccuracyUtility(sizes)
    _, x, _ = starting_point(utility, 30, r)
    bound = jensen_bound(utility, x)
    assert balanced_pool(utility, 30, r, beat=bound, gap=1e-6) == (None, None)
    assert balanced_pool(utility, 30, r, beat=bound * (1 - 0.9e-6), gap=1e-6) == (None, None)
    assert balanced_pool(utility, 30, r, beat=bound * (1 - 2e-6), gap=1e-6)[0] is not None


@pytest.mark.parametrize("seed", range(6))
def test_column_generation_from_the_balanced_start_equals_enumeration(seed):
    rng = np.random.default_rng(100 + seed)
    n, k = 12, 4
    sizes = (rng.pareto(1.0, n) + 1) * 20
    r = rng.dirichlet(np.full(n, 0.7)) * k
    r = np.minimum(r, 0.95)
    r *= rng.choice([0.9, 1.0]) * k / r.sum() if (r * k / r.sum()).max() < 1 else 1.0
    problem = Problem(AccuracyUtility(sizes), k, r)
    exact = optimum(problem, method="enumeration")
    generated = optimum(problem, method="column-generation", gap=1e-9)
    assert abs(generated.value - exact.value) <= 1e-7
    assert generated.upper_bound >= exact.value - 1e-9


def test_values_of_the_columns_match_the_utility():
    sizes, r = pinned(60, 6, 2)
    utility = AccuracyUtility(sizes)
    pool, _ = balanced_pool(utility, 6, r, gap=1e-6)
    np.testing.assert_allclose(pool.values, column_values(utility, pool.columns), rtol=0, atol=0)
    np.testing.assert_allclose(pool.values, utility.values(pool.columns.to_masks()), rtol=1e-15)


def with_giant(n: int, k: int, seed: int, giant: float = 30_000.0, floor: float = 0.05):
    """:func:`pinned`, and worker 0 made a giant (three times ``L·r`` or more) at floor 0.05."""
    sizes, r = pinned(n, k, seed)
    sizes[0] = giant
    r[0] = 0.0
    r *= (k - floor) / r.sum()
    r[0] = floor
    return sizes, r


def test_level_classes_split_the_marginals_exactly():
    n, k = 1000, 100
    sizes, r = with_giant(n, k, 0)
    utility = AccuracyUtility(sizes)
    _, x, _ = starting_point(utility, k, r)
    classes = level_classes(sizes, x, k)
    assert classes is not None and classes.giants.tolist() == [0]
    share = x[classes.giants]
    mixed = share @ classes.fills + (1 - share.sum()) * classes.rest
    np.testing.assert_allclose(mixed, x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(classes.fills.sum(axis=1), k, rtol=1e-12)
    assert (classes.fills[:, 0] == 1).all() and classes.rest[0] == 0 and classes.rest.max() <= 1
    assert classes.level == pytest.approx(sizes @ classes.rest, rel=1e-12)
    # every other worker fits: it and the k − 1 smallest of the rest stay below the level
    smallest = np.sort(sizes[classes.rest > 1e-12])[: k - 1].sum()
    assert (sizes[classes.rest > 0] + smallest <= classes.level).all()
    # the giant's class is filled from the smallest workers
    fill = classes.fills[0].copy()
    fill[0] = 0
    assert sizes[fill > 0].max() <= np.sort(sizes[(x > 0) & (np.arange(n) > 0)])[200]
    assert level_classes(*pinned(n, k, 0), k) is None  # everyone fits: no classes


@pytest.mark.parametrize("seed", range(3))
def test_a_giant_is_certified_by_its_class_prices(seed):
    """A worker three times ``L·r``: Jensen's bound is out of reach (it overstates U_opt by
    about 2e-4); the classes' pool and prices meet within 1e-6 at once, where without them
    column generation ended "tailing-off" at 1e-3 (``benchmarks/bench_balanced.py``); the
    greedy classes' prices bound it too."""
    n, k = 1000, 100
    sizes, r = with_giant(n, k, seed)
    utility = AccuracyUtility(sizes)
    _, x, _ = starting_point(utility, k, r)
    pool, classes = balanced_pool(utility, k, r, gap=1e-6)
    pricing = AccuracyPricing(utility, k)
    # the class relaxation's prices (tests/test_class_relaxation.py), and the greedy classes'
    greedy = level_duals(pricing, r, level_classes(sizes, x, k))
    assert classes.giants[0] == 0 and classes.prices
    assert (greedy >= 0).all() and greedy[r == 0].max(initial=0) == 0
    greedy_bound = pricing.price(greedy).upper_bound - greedy @ r
    assert greedy_bound >= pool.value() - 1e-12
    bounds = []
    for prices in classes.prices:
        assert (prices >= 0).all() and prices[r == 0].max(initial=0) == 0
        priced = pricing.price(prices)
        assert priced.exact
        bounds.append(priced.upper_bound - prices @ r)
        assert bounds[-1] >= pool.value() - 1e-12
    bound = min(bounds)
    assert bound - pool.value() <= 1e-6 * pool.value() < jensen_bound(utility, x) - bound
    result = optimum(Problem(utility, k, r))
    assert result.status == "optimal" and result.relative_gap <= 1e-6


@pytest.mark.parametrize("seed", range(5))
def test_class_prices_bound_the_optimum_on_small_cases(seed):
    """n = 12, k = 3, one giant: the bound at the class prices, priced by brute force, is at
    or above U_opt from enumeration, and the pricing oracle finds that maximum."""
    rng = np.random.default_rng(seed)
    n, k = 12, 3
    sizes = rng.uniform(10, 60, n)
    sizes[0] = 2000.0
    r = np.full(n, (k - 0.2) / (n - 1))
    r[0] = 0.2
    utility = AccuracyUtility(sizes)
    _, x, _ = starting_point(utility, k, r)
    classes = level_classes(sizes, x, k)
    assert classes is not None and 0 in classes.giants
    pricing = AccuracyPricing(utility, k)
    prices = level_duals(pricing, r, classes)
    masks = k_subset_masks(n, k)
    brute = float((utility.values(masks) + masks @ prices).max())
    priced = pricing.price(prices)
    assert priced.upper_bound == pytest.approx(brute, rel=1e-12, abs=1e-12)
    exact = optimum(Problem(utility, k, r), method="enumeration")
    assert brute - prices @ r >= exact.value - 1e-12


@pytest.mark.parametrize("seed", range(40))
def test_classes_and_their_pool_keep_the_marginals_on_random_giants(seed):
    """Random sizes with a few outsized workers and random floors (pinned or not): whenever
    classes are formed they mix back to ``x`` exactly, and the pool built from them has
    ``k``-sets whose marginals are ``x`` and which meet the floors."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 60))
    k = int(rng.integers(2, n // 2 + 1))
    sizes = rng.uniform(1, 50, n)
    outsized = rng.choice(n, int(rng.integers(1, 4)), replace=False)
    sizes[outsized] *= rng.uniform(20, 200, outsized.size)
    r = rng.dirichlet(np.ones(n)) * k * rng.choice([0.7, 1.0])
    r = np.minimum(r, 0.9)
    utility = AccuracyUtility(sizes)
    _, x, _ = starting_point(utility, k, r)
    classes = level_classes(sizes, x, k)
    if classes is not None:
        share = x[classes.giants]
        np.testing.assert_allclose(share @ classes.fills + (1 - share.sum()) * classes.rest, x, atol=1e-12)
        assert classes.fills.max() <= 1 and classes.rest.max() <= 1 and classes.rest.min() >= 0
    pool, found = balanced_pool(utility, k, r)
    # the greedy classes are kept, or replaced by the class relaxation's; where every worker
    # fits, classes come only for workers too large to share a set, none of them a giant
    assert classes is None or (found is not None and found.any_giant())
    assert found is None or classes is not None or not found.any_giant()
    assert (pool.columns.sizes() == k).all()
    marginals = pool.columns.marginals(pool.probabilities)
    if found is None:
        np.testing.assert_allclose(marginals, x, atol=1e-11)
    assert (marginals >= r - 1e-11).all() and marginals.max() <= 1 + 1e-11
