"""Size groups (``fairsched.lp.size_groups``): the Lagrangian bound of the LP over groups of
equal-size workers for the accuracy utility, checked against enumeration, the aggregated LP
solved over every k-set, and a brute-force maximisation at the reported prices."""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog
from test_certificates import brute_force_lagrangian, check_certificate

import fairsched.lp.solve as solve_module
from fairsched.lp.floor_groups import group_counts
from fairsched.lp.pricing.accuracy import AccuracyPricing
from fairsched.lp.pricing.initial import initial_pool
from fairsched.lp.gale import ranked_members
from fairsched.lp.size_groups import size_group_bound, size_groups, worker_prices
from fairsched.lp.solve import optimum
from fairsched.problem import Problem
from fairsched.solvers import k_subset_masks, relative_gap
from fairsched.solvers.columns import Columns
from fairsched.utilities import AccuracyUtility


def two_class(seed: int, n: int = 14, k: int = 4) -> Problem:
    """A few large workers among many small ones, sizes repeated inside each class: Jensen's
    bound is 1e-4 to 3e-4 above ``U_opt`` on most seeds."""
    rng = np.random.default_rng(seed)
    large = int(rng.integers(2, 5))
    sizes = np.concatenate([rng.choice([300.0, 320.0], large), rng.choice([20.0, 25.0, 30.0], n - large)])
    r = np.round(rng.uniform(0.05, 0.9 * k / n, n), 3)
    return Problem(utility=AccuracyUtility(sizes), k=k, r=r)


def jensen(problem: Problem) -> tuple[AccuracyPricing, np.ndarray, float]:
    """The pricing, the relaxation's prices and the exact pricing bound at them."""
    oracle = AccuracyPricing(problem.utility, problem.k, max_columns=50)
    relaxation = oracle.relaxation_duals(problem.r)
    return oracle, relaxation, float(oracle.price(relaxation).upper_bound)


@dataclasses.dataclass(frozen=True)
class PhaseStart:
    """What the size groups' loop starts from here: the pricing, the relaxation's prices with
    their exact pricing bound (Jensen's), the groups of equal size and the initial pool."""

    problem: Problem
    oracle: AccuracyPricing
    relaxation: np.ndarray
    at_relaxation: float
    groups: np.ndarray
    pool: object

    def run(self, price=None, **options):
        """:func:`size_group_bound` from the pool, centred at the relaxation's prices, with the
        exact pricing unless ``price`` is given."""
        return size_group_bound(self.oracle.price if price is None else price, self.problem.r, self.groups,
                                self.pool.columns, self.pool.values, centre=self.relaxation,
                                centre_pricing_bound=self.at_relaxation, lower=self.pool.value(), **options)


def phase_start(problem: Problem) -> PhaseStart:
    oracle, relaxation, at_relaxation = jensen(problem)
    return PhaseStart(problem, oracle, relaxation, at_relaxation, size_groups(problem.utility.sizes, relaxation > 0),
                      initial_pool(problem.utility, problem.k, problem.r))


def aggregated_optimum(problem: Problem, groups: np.ndarray) -> float:
    """``U_agg`` by one LP over every k-set (written here, independently of the module)."""
    masks = k_subset_masks(problem.n, problem.k)
    count = int(groups.max()) + 1
    counts = group_counts(Columns.from_masks(masks), groups, count)
    need = np.bincount(groups, weights=problem.r, minlength=count)
    solved = linprog(-problem.utility.values(masks), A_ub=-counts.T, b_ub=-need,
                     A_eq=np.ones((1, masks.shape[0])), b_eq=[1.0], bounds=(0, None), method="highs")
    assert solved.status == 0
    return -float(solved.fun)


def test_groups_join_equal_sizes_of_priced_workers_only():
    sizes = np.array([5.0, 5.0, 5.0, 7.0, 7.0, 9.0])
    priced = np.array([True, True, False, True, True, True])
    groups = size_groups(sizes, priced)
    assert groups[0] == groups[1] and groups[3] == groups[4]
    assert len(set(groups.tolist())) == 4  # {0, 1}, {2} alone (unpriced), {3, 4}, {5}
    assert sorted(np.bincount(groups).tolist()) == [1, 1, 2, 2]


