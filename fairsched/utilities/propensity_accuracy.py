"""Propensity-weighted accuracy: the accuracy a set of workers buys for the target population.

The plain accuracy utility (the learning curve of Li, Liu and Ji 2021, Section VI) scores a
set by its total data size, so it favours whoever holds the most data, which under
selection bias means the over-enrolled part of the population. Here the population is
split into strata ``j = 1..J`` with population shares ``π_j`` (from a census, or estimated
by inverse-probability weighting as in Morishita's FedIPW, "Who Trains Matters: Federated
Learning under Enrollment and Participation Selection Biases", 2026:
``π̂_j = Σ_{i∈stratum j} 1/p̂_i / Σ_i 1/p̂_i`` over the enrolled units ``i`` with inclusion
propensities ``p̂_i``, :func:`fairsched.propensity.ipw_shares`). ``docs/mathematics.md``
§11 and ``docs/selection_bias.md`` §6 have the formulas.

Derivation. The target-population accuracy of a model is the expectation of per-example
accuracy over the population, which by the law of total expectation is the share-weighted
stratum accuracy ``Σ_j π_j·acc_j``; IPW is what makes the shares those of the population
rather than of the enrolled. Stratum ``j``'s accuracy follows a learning curve in the data
useful for it: worker ``u`` holds ``L_{u,j}`` examples of stratum ``j``, and data of other
strata transfer with factor ``τ ∈ [0, 1]``, so

    m_j(S) = Σ_{u∈S} (L_{u,j} + τ·Σ_{j'≠j} L_{u,j'}),
    acc_j(m) = (1 − a_j) − b_j·m^{c_j}     (b_j > 0, c_j < 0),
    f(S) = Σ_j π_j·acc_j(m_j(S))  for S ≠ ∅,   f(∅) = 0.

With one stratum, or ``τ = 1`` and equal curves, ``m_j(S)`` is the total size of ``S`` and
``f`` is exactly :class:`~fairsched.utilities.accuracy.AccuracyUtility`.

Monotone submodular away from ∅: each ``acc_j`` is concave increasing, ``m_j`` is modular
with nonnegative weights, and ``π_j >= 0``; the jump from ``∅`` is checked by
:meth:`PropensityWeightedAccuracy.submodularity_problem` as for ``AccuracyUtility``.
Every effective size ``L_{u,j} + τ·Σ_{j'≠j} L_{u,j'}`` must be positive (otherwise a set of
such workers would have accuracy ``−∞`` on stratum ``j``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction, as_index_set
from fairsched.utilities.validation import (
    as_masks,
    check_number,
    check_vector,
    read_table,
    row_chunks,
)

SHARE_TOLERANCE = 1e-9


def stratum_sizes_and_shares(sizes: Any, shares: Any, n: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(L, π)`` checked: ``L`` a nonnegative finite ``(workers, strata)`` matrix (``n`` rows when
    given) and ``π`` one nonnegative share per stratum summing to 1; :class:`InstanceError`
    naming the key and entry otherwise."""
    try:
        L = np.asarray(sizes, dtype=np.float64)
    except (TypeError, ValueError):
        raise InstanceError("must be a list of equally long rows of numbers (one row per worker)",
                            key="sizes") from None
    if L.ndim != 2 or L.shape[0] == 0 or L.shape[1] == 0:
        raise InstanceError(f"must be a matrix with one row per worker and one column per stratum, "
                            f"got shape {L.shape}", key="sizes")
    if n is not None and L.shape[0] != n:
        raise InstanceError(f"has {L.shape[0]} rows, expected {n} (one per worker)", key="sizes")
    if not np.isfinite(L).all() or (L < 0).any():
        i, j = (int(v) for v in np.argwhere(~np.isfinite(L) | (L < 0))[0])
        raise InstanceError(f"entry [{i}][{j}] is {L[i, j]}, expected a finite number >= 0", key="sizes")
    pi = check_vector(shares, "shares", nonnegative=True)
    if pi.size != L.shape[1]:
        raise InstanceError(f"has {pi.size} entries but sizes has {L.shape[1]} strata (columns); "
                            "one share per stratum", key="shares")
    if abs(pi.sum() - 1.0) > SHARE_TOLERANCE:
        raise InstanceError(f"sum to {pi.sum():.10g}, expected 1", key="shares")
    return L, pi


