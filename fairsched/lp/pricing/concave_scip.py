"""Concave-of-modular pricing solved by SCIP, whose branch and bound cuts the concave terms itself.

The pricing problem for ``f(S) = Σ_j coef_j·φ(W_j·1_S)`` with ``φ = sqrt`` or ``log1p``::

    max Σ_j coef_j t_j + c·x   s.t.  t_j <= φ(W_j·x),  Σ x = k,  x binary,

with ``c = λ`` (the floors' duals).  Each row ``t_j <= φ(W_j·x)`` is convex (``φ`` is
concave), so SCIP (Bolusani et al., "The SCIP Optimization Suite 9.0", 2024) relaxes it by
gradient cuts separated at every node of one branch and bound: the outer approximation of
Duran & Grossmann (1986) inside the tree, as a MILP solver with lazy constraints would do it.

**Why a second solver.**  HiGHS has no nonlinear rows and (1.16) no lazy-constraint callback,
so :class:`~fairsched.lp.pricing.concave.ConcavePricing` solves the same outer approximation
by a *cut loop*: whenever the MILP's incumbent is a set its tangents over-estimate, the
tangents there are added and the MILP is solved again from its root.  On concave ``log1p``
(the ``concave-log1p`` case of ``benchmarks/bench_pricing.py``, seed 1) one call at the
master's duals made 8 such solves and 1,907 nodes in 82–84 s before it found its column
(``--trace``, three runs).  Replayed alone on SCIP, that call (captured in a scratch run) is solved to optimality in 11.3 s, or
16.9 s with SCIP's primal heuristics, which are therefore off: the call starts from the
pricing heuristic's best set.  End to end, the generator's seeds 0–3 are certified in
25–75 s against 50–114 s and one miss (``benchmarks/README.md``, "SCIP for concave of
modular").

**The certifying bound as a cutoff.**  Column generation passes ``enough``, the pricing
bound that already certifies its gap; only sets worth more can matter, so it is SCIP's
objective limit, and every node bounded by it is pruned instead of explored toward a better
incumbent (:mod:`fairsched.lp.pricing.milp` does the same in HiGHS).  End to end on the
generator's seeds 0–3 it took ``sqrt`` from 42.2 ± 5.9 s to 30.0 ± 3.9 s and ``log1p`` from
67.3 ± 3.9 s to 42.3 ± 2.1 s, every run faster (``benchmarks/README.md``, "The certifying
bound as a cutoff").

**The submodular cuts as a separator.**  SCIP's gradient cuts bound ``t_j`` by ``φ`` of the
*fractional* sum ``W_j·x``, which is loose where ``x`` is spread thinly over workers with few
features each; the submodular inequalities of :mod:`fairsched.lp.pricing.concave` (Nemhauser,
Wolsey and Fisher 1978, lifted by ``|S| = k``) bound it by what a ``k``-set can reach.  The
caller passes them as ``cuts``; a pyscipopt separator computes them at the LP optimum of every
node and adds those that bound ``t_j`` below ``min(t_j, φ(W_j·x))`` (where ``t_j`` is above
``φ(W_j·x)``, SCIP's own gradient cut takes it down, and a dense submodular row there only
makes the LPs dearer: with every violated cut added, the generator's instances took 1,152 to
1,582 rows per call and their calls 2-17 % longer; with the filter 56 to 247).  One call at the
relaxation's duals (``python benchmarks/bench_concave_cuts.py``, seed 0): sparse ``sqrt``
features 7.1 s and 1,169 nodes without, 2.4 s and 195 nodes with; sparse ``log1p`` 6.4 s
against 3.1 s; the generator's instances 3.0-4.9 s either way (0.89-0.93 times as fast).  End to end
(``python benchmarks/bench_pricing.py --seed S CASE``, 120 s): ``concave-sqrt-sparse`` 7.37e-3
against 2.49e-2 and ``concave-log1p-sparse`` 5.03e-3 against 1.02e-2 (seed 0), the generator's
seeds 0-3 certified as before, level or faster (``benchmarks/README.md``, "Submodular cuts in
SCIP's branch and bound").  Given as rows of the model from the start instead (computed at
HiGHS's LP and at the heuristic's set; tried and reverted, "SCIP for concave of modular"
there) they slowed the generator's instances; as a separator they come where SCIP's LP needs
them.

**No bound propagation of the concave rows.**  SCIP propagates each nonlinear row at every
node (bounds on ``t_j`` from those on ``x`` and back through ``φ``); here that propagation
fixes little that the LP with its gradient and submodular cuts does not bound already, and it
was the largest part of a call: 17.9 s of a 63.9 s call on worker-quality features (SCIP's
statistics).  The rows stay enforced by separation (``t_j <= φ(W_j·x)`` is convex, so a
gradient cut separates every point that violates it), only the propagation is off
(:data:`SCIP_PARAMS`).  One call at the relaxation's duals
(``python benchmarks/bench_scip_params.py``): 1.46-1.91 times as fast on the quality, sparse
and generator families (more nodes, each a half to a quarter of the time), and end to end
(``benchmarks/README.md``, "No bound propagation of the concave rows in SCIP").

**What the bound is worth.**  SCIP accepts a point whose nonlinear rows are violated by
up to its feasibility tolerance, so it solves a slight relaxation of the problem: its dual
bound stays an upper bound on the true maximum, and may exceed it by about that tolerance
per row.  The tolerance is lowered to the relative gap asked for (at most :data:`FEASTOL`,
at least SCIP's ``numerics/epsilon``), so that an optimal call counts as exact, and every set
SCIP returns is re-evaluated with ``f``.
"""

