"""Rewards grouped by what determines a set's value: the sufficient statistics of a least-squares fit.

When ``f(S)`` depends on ``S`` only through a few numbers (the total size for the accuracy
curve, the effective size per stratum for the propensity-weighted accuracy), the rounds with
the same numbers are one group: its count ``n_g``, mean reward ``ȳ_g`` and sum of squares.
``Σ_t (y_t − f(S_t))² = Σ_g n_g (ȳ_g − f_g)² + W``, with ``W`` the within-group sum of
squares, so a fit weighted by ``sqrt(n_g)`` on the means is the fit on every round, and the
state stays as small as the number of distinct groups.
"""

from __future__ import annotations

import math

import numpy as np


class RewardGroups:
    """Rounds grouped by a key of ``width`` numbers, with count, sum and sum of squares of the rewards."""

    def __init__(self, width: int) -> None:
        self.width = int(width)
        self._groups: dict[tuple[float, ...], list[float]] = {}

    def __len__(self) -> int:
        return len(self._groups)

    def add(self, key: tuple[float, ...], reward: float) -> bool:
        """Record one round; true when ``key`` is a new group."""
        new = key not in self._groups
        group = self._groups.setdefault(key, [0.0, 0.0, 0.0])
        group[0] += 1
        group[1] += reward
        group[2] += reward ** 2
        return new

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(keys (G, width), counts (G,), mean rewards (G,))``."""
        stats = np.array(list(self._groups.values()))
        return np.array(list(self._groups)), stats[:, 0], stats[:, 1] / stats[:, 0]

    def within(self) -> float:
        """``W``, the within-group sum of squares (pure error)."""
        stats = np.array(list(self._groups.values()))
        return max(0.0, float((stats[:, 2] - stats[:, 1] ** 2 / stats[:, 0]).sum()))

    def pure_error_sd(self) -> float:
        """``σ̂_pure = sqrt(W / (rounds − groups))``, 0 while no key has repeated."""
        repeated = sum(group[0] for group in self._groups.values()) - len(self._groups)
        return math.sqrt(self.within() / repeated) if repeated > 0 else 0.0

    def state(self) -> list[list[float]]:
        """JSON rows ``[*key, count, Σ y, Σ y²]``."""
        return [[*key, *stats] for key, stats in self._groups.items()]

    def load(self, rows: list[list[float]]) -> None:
        """Restore :meth:`state`."""
        w = self.width
        self._groups = {tuple(float(x) for x in row[:w]): [float(x) for x in row[w:]] for row in rows}
