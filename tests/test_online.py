"""Learning the utility inside the floors (:mod:`fairsched.online`).

- noiseless rewards: the accuracy-curve learner recovers ``(a, b, c)`` to 1e-6 and its
  lp-sequenced reaches the known-utility lp-sequenced's time average within 1e-4; the
  linear-features learner recovers the coverage weights;
- ``debt < 1`` for lp-sequenced whatever a learner believes (random, wrong utilities at
  every re-plan: hypothesis);
- the feedback channel of :class:`~fairsched.runtime.scheduler.Scheduler` (ids, errors), and a
  restored scheduler, learner included, making the same decisions as the original;
- the harness never lets a learning policy see the true utility, and its command line.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fairsched as fs
from fairsched.errors import FairschedError
from fairsched.feedback import Feedback
from fairsched.online import (
    AccuracyCurveLearner,
    Learner,
    LinearFeaturesLearner,
    OnlinePolicy,
)
from fairsched.online.hidden import HiddenUtility
from fairsched.online.simulate import simulate_online
from fairsched.utilities import AccuracyUtility, Modular


def test_noiseless_accuracy_curve_is_recovered_and_planned_as_well_as_the_truth() -> None:
    problem = fs.load_instance("paper")
    learned = simulate_online(problem, "lp-sequenced", "accuracy-curve", 4000, noise=0.0)
    known = simulate_online(problem, "lp-sequenced-known", None, 4000, noise=0.0)
    assert learned["parameter_error"] <= 1e-6, learned["parameters"]
    assert abs(learned["time_average_utility"] - known["time_average_utility"]) <= 1e-4
    assert learned["max_debt"] < 1


def test_noiseless_linear_features_learn_the_coverage_utility() -> None:
    """Elements covered by the same workers are not separately identifiable, and the floors
    explore only so much, so the check is on ``f`` itself: the error of ``f̂`` on random
    ``k``-sets falls as rounds accumulate and ends within 5%."""
    problem = fs.load_instance("coverage")
    short = simulate_online(problem, "lp-sequenced", "linear-features", 300, noise=0.0)
    long = simulate_online(problem, "lp-sequenced", "linear-features", 3000, noise=0.0)
    assert long["parameter_error"] < short["parameter_error"] and long["parameter_error"] <= 0.05
    assert long["max_debt"] < 1


class _Wrong(Learner):
    """A learner whose every belief is a random utility: the floors must not care."""

    name = "wrong"

    def __init__(self, n: int, seed: int) -> None:
        super().__init__(Modular(np.ones(n)))
        self.rng = np.random.default_rng(seed)

    def _update(self, served, feedback) -> None:
        pass

    def estimate(self):
        if self.rng.uniform() < 0.5:
            return Modular(self.rng.exponential(1.0, self.n) * (self.rng.uniform(size=self.n) < 0.7))
        return AccuracyUtility(self.rng.uniform(1, 100, self.n), a=0.0, b=float(self.rng.uniform(0.1, 5)),
                               c=float(self.rng.uniform(-2, -0.05)))

    def parameters(self):
        return {}

    def _extra_state(self):
        return {}

    def _load_extra_state(self, state) -> None:
        pass


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(3, 9), data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_lp_sequenced_keeps_debt_below_one_whatever_the_learner_believes(n: int, data, seed: int) -> None:
    k = data.draw(st.integers(1, n - 1), label="k")
    rng = np.random.default_rng(seed)
    r = rng.dirichlet(np.ones(n)) * k * data.draw(st.sampled_from([0.6, 0.9, 1.0]), label="load")
    r = np.minimum(r, 1.0)
    problem = fs.Problem(HiddenUtility(n), k, r)
    T = 600
    schedule = fs.run(problem, OnlinePolicy("lp-sequenced", _Wrong(n, seed)), rounds=T, seed=seed)
    counts = np.cumsum(schedule.masks(), axis=0)
    debts = np.arange(1, T + 1)[:, None] * r - counts
    assert debts.max() < 1, debts.max()


def test_the_scheduler_passes_feedback_and_restores_what_was_learned(tmp_path) -> None:
    truth = fs.load_instance("paper")
    hidden = fs.Problem(HiddenUtility(truth.n), truth.k, truth.r, truth.ids)
    make = lambda: OnlinePolicy("lp-sequenced", AccuracyCurveLearner(truth.utility))
    scheduler = fs.Scheduler(hidden, make(), seed=3)
    rng = np.random.default_rng(0)

    def play(s: fs.Scheduler, t: int) -> list[str]:
        ids = s.select(t)
        reward = truth.utility.value(sorted(truth.index_of(i) for i in ids)) + 0.01 * rng.standard_normal()
        s.observe(t, ids, feedback={"reward": reward,
                                    "workers": {i: {"num-examples": float(truth.utility.sizes[truth.index_of(i)]),
                                                    "loss": 0.5} for i in ids}})
        return ids

    for t in range(1, 301):
        play(scheduler, t)
    assert scheduler.policy.learner.rounds == 300
    assert scheduler.policy.learner.parameters()["distinct_sizes"] >= 3
    path = tmp_path / "state.json"
    scheduler.save(path)
    restored = fs.Scheduler.load(path, hidden, make())
    assert restored.policy.learner.parameters() == scheduler.policy.learner.parameters()
    for t in range(301, 401):
        chosen = scheduler.select(t)
        assert restored.select(t) == chosen
        feedback = {"reward": 0.8, "workers": {i: {"num-examples": 300.0} for i in chosen}}
        scheduler.observe(t, chosen, feedback=feedback)
        restored.observe(t, chosen, feedback=feedback)


@pytest.mark.parametrize(("feedback", "message"), [
    ({"reward": float("nan")}, "reward must be a finite number"),
    ({"reward": "0.3"}, "reward must be a finite number"),
    ({"workers": {"nobody": {"loss": 1.0}}}, "unknown worker id 'nobody'"),
    ({"workers": {"SELECTED": {"loss": float("nan")}}}, "metric 'loss' of 'u.*' must be finite"),
    ({"workers": {"SELECTED": {"num-examples": -3}}}, "counts something and cannot be negative"),
    ({"workers": {"SELECTED": {"num-examples": "many"}}}, "must be a number"),
    ({"rewards": 1.0}, "unknown key"),
])
def test_bad_feedback_is_a_clear_error_and_changes_nothing(feedback, message) -> None:
    """Refused before anything is recorded: the round stays open, the learner and the counts are
    as before, and the same round can then be observed with good feedback."""
    truth = fs.load_instance("paper")
    hidden = fs.Problem(HiddenUtility(truth.n), truth.k, truth.r, truth.ids)
    s = fs.Scheduler(hidden, OnlinePolicy("lp-sequenced", AccuracyCurveLearner(truth.utility)), seed=3)
    for t in (1, 2):
        s.observe(t, s.select(t), feedback={"reward": 0.5})
    ids = s.select(3)
    before = s.state_dict()
    if "workers" in feedback and "SELECTED" in feedback["workers"]:
        feedback = {"workers": {ids[0]: feedback["workers"]["SELECTED"]}}
    with pytest.raises(FairschedError, match=message):
        s.observe(3, ids, feedback=feedback)
    assert s.state_dict() == before
    s.observe(3, ids, feedback={"reward": 0.5, "workers": {ids[0]: {"num-examples": 10}}})
    assert s.round == 3 and s.policy.learner.rounds == 3


def test_feedback_for_a_round_not_yet_selected_is_refused() -> None:
    truth = fs.load_instance("paper")
    hidden = fs.Problem(HiddenUtility(truth.n), truth.k, truth.r, truth.ids)
    s = fs.Scheduler(hidden, OnlinePolicy("lp-sequenced", AccuracyCurveLearner(truth.utility)), seed=3)
    with pytest.raises(FairschedError, match="round 1 was not selected"):
        s.observe(1, [], feedback={"reward": 1.0})
    s.observe(1, s.select(1), feedback={"reward": 1.0})
    with pytest.raises(FairschedError, match="round 2 was not selected"):
        s.observe(2, [], feedback={"reward": 1.0})
    before = s.state_dict()
    s.select(2)
    with pytest.raises(FairschedError, match="feedback for round 1 came too late"):
        s.engine.learn(np.zeros(0, dtype=np.int64), Feedback(1.0))
    assert s.policy.learner.rounds == 1 and before["round"] == s.round


def test_a_learning_policy_never_sees_the_true_utility() -> None:
    with pytest.raises(FairschedError, match="hidden"):
        HiddenUtility(4).values(np.ones((1, 4), dtype=bool))
    # the harness hands the policy a hidden utility: a policy that looked would fail the run
    out = simulate_online(fs.load_instance("facility-location"), "fairdg", "linear-features", 200, noise=0.05)
    assert out["max_debt"] < 1 and out["regret_curve"][-1][0] == 200


def test_the_learners_reject_a_utility_they_cannot_model() -> None:
    with pytest.raises(TypeError, match="accuracy utility"):
        AccuracyCurveLearner(Modular([1.0, 2.0]))
    with pytest.raises(TypeError, match="linear in known features"):
        LinearFeaturesLearner(AccuracyUtility([1.0, 2.0]))


def test_the_accuracy_learner_takes_sizes_from_num_examples() -> None:
    learner = AccuracyCurveLearner(AccuracyUtility([1.0, 1.0, 1.0]))
    learner.update(np.array([0, 2]), Feedback(0.5, np.array([0, 2]), {"num-examples": np.array([40.0, 60.0])}))
    assert learner.sizes.tolist() == [40.0, 1.0, 60.0]


def test_cli_simulate_online_json(capsys) -> None:
    from fairsched.cli.app import main

    assert main(["simulate", "online", "paper", "--policy", "fairdg", "--learner", "accuracy-curve",
                 "--rounds", "1500", "--noise", "0.05", "--seed", "1", "--json", "--quiet"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert {"regret", "regret_per_round", "max_debt", "fairness_slack", "parameters", "slope"} <= set(data)
    assert data["max_debt"] < 1 and data["rounds"] == 1500 and data["regret_curve"][-1][0] == 1500
    assert main(["simulate", "online", "paper", "--policy", "oort", "--learner", "accuracy-curve",
                 "--rounds", "10", "--json"]) == 2
    assert "learner 'oort'" in capsys.readouterr().err


def test_stratum_curves_plan_on_drawn_exponents_until_identified() -> None:
    """Before the rounds can identify the curves, each re-plan weighs the strata differently
    (a plan of the prior alone may never show enough distinct sets); once they can, the plan
    is the estimate's."""
    from fairsched.online import StratumCurvesLearner
    from fairsched.utilities import PropensityWeightedAccuracy

    rng = np.random.default_rng(1)
    sizes = rng.integers(1, 300, (10, 2)).astype(float)
    truth = PropensityWeightedAccuracy(sizes, np.array([0.6, 0.4]), 0.2, a=[0.05, 0.1], b=[0.5, 0.8], c=[-0.2, -0.3])
    learner = StratumCurvesLearner(truth)
    drawn = []
    for u in range(10):
        drawn.append(learner.optimistic().c)
        assert not learner.identified()
        served = np.array([u])
        learner.update(served, Feedback(float(truth.value(served))))
        if learner.identified():
            break
    assert learner.identified() and len({tuple(c) for c in drawn}) == len(drawn) > 1
    np.testing.assert_array_equal(learner.optimistic().c, learner.estimate().c)
    np.testing.assert_allclose(learner.estimate().c, truth.c, atol=1e-6)


