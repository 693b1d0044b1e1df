"""The accuracy pricing's best single swaps (its local search and extra columns) and the
distinct, ranked columns every pricing returns."""

from __future__ import annotations

import numpy as np
import pytest

from fairsched.lp.pricing.accuracy import AccuracyPricing
from fairsched.lp.pricing.base import ranked
from fairsched.utilities import AccuracyUtility


def _sizes(shape: str, rng: np.random.Generator, n: int) -> np.ndarray:
    if shape == "two classes":  # integer sizes: many workers share each size
        return np.where(rng.random(n) < 0.1, rng.uniform(500, 2000, n), rng.uniform(20, 40, n)).round()
    if shape == "equal sizes":
        return np.full(n, 100.0)
    return (rng.pareto(1.2, n) + 1.0) * 20.0  # all distinct


def _all_swaps(pricing: AccuracyPricing, mask: np.ndarray, lam: np.ndarray) -> np.ndarray:
    """``g(s − L_out + L_in) − g(s) + λ_in − λ_out`` of every (member, outsider) pair."""
    inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
    s = float(pricing.sizes @ mask)
    return (pricing.g(s - pricing.sizes[inside][:, None] + pricing.sizes[outside][None, :]) - pricing.g(s)
            - lam[inside][:, None] + lam[outside][None, :]).ravel()


@pytest.mark.parametrize("shape", ["two classes", "equal sizes", "heavy tail"])
def test_best_swaps_are_the_best_of_every_pair(shape):
    """The ``count`` best swaps found among the members of least ``λ`` and the outsiders of
    largest ``λ`` of each size are those of every pair (brute force), on tied and distinct
    sizes, for 1, 7 and 50 swaps, at prices drawn in turn (the order by size and price is
    kept between calls) and after the same price array is changed in place."""
    rng = np.random.default_rng({"two classes": 4, "equal sizes": 5, "heavy tail": 6}[shape])
    n, k = 400, 30
    sizes = _sizes(shape, rng, n)
    pricing = AccuracyPricing(AccuracyUtility(sizes), k)
    lam = np.zeros(n)
    for trial in range(8):
        lam[:] = rng.exponential(1e-4, n) * (rng.random(n) < 0.8)  # in place: the same array
        mask = np.zeros(n, dtype=bool)
        mask[rng.choice(n, k, replace=False)] = True
        every = np.sort(_all_swaps(pricing, mask, lam))[::-1]
        for count in (1, 7, 50):
            found = pricing._best_swaps(mask, lam, count)
            assert len(found) == count
            gains = np.array([gain for gain, _, _ in found])
            np.testing.assert_allclose(gains, every[:count], rtol=0.0, atol=1e-15)
            for gain, out, into in found:
                assert mask[out] and not mask[into]
                s = float(sizes @ mask)
                assert gain == pytest.approx(float(pricing.g(s - sizes[out] + sizes[into]) - pricing.g(s))
                                             + lam[into] - lam[out], abs=1e-15)


def test_ranked_keeps_each_set_once_best_first():
    """``ranked`` drops repeated sets (keeping the first), orders by ``f + λ`` and keeps at most
    ``limit``; its bound is at least the best column's value."""
    rng = np.random.default_rng(7)
    n = 50
    distinct = rng.random((6, n)) < 0.3
    columns = np.vstack([distinct, distinct[[4, 1, 4]]])
    values = np.r_[rng.random(6), 0.0, 0.0, 0.0]  # repeats carry other values: the first is kept
    lam = rng.random(n) * 0.01
    result = ranked(columns, values, lam, limit=4, upper_bound=-1.0, exact=False)
    objective = values[:6] + distinct @ lam
    order = np.argsort(-objective)[:4]
    np.testing.assert_array_equal(result.columns, distinct[order])
    np.testing.assert_array_equal(result.values, values[order])
    assert result.upper_bound == pytest.approx(objective.max())
