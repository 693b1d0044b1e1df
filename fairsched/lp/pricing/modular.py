"""Exact pricing for a modular utility: ``f(S) + λ(S) = Σ_{u∈S} (w_u + λ_u)`` is maximised by
the ``k`` largest ``w_u + λ_u``."""

from __future__ import annotations

import numpy as np

from fairsched.lp.pricing.base import PricingOracle, ranked
from fairsched.solvers.colgen import PricingResult
from fairsched.utilities.modular import Modular


class ModularPricing(PricingOracle):
    """Top-``k`` of ``w + λ``; extra columns swap the ``k``-th member for the next ones."""

    name = "modular-top-k"
    exact = True

    def __init__(self, utility: Modular, k: int, *, max_columns: int = 10):
        super().__init__(utility.n, k, max_columns)
        self.weights = utility.weights

    def price(self, lam: np.ndarray) -> PricingResult:
        score = self.weights + lam
        order = np.argsort(-score, kind="stable")
        best = np.zeros(self.n, dtype=bool)
        best[order[: self.k]] = True
        columns = [best]
        last = order[self.k - 1]
        for outside in order[self.k: self.k + self.max_columns - 1]:
            swap = best.copy()
            swap[last], swap[outside] = False, True
            columns.append(swap)
        columns = np.array(columns)
        return ranked(columns, columns @ self.weights, lam, self.max_columns,
                      upper_bound=float(score[order[: self.k]].sum()), exact=True)
