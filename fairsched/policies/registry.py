"""The policy registry: names, construction with checked parameters, and ``KEY=VALUE`` parsing."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

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


def make_policy(name: str | Policy, **params: Any) -> Policy:
    """The policy registered as ``name``, built with keyword ``params``; a policy object is returned as is.

    >>> make_policy("lyapunov", V=5.0)
    Lyapunov(V=5.0)
    >>> make_policy("fairdg", speed=2)
    Traceback (most recent call last):
    ...
    fairsched.errors.PolicyError: fairdg: unknown parameter(s) speed; accepted: rank, cache_size, cache_bytes
    """
    if isinstance(name, Policy):
        if params:
            raise PolicyError(f"parameters {', '.join(sorted(params))} given with a policy object; "
                              "set them when constructing it")
        return name
    if not isinstance(name, str):
        raise PolicyError(f"a policy is a name or a Policy object, got {type(name).__name__}")
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
