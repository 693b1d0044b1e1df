"""Federated logistic regression: clients' data, the target objective, local steps, F*.

Client ``i`` holds ``n_i`` examples ``(x, y)``, ``y ∈ {0, 1}``, stored padded as
``X (N, n_max, d)``, ``y (N, n_max)`` and a 0/1 ``mask``. The loss of a model ``θ`` on one
example is ``ℓ(θ; x, y) = log(1 + e^{x·θ}) − y·x·θ``. The target-population objective is

    F(θ) = Σ_{i,k} ω_{ik}·ℓ(θ; x_ik, y_ik) + (μ/2)·‖θ‖²,   Σ ω = 1,

with example weights ``ω`` describing the target (for FedIPW's client-level target,
Morishita 2026: ``ω_{ik} = 1/(N·n_i)``, i.e. ``F = (1/N) Σ_i f_i``); ``μ > 0`` makes ``F``
strongly convex (the setting of Morishita's optimisation analysis). ``F* = min F`` is
solved centrally with L-BFGS (``scipy.optimize.minimize``). Local training (FedAvg) runs
``K`` full-batch gradient steps on ``f_i(θ) + (μ/2)‖θ‖²`` for all participants at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairsched.fl.errors import SimulationError


def sigmoid(t: np.ndarray) -> np.ndarray:
    """The logistic function ``1/(1 + e^{−t})`` (via tanh: no overflow)."""
    return 0.5 * (1.0 + np.tanh(0.5 * t))


def _softplus(t: np.ndarray) -> np.ndarray:
    """``log(1 + e^t)`` without overflow (faster than ``np.logaddexp(0, t)``)."""
    return np.maximum(t, 0.0) + np.log1p(np.exp(-np.abs(t)))


@dataclass(frozen=True, eq=False)
class ClientData:
    """Padded per-client data: ``X (N, n_max, d)``, ``y (N, n_max)``, ``mask (N, n_max)``."""

    X: np.ndarray
    y: np.ndarray
    mask: np.ndarray

    def __post_init__(self) -> None:
        if self.X.ndim != 3 or self.y.shape != self.X.shape[:2] or self.mask.shape != self.y.shape:
            raise SimulationError(f"client data: X {self.X.shape}, y {self.y.shape}, mask {self.mask.shape} "
                                  "must be (N, n_max, d), (N, n_max), (N, n_max)")
        if (self.mask.sum(axis=1) == 0).any():
            raise SimulationError("client data: every client needs at least one example")

    @property
    def clients(self) -> int:
        return int(self.X.shape[0])

    @property
    def dim(self) -> int:
        return int(self.X.shape[2])

    @property
    def sizes(self) -> np.ndarray:
        """``n_i`` per client."""
        return self.mask.sum(axis=1).astype(np.float64)


@dataclass(frozen=True, eq=False)
class Objective:
    """``F(θ) = Σ ω·ℓ + (μ/2)‖θ‖²`` over the population's examples, with its optimum ``F*``."""

    X: np.ndarray
    y: np.ndarray
    weights: np.ndarray
    ridge: float

    def value_and_grad(self, theta: np.ndarray) -> tuple[float, np.ndarray]:
        t = self.X @ theta
        loss = _softplus(t) - self.y * t
        grad = self.X.T @ (self.weights * (sigmoid(t) - self.y))
        return (float(self.weights @ loss + 0.5 * self.ridge * theta @ theta),
                grad + self.ridge * theta)

    def value(self, theta: np.ndarray) -> float:
        return self.value_and_grad(theta)[0]

    def values(self, thetas: np.ndarray) -> np.ndarray:
        """``F`` of every row of ``thetas`` (``(m, d)``) at once."""
        t = thetas @ self.X.T
        loss = _softplus(t) - self.y * t
        return loss @ self.weights + 0.5 * self.ridge * np.einsum("md,md->m", thetas, thetas)

    def solve(self) -> tuple[np.ndarray, float]:
        """``(θ*, F*)`` by L-BFGS to gradient norm 1e-12."""
        from scipy.optimize import minimize

        res = minimize(self.value_and_grad, np.zeros(self.X.shape[1]), jac=True, method="L-BFGS-B",
                       options={"gtol": 1e-12, "ftol": 1e-15, "maxiter": 10_000})
        return res.x, float(res.fun)


def client_objective(data: ClientData, client_weights: np.ndarray, ridge: float) -> Objective:
    """The objective ``Σ_i ω_i f_i`` (``f_i`` the mean loss of client ``i``) on all examples."""
    w = np.asarray(client_weights, dtype=np.float64)
    if w.shape != (data.clients,) or (w < 0).any() or not np.isclose(w.sum(), 1.0):
        raise SimulationError("client weights must be nonnegative, one per client, summing to 1")
    ex = data.mask * (w / data.sizes)[:, None]
    keep = data.mask.reshape(-1) > 0
    return Objective(data.X.reshape(-1, data.dim)[keep], data.y.reshape(-1)[keep],
                     ex.reshape(-1)[keep], float(ridge))


def local_updates(theta: np.ndarray, data: ClientData, clients: np.ndarray, steps: int,
                  lr: float, ridge: float) -> np.ndarray:
    """``Δ_i = θ_i^K − θ`` after ``K = steps`` gradient steps on ``f_i + (μ/2)‖·‖²`` for each client."""
    X, y, m = data.X[clients], data.y[clients], data.mask[clients]
    scale = m / m.sum(axis=1, keepdims=True)
    local = np.repeat(theta[None, :], clients.size, axis=0)
    for _ in range(steps):
        residual = (sigmoid((X @ local[:, :, None])[:, :, 0]) - y) * scale
        local -= lr * ((residual[:, None, :] @ X)[:, 0, :] + ridge * local)
    return local - theta[None, :]
