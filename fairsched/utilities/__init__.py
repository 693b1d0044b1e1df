"""Utility oracles: set functions over workers (monotone submodular unless a class says otherwise), and their registry.

:func:`utility_from_config` builds one from a ``[utility]`` table by its ``kind``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fairsched.errors import InstanceError
from fairsched.utilities.accuracy import AccuracyUtility
from fairsched.utilities.base import SetFunction
from fairsched.utilities.callable import CallableUtility
from fairsched.utilities.check import SubmodularityReport, check_submodular
from fairsched.utilities.concave_modular import ConcaveModular
from fairsched.utilities.coverage import Coverage
from fairsched.utilities.facility_location import FacilityLocation
from fairsched.utilities.mixture import Mixture
from fairsched.utilities.modular import Modular
from fairsched.utilities.one_step_validation import OneStepValidation
from fairsched.utilities.poststratified_accuracy import PoststratifiedAccuracy
from fairsched.utilities.propensity_accuracy import PropensityWeightedAccuracy

UTILITY_KINDS: dict[str, type] = {
    cls.kind: cls
    for cls in (AccuracyUtility, ConcaveModular, Coverage, FacilityLocation, Mixture, Modular,
                OneStepValidation, PoststratifiedAccuracy, PropensityWeightedAccuracy, CallableUtility)
}


def utility_from_config(table: Mapping[str, Any], n: int | None = None) -> SetFunction:
    """Build the utility a ``[utility]`` table describes, dispatching on ``table["kind"]``.

    ``n``, when given, is the instance's number of workers: per-worker data of another
    length raises :class:`InstanceError` naming the key. ``n`` is required for ``python``.
    """
    if not isinstance(table, Mapping):
        raise InstanceError(f"must be a table, got {type(table).__name__}")
    if "kind" not in table:
        raise InstanceError("missing key", key="kind")
    kind = table["kind"]
    cls = UTILITY_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        known = ", ".join(sorted(UTILITY_KINDS))
        raise InstanceError(f"unknown utility kind {kind!r}; known: {known}", key="kind")
    if cls is Mixture:
        return Mixture.from_config(table, build=lambda t: utility_from_config(t, n))
    return cls.from_config(table, n)


__all__ = [
    "UTILITY_KINDS",
    "AccuracyUtility",
    "CallableUtility",
    "ConcaveModular",
    "Coverage",
    "FacilityLocation",
    "Mixture",
    "Modular",
    "OneStepValidation",
    "PoststratifiedAccuracy",
    "PropensityWeightedAccuracy",
    "SetFunction",
    "SubmodularityReport",
    "check_submodular",
    "utility_from_config",
]
