"""Exact pricing by enumeration: ``f`` of all ``C(n, k)`` sets, computed once.

Each call is one matrix-vector product ``f + masks @ λ`` and a partial sort; the
maximum is exact, so ``upper_bound`` is the best reduced value itself.  Meant for
``C(n, k)`` up to a few hundred thousand (memory ``C(n, k)·n`` bytes for the masks).
"""

from __future__ import annotations

import numpy as np

from fairsched.lp.pricing.base import PricingOracle
from fairsched.solvers import k_subset_masks
from fairsched.solvers.colgen import PricingResult
from fairsched.utilities.base import SetFunction


class EnumerationPricing(PricingOracle):
    """``max_{|S|=k} f(S) + λ(S)`` over all ``k``-sets (``fairsched.solvers.k_subset_masks``)."""

    name = "enumeration"
    exact = True

    def __init__(self, utility: SetFunction, k: int, *, max_columns: int = 10,
                 limit: int = 1_000_000):
        super().__init__(utility.n, k, max_columns)
        self.masks = k_subset_masks(self.n, self.k, max_columns=limit)
        self.values = np.asarray(utility.values(self.masks), dtype=float)
        self._dense = self.masks.astype(np.float64)

    def price(self, lam: np.ndarray) -> PricingResult:
        reduced = self.values + self._dense @ lam
        m = min(self.max_columns, reduced.size)
        top = np.argpartition(-reduced, m - 1)[:m]
        top = top[np.argsort(-reduced[top], kind="stable")]
        return PricingResult(columns=self.masks[top], values=self.values[top],
                             upper_bound=float(reduced[top[0]]), exact=True)
