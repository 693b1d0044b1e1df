"""Column generation (fairsched.solvers.colgen), the pricing oracles (fairsched.lp.pricing) and
optimum(method="column-generation") against enumeration and brute force."""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from typing import ClassVar

import fairsched.solvers.lp
import highspy
import numpy as np
import pytest
from conftest import INSTANCES, bundled_instances
from fairsched.solvers import (
    InfeasibleLPError,
    PricingResult,
    colgen,
    column_generation,
    k_subset_masks,
    reduced_costs,
    solve_distribution_lp,
)

from fairsched.cli import main
from fairsched.errors import InfeasibleError, TooLargeError
from fairsched.instances import load_instance
from fairsched.instances.generators import PAPER_BETAS
from fairsched.lp.pricing import (
    AccuracyPricing,
    CoveragePricing,
    EnumerationPricing,
    FacilityLocationPricing,
    GreedyPricing,
    ModularPricing,
    initial_pool,
    pricing_for,
    systematic_sets,
)
from fairsched.lp.pricing import coverage as coverage_pricing
from fairsched.lp.pricing import facility_location as facility_pricing
from fairsched.lp.solve import ENUMERATION_THRESHOLD, optimum
from fairsched.problem import Problem
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

KINDS = ("accuracy", "coverage", "facility-location", "concave-modular", "modular", "mixture",
         "mixture-accuracy", "propensity-accuracy", "python")


# ----------------------------------------------------------------------------- helpers


