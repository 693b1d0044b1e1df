"""Pricing oracles against brute force: ``max_{|S|=k} f(S) + λ(S)`` over every ``k``-set.

For every utility kind with an exact oracle (coverage, facility location, concave of modular
with ``sqrt`` and ``log1p``, modular, mixtures of these and of the accuracy curves, and the
accuracy utility through the public dispatcher :func:`fairsched.lp.pricing.pricing_for`) an
answer that claims ``exact`` must attain the brute-force maximum to ``1e-9`` relative, and
every answer's ``upper_bound`` must be at least that maximum (the certificate column
generation's Lagrangian bound rests on).  Greedy pricing may claim a finite bound only where
the utility is certified monotone submodular.
"""

from __future__ import annotations

import functools
import itertools
import math

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairsched.lp.pricing import facility_location, greedy, milp
from fairsched.lp.pricing import concave
from fairsched.lp.pricing.concave import ConcaveTerm, concave_form
from fairsched.lp.pricing.milp import MilpModel, MilpPricing
from fairsched.lp.pricing import (
    ConcavePricing,
    CoveragePricing,
    FacilityLocationPricing,
    GreedyPricing,
    MixturePricing,
    ModularPricing,
    pricing_for,
)
from fairsched.utilities import (
    AccuracyUtility,
    CallableUtility,
    ConcaveModular,
    Coverage,
    FacilityLocation,
    Mixture,
    Modular,
    PropensityWeightedAccuracy,
)
from fairsched.solvers import k_subset_masks
from fairsched.solvers.colgen import PricingResult
from fairsched.utilities.base import SetFunction

RTOL = 1e-9
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def brute_force(utility: SetFunction, k: int, lam: np.ndarray) -> float:
    """``max_{|S|=k} f(S) + λ(S)`` by evaluating every ``k``-set."""
    n = utility.n
    masks = np.zeros((math.comb(n, k), n), dtype=bool)
    for row, subset in enumerate(itertools.combinations(range(n), k)):
        masks[row, list(subset)] = True
    return float(np.max(utility.values(masks) + masks @ lam))


def make_utility(kind: str, n: int, rng: np.random.Generator) -> SetFunction:
    """A random utility of ``kind`` on ``n`` workers (ties and zeros included on purpose); a
    ``-highs`` suffix (the backend of the oracle under test) is ignored."""
    kind = kind.removesuffix("-highs")
    if kind == "coverage":
        elements = int(rng.integers(1, 3 * n))
        covers = [sorted(rng.choice(elements, size=int(rng.integers(0, elements + 1)), replace=False).tolist())
                  for _ in range(n)]
        weights = rng.choice([0.0, 0.5, 1.0, rng.uniform(0, 2)], size=elements)
        return Coverage(covers, weights)
    if kind == "facility-location":
        points = int(rng.integers(1, 2 * n))
        sim = rng.uniform(0, 1, size=(points, n)) ** 2
        sim[rng.uniform(size=sim.shape) < 0.3] = 0.0
        return FacilityLocation(np.round(sim, int(rng.integers(1, 4))))
    if kind in ("sqrt", "log1p"):
        features = int(rng.integers(1, 6))
        feats = rng.exponential(1.0, size=(features, n)) * (rng.uniform(size=(features, n)) < 0.7)
        return ConcaveModular(feats, kind)
    if kind == "modular":
        return Modular(rng.uniform(0, 1, n))
    if kind == "accuracy":
        return AccuracyUtility(rng.integers(1, 500, n).astype(float), a=0.05, b=float(rng.uniform(0.2, 2.0)),
                               c=float(rng.uniform(-0.6, -0.1)))
    raise ValueError(kind)


def random_lam(n: int, rng: np.random.Generator, scale: float) -> np.ndarray:
    lam = rng.exponential(scale, n) * (rng.uniform(size=n) < 0.6)
    return lam


def seeded_case(kind: str, seed: int, n: int, k: int, scale: float) -> tuple[SetFunction, np.ndarray, float, float]:
    """A random utility of ``kind`` with prices of ``scale``, its pricing maximum over the
    ``k``-sets by brute force, and the tolerance of comparisons with it."""
    rng = np.random.default_rng(seed)
    utility = make_utility(kind, n, rng)
    lam = random_lam(n, rng, scale)
    best_true = brute_force(utility, k, lam)
    return utility, lam, best_true, RTOL * max(1.0, abs(best_true))


def check(oracle, utility: SetFunction, k: int, lam: np.ndarray, must_be_exact: bool) -> None:
    result = oracle(lam)
    best_true = brute_force(utility, k, lam)
    tol = RTOL * max(1.0, abs(best_true))
    assert result.columns.shape[1] == utility.n and (result.columns.sum(axis=1) == k).all()
    # the reported values are f of the reported columns
    np.testing.assert_allclose(result.values, utility.values(result.columns), rtol=1e-12, atol=1e-12)
    best = float(result.values[0] + result.columns[0] @ lam)
    assert best <= best_true + tol
    assert result.upper_bound >= best_true - tol, (result.upper_bound, best_true)
    if result.exact:
        assert best >= best_true - tol, (best, best_true)
    if must_be_exact:
        assert result.exact


