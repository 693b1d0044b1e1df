"""Order statistics that stay linear where many values tie.

NumPy's ``np.partition`` and ``np.argpartition`` (introselect) are linear on spread-out
values but an order of magnitude slower where one value fills much of the array, and such
arrays are common here: urgency keys of workers who share a floor and a count, and the swap
values of a local search where most swaps change nothing (facility location's fillers, whose
swaps among themselves are worth exactly 0 at equal prices).  The helpers below sort
instead where a sample shows one value dominating.
"""

from __future__ import annotations

import numpy as np

#: values sampled by :func:`kth_smallest` to spot one value filling much of the array
SAMPLE = 512
#: :func:`largest` sorts arrays up to this size outright (a stable sort of a few thousand
#: values costs about what the sample costs: 15 against 46 µs at 900 values, 64 against 76 µs
#: at 5,000)
SORTED_UP_TO = 4096


def kth_smallest(values: np.ndarray, index: int) -> np.generic:
    """``np.sort(values)[index]``, in ``O(|values|)`` where the data allow.

    ``np.partition`` is linear on spread-out values but an order of magnitude slower where
    one value fills much of the array (measured on urgency keys of 95,000 workers that share
    a floor and a count: 13.6 ms against 1.0 ms for a sort, and 1.0 ms against 4.6 ms for a
    sort on distinct values).  A strided sample of :data:`SAMPLE` values tells the two apart:
    if one value is a quarter of it, the array is sorted instead.
    """
    sample = values[::max(1, values.size // SAMPLE)]
    _, counts = np.unique(sample, return_counts=True)
    if 4 * counts.max() >= sample.size:
        return np.sort(values)[index]
    return np.partition(values, index)[index]


def largest(values: np.ndarray, count: int) -> np.ndarray:
    """Indices of the ``count`` largest of the 1-d ``values`` (all of them if fewer), unordered;
    among values tied at the cut, the lowest indices.

    Up to :data:`SORTED_UP_TO` values a stable sort decides; beyond, the cut is
    :func:`kth_smallest` of ``−values``, so heavy ties cost a sort, not a slow
    ``np.argpartition`` (one climb's swap values on facility location ``n = 400``, ``k = 40``,
    8,991 of 14,400 equal to the largest: 225 µs here against 1,181 µs for
    ``np.argpartition``; ``python benchmarks/bench_climb.py``).  NaN values are never chosen
    over numbers.
    """
    values = np.asarray(values)
    if count <= 0:
        return np.zeros(0, dtype=np.int64)
    if count >= values.size:
        return np.arange(values.size)
    if values.size <= SORTED_UP_TO:
        return np.argsort(-values, kind="stable")[:count]
    negated = -values
    missing = np.isnan(negated)
    if missing.any():
        negated[missing] = np.inf
    cut = kth_smallest(negated, count - 1)
    above = np.flatnonzero(negated < cut)
    tied = np.flatnonzero(negated == cut)[: count - above.size]
    return np.concatenate([above, tied])
