"""The one-step validation utility: its Newton step against one written from the examples,
against the exact fit, its closed-form gains, edge cases, config round trip, input errors,
and that it predicts the realised post-stratified loss on the bundled validity DGP."""

from __future__ import annotations

import json

import numpy as np
import pytest

from fairsched.errors import InstanceError
from fairsched.fl.aggregation import (
    poststratified_batch,
    poststratified_weights,
    train_sets,
)
from fairsched.fl.model import ClientData, Objective, sigmoid
from fairsched.fl.one_step import one_step_utility, poststratified_reference
from fairsched.utilities import OneStepValidation, utility_from_config
from fairsched.utilities.base import SetFunction

RIDGE = 0.01


def small_population(seed: int, clients: int = 12, strata: int = 3, dim: int = 3, n_max: int = 30):
    """Clients with examples of a few strata (stratum-specific logistic models), a validation set."""
    rng = np.random.default_rng(seed)
    X = np.zeros((clients, n_max, dim))
    y = np.zeros((clients, n_max))
    mask = np.zeros((clients, n_max))
    labels = np.full((clients, n_max), -1)
    theta = rng.normal(size=(strata, dim))
    for i in range(clients):
        size = int(rng.integers(5, n_max + 1))
        labels[i, :size] = rng.choice(strata, size=size, p=np.r_[0.7, np.full(strata - 1, 0.3 / (strata - 1))]
                                      if i % 2 else None)
        X[i, :size] = rng.normal(size=(size, dim)) + 0.3 * labels[i, :size, None]
        y[i, :size] = rng.random(size) < sigmoid(np.einsum("nd,nd->n", X[i, :size], theta[labels[i, :size]]))
        mask[i, :size] = 1.0
    shares = rng.dirichlet(np.ones(strata))
    Xv = rng.normal(size=(600, dim))
    sv = rng.choice(strata, size=600, p=shares)
    yv = (rng.random(600) < sigmoid(np.einsum("nd,nd->n", Xv + 0.3 * sv[:, None], theta[sv]))).astype(float)
    validation = Objective(Xv + 0.3 * sv[:, None], yv, np.full(600, 1 / 600), RIDGE)
    return ClientData(X, y, mask), labels, shares, validation


def weighted_objective(data, labels, members, shares):
    omega, _ = poststratified_weights(np.where(data.mask[members] > 0, labels[members], -1), shares)
    keep = omega.reshape(-1) > 0
    return Objective(data.X[members].reshape(-1, data.dim)[keep], data.y[members].reshape(-1)[keep],
                     omega.reshape(-1)[keep], RIDGE)


def random_masks(rng, n, count, size):
    masks = np.zeros((count, n), dtype=bool)
    for row in masks:
        row[rng.choice(n, size=size, replace=False)] = True
    return masks


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_newton_step_equals_one_written_from_the_examples(seed):
    data, labels, shares, validation = small_population(seed)
    workers = np.arange(data.clients)
    f = one_step_utility(data, labels, workers, shares, RIDGE, validation)
    rng = np.random.default_rng(seed + 10)
    masks = random_masks(rng, f.n, 6, 4)
    models = f.models(masks)
    for mask, model in zip(masks, models):
        objective = weighted_objective(data, labels, workers[mask], shares)
        _, grad = objective.value_and_grad(f.reference)
        p = sigmoid(objective.X @ f.reference)
        hess = (objective.X * (objective.weights * p * (1 - p))[:, None]).T @ objective.X + RIDGE * np.eye(f.dim)
        np.testing.assert_allclose(model, f.reference - np.linalg.solve(hess, grad), rtol=1e-9, atol=1e-12)
    q = lambda t: 0.5 * (t - f.validation_optimum) @ f.validation_hessian @ (t - f.validation_optimum)  # noqa: E731
    np.testing.assert_allclose(f.values(masks), [q(f.initial) - q(m) for m in models], rtol=1e-10, atol=1e-12)
    theta_v, _ = validation.solve()
    np.testing.assert_allclose(f.validation_optimum, theta_v)