from __future__ import annotations

import importlib.util
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fairsched.extras import require
from fairsched.lp.pricing.base import bound_under_cutoff
from fairsched.utilities.concave_modular import CONCAVE

#: the curves SCIP is given (``φ(0) = 0``, concave, increasing): those of concave of modular
CURVES = tuple(CONCAVE)
#: SCIP's feasibility tolerance, at most (its default); lowered to the relative gap asked for
FEASTOL = 1e-6
#: a target at most this far (relative) above ``enough`` is raised to it (SCIP's primal bound
#: starts at the objective limit and counts as reaching any target up to it, within its epsilon)
PRIMAL_MARGIN = 1e-6
#: SCIP's parameters over its defaults (module docstring, "No bound propagation of the concave
#: rows"): ``constraints/nonlinear/propfreq = -1`` never propagates them
SCIP_PARAMS: dict[str, object] = {"constraints/nonlinear/propfreq": -1}
#: a cut of ``cuts`` (:func:`solve_concave`) is added where the LP's ``t_j`` exceeds it by this
#: (relative), SCIP's default feasibility tolerance
CUT_VIOLATION = 1e-6

#: ``cuts(x)``: rows ``t_j <= const + coef·x`` valid at every ``k``-set, for the LP point ``x``,
#: as ``(terms, const, coef)`` with ``terms`` indexing the terms with a positive coefficient
#: and some positive weight, in order, and ``coef`` of shape ``(rows, n)``
CutFamily = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class ScipAnswer:
    """One SCIP solve: the ``k``-sets of its solutions (best first; two solutions may share
    one, differing in ``t`` only), its certified upper bound
    on ``max Σ_j coef_j φ(W_j·x) + c·x`` (``inf`` when it proved nothing), its node count and
    how many of the caller's ``cuts`` it was given."""

    masks: np.ndarray
    upper_bound: float
    nodes: int
    cuts: int = 0


def scip_installed() -> bool:
    """Whether ``pyscipopt`` is installed (the ``scip`` extra); it is imported only when used."""
    return importlib.util.find_spec("pyscipopt") is not None


