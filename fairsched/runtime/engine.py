"""The one select/observe loop every driver shares: a policy on a problem, round by round.

:class:`Engine` holds what a fair scheduler must remember between rounds, by worker
index: the policy (and its random generator), the round counter, the set selected for
the round in progress, and the workers that have left. Three drivers use it:

- :class:`~fairsched.runtime.simulation.Simulation` (and :func:`~fairsched.runtime.simulation.run`)
  plays ``T`` rounds offline and records the schedule;
- :class:`~fairsched.runtime.scheduler.Scheduler` serves an FL server by worker id;
- the federated-learning experiments (:mod:`fairsched.fl`) schedule their clients with it.

Its state (:meth:`Engine.state_dict`) is the one state format of fairsched: a scheduler's
saved state is exactly an engine state, and a run checkpoint embeds one.

Fairness counts either the rounds a worker was *selected* (``count="selected"``) or the
rounds it *served* (``count="served"``: a worker that drops out stays in debt and is asked
again). A departed worker is never selected; when it joins again its floor restarts, so
it owes nothing for its absence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fairsched.errors import CheckpointError, FairschedError
from fairsched.policies import Policy, make_policy
from fairsched.problem import Problem
from fairsched.runtime.state import (
    STATE_VERSION,
    check_state_header,
    problem_fingerprint,
)
from fairsched.seeding import Seed

if TYPE_CHECKING:
    from fairsched.feedback import Feedback
    from fairsched.lp.result import Optimum

STATE_FORMAT = "fairsched-state"
COUNT_MODES = ("selected", "served")


class Engine:
    """A policy played on a problem, one ``select``/``observe`` pair per round.

    Parameters
    ----------
    problem : Problem
        Utility, ``k``, floors ``r`` and worker ids.
    policy : str or Policy
        A registered policy name (``"fairdg"``, ``"lp-sequenced"``, ...) or a policy object.
    seed : int or numpy Generator
        Seed of the policy's random generator.
    count : {"selected", "served"}
        What counts towards a worker's floor.
    optimum : Optimum, optional
        A precomputed LP optimum for the policies that play it (``lp-random``,
        ``lp-sequenced``), so the LP is not solved again.
    **params
        Policy parameters when ``policy`` is a name.

    Examples
    --------
    >>> import numpy as np
    >>> import fairsched as fs
    >>> from fairsched.runtime.engine import Engine
    >>> engine = Engine(fs.load_instance("paper"), "fairdg")
    >>> chosen = engine.select()
    >>> engine.observe(chosen[:-1])       # the last one never reported back
    >>> engine.round, chosen.size
    (1, 6)
    """

    def __init__(self, problem: Problem, policy: str | Policy = "fairdg", *, seed: Seed = 0,
                 count: str = "selected", optimum: Optimum | None = None, **params: Any) -> None:
        if count not in COUNT_MODES:
            raise FairschedError(f"count must be one of {', '.join(COUNT_MODES)}, got {count!r}")
        self.problem = problem
        self.policy = make_policy(policy, **params)
        if optimum is not None and self.policy.uses_optimum:
            self.policy.use_optimum(optimum)
        self.policy.reset(problem, seed)
        self.seed = seed if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else None
        self.count = count
        self.round = 0
        self.pending: np.ndarray | None = None
        self.departed = np.zeros(problem.n, dtype=bool)
        self._any_departed = False

    def select(self, available: np.ndarray | None = None) -> np.ndarray:
        """The sorted ``int64`` workers for round :attr:`round` ``+ 1`` among ``available``
        (a boolean mask; ``None`` means everyone) and not departed."""
        if self.pending is not None:
            raise FairschedError(f"round {self.round + 1} was already selected; observe it before selecting again")
        if self._any_departed:
            available = ~self.departed if available is None else np.asarray(available, dtype=bool) & ~self.departed
        chosen = self.policy.select(available)
        if chosen.size > self.problem.k:
            raise FairschedError(f"{self.policy.name} selected {chosen.size} > k = {self.problem.k} workers "
                                 f"in round {self.round + 1}")
        self.pending = chosen
        return chosen

    def observe(self, served: np.ndarray | None = None, feedback: Feedback | None = None) -> None:
        """Close the round: ``served`` (sorted indices, default all selected) returned an update;
        ``feedback`` (a :class:`~fairsched.feedback.Feedback`) is handed to the policy's
        :meth:`~fairsched.policies.base.Policy.learn` after the round is counted."""
        if self.pending is None:
            raise FairschedError(f"round {self.round + 1} has not been selected yet")
        returned = self.pending if served is None else self._check_served(served)
        counted = self.pending if self.count == "selected" else returned
        self.policy.observe(counted)
        if feedback is not None:
            self.policy.learn(returned, feedback)
        self.round += 1
        self.pending = None

    def learn(self, served: np.ndarray, feedback: Feedback) -> None:
        """Feedback for the round just observed (:meth:`observe` without it), arriving later:
        e.g. the evaluation of the model that round trained."""
        if self.pending is not None:
            raise FairschedError(f"round {self.round + 1} is selected: feedback for round {self.round} came too late")
        self.policy.learn(np.asarray(served, dtype=np.int64), feedback)

    def _check_served(self, served: np.ndarray) -> np.ndarray:
        served = np.asarray(served, dtype=np.int64)
        strangers = np.setdiff1d(served, self.pending)
        if strangers.size:
            names = ", ".join(self.problem.ids[u] for u in strangers[:10])
            raise FairschedError(f"{names} served round {self.round + 1} without being selected")
        return served

    def leave(self, workers: np.ndarray) -> None:
        """``workers`` depart: never selected until they join again."""
        self.departed[workers] = True
        self._any_departed = bool(self.departed.any())

    def join(self, workers: np.ndarray) -> None:
        """``workers`` (re)join; the floors of those that had departed restart now."""
        workers = np.asarray(workers, dtype=np.int64)
        back = workers[self.departed[workers]]
        if back.size:
            self.departed[back] = False
            self.policy.forgive(back)
            self._any_departed = bool(self.departed.any())

    def debts(self) -> np.ndarray:
        """``r_u·t − N_u(t)`` after the last observed round ``t``."""
        return self.problem.r * self.round - self.policy.counts

    # state -----------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The versioned JSON document that :meth:`load_state_dict` restores."""
        return {"format": STATE_FORMAT, "version": STATE_VERSION,
                "problem": problem_fingerprint(self.problem), "seed": self.seed, "count": self.count,
                "round": self.round,
                "pending": None if self.pending is None else self.pending.tolist(),
                "departed": np.flatnonzero(self.departed).tolist(),
                "policy": self.policy.state_dict()}

    def load_state_dict(self, state: Any) -> None:
        """Continue from ``state``; refuses a state of another format, version, problem or count mode."""
        check_state_header(state, STATE_FORMAT)
        if state.get("problem") != problem_fingerprint(self.problem):
            raise CheckpointError("the state belongs to a different problem (utility, k, r or ids differ)")
        try:
            if state["count"] != self.count:
                raise CheckpointError(f"the state counts {state['count']!r}, this scheduler {self.count!r}")
            departed = np.zeros(self.problem.n, dtype=bool)
            departed[np.asarray(state["departed"], dtype=np.int64)] = True
            pending = None if state["pending"] is None else np.asarray(state["pending"], dtype=np.int64)
            if pending is not None and (pending.ndim != 1 or (pending < 0).any() or (pending >= self.problem.n).any()):
                raise ValueError("the pending set names workers outside the problem")
            self.policy.load_state_dict(state["policy"])
            self.round = int(state["round"])
            if self.round != self.policy.t or self.round < 0:
                raise ValueError(f"round {self.round} disagrees with the policy's {self.policy.t}")
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CheckpointError(f"the state is malformed: {exc}") from None
        self.pending, self.departed = pending, departed
        self._any_departed = bool(departed.any())
