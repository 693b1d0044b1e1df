"""Scheduling policies behind one interface, and the registry the command line uses."""

from __future__ import annotations

import inspect
from typing import Any

from fairsched.errors import PolicyError
from fairsched.policies.base import Policy
from fairsched.policies.baselines import GreedyPolicy, RandomPolicy, RoundRobinPolicy
from fairsched.policies.continuous_greedy import FairCG1, FairCG2
from fairsched.policies.fairdg import FairDG
from fairsched.policies.lp import LPRandom, LPSequenced
from fairsched.policies.lyapunov import Lyapunov

POLICIES: dict[str, type[Policy]] = {
    cls.name: cls for cls in (FairDG, FairCG1, FairCG2, LPRandom, LPSequenced, Lyapunov,
                              GreedyPolicy, RandomPolicy, RoundRobinPolicy)
}


def make_policy(name: str, **params: Any) -> Policy:
    """Construct the policy registered as ``name`` with keyword ``params``."""
    try:
        cls = POLICIES[name]
    except KeyError:
        raise PolicyError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    accepted = [p for p in inspect.signature(cls).parameters if p not in ("self", "args", "kwargs")]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise PolicyError(f"{name}: unknown parameter(s) {', '.join(unknown)}; "
                          f"accepted: {', '.join(accepted) or 'none'}")
    return cls(**params)


__all__ = ["Policy", "FairDG", "FairCG1", "FairCG2", "LPRandom", "LPSequenced", "Lyapunov", "GreedyPolicy", "RandomPolicy", "RoundRobinPolicy", "POLICIES", "make_policy"]
