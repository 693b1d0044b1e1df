"""Column generation for the distribution LP, with a certified upper bound at every step.

The master problem is the distribution LP of :mod:`fairsched.solvers.lp` over a growing pool of
columns, kept in **one** HiGHS model: new columns are appended with ``addCols`` and the
primal simplex restarts from the previous optimal basis (no rebuild per iteration); once the
pool is large, non-basic columns of low reduced cost are deleted (:meth:`_Master.purge`).  Columns
are stored sparsely (:class:`~fairsched.solvers.columns.Columns`: a column is its ``k``
indices), never as ``(m, n)`` masks.  The pricing problem is left to a callback::

    price(lam) -> PricingResult      # candidate columns for  max_S f(S) + lam(S)

**Bounds** (Lübbecke and Desrosiers, "Selected topics in column generation", 2005, §2.1;
Desaulniers, Desrosiers and Solomon (eds.), *Column Generation*, 2005, ch. 1): for any
``lam >= 0`` LP duality gives the Lagrangian bound::

    U_opt <= L(lam) = max_S [f(S) + lam(S)] - lam . r

so ``PricingResult.upper_bound - lam . r`` is a certified upper bound whether or not the
pricing found the maximiser.  The smallest one met is the result's ``upper_bound`` and its
``lam`` the result's ``fairness_price``: the pair is a certificate anyone can check with an
exact pricing.  The lower bound is the value of a feasible distribution: the starting one
(``start_probabilities``) or a master optimum once no artificial slack is used.

**Stopping.**  The loop stops with ``status``

- ``"optimal"`` when the relative gap ``(UB − LB) / max(|LB|, 1e-12)`` is at most ``gap``
  (the only status with ``success`` true);
- ``"stalled"`` when no column prices out at the master's duals although the gap is above
  ``gap`` (a heuristic pricing whose bound is not tight, or the floating-point floor: see
  :data:`DEFAULT_GAP`);
- ``"tailing-off"`` when the gap shrank by less than a factor ``tailing_off[1]`` over the last
  ``tailing_off[0]`` iterations and over the last :data:`TAILING_OFF_CALLS` exact pricing
  calls that **finished** (attained their maximum, or certified the requested gap), the last
  of them in that window; while the only bound is stale (no such call, or the last one cut
  short by its time budget), a stagnating gap instead triggers an exact call for the bound
  with a larger budget (:func:`_exact_budget`), since a heuristic's columns cannot move the
  certified bound;
- ``"time-limit"`` or ``"iteration-limit"``.

In every case the best distribution found and the best certificate are returned.

**Stabilisation** (default ``smoothing="auto"``): Wentges smoothing ("Weighted Dantzig–Wolfe
decomposition for linear mixed-integer programming", 1997) with the self-adjusting parameter
and the mis-pricing schedule of Pessoa, Sadykov, Uchoa and Vanderbeck, "Automation and
combination of linear-programming based stabilization techniques in column generation"
(INFORMS J. Computing, 2018).  Pricing happens at ``λ_sep = α·λ_in + (1 − α)·λ_out`` where
``λ_in`` is the stability centre (the λ of the best Lagrangian bound) and ``λ_out`` the
master's duals.  After each pricing at ``λ_sep`` with best column ``S*``, the subgradient
``g = 1_{S*} − r`` of ``L`` tells whether ``λ_sep`` overshot along ``λ_out − λ_in``: if
``g·(λ_out − λ_in) > 0`` then ``α ← α + 0.1·(1 − α)``, otherwise ``α ← α − 0.1``.  A
*mis-pricing* (no column with positive reduced cost at ``λ_out``) is followed by pricing at
``α_j = 1 − j·(1 − α)`` for the ``j``-th mis-pricing, down to ``α = 0`` (the master's own
duals), so the loop can only stop on a proof at ``λ_out``.

Elastic phase: without a feasible starting distribution, each fairness row ``u`` has an
artificial slack column ``s_u in [0, r_u]`` with objective ``-M s_u`` (big-M).  If the pricing
is exact and no column prices out while slack is still used, either ``M`` is below the
optimal dual prices (then ``M`` is raised and the loop goes on) or the floors are infeasible:
that is certified as soon as the Lagrangian bound drops below ``value_lower_bound``, or
assumed once ``M`` has reached ``max_big_m``.  Once the pool meets the floors the artificial
columns are deleted.

A feasible starting distribution (``start_probabilities`` over the initial columns) enters
the master as **one** aggregated column (its marginals and its value: a convex combination
of real columns), so a starting pool of ``n + 1`` sets of size ``k`` costs ``n`` nonzeros, not
``n·k``; its sets join the master individually when they have at most ``pool_nonzeros``
indices in all, and otherwise the sets it weights (its support) join when *they* fit.  The
support matters: with the aggregate alone the master cannot re-weight the start's sets, so
every new column must make up for all the floors the aggregate meets, and the duals sit on
one floor at a time (``benchmarks/README.md``, "Coverage on data nothing was tuned on: the
master, not the pricing").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np

from . import lp as _lp
from .columns import Columns
from .errors import InfeasibleLPError, SolverError
from .interior import InteriorSolution, InteriorTimeLimit, solve_interior
from .result import Result

Progress = Callable[[int, float, float, float], None]

#: Default relative gap of the stopping rule.  The certificate is exact arithmetic on
#: floating-point inputs, so what limits it is the lower bound: HiGHS solves the master to
#: primal and dual feasibility tolerances ``ε = MASTER_TOLERANCE`` (1e-9, on the master
#: scaled so that ``max |f| = 1``).  A master solution may miss a floor by ``ε``, which can
#: raise its value by ``ε·‖λ‖₁`` (LP sensitivity), and it is optimal only to ``ε`` in reduced
#: cost; columns enter only above ``ε·max(1, |μ|)``.  The gap column generation can close is
#: therefore about ``ε·(2 + ‖λ‖₁ + |μ|)/|U_opt|``, which is ``1e-9`` to ``1e-7`` on the
#: instances fairsched ships (``‖λ‖₁`` up to about ``100·|U_opt|`` when fairness is costly).
#: ``1e-6`` keeps a factor of 10 or more above that floor; smaller gaps may be requested and
#: then end ``"stalled"`` or ``"tailing-off"`` when floating point cannot certify them.
DEFAULT_GAP = 1e-6
#: HiGHS primal and dual feasibility tolerance of the (scaled) master
MASTER_TOLERANCE = 1e-9
#: the start columns join the master one by one only up to this many nonzeros in all
POOL_NONZEROS = 200_000
#: ``(window, factor)``: tailing-off when the gap shrank by less than ``factor`` in ``window`` iterations
TAILING_OFF = (40, 0.9)
#: ... and by less than that factor over the last this many finished exact calls: where the
#: heuristic's iterations are cheap, 40 of them fit between two exact calls, and the loop used
#: to stop after one exact call that did not move the bound (the coverage + facility-location
#: mixture of ``benchmarks/bench_pricing.py`` stopped at 15-27 s with a gap of 1.15e-2 while
#: its bound was still falling: 2.32e-2, 1.27e-2, 1.15e-2 after its last three calls)
TAILING_OFF_CALLS = 3
#: initial α of self-adjusting smoothing (Pessoa et al. 2018) and the largest it may reach
SMOOTHING_START = 0.5
SMOOTHING_MAX = 0.9999
#: mis-pricings in one sequence before pricing at the master's own duals (Pessoa et al. 2018)
MAX_MISPRICES = 10
#: the master keeps at least ``max(PURGE_KEEP, PURGE_ROWS·(n + 1))`` pool columns and is
#: purged down to that when it holds twice as many (:meth:`_Master.purge`)
PURGE_KEEP = 1_000
PURGE_ROWS = 4
#: a master solve that follows at least this many new columns per row runs HiGHS's interior
#: point method with crossover instead of the primal simplex (:meth:`_Master.solve`)
INTERIOR_POINT_COLUMNS_PER_ROW = 2
#: where Clarabel can solve the master (:data:`CLARABEL_MAX_ROWS`), a simplex solve is cut after
#: this many seconds and the master solved by Clarabel instead, by it alone for the next
#: :data:`CLARABEL_STAY` solves (:meth:`_Master.solve`)
CLARABEL_PROBE_SECONDS = 1.0
CLARABEL_STAY = 10
#: Clarabel factors a dense normal matrix of the master's rows (its columns are dense there):
#: ``rows³/3`` operations per iteration, 0.3 GFLOP at 1,001 rows
CLARABEL_MAX_ROWS = 2_001
#: an interior master optimum (:mod:`fairsched.solvers.interior`) gives every column some weight:
#: the columns below this share of the largest weight count as outside its support, for a
#: purge (:meth:`_Master.purge`) and in the reported distribution, which leaves them out
#: wherever the others still meet every floor (and cap) within :data:`MASTER_TOLERANCE`
NEGLIGIBLE_WEIGHT = 1e-9
#: the least time such a call for the bound is given
MIN_BOUND_SECONDS = 0.5
#: ``primal_columns`` is dropped for the rest of the run after this many iterations in a row
#: whose master closed less than ``PRIMAL_MIN_SHARE`` of the gap left after the columns the
#: call before added.  Where they lift the master they close about a third of it per
#: iteration, though after up to 9 flat iterations while the master assembles them (the
#: accuracy utility's trades on Pareto sizes, ``n = 1,000``; 3 flat iterations allowed cut
#: one such run off at 1.34e-4 instead of optimal in 14); where they do not they only cost
#: re-solves (the same sizes with a giant and no balanced start: 739.6 s with them, 125.8 s
#: with this gate, 41.8 s without them)
PRIMAL_MIN_SHARE = 0.05
PRIMAL_PATIENCE = 10
#: share of the time left that pricing a dual guess may take before the loop starts.  A MILP
#: pricing call at a guess can take the whole budget and leave the loop no iteration, while
#: its dual bound hardly moves after the root (facility location ``n = 400`` with uniform
#: similarities, ``python benchmarks/bench_pricing.py --seed S facility-location-uniform``:
#: the same bound, 197.675819 on seed 0, whether the call ran the whole 120 s or was stopped
#: at this share; 4.21e-3 / 4.48e-3 at 120 s with no iteration before, 1.59e-3 / 1.60e-3 with
#: the master's 163 / 192 iterations raising the lower bound after; benchmarks/README.md,
#: "Facility location on data nothing was tuned on")
GUESS_SHARE = 0.25


@dataclass(frozen=True, eq=False)
class PricingResult(Result):
    """What a pricing oracle found for the duals ``lam``.

    ``columns`` (m, n) bool, best first (m may be 0); ``values`` (m,) their ``f(S)``;
    ``upper_bound`` a certified upper bound on ``max_S f(S) + lam(S)`` over the whole
    column family (``inf`` when the oracle can certify none); ``exact`` true when the first
    column attains that maximum (so an empty or non-improving answer proves the master
    optimal).

    An oracle with the attribute ``accepts_target = True`` is called as
    ``price(lam, target=t)``: a column with ``f(S) + lam(S) >= t`` is all the master needs
    (``t`` is μ plus a tolerance), so the oracle may stop at the first one it finds; its
    ``upper_bound`` must still be certified.  One with ``accepts_enough = True`` is also given
    ``enough=e``, the pricing bound that certifies the requested gap against the best value
    found (:func:`certifying_pricing_bound`), and may stop as soon as its certified ``upper_bound`` is at or
    below it.  Such early answers do not count as inexact.
    """

    columns: np.ndarray
    values: np.ndarray
    upper_bound: float
    exact: bool


@dataclass(frozen=True, eq=False)
class ColumnGenerationResult(Result):
    """The outcome of :func:`column_generation`.

    ``value`` is ``Σ p_S f(S)`` of the best feasible distribution found (a lower bound on the
    LP optimum): its sets are ``support`` (:class:`Columns`; ``members`` gives them as (m, n)
    masks), their ``f`` ``values`` and their weights ``probabilities`` (summing to 1).

    The **certificate**: ``fairness_price`` λ is the dual vector whose Lagrangian bound is the
    smallest met, ``pricing_bound`` the pricing's certified bound on ``max_S f(S) + λ(S)`` at
    it, and ``upper_bound = max(pricing_bound − λ·r, value)`` (``inf`` when no pricing
    certified a bound; ``fairness_price`` is then the master's).  ``master_fairness_price``
    and ``convexity_dual`` μ are the duals of the master that gave ``value`` (``None`` and
    ``nan`` when the starting distribution was never improved on).  ``gap`` is the relative
    gap ``(upper_bound − value) / max(|value|, 1e-12)``, ``absolute_gap`` the difference.
    ``history`` holds ``(iteration, lower, upper, columns in pool)``; ``lower`` is ``-inf``
    while no feasible distribution is known (iteration 0 records the starting distribution
    and the dual guesses).  ``status``: see the module docstring; ``success`` is true exactly
    when it is ``"optimal"``.  ``pricing_exact`` is true when every call of ``price``
    attained its maximum (calls that stopped at a requested target or bound, and heuristic
    calls, do not count).  ``columns`` is the number of distinct sets the master saw, ``big_m`` the
    final penalty of the elastic phase.  With caps, ``cap_price`` ν (and ``master_cap_price``)
    are the cap rows' prices, ``fairness_price`` λ the floors' (the pricing saw ``λ − ν``) and
    the bound is ``pricing_bound − λ·r + ν·c``; without caps they are ``None``.
    """

    value: float
    upper_bound: float
    gap: float
    probabilities: np.ndarray
    support: Columns
    values: np.ndarray
    fairness_price: np.ndarray
    pricing_bound: float
    master_fairness_price: np.ndarray | None
    convexity_dual: float
    iterations: int
    history: list[tuple[int, float, float, int]] = field(repr=False)
    columns: int
    pricing_exact: bool
    big_m: float
    cap_price: np.ndarray | None = None
    master_cap_price: np.ndarray | None = None

    @property
    def absolute_gap(self) -> float:
        """``upper_bound − value`` (at least 0)."""
        return max(0.0, self.upper_bound - self.value)

    @property
    def members(self) -> np.ndarray:
        """The support as (m, n) boolean masks (``O(m·n)`` memory: for small ``n``)."""
        return self.support.to_masks()


def relative_gap(lower: float, upper: float) -> float:
    """``(upper − lower) / max(|lower|, 1e-12)``, clipped at 0; ``inf`` without a lower bound."""
    if not math.isfinite(lower):
        return math.inf
    return max(0.0, upper - lower) / max(abs(lower), 1e-12)


@dataclass
class _Certificate:
    """The best Lagrangian bound so far: ``bound = pricing_bound − λ·r`` (``+ ν·c`` with caps)."""

    bound: float = math.inf
    lam: np.ndarray | None = None
    pricing_bound: float = math.inf
    caps: np.ndarray | None = None

    def offer(self, lam: np.ndarray, pricing_bound: float, r: np.ndarray) -> bool:
        bound = float(pricing_bound) - _lp.dual_offset(lam, r, self.caps)
        if bound < self.bound:
            self.bound, self.lam, self.pricing_bound = bound, lam.copy(), float(pricing_bound)
            return True
        return False


@dataclass
class _MasterSolution:
    pool: np.ndarray  # probabilities of the pool columns
    aggregate: float  # probability of the aggregated start column
    slack: np.ndarray
    lam: np.ndarray
    mu: float


class _MasterTimeLimit(Exception):
    """HiGHS stopped the master at its time limit."""


class _Master:
    """The restricted master LP as one HiGHS model: columns are appended; the only deletions
    are the artificial slacks once unused and non-basic pool columns (:meth:`purge`).

    HiGHS columns: the ``n`` artificial slacks while elastic, then the aggregated start
    column (if any), then the pool.  The objective is divided by ``scale`` (about ``max |f|``)
    so that HiGHS's absolute tolerances are relative to the utility.
    """

    def __init__(self, r: np.ndarray, scale: float, tol: float, big_m: float | None,
                 caps: np.ndarray | None = None):
        self.n = r.size
        self.r = r
        self.caps = caps
        self.scale = scale
        self.h = _lp.new_highs()
        for name, value in (("primal_feasibility_tolerance", tol), ("dual_feasibility_tolerance", tol),
                            ("solver", "simplex"), ("simplex_strategy", 4), ("presolve", "off")):
            _lp.set_option(self.h, name, value)
        n = self.n
        inf = highspy.kHighsInf
        self.elastic = big_m is not None
        slacks = n if self.elastic else 0
        status = self.h.passModel(
            slacks, n + 1, slacks, int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMaximize), 0.0,
            np.full(slacks, -(big_m or 0.0)), np.zeros(slacks), r.copy()[:slacks],
            np.append(r, 1.0), np.append(np.full(n, inf) if caps is None else caps, 1.0),
            np.arange(slacks + 1, dtype=np.int32), np.arange(slacks, dtype=np.int32), np.ones(slacks),
            np.zeros(slacks, dtype=np.int32),
        )
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected the master LP")
        self.offset = slacks  # pool column j is HiGHS column offset + j (after the aggregate)
        self.has_aggregate = False
        self.aggregate_value = 0.0
        self.values = np.empty(0)
        self._parts: list[Columns] = []
        self._cached: Columns | None = Columns.empty(n)
        self._seen: dict[int, list[int]] = {}
        self._unsolved = 0  # columns added since the last solve
        self._clarabel_usable = True  # false once Clarabel is missing or did not solve it
        self._clarabel_stay = 0  # solves left to Clarabel alone
        self._interior: InteriorSolution | None = None  # the last solve's, when by Clarabel

    @property
    def size(self) -> int:
        return self.values.size

    def pool(self) -> Columns:
        if self._cached is None:
            self._cached = Columns.concatenate(self._parts, self.n)
            self._parts = [self._cached]
        return self._cached

    def take(self, index: np.ndarray) -> Columns:
        """Pool columns ``index`` (increasing), read from the parts without joining them all."""
        if self._cached is not None:
            return self._cached.take(index)
        taken, start = [], 0
        for part in self._parts:
            inside = index[(index >= start) & (index < start + len(part))] - start
            if inside.size:
                taken.append(part.take(inside))
            start += len(part)
        return Columns.concatenate(taken, self.n) if taken else Columns.empty(self.n)

    def set_big_m(self, big_m: float) -> None:
        assert self.elastic
        self.h.changeColsCost(self.n, np.arange(self.n, dtype=np.int32), np.full(self.n, -big_m))

    def close_elastic(self) -> None:
        """Delete the artificial slacks once the pool meets the floors (it keeps meeting them:
        a purge keeps the basic columns): λ is then no longer capped by, or stuck at, the penalty M."""
        self.h.deleteCols(self.n, np.arange(self.n, dtype=np.int32))
        self._interior = None
        self.elastic = False
        self.offset -= self.n

    def add_aggregate(self, marginals: np.ndarray, value: float) -> None:
        """The starting distribution as one column: coefficient ``x_u`` in row ``u``, 1 in the
        convexity row, objective its value."""
        rows = np.append(np.flatnonzero(marginals > 0), self.n).astype(np.int32)
        coefficients = np.append(marginals[rows[:-1]], 1.0)
        self._add_highs(np.array([value / self.scale]), np.zeros(1, dtype=np.int32), rows, coefficients)
        self.has_aggregate = True
        self.aggregate_value = float(value)
        self.offset += 1

    def add(self, columns: Columns, values: np.ndarray) -> int:
        """Append the columns not already in the pool; return how many were added."""
        if not len(columns):
            return 0
        fresh = []
        first = self.size
        for j, key in enumerate(columns.hashes().tolist()):
            known = self._seen.get(key, [])
            if any(np.array_equal(self._column(i, columns, j, first, fresh), columns[j]) for i in known):
                continue
            self._seen.setdefault(key, []).append(first + len(fresh))
            fresh.append(j)
        if not fresh:
            return 0
        new = columns.take(np.array(fresh))
        values = np.ascontiguousarray(np.asarray(values, dtype=float)[fresh])
        # Column S: a 1 in every row u in S and in the convexity row n (CSC, rows sorted).
        sizes = new.sizes() + 1
        starts = np.zeros(len(new), dtype=np.int32)
        np.cumsum(sizes[:-1], out=starts[1:])
        rows = np.full(int(sizes.sum()), self.n, dtype=np.int32)
        members = np.ones(rows.size, dtype=bool)
        members[starts + sizes - 1] = False
        rows[members] = new.indices
        self._add_highs(values / self.scale, starts, rows, np.ones(rows.size))
        self.values = np.concatenate([self.values, values])
        self._parts.append(new)
        self._cached = None
        return len(new)

    def purge(self, keep: int) -> int:
        """Delete all but the ``keep`` pool columns of highest reduced cost at the last optimum
        (basic ones always stay); return how many were deleted.

        Every simplex iteration prices every column, so a pool that only grows makes each
        re-solve slower (facility location ``n = 400``: 0.03 s per solve at 1,300 columns,
        1.5 s at 10,000, 92 % of the run).  Deleting non-basic columns keeps the basis
        optimal and changes neither bound: the lower bound is a distribution already
        recorded, the upper bound comes from the pricing.  A deleted set that prices out
        again later is simply added again.
        """
        if self.size <= keep:
            return 0
        index = np.arange(self.offset, self.offset + self.size)
        if self._interior is not None:
            # an interior optimum has no basis: its support (weights not negligible) stays,
            # and of the other columns those of highest reduced cost
            reduced = self._interior.col_dual[index]
            weights = self._interior.col_value[index]
            basic = weights > NEGLIGIBLE_WEIGHT * max(float(weights.max(initial=0.0)), 1e-300)
        else:
            solution, basis = self.h.getSolution(), self.h.getBasis()
            reduced = np.asarray(solution.col_dual)[index]
            status = np.asarray([int(s) for s in basis.col_status])[index] if basis.valid else None
            basic = (status == int(highspy.HighsBasisStatus.kBasic)) if status is not None else \
                (np.asarray(solution.col_value)[index] > 0)
        # a maximisation: non-basic columns have reduced cost <= 0, the best are nearest 0
        order = np.argsort(-np.where(basic, np.inf, reduced), kind="stable")
        drop = np.sort(order[keep:])
        drop = drop[~basic[drop]]
        if drop.size == 0:
            return 0
        self.h.deleteCols(drop.size, (drop + self.offset).astype(np.int32))
        self._interior = None
        kept = np.setdiff1d(np.arange(self.size), drop, assume_unique=True)
        pool = self.pool().take(kept)
        self.values = self.values[kept]
        self._parts, self._cached = [pool], pool
        self._seen = {}
        for i, key in enumerate(pool.hashes().tolist()):
            self._seen.setdefault(key, []).append(i)
        return int(drop.size)

    def _column(self, i: int, columns: Columns, j: int, first: int, fresh: list[int]) -> np.ndarray:
        """Pool column ``i``, which may be one of the ``fresh`` columns of this very batch."""
        if i >= first:
            return columns[fresh[i - first]]
        return self.pool()[i]

    def _add_highs(self, costs: np.ndarray, starts: np.ndarray, rows: np.ndarray, coefficients: np.ndarray) -> None:
        m = costs.size
        status = self.h.addCols(m, np.ascontiguousarray(costs, dtype=float), np.zeros(m),
                                np.full(m, highspy.kHighsInf), rows.size, starts, rows,
                                np.ascontiguousarray(coefficients, dtype=float))
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected new columns")
        self._unsolved += m
        self._interior = None

    def solve(self, time_limit: float | None) -> _MasterSolution:
        """The master optimum; ``_MasterTimeLimit`` when the solver stops at ``time_limit``.

        HiGHS's primal simplex solves it, warm-started from the last basis.  Two exceptions,
        both for a degenerate master through which the simplex crawls:

        - After many new columns (:data:`INTERIOR_POINT_COLUMNS_PER_ROW`; in practice the
          first solve over a large starting pool) an interior point method replaces it for
          one solve: HiGHS's with crossover, whose basis the later solves warm-start from
          (``coverage-geometric`` of ``benchmarks/bench_pricing.py``: 1,001 rows, 3,250
          columns, 12,688 primal simplex iterations in 30.6 s against 10.9 s; ``benchmarks/
          README.md``, "Sweeps of swaps between rounds"), or Clarabel's where it applies.
        - Where Clarabel applies (:mod:`fairsched.solvers.interior`; at most
          :data:`CLARABEL_MAX_ROWS` rows), a simplex solve is cut at
          :data:`CLARABEL_PROBE_SECONDS` and Clarabel solves the master, then alone for the
          next :data:`CLARABEL_STAY` solves; the simplex resumes from where it was cut when
          it is tried again.  On that master with the columns of one more iteration, 54.4 s
          (16,435 simplex iterations) against 2.3 s by Clarabel (``python
          benchmarks/bench_master_solvers.py``).

        Clarabel's optimum is interior to the optimal face, not a vertex: every set carries
        some weight (the result leaves out the negligible ones, :data:`NEGLIGIBLE_WEIGHT`),
        and its duals are central on their face.
        """
        clarabel = self._clarabel_usable and self.n + 1 <= CLARABEL_MAX_ROWS
        many = self._unsolved >= INTERIOR_POINT_COLUMNS_PER_ROW * (self.n + 1)
        if clarabel and (many or self._clarabel_stay > 0):
            self._clarabel_stay = max(0, self._clarabel_stay - 1)
            solution = self._solve_clarabel(time_limit)
            if solution is not None:
                return solution
            clarabel = False
        self._interior = None
        probe = clarabel and not many and (time_limit is None or time_limit > CLARABEL_PROBE_SECONDS)
        started = time.perf_counter()
        run_status, model_status = self._run_highs(CLARABEL_PROBE_SECONDS if probe else time_limit,
                                                   interior=many and not clarabel)
        if probe and model_status == highspy.HighsModelStatus.kTimeLimit:
            left = None if time_limit is None else time_limit - (time.perf_counter() - started)
            self._clarabel_stay = CLARABEL_STAY
            solution = self._solve_clarabel(left)
            if solution is not None:
                return solution
            run_status, model_status = self._run_highs(left, interior=False)
        self._unsolved = 0
        if model_status == highspy.HighsModelStatus.kTimeLimit:
            raise _MasterTimeLimit
        if model_status != highspy.HighsModelStatus.kOptimal or run_status == highspy.HighsStatus.kError:
            raise SolverError(f"HiGHS did not solve the master LP "
                              f"(status: {self.h.modelStatusToString(model_status)})")
        solution = self.h.getSolution()
        return self._solution(np.asarray(solution.col_value), np.asarray(solution.row_dual))

    def _run_highs(self, time_limit: float | None, interior: bool) -> tuple[object, object]:
        """One HiGHS run (by interior point with crossover when ``interior``): its run and model status."""
        _lp.set_time_limit(self.h, time_limit)
        if interior:
            _lp.set_option(self.h, "solver", "ipm")
            _lp.set_option(self.h, "run_crossover", "on")
        try:
            run_status = self.h.run()
        finally:
            if interior:
                _lp.set_option(self.h, "solver", "simplex")
        return run_status, self.h.getModelStatus()

    def _solve_clarabel(self, time_limit: float | None) -> _MasterSolution | None:
        """The master by Clarabel; ``None`` (and Clarabel not tried again) where it does not solve it."""
        try:
            interior = solve_interior(self.h, time_limit)
        except InteriorTimeLimit:
            raise _MasterTimeLimit from None
        if interior is None:
            self._clarabel_usable = False
            return None
        self._unsolved = 0
        self._interior = interior
        return self._solution(interior.col_value, interior.row_dual)

    def _solution(self, col: np.ndarray, row_dual: np.ndarray) -> _MasterSolution:
        """A solution read from HiGHS's column values and row duals (scaled objective)."""
        row_dual = row_dual * self.scale
        # Same sign convention as solvers.lp: >= rows carry -λ_u, the equality row +μ; with
        # caps a binding cap carries +ν_u and ``lam`` is the signed π = λ − ν.
        lam = -row_dual[: self.n]
        if self.caps is None:
            lam = np.clip(lam, 0.0, None)
        slacks = self.n if self.elastic else 0
        slack = np.clip(col[:slacks], 0.0, None) if self.elastic else np.zeros(self.n)
        aggregate = max(0.0, float(col[slacks])) if self.has_aggregate else 0.0
        return _MasterSolution(np.clip(col[self.offset:], 0.0, None), aggregate, slack, lam,
                               float(row_dual[self.n]))

    def value(self, solution: _MasterSolution) -> float:
        total = float(solution.pool.sum()) + solution.aggregate
        return (float(self.values @ solution.pool) + solution.aggregate * self.aggregate_value) / max(total, 1e-300)


class Smoothing:
    """Wentges smoothing, self-adjusting (Pessoa et al. 2018) or with a fixed α."""

    def __init__(self, smoothing: float | str, caps: np.ndarray | None = None):
        self.caps = caps
        if smoothing == "auto":
            self.auto, self.alpha = True, SMOOTHING_START
        else:
            alpha = float(smoothing)
            if not 0 <= alpha < 1:
                raise ValueError(f"smoothing must be 'auto' or a number in [0, 1), got {smoothing!r}")
            self.auto, self.alpha = False, alpha

    def schedule(self, misprices: int) -> float:
        """α for the ``misprices``-th mis-pricing of a sequence (0: the base α)."""
        if misprices == 0:
            return self.alpha
        alpha = 1.0 - (misprices + 1) * (1.0 - self.alpha)
        return 0.0 if misprices > MAX_MISPRICES or alpha <= 1e-3 else alpha

    def adapt(self, center: np.ndarray, out: np.ndarray, best_column: np.ndarray | None, r: np.ndarray) -> None:
        """Move α by the sign of ``g·(λ_out − λ_in)``, ``g = 1_{S*} − r`` the subgradient at ``λ_sep``
        (with caps ``c_u`` in place of ``r_u`` where ``λ_sep`` prices a cap)."""
        if not self.auto or best_column is None:
            return
        direction = out - center
        if not np.any(direction):
            return
        rows = r
        if self.caps is not None:
            rows = np.where(self.alpha * center + (1.0 - self.alpha) * out < 0, self.caps, r)
        slope = float(best_column.astype(float) @ direction - rows @ direction)
        if slope > 0:
            self.alpha = min(SMOOTHING_MAX, self.alpha + 0.1 * (1.0 - self.alpha))
        else:
            self.alpha = max(0.0, self.alpha - 0.1)


def column_generation(
    values: np.ndarray,
    members: np.ndarray | Columns,
    r: np.ndarray,
    price: Callable[[np.ndarray], PricingResult],
    *,
    gap: float = DEFAULT_GAP,
    max_iterations: int = 10_000,
    time_limit: float | None = None,
    deadline: float | None = None,
    progress: Progress | None = None,
    tol: float = MASTER_TOLERANCE,
    big_m: float | None = None,
    max_big_m: float | None = None,
    value_lower_bound: float | None = None,
    max_new_columns: int = 50,
    dual_guesses: Sequence[np.ndarray] = (),
    known_bounds: Sequence[tuple[np.ndarray, float]] = (),
    smoothing: float | str = "auto",
    heuristic: Callable[[np.ndarray], PricingResult] | None = None,
    start_probabilities: np.ndarray | None = None,
    pool_nonzeros: int = POOL_NONZEROS,
    tailing_off: tuple[int, float] | None = TAILING_OFF,
    caps: np.ndarray | None = None,
    primal_columns: Callable[[Columns, np.ndarray], tuple[Columns, np.ndarray]] | None = None,
    keep_support: bool = True,
) -> ColumnGenerationResult:
    """Solve ``max Σ p_S f(S) s.t. r_u <= Σ_{S∋u} p_S (<= c_u), Σ p_S = 1, p >= 0`` by column generation.

    Parameters
    ----------
    values, members
        The initial pool: ``f`` (m,) and membership, as (m, n) masks or :class:`Columns`
        (m may be 0: then the pool starts with what ``price(0)`` returns).
    r
        Fairness floors (n,).
    price
        Pricing oracle, see :class:`PricingResult`; it is called with λ >= 0 (n,), or with
        caps with the signed prices ``π = λ − ν`` (any sign).
    gap
        Stop (``"optimal"``) when ``(UB − LB) / max(|LB|, 1e-12) <= gap``; the default and
        why it is what floating point can certify: :data:`DEFAULT_GAP`.
    time_limit, deadline
        Seconds from the call, and/or an absolute ``time.perf_counter()`` value; the earlier
        counts.  Every master solve gets HiGHS's remaining time; pricing oracles should
        honour their own ``deadline`` (the caller sets it).
    progress
        ``progress(iteration, lower, upper, relative_gap)`` after every iteration (and at
        iteration 0 when a starting distribution or dual guesses give bounds).
    tol
        HiGHS primal/dual feasibility tolerance of the scaled master; also the reduced cost a
        column needs (relative to ``max(1, |μ|)`` on that scale) to enter, and the slack
        treated as zero.
    big_m, max_big_m
        Penalty of the artificial slack (default ``1e3·max(1, max |f|)``) and its ceiling
        when it has to be raised (default ``1e9·max(1, max |f|)``); raised ×100 at a time.
    value_lower_bound
        A number no feasible distribution falls below (``min f``; 0 for non-negative
        utilities).  With it, infeasibility is certified by the Lagrangian bound.
    max_new_columns
        At most this many of the priced columns (best first) enter per iteration.
    dual_guesses
        λ vectors (>= 0) to price before the first master solve, e.g. the duals of a
        relaxation: their Lagrangian bounds count towards the upper bound, the best becomes
        the first stability centre, and their columns join the pool (history iteration 0).
        Each is priced within :data:`GUESS_SHARE` of the time left (an oracle with a
        ``deadline`` attribute has it moved up for the call), in order, until the start's
        distribution is certified within ``gap``.
    known_bounds
        ``(λ, pricing_bound)`` pairs already priced elsewhere: ``pricing_bound`` must be a
        certified upper bound on ``max_S f(S) + λ(S)``.  They count like priced dual guesses
        (the bound ``pricing_bound − λ·r``, the stability centre) without a pricing call.
    smoothing
        ``"auto"`` (self-adjusting Wentges smoothing, Pessoa et al. 2018), a fixed α in
        ``[0, 1)``, or 0 to price at the master's duals only.
    heuristic
        A cheaper pricing tried first in every iteration; ``price`` runs only when it finds
        no column with positive reduced cost, so the exact oracle is called mostly to prove
        optimality (a pricing hierarchy, Desaulniers et al. 2005, ch. 1).  Its
        ``upper_bound`` must be certified too (or ``inf``); its ``exact`` flag is not used.
    start_probabilities
        Weights (m,) of a distribution over the initial columns that meets ``r``: it is the
        first lower bound (the loop may stop before any LP is solved) and enters the master
        as one aggregated column, so no elastic phase is needed.
    pool_nonzeros
        The initial columns join the master one by one only when they hold at most this
        many indices in all (they always do without ``start_probabilities``); otherwise
        those with positive start weight do when they hold at most this many.
    tailing_off
        ``(window, factor)``: stop (``"tailing-off"``) when the gap is above ``factor`` times
        the gap ``window`` iterations earlier; ``None`` never.
    caps
        Optional upper caps ``c`` (n,), ``r <= c``: rows ``Σ_{S∋u} p_S <= c_u`` with prices
        ``ν_u >= 0``; the bound becomes ``max_S [f(S) + π(S)] − λ·r + ν·c``
        (:func:`fairsched.solvers.lp.dual_offset`) and ``fairness_price`` holds ``λ``,
        ``cap_price`` ``ν``.  There is no elastic phase for caps: ``start_probabilities``
        must meet both ``r`` and ``c``.
    primal_columns
        Columns built from the master's primal solution rather than from its duals (e.g.
        :func:`fairsched.lp.pricing.exchange.exchange_columns`): after every iteration
        whose master is feasible it is called with the pool's sets of positive weight and
        their weights (the aggregated start column left out, so they may sum to less than
        1), and returns new sets and their ``f``, which join the master with the priced
        ones.  Where the master is degenerate its duals hardly move and priced columns do
        not lift its value, while columns that improve its current solution do.  It is
        called no more once :data:`PRIMAL_PATIENCE` iterations in a row closed less than
        :data:`PRIMAL_MIN_SHARE` of the gap each.
    keep_support
        ``False``: when the run ends ``"optimal"``, the best distribution's sets are not
        gathered, and ``support``, ``probabilities`` and ``values`` are empty (``value`` and
        the certificate are the same); for callers that need ``U_opt`` and its bound only.
        The gather copies every kept set, the start's included, beside the pool that holds
        them: ``4·m·k`` bytes at the peak (``n = 10^6``, ``k = 1,000``: 3.7 GiB of the
        8 GiB of ``fairsched run``).  A run that stops short keeps them, since a caller may
        go on from its distribution.

    Raises InfeasibleLPError (naming the workers whose floors stay unmet) when exact
    pricing proves the floors infeasible, SolverError when no feasible distribution is found
    within the limits or HiGHS fails, ValueError on malformed input.
    """
    start = time.perf_counter()
    r = np.ascontiguousarray(r, dtype=float)
    n = r.size
    values, columns = _check_pool(values, members, r)
    _check_options(gap, time_limit, max_iterations, max_new_columns, tailing_off)
    if caps is not None:
        caps = _lp.check_caps(caps, r)
    smoother = Smoothing(smoothing, caps)
    ends = [t for t in (deadline, None if time_limit is None else start + time_limit) if t is not None]
    stop_at = min(ends) if ends else math.inf
    over_one = np.flatnonzero(r > 1 + tol)
    if over_one.size:
        u = int(over_one[0])
        raise InfeasibleLPError(f"the LP is infeasible: worker {u} has floor r_{u} = {r[u]:g} > 1")

    if values.size == 0:
        first = price(np.zeros(n))
        values, columns = _check_pool(first.values, first.columns, r)
        if values.size == 0:
            raise InfeasibleLPError("the LP is infeasible: the pricing returned no column at all")
    scale = max(1e-300, float(np.abs(values).max()))
    certificate = _Certificate(caps=caps)
    all_exact = True
    history: list[tuple[int, float, float, int]] = []
    state = _State(values, columns, started=start)

    def price_at(duals: np.ndarray, oracle: Callable[..., PricingResult] = price,
                 target: float | None = None) -> PricingResult:
        nonlocal all_exact
        began = time.perf_counter()
        options: dict[str, float] = {}
        if target is not None and getattr(oracle, "accepts_target", False):
            options["target"] = target
        enough = certifying_pricing_bound(state.lower, gap, duals, r, caps)
        if enough is not None and getattr(oracle, "accepts_enough", False):
            options["enough"] = enough
        priced = oracle(duals, **options)
        reached = "target" in options and priced.values.size > 0 and float(
            priced.values[0] + np.asarray(priced.columns[0], dtype=float) @ duals) >= target
        # a bound at or below ``enough`` proves the requested gap: the call has done its job
        proved = "enough" in options and float(priced.upper_bound) <= enough
        if oracle is price:
            took = time.perf_counter() - began
            state.exact_seconds += took
            state.bound_finished = (bool(priced.exact) or proved) and not reached
            if state.bound_finished:
                state.last_exact_seconds = took
            if not (reached or proved):
                all_exact &= bool(priced.exact)
        if math.isfinite(float(priced.upper_bound)):
            certificate.offer(duals, float(priced.upper_bound), r)
        return priced

    start_feasible = False
    if start_probabilities is not None:
        weights = _check_start(start_probabilities, values.size)
        marginals = columns.marginals(weights)
        start_feasible = bool((marginals >= r - tol).all()) and (caps is None or bool((marginals <= caps + tol).all()))
        if start_feasible:
            state.offer_start(weights, float(weights @ values))

    for lam, pricing_bound in known_bounds:
        lam = np.asarray(lam, dtype=float)
        if lam.shape != (n,) or (caps is None and (lam < 0).any()):
            raise ValueError(f"every known bound needs prices λ >= 0 of shape ({n},), got {lam.shape}")
        certificate.offer(lam, float(pricing_bound), r)

    guess_columns = []
    for guess in dual_guesses:
        if guess_columns and relative_gap(state.lower, certificate.bound) <= gap:
            break  # the guesses before have certified the start: the others' calls are not needed
        guess = np.clip(np.asarray(guess, dtype=float), 0.0, None)
        if guess.shape != (n,):
            raise ValueError(f"every dual guess must have shape ({n},), got {guess.shape}")
        # at most a share of the time left: the loop's own iterations need the rest
        guess_stop = time.perf_counter() + GUESS_SHARE * (stop_at - time.perf_counter())
        guess_columns.append(_limited(_within(price, guess_stop, lambda: price_at(guess)), max_new_columns, n))

    def record(iteration: int) -> float:
        current = relative_gap(state.lower, certificate.bound)
        history.append((iteration, state.lower, certificate.bound, state.pool_size))
        if progress is not None:
            progress(iteration, state.lower, certificate.bound, current)
        return current

    status, iteration, master = "iteration-limit", 0, None
    if dual_guesses or known_bounds or start_feasible:
        current = record(0)
        if current <= gap:
            status = "optimal"
        elif time.perf_counter() >= stop_at:
            status = "time-limit"
    if caps is not None and not start_feasible:
        raise ValueError("with caps, column generation needs start_probabilities whose marginals meet "
                         "both the floors and the caps (there is no elastic phase for caps)")
    if status == "iteration-limit":
        penalty = float(big_m) if big_m is not None else 1e3 * max(1.0, scale)
        ceiling = float(max_big_m) if max_big_m is not None else max(penalty, 1e9 * max(1.0, scale))
        master = _Master(r, scale, tol, None if start_feasible else penalty / scale, caps)
        if start_feasible:
            master.add_aggregate(columns.marginals(state.start_weights), state.start_value)
        if not start_feasible or columns.nnz <= pool_nonzeros:
            master.add(columns, values)
            state.start_joined = len(columns)
        else:
            support = np.flatnonzero(state.start_weights > 0)
            if int(columns.sizes()[support].sum()) <= pool_nonzeros:
                master.add(columns.take(support), values[support])  # no name left on the copy
                state.start_joined = support.size
        state.penalty = penalty
        for cols, vals in guess_columns:
            master.add(cols, vals)
        state.master = master
        status, iteration = _iterate(master, state, certificate, smoother, price_at, price, heuristic, r,
                                     primal_columns=primal_columns, gap=gap, tol=tol, stop_at=stop_at,
                                     max_iterations=max_iterations,
                                     max_new_columns=max_new_columns, penalty=penalty, ceiling=ceiling,
                                     value_lower_bound=value_lower_bound, tailing_off=tailing_off,
                                     record=record)
        # the master's pool and HiGHS model are not needed for the result: freed before the
        # support is gathered (they were alive beside it at the peak)
        state.master = master = None
    return _result(state, certificate, r, status, iteration, history, all_exact, start, caps, gap=gap,
                   keep_support=keep_support)


@dataclass
class _State:
    """The best feasible distribution so far, and what the master has seen."""

    start_values: np.ndarray
    start_columns: Columns
    lower: float = -math.inf
    start_weights: np.ndarray | None = None
    start_value: float = math.nan
    best: _MasterSolution | None = None  # None: the best is the starting distribution
    #: the sets of ``best`` with positive weight, their ``f`` and weights (kept apart from
    #: the master, whose pool loses columns when it is purged)
    best_support: tuple[Columns, np.ndarray, np.ndarray] | None = None
    master: _Master | None = None
    penalty: float = math.nan
    slack: np.ndarray | None = None  # of the last master solution
    exact_seconds: float = 0.0  # spent in the exact pricing
    last_exact_seconds: float = 0.0  # the last exact call that finished (attained its maximum)
    bound_finished: bool = False  # whether the last exact call finished
    bound_budget: float = 0.0  # the least budget of the next call for the bound
    started: float = field(default_factory=time.perf_counter)
    start_joined: int = 0  # start sets that joined the master one by one

    @property
    def pool_size(self) -> int:
        """Distinct sets seen: the master's pool, plus the start sets it holds only aggregated."""
        inside = self.master.size if self.master is not None else 0
        return inside + len(self.start_columns) - self.start_joined

    def offer_start(self, weights: np.ndarray, value: float) -> None:
        self.start_weights, self.start_value, self.lower = weights, value, value

    def offer(self, solution: _MasterSolution, master: _Master) -> None:
        value = master.value(solution)
        if value > self.lower or (self.best is None and self.start_weights is None):
            self.lower, self.best = value, solution
            used = np.flatnonzero(solution.pool > 0)
            self.best_support = (master.take(used), master.values[used], solution.pool[used])


def _iterate(master: _Master, state: _State, certificate: _Certificate, smoother: Smoothing,
             price_at: Callable[..., PricingResult], price: Callable[..., PricingResult],
             heuristic: Callable[..., PricingResult] | None, r: np.ndarray, *,
             primal_columns: Callable[[Columns, np.ndarray], tuple[Columns, np.ndarray]] | None,
             gap: float, tol: float,
             stop_at: float, max_iterations: int, max_new_columns: int, penalty: float, ceiling: float,
             value_lower_bound: float | None, tailing_off: tuple[int, float] | None,
             record: Callable[[int], float]) -> tuple[str, int]:
    """The main loop: master, (smoothed) pricing, bounds, stopping; returns (status, iterations)."""
    gaps: list[float] = []
    finished_gaps: list[float] = []  # the gap after each iteration whose exact call finished
    iteration = last_exact = 0
    overdue = False
    primal_gate = _PrimalGate(primal_columns)
    while iteration < max_iterations:
        if time.perf_counter() >= stop_at:
            return "time-limit", iteration
        iteration += 1
        try:
            solution = master.solve(_remaining(stop_at))
            feasible = float(solution.slack.max(initial=0.0)) <= tol
            if feasible and master.elastic:
                master.close_elastic()
                solution = master.solve(_remaining(stop_at))
        except _MasterTimeLimit:
            return "time-limit", iteration - 1
        state.slack = solution.slack
        if feasible:
            state.offer(solution, master)
        lam, mu = solution.lam, solution.mu
        threshold = tol * max(1.0, abs(mu) / master.scale) * master.scale
        budget = _exact_budget(overdue, state)
        cols, vals, entering, result, exact_ran = _price_smoothed(
            price_at, price, heuristic, smoother, certificate, lam, mu, threshold, feasible, r, stop_at,
            bound_budget=budget, certified=lambda: feasible and relative_gap(state.lower, certificate.bound) <= gap,
            wanted=_wanted(threshold, state.lower, gap) if feasible else 2 * threshold)
        if exact_ran:
            last_exact, overdue = iteration, False
            # a call cut short by its budget proved little: the next one gets twice as long
            state.bound_budget = 0.0 if state.bound_finished or budget is None else 2.0 * budget
        current = record(iteration)
        if feasible and current <= gap:
            return "optimal", iteration
        if exact_ran and state.bound_finished and feasible:
            finished_gaps.append(current)
        if value_lower_bound is not None and certificate.bound < value_lower_bound:
            raise _infeasible(solution.slack, r, "the Lagrangian bound is below every feasible value")
        primal = None
        if feasible and primal_gate.open(state.lower, certificate.bound) and (solution.pool > 0).any():
            used = np.flatnonzero(solution.pool > 0)  # pool positions: read before a purge moves them
            primal = primal_gate.call(master.take(used), solution.pool[used], state.lower)
        keep = max(PURGE_KEEP, PURGE_ROWS * (r.size + 1))
        if master.size > 2 * keep:
            master.purge(keep)
        chosen = entering[:max_new_columns]
        added = master.add(Columns.from_masks(cols[chosen]), vals[chosen]) if chosen.size else 0
        if primal is not None:
            added += master.add(*primal)
        if added == 0:
            if feasible:
                return ("time-limit" if time.perf_counter() >= stop_at else "stalled"), iteration
            if result is None or not result.exact:
                raise SolverError(
                    "column generation found no column that meets the floors of workers "
                    f"{_names(solution.slack, r)} and its pricing is heuristic, so infeasibility is not proven")
            if penalty >= ceiling:
                raise _infeasible(solution.slack, r, f"exact pricing finds no column that meets them even at "
                                  f"a penalty of {penalty:g} per unit")
            penalty = min(ceiling, penalty * 100)
            state.penalty = penalty
            master.set_big_m(penalty / master.scale)
        if feasible and math.isfinite(current):
            gaps.append(current)
            if tailing_off is not None and stagnating(gaps, tailing_off[0], tailing_off[1]):
                if iteration - last_exact < tailing_off[0] and state.bound_finished and \
                        stagnating(finished_gaps, TAILING_OFF_CALLS, tailing_off[1], current):
                    return "tailing-off", iteration
                # The bound may be stale (no exact call in the window, or the last one cut
                # short), or heuristic iterations were cheap enough to fill the window between
                # two exact calls: finished exact calls must confirm the stagnation first.
                overdue = True
    return "iteration-limit", iteration


class _PrimalGate:
    """Calls ``primal_columns`` while its columns lift the master (:data:`PRIMAL_MIN_SHARE`,
    :data:`PRIMAL_PATIENCE`)."""

    def __init__(self, primal_columns: Callable[[Columns, np.ndarray], tuple[Columns, np.ndarray]] | None):
        self.primal_columns = primal_columns
        self.lower_then = math.nan  # the lower bound when the last columns were added
        self.misses = 0

    def open(self, lower: float, upper: float) -> bool:
        """Whether to call it now, given the bounds after this iteration's master."""
        if self.primal_columns is None:
            return False
        if math.isfinite(self.lower_then):
            closed = lower - self.lower_then
            left = upper - self.lower_then
            self.misses = 0 if closed >= PRIMAL_MIN_SHARE * left else self.misses + 1
            self.lower_then = math.nan
            if self.misses >= PRIMAL_PATIENCE:
                self.primal_columns = None
                return False
        return True

    def call(self, support: Columns, weights: np.ndarray, lower: float) -> tuple[Columns, np.ndarray]:
        assert self.primal_columns is not None
        self.lower_then = lower
        return self.primal_columns(support, weights)


def stagnating(gaps: Sequence[float], window: int, factor: float, current: float | None = None) -> bool:
    """Whether the gap ``current`` (default: the last of ``gaps``) is above ``factor`` times
    the gap ``window`` entries before the last of ``gaps`` (false while there are not so many)."""
    current = gaps[-1] if current is None else current
    return len(gaps) > window and current > factor * gaps[-1 - window]


def _exact_budget(overdue: bool, state: _State) -> float | None:
    """Seconds for an exact pricing call made only for its bound (the heuristic found columns),
    or ``None`` for no such call.

    It is made in every iteration in which exact calls so far took at most a third of
    the time so far, or when the gap stagnates (``overdue``): where exact calls are cheap the
    bound then follows every master (facility location ``n = 200``, ``k = 20``, 40 points:
    optimal in 53 s, against the time limit at 60 s with a gap of 5e-3 when it ran only every
    10th iteration), and where they are dear the one-third share throttles them.  The budget is the largest of
    :data:`MIN_BOUND_SECONDS`, a quarter of the time since the start, **twice the last exact
    call that finished** and twice the budget of a call that was cut short
    (``state.bound_budget``).  Why: a MILP pricing call costs what it costs (facility location
    ``n = 400``, ``k = 40``: 1,000-2,000 nodes, about 26 s CPU) and a call stopped before it
    closes its gap leaves a dual bound no better than the stale one, so a budget tied to the
    loop's own elapsed time (0.25·elapsed, the previous rule) starved every bound call and the
    loop ended ``"tailing-off"`` on the bound of its first exact call.
    """
    elapsed = time.perf_counter() - state.started
    if overdue or state.exact_seconds <= elapsed / 3:
        return max(MIN_BOUND_SECONDS, 0.25 * elapsed, 2.0 * state.last_exact_seconds, state.bound_budget)
    return None


def _price_smoothed(price_at: Callable[..., PricingResult], price: Callable[..., PricingResult],
                    heuristic: Callable[..., PricingResult] | None, smoother: Smoothing,
                    certificate: _Certificate, lam: np.ndarray, mu: float, threshold: float,
                    feasible: bool, r: np.ndarray, stop_at: float, bound_budget: float | None,
                    *, certified: Callable[[], bool], wanted: float,
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, PricingResult, bool]:
    """Price along the mis-pricing schedule ``λ_sep(α_0), λ_sep(α_1), …, λ_out`` and return the
    columns with reduced cost above ``threshold`` at the master's λ (``λ_out``), the last
    result and whether ``price`` itself ran.

    The heuristic walks the whole schedule first (it is cheap); ``price`` walks it only when
    the heuristic found nothing even at ``λ_out``, each call with the target of a column
    worth ``wanted`` at ``λ_out`` (:func:`_wanted`, :func:`_target`).  With a
    ``bound_budget`` (seconds), ``price`` runs once at the first point even when the
    heuristic found columns, so that the certified bound (which only exact calls tighten)
    keeps improving; an oracle with a ``deadline`` attribute is held to the budget for that
    call.  Pricing stops at the time limit and once ``certified()`` (the requested gap is
    proved).
    """
    center = certificate.lam if feasible else None
    alphas = [0.0]
    if center is not None:
        schedule = [smoother.schedule(j) for j in range(MAX_MISPRICES + 2)]
        alphas = sorted({a for a in schedule if a > 0}, reverse=True) + [0.0]
    points = [alpha * center + (1.0 - alpha) * lam if alpha > 0 else lam for alpha in alphas]
    adapted = False

    def over() -> bool:
        return time.perf_counter() >= stop_at or certified()

    def walk(oracle: Callable[..., PricingResult]) -> tuple[np.ndarray, np.ndarray, np.ndarray, PricingResult]:
        nonlocal adapted
        for alpha, point in zip(alphas, points):
            result = price_at(point, oracle, _target(mu, wanted, alpha, certificate))
            cols, vals, entering = _entering(result, lam, mu, threshold)
            if alpha > 0 and not adapted:
                smoother.adapt(center, lam, cols[0] if cols.shape[0] else None, r)
                adapted = True
            if entering.size or over():
                break
        return cols, vals, entering, result

    if heuristic is not None:
        cols, vals, entering, result = walk(heuristic)
        if entering.size and bound_budget is not None:
            bound_call = _within(price, min(stop_at, time.perf_counter() + bound_budget),
                                 lambda: price_at(points[0], price))  # for the bound: no early stop
            exact_cols, exact_vals, _ = _entering(bound_call, lam, mu, threshold)
            cols, vals = np.concatenate([exact_cols, cols]), np.concatenate([exact_vals, vals])
            return cols, vals, np.flatnonzero(vals + cols @ lam - mu > threshold), bound_call, True
        if entering.size or over():
            return cols, vals, entering, result, False
    cols, vals, entering, result = walk(price)
    return cols, vals, entering, result, True


def _within(oracle: object, deadline: float, call: Callable[[], PricingResult]) -> PricingResult:
    """``call()`` with ``oracle.deadline`` (when the oracle has one) moved up to ``deadline``
    (left as it is for an infinite ``deadline``: no time limit)."""
    if not hasattr(oracle, "deadline") or not math.isfinite(deadline):
        return call()
    saved = oracle.deadline
    oracle.deadline = deadline if saved is None else min(saved, deadline)
    try:
        return call()
    finally:
        oracle.deadline = saved


#: share of the requested gap an ``enough`` bound leaves (below 1: the bound is then
#: certainly within the gap after the round-off of ``pricing bound − λ·r``)
ENOUGH_SHARE = 0.9


def certifying_slack(lower: float, gap: float) -> float:
    """``ENOUGH_SHARE·gap·|LB|``: how far above the best value ``LB`` a Lagrangian bound may
    lie and still certify the requested gap (shared by :func:`certifying_pricing_bound` and
    :func:`_wanted`, whose argument needs the two to be the same, and by the floor groups'
    column generation, :func:`fairsched.lp.floor_groups.grouped_column_generation`, which
    calls both)."""
    return ENOUGH_SHARE * gap * max(abs(lower), 1e-12)


def certifying_pricing_bound(lower: float, gap: float, duals: np.ndarray, r: np.ndarray,
                             caps: np.ndarray | None = None) -> float | None:
    """The pricing bound at ``duals`` that certifies the requested ``gap`` against the best
    value ``lower``: ``B − λ·r <= lower + ENOUGH_SHARE·gap·|lower|`` (``None`` while no
    feasible value is known).  An oracle that accepts it may stop once its bound is there."""
    if not math.isfinite(lower):
        return None
    return lower + certifying_slack(lower, gap) + _lp.dual_offset(duals, r, caps)


def _wanted(threshold: float, lower: float, gap: float) -> float:
    """The reduced cost a column is sought with: ``max(2·threshold, ENOUGH_SHARE·gap·|LB|)``.

    A column of smaller reduced cost cannot matter to the requested gap: if none at the
    master's duals has ``f(S) + λ(S) − μ >= δ``, then ``L(λ) <= μ − λ·r + δ = LB + δ`` (LP
    duality of the master), which certifies the gap.  So an exact call told this target ends
    either with a column worth at least ``δ`` or with the proof, instead of stopping at the
    first column that clears μ by a rounding error: near the optimum those add ``1e-6``
    relative or less to the master's value per iteration.
    """
    if not math.isfinite(lower):
        return 2 * threshold
    return max(2 * threshold, certifying_slack(lower, gap))


def _target(mu: float, wanted: float, alpha: float, certificate: _Certificate) -> float:
    """The value at ``λ_sep`` whose attainment proves a column with reduced cost at least
    ``wanted`` at ``λ_out``: ``f(S) + λ_sep(S) <= α·B_in + (1 − α)·(f(S) + λ_out(S))`` with
    ``B_in`` the certified pricing bound at ``λ_in``, so ``α·B_in + (1 − α)·(μ + wanted)``."""
    target = mu + wanted
    return target if alpha <= 0 else alpha * certificate.pricing_bound + (1.0 - alpha) * target


def reduced_costs(result: PricingResult, lam: np.ndarray, mu: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The priced columns as masks (m, n), their values ``f(S)`` and their reduced costs
    ``f(S) + λ(S) − μ`` at the master's duals (λ for the floors, μ for ``Σ p_S = 1``)."""
    lam = np.asarray(lam, dtype=float)
    cols = np.asarray(result.columns, dtype=bool).reshape(-1, lam.size)
    vals = np.asarray(result.values, dtype=float).reshape(-1)
    return cols, vals, vals + cols @ lam - mu


def _entering(result: PricingResult, lam: np.ndarray, mu: float,
              threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(columns, values, indices of those with reduced cost f(S) + λ(S) − μ > threshold)."""
    cols, vals, reduced = reduced_costs(result, lam, mu)
    return cols, vals, np.flatnonzero(reduced > threshold)


def _limited(result: PricingResult, count: int, n: int) -> tuple[Columns, np.ndarray]:
    cols = np.asarray(result.columns, dtype=bool).reshape(-1, n)[:count]
    return Columns.from_masks(cols), np.asarray(result.values, dtype=float).reshape(-1)[:count]


def _remaining(stop_at: float) -> float | None:
    return None if not math.isfinite(stop_at) else max(1e-3, stop_at - time.perf_counter())


def _result(state: _State, certificate: _Certificate, r: np.ndarray, status: str, iteration: int,
            history: list[tuple[int, float, float, int]], all_exact: bool,
            start: float, caps: np.ndarray | None = None, *, gap: float,
            keep_support: bool = True) -> ColumnGenerationResult:
    """Expand the best distribution into its sets and attach the certificate; the status is
    :func:`reported_status` of the gap between them.  Without ``keep_support`` an optimal
    run's sets are not gathered (:func:`column_generation`)."""
    if state.best is None and state.start_weights is None:
        short = state.slack if state.slack is not None else r
        raise SolverError(f"column generation stopped ({status}) before meeting the floors of workers "
                          f"{_names(short, r)}")
    kept = _kept(state, r, caps)
    _, weights, values = kept
    if certificate.lam is not None:
        lam, pricing_bound = certificate.lam, certificate.pricing_bound
    else:
        lam = state.best.lam if state.best is not None else np.zeros(r.size)
        pricing_bound = math.inf

    def bracket(probabilities: np.ndarray, values: np.ndarray) -> tuple[float, float]:
        # the distribution reported, less any negligible weights _kept left out
        lower = min(state.lower, float(probabilities @ values))
        return lower, (max(certificate.bound, lower) if certificate.lam is not None else math.inf)

    lower, upper = bracket(weights / weights.sum(), values)
    if keep_support or reported_status(status, relative_gap(lower, upper), gap)[0] != "optimal":
        # a caller may go on from a run that stopped short: its sets are gathered whatever it asked
        support, probabilities, values = _gathered(kept, r.size)
        lower, upper = bracket(probabilities, values)
    else:
        support, probabilities, values = Columns.empty(r.size), np.zeros(0), np.zeros(0)
    cap_price = None if caps is None else np.clip(-lam, 0.0, None)
    lam = np.clip(lam, 0.0, None)
    lam.setflags(write=False)
    master_lam = master_cap_price = None
    if state.best is not None:
        master_lam = np.clip(state.best.lam, 0.0, None)
        master_lam.setflags(write=False)
        if caps is not None:
            master_cap_price = np.clip(-state.best.lam, 0.0, None)
    probabilities.setflags(write=False)
    current_gap = relative_gap(lower, upper)
    status, why = reported_status(status, current_gap, gap)
    return ColumnGenerationResult(
        value=lower,
        upper_bound=upper,
        gap=current_gap,
        probabilities=probabilities,
        support=support,
        values=values,
        fairness_price=lam,
        pricing_bound=pricing_bound,
        master_fairness_price=master_lam,
        cap_price=cap_price,
        master_cap_price=master_cap_price,
        convexity_dual=state.best.mu if state.best is not None else math.nan,
        iterations=iteration,
        history=history,
        columns=state.pool_size,
        pricing_exact=all_exact,
        big_m=state.penalty,
        status=status,
        success=status == "optimal",
        message=_message(status, all_exact, lower, upper, iteration, why),
        seconds=time.perf_counter() - start,
    )


def _kept(state: _State, r: np.ndarray, caps: np.ndarray | None = None
          ) -> tuple[list[tuple[Columns, np.ndarray]], np.ndarray, np.ndarray]:
    """The sets of the best distribution (the aggregated start column expanded) that are
    reported, as (part, kept indices) pairs, with their weights and values: those of
    negligible weight (:data:`NEGLIGIBLE_WEIGHT`) are left out where the rest still meets the
    floors (and caps)."""
    parts: list[tuple[Columns, np.ndarray, np.ndarray]] = []
    if state.best is None:
        parts.append((state.start_columns, state.start_weights, state.start_values))
    else:
        best = state.best
        if best.aggregate > 0:
            parts.append((state.start_columns, best.aggregate * state.start_weights, state.start_values))
        columns, column_values, column_weights = state.best_support
        parts.append((columns, column_weights, column_values))
    weights_all = np.concatenate([weights for _, weights, _ in parts])
    bounds = np.cumsum([0] + [weights.size for _, weights, _ in parts])
    largest = max(1e-300, float(weights_all.max(initial=0.0)))
    keep = weights_all > 1e-12 * largest
    heavy = weights_all > NEGLIGIBLE_WEIGHT * largest
    if heavy.sum() < keep.sum():
        share = np.where(heavy, weights_all, 0.0) / weights_all[heavy].sum()
        marginals = sum(columns.marginals(share[lo:hi])
                        for (columns, _, _), lo, hi in zip(parts, bounds[:-1], bounds[1:]))
        if (marginals >= r - MASTER_TOLERANCE).all() and (caps is None or (marginals <= caps + MASTER_TOLERANCE).all()):
            keep = heavy
    picks = [np.flatnonzero(keep[lo:hi]) for lo, hi in zip(bounds[:-1], bounds[1:])]
    values_all = np.concatenate([values[index] for (_, _, values), index in zip(parts, picks)])
    return [(part, index) for (part, _, _), index in zip(parts, picks)], weights_all[keep], values_all


def _gathered(kept: tuple[list[tuple[Columns, np.ndarray]], np.ndarray, np.ndarray],
              n: int) -> tuple[Columns, np.ndarray, np.ndarray]:
    """:func:`_kept`'s sets gathered into one array (:meth:`Columns.gather`, never the parts
    joined first) and merged, with their probabilities and values."""
    picks, weights, values = kept
    columns, weights, values = merge_duplicates(Columns.gather(picks, n), weights, values)
    return columns, weights / weights.sum(), values


def merge_duplicates(columns: Columns, weights: np.ndarray,
                      values: np.ndarray) -> tuple[Columns, np.ndarray, np.ndarray]:
    """One entry per distinct set, its weights summed (equal hashes confirmed by the indices)."""
    hashes = columns.hashes()
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    if first.size == len(columns):
        return columns, weights, values
    inverse = inverse.reshape(-1)
    confirmed = np.array([np.array_equal(columns[j], columns[first[inverse[j]]]) for j in range(len(columns))])
    group = np.where(confirmed, first[inverse], np.arange(len(columns)))
    keep, slot = np.unique(group, return_inverse=True)
    return columns.take(keep), np.bincount(slot.reshape(-1), weights=weights), values[keep]


def _check_pool(values: np.ndarray, members: np.ndarray | Columns, r: np.ndarray) -> tuple[np.ndarray, Columns]:
    """Validate the initial pool; return (values float64, Columns)."""
    if isinstance(members, Columns):
        values = np.ascontiguousarray(values, dtype=float)
        if values.ndim != 1 or values.size != len(members):
            raise ValueError(f"values must be 1-D with one entry per column ({len(members)}), got {values.shape}")
        if members.n != r.size:
            raise ValueError(f"r must have shape ({members.n},) (one floor per worker), got {r.shape}")
        if not np.isfinite(values).all():
            raise ValueError("values must be finite")
        if not np.isfinite(r).all() or (r < 0).any():
            raise ValueError("fairness floors r must be finite and >= 0")
        return values, members
    values, masks, _ = _lp.check_lp_inputs(values, members, r)
    return values, Columns.from_masks(masks)


def _check_start(weights: np.ndarray, m: int) -> np.ndarray:
    weights = np.asarray(weights, dtype=float)
    if weights.shape != (m,) or not np.isfinite(weights).all() or (weights < 0).any() or not weights.sum() > 0:
        raise ValueError(f"start_probabilities must be {m} non-negative finite weights with a positive sum")
    return weights / weights.sum()


def _check_options(gap: float, time_limit: float | None, max_iterations: int, max_new_columns: int,
                   tailing_off: tuple[int, float] | None) -> None:
    if not (np.isfinite(gap) and gap >= 0):
        raise ValueError(f"gap must be a number >= 0, got {gap}")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit must be positive seconds, got {time_limit}")
    if max_iterations < 1 or max_new_columns < 1:
        raise ValueError("max_iterations and max_new_columns must be >= 1")
    if tailing_off is not None and not (int(tailing_off[0]) >= 1 and 0 < float(tailing_off[1]) <= 1):
        raise ValueError(f"tailing_off must be (window >= 1, factor in (0, 1]), got {tailing_off}")


def reported_status(status: str, reported_gap: float, gap: float) -> tuple[str, str | None]:
    """The status of a stop and, if it changed, why: ``"optimal"`` only while the gap of the
    numbers reported is within ``gap``.

    The stop is decided on the master's value; the sets gathered for the report (negligible
    weights left out, the aggregated start expanded) may be worth a rounding less, and a
    requested gap of 0 does not allow even that. Such a stop is reported ``"stalled"``."""
    if status == "optimal" and reported_gap > gap:
        return "stalled", (f"the requested gap was reached on the master's value, but the sets reported "
                           f"are worth a rounding less (relative gap {reported_gap:.2g} > {gap:g})")
    return status, None


def _message(status: str, exact: bool, lower: float, upper: float, iterations: int, why: str | None = None) -> str:
    gap = relative_gap(lower, upper)
    why = why or {"optimal": "the requested gap was reached",
                  "stalled": "no column prices out at the master's duals" + (
                      "" if exact else " (the pricing is heuristic)") + " but the gap is above the requested one",
                  "tailing-off": "the gap stopped shrinking (tailing-off)",
                  "iteration-limit": "the iteration limit was reached",
                  "time-limit": "the time limit was reached"}.get(status, status)
    bound = f"certified upper bound {upper:.10g}" if math.isfinite(upper) else "no certified upper bound"
    return (f"column generation stopped after {iterations} iterations because {why}: "
            f"value {lower:.10g}, {bound}, relative gap {gap:.2g}")


def _names(slack: np.ndarray, r: np.ndarray) -> str:
    short = np.flatnonzero(slack > 1e-9)
    return ", ".join(f"{u} (r_{u} = {r[u]:g}, short by {slack[u]:.3g})" for u in short[:10]) + (
        ", ..." if short.size > 10 else "")


def _infeasible(slack: np.ndarray, r: np.ndarray, why: str) -> InfeasibleLPError:
    return InfeasibleLPError(f"the LP is infeasible: the floors of workers {_names(slack, r)} "
                             f"cannot be met jointly ({why})")
