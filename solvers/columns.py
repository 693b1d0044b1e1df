"""Column enumeration: all k-subsets of n workers as boolean membership masks."""

from __future__ import annotations

import math

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