def check_distribution(support, probabilities, problem: Problem) -> float:
    """A distribution over sets of size ``k`` meeting every floor: its value, recomputed."""
    masks = support.to_masks()
    assert (masks.sum(axis=1) == problem.k).all()
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-12) and (probabilities >= 0).all()
    assert (probabilities @ masks >= problem.r - 1e-9).all()
    return float(probabilities @ problem.utility.values(masks))


@pytest.mark.parametrize("quick", [False, True], ids=["exact", "quick-and-trades"])
@pytest.mark.parametrize("seed", range(10))
def test_bound_and_distribution_meet_enumeration(seed, quick):
    """With Gale's cuts the LP over groups of equal size is exact: from the sample's start the
    loop certifies ``U_opt`` (enumeration's) with a bound checked by brute force and a
    distribution over actual sets, checked set by set; also where most iterations price
    with the quick pricing (no branch and bound; its bound certified but not tight) and the
    master's own sets trade members (exchange columns)."""
    problem = two_class(seed)
    exact = optimum(problem, method="enumeration")
    phase = phase_start(problem)
    jensens = phase.at_relaxation - float(phase.relaxation @ problem.r)
    start = phase.pool
    extra = {"quick": phase.oracle.quick, "primal_columns": solve_module._trades(problem.utility)} if quick else {}
    found = phase.run(gap=1e-9, **extra)
    assert found.status == "certified"
    assert found.prices is not None and (found.prices >= 0).all()
    truth_max, _ = brute_force_lagrangian(problem, found.prices)
    if quick:  # a certified pricing bound, tight or not
        assert found.pricing_bound >= truth_max - 1e-12
    else:
        assert found.pricing_bound == pytest.approx(truth_max, rel=1e-12, abs=1e-12)
    assert found.bound == pytest.approx(found.pricing_bound - float(found.prices @ problem.r), rel=1e-12)
    assert exact.value - 1e-9 <= found.bound <= jensens
    if found.support is None:  # nothing better than the start: the start was optimal
        assert relative_gap(start.value(), found.bound) <= 1e-9
        return
    value = check_distribution(found.support, found.probabilities, problem)
    assert value == pytest.approx(found.value, abs=1e-12) and value > start.value()
    assert value <= exact.value + 1e-9 and relative_gap(value, found.bound) <= 1e-9


def test_gale_cuts_close_what_the_aggregation_alone_leaves_open():
    """Seed 10: the LP over groups of equal size without Gale's cuts is 3.7e-6 above
    ``U_opt`` (an LP over every k-set, written here); with them the loop reaches ``U_opt``."""
    problem = two_class(10)
    phase = phase_start(problem)
    exact = optimum(problem, method="enumeration")
    assert relative_gap(exact.value, aggregated_optimum(problem, phase.groups)) > 1e-6
    found = phase.run(gap=1e-9)
    assert found.cuts > 0 and found.status == "certified"
    assert found.value == pytest.approx(exact.value, rel=1e-9)
    assert found.bound == pytest.approx(exact.value, rel=1e-9)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_worker_prices_are_the_masters_lagrangian(seed):
    """A set with ``c`` members of a group earns at most ``λ_G·c + Σ π·min(c, j)`` from them at
    the per-worker prices (exactly that with the ``c`` largest floors), and ``Σ λ_u r_u`` is
    ``λ·R + π·F``."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    groups = np.unique(rng.integers(0, max(1, n // 2), n), return_inverse=True)[1]
    r = rng.uniform(0.0, 0.5, n)
    order, starts, rank = ranked_members(groups, r)
    sizes = np.diff(starts)
    cut_group = rng.integers(0, sizes.size, 4)
    cut_size = np.array([int(rng.integers(1, sizes[g] + 1)) for g in cut_group])
    lam, pi = rng.uniform(0, 1, sizes.size), rng.uniform(0, 1, 4)
    prices = worker_prices(lam, pi, cut_group, cut_size, groups, order, starts)
    floors = [float(np.sort(r[groups == g])[::-1][:j].sum()) for g, j in zip(cut_group, cut_size)]
    assert prices @ r == pytest.approx(lam @ np.bincount(groups, weights=r, minlength=sizes.size) + pi @ floors)
    member = rng.random(n) < 0.5
    counts = np.bincount(groups[member], minlength=sizes.size)
    earned = lam @ counts + sum(p * min(counts[g], j) for g, j, p in zip(cut_group, cut_size, pi))
    assert prices[member].sum() <= earned + 1e-12
    top = rank <= counts[groups]  # the same counts, largest floors first
    assert prices[top].sum() == pytest.approx(earned)


def test_deadline_in_the_past_returns_no_bound():
    found = phase_start(two_class(0)).run(gap=1e-6, deadline=time.perf_counter() - 1.0)
    assert found.status == "time-limit" and found.iterations == 0
    assert found.prices is None and math.isinf(found.bound) and math.isinf(found.pricing_bound)
    assert found.support is None and found.value == -math.inf


def stopped_early(monkeypatch) -> None:
    """Column generation over every floor stopped after one iteration, as where it tails off
    on Jensen's bound: ``optimum`` then hands over to the size groups."""
    real = solve_module.column_generation

    def after_one(*args, **kwargs):
        kwargs["max_iterations"] = 1
        return real(*args, **kwargs)

    monkeypatch.setattr(solve_module, "column_generation", after_one)


