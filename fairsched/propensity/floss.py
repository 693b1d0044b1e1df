"""FLOSS: response propensities under opt-out that depends on satisfaction.

After Goetze, Felten, Albrecht and Bhattacharya, "FLOSS: Federated Learning with Opt-Out
and Straggler Support" (arXiv:2507.23115, 2025); ``docs/mathematics.md`` §11.

Response ``R`` (1: the user kept participating) depends on device information ``D'`` and
on satisfaction ``S``, which is seen only for responders: missing not at random. A shadow
variable ``Z`` (part of the device information) is associated with ``S`` but does not
affect response once ``(D', S)`` are known: ``R ⟂ Z | (D', S)``. With the model

    π(D', S) = P(R = 1 | D', S) = expit(θ_0 + α·D' + γ·S),

the true ``θ = (θ_0, α, γ)`` solves FLOSS's moment equations

    m(θ) = (1/n) Σ_i (R_i / π(D'_i, S_i; θ) − 1) · h(D'_i, Z_i) = 0,   h = (1, D', Z),

because ``E[R/π − 1 | D', S, Z] = 0`` and ``h`` depends only on ``(D', Z)``. Non-responders
enter only through ``−h_i`` (``R_i/π_i = 0``), so their ``S`` is never needed. ``Z`` must be
relevant (associated with ``S``) or ``γ`` is not identified (singular Jacobian). The
system is solved with ``scipy.optimize.root`` (``hybr`` when just identified, ``lm`` least
squares when ``Z`` has several columns); standard errors are the sandwich
``J⁻¹ Ω J⁻ᵀ / n`` of a just-identified M-estimator. :func:`fit_shadow` checks nothing;
the over-identified, diagnosed fit (efficient GMM, Hansen's J, relevance test, multi-start)
is :func:`fairsched.propensity.floss_diagnostics.fit_shadow_checked`.

Then, as in FLOSS: sample ``k`` responders with probability ``∝ 1/π̂`` for the next round
and aggregate their updates, optionally clipped to norm ``C`` with Gaussian noise ``σ·C``
(differential privacy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fairsched.propensity.errors import EstimationError, ShapeError
from fairsched.propensity.validation import as_binary, as_matrix, check_propensities
from fairsched.seeding import Seed, as_generator
from fairsched.results import Result


@dataclass(frozen=True)
class ShadowFit(Result):
    """Solution of the shadow-variable moment equations.

    ``coef = (θ_0, α_1..α_p, γ)`` with ``names``; ``se`` the sandwich standard errors
    (``nan`` when over-identified); ``residual`` the largest moment at the solution.
    """

    coef: np.ndarray
    se: np.ndarray
    names: tuple[str, ...]
    residual: float
    n: int

    def __post_init__(self) -> None:
        self._settle("solved", True,
                     f"shadow-variable moment equations on {self.n} units, largest moment {self.residual:.3g}")

    @property
    def alpha(self) -> np.ndarray:
        """Coefficients of ``D'``."""
        return self.coef[1:-1]

    @property
    def gamma(self) -> float:
        """Coefficient of ``S``."""
        return float(self.coef[-1])

    def propensity(self, D: Any, S: Any) -> np.ndarray:
        """``π̂(D', S)`` for units whose satisfaction ``S`` is known."""
        from scipy.special import expit

        D = as_matrix(D, "D")
        S = np.asarray(S, dtype=np.float64).reshape(-1)
        if S.size != D.shape[0]:
            raise ShapeError(f"S: has {S.size} entries, D has {D.shape[0]} rows")
        return expit(self.coef[0] + D @ self.alpha + self.gamma * S)


