"""FLOSS that cannot fail silently: an over-identified shadow-variable fit with checks.

:func:`fit_shadow_checked` estimates the response model ``π(D', S) = expit(θ_0 + α·D' + γ·S)``
of :mod:`fairsched.propensity.floss` by two-step efficient GMM
(:mod:`fairsched.propensity.floss_gmm`) on the moments ``E[(R/π − 1)·h(D', Z)] = 0`` and
runs four checks. Each failed check is a flag with a message naming its likely cause:

``overidentified`` (Hansen's J, Hansen 1982, "Large Sample Properties of Generalized Method of Moments Estimators")
    ``J = n·m(θ̂)'Ω̂⁻¹m(θ̂) > χ²_{1−α_J}(q − k)``: no ``θ`` satisfies every moment, so the
    shadow variable affects response directly (``R ⟂ Z | D', S`` fails) or the logistic
    model of ``π`` is wrong (e.g. a missing ``S²`` or ``D'²`` term). Needs ``q > k``.
``weak_shadow`` (relevance)
    Among responders, regress ``S`` on ``(1, D', Z)`` (OLS, HC1 robust covariance) and
    form the Wald statistic ``W = b̂_Z' V̂_Z⁻¹ b̂_Z``, ``F = W / q_Z``, ``p = P(χ²(q_Z) > W)``.
    Selection depends on ``(D', S)`` only, so ``f(s, z | d, R = 1) ∝ f(s | d) f(z | d) π(d, s)``
    when ``Z ⟂ S | D'``: an irrelevant shadow stays irrelevant among responders, and the
    test is valid. Flag when ``F < min_relevance_f`` (default 10, the weak-instrument rule
    of thumb): ``γ`` is weakly or not identified (Wang, Shao and Kim 2014, "An instrumental
    variable approach for identification and estimation with nonignorable nonresponse";
    Miao and Tchetgen Tchetgen 2016, "On varieties of doubly robust estimators under
    missingness not at random with a shadow variable", require ``Z`` associated with ``S``).
``curvature`` (a RESET-type test in ``S``; Ramsey 1969, "Tests for specification errors in
    classical linear least-squares regression analysis")
    Refit with an ``S²`` term, ``logit π = θ_0 + α·D' + δ·S² + γ·S``, by the same efficient
    GMM and instruments (needs ``q > k + 1``) and flag when the Wald test rejects
    ``δ = 0`` at ``alpha``: the effect of ``S`` on response is not linear, the misspecification
    the selection-bias literature worries about first, against which the omnibus J test
    spreads its power over ``q − k`` directions (measured: ``docs/selection_bias.md`` §5).
    **False-flag budget.** The curvature test runs at ``alpha`` (default 0.05) and J at
    ``j_alpha`` (default :data:`J_ALPHA` = 0.025), so by the union bound a correct model is
    flagged by these two with probability at most ``alpha + j_alpha`` (7.5%). J gets the
    smaller share because against the violation that matters most, a curved effect of
    ``S``, the 1-df curvature test is the more powerful of the two and J adds little
    beyond it (measured: ``docs/selection_bias.md`` §5.2); with both at 5% the false-flag
    rate was 9.5% over six seeds, at the edge of a 10% target.
``multiple_roots``
    Several distinct ``θ`` (from the multi-start) satisfy the moments as well as the J
    test allows: the data do not identify ``θ``.
``not_solved``
    No starting point reaches a ``θ`` that satisfies the moments.

``reliable`` is True iff there is no flag. What is *not* detected: a direct effect of
``Z`` on response that the ``S``-coefficient can absorb (with one shadow variable and a
near-Gaussian ``S``, the tilt ``γ`` and a direct effect are nearly observationally
equivalent), and a misspecification that none of the instruments is correlated with;
``docs/selection_bias.md`` §5 gives measured detection rates.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from fairsched.propensity.errors import EstimationError, ShapeError
from fairsched.propensity.floss import ShadowFit, _inputs
from fairsched.propensity.floss_gmm import Instruments, instrument_matrix, two_step_gmm

Policy = Literal["warn", "raise", "ignore"]
POLICIES = ("warn", "raise", "ignore")
#: default level of the J test (module docstring: the false-flag budget)
J_ALPHA = 0.025


class UnreliableShadowFitWarning(UserWarning):
    """A shadow-variable fit failed at least one of its checks (``on_unreliable="warn"``)."""


class UnreliableShadowFitError(EstimationError):
    """A shadow-variable fit failed at least one of its checks (``on_unreliable="raise"``).

    ``fit`` is the :class:`CheckedShadowFit`, flags and all.
    """

    def __init__(self, message: str, fit: "CheckedShadowFit") -> None:
        super().__init__(message)
        self.fit = fit


@dataclass(frozen=True)
class CheckedShadowFit(ShadowFit):
    """A :class:`ShadowFit` (efficient GMM ``coef``, ``se``) with its diagnostics.

    ``flags`` names the failed checks, ``flag_messages`` explains each (same order);
    ``j_stat``/``j_df``/``j_pvalue`` (``nan`` when just identified); ``relevance_f``
    (robust Wald / q_Z), ``relevance_pvalue``; ``roots`` the distinct solutions found.
    """

    reliable: bool = True
    flags: tuple[str, ...] = ()
    flag_messages: tuple[str, ...] = ()
    j_stat: float = float("nan")
    j_df: int = 0
    j_pvalue: float = float("nan")
    relevance_f: float = float("nan")
    relevance_pvalue: float = float("nan")
    curvature_z: float = float("nan")
    curvature_pvalue: float = float("nan")
    roots: tuple[np.ndarray, ...] = field(default=())
    n_moments: int = 0

    def summary(self) -> str:
        """One line per check."""
        head = "reliable" if self.reliable else "UNRELIABLE: " + ", ".join(self.flags)
        return "\n".join([f"shadow-variable fit on {self.n} units: {head}",
                          f"J = {self.j_stat:.3f} (df {self.j_df}, p = {self.j_pvalue:.3g}); relevance "
                          f"F = {self.relevance_f:.3g} (p = {self.relevance_pvalue:.3g}); curvature z = "
                          f"{self.curvature_z:.2f} (p = {self.curvature_pvalue:.3g}); {len(self.roots)} root(s)",
                          *self.flag_messages])


def relevance_test(R: np.ndarray, D: np.ndarray, S: np.ndarray, Z: np.ndarray) -> tuple[float, float]:
    """``(F, p)`` of the robust (HC1) Wald test of ``b_Z = 0`` in ``S ~ 1 + D' + Z`` among responders."""
    from scipy.stats import chi2

    r = R == 1
    X = np.column_stack([np.ones(int(r.sum())), D[r], Z[r]])
    y = S[r]
    m, k = X.shape
    qz = Z.shape[1]
    if m <= k:
        return float("nan"), float("nan")
    XtX_inv = np.linalg.pinv(X.T @ X)
    b = XtX_inv @ X.T @ y
    u = y - X @ b
    V = XtX_inv @ ((X * (u * u)[:, None]).T @ X) @ XtX_inv * m / (m - k)
    bz, Vz = b[-qz:], V[-qz:, -qz:]
    W = float(bz @ np.linalg.pinv(Vz) @ bz)
    return W / qz, float(chi2.sf(W, qz))