@pytest.mark.parametrize("seed", [0, 2, 5, 10, 17, 18])
def test_optimum_reports_the_size_groups_certificate(monkeypatch, seed):
    """``optimum`` takes the phase's distribution and bound: certified, checked by brute force
    at the reported prices and set by set against enumeration."""
    problem = two_class(seed)
    stopped_early(monkeypatch)
    opt = optimum(problem, method="column-generation")
    exact = optimum(problem, method="enumeration")
    assert opt.status == "optimal"
    assert opt.message.startswith("optimal: the LP over groups of equal size")
    assert opt.master_fairness_price is None  # the distribution is the realised one
    assert opt.value == pytest.approx(exact.value, rel=1e-9)
    check_certificate(opt, problem, solve_module.DEFAULT_GAP)


def test_no_phase_where_sizes_are_nearly_all_distinct(monkeypatch):
    """Distinct sizes leave one group per worker: the aggregated LP would be the LP over every
    floor, so ``optimum`` reports column generation's result as it is."""
    rng = np.random.default_rng(3)
    problem = Problem(utility=AccuracyUtility(rng.uniform(20.0, 400.0, 14)), k=4,
                      r=np.round(rng.uniform(0.05, 0.25, 14), 3))
    stopped_early(monkeypatch)
    opt = optimum(problem, method="column-generation")
    assert "groups of equal size" not in opt.message
    check_certificate(opt, problem, solve_module.DEFAULT_GAP)


def test_a_failing_phase_leaves_column_generations_result(monkeypatch):
    """The phase's LP solver failing costs nothing: ``optimum`` reports what column generation
    reached and says why the phase gave nothing."""
    import fairsched.lp.size_groups as size_groups_module
    from fairsched.solvers import SolverError

    def broken(self, time_limit):
        raise SolverError("HiGHS did not solve the aggregated master (status: test)")

    problem = two_class(0)
    stopped_early(monkeypatch)
    monkeypatch.setattr(size_groups_module._AggregatedMaster, "solve", broken)
    opt = optimum(problem, method="column-generation")
    assert opt.status == "iteration-limit"
    assert opt.message.endswith("the LP over groups of equal size failed (HiGHS did not solve the aggregated "
                                "master (status: test))")
    check_certificate(opt, problem, solve_module.DEFAULT_GAP)


@pytest.mark.parametrize("seed", [0, 5])
def test_the_phase_starts_from_column_generations_certificate(monkeypatch, seed):
    """The phase's smoothing starts at the prices of the best bound column generation met,
    with that bound (at most Jensen's, whose prices it priced first), and what ``optimum``
    reports is still certified by brute force at its prices."""
    problem = two_class(seed)
    results, centres = [], []
    real_cg, real_phase = solve_module.column_generation, solve_module.size_group_bound

    def after_one(*args, **kwargs):
        kwargs["max_iterations"] = 1
        results.append(real_cg(*args, **kwargs))
        return results[-1]

    def spy(*args, **kwargs):
        centres.append((kwargs["centre"], kwargs["centre_pricing_bound"]))
        return real_phase(*args, **kwargs)

    monkeypatch.setattr(solve_module, "column_generation", after_one)
    monkeypatch.setattr(solve_module, "size_group_bound", spy)
    opt = optimum(problem, method="column-generation")
    (centre, bound), = centres
    np.testing.assert_array_equal(centre, results[0].fairness_price)
    assert bound == results[0].pricing_bound
    oracle, relaxation, at_relaxation = jensen(problem)
    assert bound - float(centre @ problem.r) <= at_relaxation - float(relaxation @ problem.r) + 1e-12
    check_certificate(opt, problem, solve_module.DEFAULT_GAP)


