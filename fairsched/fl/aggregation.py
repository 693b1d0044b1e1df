"""Post-stratified aggregation, and training many fixed worker sets at once.

FedAvg weights a client's update by its data size, so the trained model minimises (for one
local step exactly, for ``K > 1`` approximately) the pooled empirical loss of the set: a set
dominated by urban data trains an urban model. Post-stratified aggregation instead gives
every example ``k`` of stratum ``j`` in the set ``S`` the weight

    ω_k = π̃_j / m_j(S),   m_j(S) = Σ_{u∈S} L_{u,j},   π̃_j = π_j·[m_j(S) > 0] / Σ_l π_l·[m_l(S) > 0],

so the gradient the server applies is ``Σ_j π̃_j·(mean gradient on stratum j's examples in S)``:
stratum ``j`` contributes its target share ``π_j`` whatever the set's composition. A stratum
the set does not hold (``m_j(S) = 0``) cannot be weighted; its share is spread over the
strata present (``π̃``), and its loss is whatever transfers from them. The shares ``π`` are
the target-population shares, e.g. IPW estimates (FedIPW, Morishita, "Who Trains Matters:
Federated Learning under Enrollment and Participation Selection Biases", 2026).

Client ``u`` runs its ``K`` local steps on its ω-weighted mean loss ``Σ_k ω_k ℓ_k / Σ_k ω_k``
and is aggregated with weight ``w_u = Σ_k ω_k`` (the Hájek form of
:mod:`fairsched.fl.training`). This is exactly :func:`fairsched.fl.training.train` run on a
:class:`~fairsched.fl.model.ClientData` whose ``mask`` holds ``ω`` instead of 0/1 (its local
step normalises by ``mask``), see :func:`poststratified_client_data`; :func:`train_sets`
does the same for a batch of sets at once, vectorised, and is what the experiments use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.fl.errors import SimulationError
from fairsched.fl.model import ClientData, sigmoid
from fairsched.fl.training import TrainConfig


def example_strata(sizes: Any, n_max: int) -> np.ndarray:
    """Per-example stratum labels ``(N, n_max)`` (−1 on padding) for clients whose examples are
    stored stratum by stratum, ``sizes[i, j]`` of stratum ``j`` (the layout of
    :func:`fairsched.fl.stratified.make_stratified_population`)."""
    L = np.asarray(sizes, dtype=np.int64)
    if L.ndim != 2 or (L < 0).any() or (L.sum(axis=1) > n_max).any():
        raise SimulationError(f"sizes: need a nonnegative (clients, strata) matrix with row sums <= {n_max}")
    out = np.full((L.shape[0], n_max), -1, dtype=np.int64)
    for i, row in enumerate(L):
        out[i, :row.sum()] = np.repeat(np.arange(L.shape[1]), row)
    return out


def poststratified_weights(strata: Any, shares: Any) -> tuple[np.ndarray, np.ndarray]:
    """Example weights ``ω`` ``(k, n_max)`` and client weights ``w = Σ_k ω`` ``(k,)`` of one set.

    ``strata`` is the set's ``(k, n_max)`` per-example stratum labels (−1: padding or an example
    to leave out), ``shares`` the target shares ``π`` ``(J,)``. The ``ω`` of the set sum to 1.
    """
    s = np.asarray(strata, dtype=np.int64)
    pi = np.asarray(shares, dtype=np.float64)
    if s.ndim != 2 or pi.ndim != 1 or (pi < 0).any() or not np.isclose(pi.sum(), 1.0) or s.max() >= pi.size:
        raise SimulationError("poststratified_weights: need (k, n_max) labels < J and J shares >= 0 summing to 1")
    m = np.bincount(s[s >= 0], minlength=pi.size).astype(np.float64)
    present = pi * (m > 0)
    if present.sum() <= 0:
        raise SimulationError("poststratified_weights: the set holds no example of a stratum with positive share")
    per = np.where(m > 0, present / present.sum() / np.maximum(m, 1.0), 0.0)
    omega = np.where(s >= 0, per[np.maximum(s, 0)], 0.0)
    return omega, omega.sum(axis=1)


def poststratified_client_data(data: ClientData, strata: np.ndarray, clients: Any,
                               shares: Any) -> tuple[ClientData, np.ndarray]:
    """The set ``clients`` as its own :class:`ClientData` with ``mask = ω`` and the client weights,
    for :func:`fairsched.fl.training.train` (participants ``arange(k)`` every round)."""
    c = np.asarray(clients, dtype=np.int64)
    omega, w = poststratified_weights(np.where(data.mask[c] > 0, strata[c], -1), shares)
    keep = w > 0
    return ClientData(data.X[c][keep], data.y[c][keep], omega[keep]), w[keep]


def train_sets(data: ClientData, sets: Any, example_weights: Any, client_weights: Any,
               config: TrainConfig) -> np.ndarray:
    """Final models ``θ_R`` ``(B, d)`` of ``B`` fixed sets, each training all ``R`` rounds.

    ``sets`` ``(B, k)`` client indices; ``example_weights`` ``(B, k, n_max)`` (local losses are
    the ``ω``-weighted means, e.g. ``data.mask[sets]`` for FedAvg or ``ω`` from
    :func:`poststratified_weights`); ``client_weights`` ``(B, k)`` the aggregation weights (a
    zero weight with zero example weights pads a smaller set). The same arithmetic as
    :func:`fairsched.fl.training.train` with :func:`fairsched.fl.model.local_updates`.
    """
    S = np.asarray(sets, dtype=np.int64)
    ew = np.asarray(example_weights, dtype=np.float64)
    w = np.asarray(client_weights, dtype=np.float64)
    if S.ndim != 2 or w.shape != S.shape or ew.shape != S.shape + (data.X.shape[1],):
        raise SimulationError(f"train_sets: sets {S.shape}, client weights {w.shape}, example weights "
                              f"{ew.shape} must be (B, k), (B, k), (B, k, n_max)")
    if not np.isfinite(ew).all() or (ew < 0).any() or not np.isfinite(w).all() or (w < 0).any():
        raise SimulationError("train_sets: weights must be finite and >= 0")
    if (w.sum(axis=1) <= 0).any():
        raise SimulationError("train_sets: every set needs a positive aggregation weight")
    used = int(np.max(np.flatnonzero(ew.reshape(-1, ew.shape[-1]).any(axis=0)), initial=0)) + 1
    X, y, ew = data.X[S][:, :, :used], data.y[S][:, :, :used], ew[:, :, :used]
    scale = ew / np.maximum(ew.sum(axis=2, keepdims=True), 1e-300)
    agg = w / w.sum(axis=1, keepdims=True)
    theta = np.zeros((S.shape[0], data.dim))
    for r in range(config.rounds):
        local = np.repeat(theta[:, None, :], S.shape[1], axis=1)
        for _ in range(config.local_steps):
            t = np.einsum("bknd,bkd->bkn", X, local)
            residual = (sigmoid(t) - y) * scale
            local -= config.local_lr * (np.einsum("bkn,bknd->bkd", residual, X) + config.ridge * local)
        step = config.server_lr / (1.0 + config.server_decay * r)
        theta = theta + step * np.einsum("bk,bkd->bd", agg, local - theta[:, None, :])
    return theta


def fedavg_weights(data: ClientData, sets: Any) -> tuple[np.ndarray, np.ndarray]:
    """FedAvg's example weights (the 0/1 mask) and client weights (data sizes) of ``sets`` ``(B, k)``."""
    S = np.asarray(sets, dtype=np.int64)
    return data.mask[S], data.sizes[S]


def poststratified_batch(data: ClientData, strata: np.ndarray, sets: Any, shares: Any,
                         drop: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Post-stratified ``(ω, w)`` for every set of ``sets`` ``(B, k)``; ``drop[b]`` (optional, −1 for
    none) is a stratum whose examples set ``b`` leaves out (pilot runs of a missing stratum).
    Entries of ``sets`` equal to −1 pad a smaller set."""
    S = np.asarray(sets, dtype=np.int64)
    B, k = S.shape
    omega = np.zeros((B, k, data.X.shape[1]))
    w = np.zeros((B, k))
    for b in range(B):
        real = S[b] >= 0
        lab = np.where(data.mask[S[b][real]] > 0, strata[S[b][real]], -1)
        if drop is not None and drop[b] >= 0:
            lab = np.where(lab == drop[b], -1, lab)
        omega[b, real], w[b, real] = poststratified_weights(lab, shares)
    return omega, w
