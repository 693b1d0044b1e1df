"""Exact pricing for weighted coverage by a MILP (HiGHS)::

    max Σ_e w_e z_e + Σ_u λ_u x_u   s.t.  z_e <= Σ_{u covers e} x_u,  0 <= z_e <= 1,
                                          Σ_u x_u = k,  x binary.

An element covered by a single worker needs no ``z``: its weight moves onto that
worker's ``x``; elements of weight 0 or covered by nobody are dropped.
"""

from __future__ import annotations

import highspy
import numpy as np
import scipy.sparse as sp

from fairsched.lp.pricing.milp import MilpPricing
from fairsched.utilities.coverage import Coverage


def swap_deltas(utility: Coverage, mask: np.ndarray) -> np.ndarray:
    """``f(S − u + v) − f(S)`` for members ``u`` (rows) and outsiders ``v`` (columns).

    With ``c_e`` = how many members cover ``e``: ``v`` gains the uncovered elements it
    covers, ``u`` loses the elements only it covers, except those ``v`` covers too.
    """
    incidence = utility.incidence
    count = np.asarray(mask.astype(float) @ incidence).ravel()
    inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
    uncovered = np.where(count == 0, utility.weights, 0.0)
    alone = np.where(count == 1, utility.weights, 0.0)
    gain = np.asarray(incidence[outside] @ uncovered).ravel()
    loss = np.asarray(incidence[inside] @ alone).ravel()
    members = incidence[inside]
    kept = members.multiply(alone) if sp.issparse(members) else members * alone
    shared = kept @ incidence[outside].T
    shared = shared.toarray() if sp.issparse(shared) else np.asarray(shared)
    return gain[None, :] - loss[:, None] + shared


class CoveragePricing(MilpPricing):
    """MILP pricing for :class:`~fairsched.utilities.Coverage`."""

    name = "coverage-milp"
    swap_deltas = staticmethod(swap_deltas)

    def __init__(self, utility: Coverage, k: int, **options):
        self.incidence = sp.csc_array(utility.incidence)  # (n, E)
        super().__init__(utility, k, **options)

    def build(self) -> None:
        super().build()
        weights = self.utility.weights
        degree = np.diff(self.incidence.indptr)
        rows = self.incidence.indices
        single = np.flatnonzero((degree == 1) & (weights > 0))
        np.add.at(self.x_cost, rows[self.incidence.indptr[single]], weights[single])
        self.shared = np.flatnonzero((degree >= 2) & (weights > 0))
        m = self.shared.size
        if m == 0:
            return
        first = self.n
        self.h.addCols(m, weights[self.shared], np.zeros(m), np.ones(m), 0, np.zeros(m, np.int32),
                       np.zeros(0, np.int32), np.zeros(0))
        sub = self.incidence[:, self.shared].tocsc()  # (n, m): column j lists the coverers of e
        counts = np.diff(sub.indptr)
        # row j: z_j − Σ_{u covers e_j} x_u <= 0
        starts = np.zeros(m, dtype=np.int32)
        np.cumsum(counts[:-1] + 1, out=starts[1:])
        index = np.empty(int(counts.sum()) + m, dtype=np.int32)
        value = np.empty(index.size)
        for j in range(m):  # per element; built once
            lo = starts[j]
            members = sub.indices[sub.indptr[j]: sub.indptr[j + 1]]
            index[lo] = first + j
            value[lo] = 1.0
            index[lo + 1: lo + 1 + members.size] = members
            value[lo + 1: lo + 1 + members.size] = -1.0
        self.h.addRows(m, np.full(m, -highspy.kHighsInf), np.zeros(m), index.size, starts, index, value)

    def start_values(self, x: np.ndarray) -> np.ndarray:
        if self.shared.size == 0:
            return np.zeros(0)
        covered = np.asarray(x.astype(float) @ self.incidence[:, self.shared].toarray()) > 0
        return covered.astype(float)
