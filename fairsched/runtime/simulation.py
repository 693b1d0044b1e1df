"""Run a policy for ``T`` rounds and record the schedule, resumably.

:class:`Simulation` drives the :class:`~fairsched.runtime.engine.Engine` for ``rounds``
rounds, among the workers an availability model makes available, and stores the
schedule. Its state (the engine's state and the schedule so far) can be saved and
restored, so a run interrupted at any checkpoint and resumed writes exactly the schedule
an uninterrupted run writes. :func:`run` is the one-call form.
"""

from __future__ import annotations

import base64
import binascii
import os
import zlib
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from fairsched.availability import Availability
from fairsched.errors import CheckpointError, FairschedError, TooLargeError
from fairsched.policies import Policy
from fairsched.problem import Problem
from fairsched.runtime.engine import Engine
from fairsched.runtime.state import STATE_VERSION, check_state_header
from fairsched.schedule import Schedule
from fairsched.seeding import Seed

if TYPE_CHECKING:
    from fairsched.lp.result import Optimum

ProgressCallback = Callable[[int], None]
RUN_FORMAT = "fairsched-run"
#: bytes a schedule of ``T`` rounds of ``k`` workers needs in memory: ``8·T·(k + 1)``
BYTES_PER_CELL = 8


def _pack(array: np.ndarray) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(array, dtype="<i8").tobytes())).decode()


def _unpack(text: str) -> np.ndarray:
    try:
        raw = zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True))
    except (binascii.Error, zlib.error, UnicodeEncodeError, AttributeError) as exc:
        raise ValueError(f"the stored schedule is damaged ({exc})") from None
    if len(raw) % 8:
        raise ValueError("the stored schedule is damaged (truncated integers)")
    return np.frombuffer(raw, dtype="<i8").astype(np.int64)


def _memory_bytes() -> int | None:
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):  # not POSIX
        return None


def _check_size(rounds: int, k: int) -> None:
    need = BYTES_PER_CELL * rounds * (k + 1)
    memory = _memory_bytes()
    if memory is not None and need > memory // 2:
        raise TooLargeError(f"{rounds:,} rounds of {k} workers need {need / 2**30:,.1f} GiB for the schedule, "
                            f"more than half of this machine's {memory / 2**30:,.1f} GiB; "
                            f"at most {memory // 2 // (BYTES_PER_CELL * (k + 1)):,} rounds fit")


def availability_for(problem: Problem, seed: Seed) -> Availability | None:
    """The availability model of ``problem`` (its probabilities, drawn with ``seed``), or ``None``."""
    if problem.availability is None:
        return None
    draws = seed if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) else 0
    return Availability(probabilities=problem.availability, seed=int(draws))


