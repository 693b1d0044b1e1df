"""Metrics of a schedule: time-average utility, ratio to ``U_opt``, fractions, debts.

For a schedule ``S_1..S_T`` on a problem with floors ``r`` (seed 003, Section III):

- time-average utility ``(1/T) Σ_t f(S_t)``, and its ratio to ``U_opt``;
- selection fraction ``N_u(T)/T`` and fairness slack ``min_u (N_u(T)/T − r_u)``;
- maximum debt ``max_{u, 1<=t<=T} (r_u·t − N_u(t))``; short-term fairness holds iff it is ``< 1``.

Everything is computed in chunks of rounds, so memory does not grow with ``T``; ``f`` is
evaluated once per distinct set in a chunk.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from fairsched.problem import Problem
from fairsched.schedule import Schedule

CHUNK_CELLS = 1 << 22  # rounds × workers per chunk: about 4 MB of booleans


@dataclass(frozen=True)
class Report:
    """What :func:`evaluate` measures; ``optimum`` and ``ratio`` are ``None`` without ``U_opt``."""

    rounds: int
    time_average_utility: float
    optimum: float | None
    ratio: float | None
    selection_fraction: np.ndarray
    fairness_slack: float
    max_debt: float
    worker_max_debt: np.ndarray

    def as_dict(self, ids: tuple[str, ...] | None = None) -> dict[str, Any]:
        """JSON-ready dict; per-worker arrays become ``{id: value}`` maps."""
        data = asdict(self)
        names = ids if ids is not None else tuple(str(i) for i in range(self.selection_fraction.size))
        data["selection_fraction"] = {w: float(f) for w, f in zip(names, self.selection_fraction)}
        data["worker_max_debt"] = {w: float(d) for w, d in zip(names, self.worker_max_debt)}
        return data


def set_values(problem: Problem, masks: np.ndarray) -> np.ndarray:
    """``f`` of every row of ``masks``, evaluating each distinct row once."""
    if masks.shape[0] == 0:
        return np.zeros(0)
    packed = np.packbits(masks, axis=1)
    unique, inverse = np.unique(packed, axis=0, return_inverse=True)
    distinct = np.unpackbits(unique, axis=1, count=problem.n).astype(bool)
    return problem.utility.values(distinct)[inverse.reshape(-1)]


def evaluate(schedule: Schedule, problem: Problem, optimum: float | None = None) -> Report:
    """Measure ``schedule`` on ``problem``; ``optimum`` is ``U_opt`` if known."""
    if schedule.n != problem.n:
        raise ValueError(f"schedule has {schedule.n} workers, problem {problem.n}")
    T = schedule.rounds
    if T == 0:
        raise ValueError("cannot evaluate an empty schedule")
    r = np.asarray(problem.r, dtype=np.float64)
    chunk = max(1, CHUNK_CELLS // max(problem.n, 1))
    total = 0.0
    counts = np.zeros(problem.n, dtype=np.int64)
    worker_max_debt = np.full(problem.n, -np.inf)
    for start in range(0, T, chunk):
        stop = min(start + chunk, T)
        masks = schedule.masks(start, stop)
        total += float(set_values(problem, masks).sum())
        running = counts + np.cumsum(masks, axis=0, dtype=np.int64)
        t = np.arange(start + 1, stop + 1, dtype=np.float64)
        worker_max_debt = np.maximum(worker_max_debt, (t[:, None] * r - running).max(axis=0))
        counts = running[-1]
    time_average = total / T
    fraction = counts / T
    ratio = None if optimum is None or optimum <= 0 else time_average / optimum
    return Report(
        rounds=T,
        time_average_utility=time_average,
        optimum=optimum,
        ratio=ratio,
        selection_fraction=fraction,
        fairness_slack=float((fraction - r).min()),
        max_debt=float(worker_max_debt.max()),
        worker_max_debt=worker_max_debt,
    )
