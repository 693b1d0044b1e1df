"""Incremental marginal gains for the utilities whose ``gains`` is closed-form (``docs/mathematics.md`` §4).

Lazy greedy (:mod:`fairsched.submodular.lazy_greedy`) re-evaluates a few bounds per step on
a set ``S`` that grows by one worker at a time. A closed-form ``gains(S)`` costs ``O(n)``
for all workers; these states cost ``O(1)`` (accuracy, modular) or ``O(features)``
(concave over modular) per candidate by keeping the sums ``S`` determines:

- accuracy ``f(S) = g(Σ_{u∈S} L_u)``: the total ``T = L(S)``; ``gain_u = g(T + L_u) − g(T)``
  (``g(L_u)`` from ``∅``, where ``f(∅) = 0``);
- modular ``f(S) = Σ_{u∈S} w_u``: ``gain_u = w_u``;
- concave over modular ``f(S) = Σ_j φ(Σ_{u∈S} F_{ju})``: the feature sums ``B_j``;
  ``gain_u = Σ_j φ(B_j + F_{ju}) − Σ_j φ(B_j)``.

Optional members beyond the :class:`~fairsched.submodular.lazy_greedy.IncrementalGains`
protocol, used by lazy greedy when present:

- ``order_key``: per-worker keys such that, at every ``S``, a worker with a larger key has a
  gain at least as large (exact arithmetic). For ``f = g(L(S))`` with ``g`` increasing this
  is ``L`` (gains ``g(T + L_u) − g(T)`` grow with ``L_u``), for modular it is ``w``: greedy
  then takes the candidates in key order (ties to the lower index) without evaluating gains.
- ``group_bound(candidates)``: a function returning an upper bound on the largest gain among
  a fixed group of candidates at the current ``S`` in ``O(1)`` (for accuracy: the gain of the
  group's largest ``L_u``), so a lazy greedy run need not re-evaluate workers it never picks;
  ``group_bounds(candidates, label, count)`` the same for several groups at once (group ``g``
  is ``candidates[label == g]``, every one non-empty; one bound per group, from one
  unbuffered ``np.maximum.at`` pass, not a sort into groups).
- ``chains(candidates)``: the candidates arranged in chains (``(members, starts)``, CSR) along
  which the gains never increase at any ``S``, ties in index order: only a chain's head can win.
- ``cheap_gains``: ``True`` when a gain costs ``O(1)``, so lazy greedy may evaluate a few
  hundred chain heads at every step rather than choose which to refresh.
- ``reference_gains(candidates)``: the oracle's ``gains(S)[candidates]`` bit for bit, to settle
  near-ties exactly as :func:`fairsched.submodular.greedy.greedy_complete` does.
- ``gains_after(candidates, added)`` and ``add_many(workers)``: the gains of a sequence of
  candidates each after the ones before it, and adding a sequence at once, the state then
  as after ``add`` of each in turn; lazy greedy takes runs of certain picks with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from fairsched.utilities.accuracy import AccuracyUtility
from fairsched.utilities.base import SetFunction
from fairsched.utilities.concave_modular import ConcaveModular
from fairsched.utilities.modular import Modular


class _Members:
    """The members of ``S`` in insertion order, sorted on demand (``gains(S)`` sums in sorted order)."""

    def __init__(self, base: np.ndarray, capacity: int) -> None:
        self._items = np.empty(max(capacity, base.size, 1), dtype=np.int64)
        self._items[:base.size] = base
        self.size = int(base.size)

    def add(self, u: int) -> None:
        if self.size == self._items.size:
            self._items = np.concatenate((self._items, np.empty(self._items.size, dtype=np.int64)))
        self._items[self.size] = u
        self.size += 1

    def extend(self, members: np.ndarray) -> None:
        while self.size + members.size > self._items.size:
            self._items = np.concatenate((self._items, np.empty(self._items.size, dtype=np.int64)))
        self._items[self.size:self.size + members.size] = members
        self.size += int(members.size)

    def sorted(self) -> np.ndarray:
        return np.sort(self._items[:self.size])


class AccuracyGains:
    """Gains of ``f(S) = g(L(S))`` (:class:`AccuracyUtility`) on a growing ``S``: ``O(1)`` per candidate.

    ``T = L(S)`` is kept by addition; :meth:`gains` is ``g(T + L_u) − g(T)``. The rounding of
    ``T`` (another summation order than ``gains(S)``) is below ``g(T)``'s last bits, so
    :attr:`error_scale` is ``|g(T)|``; :meth:`reference_gains` recomputes ``T`` as ``gains(S)`` does.
    """

    cheap_gains = True

    def __init__(self, utility: AccuracyUtility, base: np.ndarray) -> None:
        self.utility = utility
        self.sizes = utility.sizes
        self.order_key = utility.sizes
        self._members = _Members(base, 64)
        self.total = float(self.sizes[base].sum()) if base.size else 0.0
        self._at = self._curve(np.float64(self.total)) if base.size else 0.0
        # every value g(x), x >= the smallest size, is at most this in magnitude
        self.error_scale = abs(1.0 - utility.a) + utility.b * max(1.0, float(self.sizes.min()) ** utility.c)

    def _curve(self, total: Any) -> Any:
        return self.utility.curve(total)  # the one definition of the learning curve

    def gains(self, candidates: np.ndarray) -> np.ndarray:
        return self._gains_of_sizes(self.sizes[candidates])

    def _gains_of_sizes(self, sizes: np.ndarray) -> np.ndarray:
        if self._members.size == 0:
            return self._curve(sizes)
        return self._curve(self.total + sizes) - self._at

    def gains_after(self, candidates: np.ndarray, added: np.ndarray | None = None) -> np.ndarray:
        """The gain of ``candidates[..., j]`` once ``added[:j]`` (default ``candidates[:j]``, for a
        1-D ``candidates``) are added in that order: ``g(T_j + L) − g(T_j)``, ``T_j`` summed as
        :meth:`add` sums it; rows of a 2-D ``candidates`` share the ``T_j``."""
        candidates = np.asarray(candidates, dtype=np.int64)
        sizes = self.sizes[candidates]
        m = candidates.shape[-1]
        steps = sizes if added is None else self.sizes[np.asarray(added, dtype=np.int64)]
        totals = np.cumsum(np.concatenate(([self.total], steps[: max(m - 1, 0)])))
        first = 1 if self._members.size == 0 and m else 0  # from ∅: g(L), as gains computes it
        out = np.empty(sizes.shape)
        out[..., :first] = self._curve(sizes[..., :first])
        out[..., first:] = self._curve(totals[first:] + sizes[..., first:]) - self._curve(totals[first:])
        return out

    def reference_gains(self, candidates: np.ndarray) -> np.ndarray:
        """``AccuracyUtility.gains(S)[candidates]`` bit for bit (elementwise, with ``T`` summed as it sums it)."""
        sizes = self.sizes[np.asarray(candidates, dtype=np.int64)]
        if self._members.size == 0:
            return self._curve(sizes)
        total = float(self.sizes[self._members.sorted()].sum())
        return self._curve(total + sizes) - self._curve(np.float64(total))

    def group_bounds(self, candidates: np.ndarray, label: np.ndarray, count: int) -> Callable[[], np.ndarray]:
        """Per group, the gain of its largest size: by :attr:`order_key` no member gains more."""
        largest = _group_max(self.sizes[candidates], label, count)
        return lambda: self._gains_of_sizes(largest)

    def group_bound(self, candidates: np.ndarray) -> Callable[[], float]:
        return _single(self.group_bounds, candidates)

    def add(self, u: int) -> None:
        self._members.add(int(u))
        self.total += float(self.sizes[u])
        self._at = self._curve(np.float64(self.total))

    def add_many(self, workers: np.ndarray) -> None:
        """:meth:`add` of each of ``workers`` in turn: ``T`` summed in the same order, bit for bit
        (``np.cumsum`` adds one term at a time, unlike the pairwise ``np.sum``)."""
        workers = np.asarray(workers, dtype=np.int64)
        if workers.size == 0:
            return
        self._members.extend(workers)
        self.total = float(np.cumsum(np.concatenate(([self.total], self.sizes[workers])))[-1])
        self._at = self._curve(np.float64(self.total))


class ModularGains:
    """Gains of a modular utility: the weights themselves, whatever ``S``."""

    error_scale = 0.0
    cheap_gains = True

    def __init__(self, utility: Modular, base: np.ndarray) -> None:
        self.weights = utility.weights
        self.order_key = utility.weights

    def gains(self, candidates: np.ndarray) -> np.ndarray:
        return self.weights[np.asarray(candidates, dtype=np.int64)]

    reference_gains = gains

    def group_bounds(self, candidates: np.ndarray, label: np.ndarray, count: int) -> Callable[[], np.ndarray]:
        best = _group_max(self.weights[candidates], label, count)
        return lambda: best

    def group_bound(self, candidates: np.ndarray) -> Callable[[], float]:
        return _single(self.group_bounds, candidates)

    def add(self, u: int) -> None:
        pass


class ConcaveModularGains:
    """Gains of ``f(S) = Σ_j φ(B_j(S))`` (:class:`ConcaveModular`): ``O(features)`` per candidate."""

    def __init__(self, utility: ConcaveModular, base: np.ndarray) -> None:
        self.utility = utility
        self.features = utility.features
        self._phi = utility._phi
        self._members = _Members(base, 64)
        self.sums = self.features[:, base].sum(axis=1) if base.size else np.zeros(self.features.shape[0])
        self._at = float(self._phi(self.sums).sum())

    @property
    def error_scale(self) -> float:
        return abs(self._at)

    def gains(self, candidates: np.ndarray) -> np.ndarray:
        block = self.features[:, np.asarray(candidates, dtype=np.int64)]
        return self._phi(self.sums[:, None] + block).sum(axis=0) - self._at

    def reference_gains(self, candidates: np.ndarray) -> np.ndarray:
        """``ConcaveModular.gains(S)[candidates]`` bit for bit.

        ``gains`` sums each column of a C-ordered ``(features, n)`` array over the rows in
        order, as numpy does for any number of columns but one (a lone column is summed
        pairwise), so a single candidate is doubled.
        """
        candidates = np.asarray(candidates, dtype=np.int64)
        columns = candidates if candidates.size >= 2 else np.repeat(candidates, 2)
        members = self._members.sorted()
        base = self.features[:, members].sum(axis=1)
        block = np.ascontiguousarray(self.features[:, columns])
        out = self._phi(base[:, None] + block).sum(axis=0) - self._phi(base).sum()
        return out[:candidates.size]

    def group_bounds(self, candidates: np.ndarray, label: np.ndarray, count: int) -> Callable[[], np.ndarray]:
        """Per group ``G``, ``Σ_j φ(B_j + max_{u∈G} F_{ju}) − φ(B_j)``: ``φ`` is increasing, so no member gains more."""
        top = _group_max(self.features[:, candidates].T, label, count).T
        return lambda: (self._phi(self.sums[:, None] + top) - self._phi(self.sums)[:, None]).sum(axis=0)

    def group_bound(self, candidates: np.ndarray) -> Callable[[], float]:
        return _single(self.group_bounds, candidates)

    def add(self, u: int) -> None:
        self._members.add(int(u))
        self.sums = self.sums + self.features[:, u]
        self._at = float(self._phi(self.sums).sum())


def _group_max(values: np.ndarray, label: np.ndarray, count: int) -> np.ndarray:
    """``max(values[label == g])`` for ``g < count`` (along the first axis; ``−inf`` where empty)."""
    out = np.full((count,) + values.shape[1:], -np.inf)
    np.maximum.at(out, label, values)
    return out


def _single(group_bounds: Callable[[np.ndarray, np.ndarray, int], Callable[[], np.ndarray]],
            candidates: np.ndarray) -> Callable[[], float]:
    """``group_bound`` of one group from ``group_bounds``."""
    if candidates.size == 0:
        return lambda: -np.inf
    bounds = group_bounds(candidates, np.zeros(candidates.size, dtype=np.intp), 1)
    return lambda: float(bounds()[0])


_STATES: dict[type, Callable[[Any, np.ndarray], Any]] = {
    AccuracyUtility: AccuracyGains,
    Modular: ModularGains,
    ConcaveModular: ConcaveModularGains,
}


def closed_form_state(utility: SetFunction, base: np.ndarray) -> Any | None:
    """The incremental state of a utility of exactly one of the classes above, else ``None``.

    Subclasses are excluded: they may override ``gains`` with something else.
    """
    make = _STATES.get(type(utility))
    if make is None or (isinstance(utility, ConcaveModular) and utility.features.flags.f_contiguous
                        and not utility.features.flags.c_contiguous):
        return None
    return make(utility, base)
