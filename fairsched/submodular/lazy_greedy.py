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
gain instead of ``O(points·n)`` for all); a utility that only implements ``values`` (e.g. a
``python`` callable) gets :class:`ValuesGains`, one set evaluation per re-evaluated worker
instead of ``n + 1`` per step. A utility with a closed-form ``gains`` and no incremental
state (coverage, accuracy, …) computes all gains in about the time of one set evaluation,
so laziness saves nothing there and every step is a plain greedy step.

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

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

import numpy as np

from fairsched.utilities.base import SetFunction, as_index_set, index_set_to_mask

#: relative margin below which a step is settled by the oracle's own gains (rounding of the
#: incremental gains is ~points·1e-16 relative; 1e-9 leaves six orders of magnitude)
DEFAULT_RTOL = 1e-9
#: most stale bounds re-evaluated in one vectorised call (the batches double up to it)
MAX_BATCH = 64


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

    ``utility.incremental(base)`` when the utility has it; :class:`ValuesGains` when it only
    implements ``values`` (its ``gains`` is the default, ``n + 1`` evaluations per step);
    ``None`` when it has a closed-form ``gains`` (all ``n`` gains for about one evaluation).
    """
    base = as_index_set(base, utility.n)
    make = getattr(utility, "incremental", None)
    if callable(make):
        return make(base)
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
    return lazy_greedy_trace(utility, k, base, candidates, rtol=rtol, incremental=incremental).selected


def lazy_greedy_trace(utility: SetFunction, k: int, base: np.ndarray | None = None,
                      candidates: np.ndarray | None = None, *, rtol: float = DEFAULT_RTOL,
                      incremental: StateFactory = incremental_gains) -> GreedyTrace:
    """:func:`lazy_greedy` with the pick order, the gains and the evaluation counts."""
    n = utility.n
    chosen = np.zeros(n, dtype=bool)
    if base is not None:
        chosen[np.asarray(base, dtype=np.int64)] = True
    allowed = np.ones(n, dtype=bool) if candidates is None else np.asarray(candidates, dtype=bool).copy()
    allowed &= ~chosen
    trace = GreedyTrace(selected=np.flatnonzero(chosen))
    size = int(chosen.sum())
    if size >= k or not allowed.any():
        return trace
    state = incremental(utility, np.flatnonzero(chosen))
    reference = getattr(state, "reference_gains", None)
    bound = np.full(n, -np.inf)
    fresh = np.zeros(n, dtype=bool)  # bound is the gain at the current S, not just an upper bound
    if state is not None:
        pool = np.flatnonzero(allowed)
        bound[pool] = state.gains(pool)
        fresh[pool] = True
        trace.evaluations += pool.size
    while size < k and allowed.any():
        settled = None if state is None else _settle(bound, fresh, state, rtol, trace)
        if isinstance(settled, int):
            best = settled
        elif settled is not None and reference is not None:
            # a near-tie among fresh gains: the oracle's own bits for the contenders alone
            best = int(settled[np.argmax(reference(settled))])
            trace.ties += 1
        else:  # a near-tie, or no incremental state: decide exactly as greedy_complete does
            bound = np.where(allowed, utility.gains(np.flatnonzero(chosen)), -np.inf)
            best = int(np.argmax(bound))
            trace.oracle_calls += 1
        trace.order.append(best)
        trace.gains.append(float(bound[best]))
        chosen[best] = True
        allowed[best] = False
        bound[best] = -np.inf
        if state is not None:
            state.add(best)
        fresh[:] = False
        size += 1
    trace.selected = np.flatnonzero(chosen)
    return trace


def _settle(bound: np.ndarray, fresh: np.ndarray, state: IncrementalGains, rtol: float,
            trace: GreedyTrace) -> int | np.ndarray:
    """The worker whose fresh gain beats every other bound by a clear margin, or the near-tied contenders.

    Minoux's rule, batched: re-evaluate the largest stale bounds (``state.first_batch``,
    default 1, then twice as many per vectorised call up to :data:`MAX_BATCH`, among those
    still at or above the best fresh gain) until the leader is fresh and every bound within
    the margin of it is fresh too. On a near-tie returns the sorted indices of the leader
    and every worker within the margin (all fresh); every other worker's gain is then
    certainly smaller.
    """
    batch = getattr(state, "first_batch", 1)
    best_fresh = -np.inf
    while True:
        top = int(np.argmax(bound))
        if not fresh[top]:
            stale = np.flatnonzero(~fresh & (bound >= best_fresh) & (bound > -np.inf))  # -inf: not allowed
            if stale.size > batch:
                stale = stale[np.argpartition(bound[stale], stale.size - batch)[stale.size - batch:]]
            best_fresh = max(best_fresh, _refresh(bound, fresh, state, stale, trace))
            batch = min(2 * batch, MAX_BATCH)
            continue
        lead = bound[top]
        margin = rtol * max(abs(lead), state.error_scale)
        close = np.flatnonzero(bound >= lead - margin)
        if close.size == 1:
            return top
        stale = close[~fresh[close]]
        if stale.size == 0:
            return close
        _refresh(bound, fresh, state, stale, trace)


def _refresh(bound: np.ndarray, fresh: np.ndarray, state: IncrementalGains, workers: np.ndarray,
             trace: GreedyTrace) -> float:
    """Re-evaluate ``workers`` at the current set; returns the largest of their gains."""
    values = state.gains(workers)
    bound[workers] = values
    fresh[workers] = True
    trace.evaluations += workers.size
    return float(values.max(initial=-np.inf))
