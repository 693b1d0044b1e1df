"""The class relaxation: fills and prices for the accuracy utility where some workers do not fit.

For ``f(S) = g(L(S))`` with ``g`` concave (the accuracy utility of Li, Liu and Ji,
"Federated Learning with Fair Worker Selection: A Multi-Round Submodular Maximization
Approach"), a *giant* is a worker too large for a set at the common level ``L·x``
(:func:`~fairsched.lp.pricing.balanced.level_classes`).  Group the sets of any distribution
``p`` by the giant they hold, ``C ∈ {∅, {G_1}, ..., {G_m}}``, with weight
``w_C = Σ_{S∈C} p_S`` and member marginals ``q_{C,u} = Σ_{S∈C, u∈S} p_S``.  Jensen's inequality
within each group gives

    ``Σ_S p_S g(L(S)) <= Σ_C w_C·g(M_C / w_C)``,  ``M_C = w_C·L(C) + Σ_u L_u q_{C,u}``,

and ``(w, q)`` satisfies ``Σ_u q_{C,u} = (k − |C|)·w_C``, ``0 <= q_{C,u} <= w_C``,
``Σ_C q_{C,u} >= r_u`` and ``w_{G} >= r_G``, ``Σ_C w_C = 1``.  Maximising the right-hand
side over these constraints (*the class relaxation*) is a concave programme: ``w·g(M/w)`` is
the perspective of ``g``, and its hypograph is cut out by the tangents
``t_C <= w_C·(g(ℓ) − g'(ℓ)·ℓ) + g'(ℓ)·M_C``, one per level ``ℓ``, so HiGHS solves it as an
LP to which the tangent at each class's current level is added until none is violated
(Kelley's cutting planes, which here end in two or three rounds).

It gives two things the greedy classes of ``level_classes`` (each giant filled from the
smallest workers) do not:

- **fills**: the relaxation's ``q_C / w_C`` are marginals for each class whose sizes are
  balanced across the classes, not only within them.  On a Pareto draw with five giants
  (``n = 1,000``, ``k = 50``, ``Σ r = k``) they are worth 0.8629424, the greedy fills
  0.8629395 (``benchmarks/bench_balanced.py``);
- **prices**: the duals ``λ >= 0`` of the floor rows.  Any ``λ >= 0`` gives the certified
  bound ``max_{|S|=k} [f(S) + λ(S)] − λ·r`` once the pricing finds that maximum exactly, and
  at these duals the bound is at most the relaxation's value (the relaxation's Lagrangian
  maximises over fractional fills, a superset of the sets).  On that draw the bound is
  0.86294242, where the greedy classes' prices (``level_duals``) certify only 0.86296905:
  the gap left there was the bound's, not the master's.

Sets with two giants are not a class here (``level_classes`` makes classes only while the
giants' marginals sum to less than 1); the prices stay valid whatever the optimum's shape,
because the bound is always recomputed by the exact pricing.

The same relaxation serves workers that fit alone but no two of which fit one set at the
level (:func:`~fairsched.lp.pricing.balanced._large`), where there is no giant: each gets a
class of its own (``balanced_pool``).

Size: a giant's class may take only the ``FILL_CANDIDATES``-fold of its ``k − 1`` places from
the smallest workers (doubled while a class uses the largest quarter of them; a worker whose
floor the rest class cannot hold is always a candidate), the rest class every worker, so the
LP has ``O(m²·k + n)`` columns; beyond ``MAX_COLUMNS`` it is not solved (so never beyond
60,000 workers, where the greedy classes stand).  Measured
(``benchmarks/bench_balanced.py``): 0.04–0.3 s at ``n = 1,000``, about 5 s at ``n = 10,000``
with nine giants.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

from fairsched.solvers.lp import new_highs, set_option
from fairsched.utilities.accuracy import AccuracyUtility

#: a giant's class draws its fill from the smallest ``FILL_CANDIDATES·(k − 1)·m + k`` workers
FILL_CANDIDATES = 2
#: times the candidates are doubled when a class reaches their largest quarter
WIDEN_ROUNDS = 3
#: fill columns at most: at ``n = 10,000`` with 27 classes (157,071 columns) the first simplex
#: solve took 125 s
MAX_COLUMNS = 60_000
#: tangent rounds at most
CUT_ROUNDS = 40
#: a class's tangent is added while ``t_C`` exceeds ``w_C·g(level_C)`` by more than this
#: (relative to the value): ten times HiGHS's feasibility tolerance, which a row may keep
CUT_TOLERANCE = 1e-9
#: HiGHS's primal and dual feasibility tolerances
FEASIBILITY = 1e-10
#: starting tangents per class, at these multiples of its greedy level
START_LEVELS = (0.8, 0.9, 1.0, 1.1, 1.25)


@dataclass(frozen=True)
class ClassRelaxation:
    """The class relaxation's optimum (module docstring).

    ``weights[i]`` and ``fills[i]`` are the weight and member marginals (the giant at 1) of
    giant ``giants[i]``'s class, ``rest`` the marginals of the sets without a giant, whose
    weight is ``1 − Σ weights``; ``value`` is ``Σ_C w_C·g(level_C)`` at that optimum and
    ``upper`` the LP's value over the tangents (``>= value``); ``prices`` the floor duals.
    """

    giants: np.ndarray
    weights: np.ndarray
    fills: np.ndarray
    rest: np.ndarray
    value: float
    upper: float
    prices: np.ndarray


def class_relaxation(utility: AccuracyUtility, k: int, r: np.ndarray, giants: np.ndarray, weights: np.ndarray,
                     levels: np.ndarray, *, deadline: float | None = None) -> ClassRelaxation | None:
    """Solve the class relaxation for ``giants`` (module docstring).

    ``weights`` are the classes' ``x`` (the rest's weight is at most ``1 − Σ weights``);
    ``levels`` (``m + 1``,) the classes' mean sizes to start the tangents at (the giants'
    classes, then the rest: those of ``level_classes``).  ``deadline`` is a
    ``time.perf_counter()`` value.  None when HiGHS does not reach an optimum in time, so
    that the caller keeps the greedy classes.
    """
    L = np.asarray(utility.sizes, dtype=float)
    r = np.asarray(r, dtype=float)
    giants = np.asarray(giants, dtype=np.int64)
    others = np.setdiff1d(np.arange(L.size), giants)
    by_size = others[np.argsort(L[others], kind="stable")]
    # a worker whose floor exceeds the rest's largest weight must also sit in giants' sets
    crowded = others[r[others] > 1.0 - float(np.sum(weights)) - 1e-12]
    count = min(others.size, FILL_CANDIDATES * (k - 1) * giants.size + k)
    relaxation = None
    for _ in range(WIDEN_ROUNDS + 1):
        if giants.size * count + others.size > MAX_COLUMNS:
            return relaxation
        candidates = np.union1d(by_size[:count], crowded)
        candidates = candidates[np.argsort(L[candidates], kind="stable")]
        solved = _solve(utility, k, r, giants, others, candidates, np.asarray(levels, dtype=float), deadline)
        if solved is None:  # out of time, or HiGHS failed
            return relaxation
        if solved is not _INFEASIBLE:
            relaxation = solved
            # a class reaching the largest quarter of the smallest workers may want more of them
            if not (relaxation.fills[:, by_size[(3 * count) // 4:count]] > 1e-9).any():
                return relaxation
        if candidates.size == others.size:
            return relaxation
        count = min(others.size, 2 * count)
    return relaxation


#: what :func:`_solve` returns when the candidates cannot fill the giants' sets
_INFEASIBLE = object()


class _Layout:
    """Column positions: each giant's class over the candidates, the rest over every other
    worker, then the weights ``w`` and the epigraph variables ``t`` (giants first, rest last)."""

    def __init__(self, giants: int, candidates: int, others: int) -> None:
        self.giants, self.candidates, self.others = giants, candidates, others
        self.q_rest = giants * candidates
        self.w = self.q_rest + others
        self.t = self.w + giants + 1
        self.columns = self.t + giants + 1

    def span(self, c: int) -> slice:
        """Class ``c``'s ``q`` columns (``c = giants``: the rest)."""
        if c == self.giants:
            return slice(self.q_rest, self.q_rest + self.others)
        return slice(c * self.candidates, (c + 1) * self.candidates)


