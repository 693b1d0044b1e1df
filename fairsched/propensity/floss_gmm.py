"""Over-identified FLOSS: two-step efficient GMM with multi-start and Hansen's J.

The response model of :mod:`fairsched.propensity.floss`, ``π(D', S) = expit(x'θ)`` with
``x = (1, D', S)``, is identified by the shadow-variable condition ``R ⟂ Z | (D', S)``
(Wang, Shao and Kim, "An instrumental variable approach for identification and estimation
with nonignorable nonresponse", Statistica Sinica 24, 2014; Miao and Tchetgen Tchetgen, "On
varieties of doubly robust estimators under missingness not at random with a shadow
variable", Biometrika 103, 2016). It implies ``E[R/π(D', S; θ) − 1 | D', Z] = 0``, so *any*
function ``h(D', Z)`` gives a valid moment

    g_i(θ) = (R_i/π_i(θ) − 1)·h(D'_i, Z_i),   m(θ) = (1/n) Σ_i g_i(θ).

With ``q`` instrument columns and ``k = 1 + p + 1`` parameters the model is over-identified
when ``q > k`` (several shadow variables, or extra functions such as ``Z²``, ``Z·D'``, ``D'²``).
Hansen ("Large Sample Properties of Generalized Method of Moments Estimators",
Econometrica 50, 1982):

1. ``θ̂₁ = argmin m(θ)'W₁m(θ)`` with ``W₁ = (H'H/n)⁻¹``;
2. ``Ω̂ = (1/n) Σ (g_i(θ̂₁) − m(θ̂₁))(g_i(θ̂₁) − m(θ̂₁))'`` (centred), ``W₂ = Ω̂⁻¹``,
   ``θ̂₂ = argmin m(θ)'W₂m(θ)``;
3. ``J = n·m(θ̂₂)'W₂m(θ̂₂) → χ²(q − k)`` when every moment is valid and the model is
   correct; ``Var(θ̂₂) ≈ (G'W₂G)⁻¹/n`` with ``G = ∂m/∂θ'``.

Step 1 starts from several points (``γ`` on a grid, the intercept solving the constant
moment exactly), step 2 from each distinct step-1 minimum; the converged step-2 minima
that would pass the J test are the *roots*, and distinct ones mean the data do not pin
``θ`` down.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

Instruments = str | Callable[[np.ndarray, np.ndarray], Any]
GAMMA_GRID = (0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 4.0)


def instrument_matrix(D: np.ndarray, Z: np.ndarray, instruments: Instruments = "quadratic") -> np.ndarray:
    """``h(D', Z)`` without the constant: ``(D', Z)`` plus the extra functions.

    ``"linear"``: ``(D', Z)`` (just identified with one shadow variable); ``"quadratic"``:
    also every square and cross product of the columns of ``(D', Z)`` (``Z²``, ``Z·D'``,
    ``D'²``, ...); a callable ``f(D, Z)`` returns extra ``(n, m)`` columns to append.
    Columns are standardised (mean 0, sd 1), which leaves J and ``θ̂`` unchanged.
    """
    from fairsched.propensity.errors import ShapeError

    base = np.column_stack([D, Z])
    if callable(instruments):
        extra = np.asarray(instruments(D, Z), dtype=np.float64)
        extra = extra[:, None] if extra.ndim == 1 else extra
        if extra.ndim != 2 or extra.shape[0] != D.shape[0] or not np.isfinite(extra).all():
            raise ShapeError(f"instruments: the callable must return finite ({D.shape[0]}, m) values, got shape {extra.shape}")
        cols = [base, extra]
    elif instruments == "linear":
        cols = [base]
    elif instruments == "quadratic":
        c = base - base.mean(axis=0)
        pairs = [c[:, a] * c[:, b] for a in range(c.shape[1]) for b in range(a, c.shape[1])]
        cols = [base, np.column_stack(pairs)]
    else:
        raise ShapeError(f"instruments: expected 'linear', 'quadratic' or a callable, got {instruments!r}")
    H = np.column_stack(cols)
    sd = H.std(axis=0)
    if (sd < 1e-12).any():
        raise ShapeError(f"instruments: column {int(np.flatnonzero(sd < 1e-12)[0])} of h(D', Z) is constant")
    H = (H - H.mean(axis=0)) / sd
    if np.linalg.matrix_rank(H) < H.shape[1]:
        raise ShapeError("instruments: the columns of h(D', Z) are collinear; drop the redundant ones")
    return np.column_stack([np.ones(D.shape[0]), H])


@dataclass(frozen=True)
class GMMSolution:
    """Two-step GMM output: ``theta`` (smallest converged minimum), ``J`` there, distinct roots.

    ``solved``: some start converged (and, when just identified, reached ``m = 0``).
    """

    theta: np.ndarray
    cov: np.ndarray
    J: float
    df: int
    solved: bool
    roots: tuple[np.ndarray, ...]
    n_moments: int
    cond: float


class _Moments:
    """``m(θ)``, its Jacobian ``G`` and the per-unit contributions ``g_i``."""

    def __init__(self, R: np.ndarray, X: np.ndarray, H: np.ndarray) -> None:
        self.R, self.X, self.H, self.n = R, X, H, R.size

    def resid(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        e = np.exp(-np.clip(self.X @ theta, -700, 700)) * self.R   # R/π − 1 = R(1 + e^{−η}) − 1
        return self.R + e - 1.0, e

    def m(self, theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r, e = self.resid(theta)
        return self.H.T @ r / self.n, -(self.H.T * e) @ self.X / self.n

    def contributions(self, theta: np.ndarray) -> np.ndarray:
        return self.H * self.resid(theta)[0][:, None]


def _starts(R: np.ndarray, S: np.ndarray, count: int) -> list[np.ndarray]:
    """``θ = (c, 0, γ)``, ``γ`` the first ``count`` (≤ 10) grid values per sd of ``S``, ``c`` solving ``Σ R/π = n``."""
    resp = R == 1
    sd = max(float(S[resp].std()), 1e-8)
    out = []
    for g in GAMMA_GRID[:max(1, count)]:
        gamma = g / sd
        s = S[resp] - S[resp].mean()
        # Σ_resp (1 + e^{−c−γS}) = n  ⇒  e^{−c} = (n − n₁) / Σ_resp e^{−γS}
        log_sum = np.logaddexp.reduce(-gamma * s)
        c = -(np.log(R.size - resp.sum()) - log_sum) - gamma * S[resp].mean()
        out.append((float(c), gamma))
    return out


def _minimise(mom: _Moments, W: np.ndarray, start: np.ndarray) -> tuple[np.ndarray, float, bool]:
    from scipy.optimize import least_squares

    L = np.linalg.cholesky(W).T                         # W = L'L, Q = |L m|²
    cache: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def both(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        key = t.tobytes()
        if key not in cache:
            cache.clear()
            cache[key] = mom.m(t)
        return cache[key]

    fun = lambda t: L @ both(t)[0]                    
    jac = lambda t: L @ both(t)[1]                    
    with np.errstate(over="ignore", invalid="ignore"):
        sol = least_squares(fun, start, jac=jac, method="lm", xtol=1e-12, ftol=1e-14, gtol=1e-12, max_nfev=400)
    # a minimum counts if it converged to finite θ with |η| < 40 for every responder
    # (π̂ ≥ 4e-18; beyond that the "solution" is a runaway, not a root)
    ok = bool(sol.status > 0 and np.isfinite(sol.x).all()
              and np.abs(mom.X[mom.R == 1] @ sol.x).max() < 40)
    return sol.x, float(fun(sol.x) @ fun(sol.x)), ok


def _distinct(points: list[np.ndarray], tol: float) -> list[np.ndarray]:
    kept: list[np.ndarray] = []
    for p in points:
        if all(np.abs(p - k).max() > tol * (1 + np.abs(k).max()) for k in kept):
            kept.append(p)
    return kept


def two_step_gmm(R: np.ndarray, X: np.ndarray, H: np.ndarray, S: np.ndarray, *, starts: int = 8,
                 alpha: float = 0.05, root_tol: float = 1e-3) -> GMMSolution:
    """Efficient two-step GMM of ``E[(R/π − 1)h] = 0`` from ``starts`` starting points.

    A *root* is a converged minimum of the step-2 objective with ``n·Q ≤ χ²_{1−α}(q − k)``
    (with ``q = k``: ``n·Q ≤ 10⁻⁶``); roots closer than ``root_tol`` (relative, max norm)
    are merged. ``theta`` is the converged minimum with the smallest objective.
    """
    from scipy.stats import chi2

    n, k = X.shape
    q = H.shape[1]
    df = q - k
    mom = _Moments(R, X, H)
    p = X.shape[1] - 2
    points = [np.array([c, *([0.0] * p), g]) for c, g in _starts(R, S, starts)]

    W1 = np.linalg.inv(H.T @ H / n)
    first = [(x, Q) for x, Q, ok in (_minimise(mom, W1, s) for s in points) if ok]
    if not first:
        nan = np.full(k, np.nan)
        return GMMSolution(nan, np.full((k, k), np.nan), np.nan, df, False, (), q, np.inf)
    theta1 = min(first, key=lambda t: t[1])[0]
    g = mom.contributions(theta1)
    omega = np.cov(g, rowvar=False, bias=True)
    W2 = np.linalg.pinv(omega)
    W2 = (W2 + W2.T) / 2 + 1e-12 * np.eye(q) * np.trace(W2) / q

    seeds = _distinct([theta1, *(x for x, _ in sorted(first, key=lambda t: t[1]))], root_tol)
    second = [(x, n * Q) for x, Q, ok in (_minimise(mom, W2, s) for s in seeds) if ok]
    cut = chi2.ppf(1 - alpha, df) if df > 0 else 1e-6
    second.sort(key=lambda t: t[1])
    roots = _distinct([x for x, J in second if J <= cut], root_tol)
    theta, J = second[0] if second else (theta1, np.nan)
    solved = bool(second) and (df > 0 or J <= cut)
    G = mom.m(theta)[1]
    info = G.T @ W2 @ G
    cond = float(np.linalg.cond(info))
    try:
        cov = np.linalg.inv(info) / n
    except np.linalg.LinAlgError:
        cov = np.full((k, k), np.nan)
    return GMMSolution(np.asarray(theta), cov, float(J), df, solved, tuple(roots), q, cond)