def added_term_test(R: np.ndarray, X: np.ndarray, H: np.ndarray, S: np.ndarray, term: np.ndarray, *,
                    starts: int = 8, alpha: float = 0.05) -> tuple[float, float]:
    """``(z, p)`` of the Wald test of ``δ = 0`` in ``logit π = X·θ + δ·term`` (``X``'s last column
    is ``S``; ``S`` is 0 for non-responders), by two-step GMM on the instruments ``H``;
    ``(nan, nan)`` when ``H`` has too few columns to identify ``δ`` or the fit fails."""
    from scipy.stats import norm

    if H.shape[1] <= X.shape[1]:
        return float("nan"), float("nan")
    extended = np.column_stack([X[:, :-1], term, X[:, -1]])  # S stays last (the starting points vary it)
    sol = two_step_gmm(R, extended, H, S, starts=starts, alpha=alpha)
    var = sol.cov[-2, -2]
    if not (sol.solved and np.isfinite(var) and var > 0):
        return float("nan"), float("nan")
    z = float(sol.theta[-2] / np.sqrt(var))
    return z, float(2 * norm.sf(abs(z)))


def curvature_test(R: np.ndarray, X: np.ndarray, H: np.ndarray, S: np.ndarray, *, starts: int = 8,
                   alpha: float = 0.05) -> tuple[float, float]:
    """:func:`added_term_test` of an ``S²`` term: the ``curvature`` check (module docstring)."""
    return added_term_test(R, X, H, S, S * S, starts=starts, alpha=alpha)


