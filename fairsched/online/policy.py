"""A fair policy that plans with a learned utility: FairDG or lp-sequenced on the learner's optimistic ``f``.

:class:`OnlinePolicy` wraps a base policy (``fairdg`` or ``lp-sequenced``) and a
:class:`~fairsched.online.learner.Learner`. The base policy plans with
``learner.optimistic()``, re-planned (:meth:`~fairsched.policies.base.Policy.replan`) at
rounds ``1, 2, 4, 8, …`` (a doubling schedule: ``O(log T)`` re-plans, the LP solved again
each time), and learns from each round's :class:`~fairsched.feedback.Feedback`.

What the floors keep, whatever the learner believes: the base policy's fairness bookkeeping
(counts, debts, lp-sequenced's deadline guard) never looks at the utility, so FairDG keeps
its debt bound and lp-sequenced its ``debt < 1`` with every available worker, for any
utility estimate; the floors in turn force every worker to be tried at rate ``r_u``, which
is the exploration the learner needs.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from fairsched.errors import PolicyError
from fairsched.feedback import Feedback
from fairsched.online.learner import Learner
from fairsched.policies import make_policy
from fairsched.policies.base import Policy
from fairsched.problem import Problem
from fairsched.seeding import Seed

BASES = ("fairdg", "lp-sequenced")
#: plan with the learner's optimistic utility, or with its point estimate (the floors explore)
PLAN_WITH = ("optimistic", "estimate")


class OnlinePolicy(Policy):
    """``base`` planning with ``learner``'s optimistic utility (see the module docstring)."""

    name = "online"
    fair: ClassVar[bool] = True

    def __init__(self, base: str, learner: Learner, plan_with: str = "optimistic") -> None:
        super().__init__()
        if base not in BASES:
            raise PolicyError(f"online: base must be one of {', '.join(BASES)}, got {base!r}")
        if plan_with not in PLAN_WITH:
            raise PolicyError(f"online: plan_with must be one of {', '.join(PLAN_WITH)}, got {plan_with!r}")
        self.plan_with = plan_with
        self.base_name = base
        self.learner = learner
        self.base: Policy = make_policy(base)
        self._next_plan = 1
        self.replans = 0

    def params(self) -> dict[str, Any]:
        return {"base": self.base_name, "learner": self.learner.name, "plan_with": self.plan_with}

    def reset(self, problem: Problem, seed: Seed = None) -> None:
        super().reset(problem, seed)
        if problem.n != self.learner.n:
            raise PolicyError(f"online: the learner is for {self.learner.n} workers, the problem has {problem.n}")
        self.base.reset(problem, self.rng)  # one generator for both, so one state restores both
        self._planned = None
        self._next_plan = 1
        self.replans = 0

    def _plan(self, utility: Any) -> None:
        self.base.replan(utility)
        self._planned = utility
        self.replans += 1

    def _select(self, available: np.ndarray) -> np.ndarray:
        if self.t + 1 >= self._next_plan:
            self._plan(self.learner.optimistic() if self.plan_with == "optimistic" else self.learner.estimate())
            self._next_plan *= 2
        return self.base._select(available)

    def observe(self, counted: np.ndarray) -> None:
        super().observe(counted)
        self.base.observe(counted)

    def forgive(self, workers: np.ndarray) -> None:
        super().forgive(workers)
        self.base.forgive(workers)

    def learn(self, served: np.ndarray, feedback: Feedback) -> None:
        self.learner.update(served, feedback)

    def _extra_state(self) -> dict[str, Any]:
        return {"learner": self.learner.state_dict(), "next_plan": self._next_plan, "replans": self.replans,
                "planned": None if self._planned is None else self._planned.to_config(),
                "base": self.base.state_dict()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.learner.load_state_dict(state["learner"])
        self._next_plan, self.replans = int(state["next_plan"]), int(state["replans"])
        self._planned = None
        if state["planned"] is not None:
            self._planned = self.learner.planned_from_config(state["planned"])
            self.base.replan(self._planned)
        self.base.load_state_dict(state["base"])

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        return {"replans": self.replans, "learned": self.learner.parameters()}
