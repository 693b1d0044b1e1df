"""Refilling planned sets under availability: one set at a time and many at once agree."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from fairsched.policies.lp import DeadlineGuard
from fairsched.policies.refill import most_urgent, refill, refill_many, urgency_keys


def drawn(seed: int) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, np.ndarray, int]:
    """Planned sets (sorted, some all available), availability, the ranked workers, floors, k."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 300))
    k = int(rng.integers(1, n + 1))
    r = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0, k / n, n))
    available = rng.random(n) < rng.choice([0.3, 0.9, 1.0])
    debt = rng.choice([-0.5, 0.0, 0.4, 1.2], size=n)
    ranked = most_urgent(np.flatnonzero(available), urgency_keys(r, debt), debt, k)
    sets = [np.sort(rng.choice(n, size=int(rng.integers(1, k + 1)), replace=False))
            for _ in range(int(rng.integers(0, 12)))]
    return sets, available, ranked, r, k


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_refill_many_is_refill_of_each_set(seed):
    """Set ``c`` of ``refill_many`` has exactly the members of ``refill(sets[c], ...)``, also
    where fewer ranked workers are left than members missing, and with no one missing."""
    sets, available, ranked, _, _ = drawn(seed)
    members, owner = refill_many(sets, available, ranked)
    assert members.size == owner.size
    for c, planned in enumerate(sets):
        assert np.array_equal(np.sort(members[owner == c]), refill(planned, available, ranked))
    everyone, owners = refill_many(sets, None, None)
    assert np.array_equal(everyone, np.concatenate(sets) if sets else np.zeros(0))
    assert np.array_equal(owners, np.repeat(np.arange(len(sets)), [S.size for S in sets]))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_refill_keeps_the_available_members_and_adds_the_most_urgent_others(seed):
    """The refilled set: every available planned member, then the first ranked workers outside
    the plan, as many as were missing (fewer only if the ranked workers run out), no one twice."""
    sets, available, ranked, _, _ = drawn(seed)
    for planned in sets:
        played = refill(planned, available, ranked)
        kept = planned[available[planned]]
        assert np.isin(kept, played).all()
        assert np.unique(played).size == played.size and available[played].all()
        outside = ranked[~np.isin(ranked, planned)]
        extra = np.setdiff1d(played, kept)
        assert np.array_equal(np.sort(outside[:extra.size]), extra)
        assert extra.size == min(planned.size - kept.size, outside.size)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 5))
def test_the_guard_judges_flat_sets_as_listed_ones(seed, blocked):
    """``DeadlineGuard.safe_members`` on ``refill_many``'s flat sets equals ``safe`` on the list."""
    sets, available, ranked, r, k = drawn(seed)
    rng = np.random.default_rng(seed)
    guard = DeadlineGuard(r, k)
    guard.rebuild(rng.integers(0, 3, r.size), int(rng.integers(1, 6)))
    members, owner = refill_many(sets, available, ranked)
    listed = [np.sort(members[owner == c]) for c in range(len(sets))]
    assert np.array_equal(guard.safe_members(members, owner, len(sets), blocked), guard.safe(listed, blocked))
