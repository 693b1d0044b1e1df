"""Scheduling policies behind one interface, and the registry the command line uses."""

from __future__ import annotations

from typing import Any

from fairsched.errors import PolicyError
from fairsched.policies.base import Policy
from fairsched.policies.baselines import GreedyPolicy, RandomPolicy, RoundRobinPolicy
from fairsched.policies.fairdg import FairDG

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (FairDG, GreedyPolicy, RandomPolicy, RoundRobinPolicy)
}


def make_policy(name: str, **params: Any) -> Policy:
    """Construct the policy registered as ``name`` with keyword ``params``."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise PolicyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    try:
        return cls(**params)
    except TypeError as exc:
        raise PolicyError(f"{name}: {exc}") from None


__all__ = ["Policy", "FairDG", "GreedyPolicy", "RandomPolicy", "RoundRobinPolicy", "POLICIES", "make_policy"]
