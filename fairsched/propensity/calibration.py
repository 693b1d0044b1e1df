"""Aggregate calibration of the enrolled units' weights to population summaries.

FedIPW's extension for limited information (Morishita 2026; ``docs/mathematics.md`` §11).

When covariates of non-enrolled units are unknown, enrollment cannot be modelled; what is
often known are population summaries: category shares (region, OS) and means. Base
weights ``d_i`` of the ``n`` enrolled units (1, or ``1/π̂^part``) are adjusted to ``w_i`` so
that

    Σ_i w_i b(Z_i) = N · b̄_target,

where ``b(Z) = (1, indicators of all but a reference category of every categorical
variable, continuous covariates)`` and ``b̄_target`` their population means (the constant
fixes ``Σ w = N``). Two distance functions (Deville & Särndal 1992):

- **raking** (entropy balancing): ``w_i = d_i · exp(λ·b_i)``, always positive. ``λ`` is the
  minimiser of the convex dual ``φ(λ) = Σ d_i exp(λ·b_i) − λ·N b̄_target``; its gradient is
  the margin error and its Hessian ``Σ w_i b_i b_iᵀ``, so a damped Newton iteration
  converges quadratically when the target is reachable;
- **linear** (GREG): ``w_i = d_i · (1 + λ·b_i)``, closed form
  ``λ = (Σ d_i b_i b_iᵀ)⁻¹ (N b̄_target − Σ d_i b_i)``; weights may turn negative.

Margins are reachable by positive weights only if ``b̄_target`` lies in the (relative
interior of the) convex hull of the ``b_i``: a category with a positive target share that no
enrolled unit has, or a target mean outside the enrolled units' range, cannot be reached;
:class:`CalibrationError` says which. Calibration is as good as its margins: noise in
``b̄_target`` moves the weights to a wrong population (Morishita 2026 reports the same
sensitivity to noisy summaries).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fairsched.propensity.errors import CalibrationError, ShapeError
from fairsched.propensity.validation import as_matrix, as_vector
from fairsched.results import Result

METHODS = ("raking", "linear")
SHARE_TOLERANCE = 1e-8
# Raking exponents beyond this overflow float64; the line search never needs them.
MAX_EXPONENT = 700.0


@dataclass(frozen=True)
class Margins:
    """Calibration variables ``b(Z_i)`` of the enrolled units and their population means."""

    design: np.ndarray
    target: np.ndarray
    names: tuple[str, ...]

    def __post_init__(self) -> None:
        design = as_matrix(self.design, "margins.design")
        target = as_vector(np.atleast_1d(self.target), "margins.target", length=design.shape[1])
        if len(self.names) != design.shape[1]:
            raise ShapeError(f"margins.names: has {len(self.names)} entries, design has {design.shape[1]} columns")
        object.__setattr__(self, "design", design)
        object.__setattr__(self, "target", target)
        object.__setattr__(self, "names", tuple(self.names))


def build_margins(n: int, *, categorical: Mapping[str, tuple[Any, Mapping[Any, float]]] | None = None,
                  continuous: Mapping[str, tuple[Any, float]] | None = None) -> Margins:
    """Build ``b(Z)`` and ``b̄_target`` from categorical shares and continuous means.

    Parameters
    ----------
    n : int
        Number of enrolled units.
    categorical : {name: (labels, {category: share})}
        Each variable's labels for the ``n`` units and the population shares (summing to 1).
        The first category listed is the reference (no column).
    continuous : {name: (values, mean)}
        Each variable's values for the ``n`` units and its population mean.

    Raises
    ------
    CalibrationError
        Shares that are negative or do not sum to 1, a category with a positive share but
        no enrolled unit (or enrolled units in a category with share 0, or in a category
        not listed), a target mean outside the range of the enrolled values.
    """
    columns, targets, names = [np.ones(n)], [1.0], ["(total)"]
    for name, (labels, shares) in (categorical or {}).items():
        labels = np.asarray(labels).reshape(-1)
        if labels.size != n:
            raise ShapeError(f"{name}: has {labels.size} labels, expected {n} (one per enrolled unit)")
        cats = list(shares)
        values = np.array([float(shares[c]) for c in cats])
        if not np.isfinite(values).all() or (values < 0).any():
            raise CalibrationError(f"{name}: target shares must be finite and >= 0, got {dict(shares)}")
        if abs(values.sum() - 1.0) > SHARE_TOLERANCE:
            raise CalibrationError(f"{name}: target shares sum to {values.sum():.10g}, expected 1")
        listed = set(cats)
        known = np.fromiter((v in listed for v in labels.tolist()), dtype=bool, count=n)
        if not known.all():
            raise CalibrationError(f"{name}: enrolled unit {int(np.flatnonzero(~known)[0])} has category "
                                   f"{labels[~known].tolist()[0]!r}, which has no target share")
        for c, share in zip(cats, values):
            count = int(np.count_nonzero(labels == c))
            if share > 0 and count == 0:
                raise CalibrationError(
                    f"{name}: category {c!r} has target share {share:g} but no enrolled unit; "
                    "no reweighting of the enrolled can reach it (merge it with a neighbour)")
            if share == 0 and count > 0:
                raise CalibrationError(
                    f"{name}: category {c!r} has target share 0 but {count} enrolled units; "
                    "positive weights cannot give it share 0 (drop those units first)")
        for c, share in zip(cats[1:], values[1:]):
            columns.append((labels == c).astype(np.float64))
            targets.append(share)
            names.append(f"{name}={c}")
    for name, (values, mean) in (continuous or {}).items():
        x = as_vector(values, name, length=n)
        mean = float(mean)
        lo, hi = float(x.min()), float(x.max())
        if not np.isfinite(mean) or not lo < mean < hi:
            raise CalibrationError(
                f"{name}: target mean {mean:g} lies outside the open range ({lo:g}, {hi:g}) of the "
                "enrolled units' values; no positive weighting can reach it")
        columns.append(x)
        targets.append(mean)
        names.append(name)
    return Margins(np.column_stack(columns), np.array(targets), tuple(names))


@dataclass(frozen=True)
class CalibrationResult(Result):
    """Calibrated weights and how well they meet the margins.

    ``max_error`` is ``max_j |Σ w_i b_ij / N − b̄_target_j|`` (on the mean scale);
    ``status`` is ``"converged"`` or ``"not-converged"`` and ``success`` is ``converged``.
    """

    weights: np.ndarray
    multipliers: np.ndarray
    method: str
    converged: bool
    max_error: float
    iterations: int
    n_negative: int

    def __post_init__(self) -> None:
        self._settle("converged" if self.converged else "not-converged", self.converged,
                     f"{self.method} calibration after {self.iterations} iterations: largest margin error "
                     f"{self.max_error:.3g}, {self.n_negative} negative weights")


def _check_reachable(B: np.ndarray, totals: np.ndarray, names: Sequence[str]) -> None:
    from scipy.optimize import linprog

    scale = np.abs(B).max(axis=0)
    scale[scale == 0] = 1.0
    res = linprog(np.zeros(B.shape[0]), A_eq=(B / scale).T, b_eq=totals / scale,
                  bounds=(0, None), method="highs")
    if res.status == 2:
        raise CalibrationError(
            "margins cannot be reached: no nonnegative weights of the enrolled units give the "
            "target " + ", ".join(names[1:]) + " jointly (the target lies outside the convex hull of "
            "the enrolled units' covariates)")


def _raking(d: np.ndarray, B: np.ndarray, totals: np.ndarray, tol: float,
            max_iter: int) -> tuple[np.ndarray, np.ndarray, int]:
    from scipy.linalg import LinAlgError, solve

    N = totals[0] if totals[0] > 0 else 1.0
    lam = np.zeros(B.shape[1])

    def dual(l: np.ndarray) -> tuple[float, np.ndarray]:
        w = d * np.exp(np.minimum(B @ l, MAX_EXPONENT))
        return float(w.sum() - l @ totals) / N, w

    phi, w = dual(lam)
    for it in range(1, max_iter + 1):
        grad = (w @ B - totals) / N
        if np.abs(grad).max() <= tol:
            return w, lam, it - 1
        hess = (B.T * w) @ B / N
        try:
            step = solve(hess, grad, assume_a="pos")
        except (LinAlgError, ValueError):
            raise CalibrationError("raking: the calibration variables are collinear on the enrolled "
                                   "units (a redundant margin); drop one") from None
        t = 1.0
        while True:
            cand = lam - t * step
            phi_new, w_new = dual(cand)
            # Near the solution φ changes below float resolution; a shrinking margin error
            # is then the acceptance test (the quadratic phase of Newton's method).
            shrinks = np.abs(w_new @ B - totals).max() / N < 0.5 * np.abs(grad).max()
            if phi_new <= phi - 1e-4 * t * float(grad @ step) or shrinks or t < 1e-12:
                break
            t *= 0.5
        lam, phi, w = cand, phi_new, w_new
    return w, lam, max_iter


def calibrate(base_weights: Any, margins: Margins, population_size: float | None = None,
              method: str = "raking", tol: float = 1e-10, max_iter: int = 100) -> CalibrationResult:
    """Calibrate base weights ``d`` so that ``Σ w b(Z) = N·b̄_target`` (module docstring).

    Parameters
    ----------
    base_weights : (n,) array
        ``d_i > 0`` (e.g. 1, or ``1/π̂^part``).
    margins : Margins
        From :func:`build_margins` (or built by hand; include a constant column to fix ``Σ w``).
    population_size : float, optional
        ``N``; default ``Σ d``.
    method : {"raking", "linear"}
    tol : float
        Convergence: ``max_error <= tol``.

    Raises
    ------
    CalibrationError
        The margins are unreachable by nonnegative weights, redundant, or raking did not
        converge within ``max_iter`` Newton steps.
    """
    if method not in METHODS:
        raise CalibrationError(f"method: unknown calibration method {method!r}; choose one of {', '.join(METHODS)}")
    B = margins.design
    d = as_vector(base_weights, "base_weights", length=B.shape[0])
    if (d <= 0).any():
        i = int(np.flatnonzero(d <= 0)[0])
        raise CalibrationError(f"base_weights: entry {i} is {d[i]:g}, base weights must be > 0")
    N = float(d.sum()) if population_size is None else float(population_size)
    if not N > 0:
        raise CalibrationError(f"population_size: is {N}, expected > 0")
    totals = N * margins.target
    _check_reachable(B, totals, margins.names)
    if method == "raking":
        w, lam, iterations = _raking(d, B, totals, tol, max_iter)
    else:
        G = (B.T * d) @ B
        try:
            lam = np.linalg.solve(G, totals - d @ B)
        except np.linalg.LinAlgError:
            raise CalibrationError("linear: the calibration variables are collinear on the enrolled "
                                   "units (a redundant margin); drop one") from None
        w, iterations = d * (1.0 + B @ lam), 1
    error = float(np.abs(w @ B / N - margins.target).max())
    converged = bool(error <= tol)
    if not converged:
        raise CalibrationError(
            f"{method}: margins not reached after {iterations} iterations (max error {error:.3g} > "
            f"tol {tol:g}); the target is on the boundary of what the enrolled units can represent")
    return CalibrationResult(w, lam, method, converged, error, iterations, int(np.count_nonzero(w < 0)))
