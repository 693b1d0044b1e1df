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
        for chunk in np.array_split(np.arange(codes.size), max(1, codes.size * masks.shape[0] // CHUNK_PAIRS)):
            ok = (set_bits[None, :] & forced[chunk, None]) == forced[chunk, None]
            i, j = np.nonzero(ok)
            c = costs[chunk][i] + cost[j]
            keep = c <= bound
            i, j, c = i[keep], j[keep], c[keep]
            layer.merge(codes[chunk][i] + set_code[j] - inc_code, c, chunk[i], j)
        if layer.codes.size == 0:
            raise FairschedError("no schedule with debt < 1 within the incumbent's cost (is the incumbent feasible?)")
        codes, costs = layer.codes, layer.costs
        parents.append((layer.from_state, layer.via_set))
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


class _Layer:
    """The states reached after one more round, each with its cheapest path, merged chunk by chunk
    (memory: the distinct states plus one chunk of state-set pairs)."""

    def __init__(self) -> None:
        self.codes = np.empty(0, dtype=np.int64)
        self.costs = np.empty(0)
        self.from_state = np.empty(0, dtype=np.int64)
        self.via_set = np.empty(0, dtype=np.int64)

    def merge(self, codes: np.ndarray, costs: np.ndarray, from_state: np.ndarray, via_set: np.ndarray) -> None:
        nc = np.concatenate((self.codes, codes))
        cc = np.concatenate((self.costs, costs))
        order = np.lexsort((cc, nc))  # by state, cheapest first
        first = np.r_[True, nc[order][1:] != nc[order][:-1]] if order.size else np.empty(0, dtype=bool)
        pick = order[first]
        self.codes, self.costs = nc[pick], cc[pick]
        self.from_state = np.concatenate((self.from_state, from_state))[pick]
        self.via_set = np.concatenate((self.via_set, via_set))[pick]


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
