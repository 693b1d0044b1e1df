"""Tests of the multilinear extension: closed forms, exact enumeration, Monte Carlo."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from fairsched.errors import InstanceError
from fairsched.submodular.curve_sums import (
    BIN_HALF_WIDTH,
    SERIES_TOLERANCE,
    curve_sums_of,
    series_terms,
)
from fairsched.submodular.multilinear import (
    MultilinearEstimate,
    MultilinearOracle,
    multilinear,
    supported_methods,
)
from fairsched.utilities import (
    UTILITY_KINDS,
    AccuracyUtility,
    CallableUtility,
    ConcaveModular,
    Coverage,
    FacilityLocation,
    Mixture,
    Modular,
    PropensityWeightedAccuracy,
    utility_from_config,
)


def make_coverage(rng, n=8, elements=12):
    covers = [sorted(rng.choice(elements, size=rng.integers(0, 5), replace=False).tolist())
              for _ in range(n)]
    covers[0] = []  # a worker covering nothing
    return Coverage(covers, rng.uniform(0, 2, elements))  # some elements nobody covers


def make_facility(rng, n=8, points=6):
    sim = rng.uniform(0, 1, (points, n))
    sim[rng.random(sim.shape) < 0.3] = 0.0
    sim[0, :] = 0.0                 # a point nobody serves
    sim[1, :4] = 0.5                # ties within a row
    sim[2, :] = 0.25                # a fully tied row
    sim[3, 2] = sim[3, 5] = sim[3].max() + 0.1
    return FacilityLocation(sim)


def make_modular(rng, n=8):
    w = rng.uniform(0, 3, n)
    w[1] = 0.0
    return Modular(w)


def closed_form_utilities(rng, n=8):
    cov, fac, mod = make_coverage(rng, n), make_facility(rng, n), make_modular(rng, n)
    return [cov, fac, mod, Mixture([cov, fac, mod], [1.0, 2.0, 0.5])]


def test_points(rng, n):
    mixed = rng.random(n)
    mixed[rng.permutation(n)[: n // 3]] = 1.0
    mixed[rng.permutation(n)[: n // 3]] = 0.0
    ones_one_free = np.ones(n)
    ones_one_free[n // 2] = 0.3
    return [rng.random(n), mixed, np.ones(n), np.zeros(n), ones_one_free,
            np.full(n, 0.5), np.r_[1.0, 1.0, np.zeros(n - 2)]]


test_points.__test__ = False  # a helper, not a test


def naive(f, y):
    """Σ over all 2^n sets, one Python evaluation each: F and ∂F/∂y_u."""
    n = f.n
    value, grad = 0.0, np.zeros(n)
    for bits in itertools.product([False, True], repeat=n):
        S = [u for u in range(n) if bits[u]]
        prob = np.prod([y[u] if bits[u] else 1 - y[u] for u in range(n)])
        value += prob * f.value(S)
        for u in range(n):
            rest = np.prod([y[v] if bits[v] else 1 - y[v] for v in range(n) if v != u])
            if not bits[u]:  # each R \ {u} once: weight Π_{v≠u}
                grad[u] += rest * (f.value(S + [u]) - f.value(S))
    return value, grad


def test_closed_forms_match_exact_enumeration():
    rng = np.random.default_rng(3)
    for trial in range(4):
        for f in closed_form_utilities(rng):
            assert supported_methods(f)[0] == "closed-form"
            exact = MultilinearOracle(f, "exact")
            for y in test_points(rng, f.n):
                a = multilinear(f, y, method="closed-form")
                b = exact(y)
                assert a.method == "closed-form" and b.method == "exact"
                assert a.value == pytest.approx(b.value, abs=1e-9), (type(f).__name__, y)
                np.testing.assert_allclose(a.gradient, b.gradient, atol=1e-9, rtol=0,
                                           err_msg=f"{type(f).__name__} at {y}")
                assert a.value_stderr == 0 and not a.gradient_stderr.any()


def test_sparse_coverage_closed_form(monkeypatch):
    rng = np.random.default_rng(4)
    dense = make_coverage(rng, n=9, elements=15)
    monkeypatch.setattr(Coverage, "DENSE_LIMIT", 0)
    sparse = Coverage(dense.covers, dense.weights)
    assert not isinstance(sparse.incidence, np.ndarray)
    exact = MultilinearOracle(dense, "exact")
    for y in test_points(rng, 9):
        value, grad = sparse.multilinear(y)
        ref = exact(y)
        assert value == pytest.approx(ref.value, abs=1e-9)
        np.testing.assert_allclose(grad, ref.gradient, atol=1e-9, rtol=0)


def test_facility_ties_do_not_matter():
    # Permuting tied columns (and the whole column order) permutes the gradient.
    rng = np.random.default_rng(8)
    sim = rng.choice([0.0, 0.3, 0.7, 1.0], size=(7, 6))
    y = np.array([0.2, 1.0, 0.5, 0.0, 0.9, 0.5])
    value, grad = FacilityLocation(sim).multilinear(y)
    for _ in range(5):
        perm = rng.permutation(6)
        v2, g2 = FacilityLocation(sim[:, perm]).multilinear(y[perm])
        assert v2 == pytest.approx(value, abs=1e-12)
        np.testing.assert_allclose(g2, grad[perm], atol=1e-12)


def test_exact_matches_naive_sum_n6():
    rng = np.random.default_rng(6)
    fs = [AccuracyUtility(rng.uniform(50, 500, 6), 0.1, 0.6, -0.3),
          make_coverage(rng, n=6), ConcaveModular(rng.uniform(0, 3, (3, 6)), "log1p")]
    for f in fs:
        for y in test_points(rng, 6)[:3]:
            est = multilinear(f, y, method="exact")
            value, grad = naive(f, y)
            assert est.value == pytest.approx(value, abs=1e-12)
            np.testing.assert_allclose(est.gradient, grad, atol=1e-12, rtol=0)


def test_exact_at_n16_matches_closed_form():
    rng = np.random.default_rng(16)
    f = make_coverage(rng, n=16, elements=30)
    y = rng.random(16)
    y[3], y[9] = 1.0, 0.0
    est = MultilinearOracle(f, "exact")(y)
    value, grad = f.multilinear(y)
    assert est.value == pytest.approx(value, abs=1e-9)
    np.testing.assert_allclose(est.gradient, grad, atol=1e-9, rtol=0)


def test_monte_carlo_within_standard_errors():
    rng = np.random.default_rng(12)
    fs = [AccuracyUtility(rng.uniform(1, 50, 10)), make_coverage(rng, n=10),
          make_facility(rng, n=10)]
    within, total = 0, 0
    for i, f in enumerate(fs):
        y = rng.uniform(0.05, 0.95, 10)
        y[0], y[1] = 0.0, 1.0
        exact = multilinear(f, y, method="exact")
        mc = multilinear(f, y, method="monte-carlo", samples=20_000, seed=i)
        assert mc.method == "monte-carlo"
        assert abs(mc.value - exact.value) <= 3 * mc.value_stderr
        assert mc.value_stderr > 0
        z = np.abs(mc.gradient - exact.gradient) / np.maximum(mc.gradient_stderr, 1e-12)
        assert (z <= 4.5).all(), (type(f).__name__, z)  # Bonferroni-style over 10 coordinates
        within += int((z <= 3).sum())
        total += z.size
        assert np.all(mc.gradient_stderr < 0.1 * np.abs(exact.gradient).max())
    assert within >= 0.9 * total


def test_monte_carlo_standard_errors_shrink():
    # Standard errors shrink like 1/sqrt(samples): a 4x larger sample halves them.
    f = ConcaveModular(np.random.default_rng(2).uniform(0, 3, (3, 8)))
    y = np.linspace(0.1, 0.9, 8)
    small = multilinear(f, y, method="monte-carlo", samples=2000, seed=0)
    large = multilinear(f, y, method="monte-carlo", samples=8000, seed=1)
    ratio = large.gradient_stderr / small.gradient_stderr
    assert np.all((ratio > 0.4) & (ratio < 0.6)), ratio


def test_common_random_numbers():
    rng = np.random.default_rng(1)
    f = AccuracyUtility(rng.uniform(1, 50, 20))
    oracle = MultilinearOracle(f, samples=500, seed=7)
    assert oracle.method == "monte-carlo"
    y = rng.random(20)
    a, b = oracle(y), oracle(y)
    assert a.value == b.value and np.array_equal(a.gradient, b.gradient)
    assert np.array_equal(a.gradient_stderr, b.gradient_stderr)
    c = MultilinearOracle(f, samples=500, seed=7)(y)
    assert np.array_equal(a.gradient, c.gradient)
    d = MultilinearOracle(f, samples=500, seed=8)(y)
    assert not np.array_equal(a.gradient, d.gradient)

    # Nearby points share the sample, so the estimated change is far less noisy than
    # either estimate.
    g = ConcaveModular(rng.uniform(0, 3, (3, 12)))
    y, step = rng.uniform(0.1, 0.9, 12), np.full(12, 0.02)
    exact = MultilinearOracle(g, "exact")
    truth = exact(y + step).value - exact(y).value
    errors = []
    for seed in range(8):
        crn = MultilinearOracle(g, "monte-carlo", samples=2000, seed=seed)
        here, there = crn(y), crn(y + step)
        errors.append(abs(there.value - here.value - truth) / here.value_stderr)
    # measured: 0.17 on average (0.03 to 0.58); independent samples would give about 1.1
    assert np.mean(errors) < 0.4


def test_auto_method_choice():
    rng = np.random.default_rng(0)
    cov = make_coverage(rng, n=30, elements=40)
    assert MultilinearOracle(cov).method == "closed-form"
    assert supported_methods(cov) == ("closed-form", "monte-carlo")
    assert supported_methods(make_coverage(rng)) == ("closed-form", "exact", "monte-carlo")
    acc10, acc20 = AccuracyUtility(rng.uniform(1, 9, 10)), AccuracyUtility(rng.uniform(1, 9, 20))
    assert MultilinearOracle(acc10).method == "exact"
    assert MultilinearOracle(acc20, samples=10).method == "monte-carlo"
    assert multilinear(acc10, np.full(10, 0.5)).method == "exact"
    assert multilinear(acc20, np.full(20, 0.5), samples=10, seed=0).method == "monte-carlo"
    assert supported_methods(acc20) == ("exact", "monte-carlo")
    assert supported_methods(AccuracyUtility(np.ones(21) * 5)) == ("monte-carlo",)
    assert multilinear(Mixture([acc10, acc10], [1, 1]), np.full(10, 0.5)).method == "exact"


def test_errors():
    rng = np.random.default_rng(0)
    cov = make_coverage(rng, n=30, elements=40)
    acc = AccuracyUtility(rng.uniform(1, 9, 10))
    with pytest.raises(ValueError, match=r"'exact' is not available .*n <= 20, n is 30.*"
                                         r"coverage supports: closed-form, monte-carlo"):
        multilinear(cov, np.zeros(30), method="exact")
    with pytest.raises(ValueError, match="accuracy supports: exact, monte-carlo"):
        multilinear(acc, np.zeros(10), method="closed-form")
    with pytest.raises(ValueError, match="unknown multilinear method 'fast'; expected one of "
                                         "auto, closed-form, exact, monte-carlo"):
        MultilinearOracle(acc, "fast")
    for samples in (0, -5, 2.5, True):
        with pytest.raises(ValueError, match=r"samples is .*, expected a positive integer"):
            multilinear(acc, np.zeros(10), method="monte-carlo", samples=samples)
    oracle = MultilinearOracle(acc)
    for y, match in [(np.zeros(9), r"y must have length 10 .*\(9,\)"),
                     (np.r_[np.zeros(9), 1.5], r"y entry 9 is 1.5, expected a value in \[0, 1\]"),
                     (np.r_[-0.1, np.zeros(9)], r"y entry 0 is -0.1"),
                     (np.r_[np.zeros(4), np.nan, np.zeros(5)], r"y entry 4 is nan"),
                     (["x"] * 10, "list of numbers")]:
        with pytest.raises(ValueError, match=match):
            oracle(y)
        with pytest.raises(ValueError, match=match):
            multilinear(acc, y)


def test_estimate_fields():
    f = Modular([1.0, 2.0, 3.0])
    est = multilinear(f, [0.5, 0.0, 1.0])
    assert isinstance(est, MultilinearEstimate)
    assert (est.value, est.method) == (3.5, "closed-form")
    assert est.gradient.tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(AttributeError):
        est.value = 1.0  # frozen


def test_modular_utility():
    f = utility_from_config({"kind": "modular", "weights": [1.0, 0.0, 2.5]}, n=3)
    assert isinstance(f, Modular) and UTILITY_KINDS["modular"] is Modular
    assert f.value([0, 2]) == 3.5 and f.value([]) == 0.0
    assert f.gains([2]).tolist() == [1.0, 0.0, 0.0]
    assert Modular.from_config(f.to_config()).weights.tolist() == [1.0, 0.0, 2.5]
    assert f.values(np.array([[True, True, True], [False, False, False]])).tolist() == [3.5, 0.0]
    with pytest.raises(InstanceError, match=r"^weights: entry 1 is -1.0, expected >= 0$"):
        Modular([1.0, -1.0])
    with pytest.raises(InstanceError, match=r"^weights: has 2 entries, expected 3"):
        utility_from_config({"kind": "modular", "weights": [1.0, 1.0]}, n=3)
    with pytest.raises(InstanceError, match="weights: must list at least one worker"):
        Modular([])


def curve_utilities(rng, n):
    acc = AccuracyUtility(rng.uniform(1, 500, n))
    pwa = PropensityWeightedAccuracy(sizes=rng.uniform(0, 100, (n, 3)), shares=[0.5, 0.3, 0.2],
                                     transfer=0.1, c=[-0.3, -0.5, -1.5])
    return [acc, pwa, Mixture([acc, pwa], [0.4, 1.3])]


def test_curve_sum_structure_reproduces_the_utility():
    rng = np.random.default_rng(3)
    masks = rng.random((50, 9)) < 0.4
    masks[0] = False
    for f in curve_utilities(rng, 9):
        structure = curve_sums_of(f)
        assert np.allclose(structure.values(masks), f.values(masks), rtol=1e-13, atol=0)
        assert MultilinearOracle(f, "monte-carlo", samples=5).structured
    cov = make_coverage(rng, n=9)
    assert curve_sums_of(cov) is None and curve_sums_of(Mixture([cov, AccuracyUtility(np.ones(9))], [1, 1])) is None
    assert not MultilinearOracle(cov, "monte-carlo", samples=5).structured


@pytest.mark.parametrize("c", [-0.01, -0.2, -1.0, -1.5, -5.0])
def test_series_truncation_bound_holds(c):
    coef = series_terms(c)
    tail, term = 0.0, coef[-1]
    for q in range(coef.size - 1, coef.size + 2000):  # the omitted terms, far out
        term = term * (c - q) / (q + 1)
        tail += abs(term) * BIN_HALF_WIDTH ** (q + 1)
    assert tail <= SERIES_TOLERANCE


def test_curve_sum_gradients_equal_the_generic_estimator_on_the_same_samples():
    # The O(n·samples) form is the same estimator as toggling every worker in every sample:
    # a CallableUtility of the same f, with the same seed, sees the same uniforms.
    rng = np.random.default_rng(5)
    n = 10
    for f in curve_utilities(rng, n):
        generic = CallableUtility(lambda S, f=f: f.value(list(S)), n)
        for y in [rng.random(n), np.full(n, 0.02), np.r_[0.0, 1.0, rng.random(n - 2)], np.ones(n), np.zeros(n)]:
            fast = MultilinearOracle(f, "monte-carlo", samples=300, seed=9)(y)
            slow = MultilinearOracle(generic, "monte-carlo", samples=300, seed=9)
            assert not slow.structured
            slow = slow(y)
            assert fast.value == pytest.approx(slow.value, rel=1e-12, abs=1e-14)
            scale = np.abs(slow.gradient).max()
            assert np.abs(fast.gradient - slow.gradient).max() <= 1e-10 * scale
            assert fast.value_stderr == pytest.approx(slow.value_stderr, rel=1e-9, abs=1e-15)


def test_curve_sum_monte_carlo_within_standard_errors_of_exact():
    rng = np.random.default_rng(8)
    zs = []
    for f in curve_utilities(rng, 10):
        y = rng.uniform(0.05, 0.95, 10)
        exact = multilinear(f, y, method="exact")
        mc = multilinear(f, y, method="monte-carlo", samples=20_000, seed=1)
        assert abs(mc.value - exact.value) <= 4 * mc.value_stderr
        zs.append((mc.gradient - exact.gradient) / mc.gradient_stderr)
    zs = np.concatenate(zs)
    # batch-means errors (32 batches): z is close to Student's t with 31 degrees of freedom
    assert np.abs(zs).max() <= 4.5 and np.mean(np.abs(zs) <= 2.04) >= 0.85


def test_monte_carlo_memory_is_linear_in_n():
    import tracemalloc

    n = 20_000
    f = AccuracyUtility(np.random.default_rng(0).uniform(1, 100, n))
    tracemalloc.start()
    oracle = MultilinearOracle(f, "monte-carlo", samples=40, seed=0)
    est = oracle(np.full(n, 0.01))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert est.gradient.shape == (n,) and (est.gradient > 0).all()
    assert peak < 0.1 * n * n  # an (n, n) boolean array alone would be n·n bytes
