"""The learner interface: a model of the utility with an estimate and an optimistic version.

A learner knows the *structure* of the utility (a template ``SetFunction`` of the right kind,
whose parameters it does not trust) and learns its parameters from what each round shows
(:class:`~fairsched.feedback.Feedback`: the set-level reward and the workers' metrics).
:meth:`Learner.estimate` is the current point estimate, :meth:`Learner.optimistic` an upper
confidence version for planning (optimism in the face of uncertainty); both are utilities of
a kind fairsched's policies and LP already handle, so planning with them needs nothing new.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fairsched.feedback import Feedback
from fairsched.utilities.base import SetFunction

if TYPE_CHECKING:
    from fairsched.problem import Problem


class Learner(ABC):
    """Base class of the utility learners (see the module docstring)."""

    name: ClassVar[str] = "abstract"

    def __init__(self, template: SetFunction) -> None:
        self.template = template
        self.n = int(template.n)
        self.rounds = 0

    @classmethod
    def for_problem(cls, problem: Problem) -> Learner:
        """A learner of ``problem``'s utility structure, for its ``k`` (``TypeError`` if it does not fit)."""
        return cls(problem.utility)

    def update(self, served: np.ndarray, feedback: Feedback) -> None:
        """Learn from one round: ``served`` (sorted indices) trained, ``feedback`` is what it showed."""
        self.rounds += 1
        self._update(np.asarray(served, dtype=np.int64), feedback)

    @abstractmethod
    def _update(self, served: np.ndarray, feedback: Feedback) -> None:
        """Subclass part of :meth:`update`."""

    @abstractmethod
    def estimate(self) -> SetFunction:
        """The point estimate of ``f``, monotone submodular."""

    def optimistic(self) -> SetFunction:
        """An upper-confidence version of ``f`` for planning (default: the estimate)."""
        return self.estimate()

    def planned_from_config(self, config: dict[str, Any]) -> SetFunction:
        """The utility a policy planned with, from its ``to_config()`` (restored states)."""
        from fairsched.utilities import utility_from_config

        return utility_from_config(config, self.n)

    @abstractmethod
    def parameters(self) -> dict[str, Any]:
        """The learned parameters (JSON-ready), for reports."""

    def state_dict(self) -> dict[str, Any]:
        """Everything learned, JSON-serialisable; :meth:`load_state_dict` restores it exactly."""
        return {"learner": self.name, "rounds": self.rounds, **self._extra_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output (on a learner built with the same template)."""
        if state.get("learner") != self.name:
            raise ValueError(f"state is for learner {state.get('learner')!r}, not {self.name!r}")
        self.rounds = int(state["rounds"])
        self._load_extra_state(state)

    @abstractmethod
    def _extra_state(self) -> dict[str, Any]:
        """Subclass state."""

    @abstractmethod
    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore :meth:`_extra_state`."""
