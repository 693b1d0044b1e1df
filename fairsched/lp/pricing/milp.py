"""Exact pricing by one mixed-integer programme in HiGHS, assembled from the utility's terms.

The model has binary ``x_u`` (worker ``u`` in ``S``) with ``Σ x = k`` and, per term of the
utility (:mod:`fairsched.lp.pricing.terms`: modular, coverage, facility location, concave
of modular, accuracy curves), the term's own continuous variables and rows; the objective
is ``Σ_terms weight·term + λ·x``.  It is built once; each call changes the costs of ``x``
to ``c_u + λ_u`` and re-solves, with the best heuristic set as a MIP start.  Before the MILP,
an iterated local search (:meth:`~fairsched.lp.pricing.greedy.GreedyPricing.perturbed`, at most
:data:`PERTURBATION_SHARE` of the call's time budget, or without one
:data:`PERTURBATION_VS_MILP` times the longest MILP solve's so far) improves that set; when it
reaches the requested target the call returns without the MILP.  With a target the search
goes on past its rounds until :data:`TARGET_SEARCH_VS_MILP` times the longest MILP solve so
far has passed in the call: a call that certifies pays that for nothing, but where the MILP
would find a column only after thousands of nodes the search, from the same start, often
finds it within a few thousand rounds (facility location ``n = 400``, seed 1: three calls
whose columns took HiGHS 21–44 s; ``python benchmarks/bench_target_search.py`` and
``benchmarks/README.md``, "A longer search before a targeted MILP", which also says how
little the end-to-end runs can tell).

Some terms are **outer approximations** refined by cutting planes: every row they add
over-estimates the term on the integer points (tangents of a concave curve, Benders cuts
of a facility-location point), so the MILP optimum is an upper bound on the pricing
problem.  Each call runs a cut loop (Kelley 1960; for Benders cuts, Benders 1962): the
LP relaxation is cut at its optimum for a few rounds, then the MILP is solved, the
incumbent's true value ``f(x̂) + λ(x̂)`` is computed, and if the MILP over-estimates it
the terms add the rows that are tight at ``x̂`` and the MILP is solved again, until the
incumbent's true value meets the MILP's dual bound within the MIP gap.  The loop ends:
a round either adds a row that is tight at a ``k``-set where the model was not tight
(finitely many), or the incumbent's value is the model's.  Each round starts its branch and
bound again from the root, since HiGHS takes no rows during one (1.16 declares a
lazy-constraint callback type that its branch and bound never calls; pinned by
``tests/test_solvers.py``); on facility location ``n = 400`` (seed 0) three of the certifying
call's four rounds ended at a set over-estimated at a single point, 42 of its 79–85 s
(``python benchmarks/bench_certifying_call.py --seed 0 --rounds``).

**Cut pool.**  Cuts are valid for every λ, so they may be kept across calls (later calls
then need fewer rounds), but every row slows every LP of every branch and bound.  Measured
on concave log1p (``python benchmarks/bench_cut_pool.py concave-log1p 60``: the last exact
call of a 60 s run, made at 53.5 s, replayed on fresh models): with all 8,933 cuts of an
untrimmed pool (10,184 rows, 70 ms per node) it did not certify in the 66.5 s left to the
120 s limit; with the 2,928 cuts used since the call before (4,179 rows, 31 ms per node) it
certified in 49.4 s; with none (1,251 rows) it needed 8 cut-loop rounds and hit the limit
too.  So :class:`MilpModel` keeps the rows added after the build in a pool, marks the cuts
binding at the optimum of each LP relaxation and at each MILP incumbent, and at the start
of each call that follows a solve trims the pool to :data:`CUT_POOL_ROWS` by deleting the
cuts not used since the last such call, least recently used first; a deleted cut is added
again when a later call needs it.  Keeping only the cuts used in the call before (a limit
of 0) was a little faster on log1p but lost the coverage + facility-location mixture (6.32e-3
at the 120 s limit in one of two runs), whose pool stays near 500 rows and whose Benders cuts
cost cut-loop rounds to find again (``benchmarks/README.md``, "Cut pool").
Deleting only between calls keeps the cut loop finite.

The certified upper bound is the smallest **dual** bound (``mip_dual_bound``) of the rounds,
each a relaxation of the pricing problem, and the heuristic's bound; ``exact`` means the
best set returned attains it within twice the relative MIP gap.  Column generation passes
``enough``, the pricing bound that already certifies its requested gap.  Only sets worth
more than ``enough`` can matter then (if there is none, a bound at or below it is the
answer), so it serves twice:

- as HiGHS's **cutoff** (its ``objective_bound``, negated since HiGHS minimises
  internally): a node whose bound is at most ``enough`` is pruned, where the incumbent (the
  heuristic's best set, below ``enough``) would have kept it open.  The bound reported is
  then ``max(dual bound, enough)``, since HiGHS's dual bound covers only the nodes it kept
  (it even reports a start below the cutoff as optimal), and ``enough`` itself when every
  node was cut off (HiGHS's status is then "infeasible").  HiGHS documents the option as a
  termination bound of its dual simplex too, so it is reset after the branch and bound:
  the LP relaxations need their optimum.
- as an interrupt: a callback stops the branch and bound once the dual bound is there, in
  any round of the cut loop (every round's model over-estimates, so its dual bound is
  valid), instead of closing the MIP gap to ``rel_gap``.

A ``target`` below ``enough`` still ends the call at the first set worth it that HiGHS
meets.  On the coverage + facility-location mixture (``benchmarks/README.md``, "The
certifying bound as a cutoff") the cutoff took the generator's seeds 0–4 from 84.3 ± 3.5 s
to 72.7 ± 2.4 s (each seed faster, by 5–22 %); one facility-location ``n = 400`` call,
replayed on fresh models, found its column in 91.7 s and 22,806 nodes against 99.3 s and
26,607 nodes (``python benchmarks/bench_cutoff.py facility-location 120 400``).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Hashable, Iterator, Sequence

import highspy
import numpy as np
import scipy.sparse as sp

from fairsched.lp.pricing import greedy
from fairsched.lp.pricing.base import PricingOracle, bound_under_cutoff, is_tight, ranked
from fairsched.lp.pricing.greedy import GreedyPricing
from fairsched.solvers.colgen import PricingResult
from fairsched.solvers.lp import new_highs, set_option
from fairsched.utilities.base import SetFunction

#: relative MIP gap HiGHS is asked to close
MIP_REL_GAP = 1e-9
#: HiGHS options for these models.  The sub-MIP heuristics (RINS, RENS) and strong
#: branching took most of the time on the coverage and facility-location pricing models
#: (measured at n = 200 to 1000: 2-6x faster without them); the MIP start comes from
#: greedy and local search instead.
HIGHS_OPTIONS: dict[str, object] = {
    "mip_heuristic_run_rins": False,
    "mip_heuristic_run_rens": False,
    "mip_pscost_minreliable": 0,
    "mip_abs_gap": 1e-12,
    # the default 1e-6 lets a cut be violated by as much, which then shows as a gap
    "mip_feasibility_tolerance": 1e-9,
    "primal_feasibility_tolerance": 1e-9,
}
#: cut rounds on the LP relaxation before the MILP, per call
LP_CUT_ROUNDS = 30
#: MILP solves per call (each after adding the rows tight at the last incumbent)
MILP_ROUNDS = 100
#: integer solutions HiGHS reports during one solve that are kept for cuts and columns
COLLECTED_SOLUTIONS = 200
#: share of a call's time budget the iterated local search before the MILP may use
PERTURBATION_SHARE = 0.2
#: without a deadline, at most this multiple of the longest MILP solve's seconds so far (none
#: before the first), so that where the MILP is cheap the search costs as little (the pricing
#: and column-generation tests: 135 s with 300 rounds per call, 29.9 s so, 26.2 s without).
#: With a deadline only the share applies: tying it to the MILP there starved the search
#: (concave log1p at 120 s: gap 6.7e-3 against 6.7e-4, back to back under load)
PERTURBATION_VS_MILP = 0.5
#: with a ``target``, the search goes on past its rounds until this multiple of the longest MILP
#: solve's seconds so far has passed in the call (within the share above)
TARGET_SEARCH_VS_MILP = 0.25
#: local-search restarts of the heuristic per call, from the remembered sets that score best
#: under the new λ (:class:`~fairsched.lp.pricing.greedy.GreedyPricing`); the MILP's own sets
#: are remembered too.  Near the LP optimum the best set often lies many swaps away from the
#: greedy set (concave sqrt, ``benchmarks/bench_pricing.py``: 8 of 10 members differ), where
#: only a start near it finds it; ``benchmarks/README.md``, "Restarts from the exact columns"
HEURISTIC_RESTARTS = 30
#: ... beyond the first three, for at most this multiple of the longest MILP solve's seconds so
#: far per call: where the MILP is cheap the restarts would cost more than they save
#: (coverage ``n = 1,000``: 37.1 s with all 30 against 7.1 s with 3)
RESTARTS_VS_MILP = 0.1
#: a cut counts as binding at a solution when its slack is at most this (relative to its bound)
BINDING_TOLERANCE = 1e-7
#: rows the cut pool may keep across calls; beyond them the idle cuts are dropped, least
#: recently used first (module docstring, "Cut pool")
CUT_POOL_ROWS = 1000

SwapDeltas = Callable[[SetFunction, np.ndarray], np.ndarray]


class MilpModel:
    """A HiGHS maximisation model: ``x`` (columns ``0..n-1``, binary), ``Σ x = k``, and the
    terms' columns and rows, added through :meth:`add_columns` and :meth:`add_rows`.

    Rows added through :meth:`add_cuts` after :meth:`freeze` form the **cut pool**: each has a
    key (no key twice), :meth:`note_binding` marks the cuts binding at a solution as used, and
    :meth:`drop_idle_cuts` trims the pool to a number of rows by deleting the cuts not used
    since its last call, least recently used first (module docstring, "Cut pool");
    :meth:`cut_pool` gives a copy of that state.
    """

    def __init__(self, n: int, k: int):
        self.n, self.k = n, k
        self._keys: set[Hashable] = set()  # the keys of the rows added by add_cuts
        self._permanent = -1  # rows below this index are never dropped (-1: not frozen yet)
        self._cut_keys: list[Hashable] = []  # the pool, in row order from ``_permanent``
        self._cut_upper = np.zeros(0)
        self._last_used = np.zeros(0, dtype=np.int64)  # per cut: the epoch it was last added or binding
        self._epoch = 0  # drops so far
        self._noted = False  # whether note_binding saw a solution since the last drop
        self.h = new_highs()
        self.h.changeObjectiveSense(highspy.ObjSense.kMaximize)
        self.x_cost = np.zeros(n)
        self.offset = 0.0
        self.add_columns(np.zeros(n), np.zeros(n), np.ones(n))
        self.h.changeColsIntegrality(n, np.arange(n, dtype=np.int32), np.ones(n, dtype=np.uint8))
        self.h.addRow(k, k, n, np.arange(n, dtype=np.int32), np.ones(n))

    @property
    def num_col(self) -> int:
        return int(self.h.getNumCol())

    def add_columns(self, cost: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Append continuous columns; return their indices."""
        m = int(np.size(cost))
        first = self.num_col
        if m:
            self.h.addCols(m, np.asarray(cost, float), np.asarray(lower, float), np.asarray(upper, float),
                           0, np.zeros(m, np.int32), np.zeros(0, np.int32), np.zeros(0))
        return np.arange(first, first + m, dtype=np.int32)

    def add_rows(self, upper: np.ndarray, matrix: sp.csr_array, lower: np.ndarray | None = None) -> int:
        """Append the rows ``lower <= matrix @ columns <= upper`` (``lower`` default ``-inf``)."""
        matrix = sp.csr_array(matrix)
        m = matrix.shape[0]
        if m == 0:
            return 0
        lower = np.full(m, -highspy.kHighsInf) if lower is None else np.asarray(lower, float)
        self.h.addRows(m, lower, np.asarray(upper, float), matrix.nnz,
                       matrix.indptr[:-1].astype(np.int32), matrix.indices.astype(np.int32),
                       matrix.data.astype(float))
        return m

    def difference_rows(self, own: np.ndarray, row: np.ndarray, col: np.ndarray,
                        coefficients: np.ndarray) -> sp.csr_array:
        """Left-hand sides ``v_{own_i} − Σ_{(i, c)} coefficient·v_c``, one row per entry of
        ``own``, the entries ``(row, col, coefficients)`` in coordinate form: the shape of every
        term's linking rows (a column bounded by a combination of others)."""
        m = own.size
        return sp.csr_array((np.concatenate([np.ones(m), -np.asarray(coefficients, dtype=float)]),
                             (np.concatenate([np.arange(m), row]), np.concatenate([own, col]))),
                            shape=(m, self.num_col))

    @property
    def num_row(self) -> int:
        """Rows of the model, the pool's included."""
        return int(self.h.getNumRow())

    @property
    def num_cuts(self) -> int:
        """Rows in the cut pool (added after :meth:`freeze`)."""
        return len(self._cut_keys)

    def cut_pool(self) -> tuple[list[Hashable], np.ndarray, int, bool]:
        """A copy of the cut pool's state: the cuts' keys in row order, the epoch each was last
        used in (added, or binding at a noted solution), the current epoch (drops so far) and
        whether a solution was noted since the last drop."""
        return list(self._cut_keys), self._last_used.copy(), self._epoch, self._noted

    def restore_usage(self, last_used: np.ndarray, epoch: int, noted: bool) -> None:
        """Set the pool's usage state to one :meth:`cut_pool` returned for a pool with the same
        cuts in the same order (a benchmark replays a recorded call on a fresh model so)."""
        last_used = np.asarray(last_used, dtype=np.int64)
        if last_used.shape != (len(self._cut_keys),):
            raise ValueError(f"usage for {last_used.size} cuts given, the pool holds {len(self._cut_keys)}")
        self._last_used, self._epoch, self._noted = last_used.copy(), int(epoch), bool(noted)

    def add_cuts(self, keys: Sequence[Hashable],
                 rows: Callable[[np.ndarray], tuple[np.ndarray, sp.csr_array]]) -> int:
        """Append the candidate rows whose keys are not in the model yet; return how many.

        ``rows(fresh)`` builds ``(upper, matrix)`` for the candidates at the indices ``fresh``
        only (the rows ``matrix @ columns <= upper``), so a row already in the model costs a key
        lookup and nothing more.  Before :meth:`freeze` the rows are permanent."""
        fresh = np.flatnonzero([key not in self._keys for key in keys])
        if fresh.size == 0:
            return 0
        keys = [keys[i] for i in fresh]
        upper, matrix = rows(fresh)
        upper = np.asarray(upper, dtype=float)
        added = self.add_rows(upper, matrix)
        self._keys.update(keys)
        if self._permanent >= 0:
            self._cut_keys.extend(keys)
            self._cut_upper = np.concatenate([self._cut_upper, upper])
            self._last_used = np.concatenate([self._last_used, np.full(added, self._epoch)])
        return added

    def freeze(self) -> None:
        """Make the rows so far permanent: later :meth:`add_cuts` rows form the cut pool."""
        self._permanent = self.num_row

    def note_binding(self, row_value: Sequence[float]) -> None:
        """Mark the cuts binding at a solution (``row_value``: its row activities) as used."""
        activity = np.asarray(row_value, dtype=float)[max(self._permanent, 0):]
        if self._permanent < 0 or activity.size != len(self._cut_keys):
            return  # not a solution of the current model
        self._noted = True
        upper = self._cut_upper
        binding = upper - activity <= BINDING_TOLERANCE * np.maximum(1.0, np.abs(upper))
        self._last_used[binding] = self._epoch

    def drop_idle_cuts(self, limit: int | None = None) -> int:
        """Trim the pool to ``limit`` rows (default :data:`CUT_POOL_ROWS`) by deleting idle
        cuts, least recently used first (used: added, or binding at a noted solution); return
        how many.  The cuts used since the last drop stay whatever the limit, and without a
        solution noted since then (no solve) nothing is dropped."""
        if not self._noted:
            return 0
        self._noted = False
        idle = np.flatnonzero(self._last_used < self._epoch)
        self._epoch += 1
        excess = len(self._cut_keys) - (CUT_POOL_ROWS if limit is None else int(limit))
        if excess <= 0 or idle.size == 0:
            return 0
        drop = np.sort(idle[np.argsort(self._last_used[idle], kind="stable")[:excess]])
        self.h.deleteRows(drop.size, (self._permanent + drop).astype(np.int32))
        self._keys.difference_update(self._cut_keys[i] for i in drop)
        kept = np.ones(len(self._cut_keys), dtype=bool)
        kept[drop] = False
        self._cut_keys = [key for key, keep in zip(self._cut_keys, kept) if keep]
        self._cut_upper = self._cut_upper[kept]
        self._last_used = self._last_used[kept]
        return int(drop.size)


