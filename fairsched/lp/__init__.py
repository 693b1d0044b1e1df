"""``U_opt``: the LP over distributions on sets, by enumeration or column generation.

:func:`optimum` solves it (the availability LP when the problem has availability
probabilities); :mod:`fairsched.lp.pricing` holds the pricing oracles of column generation.
"""

from fairsched.lp.availability import availability_optimum, availability_patterns
from fairsched.lp.result import Optimum
from fairsched.lp.solve import (
           DEFAULT_MAX_COLUMNS,
           ENUMERATION_THRESHOLD,
           METHODS,
           optimum,
)

__all__ = ["DEFAULT_MAX_COLUMNS", "ENUMERATION_THRESHOLD", "METHODS", "Optimum", "availability_optimum",
           "availability_patterns", "optimum"]
