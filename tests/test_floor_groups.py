"""Floor groups (``fairsched.lp.floor_groups``): the grouping, the rotation back to every floor,
and column generation through the aggregated master against enumeration and a brute-force
certificate."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_certificates import check_certificate

import fairsched.lp.solve as solve_module
import fairsched.solvers.colgen as colgen
from fairsched.instances import problem_from_table
from fairsched.instances.generators import facility_location_instance
from fairsched.lp import floor_groups as fg
from fairsched.lp.pricing import pricing_for
from fairsched.lp.pricing.initial import initial_pool
from fairsched.lp.solve import optimum
from fairsched.problem import Problem
from fairsched.solvers import PricingResult, column_generation, relative_gap
from fairsched.solvers.columns import Columns
from fairsched.utilities import FacilityLocation


def filler_problem(seed: int, n: int = 14, k: int = 4, points: int = 30) -> Problem:
    """Facility location whose ``n − k`` weak workers never matter to the relaxation (every
    point is served by the strong ones first), with costly floors on the weak."""
    rng = np.random.default_rng(seed)
    similarity = np.hstack([rng.uniform(0.3, 1.0, (points, k)), 0.05 * rng.uniform(0.0, 1.0, (points, n - k))])
    return Problem(utility=FacilityLocation(similarity), k=k, r=np.array([0.1] * k + [0.2] * (n - k)))


def test_groups_join_equal_floors_with_equal_positive_prices_only():
    r = np.array([0.1, 0.1, 0.1, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2])
    prices = np.array([0.0, 0.0, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0 + 1e-6, 1.0])
    groups = fg.floor_groups(r, prices)
    assert groups is not None
    # the unpriced workers and the one with another price stay alone, the five others share
    assert len({groups[i] for i in (3, 4, 5, 6, 7, 9)}) == 1
    assert len(set(groups.tolist())) == 5
    assert sorted(np.bincount(groups).tolist()) == [1, 1, 1, 1, 6]


def test_groups_are_declined_when_they_save_few_rows():
    r = np.full(10, 0.2)
    assert fg.floor_groups(r, np.zeros(10)) is None  # nothing priced
    assert fg.floor_groups(r, np.arange(10, dtype=float)) is None  # all prices differ
    prices = np.array([1.0, 1.0] + list(range(2, 10)), dtype=float)
    assert fg.floor_groups(r, prices) is None  # 9 rows of 10
    with pytest.raises(ValueError, match="shape"):
        fg.floor_groups(r, np.ones(9))


def random_groups(draw_sizes: list[int]) -> np.ndarray:
    return np.repeat(np.arange(len(draw_sizes)), draw_sizes)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 6), min_size=1, max_size=5), st.integers(0, 2**31 - 1), st.integers(1, 5))
def test_rotations_keep_group_counts_and_even_out_members(sizes, seed, m):
    rng = np.random.default_rng(seed)
    groups = rng.permutation(random_groups(sizes))
    n = groups.size
    k = int(rng.integers(1, n + 1))
    masks = np.zeros((m, n), dtype=bool)
    for row in masks:
        row[rng.choice(n, k, replace=False)] = True
    columns = Columns.from_masks(masks)
    rotated = fg.rotations(columns, groups)
    largest = max(sizes)
    assert len(rotated) == m * largest
    count = len(sizes)
    before = fg.group_counts(columns, groups, count).toarray()
    after = fg.group_counts(rotated, groups, count).toarray()
    # rotation s of column j is row s·m + j; each keeps |S ∩ G| for every G
    assert np.array_equal(after, np.tile(before, (largest, 1)))
    assert all(np.all(np.diff(rotated.indices[a:b]) > 0) for a, b in zip(rotated.indptr[:-1], rotated.indptr[1:]))
    # averaged over the rotations, a member of a group whose size divides the largest is in
    # each column |S ∩ G| / |G| of the time
    share = rotated.to_masks().reshape(largest, m, n).mean(axis=0)
    for g, size in enumerate(sizes):
        if largest % size == 0:
            members = np.flatnonzero(groups == g)
            assert np.allclose(share[:, members], (before[:, g] / size)[:, None])


def test_group_counts_match_the_masks():
    rng = np.random.default_rng(3)
    groups = rng.integers(0, 4, size=12)
    masks = rng.random((7, 12)) < 0.4
    counts = fg.group_counts(Columns.from_masks(masks), groups, 4).toarray()
    expected = np.stack([masks[:, groups == g].sum(axis=1) for g in range(4)], axis=1)
    assert np.array_equal(counts, expected)


@pytest.fixture
def phases(monkeypatch):
    """Every GroupedStart the solver's aggregated phase returns."""
    seen = []
    original = solve_module.grouped_column_generation

    def spy(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.append(out)
        return out

    monkeypatch.setattr(solve_module, "grouped_column_generation", spy)
    return seen


@pytest.mark.parametrize("seed", range(12))
def test_filler_instances_are_solved_through_the_groups(seed, phases):
    problem = filler_problem(seed)
    groups = fg.floor_groups(problem.r, pricing_for(problem.utility, problem.k, "auto").relaxation_duals(problem.r))
    assert groups is not None and np.bincount(groups).max() == problem.n - problem.k
    reference = optimum(problem, method="enumeration").value
    opt = optimum(problem, method="column-generation", gap=1e-9)
    assert len(phases) == 1
    phase = phases[0]
    assert phase.converged and phase.rotated
    # the rotated distribution meets every floor and, the fillers being interchangeable, is
    # worth the aggregated optimum: U_opt itself
    assert (phase.pool.columns.marginals(phase.pool.probabilities) >= problem.r - 1e-9).all()
    assert phase.pool.value() == pytest.approx(reference, abs=1e-7)
    # its prices are equal inside each group
    for g in np.unique(groups):
        assert np.ptp(phase.prices[groups == g]) == 0.0
    assert opt.value == pytest.approx(reference, abs=1e-7)
    check_certificate(opt, problem, 1e-9)


@pytest.mark.parametrize("seed", range(8))
def test_groups_that_are_not_interchangeable_still_reach_the_optimum(seed, phases, monkeypatch):
    """Forced groups of all workers with equal floors (the weak ones do matter here): the
    aggregated LP is only a relaxation, the rotation loses value, and column generation on
    every floor has to finish the job."""
    problem = problem_from_table(facility_location_instance(n=12, k=3, points=30, seed=seed))
    _, by_floor = np.unique(np.round(problem.r, 9), return_inverse=True)
    monkeypatch.setattr(solve_module, "floor_groups", lambda r, prices: by_floor.ravel())
    reference = optimum(problem, method="enumeration").value
    opt = optimum(problem, method="column-generation", gap=1e-9)
    assert len(phases) == 1
    phase = phases[0]
    assert phase.pool.value() <= reference + 1e-9  # a feasible distribution, whatever the groups
    # the aggregated LP keeps only sums of floors: a relaxation, worth at least U_opt
    assert phase.converged and phase.aggregated_value >= reference - 1e-9
    assert opt.value == pytest.approx(reference, abs=1e-7)
    check_certificate(opt, problem, 1e-9)


def test_a_known_bound_certifies_without_a_pricing_call():
    problem = filler_problem(0)
    reference = optimum(problem, method="enumeration")
    lam = np.asarray(reference.fairness_price, dtype=float)
    masks = np.array([np.isin(np.arange(problem.n), S) for S in reference.support])
    values = problem.utility.values(masks)
    calls = []

    def price(duals: np.ndarray) -> PricingResult:
        calls.append(duals)
        raise AssertionError("priced although the known bound certifies the start")

    result = column_generation(values, masks, problem.r, price, gap=1e-7,
                               known_bounds=[(lam, reference.pricing_bound)],
                               start_probabilities=reference.probabilities)
    assert result.status == "optimal" and not calls
    assert result.upper_bound == pytest.approx(reference.value, abs=1e-7)
    with pytest.raises(ValueError, match="known bound"):
        column_generation(values, masks, problem.r, price, known_bounds=[(-lam, 1.0)],
                          start_probabilities=reference.probabilities)


def test_rotations_are_thinned_to_their_entry_budget():
    groups = np.array([0] * 12 + [1, 2, 3])
    masks = np.zeros((2, 15), dtype=bool)
    masks[0, [0, 1, 12]] = True
    masks[1, [5, 13, 14]] = True
    columns = Columns.from_masks(masks)
    rotated = fg.rotations(columns, groups, max_entries=4 * columns.nnz)
    assert len(rotated) == 4 * 2  # 4 of the 12 shifts: 0, 3, 6, 9
    first = rotated.to_masks()[0::2]
    assert [np.flatnonzero(m[:12]).tolist() for m in first] == [[0, 1], [3, 4], [6, 7], [9, 10]]
    assert (rotated.to_masks()[:, 12:] == np.tile(masks[:, 12:], (4, 1))).all()


@pytest.mark.parametrize("seed", range(6))
def test_exact_calls_of_the_grouped_phase_ask_only_for_what_the_gap_needs(seed, monkeypatch):
    """The aggregated phase's exact calls seek a column worth at least the certifying slack
    ``ENOUGH_SHARE·gap·|value|`` above μ, and may stop at a bound within that slack of the
    aggregated master's value, as column generation's own loop does: a bound stopped there
    certifies the gap with a margin (at the full gap it landed 1.000016e-4 above the value on
    facility location ``n = 400``, and the run needed one more exact call, of 83-85 s)."""
    gap = 1e-4
    problem = filler_problem(seed)
    r = np.asarray(problem.r, dtype=float)
    oracle = pricing_for(problem.utility, problem.k, "auto")
    groups = fg.floor_groups(r, oracle.relaxation_duals(r))
    masters = []
    solve_master = fg._best_distribution

    def spy(values, coverage, need, time_limit=None):
        solved = solve_master(values, coverage, need, time_limit)
        masters.append((-float(solved.fun), -float(solved.eqlin.marginals[0])))
        return solved

    monkeypatch.setattr(fg, "_best_distribution", spy)
    calls = []

    class StopsAtEnough:
        """The exact oracle, reporting its bound as ``enough`` once it is there, as a MILP
        interrupted by its callback does."""

        accepts_target = accepts_enough = True

        def __call__(self, lam, target=None, enough=None):
            found = oracle(lam)
            if masters:
                calls.append((np.asarray(lam, dtype=float), target, enough) + masters[-1])
            if enough is not None and found.upper_bound <= enough:
                return PricingResult(found.columns, found.values, enough, False)
            return found

    # a heuristic that never finds a column: every iteration makes an exact call
    def nothing(lam):
        return PricingResult(np.zeros((0, problem.n), dtype=bool), np.zeros(0), np.inf, False)

    start = initial_pool(problem.utility, problem.k, r)
    phase = fg.grouped_column_generation(problem.utility, problem.k, r, groups, StopsAtEnough(), nothing,
                                         start, gap=gap)
    assert calls and phase.converged
    for lam, target, enough, value, mu in calls:
        slack = colgen.certifying_slack(value, gap)
        assert slack == pytest.approx(colgen.ENOUGH_SHARE * gap * abs(value))
        assert target >= mu + slack - 1e-12
        assert enough == pytest.approx(value + slack + lam @ r, rel=1e-12)
    bound = phase.pricing_bound - phase.prices @ r
    assert relative_gap(phase.aggregated_value, bound) <= colgen.ENOUGH_SHARE * gap * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_out_of_time_the_rotation_takes_the_uniform_mixture(seed, monkeypatch):
    """With no time left for the rotation LP, the uniform mixture over each support set's
    rotations (weighted by the aggregated optimum) stands in: it meets every floor, is worth
    exactly ``Σ_j w_j · mean_s f(rotation s of S_j)`` (duplicate sets merged), at most the
    LP's optimum, and on interchangeable fillers as much (``U_opt``)."""
    captured = []
    original = fg._rotated_start

    def spy(*args):
        captured.append(args)
        return original(*args)

    monkeypatch.setattr(fg, "_rotated_start", spy)
    if seed < 3:
        problem = filler_problem(seed)
    else:  # groups forced over workers that matter: rotation changes f
        problem = problem_from_table(facility_location_instance(n=12, k=3, points=30, seed=seed))
        _, by_floor = np.unique(np.round(problem.r, 9), return_inverse=True)
        monkeypatch.setattr(solve_module, "floor_groups", lambda r, prices: by_floor.ravel())
    optimum(problem, method="column-generation", gap=1e-9)
    utility, r, support, weights, groups, start, _ = captured[0]
    by_lp, rotated_lp = original(utility, r, support, weights, groups, start, None)
    uniform, rotated = original(utility, r, support, weights, groups, start, time.perf_counter() - 1.0)
    everyone = fg.rotations(support, groups)
    shifts = len(everyone) // len(support)
    expected = float(np.tile(weights, shifts) @ utility.values(everyone.to_masks())) / (shifts * weights.sum())
    if not rotated:  # the uniform mixture misses a floor here: the start's distribution stays
        assert not (everyone.marginals(np.tile(weights, shifts) / (shifts * weights.sum())) >= r - 1e-9).all()
        assert uniform.value() == pytest.approx(start.value(), abs=1e-12)
        return
    assert rotated_lp
    assert (uniform.columns.marginals(uniform.probabilities) >= r - 1e-9).all()
    assert uniform.probabilities.sum() == pytest.approx(1.0)
    assert uniform.value() == pytest.approx(max(start.value(), expected), abs=1e-9)
    assert uniform.value() <= by_lp.value() + 1e-9
    if seed < 3:
        assert uniform.value() == pytest.approx(by_lp.value(), abs=1e-7)
        assert uniform.value() > start.value()
        # each distinct rotated set carries the shares of all its copies
        shares: dict[bytes, float] = {}
        for mask, share in zip(everyone.to_masks(), np.tile(weights, shifts) / (shifts * weights.sum())):
            shares[mask.tobytes()] = shares.get(mask.tobytes(), 0.0) + share
        rotated_part = slice(len(start.columns), None)
        got = dict(zip((m.tobytes() for m in uniform.columns.to_masks()[rotated_part]),
                       uniform.probabilities[rotated_part]))
        assert got.keys() == shares.keys()
        assert all(got[key] == pytest.approx(shares[key], abs=1e-12) for key in shares)
