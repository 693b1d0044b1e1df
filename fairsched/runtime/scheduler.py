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

Cost per round. The id-to-index map and the object array of ids are built once; a call
converts the ids it is given (one dictionary look-up each, in C through ``map``) and
returns ``k`` ids. With most workers available, passing the few ``unavailable_ids``
instead of ``available_ids`` converts far fewer strings; a caller that already holds a
boolean mask passes ``available_mask`` and converts none. Callers that already hold
indices use :meth:`Scheduler.select_indices` and :meth:`Scheduler.observe_indices`, which do
no per-worker Python work at all.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsched.atomic import atomic_write
from fairsched.errors import FairschedError, InstanceError
from fairsched.feedback import Feedback, feedback_from_ids
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
        self._id_array = np.array(problem.ids, dtype=object)

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
    def indices_of(self, ids: Iterable[str], what: str = "indices_of") -> np.ndarray:
        """The indices of ``ids`` in the order given (an :class:`InstanceError` names an unknown one)."""
        if isinstance(ids, np.ndarray) and ids.dtype.kind == "U":
            ids = ids.tolist()
        elif not isinstance(ids, (list, tuple)):
            ids = list(ids)
        try:
            return np.fromiter(map(self._position.__getitem__, ids), dtype=np.int64, count=len(ids))
        except (KeyError, TypeError):  # a non-str id (an int, say) or an unknown one: the slow path says which
            try:
                return np.fromiter((self._position[str(w)] for w in ids), dtype=np.int64, count=len(ids))
            except KeyError as missing:
                raise InstanceError(f"{what}: unknown worker id {missing}") from None

    def ids_of(self, indices: np.ndarray) -> list[str]:
        """The ids of worker ``indices``."""
        return self._id_array[np.asarray(indices, dtype=np.int64)].tolist()

    def _indices(self, ids: Iterable[str], what: str) -> np.ndarray:
        return np.unique(self.indices_of(ids, what))

    def _mask(self, indices: np.ndarray, value: bool) -> np.ndarray:
        mask = np.full(self.problem.n, not value, dtype=bool)
        mask[indices] = value
        return mask

    # the loop ----------------------------------------------------------------------------
    def select(self, round: int, available_ids: Iterable[str] | None = None, *,
               unavailable_ids: Iterable[str] | None = None,
               available_mask: np.ndarray | None = None) -> list[str]:
        """The ids to ask in ``round`` (``= last observed round + 1``), among ``available_ids``.

        ``unavailable_ids`` says the same the other way round (everyone else is available);
        ``available_mask`` is a boolean array of length ``n`` in the order of
        ``problem.ids``, for callers that already hold one (no per-worker Python work).
        Give at most one of the three.
        """
        given = sum(x is not None for x in (available_ids, unavailable_ids, available_mask))
        if given > 1:
            raise FairschedError("select: give one of available_ids, unavailable_ids or available_mask")
        self._check_select(round)
        mask = None
        if available_ids is not None:
            mask = self._mask(self.indices_of(available_ids, "select"), True)
        elif unavailable_ids is not None:
            mask = self._mask(self.indices_of(unavailable_ids, "select"), False)
        elif available_mask is not None:
            mask = self._checked_mask(available_mask, "select")
        return self.ids_of(self.engine.select(mask))

    def _checked_mask(self, mask: np.ndarray, what: str, name: str = "available_mask") -> np.ndarray:
        mask = np.asarray(mask)
        if mask.dtype != bool or mask.shape != (self.problem.n,):
            raise InstanceError(f"{what}: {name} must be a boolean array of shape ({self.problem.n},), "
                                f"got {mask.dtype} of shape {mask.shape}")
        return mask

    def select_indices(self, round: int, available: np.ndarray | None = None) -> np.ndarray:
        """:meth:`select` by index: the sorted ``int64`` workers for ``round``.

        ``available`` is a boolean mask of length ``n`` or an array of worker indices
        (``None``: everyone). No per-worker Python work: for servers that keep indices.
        """
        self._check_select(round)
        mask = None
        if available is not None:
            available = np.asarray(available)
            if available.dtype == bool:
                mask = self._checked_mask(available, "select_indices", "available")
            else:
                indices = available.astype(np.int64, copy=False)
                if indices.size and (indices.min() < 0 or indices.max() >= self.problem.n):
                    raise InstanceError(f"select_indices: worker indices must lie in 0..{self.problem.n - 1}")
                mask = self._mask(indices, True)
        return self.engine.select(mask)

    def _check_select(self, round: int) -> None:
        if round != self.round + 1:
            raise FairschedError(f"select: expected round {self.round + 1}, got {round}")

    def observe(self, round: int, served_ids: Iterable[str], feedback: Any = None) -> None:
        """Record who returned an update in ``round``; they must be among the ids selected.

        ``feedback`` (optional) is what the round showed, for policies that learn the utility
        (:mod:`fairsched.online`): ``{"reward": r, "workers": {id: {"loss": ..., "num-examples":
        ...}}}`` or a :class:`~fairsched.feedback.Feedback` (see
        :func:`fairsched.feedback.feedback_from_ids`). Checked before anything is recorded.
        """
        self._check_observe(round)
        served = self._indices(served_ids, "observe")
        self._observe(served, None if feedback is None else feedback_from_ids(feedback, self._position))

    def observe_indices(self, round: int, served: np.ndarray | None = None, feedback: Feedback | None = None) -> None:
        """:meth:`observe` by index: ``served`` worker indices (``None``: everyone selected served)."""
        self._check_observe(round)
        self._observe(None if served is None else np.unique(np.asarray(served, dtype=np.int64)), feedback)

    def _check_observe(self, round: int) -> None:
        if self.pending is None or round != self.round + 1:
            raise FairschedError(f"observe: round {round} was not selected (next round is {self.round + 1})")

    def _observe(self, served: np.ndarray | None, feedback: Feedback | None = None) -> None:
        try:
            self.engine.observe(served, feedback)
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
             **kwargs: Any) -> Scheduler:
        """A scheduler for ``problem`` restored from the JSON file at ``path``."""
        state = read_state(path)
        seed = state.get("seed", 0) if isinstance(state, dict) else 0
        count = state.get("count", "selected") if isinstance(state, dict) else "selected"
        scheduler = cls(problem, policy, seed=seed if isinstance(seed, int) else 0,
                        count=count if count in COUNT_MODES else "selected", **kwargs)
        scheduler.load_state_dict(state)
        return scheduler
