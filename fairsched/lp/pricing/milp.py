"""Exact pricing by a mixed-integer programme in HiGHS, for utilities with a MILP form.

The model (binary ``x_u`` = worker ``u`` in ``S``, ``Σ x = k``, plus utility-specific
continuous variables) is built once; each call only changes the objective coefficients of
``x`` to ``c_u + λ_u`` and re-solves, with the greedy set as a MIP start.  The certified
upper bound is HiGHS's **dual** bound (``mip_dual_bound``), not the incumbent's value.
"""

from __future__ import annotations

import time

import highspy
import numpy as np

from fairsched.lp.pricing.base import PricingOracle, is_tight, ranked
from fairsched.lp.pricing.greedy import GreedyPricing
from fairsched.utilities.base import SetFunction
from fairsched.solvers.colgen import PricingResult
from fairsched.solvers.lp import new_highs, set_option

#: relative MIP gap HiGHS is asked to close
MIP_REL_GAP = 1e-9


class MilpPricing(PricingOracle):
    """Shared machinery; subclasses add their variables and rows in :meth:`build`.

    ``deadline`` (a ``time.perf_counter()`` value) caps each solve; an unfinished solve
    still returns its incumbent and dual bound, with ``exact`` false.
    """

    exact = True
    accepts_target = True
    swap_deltas = None

    def __init__(self, utility: SetFunction, k: int, *, max_columns: int = 10,
                 rel_gap: float = MIP_REL_GAP, deadline: float | None = None):
        super().__init__(utility.n, k, max_columns)
        self.utility = utility
        self.deadline = deadline
        #: cheap pricing for :func:`fairsched.solvers.colgen.column_generation`'s ``heuristic``
        self.heuristic = GreedyPricing(utility, k, max_columns=max_columns,
                                       swap_deltas=self.swap_deltas)
        self.h = new_highs()
        self.set_rel_gap(rel_gap)
        set_option(self.h, "mip_abs_gap", 1e-12)
        self.x_cost = np.zeros(self.n)
        self.build()
        self.num_col = self.h.getNumCol()
        self.stats = {"calls": 0, "inexact": 0, "seconds": 0.0}

    def set_rel_gap(self, rel_gap: float) -> None:
        """The relative MIP gap HiGHS closes (on ``f(S) + λ(S)``); ``exact`` allows twice it."""
        self.rel_gap = float(rel_gap)
        set_option(self.h, "mip_rel_gap", self.rel_gap)

    def build(self) -> None:
        """Add ``x`` (columns ``0..n-1``, binary) and ``Σ x = k``; subclasses extend."""
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        n = self.n
        self.h.addCols(n, self.x_cost, np.zeros(n), np.ones(n), 0, np.zeros(n, np.int32),
                       np.zeros(0, np.int32), np.zeros(0))
        self.h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.ones(n, dtype=np.uint8))
        self.h.addRow(self.k, self.k, n, np.arange(n, dtype=np.int32), np.ones(n))

    def start_values(self, x: np.ndarray) -> np.ndarray:
        """Values of the non-``x`` columns that complete a MIP start from ``x``."""
        raise NotImplementedError

    def __call__(self, lam: np.ndarray, target: float | None = None) -> PricingResult:
        lam = np.asarray(lam, dtype=float)
        if lam.shape != (self.n,):
            raise ValueError(f"lam must have shape ({self.n},), got {lam.shape}")
        return self.price(lam, target)

    def price(self, lam: np.ndarray, target: float | None = None) -> PricingResult:
        """Solve the MILP; with ``target``, stop at the first set reaching it (HiGHS
        ``objective_target``), which is then returned with ``exact`` false."""
        self.stats["calls"] += 1
        started = time.perf_counter()
        h = self.h
        h.changeColsCost(self.n, np.arange(self.n, dtype=np.int32), self.x_cost + lam)
        warm = self.heuristic(lam)
        greedy = warm.columns[0]
        start = highspy.HighsSolution()
        start.col_value = np.concatenate([greedy.astype(float), self.start_values(greedy)]).tolist()
        start.value_valid = True
        h.setSolution(start)
        set_option(h, "objective_target", -highspy.kHighsInf if target is None else float(target))
        if self.deadline is not None:
            set_option(h, "time_limit", max(1e-3, self.deadline - time.perf_counter()))
        h.run()
        status = h.getModelStatus()
        info = h.getInfo()
        columns = list(warm.columns)
        solution = np.asarray(h.getSolution().col_value)
        if solution.size >= self.n:
            x = solution[: self.n] > 0.5
            if x.sum() == self.k:
                columns.append(x)
        dual = float(info.mip_dual_bound)
        columns = np.array(columns)
        values = self.utility.values(columns)
        result = ranked(columns, values, lam, self.max_columns,
                        upper_bound=min(dual, warm.upper_bound) if np.isfinite(dual) else warm.upper_bound,
                        exact=False)
        best = float(result.values[0] + result.columns[0] @ lam)
        optimal = status == highspy.HighsModelStatus.kOptimal
        exact = optimal and (is_tight(best, result.upper_bound)
                             or result.upper_bound - best <= 2 * self.rel_gap * max(1.0, abs(best)))
        if not exact:
            self.stats["inexact"] += 1
        self.stats["seconds"] += time.perf_counter() - started
        return PricingResult(result.columns, result.values, result.upper_bound, exact)
