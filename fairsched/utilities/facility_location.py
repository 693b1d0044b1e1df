"""Facility location: how well the selected workers represent a set of points.

``f(S) = Σ_i max_{u∈S} similarity[i][u]`` (0 for ``S = ∅``), with non-negative
similarities; rows are points, columns are workers.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction, as_index_set
from fairsched.utilities.validation import as_masks, check_matrix, read_table, row_chunks


class FacilityLocation(SetFunction):
    """``f(S) = Σ_i max_{u∈S} sim[i, u]``, ``f(∅) = 0``; ``sim >= 0`` of shape (points, workers).

    Marginal gains: ``f(S ∪ {u}) − f(S) = Σ_i max(sim[i, u] − cur_i, 0)`` with
    ``cur_i = max_{v∈S} sim[i, v]`` (0 for ``S = ∅``).
    """

    kind = "facility-location"

    def __init__(self, similarity: Any, *, n: int | None = None):
        self.similarity = check_matrix(similarity, "similarity", columns=n, nonnegative=True)
        if self.similarity.shape[1] == 0:
            raise InstanceError("must list at least one worker (column)", key="similarity")
        self.n = int(self.similarity.shape[1])

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = as_masks(masks, self.n)
        points = self.similarity.shape[0]
        out = np.empty(masks.shape[0], dtype=np.float64)
        # Since sim >= 0, zeroing the columns outside S leaves each row max unchanged.
        for rows in row_chunks(masks.shape[0], points * self.n):
            picked = masks[rows, None, :] * self.similarity[None, :, :]
            out[rows] = picked.max(axis=2).sum(axis=1)
        return out

    def gains(self, S: Any) -> np.ndarray:
        S = as_index_set(S, self.n)
        if S.size:
            cur = self.similarity[:, S].max(axis=1)
        else:
            cur = np.zeros(self.similarity.shape[0])
        out = np.maximum(self.similarity - cur[:, None], 0.0).sum(axis=0)
        out[S] = 0.0
        return out

    def multilinear(self, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Multilinear extension ``F(y)`` and its gradient in closed form.

        Per point ``i``, with its similarities sorted descending ``s_(1) >= s_(2) >= …``
        (workers ``(1), (2), …``) and ``P_j = Π_{l<j} (1 − y_(l))``:
        ``F_i = Σ_j s_(j) y_(j) P_j`` (the best picked worker is ``(j)`` with probability
        ``y_(j) P_j``) and ``∂F_i/∂y_(j) = P_j (s_(j) − T_j)`` with
        ``T_j = Σ_{m>j} s_(m) y_(m) Π_{j<l<m} (1 − y_(l))`` the expected best among
        the workers after ``(j)``, from ``T_last = 0``, ``T_{j−1} = s_(j) y_(j) + (1 − y_(j)) T_j``.
        Products only, no division, so ``y = 1`` is exact; ties give the same result in
        either order.
        """
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (self.n,):
            raise ValueError(f"y must have shape ({self.n},), got {y.shape}")
        order = np.argsort(-self.similarity, axis=1, kind="stable")
        s = np.take_along_axis(self.similarity, order, axis=1)
        ys = y[order]
        miss = 1.0 - ys
        before = np.ones_like(s)
        before[:, 1:] = np.cumprod(miss[:, :-1], axis=1)
        after = np.empty_like(s)
        tail = np.zeros(s.shape[0])
        for j in range(self.n - 1, -1, -1):
            after[:, j] = tail
            tail = s[:, j] * ys[:, j] + miss[:, j] * tail
        value = float(tail.sum())
        part = before * (s - after)
        grad = np.zeros_like(s)
        np.put_along_axis(grad, order, part, axis=1)
        return value, grad.sum(axis=0)

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "similarity": self.similarity.tolist()}

    @classmethod
    def from_config(cls, table: dict, n: int | None = None) -> Self:
        """Build from a ``[utility]`` table with ``similarity`` (list of rows, one per point)."""
        table = read_table(table, cls.kind, ["similarity"])
        return cls(table["similarity"], n=n)
