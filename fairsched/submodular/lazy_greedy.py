"""Lazy (accelerated) greedy for ``max f(S)`` subject to ``|S| <= k`` (Minoux 1978).

By submodularity a worker's marginal gain only shrinks as ``S`` grows, so a gain computed
at an earlier step is an upper bound on its gain now. Lazy greedy keeps these bounds and,
at every step, re-evaluates only the workers whose bound could still beat the best fresh
gain (M. Minoux, *Accelerated greedy algorithms for maximizing submodular set functions*,
Optimization Techniques, LNCIS 7, 1978, 234–243). Here the bounds live in a numpy array
rather than a heap, and re-evaluations are batched: the largest stale bounds still at or
above the best fresh gain, 1 (or the state's ``first_batch``), 2, 4, … per vectorised call
(about the workers Minoux's heap would pop before the leader turns up fresh).

Re-evaluations go through an *incremental* state (:func:`incremental_gains`): a utility
with an ``incremental(base)`` method provides its own (:meth:`FacilityLocation.incremental
<fairsched.utilities.facility_location.FacilityLocation.incremental>`: ``O(points)`` per
gain instead of ``O(points·n)`` for all); accuracy, modular and concave-over-modular
utilities get the states of :mod:`fairsched.submodular.incremental` (``O(1)`` or
``O(features)`` per gain); a utility that only implements ``values`` (e.g. a ``python``
callable) gets :class:`ValuesGains`, one set evaluation per re-evaluated worker instead of
``n + 1`` per step. Any other utility with a closed-form ``gains`` (coverage, mixtures, …)
takes plain greedy steps.

**Scale.** Only the ``≈ 2·(k − |base|)`` candidates with the largest gains at the base set
are kept in the arrays a step scans; every other candidate is bounded by the largest of
their initial gains, or more tightly by the state's ``group_bound``, and joins when that
bound comes within the margin of a winner. A step therefore costs ``O(k)`` numpy work
rather than ``O(n)``. A state may also arrange the candidates in ``chains`` along which the
gains never increase (equal queues in Lyapunov's score, ordered by data size): only a
chain's head is a contender, so many equal candidates make one bound, not a many-way tie.
When there are at most :data:`SMALL_PREFIX` chains and the gains cost ``O(1)`` each
(``cheap_gains``), every head is evaluated at every step in one vectorised call, which
costs less Python per step than choosing which bounds to refresh; costly gains (facility
location: ``O(points)`` each) always stay lazy. A state that can give the gains of a sequence
of candidates each after the ones before it are added (``gains_after``: Lyapunov's score on the
accuracy utility) takes many steps at once: the prefix's heads by decreasing fresh gain win in
turn for as long as each one's gain after its predecessors leads every other candidate's bound
by the margin (:meth:`_Prefix._block`), so one vectorised check replaces a Python step per pick
where the queues dominate (floors all distinct at ``n = 100,000``, ``k = 1,000``: 55 picks
per block on average; ``benchmarks/README.md``, "Lyapunov's greedy in blocks of certain
picks"). A state with an ``order_key`` (gains ordered by a fixed key at every
``S``: accuracy's sizes, modular weights) needs no step at all: the greedy set is the
largest keys, ties to the lower index, found by one partition in ``O(n)``.

**Same set as** :func:`fairsched.submodular.greedy.greedy_complete`. The incremental gains equal the
oracle's :meth:`~fairsched.utilities.base.SetFunction.gains` up to rounding (another
summation order), so a step is decided lazily only when the winner leads every other
worker's bound by more than ``rtol`` times the magnitude of the numbers involved; a closer
race (a tie, or a near-tie within rounding; a symmetric similarity makes exact ties) is
settled on the oracle's own numbers, with the same ``argmax`` (lowest index on ties) that
``greedy_complete`` takes: the contenders' ``reference_gains`` when the state has them
(the facility-location state does), else one call of the oracle's ``gains(S)``.
Exact for every monotone submodular utility; for a function that is not submodular the
bounds are not bounds and the sets can differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from fairsched.submodular.incremental import closed_form_state
from fairsched.utilities.base import SetFunction, as_index_set, index_set_to_mask

#: relative margin below which a step is settled by the oracle's own gains (rounding of the
#: incremental gains is ~points·1e-16 relative; 1e-9 leaves six orders of magnitude)
DEFAULT_RTOL = 1e-9
#: most stale bounds re-evaluated in one vectorised call (the batches double up to it): when
#: every gain shrinks alike (a concave function of a sum), many stale bounds stay above the
#: leader, and doubling without a low cap finds them in O(log prefix) calls
MAX_BATCH = 1 << 16
#: at most this many chains of O(1) gains (a state's ``cheap_gains``) are all evaluated at every step
SMALL_PREFIX = 512
#: steps first tried at once where the state has ``gains_after`` (:meth:`_Prefix._block`); the
#: size doubles while every step of a block is certain, up to MAX_BLOCK
BLOCK_START = 32
MAX_BLOCK = 4096
#: a block compares each step's pick with the exact gains of this many heads after it
BLOCK_WINDOW = 8
#: after a block that took no step, plain steps before the next try (doubling while they fail)
MAX_BLOCK_WAIT = 64
#: an extension of the prefix partitions this many chunks' worth of the outside at once: the
#: chunk doubles, so 7 covers three extensions (measured in ``benchmarks/README.md``,
#: *Scheduler.select: candidates refilled at once, picks added at once, the outside partitioned once*)
RESERVE = 7


class IncrementalGains(Protocol):
    """Marginal gains on a set ``S`` that grows by :meth:`add`."""

    def gains(self, candidates: np.ndarray) -> np.ndarray:
        """``f(S ∪ {u}) − f(S)`` for each worker ``u`` of ``candidates`` (int array)."""

    def add(self, u: int) -> None:
        """``S ← S ∪ {u}``."""

    @property
    def error_scale(self) -> float:
        """A magnitude the absolute rounding error of :meth:`gains` is relative to, beyond the gains."""

    # Optional: ``first_batch``, how many stale bounds to re-evaluate in a step's first call
    # (default 1, Minoux's one at a time; more when a call costs more than a gain).
    # Optional: ``reference_gains(candidates)``, the oracle's ``gains(S)[candidates]`` bit for
    # bit (absent or None if the state cannot promise that); lazy greedy then settles near-ties
    # among a few candidates without a full gains(S).


class ValuesGains:
    """Incremental gains of any set function: ``f(S ∪ {u}) − f(S)`` from one :meth:`values` call.

    Costs one set evaluation per candidate, instead of the ``n + 1`` of the default
    :meth:`SetFunction.gains`; a difference of two values loses precision relative to
    ``f(S)``, which is therefore the :attr:`error_scale`.
    """

    def __init__(self, utility: SetFunction, base: np.ndarray):
        self.utility = utility
        self.mask = index_set_to_mask(base, utility.n)
        self.value = float(utility.values(self.mask[None, :])[0]) if base.size else 0.0

    @property
    def error_scale(self) -> float:
        return abs(self.value)

    def gains(self, candidates: np.ndarray) -> np.ndarray:
        candidates = np.asarray(candidates, dtype=np.int64)
        masks = np.repeat(self.mask[None, :], candidates.size, axis=0)
        masks[np.arange(candidates.size), candidates] = True
        return self.utility.values(masks) - self.value

    def add(self, u: int) -> None:
        self.mask[u] = True
        self.value = float(self.utility.values(self.mask[None, :])[0])


def incremental_gains(utility: SetFunction, base: Any = ()) -> IncrementalGains | None:
    """The incremental state lazy greedy re-evaluates bounds with, or ``None`` if laziness cannot help.

    ``utility.incremental(base)`` when the utility has it; the states of
    :mod:`fairsched.submodular.incremental` for accuracy, modular and concave-over-modular
    utilities; :class:`ValuesGains` when the utility only implements ``values`` (its ``gains``
    is the default, ``n + 1`` evaluations per step); ``None`` for any other closed-form
    ``gains`` (all ``n`` gains for about one evaluation).
    """
    base = as_index_set(base, utility.n)
    make = getattr(utility, "incremental", None)
    if callable(make):
        return make(base)
    state = closed_form_state(utility, base)
    if state is not None:
        return state
    if type(utility).gains is SetFunction.gains:
        return ValuesGains(utility, base)
    return None


@dataclass
class GreedyTrace:
    """What a lazy greedy run did: the picks in order, their gains and the work spent."""

    selected: np.ndarray
    order: list[int] = field(default_factory=list)
    gains: list[float] = field(default_factory=list)
    evaluations: int = 0  # single-worker gains computed through the incremental state
    ties: int = 0  # near-ties settled by the state's reference_gains (the oracle's bits, contenders only)
    oracle_calls: int = 0  # steps settled by the oracle's gains(S): near-ties without reference_gains, or no state


StateFactory = Callable[[SetFunction, np.ndarray], "IncrementalGains | None"]


def lazy_greedy(utility: SetFunction, k: int, base: np.ndarray | None = None,
                candidates: np.ndarray | None = None, *, rtol: float = DEFAULT_RTOL,
                incremental: StateFactory = incremental_gains) -> np.ndarray:
    """The set :func:`fairsched.submodular.greedy.greedy_complete` returns, computed lazily (Minoux 1978).

    Same parameters and result as ``greedy_complete`` (sorted ``int64`` array; ``base`` kept,
    ``candidates`` a boolean mask of the workers that may be added); see the module
    docstring for why the sets are identical. ``rtol`` is the relative margin below which a
    step is settled by the oracle's ``gains(S)``; ``incremental(utility, base)`` builds the
    incremental state (default :func:`incremental_gains`; ``None`` means plain greedy steps).
    """
    return _greedy(utility, k, base, candidates, rtol, incremental, record=False).selected


def lazy_greedy_trace(utility: SetFunction, k: int, base: np.ndarray | None = None,
                      candidates: np.ndarray | None = None, *, rtol: float = DEFAULT_RTOL,
                      incremental: StateFactory = incremental_gains) -> GreedyTrace:
    """:func:`lazy_greedy` with the pick order, the gains and the evaluation counts."""
    return _greedy(utility, k, base, candidates, rtol, incremental, record=True)


def _greedy(utility: SetFunction, k: int, base: np.ndarray | None, candidates: np.ndarray | None,
            rtol: float, incremental: StateFactory, record: bool) -> GreedyTrace:
    n = utility.n
    chosen = np.zeros(n, dtype=bool)
    if base is not None:
        chosen[np.asarray(base, dtype=np.int64)] = True
    allowed = np.ones(n, dtype=bool) if candidates is None else np.asarray(candidates, dtype=bool).copy()
    allowed &= ~chosen
    trace = GreedyTrace(selected=np.flatnonzero(chosen))
    size = int(np.count_nonzero(chosen))
    if size >= k or not allowed.any():
        return trace
    state = incremental(utility, trace.selected)
    if state is None:
        _plain_steps(utility, k - size, chosen, allowed, trace)
    elif getattr(state, "order_key", None) is not None:
        _key_order(state, k - size, chosen, allowed, trace, record)
    else:
        steps = k - size
        prefix = _Prefix(utility, state, chosen, allowed, rtol, trace)
        if size == 0 and steps > 1 and not prefix.dense:
            # gains at ∅ (f of singletons) say little about the gains after the first pick,
            # so the prefix is chosen on the gains at the first pick (the chains stay)
            prefix.run(1)
            steps -= 1
            prefix = _Prefix(utility, state, chosen, allowed, rtol, trace, prefix.remaining_chains())
        prefix.run(steps)
    trace.selected = np.flatnonzero(chosen)
    return trace


def _plain_steps(utility: SetFunction, steps: int, chosen: np.ndarray, allowed: np.ndarray,
                 trace: GreedyTrace) -> None:
    """``greedy_complete``'s steps: one ``gains(S)`` per step."""
    for _ in range(steps):
        if not allowed.any():
            return
        gains = np.where(allowed, utility.gains(np.flatnonzero(chosen)), -np.inf)
        best = int(np.argmax(gains))
        trace.oracle_calls += 1
        trace.order.append(best)
        trace.gains.append(float(gains[best]))
        chosen[best] = True
        allowed[best] = False


