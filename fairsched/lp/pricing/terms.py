"""The MILP terms of the pricing objective and which utility is made of which.

:func:`terms_for` maps a utility to ``[(weight, term), ...]`` with ``f = Σ weight·term`` on
the ``k``-sets (``None`` when some part has no MILP form): modular, coverage, facility
location, concave of modular (``φ = sqrt, log1p``), the accuracy curve and its
propensity-weighted sum over strata, and non-negative mixtures of these (components'
weights multiply).  :func:`swap_deltas_for` does the same for the local search's
``f(S − u + v) − f(S)``.
"""

from __future__ import annotations

import numpy as np

from fairsched.lp.pricing.milp import MilpModel, SwapDeltas, Term
from fairsched.utilities import (
    AccuracyUtility,
    ConcaveModular,
    Coverage,
    FacilityLocation,
    Mixture,
    Modular,
    PropensityWeightedAccuracy,
)
from fairsched.utilities.base import SetFunction


class ModularTerm(Term):
    """``Σ_u w_u x_u``: no columns, only objective coefficients of ``x``."""

    def __init__(self, weights: np.ndarray):
        self.weights = np.asarray(weights, dtype=float)

    def build(self, model: MilpModel, weight: float) -> None:
        model.x_cost += weight * self.weights


def modular_swap_deltas(utility: Modular, mask: np.ndarray) -> np.ndarray:
    """``w_v − w_u`` for members ``u`` (rows) and outsiders ``v`` (columns)."""
    w = utility.weights
    return w[~mask][None, :] - w[mask][:, None]


def terms_for(utility: SetFunction, k: int) -> list[tuple[float, Term]] | None:
    """The terms whose weighted sum is ``utility`` on ``k``-sets, or ``None``.

    Exact type matches only: a subclass may change ``f``.
    """
    from fairsched.lp.pricing.concave import (
        accuracy_term,
        concave_modular_term,
        propensity_term,
    )
    from fairsched.lp.pricing.coverage import CoverageTerm
    from fairsched.lp.pricing.facility_location import FacilityTerm

    kind = type(utility)
    if kind is Modular:
        return [(1.0, ModularTerm(utility.weights))]
    if kind is Coverage:
        return [(1.0, CoverageTerm(utility, k))]
    if kind is FacilityLocation:
        return [(1.0, FacilityTerm(utility.similarity, k))]
    if kind is ConcaveModular:
        return [(1.0, concave_modular_term(utility, k))]
    if kind is AccuracyUtility:
        return [(1.0, accuracy_term(utility, k))]
    if kind is PropensityWeightedAccuracy:
        return [(1.0, propensity_term(utility, k))]
    if kind is Mixture:
        out: list[tuple[float, Term]] = []
        for weight, component in zip(utility.weights, utility.components):
            if weight == 0:
                continue
            inner = terms_for(component, k)
            if inner is None:
                return None
            out.extend((float(weight) * w, term) for w, term in inner)
        return out
    return None


def swap_deltas_for(utility: SetFunction) -> SwapDeltas | None:
    """A closed-form ``f(S − u + v) − f(S)`` matrix for ``utility``, or ``None``."""
    from fairsched.lp.pricing.concave import concave_swap_deltas
    from fairsched.lp.pricing.coverage import swap_deltas as coverage_deltas
    from fairsched.lp.pricing.facility_location import swap_deltas as facility_deltas

    kind = type(utility)
    simple = {Modular: modular_swap_deltas, Coverage: coverage_deltas,
              FacilityLocation: facility_deltas, ConcaveModular: concave_swap_deltas,
              AccuracyUtility: concave_swap_deltas, PropensityWeightedAccuracy: concave_swap_deltas}
    if kind in simple:
        return simple[kind]
    if kind is Mixture:
        parts = [(float(w), c, swap_deltas_for(c)) for w, c in zip(utility.weights, utility.components) if w > 0]
        if any(deltas is None for _, _, deltas in parts):
            return None

        def mixture_deltas(mixture: Mixture, mask: np.ndarray) -> np.ndarray:
            inside, outside = int(mask.sum()), int(mask.size - mask.sum())
            out = np.zeros((inside, outside))
            for w, component, deltas in parts:
                out += w * deltas(component, mask)
            return out

        return mixture_deltas
    return None
