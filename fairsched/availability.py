"""Worker availability: per-worker probabilities or a trace, and whether the floors survive it.

A worker can only be selected in rounds where it is available. Given a trace ``A_1..A_T``
(the available set of every round) the floors are feasible on it iff the bipartite flow

    source →(k)→ round t →(1, if u ∈ A_t)→ worker u →(⌈r_u·T⌉)→ sink

saturates every worker's demand (max-flow, networkx). When it does not, the minimum cut
names a group ``G`` of workers with ``Σ_{u∈G} ⌈r_u·T⌉ > Σ_t min(k, |A_t ∩ G|)``: they ask
for more selections than the rounds in which they are available can give them. That group
and the two numbers are the certificate.

With independent availability probabilities ``a_u`` the exact condition is, for every
group, ``Σ_{u∈G} r_u <= E[min(k, |A ∩ G|)]``; :func:`check_probabilities` checks it for
every worker alone, for everybody, and for the nested groups of the least-available
workers by ``r_u/a_u`` (a necessary test, exact for ``n <= 12`` where it checks all groups).

:func:`availability_optimum` is the LP of ``U_opt`` extended to availability: the best
time-average utility of a stationary policy that sees each round's available set.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from fairsched.errors import InfeasibleError, InstanceError, TooLargeError
from fairsched.results import Result

EXHAUSTIVE_LIMIT = 12


@dataclass(frozen=True)
class Availability:
    """Which workers can be asked in each round: from a trace, or drawn from probabilities.

    Probabilities are drawn per round from ``default_rng([seed, t])``, so round ``t``'s
    availability does not depend on how many rounds were played before (resumable runs).
    A trace shorter than the run repeats cyclically.
    """

    probabilities: np.ndarray | None = None
    trace: np.ndarray | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if (self.probabilities is None) == (self.trace is None):
            raise InstanceError("give either availability probabilities or a trace, not both or neither")
        if self.probabilities is not None:
            a = np.asarray(self.probabilities, dtype=float)
            if a.ndim != 1 or not np.isfinite(a).all() or (a < 0).any() or (a > 1).any():
                raise InstanceError("availability probabilities must be numbers in [0, 1], one per worker",
                                    key="workers.availability")
            object.__setattr__(self, "probabilities", a)
        else:
            trace = np.asarray(self.trace, dtype=bool)
            if trace.ndim != 2 or trace.shape[0] == 0:
                raise InstanceError("an availability trace is a non-empty (rounds, workers) boolean matrix")
            object.__setattr__(self, "trace", trace)

    @property
    def n(self) -> int:
        return int(self.probabilities.size if self.probabilities is not None else self.trace.shape[1])

    def mask(self, t: int) -> np.ndarray:
        """Boolean mask of the workers available in round ``t`` (1-based)."""
        if self.trace is not None:
            return self.trace[(t - 1) % self.trace.shape[0]]
        return np.random.default_rng([self.seed, t]).random(self.probabilities.size) < self.probabilities


@dataclass(frozen=True)
class FeasibilityReport(Result):
    """Whether the floors can be met under an availability model, and if not, why.

    ``status`` is ``"feasible"`` or ``"infeasible"``; ``success`` means the check ran;
    ``message`` is ``reason``, or a sentence when feasible.
    """

    feasible: bool
    group: tuple[int, ...] = ()
    demand: float = 0.0
    capacity: float = 0.0
    reason: str = ""
    details: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status == "ok":
            object.__setattr__(self, "status", "feasible" if self.feasible else "infeasible")
            object.__setattr__(self, "success", True)
        if not self.message:
            object.__setattr__(self, "message", self.reason or "the floors can be met under this availability")

    def __bool__(self) -> bool:
        return self.feasible


def _expected_capped(probabilities: np.ndarray, k: int) -> float:
    """``E[min(k, X)]`` for ``X`` a sum of independent Bernoulli(``probabilities``) (Poisson binomial)."""
    dist = np.zeros(probabilities.size + 1)
    dist[0] = 1.0
    for a in probabilities:
        dist[1:] = dist[1:] * (1 - a) + dist[:-1] * a
        dist[0] *= 1 - a
    return float(np.minimum(np.arange(dist.size), k) @ dist)


def check_probabilities(r: Sequence[float], k: int, probabilities: Sequence[float],
                        ids: Sequence[str] | None = None) -> FeasibilityReport:
    """Necessary (exact for ``n <= 12``) check of ``Σ_{u∈G} r_u <= E[min(k, |A ∩ G|)]``."""
    r = np.asarray(r, dtype=float)
    a = np.asarray(probabilities, dtype=float)
    if a.shape != r.shape:
        raise InstanceError(f"availability has {a.size} entries, expected {r.size} (one per worker)",
                            key="workers.availability")
    n = r.size
    if n <= EXHAUSTIVE_LIMIT:
        groups = (list(G) for size in range(1, n + 1) for G in itertools.combinations(range(n), size))
    else:
        order = np.argsort(-(r / np.maximum(a, 1e-300)), kind="stable")
        groups = [[u] for u in range(n)] + [list(order[:m]) for m in range(2, n + 1)]
    worst = None
    for G in groups:
        demand = float(r[G].sum())
        capacity = _expected_capped(a[G], k)
        if demand > capacity + 1e-9 and (worst is None or demand - capacity > worst[1] - worst[2]):
            worst = (tuple(int(u) for u in G), demand, capacity)
    if worst is None:
        return FeasibilityReport(True)
    names = ids or [str(u) for u in range(n)]
    group, demand, capacity = worst
    return FeasibilityReport(
        False, group, demand, capacity,
        f"infeasible under availability: workers {', '.join(names[u] for u in group)} need "
        f"{demand:.4g} selections per round on average but are available for at most {capacity:.4g}")


def check_trace(r: Sequence[float], k: int, trace: np.ndarray, ids: Sequence[str] | None = None) -> FeasibilityReport:
    """Max-flow test of the floors on an availability trace, with a min-cut certificate."""
    import networkx as nx

    r = np.asarray(r, dtype=float)
    trace = np.asarray(trace, dtype=bool)
    T, n = trace.shape
    if n != r.size:
        raise InstanceError(f"the availability trace has {n} workers, expected {r.size}")
    demand = np.ceil(r * T - 1e-9).astype(int)
    graph = nx.DiGraph()
    for t in range(T):
        graph.add_edge("source", ("t", t), capacity=k)
        for u in np.flatnonzero(trace[t]):
            graph.add_edge(("t", t), ("u", int(u)), capacity=1)
    for u in range(n):
        if demand[u] > 0:
            graph.add_edge(("u", u), "sink", capacity=int(demand[u]))
    if "sink" not in graph:
        return FeasibilityReport(True)
    flow, (source_side, _) = nx.minimum_cut(graph, "source", "sink")
    if flow >= demand.sum():
        return FeasibilityReport(True, details={"flow": flow})
    # Workers on the sink side of a minimum cut form a Hall violator: the cut's capacity
    # bounds the selections the rounds can give them from above.
    group = tuple(u for u in range(n) if demand[u] > 0 and ("u", u) not in source_side)
    sub = trace[:, list(group)] if group else trace[:, :0]
    capacity = float(np.minimum(sub.sum(axis=1), k).sum())
    need = float(demand[list(group)].sum()) if group else 0.0
    names = ids or [str(u) for u in range(n)]
    return FeasibilityReport(
        False, group, need, capacity,
        f"infeasible under the availability trace: workers {', '.join(names[u] for u in group)} need "
        f"{need:.0f} selections in {T} rounds but are available for at most {capacity:.0f}",
        details={"flow": flow, "total_demand": int(demand.sum())})


def check_availability(r: Sequence[float], k: int, availability: Availability,
                       ids: Sequence[str] | None = None) -> FeasibilityReport:
    """Dispatch to :func:`check_trace` or :func:`check_probabilities`."""
    if availability.trace is not None:
        return check_trace(r, k, availability.trace, ids)
    return check_probabilities(r, k, availability.probabilities, ids)
