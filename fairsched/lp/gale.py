"""Gale's condition: when a distribution over sets, known only by how many members of each group
of interchangeable workers each set holds, can be made to meet every member's own floor, and
the distribution that does it.

**The condition.**  A group ``G`` of workers of equal size (interchangeable in ``f = g(L(S))``)
and a distribution ``p`` over sets ``S`` holding ``c_S = |S ∩ G|`` of them.  Choosing *which*
members each set holds (splitting ``p_S`` where needed) does not change ``f``; the members can
receive marginals ``x_u >= r_u`` exactly when, for every ``j``::

    Σ_S p_S min(c_S, j)  >=  F_G(j) = the sum of the j largest floors in G

(Gale's theorem on bipartite supplies and demands, "A theorem on flows in networks", *Pacific
J. Math.* 7, 1957: the ``j`` members with the largest floors can be in at most
``E[min(C, j)]`` of the sets' places).  Each such inequality holds for every distribution over
actual sets that meets ``r``, so adding it to the LP over groups of equal size
(:mod:`fairsched.lp.size_groups`) keeps that LP a relaxation; once all hold, its solution is
worth its value as a real distribution.

**The construction** (:func:`realise`).  In group ``G`` lay the sets out on ``[0, 1)`` by
decreasing count, so that place ``t`` (the ``t``-th member of a set) exists on ``[0, a_t)``,
``a_t = P(C >= t)``, a staircase; the members are jobs of length ``x_u`` (the most even
``x >= r`` with ``Σ x = E[C]``: ``x_u = max(r_u, τ)``) to be scheduled preemptively on these
places without running on two places at once (a set holds a member once).  Jobs are taken by
decreasing length; a job no longer than the shortest place takes its end; otherwise it takes
the whole of the longest place ``t + 1`` it covers and the end of place ``t``, so that the
free parts stay prefixes ``[0, ℓ)`` sorted by length (Schmidt, "Scheduling on semi-identical
processors", *Z. Oper. Res.* 28, 1984, for staircases of machine availability).  Each job
makes at most one break, so the distribution has at most ``Σ_G |G|`` more sets than ``p``.
A group whose inequality the LP's solution violates within round-off (at most :data:`REPAIR`,
its solver's tolerance) has its jobs trimmed to fit first.  The result is checked (every set
keeps its size, every floor is met to 1e-9); a failure returns ``None``, never a wrong
distribution.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from fairsched.lp.floor_groups import group_counts
from fairsched.solvers.columns import Columns

#: slack below a floor, or below a cut's right-hand side, that counts as met
TOLERANCE = 1e-10
#: a group's Gale inequality violated by at most this much is repaired in :func:`realise` (the
#: jobs' lengths moved to later jobs, the floors then checked to 1e-9): the LP solver meets a
#: row it knows only to its feasibility tolerance, on its scaled model.  A two-class draw
#: (``n = 3,000``, ``k = 50``) lost the phase's distribution to a violation of 1.15e-10
REPAIR = 1e-9


def ranked_members(groups: np.ndarray, r: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(order, starts, rank)``: the workers grouped, each group by decreasing floor
    (``order[starts[g]:starts[g + 1]]``), and each worker's rank in its group (1 for the
    largest floor)."""
    groups = np.asarray(groups, dtype=np.int64)
    order = np.lexsort((-np.asarray(r, dtype=float), groups))
    sizes = np.bincount(groups)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    rank = np.empty(groups.size, dtype=np.int64)
    rank[order] = np.arange(groups.size) - starts[groups[order]] + 1
    return order, starts, rank


def at_least(counts: np.ndarray, weights: np.ndarray, size: int | None = None) -> np.ndarray:
    """``P(C >= t)`` for ``t = 1..size`` (default: the largest count), ``C`` the count
    distributed as ``weights``."""
    size = int(counts.max(initial=0)) if size is None else size
    mass = np.bincount(np.minimum(counts, size), weights=weights, minlength=size + 1)
    return np.cumsum(mass[::-1])[::-1][1:]