def _solve(utility: AccuracyUtility, k: int, r: np.ndarray, giants: np.ndarray, others: np.ndarray,
           candidates: np.ndarray, levels: np.ndarray, deadline: float | None) -> ClassRelaxation | object | None:
    """One LP over the marginals ``q_C`` and weights ``w_C`` (module docstring), with the
    tangents added until none is violated."""
    L = np.asarray(utility.sizes, dtype=float)
    m, c, o = giants.size, candidates.size, others.size
    lay = _Layout(m, c, o)
    position = np.full(L.size, -1)
    position[others] = np.arange(o)
    member_sizes = [L[candidates]] * m + [L[others]]
    base = np.append(L[giants], 0.0)
    places = np.append(np.full(m, k - 1.0), float(k))

    # rows: places (m + 1), floors of the others (o), giants' floors (m), Σ w = 1, q <= w
    floor_row, giant_row = m + 1, m + 1 + o
    sum_row, cap_row = giant_row + m, giant_row + m + 1
    rows_n = cap_row + lay.w
    q_cols = np.arange(lay.w)
    q_class = np.append(np.repeat(np.arange(m), c), np.full(o, m))
    q_worker = np.append(np.tile(position[candidates], m), np.arange(o))
    w_cols = lay.w + np.arange(m + 1)
    entries = [
        (q_class, q_cols, np.ones(lay.w)),
        (floor_row + q_worker, q_cols, np.ones(lay.w)),
        (cap_row + q_cols, q_cols, np.ones(lay.w)),
        (np.arange(m + 1), w_cols, -places),
        (giant_row + np.arange(m), w_cols[:m], np.ones(m)),
        (np.full(m + 1, sum_row), w_cols, np.ones(m + 1)),
        (cap_row + q_cols, lay.w + q_class, -np.ones(lay.w)),
    ]
    rows, cols, vals = (np.concatenate(part) for part in zip(*entries))
    matrix = sp.csc_matrix((vals, (rows, cols)), shape=(rows_n, lay.columns))
    inf = highspy.kHighsInf
    h = new_highs()
    set_option(h, "solver", "simplex")
    # the tangents' slack is what the relaxation's value is certified to: HiGHS's default
    # feasibility tolerance (1e-7) let a tangent row stay violated by 2e-8 round after round
    set_option(h, "primal_feasibility_tolerance", FEASIBILITY)
    set_option(h, "dual_feasibility_tolerance", FEASIBILITY)
    status = h.passModel(lay.columns, rows_n, matrix.nnz, int(highspy.MatrixFormat.kColwise),
                         int(highspy.ObjSense.kMaximize), 0.0, np.append(np.zeros(lay.t), np.ones(m + 1)),
                         np.append(np.zeros(lay.t), np.full(m + 1, -inf)), np.full(lay.columns, inf),
                         np.concatenate([np.zeros(m + 1), r[others], r[giants], [1.0], np.full(lay.w, -inf)]),
                         np.concatenate([np.zeros(m + 1), np.ones(o), np.ones(m), [1.0], np.zeros(lay.w)]),
                         matrix.indptr.astype(np.int32), matrix.indices.astype(np.int32), matrix.data,
                         np.zeros(lay.columns, dtype=np.int32))
    if status == highspy.HighsStatus.kError:
        return None

    def add_tangents(classes: np.ndarray, at: np.ndarray) -> None:
        # t_C <= w_C·(g(ℓ) − g'(ℓ)·ℓ + g'(ℓ)·L(C)) + g'(ℓ)·Σ_u L_u q_{C,u}
        slope = utility.slope(at)
        index = [np.concatenate([[lay.t + cls, lay.w + cls], np.arange(lay.w)[lay.span(cls)]]) for cls in classes]
        value = [np.concatenate([[1.0, -(utility.curve(level) - d * level + d * base[cls])], -d * member_sizes[cls]])
                 for cls, level, d in zip(classes, at, slope)]
        starts = np.cumsum([0] + [len(i) for i in index[:-1]]).astype(np.int32)
        flat = np.concatenate(index).astype(np.int32)
        h.addRows(classes.size, np.full(classes.size, -inf), np.zeros(classes.size), flat.size, starts, flat,
                  np.concatenate(value))

    classes = np.arange(m + 1)
    start = np.asarray(levels, dtype=float)
    add_tangents(np.repeat(classes, len(START_LEVELS)), np.outer(start, START_LEVELS).ravel())
    for _ in range(CUT_ROUNDS):
        if deadline is not None:
            left = deadline - time.perf_counter()
            if left <= 0:
                return None
            set_option(h, "time_limit", float(h.getRunTime()) + left)
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kInfeasible:
            return _INFEASIBLE
        if status != highspy.HighsModelStatus.kOptimal:
            return None
        solution = np.asarray(h.getSolution().col_value)
        weights = solution[w_cols]
        epigraph = solution[lay.t:]
        mass = base * weights + np.array([member_sizes[cls] @ solution[lay.span(cls)] for cls in classes])
        held = weights > 0
        level = np.where(held, mass / np.where(held, weights, 1.0), start)
        worth = np.where(held, weights * utility.curve(np.maximum(level, 1e-300)), 0.0)
        violated = held & (epigraph - worth > CUT_TOLERANCE * max(1.0, float(abs(epigraph.sum()))))
        if not violated.any():
            break
        add_tangents(classes[violated], level[violated])
    else:
        return None
    duals = -np.asarray(h.getSolution().row_dual)  # a maximum: raising a floor lowers it
    prices = np.zeros(L.size)
    prices[others] = np.maximum(0.0, duals[floor_row:floor_row + o])
    prices[giants] = np.maximum(0.0, duals[giant_row:giant_row + m])
    fills = [solution[lay.span(cls)] / weights[cls] if weights[cls] > 0 else np.zeros_like(solution[lay.span(cls)])
             for cls in classes]
    fill_rows = np.zeros((m, L.size))
    for i in range(m):
        fill_rows[i, candidates] = np.clip(fills[i], 0.0, 1.0)
        fill_rows[i, giants[i]] = 1.0
    rest = np.zeros(L.size)
    rest[others] = np.clip(fills[m], 0.0, 1.0)
    return ClassRelaxation(giants, weights[:m].copy(), fill_rows, rest, float(worth.sum()), float(epigraph.sum()),
                           prices)
