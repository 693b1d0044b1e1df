"""Exact pricing for weighted coverage by a MILP (HiGHS)::

    max Σ_e w_e z_e + Σ_u λ_u x_u   s.t.  z_e <= Σ_{u covers e} x_u,  0 <= z_e <= 1,
                                          Σ_u x_u = k,  x binary.

The rows ``z_e <= Σ_{u covers e} x_u`` are the tight (per-element) form of maximum coverage;
its LP relaxation is the standard one of maximum coverage (Nemhauser & Wolsey 1988, §II.5).
The model is reduced before it is built:

- elements of weight 0 or covered by nobody are dropped;
- an element covered by a single worker needs no ``z``: its weight moves onto that
  worker's ``x``;
- an element covered by more than ``n − k`` workers is covered by every ``k``-set: its
  weight is a constant;
- elements with the same set of coverers are merged into one ``z`` with the summed weight.

Each call starts HiGHS from the greedy + local-search set (``setSolution``), stops at the
oracle's ``deadline`` / ``time_budget`` (HiGHS ``time_limit``), and reports HiGHS's dual
bound as the certified ``upper_bound`` when it stops early
(:class:`~fairsched.lp.pricing.milp.MilpPricing`).  On the benchmark instance (``n =
1,000``, ``k = 50``, 2,000 elements, ``benchmarks/bench_pricing.py``) the call at the
relaxation duals is exact in 0.6 s and ``fairsched.optimum(..., gap=1e-4)`` is certified
optimal in 24 iterations, 17.5 s CPU (41 s wall on the shared 2-core machine at load 10).
The local search's swap values and the gains use the sparse incidence only (``O(nnz)``).
"""

from __future__ import annotations

import numpy as np

from fairsched.lp.pricing.milp import MilpModel, MilpPricing, Term
from fairsched.solvers.columns import row_positions
from fairsched.utilities.coverage import Coverage


def swap_deltas(utility: Coverage, mask: np.ndarray) -> np.ndarray:
    """``f(S − u + v) − f(S)`` for members ``u`` (rows) and outsiders ``v`` (columns).

    With ``c_e`` = how many members cover ``e``: ``v`` gains the uncovered elements it
    covers, ``u`` loses the elements only it covers, except those ``v`` covers too.
    """
    incidence = utility.sparse_incidence()  # products in O(nnz), not O(|S|·n·E)
    coverers = utility.coverers()
    weights = utility.weights
    count = coverers @ mask.astype(float)
    inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
    uncovered = np.where(count == 0, weights, 0.0)
    # every worker's gain, then the outsiders': one product, where selecting the outsiders'
    # rows first built a new sparse matrix per call (most of the local search's time at n = 100)
    gain = (incidence @ uncovered)[outside]
    # An element covered by one member u only is lost with u unless v covers it too.
    lone = np.flatnonzero((count == 1) & (weights != 0))
    sizes, positions = row_positions(coverers.indptr, lone)  # rows read in place, no submatrix
    element, who = np.repeat(np.arange(lone.size), sizes), coverers.indices[positions]
    is_member = mask[who]
    owner = np.empty(lone.size, dtype=np.int64)
    owner[element[is_member]] = who[is_member]
    position_in = np.full(mask.size, -1, dtype=np.int64)
    position_in[inside] = np.arange(inside.size)
    position_out = np.full(mask.size, -1, dtype=np.int64)
    position_out[outside] = np.arange(outside.size)
    lone_weight = weights[lone]
    loss = np.bincount(position_in[owner], weights=lone_weight, minlength=inside.size)
    pair = position_in[owner[element[~is_member]]] * outside.size + position_out[who[~is_member]]
    shared = np.bincount(pair, weights=lone_weight[element[~is_member]],
                         minlength=inside.size * outside.size).reshape(inside.size, outside.size)
    return gain[None, :] - loss[:, None] + shared


class CoverageTerm(Term):
    """``Σ_e w_e·[e covered]`` as ``z_e <= Σ_{u covers e} x_u`` after the module's reductions."""

    def __init__(self, utility: Coverage, k: int):
        self.utility = utility
        self.k = k

    def build(self, model: MilpModel, weight: float) -> None:
        coverers = self.utility.coverers()  # (E, n) CSR
        weights = weight * self.utility.weights
        degree = np.diff(coverers.indptr)
        n = model.n
        useful = (weights > 0) & (degree > 0)
        model.offset += float(weights[useful & (degree > n - self.k)].sum())
        # (with k = n every covered element is in the offset already: not again in x's cost)
        single = np.flatnonzero(useful & (degree == 1) & (degree <= n - self.k))
        np.add.at(model.x_cost, coverers.indices[coverers.indptr[single]], weights[single])
        shared = np.flatnonzero(useful & (degree >= 2) & (degree <= n - self.k))
        groups: dict[bytes, int] = {}
        first: list[int] = []
        merged: list[float] = []
        for e in shared:  # merge elements with the same coverers; built once
            key = coverers.indices[coverers.indptr[e]: coverers.indptr[e + 1]].tobytes()
            slot = groups.setdefault(key, len(first))
            if slot == len(first):
                first.append(int(e))
                merged.append(0.0)
            merged[slot] += float(weights[e])
        self.elements = np.array(first, dtype=np.int64)
        m = self.elements.size
        self.columns = model.add_columns(np.array(merged), np.zeros(m), np.ones(m))
        if m == 0:
            return
        sub = coverers[self.elements]  # row j: the coverers of element j
        row = np.repeat(np.arange(m), np.diff(sub.indptr))
        # row j: z_j − Σ_{u covers e_j} x_u <= 0
        model.add_rows(np.zeros(m), model.difference_rows(self.columns, row, sub.indices, np.ones(sub.nnz)))
        self._sub = sub

    def start(self, x: np.ndarray) -> np.ndarray:
        if self.elements.size == 0:
            return np.zeros(0)
        return (np.asarray(self._sub @ x.astype(float)).ravel() > 0).astype(float)


class CoveragePricing(MilpPricing):
    """MILP pricing for :class:`~fairsched.utilities.Coverage`."""

    name = "coverage-milp"
    swap_deltas = staticmethod(swap_deltas)
    wished_start = True
    #: the sweeps of swaps between rounds (:mod:`~fairsched.lp.pricing.round_swaps`) keep
    #: lifting covers by discs long after the round-by-round swaps stall, and the master's
    #: first solve over the swept schedule's sets lifts it further (``coverage-geometric``
    #: of ``benchmarks/bench_pricing.py`` at 120 s: 1.31e-2 at 0.1 of the time, 1.06e-2 at
    #: 0.25, 9.88e-3 at 0.4; ``coverage-powerlaw`` 1.21e-2 at 0.1, 8.24e-3 at 0.4;
    #: ``benchmarks/README.md``, "Sweeps of swaps between rounds")
    schedule_share = 0.4

    def make_terms(self, utility: Coverage) -> list[tuple[float, Term]]:
        return [(1.0, CoverageTerm(utility, self.k))]
