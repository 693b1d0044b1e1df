"""Weighted coverage: the total weight of the elements the selected workers cover.

``f(S) = Σ_e weights_e · [∃ u ∈ S: e ∈ covers_u]`` with ``weights >= 0``.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np
import scipy.sparse as sp

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction, as_index_set
from fairsched.utilities.validation import (
    as_masks,
    check_vector,
    read_table,
    row_chunks,
)


def _check_covers(covers: Any, elements: int, n: int | None) -> list[list[int]]:
    if isinstance(covers, (str, bytes)) or not hasattr(covers, "__len__"):
        raise InstanceError("must be a list (one per worker) of lists of element indices",
                            key="covers")
    if n is not None and len(covers) != n:
        raise InstanceError(f"has {len(covers)} entries, expected {n} (one per worker)",
                            key="covers")
    if len(covers) == 0:
        raise InstanceError("must list at least one worker", key="covers")
    out = []
    for u, items in enumerate(covers):
        try:
            arr = np.asarray(items)
        except (TypeError, ValueError):
            arr = np.empty((0, 0))
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise InstanceError(f"entry {u} is {items!r}, expected a list of element indices",
                                key="covers")
        bad = (arr < 0) | (arr >= elements)
        if bad.any():
            raise InstanceError(f"entry {u} lists element {arr[bad][0]}, expected "
                                f"0..{elements - 1} (one per weight)", key="covers")
        out.append(sorted(set(arr.tolist())))
    return out


class Coverage(SetFunction):
    """``f(S) = Σ_e w_e · [e covered by some u ∈ S]``.

    Stored as an ``(n, E)`` 0/1 incidence matrix: dense up to :attr:`DENSE_LIMIT`
    entries, scipy CSR beyond. Gains: ``f(S ∪ {u}) − f(S) = Σ_{e ∈ covers_u, e uncovered} w_e``.

    Examples
    --------
    >>> from fairsched.utilities import Coverage
    >>> f = Coverage(covers=[[0, 1], [1, 2], [3]], weights=[1.0, 2.0, 1.0, 5.0])
    >>> f.value([0, 1])                  # elements 0, 1, 2 covered
    4.0
    >>> f.gains([0]).tolist()            # worker 1 adds only element 2, worker 2 element 3
    [0.0, 1.0, 5.0]
    >>> value, gradient = f.multilinear([0.5, 0.5, 0.0])
    >>> value, gradient.tolist()
    (2.5, [2.0, 2.0, 5.0])
    """

    kind = "coverage"
    DENSE_LIMIT = 4_000_000

    def __init__(self, covers: Any, weights: Any, *, n: int | None = None):
        self.weights = check_vector(weights, "weights", nonnegative=True)
        self.covers = _check_covers(covers, self.weights.size, n)
        self.n = len(self.covers)
        rows = np.repeat(np.arange(self.n), [len(c) for c in self.covers])
        cols = np.fromiter((e for c in self.covers for e in c), dtype=np.int64, count=rows.size)
        shape = (self.n, self.weights.size)
        incidence = sp.csr_array((np.ones(rows.size), (rows, cols)), shape=shape)
        dense = shape[0] * shape[1] <= self.DENSE_LIMIT
        self.incidence = incidence.toarray() if dense else incidence

    @property
    def submodular(self) -> bool:
        """Always ``True``: a non-negative sum of the coverage indicators ``[e covered]``, each monotone submodular."""
        return True

    def sparse_incidence(self) -> sp.csr_array:
        """The incidence as a scipy CSR array (workers × elements), built once and cached.

        Pricing and local search work on the sparse form whatever :attr:`incidence` is:
        its products cost ``O(nnz)`` instead of ``O(n·E)``.
        """
        cached = self.__dict__.get("_sparse_cache")
        if cached is None:
            cached = sp.csr_array(self.incidence)
            self.__dict__["_sparse_cache"] = cached
        return cached

    def coverers(self) -> sp.csr_array:
        """The transposed incidence as CSR (elements × workers): row ``e`` lists who covers
        ``e``.  Built once and cached, like :meth:`sparse_incidence`."""
        cached = self.__dict__.get("_coverers_cache")
        if cached is None:
            cached = sp.csr_array(self.sparse_incidence().T)
            cached.sort_indices()
            self.__dict__["_coverers_cache"] = cached
        return cached

    def __getstate__(self) -> dict[str, Any]:
        # The sparse copies are caches: do not ship them to worker processes.
        return {key: value for key, value in self.__dict__.items()
                if key not in ("_sparse_cache", "_coverers_cache")}

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = as_masks(masks, self.n)
        out = np.empty(masks.shape[0], dtype=np.float64)
        for rows in row_chunks(masks.shape[0], self.weights.size):
            covered = np.asarray(masks[rows].astype(np.float64) @ self.incidence) > 0
            out[rows] = covered @ self.weights
        return out

    def gains(self, S: Any) -> np.ndarray:
        S = as_index_set(S, self.n)
        incidence = self.sparse_incidence()
        chosen = np.zeros(self.n)
        chosen[S] = 1.0
        # two O(nnz) products: cheaper than gathering the rows of S from the CSR matrix
        covered = np.asarray(self.coverers() @ chosen).ravel() > 0
        out = np.asarray(incidence @ np.where(covered, 0.0, self.weights), dtype=np.float64)
        out[S] = 0.0
        return out

    def multilinear(self, y: np.ndarray) -> tuple[float, np.ndarray]:
        """Multilinear extension ``F(y)`` and its gradient in closed form.

        ``F(y) = Σ_e w_e (1 − Π_{u covers e} (1 − y_u))`` and
        ``∂F/∂y_u = Σ_{e ∈ covers_u} w_e Π_{v covers e, v ≠ u} (1 − y_v)``.
        Workers with ``y_v = 1`` are counted per element rather than multiplied in, so
        the product excluding ``u`` never divides by a zero factor.
        """
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (self.n,):
            raise ValueError(f"y must have shape ({self.n},), got {y.shape}")
        miss = 1.0 - y
        sure = miss == 0.0
        safe = np.where(sure, 1.0, miss)
        if isinstance(self.incidence, np.ndarray):
            prod = np.prod(np.where(self.incidence > 0, safe[:, None], 1.0), axis=0)
        else:
            csc = sp.csc_array(self.incidence)
            prod = np.ones(self.weights.size)
            starts = csc.indptr[:-1]
            nonempty = np.diff(csc.indptr) > 0
            if nonempty.any():
                prod[nonempty] = np.multiply.reduceat(safe[csc.indices], starts[nonempty])
        sure_count = np.asarray(self.incidence.T @ sure.astype(np.float64)).ravel()
        uncovered = np.where(sure_count == 0, prod, 0.0)
        value = float(self.weights @ (1.0 - uncovered))
        # Excluding u: for y_u < 1 divide u's non-zero factor back out (only elements
        # with no sure coverer survive); for y_u = 1, u must be the element's only sure one.
        free = np.asarray(self.incidence @ (self.weights * uncovered)).ravel()
        lone = np.asarray(self.incidence @ np.where(sure_count == 1, self.weights * prod, 0.0)).ravel()
        grad = np.where(sure, lone, free / safe)
        return value, grad

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "covers": [list(c) for c in self.covers],
                "weights": self.weights.tolist()}

    @classmethod
    def from_config(cls, table: dict, n: int | None = None) -> Self:
        """Build from a ``[utility]`` table with ``covers`` and ``weights``."""
        table = read_table(table, cls.kind, ["covers", "weights"])
        return cls(table["covers"], table["weights"], n=n)
