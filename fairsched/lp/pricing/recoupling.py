"""Recoupling for the accuracy utility: the coarse and fine parts of a distribution's sets
paired anew, largest coarse part with smallest fine part.

For ``f(S) = g(L(S))`` with ``g`` concave and ``L(S) = Σ_{u∈S} L_u`` (the accuracy utility of
Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular
Maximization Approach"), split every set of a distribution at a size ``τ`` into its *coarse*
part ``A = {u ∈ S : L_u >= τ}`` and its *fine* part ``B = S − A``.  Among sets with the same
number of coarse members, any coarse part can go with any fine part: the two are disjoint
(a worker is coarse in every set or in none) and make a set of the same size.  Drawing the
coarse part and the fine part of a random set from the same two distributions, paired in
any way (a *coupling*), leaves every worker's marginal as it was, so the floors, caps and
set sizes all still hold.  Only the value changes: ``E[g(L(A) + L(B))]``.

``(a, b) -> g(a + b)`` is submodular for concave ``g``, so among all couplings of two given
distributions on the line the *countermonotone* one (the largest ``a`` with the smallest
``b``) maximises ``E[g(a + b)]`` (Cambanis, Simons and Stout, "Inequalities for Ek(X, Y)
when the marginals are fixed", *Z. Wahrscheinlichkeitstheorie verw. Gebiete* 36, 1976).
:func:`recouple` builds it class by class (sets with the same number of coarse members) by
the north-west corner rule on the cumulative weights: ``m`` sets give at most ``2m − 1``
pieces.  The result is never worth less than the distribution it came from (up to
round-off), and usually more: the sets of a column generation master were chosen for their
marginals and pair their parts as they came.

Two size classes (5 % large workers, the rest small; ``n = 10,000``, ``k = 100``, seed 7,
``benchmarks/README.md``, "Two size classes: recoupling"): column generation over every
floor hands over at 1.78e-6 below Jensen's bound, with sets holding one more large worker
and small workers of every size; recoupled at ``τ`` between the classes it is 1.09e-6 below,
and at a second ``τ`` among the small sizes 9.24e-7, inside the 1e-6 rule, in about a
second, where the LP over groups of equal size took 90 iterations and 80 s to get there.
:func:`recoupled` tries the sizes at which the weighted members split by
:data:`SPLIT_SHARES`, largest first, and keeps a pass only where it gains.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from fairsched.solvers.columns import Columns

#: the shares of the members' weight (largest sizes first) at which :func:`recoupled` splits
#: sets into coarse and fine parts, besides the widest gap between sizes: from the few
#: largest members (the ones one set holds and another does not) to the middle
SPLIT_SHARES = (0.01, 0.05, 0.1, 0.2, 0.35, 0.5)
#: a pass is kept when it gains at least this much, relative to ``max(1, |value|)``
MIN_GAIN = 1e-13
#: the recoupled support may hold at most this many times the members of the support it
#: came from (each pass can nearly double it)
MAX_GROWTH = 4.0


def countermonotone(coarse: np.ndarray, fine: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                            np.ndarray]:
    """The countermonotone coupling of two weighted samples on the line that share their
    weights: atom ``i`` carries ``weights[i]`` of value ``coarse[i]`` on one side and of
    ``fine[i]`` on the other.  Returns ``(i, j, w)``: piece ``p`` pairs the coarse value of
    atom ``i[p]`` with the fine value of atom ``j[p]`` at weight ``w[p] > 0``, largest coarse
    with smallest fine; ``Σ_{p: i[p]=i} w[p] = Σ_{p: j[p]=i} w[p] = weights[i]`` up to
    round-off (north-west corner rule on the cumulative weights)."""
    weights = np.asarray(weights, dtype=float)
    by_coarse = np.argsort(-np.asarray(coarse, dtype=float), kind="stable")
    by_fine = np.argsort(np.asarray(fine, dtype=float), kind="stable")
    up_coarse = np.cumsum(weights[by_coarse])
    total = up_coarse[-1]
    # the two sums of the same weights differ by round-off: both end at the same total
    up_fine = np.minimum(np.cumsum(weights[by_fine]), total)
    up_fine[-1] = total
    ends = np.unique(np.concatenate([up_coarse, up_fine]))
    widths = np.diff(ends, prepend=0.0)
    keep = widths > 0
    ends, widths = ends[keep], widths[keep]
    last = weights.size - 1
    first = np.minimum(np.searchsorted(up_coarse, ends, side="left"), last)
    second = np.minimum(np.searchsorted(up_fine, ends, side="left"), last)
    return by_coarse[first], by_fine[second], widths


def recouple(columns: Columns, probabilities: np.ndarray, sizes: np.ndarray,
             threshold: float) -> tuple[Columns, np.ndarray]:
    """The distribution ``probabilities`` over ``columns`` with the coarse parts (members of
    size at least ``threshold``) and fine parts of its sets paired countermonotonically within
    each class of sets with the same numbers of coarse and fine members (module docstring).
    Every worker's marginal is kept; sets of weight 0 are dropped."""
    sizes = np.asarray(sizes, dtype=float)
    probabilities = np.asarray(probabilities, dtype=float)
    used = np.flatnonzero(probabilities > 0)
    columns, probabilities = columns.take(used), probabilities[used]
    coarse_member = sizes[columns.indices] >= threshold
    rows = columns.row_ids()
    coarse_count = np.bincount(rows, weights=coarse_member, minlength=len(columns)).astype(np.int64)
    coarse_size = np.bincount(rows, weights=np.where(coarse_member, sizes[columns.indices], 0.0),
                              minlength=len(columns))
    fine_size = columns.dot(sizes) - coarse_size
    # members of each set, coarse ones first: a set's coarse part is then a prefix
    order = np.lexsort((~coarse_member, rows))
    members = columns.indices[order]
    width = columns.sizes()
    classes = coarse_count * (int(width.max(initial=0)) + 1) + width
    starts = columns.indptr[:-1]
    parts: list[Columns] = []
    weights: list[np.ndarray] = []
    for key in np.unique(classes):
        atoms = np.flatnonzero(classes == key)
        first, second, share = countermonotone(coarse_size[atoms], fine_size[atoms], probabilities[atoms])
        count, total = int(coarse_count[atoms[0]]), int(width[atoms[0]])
        take_coarse = starts[atoms[first]][:, None] + np.arange(count)[None, :]
        take_fine = starts[atoms[second]][:, None] + np.arange(count, total)[None, :]
        block = np.concatenate([members[take_coarse], members[take_fine]], axis=1)
        parts.append(Columns.from_rows(block, columns.n))
        weights.append(share)
    return Columns.concatenate(parts, columns.n), np.concatenate(weights) if weights else np.zeros(0)


