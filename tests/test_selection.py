"""Order statistics of fairsched.solvers.selection against full sorts, on tied and spread values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairsched.solvers.selection import SORTED_UP_TO, kth_smallest, largest


def sorted_largest(values: np.ndarray, count: int) -> np.ndarray:
    """The reference: a stable sort of the negated values, NaN last."""
    keys = np.where(np.isnan(values), np.inf, -values)
    return np.argsort(keys, kind="stable")[:max(0, count)]


def drawn(seed: int, shape: str, size: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if shape == "one value fills most":
        values = np.where(rng.random(size) < 0.85, 0.0, rng.normal(size=size))
    elif shape == "most tie at the top":
        # the swap values of a local search among fillers: most exactly 0, the rest below
        values = np.where(rng.random(size) < 0.6, 0.0, -rng.random(size))
    elif shape == "few values":
        values = rng.choice([-1.0, 0.5, 2.0, np.inf, -np.inf], size=size)
    elif shape == "with NaN":
        values = np.where(rng.random(size) < 0.1, np.nan, rng.normal(size=size))
    else:
        values = rng.normal(size=size)
    return values


SHAPES = ["one value fills most", "most tie at the top", "few values", "with NaN", "spread"]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(SHAPES), st.sampled_from([1, 50, SORTED_UP_TO, 30_000]))
def test_largest_is_the_head_of_a_stable_sort(seed, shape, scale):
    """``largest`` returns exactly the indices a stable sort of the negated values puts first
    (ties at the cut to the lowest indices, NaN never before a number), as a set, for sizes
    on both sides of the sorted path and counts from 0 past the size."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, scale + 1))
    values = drawn(seed, shape, size)
    count = int(rng.integers(0, min(size + 2, 40)))
    chosen = largest(values, count)
    assert chosen.dtype.kind == "i"
    assert np.array_equal(np.sort(chosen), np.sort(sorted_largest(values, count)))


def test_largest_cuts_a_tie_at_the_top_by_index():
    """Where the top value fills most of a large array (the case ``np.argpartition`` is slow on),
    the lowest indices of the tie are chosen, after every larger value."""
    values = np.zeros(20_000)
    values[[5, 17_000]] = 1.0
    values[::7] = -1.0
    chosen = np.sort(largest(values, 5))
    assert chosen.tolist() == [1, 2, 3, 5, 17_000]


@pytest.mark.parametrize("shape", SHAPES)
def test_kth_smallest_equals_the_sorted_value(shape):
    values = drawn(3, shape, 50_000)
    for index in (0, 7, 25_000, 49_999):
        assert np.array_equal(kth_smallest(values, index), np.sort(values)[index], equal_nan=True)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 3), st.booleans())
def test_kth_smallest_splits_around_dominant_values_exactly(seed, dominant, with_nan):
    """Where one or more values each fill a quarter of the array or more (the split around
    them, repeated below or above), and where NaN fills the sample, every index gives the
    sorted array's value; the array is not modified."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 3000))
    heavy = rng.choice([-np.inf, -1.0, 0.0, 2.5, np.inf, np.nan if with_nan else 7.0], size=dominant, replace=False)
    values = np.where(rng.random(size) < 0.8, rng.choice(heavy, size=size), rng.normal(size=size))
    if with_nan:
        values[rng.random(size) < 0.05] = np.nan
    kept = values.copy()
    expected = np.sort(values)
    for index in {0, size - 1, int(rng.integers(0, size)), int(rng.integers(0, size))}:
        assert np.array_equal(kth_smallest(values, index), expected[index], equal_nan=True)
    assert np.array_equal(values, kept, equal_nan=True)
