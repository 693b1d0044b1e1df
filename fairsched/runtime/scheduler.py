"""A stateful scheduler to embed in a federated-learning server.

The server asks ``select(round, available_ids)`` for the ids to train this round and
reports ``observe(round, served_ids)``, the ids that actually returned an update. Fairness
counts either the rounds a worker was *selected* (``count="selected"``, what the server
controls) or the rounds it *served* (``count="served"``, what the model actually got);
with ``"served"`` a worker that drops out stays in debt and is asked again. Workers
``leave`` and ``join``: a departed worker is never asked and, when it rejoins, its floor
restarts from that round (it owes nothing for the time it was away).

The whole state, random generator included, is a versioned JSON document
(:meth:`Scheduler.state_dict`); a scheduler restored from it makes exactly the decisions
the original would have made.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any, Iterable

import numpy as np

from fairsched.atomic import atomic_write
from fairsched.errors import CheckpointError, FairschedError, InstanceError
from fairsched.policies import Policy, make_policy
from fairsched.problem import Problem
from fairsched.runtime.state import (STATE_VERSION, check_state_header, problem_fingerprint,
                                     read_state)

STATE_FORMAT = "fairsched-scheduler"
COUNT_MODES = ("selected", "served")


class Scheduler:
    """Select workers by id, round after round, with availability, drop-outs and checkpoints.

    Parameters
    ----------
    problem : Problem
        Utility, ``k``, floors ``r`` and worker ids.
    policy : str or Policy
        A policy name (``"fairdg"``, ``"lp-sequenced"``, ...) or an instance.
    seed : int
        Seed of the policy's random generator.
    count : {"selected", "served"}
        What counts towards a worker's floor.
    **params
        Policy parameters when ``policy`` is a name.
    """

    def __init__(self, problem: Problem, policy: str | Policy = "fairdg", *, seed: int = 0,
                 count: str = "selected", **params: Any) -> None:
        if count not in COUNT_MODES:
            raise FairschedError(f"count must be one of {', '.join(COUNT_MODES)}, got {count!r}")
        self.problem = problem
        self.policy = make_policy(policy, **params) if isinstance(policy, str) else policy
        self.policy.reset(problem, np.random.default_rng(seed))
        self.seed = seed
        self.count = count
        self.round = 0
        self.pending: np.ndarray | None = None
        self.departed = np.zeros(problem.n, dtype=bool)
        self._position = {w: i for i, w in enumerate(problem.ids)}

    # ids ---------------------------------------------------------------------------------
    def _indices(self, ids: Iterable[str], what: str) -> np.ndarray:
        try:
            return np.unique(np.fromiter((self._position[str(w)] for w in ids), dtype=np.int64))
        except KeyError as missing:
            raise InstanceError(f"{what}: unknown worker id {missing}") from None

    def _ids(self, indices: np.ndarray) -> list[str]:
        return [self.problem.ids[i] for i in indices]

    # the loop ----------------------------------------------------------------------------
    def select(self, round: int, available_ids: Iterable[str] | None = None) -> list[str]:
        """The ids to ask in ``round`` (``= last observed round + 1``), among ``available_ids``."""
        if round != self.round + 1:
            raise FairschedError(f"select: expected round {self.round + 1}, got {round}")
        available = ~self.departed
        if available_ids is not None:
            mask = np.zeros(self.problem.n, dtype=bool)
            mask[self._indices(available_ids, "select")] = True
            available &= mask
        chosen = self.policy.select(None if available.all() else available)
        self.pending = chosen
        return self._ids(chosen)

    def observe(self, round: int, served_ids: Iterable[str]) -> None:
        """Record who returned an update in ``round``; they must be among the ids selected."""
        if self.pending is None or round != self.round + 1:
            raise FairschedError(f"observe: round {round} was not selected (next round is {self.round + 1})")
        served = self._indices(served_ids, "observe")
        strangers = np.setdiff1d(served, self.pending)
        if strangers.size:
            raise FairschedError(f"observe: {', '.join(self._ids(strangers))} served round {round} "
                                 "without being selected")
        self.policy.observe(self.pending if self.count == "selected" else served)
        self.round += 1
        self.pending = None

    def leave(self, worker_id: str) -> None:
        """``worker_id`` departs: never asked until it joins again."""
        self.departed[self._indices([worker_id], "leave")] = True

    def join(self, worker_id: str) -> None:
        """``worker_id`` (re)joins; its floor restarts now, so it owes nothing for its absence."""
        u = self._indices([worker_id], "join")
        if self.departed[u].any():
            self.departed[u] = False
            self.policy.forgive(u)

    # reporting -----------------------------------------------------------------------------
    def fractions(self) -> dict[str, float]:
        """Counted fraction of rounds so far, per worker id."""
        t = max(self.round, 1)
        return {w: float(c) / t for w, c in zip(self.problem.ids, self.policy.counts)}

    def debts(self) -> dict[str, float]:
        """``r_u·t − N_u(t)`` after the last observed round, per worker id."""
        debt = self.problem.r * self.round - self.policy.counts
        return {w: float(d) for w, d in zip(self.problem.ids, debt)}

    # state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The versioned JSON document that :meth:`load_state_dict` restores."""
        return {"format": STATE_FORMAT, "version": STATE_VERSION,
                "problem": problem_fingerprint(self.problem), "seed": self.seed, "count": self.count,
                "round": self.round,
                "pending": None if self.pending is None else self.pending.tolist(),
                "departed": np.flatnonzero(self.departed).tolist(),
                "policy": self.policy.state_dict()}

    def load_state_dict(self, state: Any) -> None:
        """Continue from ``state``; refuses a state of another format, version or problem."""
        check_state_header(state, STATE_FORMAT)
        if state.get("problem") != problem_fingerprint(self.problem):
            raise CheckpointError("the state belongs to a different problem (utility, k, r or ids differ)")
        try:
            if state["count"] != self.count:
                raise CheckpointError(f"the state counts {state['count']!r}, this scheduler {self.count!r}")
            self.policy.load_state_dict(state["policy"])
            self.round = int(state["round"])
            self.pending = None if state["pending"] is None else np.asarray(state["pending"], dtype=np.int64)
            self.departed = np.zeros(self.problem.n, dtype=bool)
            self.departed[np.asarray(state["departed"], dtype=np.int64)] = True
        except CheckpointError:
            raise
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise CheckpointError(f"the state is malformed: {exc}") from None

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`state_dict` as JSON, atomically."""
        with atomic_write(path) as handle:
            json.dump(self.state_dict(), handle)

    @classmethod
    def load(cls, path: str | os.PathLike[str], problem: Problem, policy: str | Policy = "fairdg",
             **kwargs: Any) -> "Scheduler":
        """A scheduler for ``problem`` restored from the JSON file at ``path``."""
        state = read_state(path)
        scheduler = cls(problem, policy, seed=state.get("seed", 0), count=state.get("count", "selected"),
                        **kwargs)
        scheduler.load_state_dict(state)
        return scheduler