EXACT_KINDS = {"coverage": CoveragePricing, "facility-location": FacilityLocationPricing,
               "sqrt": ConcavePricing, "log1p": ConcavePricing, "modular": ModularPricing,
               # concave of modular on HiGHS's tangent-cut loop; without "-highs" SCIP where installed
               "sqrt-highs": functools.partial(ConcavePricing, backend="highs"),
               "log1p-highs": functools.partial(ConcavePricing, backend="highs")}


@SETTINGS
@given(kind=st.sampled_from(sorted(EXACT_KINDS)), n=st.integers(1, 10), data=st.data(),
       seed=st.integers(0, 2**32 - 1))
def test_structured_pricing_matches_brute_force(kind: str, n: int, data, seed: int) -> None:
    k = data.draw(st.integers(1, n), label="k")
    rng = np.random.default_rng(seed)
    utility = make_utility(kind, n, rng)
    oracle = EXACT_KINDS[kind](utility, k)
    oracle_name = {"sqrt": "concave", "log1p": "concave"}.get(kind.removesuffix("-highs"), kind)
    assert type(pricing_for(utility, k, oracle_name)) is type(oracle)
    for scale in (0.0, 0.3, 3.0):
        check(oracle, utility, k, random_lam(n, rng, scale), must_be_exact=True)


MIXABLE = ("coverage", "facility-location", "sqrt", "log1p", "modular", "accuracy")