class Term:
    """One part of the objective, ``weight·g(x)``, as columns and rows of a :class:`MilpModel`.

    ``build`` adds them (and may add to ``model.x_cost`` and ``model.offset``); ``start``
    gives the term's column values that make the model's objective equal ``g`` at a set;
    ``separate`` adds the rows violated at a point (for outer approximations) and returns
    how many; ``lazy`` says whether it ever adds any.
    """

    lazy = False
    columns: np.ndarray = np.zeros(0, dtype=np.int32)

    def build(self, model: MilpModel, weight: float) -> None:
        raise NotImplementedError

    def start(self, x: np.ndarray) -> np.ndarray:
        """Values of this term's columns for the 0/1 vector ``x`` (a ``k``-set)."""
        return np.zeros(0)

    def separate(self, model: MilpModel, x: np.ndarray, own: np.ndarray) -> int:
        """Add rows cutting off ``(x, own)`` where the term over-estimates itself; return the count."""
        return 0


class MilpPricing(PricingOracle):
    """Exact pricing for a utility that is a non-negative sum of :class:`Term`\\ s.

    Subclasses give the terms (:meth:`make_terms`) and, for the heuristic's local search,
    ``swap_deltas``.  ``deadline`` (a ``time.perf_counter()`` value) and ``time_budget``
    (seconds per call) cap each call; an unfinished call returns its incumbent and the
    certified dual bound, with ``exact`` false.
    """

    name = "milp"
    exact = True
    accepts_target = True
    accepts_enough = True
    #: whether column generation's schedule search also starts from the schedule that gives
    #: each worker the rounds the continuous relaxation wishes it
    #: (:func:`~fairsched.lp.pricing.schedule_search.wished_schedule`): only where measured
    #: to help (coverage: ``coverage-geometric`` 1.54e-2 against 3.65e-2 at 120 s); on the
    #: generators' mixture and concave ``log1p`` it started higher but certified later (all
    #: four mixture seeds by 5-11 s, ``log1p`` by up to 23 s; ``benchmarks/README.md``,
    #: "Wished schedules")
    wished_start = False
    #: share of the time limit by which column generation's schedule search must end, where
    #: the kind sets its own (else ``fairsched.lp.solve.SCHEDULE_SHARE``)
    schedule_share: float | None = None
    swap_deltas: SwapDeltas | None = None

    def __init__(self, utility: SetFunction, k: int, *, max_columns: int = 10,
                 rel_gap: float = MIP_REL_GAP, deadline: float | None = None,
                 time_budget: float | None = None,
                 terms: Sequence[tuple[float, Term]] | None = None,
                 perturbations: int | None = None):
        super().__init__(utility.n, k, max_columns)
        #: rounds of iterated local search before each MILP solve (0: none; default
        #: :data:`fairsched.lp.pricing.greedy.PERTURBATIONS`)
        self.perturbations = greedy.PERTURBATIONS if perturbations is None else int(perturbations)
        self.utility = utility
        self.deadline = deadline
        self.time_budget = time_budget
        #: cheap pricing for :func:`fairsched.solvers.colgen.column_generation`'s ``heuristic``
        self.heuristic = GreedyPricing(utility, k, max_columns=max_columns,
                                       swap_deltas=self.swap_deltas, restarts=HEURISTIC_RESTARTS)
        self.heuristic.restart_seconds = 0.0
        self.model = MilpModel(self.n, self.k)
        self.h = self.model.h
        for option, value in {**HIGHS_OPTIONS, **self.highs_options()}.items():
            set_option(self.h, option, value)
        self.set_rel_gap(rel_gap)
        self.terms = list(self.make_terms(utility) if terms is None else terms)
        for weight, term in self.terms:
            term.build(self.model, float(weight))
        self.model.freeze()
        self.h.changeObjectiveOffset(self.model.offset)
        self.lazy = [term for _, term in self.terms if term.lazy]
        self._x_index = np.arange(self.n, dtype=np.int32)
        self._collected: list[np.ndarray] = []
        #: the caller's ``enough`` during a call: HiGHS is interrupted once its dual bound is at or below it
        self._enough: float | None = None
        self.h.setCallback(_callback, self)
        self.h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipInterrupt)
        if self.lazy:
            # Every integer point HiGHS meets in a solve is a k-set whose tight rows the next
            # round needs if the model over-estimated it: collect them, not just the incumbent.
            self.h.startCallback(highspy.cb.HighsCallbackType.kCallbackMipSolution)
        self.stats = {"calls": 0, "inexact": 0, "seconds": 0.0, "rounds": 0, "nodes": 0, "cuts": 0,
                      "dropped": 0}
        self._milp_seconds = 0.0

    # -- configuration -----------------------------------------------------------------
    def make_terms(self, utility: SetFunction) -> list[tuple[float, Term]]:
        raise NotImplementedError

    def highs_options(self) -> dict[str, object]:
        """HiGHS options of this kind's model, over :data:`HIGHS_OPTIONS` (none here)."""
        return {}

    @property
    def x_cost(self) -> np.ndarray:
        """Objective coefficients of ``x`` contributed by the terms (before ``λ``)."""
        return self.model.x_cost

    @property
    def num_col(self) -> int:
        return self.model.num_col

    def set_rel_gap(self, rel_gap: float) -> None:
        """The relative MIP gap HiGHS closes (on ``f(S) + λ(S)``); ``exact`` allows twice it."""
        self.rel_gap = float(rel_gap)
        set_option(self.h, "mip_rel_gap", self.rel_gap)

    def _tolerance(self, best: float) -> float:
        """How far the bound may lie above ``best`` for the call to count as exact: twice the MIP gap."""
        return 2 * self.rel_gap * max(1.0, abs(best))

    # -- solving -----------------------------------------------------------------------
    def __call__(self, lam: np.ndarray, target: float | None = None,
                 enough: float | None = None) -> PricingResult:
        lam = np.asarray(lam, dtype=float)
        if lam.shape != (self.n,):
            raise ValueError(f"lam must have shape ({self.n},), got {lam.shape}")
        return self.price(lam, target, enough)

    def _stop_at(self, started: float) -> float:
        stop = math.inf if self.deadline is None else self.deadline
        if self.time_budget is not None:
            stop = min(stop, started + self.time_budget)
        return stop

    def _set_time_limit(self, stop: float) -> bool:
        """Set HiGHS's time limit to ``stop``; false when no time is left."""
        if not math.isfinite(stop):
            set_option(self.h, "time_limit", highspy.kHighsInf)
            return True
        left = stop - time.perf_counter()
        # a MIP's time limit counts from the start of its run (unlike an LP's: solvers.lp.set_time_limit)
        set_option(self.h, "time_limit", max(1e-3, left))
        return left > 0

    def _start(self, mask: np.ndarray) -> None:
        values = [mask.astype(float)] + [term.start(mask) for _, term in self.terms]
        start = highspy.HighsSolution()
        start.col_value = np.concatenate(values).tolist()
        start.value_valid = True
        self.h.setSolution(start)

    def _separate(self, solution: np.ndarray) -> int:
        x = solution[: self.n]
        added = 0
        for term in self.lazy:
            added += term.separate(self.model, x, solution[term.columns])
        self.stats["cuts"] += added
        return added

    def _separate_at_sets(self, masks: Sequence[np.ndarray]) -> int:
        """Add the rows tight at these ``k``-sets wherever the model over-estimates them."""
        added = 0
        for mask in masks:
            own = [np.full(term.columns.size, np.inf) for _, term in self.terms]
            solution = np.concatenate([mask.astype(float)] + own)
            added += self._separate(solution)
        return added

    def _relaxation_rounds(self, stop: float) -> float:
        """Cut the LP relaxation at its optimum for up to :data:`LP_CUT_ROUNDS` rounds; its bound."""
        return self._cut_relaxation(stop)[1]

    def _cut_relaxation(self, stop: float) -> tuple[highspy.HighsSolution | None, float]:
        """Solve the LP relaxation and add the rows violated at its optimum, for up to
        :data:`LP_CUT_ROUNDS` rounds or until ``stop``: the last optimal solution (``None`` once
        a solve is not optimal) and the relaxation's bound, its value when no row was violated
        there (``inf`` otherwise: the rows just added may lower it)."""
        h = self.h
        h.changeColsIntegrality(self.n, self._x_index, np.zeros(self.n, dtype=np.uint8))
        solution = None
        try:
            for _ in range(LP_CUT_ROUNDS):
                if not self._set_time_limit(stop):
                    break
                h.run()
                if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
                    return None, math.inf
                bound = float(h.getInfo().objective_function_value)
                solution = h.getSolution()
                self.model.note_binding(solution.row_value)
                if self._separate(np.asarray(solution.col_value)) == 0:
                    return solution, bound
            return solution, math.inf
        finally:
            h.changeColsIntegrality(self.n, self._x_index, np.ones(self.n, dtype=np.uint8))

    def price(self, lam: np.ndarray, target: float | None = None,
              enough: float | None = None) -> PricingResult:
        """Solve the MILP (cut loop for outer-approximated terms); with ``target``, stop at
        the first set whose true value reaches it, and with ``enough``, as soon as the
        certified upper bound is at or below it (HiGHS is interrupted once its dual bound
        gets there); either early answer has ``exact`` false."""
        self.stats["calls"] += 1
        started = time.perf_counter()
        stop = self._stop_at(started)
        h = self.h
        h.changeColsCost(self.n, self._x_index, self.model.x_cost + lam)
        # idle cuts beyond the pool's limit would only slow this call's LPs (module docstring)
        self.stats["dropped"] += self.model.drop_idle_cuts()
        warm = self.heuristic(lam)
        columns = list(warm.columns)
        best_mask = warm.columns[0]
        best = float(warm.values[0] + best_mask @ lam)
        upper = float(warm.upper_bound)
        tol = self._tolerance(best)
        if (target is not None and best >= target) or _at_most(upper, enough):
            return self._finish(columns, lam, upper, started, exact=False)
        if self.perturbations:
            # Iterated local search before the MILP: near the LP optimum many sets tie and 1-swap
            # local search stalls, while a few seconds of perturbed climbs often find the column
            # the MILP would (and give the MILP a better start).
            if math.isfinite(stop):
                until = started + PERTURBATION_SHARE * max(0.0, stop - started)
            else:  # no deadline: tie the search's cost to the MILP's
                until = started + PERTURBATION_VS_MILP * self._milp_seconds
            # with a target, past its rounds while it costs a share of what the MILP would
            more = -math.inf if target is None else started + TARGET_SEARCH_VS_MILP * self._milp_seconds
            found = self.heuristic.perturbed(lam, best_mask, target=target, rounds=self.perturbations,
                                             stop=until, seed=self.stats["calls"], more_until=more)
            if found:
                columns.extend(found)
                best_mask = found[-1]
                best = float(self.utility.values(best_mask[None, :])[0] + best_mask @ lam)
                tol = self._tolerance(best)
            if target is not None and best >= target:
                return self._finish(columns, lam, upper, started, exact=False)
        return self._solve_exactly(lam, target, enough, stop, warm.columns, columns, best, best_mask, upper,
                                   tol, started)

    def _solve_exactly(self, lam: np.ndarray, target: float | None, enough: float | None, stop: float,
                       warm: np.ndarray, columns: list[np.ndarray], best: float, best_mask: np.ndarray,
                       upper: float, tol: float, started: float) -> PricingResult:
        """The exact part of a call, after the heuristic: its sets ``warm`` and ``columns`` so
        far, the best ``best`` (the set ``best_mask``) and the bound ``upper``.  Here the LP
        relaxation's cut rounds, then the cut loop of MILP solves (module docstring)."""
        if self.lazy:
            self._separate_at_sets(warm)
            upper = min(upper, self._relaxation_rounds(stop) + 1e-12 * max(1.0, abs(best)))
            if _at_most(upper, enough):
                return self._finish(columns, lam, upper, started, exact=upper - best <= tol)
        set_option(self.h, "objective_target", -highspy.kHighsInf if target is None else float(target))
        with self._timed_exact():
            self._enough = enough
            if enough is not None:
                # the cutoff (module docstring); HiGHS minimises internally, so it is negated
                set_option(self.h, "objective_bound", -float(enough))
            try:
                return self._milp_rounds(lam, target, stop, columns, best, best_mask, upper, tol, started)
            finally:
                self._enough = None
                # it may stop the dual simplex of an LP too (module docstring)
                set_option(self.h, "objective_bound", highspy.kHighsInf)

    @contextlib.contextmanager
    def _timed_exact(self) -> Iterator[None]:
        """Time the block as an exact solve: the longest so far sets how long the heuristic's
        search and restarts may run (:data:`PERTURBATION_VS_MILP`, :data:`RESTARTS_VS_MILP`)."""
        began = time.perf_counter()
        try:
            yield
        finally:
            # the longest so far: a call that needed no MILP round must not switch the search off
            self._milp_seconds = max(self._milp_seconds, time.perf_counter() - began)
            self.heuristic.restart_seconds = RESTARTS_VS_MILP * self._milp_seconds

    def _milp_rounds(self, lam: np.ndarray, target: float | None, stop: float, columns: list[np.ndarray],
                     best: float, best_mask: np.ndarray, upper: float, tol: float,
                     started: float) -> PricingResult:
        """The cut loop of MILP solves (module docstring) from the heuristic's best set."""
        h = self.h
        for _ in range(MILP_ROUNDS):
            if upper - best <= tol or not self._set_time_limit(stop):
                break
            self._start(best_mask)
            self._collected = []
            self._width = self.model.num_col
            h.run()
            self.stats["rounds"] += 1
            status = h.getModelStatus()
            info = h.getInfo()
            self.stats["nodes"] += max(0, int(info.mip_node_count))
            dual = float(info.mip_dual_bound)
            cut_off = self._enough is not None and status == highspy.HighsModelStatus.kInfeasible
            if cut_off or (math.isfinite(dual) and status in _BOUNDED):
                upper = min(upper, bound_under_cutoff(dual, self._enough, cut_off))
            if cut_off:
                break  # no set is worth more than enough
            incumbent = h.getSolution()
            if incumbent.value_valid:
                self.model.note_binding(incumbent.row_value)
            solution = np.asarray(incumbent.col_value)
            if solution.size < self.n:
                break
            x = solution[: self.n] > 0.5
            if x.sum() != self.k:
                break
            value = float(self.utility.values(x[None, :])[0] + x @ lam)
            columns.append(x)
            if value > best:
                best, best_mask = value, x
                tol = self._tolerance(best)
            if upper - best <= tol or (target is not None and best >= target) or _at_most(upper, self._enough):
                break
            if status != highspy.HighsModelStatus.kOptimal and status not in _STOPPED_EARLY:
                break
            met = self._met_sets()
            added = self._separate(solution) + (self._separate_at_sets(met) if met.shape[0] else 0)
            if added == 0:
                break  # the model is tight at its incumbents: only the MIP gap is left
            if met.shape[0]:
                values = self.utility.values(met) + met @ lam
                top = int(np.argmax(values))
                if values[top] > best:
                    best, best_mask = float(values[top]), met[top]
                    tol = self._tolerance(best)
                columns.extend(met[np.argsort(-values)[: self.max_columns]])
        return self._finish(columns, lam, upper, started, exact=upper - best <= tol)

    def _met_sets(self) -> np.ndarray:
        """The distinct ``k``-sets among the integer solutions collected in the last solve."""
        if not self._collected:
            return np.zeros((0, self.n), dtype=bool)
        masks = np.array(self._collected) > 0.5
        masks = masks[masks.sum(axis=1) == self.k]
        if masks.shape[0] > 1:
            masks = masks[np.unique(np.packbits(masks, axis=1), axis=0, return_index=True)[1]]
        return masks

    def _finish(self, columns: list[np.ndarray], lam: np.ndarray, upper: float, started: float,
                exact: bool) -> PricingResult:
        columns = np.array(columns)
        values = self.utility.values(columns)
        result = ranked(columns, values, lam, self.max_columns, upper_bound=upper, exact=False)
        # the exact sets are the heuristic's best starts at the next duals (they move little)
        self.heuristic.remember(result.columns, result.values)
        best = float(result.values[0] + result.columns[0] @ lam)
        exact = exact and (is_tight(best, result.upper_bound)
                           or result.upper_bound - best <= self._tolerance(best))
        if not exact:
            self.stats["inexact"] += 1
        self.stats["seconds"] += time.perf_counter() - started
        return PricingResult(result.columns, result.values, result.upper_bound, exact)

    # -- the continuous relaxation -----------------------------------------------------
    def relaxation_bound(self, lam: np.ndarray, stop: float = math.inf) -> float:
        """The root bound of the MILP at ``lam``: ``max Σ_terms g(x) + λ·x`` over ``0 <= x <= 1``,
        ``Σ x = k``, with the terms' cuts separated at its optimum for up to
        :data:`LP_CUT_ROUNDS` rounds (or until ``stop``, a ``time.perf_counter()`` value).

        It is an upper bound on ``max_{|S|=k} f(S) + λ(S)`` (every term over-estimates its
        function on the integer points), ``inf`` when the last round still added rows or a
        solve was not optimal.  The cuts found stay in the model for later calls.
        """
        lam = np.asarray(lam, dtype=float)
        if lam.shape != (self.n,):
            raise ValueError(f"lam must have shape ({self.n},), got {lam.shape}")
        self.h.changeColsCost(self.n, self._x_index, self.model.x_cost + lam)
        return self._relaxation_rounds(stop)

    def relaxation_duals(self, r: np.ndarray) -> np.ndarray:
        """λ from the continuous relaxation ``max Σ_terms g(x)  s.t.  r <= x <= 1, Σ x = k``.

        With ``λ_u`` the reduced cost of ``x_u`` at its floor (0 elsewhere), ``x*`` maximises
        ``g(x) + λ·x`` over ``0 <= x <= 1, Σ x = k`` (LP duality), so the Lagrangian bound at
        λ is at most this relaxation's value, itself an upper bound on ``U_opt`` since every
        term over-estimates its function on the integer points.  Column generation prices
        this λ first (``docs/mathematics.md`` §3, starting pool).
        """
        return self.relaxation_solution(r)[0]

    def relaxation_solution(self, r: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """:meth:`relaxation_duals` and the relaxation's optimum ``x*`` (marginals in
        ``[0, 1]`` summing to ``k``, at least ``r``), ``None`` when it was not solved.

        ``x*`` says how often each worker would be picked if every term were as good as its
        outer approximation on fractional points: the schedule search takes it as a wish
        for how many rounds each worker should have beyond its floor
        (:func:`~fairsched.lp.pricing.schedule_search.schedule_search`).
        """
        r = np.clip(np.asarray(r, dtype=float), 0.0, 1.0)
        h = self.h
        idx = self._x_index
        h.changeColsCost(self.n, idx, self.model.x_cost)
        h.changeColsBounds(self.n, idx, r, np.ones(self.n))
        try:
            solution, _ = self._cut_relaxation(math.inf)
        finally:
            h.changeColsBounds(self.n, idx, np.zeros(self.n), np.ones(self.n))
        if solution is None:
            return np.zeros(self.n), None
        x = np.clip(np.asarray(solution.col_value)[: self.n], 0.0, 1.0)
        lam = np.clip(-np.asarray(solution.col_dual)[: self.n], 0.0, None)
        lam[x > r + 1e-9] = 0.0
        return lam, x


def _at_most(upper: float, enough: float | None) -> bool:
    return enough is not None and upper <= enough


def _callback(callback_type: object, message: str, data_out: object, data_in: object,
              oracle: MilpPricing) -> None:
    """HiGHS callback: interrupt a solve whose dual bound has reached the caller's ``enough``
    (:meth:`MilpPricing.price`), and keep the integer solutions found during a solve."""
    if callback_type == highspy.cb.HighsCallbackType.kCallbackMipInterrupt:
        # assigned every time: HiGHS (1.16) keeps the flag across runs, so one interrupted
        # solve would otherwise stop every later solve of the model at its first callback
        data_in.user_interrupt = bool(oracle._enough is not None
                                      and float(data_out.mip_dual_bound) <= oracle._enough)
        return
    _collect(data_out, oracle)


def _collect(data_out: object, oracle: MilpPricing) -> None:
    """Keep an integer solution found during a solve (read only).

    An exception escaping a callback aborts the HiGHS solve, and a missed solution only
    costs a later round, so none is let through.
    """
    try:
        if len(oracle._collected) >= COLLECTED_SOLUTIONS:
            return
        solution = data_out.mip_solution
        values = solution.to_array(oracle._width) if hasattr(solution, "to_array") else solution
        values = np.array(values, dtype=float)
        if values.size >= oracle.n:
            oracle._collected.append(values[: oracle.n])
    except Exception:  # noqa: BLE001 - see the docstring
        return


_BOUNDED = {highspy.HighsModelStatus.kOptimal, highspy.HighsModelStatus.kTimeLimit,
            highspy.HighsModelStatus.kObjectiveTarget, highspy.HighsModelStatus.kIterationLimit,
            highspy.HighsModelStatus.kSolutionLimit, highspy.HighsModelStatus.kInterrupt}
_STOPPED_EARLY = {highspy.HighsModelStatus.kObjectiveTarget}