@pytest.mark.parametrize("distinct", [False, True], ids=["size-classes", "distinct-sizes"])
def test_column_generation_hands_over_sooner_only_where_the_phase_may_follow(monkeypatch, distinct):
    """Where the size groups' phase may follow, column generation over every floor stops once
    its gap did not halve in 10 iterations (``HAND_OVER``); elsewhere its own tailing-off rule
    stands."""
    seen = []
    real = solve_module.column_generation

    def spy(*args, **kwargs):
        seen.append(kwargs["tailing_off"])
        return real(*args, **kwargs)

    monkeypatch.setattr(solve_module, "column_generation", spy)
    if distinct:
        rng = np.random.default_rng(3)
        problem = Problem(utility=AccuracyUtility(rng.uniform(20.0, 400.0, 14)), k=4,
                          r=np.round(rng.uniform(0.05, 0.25, 14), 3))
    else:
        problem = two_class(0)
    optimum(problem, method="column-generation")
    assert seen[0] == (solve_module.TAILING_OFF if distinct else solve_module.HAND_OVER)
    assert solve_module.HAND_OVER[1] < solve_module.TAILING_OFF[1]


def handed_over_at_once(monkeypatch, phase_iterations: int | None,
                        budget_spent_on_resume: bool = False) -> tuple[list, list]:
    """Column generation's first call hands over after its first iteration (relabelled
    ``"tailing-off"``, as under ``HAND_OVER``), the phase runs at most ``phase_iterations``
    iterations towards a gap of 0 (``None``: its time budget is already spent), and a resumed
    column generation finds the budget spent where ``budget_spent_on_resume``; returns the
    calls to column generation (keyword arguments and result) and the phase's results."""
    calls, phases = [], []
    real_cg, real_phase = solve_module.column_generation, solve_module.size_group_bound

    def spy_cg(*args, **kwargs):
        if calls:
            result = real_cg(*args, **dict(kwargs, deadline=time.perf_counter() - 1.0)
                             if budget_spent_on_resume else kwargs)
        else:  # these small draws need two iterations: one, and "tailing-off" as if handed over
            result = dataclasses.replace(real_cg(*args, **dict(kwargs, max_iterations=1)), status="tailing-off")
        calls.append((dict(kwargs, values=args[0], members=args[1]), result))
        return result

    def spy_phase(*args, **kwargs):
        if phase_iterations is None:
            kwargs["deadline"] = time.perf_counter() - 1.0
        else:  # and it does not certify (these small draws would in its first iteration)
            kwargs["max_iterations"], kwargs["gap"] = phase_iterations, 0.0
        phases.append(real_phase(*args, **kwargs))
        return phases[-1]

    monkeypatch.setattr(solve_module, "column_generation", spy_cg)
    monkeypatch.setattr(solve_module, "size_group_bound", spy_phase)
    return calls, phases


@pytest.mark.parametrize("seed", [5, 17, 18])  # the draws whose phase stops short in one iteration
def test_column_generation_resumes_where_the_phase_stops_short(monkeypatch, seed):
    """Handed over early, and the phase stopping on its own short of the gap: column generation
    over every floor resumes, with its own rule, from the best distribution and bound so far,
    and what ``optimum`` reports is certified (by brute force at its prices) and equals
    enumeration."""
    problem = two_class(seed)
    calls, phases = handed_over_at_once(monkeypatch, phase_iterations=1)
    opt = optimum(problem, method="column-generation")
    (first, handed), (second, resumed) = calls
    assert handed.status == "tailing-off" and phases[0].status != "certified"
    assert second["tailing_off"] == solve_module.TAILING_OFF
    # it starts from the better distribution of the two sides, and the lower bound
    start_value = float(second["start_probabilities"] @ second["values"])
    assert start_value >= max(handed.value, phases[0].value) - 1e-12
    assert second["deadline"] is not None  # what is left of the phase's budget
    (prices, pricing_bound), = second["known_bounds"]
    assert pricing_bound - float(prices @ problem.r) <= min(handed.upper_bound, phases[0].bound) + 1e-12
    assert opt.status == "optimal"
    assert opt.message.startswith("optimal: column generation over every floor, resumed after the LP over groups")
    assert opt.iterations >= handed.iterations + phases[0].iterations + resumed.iterations
    exact = optimum(problem, method="enumeration")
    assert opt.value == pytest.approx(exact.value, rel=1e-9)
    check_certificate(opt, problem, solve_module.DEFAULT_GAP)


