"""Synthetic schedules for memory benchmarks: random ``k``-subsets, generated chunk by chunk.

:func:`random_schedule_chunks` yields CSR :class:`~fairsched.schedule.Schedule` chunks of
consecutive rounds, each round ``k`` distinct workers drawn uniformly, deterministic in
``seed`` and independent of how the chunks are consumed; feed them to
:func:`fairsched.metrics.evaluate_stream` to evaluate a schedule that is never held whole
(``T = 10^6`` rounds of ``k = 100`` workers are 800 MB of indices).
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from fairsched.schedule import Schedule


def random_k_subsets(rng: np.random.Generator, rounds: int, n: int, k: int) -> np.ndarray:
    """``(rounds, k)`` sorted rows of ``k`` distinct workers out of ``n``, uniform over ``k``-subsets.

    Draws with replacement and redraws the rows that repeat a worker: a rejection sampler
    whose acceptance rate is ``Π_{i<k} (1 − i/n)`` (0.61 for ``n = 10^4, k = 100``); for
    ``k > n/4`` it takes the ``k`` smallest of ``n`` uniform keys instead.
    """
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got k = {k}, n = {n}")
    if 4 * k > n:
        return np.sort(np.argpartition(rng.random((rounds, n)), k - 1, axis=1)[:, :k], axis=1)
    out = np.empty((rounds, k), dtype=np.int64)
    todo = np.arange(rounds)
    while todo.size:
        draw = np.sort(rng.integers(0, n, size=(todo.size, k)), axis=1)
        good = (np.diff(draw, axis=1) > 0).all(axis=1)
        out[todo[good]] = draw[good]
        todo = todo[~good]
    return out


def random_schedule_chunks(n: int, k: int, rounds: int, chunk_rounds: int, seed: int = 0) -> Iterator[Schedule]:
    """``rounds`` rounds of uniform random ``k``-subsets as Schedules of ``chunk_rounds`` rounds (the last shorter)."""
    rng = np.random.default_rng(seed)
    for start in range(0, rounds, chunk_rounds):
        m = min(chunk_rounds, rounds - start)
        sets = random_k_subsets(rng, m, n, k)
        yield Schedule(n, np.arange(0, m * k + 1, k, dtype=np.int64), sets.reshape(-1))
