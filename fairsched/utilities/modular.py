"""Modular (additive) utility: the total weight of the selected workers.

``f(S) = Σ_{u∈S} weights_u`` with ``weights >= 0``. Trivially monotone submodular;
useful as a baseline and as the linear part of a pricing objective.
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction, as_index_set
from fairsched.utilities.validation import as_masks, check_vector, read_table


class Modular(SetFunction):
    """``f(S) = Σ_{u∈S} w_u`` with ``w >= 0``.

    Gains: ``f(S ∪ {u}) − f(S) = w_u`` for ``u ∉ S``. Multilinear extension:
    ``F(y) = w·y`` with gradient ``w``. ``n``, if given, is the number of workers
    ``weights`` must describe.

    Examples
    --------
    >>> from fairsched.utilities import Modular
    >>> f = Modular([1.0, 2.0, 3.0])
    >>> f.value([0, 2]), f.gains([0]).tolist()
    (4.0, [0.0, 2.0, 3.0])
    >>> value, gradient = f.multilinear([0.5, 0.5, 0.5])
    >>> value, gradient.tolist()
    (3.0, [1.0, 2.0, 3.0])
    """

    kind = "modular"

    def __init__(self, weights: Any, *, n: int | None = None):
        self.weights = check_vector(weights, "weights", length=n, nonnegative=True)
        if self.weights.size == 0:
            raise InstanceError("must list at least one worker", key="weights")
        self.n = int(self.weights.size)

    @property
    def submodular(self) -> bool:
        """Always ``True``: a modular function with non-negative weights."""
        return True

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = as_masks(masks, self.n)
        return masks @ self.weights

    def gains(self, S: Any) -> np.ndarray:
        S = as_index_set(S, self.n)
        out = self.weights.copy()
        out[S] = 0.0
        return out

    def multilinear(self, y: np.ndarray) -> tuple[float, np.ndarray]:
        """``(F(y), ∇F(y)) = (w·y, w)``."""
        y = np.asarray(y, dtype=np.float64)
        if y.shape != (self.n,):
            raise ValueError(f"y must have shape ({self.n},), got {y.shape}")
        return float(self.weights @ y), self.weights.copy()

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "weights": self.weights.tolist()}

    @classmethod
    def from_config(cls, table: dict, n: int | None = None) -> Self:
        """Build from a ``[utility]`` table with ``weights`` (one per worker)."""
        table = read_table(table, cls.kind, ["weights"])
        return cls(table["weights"], n=n)
