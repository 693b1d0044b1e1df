"""A randomised check that a set function is normalised, monotone and submodular.

:func:`check_submodular` samples random chains ``A ⊆ B`` with ``x ∉ B`` and tests

* normalisation  ``f(∅) = 0``,
* monotonicity   ``f(A) <= f(B)`` (also ``f(A) <= f(A ∪ {x})`` and ``f(B) <= f(B ∪ {x})``),
* submodularity  ``f(A ∪ {x}) − f(A) >= f(B ∪ {x}) − f(B)``,

each up to an absolute tolerance ``tol``. Passing is evidence, not proof.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fairsched.results import Result
from fairsched.utilities.base import SetFunction


@dataclass(frozen=True)
class SubmodularityReport(Result):
    """Outcome of :func:`check_submodular`; truthy iff no violation was found.

    On a violation, ``A`` and ``B`` are the sets involved (``A ⊆ B``) and ``x`` the added
    worker for a diminishing-returns violation (``None`` for the other kinds). ``status``
    is ``"no-violation"`` or ``"violation"``; ``success`` means the check ran.
    """

    ok: bool
    violation: str | None = None
    A: tuple[int, ...] | None = None
    B: tuple[int, ...] | None = None
    x: int | None = None

    def __post_init__(self) -> None:
        self._settle("no-violation" if self.ok else "violation", True,
                     self.violation or "no violation of monotone submodularity found")

    def __bool__(self) -> bool:
        return self.ok


def _fmt_set(mask: np.ndarray) -> str:
    return "{" + ", ".join(str(u) for u in np.flatnonzero(mask)) + "}"


def _as_tuple(mask: np.ndarray) -> tuple[int, ...]:
    return tuple(int(u) for u in np.flatnonzero(mask))


def _evaluator(f: SetFunction | Callable[[tuple[int, ...]], float],
               n: int | None) -> tuple[Callable[[np.ndarray], np.ndarray], int]:
    if isinstance(f, SetFunction):
        return f.values, f.n
    if not callable(f):
        raise TypeError(f"f must be a SetFunction or a callable, got {type(f).__name__}")
    if n is None:
        raise TypeError("n is required when f is a plain callable")

    def evaluate(masks: np.ndarray) -> np.ndarray:
        return np.array([float(f(_as_tuple(row))) for row in masks], dtype=np.float64)

    return evaluate, int(n)


def check_submodular(f: SetFunction | Callable[[tuple[int, ...]], float], trials: int = 200,
                     seed: int = 0, tol: float = 1e-9, n: int | None = None) -> SubmodularityReport:
    """Randomised test that ``f`` is normalised, monotone and submodular.

    ``f`` is a :class:`SetFunction` (its ``n`` is used) or a callable taking a sorted tuple
    of worker indices, in which case ``n`` is required. Each of ``trials`` samples draws a
    random permutation, prefixes ``A ⊆ B`` of it and a later element ``x ∉ B``; all
    ``4·trials + 1`` sets are evaluated in one batch. The first violation found (checked
    in the order normalisation, monotonicity, submodularity) is reported with its sets.

    Examples
    --------
    >>> from fairsched.utilities import Coverage, check_submodular
    >>> report = check_submodular(Coverage([[0, 1], [1, 2], [3]], [1.0, 2.0, 1.0, 5.0]))
    >>> bool(report), report.status
    (True, 'no-violation')

    A plain callable gets a sorted tuple of indices and needs ``n``:

    >>> report = check_submodular(lambda S: len(S) ** 2, n=4, trials=50)
    >>> bool(report), report.A, report.B, report.x
    (False, (), (0, 2), 1)
    >>> report.violation
    'not submodular: gain of 1 on {} is 1 < gain on {0, 2} = 5'
    """
    evaluate, n = _evaluator(f, n)
    empty = np.zeros((1, n), dtype=bool)
    f0 = float(evaluate(empty)[0])
    if not (math.isfinite(f0) and abs(f0) <= tol):
        return SubmodularityReport(False, f"not normalised: f({{}}) = {f0:.6g}, expected 0", A=())
    if n == 0 or trials <= 0:
        return SubmodularityReport(True)

    rng = np.random.default_rng(seed)
    rows = np.arange(trials)
    perm = rng.permuted(np.tile(np.arange(n), (trials, 1)), axis=1)
    rank = np.argsort(perm, axis=1)
    size_b = rng.integers(0, n, size=trials)  # < n, so some x lies outside B
    size_a = rng.integers(0, size_b + 1)
    x = perm[rows, rng.integers(size_b, n)]
    A = rank < size_a[:, None]
    B = rank < size_b[:, None]
    Ax, Bx = A.copy(), B.copy()
    Ax[rows, x] = True
    Bx[rows, x] = True
    fA, fAx, fB, fBx = evaluate(np.concatenate([A, Ax, B, Bx])).reshape(4, trials)

    for sets, vals in ((A, fA), (Ax, fAx), (B, fB), (Bx, fBx)):
        bad = np.flatnonzero(~np.isfinite(vals))
        if bad.size:
            t = bad[0]
            return SubmodularityReport(False, f"f({_fmt_set(sets[t])}) = {vals[t]}, expected a "
                                              "finite number", A=_as_tuple(sets[t]))

    for small, big, f_small, f_big in ((A, B, fA, fB), (A, Ax, fA, fAx), (B, Bx, fB, fBx)):
        bad = np.flatnonzero(f_big < f_small - tol)
        if bad.size:
            t = bad[0]
            return SubmodularityReport(
                False,
                f"not monotone: f({_fmt_set(big[t])}) = {f_big[t]:.6g} < "
                f"f({_fmt_set(small[t])}) = {f_small[t]:.6g}",
                A=_as_tuple(small[t]), B=_as_tuple(big[t]))

    gain_a, gain_b = fAx - fA, fBx - fB
    bad = np.flatnonzero(gain_a < gain_b - tol)
    if bad.size:
        t = bad[0]
        return SubmodularityReport(
            False,
            f"not submodular: gain of {x[t]} on {_fmt_set(A[t])} is {gain_a[t]:.6g} < "
            f"gain on {_fmt_set(B[t])} = {gain_b[t]:.6g}",
            A=_as_tuple(A[t]), B=_as_tuple(B[t]), x=int(x[t]))
    return SubmodularityReport(True)
