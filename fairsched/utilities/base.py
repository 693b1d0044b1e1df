"""The set-function protocol every utility oracle implements.

A utility is a monotone submodular ``f: 2^N -> R+`` with ``f(∅) = 0`` over workers
``0..n-1`` (seed 003, Section III). Sets are sorted ``int64`` index arrays; batches of
sets are boolean masks of shape ``(m, n)``. Subclasses implement :meth:`values`
(vectorised over a batch) and should override :meth:`gains` when a closed form for the
marginal gains of all workers at once is cheaper than ``n`` evaluations.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

from fairsched.errors import InstanceError


def as_index_set(S: Any, n: int) -> np.ndarray:
    """Return ``S`` (any iterable of worker indices) as a sorted unique ``int64`` array."""
    idx = np.unique(np.asarray(S, dtype=np.int64).reshape(-1))
    if idx.size and (idx[0] < 0 or idx[-1] >= n):
        raise IndexError(f"worker index out of range 0..{n - 1}: {idx.tolist()}")
    return idx


def index_set_to_mask(S: np.ndarray, n: int) -> np.ndarray:
    """Boolean mask of length ``n`` with ``True`` at the indices in ``S``."""
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(S, dtype=np.int64)] = True
    return mask


class SetFunction(ABC):
    """A vectorised monotone submodular set function on ``n`` workers.

    Attributes
    ----------
    n : int
        Number of workers (ground-set size).
    kind : str
        The instance-file ``[utility] kind`` this class is loaded from.
    """

    kind: str = "abstract"
    n: int

    @abstractmethod
    def values(self, masks: np.ndarray) -> np.ndarray:
        """``f`` of every row of a boolean batch ``masks`` of shape ``(m, n)``; float64 ``(m,)``."""

    def value(self, S: Any) -> float:
        """``f(S)`` for one set of worker indices."""
        mask = index_set_to_mask(as_index_set(S, self.n), self.n)
        return float(self.values(mask[None, :])[0])

    def gains(self, S: Any) -> np.ndarray:
        """Marginal gains ``f(S ∪ {u}) − f(S)`` for every worker ``u`` at once.

        Returns a float64 array of length ``n``; entries for ``u ∈ S`` are 0.
        The default evaluates ``n + 1`` sets in one :meth:`values` call.
        """
        S = as_index_set(S, self.n)
        base = index_set_to_mask(S, self.n)
        masks = np.repeat(base[None, :], self.n + 1, axis=0)
        masks[np.arange(self.n), np.arange(self.n)] = True
        vals = self.values(masks)
        out = vals[: self.n] - vals[self.n]
        out[S] = 0.0
        return out

    @abstractmethod
    def to_config(self) -> dict[str, Any]:
        """The ``[utility]`` table (with ``kind``) that reloads this utility; TOML-serialisable."""

    def __call__(self, S: Any) -> float:
        return self.value(S)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n})"


def check_vector(values: Any, name: str, *, length: int | None = None,
                 nonnegative: bool = False, positive: bool = False) -> np.ndarray:
    """Validate a 1-D numeric vector and return it as float64.

    Raises :class:`InstanceError` with ``key=name`` and a message naming the first bad
    entry (``"entry 3 is nan"``) or the length mismatch.
    """
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InstanceError("must be a list of numbers", key=name) from None
    if arr.ndim != 1:
        raise InstanceError(f"must be a flat list of numbers, got shape {arr.shape}", key=name)
    if length is not None and arr.size != length:
        raise InstanceError(f"has {arr.size} entries, expected {length} (one per worker)", key=name)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InstanceError(f"entry {i} is {arr[i]}, expected a finite number", key=name)
    if positive and (arr <= 0).any():
        i = int(np.flatnonzero(arr <= 0)[0])
        raise InstanceError(f"entry {i} is {arr[i]}, expected > 0", key=name)
    if nonnegative and (arr < 0).any():
        i = int(np.flatnonzero(arr < 0)[0])
        raise InstanceError(f"entry {i} is {arr[i]}, expected >= 0", key=name)
    return arr


def check_matrix(values: Any, name: str, *, columns: int | None = None,
                 nonnegative: bool = False) -> np.ndarray:
    """Validate a 2-D numeric matrix (list of rows) and return it as float64."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InstanceError("must be a list of equally long rows of numbers", key=name) from None
    if arr.ndim != 2:
        raise InstanceError(f"must be a list of equally long rows of numbers, got shape {arr.shape}", key=name)
    if columns is not None and arr.shape[1] != columns:
        raise InstanceError(f"rows have {arr.shape[1]} entries, expected {columns} (one per worker)", key=name)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise InstanceError(f"entry [{i}][{j}] is {arr[i, j]}, expected a finite number", key=name)
    if nonnegative and (arr < 0).any():
        i, j = (int(v) for v in np.argwhere(arr < 0)[0])
        raise InstanceError(f"entry [{i}][{j}] is {arr[i, j]}, expected >= 0", key=name)
    return arr
