"""Baselines without (or with only incidental) fairness: greedy, uniform random, round-robin."""

from __future__ import annotations

import numpy as np

from fairsched.policies.base import Policy
from fairsched.submodular.greedy import greedy_complete


class GreedyPolicy(Policy):
    """The same greedy set every round (the paper's DG): ``(1 − 1/e)``-optimal, unfair."""

    name = "greedy"
    fair = False

    def _prepare(self) -> None:
        self._set = greedy_complete(self.problem.utility, self.problem.k)

    def _select(self, available: np.ndarray) -> np.ndarray:
        if available.all():
            return self._set
        return greedy_complete(self.problem.utility, self.problem.k, candidates=available)


class RandomPolicy(Policy):
    """``k`` workers uniformly at random without replacement, as FedAvg samples clients."""

    name = "random"
    fair = False

    def _select(self, available: np.ndarray) -> np.ndarray:
        if available.all():
            return np.sort(self.rng.choice(self.problem.n, size=self.problem.k, replace=False))
        pool = np.flatnonzero(available)
        return np.sort(self.rng.choice(pool, size=min(self.problem.k, pool.size), replace=False))


class RoundRobinPolicy(Policy):
    """Workers in cyclic order, ``k`` per round: the next ``k`` available after the last one asked.

    With everyone available round ``t`` takes ``(t·k + i) mod n``, ``i < k``, and every
    worker's fraction tends to ``k/n``, so it meets floors ``r_u <= k/n`` only.
    """

    name = "round-robin"
    fair = False

    def _prepare(self) -> None:
        self._next = 0

    def _select(self, available: np.ndarray) -> np.ndarray:
        n, k = self.problem.n, self.problem.k
        order = (self._next + np.arange(n)) % n
        chosen = order[available[order]][:k]
        if chosen.size:
            self._next = int(chosen[-1] + 1) % n
        return np.sort(chosen)

    def _extra_state(self) -> dict:
        return {"next": self._next}

    def _load_extra_state(self, state: dict) -> None:
        self._next = int(state["next"])
