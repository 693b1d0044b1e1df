"""Metrics of a schedule: time-average utility, ratio to ``U_opt``, fractions, debts.

For a schedule ``S_1..S_T`` on a problem with floors ``r`` (Li, Liu and Ji 2021, Section III;
``docs/mathematics.md`` §1):

- time-average utility ``(1/T) Σ_t f(S_t)``, and its ratio to ``U_opt``;
- selection fraction ``N_u(T)/T`` and fairness slack ``min_u (N_u(T)/T − r_u)``;
- maximum debt ``max_{u, 1<=t<=T} (r_u·t − N_u(t))``; short-term fairness holds iff it is ``< 1``;
- with caps ``c``, the maximum cap excess ``max_{u, t} (N_u(t) − c_u·t)``: every policy keeps it
  ``< 1`` (:meth:`fairsched.policies.base.Policy.select`).

Everything is computed in chunks of rounds, so memory does not grow with ``T``; ``f`` is
evaluated once per distinct set in a chunk. :func:`evaluate_stream` consumes a schedule as
an iterator of chunks, for schedules too long to hold in memory.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable, Protocol, Union

import numpy as np

from fairsched.errors import FairschedError
from fairsched.problem import Problem
from fairsched.results import Result
from fairsched.schedule import Schedule

CHUNK_CELLS = 1 << 22  # rounds × workers per chunk: about 4 MB of booleans


class HasValue(Protocol):
    """Anything with a ``value``, such as :class:`fairsched.lp.Optimum`."""

    value: float


@dataclass(frozen=True)
class Report(Result):
    """What :func:`evaluate` measures; ``optimum`` and ``ratio`` are ``None`` without ``U_opt``.

    ``status`` is ``"evaluated"``; ``message`` summarises ratio, slack and debt.
    ``max_cap_excess`` is ``max_{u,t} (N_u(t) − c_u·t)`` on a problem with caps, else ``None``.
    """

    rounds: int
    time_average_utility: float
    optimum: float | None
    ratio: float | None
    selection_fraction: np.ndarray
    fairness_slack: float
    max_debt: float
    worker_max_debt: np.ndarray
    max_cap_excess: float | None = None

    def as_dict(self, ids: tuple[str, ...] | None = None) -> dict[str, Any]:
        """JSON-ready dict; per-worker arrays become ``{id: value}`` maps."""
        data = {name: getattr(self, name) for name in self.__dataclass_fields__}
        names = ids if ids is not None else tuple(str(i) for i in range(self.selection_fraction.size))
        data["selection_fraction"] = {w: float(f) for w, f in zip(names, self.selection_fraction)}
        data["worker_max_debt"] = {w: float(d) for w, d in zip(names, self.worker_max_debt)}
        return data


def set_values(problem: Problem, masks: np.ndarray) -> np.ndarray:
    """``f`` of every row of ``masks``, evaluating each distinct row once."""
    if masks.shape[0] == 0:
        return np.zeros(0)
    first, inverse = distinct_rows(masks)
    return problem.utility.values(masks[first])[inverse]


def distinct_rows(masks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(first, inverse)``: the index of the first occurrence of each distinct row, and for
    every row the position of its row in ``first``, so ``masks[first][inverse] == masks``.

    Rows of at most 64 workers are compared as one 64-bit integer each (``np.unique``);
    wider rows by the bytes of their packed bits in a dictionary: ``np.unique(axis=0)``
    compares rows as structured records, which costs seconds per call at ``n = 10^5``.
    """
    packed = np.packbits(masks, axis=1)
    if packed.shape[1] <= 8:
        wide = np.zeros((packed.shape[0], 8), dtype=np.uint8)
        wide[:, :packed.shape[1]] = packed
        _, first, inverse = np.unique(wide.view(np.uint64).reshape(-1), return_index=True, return_inverse=True)
        return first, inverse.reshape(-1)
    position: dict[bytes, int] = {}
    first_list: list[int] = []
    inverse = np.empty(packed.shape[0], dtype=np.int64)
    for i, row in enumerate(packed):
        j = position.setdefault(row.tobytes(), len(first_list))
        if j == len(first_list):
            first_list.append(i)
        inverse[i] = j
    return np.asarray(first_list, dtype=np.int64), inverse


