"""FLOSS diagnostics: J test size and power, relevance, multiple roots, policies, the harness, the CLI."""

from __future__ import annotations

import argparse
import json
import warnings

import numpy as np
import pytest

from fairsched.cli.output import Output
from fairsched.cli.simulate_floss import add_floss_parser, floss_command
from fairsched.propensity.errors import EstimationError, ShapeError
from fairsched.propensity.floss import fit_shadow, floss_weights
from fairsched.propensity.floss_diagnostics import (
    CheckedShadowFit,
    UnreliableShadowFitError,
    UnreliableShadowFitWarning,
    fit_shadow_checked,
    relevance_test,
)
from fairsched.propensity.floss_validity import informed_rejects, run, simulate


def sample(violation: str, seed: int, n: int = 5000, shadows: int = 2):
    d = simulate(violation, n, np.random.default_rng(seed))
    R = d["R"]
    return R, d["D"], np.where(R == 1, d["S"], np.nan), d["Z"][:, :shadows], d["S"]


def fit(violation: str, seed: int, n: int = 5000, shadows: int = 2, **kw) -> CheckedShadowFit:
    R, D, S_obs, Z, _ = sample(violation, seed, n, shadows)
    return fit_shadow_checked(R, D, S_obs, Z, on_unreliable="ignore", **kw)


def test_just_identified_gmm_is_fit_shadow_and_result_is_a_shadow_fit():
    R, D, S_obs, Z, _ = sample("none", 3, n=8000, shadows=1)
    old = fit_shadow(R, D, S_obs, Z, names=("device",))
    new = fit_shadow_checked(R, D, S_obs, Z, names=("device",), instruments="linear", on_unreliable="raise")
    assert isinstance(new, CheckedShadowFit) and new.reliable and new.flags == ()
    np.testing.assert_allclose(new.coef, old.coef, atol=1e-6)
    np.testing.assert_allclose(new.se, old.se, rtol=1e-3)   # efficient GMM = sandwich when q = k
    assert new.j_df == 0 and np.isnan(new.j_pvalue) and len(new.roots) == 1
    assert new.names == ("intercept", "device", "S")
    np.testing.assert_allclose(floss_weights(new, R, D, S_obs), floss_weights(old, R, D, S_obs), rtol=1e-5)


def test_j_test_size_under_the_null_and_invariance_to_instrument_scale():
    fits = [fit("none", seed) for seed in range(10)]
    assert all(f.j_df == 10 - 3 for f in fits)           # 1 + (D', Z1, Z2) + 6 products, 3 parameters
    rejected = sum(f.j_pvalue < 0.05 for f in fits)
    assert rejected <= 2, [f.j_pvalue for f in fits]
    assert 3 < np.mean([f.j_stat for f in fits]) < 12     # E[χ²(7)] = 7
    assert all(f.relevance_f > 100 for f in fits)
    # J and θ̂ do not depend on how an instrument is scaled or shifted
    R, D, S_obs, Z, _ = sample("none", 0)
    a = fit_shadow_checked(R, D, S_obs, Z, instruments=lambda d, z: z[:, 0] ** 2, on_unreliable="ignore")
    b = fit_shadow_checked(R, D, S_obs, Z, instruments=lambda d, z: 5 * z[:, 0] ** 2 - 2, on_unreliable="ignore")
    assert a.j_df == 2 and a.j_stat == pytest.approx(b.j_stat, rel=1e-6)
    np.testing.assert_allclose(a.coef, b.coef, atol=1e-7)


def test_j_test_power_against_a_direct_effect_and_a_quadratic_term():
    direct = [fit("direct", seed) for seed in range(5)]
    assert all("overidentified" in f.flags for f in direct), [f.j_pvalue for f in direct]
    assert all(not f.reliable for f in direct) and np.median([f.j_pvalue for f in direct]) < 0.01
    assert any("affects response directly" in m for m in direct[0].flag_messages)
    quad = [fit("quadratic", seed, n=20_000) for seed in range(4)]
    assert sum("overidentified" in f.flags for f in quad) >= 3, [f.j_pvalue for f in quad]


def test_relevance_test_catches_an_irrelevant_shadow():
    for seed in range(4):
        f = fit("irrelevant", seed)
        assert "weak_shadow" in f.flags and f.relevance_f < 10 and not f.reliable
        assert any("barely predict S" in m for m in f.flag_messages)
    R, D, S_obs, Z, _ = sample("none", 0)
    F, p = relevance_test(R, D[:, None], np.nan_to_num(S_obs), Z)
    assert F > 100 and p < 1e-12
    F0, p0 = relevance_test(R, D[:, None], np.nan_to_num(S_obs), np.random.default_rng(1).normal(size=(R.size, 2)))
    assert F0 < 10 and p0 > 1e-3


