"""The policy interface: a stateful rule that picks one set per round.

A policy is reset for a problem and a random generator, then alternates
``select(available)`` (the set for the next round, among the available workers) and
``observe(counted)`` (the workers whose round counts towards their floors: those selected,
or those that actually served). The base class keeps the round counter ``t`` (rounds
observed) and the counts ``N_u(t)`` that most fair policies need, and saves and restores
the whole state (:meth:`Policy.state_dict`), random generator included, so a restored
policy makes exactly the decisions the original would have.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fairsched.errors import PolicyError
from fairsched.problem import Problem
from fairsched.seeding import Seed, as_generator

if TYPE_CHECKING:
    from fairsched.feedback import Feedback
    from fairsched.lp.result import Optimum
    from fairsched.utilities.base import SetFunction

# r_u·t is computed in floating point; a debt within this of an integer is that integer.
DEBT_TOLERANCE = 1e-9


class Policy(ABC):
    """Base class of every scheduling policy."""

    name: ClassVar[str] = "abstract"
    #: whether the policy uses the fairness floors ``r`` at all
    fair: ClassVar[bool] = True
    #: whether the policy plays the LP optimum ``p*`` (it solves the LP on its first round,
    #: unless :meth:`use_optimum` gave it one or a restored state holds its plan)
    uses_optimum: ClassVar[bool] = False

    def __init__(self) -> None:
        self.problem: Problem | None = None
        self.rng: np.random.Generator = np.random.default_rng(0)
        self.t = 0
        self.counts = np.zeros(0, dtype=np.int64)
        self._given_optimum: Optimum | None = None

    def use_optimum(self, optimum: Optimum) -> None:
        """Plan from this precomputed LP optimum instead of solving the LP.

        Only for policies with :attr:`uses_optimum`; the optimum must be of the problem the
        policy is then reset on (its support is checked against the floors there).
        """
        if not self.uses_optimum:
            raise PolicyError(f"{self.name} does not plan from the LP optimum")
        self._given_optimum = optimum

    def reset(self, problem: Problem, seed: Seed = None) -> None:
        """Prepare a fresh run on ``problem``; ``seed`` is an int, a Generator or ``None``."""
        self.problem = problem
        self.rng = as_generator(seed)
        self.t = 0
        self.counts = np.zeros(problem.n, dtype=np.int64)
        self._everyone = np.ones(problem.n, dtype=bool)
        self._caps = None if problem.caps is None else np.asarray(problem.caps, dtype=float)
        self._prepare()

    def _prepare(self) -> None:
        """Hook for per-problem precomputation, called by :meth:`reset`."""

    def select(self, available: np.ndarray | None = None) -> np.ndarray:
        """The sorted ``int64`` set of workers for round ``t + 1``.

        ``available`` is a boolean mask of the workers that can be asked this round (all
        when ``None``). Every policy chooses among the available workers only: the LP
        policies refill a planned set's unavailable members with the most urgent available
        workers (:mod:`fairsched.policies.refill`); whatever unavailable member a policy
        still returns is dropped here.

        **Caps** (``problem.caps``): a worker with ``N_u(t) >= c_u·(t + 1)`` is treated as
        unavailable for round ``t + 1`` (:meth:`capped`), so ``N_u(t) < c_u·t + 1`` after every
        round ``t``, for every policy: the cap excess ``N_u(t) − c_u·t`` stays below 1. A worker
        in debt is never capped (``N_u(t) < r_u·(t + 1) <= c_u·(t + 1)``), so the caps take
        nothing from the floors; a round selects fewer than ``k`` workers only when fewer
        than ``k`` are both available and under their caps.
        """
        if available is None:
            if self._caps is None:
                return self._select(self._everyone)
            mask = ~self.capped()
        else:
            mask = np.asarray(available, dtype=bool)
            if mask.shape != (self.problem.n,):
                raise ValueError(f"available must be a boolean mask of length {self.problem.n}, "
                                 f"got shape {mask.shape}")
            if self._caps is not None:
                mask = mask & ~self.capped()
        chosen = self._select(mask)
        return chosen[mask[chosen]]

    def capped(self) -> np.ndarray:
        """Boolean mask of the workers at their cap for round ``t + 1``: ``N_u(t) >= c_u·(t + 1)``
        (none without caps)."""
        if self._caps is None:
            return np.zeros(self.problem.n, dtype=bool)
        return self.counts >= self._caps * (self.t + 1) - DEBT_TOLERANCE

    @abstractmethod
    def _select(self, available: np.ndarray) -> np.ndarray:
        """The set for round ``t + 1`` given the availability mask (see :meth:`select`)."""

    def observe(self, counted: np.ndarray) -> None:
        """Record round ``t + 1``: ``counted`` are the workers whose floors it serves."""
        self.counts[counted] += 1
        self.t += 1

    def learn(self, served: np.ndarray, feedback: Feedback) -> None:
        """What round ``t`` (just observed) showed: ``served`` and their :class:`~fairsched.feedback.Feedback`.

        A no-op here; policies that learn the utility (:mod:`fairsched.online`) use it.
        """

    def replan(self, utility: SetFunction) -> None:
        """Plan with ``utility`` from now on, keeping the round counter, the counts and the
        random generator (so the floors' bookkeeping is untouched).

        The problem's utility is replaced and the per-problem precomputation (:meth:`_prepare`)
        is redone; an LP policy solves its LP again at its next round. Used by the learning
        policies of :mod:`fairsched.online`, which re-plan as their estimate of ``f`` improves.
        """
        self.problem = replace(self.problem, utility=utility)
        self._given_optimum = None
        self._prepare()
        self._resume()

    def _resume(self) -> None:
        """Hook after :meth:`replan`: rebuild what :meth:`_prepare` derived from ``t`` and the counts."""

    def forgive(self, workers: np.ndarray) -> None:
        """Clear the debts of ``workers`` (they were away): raise ``N_u`` to ``⌊r_u·t⌋``."""
        owed = np.floor(self.problem.r[workers] * self.t + DEBT_TOLERANCE).astype(np.int64)
        self.counts[workers] = np.maximum(self.counts[workers], owed)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly where this policy is (JSON-serialisable)."""
        return {"policy": self.name, "params": self.params(), "n": int(self.problem.n), "t": int(self.t),
                "counts": self.counts.tolist(), "rng": self.rng.bit_generator.state,
                **self._extra_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` output; the policy must already be :meth:`reset` on the same problem."""
        if state.get("policy") != self.name or state.get("params") != self.params():
            raise ValueError(f"state is for policy {state.get('policy')!r} {state.get('params')}, "
                             f"not {self.name!r} {self.params()}")
        if state.get("n") != self.problem.n or len(state.get("counts", ())) != self.problem.n:
            raise ValueError(f"state is for {state.get('n')} workers, the problem has {self.problem.n}")
        self.t = int(state["t"])
        self.counts = np.asarray(state["counts"], dtype=np.int64)
        self.rng.bit_generator.state = state["rng"]
        self._load_extra_state(state)

    def _extra_state(self) -> dict[str, Any]:
        """Subclass state beyond ``t``, counts and the generator."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`_extra_state` saved."""

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        """Policy-specific figures for reports (e.g. a fractional point and its guarantee)."""
        return {}

    def params(self) -> dict[str, Any]:
        """Parameters that, with the name, reproduce this policy."""
        return {}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"



def number_param(policy: str, name: str, value: Any, *, low: float = -np.inf, high: float = np.inf,
                 low_open: bool = False, high_open: bool = False) -> float:
    """``value`` as a finite float in the given range, or a :class:`PolicyError` naming the parameter."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    x = float(value) if ok else float("nan")
    inside = (x > low if low_open else x >= low) and (x < high if high_open else x <= high)
    if not (ok and np.isfinite(x) and inside):
        limits = [f"{'>' if low_open else '>='} {low:g}"] if np.isfinite(low) else []
        limits += [f"{'<' if high_open else '<='} {high:g}"] if np.isfinite(high) else []
        raise PolicyError(f"{policy}: {name} must be a finite number {' and '.join(limits)}, got {value!r}".replace(
            "number , got", "number, got"))
    return x


def count_param(policy: str, name: str, value: Any, minimum: int = 1) -> int:
    """``value`` as an int ``>= minimum``, or a :class:`PolicyError` naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
        raise PolicyError(f"{policy}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)
