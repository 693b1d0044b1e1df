"""PropensityWeightedAccuracy: formula, reductions, gains, submodularity, config, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from fairsched.errors import FairschedError, InstanceError
from fairsched.propensity import ipw_shares
from fairsched.utilities import (
    UTILITY_KINDS,
    AccuracyUtility,
    PropensityWeightedAccuracy,
    check_submodular,
    utility_from_config,
)


def instance(seed: int = 0, n: int = 9, J: int = 3, transfer: float = 0.2, low: int = 0, **curve):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(low, 300, size=(n, J)).astype(float)
    sizes[np.arange(n), rng.integers(0, J, size=n)] += 50     # every worker has a home stratum
    shares = rng.dirichlet(np.ones(J))
    return PropensityWeightedAccuracy(sizes, shares, transfer, **curve)


def naive_value(f: PropensityWeightedAccuracy, S) -> float:
    """The formula written out per set, with loops."""
    S = list(S)
    if not S:
        return 0.0
    total = 0.0
    for j in range(f.strata):
        m = 0.0
        for u in S:
            m += f.sizes[u, j] + f.transfer * sum(f.sizes[u, jj] for jj in range(f.strata) if jj != j)
        total += f.shares[j] * ((1 - f.a[j]) - f.b[j] * m ** f.c[j])
    return total


def all_masks(n: int) -> np.ndarray:
    return np.array(list(itertools.product([False, True], repeat=n)))


def test_registered_as_a_utility_kind():
    assert UTILITY_KINDS["propensity-accuracy"] is PropensityWeightedAccuracy


def test_one_stratum_is_exactly_the_accuracy_utility():
    sizes = np.array([3.0, 50.0, 7.0, 120.0, 1.5, 60.0])
    for transfer in (0.0, 0.4, 1.0):
        f = PropensityWeightedAccuracy(sizes[:, None], [1.0], transfer, a=0.1, b=0.7, c=-0.3)
        g = AccuracyUtility(sizes, a=0.1, b=0.7, c=-0.3)
        masks = all_masks(sizes.size)
        np.testing.assert_array_equal(f.values(masks), g.values(masks))
        for S in ([], [1], [0, 3, 5]):
            np.testing.assert_array_equal(f.gains(S), g.gains(S))
        assert f.submodularity_problem() == g.submodularity_problem()


def test_full_transfer_with_equal_curves_is_the_accuracy_utility():
    f = instance(1, transfer=1.0, a=0.02, b=0.4, c=-0.25)
    g = AccuracyUtility(f.sizes.sum(axis=1), a=0.02, b=0.4, c=-0.25)
    masks = all_masks(f.n)
    np.testing.assert_allclose(f.values(masks), g.values(masks), rtol=0, atol=1e-15)
    np.testing.assert_allclose(f.gains([2, 4]), g.gains([2, 4]), rtol=0, atol=1e-15)


def test_values_match_the_formula_per_set():
    f = instance(2, n=7, a=[0.05, 0.1, 0.0], b=[0.5, 0.3, 0.8], c=[-0.2, -0.5, -0.3])
    masks = all_masks(f.n)
    expected = [naive_value(f, np.flatnonzero(m)) for m in masks]
    np.testing.assert_allclose(f.values(masks), expected, rtol=1e-12, atol=1e-12)
    assert f.value([]) == 0.0
    assert f.value([0, 3]) == pytest.approx(naive_value(f, [0, 3]))


def test_shares_weight_the_strata():
    sizes = np.array([[100.0, 1.0], [1.0, 100.0]])
    heavy_first = PropensityWeightedAccuracy(sizes, [0.9, 0.1])
    heavy_second = PropensityWeightedAccuracy(sizes, [0.1, 0.9])
    assert heavy_first.value([0]) > heavy_first.value([1])
    assert heavy_second.value([1]) > heavy_second.value([0])
    g = heavy_first.gains([])
    assert g[0] > g[1]


@pytest.mark.parametrize("seed", range(4))
def test_gains_are_value_differences(seed):
    f = instance(seed, n=10)
    rng = np.random.default_rng(seed)
    for S in ([], [3], sorted(rng.choice(10, 4, replace=False).tolist()), list(range(9))):
        expected = np.array([f.value(sorted(set(S) | {u})) - f.value(S) for u in range(f.n)])
        np.testing.assert_allclose(f.gains(S), expected, rtol=1e-10, atol=1e-13)
        assert np.all(f.gains(S)[S] == 0)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 10_000), st.floats(0.0, 1.0), st.integers(1, 4))
def test_monotone_submodular_when_sizes_are_not_tiny(seed, transfer, J):
    # a zero entry with transfer near 0 is a tiny effective size: excluded by low=1
    f = instance(seed, n=8, J=J, transfer=transfer, low=1)
    assert f.submodularity_problem() is None
    report = check_submodular(f, trials=300, seed=seed)
    assert report, report.violation


def test_tiny_sizes_are_reported_and_really_violate():
    f = PropensityWeightedAccuracy([[0.01, 0.01], [0.02, 0.01], [0.01, 0.03]], [0.5, 0.5], 0.5)
    problem = f.submodularity_problem()
    assert problem is not None and problem.startswith("not monotone")
    assert not check_submodular(f, trials=200)
    g = PropensityWeightedAccuracy([[1.0, 1.0], [1.0, 2.0]], [0.5, 0.5], 0.0, a=0.05, b=0.9, c=-1.2)
    problem = g.submodularity_problem()
    assert problem is not None and problem.startswith("not submodular")
    assert not check_submodular(g, trials=500)


def test_config_round_trip():
    f = instance(3, a=[0.05, 0.1, 0.0], b=0.4, c=[-0.2, -0.5, -0.3])
    table = f.to_config()
    assert table["kind"] == "propensity-accuracy" and table["b"] == 0.4
    tomli_w.dumps({"utility": table})                       # TOML-serialisable
    for g in (utility_from_config(table), PropensityWeightedAccuracy.from_config(table, n=f.n)):
        assert g.to_config() == table
        masks = all_masks(f.n)
        np.testing.assert_array_equal(g.values(masks), f.values(masks))


BASE = {"kind": "propensity-accuracy", "sizes": [[10.0, 5.0], [1.0, 20.0], [8.0, 8.0]],
        "shares": [0.6, 0.4], "transfer": 0.1}


@pytest.mark.parametrize("change, n, key, fragment", [
    ({"shares": [0.6, 0.5]}, None, "shares", "sum to 1.1, expected 1"),
    ({"shares": [1.2, -0.2]}, None, "shares", "entry 1 is -0.2, expected >= 0"),
    ({"shares": [0.2, 0.3, 0.5]}, None, "shares", "has 3 entries but sizes has 2 strata"),
    ({"sizes": [10.0, 5.0, 1.0]}, None, "sizes", "one row per worker and one column per stratum"),
    ({"sizes": [[10.0, 5.0], [1.0, 20.0]]}, 3, "sizes", "has 2 rows, expected 3 (one per worker)"),
    ({"sizes": [[10.0, -5.0], [1.0, 20.0], [8.0, 8.0]]}, None, "sizes", "entry [0][1] is -5.0"),
    ({"sizes": [[10.0, 0.0], [1.0, 20.0], [8.0, 8.0]], "transfer": 0.0}, None, "sizes",
     "worker 0 has no data usable for stratum 1"),
    ({"sizes": "abc"}, None, "sizes", "must be"),
    ({"transfer": 1.5}, None, "transfer", "expected a factor in [0, 1]"),
    ({"transfer": -0.1}, None, "transfer", "expected >= 0"),
    ({"c": 0.2}, None, "c", "expected < 0"),
    ({"b": [0.5, -0.5]}, None, "b[1]", "expected > 0"),
    ({"a": [0.1, 0.1, 0.1]}, None, "a", "has 3 entries, expected 2 (one per stratum)"),
    ({"shares": None}, None, "shares", "missing key"),
    ({"share": [0.5, 0.5]}, None, "share", "unknown key"),
])
def test_bad_input_names_the_key(change, n, key, fragment):
    table = {**BASE, **change}
    if change.get("shares", 0) is None:
        del table["shares"]
    with pytest.raises(InstanceError) as info:
        utility_from_config(table, n)
    assert key in str(info.value) and fragment in str(info.value), str(info.value)


def test_ipw_shares_helper():
    labels = np.array([0, 0, 1, 2, 2, 2])
    p = np.array([0.5, 0.5, 0.1, 1.0, 1.0, 1.0])
    np.testing.assert_allclose(ipw_shares(labels, p), np.array([4, 10, 3]) / 17)
    np.testing.assert_allclose(ipw_shares(labels, np.ones(6)), [2 / 6, 1 / 6, 3 / 6])
    with pytest.raises(FairschedError, match="propensities"):
        ipw_shares(labels, [0.5, 0.5, 0.0, 1, 1, 1])
    with pytest.raises(FairschedError, match="labels"):
        ipw_shares([0, 5], [0.5, 0.5], strata=3)
    with pytest.raises(FairschedError, match="propensities"):
        ipw_shares(labels, p[:-1])
    f = PropensityWeightedAccuracy(np.ones((6, 3)) * 10, ipw_shares(labels, p))
    assert f.shares.sum() == pytest.approx(1)
