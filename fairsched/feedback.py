"""What a federated server observes after a round: a set-level reward and per-worker metrics.

After round ``t`` the server knows, for the workers that served, what they reported (in
Flower: each reply's ``MetricRecord``, e.g. ``loss``, ``num-examples``, duration) and, for the
set as a whole, how the global model moved (e.g. the change in validation accuracy). A
:class:`Feedback` carries both to the policy (:meth:`fairsched.policies.base.Policy.learn`),
where a learner of the utility (:mod:`fairsched.online`) may use them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fairsched.errors import FairschedError


def is_count(name: str) -> bool:
    """Whether metric ``name`` counts something (``num-examples``, ``num_batches``...): never negative."""
    return name.startswith(("num-", "num_"))


@dataclass(frozen=True)
class Feedback:
    """One round's observations, by worker index.

    ``reward`` is the set-level reward (``None`` when not observed); ``workers`` (sorted
    ``int64`` indices) are the workers the metrics describe and ``metrics[name]`` holds one
    value per entry of ``workers`` (``nan`` where a worker did not report that metric).
    """

    reward: float | None = None
    workers: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    metrics: dict[str, np.ndarray] = field(default_factory=dict)

    @classmethod
    def from_rows(cls, reward: float | None, rows: dict[int, dict[str, float]]) -> Feedback:
        """From ``{worker index: {metric: value}}`` (``nan`` where a worker lacks a metric)."""
        workers = np.array(sorted(rows), dtype=np.int64)
        names = sorted({name for row in rows.values() for name in row})
        metrics = {name: np.array([rows[int(u)].get(name, math.nan) for u in workers]) for name in names}
        return cls(reward, workers, metrics)

    def metric(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """``(workers, values)`` of the workers that reported ``name`` (finite values only)."""
        values = self.metrics.get(name)
        if values is None:
            return self.workers[:0], np.zeros(0)
        keep = np.isfinite(values)
        return self.workers[keep], values[keep]


def feedback_from_ids(data: Any, index_of: dict[str, int]) -> Feedback:
    """A :class:`Feedback` from the JSON-like form the server API takes.

    ``{"reward": 0.012, "workers": {"u1": {"loss": 0.7, "num-examples": 120}, ...}}`` (both
    keys optional); ids are mapped to indices with ``index_of``. Unknown ids, non-numeric or
    non-finite values (reward or metric) and negative counts (:func:`is_count`) are a
    :class:`FairschedError` naming what is wrong.
    """
    if isinstance(data, Feedback):
        return data
    if not isinstance(data, dict):
        raise FairschedError(f"feedback must be a mapping with 'reward' and/or 'workers', got {type(data).__name__}")
    unknown = set(data) - {"reward", "workers"}
    if unknown:
        raise FairschedError(f"feedback: unknown key(s) {', '.join(sorted(map(str, unknown)))}; "
                             "expected 'reward' and 'workers'")
    reward = data.get("reward")
    if reward is not None:
        if isinstance(reward, bool) or not isinstance(reward, (int, float, np.integer, np.floating)) \
                or not math.isfinite(float(reward)):
            raise FairschedError(f"feedback: reward must be a finite number, got {reward!r}")
        reward = float(reward)
    per_worker = data.get("workers") or {}
    if not isinstance(per_worker, dict):
        raise FairschedError("feedback: 'workers' must map worker ids to their metrics")
    rows: dict[int, dict[str, float]] = {}
    for worker_id, metrics in per_worker.items():
        if worker_id not in index_of:
            raise FairschedError(f"feedback: unknown worker id {worker_id!r}")
        if not isinstance(metrics, dict):
            raise FairschedError(f"feedback: the metrics of {worker_id!r} must be a mapping")
        row = {}
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise FairschedError(f"feedback: metric {name!r} of {worker_id!r} must be a number, got {value!r}")
            if not math.isfinite(float(value)):
                raise FairschedError(f"feedback: metric {name!r} of {worker_id!r} must be finite, got {value!r}")
            if is_count(str(name)) and value < 0:
                raise FairschedError(f"feedback: metric {name!r} of {worker_id!r} counts something and cannot be "
                                     f"negative, got {value!r}")
            row[str(name)] = float(value)
        rows[index_of[worker_id]] = row
    return Feedback.from_rows(reward, rows)
