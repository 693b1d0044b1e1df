"""A starting distribution for column generation: a ``T``-round schedule that meets every floor,
improved by swaps that keep it feasible.

Where many sets share the LP optimum (facility location with costly floors: hundreds of sets
in its support), column generation's master climbs slowly from the systematic sample of
:func:`~fairsched.lp.pricing.initial.initial_pool`, a few columns per iteration.  This
search builds a whole feasible schedule at once and improves its value directly:

1. **Counts.** Worker ``u`` must appear in ``c_u = ⌈r_u·T⌉`` of the ``T`` rounds (``Σ c <=
   k·T`` is required, else there is no schedule to search).  Round by round, with ``R``
   rounds left and deficits ``d_u`` (``c_u`` minus the rounds ``u`` already has), the
   ``⌈Σ d / R⌉`` workers of largest deficit are chosen, the rest of the round filled from
   the greedy set of ``f``, then the others by singleton value.  As in McNaughton's
   wrap-around rule (McNaughton, "Scheduling with deadlines and loss functions", 1959) the
   deficits then stay at most ``R`` and their sum at most ``k·R``, so the last round leaves
   none: every floor is met.
2. **Assignment.** That schedule ignores ``f`` when it places the floors, so workers that
   overlap (cover the same elements, serve the same points) often share a round and waste
   it.  Where the utility has per-round gains (:mod:`~fairsched.lp.pricing.round_gains`:
   coverage, facility location, concave of modular, modular and their mixtures), a second
   schedule is built greedily: workers in decreasing singleton value each take the ``c_u``
   rounds with room where they gain most, then every round is filled to ``k`` by greedy gain
   (:func:`assigned_schedule`; ``O(T·nnz)`` for coverage, ``O(T·points·n)`` for facility
   location).  It is a greedy for the assignment of workers to rounds, in the spirit of
   list scheduling (Graham, "Bounds on multiprocessing timing anomalies", 1969), on the
   schedule's total value.  On uniformly random covers and on covers by discs, the assigned
   one is worth 13–19 % more before any swap (``benchmarks/README.md``, "Assigned
   schedules").  A third schedule (:func:`wished_schedule`, where the pricing has a
   continuous relaxation) places each worker's floor together with the rounds the
   relaxation's optimum ``x*`` gives it beyond (``⌊x*_u·T⌋ − c_u``), largest workers first:
   the floors alone leave ``k·T − Σ c`` places to the fill, which takes them round by round,
   while ``x*`` says which workers deserve them, and placed with their floors they spread
   over the rounds.  It is the best of the three on 11 of 15 cases, by up to 4.4 % over the
   better of the other two (covers by discs; ``python
   benchmarks/bench_assigned_schedule.py``; ``benchmarks/README.md``, "Wished schedules").
   The best of the three is searched.  Column generation asks for the third only where the
   pricing kind says so (:attr:`~fairsched.lp.pricing.milp.MilpPricing.wished_start`:
   coverage), since on the generators' mixture and concave ``log1p`` its higher start led
   to later certificates.
3. **Sweeps between rounds** (weighted coverage only,
   :mod:`~fairsched.lp.pricing.round_swaps`): the rounds are paired at random and each
   pair makes its best exchange of a member of one for a member of the other, all pairs at
   once from the rounds' element counts; sweeps go on until one gains less than
   :data:`~fairsched.lp.pricing.round_swaps.SWEEP_GAIN` of the value, after
   :data:`MAX_SWEEPS` or at the deadline.  On covers by discs they gain 1.6 times what the
   swaps below gain in the same 12 s and keep lifting the schedule after those stall.
4. **Swaps.** In round ``t`` a member ``u`` is exchanged for an outsider ``v``, either alone,
   when ``u`` has more rounds than ``c_u``, worth ``f(S_t − u + v) − f(S_t)``, or together
   with a partner round ``t'`` that holds ``v`` but not ``u`` and takes ``u`` in exchange
   (no count changes), worth ``[f(S_t − u + v) − f(S_t)] + [f(S_t' − v + u) − f(S_t')]``.
   The best of either kind is made when it gains.  Passes visit the rounds in random order,
   each with one random partner, until a pass gains less than :data:`PASS_GAIN` of the
   schedule's value, after :data:`MAX_PASSES` passes or :data:`MAX_SWAP_VALUES` swap
   values, or at the deadline; a schedule worth less than another starting distribution
   after its first pass is dropped (``beat`` of :func:`schedule_search`).  The swap values of a
   round are one call of the pricing heuristic's
   :meth:`~fairsched.lp.pricing.greedy.GreedyPricing.swap_gains` (``O(points·n)`` for
   facility location), so a step is two such calls.

The uniform distribution over the ``T`` rounds meets ``r`` (``u``'s marginal is its count
over ``T``, at least ``c_u/T >= r_u``), so its value is a lower bound on ``U_opt``.  It is
the same local search a periodic schedule of ``T`` rounds would be improved by, on the
objective of the LP.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from fairsched.lp.pricing.initial import Priority, StartingPool, priority_order
from fairsched.lp.pricing.round_gains import RoundGains, round_gains_for
from fairsched.lp.pricing.round_swaps import round_swaps_for, sweeps
from fairsched.solvers.columns import Columns
from fairsched.utilities.base import SetFunction

#: rounds ``T`` are chosen so that the average worker is picked about this often: rounding
#: ``r_u·T`` up then adds at most one round to a floor of about ``PICKS_PER_WORKER·r_u·n/k``
#: (concave sqrt ``n = 100``, ``k = 10``: the first schedule is worth 87.96 at 40 picks,
#: 90.54 at 100)
PICKS_PER_WORKER = 160
#: at most this many mask cells ``T·n`` (16 MiB of booleans)
MAX_CELLS = 1 << 24
#: at most this many swap values ``k·(n − k)`` per round (a step computes two such matrices)
MAX_SWAPS = 1 << 22
#: passes over all rounds, when no deadline stops the search earlier
MAX_PASSES = 20
#: swap values computed in all (a step computes ``2·k·(n − k)``): with or without a
#: deadline the search's work stays bounded (facility location ``n = 400``, ``k = 40``:
#: about 35,000 steps, 40 s on the project's machine)
MAX_SWAP_VALUES = 10**9
#: at most this many sweeps of swaps between rounds (:mod:`~fairsched.lp.pricing.round_swaps`;
#: coverage ``n = 1,000``, ``k = 50``, 3,200 rounds: about 0.36 s each)
MAX_SWEEPS = 100
#: a pass that gains less than this share of the schedule's value ends the search
PASS_GAIN = 1e-4
#: operations per block of rounds in :func:`_fill` (its gains: 32 MiB of float64 for
#: facility location)
FILL_WORK = 1 << 22
#: shares of the relaxation's extra rounds tried in turn by :func:`wished_schedule` until one
#: leaves room for every floor (where the extras fill the rounds, a later floor can find too
#: few rounds with room: ``coverage-uniform``, ``facility-location-gaussian`` and
#: ``concave-sqrt-sparse`` of ``benchmarks/bench_pricing.py`` at the full share)
EXTRA_SHARES = (1.0, 0.5)
#: :func:`_fill` recomputes a block's gains after this many refreshes per round that did not
#: lead: a compromise between gains that fall fast and slowly (scratch runs, seconds to fill
#: ``coverage-powerlaw`` / ``facility-location-uniform`` of ``benchmarks/bench_pricing.py``:
#: never recomputing 8.8 / 0.6, after 1 per round 1.8 / 1.9, 2: 2.0 / 1.5, 8: 2.2 / 1.1)
REFRESHES_PER_ROUND = 2

SwapGains = Callable[[np.ndarray], "np.ndarray | None"]


def default_rounds(n: int, k: int) -> int:
    """``T = ⌈PICKS_PER_WORKER·n/k⌉``, at most ``MAX_CELLS / n``."""
    return min(-(-PICKS_PER_WORKER * n // max(1, k)), MAX_CELLS // max(1, n))


def floor_counts(r: np.ndarray, rounds: int) -> np.ndarray:
    """``c_u = ⌈r_u·T⌉``, without the round-up a floating-point product just above an
    integer would cause (``0.1·1600 = 160.00000000000003``)."""
    return np.ceil(np.asarray(r, dtype=float) * rounds * (1.0 - 1e-12)).astype(np.int64)


def initial_schedule(utility: SetFunction, k: int, counts: np.ndarray, rounds: int,
                     rng: np.random.Generator, priority: Priority | None = None) -> np.ndarray:
    """``rounds`` boolean masks of ``k`` workers in which every ``u`` appears at least
    ``counts[u]`` times (step 1 of the module docstring); requires ``Σ counts <= k·rounds``
    and ``counts <= rounds``.  ``priority`` is
    :func:`~fairsched.lp.pricing.initial.priority_order`'s answer, computed here when not given."""
    n = utility.n
    _, _, fill_order = priority_order(utility, k) if priority is None else priority
    # ties among equal deficits go to a fixed random order, so alike workers take turns
    tie_order = rng.permutation(n)
    deficit = counts.astype(np.int64).copy()
    masks = np.zeros((rounds, n), dtype=bool)
    for t in range(rounds):
        left = rounds - t
        due = int(-(-np.maximum(deficit, 0).sum() // left))
        mask = masks[t]
        if due:
            keyed = tie_order[np.argsort(-deficit[tie_order], kind="stable")[:min(due, k)]]
            mask[keyed[deficit[keyed] > 0]] = True
        missing = k - int(mask.sum())
        if missing > 0:
            free = fill_order[~mask[fill_order]][:missing]
            mask[free] = True
        deficit -= mask
    return masks


def assigned_schedule(utility: SetFunction, k: int, counts: np.ndarray, rounds: int,
                      rng: np.random.Generator, priority: Priority | None = None,
                      deadline: float | None = None, extra: np.ndarray | None = None) -> np.ndarray | None:
    """``rounds`` boolean masks of ``k`` workers in which every ``u`` appears at least
    ``counts[u]`` times, built greedily on ``f`` (step 2 of the module docstring, where the
    utility has a :func:`~fairsched.lp.pricing.round_gains.round_gains_for` state), or ``None``
    (no such state, a worker finds fewer rounds with room than its count, or ``deadline``, a
    ``time.perf_counter()`` value, passes).

    Workers in decreasing singleton value each take the ``counts[u]`` rounds with room where
    they gain most, so workers that overlap land in different rounds; then each round is
    filled to ``k`` by greedy gain.  Ties go to a random round (``rng``), so alike workers
    spread out.  ``extra`` (optional, per worker) asks for that many more rounds, taken with the
    worker's count where there is room beyond what the floors of the workers still to come
    need."""
    n = utility.n
    state = round_gains_for(utility, rounds)
    if state is None:
        return None
    _, by_value, _ = priority_order(utility, k) if priority is None else priority
    masks = np.zeros((rounds, n), dtype=bool)
    sizes = np.zeros(rounds, dtype=np.int64)
    jitter = rng.random(rounds)
    wanted = counts if extra is None else counts + extra
    # the rounds still owed to the floors of the workers not yet placed: extras never take them
    owed = int(counts[wanted > 0].sum())
    for u in by_value[wanted[by_value] > 0]:
        owed -= int(counts[u])
        room = sizes < k
        free = k * rounds - int(sizes.sum())
        c = min(int(wanted[u]), int(counts[u]) + max(0, free - int(counts[u]) - owed), int(room.sum()))
        if c < counts[u] or (deadline is not None and time.perf_counter() > deadline):
            return None
        if c == 0:
            continue
        gains = state.worker_gains(int(u))
        # among equal gains, the emptier rounds first, then a random one
        tie = 1e-9 * max(1.0, float(np.abs(gains).max())) * (jitter - sizes) / (k + 1)
        gains = np.where(room, gains + tie, -np.inf)
        chosen = np.argpartition(-gains, c - 1)[:c] if c < rounds else np.arange(rounds)
        state.add(np.full(c, u), chosen)
        masks[chosen, u] = True
        sizes[chosen] += 1
    _fill(state, masks, sizes, k)
    return masks


def wished_schedule(utility: SetFunction, k: int, counts: np.ndarray, rounds: int, marginals: np.ndarray,
                    rng: np.random.Generator, priority: Priority | None = None,
                    deadline: float | None = None) -> np.ndarray | None:
    """:func:`assigned_schedule` where each worker also asks for the rounds the continuous
    relaxation gives it beyond its floor: ``extra_u = max(0, ⌊x*_u·T⌋ − c_u)`` for the
    relaxation's optimum ``x*`` (``marginals``), scaled by the first of
    :data:`EXTRA_SHARES` that leaves room for every floor; ``None`` when none does, when
    nobody asks for more or where :func:`assigned_schedule` gives none.

    The floors alone leave ``k·T − Σ c_u`` places to the fill, which takes them round by round
    greedily, blind to how the workers placed before it were spread; the relaxation says
    which workers are worth more than their floor (``Σ x* = k``), and placed with their
    floors, largest first, they land in the rounds where they overlap least."""
    marginals = np.clip(np.asarray(marginals, dtype=float), 0.0, 1.0)
    extra = np.maximum(0, np.floor(marginals * rounds + 1e-9).astype(np.int64) - counts)
    if not extra.any():
        return None
    for share in EXTRA_SHARES:
        masks = assigned_schedule(utility, k, counts, rounds, rng, priority, deadline,
                                  extra=np.floor(extra * share).astype(np.int64))
        if masks is not None:
            return masks
    return None


def _fill(state: RoundGains, masks: np.ndarray, sizes: np.ndarray, k: int) -> None:
    """Fill every round to ``k`` workers by lazy greedy gain (Minoux, "Accelerated greedy
    algorithms for maximizing submodular set functions", 1978), many rounds at once.

    Each block of rounds gets every worker's gain (:data:`FILL_WORK` operations per block);
    then, per round, the leading worker's gain is refreshed, and it joins when it still leads:
    the others' older gains can only have fallen since (submodularity).  Once the refreshed
    leads that fell behind number :data:`REFRESHES_PER_ROUND` per round left (gains that fall
    fast, as with large overlapping covers), the block's gains are computed afresh."""
    short = np.flatnonzero(sizes < k)
    block = max(1, FILL_WORK // max(1, state.work()))

    def outsiders_gains(rounds: np.ndarray) -> np.ndarray:
        return np.where(masks[rounds], -np.inf, state.round_gains(rounds))

    for start in range(0, short.size, block):
        rounds = short[start:start + block]
        stale = outsiders_gains(rounds)
        rows, missed = np.arange(rounds.size), 0
        while rows.size:
            lead = stale[rows].argmax(axis=1)
            stale[rows, lead] = state.pair_gains(lead, rounds[rows])
            joins = stale[rows, lead] >= stale[rows].max(axis=1)
            missed += rows.size - int(joins.sum())
            if missed > REFRESHES_PER_ROUND * rows.size:
                stale[rows] = outsiders_gains(rounds[rows])
                lead = stale[rows].argmax(axis=1)
                joins, missed = np.ones(rows.size, dtype=bool), 0
            row, u = rows[joins], lead[joins]
            state.add(u, rounds[row])
            masks[rounds[row], u] = True
            stale[row, u] = -np.inf
            sizes[rounds[row]] += 1
            rows = rows[sizes[rounds[rows]] < k]


def schedule_search(utility: SetFunction, k: int, r: np.ndarray, swap_gains: SwapGains, *,
                    rounds: int | None = None, deadline: float | None = None,
                    max_passes: int = MAX_PASSES, beat: float | None = None,
                    seed: int = 0, priority: Priority | None = None,
                    marginals: np.ndarray | None = None) -> StartingPool | None:
    """The schedule of the module docstring as a starting pool: its distinct sets, each
    weighted by the share of rounds it fills, and their ``f``.

    ``rounds`` defaults to :func:`default_rounds`.  Returns
    ``None`` when no schedule of that many rounds meets the rounded-up floors (``Σ ⌈r_u·T⌉ >
    k·T``, e.g. ``Σ r = k`` with floors that do not divide ``T``), when a round's swap
    values would exceed :data:`MAX_SWAPS` or ``swap_gains`` gives none (``None``, for every
    ``k``-set or for none).  The swaps stop after ``max_passes``, after
    :data:`MAX_SWAP_VALUES` swap values or at ``deadline`` (a
    ``time.perf_counter()`` value); the schedule reached by then is returned.  With ``beat``
    (the value of another starting distribution), a schedule worth less after its first
    pass is abandoned (``None``): where the systematic sample starts higher, the search's
    time and columns cost more than they bring (concave of modular, ``n = 100``: 1.7e-3 at
    120 s with them, against optimal at 1e-4 in about 100 s without).  Seeded by ``seed``:
    without a deadline the same call gives the same pool.  ``priority`` goes to
    :func:`initial_schedule` and :func:`assigned_schedule`, which also stops at ``deadline``.
    ``marginals`` (the continuous relaxation's optimum, where the pricing has one) adds a
    third first schedule, :func:`wished_schedule`; the search starts from the best.  For
    weighted coverage, sweeps of swaps between rounds come before the round-by-round swaps
    (step 3 of the module docstring), within the same deadline.
    """
    n = utility.n
    r = np.asarray(r, dtype=float)
    if rounds is None:
        rounds = default_rounds(n, k)
    if rounds < 1 or not 0 < k < n or k * (n - k) > MAX_SWAPS:
        return None
    counts = floor_counts(r, rounds)
    if counts.sum() > k * rounds or (counts > rounds).any():
        return None
    rng = np.random.default_rng([seed, 29])
    masks = initial_schedule(utility, k, counts, rounds, rng, priority)
    values = utility.values(masks)
    others = [assigned_schedule(utility, k, counts, rounds, np.random.default_rng([seed, 31]), priority,
                                deadline)]
    if marginals is not None:
        others.append(wished_schedule(utility, k, counts, rounds, marginals, np.random.default_rng([seed, 37]),
                                      priority, deadline))
    for other in others:
        if other is not None:
            other_values = utility.values(other)
            if other_values.mean() > values.mean():
                masks, values = other, other_values
    between = round_swaps_for(utility, masks, k)
    if between is not None:
        sweeps(between, float(values.sum()), rng, deadline, MAX_SWEEPS)
        values = utility.values(masks)
    # the first pass's order is drawn before the passes: the swap values of its first round
    # tell whether there are any, and are that step's
    order = rng.permutation(rounds)
    gains = swap_gains(masks[order[0]])
    if gains is None:
        return None
    chosen = masks.sum(axis=0)
    steps = MAX_SWAP_VALUES // (2 * k * (n - k))
    for done in range(max_passes):
        gained, scale = 0.0, max(1.0, float(np.abs(values).mean()))
        if done:
            order = rng.permutation(rounds)
        for t in order:
            steps -= 1
            if steps < 0 or (deadline is not None and time.perf_counter() > deadline):
                return None if beat is not None and values.mean() < beat else _pool(utility, masks)
            partner = int(rng.integers(rounds - 1)) if rounds > 1 else -1
            partner += partner >= t
            gained += _best_swap(masks, values, chosen, counts, int(t), partner, swap_gains,
                                 1e-12 * scale, gains)
            gains = None
        if beat is not None and values.mean() < beat:
            return None
        beat = None
        if gained < PASS_GAIN * abs(float(values.sum())):
            break
    return _pool(utility, masks)


def _best_swap(masks: np.ndarray, values: np.ndarray, chosen: np.ndarray, counts: np.ndarray,
               t: int, partner: int, swap_gains: SwapGains, tol: float,
               gains: np.ndarray | None = None) -> float:
    """Make the best swap of round ``t`` alone or with ``partner`` (module docstring, step 4)
    when it gains more than ``tol``; returns the gain (0 if none).  ``gains``: round ``t``'s
    swap values, when already known."""
    mask = masks[t]
    if gains is None:
        gains = swap_gains(mask)
    inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
    spare = chosen[inside] > counts[inside]
    best, move = tol, None
    if spare.any():
        alone = np.where(spare[:, None], gains, -np.inf)
        i, j = np.unravel_index(int(np.argmax(alone)), alone.shape)
        if alone[i, j] > best:
            best, move = float(alone[i, j]), ("alone", inside[i], outside[j], float(alone[i, j]), 0.0)
    if partner >= 0:
        other = masks[partner]
        leaving = inside[~other[inside]]           # u: in round t, not in the partner
        coming = np.flatnonzero(other & ~mask)     # v: in the partner, not in round t
        if leaving.size and coming.size:
            partner_gains = swap_gains(other)
            inside2, outside2 = np.flatnonzero(other), np.flatnonzero(~other)
            here = gains[np.searchsorted(inside, leaving)][:, np.searchsorted(outside, coming)]
            there = partner_gains[np.searchsorted(inside2, coming)][:, np.searchsorted(outside2, leaving)]
            total = here + there.T
            i, j = np.unravel_index(int(np.argmax(total)), total.shape)
            if total[i, j] > best:
                best = float(total[i, j])
                move = ("pair", leaving[i], coming[j], float(here[i, j]), float(there[j, i]))
    if move is None:
        return 0.0
    kind, u, v, gain_here, gain_there = move
    mask[u], mask[v] = False, True
    values[t] += gain_here
    if kind == "alone":
        chosen[u] -= 1
        chosen[v] += 1
    else:
        masks[partner, v], masks[partner, u] = False, True
        values[partner] += gain_there
    return best


def _pool(utility: SetFunction, masks: np.ndarray) -> StartingPool:
    """The distinct rows of ``masks`` with their share of the rows and their ``f``."""
    distinct, multiplicity = np.unique(masks, axis=0, return_counts=True)
    columns = Columns.from_masks(distinct)
    return StartingPool(columns, utility.values(distinct), multiplicity / masks.shape[0])


def better_start(pool: StartingPool, schedule: StartingPool | None) -> StartingPool:
    """Both pools' columns, weighted by whichever of the two distributions is worth more."""
    if schedule is None:
        return pool
    n = pool.columns.n
    columns = Columns.concatenate([pool.columns, schedule.columns], n)
    values = np.concatenate([pool.values, schedule.values])
    if schedule.value() > pool.value():
        weights = np.concatenate([np.zeros(len(pool.columns)), schedule.probabilities])
    else:
        weights = np.concatenate([pool.probabilities, np.zeros(len(schedule.columns))])
    return StartingPool(columns, values, weights)