def optimum_value(optimum: float | HasValue | None) -> float | None:
    """``U_opt`` as a float from a number, an :class:`~fairsched.lp.Optimum` (its ``value``) or ``None``."""
    if optimum is None:
        return None
    value = getattr(optimum, "value", optimum)
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise FairschedError(f"optimum must be a number or an Optimum, got {type(optimum).__name__}")
    return float(value)


def evaluate(schedule: Schedule, problem: Problem, optimum: float | HasValue | None = None) -> Report:
    """Measure ``schedule`` on ``problem``; ``optimum`` is ``U_opt`` (a number or an ``Optimum``) if known.

    Examples
    --------
    >>> import fairsched as fs
    >>> problem = fs.load_instance("paper")
    >>> schedule = fs.run(problem, "fairdg", rounds=1000)
    >>> report = fs.evaluate(schedule, problem, fs.optimum(problem))
    >>> report.max_debt < 1, report.fairness_slack >= 0, round(report.ratio, 4)
    (True, True, 0.9997)
    """
    if schedule.n != problem.n:
        raise ValueError(f"schedule has {schedule.n} workers, problem {problem.n}")
    if schedule.rounds == 0:
        raise ValueError("cannot evaluate an empty schedule")
    return evaluate_stream((schedule,), problem, optimum)


#: a piece of a schedule: consecutive rounds as a CSR :class:`Schedule` or a boolean ``(rounds, n)`` mask
Chunk = Union[Schedule, np.ndarray]


