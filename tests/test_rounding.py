"""Tests of randomized pipage rounding: exact marginals, set sizes, E f(S) >= F(y)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairsched.errors import FairschedError
from fairsched.submodular.rounding import pipage_round, pipage_round_batch
from fairsched.utilities import Coverage

DRAWS = 20_000


def random_point(rng: np.random.Generator, case: int) -> np.ndarray:
    """A y in [0,1]^n with Σy <= k; cycles through generic, integer-sum and 0/1-laden points."""
    n = int(rng.integers(2, 16))
    y = rng.random(n)
    kind = case % 4
    if kind == 1:  # exact 0/1 entries mixed in
        y[rng.random(n) < 0.3] = 0.0
        y[rng.random(n) < 0.3] = 1.0
    if kind in (2, 3):  # Σy an integer: fix the last coordinate
        target = max(1, math.floor(y[:-1].sum()))
        last = target - y[:-1].sum()
        if kind == 3:
            y[: n // 3] = 1.0
            last = target + n // 3 - y[:-1].sum()
        if 0.0 <= last <= 1.0:
            y[-1] = last
    return y


def points(count: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = [random_point(rng, i) for i in range(count)]
    out += [np.full(10, 0.1), np.full(7, 3 / 7), np.array([0.5, 0.5]), np.array([0.0, 1.0]),
            np.array([1e-13, 1 - 1e-13, 0.5, 0.5]), np.ones(4), np.zeros(3), np.array([0.7])]
    return out


def integer_sum(y: np.ndarray) -> int | None:
    s = float(y.sum())
    return round(s) if abs(s - round(s)) < 1e-9 else None


def assert_marginals(masks: np.ndarray, y: np.ndarray, z: float = 4.0) -> None:
    draws = masks.shape[0]
    freq = masks.mean(axis=0)
    se = np.maximum(np.sqrt(y * (1 - y) / draws), 1e-12)
    worst = int(np.argmax(np.abs(freq - y) / se))
    assert abs(freq[worst] - y[worst]) <= z * se[worst], (
        f"worker {worst}: frequency {freq[worst]:.5f} vs y {y[worst]:.5f} (se {se[worst]:.2e}); "
        f"y = {y.tolist()}")


def assert_sizes(sizes: np.ndarray, y: np.ndarray) -> None:
    s = float(y.sum())
    assert sizes.max(initial=0) <= math.ceil(s - 1e-9), (sizes.max(), y.tolist())
    whole = integer_sum(y)
    if whole is not None:
        assert (sizes == whole).all(), (np.unique(sizes), y.tolist())
    else:
        assert sizes.min() >= math.floor(s)


def test_batch_marginals_and_sizes():
    cases = points(120, seed=11)
    assert sum(integer_sum(y) is not None for y in cases) >= 30
    assert sum(bool(((y == 0) | (y == 1)).any()) for y in cases) >= 30
    for i, y in enumerate(cases):
        masks = pipage_round_batch(y, DRAWS, np.random.default_rng(i))
        assert masks.shape == (DRAWS, y.size) and masks.dtype == bool
        assert_marginals(masks, y)
        assert_sizes(masks.sum(axis=1), y)
        assert masks[:, y == 1.0].all() and not masks[:, y == 0.0].any()


def test_single_draw_marginals_and_sizes():
    rng = np.random.default_rng(5)
    for y in [np.array([0.3, 0.7, 0.5, 0.5, 1.0, 0.0, 0.25, 0.75]), np.full(9, 2 / 3),
              np.array([0.9, 0.05, 0.6, 0.33, 0.12]), points(1, seed=3)[0]]:
        draws = 8000
        masks = np.zeros((draws, y.size), dtype=bool)
        for d in range(draws):
            S = pipage_round(y, rng)
            assert S.dtype == np.int64 and (np.diff(S) > 0).all()
            masks[d, S] = True
        assert_marginals(masks, y)
        assert_sizes(masks.sum(axis=1), y)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=25), st.integers(0, 2**32 - 1))
def test_size_bound_property(values, seed):
    y = np.array(values)
    S = pipage_round(y, seed)
    assert S.size <= math.ceil(y.sum() - 1e-9)
    assert set(np.flatnonzero(y == 1.0)) <= set(S.tolist())
    assert not set(np.flatnonzero(y == 0.0)) & set(S.tolist())
    sizes = pipage_round_batch(y, 50, seed).sum(axis=1)
    assert sizes.max() <= math.ceil(y.sum() - 1e-9)
    if integer_sum(y) is not None:
        assert S.size == integer_sum(y) and (sizes == integer_sum(y)).all()


def test_expected_utility_at_least_multilinear_value():
    rng = np.random.default_rng(21)
    for trial in range(6):
        n, elements = 12, 15
        covers = [sorted(rng.choice(elements, size=rng.integers(1, 6), replace=False).tolist())
                  for _ in range(n)]
        f = Coverage(covers, rng.uniform(0, 2, elements))
        y = rng.random(n)
        y *= min(1.0, 4.0 / y.sum())
        F, _ = f.multilinear(y)
        vals = f.values(pipage_round_batch(y, DRAWS, trial))
        se = vals.std(ddof=1) / math.sqrt(DRAWS)
        assert vals.mean() >= F - 3 * se, (trial, vals.mean(), F, se)


def test_same_seed_same_draws():
    y = np.array([0.2, 0.9, 0.45, 0.45, 0.6, 0.4])
    a = pipage_round_batch(y, 500, 7)
    b = pipage_round_batch(y, 500, np.random.default_rng(7))
    assert (a == b).all()
    assert not (a == pipage_round_batch(y, 500, 8)).all()
    singles = [pipage_round(y, np.random.default_rng(3)).tolist() for _ in range(3)]
    assert singles[0] == singles[1] == singles[2]
    gen1, gen2 = np.random.default_rng(9), np.random.default_rng(9)
    assert [pipage_round(y, gen1).tolist() for _ in range(20)] == \
           [pipage_round(y, gen2).tolist() for _ in range(20)]


def test_zero_draws_and_fully_integral():
    assert pipage_round_batch([0.5, 0.5], 0, 1).shape == (0, 2)
    assert pipage_round([1, 0, 1], 1).tolist() == [0, 2]
    assert (pipage_round_batch([1, 0, 1], 3, 1) == [[True, False, True]] * 3).all()


@pytest.mark.parametrize("y, match", [
    ([0.5, 1.5], r"y entry 1 is 1.5, expected a value in \[0, 1\]"),
    ([-0.2, 0.5], r"y entry 0 is -0.2"),
    ([0.5, float("nan")], r"y entry 1 is nan"),
    ([[0.5, 0.5]], r"one-dimensional"),
    (["a"], r"list of numbers"),
])
def test_bad_y(y, match):
    with pytest.raises(ValueError, match=match):
        pipage_round(y, 0)
    with pytest.raises(ValueError, match=match):
        pipage_round_batch(y, 10, 0)


def test_bad_draws_and_rng():
    for draws in (-1, 2.5, True):
        with pytest.raises(ValueError, match=r"draws is .*, expected an integer >= 0"):
            pipage_round_batch([0.5], draws, 0)
    with pytest.raises(FairschedError, match="seed must be an integer >= 0, a numpy Generator or None"):
        pipage_round([0.5], "seed")
    with pytest.raises(FairschedError, match="got -1"):
        pipage_round_batch([0.5], 3, -1)
    # Tolerance: within 1e-12 of [0, 1] is accepted and snapped.
    assert pipage_round([1 + 1e-13, -1e-13], 0).tolist() == [0]
