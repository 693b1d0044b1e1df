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

Complexity, per round: ``O(n)`` numpy work for the debts and ``A_t``; when ``|A_t| >= k``
the ``k`` most urgent by a partition (``O(|A_t|)``, the tied ones ordered exactly as a full
sort would); when ``|A_t| < k`` the greedy completion by lazy greedy
(:func:`fairsched.submodular.lazy_greedy.lazy_greedy`, the same set as plain greedy:
``O(n)`` for the accuracy utility, whose gains are ordered by data size). The completion
depends only on ``(A_t, available)``, so it is cached under a 16-byte digest of the two
masks, least recently used first out, within ``cache_bytes``
(:class:`fairsched.policies.cache.ArrayLRU`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.errors import PolicyError
from fairsched.policies.base import DEBT_TOLERANCE, Policy, count_param
from fairsched.policies.cache import ArrayLRU, mask_digest
from fairsched.policies.refill import first_by, most_urgent, urgency_keys
from fairsched.submodular.lazy_greedy import lazy_greedy

RANKS = ("deadline", "debt")


class FairDG(Policy):
    """Fair discrete greedy (Li, Liu and Ji 2021, Algorithm 3) with an explicit deterministic ranking.

    Parameters
    ----------
    rank : {"deadline", "debt"}
        How to choose ``k`` of ``A_t`` when ``|A_t| >= k`` (see the module docstring).
    cache_size : int
        Most distinct ``(A_t, available)`` whose greedy completions are kept (default 100,000).
    cache_bytes : int
        Most bytes the cached completions, their keys and bookkeeping take (default 64 MiB:
        about 8,200 completions at ``k = 1,000``; at ``k = 6`` an entry takes 192 bytes and
        ``cache_size`` binds first); the least recently used go first.
    """

    name = "fairdg"

    def __init__(self, rank: str = "deadline", cache_size: int = 100_000, cache_bytes: int = 64 << 20) -> None:
        super().__init__()
        if rank not in RANKS:
            raise PolicyError(f"fairdg: unknown rank {rank!r}; choose one of {', '.join(RANKS)}")
        self.rank = rank
        self.cache_size = count_param(self.name, "cache_size", cache_size)
        self.cache_bytes = count_param(self.name, "cache_bytes", cache_bytes)
        self._completions = ArrayLRU(self.cache_bytes, self.cache_size)

    def params(self) -> dict[str, Any]:
        return {"rank": self.rank}

    def _prepare(self) -> None:
        self._completions = ArrayLRU(self.cache_bytes, self.cache_size)
        self._r = np.asarray(self.problem.r, dtype=np.float64)
        self._positive = self._r > 0

    def debts(self) -> np.ndarray:
        """``D_u = r_u·t − N_u(t−1)`` for the coming round ``t``."""
        return self._r * (self.t + 1) - self.counts

    def _select(self, available: np.ndarray) -> np.ndarray:
        k = self.problem.k
        debt = self.debts()
        behind = self._positive & (debt >= -DEBT_TOLERANCE)
        behind &= available
        members = np.flatnonzero(behind)
        if members.size >= k:
            return self._most_urgent(members, debt, k)
        return self._complete(behind, members, available)

    def _most_urgent(self, members: np.ndarray, debt: np.ndarray, k: int) -> np.ndarray:
        """The first ``k`` of ``members`` by (deadline, −debt, index), or (−debt, index)."""
        if self.rank == "deadline":  # the LP policies' refill ranks the same way
            return np.sort(most_urgent(members, urgency_keys(self._r, debt), debt, k))
        return np.sort(first_by(members, (-debt[members], members), k))

    def _complete(self, behind: np.ndarray, members: np.ndarray, available: np.ndarray) -> np.ndarray:
        key = mask_digest(behind, available)
        chosen = self._completions.get(key)
        if chosen is None:
            chosen = lazy_greedy(self.problem.utility, self.problem.k, base=members, candidates=available)
            chosen.setflags(write=False)
            self._completions.put(key, chosen)
        return chosen
