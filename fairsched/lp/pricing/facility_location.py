"""Exact pricing for facility location by a Benders reformulation in HiGHS.

``f(S) = Σ_i max_{u∈S} s_iu``.  One variable ``θ_i`` per point and, for thresholds ``τ``
among the point's similarities, the Benders optimality cuts of its assignment subproblem
(Benders 1962; for facility location, Magnanti & Wong 1981, and Cordeau, Furini & Ljubić
2019, "Benders decomposition for very large scale partial set covering and maximal
covering location problems")::

    max Σ_i θ_i + λ·x   s.t.  θ_i <= τ + Σ_u (s_iu − τ)^+ x_u   (point i, threshold τ),
                              Σ_u x_u = k,  x binary.

Each cut holds at every ``k``-set (``max_{u∈S} s_iu <= τ + Σ_{u∈S} (s_iu − τ)^+``) and is
tight where ``τ`` is the point's best similarity in ``S``, so with all thresholds this is the
radius ("sorted threshold") formulation of García, Labbé & Marín (2011), with the LP bound of
the classical ``y_iu <= x_u`` model (Cornuéjols, Fisher & Nemhauser 1977), but only ``n + P``
variables.  The cuts are generated: at the LP optimum (the most violated threshold of a
point is where the cumulative ``x`` of its workers, by decreasing similarity, reaches 1) and
at each MILP incumbent, by the cut loop of :class:`~fairsched.lp.pricing.milp.MilpPricing`;
they hold for every λ and are kept across calls.  (The classical model at ``n = 200``, 100
points, 20,000 ``y``: 12-36 s per call; this one: 4-10 s, see the benchmarks.)

Reductions: every ``k``-set contains one of the ``n − k + 1`` workers most similar to a
point, so ``s_i(n−k+1)`` (its ``(n − k + 1)``-th largest similarity) is a floor moved to a
constant; points left identical are merged (weight = multiplicity), points with no positive
similarity left are dropped and points with one are modular.

Why cuts and not the full sorted-threshold model: with every threshold the model has up
to ``n − k + 1`` rows per point (72,200 rows for ``n = 400``, ``k = 40``, 200 points, and
``O(points·n²)`` nonzeros written on ``x``); the cuts reach the same LP bound
with 570-950 rows.  The bound is what limits this kind, not the model size: on that
instance at the relaxation duals the root LP bound is 213.84 against the optimum 211.95
(0.9 %), and each of the three MILP solves of the cut loop explores 1,000-2,000 nodes
(26 s CPU for the call; HiGHS options tried: reliability branching, no presolve, no
heuristics, all slower).  The local search's swap values sum the points each member
serves by grouping rows (``np.add.reduceat``), with the best and second-best member found
by ``argmax`` rather than a sort: 1.4x faster per call at ``n = 400``, ``k = 40`` than the
sparse product built per call before, itself 5x faster than a dense product, which spent
its time in BLAS (``python benchmarks/bench_swap_deltas.py --against 2e8456c``; the values
agree to 2e-14, not bitwise, since the sums are taken in another order).

**Cuts from the start.**  Inside branch and bound a node's LP has only the cuts found so far,
found at the root's and the incumbents' points; where branching moves a point's best
selected worker past every threshold cut of that point, the node's LP over-estimates
``θ_i`` and the node is not pruned.  So each point's thresholds at its :data:`START_LEVELS`
largest similarities (distinct, below the largest) are rows of the model from the start:
``(START_LEVELS − 1)·P`` rows at most, with 1 to ``START_LEVELS − 1`` nonzeros each (2,200
rows and 13,200 nonzeros for 200 points), against the ``O(P·n)`` rows of the full
formulation.  The call that certifies facility location ``n = 400`` (seed 0), replayed on
fresh models (``python benchmarks/bench_start_cuts.py``, the call made at 53.2 s of a 250 s
run): 81.9 s, 4 cut-loop rounds and 22,592 nodes with 12 levels, against 195.6 s, 13 rounds
and 54,118 nodes with none.  Column generation on that instance, with the default 120 s
limit (``python benchmarks/bench_pricing.py facility-location``): certified in 114.5-118.2 s
in three of four runs, 3.46e-3 at the limit in the other (4.24e-3 at the limit before); with
600 s, in 115.9 s against 272.7 s.  Only
:class:`FacilityLocationPricing` starts with them: in a mixture
(:class:`~fairsched.lp.pricing.mixture.MixturePricing`), whose calls are many and short,
the coverage + facility-location mixture of ``benchmarks/bench_pricing.py`` took longer with
them on each of its five seeds (by 4.5-25 s, one to 6.54e-4 at the 120 s limit), though
repeats vary as much; and on the facility-location families nothing was tuned on, whose bound
is the relaxation's, every LP is dearer for nothing (gaps 7-27 % wider at 120 s;
``benchmarks/README.md``, "Facility location: cuts from the start").
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fairsched.lp.pricing.milp import MilpModel, MilpPricing, Term
from fairsched.utilities.facility_location import FacilityLocation

#: relative amount by which θ_i must exceed its point's value to be cut
CUT_TOLERANCE = 1e-10
#: in :class:`FacilityLocationPricing` (not a mixture's term), each point's cuts at thresholds
#: ``τ`` among its this many largest similarities are rows of the model from the start
#: (module docstring, "Cuts from the start")
START_LEVELS = 12
#: HiGHS options of :class:`FacilityLocationPricing`'s model over
#: :data:`fairsched.lp.pricing.milp.HIGHS_OPTIONS` (none: reliability branching, ``{"mip_pscost_minreliable":
#: 1}``, was measured and not kept; ``benchmarks/README.md``, "The certifying call's cut loop, threads and
#: branching")
HIGHS_OPTIONS: dict[str, object] = {}


def swap_deltas(utility: FacilityLocation, mask: np.ndarray) -> np.ndarray:
    """``f(S − u + v) − f(S)`` for members ``u`` (rows) and outsiders ``v`` (columns).

    With ``cur_i`` the best and ``sec_i`` the second-best similarity of point ``i`` in
    ``S``: ``v`` adds ``Σ_i max(sim_iv − cur_i, 0)``; for the points ``u`` serves best,
    removing ``u`` adds ``min(0, max(sec_i, sim_iv) − cur_i)`` on top.
    """
    sim = utility.similarity
    inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
    points = sim.shape[0]
    chosen = sim[:, inside]
    every = np.arange(points)
    owner = chosen.argmax(axis=1)  # the first best member, as a stable sort would give
    cur = chosen[every, owner]
    if inside.size > 1:
        chosen[every, owner] = -np.inf
        sec = chosen.max(axis=1)
    else:
        sec = np.zeros(points)
    # one (points, outsiders) array, reused in place: sim − cur, then the drop
    excess = sim[:, outside]
    np.subtract(excess, cur[:, None], out=excess)
    gain = np.maximum(excess, 0.0).sum(axis=0)
    # max(sec, sim) − cur == max(sec − cur, sim − cur) exactly (rounding is monotone)
    np.maximum(excess, (sec - cur)[:, None], out=excess)
    drop = np.minimum(excess, 0.0, out=excess)
    # Σ over the points each member serves best, in index order: rows of drop grouped by
    # owner and summed per group (a sparse product built per call spent most of its time in
    # scipy's constructor; the dense (|S|, points) product in BLAS)
    by_owner = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=inside.size)
    served = np.flatnonzero(counts)
    removal = np.zeros((inside.size, outside.size))
    if served.size:
        starts = np.concatenate([[0], np.cumsum(counts[served])[:-1]])
        removal[served] = np.add.reduceat(drop[by_owner], starts, axis=0)
    return gain[None, :] + removal


class FacilityTerm(Term):
    """``Σ_i max_{u∈S} s_iu`` by Benders cuts (module docstring)."""

    lazy = True

    def __init__(self, similarity: np.ndarray, k: int, start_levels: int = 1):
        self.similarity = np.asarray(similarity, dtype=float)
        self.k = k
        #: each point's cuts at its this many largest similarities are rows from the start
        self.start_levels = int(start_levels)

    def build(self, model: MilpModel, weight: float) -> None:
        sim = self.similarity
        n = sim.shape[1]
        floor = -np.partition(-sim, n - self.k, axis=1)[:, n - self.k]
        model.offset += weight * float(floor.sum())
        residual = np.maximum(sim - floor[:, None], 0.0)
        alive = residual.max(axis=1) > 0
        rows, multiplicity = np.unique(residual[alive], axis=0, return_counts=True)
        positive = (rows > 0).sum(axis=1)
        lone = positive == 1
        if lone.any():
            u = rows[lone].argmax(axis=1)
            np.add.at(model.x_cost, u, weight * multiplicity[lone] * rows[lone].max(axis=1))
        self.residual = np.ascontiguousarray(rows[~lone])
        self.multiplicity = multiplicity[~lone].astype(float)
        self.order = np.argsort(-self.residual, axis=1, kind="stable")
        self.sorted = np.take_along_axis(self.residual, self.order, axis=1)
        m = self.residual.shape[0]
        self.columns = model.add_columns(weight * self.multiplicity, np.zeros(m),
                                         self.sorted[:, 0] if m else np.zeros(0))
        levels = min(self.start_levels, self.sorted.shape[1])
        if m and levels > 1:
            # every point's cuts at its best few similarities, as permanent rows (module docstring)
            self.add_threshold_rows(model, np.arange(1, levels))

    def add_threshold_rows(self, model: MilpModel, positions: np.ndarray) -> int:
        """Every point's cuts at the thresholds ``τ`` at these positions of its similarities in
        decreasing order (0: the largest; positions from 1 up), where ``τ`` is positive and
        below the one before it; how many rows were added (point by point)."""
        positions = np.asarray(positions, dtype=np.int64)
        positions = positions[(positions > 0) & (positions < self.sorted.shape[1])]
        m = self.sorted.shape[0]
        point, level = np.repeat(np.arange(m), positions.size), np.tile(positions, m)
        tau = self.sorted[point, level]
        distinct = (tau > 0) & (tau < self.sorted[point, level - 1])
        return self.add_cuts(model, point[distinct], tau[distinct])

    def start(self, x: np.ndarray) -> np.ndarray:
        if self.residual.shape[0] == 0:
            return np.zeros(0)
        return self.residual[:, x].max(axis=1) if x.any() else np.zeros(self.residual.shape[0])

    def separate(self, model: MilpModel, x: np.ndarray, own: np.ndarray) -> int:
        return self.add_cuts(model, *self.violated(x, own))

    def violated(self, x: np.ndarray, own: np.ndarray, tolerance: float = CUT_TOLERANCE) -> tuple[np.ndarray, np.ndarray]:
        """The points whose ``θ_i`` (``own``) exceeds the most violated cut at ``x`` by more than
        ``tolerance`` (relative), and that cut's threshold ``τ`` for each: where the cumulative
        ``x`` of the point's workers, by decreasing similarity, reaches 1 (module docstring)."""
        m = self.residual.shape[0]
        if m == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        ordered = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)[self.order]
        reach = np.cumsum(ordered, axis=1) >= 1.0 - 1e-9
        level = np.where(reach.any(axis=1), reach.argmax(axis=1), self.residual.shape[1] - 1)
        tau = self.sorted[np.arange(m), level]
        value = tau + (np.maximum(self.sorted - tau[:, None], 0.0) * ordered).sum(axis=1)
        over = np.flatnonzero(own - value > tolerance * np.maximum(1.0, value))
        return over, tau[over]

    def add_cuts(self, model: MilpModel, points: np.ndarray, tau: np.ndarray) -> int:
        """Rows ``θ_i − Σ_u (s_iu − τ)^+ x_u <= τ`` for the given (point, τ) not in the model
        (cuts of its pool, keyed by both)."""

        def rows(fresh: np.ndarray) -> tuple[np.ndarray, sp.csr_array]:
            which, level = points[fresh], tau[fresh]
            excess = self.residual[which] - level[:, None]
            row, col = np.nonzero(excess > 0)
            return level, model.difference_rows(self.columns[which], row, col, excess[row, col])

        return model.add_cuts([(self, int(i), float(t)) for i, t in zip(points, tau)], rows)


class FacilityLocationPricing(MilpPricing):
    """MILP pricing for :class:`~fairsched.utilities.FacilityLocation`."""

    name = "facility-location-milp"
    swap_deltas = staticmethod(swap_deltas)

    def make_terms(self, utility: FacilityLocation) -> list[tuple[float, Term]]:
        return [(1.0, FacilityTerm(utility.similarity, self.k, START_LEVELS))]

    def highs_options(self) -> dict[str, object]:
        return dict(HIGHS_OPTIONS)
