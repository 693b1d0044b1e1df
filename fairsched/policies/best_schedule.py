"""The best time-average utility of any schedule with debt < 1, for periodic floors with ``Σ r = k`` (``docs/mathematics.md`` §9).

``U_opt`` (the LP of §2) bounds every fair policy but is a limit of randomised policies;
a deterministic schedule with short-term fairness (``d_u(t) < 1`` for every ``u`` and ``t``)
may have to pay more. For rational floors ``r_u = a_u/b_u`` with ``Σ_u r_u = k`` exactly
this price can be computed exactly:

- **Blocks.** Let ``P = lcm(b_u)``. Debt ``< 1`` means ``N_u(t) >= ⌊r_u t⌋``; at ``t = jP``
  that is ``N_u(jP) >= j·r_u·P``, and the counts sum to ``k·jP = Σ_u j·r_u·P`` (a schedule
  with ``Σ r = k`` must select ``k`` workers every round), so every ``N_u(jP) = j·r_u·P``
  exactly: every block ``jP+1 .. (j+1)P`` starts from the same state and is itself a
  feasible schedule of one period. The best schedule therefore repeats the best single
  period, and its time average over any multiple of ``P`` rounds is at most that period's.
- **Shortest path.** Within a period the state after round ``t`` is the vector of
  *aheads* ``a_u = N_u(t) − ⌊r_u t⌋ >= 0``, summing to ``k·t − Σ_u ⌊r_u t⌋ < n``. A round's
  set ``S`` (``|S| = k``) must contain every worker whose floor steps up (``⌊r_u(t+1)⌋ >
  ⌊r_u t⌋``) with ``a_u = 0``, and moves ``a`` to ``a + 1_S − step``. With the LP duals
  ``(λ, μ)`` and ``μ' = max_S f(S) + λ(S)``, the cost ``c(S) = μ' − f(S) − λ(S) >= 0``
  summed over a period that returns to ``a = 0`` is ``P·(μ' − λ·r) − Σ_t f(S_t)`` (the
  counts over a period are ``r·P`` exactly), so the cheapest period is the best one.
  It is found layer by layer, one layer per round, keeping for each state its cheapest
  path and discarding states already dearer than ``incumbent`` (a known period, e.g. a
  policy's, whose cost bounds the optimum).

Exact (integers for the floors, the enumeration of all ``C(n, k)`` sets for ``f``); for
small ``n`` only (``n <= 15``, ``C(n, k)`` sets enumerated). ``best_schedule`` returns the
period's sets, its time-average value and ``P``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from fairsched.errors import FairschedError, TooLargeError
from fairsched.problem import Problem

MAX_N = 15  # the ahead vector is n hex digits of an int64 (16 digits could overflow)
MAX_DENOMINATOR = 10_000
#: state-set pairs examined per vectorised chunk of a layer
CHUNK_PAIRS = 1 << 21


@dataclass(frozen=True)
class BestSchedule:
    """The best period: its sets (``period`` rows of sorted indices) and their time-average utility."""

    period: int
    sets: list[np.ndarray]
    value: float
    states: int  # states kept, over all layers (the work done)


def rational_floors(r: np.ndarray, max_denominator: int = MAX_DENOMINATOR) -> list[Fraction]:
    """The floors as fractions ``a/b`` with ``b <= max_denominator`` (they must be within ``1e-12`` of one)."""
    out = []
    for x in np.asarray(r, dtype=float):
        f = Fraction(float(x)).limit_denominator(max_denominator)
        if abs(float(f) - float(x)) > 1e-12:
            raise FairschedError(f"floor {x!r} is not a fraction with denominator <= {max_denominator}")
        out.append(f)
    return out


def period_of(r: np.ndarray) -> int:
    """``P = lcm`` of the floors' denominators."""
    return math.lcm(*[f.denominator for f in rational_floors(r)])


def _all_sets(n: int, k: int) -> np.ndarray:
    combos = np.array(list(itertools.combinations(range(n), k)), dtype=np.int64)
    masks = np.zeros((len(combos), n), dtype=bool)
    masks[np.repeat(np.arange(len(combos)), k), combos.ravel()] = True
    return masks