def test_no_resume_after_the_phase_spent_its_budget(monkeypatch):
    """A phase stopped by its own time budget has used the time it was given: column
    generation does not resume, and the result is still certified as far as it goes."""
    problem = two_class(0)
    calls, phases = handed_over_at_once(monkeypatch, phase_iterations=None)
    opt = optimum(problem, method="column-generation")
    assert len(calls) == 1 and phases[0].status == "time-limit"
    assert "its budget" in opt.message
    check_certificate(opt, problem, solve_module.DEFAULT_GAP)


def test_a_phase_stopped_by_the_time_limit_reports_time_limit(monkeypatch):
    """With a time limit, a phase stopped by it ends the run at the limit: the status says
    "time-limit", not the "tailing-off" with which column generation handed over, and what
    was certified stands (``fairsched run`` on two-class ``n = 1,000, k = 50`` reported
    "tailing-off" after its 60 s budget)."""
    problem = two_class(0)
    calls, phases = handed_over_at_once(monkeypatch, phase_iterations=None)
    opt = optimum(problem, method="column-generation", time_limit=600.0)
    assert calls[0][1].status == "tailing-off" and phases[0].status == "time-limit"
    assert opt.status == "time-limit" and not opt.success
    assert "the LP over groups of equal size" in opt.message and "time-limit after" in opt.message
    check_certificate(opt, problem, solve_module.DEFAULT_GAP)


def two_size_classes(seed: int, n: int = 300, k: int = 20) -> Problem:
    """5 % large workers (sizes 5,000–20,000, floor 0.001) among small ones (20–200), floors
    scaled to ``Σ r = 0.85·k``: the phase needs tens of iterations here."""
    rng = np.random.default_rng(seed)
    large = rng.random(n) < 0.05
    sizes = np.where(large, rng.uniform(5000, 20000, n), rng.uniform(20, 200, n)).round()
    r = np.where(large, 0.001, rng.uniform(0, 2, n))
    r[~large] *= (0.85 * k - r[large].sum()) / r[~large].sum()
    return Problem(utility=AccuracyUtility(sizes), k=k, r=np.minimum(r, 1.0))


@pytest.mark.parametrize("patience", [None, 0.0, 3600.0])
def test_the_phase_tails_off_only_after_its_patience(monkeypatch, patience):
    """Both tailing-off rules wait ``patience`` seconds: with a rule that would stop any loop
    after its first iteration, the phase stops there without patience and runs on to its
    iteration limit with an hour of it."""
    import fairsched.lp.size_groups as size_groups_module

    monkeypatch.setattr(size_groups_module, "TAILING_OFF", (1, 1e-12))
    found = phase_start(two_size_classes(0)).run(gap=1e-9, patience=patience, max_iterations=4)
    if patience == 3600.0:
        assert (found.status, found.iterations) == ("iteration-limit", 4)
    else:
        assert (found.status, found.iterations) == ("tailing-off", 1)


