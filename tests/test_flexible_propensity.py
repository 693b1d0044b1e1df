"""Flexible propensity models, balance on nonlinear terms, and FedIPW under a misspecified enrollment."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import expit

from fairsched.fl import (ExperimentConfig, PopulationConfig, SimulationError, make_population,
                          run_seed)
from fairsched.propensity import (ASMD_THRESHOLD, MODELS, BoostingFit, FeatureLogisticFit,
                                  LogisticFit, PropensityError, ShapeError, balance_report,
                                  fit_enrollment, fit_propensity, fit_two_stage, nonlinear_balance,
                                  nonlinear_terms)

NAMES = ("z1", "z2", "region1", "region2")


def quadratic_frame(seed: int, N: int = 2000):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(N, 2))
    region = rng.choice(3, size=N, p=(0.5, 0.3, 0.2))
    Z = np.column_stack([z, region == 1, region == 2]).astype(float)
    pi = expit(0.2 + z[:, 0] + 0.5 * z[:, 1] - 0.5 * Z[:, 3] + (z[:, 0] ** 2 - 1))
    return Z, rng.random(N) < pi, pi


# --- feature maps and models ----------------------------------------------------------------


def test_nonlinear_terms_names_values_and_structural_zeros():
    Z, _, _ = quadratic_frame(0, N=300)
    T, names = nonlinear_terms(Z, NAMES)
    # squares of the two continuous columns, all products except region1·region2 (always 0)
    assert names == ("z1²", "z1·z2", "z1·region1", "z1·region2", "z2²", "z2·region1", "z2·region2")
    np.testing.assert_array_equal(T[:, 0], Z[:, 0] ** 2)
    np.testing.assert_array_equal(T[:, 2], Z[:, 0] * Z[:, 2])
    assert nonlinear_terms(Z, NAMES, interactions=False)[1] == ("z1²", "z2²")
    assert nonlinear_terms(Z, NAMES, squares=False)[1][0] == "z1·z2"
    with pytest.raises(ShapeError, match="names: has 3 entries, X has 4 columns"):
        nonlinear_terms(Z, NAMES[:3])


def test_every_model_fits_and_predicts_probabilities():
    Z, E, pi = quadratic_frame(1)
    errors = {}
    for model in MODELS:
        fit = fit_propensity(Z, E, model, names=NAMES)
        p = fit.predict(Z)
        assert p.shape == (Z.shape[0],) and np.all((p > 0) & (p <= 1)), model
        errors[model] = float(np.mean(np.abs(p - pi)))
    assert isinstance(fit_propensity(Z, E, "linear"), LogisticFit)
    spline = fit_propensity(Z, E, "spline", names=NAMES)
    assert isinstance(spline, FeatureLogisticFit) and spline.names[0] == "intercept"
    assert spline.names[-2:] == ("region1", "region2") and spline.status == "fitted"
    poly = fit_propensity(Z, E, "poly2", names=NAMES)
    assert "z1²" in poly.names and "region1²" not in poly.names and "region1·region2" not in poly.names
    boost = fit_propensity(Z, E, "boosting")
    assert isinstance(boost, BoostingFit) and boost.predict(Z).min() >= boost.floor
    # The linear model cannot represent z1²; every flexible model does better.
    for model in ("poly2", "spline", "boosting"):
        assert errors[model] < 0.6 * errors["linear"], errors
    with pytest.raises(PropensityError, match="unknown propensity model 'forest'; choose one of linear, poly2"):
        fit_propensity(Z, E, "forest")
    with pytest.raises(ShapeError, match="has 3 columns, the feature map was fitted on 4"):
        spline.predict(Z[:, :3])


def test_two_stage_with_flexible_models_and_defaults_unchanged():
    Z, E, _ = quadratic_frame(2, N=2000)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3, int(E.sum())))
    A = rng.random(X.shape) < expit(0.3 * Z[E, 0] + X)
    default = fit_two_stage(Z, E, X, A)
    linear = fit_enrollment(Z, E)
    np.testing.assert_array_equal(default.enrollment.coef, linear.coef)
    flexible = fit_two_stage(Z, E, X, A, model="spline", participation_model="poly2")
    assert flexible.enrollment.model == "spline" and flexible.participation.model == "poly2"
    assert flexible.participation.logistic.cov_type == "cluster"      # still clustered by worker
    p = flexible.inclusion(Z[E], X)
    assert p.shape == X.shape and np.all((p > 0) & (p < 1))
    with pytest.raises(PropensityError, match="unknown propensity model 'deep'"):
        fit_two_stage(Z, E, X, A, participation_model="deep")


def test_misspecified_population_option_leaves_the_default_unchanged():
    a = make_population("moderate", 7)
    b = make_population("moderate", 7, PopulationConfig(enroll_z1_squared=0.0))
    np.testing.assert_array_equal(a.pi_enroll, b.pi_enroll)
    np.testing.assert_array_equal(a.enrolled, b.enrolled)
    c = make_population("moderate", 7, PopulationConfig(enroll_z1_squared=1.0))
    np.testing.assert_array_equal(a.z, c.z)
    np.testing.assert_array_equal(a.data.y, c.data.y)                 # same data, other enrollment
    index = a.z[:, 0] + a.z[:, 1] - (a.region == 2) + (a.z[:, 0] ** 2 - 1)
    np.testing.assert_allclose(c.pi_enroll, expit(1.0 * index))
    with pytest.raises(SimulationError, match="propensity_model: unknown propensity model 'tree'"):
        ExperimentConfig(propensity_model="tree")


# --- balance on nonlinear terms flags the misspecified model ------------------------------------


def z1_squared_asmd(level: str, seed: int, model: str) -> tuple[float, tuple[str, ...]]:
    config = PopulationConfig(enroll_z1_squared=1.0)
    # The population stream run_seed draws for this seed.
    pop = make_population(level, np.random.default_rng(seed).spawn(5)[0], config)
    Z, E = pop.covariates, pop.enrolled
    fit = fit_enrollment(Z, E, NAMES, model=model)
    report = nonlinear_balance(Z[E], np.ones(int(E.sum())), 1.0 / fit.predict(Z[E]), Z, NAMES)
    assert report.threshold == ASMD_THRESHOLD == 0.1
    return report.asmd_after("z1²"), report.imbalanced


def test_nonlinear_balance_flags_the_linear_model_and_not_the_spline():
    # Measured on seeds 0–29 at moderate bias (docs/selection_bias.md §3): after linear
    # weights the z1² ASMD is 0.46–1.37, after spline weights 0.002–0.068.
    for seed in range(5):
        linear, flagged = z1_squared_asmd("moderate", seed, "linear")
        spline, flagged_spline = z1_squared_asmd("moderate", seed, "spline")
        assert linear > ASMD_THRESHOLD and "z1²" in flagged, (seed, linear)
        assert spline < ASMD_THRESHOLD and "z1²" not in flagged_spline, (seed, spline)


def test_at_severe_bias_the_spline_is_not_always_below_the_threshold():
    # Where the claim fails: at severe bias the spline weights leave a z1² ASMD above 0.1
    # in some seeds (seed 1: 0.139; the true propensities, too, exceed 0.1 in some seeds),
    # though always far below the linear model's (0.69–2.31 over seeds 0–29).
    values = {m: [z1_squared_asmd("severe", seed, m)[0] for seed in range(5)] for m in ("linear", "spline")}
    assert values["spline"][1] > ASMD_THRESHOLD
    assert all(l > ASMD_THRESHOLD for l in values["linear"])
    assert all(s < 0.25 * l for s, l in zip(values["spline"], values["linear"])), values
    assert np.mean(values["spline"]) < ASMD_THRESHOLD


@pytest.mark.parametrize("level", ["moderate", "severe"])
def test_covariate_asmd_alone_shows_less_than_the_square(level):
    # The covariates alone show the problem less clearly than their square does.
    pop = make_population(level, np.random.default_rng(0).spawn(5)[0], PopulationConfig(enroll_z1_squared=1.0))
    Z, E = pop.covariates, pop.enrolled
    w = 1.0 / fit_enrollment(Z, E).predict(Z[E])
    plain = balance_report(Z[E], np.ones(int(E.sum())), w, Z, NAMES)
    assert plain.asmd_after("z1") < z1_squared_asmd(level, 0, "linear")[0]


# --- FedIPW with the flexible enrollment model --------------------------------------------------


def paired(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    d = a - b
    return float(d.mean()), float(d.std(ddof=1) / np.sqrt(d.size))


SEEDS = 10


@pytest.fixture(scope="module")
def misspecified_runs():
    population = PopulationConfig(enroll_z1_squared=1.0)
    out = {}
    for model in ("linear", "spline"):
        config = ExperimentConfig(population=population, propensity_model=model)
        runs = [run_seed("moderate", seed, config) for seed in range(SEEDS)]
        out[model] = {rule: np.array([r.excess[rule][-1] for r in runs]) for rule in ("fedipw", "oracle_ipw")}
    return out



def test_spline_fedipw_reaches_the_oracle_and_linear_fedipw_does_not(misspecified_runs):
    # Moderate bias, enroll_z1_squared = 1, seeds 0–9 (measured: linear FedIPW − oracle
    # +0.00377 ± 0.00100, spline −0.00073 ± 0.00025). The 30-seed, all-level measurement is
    # in docs/selection_bias.md §7.
    linear, spline = misspecified_runs["linear"], misspecified_runs["spline"]
    np.testing.assert_array_equal(linear["oracle_ipw"], spline["oracle_ipw"])   # same draws
    diff, se = paired(linear["fedipw"], linear["oracle_ipw"])
    assert diff > 2 * se and linear["fedipw"].mean() > 2 * linear["oracle_ipw"].mean(), (diff, se)
    # One-sided: the spline model is not worse than the oracle by 2 SE. It may be better
    # (estimated propensities balance the realised draw; at moderate over 30 seeds it is
    # 36% below the oracle, −2.3 SE), as FedIPW is in the correctly specified experiment.
    diff, se = paired(spline["fedipw"], spline["oracle_ipw"])
    assert diff < 2 * se, (diff, se)
    assert spline["fedipw"].mean() < 0.5 * linear["fedipw"].mean()


def test_spline_with_a_point_mass_covariate():
    """A covariate with most rows at 0 (a share such as CPS's ``afam`` per client) repeats
    quantile knots; the spline basis keeps only distinct knots and drops basis functions no
    row reaches, so the fit succeeds and sees the curvature a linear model cannot."""
    from fairsched.propensity.flexible import fit_feature_map

    rng = np.random.default_rng(3)
    n = 2_000
    share = np.where(rng.random(n) < 0.7, 0.0, rng.random(n))
    other = rng.normal(size=n)
    Z = np.column_stack([share, other])
    E = rng.random(n) < 1.0 / (1.0 + np.exp(-(0.3 - 1.5 * share + 0.5 * other ** 2 - 0.5)))
    features = fit_feature_map(Z, "spline", ("share", "other"))
    F = features.transform(Z)
    assert F.shape[1] == len(features.names) and np.all(np.any(F != 0, axis=0))
    assert any(name.startswith("share:") for name in features.names)
    fit = fit_propensity(Z, E, "spline", names=("share", "other"))
    p = fit.predict(Z)
    assert np.all((p > 0) & (p < 1))
    # the spline sees the curvature in `other` that the linear model cannot
    linear = fit_propensity(Z, E, "linear", names=("share", "other"))
    def loglik(q):
        return float(np.sum(np.where(E, np.log(q), np.log1p(-q))))
    assert loglik(p) > loglik(linear.predict(Z)) + 20
