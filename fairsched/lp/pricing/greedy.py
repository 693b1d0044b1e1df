"""Heuristic pricing for any utility: greedy on ``f(S) + λ(S)``, with a bound only where one is proven.

With ``λ >= 0`` and ``f`` monotone submodular, ``F = f + λ(·)`` is monotone submodular
with ``F(∅) = 0``, so the greedy set ``G`` has ``F(G) >= (1 − 1/e)·max_{|S|<=k} F(S)``
(Nemhauser, Wolsey & Fisher 1978) and, ``F`` being monotone, the maximum over ``|S| <= k``
is the maximum over ``|S| = k``.  Two upper bounds on that maximum, of which the smaller
is reported:

- ``F(G) / (1 − 1/e)``;
- for every set ``S_i`` of the greedy chain, ``F(S_i) + (sum of the k largest gains
  F(S_i ∪ {u}) − F(S_i))`` (``F(S*) <= F(S_i ∪ S*) <= F(S_i) + Σ_{u∈S*} gain_u``: monotone
  from ``S*`` up and submodular above ``S_i``; Minoux 1978, Leskovec et al. 2007), usually
  far tighter.

They are certificates only when the assumption is: the oracle reads the utility's
:attr:`~fairsched.utilities.base.SetFunction.submodular` (all bounds) and
:attr:`~fairsched.utilities.base.SetFunction.submodular_off_empty` (the chain bounds at
``S_i ≠ ∅`` only: ``S*`` is non-empty since ``k >= 1``, so monotonicity and diminishing
returns are needed on non-empty sets only).  With neither, for instance a ``python``
utility, whose submodularity is the user's promise, the reported bound is ``+inf``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from fairsched.lp.pricing.base import PricingOracle, is_tight, ranked
from fairsched.solvers.colgen import PricingResult
from fairsched.solvers.selection import largest
from fairsched.utilities.base import SetFunction

#: single-swap neighbourhoods of the greedy set are evaluated up to this many sets
SWAP_LIMIT = 5_000
#: sets remembered as local-search starts for later calls
ARCHIVE = 500
#: restarts from remembered sets always made, whatever ``GreedyPricing.restart_seconds`` allows
MIN_RESTARTS = 3
#: perturb-and-climb rounds of :meth:`GreedyPricing.perturbed` per exact pricing call
PERTURBATIONS = 300


SwapDeltas = Callable[[SetFunction, np.ndarray], np.ndarray]


class GreedyPricing(PricingOracle):
    """Greedy ``max_{|S|=k} f(S) + λ(S)``, then 1-swap local search, with a certified bound.

    ``swap_deltas(utility, mask)`` returns the ``(|S|, n − |S|)`` matrix of
    ``f(S − u + v) − f(S)`` (members ``u`` and outsiders ``v`` in increasing index order);
    without it the swaps are evaluated with ``utility.values`` when there are at most
    :data:`SWAP_LIMIT` of them.  Local search also restarts from the ``restarts`` sets it
    returned before, or was given through :meth:`remember`, that score best under the new λ
    (an archive of :data:`ARCHIVE`): the first :data:`MIN_RESTARTS` always, the others while
    their climbs have taken less than :attr:`restart_seconds` in the call.  The local optima
    and their best swaps are the returned columns.
    """

    name = "greedy"
    exact = False

    def __init__(self, utility: SetFunction, k: int, *, max_columns: int = 10,
                 swap_deltas: SwapDeltas | None = None, max_swaps: int | None = None,
                 restarts: int = 3):
        super().__init__(utility.n, k, max_columns)
        self.utility = utility
        #: which bounds are certificates for this utility: "all", "off-empty" or "none"
        self.certified = certified_bounds(utility)
        self.swap_deltas = swap_deltas
        self.max_swaps = 2 * k if max_swaps is None else max_swaps
        self.restarts = restarts
        #: seconds the restarts beyond the first :data:`MIN_RESTARTS` may take per call
        self.restart_seconds = math.inf
        #: perturb-and-climb rounds the last :meth:`perturbed` call ran
        self.last_rounds = 0
        self._archive: list[np.ndarray] = []
        self._archive_values: list[float] = []
        self._archive_keys: set[bytes] = set()

    def swap_gains(self, mask: np.ndarray) -> np.ndarray | None:
        """``f(S − u + v) − f(S)`` for the members ``u`` (rows) and outsiders ``v`` (columns) of
        ``S = mask``, both in increasing index order; ``None`` when the utility has no
        ``swap_deltas`` and the swaps are more than :data:`SWAP_LIMIT`."""
        if self.swap_deltas is not None:
            return self.swap_deltas(self.utility, mask)
        inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
        if not 0 < inside.size * outside.size <= SWAP_LIMIT:
            return None
        swaps = np.repeat(mask[None, :], inside.size * outside.size, axis=0)
        rows = np.arange(swaps.shape[0])
        swaps[rows, np.repeat(inside, outside.size)] = False
        swaps[rows, np.tile(outside, inside.size)] = True
        base = float(self.utility.values(mask[None, :])[0])
        return (self.utility.values(swaps) - base).reshape(inside.size, outside.size)

    def priced_swap_gains(self, mask: np.ndarray, lam: np.ndarray) -> np.ndarray | None:
        """:meth:`swap_gains` on ``f + λ``: ``f(S − u + v) − f(S) − λ_u + λ_v`` (``None`` as
        there)."""
        mask = np.asarray(mask, dtype=bool)
        gains = self.swap_gains(mask)
        if gains is None:
            return None
        return gains - lam[mask][:, None] + lam[~mask][None, :]

    def perturbed(self, lam: np.ndarray, start: np.ndarray, *, target: float | None = None,
                  rounds: int = PERTURBATIONS, stop: float = math.inf, seed: int = 0,
                  more_until: float = -math.inf) -> list[np.ndarray]:
        """Iterated local search on ``f + λ`` (Lourenço, Martin & Stützle, "Iterated Local Search",
        *Handbook of Metaheuristics*, 2003): swap ``2..max(3, k/3)`` random members of the best set
        for random outsiders, climb by best 1-swaps, keep the result when it is better.

        Returns the local optima that improved on the best, in order (the best last); stops
        after ``rounds`` (or, past them, at ``more_until``), at ``stop`` (both
        ``time.perf_counter()`` values) or when a set reaches ``target``.  Seeded by ``seed``:
        the same call gives the same sets.
        """
        rng = np.random.default_rng([seed, 17])
        self.last_rounds = 0
        best = np.asarray(start, dtype=bool)
        best_value = float(self.utility.values(best[None, :])[0] + best @ lam)
        scale = max(1.0, abs(best_value))
        width = min(self.k, self.n - self.k)
        improved: list[np.ndarray] = []
        if width < 1:
            return improved
        most = min(width, max(3, self.k // 3))
        done = 0
        while done < rounds or time.perf_counter() < more_until:
            if time.perf_counter() >= stop or (target is not None and best_value >= target):
                break
            done += 1
            trial = best.copy()
            count = int(rng.integers(min(2, most), most + 1))
            trial[rng.choice(np.flatnonzero(best), count, replace=False)] = False
            trial[rng.choice(np.flatnonzero(~best), count, replace=False)] = True
            trial, _ = self._climb(trial, lam, scale, with_swaps=False)
            value = float(self.utility.values(trial[None, :])[0] + trial @ lam)
            if value > best_value + 1e-12 * scale:
                best, best_value = trial, value
                improved.append(trial)
        self.last_rounds = done
        return improved

    def _climb(self, chosen: np.ndarray, lam: np.ndarray, scale: float,
               with_swaps: bool = True) -> tuple[np.ndarray, list[np.ndarray]]:
        """Best-improvement 1-swaps on ``f + λ``; returns the local optimum and (``with_swaps``)
        its best swaps."""
        chosen = chosen.copy()
        deltas = None
        for _ in range(self.max_swaps):
            deltas = self.priced_swap_gains(chosen, lam)
            if deltas is None or deltas.size == 0:
                return chosen, []
            inside, outside = np.flatnonzero(chosen), np.flatnonzero(~chosen)
            i, j = np.unravel_index(int(np.argmax(deltas)), deltas.shape)
            if not deltas[i, j] > 1e-12 * scale:
                break
            chosen[inside[i]], chosen[outside[j]] = False, True
            deltas = None
        if deltas is None or not with_swaps:
            return chosen, []
        inside, outside = np.flatnonzero(chosen), np.flatnonzero(~chosen)
        swaps = []
        # most swaps may tie (fillers swapped for fillers change nothing), where
        # np.argpartition is several times slower than this cut
        for flat in largest(deltas.ravel(), self.max_columns):
            i, j = divmod(int(flat), outside.size)
            swap = chosen.copy()
            swap[inside[i]], swap[outside[j]] = False, True
            swaps.append(swap)
        return chosen, swaps

    def price(self, lam: np.ndarray) -> PricingResult:
        chosen, value, bound = greedy_chain(self.utility, self.k, lam, self.certified)
        if math.isfinite(bound) and (lam < 0).any():
            # The chain bounds need f + λ monotone, which negative (cap) prices break; f + λ⁺
            # is monotone and at least f + λ everywhere, so its bound still holds.
            bound = greedy_chain(self.utility, self.k, np.clip(lam, 0.0, None), self.certified)[2]
        scale = max(1.0, abs(value))
        starts = [chosen]
        if self._archive:
            # Multi-start: the sets returned before that score best under the new prices
            # (column generation's duals move little between calls, so they are good starts).
            masks, values = self.remembered()
            score = values + masks @ lam
            starts.extend(masks[np.argsort(-score)[: self.restarts]])
        columns = [chosen]
        began = time.perf_counter()
        for count, start in enumerate(starts):
            if count > MIN_RESTARTS and time.perf_counter() - began > self.restart_seconds:
                break
            local, swaps = self._climb(start, lam, scale)
            columns.append(local)
            columns.extend(swaps)
        columns = np.array(columns)
        values = self.utility.values(columns)
        result = ranked(columns, values, lam, self.max_columns, upper_bound=bound, exact=False)
        kept = min(self.restarts, MIN_RESTARTS) + 1
        self.remember(result.columns[:kept], result.values[:kept])
        best = float(result.values[0] + result.columns[0] @ lam)
        return PricingResult(result.columns, result.values, result.upper_bound,
                             exact=is_tight(best, result.upper_bound))

    def remembered(self) -> tuple[np.ndarray, np.ndarray]:
        """The sets kept by :meth:`remember`, oldest first, as ``(m, n)`` boolean masks, and
        their ``f``: given back to :meth:`remember`, they rebuild the archive."""
        if not self._archive:
            return np.zeros((0, self.n), dtype=bool), np.zeros(0)
        return (np.unpackbits(np.array(self._archive), axis=1, count=self.n).astype(bool),
                np.array(self._archive_values))

    def remember(self, columns: np.ndarray, values: np.ndarray) -> None:
        """Keep these sets (with their ``f``) as local-search starts for later calls; the
        oldest go first once the archive holds :data:`ARCHIVE`."""
        for row, value in zip(np.packbits(columns, axis=1), values):
            key = row.tobytes()
            if key not in self._archive_keys:
                self._archive_keys.add(key)
                self._archive.append(row)
                self._archive_values.append(float(value))
        if len(self._archive) > ARCHIVE:
            drop = len(self._archive) - ARCHIVE
            for row in self._archive[:drop]:
                self._archive_keys.discard(row.tobytes())
            del self._archive[:drop], self._archive_values[:drop]


def certified_bounds(utility: SetFunction) -> str:
    """Which greedy bounds hold for ``utility``: ``"all"`` (certified monotone submodular),
    ``"off-empty"`` (only on non-empty sets: chain bounds from ``S_1`` on) or ``"none"``."""
    if getattr(utility, "submodular", None) is True:
        return "all"
    if getattr(utility, "submodular_off_empty", None) is True:
        return "off-empty"
    return "none"


def greedy_chain(utility: SetFunction, k: int, lam: np.ndarray,
                 certified: str = "all") -> tuple[np.ndarray, float, float]:
    """Greedy on ``F = f + λ(·)``: (set mask, ``F`` of it, upper bound on ``max_{|S|=k} F``).

    ``certified`` says which bounds the utility's structure proves (:func:`certified_bounds`);
    the bound is ``+inf`` when none does.
    """
    n = utility.n
    chosen = np.zeros(n, dtype=bool)
    value = 0.0  # F(∅) = f(∅) = 0
    bound = math.inf
    for step in range(k + 1):
        gains = utility.gains(np.flatnonzero(chosen)) + lam
        gains[chosen] = -np.inf
        if certified == "all" or (certified == "off-empty" and step > 0):
            top = np.sort(np.clip(gains[~chosen], 0.0, None))[::-1][:k]
            bound = min(bound, value + float(top.sum()))
        if step == k:
            break
        u = int(np.argmax(gains))
        chosen[u] = True
        value += float(gains[u])
    value = float(utility.values(chosen[None, :])[0] + lam @ chosen)
    if certified == "all" and value > 0:
        bound = min(bound, value / (1.0 - 1.0 / math.e))
    return chosen, value, max(bound, value)