def capacities(counts: np.ndarray, weights: np.ndarray, size: int) -> np.ndarray:
    """``E[min(C, j)]`` for ``j = 1..size``, ``C`` the count distributed as ``weights``."""
    return np.cumsum(at_least(counts, weights, size))


def violated_cuts(counts: sp.csc_array, weights: np.ndarray, groups: np.ndarray, r: np.ndarray,
                  known: set[tuple[int, int]],
                  ranked: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None) -> list[tuple[int, int, float]]:
    """Gale's inequalities ``(g, j, F_g(j))`` not yet in ``known`` that ``weights`` (over the
    sets whose group counts are the rows of ``counts``) violates by more than
    :data:`TOLERANCE`, in groups of two or more (``ranked``: :func:`ranked_members` of
    ``groups`` and ``r``, when the caller has it)."""
    order, starts, _ = ranked_members(groups, r) if ranked is None else ranked
    found = []
    sizes = np.diff(starts)
    for g in np.flatnonzero(sizes > 1):
        lo, hi = counts.indptr[g], counts.indptr[g + 1]
        size = int(sizes[g])
        capacity = capacities(counts.data[lo:hi].astype(np.int64), weights[counts.indices[lo:hi]], size)
        floors = np.cumsum(r[order[starts[g]:starts[g + 1]]])
        for j in np.flatnonzero(capacity < floors - TOLERANCE) + 1:
            if (int(g), int(j)) not in known:
                found.append((int(g), int(j), float(floors[j - 1])))
    return found


def most_even(r: np.ndarray, total: float) -> np.ndarray:
    """The most even ``x >= r`` with ``Σ x = total`` (``>= Σ r``): ``x_u = max(r_u, τ)``.

    With the floors sorted, raising the ``i`` smallest to ``τ_i = (total − Σ of the others)/i``
    is right for the first ``i`` where ``τ_i`` does not pass the next floor (``O(n log n)``)."""
    r = np.asarray(r, dtype=float)
    if total <= r.sum():
        return r.copy()
    ordered = np.sort(r)
    others = np.concatenate([np.cumsum(ordered[::-1])[::-1][1:], [0.0]])  # Σ ordered[i:], i = 1..n
    level = (total - others) / np.arange(1, r.size + 1)
    fits = level <= np.append(ordered[1:], np.inf)
    return np.maximum(r, level[int(np.argmax(fits))])


def _fitted(jobs: np.ndarray, lengths: np.ndarray) -> np.ndarray | None:
    """``jobs`` (non-increasing) meeting Gale's condition on the places ``lengths``: no ``j``
    longest jobs longer together than the ``j`` longest places (all places, beyond their
    number).  Where some ``j`` exceed them by at most :data:`REPAIR`, the prefix sums are cut
    to the places' (``min`` of both, still non-decreasing), which moves that much of a job's
    length to the later ones or drops it at the end; ``None`` where they exceed by more."""
    need = np.cumsum(jobs)
    room = np.cumsum(lengths)[np.minimum(np.arange(jobs.size), lengths.size - 1)]
    excess = float((need - room).max(initial=0.0))
    if excess <= TOLERANCE:
        return jobs
    if excess > REPAIR:
        return None
    return np.diff(np.minimum(need, room), prepend=0.0)


