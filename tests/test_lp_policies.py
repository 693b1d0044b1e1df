"""lp-random, lp-sequenced and lyapunov (docs/mathematics.md §9)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from fairsched.errors import PolicyError
from fairsched.instances.generators import PAPER_BETAS
from fairsched.instances import load_instance
from fairsched.lp.solve import optimum
from fairsched.metrics import evaluate, set_values
from fairsched.policies import FairDG, LPRandom, LPSequenced, Lyapunov, make_policy
from fairsched.policies.lp import DeadlineGuard
from fairsched.runtime.simulation import run

from conftest import INSTANCES, bundled_instances
from test_fairdg import fair_instances, floors_always_met

ROUNDS = 100_000
CASES = [(INSTANCES / "paper.toml", beta) for beta in PAPER_BETAS] + [
    (path, None) for path in bundled_instances() if path.name != "paper.toml"]


@pytest.mark.parametrize("path, beta", CASES, ids=[f"{p.stem}-{b}" for p, b in CASES])
def test_lp_sequenced_reaches_u_opt_with_debt_below_one(path, beta):
    problem = load_instance(path, beta=beta)
    u_opt = optimum(problem).value
    schedule = run(problem, LPSequenced(), ROUNDS)
    report = evaluate(schedule, problem, u_opt)
    assert report.ratio >= 0.999
    assert report.max_debt < 1
    assert floors_always_met(schedule, problem.r)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fair_instances())
def test_lp_sequenced_debt_below_one_on_random_instances(instance):
    problem, rounds = instance
    schedule = run(problem, LPSequenced(), rounds)
    assert floors_always_met(schedule, problem.r)


def test_margin_raises_every_rate_and_costs_at_most_the_allowed_loss():
    problem = load_instance(INSTANCES / "coverage.toml")
    policy = LPSequenced(margin=0.01, loss=2e-4)
    schedule = run(problem, policy, 20_000)
    u_opt = optimum(problem).value
    assert 0 < policy.epsilon <= 0.01
    assert policy.optimum.value >= (1 - 2e-4) * u_opt
    assert evaluate(schedule, problem, u_opt).ratio >= 0.999


def test_guard_flags_a_set_that_makes_a_floor_unreachable():
    guard = DeadlineGuard(np.array([0.5, 0.5, 0.5, 0.5]), k=2)
    counts = np.array([1, 1, 0, 0])  # after round 2 workers 2 and 3 are one behind
    masks = np.array([[True, True, False, False], [False, False, True, True]])
    assert guard.safe(masks, counts, t=2).tolist() == [False, True]
    assert guard.earliest_deadlines(counts, t=2).tolist() == [2, 3]


def test_lp_random_matches_u_opt_and_the_lp_marginals():
    problem = load_instance(INSTANCES / "coverage.toml")
    opt = optimum(problem)
    schedule = run(problem, LPRandom(), ROUNDS, seed=3)
    values = set_values(problem, schedule.masks())
    se = values.std(ddof=1) / np.sqrt(ROUNDS)
    assert abs(values.mean() - opt.value) <= 3 * se
    marginals = np.zeros(problem.n)
    for S, p in zip(opt.support, opt.probabilities):
        marginals[S] += p
    fractions = schedule.counts() / ROUNDS
    assert (np.abs(fractions - marginals) <= 4 * np.sqrt(marginals * (1 - marginals) / ROUNDS) + 1e-12).all()


@pytest.mark.parametrize("name", ["lp-random", "lp-sequenced", "lyapunov"])
def test_same_seed_same_schedule(name):
    problem = load_instance(INSTANCES / "facility-location.toml")
    a = run(problem, make_policy(name), 2000, seed=9)
    b = run(problem, make_policy(name), 2000, seed=9)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)


def test_lyapunov_trades_utility_gap_for_queue_length():
    problem = load_instance(INSTANCES / "coverage.toml")
    u_opt = optimum(problem).value
    gaps, queues = [], []
    for V in (0.3, 3.0, 30.0):
        policy = Lyapunov(V=V)
        report = evaluate(run(problem, policy, 20_000), problem, u_opt)
        gaps.append(1 - report.ratio)
        queues.append(policy.max_queue)
    assert gaps[0] > gaps[1] > gaps[2]
    assert queues[0] < queues[1] < queues[2]


def test_lyapunov_meets_floors_in_the_long_run():
    problem = load_instance(INSTANCES / "paper.toml")
    report = evaluate(run(problem, Lyapunov(V=10), 20_000), problem)
    assert report.fairness_slack >= -1e-3


@pytest.mark.parametrize("cls, params, message", [
    (Lyapunov, {"V": 0}, "V must be a finite number > 0, got 0"),
    (Lyapunov, {"V": float("nan")}, "V must be a finite number > 0, got nan"),
    (Lyapunov, {"V": "ten"}, "V must be a finite number > 0, got 'ten'"),
    (LPSequenced, {"margin": -0.1}, "margin must be a finite number >= 0 and <= 1, got -0.1"),
    (LPSequenced, {"loss": 1.0}, "loss must be a finite number >= 0 and < 1, got 1.0"),
    (FairDG, {"cache_size": 0}, "cache_size must be an integer >= 1, got 0"),
    (FairDG, {"cache_size": 2.5}, "cache_size must be an integer >= 1, got 2.5"),
])
def test_bad_parameters(cls, params, message):
    with pytest.raises(PolicyError, match=message):
        cls(**params)


def test_lp_policies_run_on_column_generation_support_at_large_n():
    from fairsched.problem import Problem
    from fairsched.utilities import AccuracyUtility

    rng = np.random.default_rng(0)
    n, k = 60, 6  # C(60, 6) = 50,063,860 sets: only column generation can solve it
    r = rng.uniform(0, 1, n)
    r *= 0.8 * k / r.sum()
    problem = Problem(AccuracyUtility(rng.integers(50, 1001, n).astype(float)), k, r)
    opt = optimum(problem)
    assert opt.method.startswith("column-generation") and opt.relative_gap <= 1e-9
    sequenced = evaluate(run(problem, LPSequenced(), 3000), problem, opt.value)
    assert sequenced.max_debt < 1 and sequenced.ratio >= 0.999
    randomised = evaluate(run(problem, LPRandom(), 3000, seed=1), problem, opt.value)
    assert abs(randomised.ratio - 1) < 0.01
    assert evaluate(run(problem, Lyapunov(V=30), 3000), problem, opt.value).ratio >= 0.98
