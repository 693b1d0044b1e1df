"""Propensity models, IPW, calibration, diagnostics and FLOSS (fairsched.propensity)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from fairsched.errors import FairschedError
from fairsched.propensity import (CalibrationError, EstimationError, InvalidPropensityError,
                                  Margins, ShapeError, SingularDesignError, asmd, balance_report,
                                  build_margins, calibrate, check_propensities, fit_enrollment,
                                  fit_logistic, fit_participation, fit_shadow, fit_two_stage,
                                  floss_weights, hajek_mean, horvitz_thompson_mean, ipw_shares,
                                  ipw_weights, kish_ess, privatize, sample_responders,
                                  trim_weights, weight_summary)

ENROLL = np.array([-0.3, 1.0, -0.7, 0.5])      # intercept, z1, z2, z3
PART = np.array([0.2, 0.4, 0.0, -0.3, 0.8])    # intercept, z1, z2, z3, x_round


def frame(seed: int, N: int = 4000, rounds: int = 3):
    rng = np.random.default_rng(seed)
    Z = np.column_stack([rng.normal(size=N), rng.normal(size=N), rng.random(N) < 0.4]).astype(float)
    pi_e = expit(ENROLL[0] + Z @ ENROLL[1:])
    E = rng.random(N) < pi_e
    X = rng.normal(size=(rounds, int(E.sum())))
    pi_p = expit(PART[0] + Z[E] @ PART[1:4] + PART[4] * X)
    A = rng.random(pi_p.shape) < pi_p
    return Z, E, X, A, pi_e, pi_p


# --- logistic models -------------------------------------------------------------------


def test_two_stage_recovers_known_coefficients_within_three_se():
    Z, E, X, A, _, _ = frame(0, N=20_000, rounds=4)
    model = fit_two_stage(Z, E, X, A, names=("z1", "z2", "z3"), round_names=("battery",))
    assert np.all(np.abs(model.enrollment.z_scores(ENROLL)) < 3), model.enrollment.as_dict()
    assert np.all(np.abs(model.participation.z_scores(PART)) < 3), model.participation.as_dict()
    assert model.participation.names == ("intercept", "z1", "z2", "z3", "battery")
    p = model.inclusion(Z[E], X)
    assert p.shape == X.shape and np.all((p > 0) & (p < 1))
    np.testing.assert_allclose(p, model.enroll_probability(Z[E])[None, :] * model.participation_probability(Z[E], X))


def test_standard_errors_match_the_sampling_spread():
    estimates, ses = [], []
    for seed in range(60):
        Z, E, *_ = frame(100 + seed, N=2000)
        fit = fit_enrollment(Z, E)
        estimates.append(fit.coef)
        ses.append(fit.se)
    spread = np.std(estimates, axis=0, ddof=1)
    ratio = spread / np.mean(ses, axis=0)
    assert np.all((ratio > 0.7) & (ratio < 1.4)), ratio
    assert np.all(np.abs(np.mean(estimates, axis=0) - ENROLL) < 3 * spread / np.sqrt(60))


def test_fit_matches_an_independent_newton_solve():
    Z, E, *_ = frame(3, N=3000)
    fit = fit_logistic(Z, E)
    D = np.column_stack([np.ones(len(Z)), Z])
    beta = np.zeros(4)
    for _ in range(30):
        p = expit(D @ beta)
        beta += np.linalg.solve(D.T @ (D * (p * (1 - p))[:, None]), D.T @ (E - p))
    np.testing.assert_allclose(fit.coef, beta, atol=1e-6)
    p = expit(D @ beta)
    np.testing.assert_allclose(fit.cov, np.linalg.inv(D.T @ (D * (p * (1 - p))[:, None])), rtol=1e-5)


def test_ipw_mean_is_unbiased_and_the_naive_mean_is_not():
    errors_ipw, errors_naive, errors_oracle = [], [], []
    for seed in range(120):
        Z, E, X, A, pi_e, pi_p = frame(1000 + seed, N=3000, rounds=2)
        y = 2.0 + Z[:, 0] - Z[:, 1] + 0.5 * Z[:, 2]     # the quantity to average
        model = fit_two_stage(Z, E, X[:1], A[:1])       # participation fitted on round 0's log
        members = np.flatnonzero(E)
        present = A[1]                                  # estimate from round 1's participants
        units = members[present]
        p_hat = model.inclusion(Z[units], X[1:2, present])[0]
        truth = y.mean()
        errors_ipw.append(hajek_mean(y[units], p_hat) - truth)
        errors_oracle.append(hajek_mean(y[units], pi_e[units] * pi_p[1, present]) - truth)
        errors_naive.append(y[units].mean() - truth)
    for errors, unbiased in ((errors_ipw, True), (errors_oracle, True), (errors_naive, False)):
        bias = np.mean(errors)
        se = np.std(errors, ddof=1) / np.sqrt(len(errors))
        assert bool(abs(bias) < 3 * se) is unbiased, (bias, se)
    assert abs(np.mean(errors_naive)) > 20 * abs(np.mean(errors_ipw))


def test_horvitz_thompson_and_hajek_and_shares():
    y = np.array([1.0, 2.0, 4.0])
    p = np.array([0.5, 0.25, 1.0])
    assert horvitz_thompson_mean(y, p, 10) == pytest.approx((2 + 8 + 4) / 10)
    assert hajek_mean(y, p) == pytest.approx((2 + 8 + 4) / 7)
    np.testing.assert_allclose(hajek_mean(np.column_stack([y, 2 * y]), p), [2.0, 4.0])
    np.testing.assert_allclose(ipw_shares([0, 1, 1], p), [2 / 7, 5 / 7])
    np.testing.assert_allclose(ipw_shares([0, 0, 0], p, strata=2), [1.0, 0.0])
    np.testing.assert_allclose(ipw_weights(p), [2, 4, 1])


# --- bad input -------------------------------------------------------------------------


@pytest.mark.parametrize("p, fragment", [
    ([0.5, 0.0, 0.2], "entry 1 is 0, a propensity must be > 0"),
    ([0.5, -0.1], "entry 1 is -0.1, a propensity must be > 0"),
    ([0.5, 1.2], "entry 1 is 1.2, a propensity must be <= 1"),
    ([np.nan, 0.5], "entry 0 is nan"),
])
def test_invalid_propensities_are_named(p, fragment):
    with pytest.raises(InvalidPropensityError, match=fragment):
        check_propensities(p)
    with pytest.raises(InvalidPropensityError):
        hajek_mean(np.ones(len(p)), p)
    with pytest.raises(FairschedError):
        ipw_shares(np.zeros(len(p), dtype=int), p)


def test_singular_designs_raise_clear_errors():
    Z, E, *_ = frame(5, N=1000)
    collinear = np.column_stack([Z, 2 * Z[:, 0] - Z[:, 1]])
    with pytest.raises(SingularDesignError, match=r"perfect collinearity among .*'x0', 'x1', 'x3'"):
        fit_logistic(collinear, E)
    with pytest.raises(SingularDesignError, match="perfect collinearity among 'intercept', 'z'"):
        fit_logistic(np.column_stack([Z[:, 0], np.ones(1000)]), E, names=("x", "z"))
    with pytest.raises(SingularDesignError, match=r"separation: .*'age'.* predicts the outcome perfectly"):
        fit_logistic(Z[:, :1], Z[:, 0] > 0.3, names=("age",))
    quasi = np.where(Z[:, 2] == 1, 1.0, E)              # z3 = 1 always enrolls: quasi-separation
    with pytest.raises(SingularDesignError, match="separation"):
        fit_logistic(Z, quasi)
    with pytest.raises(SingularDesignError, match="outcome is 1 for all 1000 units"):
        fit_logistic(Z, np.ones(1000))
    with pytest.raises(SingularDesignError, match="identically zero"):
        fit_logistic(np.column_stack([Z, np.zeros(1000)]), E)


def test_mismatched_shapes_raise_shape_errors():
    Z, E, X, A, *_ = frame(6, N=500)
    with pytest.raises(ShapeError, match="enrolled: has 499 entries, expected 500"):
        fit_logistic(Z, E[:-1], labels=("Z_frame", "enrolled"))
    with pytest.raises(ShapeError, match="enrolled: has 499 entries"):
        fit_two_stage(Z, E[:-1], X, A)
    with pytest.raises(ShapeError, match=r"participated: expected shape \(rounds, "):
        fit_participation(Z[E], X, A[:, :-1])
    with pytest.raises(ShapeError, match="X_round: expected shape"):
        fit_participation(Z[E], X[:, :-1], A)
    with pytest.raises(ShapeError, match="expected 0 or 1"):
        fit_logistic(Z, np.where(E, 2.0, 0.0))
    fit = fit_logistic(Z, E)
    with pytest.raises(ShapeError, match="has 2 columns, the model was fitted on 3"):
        fit.predict(Z[:, :2])
    with pytest.raises(ShapeError):
        hajek_mean(np.ones(3), [0.5, 0.5])


# --- calibration -----------------------------------------------------------------------


def calibration_problem(seed: int = 1, N: int = 5000):
    rng = np.random.default_rng(seed)
    region = rng.choice(["north", "south", "east"], size=N, p=[0.5, 0.3, 0.2])
    age = rng.normal(40, 12, size=N)
    pi = expit(-0.5 + 0.06 * (age - 40) - 1.0 * (region == "east"))
    E = rng.random(N) < pi
    shares = {c: float(np.mean(region == c)) for c in ("north", "south", "east")}
    margins = build_margins(int(E.sum()), categorical={"region": (region[E], shares)},
                            continuous={"age": (age[E], float(age.mean()))})
    return region, age, E, shares, margins


@pytest.mark.parametrize("method", ["raking", "linear"])
def test_calibration_hits_the_margins(method):
    region, age, E, shares, margins = calibration_problem()
    N = region.size
    res = calibrate(np.ones(int(E.sum())), margins, population_size=N, method=method)
    assert res.converged and res.max_error < 1e-8
    w = res.weights
    assert w.sum() == pytest.approx(N, rel=1e-10)
    for c, share in shares.items():
        assert w[region[E] == c].sum() / N == pytest.approx(share, abs=1e-8)
    assert (w @ age[E]) / N == pytest.approx(age.mean(), abs=1e-8)
    if method == "raking":
        assert res.n_negative == 0 and np.all(w > 0)
        np.testing.assert_allclose(w, np.exp(margins.design @ res.multipliers), rtol=1e-10)
    else:
        np.testing.assert_allclose(w, 1 + margins.design @ res.multipliers, rtol=1e-10)


def test_calibration_reduces_asmd_and_diagnostics():
    region, age, E, shares, margins = calibration_problem()
    res = calibrate(np.ones(int(E.sum())), margins, population_size=region.size)
    covs = np.column_stack([age, region == "east", region == "south"]).astype(float)
    report = balance_report(covs[E], np.ones(int(E.sum())), res.weights, covs, names=("age", "east", "south"))
    assert report.mean_before > 0.1
    assert report.mean_after < 1e-8 < report.mean_before
    assert "| age |" in report.table()
    assert kish_ess(np.ones(37)) == pytest.approx(37)
    assert kish_ess([1, 1, 2]) == pytest.approx(16 / 6)
    summary = weight_summary(res.weights)
    assert 0 < summary.ess < summary.n and summary.ess_fraction == pytest.approx(summary.ess / summary.n)
    assert summary.max_over_min >= summary.max_over_mean >= 1
    a = asmd(covs[E], np.ones(int(E.sum())), covs.mean(axis=0), covs.std(axis=0))
    np.testing.assert_allclose(a, report.before)


def test_trimming_caps_and_preserves_the_total():
    w = np.random.default_rng(0).lognormal(0, 1.5, size=500)
    capped = trim_weights(w, max_ratio=5)
    assert capped.sum() == pytest.approx(w.sum())
    assert capped.max() <= 5 * capped.mean() * (1 + 1e-9)
    assert kish_ess(capped) > kish_ess(w)
    q = trim_weights(w, quantile=0.9)
    assert q.sum() == pytest.approx(w.sum())
    assert np.count_nonzero(q == q.max()) >= 50
    with pytest.raises(ShapeError, match="exactly one"):
        trim_weights(w)
    with pytest.raises(ShapeError, match="max_ratio"):
        trim_weights(w, max_ratio=1.0)


def test_unreachable_margins_raise_calibration_error():
    region, age, E, shares, _ = calibration_problem()
    n = int(E.sum())
    missing = {**shares, "west": 0.1}
    missing = {c: s / 1.1 for c, s in missing.items()}
    with pytest.raises(CalibrationError, match="'west' has target share 0.0909.* but no enrolled unit"):
        build_margins(n, categorical={"region": (region[E], missing)})
    with pytest.raises(CalibrationError, match="age: target mean 99 lies outside"):
        build_margins(n, continuous={"age": (age[E], 99.0)})
    with pytest.raises(CalibrationError, match="sum to 0.9"):
        build_margins(n, categorical={"region": (region[E], {"north": 0.5, "south": 0.2, "east": 0.2})})
    with pytest.raises(CalibrationError, match="'east' has target share 0 but"):
        build_margins(n, categorical={"region": (region[E], {"north": 0.5, "south": 0.5, "east": 0.0})})
    with pytest.raises(CalibrationError, match="category 'east', which has no target share"):
        build_margins(n, categorical={"region": (region[E], {"north": 0.5, "south": 0.5})})
    # Each margin alone is reachable, jointly they are not: the hull check catches it.
    B = np.column_stack([np.ones(3), [0.0, 1.0, 1.0], [0.0, 1.0, 0.0]])
    margins = Margins(B, np.array([1.0, 0.1, 0.9]), ("total", "a", "b"))
    for method in ("raking", "linear"):
        with pytest.raises(CalibrationError, match="convex hull"):
            calibrate(np.ones(3), margins, method=method)
    with pytest.raises(CalibrationError, match="unknown calibration method"):
        calibrate(np.ones(3), margins, method="logit")
    with pytest.raises(CalibrationError, match="base_weights: entry 0 is 0"):
        calibrate(np.zeros(3), margins)


def test_noisy_margins_move_the_weights():
    region, age, E, shares, margins = calibration_problem()
    exact = calibrate(np.ones(int(E.sum())), margins, region.size).weights
    noisy_margins = build_margins(int(E.sum()), categorical={"region": (region[E], shares)},
                                  continuous={"age": (age[E], float(age.mean()) + 2.0)})
    noisy = calibrate(np.ones(int(E.sum())), noisy_margins, region.size).weights
    assert (noisy @ age[E]) / region.size == pytest.approx(age.mean() + 2.0, abs=1e-8)
    assert np.abs(noisy - exact).max() > 0.1


# --- FLOSS -----------------------------------------------------------------------------

THETA = np.array([0.3, 0.5, 1.0])   # intercept, alpha (D'), gamma (S)


def opt_out(seed: int, n: int = 10_000):
    rng = np.random.default_rng(seed)
    D = rng.normal(size=n)
    Z = rng.normal(size=n)                         # shadow: drives S, not R given (D', S)
    S = 0.8 * Z + 0.5 * D + rng.normal(size=n)
    pi = expit(THETA[0] + THETA[1] * D + THETA[2] * S)
    R = (rng.random(n) < pi).astype(float)
    return D, Z, S, np.where(R == 1, S, np.nan), R, pi


def test_shadow_variable_recovers_the_response_model():
    D, Z, S, S_obs, R, pi = opt_out(0, n=40_000)
    fit = fit_shadow(R, D, S_obs, Z, names=("device",))
    assert fit.names == ("intercept", "device", "S")
    assert fit.residual < 1e-10
    assert np.all(np.abs((fit.coef - THETA) / fit.se) < 3), (fit.coef, fit.se)


def test_floss_weights_remove_the_opt_out_bias():
    naive, floss, oracle = [], [], []
    for seed in range(200):
        D, Z, S, S_obs, R, pi = opt_out(seed)
        w = floss_weights(fit_shadow(R, D, S_obs, Z), R, D, S_obs)
        r = R == 1
        truth = S.mean()
        naive.append(S[r].mean() - truth)
        floss.append(np.sum(w[r] * S[r]) / w[r].sum() - truth)
        oracle.append(hajek_mean(S[r], pi[r]) - truth)
    naive, floss, oracle = map(np.asarray, (naive, floss, oracle))
    assert abs(floss.mean()) <= 0.2 * abs(naive.mean())          # at least 80% of the bias removed
    diff = floss - oracle
    assert abs(diff.mean()) < 3 * diff.std(ddof=1) / np.sqrt(diff.size)
    assert abs(oracle.mean()) < 3 * oracle.std(ddof=1) / np.sqrt(oracle.size)


def test_floss_errors_and_unidentified_shadow():
    D, Z, S, S_obs, R, pi = opt_out(1, n=2000)
    with pytest.raises(ShapeError, match="S: satisfaction must be finite for every responder"):
        fit_shadow(R, D, np.full(R.size, np.nan), Z)
    with pytest.raises(EstimationError, match="both responders and non-responders"):
        fit_shadow(np.ones(R.size), D, S, Z)
    with pytest.raises(ShapeError, match="Z: has 1999 rows"):
        fit_shadow(R, D, S_obs, Z[:-1])
    # A shadow variable unrelated to S leaves gamma unidentified: no solution or a useless one.
    noise = np.random.default_rng(9).normal(size=R.size)
    try:
        fit = fit_shadow(R, D, S_obs, noise)
    except EstimationError:
        return
    informative = fit_shadow(R, D, S_obs, Z)
    assert not np.isfinite(fit.se[-1]) or fit.se[-1] > 5 * informative.se[-1]


def test_weighted_sampling_and_privacy():
    rng = np.random.default_rng(0)
    w = np.array([0.0, 1.0, 3.0, 6.0])
    draws = sample_responders(w, 20_000, rng)
    freq = np.bincount(draws, minlength=4) / draws.size
    np.testing.assert_allclose(freq, w / w.sum(), atol=0.01)
    assert freq[0] == 0
    picked = sample_responders(w, 3, np.random.default_rng(1), replace=False)
    assert len(set(picked.tolist())) == 3 and 0 not in picked
    np.testing.assert_array_equal(sample_responders(w, 50, np.random.default_rng(7)),
                                  sample_responders(w, 50, np.random.default_rng(7)))
    with pytest.raises(ShapeError):
        sample_responders(w, 4, rng, replace=False)
    U = rng.normal(size=(30, 4)) * 10
    clipped = privatize(U, 1.0, 0.0, rng)
    assert np.all(np.linalg.norm(clipped, axis=1) <= 1.0 + 1e-12)
    small = np.full((1, 4), 0.1)
    np.testing.assert_allclose(privatize(small, 1.0, 0.0, rng), small)
    noisy = privatize(np.zeros((20_000, 2)), 2.0, 0.5, np.random.default_rng(3))
    assert noisy.std() == pytest.approx(1.0, rel=0.03)
