"""Recoupling for the accuracy utility (:mod:`fairsched.lp.pricing.recoupling`) and its use
in ``optimum`` where column generation stops short of the gap.

The countermonotone coupling equals the best coupling a transport LP finds for a concave
``g`` (and the comonotone one is the worst); a recoupled distribution keeps every worker's
marginal and every set's size and is worth at least what it came from (property tests); a
small case pairs the parts the way worked out by hand; the passes stop at their target and
within their growth; and ``_recouple`` certifies a distribution whose sets pair their parts
badly, with the floors still met.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

import fairsched.lp.pricing.recoupling as recoupling_module
from fairsched.lp.pricing.initial import column_values
from fairsched.lp.pricing.recoupling import countermonotone, recouple, recoupled, split_sizes
from fairsched.lp.solve import _recouple, _Reported
from fairsched.problem import Problem
from fairsched.solvers.columns import Columns
from fairsched.utilities import AccuracyUtility


def _curve(total: np.ndarray) -> np.ndarray:
    return 0.95 - 0.5 * np.asarray(total, dtype=float) ** -0.2


def _best_coupling(coarse: np.ndarray, fine: np.ndarray, weights: np.ndarray) -> float:
    """``max E[sqrt(a + b)]`` over every coupling of the two weighted samples (a transport LP;
    a concave ``g`` more curved than the accuracy curve, whose differences the LP's
    tolerances would blur)."""
    m = weights.size
    worth = np.sqrt(coarse[:, None] + fine[None, :]).ravel()
    rows = np.zeros((2 * m, m * m))
    for i in range(m):
        rows[i, i * m:(i + 1) * m] = 1.0  # coarse atom i's weight
        rows[m + i, i::m] = 1.0  # fine atom i's weight
    solved = linprog(-worth, A_eq=rows, b_eq=np.concatenate([weights, weights]), bounds=(0, None),
                     method="highs")
    assert solved.status == 0
    return -solved.fun


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 7), st.integers(0, 2**32 - 1), st.booleans())
def test_the_countermonotone_coupling_is_the_best_one(m, seed, ties):
    rng = np.random.default_rng(seed)
    coarse = rng.integers(1, 4, m) * 1000.0 if ties else rng.uniform(100.0, 5000.0, m)
    fine = rng.integers(1, 4, m) * 30.0 if ties else rng.uniform(10.0, 500.0, m)
    weights = rng.dirichlet(np.ones(m))
    first, second, share = countermonotone(coarse, fine, weights)
    assert (share > 0).all()
    # each atom's weight is used once on each side
    np.testing.assert_allclose(np.bincount(first, weights=share, minlength=m), weights, atol=1e-15)
    np.testing.assert_allclose(np.bincount(second, weights=share, minlength=m), weights, atol=1e-15)
    assert share.size <= 2 * m - 1
    ours = float(share @ np.sqrt(coarse[first] + fine[second]))
    assert ours == pytest.approx(_best_coupling(coarse, fine, weights), rel=1e-9)
    # the comonotone coupling (largest with largest) is no better: the orientation matters
    same_first, same_second, same_share = countermonotone(coarse, -fine, weights)
    assert float(same_share @ np.sqrt(coarse[same_first] + fine[same_second])) <= ours + 1e-12


def test_weights_whose_sums_differ_by_round_off_pair_every_atom():
    weights = np.full(10, 0.1)
    first, second, share = countermonotone(np.arange(10.0), np.arange(10.0)[::-1].copy(), weights)
    np.testing.assert_allclose(np.bincount(first, weights=share, minlength=10), weights, atol=1e-15)
    np.testing.assert_allclose(np.bincount(second, weights=share, minlength=10), weights, atol=1e-15)
    assert first.max() < 10 and second.max() < 10


def test_a_large_coarse_part_takes_the_small_fine_part():
    # workers 0 and 1 are coarse (100, 60), 2 and 3 fine (50, 1): {0, 2} and {1, 3} pair the
    # largest coarse part with the largest fine part; recoupled: {0, 3} and {1, 2}
    sizes = np.array([100.0, 60.0, 50.0, 1.0])
    support, weights = recouple(Columns.from_sets([[0, 2], [1, 3]], 4), np.array([0.5, 0.5]), sizes, 60.0)
    assert sorted(map(tuple, support.to_sets())) == [(0, 3), (1, 2)]
    np.testing.assert_allclose(weights, [0.5, 0.5])
    # already paired that way: nothing to change
    again, _ = recouple(support, weights, sizes, 60.0)
    assert sorted(map(tuple, again.to_sets())) == [(0, 3), (1, 2)]


@settings(max_examples=150, deadline=None)
@given(st.integers(6, 30), st.data())
def test_recoupling_keeps_the_marginals_and_the_set_sizes_and_never_loses(n, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    k = data.draw(st.integers(2, n - 2))
    sizes = np.where(rng.random(n) < 0.3, rng.uniform(1000.0, 5000.0, n), rng.integers(10, 60, n).astype(float))
    m = data.draw(st.integers(1, 12))
    support = Columns.from_sets([rng.choice(n, k, replace=False) for _ in range(m)], n)
    weights = rng.dirichlet(np.ones(m))
    threshold = float(data.draw(st.sampled_from(sorted(set(sizes.tolist())))))
    before = float(weights @ _curve(support.dot(sizes)))
    after_support, after_weights = recouple(support, weights, sizes, threshold)
    assert (after_support.sizes() == k).all()
    assert all(np.unique(s).size == k for s in after_support.to_sets())
    np.testing.assert_allclose(after_support.marginals(after_weights), support.marginals(weights), atol=1e-14)
    assert float(after_weights @ _curve(after_support.dot(sizes))) >= before - 1e-14


def _bimodal(n: int = 60, k: int = 10, seed: int = 0) -> tuple[AccuracyUtility, np.ndarray]:
    rng = np.random.default_rng(seed)
    large = rng.random(n) < 0.2
    sizes = np.where(large, rng.integers(5000, 20000, n), rng.integers(20, 200, n)).astype(float)
    return AccuracyUtility(sizes), large


def test_the_passes_stop_at_their_target_and_within_their_growth():
    utility, _ = _bimodal()
    rng = np.random.default_rng(1)
    support = Columns.from_sets([rng.choice(utility.n, 10, replace=False) for _ in range(40)], utility.n)
    weights = rng.dirichlet(np.ones(40))
    values_of = lambda sets: column_values(utility, sets)  # noqa: E731
    start = float(weights @ values_of(support))
    full, full_weights, best, passes = recoupled(values_of, support, weights, utility.sizes)
    assert passes >= 1 and best > start
    assert best == pytest.approx(float(full_weights @ values_of(full)), abs=1e-15)
    assert full.nnz <= recoupling_module.MAX_GROWTH * support.nnz
    np.testing.assert_allclose(full.marginals(full_weights), support.marginals(weights), atol=1e-13)
    # a target just above the start: the first pass that reaches it is the last
    _, _, reached, one = recoupled(values_of, support, weights, utility.sizes, target=start + 1e-15)
    assert one == 1 and reached > start
    # a past deadline: nothing is tried
    same, _, unchanged, none = recoupled(values_of, support, weights, utility.sizes, deadline=0.0)
    assert none == 0 and same is support and unchanged == pytest.approx(start, abs=1e-15)


def test_the_split_sizes_include_the_gap_between_two_classes():
    utility, large = _bimodal()
    support = Columns.from_sets([np.arange(10), np.arange(10, 20)], utility.n)
    splits = split_sizes(support, np.array([0.5, 0.5]), utility.sizes)
    members = np.arange(20)
    assert float(utility.sizes[members][large[members]].min()) in splits
    assert splits == sorted(splits, reverse=True)
    assert min(splits) > utility.sizes[members].min()


def test_recouple_takes_a_distribution_that_certifies_the_gap():
    # four sets of one large and four small workers, the large parts paired with the fine
    # parts comonotonically (1000 with the four 20s, ..., 1480 with the four 140s): sizes
    # 1080 to 2040.  Paired the other way round every set has size 1560, the mean: Jensen's
    # bound at the marginals is reached
    sizes = np.array([1000.0, 1160.0, 1320.0, 1480.0] + [20.0] * 4 + [60.0] * 4 + [100.0] * 4 + [140.0] * 4)
    utility = AccuracyUtility(sizes)
    support = Columns.from_sets([np.concatenate([[i], np.arange(4 + 4 * i, 8 + 4 * i)]) for i in range(4)],
                                sizes.size)
    weights = np.full(4, 0.25)
    r = support.marginals(weights)
    problem = Problem(utility=utility, k=5, r=r)
    value = float(weights @ column_values(utility, support))
    jensen = float(utility.curve(np.array([sizes @ r]))[0])
    assert value < jensen - 1e-6
    reported = _Reported(value=value, upper_bound=jensen, support=support, probabilities=weights,
                         fairness_price=np.zeros(sizes.size), pricing_bound=jensen, master_fairness_price=None,
                         status="tailing-off", message="column generation stopped", iterations=3)
    _recouple(problem, reported, gap=1e-9, deadline=None)
    assert reported.status == "optimal"
    assert reported.value == pytest.approx(jensen, rel=1e-12)
    assert sorted(support.dot(sizes)) != [1560.0] * 4
    np.testing.assert_allclose(reported.support.dot(sizes), 1560.0)
    assert "recoupled" in reported.message and "column generation stopped" in reported.message
    np.testing.assert_allclose(reported.support.marginals(reported.probabilities), r, atol=1e-12)
    assert math.isclose(reported.probabilities.sum(), 1.0, abs_tol=1e-12)
