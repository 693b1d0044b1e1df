"""Iterated local search before the pricing MILP: it only ever returns better k-sets, reaches
the enumeration optimum on small instances from a poor start, is reproducible, stops at its
target, and lets a targeted MILP pricing call return without solving the MILP."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from test_pricing import brute_force, make_utility, random_lam

import fairsched.lp.pricing.milp as milp
from fairsched.lp.pricing import (
    ConcavePricing,
    FacilityLocationPricing,
    GreedyPricing,
    pricing_for,
)
from fairsched.lp.pricing.terms import swap_deltas_for
from fairsched.utilities import ConcaveModular


def worst_start(utility, k, lam):
    """The k workers of lowest singleton value f({u}) + λ_u: a poor place to start."""
    singles = utility.values(np.eye(utility.n, dtype=bool)) + lam
    start = np.zeros(utility.n, dtype=bool)
    start[np.argsort(singles)[:k]] = True
    return start


def score(utility, lam, mask):
    return float(utility.values(mask[None, :])[0] + mask @ lam)


@pytest.mark.parametrize("kind", ["sqrt", "log1p", "facility-location", "coverage"])
@pytest.mark.parametrize("seed", range(4))
def test_reaches_the_enumeration_optimum_with_strictly_better_sets(kind, seed):
    rng = np.random.default_rng(seed)
    n, k = 12, 4
    utility = make_utility(kind, n, rng)
    lam = random_lam(n, rng, 1.0)
    search = GreedyPricing(utility, k, swap_deltas=swap_deltas_for(utility))
    start = worst_start(utility, k, lam)
    found = search.perturbed(lam, start, rounds=300, seed=seed)
    values = [score(utility, lam, start)] + [score(utility, lam, m) for m in found]
    assert all(m.sum() == k for m in found)
    assert all(b > a for a, b in zip(values, values[1:]))
    assert values[-1] == pytest.approx(brute_force(utility, k, lam), rel=1e-9, abs=1e-12)


def test_same_seed_same_sets_and_target_stops_it():
    rng = np.random.default_rng(5)
    utility = make_utility("sqrt", 14, rng)
    lam = random_lam(14, rng, 1.0)
    search = GreedyPricing(utility, 5, swap_deltas=swap_deltas_for(utility))
    start = worst_start(utility, 5, lam)
    first = search.perturbed(lam, start, seed=3)
    again = search.perturbed(lam, start, seed=3)
    assert len(first) >= 1 and len(first) == len(again) and all((a == b).all() for a, b in zip(first, again))
    # a target the start already reaches: no round runs
    assert search.perturbed(lam, start, seed=3, target=score(utility, lam, start)) == []
    # a target out of reach: the same search as without one
    out_of_reach = search.perturbed(lam, start, seed=3, target=1e9)
    assert len(out_of_reach) == len(first) and all((a == b).all() for a, b in zip(first, out_of_reach))


@pytest.mark.parametrize("oracle_class", [ConcavePricing, FacilityLocationPricing])
def test_targeted_milp_call_can_return_without_the_milp(oracle_class, monkeypatch):
    """A target that greedy with 1-swaps misses but the search reaches: no MILP solve (with the
    search's time not tied to the MILP's); a fresh oracle, whose MILP time is not known yet,
    solves the MILP, as does one with the search off."""
    n, k = 20, 5
    for seed in range(100):
        rng = np.random.default_rng(seed)
        if oracle_class is ConcavePricing:  # sparse features: greedy and 1-swaps miss now and then
            utility = ConcaveModular(rng.exponential(1.0, size=(30, n)) * (rng.uniform(size=(30, n)) < 0.3), "sqrt")
        else:
            utility = make_utility("facility-location", n, rng)
        lam = random_lam(n, rng, 1.0)
        optimum = brute_force(utility, k, lam)
        warm = pricing_for(utility, k, "greedy")(lam)
        if float(warm.values[0] + warm.columns[0] @ lam) < optimum - 1e-6:
            break
    else:
        raise AssertionError("no instance where greedy with 1-swaps misses the optimum in 100 seeds")
    fresh = oracle_class(utility, k)
    fresh(lam, target=optimum - 1e-9)
    assert fresh.stats["rounds"] >= 1
    monkeypatch.setattr(milp, "PERTURBATION_VS_MILP", math.inf)
    oracle = oracle_class(utility, k)
    result = oracle(lam, target=optimum - 1e-9)
    assert oracle.stats["rounds"] == 0 and not result.exact
    assert float(result.values[0] + result.columns[0] @ lam) == pytest.approx(optimum)
    without = oracle_class(utility, k, perturbations=0)
    without(lam, target=optimum - 1e-9)
    assert without.stats["rounds"] >= 1


def test_search_goes_on_past_its_rounds_until_more_until():
    """Past its rounds the search continues the same chain while ``more_until`` lies ahead, and
    stops there at its target: from a poor start one round misses the optimum, the extended
    search reaches it."""
    n, k = 14, 5
    for seed in range(50):
        rng = np.random.default_rng(seed)
        utility = make_utility("facility-location", n, rng)
        lam = random_lam(n, rng, 1.0)
        optimum = brute_force(utility, k, lam)
        search = GreedyPricing(utility, k, swap_deltas=swap_deltas_for(utility))
        start = worst_start(utility, k, lam)
        one = search.perturbed(lam, start, rounds=1, seed=seed)
        if max((score(utility, lam, m) for m in one), default=score(utility, lam, start)) < optimum - 1e-9:
            break
    else:
        raise AssertionError("no instance where one round misses the optimum in 50 seeds")
    # a moment already past: exactly the rounds asked for
    assert all((a == b).all() for a, b in zip(search.perturbed(lam, start, rounds=1, seed=seed, more_until=0.0), one))
    assert search.last_rounds == 1
    extended = search.perturbed(lam, start, rounds=1, seed=seed, target=optimum - 1e-9,
                                more_until=time.perf_counter() + 600.0)
    assert len(extended) > len(one) and search.last_rounds >= len(extended)
    assert all((a == b).all() for a, b in zip(extended, one))  # the same chain, continued
    assert score(utility, lam, extended[-1]) == pytest.approx(optimum)


def test_milp_call_extends_the_search_only_with_a_target(monkeypatch):
    """The MILP pricing lets the search go on past its rounds, for
    ``TARGET_SEARCH_VS_MILP`` times the longest MILP solve so far, only when the call has a
    target (without one the search cannot end the call)."""
    rng = np.random.default_rng(2)
    utility = make_utility("facility-location", 12, rng)
    lam = random_lam(12, rng, 1.0)
    oracle = FacilityLocationPricing(utility, 4)
    seen = []

    def spy(lam, start, **options):
        seen.append((time.perf_counter(), options["more_until"]))
        return []

    monkeypatch.setattr(oracle.heuristic, "perturbed", spy)
    oracle._milp_seconds = 40.0
    began = time.perf_counter()
    oracle(lam, target=1e9)
    share = milp.TARGET_SEARCH_VS_MILP * 40.0
    assert share > 0 and began + share <= seen[-1][1] <= seen[-1][0] + share
    oracle(lam)
    assert seen[-1][1] == -math.inf


def test_remembered_sets_come_back_in_order_and_rebuild_the_archive():
    """``remembered`` gives the sets ``remember`` kept (each once, oldest first) with their
    values; handed to another search's ``remember``, they rebuild the same archive."""
    rng = np.random.default_rng(4)
    utility = make_utility("coverage", 13, rng)
    search = GreedyPricing(utility, 4)
    assert search.remembered()[0].shape == (0, 13)
    masks = np.zeros((5, 13), dtype=bool)
    for row in masks:
        row[rng.choice(13, 4, replace=False)] = True
    values = utility.values(masks)
    search.remember(masks[:3], values[:3])
    search.remember(masks[1:], values[1:])  # two seen already
    kept, kept_values = search.remembered()
    assert (kept == masks).all() and np.array_equal(kept_values, values)
    again = GreedyPricing(utility, 4)
    again.remember(*search.remembered())
    assert all(np.array_equal(a, b) for a, b in zip(again.remembered(), (kept, kept_values)))
