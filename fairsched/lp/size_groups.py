"""Size groups: a Lagrangian bound for the accuracy utility from the LP over groups of
workers of equal size, where column generation over every worker's floor tails off above it.

**Why.**  For ``f(S) = g(L(S))`` (the accuracy utility of Li, Liu and Ji, "Federated
Learning with Fair Worker Selection: A Multi-Round Submodular Maximization Approach") the
continuous relaxation's bound is Jensen's, ``g(L·x*)``, and where the sizes fall into two
classes no distribution reaches it: the sets holding the fractional large workers would
need small members smaller than those with the mass they need.  Column generation over all
``n`` floor rows then keeps Jensen's bound: its master is degenerate, its duals jump between
workers, and no Lagrangian bound it prices is lower.  Two-class draw, ``n = 1,000, k = 50``:
``"tailing-off"`` at a gap of 1.46e-5 after 35.9 s, the bound Jensen's
(``benchmarks/README.md``, "Two size classes").

**The aggregated LP** (constraint aggregation, Elhallaoui, Villeneuve, Soumis and
Desaulniers, "Dynamic aggregation of set-partitioning constraints in column generation",
*Operations Research* 53, 2005).  Workers of equal size are interchangeable in ``f``; summing
the floor rows of each group ``G`` of them gives::

    U_agg = max Σ_S p_S f(S)  s.t.  Σ_S p_S |S ∩ G| >= R_G = Σ_{u∈G} r_u  (every G),
                                    Σ_S p_S = 1,  p >= 0,

a relaxation (``U_agg >= U_opt``) with one row per group.  Its prices ``λ_G`` give every
member the same price, ``λ_u = λ_{G(u)} >= 0``, so ``max_{|S|=k}[f(S) + λ(S)] − λ·r`` is a
Lagrangian bound on ``U_opt`` like any other, computed by the exact accuracy pricing.  Only
the bound is used: a solution of the aggregated LP need not be a real distribution (it may
put equal-size workers together more often than their own floors allow).

**The loop** is column generation on that LP, its master one HiGHS model with columns
appended (warm-started simplex; ``|S ∩ G|`` as coefficients), stabilised by Wentges
smoothing with the self-adjusting ``α`` of Pessoa, Sadykov, Uchoa and Vanderbeck,
"Automation and combination of linear-programming based stabilization techniques in column
generation" (INFORMS J. Computing, 2018; :class:`fairsched.solvers.colgen.Smoothing`):
pricing at ``α·λ_in + (1 − α)·λ_out``, the centre ``λ_in`` the prices of the best bound.
Without smoothing (SciPy's HiGHS re-solving the master each time, Kelley's cutting planes)
the same draw needed 400 iterations and 301 s to bring the bound to 0.903690466; here the
bound 0.903690529, which certifies 1e-6 against column generation's value, took 145
iterations and 41.8 s (``benchmarks/README.md``, "Two size classes: the bound of the size
groups in ``optimum``").
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
from fairsched.solvers import lp as _lp
from fairsched.solvers.colgen import PricingResult, Smoothing, reduced_costs, relative_gap, stagnating
from fairsched.solvers.columns import Columns
from fairsched.solvers.errors import SolverError

Progress = Callable[[int, float, float, float], None]

#: ``(window, factor)``: stop when the gap to ``lower`` shrank by less than ``factor`` in ``window`` iterations
TAILING_OFF = (40, 0.95)
#: stop when this many iterations priced no bound below the centre's (two-class ``n = 10,000``:
#: none in 29 iterations, 2.4 s of pricing each, where ``n = 1,000`` improved from the 5th)
NO_PROGRESS = 10
#: iterations at most
MAX_ITERATIONS = 2_000
#: reduced cost a column needs to enter, relative to ``max(1, |U|)``
ENTER_TOLERANCE = 1e-12


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
    pricing's ``max_S f(S) + λ(S)`` at them and ``bound = pricing_bound − λ·r`` (``inf`` when
    no call improved on the centre's); ``aggregated_value`` the last restricted master's
    value (``U_agg`` itself when ``status`` is ``"converged"``); ``status`` one of
    ``"certified"`` (``bound`` within ``gap`` of ``lower``), ``"converged"``, ``"tailing-off"``,
    ``"out-of-reach"``, ``"time-limit"``, ``"iteration-limit"``.
    """

    prices: np.ndarray | None
    pricing_bound: float
    bound: float
    aggregated_value: float
    status: str
    iterations: int
    pricing_calls: int


