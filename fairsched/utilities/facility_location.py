"""Facility location: how well the selected workers represent a set of points.

``f(S) = Σ_i max_{u∈S} similarity[i][u]`` (0 for ``S = ∅``), with non-negative
similarities; rows are points, columns are workers.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction, as_index_set
from fairsched.utilities.validation import (
    as_masks,
    check_matrix,
    read_table,
    row_chunks,
)

#: above this many similarities ``values`` gathers each set's columns instead of broadcasting
_BROADCAST_LIMIT = 1 << 20


class FacilityLocation(SetFunction):
    """``f(S) = Σ_i max_{u∈S} sim[i, u]``, ``f(∅) = 0``; ``sim >= 0`` of shape (points, workers).

    Marginal gains: ``f(S ∪ {u}) − f(S) = Σ_i max(sim[i, u] − cur_i, 0)`` with
    ``cur_i = max_{v∈S} sim[i, v]`` (0 for ``S = ∅``).

    Examples
    --------
    >>> from fairsched.utilities import FacilityLocation
    >>> f = FacilityLocation([[1.0, 0.2, 0.0],       # rows: points, columns: workers
    ...                       [0.3, 0.9, 0.0],
    ...                       [0.0, 0.1, 0.8]])
    >>> f.value([0]), f.value([0, 1])
    (1.3, 2.0)
    >>> f.gains([0]).round(12).tolist()
    [0.0, 0.7, 0.8]
    """

    kind = "facility-location"

    def __init__(self, similarity: Any, *, n: int | None = None):
        self.similarity = check_matrix(similarity, "similarity", columns=n, nonnegative=True)
        if self.similarity.shape[1] == 0:
            raise InstanceError("must list at least one worker (column)", key="similarity")
        self.n = int(self.similarity.shape[1])

    @property
    def submodular(self) -> bool:
        """Always ``True``: a non-negative sum over points of ``max_{u∈S} sim[i, u]``, each monotone submodular."""
        return True

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = as_masks(masks, self.n)
        points = self.similarity.shape[0]
        out = np.zeros(masks.shape[0], dtype=np.float64)
        sizes = masks.sum(axis=1)
        if sizes.size and sizes[0] > 0 and (sizes == sizes[0]).all():
            # Sets of one size (k-sets, as pricing and local search evaluate them): gather
            # their members, points·|S| per set instead of points·n, and sum each set's
            # per-point maxima as one contiguous row, in the same order as the paths below.
            size = int(sizes[0])
            for rows in row_chunks(masks.shape[0], points * size, limit=_BROADCAST_LIMIT):
                members = np.nonzero(masks[rows])[1].reshape(-1, size)
                best = self.similarity[:, members].max(axis=2)
                out[rows] = np.ascontiguousarray(best.T).sum(axis=1)
            return out
        if points * self.n <= _BROADCAST_LIMIT:
            # Small matrices: since sim >= 0, zeroing the columns outside S leaves each row
            # max unchanged, and many sets are done in one vectorised block.
            for rows in row_chunks(masks.shape[0], points * self.n, limit=_BROADCAST_LIMIT):
                picked = masks[rows, None, :] * self.similarity[None, :, :]
                out[rows] = picked.max(axis=2).sum(axis=1)
            return out
        for row, mask in enumerate(masks):  # memory points·|S|, not points·n per set
            members = np.flatnonzero(mask)
            if members.size:
                out[row] = self.similarity[:, members].max(axis=1).sum()
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

    def incremental(self, base: Any = ()) -> FacilityLocationGains:
        """Incremental gains from ``base`` on (:class:`FacilityLocationGains`), for lazy greedy.

        The first call stores a transposed copy of the similarity matrix (workers × points,
        as much memory again) on the utility, so later calls and every gain evaluation read
        one contiguous row per worker.
        """
        columns = self.__dict__.get("_columns_cache")
        if columns is None:
            columns = _transpose(self.similarity)
            self.__dict__["_columns_cache"] = columns
        # gains() sums a temporary laid out like similarity: reference_gains matches it for C order only
        return FacilityLocationGains(columns, as_index_set(base, self.n),
                                     exact_reference=self.similarity.flags.c_contiguous)

    def __getstate__(self) -> dict[str, Any]:
        # The transposed copy is a cache: do not ship it to worker processes.
        return {key: value for key, value in self.__dict__.items() if key != "_columns_cache"}

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


#: elements per vectorised block of candidate gains (32 MB of float64)
_BLOCK = 1 << 22


class FacilityLocationGains:
    """Marginal gains of every candidate on a growing set ``S``, updated in ``O(points)`` per addition.

    Keeps ``cur_i = max_{v∈S} sim[i, v]`` so that one candidate's gain
    ``Σ_i max(sim[i, u] − cur_i, 0)`` costs ``O(points)`` instead of the ``O(points·n)`` of
    :meth:`FacilityLocation.gains`; the incremental state lazy greedy
    (:func:`fairsched.submodular.lazy_greedy.lazy_greedy`, Minoux 1978) re-evaluates its bounds with.
    Every term is non-negative, so rounding errors are relative to the gains themselves:
    :attr:`error_scale` is 0.
    """

    error_scale = 0.0
    #: lazy greedy re-evaluates 8 bounds in a step's first call: a call costs more than a gain
    #: (measured fastest at n = 1000 and 5000 among first batches of 1, 4 and 8)
    first_batch = 8

    def __init__(self, columns: np.ndarray, base: np.ndarray, exact_reference: bool = True):
        self._columns = columns  # (workers, points), C-contiguous: one worker's similarities are one row
        if not exact_reference:
            self.reference_gains = None  # lazy greedy then settles near-ties with the oracle's gains(S)
        self._empty = base.size == 0
        self.cur = columns[base].max(axis=0) if base.size else np.zeros(columns.shape[1])

    def gains(self, candidates: np.ndarray) -> np.ndarray:
        """``f(S ∪ {u}) − f(S)`` for each ``u`` in ``candidates`` (int array), at the current ``S``."""
        candidates = np.asarray(candidates, dtype=np.int64)
        workers, points = self._columns.shape
        if candidates.size * points <= _BLOCK:  # the common case: a few workers, no loop
            return self._block_gains(self._columns[candidates], owned=True)
        everyone = candidates.size == workers and bool((candidates == np.arange(workers)).all())
        out = np.empty(candidates.size, dtype=np.float64)
        for rows in row_chunks(candidates.size, points, limit=_BLOCK):
            if everyone:  # a view: no gather
                out[rows] = self._block_gains(self._columns[rows], owned=False)
            else:
                out[rows] = self._block_gains(self._columns[candidates[rows]], owned=True)
        return out

    def _block_gains(self, block: np.ndarray, owned: bool) -> np.ndarray:
        """Row sums of ``max(block − cur, 0)``; ``owned`` blocks (gathered copies) are overwritten."""
        if self._empty:  # cur = 0 and sim >= 0: the gain is the row sum
            return block.sum(axis=1)
        block = np.subtract(block, self.cur, out=block if owned else None)
        return np.maximum(block, 0.0, out=block).sum(axis=1)

    def reference_gains(self, candidates: np.ndarray) -> np.ndarray:
        """``FacilityLocation.gains(S)[candidates]`` bit for bit, in ``O(points·|candidates|)``.

        ``gains`` sums each column of a C-ordered ``(points, n)`` matrix, and numpy sums each
        column of such a matrix over the rows in order, whatever the number of columns (at
        least two: a lone column is summed pairwise, so a single candidate is doubled).
        ``cur`` is a maximum, exact in any order. Lazy greedy settles near-ties with this
        instead of a full ``gains(S)``; ``tests/test_bench.py`` checks the identity.
        """
        candidates = np.asarray(candidates, dtype=np.int64)
        columns = candidates if candidates.size >= 2 else np.repeat(candidates, 2)
        block = np.ascontiguousarray(self._columns[columns].T)
        return np.maximum(block - self.cur[:, None], 0.0).sum(axis=0)[:candidates.size]

    def add(self, u: int) -> None:
        """Add worker ``u`` to ``S``."""
        np.maximum(self.cur, self._columns[u], out=self.cur)
        self._empty = False


def _transpose(matrix: np.ndarray, tile: int = 512) -> np.ndarray:
    """A C-contiguous transpose, copied tile by tile (about 3x faster than a plain copy when large)."""
    rows, cols = matrix.shape
    out = np.empty((cols, rows), dtype=matrix.dtype)
    for i in range(0, rows, tile):
        for j in range(0, cols, tile):
            out[j:j + tile, i:i + tile] = matrix[i:i + tile, j:j + tile].T
    return out
