"""Incremental gain states: adding many at once, and the bounds of groups of candidates."""

from __future__ import annotations

import numpy as np
import pytest

from fairsched.policies.lyapunov import _Penalised
from fairsched.submodular.incremental import AccuracyGains
from fairsched.submodular.lazy_greedy import incremental_gains
from fairsched.utilities import AccuracyUtility, ConcaveModular, Modular


def test_add_many_is_add_of_each_in_turn_bit_for_bit():
    """After ``add_many(order)`` the total, ``g(T)`` and every gain equal those after ``add`` of
    each worker in turn, exactly (the same summation order), from ∅ and from a base set."""
    rng = np.random.default_rng(2)
    utility = AccuracyUtility(np.exp(rng.normal(4.0, 1.5, 500)).round() + 0.1 * rng.random(500))
    for base in (np.array([], dtype=np.int64), np.array([7, 99, 250])):
        order = rng.permutation(np.setdiff1d(np.arange(500), base))[:300]
        one, many = AccuracyGains(utility, base), AccuracyGains(utility, base)
        for u in order[:150]:
            one.add(int(u))
        many.add_many(order[:150])
        many.add_many(order[150:150])
        for u in order[150:]:
            one.add(int(u))
        many.add_many(order[150:])
        assert many.total == one.total and many._at == one._at
        rest = np.setdiff1d(np.arange(500), np.concatenate([base, order]))
        assert np.array_equal(many.gains(rest), one.gains(rest))
        assert np.array_equal(many.reference_gains(rest), one.reference_gains(rest))


def utilities(rng: np.random.Generator, n: int) -> dict[str, object]:
    return {
        "accuracy": AccuracyUtility(rng.uniform(5, 400, n).round()),
        "modular": Modular(rng.uniform(0, 3, n)),
        "concave": ConcaveModular(rng.random((6, n)) * (rng.random((6, n)) < 0.4), "sqrt"),
    }


@pytest.mark.parametrize("kind", ["accuracy", "modular", "concave"])
def test_group_bounds_bound_every_member_and_the_largest_is_attained(kind):
    """``group_bounds(candidates, label, count)[g]`` is at least the gain of every member of
    group ``g`` at the current set, and equal to the largest where one member has the
    group's largest of every feature (accuracy, modular: the largest size or weight)."""
    rng = np.random.default_rng(4)
    n = 400
    utility = utilities(rng, n)[kind]
    base = rng.choice(n, 12, replace=False)
    state = incremental_gains(utility, base)
    candidates = np.setdiff1d(np.arange(n), base)
    count = 9
    label = rng.integers(0, count, candidates.size)
    bounds = state.group_bounds(candidates, label, count)
    state.add(int(candidates[0]))  # the bound is a function: evaluated at the set as it is now
    gains = state.gains(candidates)
    values = bounds()
    assert values.shape == (count,)
    for g in range(count):
        group = gains[label == g]
        assert values[g] >= group.max() - 1e-12
        if kind != "concave":
            assert values[g] == pytest.approx(group.max(), rel=1e-12)
    whole = state.group_bound(candidates)()  # one group: at least every group's bound
    assert whole >= values.max() - 1e-12
    if kind != "concave":
        assert whole == pytest.approx(values.max(), rel=1e-12)


def test_lyapunov_group_bound_bounds_the_penalised_gains_in_queue_blocks():
    """The queue-penalised score's bound of a group (blocks by queue, utility bound plus the
    block's largest queue) is at least every member's penalised gain, and tighter than pairing
    the largest gain with the largest queue where the two belong to different workers."""
    rng = np.random.default_rng(6)
    n = 20_000
    utility = AccuracyUtility(np.exp(rng.normal(4.0, 1.0, n)).round() + 1.0)
    queues = rng.uniform(0.0, 2.0, n) * (rng.random(n) < 0.8)
    big = np.argsort(utility.sizes)[-50:]
    queues[big] = 0.0  # the largest workers have empty queues: a single block would pair them wrong
    state = _Penalised(utility, 10.0, queues).incremental(np.array([0, 1]))
    candidates = np.arange(2, n)
    bound = state.group_bound(candidates)
    gains = state.gains(candidates)
    assert bound() >= gains.max() - 1e-12
    single = 10.0 * state.inner.gains(candidates).max() + queues[candidates].max()
    assert bound() < single
    assert state.group_bound(np.zeros(0, dtype=np.int64))() == -np.inf
