"""Pricing oracles for column generation: ``max_{|S|=k} f(S) + λ(S)`` (``docs/mathematics.md`` §3).

:func:`pricing_for` picks one for a utility:

=========================  ==========================================  =======
utility                    oracle                                      exact
=========================  ==========================================  =======
``C(n, k)`` small          :class:`EnumerationPricing` (any utility)   yes
accuracy                   :class:`AccuracyPricing` (Lagrangian, B&B,  yes
                           DP over integer sizes)
coverage                   :class:`CoveragePricing` (HiGHS MILP)       yes
facility location          :class:`FacilityLocationPricing` (MILP,     yes
                           Benders cuts)
concave of modular,        :class:`ConcavePricing` (MILP, tangent      yes
propensity accuracy        cuts; SCIP's nonlinear branch and bound
                           for sqrt/log1p with the ``scip`` extra)
modular                    :class:`ModularPricing` (top-k)             yes
mixture of the above       :class:`MixturePricing` (one MILP)          yes
anything else              :class:`GreedyPricing` (bound only where    no
                           submodularity is certified)
=========================  ==========================================  =======
"""

from __future__ import annotations

from fairsched.lp.pricing.accuracy import AccuracyPricing
from fairsched.lp.pricing.base import PricingOracle
from fairsched.lp.pricing.concave import ConcavePricing
from fairsched.lp.pricing.coverage import CoveragePricing
from fairsched.lp.pricing.enumeration import EnumerationPricing
from fairsched.lp.pricing.facility_location import FacilityLocationPricing
from fairsched.lp.pricing.greedy import GreedyPricing
from fairsched.lp.pricing.initial import initial_pool, systematic_sets
from fairsched.lp.pricing.milp import MilpPricing
from fairsched.lp.pricing.mixture import MixturePricing
from fairsched.lp.pricing.modular import ModularPricing
from fairsched.lp.pricing.terms import swap_deltas_for, terms_for
from fairsched.solvers import count_k_subsets
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

#: without an exact structured oracle, ``auto`` prices by enumeration up to this many k-sets
#: (values computed once, then one matrix-vector product per call): exact for every utility
ENUMERATION_PRICING_LIMIT = 200_000

METHODS = ("auto", "enumeration", "accuracy", "coverage", "facility-location", "concave",
           "modular", "milp", "greedy")

_STRUCTURED: dict[type, type] = {
    AccuracyUtility: AccuracyPricing,
    Coverage: CoveragePricing,
    FacilityLocation: FacilityLocationPricing,
    ConcaveModular: ConcavePricing,
    PropensityWeightedAccuracy: ConcavePricing,
    Modular: ModularPricing,
}


#: cut-loop MILPs that enumeration beats while ``C(n, k) <= enumeration_limit``
_ENUMERATE_WHEN_SMALL = (ConcavePricing, MixturePricing)


def _structured(utility: SetFunction, k: int) -> type | None:
    """The exact oracle class for ``utility`` (exact type match), or ``None``."""
    cls = _STRUCTURED.get(type(utility))
    if cls is None and type(utility) is Mixture and terms_for(utility, k) is not None:
        return MixturePricing
    return cls


def has_exact_pricing(utility: SetFunction, k: int,
                      enumeration_limit: int = ENUMERATION_PRICING_LIMIT) -> bool:
    """Whether ``pricing_for(utility, k)`` returns an exact oracle (structured or enumeration)."""
    return _structured(utility, k) is not None or count_k_subsets(utility.n, k) <= enumeration_limit


def pricing_for(utility: SetFunction, k: int, method: str = "auto", *,
                max_columns: int = 10,
                enumeration_limit: int = ENUMERATION_PRICING_LIMIT) -> PricingOracle:
    """The pricing oracle for ``max_{|S|=k} utility(S) + λ(S)``.

    ``method="auto"`` uses the exact oracle of the utility's class (exact type match: a
    subclass may change ``f``) if there is one (for concave of modular, propensity accuracy
    and mixtures only when ``C(n, k) > enumeration_limit``), else enumeration when
    ``C(n, k) <= enumeration_limit`` (exact for every utility), else greedy.  A named method forces that oracle (``ValueError`` if it does not fit
    the utility).  ``max_columns`` caps the columns returned per call.
    """
    if method not in METHODS:
        raise ValueError(f"unknown pricing method {method!r}; expected one of {', '.join(METHODS)}")
    structured = _structured(utility, k)
    if method == "auto":
        small = count_k_subsets(utility.n, k) <= enumeration_limit
        if structured is not None and not (small and structured in _ENUMERATE_WHEN_SMALL):
            return structured(utility, k, max_columns=max_columns)
        if small:
            return EnumerationPricing(utility, k, max_columns=max_columns)
        return GreedyPricing(utility, k, max_columns=max_columns, swap_deltas=swap_deltas_for(utility))
    if method == "enumeration":
        return EnumerationPricing(utility, k, max_columns=max_columns)
    if method == "greedy":
        return GreedyPricing(utility, k, max_columns=max_columns, swap_deltas=swap_deltas_for(utility))
    if method == "milp":
        if terms_for(utility, k) is None:
            raise ValueError(f"pricing method 'milp' does not fit a {utility.kind!r} utility")
        return MixturePricing(utility, k, max_columns=max_columns)
    wanted = {"accuracy": AccuracyPricing, "coverage": CoveragePricing,
              "facility-location": FacilityLocationPricing, "concave": ConcavePricing,
              "modular": ModularPricing}[method]
    if structured is not wanted:
        raise ValueError(f"pricing method {method!r} does not fit a {utility.kind!r} utility")
    return wanted(utility, k, max_columns=max_columns)


__all__ = [
    "ENUMERATION_PRICING_LIMIT",
    "METHODS",
    "AccuracyPricing",
    "ConcavePricing",
    "CoveragePricing",
    "EnumerationPricing",
    "FacilityLocationPricing",
    "GreedyPricing",
    "MilpPricing",
    "MixturePricing",
    "ModularPricing",
    "PricingOracle",
    "has_exact_pricing",
    "initial_pool",
    "pricing_for",
    "swap_deltas_for",
    "systematic_sets",
    "terms_for",
]