@pytest.mark.parametrize("seed", [5, 10])  # draws whose loop solves the master more than once
def test_the_master_is_solved_again_from_scratch_where_highs_gives_up(monkeypatch, seed):
    """A warm-started re-solve of the aggregated master that HiGHS ends neither optimal nor at
    the time limit ("Unknown", once at ``n = 10,000``) is run once more from scratch: the loop
    still certifies ``U_opt``; where HiGHS gives up every time, the error is raised."""
    import highspy

    import fairsched.lp.size_groups as size_groups_module
    from fairsched.solvers import SolverError

    real = size_groups_module._AggregatedMaster._run
    runs = []

    def gives_up_once(self, time_limit):
        runs.append(time_limit)
        if len(runs) == 2:  # the first re-solve, warm-started after new columns or cuts
            return highspy.HighsModelStatus.kUnknown
        return real(self, time_limit)

    problem = two_class(seed)
    exact = optimum(problem, method="enumeration")
    phase = phase_start(problem)
    monkeypatch.setattr(size_groups_module._AggregatedMaster, "_run", gives_up_once)
    found = phase.run(gap=1e-9)
    assert len(runs) >= 3  # it gave up, and was run again
    assert found.status == "certified"
    assert exact.value - 1e-9 <= found.bound and relative_gap(max(found.value, phase.pool.value()), found.bound) <= 1e-9
    monkeypatch.setattr(size_groups_module._AggregatedMaster, "_run",
                        lambda self, time_limit: highspy.HighsModelStatus.kUnknown)
    with pytest.raises(SolverError, match="Unknown"):
        phase.run(gap=1e-9)


def test_a_resume_stopped_by_the_phases_budget_keeps_the_status(monkeypatch):
    """Without a time limit the resumed column generation stops at what is left of the phase's
    budget: the status stays column generation's ("tailing-off"), not a "time-limit" nobody
    set, the message says so, and what was certified stands."""
    problem = two_class(5)
    calls, _ = handed_over_at_once(monkeypatch, phase_iterations=1, budget_spent_on_resume=True)
    opt = optimum(problem, method="column-generation")
    _, (_, resumed) = calls
    assert resumed.status == "time-limit"
    assert opt.status == "tailing-off"
    assert opt.message.startswith("tailing-off: column generation over every floor, resumed after the LP over "
                                  "groups of equal size until the phase's budget")
    check_certificate(opt, problem, solve_module.DEFAULT_GAP)


@pytest.mark.parametrize("share", [0.0, 1.0])
def test_exact_calls_are_spaced_by_their_share_of_the_time(monkeypatch, share):
    """The exact pricing prices every ``EXACT_EVERY``-th iteration only while exact calls took
    at most ``EXACT_SHARE`` of the loop's time (else only where the quick one finds nothing):
    with a share of 0 a slow exact pricing is left to those fallbacks, with a share of 1 it
    prices every 5th iteration."""
    import fairsched.lp.size_groups as size_groups_module

    monkeypatch.setattr(size_groups_module, "EXACT_SHARE", share)
    phase = phase_start(two_size_classes(0))
    oracle = phase.oracle
    iterations, exact_at, quick_found = [], [], []

    def slow_exact(lam):
        time.sleep(0.02)
        exact_at.append(len(iterations))
        return oracle.price(lam)

    def quick(lam):
        found = oracle.quick(lam)
        quick_found.append((len(iterations), len(found.values)))
        return found

    found = phase.run(slow_exact, gap=1e-9, quick=quick, max_iterations=20,
                      progress=lambda i, lo, up, g: iterations.append(i))
    due = [i for i in range(len(iterations)) if (i + 1) % size_groups_module.EXACT_EVERY == 0]
    assert due, "the loop ended before an exact call was due"
    if share == 1.0:
        assert set(due) <= set(exact_at)
    else:
        # a share of 0: after the first due call (no exact time yet), exact calls only where
        # the quick pricing was asked first and found nothing to enter
        unasked = set(exact_at) - {i for i, _ in quick_found}
        assert unasked == {due[0]}
        assert not set(due) <= set(exact_at)
    assert found.status in ("certified", "iteration-limit")
    assert found.bound >= found.value - 1e-12


