"""Worker availability: per-worker probabilities or a trace, and whether the floors survive it.

A worker can only be selected in rounds where it is available. Given a trace ``A_1..A_T``
(the available set of every round) the floors are feasible on it iff the bipartite flow

    source →(k)→ round t →(1, if u ∈ A_t)→ worker u →(⌈r_u·T⌉)→ sink

saturates every worker's demand (max-flow, :mod:`scipy.sparse.csgraph`). When it does not, the minimum cut
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
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Sequence

import numpy as np

from fairsched.errors import InstanceError
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
        self._settle("feasible" if self.feasible else "infeasible", True,
                     self.reason or "the floors can be met under this availability")

    def __bool__(self) -> bool:
        return self.feasible


def _expected_capped(probabilities: np.ndarray, k: int) -> float:
    """``E[min(k, X)]`` for ``X`` a sum of independent Bernoulli(``probabilities``) (Poisson binomial)."""
    capped = _CappedCount(k)
    for a in probabilities:
        capped.add(float(a))
    return capped.expected()


class _CappedCount:
    """The distribution of ``min(k, X)``, ``X`` a growing sum of independent Bernoulli variables.

    Adding a worker of probability ``a`` costs ``O(k)``: ``P'[j] = (1 − a)·P[j] + a·P[j − 1]``
    for ``j < k`` and ``P'[k] = P[k] + a·P[k − 1]`` (once at ``k`` the count stays there).
    """

    def __init__(self, k: int) -> None:
        self.k = int(k)
        self.dist = np.zeros(self.k + 1)
        self.dist[0] = 1.0
        self._levels = np.arange(self.k + 1, dtype=float)

    def add(self, a: float) -> None:
        dist = self.dist
        top = dist[self.k] + a * dist[self.k - 1]
        dist[1:self.k] = dist[1:self.k] * (1.0 - a) + dist[:self.k - 1] * a
        dist[0] *= 1.0 - a
        dist[self.k] = top

    def expected(self) -> float:
        return float(self._levels @ self.dist)


def check_probabilities(r: Sequence[float], k: int, probabilities: Sequence[float],
                        ids: Sequence[str] | None = None) -> FeasibilityReport:
    """Necessary (exact for ``n <= 12``) check of ``Σ_{u∈G} r_u <= E[min(k, |A ∩ G|)]``.

    For ``n <= 12`` every group ``G`` is checked. Beyond, the groups are every worker alone
    (``E[min(k, A_u)] = a_u``) and the nested groups of the workers with the largest
    ``r_u/a_u`` (ties to the lower index), the last of which is everybody; the nested
    capacities are updated one worker at a time (:class:`_CappedCount`), so the check costs
    ``O(n·k)`` time and ``O(n + k)`` memory.
    """
    start = time.perf_counter()
    r = np.asarray(r, dtype=float)
    a = np.asarray(probabilities, dtype=float)
    if a.shape != r.shape:
        raise InstanceError(f"availability has {a.size} entries, expected {r.size} (one per worker)",
                            key="workers.availability")
    n = r.size
    if n <= EXHAUSTIVE_LIMIT:
        worst = _worst_group((list(G), float(r[list(G)].sum()), _expected_capped(a[list(G)], k))
                             for size in range(1, n + 1) for G in itertools.combinations(range(n), size))
    else:
        worst = _worst_group(_singletons_and_nested(r, a, k))
    if worst is None:
        return FeasibilityReport(True, message="the floors can be met under these availability probabilities"
                                 + ("" if n <= EXHAUSTIVE_LIMIT else " (checked: every worker, and the nested "
                                    "groups of the least available)"), seconds=time.perf_counter() - start)
    names = ids or [str(u) for u in range(n)]
    group, demand, capacity = worst
    return FeasibilityReport(
        False, group, demand, capacity,
        f"infeasible under availability: workers {_list_names(names, group)} need "
        f"{demand:.4g} selections per round on average but are available for at most {capacity:.4g}",
        seconds=time.perf_counter() - start)


def _singletons_and_nested(r: np.ndarray, a: np.ndarray, k: int) -> Iterator[tuple[Sequence[int], float, float]]:
    """``(group, demand, capacity)`` for every worker alone, then the nested groups by ``r_u/a_u``."""
    over = np.flatnonzero(r > a + 1e-9)
    if over.size:
        u = int(over[np.argmax(r[over] - a[over])])
        yield [u], float(r[u]), float(a[u])
    with np.errstate(divide="ignore", invalid="ignore"):
        pressure = np.where(a > 0, r / np.where(a > 0, a, 1.0), np.where(r > 0, np.inf, 0.0))
    order = np.lexsort((np.arange(r.size), -pressure))
    capped, demand = _CappedCount(k), 0.0
    for m, u in enumerate(order, start=1):
        capped.add(float(a[u]))
        demand += float(r[u])
        if m >= 2:
            capacity = capped.expected()
            if demand > capacity + 1e-9:
                yield order[:m], demand, capacity


def _worst_group(groups: Iterable[tuple[Sequence[int], float, float]]) -> tuple[tuple[int, ...], float, float] | None:
    """The group whose demand exceeds its capacity the most, or ``None``."""
    worst = None
    for G, demand, capacity in groups:
        if demand > capacity + 1e-9 and (worst is None or demand - capacity > worst[1] - worst[2]):
            worst = (tuple(int(u) for u in G), demand, capacity)
    return worst


def _list_names(names: Sequence[str], group: Sequence[int], limit: int = 10) -> str:
    shown = ", ".join(names[u] for u in group[:limit])
    return shown + (f" and {len(group) - limit:,} more" if len(group) > limit else "")


def check_trace(r: Sequence[float], k: int, trace: np.ndarray, ids: Sequence[str] | None = None) -> FeasibilityReport:
    """Max-flow test of the floors on an availability trace, with a min-cut certificate.

    The flow network of the module docstring is solved by
    :func:`scipy.sparse.csgraph.maximum_flow` (Dinic's algorithm) in ``O(T·n)`` memory; the
    workers on the sink side of the minimum cut (not reachable from the source in the
    residual network) form the certificate group.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import breadth_first_order, maximum_flow

    start = time.perf_counter()
    r = np.asarray(r, dtype=float)
    trace = np.asarray(trace, dtype=bool)
    T, n = trace.shape
    if n != r.size:
        raise InstanceError(f"the availability trace has {n} workers, expected {r.size}")
    demand = np.ceil(r * T - 1e-9).astype(np.int64)
    total = int(demand.sum())
    if total == 0:
        return FeasibilityReport(True, seconds=time.perf_counter() - start)
    # nodes: 0 source, 1..T rounds, T+1..T+n workers, T+n+1 sink
    sink = T + n + 1
    rounds, workers = np.nonzero(trace)
    owed = np.flatnonzero(demand > 0)
    tails = np.concatenate([np.zeros(T, np.int64), 1 + rounds, T + 1 + owed])
    heads = np.concatenate([1 + np.arange(T), T + 1 + workers, np.full(owed.size, sink)])
    capacity = np.concatenate([np.full(T, min(k, n)), np.ones(rounds.size, np.int64), demand[owed]])
    network = csr_matrix((capacity.astype(np.int32), (tails, heads)), shape=(sink + 1, sink + 1))
    result = maximum_flow(network, 0, sink)
    flow = int(result.flow_value)
    if flow >= total:
        return FeasibilityReport(True, details={"flow": flow}, seconds=time.perf_counter() - start)
    residual = network - result.flow
    residual.data[residual.data < 0] = 0
    residual.eliminate_zeros()
    reachable = breadth_first_order(residual, 0, directed=True, return_predecessors=False)
    source_side = np.zeros(sink + 1, dtype=bool)
    source_side[reachable] = True
    # Workers on the sink side of a minimum cut form a Hall violator: the cut's capacity
    # bounds the selections the rounds can give them from above.
    group = tuple(int(u) for u in owed if not source_side[T + 1 + u])
    sub = trace[:, list(group)] if group else trace[:, :0]
    capacity_of_group = float(np.minimum(sub.sum(axis=1), k).sum())
    need = float(demand[list(group)].sum()) if group else 0.0
    names = ids or [str(u) for u in range(n)]
    return FeasibilityReport(
        False, group, need, capacity_of_group,
        f"infeasible under the availability trace: workers {_list_names(names, group)} need "
        f"{need:.0f} selections in {T} rounds but are available for at most {capacity_of_group:.0f}",
        details={"flow": flow, "total_demand": total}, seconds=time.perf_counter() - start)


def check_availability(r: Sequence[float], k: int, availability: Availability,
                       ids: Sequence[str] | None = None) -> FeasibilityReport:
    """Dispatch to :func:`check_trace` or :func:`check_probabilities`."""
    if availability.trace is not None:
        return check_trace(r, k, availability.trace, ids)
    return check_probabilities(r, k, availability.probabilities, ids)
