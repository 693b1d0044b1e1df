"""Concave over modular: diminishing returns per feature.

``f(S) = Σ_j φ(Σ_{u∈S} features[j][u])`` with ``φ ∈ {sqrt, log1p}`` and non-negative
features; rows are features ``j``, columns are workers.
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

CONCAVE = {"sqrt": np.sqrt, "log1p": np.log1p}


class ConcaveModular(SetFunction):
    """``f(S) = Σ_j φ(Σ_{u∈S} features[j, u])`` with ``φ = sqrt`` or ``log1p`` (``φ(0) = 0``).

    Examples
    --------
    >>> from fairsched.utilities import ConcaveModular
    >>> f = ConcaveModular([[4.0, 0.0, 9.0],         # rows: features, columns: workers
    ...                     [1.0, 1.0, 0.0]])
    >>> round(f.value([0, 2]), 6)                     # sqrt(4 + 9) + sqrt(1)
    4.605551
    >>> f.gains([]).tolist()                          # the singletons' values
    [3.0, 1.0, 3.0]
    """

    kind = "concave-modular"

    def __init__(self, features: Any, concave: str = "sqrt", *, n: int | None = None):
        self.features = check_matrix(features, "features", columns=n, nonnegative=True)
        if self.features.shape[1] == 0:
            raise InstanceError("must list at least one worker (column)", key="features")
        if not isinstance(concave, str) or concave not in CONCAVE:
            raise InstanceError(f"unknown function {concave!r}; known: {', '.join(CONCAVE)}",
                                key="concave")
        self.n = int(self.features.shape[1])
        self.concave = concave
        self._phi = CONCAVE[concave]

    @property
    def submodular(self) -> bool:
        """Always ``True``: a concave non-decreasing ``φ`` with ``φ(0) = 0`` of a modular function with non-negative
        weights is monotone submodular, and so is a sum of such terms."""
        return True

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = as_masks(masks, self.n)
        out = np.empty(masks.shape[0], dtype=np.float64)
        for rows in row_chunks(masks.shape[0], self.features.shape[0]):
            out[rows] = self._phi(masks[rows] @ self.features.T).sum(axis=1)
        return out

    def gains(self, S: Any) -> np.ndarray:
        S = as_index_set(S, self.n)
        base = self.features[:, S].sum(axis=1)
        out = self._phi(base[:, None] + self.features).sum(axis=0) - self._phi(base).sum()
        out[S] = 0.0
        return out

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "features": self.features.tolist(), "concave": self.concave}

    @classmethod
    def from_config(cls, table: dict, n: int | None = None) -> Self:
        """Build from a ``[utility]`` table with ``features`` and optional ``concave``."""
        table = read_table(table, cls.kind, ["features"], ["concave"])
        return cls(table["features"], table.get("concave", "sqrt"), n=n)