def fit_shadow_checked(R: Any, D: Any, S: Any, Z: Any, names: Sequence[str] | None = None, *,
                       instruments: Instruments = "quadratic", alpha: float = 0.05,
                       j_alpha: float = J_ALPHA, min_relevance_f: float = 10.0, starts: int = 8,
                       on_unreliable: Policy = "warn") -> CheckedShadowFit:
    """Efficient-GMM shadow-variable fit with J, relevance and multi-start checks.

    ``R``, ``D``, ``S``, ``Z``, ``names`` as in :func:`~fairsched.propensity.floss.fit_shadow`
    (``Z`` may have several columns, one per shadow variable). ``instruments``: see
    :func:`~fairsched.propensity.floss_gmm.instrument_matrix`. ``alpha``: level of the
    curvature test and of the root acceptance; ``j_alpha``: level of the J test (module
    docstring: the false-flag budget). ``on_unreliable``: ``"warn"`` (default) issues an
    :class:`UnreliableShadowFitWarning`, ``"raise"`` raises :class:`UnreliableShadowFitError`,
    ``"ignore"`` does neither; the flags are on the result in every case. ``starts``: step-1
    starting points (at most 10 are used).
    """
    from scipy.stats import chi2

    if on_unreliable not in POLICIES:
        raise ShapeError(f"on_unreliable: expected one of {', '.join(POLICIES)}, got {on_unreliable!r}")
    if not 0 < alpha < 1:
        raise ShapeError(f"alpha: expected a level in (0, 1), got {alpha}")
    if not 0 < j_alpha < 1:
        raise ShapeError(f"j_alpha: expected a level in (0, 1), got {j_alpha}")
    if starts < 1:
        raise ShapeError(f"starts: expected at least 1 starting point, got {starts}")
    R, D, S, Z = _inputs(R, D, S, Z)
    n, p = D.shape
    d_names = tuple(names) if names is not None else tuple(f"d{j}" for j in range(p))
    if len(d_names) != p:
        raise ShapeError(f"names: has {len(d_names)} entries, D has {p} columns")
    X = np.column_stack([np.ones(n), D, S])
    H = instrument_matrix(D, Z, instruments)
    if H.shape[1] < X.shape[1]:
        raise ShapeError(f"instruments: {H.shape[1]} moments for {X.shape[1]} parameters; need at least as many")
    sol = two_step_gmm(R, X, H, S, starts=starts, alpha=alpha)
    rel_f, rel_p = relevance_test(R, D, S, Z)
    curv_z, curv_p = curvature_test(R, X, H, S, starts=starts, alpha=alpha)
    flags: list[tuple[str, str]] = []
    j_p = float(chi2.sf(sol.J, sol.df)) if sol.df > 0 and np.isfinite(sol.J) else float("nan")
    if not sol.solved:
        flags.append(("not_solved", "no starting point reaches a θ that satisfies the moment equations "
                      f"(smallest n·Q = {sol.J:.3g}): the response model or the shadow assumption "
                      "R ⟂ Z | (D', S) does not fit these data, or γ is not identified (see weak_shadow)"))
    elif sol.df > 0 and j_p < j_alpha:
        flags.append(("overidentified", f"Hansen's J = {sol.J:.2f} (df {sol.df}, p = {j_p:.3g}) rejects the "
                      "moment conditions: the shadow variable affects response directly (R ⟂ Z | D', S "
                      "fails) or the logistic response model is misspecified (e.g. a missing S² or D'² "
                      "term); the propensities and weights are biased"))
    if curv_p < alpha:
        flags.append(("curvature", f"an S² term in the response model is significant (Wald z = {curv_z:.2f}, "
                      f"p = {curv_p:.3g}): the effect of S on response is not linear in the logit, so the "
                      "model of π is misspecified and the propensities and weights are biased"))
    if not rel_f >= min_relevance_f:
        flags.append(("weak_shadow", f"the shadow variable(s) barely predict S among responders (robust "
                      f"F = {rel_f:.3g} < {min_relevance_f:g}, p = {rel_p:.3g}): γ is weakly or not "
                      "identified, so π̂ and the weights are unreliable; use a shadow variable associated with S"))
    if len(sol.roots) > 1:
        flags.append(("multiple_roots", f"{len(sol.roots)} distinct parameter vectors satisfy the moments "
                      f"(γ = {', '.join(f'{r[-1]:.3g}' for r in sol.roots)}): θ is not identified by these data"))
    se = np.sqrt(np.clip(np.diag(sol.cov), 0, None)) if np.isfinite(sol.cov).all() else np.full(X.shape[1], np.nan)
    m = (H.T @ (R * (1 + np.exp(-np.clip(X @ sol.theta, -700, 700))) - 1) / n) if np.isfinite(sol.theta).all() else [np.inf]
    fit = CheckedShadowFit(sol.theta, se, ("intercept", *d_names, "S"), float(np.abs(m).max()), n,
                           reliable=not flags, flags=tuple(f for f, _ in flags),
                           flag_messages=tuple(f"{f}: {msg}" for f, msg in flags), j_stat=sol.J,
                           j_df=sol.df, j_pvalue=j_p, relevance_f=rel_f, relevance_pvalue=rel_p,
                           curvature_z=curv_z, curvature_pvalue=curv_p,
                           roots=sol.roots, n_moments=sol.n_moments,
                           status="solved" if sol.solved else "unsolved", success=not flags)
    if flags and on_unreliable != "ignore":
        text = "unreliable FLOSS shadow-variable fit; " + "; ".join(fit.flag_messages)
        if on_unreliable == "raise":
            raise UnreliableShadowFitError(text, fit)
        warnings.warn(UnreliableShadowFitWarning(text), stacklevel=2)
    return fit
