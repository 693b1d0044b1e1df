"""The pricing interface: ``max_{|S|=k} f(S) + λ(S)`` for the dual prices λ of the master LP.

A pricing oracle is a callable ``oracle(lam) -> PricingResult`` (see
:class:`fairsched.solvers.colgen.PricingResult`) with two attributes: ``name``, used in the method
string of :func:`fairsched.optimum`, and ``exact``, true when every answer attains the
maximum (its ``upper_bound`` equals the best value it returns).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from fairsched.solvers.colgen import PricingResult

#: relative tolerance at which an upper bound counts as equal to the best value found
EXACT_RTOL = 1e-12


class PricingOracle(ABC):
    """Base class: ``oracle(lam)`` prices the ``k``-sets of ``n`` workers."""

    name: str = "abstract"
    exact: bool = False

    def __init__(self, n: int, k: int, max_columns: int = 10):
        if not 1 <= k <= n:
            raise ValueError(f"k must satisfy 1 <= k <= n = {n}, got {k}")
        if max_columns < 1:
            raise ValueError(f"max_columns must be >= 1, got {max_columns}")
        self.n, self.k, self.max_columns = int(n), int(k), int(max_columns)

    def __call__(self, lam: np.ndarray) -> PricingResult:
        lam = np.asarray(lam, dtype=float)
        if lam.shape != (self.n,):
            raise ValueError(f"lam must have shape ({self.n},), got {lam.shape}")
        return self.price(lam)

    @abstractmethod
    def price(self, lam: np.ndarray) -> PricingResult:
        """Candidate columns for ``max_{|S|=k} f(S) + lam(S)`` with a certified upper bound."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n}, k={self.k})"


def is_tight(best: float, bound: float) -> bool:
    """Whether ``bound`` certifies ``best`` as the maximum (relative tolerance :data:`EXACT_RTOL`)."""
    return bound - best <= EXACT_RTOL * max(1.0, abs(best))


def bound_under_cutoff(dual: float, cutoff: float | None, all_cut_off: bool = False) -> float:
    """The upper bound a branch and bound proves when every node bounded by ``cutoff`` was
    pruned (``None``: no cutoff, the solver's ``dual`` bound stands).

    The solver's dual bound covers only the nodes it kept (HiGHS even reports a start below
    the cutoff as optimal, with the start's value as bound), and the pruned nodes are worth
    at most ``cutoff``: so ``max(dual, cutoff)``, and ``cutoff`` itself when every node was
    cut off (``all_cut_off``: the solver then calls the problem infeasible).
    """
    if cutoff is None:
        return dual
    return float(cutoff) if all_cut_off else max(dual, float(cutoff))


def ranked(columns: np.ndarray, values: np.ndarray, lam: np.ndarray, limit: int,
           upper_bound: float, exact: bool) -> PricingResult:
    """A :class:`PricingResult` with the distinct ``columns`` sorted by ``f + λ``, at most ``limit``."""
    columns = np.asarray(columns, dtype=bool).reshape(-1, lam.size)
    values = np.asarray(values, dtype=float).reshape(-1)
    if columns.shape[0] > 1:
        _, first = np.unique(np.packbits(columns, axis=1), axis=0, return_index=True)
        columns, values = columns[first], values[first]
    order = np.argsort(-(values + columns @ lam), kind="stable")[:limit]
    best = float(values[order[0]] + columns[order[0]] @ lam) if order.size else -np.inf
    return PricingResult(columns=columns[order], values=values[order],
                         upper_bound=float(max(upper_bound, best)), exact=exact)