def symmetric_two_roots():
    """Responders' ``S`` symmetric about 0 and ``Z = S²``: if ``γ`` solves the moments, so does ``−γ``."""
    rng = np.random.default_rng(0)
    s = np.abs(rng.normal(size=1000))
    S_r, D_r = np.concatenate([s, -s]), np.tile(rng.normal(size=1000), 2)
    R = np.r_[np.ones(2000), np.zeros(800)]
    D = np.r_[D_r, rng.normal(size=800)]
    Z = np.r_[S_r ** 2, rng.normal(1.6, 0.5, size=800)]
    return R, D, np.r_[S_r, np.full(800, np.nan)], Z


def test_multiple_roots_are_reported():
    R, D, S, Z = symmetric_two_roots()
    f = fit_shadow_checked(R, D, S, Z, instruments="linear", on_unreliable="ignore")
    assert "multiple_roots" in f.flags and len(f.roots) == 2
    gammas = sorted(r[-1] for r in f.roots)
    assert gammas[0] == pytest.approx(-gammas[1], rel=1e-4) and gammas[1] > 0.3
    single = fit_shadow_checked(R, D, S, Z, instruments="linear", starts=1, on_unreliable="ignore")
    assert "multiple_roots" not in single.flags             # one start cannot see the second root


def test_policies_warn_raise_ignore():
    R, D, S_obs, Z, _ = sample("irrelevant", 0)
    with pytest.warns(UnreliableShadowFitWarning, match="weak_shadow"):
        warned = fit_shadow_checked(R, D, S_obs, Z)
    assert not warned.reliable
    with pytest.raises(UnreliableShadowFitError, match="weak_shadow") as info:
        fit_shadow_checked(R, D, S_obs, Z, on_unreliable="raise")
    assert isinstance(info.value, EstimationError) and "weak_shadow" in info.value.fit.flags
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ignored = fit_shadow_checked(R, D, S_obs, Z, on_unreliable="ignore")
        good = fit_shadow_checked(*sample("none", 1)[:4], on_unreliable="raise")
    assert ignored.flags == warned.flags and good.reliable and good.success


def test_bad_input():
    R, D, S_obs, Z, S = sample("none", 0, n=1000)
    with pytest.raises(ShapeError, match="on_unreliable"):
        fit_shadow_checked(R, D, S_obs, Z, on_unreliable="loud")
    with pytest.raises(ShapeError, match="alpha"):
        fit_shadow_checked(R, D, S_obs, Z, alpha=0)
    with pytest.raises(ShapeError, match="j_alpha"):
        fit_shadow_checked(R, D, S_obs, Z, j_alpha=1.0)
    with pytest.raises(ShapeError, match="starts"):
        fit_shadow_checked(R, D, S_obs, Z, starts=0)
    with pytest.raises(ShapeError, match="instruments: expected"):
        fit_shadow_checked(R, D, S_obs, Z, instruments="cubic")
    with pytest.raises(ShapeError, match="callable must return"):
        fit_shadow_checked(R, D, S_obs, Z, instruments=lambda d, z: z[:-1])
    with pytest.raises(ShapeError, match="collinear"):
        fit_shadow_checked(R, D, S_obs, np.column_stack([Z[:, 0], 2 * Z[:, 0]]), instruments="linear")
    with pytest.raises(ShapeError, match="names"):
        fit_shadow_checked(R, D, S_obs, Z, names=("a", "b"))
    with pytest.raises(ShapeError, match="satisfaction must be finite"):
        fit_shadow_checked(R, D, np.full(R.size, np.nan), Z)
    with pytest.raises(EstimationError, match="both responders and non-responders"):
        fit_shadow_checked(np.ones(R.size), D, S, Z)
    with pytest.raises(ShapeError, match="violation"):
        run("sideways", 2)
    with pytest.raises(ShapeError, match="sims"):
        run("none", 0)


def test_j_flag_uses_its_own_level():
    """``overidentified`` is raised exactly when J's p-value is below ``j_alpha`` (default
    :data:`J_ALPHA`), independently of the curvature test's ``alpha``."""
    from fairsched.propensity.floss_diagnostics import J_ALPHA

    assert J_ALPHA == 0.025
    between = 0
    for seed in range(12):
        R, D, S_obs, Z, _ = sample("quadratic", seed, n=2000)
        default = fit_shadow_checked(R, D, S_obs, Z, on_unreliable="ignore")
        loose = fit_shadow_checked(R, D, S_obs, Z, on_unreliable="ignore", j_alpha=0.3, alpha=0.01)
        assert default.j_pvalue == loose.j_pvalue
        assert ("overidentified" in default.flags) == (default.j_pvalue < J_ALPHA)
        assert ("overidentified" in loose.flags) == (loose.j_pvalue < 0.3)
        assert ("curvature" in loose.flags) == (loose.curvature_pvalue < 0.01)
        between += J_ALPHA <= default.j_pvalue < 0.3
    assert between >= 1  # the two levels were told apart at least once