class Simulation:
    """``rounds`` rounds of ``policy`` on ``problem``, played by :meth:`advance`.

    ``availability`` (optional) says which workers can be asked each round; it is drawn
    from its seed and the round number alone, so it needs no state of its own.
    """

    def __init__(self, problem: Problem, policy: str | Policy, rounds: int, seed: Seed = 0,
                 availability: Availability | None = None, *, optimum: Optimum | None = None,
                 **params: Any) -> None:
        if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or int(rounds) < 1:
            raise FairschedError(f"rounds must be a positive integer, got {rounds!r}")
        _check_size(int(rounds), problem.k)
        self.problem, self.rounds, self.seed = problem, int(rounds), seed
        self.availability = availability
        self.engine = Engine(problem, policy, seed=seed, optimum=optimum, **params)
        self.policy = self.engine.policy
        self.end = 0
        self.indptr = np.zeros(self.rounds + 1, dtype=np.int64)
        self.indices = np.empty(self.rounds * problem.k, dtype=np.int64)

    @property
    def t(self) -> int:
        """Rounds played."""
        return self.engine.round

    @property
    def done(self) -> bool:
        return self.t >= self.rounds

    def advance(self, until: int | None = None) -> None:
        """Play rounds ``t + 1 .. until`` (default: to the end)."""
        until = self.rounds if until is None else min(int(until), self.rounds)
        engine, availability = self.engine, self.availability
        for t in range(self.t, until):
            chosen = engine.select(None if availability is None else availability.mask(t + 1))
            size = chosen.size
            self.indices[self.end:self.end + size] = chosen
            self.end += size
            self.indptr[t + 1] = self.end
            engine.observe()

    def schedule(self) -> Schedule:
        """The rounds played so far."""
        return Schedule(self.problem.n, self.indptr[:self.t + 1].copy(), self.indices[:self.end].copy(),
                        self.policy.name, self.seed if isinstance(self.seed, int) else None)

    def state_dict(self) -> dict[str, Any]:
        """Versioned, JSON-serialisable state: the engine's state and the schedule so far."""
        return {"format": RUN_FORMAT, "version": STATE_VERSION, "rounds": self.rounds, "t": self.t,
                "engine": self.engine.state_dict(),
                "indptr": _pack(self.indptr[:self.t + 1]), "indices": _pack(self.indices[:self.end])}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict` output; a damaged or foreign state is a :class:`CheckpointError`."""
        check_state_header(state, RUN_FORMAT)
        try:
            indptr, indices = _unpack(state["indptr"]), _unpack(state["indices"])
            t = int(state["engine"]["round"])
            if state["t"] != t:
                raise ValueError(f"round {state['t']} disagrees with the engine's {t}")
            if state["rounds"] != self.rounds:
                raise ValueError(f"the state is of a run of {state['rounds']} rounds, not {self.rounds}")
            if indptr.size != t + 1 or indptr[0] != 0 or indptr[-1] != indices.size or t > self.rounds:
                raise ValueError("the schedule in the state is inconsistent")
            if (np.diff(indptr) < 0).any() or (np.diff(indptr) > self.problem.k).any():
                raise ValueError("the schedule in the state has rounds of impossible sizes")
            if (indices < 0).any() or (indices >= self.problem.n).any():
                raise ValueError("the schedule in the state names workers outside the problem")
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"the run state is malformed: {exc}") from None
        self.engine.load_state_dict(state["engine"])
        self.end = int(indices.size)
        self.indptr[:t + 1] = indptr
        self.indices[:self.end] = indices


def run(problem: Problem, policy: str | Policy, rounds: int | None = None, seed: Seed = 0,
        progress: ProgressCallback | None = None, progress_every: int = 1000,
        availability: Availability | None = None, *, optimum: Optimum | None = None,
        **params: Any) -> Schedule:
    """Play ``policy`` (a name or a policy object) on ``problem`` for ``rounds`` rounds.

    Every round the policy's selection, among the workers ``availability`` makes available
    (default: the problem's availability probabilities, drawn from ``seed``; ``None`` and
    no probabilities means everyone), is recorded and handed back to it. Same seed, same
    schedule. ``progress(t)`` is called every ``progress_every`` rounds and at the end;
    ``rounds`` defaults to ``problem.rounds``. ``optimum`` hands a precomputed LP optimum
    to the policies that play it; ``params`` are policy parameters when ``policy`` is a
    name. Whether the floors survive the availability is not checked here: see
    :func:`fairsched.availability.check_availability`.

    Examples
    --------
    >>> import fairsched as fs
    >>> problem = fs.load_instance("paper")
    >>> schedule = fs.run(problem, "fairdg", rounds=1000, seed=0)
    >>> schedule.rounds, int(schedule.sizes().max())
    (1000, 6)
    >>> fs.run(problem, "lyapunov", rounds=50, V=1.0).policy
    'lyapunov'
    """
    rounds = problem.rounds if rounds is None else rounds
    if rounds is None:
        raise FairschedError("rounds must be given (the problem has no default)")
    if availability is None:
        availability = availability_for(problem, seed)
    simulation = Simulation(problem, policy, rounds, seed, availability, optimum=optimum, **params)
    while not simulation.done:
        simulation.advance(simulation.t + progress_every)
        if progress is not None:
            progress(simulation.t)
    return simulation.schedule()