@pytest.mark.parametrize("seed", [0, 1])
def test_one_step_is_close_to_the_exact_fit(seed):
    """Second order: the step's error is a small fraction of the distance from θ_ref."""
    data, labels, shares, validation = small_population(seed, clients=20)
    f = one_step_utility(data, labels, np.arange(data.clients), shares, RIDGE, validation)
    masks = random_masks(np.random.default_rng(seed), f.n, 5, 8)
    for mask, model in zip(masks, f.models(masks)):
        exact = weighted_objective(data, labels, np.flatnonzero(mask), shares).solve()[0]
        assert np.linalg.norm(model - exact) <= 0.25 * np.linalg.norm(f.reference - exact)


def test_reference_is_the_fit_of_all_workers():
    data, labels, shares, _ = small_population(3)
    theta = poststratified_reference(data, labels, np.arange(data.clients), shares, RIDGE)
    _, grad = weighted_objective(data, labels, np.arange(data.clients), shares).value_and_grad(theta)
    assert np.linalg.norm(grad) < 1e-8


def test_pooled_equals_per_worker_when_hessians_are_proportional_to_counts():
    rng = np.random.default_rng(4)
    n, J, d = 9, 3, 2
    sizes = rng.integers(0, 6, size=(n, J)).astype(float)
    mean_hess = np.stack([np.cov(rng.normal(size=(d, 20))) for _ in range(J)])
    common = dict(sizes=sizes, gradients=rng.normal(size=(n, J, d)), shares=[0.5, 0.3, 0.2],
                  reference=rng.normal(size=d), ridge=0.1, validation_optimum=rng.normal(size=d),
                  validation_hessian=np.eye(d))
    pooled = OneStepValidation(hessians=mean_hess, **common)
    per_worker = OneStepValidation(hessians=sizes[:, :, None, None] * mean_hess[None], **common)
    masks = random_masks(rng, n, 20, 3)
    np.testing.assert_allclose(pooled.values(masks), per_worker.values(masks), rtol=1e-10, atol=1e-12)
    assert pooled.pooled and not per_worker.pooled


@pytest.mark.parametrize("pooled", [False, True])
def test_closed_form_gains_equal_evaluated_gains(pooled):
    data, labels, shares, validation = small_population(5)
    f = one_step_utility(data, labels, np.arange(data.clients), shares, RIDGE, validation, pooled=pooled)
    for S in ([], [3], [0, 4, 7], list(range(f.n - 1))):
        np.testing.assert_allclose(f.gains(S), SetFunction.gains(f, S), rtol=1e-9, atol=1e-12)
        assert (f.gains(S)[S] == 0).all()


def test_empty_set_and_sets_without_a_positive_share_stratum_score_zero():
    f = OneStepValidation(sizes=[[2, 0], [0, 1]], gradients=[[[-2.0], [0.0]], [[0.0], [-3.0]]],
                          hessians=[[[1.0]], [[1.0]]], shares=[1.0, 0.0], reference=[0.0], ridge=0.0,
                          validation_optimum=[2.0], validation_hessian=[[1.0]], initial=[0.5])
    masks = np.array([[False, False], [False, True], [True, False]])
    np.testing.assert_array_equal(f.models(masks)[:2], [[0.5], [0.5]])
    values = f.values(masks)
    assert values[0] == 0.0 and values[1] == 0.0
    assert values[2] == pytest.approx(0.5 * 1.5 ** 2 - 0.5 * 1.0 ** 2)  # θ = 1 from θ_init = 0.5


def test_not_monotone_and_says_so():
    # worker 2's labels pull stratum 0's mean far from the validation optimum
    f = OneStepValidation(sizes=[[2, 0], [0, 1], [1, 0]], gradients=[[[-2.0], [0.0]], [[0.0], [-3.0]], [[10.0], [0.0]]],
                          hessians=[[[1.0]], [[1.0]]], shares=[0.5, 0.5], reference=[0.0], ridge=0.0,
                          validation_optimum=[2.0], validation_hessian=[[1.0]])
    assert f.value([0, 1, 2]) < f.value([0, 1])
    assert f.submodular is False and f.submodular_off_empty is False


def test_config_round_trip():
    data, labels, shares, validation = small_population(6)
    for pooled in (False, True):
        f = one_step_utility(data, labels, np.arange(data.clients), shares, RIDGE, validation, pooled=pooled)
        g = utility_from_config(json.loads(json.dumps(f.to_config())), f.n)
        assert isinstance(g, OneStepValidation) and g.pooled == pooled
        masks = random_masks(np.random.default_rng(0), f.n, 10, 5)
        np.testing.assert_array_equal(f.values(masks), g.values(masks))


