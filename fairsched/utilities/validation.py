"""Input validation shared by the utility oracles: vectors, matrices, scalars, config tables.

Every check raises :class:`~fairsched.errors.InstanceError` with ``key`` set to the
instance-file key it validates, so the loader can say which file and key is wrong.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from numbers import Real
from typing import Any

import numpy as np

from fairsched.errors import InstanceError

CHUNK_ELEMENTS = 50_000_000


def as_masks(masks: Any, n: int) -> np.ndarray:
    """Return ``masks`` as a boolean ``(m, n)`` array; ``ValueError`` on any other shape."""
    masks = np.asarray(masks, dtype=bool)
    if masks.ndim != 2 or masks.shape[1] != n:
        raise ValueError(f"masks must have shape (m, {n}), got {masks.shape}")
    return masks


def row_chunks(m: int, elements_per_row: int, limit: int | None = None) -> Iterator[slice]:
    """Slices covering ``range(m)`` so each chunk needs at most ~``limit`` (default
    :data:`CHUNK_ELEMENTS`) temporary elements."""
    step = max(1, (CHUNK_ELEMENTS if limit is None else limit) // max(1, elements_per_row))
    for start in range(0, m, step):
        yield slice(start, min(m, start + step))


def check_number(value: Any, key: str, *, positive: bool = False,
                 negative: bool = False, nonnegative: bool = False) -> float:
    """Validate one finite real scalar (bools rejected) and return it as ``float``."""
    if isinstance(value, bool) or not isinstance(value, Real):
        raise InstanceError(f"must be a number, got {value!r}", key=key)
    x = float(value)
    if not math.isfinite(x):
        raise InstanceError(f"is {x}, expected a finite number", key=key)
    if positive and not x > 0:
        raise InstanceError(f"is {x}, expected > 0", key=key)
    if negative and not x < 0:
        raise InstanceError(f"is {x}, expected < 0", key=key)
    if nonnegative and not x >= 0:
        raise InstanceError(f"is {x}, expected >= 0", key=key)
    return x


def read_table(table: Any, kind: str, required: Iterable[str],
               optional: Iterable[str] = ()) -> Mapping[str, Any]:
    """Check a ``[utility]`` table: a mapping with every required key and no unknown key.

    ``kind`` may be absent; when present it must equal ``kind``.
    """
    if not isinstance(table, Mapping):
        raise InstanceError(f"must be a table, got {type(table).__name__}")
    required = list(required)
    known = ["kind", *required, *optional]
    if "kind" in table and table["kind"] != kind:
        raise InstanceError(f"is {table['kind']!r}, expected {kind!r}", key="kind")
    for key in required:
        if key not in table:
            raise InstanceError("missing key", key=key)
    unknown = [key for key in table if key not in known]
    if unknown:
        names = ", ".join(repr(k) for k in unknown)
        raise InstanceError(f"unknown key(s) {names} for kind {kind!r}; "
                            f"expected: {', '.join(known)}")
    return table


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


def check_array(values: Any, name: str, shape: tuple[int | None, ...]) -> np.ndarray:
    """Validate a numeric array of ``len(shape)`` dimensions (``None``: any length on that axis)
    and return it as float64; the error names the first non-finite entry by its index tuple."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InstanceError("must be a nested list of numbers", key=name) from None
    if arr.ndim != len(shape) or any(want is not None and got != want for got, want in zip(arr.shape, shape)):
        expected = "(" + ", ".join("·" if s is None else str(s) for s in shape) + ")"
        raise InstanceError(f"has shape {arr.shape}, expected {expected}", key=name)
    if not np.isfinite(arr).all():
        raise InstanceError(f"entry {tuple(int(i) for i in np.argwhere(~np.isfinite(arr))[0])} is not finite",
                            key=name)
    return arr
