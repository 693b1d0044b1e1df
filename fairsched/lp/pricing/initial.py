"""The starting pool of column generation: good sets that already meet the floors, with weights.

- the greedy set for ``f`` (Nemhauser, Wolsey and Fisher, "An analysis of approximations for
  maximizing submodular set functions", 1978);
- the sets of a **systematic sample** (Madow, "On the theory of systematic sampling, II",
  1949) with inclusion probabilities ``x >= r``, ``Σ x = k``: lay the workers' intervals
  ``[C_{u−1}, C_u)`` of the cumulative sums ``C`` of ``x`` on ``[0, k)`` and, for an offset
  ``U ∈ [0, 1)``, select the workers whose interval holds a point of ``U + {0, …, k−1}``.
  As ``U`` sweeps ``[0, 1)`` the set changes only at the fractional parts of the ``C_u``, so
  at most ``n + 1`` distinct ``k``-sets arise, and weighting each by the length of its
  ``U``-range gives marginals exactly ``x`` (``docs/mathematics.md`` §3).

The weighted sample is a feasible distribution, so column generation has a lower bound
before any LP is solved and its master is feasible from the first iteration.  ``x`` starts
at ``r``; the spare mass ``k − Σ r`` goes, up to 1 each, to the greedy workers first, then to
the others by decreasing singleton value ``f({u})``, and the workers are laid out by
decreasing singleton value.  For the accuracy utility ``f(S) = g(L(S))`` this ``x`` maximises
``L·x`` over ``{r <= x <= 1, Σ x = k}``, so ``g(L·x)`` is Jensen's upper bound on ``U_opt``,
and consecutive workers have alike sizes: every sampled set draws one worker from each
stratum of alike ones, and the sets' sizes ``L(S)`` differ by at most ``max L − min L``.

Everything here is ``O(n·k)`` time and memory (sets are stored as indices), never ``O(n²)``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from fairsched.solvers.columns import Columns
from fairsched.submodular.greedy import greedy_complete
from fairsched.utilities.accuracy import AccuracyUtility
from fairsched.utilities.base import SetFunction

#: antithetic splits tried on a grid by :func:`initial_pool` (then refined around the best)
SPLIT_GRID = 16
#: set members :func:`initial_pool` may evaluate while comparing samples
SPLIT_WORK = 10_000_000
#: the greedy set joins the sample as a column (of weight 0) only up to this many set members
GREEDY_WITH_POOL = 200_000
#: boolean mask entries evaluated per :meth:`SetFunction.values` call when a utility has
#: no sparse evaluation (16 MiB of masks)
MASK_CHUNK = 1 << 24
#: sample entries :func:`systematic_columns` checks and compacts per chunk of rows
CHUNK_ENTRIES = 1 << 22

#: what :func:`priority_order` returns
Priority = tuple[np.ndarray, np.ndarray, np.ndarray]


@dataclass(frozen=True, eq=False)
class StartingPool:
    """Columns with their ``f`` and the weights of a distribution over them that meets ``r``.

    ``probabilities`` sum to 1 and ``columns.marginals(probabilities) >= r`` up to round-off
    (the greedy set, column 0, has weight 0 unless it is also sampled).
    """

    columns: Columns
    values: np.ndarray
    probabilities: np.ndarray

    def value(self) -> float:
        """``Σ_S p_S f(S)`` of the starting distribution: a lower bound on ``U_opt``."""
        return float(self.probabilities @ self.values)


def systematic_columns(x: np.ndarray, k: int, order: np.ndarray | None = None,
                       split: int | None = None) -> tuple[Columns, np.ndarray]:
    """The sets of a systematic sample with inclusion probabilities ``x``, one per distinct
    offset interval, each with ``k`` distinct members (with ``split`` two intervals may give
    the same set: 93 distinct sets of 99 on one small draw; the reported support merges them).

    ``x`` (n,) in ``[0, 1]`` with ``Σ x = k`` (up to round-off); workers are laid out in
    ``order`` (default ``0..n−1``).  With ``split = s`` the first ``s`` workers of the layout
    (block A) are sampled at the offset ``U`` and the others (block B) at the *antithetic*
    offset ``1 − U``: each block alone is still a systematic sample, so marginals stay
    exactly ``x``, and the set size is ``⌈M_A − U⌉ + ⌈M_B − 1 + U⌉ = k`` (``M`` the blocks'
    masses, ``M_A + M_B = k``).  With the layout sorted by decreasing singleton value, the
    offset that draws block A's heaviest workers draws block B's lightest, which evens out
    the sets (for the accuracy utility their sizes ``L(S)``: ``docs/mathematics.md`` §3).

    Returns (columns, probabilities (m,)); every column has exactly ``k`` members and
    ``columns.marginals(probabilities) ≈ x``.  ``O(m·k)`` work, ``m <= n + 2``.
    """
    x = np.clip(np.asarray(x, dtype=float), 0.0, 1.0)
    n = x.size
    order = np.arange(n) if order is None else np.asarray(order, dtype=np.int64)
    # Extended precision for the cumulative sums: their round-off is what the marginals of
    # the sample miss x by (about 1e-11 at n = 10^5 in float64, 1e-14 here).
    cum = np.concatenate([[0.0], np.cumsum(x[order].astype(np.longdouble))])
    if not cum[-1] > 0 or k < 1:
        return Columns.empty(n), np.zeros(0)
    cum *= k / cum[-1]  # exact total k, so every offset yields k points
    layout = order.astype(np.int32)
    ends = np.array([0.0, 1.0], dtype=np.longdouble)
    if split is None or not 0 < split < n:
        breaks = np.unique(np.concatenate([ends, cum % 1]))
        rows = _block_holders(cum, layout, breaks)
    else:
        first, second = cum[: split + 1], cum[split:] - cum[split]
        breaks = np.unique(np.concatenate([ends, first % 1, (1 - second % 1) % 1]))
        # block B's offsets V = 1 − U run backwards along U's.  Its workers' fractions are
        # taken through the same two reflections as the breaks, so that each is a break
        # exactly: 1 − (1 − f) is not always f in floating point, and a fraction a rounding
        # above its break moved the worker's whole interval to its neighbour (marginals off
        # by up to 0.48 on 101 of 2,000 small draws; tests/test_colgen.py).
        reflected = (1 - breaks)[::-1]
        fractions = second % 1
        fractions = np.where(fractions == 0, fractions, 1 - (1 - fractions) % 1)
        rows = np.concatenate([_block_holders(first, layout[:split], breaks),
                               _block_holders(second, layout[split:], reflected, fractions)[::-1]], axis=1)
    widths = np.diff(breaks).astype(float)
    step = max(1, CHUNK_ENTRIES // max(1, rows.shape[1]))  # rows per chunk: bounded temporaries
    # round-off can stretch an interval of length 1 over two points: drop such offsets
    good = widths > 1e-15
    for lo in range(0, rows.shape[0], step):
        good[lo: lo + step] &= (rows[lo: lo + step] >= 0).sum(axis=1) == k
    rows = _compacted(rows, good, k, step)
    rows.sort(axis=1)
    distinct = np.ones(rows.shape[0], dtype=bool)
    for lo in range(0, rows.shape[0], step):
        distinct[lo: lo + step] = (np.diff(rows[lo: lo + step], axis=1) > 0).all(axis=1)
    widths = widths[good]
    if not distinct.all():
        rows, widths = _compacted(rows, distinct, k, step), widths[distinct]
    if widths.size == 0:
        return Columns.empty(n), np.zeros(0)
    columns = Columns(n, np.arange(widths.size + 1, dtype=np.int64) * k, np.ascontiguousarray(rows).reshape(-1))
    return columns, widths / widths.sum()


def _compacted(rows: np.ndarray, keep: np.ndarray, k: int, step: int) -> np.ndarray:
    """``rows[keep]`` with each row's entries below 0 dropped (every kept row has ``k``
    others), written over ``rows``'s own buffer chunk by chunk and returned as a view of it.

    ``rows[keep]`` (and the boolean mask of the entries) were each a second array as large as
    the sample at the peak of the LP (``n = 10^6``, ``k = 1,000``: 3.7 GiB and 0.9 GiB).  In
    place is safe: the kept rows before a chunk take at most the positions of the rows before
    it, and a chunk is copied out before anything is written.
    """
    if rows.shape[1] == k and keep.all():
        return rows
    flat = rows.reshape(-1)  # a view: rows is C-contiguous
    written = 0
    for lo in range(0, rows.shape[0], step):
        block = rows[lo: lo + step][keep[lo: lo + step]]
        entries = block[block >= 0]
        flat[written: written + entries.size] = entries
        written += entries.size
    return flat[:written].reshape(-1, k)


def _block_holders(cum: np.ndarray, layout: np.ndarray, breaks: np.ndarray,
                   fractions: np.ndarray | None = None) -> np.ndarray:
    """Who holds the point ``V + j`` of one block, for every offset ``V`` between consecutive
    ``breaks`` (sorted, from 0 to 1) and ``j = 0 .. ⌈M⌉ − 1`` (``M = cum[-1]``): (m, ⌈M⌉),
    ``-1`` where ``V + j >= M``.  ``fractions`` (default ``cum % 1``) are ``frac(C_p)`` as
    they appear among the breaks.

    Worker ``p`` holds ``V + j`` iff ``C_p <= V + j < C_{p+1}``.  Among the ``p`` with
    ``j <= C_p < j + 1``, ``C_p <= V + j`` iff ``frac(C_p)`` lies at or below the offset's
    lower break, so along the sorted offsets the holder of point ``j`` steps through those
    ``p``: one run per ``p``, written with ``np.repeat`` (``O(m)`` per point).
    """
    m = breaks.size - 1
    points = int(np.ceil(cum[-1] - 1e-12))
    rank = np.searchsorted(breaks, cum % 1 if fractions is None else fractions)
    floors = np.floor(cum).astype(np.int64)
    starts = np.searchsorted(floors, np.arange(points + 1), side="left")
    holder = np.append(layout, -1).astype(np.int32)  # interval len(layout): beyond the block
    out = np.empty((m, points), dtype=np.int32)
    for j in range(points):
        block = np.arange(starts[j], starts[j + 1])
        holders = np.concatenate([[max(0, starts[j] - 1)], block])
        bounds = np.concatenate([[0], np.clip(rank[block], 0, m), [m]])
        out[:, j] = holder[np.repeat(holders, np.diff(bounds))]
    return out


def systematic_sets(x: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`systematic_columns` as dense boolean masks (m, n): for small ``n`` only."""
    columns, probabilities = systematic_columns(x, k)
    return columns.to_masks(), probabilities