GOOD = dict(sizes=[[2, 0], [0, 1]], gradients=[[[-2.0], [0.0]], [[0.0], [-3.0]]], hessians=[[[1.0]], [[1.0]]],
            shares=[0.5, 0.5], reference=[0.0], ridge=0.0, validation_optimum=[2.0], validation_hessian=[[1.0]])


@pytest.mark.parametrize("change, key, match", [
    ({"sizes": [[2, -1], [0, 1]]}, "sizes", ">= 0"),
    ({"shares": [0.5, 0.6]}, "shares", "sum to 1"),
    ({"shares": [1.5, -0.5]}, "shares", ">= 0"),
    ({"gradients": [[[-2.0]], [[0.0]]]}, "gradients", "shape"),
    ({"hessians": [[[1.0]]]}, "hessians", "shape"),
    ({"hessians": [[[-1.0]], [[1.0]]]}, "hessians", "positive semi-definite"),
    ({"validation_hessian": [[1.0, 2.0], [0.0, 1.0]], "reference": [0.0, 0.0]}, "gradients", "shape"),
    ({"validation_optimum": [1.0, 2.0]}, "validation_optimum", "shape"),
    ({"ridge": -1.0}, "ridge", ">= 0"),
    ({"reference": [float("nan")]}, "reference", "not finite"),
])
def test_bad_inputs_name_the_key(change, key, match):
    with pytest.raises(InstanceError, match=match) as err:
        OneStepValidation(**{**GOOD, **change})
    assert err.value.key == key


def test_asymmetric_validation_hessian_rejected():
    with pytest.raises(InstanceError, match="symmetric") as err:
        OneStepValidation(**{**GOOD, "validation_hessian": [[1.0, 0.5], [0.0, 1.0]], "reference": [0.0, 0.0],
                             "gradients": np.zeros((2, 2, 2)), "hessians": np.stack([np.eye(2)] * 2),
                             "validation_optimum": [2.0, 0.0]})
    assert err.value.key == "validation_hessian"


def test_wrong_worker_count_rejected():
    with pytest.raises(InstanceError, match="shape") as err:
        OneStepValidation(**GOOD, n=3)
    assert err.value.key == "sizes"


def test_predicts_the_realised_poststratified_loss_on_bundled():
    """On the bundled validity DGP (seed 0, 30 random 10-sets, the harness's training schedule)
    the utility ranks sets by their realised target loss; the count-based utilities reach 0.26 there."""
    from scipy.stats import spearmanr

    from fairsched.fl.utility_validity import DEFAULT_TRAIN, _random_sets
    from fairsched.fl.validity_dgps import make_validity_population

    pop = make_validity_population("bundled", 0)
    f = one_step_utility(pop.data, pop.strata, pop.workers, pop.shares_hat, DEFAULT_TRAIN.ridge, pop.validation)
    local = _random_sets(np.random.default_rng(1), pop.workers.size, [10] * 30, 10)
    clients = pop.workers[local]
    omega, w = poststratified_batch(pop.data, pop.strata, clients, pop.shares_hat)
    loss = pop.objective.values(train_sets(pop.data, clients, omega, w, DEFAULT_TRAIN)) - pop.f_star
    masks = np.zeros((30, f.n), dtype=bool)
    masks[np.arange(30)[:, None], local] = True
    assert spearmanr(f.values(masks), -loss).statistic > 0.6


SCHEDULE = {"rounds": 7, "local_steps": 3, "local_lr": 0.4, "server_lr": 0.9, "server_decay": 0.3}


