"""The policy interface: a stateful rule that picks one set per round.

A policy is reset for a problem and a random generator, then alternates
``select()`` (the set for the next round) and ``observe(selected)`` (what was actually
selected). The base class keeps the round counter ``t`` (rounds observed) and the
selection counts ``N_u(t)`` that most fair policies need.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from fairsched.problem import Problem


class Policy(ABC):
    """Base class of every scheduling policy."""

    name: ClassVar[str] = "abstract"
    #: whether the policy uses the fairness floors ``r`` at all
    fair: ClassVar[bool] = True

    def __init__(self) -> None:
        self.problem: Problem | None = None
        self.rng: np.random.Generator = np.random.default_rng(0)
        self.t = 0
        self.counts = np.zeros(0, dtype=np.int64)

    def reset(self, problem: Problem, rng: np.random.Generator | int | None = None) -> None:
        """Prepare a fresh run on ``problem``; ``rng`` is a Generator or a seed."""
        self.problem = problem
        self.rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
        self.t = 0
        self.counts = np.zeros(problem.n, dtype=np.int64)
        self._prepare()

    def _prepare(self) -> None:
        """Hook for per-problem precomputation, called by :meth:`reset`."""

    @abstractmethod
    def select(self) -> np.ndarray:
        """The sorted ``int64`` set of workers for round ``t + 1``."""

    def observe(self, selected: np.ndarray) -> None:
        """Record that ``selected`` was the set of round ``t + 1``."""
        self.counts[selected] += 1
        self.t += 1

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        """Policy-specific figures for reports (e.g. a fractional point and its guarantee)."""
        return {}

    def params(self) -> dict[str, Any]:
        """Parameters that, with the name, reproduce this policy."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"
