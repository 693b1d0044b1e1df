"""Run a policy for ``T`` rounds and record the schedule, resumably.

:class:`Simulation` plays rounds in steps and can save and restore its whole state (the
policy's, random generators included, and the schedule so far), so a run interrupted at
any checkpoint and resumed writes exactly the schedule an uninterrupted run writes.
:func:`run` is the one-call form.
"""

from __future__ import annotations

import base64
import zlib
from typing import Any, Callable

import numpy as np

from fairsched.availability import Availability
from fairsched.policies.base import Policy
from fairsched.problem import Problem
from fairsched.schedule import Schedule

ProgressCallback = Callable[[int], None]
RUN_FORMAT = "fairsched-run"
RUN_VERSION = 1


def _pack(array: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(array, dtype="<i8").tobytes())).decode()


def _unpack(text: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text.encode(), validate=True)), dtype="<i8").astype(np.int64)


class Simulation:
    """``rounds`` rounds of ``policy`` on ``problem``, played by :meth:`advance`.

    ``availability`` (optional) says which workers can be asked each round; it is drawn
    from ``seed`` and the round number alone, so it needs no state of its own.
    """

    def __init__(self, problem: Problem, policy: Policy, rounds: int, seed: int | None = 0,
                 availability: Availability | None = None) -> None:
        if isinstance(rounds, bool) or int(rounds) < 1:
            raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
        self.problem, self.policy, self.rounds, self.seed = problem, policy, int(rounds), seed
        self.availability = availability
        policy.reset(problem, np.random.default_rng(seed))
        self.t = 0
        self.end = 0
        self.indptr = np.zeros(self.rounds + 1, dtype=np.int64)
        self.indices = np.empty(self.rounds * problem.k, dtype=np.int64)

    @property
    def done(self) -> bool:
        return self.t >= self.rounds

    def advance(self, until: int | None = None) -> None:
        """Play rounds ``t + 1 .. until`` (default: to the end)."""
        until = self.rounds if until is None else min(int(until), self.rounds)
        policy, k = self.policy, self.problem.k
        availability = self.availability
        for t in range(self.t, until):
            chosen = policy.select(None if availability is None else availability.mask(t + 1))
            size = chosen.size
            if size > k:
                raise RuntimeError(f"{policy.name} selected {size} > k = {k} workers in round {t + 1}")
            self.indices[self.end:self.end + size] = chosen
            self.end += size
            self.indptr[t + 1] = self.end
            policy.observe(chosen)
        self.t = max(self.t, until)

    def schedule(self) -> Schedule:
        """The rounds played so far."""
        return Schedule(self.problem.n, self.indptr[:self.t + 1].copy(), self.indices[:self.end].copy(),
                        self.policy.name, self.seed)

    def state_dict(self) -> dict[str, Any]:
        """Versioned, JSON-serialisable state: the policy and the schedule so far."""
        return {"format": RUN_FORMAT, "version": RUN_VERSION, "rounds": self.rounds, "seed": self.seed,
                "t": self.t, "policy": self.policy.state_dict(),
                "indptr": _pack(self.indptr[:self.t + 1]), "indices": _pack(self.indices[:self.end])}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` output (``ValueError``/``KeyError`` on a malformed one)."""
        indptr, indices = _unpack(state["indptr"]), _unpack(state["indices"])
        t = int(state["t"])
        if indptr.size != t + 1 or indptr[-1] != indices.size or t > self.rounds:
            raise ValueError("the schedule in the state is inconsistent")
        if (indices < 0).any() or (indices >= self.problem.n).any():
            raise ValueError("the schedule in the state names workers outside the problem")
        self.policy.load_state_dict(state["policy"])
        self.t, self.end = t, int(indices.size)
        self.indptr[:t + 1] = indptr
        self.indices[:self.end] = indices


def run(problem: Problem, policy: Policy, rounds: int | None = None, seed: int | None = 0,
        progress: ProgressCallback | None = None, progress_every: int = 1000,
        availability: Availability | None = None) -> Schedule:
    """Reset ``policy`` on ``problem`` with ``seed`` and play ``rounds`` rounds.

    Every round the policy's :meth:`~Policy.select` result (among the workers
    ``availability`` makes available, if given) is recorded and handed back to
    :meth:`~Policy.observe`. Same seed, same schedule. ``progress(t)`` is called every
    ``progress_every`` rounds and at the end. ``rounds`` defaults to ``problem.rounds``.
    """
    rounds = problem.rounds if rounds is None else rounds
    if rounds is None:
        raise ValueError("rounds must be given (the problem has no default)")
    simulation = Simulation(problem, policy, rounds, seed, availability)
    while not simulation.done:
        simulation.advance(simulation.t + progress_every)
        if progress is not None:
            progress(simulation.t)
    return simulation.schedule()