def test_training_schedule_equals_the_training_loop_on_the_quadratic():
    """With the schedule, θ_S^R is what R rounds of K local gradient steps (aggregated, decayed server
    rate) reach on the quadratic ½(θ − θ_S)ᵀH_S(θ − θ_S) from θ_init."""
    rng = np.random.default_rng(7)
    n, J, d = 8, 2, 3
    common = dict(sizes=rng.integers(1, 5, size=(n, J)).astype(float), gradients=rng.normal(size=(n, J, d)),
                  hessians=np.stack([np.cov(rng.normal(size=(d, 30))) + 0.1 * np.eye(d) for _ in range(J)]),
                  shares=[0.6, 0.4], reference=rng.normal(size=d), ridge=0.05, validation_optimum=np.zeros(d),
                  validation_hessian=np.eye(d), initial=rng.normal(size=d))
    converged = OneStepValidation(**common)
    scheduled = OneStepValidation(**common, training=SCHEDULE)
    masks = random_masks(rng, n, 5, 3)
    optimum = converged.models(masks)
    pt = np.asarray(common["shares"]) * np.ones((5, J))
    for mask, target, got, share in zip(masks, optimum, scheduled.models(masks), pt):
        H = np.einsum("j,jde->de", share / share.sum(), common["hessians"]) + 0.05 * np.eye(d)
        theta = np.array(common["initial"])
        for r in range(SCHEDULE["rounds"]):
            local = theta.copy()
            for _ in range(SCHEDULE["local_steps"]):
                local -= SCHEDULE["local_lr"] * H @ (local - target)
            theta = theta + SCHEDULE["server_lr"] / (1 + SCHEDULE["server_decay"] * r) * (local - theta)
        np.testing.assert_allclose(got, theta, rtol=1e-10, atol=1e-12)


def test_training_schedule_tracks_short_federated_training():
    """Logistic regression trained for a few rounds stops far from the set's optimum; the scheduled
    prediction follows the trained model, the converged one does not."""
    from fairsched.fl.training import TrainConfig

    data, labels, shares, validation = small_population(8, clients=16)
    config = TrainConfig(rounds=4, local_steps=1, local_lr=0.5, server_lr=1.0, ridge=RIDGE, server_decay=0.1)
    workers = np.arange(data.clients)
    converged = one_step_utility(data, labels, workers, shares, RIDGE, validation)
    scheduled = one_step_utility(data, labels, workers, shares, RIDGE, validation, training=config)
    local = np.stack([np.sort(np.random.default_rng(s).choice(data.clients, 6, replace=False)) for s in range(5)])
    omega, w = poststratified_batch(data, labels, local, shares)
    trained = train_sets(data, local, omega, w, config)
    masks = np.zeros((5, data.clients), dtype=bool)
    masks[np.arange(5)[:, None], local] = True
    near = np.linalg.norm(scheduled.models(masks) - trained, axis=1)
    far = np.linalg.norm(converged.models(masks) - trained, axis=1)
    assert (near < 0.3 * far).all(), (near, far)
    with pytest.raises(Exception, match="ridge"):
        one_step_utility(data, labels, workers, shares, 0.5, validation, training=config)


@pytest.mark.parametrize("training, key, match", [
    ({**SCHEDULE, "rounds": 0}, "training", "integer >= 1"),
    ({k: v for k, v in SCHEDULE.items() if k != "local_lr"}, "training", "missing"),
    ({**SCHEDULE, "momentum": 0.9}, "training", "unknown"),
    ({**SCHEDULE, "local_lr": -0.1}, "training.local_lr", "> 0"),
    ({**SCHEDULE, "server_decay": -1.0}, "training.server_decay", ">= 0"),
    ([1, 2], "training", "table"),
])
def test_bad_training_schedules_name_the_key(training, key, match):
    with pytest.raises(InstanceError, match=match) as err:
        OneStepValidation(**GOOD, training=training)
    assert err.value.key == key


def test_config_round_trip_with_schedule():
    f = OneStepValidation(**GOOD, training=SCHEDULE)
    g = utility_from_config(json.loads(json.dumps(f.to_config())), 2)
    assert g.training == SCHEDULE
    masks = np.array([[True, False], [True, True], [False, True]])
    np.testing.assert_array_equal(f.values(masks), g.values(masks))


def test_singular_hessian_without_ridge_says_what_to_do():
    f = OneStepValidation(sizes=[[1], [1]], gradients=[[[1.0, 0.0]], [[0.0, 1.0]]],
                          hessians=[[[1.0, 0.0], [0.0, 0.0]]], shares=[1.0], reference=[0.0, 0.0], ridge=0.0,
                          validation_optimum=[0.0, 0.0], validation_hessian=np.eye(2))
    with pytest.raises(ValueError, match="singular.*ridge > 0"):
        f.value([0])