def test_noiseless_stratum_curves_are_recovered() -> None:
    """The propensity-weighted accuracy's per-stratum curves, from set-level rewards alone: the
    intercepts only as ``Σ_j π_j a_j`` (all that ``f`` depends on), every ``(b_j, c_j)`` to 1e-6."""
    from fairsched.utilities import PropensityWeightedAccuracy

    rng = np.random.default_rng(0)
    n = 12
    sizes = rng.integers(0, 300, (n, 3)).astype(float)
    sizes[np.arange(n), rng.integers(0, 3, n)] += 80
    shares = np.array([0.5, 0.3, 0.2])
    truth = PropensityWeightedAccuracy(sizes, shares, 0.2, a=[0.05, 0.1, 0.08], b=[0.5, 0.8, 0.6],
                                       c=[-0.2, -0.3, -0.25])
    out = simulate_online(fs.Problem(truth, 4, np.full(n, 0.2)), "lp-sequenced", "stratum-curves", 4000, noise=0.0)
    found = out["parameters"]
    assert abs(found["intercept"] - float(shares @ truth.a)) <= 1e-6
    np.testing.assert_allclose(found["b"], truth.b, atol=1e-6)
    np.testing.assert_allclose(found["c"], truth.c, atol=1e-6)
    assert out["parameter_error"] <= 1e-9 and out["max_debt"] < 1
