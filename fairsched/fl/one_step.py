"""The pilot round behind :class:`~fairsched.utilities.one_step_validation.OneStepValidation`,
for federated logistic regression (:mod:`fairsched.fl.model`).

1. Reference model ``θ_ref``: the post-stratified fit of *all* workers,
   ``argmin Σ_j π̃_j·(1/m_j)·Σ_{k∈j} ℓ_k(θ) + (μ/2)‖θ‖²`` (what full participation with
   post-stratified aggregation converges to; solved centrally here, in a deployment by a
   federated run).
2. Every worker reports, per stratum ``j``, the sums over its examples of the gradient
   ``(σ(x·θ_ref) − y)·x`` and of the Hessian ``σ(1 − σ)·x xᵀ`` of the logistic loss at ``θ_ref``.
3. The validation objective (held-out examples standing for the target; by default the
   objective of step 1 itself) is replaced by its quadratic model at its minimiser: ``θ_V`` and
   ``H_V = Σ_k w_k σ_k(1 − σ_k) x_k x_kᵀ + μ·I``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.fl.aggregation import poststratified_weights
from fairsched.fl.errors import SimulationError
from fairsched.fl.model import ClientData, Objective, sigmoid
from fairsched.fl.training import TrainConfig
from fairsched.utilities.one_step_validation import OneStepValidation


def poststratified_objective(data: ClientData, strata: np.ndarray, clients: Any, shares: Any,
                             ridge: float) -> Objective:
    """The post-stratified objective ``Σ_j π̃_j·(1/m_j)·Σ_{k∈j} ℓ_k + (μ/2)‖θ‖²`` of all ``clients``' examples."""
    c = np.asarray(clients, dtype=np.int64)
    omega, _ = poststratified_weights(np.where(data.mask[c] > 0, strata[c], -1), shares)
    keep = omega.reshape(-1) > 0
    return Objective(data.X[c].reshape(-1, data.dim)[keep], data.y[c].reshape(-1)[keep],
                     omega.reshape(-1)[keep], float(ridge))


def poststratified_reference(data: ClientData, strata: np.ndarray, clients: Any, shares: Any,
                             ridge: float) -> np.ndarray:
    """``θ_ref``: the minimiser of :func:`poststratified_objective`."""
    return poststratified_objective(data, strata, clients, shares, ridge).solve()[0]


def logistic_statistics(data: ClientData, strata: np.ndarray, clients: Any, theta: np.ndarray,
                        n_strata: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per worker and stratum: example counts ``(n, J)``, gradient sums ``(n, J, d)`` and Hessian
    sums ``(n, J, d, d)`` of the logistic loss at ``theta`` (padding and labels −1 excluded)."""
    c = np.asarray(clients, dtype=np.int64)
    X, y = data.X[c], data.y[c]
    labels = np.where(data.mask[c] > 0, strata[c], -1)
    if labels.max(initial=-1) >= n_strata:
        raise SimulationError(f"stratum label {labels.max()} >= n_strata = {n_strata}")
    p = sigmoid(X @ np.asarray(theta, dtype=np.float64))
    counts, grads, hess = [], [], []
    for j in range(n_strata):
        member = (labels == j).astype(np.float64)
        counts.append(member.sum(axis=1))
        grads.append(np.einsum("un,und->ud", member * (p - y), X))
        weighted = X * (member * p * (1.0 - p))[:, :, None]
        hess.append(np.swapaxes(weighted, 1, 2) @ X)
    return np.stack(counts, axis=1), np.stack(grads, axis=1), np.stack(hess, axis=1)


def validation_quadratic(validation: Objective) -> tuple[np.ndarray, np.ndarray]:
    """``(θ_V, H_V)``: the validation objective's minimiser and its Hessian there."""
    theta, _ = validation.solve()
    p = sigmoid(validation.X @ theta)
    weighted = validation.X * (validation.weights * p * (1.0 - p))[:, None]
    return theta, weighted.T @ validation.X + validation.ridge * np.eye(theta.size)


def one_step_utility(data: ClientData, strata: np.ndarray, clients: Any, shares: Any, ridge: float,
                     validation: Objective | None = None, *, pooled: bool = False,
                     training: TrainConfig | None = None) -> OneStepValidation:
    """The one-step validation utility over ``clients`` (worker ``u`` is ``clients[u]``).

    ``validation`` defaults to the post-stratified objective of all the clients' own examples
    (in-sample: sets are then scored by how close their fit comes to the fit of everyone, in
    that objective's Hessian metric). ``pooled`` replaces the per-worker Hessians by each
    stratum's per-example mean at ``θ_ref`` (the utility then holds ``O(n·J·d)`` instead of
    ``O(n·J·d²)``; the per-worker sums are still formed once here). ``training``, when given, is the
    schedule every scored set trains with from ``θ = 0`` (its rounds, local steps and rates;
    its ridge must equal ``ridge``); by default the set is assumed trained to convergence.
    """
    if training is not None and training.ridge != ridge:
        raise SimulationError(f"training.ridge = {training.ridge} differs from ridge = {ridge}")
    pi = np.asarray(shares, dtype=np.float64)
    everyone = poststratified_objective(data, strata, clients, pi, ridge)
    theta = everyone.solve()[0]
    counts, grads, hess = logistic_statistics(data, strata, clients, theta, pi.size)
    if pooled:
        hess = hess.sum(axis=0) / np.maximum(counts.sum(axis=0), 1.0)[:, None, None]
    theta_v, hess_v = validation_quadratic(everyone if validation is None else validation)
    schedule = None if training is None else {
        "rounds": training.rounds, "local_steps": training.local_steps, "local_lr": training.local_lr,
        "server_lr": training.server_lr, "server_decay": training.server_decay}
    return OneStepValidation(counts, grads, hess, pi, theta, ridge, theta_v, hess_v, training=schedule)
