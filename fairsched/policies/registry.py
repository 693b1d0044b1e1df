"""The policy registry: names, construction with checked parameters, and ``KEY=VALUE`` parsing."""

from __future__ import annotations

import inspect
from typing import Any, Sequence

from fairsched.errors import FairschedError, PolicyError
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


#: the policies of Li, Liu and Ji's simulations (FairCG1, FairCG2, FairDG and the unfair greedy DG)
PAPER_POLICIES = ("faircg1", "faircg2", "fairdg", "greedy")


def parse_params(pairs: Sequence[str]) -> dict[str, Any]:
    """``["steps=200", "method=exact"]`` → ``{"steps": 200, "method": "exact"}`` (ints, floats, booleans, strings)."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise FairschedError(f"--param {pair!r}: expected KEY=VALUE")
        value: Any = text
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            for convert in (int, float):
                try:
                    value = convert(text)
                    break
                except ValueError:
                    continue
        params[key.strip().replace("-", "_")] = value
    return params