def test_harness_flag_rates():
    res = {v: run(v, 40, n=5000, seed=1) for v in ("none", "direct", "irrelevant", "quadratic")}
    assert set(res["none"]) >= {"violation", "flag_rate", "bias", "sims", "n"}
    assert res["none"]["flag_rate"] <= 0.15
    assert res["direct"]["flag_rate"] >= 0.9 and res["irrelevant"]["flag_rate"] >= 0.9
    assert res["quadratic"]["flag_rate"] >= 0.15   # above the 5% size, but weak at n = 5000: see docs
    b = res["none"]["bias"]
    assert abs(b["mean"]) < 3 * b["se"] + 0.01
    assert abs(res["direct"]["bias_all"]["mean"]) > 0.05         # what the flags protect against
    if res["irrelevant"]["flag_rate"] == 1:
        assert res["irrelevant"]["bias"] == {"mean": None, "se": None}


def test_curvature_flag_finds_a_missing_square_and_keeps_its_size():
    rng = np.random.default_rng(8)
    d = simulate("quadratic", 60_000, rng)
    fit = fit_shadow_checked(d["R"], d["D"], np.where(d["R"] == 1, d["S"], np.nan), d["Z"], on_unreliable="ignore")
    assert "curvature" in fit.flags and fit.curvature_z < -3 and fit.curvature_pvalue < 1e-3
    assert "curvature" in fit.summary()
    false = 0
    for _ in range(40):
        d = simulate("none", 5000, rng)
        fit = fit_shadow_checked(d["R"], d["D"], np.where(d["R"] == 1, d["S"], np.nan), d["Z"], on_unreliable="ignore")
        false += "curvature" in fit.flags
    assert false <= 6  # 15% of 40: a 5% test
    # just identified (one shadow, linear instruments): no room for the S² term, no test
    fit = fit_shadow_checked(d["R"], d["D"], np.where(d["R"] == 1, d["S"], np.nan), d["Z"][:, 0],
                             instruments="linear", on_unreliable="ignore")
    assert np.isnan(fit.curvature_z) and "curvature" not in fit.flags


def test_untuned_violations_change_only_the_response():
    base = simulate("none", 4000, np.random.default_rng(3))
    for violation in ("interaction", "step", "d-squared"):
        other = simulate(violation, 4000, np.random.default_rng(3))
        np.testing.assert_array_equal(other["S"], base["S"])
        np.testing.assert_array_equal(other["Z"], base["Z"])
        assert 0.02 < np.mean(other["R"] != base["R"]) < 0.3, violation
    assert run("step", 2, n=2000)["violation"] == "step"


def test_informed_test_keeps_its_size_and_finds_the_term_it_is_told():
    rng = np.random.default_rng(5)
    null = [simulate("none", 5000, rng) for _ in range(40)]
    for term in ("quadratic", "direct"):
        assert np.mean([informed_rejects(term, data, 2) for data in null]) <= 0.15, term
    # a large population: the missing S² term and the direct effect are both found
    assert all(informed_rejects("quadratic", simulate("quadratic", 60_000, rng), 2) for _ in range(3))
    assert all(informed_rejects("direct", simulate("direct", 20_000, rng), 2) for _ in range(3))
    with pytest.raises(ShapeError, match="term"):
        informed_rejects("irrelevant", null[0], 2)
    with pytest.raises(ShapeError, match="informed"):
        run("none", 2, informed=True)
    assert run("quadratic", 2, n=2000, informed=True)["informed_power"] in (0.0, 0.5, 1.0)
    assert run("quadratic", 2, n=2000)["informed_power"] is None


def test_cli_prints_one_json_object(capfd):
    parser = argparse.ArgumentParser()
    add_floss_parser(parser.add_subparsers(dest="simulation"))
    args = parser.parse_args(["floss", "--violation", "direct", "--sims", "3", "--n", "3000", "--json", "--quiet"])
    with Output(True) as output:
        assert floss_command(args, output) == 0
    out = capfd.readouterr().out.strip().splitlines()
    assert len(out) == 1
    data = json.loads(out[0])
    assert data["violation"] == "direct" and data["sims"] == 3 and set(data["bias"]) == {"mean", "se"}
    assert 0 <= data["flag_rate"] <= 1 and data["j_alpha"] == 0.025
    args = parser.parse_args(["floss", "--violation", "quadratic", "--sims", "4", "--n", "3000", "--j-alpha", "0.9",
                              "--json", "--quiet"])
    with Output(True) as output:
        floss_command(args, output)
    loose = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert loose["j_alpha"] == 0.9 and loose["flags"].get("overidentified", 0) >= 1
    with pytest.raises(ShapeError, match="--j-alpha"):
        floss_command(parser.parse_args(["floss", "--violation", "none", "--sims", "1", "--j-alpha", "0"]), Output(False))
    with pytest.raises(ShapeError, match="--sims"):
        floss_command(parser.parse_args(["floss", "--violation", "none", "--sims", "0"]), Output(False))
