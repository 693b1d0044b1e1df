"""lp-sequenced's exact period (``fairsched.policies.exact_period``): where the floors are
rational and sum to ``k`` exactly, it plays the best period of any schedule with debt < 1."""

from __future__ import annotations

import numpy as np
import pytest

import fairsched as fs
from fairsched.errors import PolicyError
from fairsched.experiments.lp_sequenced_price import instance
from fairsched.lp.solve import optimum
from fairsched.policies import LPSequenced
from fairsched.policies.best_schedule import best_schedule, period_of
from fairsched.policies.exact_period import period_floors

#: periodic instances of the price experiment on which deficit sequencing alone fell short
SHORT = (14, 20, 22)


def debts(problem, schedule) -> np.ndarray:
    counts = np.cumsum(schedule.masks(), axis=0)
    return problem.r[None, :] * np.arange(1, counts.shape[0] + 1)[:, None] - counts


@pytest.mark.parametrize("i", SHORT)
def test_lp_sequenced_reaches_the_best_schedule_with_debt_below_one(i):
    """Over whole periods its time average is exactly the best period's (computed here without
    an incumbent), at least what deficit sequencing alone reaches, and every debt stays below 1."""
    _, problem, periodic = instance(i)
    assert periodic
    opt = optimum(problem)
    best = best_schedule(problem, opt.fairness_price)
    rounds = 50 * best.period
    policy = LPSequenced()
    schedule = fs.run(problem, policy, rounds)
    report = fs.evaluate(schedule, problem, opt)
    assert report.time_average_utility == pytest.approx(best.value, rel=1e-12)
    assert report.ratio >= 0.999
    assert debts(problem, schedule).max() < 1
    assert policy.diagnostics(opt.value)["exact_period"] == best.period
    alone = fs.evaluate(fs.run(problem, LPSequenced(period_states=0), rounds), problem, opt)
    assert report.time_average_utility >= alone.time_average_utility - 1e-12


def test_a_restored_scheduler_continues_the_period_exactly(tmp_path):
    _, problem, _ = instance(14)
    a = fs.Scheduler(problem, "lp-sequenced", seed=1)
    for t in range(1, 9):  # stop inside the second period (P = 6)
        a.observe(t, a.select(t))
    path = tmp_path / "state.json"
    a.save(path)
    b = fs.Scheduler.load(path, problem, "lp-sequenced")
    assert b.policy._period is not None and b.policy._period_searched
    for t in range(9, 40):
        chosen = a.select(t)
        assert b.select(t) == chosen
        a.observe(t, chosen)
        b.observe(t, chosen)


def test_a_state_saved_before_the_exact_period_still_loads():
    _, problem, _ = instance(14)
    a = fs.Scheduler(problem, "lp-sequenced", seed=1)
    for t in range(1, 4):
        a.observe(t, a.select(t))
    state = a.state_dict()
    del state["policy"]["params"]["period_states"]
    for key in ("period", "period_searched"):
        del state["policy"][key]
    b = fs.Scheduler(problem, "lp-sequenced", seed=1)
    b.load_state_dict(state)
    assert b.round == 3 and (b.policy.counts == a.policy.counts).all()
    for t in range(4, 30):  # deficit sequencing until the next period boundary on the counts, then the period
        b.observe(t, b.select(t))
    assert b.policy._period is not None


def test_unavailability_leaves_the_period_and_it_is_entered_again():
    """A round with a worker away is decided by deficit sequencing under the guard; once the
    counts are back on the period at a period boundary, the period is played again."""
    _, problem, _ = instance(14)
    P = period_of(problem.r)
    policy = LPSequenced()
    policy.reset(problem, seed=0)
    played, rounds = [], 40 * P
    away = np.ones(problem.n, dtype=bool)
    away[int(np.argmax(problem.r))] = False
    for t in range(1, rounds + 1):
        before = policy._period.rounds if policy._period is not None else 0
        S = policy.select(away if t in (2 * P + 3, 2 * P + 4) else None)
        played.append(policy._period.rounds > before)
        policy.observe(S)
    assert all(played[: 2 * P + 2]) and not any(played[2 * P + 2: 2 * P + 4])
    assert any(played[3 * P:]), "never re-entered the period"
    assert (problem.r * rounds - policy.counts < 1).all()
    assert (policy.counts == policy._period.per_period * (rounds // P)).all()  # back on the period


def test_ineligible_problems_and_budget_keep_deficit_sequencing():
    _, problem, _ = instance(14)
    assert period_floors(problem) is not None
    decimals = problem.with_floors(np.floor(problem.r * 1000) / 1000)  # Σ r < k: no period structure
    assert period_floors(decimals) is None
    for p, kw in ((decimals, {}), (problem, {"period_states": 10}), (problem, {"period_states": 0})):
        policy = LPSequenced(**kw)
        fs.run(p, policy, 30)
        assert policy.diagnostics(None)["exact_period"] is None
    with pytest.raises(PolicyError, match="period_states must be an integer >= 0"):
        LPSequenced(period_states=-1)
