"""The Python API is consistent: names or objects, Optimum or float, results with status, one seed."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import fairsched as fs
import fairsched.lp.solve
from fairsched.availability import Availability, check_availability
from fairsched.errors import FairschedError, PolicyError
from fairsched.policies import FairDG, LPSequenced, make_policy
from fairsched.results import Result
from fairsched.runtime.engine import Engine
from fairsched.runtime.simulation import Simulation
from fairsched.utilities import Coverage


@pytest.fixture(scope="module")
def paper():
    return fs.load_instance("paper")


def small_problem() -> fs.Problem:
    utility = Coverage(covers=[[0, 1, 2], [2, 3], [3, 4, 5], [0, 5], [6]], weights=[1, 1, 2, 1, 1, 2, 3])
    return fs.Problem(utility, k=2, r=np.full(5, 0.3), ids=("a", "b", "c", "d", "e"))


def test_run_scheduler_and_make_policy_take_a_name_or_an_object(paper):
    by_name = fs.run(paper, "fairdg", rounds=200, seed=1)
    by_object = fs.run(paper, FairDG(), rounds=200, seed=1)
    assert np.array_equal(by_name.indices, by_object.indices)
    with_params = fs.run(paper, "fairdg", rounds=200, seed=1, rank="debt")
    assert with_params.policy == "fairdg"
    policy = FairDG()
    assert make_policy(policy) is policy
    with pytest.raises(PolicyError, match="given with a policy object"):
        make_policy(policy, rank="debt")
    with pytest.raises(PolicyError, match="a policy is a name or a Policy object"):
        make_policy(3)
    assert fs.Scheduler(paper, FairDG()).select(1) == fs.Scheduler(paper, "fairdg").select(1)


def test_evaluate_takes_an_optimum_or_a_float(paper):
    schedule = fs.run(paper, "fairdg", rounds=500)
    opt = fs.optimum(paper)
    assert fs.evaluate(schedule, paper, opt).ratio == fs.evaluate(schedule, paper, opt.value).ratio
    assert fs.evaluate(schedule, paper).ratio is None
    with pytest.raises(FairschedError, match="optimum must be a number or an Optimum"):
        fs.evaluate(schedule, paper, "0.8")


def test_every_result_carries_status_success_message_and_seconds(paper):
    from fairsched.propensity import calibrate, fit_logistic, weight_summary
    from fairsched.propensity.calibration import build_margins
    from fairsched.solvers import column_generation, solve_distribution_lp, solve_grouped_distribution_lp
    from fairsched.submodular.multilinear import multilinear
    from fairsched.utilities import check_submodular

    problem = small_problem()
    opt = fs.optimum(problem)
    masks = np.zeros((len(opt.support), problem.n), dtype=bool)
    for j, S in enumerate(opt.support):
        masks[j, S] = True
    values = problem.utility.values(masks)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    y = (rng.random(200) < 0.5).astype(float)
    results = {
        "optimum": opt,
        "optimum-cg": fs.optimum(paper, method="column-generation"),
        "report": fs.evaluate(fs.run(problem, "fairdg", rounds=50), problem, opt),
        "lp": solve_distribution_lp(values, masks, problem.r),
        "grouped": solve_grouped_distribution_lp(values, masks, np.zeros(masks.shape[0], dtype=int),
                                                 np.ones(1), problem.r),
        "colgen": column_generation(values, masks, problem.r,
                                    lambda lam: fairsched.lp.pricing.pricing_for(problem.utility, 2)(lam)),
        "feasibility": check_availability(problem.r, problem.k, Availability(probabilities=np.full(5, 0.9))),
        "submodularity": check_submodular(problem.utility, trials=20, seed=0),
        "multilinear": multilinear(problem.utility, np.full(5, 0.4)),
        "logistic": fit_logistic(X, y),
        "weights": weight_summary(np.ones(10)),
        "calibration": calibrate(np.ones(200), build_margins(200, continuous={"x": (X[:, 0], 0.0)})),
    }
    policy = make_policy("faircg1")
    policy.reset(problem, 0)
    results["faircg"] = policy.result
    for name, result in results.items():
        assert isinstance(result, Result), name
        assert isinstance(result.status, str) and result.status and result.status != "ok", name
        assert isinstance(result.success, bool), name
        assert isinstance(result.message, str) and result.message, name
        assert result.seconds >= 0, name
    assert results["optimum"].success and results["optimum"].status == "optimal"
    assert results["feasibility"].status == "feasible"


def test_a_time_limited_optimum_says_so(paper):
    coverage = fs.load_instance("coverage")
    opt = fs.optimum(coverage, method="column-generation", pricing="greedy", gap=0.0, time_limit=0.2)
    assert opt.status != "optimal" and not opt.success
    assert opt.upper_bound >= opt.value and opt.gap > 0
    assert "relative gap" in opt.message


@pytest.mark.parametrize("policy", ["fairdg", "faircg2", "lp-random", "random", "lyapunov"])
def test_a_seed_is_an_int_or_a_generator_and_they_agree(paper, policy):
    by_int = fs.run(paper, policy, rounds=300, seed=7)
    by_generator = fs.run(paper, policy, rounds=300, seed=np.random.default_rng(7))
    assert np.array_equal(by_int.indices, by_generator.indices)
    for bad in (-1, 2.5, "7", True):
        with pytest.raises(FairschedError, match="seed must be an integer >= 0"):
            fs.run(paper, policy, rounds=10, seed=bad)


def test_run_honours_the_problems_availability(paper):
    a = np.linspace(0.5, 1.0, paper.n)
    problem = replace(paper, availability=a)
    schedule = fs.run(problem, "fairdg", rounds=400, seed=3)
    availability = Availability(probabilities=a, seed=3)
    for t, chosen in enumerate(schedule, start=1):
        assert availability.mask(t)[chosen].all()
    assert not np.array_equal(schedule.indices, fs.run(paper, "fairdg", rounds=400, seed=3).indices)
    # optimum() under the same availability is the availability LP, below the plain one
    assert fs.optimum(problem).value < fs.optimum(paper).value


def test_an_lp_policy_takes_a_precomputed_optimum_and_run_solves_the_lp_once(paper, monkeypatch):
    opt = fs.optimum(paper)
    calls = []
    original = fairsched.lp.solve.optimum
    monkeypatch.setattr(fairsched.policies.lp, "optimum", lambda *a, **k: calls.append(1) or original(*a, **k))
    planned = fs.run(paper, "lp-sequenced", rounds=500, optimum=opt)
    assert calls == []
    solved = fs.run(paper, "lp-sequenced", rounds=500)
    assert calls and np.array_equal(planned.indices, solved.indices)
    # an optimum of another problem is refused
    other = fs.optimum(paper.with_floors(np.full(paper.n, 0.05)))
    policy = LPSequenced()
    policy.use_optimum(other)
    with pytest.raises(PolicyError, match="does not meet this problem's floors"):
        policy.reset(paper.with_floors(np.full(paper.n, 0.55)), 0)
    with pytest.raises(PolicyError, match="does not plan from the LP optimum"):
        FairDG().use_optimum(opt)


def test_one_engine_one_state_format(paper, tmp_path):
    engine = Engine(paper, "lp-random", seed=4, count="served")
    for _ in range(30):
        chosen = engine.select()
        engine.observe(chosen[1:])
    scheduler = fs.Scheduler(paper, "lp-random", seed=4, count="served")
    for t in range(1, 31):
        ask = scheduler.select(t)
        scheduler.observe(t, ask[1:])
    assert scheduler.state_dict() == engine.state_dict()
    simulation = Simulation(paper, "lp-random", 100, seed=4)
    simulation.advance(30)
    assert simulation.state_dict()["engine"]["format"] == engine.state_dict()["format"] == "fairsched-state"
    with pytest.raises(FairschedError, match="already selected"):
        engine.select()
        engine.select()
    with pytest.raises(FairschedError, match="served round .* without being selected"):
        engine.observe(np.array([u for u in range(paper.n) if u not in engine.pending][:1]))


def test_version_one_states_are_refused_with_a_clear_message(paper, tmp_path):
    scheduler = fs.Scheduler(paper, "fairdg")
    state = {**scheduler.state_dict(), "version": 1}
    with pytest.raises(fs.CheckpointError, match="version 1 is not supported .*reads version 2"):
        fs.Scheduler(paper, "fairdg").load_state_dict(state)


def test_the_schedule_too_large_for_memory_is_refused_before_allocating(paper):
    with pytest.raises(fs.TooLargeError, match="rounds fit"):
        Simulation(paper, "fairdg", 10**12)
