"""Playing a planned set under availability: keep its available members, refill the others by urgency.

The LP policies plan a set ``S`` without looking at availability. In a round where only
the workers of ``A`` can be asked, :func:`refill` keeps ``S ∩ A`` and replaces each missing
member by the most urgent available worker outside ``S``. Urgency is FairDG's earliest
deadline (Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round
Submodular Maximization Approach", 2021, Algorithm 3, with the deadline ranking of
``fairsched.policies.fairdg``): before round ``t`` the debt of ``u`` is
``D_u = r_u·t − N_u(t−1)`` and its floor breaks after ``(1 − D_u)/r_u`` more rounds without
selection; smaller first, ties to the larger debt, then the lower index; workers without a
floor (``r_u = 0``) come last, fewest selections first.

:func:`serve_urgent` is the safety net of a randomised plan: every available worker whose
debt reached its threshold is put in the set (the most urgent ``k`` of them if there are
more), the plan's own members filling the rest.

:func:`refill_many` refills many candidate sets in one pass, for a policy that judges them all.
"""

from __future__ import annotations

import numpy as np

from fairsched.policies.base import DEBT_TOLERANCE
from fairsched.solvers.selection import kth_smallest


def urgency_keys(r: np.ndarray, debt: np.ndarray) -> np.ndarray:
    """``(1 − D_u)/r_u``, ``inf`` for ``r_u = 0``: the rounds before ``u``'s floor breaks."""
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        return np.where(r > 0, (1.0 - debt) / np.where(r > 0, r, 1.0), np.inf)


def most_urgent(pool: np.ndarray, keys: np.ndarray, debt: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` workers of ``pool`` (indices) by (key, −debt, index), in that order.

    Each tie level is cut, not sorted: :func:`~fairsched.solvers.selection.kth_smallest`
    finds the ``count``-th key, the workers tied at it are cut the same way by debt, those
    tied on both by index, and only the ``count`` chosen are sorted. With equal floors and counts tens of thousands of
    workers may share a key; sorting them all took most of a round at ``n = 100,000``.
    """
    if count <= 0 or pool.size == 0:
        return pool[:0]
    if pool.size > count:
        pool = first_by(pool, (keys[pool], -debt[pool], pool), count)
    order = np.lexsort((pool, -debt[pool], keys[pool]))
    return pool[order[:count]]


def first_by(pool: np.ndarray, ranks: tuple[np.ndarray, ...], count: int) -> np.ndarray:
    """The ``count`` workers of ``pool`` first by the tuple ``ranks`` (compared in order), unordered.

    ``ranks`` are arrays aligned with ``pool``; the last must have no ties (the index). Each
    level is cut by :func:`~fairsched.solvers.selection.kth_smallest`, and only the workers
    tied at its cut go on to the next.
    """
    rank, rest = ranks[0], ranks[1:]
    if pool.size <= count:
        return pool
    kth = kth_smallest(rank, count - 1)
    below = rank < kth
    tied = rank == kth
    chosen = pool[below]
    need = count - chosen.size
    if not rest:  # the last rank (the index) has no ties
        return np.concatenate([chosen, pool[tied][:need]])
    return np.concatenate([chosen, first_by(pool[tied], tuple(r[tied] for r in rest), need)])


def refill(planned: np.ndarray, available: np.ndarray, ranked: np.ndarray) -> np.ndarray:
    """``planned`` (sorted, non-empty) ``∩ available`` topped up to ``|planned|`` by the first of ``ranked`` outside it (sorted).

    ``ranked`` is :func:`most_urgent` of the available workers, at least ``|planned|`` of them
    (or all): then enough of them lie outside ``planned``. Computed once per round, it serves
    every candidate set in ``O(k)``.
    """
    present = available[planned]
    if present.all():
        return planned
    kept = planned[present]
    # planned is sorted: membership by binary search, O(k log k) without a sort of its own
    where = np.minimum(np.searchsorted(planned, ranked), planned.size - 1)
    extra = ranked[planned[where] != ranked][:planned.size - kept.size]
    return np.sort(np.concatenate([kept, extra]))


def flattened(sets: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """``sets`` as one array of members and the index of the set each belongs to."""
    sizes = np.fromiter((S.size for S in sets), dtype=np.int64, count=len(sets))
    members = np.concatenate(sets) if sets else np.zeros(0, dtype=np.int64)
    return members, np.repeat(np.arange(len(sets)), sizes)


def refill_many(sets: list[np.ndarray], available: np.ndarray | None,
                ranked: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """:func:`refill` of every set of ``sets`` at once, flat: ``(members, owner)``.

    ``members[owner == c]`` are the members of ``refill(sets[c], available, ranked)`` (in no
    particular order); with ``available`` or ``ranked`` ``None`` (everyone available) the sets
    as they are. One pass over all the members instead of one call per set: the ranked workers
    each set holds are marked in a ``len(sets) × |ranked|`` table, and each set takes the first
    unmarked ones it needs (a running count along the row), ``O(Σ|S| + len(sets)·|ranked|)``.
    """
    members, owner = flattened(sets)
    if available is None or ranked is None:
        return members, owner
    present = available[members]
    missing = np.bincount(owner[~present], minlength=len(sets))
    if not missing.any():
        return members, owner
    # rank of each member in ranked, ranked.size for members outside it (a spare column)
    rank_of = np.full(available.size, ranked.size, dtype=np.int64)
    rank_of[ranked] = np.arange(ranked.size)
    held = np.zeros((len(sets), ranked.size + 1), dtype=bool)
    held[owner, rank_of[members]] = True
    free = ~held[:, :-1]
    rows, cols = np.nonzero(free & (np.cumsum(free, axis=1) <= missing[:, None]))
    return np.concatenate([members[present], ranked[cols]]), np.concatenate([owner[present], rows])


def serve_urgent(chosen: np.ndarray, urgent: np.ndarray, keys: np.ndarray, debt: np.ndarray, k: int) -> np.ndarray:
    """``chosen`` with every ``urgent`` worker (sorted indices) put in, at most ``k`` in all (sorted).

    More than ``k`` urgent: the ``k`` most urgent. Otherwise all of them and the most urgent
    ``k − |urgent|`` of ``chosen``'s other members.
    """
    if urgent.size == 0:
        return chosen
    if urgent.size >= k:
        return np.sort(most_urgent(urgent, keys, debt, k))
    rest = np.setdiff1d(chosen, urgent, assume_unique=True)
    rest = most_urgent(rest, keys, debt, k - urgent.size)
    return np.sort(np.concatenate([urgent, rest]))


def behind_by(r: np.ndarray, debt: np.ndarray, t: int, deviations: float) -> np.ndarray:
    """Mask of ``D_u >= 1 + deviations·√(t·r_u(1 − r_u))``: more than ``deviations`` standard
    deviations of a Binomial(``t``, ``r_u``) count behind, and at least one selection."""
    threshold = 1.0 + deviations * np.sqrt(t * r * (1.0 - r))
    return (r > 0) & (debt >= threshold - DEBT_TOLERANCE)
