"""U_opt from fairsched.optimum against an independent brute-force LP over all sets |S| <= k."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from conftest import INSTANCES, bundled_instances
from scipy.optimize import linprog

from fairsched.errors import TooLargeError
from fairsched.instances import load_instance
from fairsched.instances.generators import PAPER_BETAS
from fairsched.lp.solve import optimum
from fairsched.problem import Problem
from fairsched.utilities import AccuracyUtility


def brute_force_u_opt(problem: Problem) -> float:
    """max Σ p_S f(S) over every S with |S| <= k (not only k-sets), by scipy's linprog."""
    n, k = problem.n, problem.k
    sets = [S for size in range(k + 1) for S in itertools.combinations(range(n), size)]
    values = np.array([problem.utility.value(list(S)) for S in sets])
    membership = np.zeros((n, len(sets)))
    for j, S in enumerate(sets):
        membership[list(S), j] = 1.0
    res = linprog(-values, A_ub=-membership, b_ub=-np.asarray(problem.r),
                  A_eq=np.ones((1, len(sets))), b_eq=[1.0], bounds=(0, None), method="highs")
    assert res.status == 0, res.message
    return -res.fun


@pytest.mark.parametrize("beta", PAPER_BETAS)
def test_paper_instance_every_beta_matches_brute_force(beta):
    problem = load_instance(INSTANCES / "paper.toml", beta=beta)
    opt = optimum(problem)
    assert opt.value == pytest.approx(brute_force_u_opt(problem), abs=1e-7)
    assert opt.gap <= 1e-7


@pytest.mark.parametrize("path", bundled_instances(), ids=lambda p: p.stem)
def test_bundled_instances_match_brute_force(path):
    problem = load_instance(path)
    opt = optimum(problem)
    assert opt.value == pytest.approx(brute_force_u_opt(problem), abs=1e-7)


def test_cvxpy_backend_agrees_with_highs():
    problem = load_instance(INSTANCES / "paper.toml", beta=0.42)
    assert optimum(problem, backend="cvxpy").value == pytest.approx(optimum(problem).value, abs=1e-6)


def test_solution_is_a_fair_distribution_with_consistent_prices():
    problem = load_instance(INSTANCES / "paper.toml", beta=0.54)
    opt = optimum(problem)
    assert opt.probabilities.sum() == pytest.approx(1.0, abs=1e-9)
    assert (opt.probabilities > 0).all()
    assert len(opt.support) <= problem.n + 1
    marginals = np.zeros(problem.n)
    for S, p in zip(opt.support, opt.probabilities):
        assert S.size == problem.k
        marginals[S] += p
    assert (marginals >= problem.r - 1e-8).all()
    achieved = sum(p * problem.utility.value(S) for S, p in zip(opt.support, opt.probabilities))
    assert achieved == pytest.approx(opt.value, abs=1e-9)
    assert (opt.fairness_price >= 0).all()
    # complementary slackness: a priced floor is tight
    priced = opt.fairness_price > 1e-7
    assert np.allclose(marginals[priced], problem.r[priced], atol=1e-7)


def test_without_floors_the_optimum_is_the_best_k_set():
    sizes = [5.0, 1.0, 3.0, 2.0]
    problem = Problem(AccuracyUtility(sizes), 2, np.zeros(4))
    assert optimum(problem).value == pytest.approx(problem.utility.value([0, 2]), abs=1e-12)


def test_column_limit_refuses_with_a_clear_message():
    problem = Problem(AccuracyUtility(np.arange(1.0, 17.0)), 8, np.full(16, 0.1))
    with pytest.raises(TooLargeError, match="12,870"):
        optimum(problem, method="enumeration", max_columns=1000)


def test_optimum_decreases_as_floors_rise():
    values = [optimum(load_instance(INSTANCES / "paper.toml", beta=b)).value for b in PAPER_BETAS]
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(values))
    assert values[0] > values[-1]
