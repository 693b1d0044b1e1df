"""Per-stratum learning curves fitted from pilot training runs.

A pilot run trains the federated model on a set ``S_p`` with post-stratified aggregation
(:mod:`fairsched.fl.aggregation`) and records its per-stratum sizes ``m_{p,j}`` and a target
loss ``ℓ_p`` (on held-out data weighted by the target shares ``π``). The model of
:class:`~fairsched.utilities.poststratified_accuracy.PoststratifiedAccuracy` is

    ℓ_p ≈ A + Σ_j π_j·h_j(m_{p,j}),   h_j(m) = b_j·m^{c_j} (m > 0),   h_j(0) = t_j,

which :func:`fit_stratum_curves` fits by nonlinear least squares
(``scipy.optimize.least_squares``, bounds ``b_j > 0``, ``c_j ∈ [C_MIN, C_MAX]``, ``t_j >= 0``,
a few starts of ``c``). The curves are fitted jointly on the target loss, not one stratum's
loss at a time: the model is shared, so every stratum's data moves every stratum's loss,
but to first order the ``π``-weighted sum separates into one term per stratum (see the
utility's docstring). ``t_j`` is identified only by pilots without stratum ``j``
(``m_{p,j} = 0``); without such pilots it is set to ``b_j`` (the curve at one example) and
:attr:`StratumCurves.missing_fitted` says so.

Learning curve of Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A
Multi-Round Submodular Maximization Approach" (2021), Section VI; target shares as in
Morishita, "Who Trains Matters: Federated Learning under Enrollment and Participation
Selection Biases" (2026).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fairsched.fl.errors import SimulationError

C_MIN, C_MAX = -3.0, -0.02
C_STARTS = (-0.5, -1.0, -2.0)


@dataclass(frozen=True)
class StratumCurves:
    """Fitted ``A`` (common ``a_j``), ``b_j``, ``c_j``, ``t_j`` and the fit's RMSE."""

    a: float
    b: np.ndarray
    c: np.ndarray
    missing: np.ndarray
    missing_fitted: np.ndarray
    rmse: float

    def predict(self, m: Any, shares: Any) -> np.ndarray:
        """Predicted loss ``A + Σ_j π_j h_j(m_j)`` for ``(P, J)`` sizes ``m``."""
        return _predict(np.asarray(m, dtype=np.float64), np.asarray(shares, dtype=np.float64),
                        self.a, self.b, self.c, self.missing)

    def utility(self, sizes: Any, shares: Any):
        """The :class:`~fairsched.utilities.poststratified_accuracy.PoststratifiedAccuracy` of these curves."""
        from fairsched.utilities.poststratified_accuracy import PoststratifiedAccuracy

        return PoststratifiedAccuracy(sizes, shares, a=self.a, b=self.b, c=self.c, missing=self.missing)


def _predict(m: np.ndarray, pi: np.ndarray, A: float, b: np.ndarray, c: np.ndarray,
             t: np.ndarray) -> np.ndarray:
    pos = m > 0
    h = np.where(pos, b * np.power(np.where(pos, m, 1.0), c), t)
    return A + h @ pi


