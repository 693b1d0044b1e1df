"""Swaps between the rounds of a coverage schedule, for many pairs of rounds at once.

The schedule search (:mod:`~fairsched.lp.pricing.schedule_search`) improves a ``T``-round
schedule one round at a time, each step a call of the pricing heuristic's swap values
(``k·(n − k)`` of them).  For weighted coverage ``f(S) = Σ_e w_e·[e covered by S]`` a swap
between two rounds has a closed form in the rounds' **element counts** ``c_t(e)`` (how many
members of round ``t`` cover ``e``): exchanging ``u ∈ S_a \\ S_b`` for ``v ∈ S_b \\ S_a``
changes ``f(S_a) + f(S_b)`` by

``Δ(u, v) = [add_a(v) − once_a(u) + X_a(u, v)] + [add_b(u) − once_b(v) + X_b(v, u)]``

- ``once_a(u) = Σ_{e ∈ u} w_e·[c_a(e) = 1]``: what round ``a`` loses without ``u``;
- ``add_a(v) = Σ_{e ∈ v} w_e·[c_a(e) = 0]``: what ``v`` adds to round ``a``;
- ``X_a(u, v) = Σ_{e ∈ u ∩ v} w_e·[c_a(e) = 1]``: the elements ``u`` alone covered in ``a``
  that ``v`` covers too, which are not lost.

A **sweep** pairs the rounds at random (``T/2`` disjoint pairs), computes the ``k × k``
matrix ``Δ`` of every pair in numpy and makes each pair's best swap where it gains.  An
element covered once in round ``a`` has one owner there, so each (pair, element) covered once
meets the members of the other round that cover it in one entry of ``X``: one ``bincount`` over
the expanded (worker, element) entries, 1.05-1.48 times as fast as the block-offset sparse
product it replaced (``python benchmarks/bench_round_swaps.py --values-against 234afb1``).
The swaps keep every worker's number of rounds, so every floor stays met.  The pairs are
disjoint, so their swaps do not interact.  Cost per sweep: ``O(T·k·d̄ + T·k²)`` for the
average number of elements per worker ``d̄``, memory ``O(T·E)`` for the counts (``T × E``
int32).

It is the pairwise interchange of local search for assignment and partitioning problems
(e.g. Kernighan and Lin, "An efficient heuristic procedure for partitioning graphs", 1970),
here between rounds, with the exact gain of every interchange of a pair at once.  Measured
(``python benchmarks/bench_round_swaps.py``, the whole schedule search with and without the
sweeps, same deadline): on covers by discs (``coverage-geometric`` of
``benchmarks/bench_pricing.py``, ``n = 1,000``, ``k = 50``, 3,200 rounds, 0.4 s per sweep)
from the first schedule's 1272.82 to 1283.60 in 44 s, where the round-by-round swaps alone
stall at 1276.89 after 12 s; on power-law covers 2292.83 in 48 s against 2285.40, though
behind them at 12 s (2282.30 against 2285.29).  Where the first schedule is locally best
already (the generator's ``coverage``) the one sweep costs 3 s (9.2 s against 6.2 s).

**The master's distribution, swept** (:func:`swept_distribution`).  Column generation's
master re-weights the swept schedule's sets and lifts the value by about 7 on covers by
discs, but its later iterations, each a few priced columns, lift it by tenths.  The master's
optimal distribution, apportioned to ``T`` rounds and swept for a few seconds, gives sets
with about its marginals and less overlap, which join the master as columns.  Measured on
``coverage-geometric`` at 120 s (``python benchmarks/bench_pricing.py --seed S
coverage-geometric``, seeds 1–3 alternating with the commit before): values 1344.85,
1309.17, 1251.97 against 1344.23, 1308.55, 1251.35 (gaps 1.07e-2, 1.20e-2, 8.89e-3 against
1.12e-2, 1.25e-2, 9.38e-3); ``coverage-powerlaw`` 6.62e-3 against 7.75e-3.  A small,
steady gain while the master's simplex took 37.7 s over a call's 1,100-odd new sets; with
the master solved by Clarabel (:mod:`fairsched.solvers.interior`, 1.4–3.0 s a solve) a run
makes five or six calls (``benchmarks/README.md``, "The master by Clarabel").
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp

from fairsched.solvers.columns import Columns
from fairsched.utilities import Coverage
from fairsched.utilities.base import SetFunction

#: at most this many ``Δ`` entries (``pairs·k²``) and expanded (worker, element) entries per
#: block of pairs (32 MiB of float64 each), and at most four times as many (pair, element)
#: owner cells (64 MiB of int32)
BLOCK_WORK = 1 << 22
#: a sweep that gains less than this share of the schedule's value ends the sweeps (where the
#: first schedule is already locally best, as on the generator's coverage instance, one sweep
#: is all they cost: 2.4 s there, its workers covering 149 elements on average)
SWEEP_GAIN = 1e-6
#: at most this many ``T × E`` count cells (64 MiB of int32)
MAX_COUNT_CELLS = 1 << 24
#: seconds of sweeps per call of :func:`swept_distribution`
DISTRIBUTION_SWEEP_SECONDS = 5.0


class CoverageSwaps:
    """The element counts ``c_t(e)`` of a coverage schedule (``masks``, ``T × n``, every round
    of ``k`` workers), kept in step with the swaps :meth:`sweep` makes in ``masks``."""

    def __init__(self, utility: Coverage, masks: np.ndarray, k: int):
        self.incidence = utility.sparse_incidence().tocsr()
        self.weights = np.asarray(utility.weights, dtype=float)
        self.degree = np.diff(self.incidence.indptr)
        self.masks = masks
        # each round's members in increasing order: member i of round t is members[t, i]
        self.members = np.sort(np.argsort(~masks, axis=1, kind="stable")[:, :k], axis=1)
        counts = sp.csr_array(masks.astype(np.float64)) @ self.incidence.astype(np.float64)
        self.counts = np.asarray(counts.toarray(), dtype=np.int32)

    def _expand(self, workers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slot, element) of every element of every ``workers[slot]``."""
        lengths = self.degree[workers]
        starts = np.zeros(workers.size + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        slot = np.repeat(np.arange(workers.size), lengths)
        offsets = np.arange(slot.size) - starts[slot]
        return slot, self.incidence.indices[self.incidence.indptr[workers][slot] + offsets]

    def swap_values(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``Δ[p, i, j]``: the change of ``f(S_a) + f(S_b)`` when member ``i`` of round ``a[p]``
        and member ``j`` of round ``b[p]`` trade places (``-inf`` where one of them is in both
        rounds); the pairs' rounds must be distinct."""
        k = self.members.shape[1]
        pairs, elements = a.size, self.weights.size
        u, v = self.members[a].ravel(), self.members[b].ravel()
        slot_u, element_u = self._expand(u)
        slot_v, element_v = self._expand(v)
        pair_u, pair_v = slot_u // k, slot_v // k
        weight_u, weight_v = self.weights[element_u], self.weights[element_v]
        once_u = weight_u * (self.counts[a[pair_u], element_u] == 1)
        once_v = weight_v * (self.counts[b[pair_v], element_v] == 1)
        slots = pairs * k
        loss_u = np.bincount(slot_u, once_u, slots).reshape(pairs, k)
        loss_v = np.bincount(slot_v, once_v, slots).reshape(pairs, k)
        add_u = np.bincount(slot_u, weight_u * (self.counts[b[pair_u], element_u] == 0), slots).reshape(pairs, k)
        add_v = np.bincount(slot_v, weight_v * (self.counts[a[pair_v], element_v] == 0), slots).reshape(pairs, k)
        # X terms (module docstring): each owner of an element covered once in a meets the
        # members of b covering it, and the same from b's side
        column_u, column_v = pair_u * elements + element_u, pair_v * elements + element_v
        member_u, member_v = slot_u - pair_u * k, slot_v - pair_v * k
        cells = pairs * elements
        met_v, owner_a = self._owners_met(once_u, column_u, member_u, column_v, cells)  # X_a(u, v)
        met_u, owner_b = self._owners_met(once_v, column_v, member_v, column_u, cells)  # X_b(v, u)
        at = np.concatenate([(pair_v[met_v] * k + owner_a) * k + member_v[met_v],
                             (pair_u[met_u] * k + member_u[met_u]) * k + owner_b])
        weight = np.concatenate([weight_v[met_v], weight_u[met_u]])
        # (bincount gives int64 when there are no entries at all)
        delta = np.bincount(at, weight, pairs * k * k).astype(np.float64, copy=False).reshape(pairs, k, k)
        delta += (add_u - loss_u)[:, :, None]
        delta += (add_v - loss_v)[:, None, :]
        u_in_b = self.masks[np.repeat(b, k), u].reshape(pairs, k)
        v_in_a = self.masks[np.repeat(a, k), v].reshape(pairs, k)
        delta[u_in_b] = -np.inf
        delta[np.broadcast_to(v_in_a[:, None, :], delta.shape)] = -np.inf
        return delta

    @staticmethod
    def _owners_met(once: np.ndarray, column: np.ndarray, member: np.ndarray, other_column: np.ndarray,
                    cells: int) -> tuple[np.ndarray, np.ndarray]:
        """The entries of the other round (by their (pair, element) ``other_column``) on an
        element this round covers once (``once > 0``), and that element's owner here."""
        alone = np.flatnonzero(once)
        owner = np.full(cells, -1, dtype=np.int32)
        owner[column[alone]] = member[alone]
        found = owner[other_column]
        met = np.flatnonzero(found >= 0)
        return met, found[met]

    def sweep(self, a: np.ndarray, b: np.ndarray, tol: float, deadline: float | None = None) -> np.ndarray:
        """Make each pair's best swap where it gains more than ``tol``; the gains made (one per
        swap).  ``a`` and ``b``: distinct rounds, each in at most one pair.  The pairs go in
        blocks of :data:`BLOCK_WORK`; none after ``deadline`` (a ``time.perf_counter()`` value)."""
        k = self.members.shape[1]
        per_block = max(1, min(BLOCK_WORK // (k * k),
                               BLOCK_WORK // max(1, 2 * k * int(self.degree.mean() + 1)),
                               4 * BLOCK_WORK // max(1, self.weights.size)))
        gains = []
        for start in range(0, a.size, per_block):
            if deadline is not None and time.perf_counter() > deadline:
                break
            block_a, block_b = a[start:start + per_block], b[start:start + per_block]
            delta = self.swap_values(block_a, block_b).reshape(block_a.size, k * k)
            best = delta.argmax(axis=1)
            gain = delta[np.arange(block_a.size), best]
            go = np.flatnonzero(gain > tol)
            if go.size:
                self._swap(block_a[go], block_b[go], best[go] // k, best[go] % k)
                gains.append(gain[go])
        return np.concatenate(gains) if gains else np.empty(0)

    def _swap(self, a: np.ndarray, b: np.ndarray, i: np.ndarray, j: np.ndarray) -> None:
        u, v = self.members[a, i], self.members[b, j]
        for workers, rounds, step in ((u, a, -1), (v, a, 1), (v, b, -1), (u, b, 1)):
            slot, element = self._expand(workers)
            np.add.at(self.counts, (rounds[slot], element), step)
        self.masks[a, u], self.masks[a, v] = False, True
        self.masks[b, v], self.masks[b, u] = False, True
        self.members[a, i], self.members[b, j] = v, u


def round_swaps_for(utility: SetFunction, masks: np.ndarray, k: int) -> CoverageSwaps | None:
    """A :class:`CoverageSwaps` for weighted coverage within :data:`MAX_COUNT_CELLS`, else ``None``."""
    if type(utility) is not Coverage or masks.shape[0] * utility.weights.size > MAX_COUNT_CELLS:
        return None
    return CoverageSwaps(utility, masks, k)


def sweeps(state: CoverageSwaps, value: float, rng: np.random.Generator,
           deadline: float | None = None, max_sweeps: int | None = None) -> tuple[float, int]:
    """Sweeps (module docstring) until ``deadline`` (a ``time.perf_counter()`` value),
    ``max_sweeps``, or after a sweep that gains less than :data:`SWEEP_GAIN` of ``value``
    (the schedule's total ``Σ_t f(S_t)``, given at the start); returns the total reached and
    the number of sweeps."""
    rounds = state.masks.shape[0]
    done = 0
    while rounds > 1 and (max_sweeps is None or done < max_sweeps) and \
            (deadline is None or time.perf_counter() < deadline):
        order = rng.permutation(rounds)
        half = rounds // 2
        gained = float(state.sweep(order[:half], order[half:2 * half], 1e-12 * max(1.0, abs(value) / rounds),
                                   deadline).sum())
        value += gained
        done += 1
        if gained < SWEEP_GAIN * abs(value):
            break
    return value, done


def apportioned_rounds(weights: np.ndarray, rounds: int) -> np.ndarray:
    """How many of ``rounds`` rounds each set gets: ``⌊p·T⌋`` and one more for the largest
    remainders (Hamilton's method), so that they sum to ``T``."""
    weights = np.asarray(weights, dtype=float)
    total = float(weights.sum())
    if not (total > 0 and np.isfinite(total)) or (weights < 0).any():
        raise ValueError("the weights must be non-negative with a positive, finite sum")
    share = weights / total * rounds
    counts = np.floor(share).astype(np.int64)
    short = rounds - int(counts.sum())  # below the number of weights: the shares sum to rounds
    counts[np.argsort(-(share - counts), kind="stable")[:short]] += 1
    return counts


def swept_distribution(utility: SetFunction, k: int, rounds: int, *, seconds: float = DISTRIBUTION_SWEEP_SECONDS,
                       deadline: float | None = None, seed: int = 0
                       ) -> Callable[[Columns, np.ndarray], tuple[Columns, np.ndarray]]:
    """Column generation's ``primal_columns`` for weighted coverage: the master's distribution
    as a schedule of ``rounds`` rounds (:func:`apportioned_rounds`), swept for ``seconds``
    (not past ``deadline``, a ``time.perf_counter()`` value); the swept schedule's distinct
    sets and their values (none where :func:`round_swaps_for` gives no state).

    The master's sets hold its optimum's marginals, and their overlaps are what it could not
    trade away with the columns priced so far; the sweeps keep each worker's number of rounds
    and exchange members between rounds where that covers more, so the master gets sets that
    hold about the same marginals with less overlap, and re-weights to them."""
    rng = np.random.default_rng(seed)

    def swept(support: Columns, weights: np.ndarray) -> tuple[Columns, np.ndarray]:
        sets, counts = support.to_masks(), apportioned_rounds(weights, rounds)
        masks = np.repeat(sets, counts, axis=0)
        state = round_swaps_for(utility, masks, k)
        if state is None or masks.shape[0] < 2:
            return Columns.empty(utility.n), np.empty(0)
        stop = time.perf_counter() + seconds
        total = float(utility.values(sets) @ counts)  # f once per set, not once per round
        sweeps(state, total, rng, stop if deadline is None else min(stop, deadline))
        distinct = np.unique(state.masks, axis=0)
        return Columns.from_masks(distinct), utility.values(distinct)

    return swept