def random_utility(kind: str, n: int, rng: np.random.Generator):
    if kind == "accuracy":
        sizes = rng.integers(50, 1001, n).astype(float) if rng.random() < 0.5 else rng.uniform(50, 1000, n)
        return AccuracyUtility(sizes, a=0.05, b=0.5, c=-rng.uniform(0.1, 0.6))
    if kind == "coverage":
        elements = int(rng.integers(4, 25))
        covers = [sorted(rng.choice(elements, size=int(rng.integers(1, elements // 2 + 2)), replace=False).tolist())
                  for _ in range(n)]
        return Coverage(covers, rng.uniform(0.2, 2.0, elements).round(3))
    if kind == "facility-location":
        return FacilityLocation((rng.uniform(0, 1, (int(rng.integers(2, 12)), n)) ** 2).round(3))
    if kind == "concave-modular":
        return ConcaveModular(rng.exponential(1.0, (3, n)), str(rng.choice(["sqrt", "log1p"])))
    if kind == "modular":
        return Modular(rng.uniform(0, 1, n))
    if kind == "mixture":
        return Mixture([Coverage([[u % 5, (u * 3) % 7] for u in range(n)], np.ones(7)),
                        Modular(rng.uniform(0, 1, n))], [1.0, 0.5])
    if kind == "mixture-accuracy":
        return Mixture([AccuracyUtility(rng.integers(50, 1001, n).astype(float)),
                        Coverage([[u % 4, (u * 5) % 9] for u in range(n)], rng.uniform(0.05, 0.2, 9).round(3)),
                        Modular(rng.uniform(0, 0.05, n))], [1.0, 0.5, 1.0])
    if kind == "propensity-accuracy":
        return PropensityWeightedAccuracy(rng.uniform(0, 500, (n, 2)).round(), shares=[0.7, 0.3],
                                          transfer=float(rng.uniform(0, 0.2)))
    weights = rng.uniform(0.5, 2.0, n)
    return CallableUtility(lambda S: float(np.sqrt(weights[list(S)].sum())), n)


def random_floors(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Feasible floors: a random point of {0 <= r <= 1, Σr <= k}, some zero, some near k."""
    r = rng.dirichlet(np.ones(n)) * k * rng.uniform(0.3, 1.0)
    for _ in range(50):
        if (r <= 1).all():
            break
        r = np.minimum(r, 1.0)
    r[rng.random(n) < 0.25] = 0.0
    return r


def random_problem(kind: str, seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 15))
    k = int(rng.integers(1, n))
    return Problem(random_utility(kind, n, rng), k, random_floors(n, k, rng))


def check_distribution(opt, problem: Problem) -> None:
    """The returned distribution is a fair distribution over k-sets attaining ``value``."""
    assert opt.probabilities.sum() == pytest.approx(1.0, abs=1e-9)
    marginals = np.zeros(problem.n)
    achieved = 0.0
    for S, p in zip(opt.support, opt.probabilities):
        assert S.size == problem.k
        marginals[S] += p
        achieved += p * problem.utility.value(S)
    assert (marginals >= problem.r - 1e-8).all()
    assert achieved == pytest.approx(opt.value, abs=1e-9)
    assert opt.upper_bound >= opt.value


def brute_force_max(utility, k: int, lam: np.ndarray) -> float:
    masks = k_subset_masks(utility.n, k)
    return float((utility.values(masks) + masks @ lam).max())


# ----------------------------------------------------------------------------- against enumeration


@pytest.mark.parametrize("path", bundled_instances(), ids=lambda p: p.stem)
def test_bundled_instances_match_enumeration(path):
    problem = load_instance(path)
    cg = optimum(problem, method="column-generation", gap=1e-9)
    assert cg.method.startswith("column-generation+exact-pricing(")
    assert cg.status == "optimal" and cg.success
    assert cg.value == pytest.approx(optimum(problem, method="enumeration").value, abs=1e-7)
    assert cg.relative_gap <= 1e-9
    check_distribution(cg, problem)


@pytest.mark.parametrize("beta", PAPER_BETAS)
def test_paper_instance_every_beta(beta):
    problem = load_instance(INSTANCES / "paper.toml", beta=beta)
    cg = optimum(problem, method="column-generation", gap=1e-9)
    assert cg.method == "column-generation+exact-pricing(accuracy-dp)"
    assert cg.value == pytest.approx(optimum(problem, method="enumeration").value, abs=1e-7)
    assert cg.upper_bound - cg.value <= 1e-9


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(50))
def test_random_instances_exact_pricing(kind, seed):
    problem = random_problem(kind, seed)
    reference = optimum(problem, method="enumeration").value
    cg = optimum(problem, method="column-generation", gap=1e-9)
    # accuracy/coverage/facility location/modular have exact structured oracles; the other
    # kinds are priced by enumeration at this size, so every kind is exact here.
    assert "exact-pricing" in cg.method, cg.method
    assert cg.value == pytest.approx(reference, abs=1e-7)
    assert cg.upper_bound >= reference - 1e-9
    check_distribution(cg, problem)


@pytest.mark.parametrize("kind", ["concave-modular", "mixture", "python", "coverage"])
@pytest.mark.parametrize("seed", range(8))
def test_greedy_pricing_bounds_are_honest(kind, seed):
    problem = random_problem(kind, 100 + seed)
    reference = optimum(problem, method="enumeration").value
    cg = optimum(problem, method="column-generation", pricing="greedy")
    assert cg.method == "column-generation+greedy-pricing"
    assert cg.value <= reference + 1e-9
    assert cg.upper_bound >= reference - 1e-9
    check_distribution(cg, problem)


def test_auto_chooses_by_size_and_enumeration_still_refuses():
    problem = Problem(AccuracyUtility(np.arange(50.0, 66.0)), 8, np.full(16, 0.1))  # C(16, 8) = 12,870
    assert optimum(problem).method == "enumeration+highs"
    assert optimum(problem, max_columns=1000).method.startswith("column-generation")
    with pytest.raises(TooLargeError, match="12,870"):
        optimum(problem, method="enumeration", max_columns=1000)
    assert optimum(problem, backend="cvxpy").method.startswith("enumeration+cvxpy")
    big = Problem(AccuracyUtility(np.arange(50.0, 70.0)), 10, np.full(20, 0.2))
    assert math.comb(20, 10) > ENUMERATION_THRESHOLD
    assert optimum(big).method.startswith("column-generation")
    # heuristic pricing only brackets U_opt: auto enumerates while max_columns allows it
    mid = Problem(ConcaveModular(np.random.default_rng(0).exponential(1.0, (3, 18))), 9, np.full(18, 0.3))
    assert math.comb(18, 9) > ENUMERATION_THRESHOLD
    assert optimum(mid, pricing="greedy").method == "enumeration+highs"
    assert optimum(mid, pricing="greedy", max_columns=1000).method == "column-generation+greedy-pricing"


def test_time_limit_returns_certified_bounds():
    rng = np.random.default_rng(3)
    n, k = 300, 30
    problem = Problem(AccuracyUtility(rng.integers(50, 1001, n).astype(float)), k, random_floors(n, k, rng))
    opt = optimum(problem, time_limit=1e-3, gap=1e-12)
    assert opt.status == "time-limit" and not opt.success
    assert opt.upper_bound >= opt.value
    check_distribution(opt, problem)


def test_gap_is_relative_everywhere_and_absolute_gap_is_the_difference():
    problem = load_instance(INSTANCES / "coverage.toml")
    opt = optimum(problem, method="column-generation", gap=0.05, pricing="greedy")
    assert opt.absolute_gap == pytest.approx(opt.upper_bound - opt.value)
    assert opt.gap == pytest.approx(opt.absolute_gap / abs(opt.value)) and opt.gap > 0
    assert opt.relative_gap == opt.gap
    # the stopping rule `gap=` is on the same relative gap as the result's
    assert opt.gap <= 0.05 or opt.status != "optimal"
    assert opt.success == (opt.status == "optimal") and opt.message and opt.seconds > 0
    data = opt.as_dict(problem)
    assert data["gap"] == opt.gap and data["absolute_gap"] == opt.absolute_gap
    assert data["status"] == opt.status and data["success"] is opt.success


# ----------------------------------------------------------------------------- pricing oracles


@pytest.mark.parametrize("enumerate_limit", [0, 5_000], ids=["search", "default"])
@pytest.mark.parametrize("seed", range(40))
def test_accuracy_pricing_is_exact(seed, enumerate_limit):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 15))
    k = int(rng.integers(1, n + 1))
    sizes = rng.integers(50, 1000, n).astype(float) if seed % 2 else rng.uniform(50, 1000, n)
    c = -rng.uniform(0.1, 1.0)
    utility = AccuracyUtility(sizes, c=c)
    # Prices near the tangent slope make many sets nearly tie: the hard case for the bound.
    eta = -0.5 * c * np.sort(sizes)[::-1][:k].sum() ** (c - 1)
    lam = np.maximum(0.0, eta * (sizes.max() - sizes) + rng.normal(0, 1, n) * eta * rng.choice([1e-3, 1, 10]))
    # enumerate_limit=0 forces the dynamic programme (integer sizes) or branch and bound
    oracle = AccuracyPricing(utility, k, enumerate_limit=enumerate_limit)
    assert oracle.name == ("accuracy-dp" if seed % 2 else "accuracy-bb")
    result = oracle(lam)
    truth = brute_force_max(utility, k, lam)
    found = float(result.values[0] + result.columns[0] @ lam)
    assert result.exact
    assert found == pytest.approx(truth, rel=1e-12, abs=1e-12)
    assert result.upper_bound >= truth - 1e-14
    assert result.upper_bound - found <= 1e-12 * max(1.0, abs(found))
    assert np.allclose(result.values, utility.values(result.columns))
    assert (result.columns.sum(axis=1) == k).all()


def test_accuracy_pricing_paths_are_exercised():
    """Near-tie prices like those above reach the DP and the branch and bound."""
    used = {"dp": 0, "branched": 0}
    for seed in range(60):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(4, 16))
        k = int(rng.integers(2, n))
        sizes = rng.integers(50, 1000, n).astype(float) if seed % 2 else rng.uniform(50, 1000, n)
        c = -rng.uniform(0.1, 1.0)
        utility = AccuracyUtility(sizes, c=c)
        eta = -0.5 * c * (np.sort(sizes)[::-1][:k].sum() * rng.uniform(0.6, 1.0)) ** (c - 1)
        lam = np.maximum(0.0, eta * (sizes.max() - sizes)
                         + rng.normal(0, 1, n) * eta * rng.choice([1e-3, 1e-1, 1, 10]))
        oracle = AccuracyPricing(utility, k, enumerate_limit=0)
        result = oracle(lam)
        assert result.exact
        assert float(result.values[0] + result.columns[0] @ lam) == pytest.approx(
            brute_force_max(utility, k, lam), rel=1e-12, abs=1e-12)
        used["dp"] += oracle.stats["dp"]
        used["branched"] += oracle.stats["nodes"] > 1
    assert used["dp"] > 0 and used["branched"] > 0


@pytest.mark.parametrize("seed", range(30))
def test_accuracy_pricing_is_exact_at_prices_tied_on_a_line(seed):
    """Prices ``λ_u = η·(τ − L_u)`` tie every worker at slope ``η = g'(s)`` for a size ``s``
    between the smallest and largest ``k``-set's (the class relaxation's duals have this
    shape), exactly or broken by round-off (1e-15), with a size outlier that the branch and
    bound splits on first: the best set is a subset sum nearest ``s``, found by branching in
    most cases, and it is the brute-force maximum."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(8, 15))
    k = int(rng.integers(2, n - 1))
    sizes = rng.uniform(50, 1000, n)
    sizes[0] *= 20.0
    utility = AccuracyUtility(sizes, c=-rng.uniform(0.1, 1.0))
    ordered = np.sort(sizes)
    eta = float(utility.slope(rng.uniform(ordered[:k].sum(), ordered[-k:].sum())))
    lam = eta * (sizes.max() - sizes)
    if seed % 2:
        lam *= 1 + rng.uniform(-1e-15, 1e-15, n)
    result = AccuracyPricing(utility, k, enumerate_limit=0)(lam)
    truth = brute_force_max(utility, k, lam)
    assert result.exact
    assert float(result.values[0] + result.columns[0] @ lam) == pytest.approx(truth, rel=1e-12, abs=1e-12)
    assert result.upper_bound >= truth - 1e-14


def test_accuracy_relaxation_duals_reach_jensens_bound():
    rng = np.random.default_rng(0)
    n, k = 40, 10
    utility = AccuracyUtility(rng.integers(50, 1001, n).astype(float))
    r = random_floors(n, k, rng)
    oracle = AccuracyPricing(utility, k)
    lam = oracle.relaxation_duals(r)
    x = r.copy()
    spare = k - x.sum()
    for u in np.argsort(-utility.sizes, kind="stable"):
        add = min(1 - x[u], spare)
        x[u] += add
        spare -= add
    jensen = float(utility.curve(utility.sizes @ x))
    assert oracle(lam).upper_bound - lam @ r <= jensen + 1e-12


@pytest.mark.parametrize("kind,cls", [("coverage", CoveragePricing), ("facility-location", FacilityLocationPricing)])
@pytest.mark.parametrize("seed", range(6))
def test_relaxation_solution_is_a_point_of_the_relaxation_with_its_duals(kind, cls, seed):
    """The relaxation's optimum ``x*`` has ``Σ x* = k`` and ``r <= x* <= 1``; its duals are
    :meth:`relaxation_duals`' (on a fresh model) and zero wherever ``x*`` is above its floor;
    the Lagrangian bound at them is at least ``U_opt`` (enumerated)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 10))
    k = int(rng.integers(2, n))
    utility = random_utility(kind, n, rng)
    r = random_floors(n, k, rng)
    oracle = cls(utility, k)
    lam, x = oracle.relaxation_solution(r)
    assert x is not None
    assert x.sum() == pytest.approx(k, abs=1e-9)
    assert (x >= r - 1e-9).all() and (x <= 1 + 1e-12).all()
    np.testing.assert_allclose(lam, cls(utility, k).relaxation_duals(r), atol=1e-9)
    assert (lam[x > r + 1e-9] == 0).all()
    bound = float(oracle(lam).upper_bound - lam @ r)
    assert bound >= optimum(Problem(utility, k, r)).value - 1e-9


@pytest.mark.parametrize("kind,cls", [("coverage", CoveragePricing),
                                      ("facility-location", FacilityLocationPricing),
                                      ("modular", ModularPricing), ("concave-modular", EnumerationPricing),
                                      ("mixture", GreedyPricing), ("python", GreedyPricing)])
@pytest.mark.parametrize("seed", range(12))
def test_pricing_oracles_against_brute_force(kind, cls, seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    k = int(rng.integers(1, n + 1))
    utility = random_utility(kind, n, rng)
    lam = rng.exponential(1.0, n) * rng.choice([0.0, 0.05, 0.5, 2.0]) * (rng.random(n) < 0.7)
    result = cls(utility, k)(lam)
    truth = brute_force_max(utility, k, lam)
    found = float(result.values[0] + result.columns[0] @ lam)
    assert found <= truth + 1e-12
    assert result.upper_bound >= truth - 1e-9
    if cls is not GreedyPricing:
        assert result.exact and found == pytest.approx(truth, rel=1e-9, abs=1e-9)
    assert np.allclose(result.values, utility.values(result.columns))


@pytest.mark.parametrize("seed", range(40))
def test_swap_deltas_match_evaluation(seed):
    """The closed forms against evaluating every swap (random sizes: members that serve or
    alone cover nothing, elements nobody covers, k = 1 with no second-best)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 10))
    k = int(rng.integers(1, n))
    mask = np.zeros(n, dtype=bool)
    mask[rng.choice(n, k, replace=False)] = True
    for kind, module in (("coverage", coverage_pricing), ("facility-location", facility_pricing)):
        utility = random_utility(kind, n, rng)
        deltas = module.swap_deltas(utility, mask)
        base = utility.value(np.flatnonzero(mask))
        for a, i in enumerate(np.flatnonzero(mask)):
            for b, j in enumerate(np.flatnonzero(~mask)):
                swapped = mask.copy()
                swapped[i], swapped[j] = False, True
                assert deltas[a, b] == pytest.approx(utility.value(np.flatnonzero(swapped)) - base, abs=1e-9)


def test_dispatcher():
    rng = np.random.default_rng(0)
    assert isinstance(pricing_for(random_utility("accuracy", 12, rng), 4), AccuracyPricing)
    assert isinstance(pricing_for(random_utility("coverage", 12, rng), 4), CoveragePricing)
    assert isinstance(pricing_for(random_utility("concave-modular", 12, rng), 4), EnumerationPricing)
    big = random_utility("python", 40, rng)  # no structured oracle, too many k-sets to enumerate
    assert isinstance(pricing_for(big, 20), GreedyPricing)
    assert isinstance(pricing_for(big, 20, "greedy"), GreedyPricing)
    with pytest.raises(ValueError, match="does not fit"):
        pricing_for(big, 20, "accuracy")
    with pytest.raises(ValueError, match="unknown pricing method"):
        pricing_for(big, 20, "magic")


@pytest.mark.parametrize("seed", range(10))
def test_initial_pool_meets_the_floors(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 30))
    k = int(rng.integers(1, n))
    utility = random_utility("accuracy", n, rng)
    r = random_floors(n, k, rng)
    pool = initial_pool(utility, k, r)
    masks = pool.columns.to_masks()
    assert (masks.sum(axis=1) == k).all()
    assert np.unique(masks, axis=0).shape[0] == masks.shape[0]
    assert np.allclose(pool.values, utility.values(masks), rtol=0, atol=1e-12)
    # the weighted sample is a fair distribution on its own, worth pool.value()
    assert pool.probabilities.sum() == pytest.approx(1.0) and (pool.probabilities >= 0).all()
    assert (pool.probabilities @ masks >= r - 1e-12).all()
    assert pool.value() == pytest.approx(float(pool.probabilities @ pool.values))
    assert solve_distribution_lp(pool.values, masks, r).value >= pool.value() - 1e-12
    x = r.copy()
    for u in rng.permutation(n):  # spare mass k − Σr on random workers: Σx = k, x <= 1
        x[u] += min(1.0 - x[u], k - x.sum())
    masks, p = systematic_sets(x, k)
    assert (masks.sum(axis=1) == k).all()
    assert np.allclose(p @ masks, x, atol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_the_systematic_sample_is_the_same_in_chunks_of_any_size(seed, monkeypatch):
    """The sample's rows are checked, stripped of the points past a block's end (antithetic
    splits) and of sets holding a worker twice, and compacted in place chunk by chunk; where
    the chunks end changes nothing. Floors on a coarse grid make offsets coincide, so rows
    are dropped."""
    from fairsched.lp.pricing import initial as initial_module

    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 120))
    grid = rng.choice([0.1, 0.25, 1 / 3, 0.5, 1.0], n)
    k = int(rng.integers(2, max(3, min(n // 3, grid.sum() / grid.max()))))
    x = grid * (k / grid.sum())  # Σx = k, every x <= 1
    assert x.max() <= 1
    for split in (None, int(rng.integers(1, n))):
        whole, p_whole = initial_module.systematic_columns(x, k, split=split)
        with monkeypatch.context() as patch:
            patch.setattr(initial_module, "CHUNK_ENTRIES", int(rng.integers(1, 3 * k)))
            chunked, p_chunked = initial_module.systematic_columns(x, k, split=split)
        assert np.array_equal(whole.indptr, chunked.indptr) and np.array_equal(whole.indices, chunked.indices)
        assert np.array_equal(p_whole, p_chunked)
        masks = chunked.to_masks()
        assert (masks.sum(axis=1) == k).all()  # k distinct members in every set
        assert np.allclose(p_chunked @ masks, x, atol=1e-9)


def test_the_start_meets_the_floors_whichever_split_wins():
    """initial_pool keeps the sample worth most; with split samples off their marginals, one
    that broke a floor could win (33 of 400 such draws before the fix)."""
    rng = np.random.default_rng(5)
    for _ in range(120):
        n = int(rng.integers(5, 60))
        k = int(rng.integers(1, max(2, n // 3)))
        utility = random_utility("accuracy", n, rng)
        r = random_floors(n, k, rng)
        pool = initial_pool(utility, k, r)
        assert (pool.columns.marginals(pool.probabilities) >= r - 1e-9).all()


def test_antithetic_samples_keep_the_marginals():
    """Each block of a split sample is a systematic sample of its own, so every marginal is
    ``x`` (a block's fractions once fell a rounding off their breaks: off by up to 0.48)."""
    from fairsched.lp.pricing.initial import systematic_columns

    rng = np.random.default_rng(11)
    checked = 0
    while checked < 300:
        n = int(rng.integers(3, 200))
        k = int(rng.integers(1, max(2, n // 3)))
        x = rng.uniform(0.0, 1.0, n) if checked % 2 else rng.choice([0.1, 0.25, 1 / 3, 0.5, 1.0], n)
        x *= k / x.sum()
        if x.max() > 1:
            continue
        columns, probabilities = systematic_columns(x, k, order=rng.permutation(n), split=int(rng.integers(1, n)))
        assert (columns.sizes() == k).all()
        assert np.abs(columns.marginals(probabilities) - x).max() <= 1e-12
        checked += 1


# ----------------------------------------------------------------------------- fairsched.solvers.colgen


def enumeration_oracle(values: np.ndarray, members: np.ndarray, top: int = 3):
    def price(lam: np.ndarray) -> PricingResult:
        reduced = values + members @ lam
        order = np.argsort(-reduced, kind="stable")[:top]
        return PricingResult(members[order], values[order], float(reduced.max()), True)
    return price


def accuracy_lp(seed: int, n: int = 9, k: int = 4):
    rng = np.random.default_rng(seed)
    members = k_subset_masks(n, k)
    values = 0.95 - 0.5 * (members @ rng.uniform(1, 10, n)) ** -0.2
    return values, members, random_floors(n, k, rng)


def test_elastic_phase_recovers_from_a_pool_missing_a_floor_worker():
    values, members, r = accuracy_lp(1)
    r[0] = 0.4
    without = np.flatnonzero(~members[:, 0])[:3]  # the pool never holds worker 0
    result = column_generation(values[without], members[without], r, enumeration_oracle(values, members))
    assert result.value == pytest.approx(solve_distribution_lp(values, members, r).value, abs=1e-9)
    assert result.history[0][1] == -math.inf  # the first master needed artificial slack
    assert result.status in ("optimal", "converged")
    assert (result.probabilities @ result.members >= r - 1e-9).all()


def test_jointly_infeasible_floors_name_the_worker():
    members = np.array([[1, 1, 0], [0, 0, 1]], dtype=bool)
    values = np.ones(2)
    r = np.array([0.5, 0.5, 0.6])
    price = enumeration_oracle(values, members)
    with pytest.raises(InfeasibleLPError, match="worker"):
        column_generation(values[:1], members[:1], r, price)
    with pytest.raises(InfeasibleLPError, match="Lagrangian bound"):
        column_generation(values[:1], members[:1], r, price, value_lower_bound=0.0)
    with pytest.raises(InfeasibleLPError, match=r"worker 2 .*> 1"):
        column_generation(values, members, np.array([0.0, 0.0, 1.5]), price)


def test_infeasible_instance_is_reported_not_solved():
    with pytest.raises(InfeasibleError):
        load_instance(INSTANCES / "paper.toml", beta=0.7)


class _CountingHighs:
    """Wraps the HiGHS object the master creates and counts model-building calls."""

    created: ClassVar[list[_CountingHighs]] = []

    def __init__(self, inner):
        self.inner, self.calls = inner, {"passModel": 0, "addCols": 0, "run": 0}
        self.columns: list[int] = []
        _CountingHighs.created.append(self)

    def __getattr__(self, name):
        attr = getattr(self.inner, name)
        if name in self.calls:
            def counted(*args, **kwargs):
                self.calls[name] += 1
                if name == "run":
                    self.columns.append(self.inner.getNumCol())
                return attr(*args, **kwargs)
            return counted
        return attr


def test_master_is_warm_started_not_rebuilt(monkeypatch):
    original = fairsched.solvers.lp.new_highs
    _CountingHighs.created.clear()
    monkeypatch.setattr(fairsched.solvers.lp, "new_highs", lambda: _CountingHighs(original()))
    values, members, r = accuracy_lp(2, n=10, k=5)
    start = np.flatnonzero(members[:, :5].all(axis=1) | members[:, 5:].all(axis=1))
    result = column_generation(values[start], members[start], r, enumeration_oracle(values, members))
    assert len(_CountingHighs.created) == 1  # one HiGHS model for the whole run
    master = _CountingHighs.created[0]
    assert master.calls["passModel"] == 1
    assert master.calls["addCols"] >= 3 and master.calls["run"] == result.iterations + 1
    # the model only grows, except once: the n artificial slacks leave when the floors are met
    drops = [b - a for a, b in zip(master.columns, master.columns[1:]) if b < a]
    assert drops in ([], [-r.size])
    assert result.history[-1][3] > result.history[0][3]  # the pool grew
    assert result.value == pytest.approx(solve_distribution_lp(values, members, r).value, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_a_start_too_large_to_join_whole_still_brings_its_support(seed):
    # The start pool holds every k-set but weights only the supports of the best and the
    # worst fair distributions, half and half.  With pool_nonzeros below the whole pool and
    # at the support's size, the support joins the master one by one and the first master
    # re-weights it to U_opt; one index less and the master holds the start only as its
    # aggregated column, so its first value is the start's.
    values, members, r = accuracy_lp(30 + seed, n=8, k=3)
    best = solve_distribution_lp(values, members, r)
    worst = solve_distribution_lp(-values, members, r)
    weights = 0.5 * best.probabilities + 0.5 * worst.probabilities
    start_value = float(weights @ values)
    assert start_value < best.value - 1e-6
    support_nonzeros = int(members[weights > 0].sum())
    assert support_nonzeros < members.sum()
    first_values = {}
    for limit in (support_nonzeros, support_nonzeros - 1):
        result = column_generation(values, members, r, enumeration_oracle(values, members),
                                   start_probabilities=weights, pool_nonzeros=limit, gap=1e-9)
        assert result.history[1][0] == 1
        first_values[limit] = result.history[1][1]
        assert result.value == pytest.approx(best.value, abs=1e-9)
    assert first_values[support_nonzeros] == pytest.approx(best.value, abs=1e-9)
    assert first_values[support_nonzeros - 1] == pytest.approx(start_value, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_purged_master_keeps_the_optimum_and_its_support(seed, monkeypatch):
    # Purge down to 5 columns whenever the pool holds 10: columns leave the master often,
    # some of them come back, and the result must not notice.
    monkeypatch.setattr(colgen, "PURGE_KEEP", 5)
    monkeypatch.setattr(colgen, "PURGE_ROWS", 0)
    deleted = []
    purge = colgen._Master.purge
    monkeypatch.setattr(colgen._Master, "purge", lambda self, keep: deleted.append(purge(self, keep)) or deleted[-1])
    values, members, r = accuracy_lp(20 + seed, n=10, k=4)
    reference = solve_distribution_lp(values, members, r).value
    start = [int(np.argmax(values))]
    result = column_generation(values[start], members[start], r, enumeration_oracle(values, members, top=4),
                               smoothing=0)
    assert sum(deleted) > 0
    assert result.value == pytest.approx(reference, abs=1e-9)
    assert result.upper_bound >= reference - 1e-12
    support = result.members
    index = {row.tobytes(): i for i, row in enumerate(members)}
    assert np.allclose(result.values, values[[index[row.tobytes()] for row in support]], atol=0)
    assert (result.probabilities @ support >= r - 1e-8).all()
    assert result.probabilities @ result.values == pytest.approx(result.value, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_interior_point_solves_after_many_new_columns_keep_the_optimum(seed, monkeypatch):
    # A start of every other k-set (63 columns, 10 rows) makes the first master solve an
    # interior point one; the pricing's columns then come a few at a time (simplex, from the
    # crossover's basis).  Every solve by interior point, or none, reaches the same optimum.
    values, members, r = accuracy_lp(40 + seed)
    reference = solve_distribution_lp(values, members, r).value
    start = np.arange(0, len(values), 2)
    assert start.size >= colgen.INTERIOR_POINT_COLUMNS_PER_ROW * (r.size + 1)
    monkeypatch.setattr(colgen, "CLARABEL_MAX_ROWS", 0)  # HiGHS's interior point, not Clarabel's
    solvers = []
    set_option = colgen._lp.set_option
    monkeypatch.setattr(colgen._lp, "set_option",
                        lambda h, name, value: (solvers.append(value) if name == "solver" else None,
                                                set_option(h, name, value))[1])
    results = {}
    default = colgen.INTERIOR_POINT_COLUMNS_PER_ROW
    for per_row in (default, 0, 10**9):
        monkeypatch.setattr(colgen, "INTERIOR_POINT_COLUMNS_PER_ROW", per_row)
        solvers.clear()
        result = column_generation(values[start], members[start], r, enumeration_oracle(values, members),
                                   gap=1e-9)
        results[per_row] = (result, solvers.count("ipm"))
        assert result.value == pytest.approx(reference, abs=1e-9)
        assert result.upper_bound >= reference - 1e-12
        assert (result.probabilities @ result.members >= r - 1e-8).all()
    assert results[default][1] == 1                       # the first solve only
    assert results[0][1] == results[0][0].iterations + 1    # every solve
    assert results[10**9][1] == 0


@pytest.mark.parametrize("seed", range(4))
def test_clarabel_master_keeps_the_optimum_and_its_certificate(seed, monkeypatch):
    # Every solve by Clarabel (each counts as one after many new columns), from an elastic
    # start (the first four sets miss floors), with a purge after every iteration that reads
    # the interior optimum's support and reduced costs: the optimum, the floors and the
    # certificate are those of the LP.
    values, members, r = accuracy_lp(50 + seed)
    reference = solve_distribution_lp(values, members, r).value
    calls = []
    solve = colgen.solve_interior
    monkeypatch.setattr(colgen, "solve_interior", lambda h, limit: calls.append(limit) or solve(h, limit))
    monkeypatch.setattr(colgen, "INTERIOR_POINT_COLUMNS_PER_ROW", 0)
    monkeypatch.setattr(colgen, "PURGE_KEEP", 3)
    monkeypatch.setattr(colgen, "PURGE_ROWS", 0)
    result = column_generation(values[:4], members[:4], r, enumeration_oracle(values, members, top=1), gap=1e-9)
    assert len(calls) >= result.iterations >= 2
    assert result.value == pytest.approx(reference, abs=1e-8)
    assert result.upper_bound >= reference - 1e-12
    assert (result.probabilities @ result.members >= r - 1e-9).all()
    assert result.probabilities.sum() == pytest.approx(1.0)
    # the interior optimum's negligible weights (here 3e-11 to 5e-10 of the largest) are not reported
    assert colgen.NEGLIGIBLE_WEIGHT == 1e-9
    assert (result.probabilities > 1e-9 * result.probabilities.max()).all()


def test_a_simplex_solve_cut_at_the_probe_hands_the_next_solves_to_clarabel(monkeypatch):
    # Every simplex run given the probe's time is reported cut: that solve and the next
    # CLARABEL_STAY go to Clarabel, then the simplex is probed again.
    values, members, r = accuracy_lp(70)
    reference = solve_distribution_lp(values, members, r).value
    runs = []
    run_highs = colgen._Master._run_highs

    def run(self, time_limit, interior):
        if time_limit == colgen.CLARABEL_PROBE_SECONDS:
            runs.append("probe")
            return highspy.HighsStatus.kOk, highspy.HighsModelStatus.kTimeLimit
        runs.append("simplex")
        return run_highs(self, time_limit, interior)

    solve = colgen.solve_interior
    monkeypatch.setattr(colgen._Master, "_run_highs", run)
    monkeypatch.setattr(colgen, "solve_interior", lambda h, limit: runs.append("clarabel") or solve(h, limit))
    monkeypatch.setattr(colgen, "CLARABEL_STAY", 2)
    result = column_generation(values[:4], members[:4], r, enumeration_oracle(values, members, top=1), gap=1e-9)
    assert result.value == pytest.approx(reference, abs=1e-8)
    assert runs[:7] == ["probe", "clarabel", "clarabel", "clarabel", "probe", "clarabel", "clarabel"]
    assert "simplex" not in runs


def test_master_falls_back_to_highs_where_clarabel_does_not_solve(monkeypatch):
    values, members, r = accuracy_lp(60)
    reference = solve_distribution_lp(values, members, r).value
    calls = []
    monkeypatch.setattr(colgen, "solve_interior", lambda h, limit: calls.append(limit))  # always None
    monkeypatch.setattr(colgen, "INTERIOR_POINT_COLUMNS_PER_ROW", 0)
    result = column_generation(values[:4], members[:4], r, enumeration_oracle(values, members), gap=1e-9)
    assert len(calls) == 1                     # not tried again once it failed
    assert result.value == pytest.approx(reference, abs=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_stabilisation_heuristic_and_guesses_keep_the_optimum(seed):
    values, members, r = accuracy_lp(10 + seed)
    reference = solve_distribution_lp(values, members, r).value
    exact = enumeration_oracle(values, members)
    cheap = enumeration_oracle(values[::3], members[::3])  # a heuristic that sees a third
    cheap_bounded = lambda lam: PricingResult(cheap(lam).columns, cheap(lam).values,
                                              exact(lam).upper_bound, False)
    start = [int(np.argmax(values))]
    for options in ({"smoothing": 0.5}, {"heuristic": cheap_bounded},
                    {"dual_guesses": [np.full(r.size, 0.01)]}):
        result = column_generation(values[start], members[start], r, exact, **options)
        assert result.value == pytest.approx(reference, abs=1e-9), options
        assert result.upper_bound >= reference - 1e-12


def test_a_dual_guess_is_priced_within_a_share_of_the_time_left():
    """The call at a dual guess runs under a deadline at most GUESS_SHARE of the time left
    (a MILP call there could otherwise take the whole budget), and the oracle's own
    deadline is restored after it."""
    values, members, r = accuracy_lp(11)
    exact = enumeration_oracle(values, members)

    class Oracle:
        deadline = None
        seen: ClassVar[list[tuple[float | None, float]]] = []

        def __call__(self, lam, **options):
            self.seen.append((self.deadline, time.perf_counter()))
            return exact(lam)

    oracle = Oracle()
    limit = 100.0
    result = column_generation(values[:1], members[:1], r, oracle, time_limit=limit,
                               dual_guesses=[np.full(r.size, 0.01)])
    assert result.status == "optimal"
    (guess_deadline, called), *later = Oracle.seen
    assert guess_deadline is not None
    # column generation's clock starts before ``called``, so its end (its start + limit) is at
    # most ``called + limit`` and a share of what is left at the call ends at most
    # GUESS_SHARE·limit after it (the end taken from a clock read before the call, which is
    # earlier than column generation's, was unsound: it failed by 1e-5 s on a loaded machine)
    assert guess_deadline <= called + colgen.GUESS_SHARE * limit
    assert guess_deadline >= called  # not already past
    assert later and all(deadline is None for deadline, _ in later)
    assert oracle.deadline is None
    Oracle.seen.clear()  # without a time limit the guess runs without a deadline too
    column_generation(values[:1], members[:1], r, oracle, dual_guesses=[np.full(r.size, 0.01)])
    assert Oracle.seen and all(deadline is None for deadline, _ in Oracle.seen)


def test_progress_and_history_are_monotone():
    values, members, r = accuracy_lp(5, n=11, k=5)
    seen = []
    result = column_generation(values[:1], members[:1], r, enumeration_oracle(values, members),
                               progress=lambda *args: seen.append(args), gap=1e-9)
    assert [s[0] for s in seen] == [h[0] for h in result.history]
    uppers = [h[2] for h in result.history]
    lowers = [h[1] for h in result.history]
    assert uppers == sorted(uppers, reverse=True) and lowers == sorted(lowers)
    assert result.gap <= 1e-9


def test_price_of_fairness_is_the_dual():
    """Raising r_u by ε lowers U_opt by λ_u·ε (finite difference on a non-degenerate optimum)."""
    problem = load_instance(INSTANCES / "paper.toml", beta=0.42)
    base = optimum(problem, method="column-generation", gap=0.0)
    eps = 1e-5
    priced = np.flatnonzero(base.fairness_price > 1e-6)
    assert priced.size >= 3
    for u in priced:
        raised = problem.r.copy()
        raised[u] += eps
        moved = optimum(problem.with_floors(raised), method="column-generation", gap=0.0)
        slope = (base.value - moved.value) / eps
        assert slope == pytest.approx(base.fairness_price[u], abs=1e-6)
    enumerated = optimum(problem, method="enumeration")
    assert np.allclose(base.fairness_price, enumerated.fairness_price, atol=1e-9)


# ----------------------------------------------------------------------------- command line


from test_cli import OPTIMUM_KEYS


def test_cli_column_generation_json(capsys):
    path = str(INSTANCES / "coverage.toml")
    assert main(["optimum", path, "--method", "column-generation", "--json", "--gap", "1e-9"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == OPTIMUM_KEYS
    assert data["method"] == "column-generation+exact-pricing(coverage-milp)"
    assert data["value"] == pytest.approx(optimum(load_instance(path)).value, abs=1e-7)
    assert data["upper_bound"] >= data["value"]
    assert data["relative_gap"] <= 1e-9 and data["iterations"] >= 1


def test_cli_infeasible_exit_3(capsys):
    code = main(["optimum", str(INSTANCES / "paper.toml"), "--beta", "0.7", "--method",
                 "column-generation", "--json"])
    assert code == 3
    captured = capsys.readouterr()
    assert captured.out == "" and "infeasible" in captured.err


def test_cli_progress_on_a_terminal_only(capsys, monkeypatch):
    path = str(INSTANCES / "paper.toml")
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert main(["optimum", path, "--method", "column-generation", "--gap", "1e-12"]) == 0
    captured = capsys.readouterr()
    data = optimum(load_instance(path), method="column-generation", gap=1e-12)
    # the solve is announced at once, refreshed with the bounds and closed with its duration
    assert captured.err.startswith("\r\x1b[Kfairsched: solving U_opt for ")
    assert "column generation iteration" in captured.err
    assert "certified upper bound" in captured.err and "gap" in captured.err
    assert captured.err.endswith(" s\n") and captured.err.count("\n") == 1
    assert data.iterations >= 1
    assert "iterations" in captured.out
    assert main(["optimum", path, "--method", "column-generation", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


def test_cli_text_says_u_opt_only_when_certified(capsys):
    path = str(INSTANCES / "coverage.toml")
    assert main(["optimum", path, "--method", "column-generation"]) == 0
    assert capsys.readouterr().out.startswith("U_opt = ")
    assert main(["optimum", path, "--method", "column-generation", "--gap", "0", "--time-limit", "0.05"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("best value found ") and "U_opt" not in out.splitlines()[0]
    assert "certified upper bound" in out and "stopped: time-limit" in out


def test_cli_json_has_null_without_a_certified_bound(capsys, monkeypatch):
    from fairsched.cli import app
    real = app.optimum

    def boundless(*args, **kwargs):
        opt = real(*args, **kwargs)
        return dataclasses.replace(opt, upper_bound=math.inf, status="stalled", success=False)

    monkeypatch.setattr(app, "optimum", boundless)
    assert main(["optimum", str(INSTANCES / "paper.toml"), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["upper_bound"] is None and data["gap"] is None and data["absolute_gap"] is None
    assert data["status"] == "stalled" and data["success"] is False
    assert main(["optimum", str(INSTANCES / "paper.toml")]) == 0
    assert "certified upper bound none" in capsys.readouterr().out


@pytest.mark.parametrize("args", [["--gap", "-1"], ["--time-limit", "0"], ["--method", "magic"]])
def test_cli_bad_options_exit_2(args, capsys):
    try:
        code = main(["optimum", str(INSTANCES / "paper.toml"), *args])
    except SystemExit as exc:  # argparse rejects an unknown choice itself
        code = exc.code
    assert code == 2
    assert capsys.readouterr().err.startswith("fairsched: error:")


def test_cli_text_lists_at_most_twenty_sets_and_prices(capsys, tmp_path):
    import tomli_w

    from fairsched.bench.families import FAMILIES

    path = tmp_path / "accuracy.toml"
    path.write_text(tomli_w.dumps(FAMILIES["accuracy"](100, 10, 0)))
    assert main(["optimum", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    sets, priced = len(data["support"]), sum(v > 1e-12 for v in data["fairness_price"].values())
    assert sets > 20 and priced > 20  # the text below must abbreviate both
    assert main(["optimum", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == f"support ({sets:,} sets):"
    assert sum(line.startswith("  p = ") for line in lines) == 20
    assert lines[22] == f"  ... and {sets - 20:,} sets of smaller probability (all of them with --json)"
    shown = lines[23].removeprefix("fairness price λ_u: ").split(", ... (")[0].split(", ")
    assert len(shown) == 20 and all(len(entry.split()) == 2 for entry in shown)
    assert f"({priced:,} workers priced, the 20 largest shown; all with --json)" in lines[23]


def trickle_heuristic(values: np.ndarray, members: np.ndarray):
    """A heuristic pricing that sees one more column (in a fixed random order) per call, and
    has no bound: it keeps finding columns for many iterations, each worth little."""
    order = np.random.default_rng(0).permutation(values.size)
    calls = []

    def trickle(lam):
        calls.append(lam)
        seen = order[: 40 + len(calls)]
        best = seen[np.argmax(values[seen] + members[seen] @ lam)]
        return PricingResult(members[[best]], values[[best]], math.inf, False)
    return trickle


def test_a_bound_cut_short_is_retried_with_twice_the_budget_before_tailing_off():
    """The stagnation stop needs a finished exact call: one cut short by its budget (a valid
    but loose bound, ``exact`` false) is followed by another with twice the budget, until one
    finishes and certifies the optimum (the loop used to stop "tailing-off" on the loose one)."""
    values, members, r = accuracy_lp(3, n=12, k=5)
    reference = solve_distribution_lp(values, members, r).value
    exact = enumeration_oracle(values, members)
    budgets = []

    class Budgeted:
        deadline = None

        def __call__(self, lam):
            budgets.append(math.inf if self.deadline is None else self.deadline - time.perf_counter())
            priced = exact(lam)
            if len(budgets) <= 2:
                return PricingResult(priced.columns, priced.values, priced.upper_bound + 1.0, False)
            return priced

    trickle = trickle_heuristic(values, members)
    start = [int(np.argmax(values))]
    result = column_generation(values[start], members[start], r, Budgeted(), heuristic=trickle,
                               gap=1e-9, tailing_off=(2, 0.99), max_iterations=400)
    assert result.status == "optimal"
    assert result.upper_bound == pytest.approx(reference, abs=1e-9)
    assert result.value == pytest.approx(reference, abs=1e-9)
    first, second, third = budgets[:3]  # the two cut short, then one that finishes
    assert first >= 0.9 * colgen.MIN_BOUND_SECONDS
    assert second >= 1.9 * first and third >= 1.9 * second


def test_stagnating_compares_with_the_entry_a_window_back():
    # the mixture's gaps after its last three finished exact calls, still falling
    assert not colgen.stagnating([2.32e-2, 1.27e-2, 1.15e-2], 3, 0.9)
    assert not colgen.stagnating([2.32e-2, 1.27e-2, 1.15e-2, 1.14e-2], 3, 0.9)
    assert colgen.stagnating([1.16e-2, 1.15e-2, 1.15e-2, 1.14e-2], 3, 0.9)
    assert colgen.stagnating([1.16e-2, 1.15e-2], 1, 0.9, current=1.2e-2)
    assert not colgen.stagnating([1.16e-2, 1.15e-2], 1, 0.9, current=1e-2)


def test_tailing_off_needs_stagnation_over_several_finished_exact_calls():
    """The loop stops "tailing-off" only once the gap has stagnated over the iteration window
    and over the last ``TAILING_OFF_CALLS`` finished exact calls."""
    values, members, r = accuracy_lp(3, n=12, k=5)
    exact = enumeration_oracle(values, members)
    finished = []

    def loose(lam):  # finishes, but its bound stays 1 above the maximum: the gap cannot close
        priced = exact(lam)
        finished.append(lam)
        return PricingResult(priced.columns, priced.values, priced.upper_bound + 1.0, True)

    trickle = trickle_heuristic(values, members)
    start = [int(np.argmax(values))]
    result = column_generation(values[start], members[start], r, loose, heuristic=trickle,
                               gap=1e-9, tailing_off=(2, 0.99), max_iterations=2000)
    assert result.status == "tailing-off"
    assert len(finished) > colgen.TAILING_OFF_CALLS
    gaps = [gap for _, lower, upper, _ in result.history if (gap := colgen.relative_gap(lower, upper)) < math.inf]
    assert colgen.stagnating(gaps, colgen.TAILING_OFF_CALLS, 0.99)
    assert result.upper_bound >= solve_distribution_lp(values, members, r).value


def test_an_oracle_told_enough_may_stop_there_and_the_gap_is_still_certified():
    """``enough`` is the pricing bound that certifies the requested gap: an oracle that stops
    with its bound there (not exact) ends the loop "optimal", within the gap, and the call is
    not counted as inexact."""
    values, members, r = accuracy_lp(5, n=12, k=5)
    reference = solve_distribution_lp(values, members, r).value
    exact = enumeration_oracle(values, members)
    told = []

    class StopsAtEnough:
        accepts_enough = True

        def __call__(self, lam, enough=None):
            priced = exact(lam)
            told.append((lam, enough))
            if enough is not None and priced.upper_bound <= enough:
                return PricingResult(priced.columns, priced.values, enough, False)
            return priced

    gap = 1e-3
    result = column_generation(values[:1], members[:1], r, StopsAtEnough(), gap=gap)
    assert result.status == "optimal" and result.pricing_exact
    assert result.gap <= gap
    assert result.value <= reference + 1e-9 <= result.upper_bound + 2e-9
    assert any(enough is not None for _, enough in told)
    for lam, enough in told:
        if enough is not None:  # never more than the gap allows above a feasible value
            assert enough - np.clip(lam, 0, None) @ r <= (1 + colgen.ENOUGH_SHARE * gap) * reference + 1e-9


def test_targeted_calls_seek_columns_that_matter_to_the_gap():
    """Exact calls with a target are asked for a reduced cost of at least
    ``ENOUGH_SHARE·gap·|LB|`` (no smaller column can move the gap past the requested one),
    not for any column clearing μ by a rounding error.  An oracle that returns the *worst*
    column reaching each target, and its exact answer only when none does, still ends
    "optimal" within the gap with a valid bracket."""
    values, members, r = accuracy_lp(4, n=12, k=5)
    reference = solve_distribution_lp(values, members, r).value
    exact = enumeration_oracle(values, members)
    pool = [0]  # the master's columns: the start and every column returned since
    excess = []  # target − μ, with μ = max over the pool of f(S) + λ(S) (complementary slackness)

    class Adversarial:
        accepts_target = True

        def __call__(self, lam, target=None):
            score = values + members @ lam
            if target is not None:
                excess.append(target - score[pool].max())
                reaching = np.flatnonzero(score >= target)
                if reaching.size:
                    worst = int(reaching[np.argmin(score[reaching])])
                    pool.append(worst)
                    return PricingResult(members[[worst]], values[[worst]], float(score.max()), False)
            answer = exact(lam)
            pool.extend(np.flatnonzero((members[:, None, :] == answer.columns[None]).all(axis=2).any(axis=1)))
            return answer

    gap = 1e-3
    result = column_generation(values[:1], members[:1], r, Adversarial(), gap=gap, smoothing=0)
    assert result.status == "optimal" and result.gap <= gap
    assert result.value <= reference + 1e-9 <= result.upper_bound + 2e-9
    # once the floors are met, targets sit a share of the gap above μ (2e-9 before)
    assert max(excess) >= 0.5 * colgen.ENOUGH_SHARE * gap * reference
    assert colgen._wanted(1e-12, reference, gap) == pytest.approx(colgen.ENOUGH_SHARE * gap * reference)
    assert colgen._wanted(1e-12, -math.inf, gap) == 2e-12


def test_reduced_costs_of_priced_columns() -> None:
    """``f(S) + λ(S) − μ`` per priced column, the masks and values as given; none priced: empty."""
    masks = np.array([[True, False, True], [False, True, True]])
    found = PricingResult(masks, np.array([2.0, 5.0]), 7.0, True)
    cols, vals, reduced = reduced_costs(found, np.array([0.5, 0.25, 1.0]), 3.0)
    assert cols.tolist() == masks.tolist()
    assert vals.tolist() == [2.0, 5.0]
    assert reduced.tolist() == [2.0 + 1.5 - 3.0, 5.0 + 1.25 - 3.0]
    empty = PricingResult(np.zeros((0, 3), dtype=bool), np.zeros(0), math.inf, False)
    cols, vals, reduced = reduced_costs(empty, np.zeros(3), 0.0)
    assert cols.shape == (0, 3) and vals.size == 0 and reduced.size == 0
