"""The accuracy pricing's Lagrangian bound: the candidate filter inside a bracket drops no top set."""

from __future__ import annotations

import numpy as np
import pytest

import fairsched.lp.pricing.accuracy as accuracy
from fairsched.lp.pricing.accuracy import AccuracyPricing, _Sub
from fairsched.utilities import AccuracyUtility


@pytest.mark.parametrize("shape", ["two classes", "heavy tail", "equal sizes"])
def test_filtered_lagrangian_equals_the_unfiltered_one(shape, monkeypatch):
    """``min_η B(η)`` and the trail's top sets with the bracket's candidate filter equal those
    computed over every worker (the filter switched off by an infinite round-off margin), on
    bimodal, heavy-tailed and tied sizes, at random prices, from the root and from a node
    with some workers fixed in."""
    rng = np.random.default_rng({"two classes": 1, "heavy tail": 2, "equal sizes": 3}[shape])
    n, k = 3000, 60
    if shape == "two classes":
        sizes = np.where(rng.random(n) < 0.05, rng.uniform(5000, 20000, n), rng.uniform(20, 200, n)).round()
    elif shape == "heavy tail":
        sizes = (rng.pareto(1.2, n) + 1.0) * 20.0
    else:
        sizes = np.full(n, 100.0)
    pricing = AccuracyPricing(AccuracyUtility(sizes), k)
    for trial in range(6):
        lam = rng.exponential(1e-4, n) * (rng.random(n) < 0.7)
        fixed = rng.choice(n, 5, replace=False) if trial % 2 else np.zeros(0, dtype=np.int64)
        items = np.setdiff1d(np.arange(n), fixed)
        sub = _Sub(items, k - fixed.size, float(sizes[fixed].sum()), float(lam[fixed].sum()))
        bound, trail = pricing._lagrangian(sub, lam)
        with monkeypatch.context() as patch:
            patch.setattr(accuracy, "_FILTER_TOLERANCE", np.inf)
            plain, plain_trail = pricing._lagrangian(sub, lam)
        assert bound == pytest.approx(plain, rel=1e-12, abs=1e-15)
        for (eta, value, top), (plain_eta, plain_value, plain_top) in zip(trail[:3], plain_trail[:3]):
            assert eta == plain_eta and value == pytest.approx(plain_value, rel=1e-12, abs=1e-15)
            assert top.size == sub.k and np.unique(top).size == sub.k
            # the same top-k values at that slope (the sets may differ only among ties)
            w = eta * sizes[items] + lam[items]
            assert np.allclose(np.sort(w[top]), np.sort(w[plain_top]), rtol=1e-14, atol=0.0)


@pytest.mark.parametrize("seed", range(8))
def test_quick_pricing_bounds_the_maximum_and_prices_its_columns_truly(seed):
    """``quick`` (no branch and bound): its upper bound is at or above the maximum over every
    k-set (brute force here), it says ``exact`` only when its best column attains that
    maximum, and each column's value is ``f`` of the set; ``price`` attains the maximum."""
    from itertools import combinations

    rng = np.random.default_rng(seed)
    n, k = 12, 4
    sizes = np.where(rng.random(n) < 0.3, rng.uniform(300, 900, n), rng.uniform(10, 60, n)).round()
    utility = AccuracyUtility(sizes)
    lam = rng.exponential(0.02, n) * (rng.random(n) < 0.7)
    masks = np.zeros((0, n), dtype=bool)
    for members in combinations(range(n), k):
        row = np.zeros((1, n), dtype=bool)
        row[0, list(members)] = True
        masks = np.vstack([masks, row])
    truth = float((utility.values(masks) + masks @ lam).max())
    pricing = AccuracyPricing(utility, k, max_columns=10)
    quick, exact = pricing.quick(lam), pricing.price(lam)
    assert quick.upper_bound >= truth - 1e-12
    assert exact.exact and exact.upper_bound == pytest.approx(truth, rel=1e-12)
    assert (quick.columns.sum(axis=1) == k).all()
    np.testing.assert_allclose(quick.values, utility.values(quick.columns), rtol=1e-14)
    best = float(quick.values[0] + quick.columns[0] @ lam)
    if quick.exact:
        assert best == pytest.approx(truth, rel=1e-12)