def _staircase(lengths: np.ndarray, jobs: np.ndarray) -> list[list[tuple[int, float, float]]] | None:
    """Preemptive schedule of ``jobs`` (by decreasing length) on places ``t`` free on
    ``[0, lengths[t])`` (non-increasing), no job on two places at once: for each job its
    pieces ``(place, start, end)``; ``None`` if a job is longer than the longest place."""
    free = [float(a) for a in lengths]  # free prefix of each remaining place, non-increasing
    place_of = list(range(len(free)))
    pieces: list[list[tuple[int, float, float]]] = []
    for length in jobs:
        length = float(length)
        if length <= 0 or (not free and length <= TOLERANCE):
            # no place left for a job within round-off of nothing (the places below TOLERANCE
            # are dropped as they fill): its member's floor is checked on the result
            pieces.append([])
            continue
        if not free or length > free[0] + TOLERANCE:
            return None
        last = len(free) - 1
        if length <= free[last] + TOLERANCE:
            # the end of the shortest place
            length = min(length, free[last])
            pieces.append([(place_of[last], free[last] - length, free[last])])
            free[last] -= length
            if free[last] <= TOLERANCE:
                free.pop()
                place_of.pop()
            continue
        # the longest place t + 1 with free[t + 1] < length <= free[t]
        t = int(np.searchsorted(-np.asarray(free), -length, side="right")) - 1
        t = max(0, min(t, last - 1))
        rest = length - free[t + 1]
        pieces.append([(place_of[t + 1], 0.0, free[t + 1]), (place_of[t], free[t] - rest, free[t])])
        free[t] = free[t] + free[t + 1] - length
        del free[t + 1]
        del place_of[t + 1]
        if free[t] <= TOLERANCE:
            del free[t]
            del place_of[t]
    return pieces


def realise(columns: Columns, weights: np.ndarray, groups: np.ndarray, r: np.ndarray) -> tuple[Columns, np.ndarray] | None:
    """A distribution over actual sets meeting every floor ``r``, worth what ``weights`` over
    ``columns`` is worth (members exchanged only inside groups of interchangeable workers),
    or ``None`` where Gale's condition fails in some group (module docstring)."""
    weights = np.asarray(weights, dtype=float)
    r = np.asarray(r, dtype=float)
    n = columns.n
    m = len(columns)
    order, starts, _ = ranked_members(groups, r)
    sizes = np.diff(starts)
    grouped = sizes[groups] > 1
    incidence = sp.csr_array((np.ones(columns.nnz), columns.indices, columns.indptr), shape=(m, n))
    counts = group_counts(columns, groups, sizes.size).tocsc()
    # the members each set keeps as they are (workers alone in their group)
    keep = (incidence @ sp.diags_array((~grouped).astype(float))).tocsr()
    keep.eliminate_zeros()
    records: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []  # set, lo, hi, member
    for g in np.flatnonzero(sizes > 1):
        lo, hi = counts.indptr[g], counts.indptr[g + 1]
        sets, c = counts.indices[lo:hi], counts.data[lo:hi].astype(np.int64)
        if sets.size == 0:
            continue
        by_count = np.argsort(-c, kind="stable")
        sets, c = sets[by_count], c[by_count]
        p = weights[sets]
        begin = np.concatenate([[0.0], np.cumsum(p)[:-1]])
        members = order[starts[g]:starts[g + 1]]
        x = most_even(r[members], float(c @ p))
        jobs = np.argsort(-x, kind="stable")
        lengths = at_least(c, p)
        fitted = _fitted(x[jobs], lengths)
        schedule = None if fitted is None else _staircase(lengths, fitted)
        if schedule is None:
            return None
        for job, pieces in zip(jobs, schedule):
            for place, start, end in pieces:
                # the sets overlapping [start, end) on this place (those holding c >= place + 1)
                span = np.arange(int(np.searchsorted(begin + p, start, side="right")),
                                 int(np.searchsorted(begin, end, side="left")))
                span = span[(c[span] >= place + 1) & (p[span] > 0)]
                rel_lo = np.clip((start - begin[span]) / p[span], 0.0, 1.0)
                rel_hi = np.clip((end - begin[span]) / p[span], 0.0, 1.0)
                records.append((sets[span], rel_lo, rel_hi, np.full(span.size, members[job])))
    return _pieces(columns, weights, keep, records, r)


#: positions inside a set are quantised to multiples of 2^-QUANTUM_BITS (exact integer keys)
QUANTUM_BITS = 40
#: probability mass, all such pieces together, that may be dropped where round-off left pieces
#: short of a member or holding one twice (the floors are then checked on what is left).  Per
#: piece at 1e-11, a two-class draw (``n = 1,000, k = 50``, 7,449 sets) failed on three pieces
#: of 1.6e-11 to 2.0e-11 among 7,158 slivers of 7.8e-11 in all, and the phase's certified
#: distribution was lost
SLIVERS = 1e-9