def rewards_by_hand(counts: np.ndarray, lam: np.ndarray, pi: np.ndarray, cut_group: np.ndarray,
                    cut_size: np.ndarray) -> np.ndarray:
    """``λ_G·c_G + Σ_cuts π·min(c_G, j)`` of each row of dense counts, by loops."""
    out = np.zeros(counts.shape[0])
    for i, row in enumerate(counts):
        out[i] = float(lam @ row) + sum(p * min(row[g], j) for g, j, p in zip(cut_group, cut_size, pi))
    return out


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_column_rewards_from_the_table_equal_the_sum_by_hand(seed):
    """The dual value of columns read from one table of group by count equals the sum written
    out, cuts on the same group several times included."""
    from fairsched.lp.size_groups import _AggregatedMaster

    rng = np.random.default_rng(seed)
    groups, m = int(rng.integers(1, 6)), int(rng.integers(1, 8))
    counts = rng.integers(0, 5, (m, groups)) * (rng.random((m, groups)) < 0.6)
    master = _AggregatedMaster(np.zeros(groups), 10)
    cuts = int(rng.integers(0, 6))
    master.cut_group = rng.integers(0, groups, cuts)
    master.cut_size = rng.integers(1, 5, cuts)
    lam, pi = rng.random(groups), rng.random(cuts)
    got = master.column_rewards(sp.csr_array(counts), lam, pi)
    expected = rewards_by_hand(counts, lam, pi, master.cut_group, master.cut_size)
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)


#: draws (``k``, seed; ``n = 12``) whose LP over every k-set and the groups' rows alone violates
#: some Gale inequality
CUT_DRAWS = [(4, 19), (4, 34), (4, 37), (5, 0), (5, 18), (5, 22), (5, 34)]


@dataclasses.dataclass(frozen=True)
class EveryKSet:
    """A two-class draw with every k-set (in a seeded order), its floors and its size groups
    with every worker priced."""

    problem: Problem
    r: np.ndarray
    groups: np.ndarray
    count: int
    need: np.ndarray
    masks: np.ndarray
    values: np.ndarray


def every_k_set(k: int, seed: int) -> EveryKSet:
    problem = two_class(seed, n=12, k=k)
    r = np.asarray(problem.r, dtype=float)
    groups = size_groups(problem.utility.sizes, np.ones(problem.n, dtype=bool))
    count = int(groups.max()) + 1
    masks = k_subset_masks(problem.n, problem.k)
    masks = masks[np.random.default_rng(seed).permutation(masks.shape[0])]
    return EveryKSet(problem, r, groups, count, np.bincount(groups, weights=r, minlength=count), masks,
                     problem.utility.values(masks))


def solved_in_batches(draw: EveryKSet, held: np.ndarray | None = None):
    """The aggregated master given the draw's k-sets in four batches, solved after each (the
    sets at ``held`` held), then Gale's cuts added as the loop adds them until none is
    violated: the master and its last solve."""
    from fairsched.lp.gale import violated_cuts
    from fairsched.lp.size_groups import _AggregatedMaster

    master = _AggregatedMaster(draw.need, draw.problem.n)
    for batch in np.array_split(np.arange(draw.masks.shape[0]), 4):
        sets = Columns.from_masks(draw.masks[batch])
        master.add(sets, group_counts(sets, draw.groups, draw.count), draw.values[batch])
        if held is not None:
            master.hold(held)
        solved = master.solve(None)
    while cuts := violated_cuts(master.counts(), master.weights, draw.groups, draw.r, master.known):
        master.add_cuts(cuts)
        solved = master.solve(None)
    return master, solved