def fit_stratum_curves(m: Any, losses: Any, shares: Any, *, fixed_c: float | None = None) -> StratumCurves:
    """Fit ``ℓ_p ≈ A + Σ_j π_j h_j(m_{p,j})`` to pilot runs: ``m`` ``(P, J)``, ``losses`` ``(P,)``.

    ``fixed_c`` (e.g. ``−1``, the first-order asymptotic rate of the excess loss) fixes every
    ``c_j`` instead of fitting it: fewer parameters, less variance from noisy pilots.
    """
    from scipy.optimize import least_squares

    M = np.asarray(m, dtype=np.float64)
    y = np.asarray(losses, dtype=np.float64)
    pi = np.asarray(shares, dtype=np.float64)
    if M.ndim != 2 or y.shape != (M.shape[0],) or pi.shape != (M.shape[1],):
        raise SimulationError(f"fit_stratum_curves: m {M.shape}, losses {y.shape}, shares {pi.shape} "
                              "must be (P, J), (P,), (J,)")
    if not (np.isfinite(M).all() and np.isfinite(y).all()) or (M < 0).any():
        raise SimulationError("fit_stratum_curves: sizes must be finite and >= 0, losses finite")
    if (pi < 0).any() or not np.isclose(pi.sum(), 1.0):
        raise SimulationError("fit_stratum_curves: shares must be >= 0 and sum to 1")
    J = M.shape[1]
    fitted = (M == 0).any(axis=0) & (pi > 0)
    active = (M > 0).any(axis=0) & (pi > 0)
    P = y.size
    if fixed_c is not None and not C_MIN <= fixed_c <= C_MAX:
        raise SimulationError(f"fit_stratum_curves: fixed_c is {fixed_c}, expected in [{C_MIN}, {C_MAX}]")
    nc = 0 if fixed_c is not None else int(active.sum())
    n_par = 1 + int(active.sum()) + nc + int(fitted.sum())
    if P < n_par + 1:
        raise SimulationError(f"fit_stratum_curves: {P} pilot runs for {n_par} parameters; need at least {n_par + 1}")
    scale = max(float(y.std()), 1e-12)
    ia, ifit = np.flatnonzero(active), np.flatnonzero(fitted)

    def unpack(x: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
        b, c, t = np.ones(J), np.full(J, -1.0 if fixed_c is None else fixed_c), np.zeros(J)
        A = x[0]
        b[ia] = np.exp(x[1:1 + ia.size])
        if nc:
            c[ia] = x[1 + ia.size:1 + ia.size + nc]
        t[ifit] = x[1 + ia.size + nc:]
        t = np.where(fitted, t, b)
        return A, b, c, t

    def residual(x: np.ndarray) -> np.ndarray:
        return (_predict(M, pi, *unpack(x)) - y) / scale

    best = None
    mean_m = np.array([M[M[:, j] > 0, j].mean() if (M[:, j] > 0).any() else 1.0 for j in range(J)])
    for c0 in (C_STARTS if fixed_c is None else (fixed_c,)):
        spread = max(float(y.max() - y.min()), 1e-6)
        b0 = np.log(np.maximum(spread * mean_m[ia] ** (-c0), 1e-12))
        x0 = np.concatenate([[float(y.min()) - 0.1 * spread], b0, np.full(nc, c0),
                             np.full(ifit.size, spread)])
        lo = np.concatenate([[-np.inf], np.full(ia.size, -50.0), np.full(nc, C_MIN), np.zeros(ifit.size)])
        hi = np.concatenate([[np.inf], np.full(ia.size, 50.0), np.full(nc, C_MAX), np.full(ifit.size, np.inf)])
        res = least_squares(residual, np.clip(x0, lo + 1e-9, hi - 1e-9), bounds=(lo, hi), method="trf")
        if best is None or res.cost < best.cost:
            best = res
    A, b, c, t = unpack(best.x)
    rmse = float(np.sqrt(np.mean((_predict(M, pi, A, b, c, t) - y) ** 2)))
    return StratumCurves(float(A), b, c, t, fitted, rmse)


def plugin_curves(X: Any, y: Any, labels: Any, theta: Any, shares: Any, ridge: float) -> np.ndarray:
    """First-order curve coefficients ``b_j = ½·tr(Ĥ⁻¹ V̂_j)·π_j`` (with ``c_j = −1``) from held-out data.

    The post-stratified estimator's excess target loss is ``≈ ½·tr(H⁻¹ Σ_j π_j² V_j / m_j)``;
    written as ``Σ_j π_j·b_j/m_j`` this is ``b_j = ½·π_j·tr(H⁻¹ V_j)``. ``Ĥ`` is the π-weighted
    Hessian (plus ridge) and ``V̂_j`` stratum ``j``'s per-example gradient covariance, both at
    ``theta`` (e.g. a pilot model) on the held-out examples ``X (P, d)``, ``y``, ``labels``.
    """
    from fairsched.fl.model import sigmoid

    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    s = np.asarray(labels, dtype=np.int64)
    pi = np.asarray(shares, dtype=np.float64)
    th = np.asarray(theta, dtype=np.float64)
    p = sigmoid(X @ th)
    H = ridge * np.eye(X.shape[1])
    out = np.zeros(pi.size)
    covs = []
    for j in range(pi.size):
        sel = s == j
        if not sel.any():
            raise SimulationError(f"plugin_curves: no held-out example of stratum {j}")
        Xj = X[sel]
        H += pi[j] * (Xj * (p[sel] * (1 - p[sel]))[:, None]).T @ Xj / sel.sum()
        g = Xj * (p[sel] - y[sel])[:, None]
        covs.append(np.cov(g.T, bias=True))
    Hi = np.linalg.inv(H)
    for j in range(pi.size):
        out[j] = 0.5 * pi[j] * float(np.trace(Hi @ covs[j]))
    return np.maximum(out, 1e-12)