def best_schedule(problem: Problem, prices: np.ndarray, incumbent: list[np.ndarray] | None = None,
                  max_states: int | None = None) -> BestSchedule:
    """The cheapest period of a schedule with debt ``< 1`` (see the module docstring).

    ``prices`` are the LP's fairness prices ``λ`` (any ``λ`` gives the same optimum; the
    LP's make the costs of its support 0, so the search keeps few states). ``incumbent`` is a
    feasible period (``P`` sets starting from round 1), for pruning; without one, every
    state is kept. ``max_states`` bounds the states kept over all layers (the work):
    beyond it, :class:`~fairsched.errors.TooLargeError`.
    """
    n, k = problem.n, problem.k
    if n > MAX_N:
        raise FairschedError(f"best_schedule enumerates all states: n <= {MAX_N}, got {n}")
    floors = rational_floors(problem.r)
    if sum(floors) != k:
        raise FairschedError(f"best_schedule needs floors summing to k = {k} exactly, got {sum(floors)}")
    P = math.lcm(*[f.denominator for f in floors])
    num = np.array([f.numerator * (P // f.denominator) for f in floors], dtype=np.int64)  # r_u·P
    required = (num[None, :] * np.arange(P + 1)[:, None]) // P  # ⌊r_u t⌋, t = 0..P
    step = np.diff(required, axis=0).astype(np.int64)  # 0 or 1
    masks = _all_sets(n, k)
    values = problem.utility.values(masks)
    lam = np.asarray(prices, dtype=float)
    score = values + masks @ lam
    cost = score.max() - score  # >= 0 exactly: a maximum minus each element
    digit = np.int64(16) ** np.arange(n, dtype=np.int64)  # a_u <= Σ a < n <= 15: one hex digit each
    set_bits = masks.astype(np.int64) @ (np.int64(1) << np.arange(n, dtype=np.int64))
    set_code = masks.astype(np.int64) @ digit
    bound = np.inf
    if incumbent is not None:
        bound = _period_cost(incumbent, masks, cost, required, k) + 1e-9
    codes, costs = np.zeros(1, dtype=np.int64), np.zeros(1)
    parents: list[tuple[np.ndarray, np.ndarray]] = []
    kept = 1
    for t in range(P):
        inc = step[t]
        inc_code = int(inc @ digit)
        # forced: a_u = 0 and the floor steps up
        zero = ((codes[:, None] // digit[None, :]) % 16) == 0
        forced = (zero & (inc[None, :] == 1)).astype(np.int64) @ (np.int64(1) << np.arange(n, dtype=np.int64))
        layer = _Layer()
        for i, j in _allowed_pairs(forced, set_bits):
            c = costs[i] + cost[j]
            keep = c <= bound
            i, j, c = i[keep], j[keep], c[keep]
            layer.merge(codes[i] + set_code[j] - inc_code, c, i, j)
        codes, costs, from_state, via_set = layer.finished()
        if codes.size == 0:
            raise FairschedError("no schedule with debt < 1 within the incumbent's cost (is the incumbent feasible?)")
        parents.append((from_state, via_set))
        kept += codes.size
        if max_states is not None and kept > max_states:
            raise TooLargeError(f"best_schedule: more than {max_states} states after {t + 1} of {P} rounds")
    end = np.flatnonzero(codes == 0)
    if end.size == 0:
        raise FairschedError("no period returns to the start: the floors cannot all be met")
    state = int(end[0])
    sets: list[np.ndarray] = []
    for t in range(P - 1, -1, -1):
        from_state, via_set = parents[t]
        sets.append(np.flatnonzero(masks[via_set[state]]))
        state = int(from_state[state])
    sets.reverse()
    chosen = np.zeros((P, n), dtype=bool)
    for t, S in enumerate(sets):
        chosen[t, S] = True
    value = float(problem.utility.values(chosen).mean())
    return BestSchedule(period=P, sets=sets, value=value, states=kept)


def _allowed_pairs(forced: np.ndarray, set_bits: np.ndarray) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """The pairs (state ``i``, set ``j``) whose set holds every worker the state forces
    (``set_bits[j] ⊇ forced[i]``, as bit masks), in increasing ``(i, j)``, in chunks of about
    :data:`CHUNK_PAIRS` pairs.

    States share few forced masks, so each distinct mask's sets are listed once and the pairs
    are read off those lists, rather than testing every state against every set.
    """
    masks, which = np.unique(forced, return_inverse=True)
    allowed = [np.flatnonzero((set_bits & f) == f) for f in masks]
    sizes = np.array([a.size for a in allowed], dtype=np.int64)
    flat = np.concatenate(allowed) if allowed else np.empty(0, dtype=np.int64)
    offset = np.r_[0, np.cumsum(sizes)[:-1]]
    per_state = sizes[which]
    ends = np.cumsum(per_state)
    first = 0
    while first < forced.size:
        # the states whose pairs end within one chunk past the pairs before them (at least one state)
        done = ends[first - 1] if first else 0
        last = max(first + 1, int(np.searchsorted(ends, done + CHUNK_PAIRS, side="right")))
        count = per_state[first:last]
        i = np.repeat(np.arange(first, last), count)
        within = np.arange(i.size) - np.repeat(np.cumsum(count) - count, count)
        yield i, flat[offset[which[i]] + within]
        first = last


class _Layer:
    """The states reached after one more round, each with its cheapest path, gathered chunk by chunk.

    Each chunk is first reduced to its own distinct states; the reduced chunks wait in a list
    and are merged into the layer only once they hold as many entries as it does, so every
    entry is sorted ``O(log)`` times rather than once per later chunk (merging each chunk into
    the whole layer at once sorted it again per chunk: 49 of the 59 s of one search at
    ``n = 14``; with :func:`_allowed_pairs` and :func:`_reduced` that search takes 9.8 s
    against 55.3 s, the same period, ``python benchmarks/bench_best_schedule.py``).
    Memory: at most about twice the distinct states plus one chunk of state-set pairs. Ties
    in cost keep the path from the earliest chunk, then the earliest pair within it (as the
    single sort did).
    """

    def __init__(self) -> None:
        self._merged = _reduced(np.empty(0, dtype=np.int64), np.empty(0), np.empty(0, dtype=np.int64),
                                np.empty(0, dtype=np.int64))
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        self._pending_size = 0

    def merge(self, codes: np.ndarray, costs: np.ndarray, from_state: np.ndarray, via_set: np.ndarray) -> None:
        chunk = _reduced(codes, costs, from_state, via_set)
        self._pending.append(chunk)
        self._pending_size += chunk[0].size
        if self._pending_size >= self._merged[0].size:
            self._compact()

    def _compact(self) -> None:
        if self._pending:
            parts = [self._merged, *self._pending]
            self._merged = _reduced(*(np.concatenate([part[i] for part in parts]) for i in range(4)))
            self._pending, self._pending_size = [], 0

    def finished(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The layer's distinct states by increasing code: (codes, costs, from_state, via_set)."""
        self._compact()
        return self._merged


def _reduced(codes: np.ndarray, costs: np.ndarray, from_state: np.ndarray,
             via_set: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct state once, by increasing code, with its cheapest entry (the first among equals).

    One unstable sort by code and two grouped minima (the cheapest cost, then the first
    position at it) rather than a sort by code and cost: 10x faster on two million pairs.
    """
    if codes.size == 0:
        return codes, costs, from_state, via_set
    order = np.argsort(codes)
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    sorted_costs = costs[order]
    cheapest = np.minimum.reduceat(sorted_costs, starts)
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, order.size]))
    at_cheapest = np.where(sorted_costs == cheapest[group], order, order.size)
    pick = np.minimum.reduceat(at_cheapest, starts)
    return codes[pick], costs[pick], from_state[pick], via_set[pick]


def _period_cost(sets: list[np.ndarray], masks: np.ndarray, cost: np.ndarray, required: np.ndarray, k: int) -> float:
    """The cost of a feasible period (checked: debt < 1 and back to the start)."""
    n, P = masks.shape[1], required.shape[0] - 1
    if len(sets) != P:
        raise FairschedError(f"the incumbent has {len(sets)} rounds, the period is {P}")
    index = {tuple(np.flatnonzero(m)): j for j, m in enumerate(masks)}
    counts = np.zeros(n, dtype=np.int64)
    total = 0.0
    for t, S in enumerate(sets, start=1):
        j = index.get(tuple(int(u) for u in np.sort(S)))
        if j is None:
            raise FairschedError(f"incumbent round {t} is not a set of k = {k} workers")
        counts[np.asarray(S, dtype=np.int64)] += 1
        if (counts < required[t]).any():
            raise FairschedError(f"the incumbent lets a debt reach 1 in round {t}")
        total += float(cost[j])
    if (counts != required[P]).any():
        raise FairschedError("the incumbent does not end the period where it started")
    return total
