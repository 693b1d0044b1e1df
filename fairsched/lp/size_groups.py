"""Size groups: ``U_opt`` of the accuracy utility from the LP over groups of workers of equal
size with Gale's inequalities, where column generation over every worker's floor tails off.

**Why.**  For ``f(S) = g(L(S))`` (the accuracy utility of Li, Liu and Ji, "Federated
Learning with Fair Worker Selection: A Multi-Round Submodular Maximization Approach") the
continuous relaxation's bound is Jensen's, ``g(L·x*)``, and where the sizes fall into two
classes no distribution reaches it: the sets holding the fractional large workers would
need small members smaller than those with the mass they need.  Column generation over all
``n`` floor rows then keeps Jensen's bound and, at ``n = 10,000``, its starting value: its
master is degenerate, its duals jump between workers.  Two-class draws: ``"tailing-off"`` at
1.46e-5 (``n = 1,000, k = 50``, 35.9 s) and 1.75e-6 (``n = 10,000, k = 100``, 57–68 s)
(``benchmarks/README.md``, "Two size classes").

**The aggregated LP** (constraint aggregation, Elhallaoui, Villeneuve, Soumis and
Desaulniers, "Dynamic aggregation of set-partitioning constraints in column generation",
*Operations Research* 53, 2005).  Workers of equal size are interchangeable in ``f``; summing
the floor rows of each group ``G`` of them gives::

    U_agg = max Σ_S p_S f(S)  s.t.  Σ_S p_S |S ∩ G| >= R_G = Σ_{u∈G} r_u  (every G),
                                    Σ_S p_S = 1,  p >= 0,

a relaxation (``U_agg >= U_opt``) with one row per group; its solution may put equal-size
workers together more often than their own floors allow.  Gale's inequalities
``Σ_S p_S min(|S ∩ G|, j) >= F_G(j)`` (the ``j`` largest floors of ``G``;
:mod:`fairsched.lp.gale`) hold for every real distribution meeting ``r``, and all of them
together say exactly when the members can be placed: added lazily (those the master's
solution violates), the LP stays a relaxation, and a master solution violating none is a
real distribution's value, which :func:`fairsched.lp.gale.realise` writes out.  The duals
(``λ_G`` on the group rows, ``π`` on the cuts) are per-worker prices by floor rank
(:func:`worker_prices`), so ``max_{|S|=k}[f(S) + λ(S)] − λ·r`` is a Lagrangian bound on
``U_opt`` like any other, computed by the exact accuracy pricing.

**The loop** is column generation on that LP, its master one HiGHS model with columns and
cut rows appended (warm-started simplex; ``|S ∩ G|`` and ``min(|S ∩ G|, j)`` as
coefficients), stabilised by Wentges smoothing with the self-adjusting ``α`` of Pessoa,
Sadykov, Uchoa and Vanderbeck, "Automation and combination of linear-programming based
stabilization techniques in column generation" (INFORMS J. Computing, 2018;
:class:`fairsched.solvers.colgen.Smoothing`): pricing at ``α·λ_in + (1 − α)·λ_out``, the
centre ``λ_in`` the prices of the best bound.  Two-class ``n = 10,000, k = 100``, seed 7:
certified 9.998e-7 after 56 iterations and 509 cuts (``benchmarks/README.md``, "Two size
classes: the size groups in ``optimum``").

**Columns besides the pricing's.**  The value side climbs by columns, and two sources are
cheaper than an exact pricing call (about 2 s at ``n = 10,000`` on two-class sizes, half of
them stopped at the branch and bound's budget): *exchange columns* from the master's own
sets (``primal_columns``: :func:`fairsched.lp.pricing.exchange.exchange_columns` pairs the
largest with the smallest and trades members until their sizes meet), and a *quick pricing*
(``quick``: the accuracy pricing without its branch and bound) in every iteration but each
:data:`EXACT_EVERY`-th while exact calls took at most :data:`EXACT_SHARE` of the time, the
exact one otherwise only where the quick one finds no column.  Every
certified ``upper_bound`` counts for the bound, tight or not.  Two-class ``n = 10,000,
k = 100`` seed 8: certified in 4 iterations where the exact pricing alone crawled from
1.50e-6 to 1.27e-6 in 70 (``benchmarks/README.md``, "Two size classes: a faster start,
exchange columns and quick pricing").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from fairsched.lp.floor_groups import group_counts
from fairsched.lp.gale import ranked_members, realise, violated_cuts
from fairsched.solvers import lp as _lp
from fairsched.solvers.colgen import (
    PricingResult,
    Smoothing,
    reduced_costs,
    relative_gap,
    stagnating,
)
from fairsched.solvers.columns import Columns
from fairsched.solvers.errors import SolverError

Progress = Callable[[int, float, float, float], None]

#: ``(window, factor)``: stop when the gap to the best value shrank by less than a factor ``factor`` in
#: ``window`` iterations (two-class ``n = 10,000``: at 0.95 the loop stopped at a gap of 1.0002e-6,
#: still shrinking by 4.8% every 40 iterations)
TAILING_OFF = (40, 0.98)
#: stop when the gap did not shrink at all in this many iterations: where the phase finds
#: nothing, it costs little (both rules wait ``patience`` seconds)
NO_PROGRESS = 10
#: with a quick pricing, the exact one prices every this many iterations (and wherever the quick
#: one finds no column) ...
EXACT_EVERY = 5
#: ... while the exact calls so far took at most this share of the loop's time.  Two-class
#: ``n = 10,000, k = 100`` seed 7: the bound never moved from column generation's certificate
#: while exact calls (about 2 s each, half stopped at their budget) took 30–40 % of the loop;
#: with the share, 71.4 and 71.2 s against 92.1 and 91.8 s (alternating), seed 9 67.1 s against
#: 88.8 s, ``n = 1,000, k = 20`` 32.5 s against 65.3 s; where the bound comes down level
#: (``n = 2,000`` seed 8 80.1 s against 80.3 s, ``n = 1,000, k = 50`` 55.8 s against 51.1 s)
EXACT_SHARE = 0.15
#: iterations at most
MAX_ITERATIONS = 2_000
#: reduced cost a column needs to enter, relative to ``max(1, |U|)``
ENTER_TOLERANCE = 1e-12
#: HiGHS's primal and dual feasibility tolerance in the aggregated master (the floors of a
#: realised distribution are checked to 1e-9)
FEASIBILITY_TOLERANCE = 1e-10
#: the aggregated master's working set is cut back to ``max(WORKING_COLUMNS[0],
#: WORKING_COLUMNS[1]·rows)`` columns whenever it holds twice as many (:class:`_AggregatedMaster`)
WORKING_COLUMNS = (1_000, 2.0)
#: pool columns that join the working set per sifting round, as a share of its rows
SIFT_BATCH = 0.5


def size_groups(sizes: np.ndarray, priced: np.ndarray) -> np.ndarray:
    """Group ids ``0..G−1``: the workers in ``priced`` share a group with the others of their
    size; every other worker is alone (summing the rows of workers whose floor the
    relaxation does not price could drop floors that bind)."""
    sizes = np.asarray(sizes, dtype=float)
    n = sizes.size
    _, groups = np.unique(np.where(priced, sizes, -1.0 - np.arange(n)), return_inverse=True)
    return groups.ravel().astype(np.int64)


@dataclass(frozen=True)
class SizeGroupBound:
    """What :func:`size_group_bound` reached.

    ``prices`` (n,) are the per-worker prices of the best bound, ``pricing_bound`` the exact
    pricing's ``max_S f(S) + λ(S)`` at them and ``bound = pricing_bound − λ·r`` (``None``,
    ``inf`` and ``inf`` when no call improved on the centre's); ``support``,
    ``probabilities`` and ``value`` the best distribution over actual sets meeting every floor that the loop found (a restricted
    master meeting all of Gale's inequalities, realised by :func:`fairsched.lp.gale.realise`;
    ``None``, ``None`` and ``-inf`` when none beat ``lower``); ``status`` one of
    ``"certified"`` (``bound`` within ``gap`` of the best value), ``"converged"``,
    ``"tailing-off"``, ``"time-limit"``, ``"iteration-limit"``; ``cuts`` the number of Gale
    inequalities added.
    """

    prices: np.ndarray | None
    pricing_bound: float
    bound: float
    status: str
    iterations: int
    support: Columns | None = None
    probabilities: np.ndarray | None = None
    value: float = -math.inf
    cuts: int = 0


class _AggregatedMaster:
    """``max Σ p_S f(S)  s.t.  Σ p_S |S ∩ G| >= R_G,  Σ p_S = 1,  Σ p_S min(|S ∩ G|, j) >=
    F_G(j)`` (the Gale inequalities added so far), ``p >= 0``, over every set added (the
    *pool*), solved by sifting: HiGHS holds a working subset of the pool's columns, and after
    each of its optima the pool's other columns are priced at its duals; those with a positive
    reduced cost join it and it is solved again, so the optimum is the whole pool's.

    **Why.**  Every simplex iteration prices every column HiGHS holds, and a column has a
    coefficient in every Gale row of the groups it touches: on two-class sizes (``n = 1,000,
    k = 50``, seed 7) a master of all 8,500 sets took 300–700 µs a simplex iteration and 31.7
    of a 58.6 s solve, while about 320 columns were basic.  The working set is cut back to the
    basic columns, the held ones (:meth:`hold`: a distribution meeting every floor, so that it
    stays feasible whatever Gale cuts follow) and those of highest reduced cost whenever it
    holds more than twice ``max(WORKING_COLUMNS[0], WORKING_COLUMNS[1]·rows)``.  Unlike a
    purge of the master, no set is lost: the pool keeps every column as a cut of the dual, and
    the master's optimum stays the same LP's.  Two-class ``n = 1,000, k = 50`` seeds 7 and 8:
    the master's time 19.3 and 16.4 s against 52.5 and 37.2 s, the solves 45.0 and 44.2 s
    against 93.9 and 69.7 s (``benchmarks/README.md``, "Two size classes: the aggregated
    master by sifting").
    """

    def __init__(self, need: np.ndarray, n: int):
        self.groups = need.size
        self.n = n
        # the pool's sets and group counts, joined, and the batches added since they were joined
        self._sets, self._pending_sets = Columns.empty(n), []
        self._counts, self._pending_counts = sp.csr_array((0, self.groups)), []
        self._counts_csc: sp.csc_array | None = None
        self.values = np.zeros(0)
        self.working = np.zeros(0, dtype=np.int64)  # the pool positions HiGHS holds, in its order
        self.held = np.zeros(0, dtype=np.int64)  # pool positions never dropped from it (:meth:`hold`)
        self.cut_group = np.zeros(0, dtype=np.int64)
        self.cut_size = np.zeros(0, dtype=np.int64)
        self.known: set[tuple[int, int]] = set()
        self.weights = np.zeros(0)  # the last optimum's, over the pool
        self.h = _lp.new_highs()
        # tight tolerances: a solution meeting Gale's rows only to HiGHS's default 1e-7 would
        # not be realised within the 1e-9 the floors are checked to
        for name, value in (("solver", "simplex"), ("presolve", "off"),
                            ("primal_feasibility_tolerance", FEASIBILITY_TOLERANCE),
                            ("dual_feasibility_tolerance", FEASIBILITY_TOLERANCE)):
            _lp.set_option(self.h, name, value)
        status = self.h.passModel(
            0, self.groups + 1, 0, int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMaximize), 0.0,
            np.zeros(0), np.zeros(0), np.zeros(0),
            np.append(need, 1.0), np.append(np.full(self.groups, highspy.kHighsInf), 1.0),
            np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0), np.zeros(0, dtype=np.int32))
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected the aggregated master LP")

    @property
    def size(self) -> int:
        """Columns in the pool."""
        return int(self.values.size)

    def counts(self) -> sp.csc_array:
        """``|S ∩ G|`` of every pool column (rows) and group (columns)."""
        if self._counts_csc is None:
            self._counts_csc = self._count_rows().tocsc()
        return self._counts_csc

    def _count_rows(self) -> sp.csr_array:
        """:meth:`counts` by rows: the batches added since the last call joined to the rest once."""
        if self._pending_counts:
            self._counts = sp.vstack([self._counts, *self._pending_counts], format="csr")
            self._pending_counts.clear()
        return self._counts

    def _outside(self) -> np.ndarray:
        """Which pool columns HiGHS's working set does not hold (a mask over the pool)."""
        outside = np.ones(self.size, dtype=bool)
        outside[self.working] = False
        return outside

    def _cut_coefficients(self, counts: sp.sparray, group: np.ndarray | None = None,
                          size: np.ndarray | None = None) -> sp.csc_array:
        """``min(|S ∩ G|, j)`` of each column (rows of ``counts``) for each cut ``(G, j)``
        (default: every cut so far), sparse."""
        group = self.cut_group if group is None else group
        size = self.cut_size if size is None else size
        by_group = counts.tocsc()
        lo, hi = by_group.indptr[group], by_group.indptr[group + 1]
        spans = hi - lo
        take = np.repeat(lo - np.cumsum(spans) + spans, spans) + np.arange(int(spans.sum()))
        data = np.minimum(by_group.data[take], np.repeat(size, spans))
        indptr = np.concatenate([[0], np.cumsum(spans)])
        return sp.csc_array((data.astype(float), by_group.indices[take], indptr), shape=(counts.shape[0], group.size))

    def _load(self, positions: np.ndarray) -> None:
        """Hand the pool's columns at ``positions`` to HiGHS (appended to its working set)."""
        if positions.size == 0:
            return
        counts = self._count_rows()[positions]
        m = positions.size
        blocks = [counts, sp.csr_array(np.ones((m, 1)))]
        if self.cut_group.size:
            blocks.append(self._cut_coefficients(counts).tocsr())
        matrix = sp.hstack(blocks, format="csr")
        status = self.h.addCols(m, np.ascontiguousarray(self.values[positions]), np.zeros(m),
                                np.full(m, highspy.kHighsInf), matrix.nnz, matrix.indptr[:-1].astype(np.int32),
                                matrix.indices.astype(np.int32), matrix.data.astype(float))
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected new columns of the aggregated master")
        self.working = np.concatenate([self.working, positions])

    def add(self, columns: Columns, counts: sp.csr_array, values: np.ndarray) -> None:
        """``columns`` with their group counts ``counts`` (one row per column) and values
        ``f(S)``: into the pool and HiGHS's working set."""
        m = counts.shape[0]
        if m == 0:
            return
        first = self.size
        self._pending_sets.append(columns)
        self._pending_counts.append(counts.tocsr())
        self.values = np.concatenate([self.values, np.asarray(values, dtype=float)])
        self._counts_csc = None
        self._load(np.arange(first, first + m))

    def add_cuts(self, cuts: list[tuple[int, int, float]]) -> None:
        """Gale's inequalities ``(G, j, F_G(j))`` as rows over HiGHS's working set (the pool's
        other columns get their coefficients when they join it)."""
        group = np.array([g for g, _, _ in cuts], dtype=np.int64)
        size = np.array([j for _, j, _ in cuts], dtype=np.int64)
        rows = self._cut_coefficients(self._count_rows()[self.working], group, size).T.tocsr()
        status = self.h.addRows(len(cuts), np.array([f for _, _, f in cuts]), np.full(len(cuts), highspy.kHighsInf),
                                rows.nnz, rows.indptr[:-1].astype(np.int32), rows.indices.astype(np.int32),
                                rows.data.astype(float))
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected Gale's cuts in the aggregated master")
        self.cut_group = np.concatenate([self.cut_group, group])
        self.cut_size = np.concatenate([self.cut_size, size])
        self.known.update(zip(group.tolist(), size.tolist()))

    def column_rewards(self, counts: sp.csr_array, lam: np.ndarray, pi: np.ndarray) -> np.ndarray:
        """The dual value of columns: ``λ_G·|S ∩ G| + Σ_cuts π·min(|S ∩ G|, j)``, read from one
        table of ``G`` by ``|S ∩ G|`` (a sum over each column's groups: ``O(nnz)``)."""
        counts = counts.tocsr()
        top = int(counts.data.max(initial=0))
        level = np.arange(top + 1)
        table = np.asarray(lam, dtype=float)[:, None] * level[None, :]
        if self.cut_group.size:
            np.add.at(table, self.cut_group,
                      np.asarray(pi, dtype=float)[:, None] * np.minimum(level[None, :], self.cut_size[:, None]))
        rows = np.repeat(np.arange(counts.shape[0]), np.diff(counts.indptr))
        return np.bincount(rows, weights=table[counts.indices, counts.data.astype(np.int64)],
                           minlength=counts.shape[0])

    def _run(self, time_limit: float | None) -> highspy.HighsModelStatus:
        """One HiGHS run within ``time_limit`` seconds: its model status."""
        _lp.set_time_limit(self.h, time_limit)
        self.h.run()
        return self.h.getModelStatus()

    def _solve_working(self, time_limit: float | None) -> bool:
        """Solve HiGHS's working set to optimality (``False`` at ``time_limit``).  Where the
        warm-started simplex ends neither optimal nor at the time limit, it is run once more
        from scratch (with every pool column, where the working set was infeasible): at
        ``n = 10,000`` (two-class, seed 7) HiGHS once ended a re-solve "Unknown" and the
        whole phase was lost."""
        started = time.perf_counter()
        status = self._run(time_limit)
        if status not in (highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit):
            left = None if time_limit is None else time_limit - (time.perf_counter() - started)
            if left is not None and left <= 0:
                return False
            if status in (highspy.HighsModelStatus.kInfeasible,  # the held columns should prevent it
                          highspy.HighsModelStatus.kUnboundedOrInfeasible):  # (p is bounded)
                self._load(np.flatnonzero(self._outside()))
            self.h.clearSolver()
            status = self._run(left)
        if status == highspy.HighsModelStatus.kTimeLimit:
            return False
        if status != highspy.HighsModelStatus.kOptimal:
            raise SolverError(f"HiGHS did not solve the aggregated master "
                              f"(status: {self.h.modelStatusToString(status)})")
        return True

    def solve(self, time_limit: float | None) -> tuple[float, np.ndarray, float, np.ndarray] | None:
        """``(value, λ_G, μ, π)`` of the pool's optimum (``π`` the cuts' prices); ``None`` at
        ``time_limit``.  Sifting (class docstring): the working set is solved, the pool's
        other columns priced at its duals, the best :data:`SIFT_BATCH` (rows times) of those
        with a reduced cost above HiGHS's dual feasibility tolerance join it, until none has
        one; then the working set is cut back where it outgrew :data:`WORKING_COLUMNS`."""
        started = time.perf_counter()
        while True:
            left = None if time_limit is None else time_limit - (time.perf_counter() - started)
            if not self._solve_working(left):
                return None
            solution = self.h.getSolution()
            row_dual = np.asarray(solution.row_dual)
            g = self.groups
            lam, mu, pi = (np.clip(-row_dual[:g], 0.0, None), float(row_dual[g]),
                           np.clip(-row_dual[g + 1:], 0.0, None))
            reduced = self.values + self.column_rewards(self._count_rows(), lam, pi) - mu
            tol = FEASIBILITY_TOLERANCE * max(1.0, abs(mu))
            priced = np.flatnonzero(self._outside() & (reduced > tol))
            if priced.size == 0:
                break
            batch = max(1, int(SIFT_BATCH * self.h.getNumRow()))
            self._load(priced[np.argsort(-reduced[priced], kind="stable")[:batch]])
        self.weights = np.zeros(self.size)
        self.weights[self.working] = np.asarray(solution.col_value, dtype=float)
        value = float(self.h.getInfo().objective_function_value)
        self._shrink(reduced)
        return value, lam, mu, pi

    def hold(self, positions: np.ndarray) -> None:
        """Keep the pool's columns at ``positions`` in HiGHS's working set from now on (in place
        of those held before): the support of a distribution meeting every floor, which meets
        every Gale inequality, so that the working set stays feasible whatever cuts follow."""
        self.held = np.asarray(positions, dtype=np.int64)

    def _shrink(self, reduced: np.ndarray) -> None:
        """Drop from HiGHS's working set, where it holds more than twice
        ``max(WORKING_COLUMNS[0], WORKING_COLUMNS[1]·rows)`` columns, all but that many: the
        basic ones, the held ones (:meth:`hold`) and the others of highest reduced cost stay.
        Deleting non-basic columns keeps HiGHS's basis, hence its warm start; the dropped ones
        stay in the pool."""
        keep = max(WORKING_COLUMNS[0], int(WORKING_COLUMNS[1] * self.h.getNumRow()))
        if self.working.size <= 2 * keep:
            return
        basis = self.h.getBasis()
        if not basis.valid:
            return
        basic = np.fromiter((s == highspy.HighsBasisStatus.kBasic for s in basis.col_status), dtype=bool,
                            count=self.working.size)
        kept = basic | np.isin(self.working, self.held)
        order = np.argsort(-np.where(kept, np.inf, reduced[self.working]), kind="stable")
        drop = np.sort(order[keep:])
        drop = drop[~kept[drop]]
        if drop.size == 0:
            return
        self.h.deleteCols(drop.size, drop.astype(np.int32))
        self.working = np.delete(self.working, drop)

    def columns(self, index: np.ndarray) -> Columns:
        """The pool's columns at positions ``index`` (the batches added since the last call
        joined to the rest once: the exchange columns ask each iteration)."""
        if self._pending_sets:
            self._sets = Columns.concatenate([self._sets, *self._pending_sets], self.n)
            self._pending_sets.clear()
        return self._sets.take(index)


def worker_prices(lam: np.ndarray, pi: np.ndarray, cut_group: np.ndarray, cut_size: np.ndarray,
                  groups: np.ndarray, order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per-worker prices of the aggregated master's duals: ``λ_G`` plus, for each cut ``(G, j)``,
    its price ``π`` on the ``j`` members of ``G`` with the largest floors.  A set holding ``c``
    members of ``G`` earns at most ``λ_G·c + Σ π·min(c, j)`` from them (exactly that with the
    ``c`` of largest floor), and ``Σ_u λ_u r_u = λ·R + π·F``, so the Lagrangian bound at these
    prices is that of the master's LP."""
    ranked = np.asarray(lam, dtype=float)[groups][order]
    for g, j, price in zip(cut_group, cut_size, pi):
        if price > 0:
            ranked[starts[g]:starts[g] + j] += price
    prices = np.empty_like(ranked)
    prices[order] = ranked
    return prices


def _entering(reduced: np.ndarray, hashes: list[int], seen: set[int], tol: float) -> np.ndarray:
    """Positions of the sets to enter the master, best reduced cost first: reduced cost above
    ``tol``, not in the master yet (``seen`` holds its sets' hashes) and distinct."""
    fresh: dict[int, int] = {}
    for j in np.argsort(-reduced, kind="stable").tolist():
        if reduced[j] > tol and hashes[j] not in seen and hashes[j] not in fresh:
            fresh[hashes[j]] = j
    return np.fromiter(fresh.values(), dtype=np.int64, count=len(fresh))


def size_group_bound(price: Callable[[np.ndarray], PricingResult], r: np.ndarray, groups: np.ndarray,
                     columns: Columns, values: np.ndarray, *, centre: np.ndarray, centre_pricing_bound: float,
                     lower: float, gap: float, deadline: float | None = None,
                     patience: float | None = None, progress: Progress | None = None,
                     first_iteration: int = 0, max_iterations: int = MAX_ITERATIONS,
                     primal_columns: Callable[[Columns, np.ndarray], tuple[Columns, np.ndarray]] | None = None,
                     quick: Callable[[np.ndarray], PricingResult] | None = None) -> SizeGroupBound:
    """Column generation on the LP over groups of equal size with Gale's inequalities (module
    docstring) from the sets ``columns`` (worth ``values``; they must meet every group's sum
    ``R_G``, as the sets of a distribution meeting ``r`` do), for the lowest Lagrangian bound
    it can price and the best distribution it can realise.

    ``price`` is an exact pricing (``upper_bound`` its maximum); ``centre`` (n,) prices (e.g.
    the continuous relaxation's) with their known pricing bound ``centre_pricing_bound`` start
    the smoothing; ``lower`` is the value of a distribution already known.  After each master
    solve the violated Gale inequalities are added and the master solved again; once none is
    violated the master's value is a real distribution's, which raises the lower bound.  It
    stops ``"certified"`` once the bound is within ``gap`` of the best value, ``"converged"``
    when no column prices out at the master's own prices, ``"tailing-off"`` when that gap
    shrank by less than a factor ``TAILING_OFF[1]`` in ``TAILING_OFF[0]`` iterations or did
    not shrink at all in the first :data:`NO_PROGRESS` iterations, either only once
    ``patience`` seconds have passed (its first iterations may only raise the value, the
    bound moving later: two-class ``n = 2,000``, ``k = 50``, seed 8, from an early hand-over,
    the bound stood for 50 iterations, then certified after 204), at ``deadline`` (a
    ``time.perf_counter()`` value) or after ``max_iterations``.
    ``progress(iteration, lower, upper, gap)`` follows every iteration, numbered from
    ``first_iteration + 1``.  ``primal_columns(support, weights)`` (optional) gives more sets
    and their values from the master's distribution each iteration, and ``quick`` (optional)
    a cheaper pricing for the iterations between exact ones (module docstring); the entering
    sets of both are those with a positive reduced cost in the aggregated master.
    """
    began = time.perf_counter()
    r = np.asarray(r, dtype=float)
    groups = np.asarray(groups, dtype=np.int64)
    count = int(groups.max()) + 1
    need = np.bincount(groups, weights=r, minlength=count)
    ranked = ranked_members(groups, r)
    order, starts, _ = ranked
    master = _AggregatedMaster(need, r.size)
    master.add(columns, group_counts(columns, groups, count), np.asarray(values, dtype=float))
    master.hold(np.arange(master.size))  # a distribution over them meets every floor
    seen = set(columns.hashes().tolist())
    smoother = Smoothing("auto")
    best_prices, best_pricing = np.asarray(centre, dtype=float), float(centre_pricing_bound)
    best_bound = best_pricing - float(best_prices @ r)
    improved = False
    realised_value, snapshot = -math.inf, None
    gaps = [relative_gap(lower, best_bound)]
    status, iteration = "iteration-limit", 0

    exact_seconds = [0.0]  # spent in the exact pricing

    def exact(lam: np.ndarray) -> PricingResult:
        """``price``, its time added to ``exact_seconds``."""
        timed = time.perf_counter()
        try:
            return price(lam)
        finally:
            exact_seconds[0] += time.perf_counter() - timed

    def left() -> float | None:
        return None if deadline is None else deadline - time.perf_counter()

    while iteration < max_iterations:
        if deadline is not None and left() <= 0:
            status = "time-limit"
            break
        solved = master.solve(left())
        if solved is None:
            status = "time-limit"
            break
        value, lam_g, mu, pi = solved
        cuts = violated_cuts(master.counts(), master.weights, groups, r, master.known, ranked)
        if cuts:
            master.add_cuts(cuts)
            continue
        if value > realised_value:  # every Gale inequality holds: a real distribution's value
            realised_value, snapshot = value, master.weights.copy()
            master.hold(np.flatnonzero(snapshot > 0))
        known = max(lower, realised_value)
        iteration += 1
        tol = ENTER_TOLERANCE * max(1.0, abs(value))
        out = worker_prices(lam_g, pi, master.cut_group, master.cut_size, groups, order, starts)

        def candidates(sets: Columns, set_values: np.ndarray) -> tuple[sp.csr_array, list[int], np.ndarray]:
            """Group counts and hashes of ``sets``, and which of them enter (:func:`_entering`
            on their reduced cost in this master)."""
            set_counts = group_counts(sets, groups, count)
            reduced = set_values + master.column_rewards(set_counts, lam_g, pi) - mu
            set_hashes = sets.hashes().tolist()
            return set_counts, set_hashes, _entering(reduced, set_hashes, seen, tol)
        misprices = 0
        due = iteration % EXACT_EVERY == 0 and exact_seconds[0] <= EXACT_SHARE * (time.perf_counter() - began)
        oracles = (exact,) if quick is None or due else (quick, exact)
        while True:
            alpha = smoother.schedule(misprices)
            separation = alpha * best_prices + (1.0 - alpha) * out
            for oracle in oracles:  # the exact pricing where the quick one finds no column
                found = oracle(separation)
                if math.isfinite(found.upper_bound):  # certified, if not always tight
                    bound = float(found.upper_bound) - float(separation @ r)
                    if bound < best_bound:
                        best_prices, best_pricing, best_bound, improved = separation, float(found.upper_bound), bound, True
                masks, found_values, objective = reduced_costs(found, separation, 0.0)
                if masks.shape[0]:
                    smoother.adapt(best_prices, out, masks[int(np.argmax(objective))].astype(float), r)
                priced = Columns.from_masks(masks)
                counts, hashes, entering = candidates(priced, found_values)
                if entering.size:
                    break
            if entering.size or alpha == 0.0:
                break
            misprices += 1
        current = relative_gap(known, best_bound)
        gaps.append(current)
        if progress is not None:
            progress(first_iteration + iteration, known, best_bound, current)
        if current <= gap:
            status = "certified"
            break
        if entering.size == 0:
            status = "converged"
            break
        waited = patience is None or time.perf_counter() - began >= patience
        stuck = current >= gaps[0] and iteration >= NO_PROGRESS
        if waited and (stagnating(gaps, *TAILING_OFF) or stuck):
            status = "tailing-off"
            break
        seen.update(hashes[j] for j in entering)
        master.add(priced.take(entering), counts[entering], found_values[entering])
        if primal_columns is not None:
            used = np.flatnonzero(master.weights > 0)
            traded, traded_values = primal_columns(master.columns(used), master.weights[used])
            if len(traded):
                traded_counts, traded_hashes, keep = candidates(traded, traded_values)
                seen.update(traded_hashes[j] for j in keep)
                master.add(traded.take(keep), traded_counts[keep], traded_values[keep])
    support, probabilities, realised = None, None, -math.inf
    if snapshot is not None and realised_value > lower:
        made = realise(master.columns(np.arange(snapshot.size)), snapshot / snapshot.sum(), groups, r)
        if made is not None:
            support, probabilities = made
            realised = realised_value
    return SizeGroupBound(prices=best_prices if improved else None,
                          pricing_bound=best_pricing if improved else math.inf,
                          bound=best_bound if improved else math.inf, status=status,
                          iterations=iteration, support=support,
                          probabilities=probabilities, value=realised, cuts=int(master.cut_group.size))
