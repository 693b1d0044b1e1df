"""A starting distribution for the accuracy utility whose sets all have nearly the same size.

For ``f(S) = g(L(S))`` with ``g`` concave and ``L(S) = Σ_{u∈S} L_u`` (the accuracy utility
of Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular
Maximization Approach"), every distribution with marginals ``x`` is worth
``Σ_S p_S g(L(S)) <= g(L·x)`` by Jensen's inequality, with equality only when every set of
its support has ``L(S) = L·x``.  The systematic sample of
:func:`~fairsched.lp.pricing.initial.initial_pool`, laid out by size, keeps ``L(S)`` within
``max L − min L`` of ``L·x``.  With heavy-tailed sizes and floors that pin the marginals
(``Σ r = k``) that spread costs 5e-5 to 1.5e-4 of the value, and column generation's
master, degenerate there, does not win it back: Pareto sizes, ``n = 1,000``, ``k = 100``,
``Σ r = k`` ended "tailing-off" at gaps of 4.8e-5 to 1.5e-3 after 10-70 s
(``benchmarks/bench_balanced.py``).

This module decomposes ``x`` exactly over the vertices of the polytope

    ``P = {y ∈ [0, 1]^n : Σ y = k, L·y = L·x}``

which holds ``x`` (Carathéodory's theorem, constructively).  ``P`` has two equality rows, so a
vertex has at most two fractional coordinates ``a`` and ``b``, and then ``y_a + y_b = 1``
because ``Σ y`` is an integer: the vertex is the mixture ``y_a·1_{A+a} + y_b·1_{A+b}`` of two
``k``-sets, whose sizes differ from ``L·x`` by at most ``|L_a − L_b|``.  Each step

1. finds a vertex ``v`` of the smallest face of ``P`` holding the current point ``y``: the
   workers at 1 in ``y``, plus ``A``, the ``k' − 1`` fractional ones of largest ``y`` (so
   that the step below is long and takes much of the mass left; with the fractional ones
   of largest ``y``, the steps use up the mass at 1e-12 of Jensen's bound where keeping the
   last step's ``A`` stopped at 3e-8), changed until the remainder
   ``R = Σ_{fractional} L_u y_u − L(A)`` lies in the middle half of the other fractional
   workers' sizes, where consecutive sizes are close (far from it, by trading members of
   extreme size for outsiders of the opposite extreme, many pairs at once, leaving out a
   member or outsider whose trade alone would pass the middle; near it, by single swaps of
   the pair that brings ``R`` nearest the middle size; the two alternate); then the pair
   ``L_b < R <= L_a`` of consecutive sizes among them, with ``v_a = (R − L_b)/(L_a − L_b)``.
   *Large* workers, no two of whom fit in one set of size ``L·x``, enter ``A`` one at a
   time, the largest fractional one first, and are never swapped or paired: while their
   ``x`` sums to at most 1 no set then holds two of them.  Largest first because the
   largest needs the smallest fill (``L·x − L_u`` over ``k − 1`` places) while all the small
   workers' mass is still there; taken in order of ``y`` instead, the smaller large
   workers' sets used it up, no pair straddled the remainder of the largest ones and the
   rest was sampled systematically, 1.1e-4 below Jensen's bound on a Pareto draw at
   ``n = 1,000``, ``k = 50`` (1.0e-11 largest first; ``tests/test_balanced.py``) and 1.6e-4
   in the rest class of a draw at ``n = 10,000`` (``benchmarks/README.md``, *Large workers,
   largest first*);
2. moves to ``y' = (y − θv)/(1 − θ)`` with the largest ``θ <= 1`` keeping ``y'`` in
   ``[0, 1]^n``: at least one more coordinate reaches 0 or 1, so there are at most ``n`` steps;
3. gives the sets ``A + a`` and ``A + b`` the weights ``θ·v_a`` and ``θ·v_b`` of the mass left.

This is a deterministic counterpart of the flight phase of the cube method for balanced
sampling (Deville and Tillé, "Efficient balanced sampling: the cube method", 2004), whose
random walk in the kernel of the balancing rows keeps the inclusion probabilities and ends at
a point with as many fractional coordinates as rows: here both ends of each move are kept,
as a mixture, instead of one drawn at random.

**Classes.** A worker ``u`` with ``x_u > 0`` that does not fit (``L_u`` plus the ``k − 1``
smallest sizes exceeds the level of the sets without it) keeps every set holding it above
``L·x``, so Jensen's bound is out of reach.  :func:`level_classes` then gives each such
*giant* a class of weight ``x_u``: the giant at 1, filled from the smallest workers; the
other sets share the rest of the marginals at a lower level, and each class is decomposed
as above.  :func:`level_duals` gives the matching prices: the relaxation's at the slope of
``g`` at that level, and for each giant the price at which its best set ties with a set at
the level.  Conditioning Jensen's inequality on the giant's presence shows why the level
drops: ``Σ_S p_S g(L(S)) <= x_g·g(E[L | g ∈ S]) + (1 − x_g)·g(E[L | g ∉ S])``.

What is left when the work cap, the deadline or a remainder no pair straddles stops the
steps is sampled systematically
(:func:`~fairsched.lp.pricing.initial.systematic_columns`), so the marginals are exactly ``x``
(up to round-off) whenever the loop ends.  Each step is ``O(n)``; ``work`` caps steps times
``n``, so the whole is ``O(work + n·k)`` time and ``O(n·k)`` memory, never ``O(n²)``.  Of a
step's ``O(n)`` only two byte passes (clearing and reading the membership of ``A``) run over
all workers; the arrays it computes with hold only the fractional ones, kept by index and by
size as the steps settle them (:class:`_Fractional`), so late steps, with few left, are
cheap: two-class sizes at ``n = 10,000``, ``k = 100`` decompose in 3.8-4.2 s instead of
7.0-9.2 s, bit for bit the same sets (``benchmarks/README.md``, *The balanced decomposition
over the fractional workers only*).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import numpy as np

from fairsched.lp.pricing.accuracy import AccuracyPricing
from fairsched.lp.pricing.class_relaxation import class_relaxation
from fairsched.lp.pricing.initial import Priority, StartingPool, column_values, starting_point, systematic_columns
from fairsched.solvers.colgen import merge_duplicates, relative_gap
from fairsched.solvers.columns import Columns
from fairsched.utilities.accuracy import AccuracyUtility

#: a coordinate within this of 0 or 1 is taken to be there (round-off of the updates)
SNAP = 1e-13
#: steps times ``n`` at most: ``n = 10^4`` may take every step it needs, ``n = 10^5`` 20,000 (a
#: heavy-tailed class there needed 9,121 steps, 56 s, to reach Jensen's bound to 2e-10; at
#: 2,000 it stopped 9.3e-5 below it)
BALANCE_WORK = 2_000_000_000
#: single swaps per step that bring the remainder ``R`` into the middle half of the sizes
FIT_SWAPS = 64
#: quantiles of the other fractional sizes between which the remainder ``R`` is left
BAND = (0.25, 0.75)
#: rounds of the fixed point that finds the workers too large for the common level
GIANT_ROUNDS = 20
#: more workers than this too large for the level: no classes (each costs a decomposition)
MAX_GIANTS = 64
#: the mass left below which the rest is sampled systematically at once
MASS_FLOOR = 1e-13


def balanced_columns(sizes: np.ndarray, x: np.ndarray, k: int, *, deadline: float | None = None,
                     work: int = BALANCE_WORK) -> tuple[Columns, np.ndarray]:
    """Distinct ``k``-sets and their probabilities, with marginals ``x`` and sizes near ``L·x``.

    ``sizes`` (n,) positive, ``x`` (n,) in ``[0, 1]`` with ``Σ x = k`` (up to round-off).
    Every set has exactly ``k`` members, the probabilities sum to 1 and
    ``columns.marginals(probabilities) ≈ x``.  The sets of the decomposition (the module
    docstring) have ``|L(S) − L·x| <= |L_a − L_b|`` for the pair of their step, except where no
    pair straddled the remainder and a member was traded for an outsider first (an uneven
    step); the remainder's systematic sample, if any, has the spread of
    :func:`~fairsched.lp.pricing.initial.initial_pool`'s.  ``deadline`` is a
    ``time.perf_counter()`` value.
    """
    L = np.asarray(sizes, dtype=float)
    y = np.clip(np.asarray(x, dtype=float), 0.0, 1.0).copy()
    n = y.size
    by_size = np.argsort(L, kind="stable")
    chosen = np.zeros(n, dtype=bool)  # A of the step
    large = _large(L, y, k)
    rows: list[np.ndarray] = []
    weights: list[float] = []
    mass = 1.0
    y[y < SNAP] = 0.0
    y[y > 1.0 - SNAP] = 1.0
    # the fractional workers by index and by size, and those at 1, kept as the steps go: a
    # step then computes over the fractional ones only (at n = 10,000 passes over all n
    # workers took about 40 % of a step)
    fractional = _Fractional.of(L, y, by_size)
    ones = np.flatnonzero(y >= 1.0)
    for _ in range(max(1, work // max(1, n))):
        if mass < MASS_FLOOR or (deadline is not None and time.perf_counter() > deadline):
            break
        if not fractional.ids.size:
            if ones.size == k:
                rows.append(ones)
                weights.append(mass)
                mass = 0.0
            break
        vertex = _vertex(L, y, fractional, chosen, k - ones.size, large)
        if vertex is None:
            break
        a, b, v_a = vertex
        inside = chosen[fractional.ids]
        at_a, at_b = np.searchsorted(fractional.ids, (a, b))
        theta = _step_length(fractional.y, inside, at_a, at_b, v_a)
        base = np.sort(np.concatenate([ones, fractional.ids[inside]]))
        for member, share in ((a, v_a), (b, 1.0 - v_a)):
            if share > 0.0:
                rows.append(np.append(base, member))
                weights.append(mass * theta * share)
        if theta >= 1.0:
            mass = 0.0
            break
        v = inside.astype(float)
        v[at_a], v[at_b] = v_a, 1.0 - v_a
        moved = np.clip((fractional.y - theta * v) / (1.0 - theta), 0.0, 1.0)
        moved[moved < SNAP] = 0.0
        moved[moved > 1.0 - SNAP] = 1.0
        y[fractional.ids] = moved
        mass *= 1.0 - theta
        ones = fractional.settle(moved, ones)
    weights_all = np.array(weights)
    keep = weights_all > 0.0
    parts = [Columns.from_rows(np.array(rows, dtype=np.int64).reshape(-1, k)[keep], n) if keep.any()
             else Columns.empty(n)]
    weights_all = weights_all[keep]
    if mass > 0.0 or not rows:
        rest, shares = systematic_columns(y, k, order=by_size[::-1])
        parts.append(rest)
        weights_all = np.concatenate([weights_all, mass * shares if rows else shares])
    # equal sets, within the steps or between them and the remainder, merged once
    columns, weights_all, _ = merge_duplicates(Columns.concatenate(parts, n), weights_all, weights_all)
    return columns, weights_all / weights_all.sum()


def _large(L: np.ndarray, x: np.ndarray, k: int) -> np.ndarray:
    """Workers no two of whom fit in one set of size ``L·x`` (``L_u > (L·x − s)/2``, ``s`` the
    ``k − 2`` smallest sizes with ``x > 0``), when their ``x`` sum to at most 1 so that no set
    needs two of them; else none."""
    live = np.sort(L[x > 0])
    large = (x > 0) & (L > 0.5 * (float(L @ x) - float(live[: max(0, k - 2)].sum())))
    if k < 2 or float(x[large].sum()) > 1.0:
        large[:] = False
    return large


@dataclass
class _Fractional:
    """The workers with ``0 < y < 1`` of :func:`balanced_columns`, with what the steps read
    of them: ``ids`` in increasing order with their ``y`` and ``sizes``, and the same
    workers ordered by size (then index) with their sizes; ``free`` marks them among all."""

    ids: np.ndarray
    y: np.ndarray
    sizes: np.ndarray
    by_size: np.ndarray
    sizes_by_size: np.ndarray
    free: np.ndarray

    @classmethod
    def of(cls, L: np.ndarray, y: np.ndarray, by_size: np.ndarray) -> _Fractional:
        """Those of ``y`` (``by_size`` orders all workers by size, then index)."""
        free = (y > 0.0) & (y < 1.0)
        ids = np.flatnonzero(free)
        ordered = by_size[free[by_size]]
        return cls(ids, y[ids], L[ids], ordered, L[ordered], free)

    def settle(self, moved: np.ndarray, ones: np.ndarray) -> np.ndarray:
        """Takes the new ``y`` of :attr:`ids`, drops those now at 0 or 1 and returns ``ones``
        (sorted) with those at 1 added."""
        self.y = moved
        settled = (moved <= 0.0) | (moved >= 1.0)
        if not settled.any():
            return ones
        ones = np.sort(np.concatenate([ones, self.ids[moved >= 1.0]]))
        self.free[self.ids[settled]] = False
        left = self.free[self.by_size]
        self.ids, self.y, self.sizes = self.ids[~settled], moved[~settled], self.sizes[~settled]
        self.by_size, self.sizes_by_size = self.by_size[left], self.sizes_by_size[left]
        return ones


def _vertex(L: np.ndarray, y: np.ndarray, fractional: _Fractional, chosen: np.ndarray, places: int,
            large: np.ndarray) -> tuple[int, int, float] | None:
    """Step 1 of the module docstring: sets ``chosen`` to ``A`` in place and returns
    ``(a, b, v_a)``, or None when no pair of consecutive sizes straddles the remainder.

    ``fractional`` holds the workers with ``0 < y < 1`` (:class:`_Fractional`).  ``A`` holds
    the largest fractional ``large`` worker (:func:`_large`), if any, and no other: the large
    ones' mass then stays at most 1 and no set holds two of them.  Only the others are
    swapped or paired."""
    index = fractional.ids
    if places < 1 or abs(float(fractional.y.sum()) - places) > 1e-6:
        return None
    chosen[:] = False
    is_large = large[index]
    big = index[is_large]
    if places > 1 and big.size and index.size - big.size >= places:
        small = index[~is_large]
        chosen[big[np.argmax(L[big])]] = True
        if places > 2:
            chosen[small[np.argpartition(-y[small], places - 3)[: places - 2]]] = True
    elif places > 1:  # the fractional workers of largest y: θ, the mass a step takes, is then large
        chosen[index[np.argpartition(-fractional.y, places - 2)[: places - 1]]] = True
    total = float(fractional.sizes @ fractional.y)
    fixed = big.size and chosen[big].any()  # the large member stays
    movable_by_size = ~large[fractional.by_size] if fixed else None

    def remainder_now() -> float:
        """``R``: ``total`` less the members' sizes."""
        return total - float(L[np.flatnonzero(chosen)].sum())

    def others() -> tuple[np.ndarray, np.ndarray, float]:
        """The other fractional workers that may move, by size, their sizes, and ``R``."""
        stays = ~chosen[fractional.by_size]
        if movable_by_size is not None:
            stays &= movable_by_size
        return fractional.by_size[stays], fractional.sizes_by_size[stays], remainder_now()

    def movable_members() -> np.ndarray:
        """The members that may be traded, in increasing order."""
        members = np.flatnonzero(chosen)
        return members[~large[members]] if fixed else members

    outside, spread, remainder = others()
    members = movable_members()
    swapped = False
    for _ in range(FIT_SWAPS):
        if _in_band(spread, remainder) or not members.size:
            break
        # far from the band (A of largest y may hold the largest sizes): many pairs at once
        traded_out, traded_in = _towards(L, members, outside, spread, remainder, spread[spread.size // 2])
        if traded_out.size:
            chosen[traded_out], chosen[traded_in] = False, True
            outside, spread, remainder = others()
            members = movable_members()
            swapped = False
            continue
        middle = spread[spread.size // 2]
        # swapping i out and j in moves R by L_i − L_j: want L_j = L_i − (middle − R)
        wanted = L[members] - (middle - remainder)
        at = np.minimum(np.maximum(np.searchsorted(spread, wanted), 1), spread.size - 1)
        nearer = np.where(np.abs(spread[at] - wanted) <= np.abs(spread[at - 1] - wanted), at, at - 1)
        miss = np.abs(spread[nearer] - wanted)
        best = int(np.argmin(miss))
        if miss[best] >= abs(middle - remainder):
            break
        out, taken = int(members[best]), int(nearer[best])
        into = int(outside[taken])
        chosen[out], chosen[into] = False, True
        members[best] = into
        # the outsiders stay sorted as by_size orders them (by size, then index) without
        # sorting them again: a swap is one slice moved in place, not an O(n) mask and gather
        # (nor np.delete and np.insert, whose overhead was a sixth of the decomposition)
        _move(outside, spread, taken, out, float(L[out]))
        remainder += float(L[out] - L[into])
        swapped = True
    if swapped:  # R afresh, without the round-off of the updates
        remainder = remainder_now()
    if not spread[0] <= remainder <= spread[-1]:
        members = movable_members()
        traded_out, traded_in = _trades(L, members, outside, remainder < spread[0], remainder, places)
        chosen[traded_out], chosen[traded_in] = False, True
        outside, spread, remainder = others()
    at = int(np.searchsorted(spread, remainder, side="left"))
    if at == 0 or at == spread.size:
        return None
    a, b = int(outside[at]), int(outside[at - 1])
    return a, b, (remainder - L[b]) / (L[a] - L[b])


def _move(outside: np.ndarray, spread: np.ndarray, taken: int, out: int, size: float) -> None:
    """Replaces ``outside[taken]`` by ``out`` of size ``size`` in place, keeping ``outside``
    ordered by size, then index (``spread`` holds the sizes)."""
    lo, hi = int(np.searchsorted(spread, size, side="left")), int(np.searchsorted(spread, size, side="right"))
    place = lo + int(np.searchsorted(outside[lo:hi], out))  # equal sizes by index
    place -= taken < place  # where it goes once ``taken`` is out
    for values, value in ((outside, out), (spread, size)):
        if place < taken:
            values[place + 1: taken + 1] = values[place:taken]
        elif place > taken:
            values[taken:place] = values[taken + 1: place + 1]
        values[place] = value


def _in_band(spread: np.ndarray, remainder: float) -> bool:
    """Whether ``R`` lies between the :data:`BAND` quantiles of the sorted sizes ``spread``."""
    return bool(spread[int(BAND[0] * spread.size)] <= remainder <= spread[int(BAND[1] * spread.size)])


def _extreme_pairs(L: np.ndarray, members: np.ndarray, outside: np.ndarray, low: bool,
                   limit: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trades of :func:`_towards` and :func:`_trades` in their order: with ``low``, the
    members by decreasing size against the outsiders by increasing size (``outside`` is sorted
    by size), else the reverse.  Returns both orderings whole and how far the first
    ``min(|members|, |outside|, limit)`` pairs each move ``R`` (``L_out − L_in``)."""
    out = members[np.argsort(-L[members] if low else L[members], kind="stable")]
    inside = outside if low else outside[::-1]
    count = min(out.size, inside.size, out.size if limit is None else limit)
    return out, inside, L[out[:count]] - L[inside[:count]]


def _towards(L: np.ndarray, members: np.ndarray, outside: np.ndarray, spread: np.ndarray, remainder: float,
             target: float) -> tuple[np.ndarray, np.ndarray]:
    """The members to trade out and the outsiders to take in that bring the remainder ``R``
    nearest ``target`` without passing it (``spread`` holds the sizes of ``outside``, sorted by
    size), extremes first: below it, the largest members for the smallest outsiders (each
    pair moves ``R`` by ``L_out − L_in``), above it the smallest for the largest.  Single
    swaps then finish the fit (:func:`_vertex`): one at a time they needed all
    :data:`FIT_SWAPS` and more in every step of a class at ``n = 100,000``, ``k = 1,000``,
    whose ``A`` of largest ``y`` was 10^5 too large.

    A member whose trade for the smallest outsider alone passes the target stays (a worker
    of size 19,265 among members of 20–200 with ``R`` 12,000 short), and above the target an
    outsider too large to take in even for the smallest member stays out: the others are
    traded.  Stopping at it instead left every step of two-class draws (5 % of sizes
    5,000–20,000) to single swaps, 64 a step without reaching the band: 45.7 s of
    decomposition at ``n = 10,000``, ``k = 100`` (``benchmarks/README.md``, *Two size
    classes*).
    """
    low = remainder < target
    out, inside, _ = _extreme_pairs(L, members, outside, low)
    if not (out.size and inside.size):
        return out[:0], inside[:0]
    if low:  # members too large to trade even for the smallest outsider
        out = out[L[out] - L[inside[0]] <= target - remainder]
    else:  # outsiders too large to take in even for the smallest member
        inside = outside[L[out[0]] - spread >= target - remainder][::-1]
    count = min(out.size, inside.size)
    moves = L[out[:count]] - L[inside[:count]]
    after = remainder + np.cumsum(moves)
    fine = (moves > 0) & (after <= target) if low else (moves < 0) & (after >= target)
    # the pairs are ordered by how far they move R: the useful ones are a prefix
    stop = int(np.argmin(fine)) if not fine.all() else moves.size
    return out[:stop], inside[:stop]


def _trades(L: np.ndarray, members: np.ndarray, outside: np.ndarray, low: bool, remainder: float,
            places: int) -> tuple[np.ndarray, np.ndarray]:
    """Where no pair straddles the remainder ``R``: the members to trade out and the outsiders
    to take in (an uneven step, but the decomposition goes on instead of stopping).

    ``low`` (``R`` below every other size: the members are too large) trades the largest
    members for the smallest outsiders, one pair after another, else the smallest for the
    largest; each trade moves ``R`` by ``L_out − L_in``.  The trades stop at the first count
    after which ``R`` lies within the other sizes (the outsiders left and the members traded
    out), or once the next trade would not move ``R`` towards them, after at most ``places``.
    ``outside`` is sorted by size.  All counts are weighed at once (prefix sums): one trade at
    a time, each gathering the outsiders again, cost ``O(places·n)`` a step, which at
    ``n = 100,000``, ``k = 1,000`` held the decomposition for minutes.
    """
    out, inside, moves = _extreme_pairs(L, members, outside, low, places)
    count = moves.size
    if count == 0:
        return out[:0], inside[:0]
    after = remainder + np.concatenate([[0.0], np.cumsum(moves)])  # R after i trades, i = 0..count
    i = np.arange(count + 1)
    beyond = np.inf if low else -np.inf
    # the nearest other size after i trades: the next outsider, or the last member traded out
    following = np.where(i < inside.size, L[inside[np.minimum(i, inside.size - 1)]], beyond)
    last_out = np.where(i > 0, L[out[np.maximum(i - 1, 0)]], beyond)
    if low:
        reached = after >= np.minimum(following, last_out)
        useless = np.append(moves <= 0, True)
    else:
        reached = after <= np.maximum(following, last_out)
        useless = np.append(moves >= 0, True)
    stop = int(np.argmax(reached | useless))
    return out[:stop], inside[:stop]


def _step_length(y: np.ndarray, inside: np.ndarray, a: int, b: int, v_a: float) -> float:
    """Step 2: the largest ``θ <= 1`` with ``(y − θv)/(1 − θ)`` in ``[0, 1]``, over the
    fractional workers' ``y``; ``inside`` marks ``A`` among them, ``a`` and ``b`` are the
    pair's positions."""
    at_zero = ~inside
    at_zero[[a, b]] = False
    limits = [1.0, float(y[inside].min(initial=1.0)), float((1.0 - y[at_zero]).min(initial=1.0))]
    for u, share in ((a, v_a), (b, 1.0 - v_a)):
        if share > 0.0:
            limits.append(y[u] / share)
        if share < 1.0:
            limits.append((1.0 - y[u]) / (1.0 - share))
    return max(0.0, min(limits))


def jensen_bound(utility: AccuracyUtility, x: np.ndarray) -> float:
    """``g(L·x)``: with ``x`` of :func:`starting_point` (which maximises ``L·x`` over the
    marginals the floors allow) an upper bound on ``U_opt``."""
    return float(utility.curve(np.array(float(utility.sizes @ x))))


@dataclass(frozen=True)
class Classes:
    """Marginals split by the workers too large for the common level (module docstring, *Classes*).

    ``giants[i]`` is in every set of class ``i``, whose marginals are ``fills[i]`` (the giant
    at 1, the smallest workers filling the other ``k − 1`` places) and whose weight is
    ``shares[i]``; the sets without a giant have marginals ``rest``, weight ``1 − Σ shares``
    and mean size ``level``.  From :func:`level_classes`, ``shares`` is the giants' ``x`` and
    ``Σ_i shares[i]·fills[i] + (1 − Σ shares)·rest = x``; from the class relaxation
    (:func:`~fairsched.lp.pricing.class_relaxation.class_relaxation`) the marginals meet the
    floors and ``prices`` certify the bound.
    """

    giants: np.ndarray
    fills: np.ndarray
    rest: np.ndarray
    level: float
    #: the classes' weights (``x`` of the giants, or the class relaxation's)
    shares: np.ndarray
    #: how many of ``giants`` come first and do not fit alone (the others are only large)
    beyond: int
    #: prices for the bound from the class relaxations, to price in turn (none: :func:`level_duals`)
    prices: tuple[np.ndarray, ...] = ()
    #: the class relaxation's value over its tangents (an upper bound on these classes' worth)
    upper: float = float("inf")

    def any_giant(self) -> bool:
        """Whether some class worker does not fit alone (else they are only too large in pairs)."""
        return self.beyond > 0


def level_classes(sizes: np.ndarray, x: np.ndarray, k: int) -> Classes | None:
    """The classes of a worker ``u`` with ``x_u > 0`` that does not fit: ``L_u`` plus the
    ``k − 1`` smallest sizes of the sets without a giant exceeds their level ``L·rest``.

    Found by a fixed point (a giant lowers the level, which can make others giants), at most
    :data:`GIANT_ROUNDS` rounds.  Each giant's class takes the smallest workers first, up to
    ``min(x_u, x_giant)`` of each: the sets holding a giant are already above the level, where
    ``g'`` is smaller, so filling them with the least size loses least (the derivative of
    ``x_g·g(L_g + s) + (1 − x_g)·g(level(s))`` in the fill ``s`` is ``x_g·(g'(L_g + s) −
    g'(level)) < 0``).  None when every worker fits, when the giants' ``x`` sum to 1 or more
    (some sets would hold two), when there are more than :data:`MAX_GIANTS` of them, when
    the rest's marginals would exceed 1, or when the rounds end before the fixed point.
    """
    L = np.asarray(sizes, dtype=float)
    x = np.asarray(x, dtype=float)
    n = x.size
    by_size = np.flatnonzero(x > 0)
    by_size = by_size[np.argsort(L[by_size], kind="stable")]
    giants = np.zeros(0, dtype=np.int64)
    for _ in range(GIANT_ROUNDS):
        share = float(x[giants].sum())
        if share >= 1.0 - 1e-9 or giants.size > MAX_GIANTS:
            return None
        left = x.copy()
        left[giants] = 0.0
        fills = np.zeros((giants.size, n))
        for row, giant in enumerate(giants):
            room = np.minimum(left[by_size], x[giant])
            need = (k - 1) * x[giant]
            take = np.clip(need - np.concatenate([[0.0], np.cumsum(room)[:-1]]), 0.0, room)
            if take.sum() < need * (1 - 1e-12):
                return None
            fills[row, by_size] = take / x[giant]
            fills[row, giant] = 1.0
            left[by_size] -= take
        rest = np.clip(left / (1.0 - share), 0.0, None)
        if (rest > 1.0 + 1e-9).any():
            return None
        level = float(L @ rest)
        smallest = float(np.sort(L[rest > 1e-12])[: k - 1].sum())
        outgrown = np.flatnonzero((x > 0) & (L + smallest > level))
        grown = np.union1d(giants, outgrown)
        if grown.size == giants.size:
            break
        giants = grown
    else:
        return None  # no fixed point within the rounds
    if not giants.size:
        return None
    return Classes(giants, np.minimum(fills, 1.0), np.minimum(rest, 1.0), level, x[giants].copy(),
                   giants.size)


def level_duals(pricing: AccuracyPricing, r: np.ndarray, classes: Classes) -> np.ndarray:
    """Prices for the bound where Jensen's is out of reach: the relaxation's duals
    (:meth:`AccuracyPricing.relaxation`) at the slope ``η = g'(level)`` of the sets without a
    giant, and for each giant at its floor the
    price that makes its best set, the giant with the ``k − 1`` smallest others, as good as
    a set at the level: ``λ_g = h_0 − [g(L_g + s_1) − η·s_1 + (k − 1)·η·τ]`` with
    ``h_0 = g(level) − η·level + k·η·τ``.  Any ``λ >= 0`` gives a valid bound once priced;
    these make it close to what the classes attain (``benchmarks/bench_balanced.py``).
    """
    _, tau, at_floor = pricing.relaxation(r)
    eta = float(pricing.dg(classes.level))
    # a worker without a floor adds nothing to λ·r: a price on it could only raise the bound
    lam = np.where(at_floor & (r > 0), np.maximum(0.0, eta * (tau - pricing.sizes)), 0.0)
    k, L = pricing.k, pricing.sizes
    priced = lam > 0  # the best set with a giant fills it from these (the others add no price)
    priced[classes.giants] = False
    smallest = float(np.sort(L[priced])[: k - 1].sum())
    at_level = float(pricing.g(classes.level)) - eta * classes.level + k * eta * tau
    for giant in classes.giants:
        if not at_floor[giant] or r[giant] <= 0:
            continue
        best_with = float(pricing.g(L[giant] + smallest)) - eta * smallest + (k - 1) * eta * tau
        lam[giant] = max(0.0, at_level - best_with)
    return lam


def _relaxed(utility: AccuracyUtility, k: int, r: np.ndarray, x: np.ndarray, classes: Classes | None,
             workers: np.ndarray, deadline: float | None) -> Classes | None:
    """Classes for ``workers`` (the giants of ``classes`` first) with the class relaxation's
    fills, weights and prices; None if HiGHS does not solve it in time or the workers' ``x``
    sum to 1 or more."""
    L = utility.sizes
    if workers.size > MAX_GIANTS or float(x[workers].sum()) >= 1.0 - 1e-9:
        return None
    giants = 0 if classes is None else classes.giants.size
    level = float(L @ (x if classes is None else classes.rest))
    starts = np.concatenate([[] if classes is None else classes.fills @ L, np.full(workers.size - giants, level),
                             [level]])
    relaxed = class_relaxation(utility, k, r, workers, x[workers], starts, deadline=deadline)
    if relaxed is None:
        return None
    return Classes(workers, relaxed.fills, relaxed.rest, float(L @ relaxed.rest), relaxed.weights, giants,
                   (relaxed.prices,), relaxed.upper)


def _decomposed(utility: AccuracyUtility, k: int, x: np.ndarray, classes: Classes | None,
                deadline: float | None) -> StartingPool:
    """The balanced decomposition of ``x``, or of each class's marginals at its weight."""
    if classes is None:
        parts = [(x, 1.0)]
    else:
        parts = [(fill, float(share)) for share, fill in zip(classes.shares, classes.fills) if share > 0]
        parts.append((classes.rest, 1.0 - float(classes.shares.sum())))
    decomposed = [balanced_columns(utility.sizes, marginals, k, deadline=deadline) for marginals, _ in parts]
    # no set is in two classes (each class's sets hold its worker, the rest's hold none)
    columns = Columns.concatenate([c for c, _ in decomposed], utility.n)
    weights = np.concatenate([w * share for (_, w), (_, share) in zip(decomposed, parts)])
    return StartingPool(columns, column_values(utility, columns), weights / weights.sum())


def balanced_pool(utility: AccuracyUtility, k: int, r: np.ndarray, *, beat: float | None = None,
                  gap: float = 0.0, caps: np.ndarray | None = None, deadline: float | None = None,
                  priority: Priority | None = None) -> tuple[StartingPool | None, Classes | None]:
    """The balanced decomposition of :func:`starting_point`'s marginals ``x`` as a starting
    pool, class by class where some workers do not fit (:func:`level_classes`), and those
    classes; ``(None, None)`` when a distribution worth ``beat`` (if given) is already within
    ``gap`` (relative) of Jensen's bound: column generation prices the relaxation's duals
    first, whose bound is Jensen's, so that distribution is certified as it is.  (At a tenth
    of ``gap`` the decomposition ran on lognormal sizes at ``n = 10,000`` whose sample was
    already certified at 7.9e-7, and took 4.9 s against 0.6 s.)

    Without caps, where some workers do not fit (giants) or, where all fit, some are too
    large to share a set with another (:func:`_large`), those workers get classes of the
    class relaxation (:mod:`~fairsched.lp.pricing.class_relaxation`).  Where its
    decomposition is not within ``gap`` of its value, the giants and the rest class's large
    workers get classes together (on ``bench_exchange.py``'s family that closed 1.5e-4 to
    6e-9), and where still none is, the greedy classes (or ``x``) are decomposed too.  The
    first relaxation's value is the reference: more classes forbid more sets, and on a
    Pareto draw at ``n = 10,000`` the second's value was 1.4e-4 lower.  The pool holds every
    decomposition, weighted as the best, and the returned classes are the first
    relaxation's, with the prices of each in that order: on Pareto draws with giants they
    certify what the greedy ones left at 3e-5 (``benchmarks/bench_balanced.py
    --relaxation-baseline``).

    Every decomposition's marginals meet ``r`` (and ``caps``): ``x`` does, and so do the
    relaxation's.
    """
    _, x, _ = starting_point(utility, k, r, caps, priority)
    bound = jensen_bound(utility, x)
    if beat is not None and relative_gap(beat, bound) <= gap:
        return None, None
    classes = level_classes(utility.sizes, x, k)
    L = utility.sizes
    # class workers: the giants (where every worker fits, the large ones); then, if their
    # decomposition is not within the gap, the giants with the rest's large workers too
    if classes is None:
        tries = [np.flatnonzero(_large(L, x, k))]
    else:
        large = np.flatnonzero(_large(L, classes.rest, k))
        tries = [classes.giants] + ([np.concatenate([classes.giants, large])] if large.size else [])
    relaxed: Classes | None = None
    pools: list[StartingPool] = []

    def settled() -> bool:
        """Whether a relaxed decomposition is within ``gap`` of the first relaxation's value."""
        return relaxed is not None and relative_gap(max(pool.value() for pool in pools), relaxed.upper) <= gap

    for workers in tries if caps is None else []:
        if settled():
            break
        variant = _relaxed(utility, k, r, x, classes, workers, deadline) if workers.size else None
        if variant is None:
            continue
        # the first one's value is the reference (more classes can exclude the optimum's sets);
        # every solved one's prices are priced in turn
        relaxed = variant if relaxed is None else replace(relaxed, prices=relaxed.prices + variant.prices)
        pools.append(_decomposed(utility, k, x, variant, deadline))
    # the greedy classes' decomposition (of the rest class, mostly: 8.8 s at n = 10,000) only
    # where no relaxed one is already within the gap of the relaxation's value
    if not settled():
        pools.append(_decomposed(utility, k, x, classes, deadline))
    best = max(range(len(pools)), key=lambda i: pools[i].value())
    columns = Columns.concatenate([pool.columns for pool in pools], utility.n)
    weights = np.concatenate([pool.probabilities * (i == best) for i, pool in enumerate(pools)])
    columns, weights, _ = merge_duplicates(columns, weights, weights)
    pool = StartingPool(columns, column_values(utility, columns), weights / weights.sum())
    return pool, relaxed if relaxed is not None else classes
