"""Errors of the federated-learning simulator."""

from __future__ import annotations

from fairsched.errors import FairschedError


class SimulationError(FairschedError):
    """Bad simulation input: an unknown bias level or rule, a non-positive count, bad shapes."""
