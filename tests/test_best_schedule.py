"""The best schedule with debt < 1 (``fairsched.policies.best_schedule``) against brute force and U_opt."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fairsched.errors import FairschedError
from fairsched.lp.solve import optimum
from fairsched.policies.best_schedule import best_schedule, period_of
from fairsched.problem import Problem
from fairsched.utilities import FacilityLocation, Modular

#: floors of tiny instances with Σ r = k exactly: (k, floors) with periods 2..6
FLOOR_SETS = [
    (1, ["1/2", "1/3", "1/6"]),
    (1, ["1/2", "1/4", "1/4"]),
    (2, ["1/2", "1/2", "1/2", "1/2"]),
    (2, ["2/3", "2/3", "1/3", "1/3"]),
    (2, ["1/2", "1/2", "2/3", "1/3"]),
    (1, ["1/3", "1/3", "1/6", "1/6"]),
    (2, ["5/6", "1/2", "1/3", "1/3"]),
]


def brute_force(problem: Problem, floors: list[Fraction]) -> float:
    """The best mean utility over all periods of P sets of size k with N_u(t) >= ⌊r_u t⌋ and N_u(P) = r_u P."""
    n, k = problem.n, problem.k
    P = period_of(problem.r)
    sets = list(itertools.combinations(range(n), k))
    value = {S: problem.utility.value(np.array(S)) for S in sets}
    need = [[(f.numerator * t) // f.denominator for f in floors] for t in range(P + 1)]
    best = -np.inf

    def extend(t: int, counts: tuple[int, ...], total: float) -> None:
        nonlocal best
        if t == P:
            best = max(best, total / P)
            return
        for S in sets:
            after = tuple(c + (u in S) for u, c in enumerate(counts))
            if all(c >= m for c, m in zip(after, need[t + 1])):
                extend(t + 1, after, total + value[S])

    extend(0, (0,) * n, 0.0)
    return best


def _problem(utility, k: int, floors: list[str]) -> tuple[Problem, list[Fraction]]:
    fractions = [Fraction(f) for f in floors]
    return Problem(utility, k=k, r=[float(f) for f in fractions]), fractions


def _debt_below_one(sets: list[np.ndarray], r: list[Fraction], rounds: int) -> bool:
    counts = np.zeros(len(r), dtype=np.int64)
    for t in range(1, rounds + 1):
        counts[sets[(t - 1) % len(sets)]] += 1
        if any(Fraction(t) * f - int(c) >= 1 for f, c in zip(r, counts)):
            return False
    return True


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(FLOOR_SETS), st.integers(0, 2**32 - 1))
def test_agrees_with_brute_force_and_stays_below_u_opt(floor_set, seed):
    k, floors = floor_set
    rng = np.random.default_rng(seed)
    n = len(floors)
    similarity = rng.uniform(size=(5, n)) ** 2
    problem, fractions = _problem(FacilityLocation(similarity.round(3)), k, floors)
    opt = optimum(problem)
    found = best_schedule(problem, opt.fairness_price)
    assert found.value == pytest.approx(brute_force(problem, fractions), abs=1e-12)
    assert found.value <= opt.upper_bound + 1e-9
    assert found.period == period_of(problem.r) == len(found.sets)
    assert all(S.size == k for S in found.sets)
    assert _debt_below_one(found.sets, fractions, 3 * found.period)  # the period repeats
    # any prices give the same optimum (the counts over a period are fixed), with or without an incumbent
    again = best_schedule(problem, np.zeros(n), incumbent=found.sets)
    assert again.value == pytest.approx(found.value, abs=1e-12)


def test_reaches_u_opt_when_a_schedule_with_debt_below_one_does():
    """Two pairs that each cover one point: alternating {0, 2} and {1, 3} is optimal and has debt 1/2."""
    similarity = np.array([[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    problem, _ = _problem(FacilityLocation(similarity), 2, ["1/2"] * 4)
    opt = optimum(problem)
    found = best_schedule(problem, opt.fairness_price)
    assert found.value == pytest.approx(opt.value, abs=1e-9) == pytest.approx(2.0)
    # a modular utility: every schedule with Σ r = k has counts r·P, so each reaches U_opt = w·r
    problem, _ = _problem(Modular([3.0, 1.0, 2.0]), 1, ["1/2", "1/3", "1/6"])
    assert best_schedule(problem, np.zeros(3)).value == pytest.approx(optimum(problem).value, abs=1e-9)


def test_pays_a_price_below_u_opt():
    """Six workers at 1/3, k = 2: the LP mixes pairs freely; a schedule with debt < 1 must partition
    the six into three pairs every three rounds, and here no partition reaches U_opt."""
    rng = np.random.default_rng(32)
    strength = np.where(np.arange(6) < 2, 1.0, 0.25)
    similarity = (rng.uniform(size=(6, 6)) ** 2 * strength).round(3)
    problem, fractions = _problem(FacilityLocation(similarity), 2, ["1/3"] * 6)
    opt = optimum(problem)
    found = best_schedule(problem, opt.fairness_price)
    assert found.value == pytest.approx(brute_force(problem, fractions), abs=1e-12)
    assert found.value < opt.value - 1e-3


def test_errors_name_the_problem():
    problem, _ = _problem(Modular([1.0, 1.0, 1.0]), 1, ["1/2", "1/4", "1/8"])
    with pytest.raises(FairschedError, match="floors summing to k = 1 exactly"):
        best_schedule(problem, np.zeros(3))
    problem = Problem(Modular(np.ones(3)), k=1, r=[0.5, 0.25, 0.25 - 1e-7])
    with pytest.raises(FairschedError, match="not a fraction with denominator"):
        best_schedule(problem, np.zeros(3))
    problem = Problem(Modular(np.ones(16)), k=1, r=np.full(16, 1 / 16))
    with pytest.raises(FairschedError, match="n <= 15, got 16"):
        best_schedule(problem, np.zeros(16))
    problem, _ = _problem(Modular([1.0, 1.0, 1.0]), 1, ["1/2", "1/3", "1/6"])
    with pytest.raises(FairschedError, match="lets a debt reach 1 in round 2"):
        best_schedule(problem, np.zeros(3), incumbent=[np.array([1]), np.array([1]), np.array([0]),
                                                       np.array([0]), np.array([2]), np.array([0])])


@pytest.mark.parametrize("ties", [False, True], ids=["facility-location", "all-tied"])
@pytest.mark.parametrize("chunk", [1, 97, 5_000])
def test_chunks_of_any_size_find_the_same_period(monkeypatch, chunk, ties):
    """The state-set pairs are examined in chunks and each layer merged in batches; where the
    chunks end changes neither the period found (ties keep the earliest pair: with every
    worker worth the same, every period ties) nor the work."""
    from fairsched.experiments.lp_sequenced_price import instance
    from fairsched.policies import best_schedule as module

    _, problem, periodic = instance(10 if chunk == 1 else 0)
    assert periodic
    if ties:
        problem = Problem(Modular(np.ones(problem.n)), k=problem.k, r=problem.r)
    prices = optimum(problem).fairness_price
    whole = best_schedule(problem, prices)
    monkeypatch.setattr(module, "CHUNK_PAIRS", chunk)
    split = best_schedule(problem, prices)
    assert split.value == whole.value and split.states == whole.states
    assert all(np.array_equal(a, b) for a, b in zip(split.sets, whole.sets, strict=True))
    pruned = best_schedule(problem, prices, incumbent=whole.sets)  # pruning by the optimum's own cost
    assert pruned.value == whole.value and pruned.states <= whole.states
