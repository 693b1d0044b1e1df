"""Column generation for the distribution LP, with a certified upper bound at every step.

The master problem is the distribution LP of :mod:`fairsched.solvers.lp` over a growing pool of
columns, kept in **one** HiGHS model: new columns are appended with ``addCols`` and the
primal simplex restarts from the previous optimal basis (no rebuild per iteration).
The pricing problem is left to a callback::

    price(lam) -> PricingResult      # candidate columns for  max_S f(S) + lam(S)

Bounds (Lübbecke & Desrosiers 2005, "Selected topics in column generation", §2.1;
Desaulniers, Desrosiers & Solomon (eds.) 2005, *Column Generation*, ch. 1): for any
``lam >= 0`` and any column family, LP duality gives the Lagrangian bound::

    U_opt <= max_S [f(S) + lam(S)] - lam . r

so ``PricingResult.upper_bound - lam . r`` is a certified upper bound whether or not the
pricing found the maximiser; the master value (once no artificial slack is used) is a
lower bound.  The loop stops when the relative gap ``(UB - LB) / max(|LB|, 1e-12)`` is at
most ``gap``, when no column prices out, or at ``max_iterations`` / ``time_limit``.

Elastic phase: each fairness row ``u`` has an artificial slack column ``s_u in [0, r_u]``
with objective ``-M s_u`` (big-M), so an initial pool that cannot meet ``r`` is no
obstacle.  If the pricing is exact and no column prices out while slack is still used,
either ``M`` is below the optimal dual prices (then ``M`` is raised and the loop goes on)
or the floors are infeasible: that is certified as soon as the Lagrangian bound drops
below ``value_lower_bound`` (any feasible distribution is worth at least that), or assumed
once ``M`` has reached ``max_big_m``.  Once the pool meets the floors the artificial columns
are deleted (the pool only grows, so it keeps meeting them) and λ is the plain master's.

Speed-ups, all optional: ``dual_guesses`` (λ from a relaxation, priced before the first
master solve), a cheaper ``heuristic`` pricing tried before ``price`` (a pricing hierarchy),
Wentges ``smoothing`` of the duals, and oracles that accept a ``target`` (stop at the first
column that prices out).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import highspy
import numpy as np

from . import lp as _lp
from .errors import InfeasibleLPError, SolverError
from .result import Result

Progress = Callable[[int, float, float, float], None]


@dataclass(frozen=True, eq=False)
class PricingResult(Result):
    """What a pricing oracle found for the duals ``lam``.

    ``columns`` (m, n) bool, best first (m may be 0); ``values`` (m,) their ``f(S)``;
    ``upper_bound`` a certified upper bound on ``max_S f(S) + lam(S)`` over the whole
    column family; ``exact`` true when the first column attains that maximum (so an
    empty or non-improving answer proves the master optimal).

    An oracle with the attribute ``accepts_target = True`` is called as
    ``price(lam, target=t)``: a column with ``f(S) + lam(S) >= t`` is all the master needs
    (``t`` is μ plus a tolerance), so the oracle may stop at the first one it finds; its
    ``upper_bound`` must still be certified.  Such early answers do not count as inexact.
    """

    columns: np.ndarray
    values: np.ndarray
    upper_bound: float
    exact: bool


@dataclass(frozen=True, eq=False)
class ColumnGenerationResult(Result):
    """The outcome of :func:`column_generation`.

    ``value`` is ``Σ p_S f(S)`` of the best feasible master solution (a lower bound on
    the LP optimum), ``upper_bound`` the best certified upper bound, ``gap`` the relative
    gap ``(upper_bound − value) / max(|value|, 1e-12)`` and ``absolute_gap`` the difference.  ``members`` (m, n) and
    ``values`` (m,) are the support columns and their ``f``, ``probabilities`` (m,) their
    weights (summing to 1).  ``fairness_price`` λ and ``convexity_dual`` μ are the final
    master's duals.  ``history`` holds ``(iteration, lower, upper, columns in pool)``;
    ``lower`` is ``-inf`` while artificial slack is still used (iteration 0 records the
    dual guesses).  ``status`` is ``"optimal"`` (gap reached), ``"converged"`` (no column
    prices out; optimal when ``pricing_exact``), ``"iteration-limit"`` or ``"time-limit"``.
    ``pricing_exact`` is true when every call of ``price`` attained its maximum (calls that
    stopped at a requested target, and heuristic calls, do not count).  ``columns`` is the
    pool size, ``big_m`` the final penalty of the elastic phase.
    """

    value: float
    upper_bound: float
    gap: float
    probabilities: np.ndarray
    members: np.ndarray
    values: np.ndarray
    fairness_price: np.ndarray
    convexity_dual: float
    iterations: int
    history: list[tuple[int, float, float, int]] = field(repr=False)
    columns: int
    pricing_exact: bool
    big_m: float

    @property
    def absolute_gap(self) -> float:
        """``upper_bound − value`` (at least 0)."""
        return max(0.0, self.upper_bound - self.value)


def relative_gap(lower: float, upper: float) -> float:
    """``(upper − lower) / max(|lower|, 1e-12)``, clipped at 0; ``inf`` without a lower bound."""
    if not math.isfinite(lower):
        return math.inf
    return max(0.0, upper - lower) / max(abs(lower), 1e-12)


class _Master:
    """The restricted master LP as one HiGHS model that only ever grows.

    Columns ``0..n-1`` are the artificial slacks (one per fairness row), the pool follows.
    """

    def __init__(self, r: np.ndarray, big_m: float, tol: float):
        self.n = r.size
        self.r = r
        self.h = _lp.new_highs()
        for name, value in (("primal_feasibility_tolerance", tol), ("dual_feasibility_tolerance", tol),
                            ("solver", "simplex"), ("simplex_strategy", 4), ("presolve", "off")):
            _lp.set_option(self.h, name, value)
        n = self.n
        inf = highspy.kHighsInf
        status = self.h.passModel(
            n, n + 1, n, int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMaximize), 0.0,
            np.full(n, -big_m), np.zeros(n), r.copy(),
            np.append(r, 1.0), np.append(np.full(n, inf), 1.0),
            np.arange(n + 1, dtype=np.int32), np.arange(n, dtype=np.int32), np.ones(n),
            np.zeros(n, dtype=np.int32),
        )
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected the master LP")
        self.elastic = True
        self.offset = self.n  # pool column j is HiGHS column offset + j
        self.values = np.empty(0)
        self.packed: list[np.ndarray] = []
        self.seen: set[bytes] = set()

    @property
    def size(self) -> int:
        return self.values.size

    def set_big_m(self, big_m: float) -> None:
        assert self.elastic
        self.h.changeColsCost(self.n, np.arange(self.n, dtype=np.int32), np.full(self.n, -big_m))

    def close_elastic(self) -> None:
        """Delete the artificial slacks once the pool meets the floors (the pool only grows,
        so it keeps meeting them): λ is then no longer capped by, or stuck at, the penalty M."""
        self.h.deleteCols(self.n, np.arange(self.n, dtype=np.int32))
        self.elastic = False
        self.offset = 0

    def add(self, members: np.ndarray, values: np.ndarray) -> int:
        """Append the columns not already in the pool; return how many were added."""
        packed = np.packbits(members, axis=1)
        fresh = []
        for i, row in enumerate(packed):
            key = row.tobytes()
            if key not in self.seen:
                self.seen.add(key)
                fresh.append(i)
        if not fresh:
            return 0
        members, values, packed = members[fresh], values[fresh], packed[fresh]
        m, n = members.shape
        # Column S: a 1 in every row u in S and in the convexity row n (CSC, rows sorted).
        augmented = np.empty((m, n + 1), dtype=bool)
        augmented[:, :n] = members
        augmented[:, n] = True
        rows = (np.flatnonzero(augmented) % (n + 1)).astype(np.int32)
        starts = np.zeros(m, dtype=np.int32)
        np.cumsum(np.count_nonzero(augmented, axis=1)[:-1], out=starts[1:])
        values = np.ascontiguousarray(values, dtype=float)
        status = self.h.addCols(m, values, np.zeros(m), np.full(m, highspy.kHighsInf),
                                rows.size, starts, rows, np.ones(rows.size))
        if status == highspy.HighsStatus.kError:
            raise SolverError("HiGHS rejected new columns")
        self.values = np.concatenate([self.values, values])
        self.packed.extend(packed)
        return m

    def solve(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        """Return (p over the pool, slack, λ, μ) of the master optimum."""
        run_status = self.h.run()
        model_status = self.h.getModelStatus()
        if model_status != highspy.HighsModelStatus.kOptimal or run_status == highspy.HighsStatus.kError:
            raise SolverError(f"HiGHS did not solve the master LP "
                              f"(status: {self.h.modelStatusToString(model_status)})")
        solution = self.h.getSolution()
        col = np.asarray(solution.col_value)
        row_dual = np.asarray(solution.row_dual)
        # Same sign convention as solvers.lp: >= rows carry -λ_u, the equality row +μ.
        lam = np.clip(-row_dual[: self.n], 0.0, None)
        slack = np.clip(col[: self.offset], 0.0, None) if self.elastic else np.zeros(self.n)
        return np.clip(col[self.offset:], 0.0, None), slack, lam, float(row_dual[self.n])

    def members(self, index: np.ndarray) -> np.ndarray:
        if index.size == 0:
            return np.zeros((0, self.n), dtype=bool)
        return np.unpackbits(np.stack([self.packed[i] for i in index]), axis=1, count=self.n).astype(bool)


def column_generation(
    values: np.ndarray,
    members: np.ndarray,
    r: np.ndarray,
    price: Callable[[np.ndarray], PricingResult],
    *,
    gap: float = 1e-9,
    max_iterations: int = 10_000,
    time_limit: float | None = None,
    progress: Progress | None = None,
    tol: float = 1e-9,
    big_m: float | None = None,
    max_big_m: float | None = None,
    value_lower_bound: float | None = None,
    max_new_columns: int = 50,
    dual_guesses: Sequence[np.ndarray] = (),
    smoothing: float = 0.0,
    heuristic: Callable[[np.ndarray], PricingResult] | None = None,
) -> ColumnGenerationResult:
    """Solve ``max Σ p_S f(S) s.t. Σ_{S∋u} p_S >= r_u, Σ p_S = 1, p >= 0`` by column generation.

    Parameters
    ----------
    values, members
        The initial pool: ``f`` (m,) and membership (m, n) of some columns (m may be 0:
        then the pool starts with what ``price(0)`` returns).
    r
        Fairness floors (n,).
    price
        Pricing oracle, see :class:`PricingResult`; it is called with λ >= 0 (n,).
    gap
        Stop when ``(UB − LB) / max(|LB|, 1e-12) <= gap``.
    tol
        HiGHS primal/dual feasibility tolerance; also the reduced cost a column needs
        (relative to ``max(1, |μ|)``) to enter, and the slack treated as zero.
    big_m, max_big_m
        Penalty of the artificial slack (default ``1e3·max(1, max |f|)``) and its ceiling
        when it has to be raised (default ``1e6`` times the default); raised ×100 at a time.
    value_lower_bound
        A number no feasible distribution falls below (``min f``; 0 for non-negative
        utilities).  With it, infeasibility is certified by the Lagrangian bound.
    max_new_columns
        At most this many of the priced columns (best first) enter per iteration.
    dual_guesses
        λ vectors (>= 0) to price before the first master solve, e.g. the duals of a
        relaxation: their Lagrangian bounds count towards the upper bound and their columns
        join the pool (history iteration 0).  A good guess saves the many iterations the
        master's extreme-point duals need to find a tight bound.
    smoothing
        Wentges (1997) dual smoothing ``α`` in ``[0, 1)``: once the floors are met, price at
        ``α·λ̄ + (1 − α)·λ`` (``λ̄`` the duals of the best upper bound so far) and fall back to
        the master's λ when that finds no column with positive reduced cost ("mispricing").
    heuristic
        A cheaper pricing tried first in every iteration; ``price`` runs only when it finds
        no column with positive reduced cost, so the exact oracle is called mostly to prove
        optimality (a pricing hierarchy, Desaulniers et al. 2005, ch. 1).  Its
        ``upper_bound`` must be certified too; its ``exact`` flag is not used.

    Raises InfeasibleLPError (naming the workers whose floors stay unmet) when exact
    pricing proves the floors infeasible, SolverError when no feasible master is found
    within the limits or HiGHS fails, ValueError on malformed input.
    """
    start = time.perf_counter()
    values, members, r = _lp.check_lp_inputs(values, members, r)
    n = r.size
    if not (np.isfinite(gap) and gap >= 0):
        raise ValueError(f"gap must be a number >= 0, got {gap}")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit must be positive seconds, got {time_limit}")
    if max_iterations < 1 or max_new_columns < 1:
        raise ValueError("max_iterations and max_new_columns must be >= 1")
    if not 0 <= smoothing < 1:
        raise ValueError(f"smoothing must be in [0, 1), got {smoothing}")
    over_one = np.flatnonzero(r > 1 + tol)
    if over_one.size:
        u = int(over_one[0])
        raise InfeasibleLPError(f"the LP is infeasible: worker {u} has floor r_{u} = {r[u]:g} > 1")

    if values.size == 0:
        first = price(np.zeros(n))
        values, members, _ = _lp.check_lp_inputs(first.values, first.columns, r)
        if values.size == 0:
            raise InfeasibleLPError("the LP is infeasible: the pricing returned no column at all")
    scale = max(1.0, float(np.abs(values).max()))
    penalty = float(big_m) if big_m is not None else 1e3 * scale
    ceiling = float(max_big_m) if max_big_m is not None else max(penalty, 1e9 * scale)
    master = _Master(r, penalty, tol)
    master.add(members, values)
    best_upper = math.inf
    center: np.ndarray | None = None
    all_exact = True

    def price_at(duals: np.ndarray, oracle: Callable[..., PricingResult] = price,
                 target: float | None = None) -> PricingResult:
        nonlocal best_upper, center, all_exact
        if target is not None and getattr(oracle, "accepts_target", False):
            priced = oracle(duals, target=target)
            reached = priced.values.size > 0 and float(
                priced.values[0] + np.asarray(priced.columns[0], dtype=float) @ duals) >= target
        else:
            priced, reached = oracle(duals), False
        if oracle is price and not reached:
            all_exact &= bool(priced.exact)
        bound = float(priced.upper_bound) - float(duals @ r)
        if bound < best_upper:
            best_upper, center = bound, duals
        return priced

    for guess in dual_guesses:
        guess = np.clip(np.asarray(guess, dtype=float), 0.0, None)
        if guess.shape != (n,):
            raise ValueError(f"every dual guess must have shape ({n},), got {guess.shape}")
        priced = price_at(guess)
        cols = np.asarray(priced.columns, dtype=bool).reshape(-1, n)
        master.add(cols[:max_new_columns], np.asarray(priced.values, dtype=float)[:max_new_columns])

    history: list[tuple[int, float, float, int]] = []
    if dual_guesses:
        history.append((0, -math.inf, best_upper, master.size))
    best_lower = -math.inf
    best: tuple[np.ndarray, np.ndarray] | None = None  # (pool indices, probabilities)
    status = "iteration-limit"
    iteration = 0
    lam, mu = np.zeros(n), 0.0
    while iteration < max_iterations:
        iteration += 1
        p, slack, lam, mu = master.solve()
        feasible = float(slack.max(initial=0.0)) <= tol
        if feasible and master.elastic:
            master.close_elastic()
            p, slack, lam, mu = master.solve()
        if feasible:
            lower = float(master.values @ p) / max(float(p.sum()), 1e-300)
            if lower > best_lower or best is None:
                keep = np.flatnonzero(p > 1e-12)
                best_lower, best = lower, (keep, p[keep] / p[keep].sum())
        smoothed = feasible and smoothing > 0 and center is not None
        point = smoothing * center + (1 - smoothing) * lam if smoothed else lam
        # A column is wanted only if f(S) + λ(S) exceeds μ: oracles that accept a target
        # may stop at the first such column (only meaningful at the master's own λ).
        target = None if smoothed else mu + 2 * tol * max(1.0, abs(mu))
        entering = np.zeros(0, dtype=int)
        if heuristic is not None:
            result = price_at(point, heuristic)
            cols, vals, entering = _entering(result, lam, mu, tol)
        if entering.size == 0:
            result = price_at(point, price, target)
            cols, vals, entering = _entering(result, lam, mu, tol)
        if smoothed and entering.size == 0:
            result = price_at(lam, price, mu + 2 * tol * max(1.0, abs(mu)))  # mispricing
            cols, vals, entering = _entering(result, lam, mu, tol)
        history.append((iteration, best_lower, best_upper, master.size))
        current_gap = relative_gap(best_lower, best_upper)
        if progress is not None:
            progress(iteration, best_lower, best_upper, current_gap)

        if feasible and current_gap <= gap:
            status = "optimal"
            break
        if best_upper < (value_lower_bound if value_lower_bound is not None else -math.inf):
            raise _infeasible(slack, r, "the Lagrangian bound is below every feasible value")
        added = master.add(cols[entering[:max_new_columns]], vals[entering[:max_new_columns]]) if entering.size else 0
        if added == 0:
            if feasible:
                timed_out = time_limit is not None and time.perf_counter() - start > time_limit
                status = "time-limit" if timed_out else "converged"
                break
            if not result.exact:
                raise SolverError(
                    "column generation found no column that meets the floors of workers "
                    f"{_names(slack, r)} and its pricing is heuristic, so infeasibility is not proven")
            if penalty >= ceiling:
                raise _infeasible(slack, r, f"exact pricing finds no column that meets them even at "
                                  f"a penalty of {penalty:g} per unit")
            penalty = min(ceiling, penalty * 100)
            master.set_big_m(penalty)
        if time_limit is not None and time.perf_counter() - start > time_limit:
            status = "time-limit"
            break

    if best is None:
        raise SolverError(f"column generation stopped ({status}) before meeting the floors of workers "
                          f"{_names(slack, r)}")
    keep, probabilities = best
    support = master.members(keep)
    probabilities.setflags(write=False)
    lam = lam.copy()
    lam.setflags(write=False)
    return ColumnGenerationResult(
        value=best_lower,
        upper_bound=max(best_upper, best_lower),
        gap=relative_gap(best_lower, best_upper),
        probabilities=probabilities,
        members=support,
        values=master.values[keep],
        fairness_price=lam,
        convexity_dual=mu,
        iterations=iteration,
        history=history,
        columns=master.size,
        pricing_exact=all_exact,
        big_m=penalty,
        status=status,
        success=status == "optimal" or (status == "converged" and all_exact),
        message=_message(status, all_exact, best_lower, best_upper, iteration),
        seconds=time.perf_counter() - start,
    )


def _message(status: str, exact: bool, lower: float, upper: float, iterations: int) -> str:
    gap = relative_gap(lower, upper)
    why = {"optimal": "the requested gap was reached",
           "converged": "no column prices out" + ("" if exact else " (the pricing is heuristic)"),
           "iteration-limit": "the iteration limit was reached",
           "time-limit": "the time limit was reached"}.get(status, status)
    return (f"column generation stopped after {iterations} iterations because {why}: "
            f"value {lower:.10g}, certified upper bound {upper:.10g}, relative gap {gap:.2g}")


def _entering(result: PricingResult, lam: np.ndarray, mu: float,
              tol: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(columns, values, indices of those with reduced cost f(S) + λ(S) − μ > tol·max(1, |μ|))."""
    cols = np.asarray(result.columns, dtype=bool).reshape(-1, lam.size)
    vals = np.asarray(result.values, dtype=float).reshape(-1)
    reduced = vals + cols @ lam - mu
    return cols, vals, np.flatnonzero(reduced > tol * max(1.0, abs(mu)))


def _names(slack: np.ndarray, r: np.ndarray) -> str:
    short = np.flatnonzero(slack > 1e-9)
    return ", ".join(f"{u} (r_{u} = {r[u]:g}, short by {slack[u]:.3g})" for u in short[:10]) + (
        ", ..." if short.size > 10 else "")


def _infeasible(slack: np.ndarray, r: np.ndarray, why: str) -> InfeasibleLPError:
    return InfeasibleLPError(f"the LP is infeasible: the floors of workers {_names(slack, r)} "
                             f"cannot be met jointly ({why})")