def _key_order(state: Any, steps: int, chosen: np.ndarray, allowed: np.ndarray, trace: GreedyTrace,
               record: bool) -> None:
    """Greedy when gains are ordered by a fixed key at every ``S``: the largest keys, ties to the lower index.

    ``O(n)`` (a partition) instead of one step per pick; the gains are evaluated only for a trace.
    """
    pool = np.flatnonzero(allowed)
    picks = top_by_key(state.order_key, pool, min(steps, pool.size))
    for u in picks.tolist():
        if record:
            trace.gains.append(float(state.gains(np.array([u]))[0]))
            trace.evaluations += 1
            state.add(u)
        trace.order.append(u)
    chosen[picks] = True
    allowed[picks] = False


def top_by_key(key: np.ndarray, pool: np.ndarray, m: int) -> np.ndarray:
    """The ``m`` workers of ``pool`` (sorted indices) with the largest ``key``, ties to the lower index,
    in that order (largest first); ``O(|pool| + m log m)``."""
    values = key[pool]
    if m < pool.size:
        cut = pool.size - m
        kth = np.partition(values, cut)[cut]
        sure = np.flatnonzero(values > kth)
        tied = np.flatnonzero(values == kth)[: m - sure.size]  # pool is sorted: the lower indices
        keep = np.concatenate((sure, tied))
        pool, values = pool[keep], values[keep]
    return pool[np.lexsort((pool, -values))]


