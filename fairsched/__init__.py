"""fairsched: fair worker scheduling for federated learning.

Every round a server may ask only ``k`` of its ``n`` workers to train; the utility of a set
of workers is monotone submodular, and every worker ``u`` must be selected in at least a
fraction ``r_u`` of the rounds. This is the multi-round submodular maximisation problem with
cardinality and fairness constraints (MMSM-CF) of Fengjiao Li, Jia Liu and Bo Ji,
"Federated Learning with Fair Worker Selection: A Multi-Round Submodular Maximization
Approach" (IEEE MASS 2021).

Typical use::

    import fairsched as fs
    problem = fs.load_instance("paper")             # a bundled instance, or a TOML path
    opt = fs.optimum(problem)                       # U_opt, the LP yardstick
    schedule = fs.run(problem, "fairdg", rounds=100_000, seed=0)
    report = fs.evaluate(schedule, problem, opt)

The names below are loaded on first use, so ``import fairsched`` stays light (no solver,
no SciPy optimiser, no plotting until they are needed).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

#: public name -> module that defines it (imported on first access)
_EXPORTS: dict[str, str] = {
    "FairschedError": "fairsched.errors",
    "InfeasibleError": "fairsched.errors",
    "InstanceError": "fairsched.errors",
    "PolicyError": "fairsched.errors",
    "TooLargeError": "fairsched.errors",
    "CheckpointError": "fairsched.errors",
    "MissingDependencyError": "fairsched.errors",
    "Problem": "fairsched.problem",
    "Schedule": "fairsched.schedule",
    "Report": "fairsched.metrics",
    "evaluate": "fairsched.metrics",
    "load_instance": "fairsched.instances.io",
    "problem_from_table": "fairsched.instances.io",
    "save_instance": "fairsched.instances.io",
    "bundled_names": "fairsched.instances.bundled",
    "Optimum": "fairsched.lp.result",
    "optimum": "fairsched.lp.solve",
    "POLICIES": "fairsched.policies.registry",
    "make_policy": "fairsched.policies.registry",
    "Policy": "fairsched.policies.base",
    "FairDG": "fairsched.policies.fairdg",
    "run": "fairsched.runtime.simulation",
    "Scheduler": "fairsched.runtime.scheduler",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fairsched' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # static analysers see the real names
    from fairsched.errors import (CheckpointError, FairschedError, InfeasibleError, InstanceError,
                                  MissingDependencyError, PolicyError, TooLargeError)
    from fairsched.instances.bundled import bundled_names
    from fairsched.instances.io import load_instance, problem_from_table, save_instance
    from fairsched.lp.result import Optimum
    from fairsched.lp.solve import optimum
    from fairsched.metrics import Report, evaluate
    from fairsched.policies.base import Policy
    from fairsched.policies.fairdg import FairDG
    from fairsched.policies.registry import POLICIES, make_policy
    from fairsched.problem import Problem
    from fairsched.runtime.scheduler import Scheduler
    from fairsched.runtime.simulation import run
    from fairsched.schedule import Schedule