@SETTINGS
@given(kinds=st.lists(st.sampled_from(MIXABLE), min_size=1, max_size=3), n=st.integers(1, 9),
       data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_mixture_pricing_is_one_exact_milp(kinds: list[str], n: int, data, seed: int) -> None:
    k = data.draw(st.integers(1, n), label="k")
    rng = np.random.default_rng(seed)
    utility = Mixture([make_utility(kind, n, rng) for kind in kinds], rng.uniform(0.1, 2.0, len(kinds)))
    oracle = pricing_for(utility, k, enumeration_limit=0)
    assert isinstance(oracle, MixturePricing) and oracle.exact
    for scale in (0.0, 1.0):
        check(oracle, utility, k, random_lam(n, rng, scale), must_be_exact=True)


@SETTINGS
@given(n=st.integers(1, 10), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_accuracy_pricing_through_the_dispatcher(n: int, data, seed: int) -> None:
    k = data.draw(st.integers(1, n), label="k")
    rng = np.random.default_rng(seed)
    utility = make_utility("accuracy", n, rng)
    oracle = pricing_for(utility, k, enumeration_limit=0)
    for scale in (0.0, 0.05, 1.0):
        check(oracle, utility, k, random_lam(n, rng, scale), must_be_exact=False)


@SETTINGS
@given(n=st.integers(1, 9), strata=st.integers(1, 3), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_propensity_accuracy_pricing_is_exact(n: int, strata: int, data, seed: int) -> None:
    """One tangent-cut term per stratum (:class:`ConcavePricing`), through the dispatcher."""
    k = data.draw(st.integers(1, n), label="k")
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 300, size=(n, strata)).astype(float)
    sizes[np.arange(n), rng.integers(0, strata, size=n)] += 50
    utility = PropensityWeightedAccuracy(sizes, rng.dirichlet(np.ones(strata)), 0.2)
    oracle = pricing_for(utility, k, enumeration_limit=0)
    assert isinstance(oracle, ConcavePricing)
    for scale in (0.0, 0.05):
        check(oracle, utility, k, random_lam(n, rng, scale), must_be_exact=True)


@SETTINGS
@given(kind=st.sampled_from(MIXABLE), n=st.integers(2, 10), data=st.data(), seed=st.integers(0, 2**32 - 1))
def test_greedy_bound_is_certified_or_infinite(kind: str, n: int, data, seed: int) -> None:
    """The greedy bounds hold where the utility is certified monotone submodular (on non-empty
    sets for the chain bound); on an accuracy curve that jumps at ``∅`` only the latter."""
    k = data.draw(st.integers(1, n), label="k")
    rng = np.random.default_rng(seed)
    utility = make_utility(kind, n, rng)
    oracle = GreedyPricing(utility, k)
    for scale in (0.0, 1.0):
        lam = random_lam(n, rng, scale)
        check(oracle, utility, k, lam, must_be_exact=False)
        assert math.isfinite(oracle(lam).upper_bound)


def test_greedy_has_no_bound_for_a_user_function() -> None:
    """A user's callable is submodular only by promise: no certificate rests on it."""
    utility = CallableUtility(lambda S: float(len(S) ** 2), 6)  # supermodular: greedy bounds fail
    result = GreedyPricing(utility, 3)(np.zeros(6))
    assert result.upper_bound == math.inf and not result.exact


def test_mixture_with_a_user_component_has_no_false_certificate() -> None:
    """The bug this guards: a mixture with a component of unknown structure got the greedy
    ``1 − 1/e`` and chain bounds, which its supermodular part breaks."""
    n, k = 8, 4
    rng = np.random.default_rng(3)
    utility = Mixture([make_utility("coverage", n, rng), CallableUtility(lambda S: float(len(S) ** 3), n)],
                      [0.1, 1.0])
    assert utility.submodular is None
    oracle = pricing_for(utility, k, "greedy")
    result = oracle(np.zeros(n))
    assert result.upper_bound == math.inf and not result.exact
    with pytest.raises(ValueError, match="milp"):
        pricing_for(utility, k, "milp")
    # auto on a small instance falls back to enumeration, exact for any utility
    check(pricing_for(utility, k), utility, k, np.zeros(n), must_be_exact=True)


def test_non_submodular_accuracy_is_priced_exactly_in_a_mixture() -> None:
    """An accuracy curve that is not monotone at ``∅`` (``f({u}) < 0``) is still exact as a
    MILP term, since ``|S| = k >= 1``; greedy keeps only its chain bounds from ``S_1`` on."""
    n, k = 8, 3
    rng = np.random.default_rng(5)
    accuracy = AccuracyUtility(rng.integers(1, 5, n).astype(float), a=0.05, b=2.0, c=-0.3)
    assert accuracy.submodular is False and accuracy.submodular_off_empty is True
    utility = Mixture([accuracy, make_utility("coverage", n, rng)], [1.0, 0.5])
    assert utility.submodular is None
    for lam in (np.zeros(n), random_lam(n, rng, 1.0)):
        check(pricing_for(utility, k, "milp"), utility, k, lam, must_be_exact=True)
        check(GreedyPricing(utility, k), utility, k, lam, must_be_exact=False)


@pytest.mark.parametrize("kind", ["coverage", "facility-location", "sqrt"])
def test_time_limited_milp_keeps_a_certified_bound(kind: str) -> None:
    """A call stopped by its time budget returns HiGHS's dual bound, never less than the maximum."""
    rng = np.random.default_rng(11)
    n, k = 10, 5
    utility = make_utility(kind, n, rng)
    oracle = EXACT_KINDS[kind](utility, k, time_budget=1e-6)
    check(oracle, utility, k, random_lam(n, rng, 1.0), must_be_exact=False)


def signed_lam(n: int, rng: np.random.Generator, scale: float) -> np.ndarray:
    """Prices of both signs: ``λ − ν`` of a master with floors and caps."""
    return random_lam(n, rng, scale) - random_lam(n, rng, scale)


@SETTINGS
@given(kind=st.sampled_from(MIXABLE + ("mixture",)), n=st.integers(1, 9), data=st.data(),
       seed=st.integers(0, 2**32 - 1))
def test_pricing_with_cap_prices_of_either_sign(kind: str, n: int, data, seed: int) -> None:
    """With caps the pricing sees ``λ − ν``, negative where a cap binds: every exact oracle
    must still attain the maximum, and every bound (greedy's included, which needs ``f + λ``
    monotone) must still hold."""
    k = data.draw(st.integers(1, n), label="k")
    rng = np.random.default_rng(seed)
    if kind == "mixture":
        utility = Mixture([make_utility(kind, n, rng) for kind in ("coverage", "accuracy")], [1.0, 0.5])
    else:
        utility = make_utility(kind, n, rng)
    structured = pricing_for(utility, k, enumeration_limit=0)
    for scale in (0.05, 1.0):
        lam = signed_lam(n, rng, scale)
        check(structured, utility, k, lam, must_be_exact=kind != "accuracy")
        check(GreedyPricing(utility, k), utility, k, lam, must_be_exact=False)


def test_greedy_bound_under_negative_prices_regression() -> None:
    """Found by a search: greedy pricing's chain bound computed on ``f + λ`` with negative
    entries certified 13.029 while the maximum is 13.321; it must bound through ``f + λ⁺``."""
    rng = np.random.default_rng(2160)
    n = int(rng.integers(2, 10))
    k = int(rng.integers(1, n + 1))
    utility = make_utility("coverage", n, rng)
    lam = signed_lam(n, rng, 1.0)
    assert (n, k) == (5, 3) and (lam < 0).any()
    check(GreedyPricing(utility, k), utility, k, lam, must_be_exact=False)


def test_coverage_pricing_with_k_equal_to_n_counts_each_element_once() -> None:
    """Found by the signed-prices property test: with ``k = n`` an element with one coverer was
    counted both in the constant (every ``k``-set covers it) and in its coverer's cost, so the
    MILP's bound was ``f + w`` instead of ``f`` and never certified the (only) set."""
    rng = np.random.default_rng(19)
    utility = make_utility("coverage", 1, rng)
    lam = np.array([-0.13496385])
    check(pricing_for(utility, 1, enumeration_limit=0), utility, 1, lam, must_be_exact=True)
    utility = Coverage([[0, 1], [1], [2]], [1.0, 2.0, 0.5])
    check(CoveragePricing(utility, 3), utility, 3, np.array([0.3, -0.2, 0.0]), must_be_exact=True)


@pytest.mark.parametrize("kind", ["sqrt", "facility-location"])
def test_enough_stops_the_milp_at_a_certified_bound(kind: str) -> None:
    """``enough`` above the maximum: the call may stop once its bound is there, and the bound
    stays certified (never below the maximum, never above ``enough``); ``enough`` below the
    maximum cannot be reached, so the call is exact as without it."""
    stopped = 0
    for seed in range(6):
        k = 5
        utility, lam, best_true, tol = seeded_case(kind, seed, 14, k, 0.3)
        enough = best_true + 1e-3 * abs(best_true)
        oracle = EXACT_KINDS[kind](utility, k, perturbations=0)
        result = oracle(lam, enough=enough)
        best = float(result.values[0] + result.columns[0] @ lam)
        assert best_true - tol <= result.upper_bound <= enough
        assert best <= best_true + tol
        stopped += not result.exact
        unreachable = EXACT_KINDS[kind](utility, k, perturbations=0)(lam, enough=best_true - 1e-2)
        assert unreachable.exact
        assert float(unreachable.values[0] + unreachable.columns[0] @ lam) >= best_true - tol
    assert stopped >= 1  # on these seeds the root or a MILP round already certifies enough


CUTOFF_KINDS = sorted(kind for kind in EXACT_KINDS if kind != "modular")


@SETTINGS
@given(kind=st.sampled_from(CUTOFF_KINDS), n=st.integers(4, 10), data=st.data(),
       seed=st.integers(0, 2**32 - 1))
def test_enough_is_a_cutoff_that_hides_no_better_set(kind: str, n: int, data, seed: int) -> None:
    """``enough`` is the solver's cutoff (nodes bounded by it are pruned), with ``enough`` and
    ``target`` anywhere around the maximum: the bound never falls below the maximum, the call
    ends having done one of its jobs (the maximum, a set worth the target, or a bound at or
    below ``enough``), and with ``enough`` below the maximum and no target it still finds the
    maximum, exact: the cutoff prunes nothing worth more than ``enough``."""
    k = data.draw(st.integers(1, n - 1), label="k")
    rng = np.random.default_rng(seed)
    utility = make_utility(kind, n, rng)
    lam = random_lam(n, rng, data.draw(st.sampled_from([0.0, 0.3, 3.0]), label="scale"))
    masks = np.zeros((math.comb(n, k), n), dtype=bool)
    for row, S in zip(masks, itertools.combinations(range(n), k)):
        row[list(S)] = True
    every = np.sort(utility.values(masks) + masks @ lam)
    best_true, spread = float(every[-1]), max(1e-3, float(every[-1] - every[0]))
    tol = RTOL * max(1.0, abs(best_true))
    enough = best_true + spread * data.draw(st.floats(-0.5, 0.5), label="enough above the maximum")
    target = data.draw(st.one_of(st.none(), st.floats(-0.5, 0.1).map(lambda t: best_true + spread * t)),
                       label="target")
    result = EXACT_KINDS[kind](utility, k, perturbations=0)(lam, target=target, enough=enough)
    np.testing.assert_allclose(result.values, utility.values(result.columns), rtol=1e-12, atol=1e-12)
    best = float(result.values[0] + result.columns[0] @ lam)
    assert best <= best_true + tol
    assert result.upper_bound >= best_true - tol, (result.upper_bound, best_true, enough)
    assert result.exact or (target is not None and best >= target - tol) or result.upper_bound <= enough + tol
    if target is None and enough < best_true - tol:
        assert result.exact
        assert best >= best_true - tol


class WorstStart:
    """A pricing heuristic that offers only the worst ``k``-set, with no bound: the MILP then
    starts from an incumbent far below the maximum."""

    restart_seconds = 0.0

    def __init__(self, utility: SetFunction, k: int):
        self.utility, self.k = utility, k

    def __call__(self, lam: np.ndarray) -> PricingResult:
        masks = k_subset_masks(self.utility.n, self.k)
        values = self.utility.values(masks)
        worst = int(np.argmin(values + masks @ lam))
        return PricingResult(masks[worst:worst + 1], values[worst:worst + 1], math.inf, False)

    def remember(self, columns: np.ndarray, values: np.ndarray) -> None:
        pass


@pytest.mark.parametrize("kind", ["coverage", "facility-location", "sqrt-highs", "log1p-highs"])
def test_a_cutoff_above_the_maximum_never_reports_the_start_as_the_bound(kind: str) -> None:
    """``enough`` between the maximum and the LP bound (at the maximum where the LP is tight),
    the MILP started from the worst set: HiGHS prunes every node (none is worth more than
    ``enough``) and reports its start as optimal, with the start's value as dual bound.  That
    value is no bound on the maximum: the call must report ``enough`` or less, never less
    than the maximum."""
    for seed in range(12):
        k = 4
        utility, lam, best_true, tol = seeded_case(kind, seed, 12, k, 0.1)
        oracle = EXACT_KINDS[kind](utility, k, perturbations=0)
        enough = 0.5 * (best_true + max(best_true, oracle.relaxation_bound(lam)))
        oracle.heuristic = WorstStart(utility, k)
        rounds = oracle.stats["rounds"]
        result = oracle(lam, enough=enough)
        assert oracle.stats["rounds"] > rounds  # the MILP ran, under the cutoff
        assert best_true - tol <= result.upper_bound <= enough + tol, (result.upper_bound, best_true, enough)


@pytest.mark.parametrize("kind", ["sqrt", "facility-location", "coverage"])
def test_milp_sets_become_the_heuristics_starts(kind: str) -> None:
    """Every set an exact call returns is remembered by its heuristic (which keeps only its
    own best few), so the heuristic's next call at the same prices restarts from the exact
    best set and is at least as good."""
    for seed in range(4):
        rng = np.random.default_rng(seed)
        n, k = 14, 5
        utility = make_utility(kind, n, rng)
        lam = random_lam(n, rng, 0.3)
        oracle = EXACT_KINDS[kind](utility, k, perturbations=0)
        exact = oracle(lam)
        assert exact.exact
        best = float(exact.values[0] + exact.columns[0] @ lam)
        assert exact.columns.shape[0] > 1 + greedy.MIN_RESTARTS
        assert all(np.packbits(c).tobytes() in oracle.heuristic._archive_keys for c in exact.columns)
        again = oracle.heuristic(lam)
        assert float(again.values[0] + again.columns[0] @ lam) >= best - RTOL * max(1.0, abs(best))


def test_restart_seconds_caps_the_restarts_beyond_the_first() -> None:
    """With ``restart_seconds = 0`` the heuristic climbs from the greedy set and the first
    :data:`MIN_RESTARTS` remembered sets only; without a cap, from all ``restarts`` of them."""
    rng = np.random.default_rng(0)
    n, k = 20, 4
    utility = make_utility("sqrt", n, rng)
    masks = np.zeros((40, n), dtype=bool)
    for row in masks:
        row[rng.choice(n, k, replace=False)] = True
    climbs = {}
    for cap in (0.0, math.inf):
        oracle = GreedyPricing(utility, k, restarts=30)
        oracle.remember(masks, utility.values(masks))
        oracle.restart_seconds = cap
        original = oracle._climb
        calls = []
        oracle._climb = lambda *args, **kwargs: calls.append(1) or original(*args, **kwargs)
        oracle(np.zeros(n))
        climbs[cap] = len(calls)
    assert climbs == {0.0: 1 + greedy.MIN_RESTARTS, math.inf: 31}


def test_cut_pool_drops_idle_cuts_least_recently_used_first() -> None:
    """Rows before ``freeze`` stay; the cuts binding at a noted solution (or added) since the
    last drop stay; idle ones go, oldest first, until the pool is within the limit, are deleted
    from HiGHS (the survivors keep their bounds, in order) and their keys may be added again;
    a duplicate key adds nothing and is not built; without a solution noted since the last drop nothing goes."""
    model = MilpModel(3, 1)
    model.add_rows(np.array([5.0]), sp.csr_array(np.array([[1.0, 1.0, 1.0]])))
    model.freeze()
    permanent = model.num_row

    built = []

    def cuts(keys: list[str], upper: list[float]) -> int:
        def rows(fresh: np.ndarray) -> tuple[np.ndarray, sp.csr_array]:
            built.append(fresh.tolist())
            return np.array(upper)[fresh], sp.csr_array(np.eye(3)[: len(keys)][fresh])

        return model.add_cuts(keys, rows)

    def slack_everywhere() -> None:
        model.note_binding(np.full(model.num_row, -10.0))

    assert cuts(["a", "b", "c"], [1.0, 2.0, 3.0]) == 3
    assert cuts(["b", "d"], [2.0, 4.0]) == 1
    assert built == [[0, 1, 2], [1]]  # rows are built for the new keys only
    assert model.num_cuts == 4 and model.num_row == permanent + 4
    activity = np.zeros(permanent + 4)
    activity[permanent:] = [1.0, 0.5, 3.0 - 1e-12, 0.0]  # "a" and "c" binding
    model.note_binding(activity)
    assert model.drop_idle_cuts(limit=0) == 0  # all four were added since the last drop
    model.note_binding(activity)
    assert model.drop_idle_cuts(limit=0) == 2  # now "b" and "d" are idle
    assert model.num_cuts == 2 and model.num_row == permanent + 2
    np.testing.assert_array_equal(model.h.getLp().row_upper_[permanent:], [1.0, 3.0])
    assert cuts(["a", "b"], [1.0, 2.0]) == 1  # "b" was dropped, "a" is still there
    assert model.drop_idle_cuts(limit=0) == 0  # no solution noted since the last drop
    slack_everywhere()
    assert model.drop_idle_cuts(limit=5) == 0  # within the limit: nothing goes
    assert cuts(["e"], [6.0]) == 1
    slack_everywhere()
    # idle: "a", "c" (binding two drops ago) and "b" (added one drop ago); one must go, the oldest
    assert model.drop_idle_cuts(limit=3) == 1
    np.testing.assert_array_equal(model.h.getLp().row_upper_[permanent:], [3.0, 2.0, 6.0])
    slack_everywhere()
    assert model.drop_idle_cuts(limit=0) == 3
    assert model.num_row == permanent and model.num_cuts == 0


def test_cut_pool_usage_restored_on_a_fresh_model_drops_the_same_cuts() -> None:
    """A second model given the first's cuts and, through ``restore_usage``, the usage state
    ``cut_pool`` reported drops the same cuts as the first; usage for another number of cuts is
    refused with the two counts."""

    def model_with(keys: list[str]) -> MilpModel:
        model = MilpModel(3, 1)
        model.freeze()
        model.add_cuts(keys, lambda fresh: (np.arange(1.0, len(keys) + 1)[fresh],
                                            sp.csr_array(np.eye(3)[: len(keys)][fresh])))
        return model

    keys = ["a", "b", "c"]
    first = model_with(keys)
    activity = np.array([1.0, 1.0, 0.0, 0.0])  # the row Σ x = k, then the cuts: "a" binding
    first.note_binding(activity)
    first.drop_idle_cuts(limit=3)  # nothing goes, the epoch moves on
    first.note_binding(activity)
    state = first.cut_pool()
    second = model_with(keys)
    second.restore_usage(*state[1:])
    np.testing.assert_array_equal(second.cut_pool()[1], state[1])
    assert second.cut_pool()[2:] == state[2:]
    assert first.drop_idle_cuts(limit=1) == second.drop_idle_cuts(limit=1) == 2
    assert first.cut_pool()[0] == second.cut_pool()[0] == ["a"]
    with pytest.raises(ValueError, match="usage for 2 cuts given, the pool holds 1"):
        second.restore_usage(np.zeros(2, dtype=np.int64), 0, True)


def seeded_oracle(kind: str, seed: int, n: int, k: int, scale: float) -> tuple[SetFunction, MilpPricing, np.ndarray]:
    """A random ``kind`` utility, its exact oracle (no perturbations) and random prices λ."""
    rng = np.random.default_rng(seed)
    utility = make_utility(kind, n, rng)
    return utility, EXACT_KINDS[kind](utility, k, perturbations=0), random_lam(n, rng, scale)


@pytest.mark.parametrize("kind", ["coverage", "facility-location", "sqrt", "log1p"])
def test_relaxation_bound_is_an_upper_bound_at_the_prices_given(kind: str) -> None:
    """``relaxation_bound(λ)`` is at or above ``max_{|S|=k} f(S) + λ(S)`` (enumerated), it
    prices the λ it is given (a uniform shift ``c`` adds exactly ``c·k``: ``Σ x = k``), and a
    λ of the wrong shape is refused."""
    k = 3
    for seed in range(5):
        utility, oracle, lam = seeded_oracle(kind, seed, 9, k, 1.0)
        best = brute_force(utility, k, lam)
        bound = oracle.relaxation_bound(lam)
        assert bound >= best - 1e-7 * max(1.0, abs(best))
        assert oracle.relaxation_bound(lam + 2.5) == pytest.approx(bound + 2.5 * k, rel=1e-7, abs=1e-7)
    with pytest.raises(ValueError, match=r"lam must have shape \(9,\), got \(8,\)"):
        oracle.relaxation_bound(np.zeros(8))


@pytest.mark.parametrize("seed", range(5))
def test_facility_cuts_from_the_start_are_the_sorted_threshold_rows(seed: int, monkeypatch) -> None:
    """With every threshold from the start the model is the whole sorted-threshold
    formulation: its LP relaxation needs no cut, and its bound is the one the cut loop reaches
    from no threshold rows at all (both are that formulation's LP bound); with a few levels,
    one row per point and distinct level below its largest similarity; none in a mixture."""
    n, k = 12, 4
    utility, _, lam = seeded_oracle("facility-location", seed, n, k, 1.0)
    monkeypatch.setattr(facility_location, "START_LEVELS", 1)
    lazy = FacilityLocationPricing(utility, k, perturbations=0)
    base_rows = lazy.model.num_row
    loop_bound = lazy.relaxation_bound(lam)
    monkeypatch.setattr(facility_location, "START_LEVELS", n)
    full = FacilityLocationPricing(utility, k, perturbations=0)
    bound = full.relaxation_bound(lam)
    assert full.stats["cuts"] == 0
    assert bound == pytest.approx(loop_bound, rel=1e-9, abs=1e-9)
    assert bound >= brute_force(utility, k, lam) - 1e-9
    monkeypatch.setattr(facility_location, "START_LEVELS", 3)
    few = FacilityLocationPricing(utility, k, perturbations=0)
    term = few.terms[0][1]
    levels = [sum(0 < row[j] < row[j - 1] for j in (1, 2)) for row in term.sorted]
    assert few.model.num_row - base_rows == sum(levels)
    # in a mixture the facility-location term starts without them (module docstring)
    mixture = MixturePricing(Mixture([utility, Modular(np.ones(n))], [1.0, 1.0]), k, perturbations=0)
    assert mixture.model.num_row == base_rows


def test_facility_location_highs_options_reach_its_model_only(monkeypatch) -> None:
    """``facility_location.HIGHS_OPTIONS`` are set on a facility-location pricing model over the
    package's options, are read when the model is built, and leave a mixture's model (another
    kind) with the package's; the calls stay exact."""
    n, k = 12, 4
    utility, _, lam = seeded_oracle("facility-location", 0, n, k, 1.0)
    option = "mip_pscost_minreliable"
    assert milp.HIGHS_OPTIONS[option] == 0
    monkeypatch.setattr(facility_location, "HIGHS_OPTIONS", {option: 3})
    oracle = FacilityLocationPricing(utility, k, perturbations=0)
    assert oracle.h.getOptionValue(option)[1] == 3
    assert oracle.h.getOptionValue("mip_heuristic_run_rins")[1] is False  # the package's stay
    check(oracle, utility, k, lam, must_be_exact=True)
    mixture = MixturePricing(Mixture([utility, Modular(np.ones(n))], [1.0, 1.0]), k, perturbations=0)
    assert mixture.h.getOptionValue(option)[1] == 0
    monkeypatch.setattr(facility_location, "HIGHS_OPTIONS", {})
    assert FacilityLocationPricing(utility, k, perturbations=0).h.getOptionValue(option)[1] == 0


@pytest.mark.parametrize("kind", ["sqrt", "facility-location"])
def test_dropping_idle_cuts_keeps_the_relaxation_optimum(kind: str, monkeypatch) -> None:
    """The cuts binding at the cut LP relaxation's optimum are kept: after dropping the rest,
    the relaxation has the same optimum and needs no new cut (a dropped binding cut would
    show as a new one)."""
    # at this size the cuts from the start would be every facility-location cut: none to pool
    monkeypatch.setattr(facility_location, "START_LEVELS", 1)
    dropped = 0
    for seed in range(4):
        _, oracle, lam = seeded_oracle(kind, seed, 14, 5, 0.3)
        bound = oracle.relaxation_bound(lam)
        if oracle.model.num_cuts == 0:
            continue
        assert oracle.model.drop_idle_cuts(limit=0) == 0  # every cut is new: none idle yet
        cuts = oracle.stats["cuts"]
        assert oracle.relaxation_bound(lam) == pytest.approx(bound, rel=1e-9, abs=1e-9)
        dropped += oracle.model.drop_idle_cuts(limit=0)  # those not binding at that optimum
        assert oracle.relaxation_bound(lam) == pytest.approx(bound, rel=1e-9, abs=1e-9)
        assert oracle.stats["cuts"] == cuts
    assert dropped > 0


@pytest.mark.parametrize("kind", ["log1p-highs", "facility-location"])  # the cut pool is HiGHS's
def test_exact_calls_stay_exact_while_the_pool_is_purged(kind: str, monkeypatch) -> None:
    """Ten calls on one oracle at moving prices, with a pool that keeps no idle cut: every
    call exact against brute force, and idle cuts were dropped along the way."""
    monkeypatch.setattr(milp, "CUT_POOL_ROWS", 0)
    monkeypatch.setattr(facility_location, "START_LEVELS", 1)  # cuts to pool at this size
    rng = np.random.default_rng(7)
    n, k = 12, 4
    utility = make_utility(kind, n, rng)
    oracle = EXACT_KINDS[kind](utility, k, perturbations=0)
    lam = random_lam(n, rng, 0.3)
    for _ in range(10):
        lam = np.maximum(0.0, lam + rng.normal(0.0, 0.1, n))
        check(oracle, utility, k, lam, must_be_exact=True)
    assert oracle.stats["dropped"] > 0


def brute_force_pricing(utility: SetFunction, k: int, lam: np.ndarray) -> float:
    masks = np.zeros((math.comb(utility.n, k), utility.n), dtype=bool)
    for row, S in zip(masks, itertools.combinations(range(utility.n), k)):
        row[list(S)] = True
    return float((utility.values(masks) + masks @ lam).max())


@pytest.mark.parametrize("seed", range(6))
def test_a_solve_stopped_at_its_enough_bound_does_not_stop_the_next(seed):
    """HiGHS keeps a callback's interrupt flag across runs: after one solve stopped at the
    caller's ``enough``, every later solve of the model used to stop at its first callback,
    with nothing proved."""
    rng = np.random.default_rng(seed)
    n, k = 18, 5
    utility = FacilityLocation(rng.uniform(0.0, 1.0, (40, n)) ** 2)
    oracle = pricing_for(utility, k, "auto")
    oracle.perturbations = 0
    first, second = rng.uniform(0.0, 0.3, n), rng.uniform(0.0, 0.3, n)
    best_first = brute_force_pricing(utility, k, first)
    rounds = oracle.stats["rounds"]
    stopped = oracle(first, enough=best_first + 1e-7)
    assert oracle.stats["rounds"] > rounds  # the MILP ran, and stopped once its bound got there
    assert best_first - 1e-9 <= stopped.upper_bound <= best_first + 1e-7
    answer = oracle(second)
    assert answer.exact
    assert answer.upper_bound == pytest.approx(brute_force_pricing(utility, k, second), abs=1e-7)


def _sparse_features(n: int, features: int, per_worker: int, rng: np.random.Generator) -> np.ndarray:
    """Features with ``per_worker`` lognormal nonzeros per worker (where sqrt's tangents are weak)."""
    values = np.zeros((features, n))
    for u in range(n):
        values[rng.choice(features, size=per_worker, replace=False), u] = rng.lognormal(0.0, 1.0, per_worker)
    return values


@pytest.mark.parametrize("curve", ["sqrt", "log1p"])
def test_submodular_cuts_hold_at_every_k_set(curve: str) -> None:
    """Each submodular cut ``t_j <= const + coef·x`` of a concave term, built at a random
    fractional point, holds at every ``k``-set by enumeration, and is tight at its own ``T``
    (the ``k`` largest coordinates of the point)."""
    for seed in range(30):
        rng = np.random.default_rng(seed)
        n, k = int(rng.integers(3, 9)), int(rng.integers(1, 4))
        feats = _sparse_features(n, 4, 2, rng) if seed % 2 else rng.exponential(1.0, (3, n))
        term = ConcaveTerm(concave_form(ConcaveModular(feats, curve)), k)
        x = rng.uniform(0, 1, n)
        terms, const, coef = term.submodular_cuts(x)
        W = term.W.toarray()
        members = np.zeros(n, dtype=bool)
        members[np.argsort(-x, kind="stable")[:k]] = True
        phi = np.sqrt if curve == "sqrt" else np.log1p
        for subset in itertools.combinations(range(n), k):
            s = np.zeros(n)
            s[list(subset)] = 1.0
            true = phi(W[terms] @ s)
            assert np.all(true <= const + coef @ s + 1e-9 * np.maximum(1.0, true)), (seed, subset)
        np.testing.assert_allclose(const + coef @ members, phi(W[terms] @ members), rtol=1e-12, atol=1e-12)


def test_submodular_cuts_tighten_the_concave_root_bound(monkeypatch) -> None:
    """On sparse sqrt features the root LP bound of the pricing MILP with the submodular cuts is
    at most the one with tangents alone, strictly lower on most instances, and never below
    the pricing maximum (by enumeration)."""
    tighter = 0
    for seed in range(6):
        rng = np.random.default_rng(seed)
        n, k = 12, 3
        utility = ConcaveModular(_sparse_features(n, 8, 2, rng), "sqrt")
        lam = random_lam(n, rng, 0.3)
        best = brute_force(utility, k, lam)
        bounds = {}
        for submodular in (False, True):
            monkeypatch.setattr(concave, "SUBMODULAR_CUTS", submodular)
            oracle = ConcavePricing(utility, k, perturbations=0)
            bounds[submodular] = oracle.relaxation_bound(lam)
        assert best <= bounds[True] + 1e-7 * max(1.0, best)
        assert bounds[True] <= bounds[False] + 1e-9 * max(1.0, best)
        tighter += bounds[True] < bounds[False] - 1e-6 * max(1.0, best)
    assert tighter >= 4
