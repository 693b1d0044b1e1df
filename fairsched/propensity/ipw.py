"""Inverse-probability-weighted estimators (FedIPW, Morishita 2026; FLOSS, Goetze et al. 2025).

``docs/mathematics.md`` §11 has the references.

With inclusion probabilities ``p_i`` of the observed units ``i ∈ A`` of a population of
size ``N``:

- Horvitz–Thompson mean ``(1/N) Σ_{i∈A} y_i / p_i`` (unbiased when ``p`` is true);
- Hájek mean ``Σ_{i∈A} w_i y_i / Σ_{i∈A} w_i`` with ``w = 1/p`` (ratio-consistent, does not
  need ``N``, and is what FedIPW's aggregation uses);
- IPW stratum shares ``π̂_j = Σ_{i∈A, s_i=j} 1/p_i / Σ_{i∈A} 1/p_i``: the Hájek estimate of
  the population share of stratum ``j``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.propensity.errors import ShapeError
from fairsched.propensity.validation import as_vector, check_propensities


def ipw_weights(p: Any) -> np.ndarray:
    """``w = 1/p`` after checking every ``p`` is in ``(0, 1]``."""
    return 1.0 / check_propensities(p)


def _pair(y: Any, p: Any) -> tuple[np.ndarray, np.ndarray]:
    p = check_propensities(np.asarray(p, dtype=np.float64).reshape(-1))
    y = np.asarray(y, dtype=np.float64)
    if y.shape[0] != p.size:
        raise ShapeError(f"y: has {y.shape[0]} rows, propensities has {p.size} entries")
    return y, p


def horvitz_thompson_mean(y: Any, p: Any, population_size: float) -> np.ndarray:
    """``(1/N) Σ_{i∈A} y_i / p_i``; ``y`` may be ``(n,)`` or ``(n, d)`` (updates)."""
    y, p = _pair(y, p)
    if not population_size > 0:
        raise ShapeError(f"population_size: is {population_size}, expected > 0")
    return np.tensordot(1.0 / p, y, axes=1) / float(population_size)


def hajek_mean(y: Any, p: Any) -> np.ndarray:
    """``Σ w_i y_i / Σ w_i`` with ``w_i = 1/p_i``; ``y`` may be ``(n,)`` or ``(n, d)``."""
    y, p = _pair(y, p)
    w = 1.0 / p
    return np.tensordot(w, y, axes=1) / w.sum()


def ipw_shares(labels: Any, p: Any, strata: int | None = None) -> np.ndarray:
    """Population shares of strata ``0..J−1`` estimated from observed labels and propensities.

    ``π̂_j = Σ_{i: s_i = j} 1/p_i / Σ_i 1/p_i``. ``strata`` (``J``) defaults to
    ``max(labels) + 1``; a stratum no observed unit belongs to gets share 0.
    """
    s = np.asarray(labels)
    if s.ndim != 1 or not np.issubdtype(s.dtype, np.integer):
        if s.ndim == 1 and s.size and np.all(np.equal(np.mod(s, 1), 0)):
            s = s.astype(np.int64)
        else:
            raise ShapeError("labels: expected a flat vector of integer stratum labels 0..J-1")
    p = check_propensities(as_vector(p, "propensities", length=s.size))
    J = int(s.max()) + 1 if strata is None else int(strata)
    if s.size and (s.min() < 0 or s.max() >= J):
        raise ShapeError(f"labels: stratum labels must lie in 0..{J - 1}, got {int(s.min())}..{int(s.max())}")
    w = np.bincount(s, weights=1.0 / p, minlength=J)
    return w / w.sum()
