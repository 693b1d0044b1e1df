"""A stateful scheduler to embed in a federated-learning server.

The server asks ``select(round, available_ids)`` for the ids to train this round and
reports ``observe(round, served_ids)``, the ids that actually returned an update. Fairness
counts either the rounds a worker was *selected* (``count="selected"``, what the server
controls) or the rounds it *served* (``count="served"``, what the model actually got);
with ``"served"`` a worker that drops out stays in debt and is asked again. Workers
``leave`` and ``join``: a departed worker is never asked and, when it rejoins, its floor
restarts from that round (it owes nothing for the time it was away).

The scheduler is the :class:`~fairsched.runtime.engine.Engine` addressed by worker id; its
whole state, random generator included, is the engine's versioned JSON document, and a
scheduler restored from it makes exactly the decisions the original would have made.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np

from fairsched.atomic import atomic_write
from fairsched.errors import FairschedError, InstanceError
from fairsched.policies import Policy
from fairsched.problem import Problem
from fairsched.runtime.engine import COUNT_MODES, STATE_FORMAT, Engine
from fairsched.runtime.state import read_state
from fairsched.seeding import Seed

if TYPE_CHECKING:
    from fairsched.lp.result import Optimum

__all__ = ["COUNT_MODES", "STATE_FORMAT", "Scheduler"]


class Scheduler:
    """Select workers by id, round after round, with availability, drop-outs and checkpoints.

    Parameters
    ----------
    problem : Problem
        Utility, ``k``, floors ``r`` and worker ids.
    policy : str or Policy
        A policy name (``"fairdg"``, ``"lp-sequenced"``, ...) or a policy object.
    seed : int or numpy Generator
        Seed of the policy's random generator.
    count : {"selected", "served"}
        What counts towards a worker's floor.
    optimum : Optimum, optional
        A precomputed LP optimum for the LP policies (not solved again).
    **params
        Policy parameters when ``policy`` is a name.

    Examples
    --------
    >>> import fairsched as fs
    >>> scheduler = fs.Scheduler(fs.load_instance("paper"), "fairdg", count="served")
    >>> ask = scheduler.select(1, available_ids=["u1", "u2", "u3", "u5", "u6", "u7", "u8", "u9", "u10"])
    >>> len(ask), "u4" in ask
    (6, False)
    >>> scheduler.observe(1, served_ids=ask[:-1])      # the last one never reported back
    >>> scheduler.round
    1
    """

    def __init__(self, problem: Problem, policy: str | Policy = "fairdg", *, seed: Seed = 0,
                 count: str = "selected", optimum: Optimum | None = None, **params: Any) -> None:
        self.engine = Engine(problem, policy, seed=seed, count=count, optimum=optimum, **params)
        self.problem = problem
        self.policy = self.engine.policy
        self._position = {w: i for i, w in enumerate(problem.ids)}

    @property
    def round(self) -> int:
        """The last observed round (0 before the first)."""
        return self.engine.round

    @property
    def count(self) -> str:
        return self.engine.count

    @property
    def seed(self) -> int | None:
        return self.engine.seed

    @property
    def departed(self) -> np.ndarray:
        return self.engine.departed

    @property
    def pending(self) -> np.ndarray | None:
        return self.engine.pending

    # ids ---------------------------------------------------------------------------------
    def _indices(self, ids: Iterable[str], what: str) -> np.ndarray:
        try:
            return np.unique(np.fromiter((self._position[str(w)] for w in ids), dtype=np.int64))
        except KeyError as missing:
            raise InstanceError(f"{what}: unknown worker id {missing}") from None

    def _ids(self, indices: np.ndarray) -> list[str]:
        ids = self.problem.ids
        return [ids[i] for i in indices]

    # the loop ----------------------------------------------------------------------------
    def select(self, round: int, available_ids: Iterable[str] | None = None) -> list[str]:
        """The ids to ask in ``round`` (``= last observed round + 1``), among ``available_ids``."""
        if round != self.round + 1:
            raise FairschedError(f"select: expected round {self.round + 1}, got {round}")
        mask = None
        if available_ids is not None:
            mask = np.zeros(self.problem.n, dtype=bool)
            mask[self._indices(available_ids, "select")] = True
        return self._ids(self.engine.select(mask))

    def observe(self, round: int, served_ids: Iterable[str]) -> None:
        """Record who returned an update in ``round``; they must be among the ids selected."""
        if self.pending is None or round != self.round + 1:
            raise FairschedError(f"observe: round {round} was not selected (next round is {self.round + 1})")
        try:
            self.engine.observe(self._indices(served_ids, "observe"))
        except InstanceError:
            raise
        except FairschedError as exc:
            raise FairschedError(f"observe: {exc}") from None

    def leave(self, worker_id: str) -> None:
        """``worker_id`` departs: never asked until it joins again."""
        self.engine.leave(self._indices([worker_id], "leave"))

    def join(self, worker_id: str) -> None:
        """``worker_id`` (re)joins; its floor restarts now, so it owes nothing for its absence."""
        self.engine.join(self._indices([worker_id], "join"))

    # reporting -----------------------------------------------------------------------------
    def fractions(self) -> dict[str, float]:
        """Counted fraction of rounds so far, per worker id."""
        t = max(self.round, 1)
        return {w: float(c) / t for w, c in zip(self.problem.ids, self.policy.counts)}

    def debts(self) -> dict[str, float]:
        """``r_u·t − N_u(t)`` after the last observed round, per worker id."""
        return {w: float(d) for w, d in zip(self.problem.ids, self.engine.debts())}

    # state ---------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The versioned JSON document (the engine's state) that :meth:`load_state_dict` restores."""
        return self.engine.state_dict()

    def load_state_dict(self, state: Any) -> None:
        """Continue from ``state``; refuses a state of another format, version or problem."""
        self.engine.load_state_dict(state)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`state_dict` as JSON, atomically."""
        with atomic_write(path) as handle:
            json.dump(self.state_dict(), handle)

    @classmethod
    def load(cls, path: str | os.PathLike[str], problem: Problem, policy: str | Policy = "fairdg",
             **kwargs: Any) -> "Scheduler":
        """A scheduler for ``problem`` restored from the JSON file at ``path``."""
        state = read_state(path)
        seed = state.get("seed", 0) if isinstance(state, dict) else 0
        count = state.get("count", "selected") if isinstance(state, dict) else "selected"
        scheduler = cls(problem, policy, seed=seed if isinstance(seed, int) else 0,
                        count=count if count in COUNT_MODES else "selected", **kwargs)
        scheduler.load_state_dict(state)
        return scheduler