def stratum_sum_values(masks: Any, n: int, sizes: np.ndarray,
                       score: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``f`` of every row of ``masks`` for ``f(S) = score(m(S))``, ``m(S) = Σ_{u∈S} sizes_u``
    (one column per stratum), and ``f(∅) = 0``; ``score`` maps ``(rows, J)`` sums to
    ``(rows,)`` and sees 1 in place of the empty rows' sums. Rows are taken in chunks."""
    masks = as_masks(masks, n)
    out = np.zeros(masks.shape[0])
    for rows in row_chunks(masks.shape[0], n + sizes.shape[1]):
        block = masks[rows]
        m = block.astype(np.float64) @ sizes
        nonempty = block.any(axis=1)
        out[rows] = np.where(nonempty, score(np.where(nonempty[:, None], m, 1.0)), 0.0)
    return out


def pairwise_jump_problem(n: int, strata: int, pair_values: Any, singles: np.ndarray, tol: float) -> str | None:
    """The first pair breaking submodularity at the jump from ``∅``, or ``None``.

    ``f(∅) = 0`` makes the gain of ``u`` on ``∅`` its single value; submodularity there needs
    ``f({u}) >= f({u, v}) − f({v})`` for every ``v ≠ u``. ``pair_values(rows)`` is the
    ``(len(rows), n)`` array of ``f({u, v})``; rows are taken in chunks so memory stays
    ``O(chunk·n·strata)``.
    """
    for rows in row_chunks(n, n * strata, limit=5_000_000):
        jump = pair_values(rows) - singles[None, :]  # gain of u on {v}
        idx = np.arange(n)[rows]
        jump[np.arange(idx.size), idx] = -np.inf
        worst = jump.argmax(axis=1)
        excess = jump[np.arange(idx.size), worst] - singles[idx]
        bad = np.flatnonzero(excess > tol)
        if bad.size:
            u, v = int(idx[bad[0]]), int(worst[bad[0]])
            return (f"not submodular: gain of {u} on {{}} is {singles[u]:.6g} < gain on {{{v}}} = "
                    f"{jump[bad[0], v]:.6g}")
    return None


def _per_stratum(value: Any, key: str, J: int, **sign: bool) -> np.ndarray:
    if np.ndim(value) == 0:
        return np.full(J, check_number(value, key, **sign))
    vec = check_vector(value, key)
    if vec.size != J:
        raise InstanceError(f"has {vec.size} entries, expected {J} (one per stratum)", key=key)
    for i, x in enumerate(vec):
        check_number(float(x), f"{key}[{i}]", **sign)
    return vec


class PropensityWeightedAccuracy(SetFunction):
    """``f(S) = Σ_j π_j·[(1 − a_j) − b_j·m_j(S)^{c_j}]`` for ``S ≠ ∅``, ``f(∅) = 0``.

    Parameters
    ----------
    sizes : (n, J) array
        ``L_{u,j}``: examples of stratum ``j`` held by worker ``u`` (row per worker).
    shares : (J,) array
        Population shares ``π_j`` (nonnegative, summing to 1); see :func:`fairsched.propensity.ipw_shares`.
    transfer : float
        ``τ ∈ [0, 1]``, how much data of other strata helps stratum ``j``.
    a, b, c : float or (J,) array
        Learning-curve parameters, shared or per stratum (``b > 0``, ``c < 0``).
    n : int, optional
        Number of workers ``sizes`` must describe.

    Examples
    --------
    >>> from fairsched.utilities import AccuracyUtility, PropensityWeightedAccuracy
    >>> f = PropensityWeightedAccuracy(sizes=[[120, 10], [15, 80], [3, 25]],  # worker × stratum
    ...                                shares=[0.7, 0.3], transfer=0.05, c=-0.5)
    >>> f
    PropensityWeightedAccuracy(n=3, strata=2, transfer=0.05)
    >>> round(f.value([0]), 6), round(f.value([0, 1]), 6)
    (0.880616, 0.905117)
    >>> f.submodularity_problem() is None
    True

    With one stratum it is the plain accuracy utility:

    >>> one = PropensityWeightedAccuracy(sizes=[[100], [200], [300]], shares=[1.0])
    >>> one.value([0, 2]) == AccuracyUtility([100, 200, 300]).value([0, 2])
    True
    """

    kind = "propensity-accuracy"

    def __init__(self, sizes: Any, shares: Any, transfer: float = 0.0, a: Any = 0.05,
                 b: Any = 0.5, c: Any = -0.2, *, n: int | None = None):
        L, self.shares = stratum_sizes_and_shares(sizes, shares, n)
        self.sizes = L
        self.n, J = L.shape
        self.transfer = check_number(transfer, "transfer", nonnegative=True)
        if self.transfer > 1:
            raise InstanceError(f"is {self.transfer}, expected a factor in [0, 1]", key="transfer")
        self.a = _per_stratum(a, "a", J)
        self.b = _per_stratum(b, "b", J, positive=True)
        self.c = _per_stratum(c, "c", J, negative=True)
        total = L.sum(axis=1, keepdims=True)
        # m_j(S) is modular: worker u adds (1 − τ)·L_{u,j} + τ·Σ_j' L_{u,j'} to stratum j.
        self.effective = (1.0 - self.transfer) * L + self.transfer * total
        bad = self.effective <= 0
        if bad.any():
            u, j = (int(v) for v in np.argwhere(bad)[0])
            raise InstanceError(
                f"worker {u} has no data usable for stratum {j} (row {u} is {L[u].tolist()} with transfer "
                f"{self.transfer:g}), so its accuracy there would be -inf; give it data or raise transfer",
                key="sizes")

    @property
    def submodular(self) -> bool:
        """Whether ``f`` is monotone submodular on all of ``2^N``: :meth:`submodularity_problem`
        finds no failure of the jump from ``∅``."""
        return self.submodularity_problem() is None

    @property
    def submodular_off_empty(self) -> bool:
        """Always ``True``: on non-empty sets ``f`` is a non-negative combination of concave
        increasing functions of modular ones with positive weights."""
        return True

    @property
    def strata(self) -> int:
        """Number of strata ``J``."""
        return int(self.sizes.shape[1])

    def _curves(self, m: np.ndarray) -> np.ndarray:
        return (1.0 - self.a) - self.b * np.power(m, self.c)

    def _score(self, m: np.ndarray) -> np.ndarray:
        return self._curves(m) @ self.shares

    def values(self, masks: np.ndarray) -> np.ndarray:
        return stratum_sum_values(masks, self.n, self.effective, self._score)

    def gains(self, S: Any) -> np.ndarray:
        S = as_index_set(S, self.n)
        if S.size == 0:
            return self._score(self.effective)
        m = self.effective[S].sum(axis=0)
        out = self._score(m[None, :] + self.effective) - float(self._score(m[None, :])[0])
        out[S] = 0.0
        return out

    def submodularity_problem(self) -> str | None:
        """Why ``f`` is not monotone submodular on these sizes, or ``None`` if it is.

        Away from ``∅`` ``f`` is a nonnegative combination of concave increasing functions of
        modular ones; only the jump from ``∅`` can fail: every ``f({u}) >= 0``
        (monotonicity) and ``f({u}) >= f({u, v}) − f({v})`` for every ``v ≠ u`` (a gain on
        any non-empty ``B ∋ v`` is at most the gain on ``{v}``, by concavity).
        """
        tol = 1e-12
        singles = self._score(self.effective)
        u = int(np.argmin(singles))
        if singles[u] < -tol:
            return (f"not monotone: f({{{u}}}) = {singles[u]:.6g} < 0 = f({{}}) "
                    f"(worker {u}'s sizes {self.sizes[u].tolist()} are too small for these curves)")
        if self.n < 2:
            return None
        # Sufficient in O(n·J): the gain of u on {v} is at most its gain on a virtual
        # worker holding, per stratum, the least effective size of any other worker
        # (each acc_j is concave); only if that fails are the pairs searched.
        E = self.effective
        order = np.argsort(E, axis=0, kind="stable")
        least = E[order[0], np.arange(self.strata)]
        second = E[order[1], np.arange(self.strata)]
        other = np.where(np.arange(self.n)[:, None] == order[0][None, :], second[None, :], least[None, :])
        if (singles >= self._score(E + other) - self._score(other) - tol).all():
            return None
        problem = pairwise_jump_problem(self.n, self.strata, lambda rows: self._score(E[rows, None, :] + E[None, :, :]),
                                        singles, tol)
        return None if problem is None else f"{problem} (sizes too small for these curves)"

    def to_config(self) -> dict[str, Any]:
        def compact(x: np.ndarray) -> Any:
            return float(x[0]) if np.all(x == x[0]) else x.tolist()

        return {"kind": self.kind, "sizes": self.sizes.tolist(), "shares": self.shares.tolist(),
                "transfer": self.transfer, "a": compact(self.a), "b": compact(self.b),
                "c": compact(self.c)}

    @classmethod
    def from_config(cls, table: dict, n: int | None = None) -> Self:
        """Build from a ``[utility]`` table with ``sizes`` (one row per worker), ``shares`` and
        optional ``transfer``, ``a``, ``b``, ``c``."""
        table = read_table(table, cls.kind, ["sizes", "shares"], ["transfer", "a", "b", "c"])
        params = {k: table[k] for k in ("transfer", "a", "b", "c") if k in table}
        return cls(table["sizes"], table["shares"], **params, n=n)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n}, strata={self.strata}, transfer={self.transfer:g})"