@pytest.mark.parametrize(("k", "seed"), CUT_DRAWS)
def test_a_sifted_master_solves_the_whole_pools_lp(monkeypatch, k, seed):
    """With HiGHS's working set cut back to a few columns after every solve, the master's
    optimum is still the LP over every column added, Gale's cuts included (added as the loop
    adds them, after most columns left the working set): the value of the same master
    solved with all columns held and of an LP written here, duals under which no column of
    the pool has a positive reduced cost, and weights over the pool meeting every row."""
    import fairsched.lp.size_groups as size_groups_module
    from fairsched.lp.size_groups import FEASIBILITY_TOLERANCE

    draw = every_k_set(k, seed)
    problem, r, groups, masks, values = draw.problem, draw.r, draw.groups, draw.masks, draw.values
    # a distribution meeting every floor, the worst one (so that the optimum needs other
    # columns), held in the working set as the loop holds one
    exact = optimum(problem, method="enumeration")
    worst = linprog(values, A_ub=-masks.T.astype(float), b_ub=-r, A_eq=np.ones((1, values.size)), b_eq=[1.0],
                    bounds=(0, None), method="highs")
    assert worst.status == 0 and worst.fun < exact.value - 1e-4
    held = np.flatnonzero(worst.x > 0)
    monkeypatch.setattr(size_groups_module, "WORKING_COLUMNS", (10**9, 0.0))
    full, (full_value, *_) = solved_in_batches(draw, held)
    monkeypatch.setattr(size_groups_module, "WORKING_COLUMNS", (3, 0.0))
    sifted, (value, lam, mu, pi) = solved_in_batches(draw, held)
    assert sifted.working.size < sifted.size == masks.shape[0] == full.working.size
    assert sifted.cut_group.size > 0 and sifted.known == full.known
    assert value == pytest.approx(full_value, abs=1e-9) and value == pytest.approx(exact.value, abs=1e-9)
    counts = group_counts(Columns.from_masks(masks), groups, draw.count)
    reduced = values + sifted.column_rewards(counts, lam, pi) - mu
    assert reduced.max() <= FEASIBILITY_TOLERANCE * max(1.0, abs(mu)) + 1e-12
    weights = sifted.weights
    assert weights.size == masks.shape[0] and weights.min() >= 0 and weights.sum() == pytest.approx(1.0, abs=1e-9)
    dense = counts.toarray()
    cut_rows = np.minimum(dense[:, sifted.cut_group], sifted.cut_size[None, :])
    floors = np.array([np.sort(r[groups == g])[::-1][:j].sum() for g, j in zip(sifted.cut_group, sifted.cut_size)])
    assert (weights @ dense >= draw.need - 1e-9).all() and (weights @ cut_rows >= floors - 1e-9).all()
    assert float(weights @ values) == pytest.approx(value, abs=1e-9)
    # written independently: the same LP by scipy over every column
    solved = linprog(-values, A_ub=-np.hstack([dense, cut_rows]).T, b_ub=-np.append(draw.need, floors),
                     A_eq=np.ones((1, values.size)), b_eq=[1.0], bounds=(0, None), method="highs")
    assert -solved.fun == pytest.approx(value, abs=1e-9)


def test_a_sifted_master_still_certifies_enumerations_optimum(monkeypatch):
    """The loop with HiGHS's working set cut back to a handful of columns whenever it doubles
    (the pool's other sets joining again by sifting) still certifies ``U_opt`` with a
    distribution over actual sets meeting every floor, on ten draws (the working set cut
    back on some of them: most certify before it outgrows the sets held)."""
    import fairsched.lp.size_groups as size_groups_module

    real = size_groups_module._AggregatedMaster._shrink
    cut_back = []

    def spy(self, reduced):
        before = self.working.size
        real(self, reduced)
        cut_back.append(before - self.working.size)

    monkeypatch.setattr(size_groups_module, "WORKING_COLUMNS", (3, 0.0))
    monkeypatch.setattr(size_groups_module._AggregatedMaster, "_shrink", spy)
    for seed in range(10):
        problem = two_class(seed)
        exact = optimum(problem, method="enumeration")
        phase = phase_start(problem)
        found = phase.run(gap=1e-9)
        assert found.status == "certified"
        assert exact.value - 1e-9 <= found.bound
        if found.support is not None:
            value = check_distribution(found.support, found.probabilities, problem)
            assert value == pytest.approx(found.value, abs=1e-12) and relative_gap(value, found.bound) <= 1e-9
        else:
            assert relative_gap(phase.pool.value(), found.bound) <= 1e-9
    assert sum(cut_back) > 0


def test_an_infeasible_working_set_takes_every_pool_column(monkeypatch):
    """Holding no distribution, the working set cut back to a few columns can be infeasible
    once Gale's cuts are added: every pool column then joins it and the master still solves
    the whole pool's LP (the value of the same master holding every column)."""
    import highspy

    import fairsched.lp.size_groups as size_groups_module

    statuses = []
    real = size_groups_module._AggregatedMaster._run

    def recorded(self, time_limit):
        statuses.append(real(self, time_limit))
        return statuses[-1]

    monkeypatch.setattr(size_groups_module._AggregatedMaster, "_run", recorded)
    for k, seed in CUT_DRAWS:
        draw = every_k_set(k, seed)
        found = []
        for working in ((10**9, 0.0), (3, 0.0)):
            monkeypatch.setattr(size_groups_module, "WORKING_COLUMNS", working)
            found.append(solved_in_batches(draw)[1][0])
        assert found[1] == pytest.approx(found[0], abs=1e-9)
    assert highspy.HighsModelStatus.kInfeasible in statuses