def _inputs(R: Any, D: Any, S: Any, Z: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    R = as_binary(R, "R")
    n = R.size
    D = as_matrix(D, "D", rows=n)
    Z = as_matrix(Z, "Z", rows=n)
    S = np.asarray(S, dtype=np.float64).reshape(-1)
    if S.size != n:
        raise ShapeError(f"S: has {S.size} entries, expected {n} (one per unit; nan for non-responders)")
    responders = R == 1
    if not np.isfinite(S[responders]).all():
        raise ShapeError("S: satisfaction must be finite for every responder (R = 1)")
    if responders.all() or not responders.any():
        raise EstimationError("R: need both responders and non-responders to estimate a response model")
    return R, D, np.where(responders, S, 0.0), Z


def fit_shadow(R: Any, D: Any, S: Any, Z: Any, names: Sequence[str] | None = None) -> ShadowFit:
    """Solve ``(1/n) Σ (R_i/π_i − 1)·(1, D'_i, Z_i) = 0`` for ``(θ_0, α, γ)``.

    Parameters
    ----------
    R : (n,) 0/1
        Response indicator.
    D : (n, p) array
        Device information excluding the shadow variable (``D'``).
    S : (n,) array
        Satisfaction; only entries with ``R = 1`` are used (put ``nan`` elsewhere).
    Z : (n,) or (n, q) array
        Shadow variable(s).
    names : p strings, optional
        Names of the columns of ``D``.

    Raises
    ------
    EstimationError
        The root finder fails (``Z`` unrelated to ``S``, so ``γ`` is unidentified, or a
        misspecified model with no root).

    No check is made that the assumption holds: a fit can succeed and still be badly
    biased (a direct effect of ``Z`` on response, an irrelevant ``Z`` that happens to give
    a root, a missing ``S²`` term). :func:`fairsched.propensity.floss_diagnostics.fit_shadow_checked`
    adds Hansen's J, a relevance test and multi-start root finding.
    """
    from scipy.optimize import root

    R, D, S, Z = _inputs(R, D, S, Z)
    n, p = D.shape
    X = np.column_stack([np.ones(n), D, S])
    H = np.column_stack([np.ones(n), D, Z])
    just = H.shape[1] == X.shape[1]

    def moments(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        eta = X @ theta
        # R/π − 1 = R·(1 + e^{−η}) − 1; derivative −R·e^{−η}·x.
        e = np.exp(-np.clip(eta, -700, 700)) * R
        resid = R + e - 1.0
        m = H.T @ resid / n
        jac = -(H.T * e) @ X / n
        return m, jac

    theta0 = np.zeros(X.shape[1])
    theta0[0] = float(np.log(R.mean() / (1 - R.mean())))
    if just:
        sol = root(moments, theta0, jac=True, method="hybr", options={"xtol": 1e-12})
    else:
        sol = root(lambda t: moments(t)[0], theta0, method="lm", options={"xtol": 1e-12, "ftol": 1e-14})
    m, jac = moments(sol.x)
    residual = float(np.abs(m).max())
    if not np.isfinite(sol.x).all() or (just and residual > 1e-8):
        raise EstimationError(
            f"shadow-variable moment equations not solved ({sol.message.strip()}; largest moment "
            f"{residual:.3g}): either Z is (nearly) unrelated to S, so γ is not identified, or the "
            "response model or the shadow assumption R ⟂ Z | (D', S) is wrong; "
            "fairsched.propensity.floss_diagnostics.fit_shadow_checked tells which")
    se = np.full(X.shape[1], np.nan)
    if just:
        eta = X @ sol.x
        contrib = H * (R * (1 + np.exp(-eta)) - 1.0)[:, None]
        omega = contrib.T @ contrib / n
        try:
            jinv = np.linalg.inv(jac)
        except np.linalg.LinAlgError:
            raise EstimationError("shadow-variable Jacobian is singular: γ is not identified at the solution "
                                  "(typically Z carries no information on S)") from None
        se = np.sqrt(np.diag(jinv @ omega @ jinv.T) / n)
    d_names = tuple(names) if names is not None else tuple(f"d{j}" for j in range(p))
    return ShadowFit(sol.x, se, ("intercept", *d_names, "S"), residual, n)


def floss_weights(fit: ShadowFit, R: Any, D: Any, S: Any) -> np.ndarray:
    """``1/π̂(D'_i, S_i)`` for responders, 0 for non-responders."""
    R = as_binary(R, "R")
    D = as_matrix(D, "D", rows=R.size)
    S = np.asarray(S, dtype=np.float64).reshape(-1)
    w = np.zeros(R.size)
    resp = R == 1
    w[resp] = 1.0 / check_propensities(fit.propensity(D[resp], S[resp]), "estimated propensities")
    return w


def sample_responders(weights: Any, k: int, seed: Seed, *, replace: bool = True) -> np.ndarray:
    """Draw ``k`` indices with probability ``∝ weights`` (FLOSS: ``weights = 1/π̂``).

    With replacement (default) the plain mean of the drawn units' values has expectation
    ``Σ w_i y_i / Σ w_i``, the Hájek mean; without replacement that holds only for
    ``k ≪ n``. Units with weight 0 (non-responders) are never drawn.
    """
    w = np.asarray(weights, dtype=np.float64).reshape(-1)
    if not np.isfinite(w).all() or (w < 0).any() or not w.sum() > 0:
        raise ShapeError("weights: must be finite, >= 0 and not all 0")
    if k < 1 or (not replace and k > np.count_nonzero(w)):
        raise ShapeError(f"k: is {k}, expected 1..{np.count_nonzero(w)} without replacement")
    return as_generator(seed).choice(w.size, size=k, replace=replace, p=w / w.sum())


def privatize(updates: Any, clip: float, sigma: float, seed: Seed) -> np.ndarray:
    """Clip every update (row) to Euclidean norm ``clip = C``, then add ``N(0, (σ·C)² I)``.

    Each client noises its own clipped update, so the server never sees a raw gradient.
    """
    U = as_matrix(updates, "updates")
    if not clip > 0 or sigma < 0:
        raise ShapeError(f"clip must be > 0 and sigma >= 0, got clip={clip}, sigma={sigma}")
    norms = np.linalg.norm(U, axis=1, keepdims=True)
    clipped = U * np.minimum(1.0, clip / np.maximum(norms, 1e-300))
    return clipped + as_generator(seed).normal(0.0, sigma * clip, size=U.shape)