def column_values(utility: SetFunction, columns: Columns) -> np.ndarray:
    """``f`` of every column, without ever holding more than :data:`MASK_CHUNK` mask entries.

    The accuracy utility is evaluated from the columns' total sizes in ``O(nnz)``.
    """
    if type(utility) is AccuracyUtility:
        total = columns.dot(utility.sizes)
        nonempty = columns.sizes() > 0
        return np.where(nonempty, utility.curve(np.where(nonempty, total, 1.0)), 0.0)
    rows = max(1, MASK_CHUNK // max(1, utility.n))
    out = np.empty(len(columns))
    for lo in range(0, len(columns), rows):
        index = np.arange(lo, min(len(columns), lo + rows))
        out[index] = utility.values(columns.to_masks(index))
    return out


def priority_order(utility: SetFunction, k: int) -> Priority:
    """(greedy set, workers by decreasing ``f({u})``, the greedy workers in that order
    followed by the others in that order).

    ``f({u}) = utility.gains(∅)`` since ``f(∅) = 0``.  The last order is the one in which
    spare selection probability (:func:`starting_point`) and spare places in a round
    (:func:`~fairsched.lp.pricing.schedule_search.initial_schedule`) are handed out; both
    take it as ``priority`` so that a caller of both runs the greedy once.
    """
    if type(utility) is AccuracyUtility:
        # f(S) = g(L(S)) with g increasing: every greedy step takes the largest size left, so
        # the greedy set is the k largest sizes (O(n log n), not k gains passes of O(n))
        greedy = np.sort(np.argsort(-utility.sizes, kind="stable")[:k]).astype(np.int64)
    else:
        greedy = greedy_complete(utility, k)
    singles = np.asarray(utility.gains(np.zeros(0, dtype=np.int64)), dtype=float)
    rank = np.argsort(-singles, kind="stable")
    in_greedy = np.zeros(utility.n, dtype=bool)
    in_greedy[greedy] = True
    return greedy, rank, np.concatenate([rank[in_greedy[rank]], rank[~in_greedy[rank]]])


def starting_point(utility: SetFunction, k: int, r: np.ndarray, caps: np.ndarray | None = None,
                   priority: Priority | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(greedy set, inclusion probabilities ``x``, layout order) of the starting sample.

    ``x = r`` plus the spare ``k − Σ r`` given, up to the cap ``c_u`` (default 1) each, to the
    greedy workers first and then to the others by decreasing ``f({u})`` (``= utility.gains(∅)``,
    since ``f(∅) = 0``); so ``r <= x <= c`` and ``Σ x = k`` whenever ``Σ c >= k``.
    ``priority`` is :func:`priority_order`'s answer for ``utility`` and ``k``, computed here
    when not given.
    """
    n = utility.n
    r = np.clip(np.asarray(r, dtype=float), 0.0, 1.0)
    upper = np.ones(n) if caps is None else np.clip(np.asarray(caps, dtype=float), r, 1.0)
    greedy, rank, order = priority_order(utility, k) if priority is None else priority
    room = (upper - r)[order]
    spare = max(0.0, k - float(r.sum()))
    # fill in priority order: each takes min(room, what is left), vectorised by cumulative sums
    before = np.concatenate([[0.0], np.cumsum(room)[:-1]])
    x = r.copy()
    x[order] += np.clip(spare - before, 0.0, room)
    return greedy, x, rank


def initial_pool(utility: SetFunction, k: int, r: np.ndarray, *, work: int = SPLIT_WORK,
                 deadline: float | None = None, caps: np.ndarray | None = None,
                 priority: Priority | None = None) -> StartingPool:
    """Greedy set plus the best systematic sample of :func:`starting_point`, weighted to meet ``r``.

    The plain sample and antithetic ones (``split`` of :func:`systematic_columns`) at a grid
    of split points, refined around the best, are compared by their value ``Σ p_S f(S)``;
    ``work`` caps the set members evaluated in that search (about ``work / (n·k)`` samples),
    and the search is skipped or cut short at ``deadline`` (a ``time.perf_counter()`` value):
    only the greedy set and the plain sample, ``O(n·k)``, are always built, since without
    them there is no feasible distribution to report.  With ``caps`` the sample's marginals
    also stay below them (:func:`starting_point`, which ``priority`` is passed on to).
    """
    n = utility.n
    greedy, x, rank = starting_point(utility, k, r, caps, priority)
    # Sampling in order of singleton value: consecutive workers are alike, so every sample
    # draws one worker from each stratum of alike ones and the samples are balanced.
    sampled, weights = systematic_columns(x, k, order=rank)
    best = (float(weights @ column_values(utility, sampled)), sampled, weights)
    tries = min(SPLIT_GRID, work // max(1, sampled.nnz))
    if deadline is not None and time.perf_counter() > deadline:
        tries = 0
    if tries >= 2 and n >= 3:
        def attempt(split: int) -> None:
            nonlocal best
            if deadline is not None and time.perf_counter() > deadline:
                return
            columns, probabilities = systematic_columns(x, k, order=rank, split=split)
            if len(columns):
                value = float(probabilities @ column_values(utility, columns))
                if value > best[0]:
                    best = (value, columns, probabilities)
        grid = np.unique(np.linspace(1, n - 1, tries).round().astype(int))
        chosen = {}
        for split in grid:
            before = best[0]
            attempt(int(split))
            if best[0] > before:
                chosen["split"] = int(split)
        step = max(1, (n - 2) // max(1, tries - 1))
        while "split" in chosen and step > 1 and tries > SPLIT_GRID // 2:
            step //= 2
            centre = chosen["split"]
            for split in (centre - step, centre + step):
                if 0 < split < n:
                    before = best[0]
                    attempt(split)
                    if best[0] > before:
                        chosen["split"] = split
    _, sampled, weights = best
    if sampled.nnz > GREEDY_WITH_POOL:
        # the master will see the sample only aggregated; pricing finds the greedy set anyway
        return StartingPool(sampled, column_values(utility, sampled), weights)
    greedy_column = Columns.from_sets([greedy], n)
    columns = Columns.concatenate([greedy_column, sampled], n)
    probabilities = np.concatenate([[0.0], weights])
    values = column_values(utility, columns)
    hashes = columns.hashes()
    if len(sampled) and (hashes[1:] == hashes[0]).any():  # greedy set also sampled: keep one copy
        twin = 1 + int(np.flatnonzero(hashes[1:] == hashes[0])[0])
        if np.array_equal(columns[twin], columns[0]):
            keep = np.arange(len(columns)) != 0
            columns, values, probabilities = columns.take(np.flatnonzero(keep)), values[keep], probabilities[keep]
    return StartingPool(columns, values, probabilities)
