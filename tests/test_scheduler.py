"""The embedding API: Scheduler, availability, drop-outs, state save/restore."""

from __future__ import annotations

import json

import numpy as np
import pytest
from conftest import INSTANCES

from fairsched.errors import CheckpointError, FairschedError, InstanceError
from fairsched.instances import load_instance
from fairsched.runtime.scheduler import Scheduler

POLICIES = ["fairdg", "faircg1", "faircg2", "lp-random", "lp-sequenced", "lyapunov", "greedy", "random",
            "round-robin"]


def drive(scheduler, rounds, start, rng):
    """Play rounds with random availability and random drop-outs; return the decisions."""
    ids = scheduler.problem.ids
    decisions = []
    for t in range(start, start + rounds):
        available = [w for w in ids if rng.random() < 0.8]
        chosen = scheduler.select(t, available)
        assert set(chosen) <= set(available) and len(chosen) <= scheduler.problem.k
        served = [w for w in chosen if rng.random() < 0.9]
        scheduler.observe(t, served)
        decisions.append(chosen)
    return decisions


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("count", ["selected", "served"])
def test_restored_scheduler_makes_the_same_decisions(policy, count, tmp_path):
    problem = load_instance(INSTANCES / "paper.toml")
    original = Scheduler(problem, policy, seed=5, count=count)
    drive(original, 4200, 1, np.random.default_rng(0))  # past a 4096-round batch for FairCG
    path = tmp_path / "state.json"
    original.save(path)
    restored = Scheduler.load(path, problem, policy)
    a = drive(original, 300, 4201, np.random.default_rng(1))
    b = drive(restored, 300, 4201, np.random.default_rng(1))
    assert a == b
    assert original.debts() == restored.debts()


def test_served_counting_keeps_asking_a_worker_that_drops():
    problem = load_instance(INSTANCES / "paper.toml")
    served_mode = Scheduler(problem, "fairdg", count="served")
    selected_mode = Scheduler(problem, "fairdg", count="selected")
    for t in range(1, 2001):
        for scheduler in (served_mode, selected_mode):
            chosen = scheduler.select(t)
            scheduler.observe(t, [w for w in chosen if w != "u1"])  # u1 never reports back
    assert served_mode.fractions()["u1"] == 0.0
    assert served_mode.debts()["u1"] == pytest.approx(0.21 * 2000)
    assert selected_mode.fractions()["u1"] >= 0.21
    assert selected_mode.debts()["u1"] < 1


def test_leave_and_join_restart_the_floor():
    problem = load_instance(INSTANCES / "paper.toml")
    scheduler = Scheduler(problem, "fairdg")
    scheduler.leave("u9")
    for t in range(1, 101):
        assert "u9" not in scheduler.select(t)
        scheduler.observe(t, [])
    assert scheduler.debts()["u9"] == pytest.approx(63.0)
    scheduler.join("u9")
    assert scheduler.debts()["u9"] < 1
    worst = 0.0
    for t in range(101, 401):
        chosen = scheduler.select(t)
        scheduler.observe(t, chosen)
        worst = max(worst, scheduler.debts()["u9"])
    assert worst < 1


def test_round_order_and_strangers_are_errors():
    problem = load_instance(INSTANCES / "paper.toml")
    scheduler = Scheduler(problem, "fairdg")
    with pytest.raises(FairschedError, match="expected round 1, got 2"):
        scheduler.select(2)
    chosen = scheduler.select(1)
    outsider = next(w for w in problem.ids if w not in chosen)
    with pytest.raises(FairschedError, match=f"{outsider} served round 1 without being selected"):
        scheduler.observe(1, [outsider])
    with pytest.raises(InstanceError, match="unknown worker id 'zz'"):
        scheduler.observe(1, ["zz"])
    with pytest.raises(FairschedError, match="count must be one of"):
        Scheduler(problem, "fairdg", count="maybe")


def _saved(tmp_path):
    problem = load_instance(INSTANCES / "paper.toml")
    scheduler = Scheduler(problem, "fairdg")
    drive(scheduler, 20, 1, np.random.default_rng(0))
    path = tmp_path / "state.json"
    scheduler.save(path)
    return problem, path


def test_truncated_state_is_refused(tmp_path):
    problem, path = _saved(tmp_path)
    path.write_text(path.read_text()[:40])
    with pytest.raises(CheckpointError, match="corrupted or truncated"):
        Scheduler.load(path, problem, "fairdg")


def test_foreign_version_and_format_are_refused(tmp_path):
    problem, path = _saved(tmp_path)
    state = json.loads(path.read_text())
    path.write_text(json.dumps({**state, "version": 99}))
    with pytest.raises(CheckpointError, match="version 99 is not supported"):
        Scheduler.load(path, problem, "fairdg")
    path.write_text(json.dumps({**state, "format": "something-else"}))
    with pytest.raises(CheckpointError, match="not a fairsched-state document"):
        Scheduler.load(path, problem, "fairdg")


def test_state_of_another_problem_or_policy_is_refused(tmp_path):
    problem, path = _saved(tmp_path)
    with pytest.raises(CheckpointError, match="different problem"):
        Scheduler.load(path, problem.with_floors(problem.r * 0.5), "fairdg")
    with pytest.raises(CheckpointError, match="malformed"):
        Scheduler.load(path, problem, "round-robin")
    state = json.loads(path.read_text())
    state["policy"]["counts"] = state["policy"]["counts"][:3]
    path.write_text(json.dumps(state))
    with pytest.raises(CheckpointError, match="malformed"):
        Scheduler.load(path, problem, "fairdg")


def test_available_mask_decides_as_the_ids_do():
    problem = load_instance(INSTANCES / "paper.toml")
    by_ids, by_mask = Scheduler(problem, "fairdg"), Scheduler(problem, "fairdg")
    rng = np.random.default_rng(4)
    for t in range(1, 301):
        mask = rng.random(problem.n) < 0.8
        available = [w for w, ok in zip(problem.ids, mask) if ok]
        chosen = by_ids.select(t, available)
        assert by_mask.select(t, available_mask=mask) == chosen
        assert set(chosen) <= set(available)
        by_ids.observe(t, chosen)
        by_mask.observe(t, chosen)
    assert by_ids.debts() == by_mask.debts()


def test_available_mask_is_checked():
    problem = load_instance(INSTANCES / "paper.toml")
    scheduler = Scheduler(problem, "fairdg")
    with pytest.raises(InstanceError, match=r"available_mask must be a boolean array of shape \(10,\)"):
        scheduler.select(1, available_mask=np.ones(problem.n, dtype=int))
    with pytest.raises(InstanceError, match=r"shape \(10,\), got bool of shape \(9,\)"):
        scheduler.select(1, available_mask=np.ones(problem.n - 1, dtype=bool))
    with pytest.raises(InstanceError, match=r"select_indices: available must be"):
        scheduler.select_indices(1, np.ones(problem.n + 1, dtype=bool))
    with pytest.raises(FairschedError, match="give one of available_ids, unavailable_ids or available_mask"):
        scheduler.select(1, ["u1"], available_mask=np.ones(problem.n, dtype=bool))
    mask = np.zeros(problem.n, dtype=bool)
    mask[[0, 3]] = True
    assert scheduler.select(1, available_mask=mask) == ["u1", "u4"]
