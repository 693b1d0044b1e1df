"""The class relaxation for the accuracy utility (:mod:`fairsched.lp.pricing.class_relaxation`).

Its value is an upper bound on ``U_opt`` (enumeration on small cases with giants), its
marginals meet the floors with each giant at 1 in its own class, and its prices, priced
exactly (brute force on small cases), bound ``U_opt`` from above.  On a heavy-tailed draw with
five giants its prices certify the optimum to 1e-9 where the greedy classes' prices
(:func:`~fairsched.lp.pricing.balanced.level_duals`) stop 3e-5 above it, and column
generation certifies that optimum at once.
"""

from __future__ import annotations

import numpy as np
import pytest

from fairsched.lp.pricing.accuracy import AccuracyPricing
from fairsched.lp.pricing.balanced import balanced_pool, level_classes, level_duals
from fairsched.lp.pricing.class_relaxation import class_relaxation
from fairsched.lp.pricing.initial import starting_point
from fairsched.lp.solve import optimum
from fairsched.problem import Problem
from fairsched.solvers import k_subset_masks
from fairsched.utilities import AccuracyUtility


def relax(utility: AccuracyUtility, k: int, r: np.ndarray):
    _, x, _ = starting_point(utility, k, r)
    classes = level_classes(utility.sizes, x, k)
    assert classes is not None
    starts = np.append(classes.fills @ utility.sizes, classes.level)
    relaxation = class_relaxation(utility, k, r, classes.giants, x[classes.giants], starts)
    assert relaxation is not None
    return classes, relaxation


def check_marginals(relaxation, n: int, k: int, r: np.ndarray) -> None:
    weights, fills, rest = relaxation.weights, relaxation.fills, relaxation.rest
    np.testing.assert_allclose(fills.sum(axis=1), k, rtol=1e-9)
    assert rest.sum() == pytest.approx(k, rel=1e-9)
    assert fills.min() >= 0 and fills.max() <= 1 and rest.min() >= 0 and rest.max() <= 1
    for i, giant in enumerate(relaxation.giants):
        assert fills[i, giant] == 1.0 and rest[giant] == 0.0
        assert weights[i] >= r[giant] - 1e-9
    others = np.setdiff1d(np.arange(n), relaxation.giants)
    assert (fills[:, relaxation.giants].sum(axis=0) == 1.0).all()  # no set holds two giants
    mixed = weights @ fills + (1.0 - weights.sum()) * rest
    assert (mixed[others] >= r[others] - 1e-9).all()
    assert relaxation.upper >= relaxation.value - 1e-12


def small_case(seed: int, giants: int, spare: float):
    rng = np.random.default_rng(seed)
    n, k = 11, 3
    sizes = rng.uniform(10, 60, n)
    sizes[:giants] = rng.uniform(3000, 4000, giants)
    r = np.full(n, 0.0)
    r[:giants] = rng.uniform(0.1, 0.25, giants)
    r[giants:] = (k - spare - r[:giants].sum()) / (n - giants)
    return AccuracyUtility(sizes), k, r


@pytest.mark.parametrize("spare", [0.0, 0.2])
@pytest.mark.parametrize("giants", [1, 2])
@pytest.mark.parametrize("seed", range(6))
def test_relaxation_and_its_prices_bound_the_optimum_on_small_cases(seed, giants, spare):
    """``n = 11``, ``k = 3``, one or two giants, floors pinned (``Σ r = k``) or ``0.2`` below: the relaxation's
    value and the bound at its prices (brute force over all 165 sets, which the pricing oracle
    matches) are at or above ``U_opt`` from enumeration, and neither is above the other by
    more than the tangents' slack."""
    utility, k, r = small_case(seed, giants, spare)
    n = utility.n
    _, relaxation = relax(utility, k, r)
    check_marginals(relaxation, n, k, r)
    exact = optimum(Problem(utility, k, r), method="enumeration")
    assert relaxation.value >= exact.value - 1e-12
    prices = relaxation.prices
    assert (prices >= 0).all()
    masks = k_subset_masks(n, k)
    brute = float((utility.values(masks) + masks @ prices).max())
    assert AccuracyPricing(utility, k).price(prices).upper_bound == pytest.approx(brute, rel=1e-12)
    bound = brute - prices @ r
    assert bound >= exact.value - 1e-12
    assert bound <= relaxation.upper + 1e-9


def heavy_tailed(k: int):
    """Pareto(1.2) sizes, ``n = 1,000``, floors pinned at ``k/n``: with ``k = 50`` five workers
    do not fit a set at the common level, with ``k = 100`` one."""
    rng = np.random.default_rng(1001)
    n = 1000
    sizes = (rng.pareto(1.2, n) + 1.0) * 20.0
    return AccuracyUtility(sizes), k, np.full(n, k / n)


@pytest.mark.parametrize("k, giants", [(50, 5), (100, 1)])
def test_prices_certify_where_the_greedy_classes_do_not(k, giants):
    utility, k, r = heavy_tailed(k)
    classes, relaxation = relax(utility, k, r)
    assert classes.giants.size == giants
    check_marginals(relaxation, utility.n, k, r)
    pricing = AccuracyPricing(utility, k)
    priced = pricing.price(relaxation.prices)
    # k = 100: the LP's duals tie 900 workers to round-off, and a child of the branch and
    # bound has a bound equal to the optimum (to round-off) that its top sets miss; without
    # the look-ahead at both children (AccuracyPricing._child) the search went depth first
    # into it and ran out of its budget, its bound 2.3e-3 above the maximum
    assert priced.exact
    bound = priced.upper_bound - relaxation.prices @ r
    assert bound <= relaxation.upper * (1 + 1e-9)
    pool, found = balanced_pool(utility, k, r, gap=1e-9)
    assert found is not None and found.prices
    assert bound - pool.value() <= 1e-8 * bound
    if k == 50:  # the greedy fills and their prices stop 3e-5 apart
        greedy = pricing.price(level_duals(pricing, r, classes))
        assert greedy.upper_bound - level_duals(pricing, r, classes) @ r - bound >= 1e-5 * bound
        share = classes.shares
        greedy_value = float(share @ utility.curve(classes.fills @ utility.sizes)
                             + (1 - share.sum()) * utility.curve(classes.level))
        assert relaxation.value - greedy_value >= 1e-6 * greedy_value


@pytest.mark.parametrize("seed", range(4))
def test_pricing_stays_exact_when_round_off_breaks_the_ties(seed):
    """The relaxation's prices at ``k = 100`` tie 900 workers; perturbed by 1e-15 (relative) the
    ties break at random, and the pricing must still certify the same maximum."""
    utility, k, r = heavy_tailed(100)
    _, relaxation = relax(utility, k, r)
    prices = relaxation.prices
    exact = AccuracyPricing(utility, k).price(prices)
    noise = np.random.default_rng(seed).uniform(-1e-15, 1e-15, prices.size)
    perturbed = AccuracyPricing(utility, k).price(np.maximum(prices * (1 + noise), 0.0))
    assert exact.exact and perturbed.exact
    assert perturbed.upper_bound == pytest.approx(exact.upper_bound, rel=1e-12)


def test_column_generation_certifies_five_giants_at_once():
    """Before the class relaxation this draw ended "tailing-off" at 3.4e-5 (the bound's gap)."""
    utility, k, r = heavy_tailed(50)
    result = optimum(Problem(utility, k, r))
    assert result.status == "optimal" and result.relative_gap <= 1e-6
    assert result.iterations == 0
