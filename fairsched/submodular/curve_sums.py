"""Monte-Carlo gradients of the multilinear extension of learning-curve utilities, in O(n·samples).

The accuracy utilities (Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A
Multi-Round Submodular Maximization Approach", 2021, Section VI, and its propensity-weighted
form) are *curve sums*: with modular sums ``m_j(S) = Σ_{u∈S} W_{u,j}`` (``W > 0``),

    f(S) = Σ_j π_j·[(1 − a_j) − b_j·m_j(S)^{c_j}]   for S ≠ ∅,   f(∅) = 0.

:func:`curve_sums_of` reads that structure from a utility's public attributes (an
``AccuracyUtility``, a ``PropensityWeightedAccuracy``, or a ``Mixture`` of them).

:func:`estimate` returns exactly the shared-sample estimator of the generic Monte-Carlo
method, ``∂F/∂y_u ≈ (1/m)·Σ_s [f(R_s ∪ {u}) − f(R_s \\ {u})]`` with ``R_s = {v : U_{s,v} < y_v}``
(unbiased: exact in expectation), without evaluating ``f`` on ``m·n`` toggled sets. From the
sample sums ``M_s = m(R_s)`` ("sum minus own contribution"):

- ``u ∉ R_s`` (most pairs): the term is ``g(M_s + W_u) − f(R_s)`` with
  ``g(x) = Σ_j π_j[(1 − a_j) − b_j·x_j^{c_j}]``. Its sum over *all* samples,
  ``Σ_s (M_{s,j} + W_{u,j})^{c_j}``, is a binomial series around the centre ``w_0`` of
  ``u``'s geometric bin of weights, ``|W_u − w_0| <= ε·w_0``:
  ``Σ_s (M_s + W_u)^c = Σ_{q<=K} C(c, q)·t_u^q·A_q`` with ``t_u = (W_u − w_0)/w_0`` and
  ``A_q = Σ_s (M_s + w_0)^c·(w_0/(M_s + w_0))^q``; the truncation is below
  :data:`SERIES_TOLERANCE` relative to ``Σ_s (M_s + w_0)^c`` (:func:`series_terms`), so the
  cost is ``O(m·bins·K + n·K)`` per stratum, whatever ``M_s`` (empty samples included).
- ``u ∈ R_s`` (``m·Σy`` pairs in expectation): the exact term ``f(R_s) − f(R_s \\ {u})``
  replaces the one counted above.

A gradient costs ``O(n·m)`` time (the comparison ``U < y``) and ``O(n·rows)`` memory per
block of sample rows. The value's standard error is the per-sample one; the gradient's is
from :data:`BATCHES` batch means (the estimate of the error is itself noisy by about
``1/sqrt(2·(BATCHES − 1))``, i.e. 13 %).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from fairsched.utilities.base import SetFunction
from fairsched.utilities.mixture import Mixture

#: half-width of a weight bin relative to its centre
BIN_HALF_WIDTH = 0.25
SERIES_TOLERANCE = 1e-15
BATCHES = 32


@dataclass(frozen=True)
class CurveSums:
    """``f(S) = Σ_j shares_j·[(1 − a_j) − b_j·(Σ_{u∈S} weights_{u,j})^{c_j}]`` for ``S ≠ ∅``, 0 on ``∅``."""

    weights: np.ndarray  # (n, J), positive
    shares: np.ndarray   # (J,)
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray

    @property
    def constant(self) -> float:
        """``Σ_j shares_j·(1 − a_j)``."""
        return float(self.shares @ (1.0 - self.a))

    def curve(self, sums: np.ndarray) -> np.ndarray:
        """``g`` of every row of ``sums`` (``(rows, J)``, positive): the value of a non-empty set."""
        return self.constant - np.power(sums, self.c) @ (self.shares * self.b)

    def values(self, masks: np.ndarray) -> np.ndarray:
        """``f`` of every row of a boolean ``(rows, n)`` batch (for checks; ``O(rows·n·J)``)."""
        masks = np.asarray(masks, dtype=bool)
        sums = masks.astype(np.float64) @ self.weights
        nonempty = masks.any(axis=1)
        return np.where(nonempty, self.curve(np.where(nonempty[:, None], sums, 1.0)), 0.0)


def _vector(x: object, size: int) -> np.ndarray:
    return np.broadcast_to(np.asarray(x, dtype=np.float64), (size,)).copy()


def curve_sums_of(utility: SetFunction) -> CurveSums | None:
    """The curve-sum structure of ``utility``, read from its public attributes, or ``None``.

    ``kind == "accuracy"`` (``sizes``, ``a``, ``b``, ``c``), ``kind == "propensity-accuracy"``
    (``effective``, ``shares``, ``a``, ``b``, ``c``), or a :class:`Mixture` whose components
    all are curve sums (strata concatenated, shares scaled by the mixture weights: every
    component is 0 on ``∅``, so the mixture is too).
    """
    kind = getattr(utility, "kind", None)
    try:
        if kind == "accuracy":
            w = np.asarray(utility.sizes, dtype=np.float64)[:, None]
            return CurveSums(w, np.ones(1), _vector(utility.a, 1), _vector(utility.b, 1), _vector(utility.c, 1))
        if kind == "propensity-accuracy":
            w = np.asarray(utility.effective, dtype=np.float64)
            J = w.shape[1]
            return CurveSums(w, _vector(utility.shares, J), _vector(utility.a, J), _vector(utility.b, J),
                             _vector(utility.c, J))
    except (AttributeError, ValueError, IndexError):
        return None
    if isinstance(utility, Mixture):
        parts = [curve_sums_of(comp) for comp in utility.components]
        if not parts or any(p is None for p in parts):
            return None
        return CurveSums(np.hstack([p.weights for p in parts]),
                         np.concatenate([lam * p.shares for lam, p in zip(utility.weights, parts)]),
                         *(np.concatenate([getattr(p, name) for p in parts]) for name in ("a", "b", "c")))
    return None


def series_terms(c: float, ratio: float = BIN_HALF_WIDTH, tolerance: float = SERIES_TOLERANCE) -> np.ndarray:
    """Binomial coefficients ``C(c, q)``, ``q = 0..K``, with ``Σ_{q>K} |C(c, q)|·ratio^q <= tolerance``.

    The bound: for ``q > K`` the terms shrink at least by ``ρ = ratio·max(1, (K+1+|c|)/(K+2))``
    each (``|C(c, q+1)/C(c, q)| = (q + |c|)/(q + 1)`` for ``c < 0``), so the tail is at most
    ``|C(c, K+1)|·ratio^{K+1}/(1 − ρ)``.
    """
    coef = [1.0]
    while True:
        q = len(coef) - 1
        nxt = coef[-1] * (c - q) / (q + 1)
        shrink = ratio * max(1.0, (q + 1 + abs(c)) / (q + 2))
        if shrink < 1.0 and abs(nxt) * ratio ** (q + 1) / (1.0 - shrink) <= tolerance:
            return np.array(coef)
        coef.append(nxt)


@dataclass(frozen=True)
class _Stratum:
    centres: np.ndarray   # (bins,)
    bin_of: np.ndarray    # (n,) index into centres
    offsets: np.ndarray   # (n,) t_u = (W_u − w0)/w0, |t_u| <= ε
    coef: np.ndarray      # (K+1,) C(c, q)
    power: float


def _strata(structure: CurveSums) -> list[_Stratum]:
    # The bound uses ε with a little slack for the rounding of log-binning at bin edges.
    ratio = (1.0 + BIN_HALF_WIDTH) / (1.0 - BIN_HALF_WIDTH)
    out = []
    for j in range(structure.weights.shape[1]):
        w = structure.weights[:, j]
        low = float(w.min())
        index = np.floor(np.log(w / low) / math.log(ratio)).astype(np.int64)
        used, bin_of = np.unique(index, return_inverse=True)
        centres = low * ratio ** used.astype(np.float64) / (1.0 - BIN_HALF_WIDTH)
        offsets = (w - centres[bin_of]) / centres[bin_of]
        coef = series_terms(float(structure.c[j]), BIN_HALF_WIDTH * (1 + 1e-6))
        out.append(_Stratum(centres, bin_of.reshape(-1), offsets, coef, float(structure.c[j])))
    return out


class CurveSumsEstimator:
    """:func:`estimate` for one structure: keeps the weight bins and series coefficients."""

    def __init__(self, structure: CurveSums) -> None:
        self.structure = structure
        self.n = int(structure.weights.shape[0])
        self._strata = _strata(structure)
        self._scale = structure.shares * structure.b
        self._floor = structure.weights.min(axis=0)

    def estimate(self, y: np.ndarray, blocks: Iterable[tuple[int, np.ndarray]],
                 samples: int) -> tuple[float, np.ndarray, float, np.ndarray]:
        """``(F, ∇F, stderr of F, stderr of ∇F)`` from uniform blocks ``(batch, U_rows)``.

        ``blocks`` yields every sample row once, grouped by batch (batch numbers
        non-decreasing); see the module docstring for the formulas.
        """
        st = self.structure
        n, J = self.n, st.weights.shape[1]
        values = np.empty(samples)
        batch_sums: list[np.ndarray] = []
        batch_rows: list[int] = []
        current, acc, moments, rows_in, done = None, None, None, 0, 0
        for batch, uniforms in blocks:
            if batch != current:
                if current is not None:
                    batch_sums.append(self._batch_total(acc, moments, rows_in))
                    batch_rows.append(rows_in)
                current, rows_in = batch, 0
                acc = np.zeros(n)
                moments = [np.zeros((s.centres.size, s.coef.size)) for s in self._strata]
            rows = uniforms.shape[0]
            row, col = np.nonzero(uniforms < y)
            count = np.bincount(row, minlength=rows)
            sums = np.empty((rows, J))
            for j in range(J):
                sums[:, j] = np.bincount(row, weights=st.weights[col, j], minlength=rows)
            nonempty = count > 0
            f = np.where(nonempty, st.curve(np.where(nonempty[:, None], sums, 1.0)), 0.0)
            values[done: done + rows] = f
            for j, s in enumerate(self._strata):
                self._add_moments(moments[j], sums[:, j], s)
            acc -= f.sum()
            # Pairs with u in R_s: swap the counted g(M_s + W_u) − f_s for f(R_s) − f(R_s \ u).
            w = st.weights[col]
            counted = st.curve(sums[row] + w) - f[row]
            rest = np.maximum(sums[row] - w, self._floor)
            without = np.where(count[row] > 1, st.curve(rest), 0.0)
            acc += np.bincount(col, weights=(f[row] - without) - counted, minlength=n)
            rows_in += rows
            done += rows
        batch_sums.append(self._batch_total(acc, moments, rows_in))
        batch_rows.append(rows_in)
        totals, sizes = np.array(batch_sums), np.array(batch_rows, dtype=np.float64)
        gradient = totals.sum(axis=0) / samples
        ddof = 1 if samples > 1 else 0
        value_stderr = float(values.std(ddof=ddof) / math.sqrt(samples))
        if len(sizes) > 1:
            means = totals / sizes[:, None]
            spread = (sizes[:, None] * (means - gradient)) ** 2
            gradient_stderr = np.sqrt(spread.sum(axis=0) * len(sizes) / (len(sizes) - 1)) / samples
        else:
            gradient_stderr = np.zeros(n)
        return float(values.mean()), gradient, value_stderr, gradient_stderr

    @staticmethod
    def _add_moments(moments: np.ndarray, sums: np.ndarray, s: _Stratum) -> None:
        shifted = sums[:, None] + s.centres[None, :]
        term = np.power(shifted, s.power)
        ratio = s.centres[None, :] / shifted
        for q in range(s.coef.size):
            moments[:, q] += term.sum(axis=0)
            term = term * ratio

    def _batch_total(self, acc: np.ndarray, moments: list[np.ndarray], rows: int) -> np.ndarray:
        """``Σ_s [g(M_s + W_u) − f_s]`` over the batch plus its corrections, for every ``u``."""
        total = acc + rows * self.structure.constant
        for j, s in enumerate(self._strata):
            series = np.zeros(self.n)
            for q in range(s.coef.size - 1, -1, -1):  # Horner in t_u
                series = series * s.offsets + s.coef[q] * moments[j][s.bin_of, q]
            total -= self._scale[j] * series
        return total
