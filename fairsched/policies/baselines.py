"""Baselines without (or with only incidental) fairness: greedy, uniform random, round-robin."""

from __future__ import annotations

import numpy as np

from fairsched.greedy import greedy_complete
from fairsched.policies.base import Policy


class GreedyPolicy(Policy):
    """The same greedy set every round (the paper's DG): ``(1 − 1/e)``-optimal, unfair."""

    name = "greedy"
    fair = False

    def _prepare(self) -> None:
        self._set = greedy_complete(self.problem.utility, self.problem.k)

    def select(self) -> np.ndarray:
        return self._set


class RandomPolicy(Policy):
    """``k`` workers uniformly at random without replacement, as FedAvg samples clients."""

    name = "random"
    fair = False

    def select(self) -> np.ndarray:
        return np.sort(self.rng.choice(self.problem.n, size=self.problem.k, replace=False))


class RoundRobinPolicy(Policy):
    """Workers in cyclic order, ``k`` per round: round ``t`` takes ``(t·k + i) mod n``, ``i < k``.

    Every worker's fraction tends to ``k/n``, so it meets floors ``r_u <= k/n`` only.
    """

    name = "round-robin"
    fair = False

    def select(self) -> np.ndarray:
        n, k = self.problem.n, self.problem.k
        return np.sort((self.t * k + np.arange(k)) % n)
