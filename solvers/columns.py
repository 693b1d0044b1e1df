"""Column enumeration: all k-subsets of n workers as boolean membership masks."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .errors import TooManyColumnsError


def count_k_subsets(n: int, k: int) -> int:
    """Return C(n, k), the number of k-subsets of n workers (0 when k is out of range)."""
    return math.comb(n, k)


def k_subset_masks(n: int, k: int, max_columns: int = 1_000_000) -> np.ndarray:
    """Return a bool array of shape (C(n, k), n) whose rows are all k-subsets of range(n).

    Rows are in lexicographic order of the sorted index tuples, i.e. the order of
    ``itertools.combinations(range(n), k)``.  Built with Pascal's rule
    ``M(j, i) = [1 | M(j-1, i-1)] ; [0 | M(j-1, i)]`` over suffixes of the workers.

    Raises ValueError unless 0 <= k <= n, and TooManyColumnsError if C(n, k) > max_columns.
    """
    n, k = _as_int(n, "n"), _as_int(k, "k")
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    if not 0 <= k <= n:
        raise ValueError(f"k must satisfy 0 <= k <= n = {n}, got k = {k}")
    total = count_k_subsets(n, k)
    if total > max_columns:
        raise TooManyColumnsError(
            f"all {k}-subsets of {n} workers are {total:,} columns, above the limit of "
            f"{max_columns:,} (raise max_columns, or use column generation)"
        )

    # table[i] holds the i-subsets of the last j workers; only the i that can still
    # reach k when the remaining n - j workers are prepended are kept.
    table: dict[int, np.ndarray] = {0: np.zeros((1, 0), dtype=bool)}
    for j in range(1, n + 1):
        new: dict[int, np.ndarray] = {}
        for i in range(max(0, k - (n - j)), min(k, j) + 1):
            with_first = table.get(i - 1)
            without_first = table.get(i) if i <= j - 1 else None
            top = 0 if with_first is None else with_first.shape[0]
            bottom = 0 if without_first is None else without_first.shape[0]
            out = np.empty((top + bottom, j), dtype=bool)
            out[:top, 0] = True
            out[top:, 0] = False
            if top:
                out[:top, 1:] = with_first
            if bottom:
                out[top:, 1:] = without_first
            new[i] = out
        table = new
    return table[k]


def _as_int(x: int, name: str) -> int:
    if isinstance(x, bool) or not isinstance(x, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(x).__name__}")
    return int(x)


def row_positions(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For compressed rows (``indptr`` of a CSR matrix or of :class:`Columns`): the sizes of
    ``rows`` and the positions ``indptr[j], …, indptr[j + 1] − 1`` of their entries, row after
    row, vectorised (no submatrix is built)."""
    starts = indptr[rows]
    sizes = indptr[rows + 1] - starts
    first = np.cumsum(sizes) - sizes  # where each row's entries begin in the output
    return sizes, np.arange(int(sizes.sum()), dtype=np.int64) - np.repeat(first - starts, sizes)


#: indices per chunk of :meth:`Columns.chunks` (and its per-index temporaries)
CHUNK_NNZ = 1 << 22


def chunk_ranges(indptr: np.ndarray, max_nnz: int = CHUNK_NNZ) -> list[tuple[int, int]]:
    """Ranges ``[lo, hi)`` of the sets ``j`` (set ``j`` holds ``indptr[j + 1] − indptr[j]``
    indices) with at most ``max_nnz`` indices each, one set per range at least."""
    ranges, lo, m = [], 0, len(indptr) - 1
    while lo < m:
        hi = int(np.searchsorted(indptr, indptr[lo] + max(1, max_nnz), side="right")) - 1
        hi = min(m, max(hi, lo + 1))
        ranges.append((lo, hi))
        lo = hi
    return ranges


