"""Exact pricing for facility location by a MILP (HiGHS)::

    max Σ_i Σ_u sim_iu y_iu + Σ_u λ_u x_u   s.t.  y_iu <= x_u,  Σ_u y_iu <= 1,
                                                  Σ_u x_u = k,  x binary,  y >= 0.

Only pairs with ``sim_iu > 0`` get a ``y``.  ``y_iu <= x_u`` (rather than the aggregated
``Σ_i y_iu <= |points|·x_u``) keeps the LP relaxation tight (Cornuéjols, Fisher &
Nemhauser 1977).
"""

from __future__ import annotations

import highspy
import numpy as np

from fairsched.lp.pricing.milp import MilpPricing
from fairsched.utilities.facility_location import FacilityLocation


def swap_deltas(utility: FacilityLocation, mask: np.ndarray) -> np.ndarray:
    """``f(S − u + v) − f(S)`` for members ``u`` (rows) and outsiders ``v`` (columns).

    With ``cur_i`` the best and ``sec_i`` the second-best similarity of point ``i`` in
    ``S``: ``v`` adds ``Σ_i max(sim_iv − cur_i, 0)``; for the points ``u`` serves best,
    removing ``u`` adds ``min(0, max(sec_i, sim_iv) − cur_i)`` on top.
    """
    sim = utility.similarity
    inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
    chosen = sim[:, inside]
    order = np.argsort(-chosen, axis=1, kind="stable")
    owner = order[:, 0]
    cur = np.take_along_axis(chosen, order[:, :1], axis=1).ravel()
    sec = (np.take_along_axis(chosen, order[:, 1:2], axis=1).ravel() if inside.size > 1
           else np.zeros(sim.shape[0]))
    candidates = sim[:, outside]
    gain = np.maximum(candidates - cur[:, None], 0.0).sum(axis=0)
    drop = np.minimum(0.0, np.maximum(sec[:, None], candidates) - cur[:, None])
    owns = np.zeros((inside.size, sim.shape[0]))
    owns[owner, np.arange(sim.shape[0])] = 1.0
    return gain[None, :] + owns @ drop


class FacilityLocationPricing(MilpPricing):
    """MILP pricing for :class:`~fairsched.utilities.FacilityLocation`."""

    name = "facility-location-milp"
    swap_deltas = staticmethod(swap_deltas)

    def build(self) -> None:
        super().build()
        sim = self.utility.similarity  # (points, n)
        self.point, self.worker = np.nonzero(sim > 0)
        m = self.point.size
        if m == 0:
            return
        first = self.n
        self.h.addCols(m, sim[self.point, self.worker], np.zeros(m), np.ones(m), 0,
                       np.zeros(m, np.int32), np.zeros(0, np.int32), np.zeros(0))
        y = first + np.arange(m, dtype=np.int32)
        # y_iu − x_u <= 0
        starts = np.arange(0, 2 * m, 2, dtype=np.int32)
        index = np.empty(2 * m, dtype=np.int32)
        index[0::2], index[1::2] = y, self.worker
        value = np.tile([1.0, -1.0], m)
        self.h.addRows(m, np.full(m, -highspy.kHighsInf), np.zeros(m), index.size, starts, index, value)
        # Σ_u y_iu <= 1 for every point (y is grouped by point: np.nonzero is row-major)
        points = np.unique(self.point)
        counts = np.bincount(self.point)[points]
        starts = np.zeros(points.size, dtype=np.int32)
        np.cumsum(counts[:-1], out=starts[1:])
        self.h.addRows(points.size, np.full(points.size, -highspy.kHighsInf), np.ones(points.size),
                       m, starts, y, np.ones(m))

    def start_values(self, x: np.ndarray) -> np.ndarray:
        if self.point.size == 0:
            return np.zeros(0)
        sim = self.utility.similarity
        picked = np.where(x[None, :], sim, -1.0)
        best = np.argmax(picked, axis=1)
        return (x[self.worker] & (best[self.point] == self.worker)).astype(float)
