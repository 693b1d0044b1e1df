"""Lyapunov drift-plus-penalty (Neely 2010; RBCS-F, Huang et al. 2020): ``docs/mathematics.md`` §9.

Each worker has a virtual queue ``Q_u`` of unmet fairness. Every round

    S_t ∈ argmax_{|S| <= k}  V·f(S)/f_scale + Σ_{u ∈ S} Q_u        (greedy, (1 − 1/e))
    Q_u ← max(Q_u + r_u − 1[u ∈ S_t], 0)

``f_scale`` is the value of the greedy set, so ``V`` is dimensionless and means the same on
every utility. A larger ``V`` shrinks the utility gap like ``O(1/V)`` and lets the queues
(and the debts) grow like ``O(V)``.

The score is monotone submodular plus modular, so lazy greedy applies
(:func:`fairsched.submodular.lazy_greedy.lazy_greedy`, the same set as plain greedy): its
incremental state is the utility's plus the queues (:class:`PenalisedGains`), and a group
of candidates is bounded by the utility's group bound plus the group's largest queue, so a
round evaluates ``O(k)`` gains rather than ``O(k·n)``. With the accuracy utility the workers
of one queue value form a chain by data size (:meth:`PenalisedGains.chains`): a round costs
``O(n)`` numpy work to build the chains plus ``k`` steps over the chain heads (a few hundred).
Where the floors all differ, so do the queues and every chain is one worker; there the steps
are taken in blocks of certain picks (:meth:`PenalisedGains.gains_after`, the lazy greedy's
``_Prefix._block``), three to four times as fast as step by step at ``n = 100,000``,
``k = 1,000`` (``benchmarks/README.md``, "Lyapunov's greedy in blocks of certain picks").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.policies.base import Policy, number_param
from fairsched.submodular.lazy_greedy import (
    IncrementalGains,
    incremental_gains,
    lazy_greedy,
)
from fairsched.utilities.base import SetFunction

#: blocks of similar queues that a group of candidates is bounded by (see PenalisedGains.group_bound)
QUEUE_BLOCKS = 32
#: :meth:`PenalisedGains.chains` looks at every ``m // CHAIN_SAMPLE``-th of the ``m`` positive
#: queues and, where more than ``DISTINCT_SHARE`` of those differ, makes those workers chains of
#: one without sorting the queues (the sort took 9 of a round's 45 ms at ``n = 100,000``)
CHAIN_SAMPLE = 1024
DISTINCT_SHARE = 0.9


class PenalisedGains:
    """Incremental gains of ``w·f + Q(·)`` on a growing ``S``: the utility's state, scaled, plus the queues.

    When the utility's gains are ordered by a fixed key (accuracy: the data size), the
    workers of one queue value form a chain ordered by that key (:meth:`chains`), so the
    many workers that share a queue (never selected yet, or last selected in the same
    round) cost lazy greedy one bound, not a many-way tie.
    """

    def __init__(self, inner: IncrementalGains, weight: float, queues: np.ndarray,
                 key_order: np.ndarray | None = None) -> None:
        self.inner, self.weight, self.queues = inner, weight, queues
        self._key_order = key_order
        if getattr(inner, "reference_gains", None) is None:
            self.reference_gains = None
        if getattr(inner, "gains_after", None) is None:
            self.gains_after = None
        if getattr(inner, "add_many", None) is None:
            self.add_many = None
        if getattr(inner, "group_bounds", None) is None:
            self.group_bound = None
        if key_order is None:
            self.chains = None
        self.first_batch = getattr(inner, "first_batch", 1)
        self.cheap_gains = bool(getattr(inner, "cheap_gains", False))
        self._queue_scale = float(np.abs(queues).max(initial=0.0))  # the queues are fixed within a round

    @property
    def error_scale(self) -> float:
        return self.weight * self.inner.error_scale + self._queue_scale

    def gains(self, candidates: np.ndarray) -> np.ndarray:
        return self.weight * self.inner.gains(candidates) + self.queues[candidates]

    def gains_after(self, candidates: np.ndarray, added: np.ndarray | None = None) -> np.ndarray:  # type: ignore[no-redef]
        """The score's gain of ``candidates[..., j]`` once ``added[:j]`` (default ``candidates[:j]``)
        are added (the utility's ``gains_after``)."""
        candidates = np.asarray(candidates, dtype=np.int64)
        return self.weight * self.inner.gains_after(candidates, added) + self.queues[candidates]

    def reference_gains(self, candidates: np.ndarray) -> np.ndarray:  # type: ignore[no-redef]
        """``_Penalised.gains(S)[candidates]`` bit for bit, when the utility's state has its own."""
        candidates = np.asarray(candidates, dtype=np.int64)
        return self.weight * self.inner.reference_gains(candidates) + self.queues[candidates]

    def chains(self, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # type: ignore[no-redef]
        """Equal queues, by decreasing key then index: along a chain the score gains never increase
        (where the positive queues nearly all differ, only the empty ones make a chain)."""
        candidates = np.asarray(candidates, dtype=np.int64)
        positive = self.queues[candidates] > 0
        lone = candidates[positive]
        sample = self.queues[lone[:: max(1, lone.size // CHAIN_SAMPLE)]]
        if sample.size and np.unique(sample).size > DISTINCT_SHARE * sample.size:
            # the positive queues nearly all differ (floors all different): those workers are
            # chains of one, and only the empty queues make a chain, without a sort of all queues
            empty = np.zeros(self.queues.size, dtype=bool)
            empty[candidates[~positive]] = True
            ordered = self._key_order[empty[self._key_order]]
            start = ordered.size + np.arange(lone.size + 1, dtype=np.int64)
            if ordered.size:
                start = np.concatenate(([0], start))
            return np.concatenate((ordered, lone)), start
        member = np.zeros(self.queues.size, dtype=bool)
        member[candidates] = True
        ordered = self._key_order[member[self._key_order]]
        queues = self.queues[ordered]
        # one stable sort of the queues themselves: labelling them by np.unique and
        # searchsorted first cost twice as much where most queues differ (floors all distinct)
        order = np.argsort(queues, kind="stable")
        ranked = queues[order]
        starts = np.flatnonzero(ranked[1:] != ranked[:-1]) + 1
        return ordered[order], np.concatenate(([0], starts, [ranked.size])).astype(np.int64)

    def group_bound(self, candidates: np.ndarray):  # type: ignore[no-redef]
        """Blocks of the group by queue, each bounded by the utility's bound, scaled, plus its largest queue.

        One bound for the whole group would pair the largest utility gain of one worker with
        the largest queue of another; blocks of similar queues keep the pair honest.
        """
        if candidates.size == 0:
            return lambda: -np.inf
        queues = self.queues[candidates]
        # blocks between quantiles of a sample of the queues: any partition gives a valid bound,
        # similar queues a tight one; a block's label is the number of edges below its queues,
        # counted by one comparison per edge (a binary search per queue, np.searchsorted, took
        # five times as long on 95,000 unordered queues: its branches are unpredictable)
        sample = queues[:: max(1, queues.size // (8 * QUEUE_BLOCKS))]
        edges = np.unique(np.quantile(sample, np.linspace(0.0, 1.0, QUEUE_BLOCKS + 1)[1:-1]))
        label = np.zeros(queues.size, dtype=np.uint8)
        for edge in edges:
            label += queues > edge
        queue = np.full(edges.size + 1, -np.inf)
        np.maximum.at(queue, label, queues)
        present = queue > -np.inf
        if not present.all():  # the labels of the blocks with members, in order
            label = (np.cumsum(present) - 1).astype(np.uint8)[label]
            queue = queue[present]
        inner = self.inner.group_bounds(candidates, label, queue.size)
        return lambda: float((self.weight * inner() + queue).max())

    def add(self, u: int) -> None:
        self.inner.add(u)

    def add_many(self, workers: np.ndarray) -> None:  # type: ignore[no-redef]
        self.inner.add_many(workers)


class _Penalised(SetFunction):
    """``V·f(S)/f_scale + Σ_{u∈S} Q_u``: monotone submodular plus modular, for greedy."""

    kind = "lyapunov-score"

    def __init__(self, utility: SetFunction, weight: float, queues: np.ndarray):
        self.utility, self.weight, self.queues, self.n = utility, weight, queues, utility.n
        self._key_order: np.ndarray | None = None

    def values(self, masks: np.ndarray) -> np.ndarray:
        return self.weight * self.utility.values(masks) + masks @ self.queues

    def gains(self, S: Any) -> np.ndarray:
        out = self.weight * self.utility.gains(S) + self.queues
        out[np.asarray(S, dtype=np.int64)] = 0.0
        return out

    def incremental(self, base: np.ndarray) -> PenalisedGains | None:
        """The utility's incremental state plus the queues; ``None`` (plain greedy) if the utility has none."""
        inner = incremental_gains(self.utility, base)
        if inner is None:
            return None
        key = getattr(inner, "order_key", None)
        if key is not None and self._key_order is None:
            self._key_order = np.lexsort((np.arange(self.n), -np.asarray(key)))  # the utility is fixed: once
        return PenalisedGains(inner, self.weight, self.queues, self._key_order if key is not None else None)

    def to_config(self) -> dict[str, Any]:
        raise TypeError("a Lyapunov score is internal to the policy")


class Lyapunov(Policy):
    """Drift-plus-penalty with virtual fairness queues (see the module docstring)."""

    name = "lyapunov"

    def __init__(self, V: float = 10.0) -> None:
        super().__init__()
        self.V = number_param(self.name, "V", V, low=0.0, low_open=True)

    def params(self) -> dict[str, Any]:
        return {"V": self.V}

    def _prepare(self) -> None:
        utility = self.problem.utility
        scale = utility.value(lazy_greedy(utility, self.problem.k))
        self.queues = np.zeros(self.problem.n)
        self.max_queue = 0.0
        self._score = _Penalised(utility, self.V / scale if scale > 0 else self.V, self.queues)

    def _select(self, available: np.ndarray) -> np.ndarray:
        return lazy_greedy(self._score, self.problem.k, candidates=None if available.all() else available)

    def observe(self, selected: np.ndarray) -> None:
        super().observe(selected)
        self.queues += self.problem.r
        self.queues[selected] -= 1.0
        np.maximum(self.queues, 0.0, out=self.queues)
        self.max_queue = max(self.max_queue, float(self.queues.max()))

    def forgive(self, workers: np.ndarray) -> None:
        super().forgive(workers)
        self.queues[workers] = 0.0

    def _extra_state(self) -> dict[str, Any]:
        return {"queues": self.queues.tolist(), "max_queue": self.max_queue}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.queues[:] = np.asarray(state["queues"], dtype=float)
        self.max_queue = float(state["max_queue"])

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        return {"V": self.V, "max_queue": self.max_queue}
