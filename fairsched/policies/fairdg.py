"""FairDG: fair discrete greedy with fairness debts (``docs/mathematics.md`` §8).

Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular
Maximization Approach" (2021), Section V, Algorithm 3.

Before round ``t`` the debt of worker ``u`` is ``D_u = r_u·t − N_u(t−1)`` and
``A_t = {u : r_u > 0, D_u >= 0}`` are the workers at or behind schedule.

- ``|A_t| < k``: take all of ``A_t`` and complete to ``k`` workers greedily by marginal
  gain ``f(S ∪ {u}) − f(S)``.
- ``|A_t| >= k``: take ``k`` workers of ``A_t`` by urgency.

With availability, ``A_t`` and the greedy completion are restricted to the available
workers; an unavailable worker's debt keeps growing until it is back.

The paper ranks by debt alone and proves debt ``< 1`` for a homogeneous ``r`` (Theorem 5).
With a heterogeneous ``r`` and ``Σ r = k`` that ranking can let a debt reach 1 (see
``tests/test_fairdg.py`` for a kept counter-example), so the default ranking is
earliest deadline first: worker ``u``'s debt reaches 1 after ``(1 − D_u)/r_u`` more
rounds without selection; smaller first, ties to the larger debt, then the lower index.
``rank="debt"`` restores the paper's rule (largest debt first, ties to the lower index).

Complexity: the greedy completion depends only on ``A_t``, so it is cached per distinct
``A_t``; a round costs ``O(n)`` numpy work plus ``O(k)`` gain evaluations on a cache miss.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.errors import PolicyError
from fairsched.submodular.greedy import greedy_complete
from fairsched.policies.base import DEBT_TOLERANCE, Policy, count_param

RANKS = ("deadline", "debt")


class FairDG(Policy):
    """Fair discrete greedy (Li, Liu and Ji 2021, Algorithm 3) with an explicit deterministic ranking.

    Parameters
    ----------
    rank : {"deadline", "debt"}
        How to choose ``k`` of ``A_t`` when ``|A_t| >= k`` (see the module docstring).
    cache_size : int
        Most distinct ``A_t`` whose greedy completions are kept.
    """

    name = "fairdg"

    def __init__(self, rank: str = "deadline", cache_size: int = 100_000) -> None:
        super().__init__()
        if rank not in RANKS:
            raise PolicyError(f"fairdg: unknown rank {rank!r}; choose one of {', '.join(RANKS)}")
        self.rank = rank
        self.cache_size = count_param(self.name, "cache_size", cache_size)
        self._completions: dict[bytes, np.ndarray] = {}

    def params(self) -> dict[str, Any]:
        return {"rank": self.rank}

    def _prepare(self) -> None:
        self._completions = {}
        self._r = np.asarray(self.problem.r, dtype=np.float64)
        self._positive = self._r > 0
        self._index = np.arange(self.problem.n)

    def debts(self) -> np.ndarray:
        """``D_u = r_u·t − N_u(t−1)`` for the coming round ``t``."""
        return self._r * (self.t + 1) - self.counts

    def _select(self, available: np.ndarray) -> np.ndarray:
        k = self.problem.k
        debt = self.debts()
        behind = self._positive & (debt >= -DEBT_TOLERANCE) & available
        size = int(np.count_nonzero(behind))
        if size >= k:
            return self._most_urgent(np.flatnonzero(behind), debt, k)
        return self._complete(behind, available)

    def _most_urgent(self, members: np.ndarray, debt: np.ndarray, k: int) -> np.ndarray:
        d = debt[members]
        if self.rank == "deadline":
            with np.errstate(over="ignore"):  # a subnormal floor's deadline is simply far away
                keys = ((1.0 - d) / self._r[members], -d, members)
        else:
            keys = (-d, members)
        # np.lexsort sorts by the last key first.
        order = np.lexsort(keys[::-1])
        return np.sort(members[order[:k]])

    def _complete(self, behind: np.ndarray, available: np.ndarray) -> np.ndarray:
        key = behind.tobytes() + available.tobytes()
        chosen = self._completions.get(key)
        if chosen is None:
            chosen = greedy_complete(self.problem.utility, self.problem.k,
                                     base=np.flatnonzero(behind), candidates=available)
            if len(self._completions) >= self.cache_size:
                self._completions.clear()
            self._completions[key] = chosen
        return chosen