def evaluate_stream(chunks: Iterable[Chunk], problem: Problem, optimum: float | HasValue | None = None) -> Report:
    """:func:`evaluate` of the schedule whose consecutive rounds ``chunks`` yields, holding one chunk at a time.

    Each chunk is a :class:`Schedule` on ``problem.n`` workers (CSR: ``O(Σ|S_t|)`` memory) or a
    boolean mask of shape ``(rounds, n)``; no round may list a worker twice. Memory is that of
    one chunk plus ``O(CHUNK_CELLS)``, whatever the total ``T``, so a generator of chunks
    evaluates schedules too long to hold. The result equals :func:`evaluate` on the
    concatenated schedule: counts, fractions, slack and debts exactly; the time-average
    utility exactly when every chunk but the last is a multiple of ``CHUNK_CELLS // n``
    rounds (the sum of ``f`` is added in blocks of that many rounds), else up to rounding.

    Debts of CSR chunks are computed from the selections alone, ``O(Σ|S_t|)`` rather than
    ``O(T·n)``: between two selections of ``u`` its debt ``r_u·t − N_u(t)`` only grows, so its
    maximum is reached in the round before a selection or in the last round of a block.
    """
    start_time = time.perf_counter()
    optimum = optimum_value(optimum)
    n = problem.n
    r = np.asarray(problem.r, dtype=np.float64)
    block = max(1, CHUNK_CELLS // max(n, 1))
    acc = _Accumulator(n, problem.caps)
    for chunk in chunks:
        if isinstance(chunk, Schedule):
            if chunk.n != n:
                raise ValueError(f"schedule has {chunk.n} workers, problem {n}")
            for start in range(0, chunk.rounds, block):
                stop = min(start + block, chunk.rounds)
                acc.total += float(set_values(problem, chunk.masks(start, stop)).sum())
                acc.add_selections(chunk.indptr[start:stop + 1], chunk.indices, r)
        else:
            masks = np.asarray(chunk, dtype=bool)
            if masks.ndim != 2 or masks.shape[1] != n:
                raise ValueError(f"mask chunk must have shape (rounds, {n}), got {masks.shape}")
            for start in range(0, masks.shape[0], block):
                part = masks[start:start + block]
                acc.total += float(set_values(problem, part).sum())
                acc.add_masks(part, r)
    if acc.rounds == 0:
        raise ValueError("cannot evaluate an empty schedule")
    T = acc.rounds
    worker_max_debt = acc.worker_max_debt
    time_average = acc.total / T
    fraction = acc.counts / T
    ratio = None if optimum is None or optimum <= 0 else time_average / optimum
    slack, debt = float((fraction - r).min()), float(worker_max_debt.max())
    ratio_text = "n/a" if ratio is None else f"{ratio:.6f}"
    excess = None if acc.caps is None else max(acc.cap_excess, float((acc.counts - T * acc.caps).max()))
    cap_text = "" if excess is None else f", max cap excess {excess:.4g}"
    return Report(
        rounds=T,
        time_average_utility=time_average,
        optimum=optimum,
        ratio=ratio,
        selection_fraction=fraction,
        fairness_slack=slack,
        max_debt=debt,
        worker_max_debt=worker_max_debt,
        max_cap_excess=excess,
        status="evaluated",
        message=f"{T:,} rounds: ratio {ratio_text}, fairness slack {slack:+.4g}, max debt {debt:.4g}{cap_text}",
        seconds=time.perf_counter() - start_time,
    )


class _Accumulator:
    """Running ``Σ f``, rounds, counts ``N_u``, the largest debt seen per worker and, with
    caps, the largest cap excess ``N_u(t) − c_u·t`` (reached in a round that selects ``u``)."""

    def __init__(self, n: int, caps: np.ndarray | None = None):
        self.n = n
        self.caps = None if caps is None else np.asarray(caps, dtype=np.float64)
        self.cap_excess = -np.inf
        self.total = 0.0
        self.rounds = 0
        self.counts = np.zeros(n, dtype=np.int64)
        self.worker_max_debt = np.full(n, -np.inf)

    def add_masks(self, masks: np.ndarray, r: np.ndarray) -> None:
        """Rounds given as a boolean mask: the debt of every worker in every round."""
        running = self.counts + np.cumsum(masks, axis=0, dtype=np.int64)
        t = np.arange(self.rounds + 1, self.rounds + masks.shape[0] + 1, dtype=np.float64)
        np.maximum(self.worker_max_debt, (t[:, None] * r - running).max(axis=0), out=self.worker_max_debt)
        if self.caps is not None and masks.shape[0]:
            self.cap_excess = max(self.cap_excess, float((running - t[:, None] * self.caps).max()))
        self.counts = running[-1]
        self.rounds += masks.shape[0]

    def add_selections(self, indptr: np.ndarray, indices: np.ndarray, r: np.ndarray) -> None:
        """Rounds given in CSR form: debts in the round before each selection and in the last round.

        The ``j``-th selection of ``u`` (``j`` from 1) in round ``t`` ends a run in which
        ``N_u = j − 1`` and the debt grows with ``t``, so the run's largest debt is
        ``r_u·(t − 1) − (j − 1)``, the same floating-point expression :meth:`add_masks` takes.
        """
        sizes = np.diff(indptr)
        workers = indices[indptr[0]:indptr[-1]]
        rounds = np.repeat(np.arange(self.rounds + 1, self.rounds + sizes.size + 1, dtype=np.int64), sizes)
        # radix sort for small ids; stable keeps each worker's selections in round order
        keys = workers.astype(np.uint16) if self.n <= 1 << 16 else workers
        order = np.argsort(keys, kind="stable")
        worker = workers[order]
        per = np.bincount(workers, minlength=self.n)
        starts = np.cumsum(per) - per
        before = self.counts[worker] + (np.arange(worker.size) - starts[worker])  # N_u in round t − 1
        t_before = rounds[order] - 1
        debt = t_before.astype(np.float64) * r[worker] - before
        debt[t_before < 1] = -np.inf  # round 0 is not a round
        if self.caps is not None and worker.size:
            self.cap_excess = max(self.cap_excess,
                                  float((before + 1 - rounds[order].astype(np.float64) * self.caps[worker]).max()))
        present = np.flatnonzero(per)
        if present.size:
            peaks = np.maximum.reduceat(debt, starts[present])
            self.worker_max_debt[present] = np.maximum(self.worker_max_debt[present], peaks)
        self.counts += per
        self.rounds += sizes.size
        # the block's last round ends every run that continues past it
        last = np.float64(self.rounds) * r - self.counts
        np.maximum(self.worker_max_debt, last, out=self.worker_max_debt)
