"""Shape and range checks shared by the propensity modules (errors name the argument)."""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.propensity.errors import InvalidPropensityError, ShapeError


def as_matrix(values: Any, name: str, *, rows: int | None = None) -> np.ndarray:
    """A finite 2-D float64 matrix; a 1-D input is one column."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.ndim != 2:
        raise ShapeError(f"{name}: expected a (units, covariates) matrix, got shape {arr.shape}")
    if rows is not None and arr.shape[0] != rows:
        raise ShapeError(f"{name}: has {arr.shape[0]} rows, expected {rows} (one per unit)")
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        raise ShapeError(f"{name}: entry [{i}][{j}] is {arr[i, j]}, expected a finite number")
    return arr


def as_vector(values: Any, name: str, *, length: int | None = None) -> np.ndarray:
    """A finite 1-D float64 vector of the given length."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ShapeError(f"{name}: expected a flat vector, got shape {arr.shape}")
    if length is not None and arr.size != length:
        raise ShapeError(f"{name}: has {arr.size} entries, expected {length} (one per unit)")
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ShapeError(f"{name}: entry {i} is {arr[i]}, expected a finite number")
    return arr


def as_binary(values: Any, name: str, *, length: int | None = None) -> np.ndarray:
    """A 1-D 0/1 indicator as float64 (booleans accepted)."""
    arr = as_vector(values, name, length=length)
    bad = (arr != 0) & (arr != 1)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ShapeError(f"{name}: entry {i} is {arr[i]}, expected 0 or 1")
    return arr


def check_propensities(p: Any, name: str = "propensities") -> np.ndarray:
    """Validate inclusion probabilities: every entry finite and in ``(0, 1]``.

    A unit with probability 0 can never be observed, so no weight can represent it
    (positivity, which FedIPW's unbiasedness assumes; Morishita 2026); a probability above
    1 is not a probability.
    """
    arr = np.asarray(p, dtype=np.float64)
    flat = arr.reshape(-1)
    bad = ~np.isfinite(flat)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InvalidPropensityError(f"{name}: entry {i} is {flat[i]}, expected a probability in (0, 1]")
    low = flat <= 0
    if low.any():
        i = int(np.flatnonzero(low)[0])
        raise InvalidPropensityError(
            f"{name}: entry {i} is {flat[i]:g}, a propensity must be > 0 (positivity: a unit "
            "that can never be included cannot be reweighted)")
    high = flat > 1
    if high.any():
        i = int(np.flatnonzero(high)[0])
        raise InvalidPropensityError(f"{name}: entry {i} is {flat[i]:g}, a propensity must be <= 1")
    return arr
