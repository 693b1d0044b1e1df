"""Run a policy for ``T`` rounds and record the schedule."""

from __future__ import annotations

from typing import Callable

import numpy as np

from fairsched.policies.base import Policy
from fairsched.problem import Problem
from fairsched.schedule import Schedule

ProgressCallback = Callable[[int], None]


def run(problem: Problem, policy: Policy, rounds: int | None = None, seed: int | None = 0,
        progress: ProgressCallback | None = None, progress_every: int = 1000) -> Schedule:
    """Reset ``policy`` on ``problem`` with ``seed`` and play ``rounds`` rounds.

    Every round the policy's :meth:`~Policy.select` result is recorded and handed back to
    :meth:`~Policy.observe`. Same seed, same schedule. ``progress(t)`` is called every
    ``progress_every`` rounds and at the end. ``rounds`` defaults to ``problem.rounds``.
    """
    rounds = problem.rounds if rounds is None else rounds
    if rounds is None or int(rounds) < 1:
        raise ValueError(f"rounds must be a positive integer, got {rounds!r}")
    rounds = int(rounds)
    policy.reset(problem, np.random.default_rng(seed))
    k = problem.k
    indptr = np.zeros(rounds + 1, dtype=np.int64)
    indices = np.empty(rounds * k, dtype=np.int64)
    end = 0
    for t in range(rounds):
        chosen = policy.select()
        size = chosen.size
        if size > k:
            raise RuntimeError(f"{policy.name} selected {size} > k = {k} workers in round {t + 1}")
        indices[end:end + size] = chosen
        end += size
        indptr[t + 1] = end
        policy.observe(chosen)
        if progress is not None and (t + 1) % progress_every == 0:
            progress(t + 1)
    if progress is not None and rounds % progress_every:
        progress(rounds)
    return Schedule(problem.n, indptr, indices[:end].copy(), policy.name, seed)