class _AggregatedMaster:
    """``max Σ p_S f(S)  s.t.  Σ p_S |S ∩ G| >= R_G,  Σ p_S = 1,  p >= 0`` as one HiGHS model
    whose columns are appended."""

    def __init__(self, need: np.ndarray):
        self.groups = need.size
        self.h = _lp.new_highs()
        for name, value in (("solver", "simplex"), ("presolve", "off")):
            _lp.set_option(self.h, name, value)
        rows = self.groups + 1
        status = self.h.passModel(
            0, rows, 0, int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMaximize), 0.0,
            np.zeros(0), np.zeros(0), np.zeros(0),
            np.append(need, 1.0), np.append(np.full(self.groups, highspy.kHighsInf), 1.0),
            np.zeros(1, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0), np.zeros(0, dtype=np.int32))
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected the aggregated master LP")

    def add(self, counts: sp.csr_array, values: np.ndarray) -> None:
        """Columns with group counts ``counts`` (one row per column) and values ``f(S)``."""
        m = counts.shape[0]
        if m == 0:
            return
        with_convexity = sp.hstack([counts, sp.csr_array(np.ones((m, 1)))], format="csr")
        status = self.h.addCols(m, np.ascontiguousarray(values, dtype=float), np.zeros(m),
                                np.full(m, highspy.kHighsInf), with_convexity.nnz,
                                with_convexity.indptr[:-1].astype(np.int32),
                                with_convexity.indices.astype(np.int32),
                                with_convexity.data.astype(float))
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected new columns of the aggregated master")

    def solve(self, time_limit: float | None) -> tuple[float, np.ndarray, float] | None:
        """``(value, λ_G, μ)`` of the master's optimum; ``None`` at ``time_limit``."""
        _lp.set_time_limit(self.h, time_limit)
        self.h.run()
        status = self.h.getModelStatus()
        if status == highspy.HighsModelStatus.kTimeLimit:
            return None
        if status != highspy.HighsModelStatus.kOptimal:
            raise SolverError(f"HiGHS did not solve the aggregated master "
                              f"(status: {self.h.modelStatusToString(status)})")
        row_dual = np.asarray(self.h.getSolution().row_dual)
        value = float(self.h.getInfo().objective_function_value)
        return value, np.clip(-row_dual[:self.groups], 0.0, None), float(row_dual[self.groups])