def split_sizes(columns: Columns, probabilities: np.ndarray, sizes: np.ndarray) -> list[float]:
    """The thresholds :func:`recoupled` tries, largest first: the upper end of the widest gap
    (in log size) between the sizes of workers in the support, and the sizes at which their
    marginals, largest sizes first, reach each share of :data:`SPLIT_SHARES` of their sum
    (``O(nnz + n log n)``)."""
    sizes = np.asarray(sizes, dtype=float)
    marginals = columns.marginals(probabilities)
    present = np.flatnonzero(marginals > 0)
    order = present[np.argsort(-sizes[present], kind="stable")]
    ranked, mass = sizes[order], np.cumsum(marginals[order])
    found: set[float] = set()
    distinct = np.unique(ranked[ranked > 0])
    if distinct.size >= 2:
        gaps = np.diff(np.log(distinct))
        found.add(float(distinct[int(np.argmax(gaps)) + 1]))
    if mass.size:
        for share in SPLIT_SHARES:
            at = min(int(np.searchsorted(mass, share * mass[-1], side="left")), ranked.size - 1)
            found.add(float(ranked[at]))
    smallest = float(ranked[-1]) if ranked.size else 0.0
    return sorted((t for t in found if t > smallest), reverse=True)


def recoupled(values_of: Callable[[Columns], np.ndarray], columns: Columns, probabilities: np.ndarray,
              sizes: np.ndarray, *, target: float = math.inf, rounds: int = 2,
              deadline: float | None = None) -> tuple[Columns, np.ndarray, float, int]:
    """Passes of :func:`recouple` at each of :func:`split_sizes` (computed once: a pass keeps
    every marginal, so the thresholds do not change), largest first, for ``rounds`` rounds,
    each kept where it gains more than :data:`MIN_GAIN` (``values_of`` gives ``f`` of
    columns).  Stops once the value reaches ``target`` or at ``deadline`` (a
    ``time.perf_counter()`` value), and skips a pass whose support would hold more than
    :data:`MAX_GROWTH` times the members it started with.  Returns the support, its
    probabilities, its value and the number of passes kept."""
    probabilities = np.asarray(probabilities, dtype=float)
    value = float(probabilities @ values_of(columns))
    budget = MAX_GROWTH * max(columns.nnz, 1)
    thresholds = split_sizes(columns, probabilities, sizes)
    kept = 0
    for _ in range(rounds):
        gained = False
        for threshold in thresholds:
            if value >= target or (deadline is not None and time.perf_counter() >= deadline):
                return columns, probabilities, value, kept
            support, weights = recouple(columns, probabilities, sizes, threshold)
            if support.nnz > budget:
                continue
            worth = float(weights @ values_of(support))
            if worth > value + MIN_GAIN * max(1.0, abs(value)):
                columns, probabilities, value = support, weights, worth
                kept += 1
                gained = True
        if not gained:
            break
    return columns, probabilities, value, kept