def _pieces(columns: Columns, weights: np.ndarray, keep: sp.csr_array,
            records: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
            r: np.ndarray) -> tuple[Columns, np.ndarray] | None:
    """Cut every set at the ends of its members' stretches (``records``: set, start and end
    as shares of the set's weight, member) and write each piece's members: the set's kept
    members and the group members whose stretch covers the piece.  ``None`` unless every
    piece has its set's size in distinct members and the floors are met."""
    m, n = len(columns), columns.n
    scale = np.int64(1) << QUANTUM_BITS
    if records:
        owner = np.concatenate([a for a, _, _, _ in records]).astype(np.int64)
        lo = np.rint(np.concatenate([b for _, b, _, _ in records]) * scale).astype(np.int64)
        hi = np.rint(np.concatenate([c for _, _, c, _ in records]) * scale).astype(np.int64)
        member = np.concatenate([d for _, _, _, d in records]).astype(np.int64)
        useful = hi > lo
        owner, lo, hi, member = owner[useful], lo[useful], hi[useful], member[useful]
    else:
        owner = lo = hi = member = np.zeros(0, dtype=np.int64)
    stride = scale + 1
    everyone = np.arange(m, dtype=np.int64)
    keys = np.unique(np.concatenate([everyone * stride, everyone * stride + scale,
                                     owner * stride + lo, owner * stride + hi]))
    piece_set = keys[:-1] // stride
    same = piece_set == keys[1:] // stride  # a piece lies between two breaks of one set
    length = np.where(same, keys[1:] - keys[:-1], 0)
    first = np.searchsorted(keys, owner * stride + lo)
    last = np.searchsorted(keys, owner * stride + hi)  # pieces first..last-1
    spans = last - first
    piece_of = np.repeat(first - np.cumsum(spans) + spans, spans) + np.arange(int(spans.sum()))
    assigned_member = np.repeat(member, spans)
    # each piece also holds its set's kept members
    kept_per_set = np.diff(keep.indptr)
    pieces = np.flatnonzero(length > 0)
    kept_rows = np.repeat(pieces, kept_per_set[piece_set[pieces]])
    kept_members = np.concatenate([keep.indices[keep.indptr[s]:keep.indptr[s + 1]] for s in piece_set[pieces]]) \
        if pieces.size else np.zeros(0, dtype=np.int64)
    rows = np.concatenate([piece_of, kept_rows])
    cols = np.concatenate([assigned_member, kept_members]).astype(np.int64)
    alive = length[rows] > 0
    rows, cols = rows[alive], cols[alive]
    order = np.lexsort((cols, rows))
    rows, cols = rows[order], cols[order]
    # slivers between stretches that round-off left apart (SLIVERS of mass in all) may miss
    # a member: they are dropped, and the floors are checked on what is left
    mass = weights[piece_set] * (length / float(scale))
    sizes = np.bincount(rows, minlength=keys.size - 1)
    expected = columns.sizes()[piece_set]
    duplicate = np.zeros(keys.size - 1, dtype=bool)
    duplicate[rows[1:][(np.diff(rows) == 0) & (np.diff(cols) == 0)]] = True
    wrong = (length > 0) & ((sizes != expected) | duplicate)
    if float(mass[wrong].sum()) > SLIVERS:
        return None
    pieces = np.flatnonzero((length > 0) & ~wrong)
    index = np.full(keys.size - 1, -1, dtype=np.int64)
    index[pieces] = np.arange(pieces.size)
    kept = index[rows] >= 0
    rows, cols = index[rows[kept]], cols[kept]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=pieces.size))]).astype(np.int64)
    result = Columns(n, indptr, cols)
    probabilities = mass[pieces] / mass[pieces].sum()
    if (result.marginals(probabilities) < r - 1e-9).any():
        return None
    return result, probabilities