def size_group_bound(price: Callable[[np.ndarray], PricingResult], r: np.ndarray, groups: np.ndarray,
                     columns: Columns, values: np.ndarray, *, centre: np.ndarray, centre_pricing_bound: float,
                     lower: float, gap: float, deadline: float | None = None,
                     patience: float | None = None, progress: Progress | None = None,
                     first_iteration: int = 0, max_iterations: int = MAX_ITERATIONS) -> SizeGroupBound:
    """Column generation on the LP over groups of equal size (module docstring) from the sets
    ``columns`` (worth ``values``; they must meet every group's sum ``R_G``, as the sets of a
    distribution meeting ``r`` do), for the lowest Lagrangian bound it can price.

    ``price`` is an exact pricing (``upper_bound`` its maximum); ``centre`` (n,) prices equal
    inside each group with their known pricing bound ``centre_pricing_bound`` (e.g. the
    continuous relaxation's: Jensen's bound) start the smoothing.  It stops ``"certified"``
    once the bound is within ``gap`` of ``lower`` (the value of a feasible distribution),
    ``"converged"`` when no column prices out at the master's own prices (the bound is then
    ``U_agg``), ``"tailing-off"`` when the gap to ``lower`` shrank by less than a factor
    ``TAILING_OFF[1]`` in ``TAILING_OFF[0]`` iterations or when neither the first
    :data:`NO_PROGRESS` iterations nor the first ``patience`` seconds priced anything below
    the centre's bound, ``"out-of-reach"`` when a restricted master is worth more than
    ``lower·(1 + gap)`` (every bound of this LP is at least ``U_agg``, so none can certify the
    gap any more), at ``deadline`` (a ``time.perf_counter()`` value) or after
    ``max_iterations``.  ``progress(iteration, lower, upper, gap)`` follows every iteration,
    numbered from ``first_iteration + 1``.
    """
    began = time.perf_counter()
    r = np.asarray(r, dtype=float)
    groups = np.asarray(groups, dtype=np.int64)
    count = int(groups.max()) + 1
    need = np.bincount(groups, weights=r, minlength=count)
    centre = np.asarray(centre, dtype=float)
    centre_g = np.empty(count)
    centre_g[groups] = centre
    if not np.array_equal(centre_g[groups], centre):
        raise ValueError("the centre's prices must be equal inside every group")
    master = _AggregatedMaster(need)
    master.add(group_counts(columns, groups, count), np.asarray(values, dtype=float))
    seen = set(columns.hashes().tolist())
    smoother = Smoothing("auto")
    best_g, best_pricing = centre_g, float(centre_pricing_bound)
    best_bound = best_pricing - float(centre_g @ need)
    improved = False
    gaps = [relative_gap(lower, best_bound)]
    status, iteration, calls, value = "iteration-limit", 0, 0, -math.inf

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
        value, out, mu = solved
        iteration += 1
        if relative_gap(lower, value) > gap:
            status = "out-of-reach"
            break
        tol = ENTER_TOLERANCE * max(1.0, abs(value))
        misprices, entering = 0, np.zeros(0, dtype=np.int64)
        while True:
            alpha = smoother.schedule(misprices)
            separation = alpha * best_g + (1.0 - alpha) * out
            found = price(separation[groups])
            calls += 1
            if found.exact:
                bound = float(found.upper_bound) - float(separation @ need)
                if bound < best_bound:
                    best_g, best_pricing, best_bound, improved = separation, float(found.upper_bound), bound, True
            masks, found_values, _ = reduced_costs(found, separation[groups], 0.0)
            priced = Columns.from_masks(masks)
            counts = group_counts(priced, groups, count)
            if counts.shape[0]:
                reward = found_values + counts @ separation
                smoother.adapt(best_g, out, counts[[int(np.argmax(reward))]].toarray().ravel(), need)
            reduced = found_values + counts @ out - mu
            hashes = priced.hashes().tolist()
            fresh: dict[int, int] = {}
            for j in np.argsort(-reduced, kind="stable"):
                if reduced[j] > tol and hashes[j] not in seen and hashes[j] not in fresh:
                    fresh[hashes[j]] = int(j)
            entering = np.fromiter(fresh.values(), dtype=np.int64, count=len(fresh))
            if entering.size or alpha == 0.0:
                break
            misprices += 1
        current = relative_gap(lower, best_bound)
        gaps.append(current)
        if progress is not None:
            progress(first_iteration + iteration, lower, best_bound, current)
        if current <= gap:
            status = "certified"
            break
        if entering.size == 0:
            status = "converged"
            break
        impatient = patience is not None and time.perf_counter() - began >= patience
        if stagnating(gaps, *TAILING_OFF) or (not improved and (iteration >= NO_PROGRESS or impatient)):
            status = "tailing-off"
            break
        seen.update(hashes[j] for j in entering)
        master.add(counts[entering], found_values[entering])
    return SizeGroupBound(prices=best_g[groups] if improved else None, pricing_bound=best_pricing if improved else math.inf,
                          bound=best_bound if improved else math.inf, aggregated_value=value, status=status,
                          iterations=iteration, pricing_calls=calls)
