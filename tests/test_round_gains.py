"""Per-round gains of a schedule under construction (:mod:`fairsched.lp.pricing.round_gains`).

After every step of a random sequence of additions, each of the state's three answers (one
worker in every round, every worker in some rounds, given pairs) equals ``f(S_t + u) −
f(S_t)`` computed by the utility itself, for every kind the module serves; kinds it does not
serve, and states too large, give ``None``.
"""

from __future__ import annotations

import numpy as np
import pytest

from fairsched.lp.pricing import round_gains as rg
from fairsched.utilities import (
    AccuracyUtility,
    ConcaveModular,
    Coverage,
    FacilityLocation,
    Mixture,
    Modular,
)


def make(kind: str, n: int, rng: np.random.Generator):
    if kind == "coverage":
        covers = rng.random((n, 15)) < 0.3
        return Coverage([np.flatnonzero(row).tolist() for row in covers], rng.uniform(0.5, 2.0, 15))
    if kind == "facility-location":
        return FacilityLocation(rng.uniform(size=(8, n)) ** 2)
    if kind in ("sqrt", "log1p"):
        return ConcaveModular(rng.exponential(size=(5, n)) * (rng.random((5, n)) < 0.6), kind)
    if kind == "modular":
        return Modular(rng.uniform(0.0, 3.0, n))
    return Mixture([make("coverage", n, rng), make("facility-location", n, rng), make("sqrt", n, rng)],
                   [0.5, 2.0, 1.0])


def gains_by_values(utility, masks: np.ndarray, t: int) -> np.ndarray:
    """``f(S_t + u) − f(S_t)`` for every worker ``u`` (0 for members), from ``values``."""
    n = masks.shape[1]
    grown = np.repeat(masks[t][None, :], n, axis=0)
    grown[np.arange(n), np.arange(n)] = True
    return utility.values(grown) - utility.values(masks[t][None, :])[0]


@pytest.mark.parametrize("kind", ["coverage", "facility-location", "sqrt", "log1p", "modular", "mixture"])
@pytest.mark.parametrize("seed", range(3))
def test_every_answer_equals_the_utilitys_own_gains(kind, seed):
    rng = np.random.default_rng(seed)
    n, rounds = 9, 5
    utility = make(kind, n, rng)
    state = rg.round_gains_for(utility, rounds)
    assert state is not None
    masks = np.zeros((rounds, n), dtype=bool)
    for step in range(12):
        expected = np.array([gains_by_values(utility, masks, t) for t in range(rounds)])
        u = int(rng.integers(n))
        outside = ~masks[:, u]
        np.testing.assert_allclose(state.worker_gains(u)[outside], expected[outside, u], atol=1e-12)
        which = rng.choice(rounds, size=3, replace=False)
        got = state.round_gains(which)
        assert got.shape == (3, n)
        np.testing.assert_allclose(got[~masks[which]], expected[which][~masks[which]], atol=1e-12)
        pairs = np.flatnonzero(outside)
        workers = np.full(pairs.size, u)
        np.testing.assert_allclose(state.pair_gains(workers, pairs), expected[pairs, u], atol=1e-12)
        # add u to some rounds that lack it, then two more workers to one round in one call
        into = pairs[rng.random(pairs.size) < 0.5]
        state.add(np.full(into.size, u), into)
        masks[into, u] = True
        t = int(rng.integers(rounds))
        two = rng.choice(np.flatnonzero(~masks[t]), size=min(2, int((~masks[t]).sum())), replace=False)
        state.add(two, np.full(two.size, t))
        masks[t, two] = True


def test_no_state_for_other_kinds_or_beyond_the_cell_limit(monkeypatch):
    rng = np.random.default_rng(0)
    assert rg.round_gains_for(AccuracyUtility(rng.uniform(1, 5, 6)), 4) is None
    assert rg.round_gains_for(Mixture([make("coverage", 6, rng), AccuracyUtility(rng.uniform(1, 5, 6))],
                                      [1.0, 1.0]), 4) is None
    coverage = make("coverage", 6, rng)  # 15 elements
    monkeypatch.setattr(rg, "MAX_STATE_CELLS", 15 * 4)
    assert rg.round_gains_for(coverage, 4) is not None
    assert rg.round_gains_for(coverage, 5) is None