def solve_concave(W: np.ndarray, coef: np.ndarray, curve: str, cost: np.ndarray, k: int, *,
                  start: np.ndarray, rel_gap: float, stop: float = math.inf,
                  target: float | None = None, enough: float | None = None,
                  max_solutions: int = 10, cuts: CutFamily | None = None,
                  cut_frequency: int = 1) -> ScipAnswer:
    """``max_{|S|=k} Σ_j coef_j·φ(W_j·1_S) + cost(S)`` by SCIP (module docstring).

    ``start`` (a ``k``-set mask) is given as the first solution; ``stop`` is a
    ``time.perf_counter()`` deadline; SCIP stops at relative gap ``rel_gap`` and at the first
    solution worth ``target`` (``limits/primal``).  ``enough`` is SCIP's objective limit:
    only sets worth more are sought, every node bounded by it is pruned, and the bound
    returned is then at least ``enough`` (exactly ``enough`` when no set is worth more); a
    ``target`` at or below ``enough`` is raised just above it, so the first set SCIP accepts
    ends the solve.  ``cuts`` (optional) are separated at the LP optimum of every
    ``cut_frequency``-th depth of the tree (0: the root only) and added where violated
    (:data:`CUT_VIOLATION`).
    """
    if curve not in CURVES:
        raise ValueError(f"SCIP pricing handles the curves {CURVES}, not {curve!r}")
    scip = require("pyscipopt", "SCIP pricing")
    W = np.asarray(W, dtype=float)
    coef = np.asarray(coef, dtype=float)
    n = W.shape[1]
    model = scip.Model()
    model.hideOutput()
    model.setHeuristics(scip.SCIP_PARAMSETTING.OFF)
    x = [model.addVar(vtype="B") for _ in range(n)]
    model.addCons(scip.quicksum(x) == k)
    phi = scip.sqrt if curve == "sqrt" else (lambda s: scip.log(1.0 + s))
    rows = np.flatnonzero((W > 0).any(axis=1) & (coef > 0))
    features = W[rows]  # the terms' rows, in the order of t
    t = []
    for j in rows:
        members = np.flatnonzero(W[j] > 0)
        t.append(model.addVar(lb=0.0, ub=None))
        model.addCons(t[-1] <= phi(scip.quicksum(float(W[j, u]) * x[u] for u in members)))
    model.setObjective(scip.quicksum(float(coef[j]) * tj for j, tj in zip(rows, t))
                       + scip.quicksum(float(cost[u]) * x[u] for u in range(n) if cost[u] != 0.0),
                       "maximize")
    for name, value in SCIP_PARAMS.items():
        model.setParam(name, value)
    model.setParam("limits/gap", float(rel_gap))
    # a point may violate a row by the feasibility tolerance, which then shows as a gap
    model.setParam("numerics/feastol", min(FEASTOL, max(float(model.getParam("numerics/epsilon")), rel_gap)))
    if math.isfinite(stop):
        model.setParam("limits/time", max(1e-2, stop - time.perf_counter()))
    if enough is not None:
        # only sets worth more than enough matter (module docstring): nodes bounded by it are pruned
        model.setObjlimit(float(enough))
    if target is not None:
        # SCIP's primal bound starts at the objective limit, so a target not above it would
        # end the solve before its first node; every solution SCIP accepts is above it anyway
        floor = -math.inf if enough is None else float(enough) + PRIMAL_MARGIN * max(1.0, abs(float(enough)))
        model.setParam("limits/primal", max(float(target), floor))
    _give_start(model, x, t, features, curve, np.asarray(start, dtype=bool))
    separator = None
    if cuts is not None:
        separator = _separator(scip)(x, t, cuts, lambda point: CONCAVE[curve](features @ point))
        model.includeSepa(separator, "fairsched-cuts", "valid cuts given by the caller", priority=1000,
                          freq=cut_frequency)
    model.optimize()

    masks = []
    for solution in model.getSols()[:max_solutions]:
        mask = np.array([model.getSolVal(solution, v) > 0.5 for v in x])
        if mask.sum() == k:
            masks.append(mask)
    masks = np.array(masks, dtype=bool).reshape(-1, n)
    dual = float(model.getDualbound())
    upper = dual if math.isfinite(dual) and abs(dual) < 1e20 else math.inf
    upper = bound_under_cutoff(upper, enough, model.getStatus() == "infeasible")
    return ScipAnswer(masks, upper, int(model.getNNodes()), 0 if separator is None else separator.added)


def _give_start(model: object, x: list, t: list, W: np.ndarray, curve: str, start: np.ndarray) -> None:
    """Offer the ``k``-set ``start`` to SCIP as a complete solution (``t_j`` at ``φ(W_j·x)``)."""
    solution = model.createSol()
    for u, v in enumerate(x):
        model.setSolVal(solution, v, float(start[u]))
    for v, value in zip(t, CONCAVE[curve](W @ start.astype(float))):
        model.setSolVal(solution, v, float(value))
    model.addSol(solution, free=True)


def _separator(scip: object) -> type:
    """The SCIP separator class of :func:`solve_concave`'s ``cuts`` (``pyscipopt`` is imported
    only when SCIP is used, so the class is made then)."""

    class Separator(scip.Sepa):
        def __init__(self, x: list, t: list, cuts: CutFamily, terms_at: Callable[[np.ndarray], np.ndarray]):
            self.x, self.t, self.cuts, self.terms_at = x, t, cuts, terms_at
            self.added = 0

        def sepaexeclp(self) -> dict:
            model = self.model
            x = np.array([model.getSolVal(None, v) for v in self.x])
            # where t_j is above φ(W_j·x) SCIP's own gradient cut takes it down: a cut is only
            # worth a row where it bounds t_j below φ(W_j·x) too
            t = np.minimum([model.getSolVal(None, v) for v in self.t], self.terms_at(np.clip(x, 0.0, 1.0)))
            terms, const, coef = self.cuts(x)
            bound = const + coef @ x
            violated = np.flatnonzero(t[terms] - bound > CUT_VIOLATION * np.maximum(1.0, np.abs(bound)))
            for i in violated:
                row = model.createEmptyRowSepa(self, "submodular", lhs=None, rhs=float(const[i]), local=False)
                model.cacheRowExtensions(row)
                model.addVarToRow(row, self.t[terms[i]], 1.0)
                for u in np.flatnonzero(coef[i]):
                    model.addVarToRow(row, self.x[u], -float(coef[i, u]))
                model.flushRowExtensions(row)
                model.addCut(row)
                model.releaseRow(row)
            self.added += violated.size
            return {"result": scip.SCIP_RESULT.SEPARATED if violated.size else scip.SCIP_RESULT.DIDNOTFIND}

    return Separator