class _Prefix:
    """Minoux's lazy greedy on the candidates with the largest initial gains, and a bound on all the others.

    Candidates are grouped in *chains* when the state provides them (``chains(candidates)``:
    the candidates arranged so that along each chain the gains never increase, at every
    ``S``, ties in index order; e.g. the workers of equal queue in Lyapunov's score, by data
    size): only a chain's head can win, and when it does the next member inherits its bound.
    Without chains every candidate is a chain of its own.

    Only a prefix of about ``2·steps`` chains (the largest gains at the base set) is kept in
    the arrays a step scans; every other chain's head is bounded by the largest of their
    initial gains (submodularity) or, tighter, by the state's ``group_bound``. A step is
    decided inside the prefix only if the winner leads that outside bound by the margin too;
    otherwise the next chunk of chains joins the prefix. A step costs ``O(prefix)``, not ``O(n)``.
    """

    def __init__(self, utility: SetFunction, state: IncrementalGains, chosen: np.ndarray,
                 allowed: np.ndarray, rtol: float, trace: GreedyTrace,
                 chains: tuple[np.ndarray, np.ndarray] | None = None) -> None:
        self.utility, self.state, self.chosen, self.allowed = utility, state, chosen, allowed
        self.rtol, self.trace = rtol, trace
        self.reference = getattr(state, "reference_gains", None)
        self.stepped = False
        pool = np.flatnonzero(allowed)
        arrange = getattr(state, "chains", None)
        if chains is not None:  # the allowed candidates' chains, as the state would arrange them
            self.members, self.start = chains
        elif arrange is None:
            self.members, self.start = pool, np.arange(pool.size + 1)
        else:
            self.members, self.start = arrange(pool)
        self.cursor = self.start[:-1].copy()
        self.rep = self.members[self.cursor]
        gains = state.gains(self.rep)
        trace.evaluations += self.rep.size
        self.pid = np.empty(0, dtype=np.int64)  # the prefix: chain ids, their bounds, freshness
        self.pbound = np.empty(0)
        self.pfresh = np.empty(0, dtype=bool)
        self.oid, self.obound = np.arange(self.rep.size), gains  # the outside
        self._outside_max = float(gains.max(initial=-np.inf))
        self._group: Callable[[], float] | None = None
        # the outside's front holds its _reserve largest bounds; the rest (the far part) is
        # bounded by _far_max and _far_group (see _extend)
        self._reserve, self._far_max = 0, -np.inf
        self._far_group: Callable[[], float] | None = None
        self.chunk = 0
        # a few chains of O(1) gains: evaluating every head each step is one short vectorised
        # call, cheaper than choosing which bounds to refresh; costly gains stay lazy
        self.dense = (bool(getattr(state, "cheap_gains", False)) and self.reference is not None
                      and self.rep.size <= SMALL_PREFIX)

    def run(self, steps: int) -> None:
        if self.dense:
            self._run_dense(steps)
            return
        if steps == 1 and self._single_step():
            return
        self.chunk = max(2 * steps + 32, 256)
        self._extend()
        left = min(steps, int(self.members.size))
        blocks = getattr(self.state, "gains_after", None) is not None
        size, wait, misses = BLOCK_START, 0, 1
        while left > 0:
            if blocks and wait == 0:
                want = min(size, left)
                taken = self._block(want)
                left -= taken
                if taken == want:
                    size, misses = min(2 * size, MAX_BLOCK), 1
                elif taken:
                    size, misses = max(BLOCK_START, 2 * taken), 1
                else:  # the leader is not certain at once: plain steps for a while
                    wait, misses = misses, min(2 * misses, MAX_BLOCK_WAIT)
                continue
            wait = max(0, wait - 1)
            position, gain = self._step()
            self._pick(position, int(self.rep[int(self.pid[position])]), gain, keep_bound=True)
            left -= 1

    def _single_step(self) -> bool:
        """One step from the fresh start, where every chain head's gain is known exactly (the
        outside's bounds): the largest wins if it leads all others by the margin, without a
        prefix or a group bound (a plain step's test, on every head at once). Whether it did."""
        if self.pid.size or self.stepped or self.obound.size == 0:
            return False
        top = int(np.argmax(self.obound))
        lead = float(self.obound[top])
        margin = self.rtol * max(abs(lead), self.state.error_scale)
        if lead == -np.inf or np.count_nonzero(self.obound >= lead - margin) > 1:
            return False
        self.pid, self.pbound, self.pfresh = self.oid[[top]], np.array([lead]), np.array([True])
        self.oid, self.obound = np.delete(self.oid, top), np.delete(self.obound, top)
        self._outside_max = float(self.obound.max(initial=-np.inf))
        self._pick(0, int(self.rep[int(self.pid[0])]), lead, keep_bound=True)
        return True

    def _pick(self, position: int, worker: int, gain: float, keep_bound: bool) -> None:
        """Add the head ``worker`` of the prefix's chain at ``position``, which won with ``gain``; the
        chain's next member inherits the chain's bound (``keep_bound``) or ``gain``."""
        chain = int(self.pid[position])
        self.trace.order.append(worker)
        self.trace.gains.append(gain)
        self.chosen[worker] = True
        self.allowed[worker] = False
        at = int(self.cursor[chain]) + 1
        self.cursor[chain] = at
        if at < self.start[chain + 1]:
            self.rep[chain] = self.members[at]  # its gain is at most the bound
            if not keep_bound:
                self.pbound[position] = gain
        else:
            self.rep[chain] = -1
            self.pbound[position] = -np.inf
        self.state.add(worker)
        self.pfresh.fill(False)
        self.stepped = True

    def _block(self, size: int) -> int:
        """Up to ``size`` steps at once, each one certain; how many were taken.

        The ``size + 1`` prefix chains of largest bound get fresh gains (a valid bound on
        their gains for the rest of the block, by submodularity) and are ordered by them,
        ``b_1 >= b_2 >= …``.  Their heads' gains once the ones before them are added, ``g_j``
        (the state's ``gains_after``), are what plain steps would find if each head won in
        turn, and head ``j`` does win step ``j`` where ``g_j`` leads every other candidate's
        bound by the margin: ``b_{j+1}``, the other prefix chains' bounds and the outside's.
        The run ends before the first head that does not, and after a head whose chain has
        more members (its next member inherits ``g_j`` as a bound, which later heads need not
        beat).  Where it ends because a later head overtook (greedy's order left the fresh
        gains' order), the rest of the ``size + 1`` chains get fresh gains at the set now and a
        new run starts on them, at ``O(size)`` rather than the ``O(prefix)`` of a new block.
        """
        live = np.flatnonzero(self.pbound > -np.inf)
        if live.size == 0:
            return 0
        self._refresh(live[~self.pfresh[live]])
        if live.size > size + 1:
            ranked = live[np.argpartition(-self.pbound[live], size + 1)]
            top, others = ranked[: size + 1], float(self.pbound[ranked[size + 1:]].max())
        else:
            top, others = live, -np.inf
        outside = self._outside_max
        if self._group is not None and outside > -np.inf:
            outside = min(outside, self._group())
        limit = max(others, outside)
        taken = 0
        while True:
            top = top[np.argsort(-self.pbound[top], kind="stable")]
            m, stop = self._certain_run(top, size - taken, limit)
            taken += m
            if stop or m == 0 or taken == size:
                return taken
            # greedy's order left the fresh gains' order (a later head overtook): the rest of
            # these chains, refreshed at the set now, are ordered again, at O(size) not O(prefix)
            top = top[m:]
            self._refresh(top)

    def _certain_run(self, top: np.ndarray, size: int, limit: float) -> tuple[int, bool]:
        """Take the heads of ``top`` (prefix positions, by decreasing fresh bound) in turn while
        each one is certain (:meth:`_block`); how many, and whether to stop there (every one
        was taken, or a taken head's chain has more members).  ``limit`` bounds every candidate
        outside ``top``."""
        take = top[:size]
        heads = self.rep[self.pid[take]]
        self.trace.evaluations += heads.size
        # the next BLOCK_WINDOW heads at each step: their exact gains then (tighter than b_{j+e});
        # the ones after them: their bound b
        bounds = np.append(self.pbound[top], np.full(BLOCK_WINDOW + 1, -np.inf))
        rivals = np.maximum(bounds[BLOCK_WINDOW + 1: BLOCK_WINDOW + 1 + take.size], limit)
        depth = min(BLOCK_WINDOW, top.size - 1)
        if depth > 0:  # row 0: the heads themselves; row e: head j + e at step j; in one call
            reach = np.arange(1, depth + 1)[:, None] + np.arange(take.size)[None, :]
            rows = np.vstack((heads[None, :], self.rep[self.pid[top[np.minimum(reach, top.size - 1)]]]))
            both = self.state.gains_after(rows, heads)
            gains, ahead = both[0], both[1:]
            self.trace.evaluations += int((reach < top.size).sum())
            rivals = np.maximum(rivals, np.where(reach < top.size, ahead, -np.inf).max(axis=0))
        else:
            gains = self.state.gains_after(heads)
        margin = self.rtol * np.maximum(np.abs(gains), self.state.error_scale)
        certain = gains - margin > rivals
        m = take.size if certain.all() else int(np.argmin(certain))
        chains = self.pid[take[:m]]
        longer = self.start[chains + 1] - self.cursor[chains] > 1
        if longer.any():
            m = int(np.argmax(longer)) + 1
        self._pick_many(take[:m], heads[:m], gains[:m])
        return m, m == take.size or bool(longer.any())

    def _pick_many(self, positions: np.ndarray, workers: np.ndarray, gains: np.ndarray) -> None:
        """:meth:`_pick` (``keep_bound=False``) of each head in turn, in one pass: the chains
        at ``positions`` are distinct, so their cursors move independently."""
        add_many = getattr(self.state, "add_many", None)
        if add_many is None:
            for position, worker, gain in zip(positions.tolist(), workers.tolist(), gains.tolist()):
                self._pick(position, worker, gain, keep_bound=False)
            return
        if positions.size == 0:
            return
        chains = self.pid[positions]
        self.trace.order.extend(workers.tolist())
        self.trace.gains.extend(gains.tolist())
        self.chosen[workers] = True
        self.allowed[workers] = False
        at = self.cursor[chains] + 1
        self.cursor[chains] = at
        more = at < self.start[chains + 1]
        self.rep[chains] = np.where(more, self.members[np.minimum(at, self.members.size - 1)], -1)
        self.pbound[positions] = np.where(more, gains, -np.inf)
        add_many(workers)
        self.pfresh.fill(False)
        self.stepped = True

    def remaining_chains(self) -> tuple[np.ndarray, np.ndarray]:
        """The chains without the workers picked so far (members, starts): what the state's
        ``chains`` gives for the candidates still allowed, at ``O(n)`` numpy cost without its sort."""
        keep = self.allowed[self.members]
        chain = np.repeat(np.arange(self.start.size - 1), np.diff(self.start))[keep]
        counts = np.bincount(chain, minlength=self.start.size - 1)
        return self.members[keep], np.concatenate(([0], np.cumsum(counts[counts > 0]))).astype(np.int64)

    def _run_dense(self, steps: int) -> None:
        """Every step evaluates every chain's head; near-ties go to the oracle's bits (``reference_gains``)."""
        live = np.arange(self.rep.size)
        heads = self.rep.copy()  # heads[i] is the head of chain live[i]
        for _ in range(min(steps, int(self.members.size))):
            gains = self.state.gains(heads)
            self.trace.evaluations += heads.size
            top = int(gains.argmax())
            lead = float(gains[top])
            margin = self.rtol * max(abs(lead), self.state.error_scale)
            close = (gains >= lead - margin).nonzero()[0]
            if close.size > 1:
                close = close[np.argsort(heads[close], kind="stable")]
                top = int(close[int(np.argmax(self.reference(heads[close])))])
                self.trace.ties += 1
            chain = int(live[top])
            worker = int(heads[top])
            self.trace.order.append(worker)
            self.trace.gains.append(float(gains[top]))
            self.chosen[worker] = True
            self.allowed[worker] = False
            at = int(self.cursor[chain]) + 1
            self.cursor[chain] = at
            if at < self.start[chain + 1]:
                heads[top] = self.rep[chain] = self.members[at]
            else:
                live, heads = np.delete(live, top), np.delete(heads, top)
            self.state.add(worker)

    # the outside ---------------------------------------------------------------------------
    def _extend(self) -> None:
        """Move the ``chunk`` outside chains with the largest bounds into the prefix.

        The outside is partitioned once for several extensions (:meth:`_split`): its
        ``RESERVE·chunk`` largest bounds at the front, the rest bounded once; an extension
        partitions the reserve alone and bounds what is left of it. The outside's bound is the
        larger of the two parts' (each a valid bound on its members)."""
        size = self.oid.size
        take = min(self.chunk, size)
        if take == 0:
            return
        if self._reserve < take:
            self._split(min(size, RESERVE * take))
        reserve = self._reserve
        order = np.argpartition(-self.obound[:reserve], take - 1) if take < reserve else np.arange(reserve)
        inside = order[:take]
        self.pid = np.concatenate((self.pid, self.oid[inside]))
        self.pbound = np.concatenate((self.pbound, self.obound[inside]))
        self.pfresh = np.concatenate((self.pfresh, np.full(take, not self.stepped)))
        keep = np.concatenate((order[take:], np.arange(reserve, size)))
        self.oid, self.obound = self.oid[keep], self.obound[keep]
        self._reserve = reserve - take
        near = self.obound[:self._reserve]
        self._outside_max = max(float(near.max(initial=-np.inf)), self._far_max)
        group = getattr(self.state, "group_bound", None)
        if group is None or not self.oid.size:
            self._group = None
        elif not near.size:
            self._group = self._far_group
        else:
            near_group, far_group = group(self.rep[self.oid[:self._reserve]]), self._far_group
            self._group = near_group if far_group is None else (lambda: max(near_group(), far_group()))
        self.chunk *= 2

    def _split(self, reserve: int) -> None:
        """The ``reserve`` largest outside bounds to the front of the outside; the rest's
        largest bound and group bound, which hold until the reserve is used up."""
        if reserve < self.oid.size:
            order = np.argpartition(-self.obound, reserve - 1)
            self.oid, self.obound = self.oid[order], self.obound[order]
        self._reserve = reserve
        self._far_max = float(self.obound[reserve:].max(initial=-np.inf))
        group = getattr(self.state, "group_bound", None)
        far = self.oid[reserve:]
        self._far_group = group(self.rep[far]) if group is not None and far.size else None

    def _outside_reaches(self, level: float) -> bool:
        """Whether some outside candidate's gain may be ``>= level`` now (a chain's head bounds it)."""
        if self._outside_max < level:
            return False
        return self._group is None or self._group() >= level

    # a step ----------------------------------------------------------------------------------
    def _step(self) -> tuple[int, float]:
        """The prefix position of the chain whose head wins this step, and its gain."""
        batch = getattr(self.state, "first_batch", 1)
        best_fresh = -np.inf
        while True:
            bound, fresh = self.pbound, self.pfresh
            top = int(bound.argmax()) if bound.size else -1
            lead = float(bound[top]) if top >= 0 else -np.inf
            if lead == -np.inf:  # the prefix is used up
                self._extend()
                continue
            if not fresh[top]:
                if batch == 1:  # the largest bound is stale: it is the one to refresh
                    best_fresh = max(best_fresh, self._refresh(np.array([top])))
                    batch = 2
                    continue
                stale = (~fresh & (bound >= best_fresh) & (bound > -np.inf)).nonzero()[0]
                if stale.size > batch:
                    stale = stale[np.argpartition(bound[stale], stale.size - batch)[stale.size - batch:]]
                best_fresh = max(best_fresh, self._refresh(stale))
                batch = min(2 * batch, MAX_BATCH)
                continue
            margin = self.rtol * max(abs(lead), self.state.error_scale)
            if self._outside_reaches(lead - margin):
                self._extend()
                continue
            close = (bound >= lead - margin).nonzero()[0]
            if close.size == 1:
                return top, lead
            stale = close[~fresh[close]]
            if stale.size:
                self._refresh(stale)
                continue
            return self._tie(close)

    def _refresh(self, positions: np.ndarray) -> float:
        values = self.state.gains(self.rep[self.pid[positions]])
        self.pbound[positions] = values
        self.pfresh[positions] = True
        self.trace.evaluations += positions.size
        return float(values.max()) if values.size else -np.inf

    def _tie(self, close: np.ndarray) -> tuple[int, float]:
        """A near-tie among fresh gains: decided on the oracle's own numbers, lowest index on ties."""
        heads = self.rep[self.pid[close]]
        close = close[np.argsort(heads, kind="stable")]
        if self.reference is not None:
            values = self.reference(self.rep[self.pid[close]])
            self.trace.ties += 1
            best = int(np.argmax(values))
            return int(close[best]), float(self.pbound[close[best]])
        gains = np.where(self.allowed, self.utility.gains(np.flatnonzero(self.chosen)), -np.inf)
        self.trace.oracle_calls += 1
        winner = int(np.argmax(gains))
        # every head's gain is now known exactly: the bounds become fresh values
        heads = self.rep[self.pid]
        self.pbound = np.where(heads >= 0, gains[np.maximum(heads, 0)], -np.inf)
        self.pfresh = heads >= 0
        self.obound = gains[self.rep[self.oid]]
        self._outside_max = float(self.obound.max(initial=-np.inf))
        self._reserve = 0  # the outside's bounds changed: the next extension splits it again
        position = np.flatnonzero(self.rep[self.pid] == winner)
        if position.size == 0:
            outside = np.flatnonzero(self.rep[self.oid] == winner)
            if outside.size == 0:
                # a chain member beat its head: only rounding can do that (the chain's
                # promise holds in exact arithmetic), and the head's gain is as large
                chain = int(np.searchsorted(self.start, np.flatnonzero(self.members == winner)[0], "right") - 1)
                inside = np.flatnonzero(self.pid == chain)
                if inside.size:
                    return int(inside[0]), float(gains[self.rep[chain]])
                outside = np.flatnonzero(self.oid == chain)
            j = int(outside[0])
            self.pid = np.append(self.pid, self.oid[j])
            self.pbound = np.append(self.pbound, self.obound[j])
            self.pfresh = np.append(self.pfresh, True)
            self.oid, self.obound = np.delete(self.oid, j), np.delete(self.obound, j)
            self._outside_max = float(self.obound.max(initial=-np.inf))
            position = np.array([self.pid.size - 1])
        return int(position[0]), float(self.pbound[position[0]])
