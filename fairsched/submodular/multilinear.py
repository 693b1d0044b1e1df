"""The multilinear extension of a set function and its gradient (``docs/mathematics.md`` §5).

``F(y) = E[f(R(y))]`` where ``R(y)`` contains worker ``u`` independently with
probability ``y_u``, and ``∂F/∂y_u = E[f(R ∪ {u}) − f(R \\ {u})]``.

Three ways to evaluate it:

- ``"closed-form"``: the utility's own ``multilinear(y) -> (value, gradient)`` method
  (modular, coverage, facility location; a :class:`~fairsched.utilities.Mixture` whose
  components all have one).
- ``"exact"``: enumerate all ``2^n`` sets once, then contract the value table with
  ``[1 − y_v, y_v]`` along every worker axis; the full gradient costs ``O(2^n)`` too.
- ``"monte-carlo"``: ``samples × n`` uniforms ``U`` fixed once (common random numbers),
  ``R_s = {u : U_{s,u} < y_u}`` for every ``y``, and the unbiased shared-sample estimators
  ``F ≈ mean_s f(R_s)``, ``∂F/∂y_u ≈ mean_s [f(R_s ∪ {u}) − f(R_s \\ {u})]``; standard
  errors ``std / sqrt(samples)``. For a generic utility a gradient evaluates ``f`` on
  ``samples·n`` toggled sets (``O(samples·n²)`` time for the accuracy utility), in blocks of
  ``O(n)`` sets; for the learning-curve utilities (:mod:`fairsched.submodular.curve_sums`)
  the same estimator is computed from the sample sums in ``O(samples·n)``.

The uniforms are drawn in blocks of rows, block ``i`` from ``default_rng([entropy, i])``;
they are kept when ``samples·n <=`` :data:`STORE_CELLS` and redrawn at every call
otherwise, so memory stays ``O(n·rows)`` at any ``n`` and both give the same numbers.

:class:`MultilinearOracle` keeps the enumeration table or the uniforms between calls,
for loops such as continuous greedy; :func:`multilinear` is the one-shot form.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from numbers import Integral
from typing import Any

import numpy as np

from fairsched.results import Result
from fairsched.seeding import Seed, as_generator
from fairsched.submodular.curve_sums import BATCHES, CurveSumsEstimator, curve_sums_of
from fairsched.utilities.base import SetFunction
from fairsched.utilities.mixture import Mixture

METHODS = ("auto", "closed-form", "exact", "monte-carlo")
AUTO_EXACT_MAX_N = 16
EXACT_MAX_N = 20
CHUNK_CELLS = 2_000_000
#: uniforms kept between calls up to this many (8 bytes each); beyond, redrawn per call
STORE_CELLS = 25_000_000

ClosedForm = Callable[[np.ndarray], tuple[float, np.ndarray]]


@dataclass(frozen=True)
class MultilinearEstimate(Result):
    """``F(y)`` and ``∇F(y)`` with their standard errors (0 for exact methods); ``status`` ``"estimated"``."""

    value: float
    gradient: np.ndarray
    value_stderr: float
    gradient_stderr: np.ndarray
    method: str

    def __post_init__(self) -> None:
        self._settle("estimated", True, f"F(y) = {self.value:.6g} ({self.method})")


def _closed_form(utility: SetFunction) -> ClosedForm | None:
    if hasattr(utility, "multilinear"):
        return utility.multilinear
    if isinstance(utility, Mixture):
        parts = [_closed_form(c) for c in utility.components]
        if all(p is not None for p in parts):
            def mixed(y: np.ndarray) -> tuple[float, np.ndarray]:
                value, grad = 0.0, np.zeros(utility.n)
                for w, part in zip(utility.weights, parts):
                    v, g = part(y)
                    value += w * v
                    grad += w * g
                return float(value), grad
            return mixed
    return None


def supported_methods(utility: SetFunction) -> tuple[str, ...]:
    """The concrete methods available for ``utility``, cheapest first.

    ``"closed-form"`` if the utility has a ``multilinear`` method (or is a mixture of
    such), ``"exact"`` if ``n <= 20``, and always ``"monte-carlo"``.
    """
    out = []
    if _closed_form(utility) is not None:
        out.append("closed-form")
    if utility.n <= EXACT_MAX_N:
        out.append("exact")
    out.append("monte-carlo")
    return tuple(out)


def resolve_method(utility: SetFunction, method: str = "auto") -> str:
    """The concrete method ``method`` means for ``utility``; ``ValueError`` if unavailable.

    ``"auto"``: closed form if supported, else exact if ``n <= 16``, else Monte Carlo.
    """
    if method not in METHODS:
        raise ValueError(f"unknown multilinear method {method!r}; expected one of "
                         f"{', '.join(METHODS)}")
    supported = supported_methods(utility)
    if method == "auto":
        if "closed-form" in supported:
            return "closed-form"
        return "exact" if utility.n <= AUTO_EXACT_MAX_N else "monte-carlo"
    if method not in supported:
        kind = getattr(utility, "kind", type(utility).__name__)
        why = f" (exact needs n <= {EXACT_MAX_N}, n is {utility.n})" if method == "exact" else ""
        raise ValueError(f"multilinear method {method!r} is not available for this utility"
                         f"{why}; {kind} supports: {', '.join(supported)}")
    return method


def check_point(y: Any, n: int) -> np.ndarray:
    """Return ``y`` as a float64 vector of length ``n`` in ``[0, 1]``; ``ValueError`` naming
    the first bad entry otherwise."""
    try:
        arr = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("y must be a list of numbers") from None
    if arr.shape != (n,):
        raise ValueError(f"y must have length {n} (one entry per worker), got shape {arr.shape}")
    bad = ~((arr >= 0.0) & (arr <= 1.0))  # also catches nan
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"y entry {i} is {arr[i]}, expected a value in [0, 1]")
    return arr


def _check_samples(samples: Any) -> int:
    if isinstance(samples, bool) or not isinstance(samples, Integral) or samples <= 0:
        raise ValueError(f"samples is {samples!r}, expected a positive integer")
    return int(samples)


def _all_masks(n: int, rows: slice) -> np.ndarray:
    # Worker u is bit n-1-u, so the value table reshapes to (2,)*n with axis u <-> worker u.
    b = np.arange(rows.start, rows.stop, dtype=np.int64)
    return ((b[:, None] >> (n - 1 - np.arange(n))) & 1).astype(bool)


def _contract(table: np.ndarray, y: np.ndarray) -> tuple[float, np.ndarray]:
    """``F(y)`` and ``∇F(y)`` from the ``2^n`` value table, in ``O(2^n)`` operations.

    Forward, ``L`` is the table with workers ``0..u−1`` already averaged out; backward,
    ``Q[u] = [1 − y_u, y_u] ⊗ … ⊗ [1 − y_{n−1}, y_{n−1}]``. Then
    ``∂F/∂y_u = (L[1] − L[0]) · Q[u+1]`` with ``L`` viewed as ``(2, 2^{n−u−1})``.
    """
    n = y.size
    suffix = [np.ones(1)] * (n + 1)
    for u in range(n - 1, -1, -1):
        q = suffix[u + 1]
        suffix[u] = np.concatenate(((1.0 - y[u]) * q, y[u] * q))
    grad = np.empty(n)
    level = table
    for u in range(n):
        pair = level.reshape(2, -1)
        diff = pair[1] - pair[0]
        grad[u] = diff @ suffix[u + 1]
        level = pair[0] + y[u] * diff
    return float(level[0]), grad


class MultilinearOracle:
    """Evaluates ``F`` and ``∇F`` of one utility at many points ``y``.

    ``method`` is resolved once (see :func:`resolve_method`) and stored in
    :attr:`method`. ``"exact"`` evaluates all ``2^n`` sets at construction;
    ``"monte-carlo"`` fixes ``samples × n`` uniforms from ``seed`` at construction and
    reuses them at every call (common random numbers), so two calls at the same ``y``
    agree exactly and nearby ``y`` get correlated estimates. ``seed`` may also be a
    numpy ``Generator``. :attr:`structured` tells whether Monte Carlo uses the
    ``O(samples·n)`` learning-curve form (the same estimator, see the module docstring).
    """

    def __init__(self, utility: SetFunction, method: str = "auto", samples: int = 2000,
                 seed: int | np.random.Generator | None = None):
        self.utility = utility
        self.n = int(utility.n)
        self.samples = _check_samples(samples)
        self.method = resolve_method(utility, method)
        self.structured = False
        if self.method == "closed-form":
            self._closed = _closed_form(utility)
        elif self.method == "exact":
            self._table = self._value_table()
        else:
            self._entropy = int(as_generator(seed).integers(2**63))
            self._layout = _layout(self.samples, self.n)
            self._stored = None
            if self.samples * self.n <= STORE_CELLS:
                self._stored = [self._draw(i, rows) for i, (_, rows) in enumerate(self._layout)]
            structure = curve_sums_of(utility)
            self.structured = structure is not None
            self._curve = CurveSumsEstimator(structure) if self.structured else None

    def _draw(self, block: int, rows: slice) -> np.ndarray:
        return np.random.default_rng([self._entropy, block]).random((rows.stop - rows.start, self.n))

    def _blocks(self) -> Iterator[tuple[int, slice, np.ndarray]]:
        for i, (batch, rows) in enumerate(self._layout):
            yield batch, rows, self._stored[i] if self._stored is not None else self._draw(i, rows)

    def _value_table(self) -> np.ndarray:
        total = 1 << self.n
        table = np.empty(total)
        step = max(1, CHUNK_CELLS * 2 // self.n)
        for start in range(0, total, step):
            rows = slice(start, min(total, start + step))
            table[rows] = self.utility.values(_all_masks(self.n, rows))
        return table

    def __call__(self, y: Any) -> MultilinearEstimate:
        y = check_point(y, self.n)
        if self.method == "closed-form":
            value, grad = self._closed(y)
            return MultilinearEstimate(float(value), np.asarray(grad, dtype=np.float64),
                                       0.0, np.zeros(self.n), self.method)
        if self.method == "exact":
            value, grad = _contract(self._table, y)
            return MultilinearEstimate(value, grad, 0.0, np.zeros(self.n), self.method)
        if self.structured:
            value, grad, value_se, grad_se = self._curve.estimate(
                y, ((batch, u) for batch, _, u in self._blocks()), self.samples)
            return MultilinearEstimate(value, grad, value_se, grad_se, self.method)
        return self._monte_carlo(y)

    def _monte_carlo(self, y: np.ndarray) -> MultilinearEstimate:
        n, m = self.n, self.samples
        base = np.empty(m)
        total, squares = np.zeros(n), np.zeros(n)
        # f(R ∪ u) − f(R \ u) needs only R with u toggled: the other side is f(R) itself.
        for _, rows, uniforms in self._blocks():
            sets = uniforms < y
            here = self.utility.values(sets)
            base[rows] = here
            step = max(1, CHUNK_CELLS // (sets.shape[0] * n))
            for start in range(0, n, step):
                us = np.arange(start, min(n, start + step))
                toggled = np.repeat(sets[:, None, :], us.size, axis=1)
                toggled[:, np.arange(us.size), us] ^= True
                other = self.utility.values(toggled.reshape(-1, n)).reshape(-1, us.size)
                diff = np.where(sets[:, us], here[:, None] - other, other - here[:, None])
                total[us] += diff.sum(axis=0)
                squares[us] += (diff ** 2).sum(axis=0)
        mean = total / m
        ddof = 1 if m > 1 else 0
        variance = np.maximum(squares - m * mean ** 2, 0.0) / max(m - ddof, 1)
        scale = 1.0 / np.sqrt(m)
        return MultilinearEstimate(float(base.mean()), mean,
                                   float(base.std(ddof=ddof) * scale),
                                   np.sqrt(variance) * scale, self.method)


def _layout(samples: int, n: int) -> list[tuple[int, slice]]:
    """Row blocks ``(batch, rows)``: :data:`BATCHES` batches, each cut into blocks of at most
    ``CHUNK_CELLS / n`` rows (the unit of memory)."""
    per_batch = -(-samples // min(BATCHES, samples))
    per_block = max(1, min(per_batch, CHUNK_CELLS // n))
    out = []
    for batch, start in enumerate(range(0, samples, per_batch)):
        stop = min(samples, start + per_batch)
        out.extend((batch, slice(s, min(stop, s + per_block))) for s in range(start, stop, per_block))
    return out


def multilinear(utility: SetFunction, y: Any, *, method: str = "auto", samples: int = 2000,
                seed: Seed = None) -> MultilinearEstimate:
    """``F(y) = E f(R(y))`` and ``∂F/∂y_u = E[f(R ∪ {u}) − f(R \\ {u})]`` at one point.

    ``method`` is ``"auto"``, ``"closed-form"``, ``"exact"`` or ``"monte-carlo"``
    (see :func:`resolve_method`); ``samples`` and ``seed`` (an int or a Generator)
    are used by Monte Carlo only. For repeated calls use :class:`MultilinearOracle`.
    """
    _check_samples(samples)
    check_point(y, utility.n)
    return MultilinearOracle(utility, method, samples, seed)(y)