class Columns:
    """0/1 columns (sets of workers) stored sparsely: a column is the sorted indices of its members.

    Column ``j`` holds ``indices[indptr[j]:indptr[j + 1]]`` (compressed sparse rows), so a
    pool of ``m`` sets of size ``k`` costs ``O(m·k)`` memory instead of the ``O(m·n)`` of
    boolean masks; that matters when ``k << n``.  Immutable by convention.
    """

    __slots__ = ("_hashes", "_width", "indices", "indptr", "n")

    def __init__(self, n: int, indptr: np.ndarray, indices: np.ndarray):
        self.n = int(n)
        self.indptr = np.ascontiguousarray(indptr, dtype=np.int64)
        self.indices = np.ascontiguousarray(indices, dtype=np.int32)
        if self.indptr.ndim != 1 or self.indptr.size < 1 or self.indptr[0] != 0 or (
                self.indptr[-1] != self.indices.size) or (np.diff(self.indptr) < 0).any():
            raise ValueError("indptr must start at 0, be non-decreasing and end at len(indices)")
        if self.indices.size and (self.indices.min() < 0 or self.indices.max() >= self.n):
            raise ValueError(f"column indices must lie in 0..{self.n - 1}")
        self._hashes: np.ndarray | None = None
        sizes = np.diff(self.indptr)
        #: the common size of every column, or -1 (then no (m, k) view exists)
        self._width = int(sizes[0]) if sizes.size and (sizes == sizes[0]).all() else -1

    # -- construction ------------------------------------------------------------------------
    @classmethod
    def empty(cls, n: int) -> Columns:
        return cls(n, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32))

    @classmethod
    def from_masks(cls, masks: np.ndarray) -> Columns:
        """From a boolean (or 0/1) array of shape (m, n)."""
        masks = np.asarray(masks)
        if masks.ndim != 2:
            raise ValueError(f"members must be 2-D (columns x workers), got shape {masks.shape}")
        if masks.dtype != bool:
            if not np.isin(masks, (0, 1)).all():
                raise ValueError("members must be boolean (or 0/1) membership indicators")
            masks = masks.astype(bool)
        indptr = np.zeros(masks.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.count_nonzero(masks, axis=1), out=indptr[1:])
        # row-major flat positions are column-by-column and sorted within a column
        indices = (np.flatnonzero(masks) % max(masks.shape[1], 1)).astype(np.int32)
        return cls(masks.shape[1], indptr, indices)

    @classmethod
    def from_rows(cls, rows: np.ndarray, n: int) -> Columns:
        """From an (m, k) integer array: row ``j`` lists the ``k`` members of column ``j``."""
        rows = np.sort(np.asarray(rows, dtype=np.int64).reshape(len(rows), -1), axis=1)
        m, k = rows.shape
        return cls(n, np.arange(m + 1, dtype=np.int64) * k, rows.reshape(-1))

    @classmethod
    def from_sets(cls, sets: list[np.ndarray], n: int) -> Columns:
        """From a list of index arrays (sorted and made unique here)."""
        sets = [np.unique(np.asarray(S, dtype=np.int64)) for S in sets]
        indptr = np.zeros(len(sets) + 1, dtype=np.int64)
        np.cumsum([S.size for S in sets], out=indptr[1:])
        indices = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int64)
        return cls(n, indptr, indices)

    @classmethod
    def concatenate(cls, parts: list[Columns], n: int) -> Columns:
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls.empty(n)
        if len(parts) == 1:
            return parts[0]
        sizes = np.concatenate([p.sizes() for p in parts])
        indptr = np.zeros(sizes.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        return cls(n, indptr, np.concatenate([p.indices for p in parts]))

    @classmethod
    def gather(cls, picks: list[tuple[Columns, np.ndarray]], n: int, max_nnz: int = CHUNK_NNZ) -> Columns:
        """Columns ``index`` of each part, part after part, written straight into one new array.

        ``Columns.concatenate([part.take(index) for part, index in picks], n)`` without the
        taken copies: those and the joined array were both alive at the peak of the LP's
        result (``n = 200,000``, ``k = 1,000``: a 1.1 GiB join of the start's columns before
        the support was taken out of it).  Columns of unequal sizes are copied ``max_nnz``
        indices at a time at most (their positions are int64 temporaries).  Picks from one
        part alone are :meth:`take`'s (the part itself where every column is picked in order).
        """
        picks = [(part, np.asarray(index, dtype=np.int64).reshape(-1)) for part, index in picks]
        picks = [(part, index) for part, index in picks if index.size]
        for part, index in picks:
            if index.min() < 0 or index.max() >= len(part):
                raise IndexError(f"column index out of range 0..{len(part) - 1}")
        if len(picks) == 1:
            return picks[0][0].take(picks[0][1])  # the part itself where all of it is picked
        sizes = [part.indptr[index + 1] - part.indptr[index] for part, index in picks]
        indptr = np.zeros(sum(s.size for s in sizes) + 1, dtype=np.int64)
        if indptr.size > 1:
            np.cumsum(np.concatenate(sizes), out=indptr[1:])
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        at = 0
        for (part, index), size in zip(picks, sizes):
            if part._width >= 0:
                block = indices[at: at + index.size * part._width].reshape(index.size, part._width)
                # mode "clip" (the indices are checked above): "raise" buffers a copy of the output
                np.take(part.indices.reshape(len(part), part._width), index, axis=0, out=block, mode="clip")
            else:
                # a bounded number of indices per step keeps the int64 positions small
                done = at
                for lo, hi in chunk_ranges(np.concatenate([[0], np.cumsum(size)]), max_nnz):
                    _, positions = row_positions(part.indptr, index[lo:hi])
                    indices[done: done + positions.size] = part.indices[positions]
                    done += positions.size
            at += int(size.sum())
        return cls(n, indptr, indices)

    # -- access ------------------------------------------------------------------------------
    def __len__(self) -> int:
        return self.indptr.size - 1

    def __getitem__(self, j: int) -> np.ndarray:
        return self.indices[self.indptr[j]: self.indptr[j + 1]]

    def sizes(self) -> np.ndarray:
        return np.diff(self.indptr)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def row_ids(self) -> np.ndarray:
        """The column each stored index belongs to, (nnz,)."""
        return np.repeat(np.arange(len(self), dtype=np.int64), self.sizes())

    def take(self, index: np.ndarray) -> Columns:
        index = np.asarray(index, dtype=np.int64).reshape(-1)
        if index.size == len(self) and (index == np.arange(len(self))).all():
            return self
        if self._width >= 0:
            rows = self.indices.reshape(len(self), self._width)[index]
            return Columns(self.n, np.arange(index.size + 1, dtype=np.int64) * self._width, rows.reshape(-1))
        sizes, positions = row_positions(self.indptr, index)
        indptr = np.zeros(index.size + 1, dtype=np.int64)
        np.cumsum(sizes, out=indptr[1:])
        return Columns(self.n, indptr, self.indices[positions])

    def to_masks(self, index: np.ndarray | None = None) -> np.ndarray:
        """Dense (m, n) boolean masks of all columns or of ``index`` (O(m·n) memory)."""
        cols = self if index is None else self.take(index)
        masks = np.zeros((len(cols), self.n), dtype=bool)
        masks[cols.row_ids(), cols.indices] = True
        return masks

    def to_sets(self) -> list[np.ndarray]:
        """One sorted index array per column: read-only int32 views of :attr:`indices`.

        Views, not copies: a support of ``m`` sets of size ``k`` stays the ``4·m·k`` bytes it
        already holds (``n = 200,000``, ``k = 1,000``: 0.76 GiB, where int64 copies added 1.5 GiB
        at the peak of ``fairsched run``).
        """
        indices = self.indices.view()
        indices.flags.writeable = False
        if self._width > 0:
            return list(indices.reshape(len(self), self._width))
        return np.split(indices, self.indptr[1:-1])

    def chunks(self, max_nnz: int = CHUNK_NNZ) -> list[tuple[int, int]]:
        """Ranges ``[lo, hi)`` of columns holding at most ``max_nnz`` indices each (one column
        per range at least), so that per-index temporaries stay bounded."""
        return chunk_ranges(self.indptr, max_nnz)

    def _reduce(self, gathered: Callable[[np.ndarray], np.ndarray], dtype: type) -> np.ndarray:
        """Per-column sums of ``gathered(indices)``, chunked; empty columns give 0."""
        out = np.zeros(len(self), dtype=dtype)
        for lo, hi in self.chunks():
            starts = self.indptr[lo:hi] - self.indptr[lo]
            filled = np.flatnonzero(np.diff(self.indptr[lo: hi + 1]) > 0)
            if filled.size:
                part = gathered(self.indices[self.indptr[lo]: self.indptr[hi]])
                out[lo + filled] = np.add.reduceat(part, starts[filled])
        return out

    def dot(self, vector: np.ndarray) -> np.ndarray:
        """``Σ_{u∈S_j} vector_u`` for every column ``j``, (m,)."""
        vector = np.asarray(vector, dtype=float)
        return self._reduce(lambda index: vector[index], float)

    def marginals(self, weights: np.ndarray) -> np.ndarray:
        """``Σ_j weights_j·1[u ∈ S_j]`` for every worker ``u``, (n,)."""
        weights = np.asarray(weights, dtype=float)
        out = np.zeros(self.n)
        for lo, hi in self.chunks():
            part = self.indices[self.indptr[lo]: self.indptr[hi]]
            out += np.bincount(part, weights=np.repeat(weights[lo:hi], np.diff(self.indptr[lo: hi + 1])),
                               minlength=self.n)
        return out

    def hashes(self) -> np.ndarray:
        """A 64-bit hash per column (sum of fixed random words of its members, mod 2^64).

        Equal sets have equal hashes; unequal ones collide with probability about 2^-64 per
        pair, and callers that deduplicate confirm a match by comparing the indices.
        """
        if self._hashes is None:
            words = _hash_words(self.n)
            self._hashes = self._reduce(lambda index: words[index], np.uint64)
        return self._hashes


_HASH_WORDS: dict[int, np.ndarray] = {}


def _hash_words(n: int) -> np.ndarray:
    words = _HASH_WORDS.get(n)
    if words is None:
        words = np.random.default_rng(0x5EED).integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
        _HASH_WORDS.clear()
        _HASH_WORDS[n] = words
    return words
