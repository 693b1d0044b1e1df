"""Federated logistic regression under selection bias: model, FedIPW claims, CLI, experiments."""

from __future__ import annotations

import argparse
import csv
import json
from dataclasses import replace

import numpy as np
import pytest

from fairsched.cli.simulate import add_simulate_parser, run_simulate
from fairsched.experiments import fair_population, fedipw
from fairsched.fl import (RULES, ExperimentConfig, SimulationError, TrainConfig, client_objective,
                          local_updates, make_population, run_experiment, run_seed, train)

# --- model ----------------------------------------------------------------------------


def test_objective_gradient_and_optimum():
    pop = make_population("mild", 0)
    N = pop.data.clients
    obj = client_objective(pop.data, np.full(N, 1.0 / N), ridge=0.01)
    theta = np.random.default_rng(1).normal(size=pop.data.dim)
    value, grad = obj.value_and_grad(theta)
    eps = 1e-6
    numeric = [(obj.value(theta + eps * e) - obj.value(theta - eps * e)) / (2 * eps) for e in np.eye(theta.size)]
    np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9)
    theta_star, f_star = obj.solve()
    assert np.linalg.norm(obj.value_and_grad(theta_star)[1]) < 1e-8
    assert obj.values(np.vstack([theta_star, theta]))[1] == pytest.approx(value)
    # The client-level target (1/N) Σ_i f_i, written out client by client.
    per_client = [np.mean(np.logaddexp(0, pop.data.X[i] @ theta) - pop.data.y[i] * (pop.data.X[i] @ theta))
                  for i in range(N)]
    assert value == pytest.approx(np.mean(per_client) + 0.005 * theta @ theta)


def test_local_updates_descend_and_training_with_everyone_reaches_f_star():
    pop = make_population("none", 3)
    N = pop.data.clients
    obj = client_objective(pop.data, np.full(N, 1.0 / N), ridge=0.01)
    _, f_star = obj.solve()
    clients = np.arange(N)
    path = train(pop.data, [clients] * 150, [np.ones(N)] * 150,
                 TrainConfig(rounds=150, local_steps=1, server_decay=0.0))
    assert obj.value(path[-1]) - f_star < 1e-8          # K = 1, full participation: exact GD
    delta = local_updates(np.zeros(pop.data.dim), pop.data, np.array([0, 1]), 5, 0.5, 0.01)
    assert delta.shape == (2, pop.data.dim) and np.all(np.linalg.norm(delta, axis=1) > 0)


def test_same_seed_same_result_and_errors():
    a = run_seed("mild", 4, ExperimentConfig(train=TrainConfig(rounds=15)))
    b = run_seed("mild", 4, ExperimentConfig(train=TrainConfig(rounds=15)))
    for rule in RULES:
        np.testing.assert_array_equal(a.excess[rule], b.excess[rule])
    with pytest.raises(SimulationError, match="unknown bias level 'extreme'; choose one of none, mild"):
        make_population("extreme", 0)
    with pytest.raises(SimulationError, match="seeds: is 0"):
        run_experiment("mild", 0)
    with pytest.raises(SimulationError, match="rounds"):
        TrainConfig(rounds=0)


# --- the FedIPW claims (Morishita 2026), full 10-seed version of docs/fedipw ----------------


@pytest.fixture(scope="module")
def ten_seeds():
    return {level: run_experiment(level, 10) for level in ("none", "moderate", "severe")}


def paired(res, a, b):
    d = res.final(a) - res.final(b)
    return d.mean(), d.std(ddof=1) / np.sqrt(d.size)


@pytest.mark.parametrize("level", ["moderate", "severe"])
def test_fedipw_tracks_the_oracle_and_naive_rules_plateau_above(ten_seeds, level):
    res = ten_seeds[level]
    mean = {r: res.final(r).mean() for r in RULES}
    # FedIPW within 10% of the oracle, or statistically indistinguishable from it (estimated
    # propensities may beat the true ones, see docs/selection_bias.md).
    diff, se = paired(res, "fedipw", "oracle_ipw")
    assert mean["fedipw"] <= 1.10 * mean["oracle_ipw"] or abs(diff) <= 2 * se, (diff, se)
    for rule in ("fedavg", "participation_ipw"):
        diff, se = paired(res, rule, "fedipw")
        assert diff > 5 * se and mean[rule] > 3 * mean["fedipw"], (rule, diff, se)
    diff, se = paired(res, "participation_ipw", "calibration")
    assert diff > 3 * se, (diff, se)
    diff, se = paired(res, "fedavg", "participation_ipw")
    assert diff > 3 * se, (diff, se)                     # the participation bias adds to it


def test_without_enrollment_bias_all_rules_agree_within_noise(ten_seeds):
    none = ten_seeds["none"]
    oracle = none.final("oracle_ipw")
    o_se = oracle.std(ddof=1) / np.sqrt(oracle.size)
    for rule in RULES:
        x = none.final(rule)
        se = x.std(ddof=1) / np.sqrt(x.size)
        assert abs(x.mean() - oracle.mean()) <= 3 * np.hypot(se, o_se), rule
    spread = max(none.final(r).mean() for r in RULES) - min(none.final(r).mean() for r in RULES)
    assert spread < 0.05 * ten_seeds["severe"].final("fedavg").mean()


def test_a_fairsched_policy_can_select_the_participants():
    config = ExperimentConfig(train=TrainConfig(rounds=40), policy="round-robin", k=40)
    run = run_seed("moderate", 0, config)
    assert run.mean_participants < 30                   # 40 scheduled, about half available
    assert run.excess["fedipw"][-1] < 0.25 * run.excess["participation_ipw"][-1]
    cg = run_seed("moderate", 0, replace(config, policy="fairdg"))
    assert cg.excess["fedipw"][-1] < 0.5 * cg.excess["fedavg"][-1]


# --- command line ---------------------------------------------------------------------


def run_cli(argv):
    parser = argparse.ArgumentParser(prog="fairsched")
    sub = parser.add_subparsers(dest="command", required=True)
    add_simulate_parser(sub)
    return run_simulate(parser.parse_args(argv))


def test_simulate_json(capsys):
    assert run_cli(["simulate", "fedipw", "--bias", "moderate", "--seeds", "2", "--rounds", "10",
                    "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)
    assert set(data) == {"bias", "seeds", "rounds", "excess_loss"}
    assert (data["bias"], data["seeds"], data["rounds"]) == ("moderate", 2, 10)
    assert set(data["excess_loss"]) == set(RULES)
    for stats in data["excess_loss"].values():
        assert set(stats) == {"mean", "se"} and stats["mean"] > 0 and stats["se"] >= 0
    assert "seed 2/2" in err
    assert run_cli(["simulate", "fedipw", "--bias", "none", "--seeds", "1", "--rounds", "5", "--json",
                    "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["excess_loss"]["fedavg"]["se"] is None and err == ""


def test_simulate_text_output(capsys):
    assert run_cli(["simulate", "fedipw", "--bias", "mild", "--seeds", "2", "--rounds", "5", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("FedIPW, bias mild: 2 seeds, 5 rounds") and "calibration_noisy" in out and err == ""


@pytest.mark.parametrize("argv, message", [
    (["--bias", "extreme"], "unknown bias level 'extreme'; choose one of none, mild, moderate, severe"),
    (["--bias", "mild", "--seeds", "0"], "--seeds must be a positive integer, got 0"),
    (["--bias", "mild", "--seeds", "-3"], "--seeds must be a positive integer, got -3"),
    (["--bias", "mild", "--rounds", "0"], "--rounds must be a positive integer, got 0"),
])
def test_simulate_bad_input_exits_2(capsys, argv, message):
    assert run_cli(["simulate", "fedipw", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"fairsched: error: {message}\n"


# --- experiment modules ---------------------------------------------------------------


def test_fedipw_experiment_writes_tables_csv_and_figures(tmp_path):
    assert fedipw.main(["--out", str(tmp_path), "--seeds", "2", "--rounds", "8"]) == 0
    names = {p.name for p in tmp_path.iterdir()}
    assert {"results.md", "results.csv", "curves.csv", "excess_vs_round.png", "final_vs_bias.png"} <= names
    rows = list(csv.DictReader(open(tmp_path / "results.csv")))
    assert len(rows) == 4 * len(RULES) * 2
    curves = list(csv.DictReader(open(tmp_path / "curves.csv")))
    assert len(curves) == 4 * len(RULES) * 9
    text = (tmp_path / "results.md").read_text()
    assert "| severe |" in text and "fedipw − oracle" in text
    assert (tmp_path / "final_vs_bias.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_propensity_weighted_selection_serves_the_population(tmp_path):
    config = fair_population.FairPopulationConfig(clients=400, enroll=(0.5, 0.4, 0.1), test_per_stratum=4000,
                                                  rounds=60, train=TrainConfig(rounds=60))
    rows = [fair_population.run_seed(seed, config) for seed in range(4)]
    diff = np.array([r.excess_propensity - r.excess_accuracy for r in rows])
    assert diff.mean() < -3 * diff.std(ddof=1) / np.sqrt(diff.size), diff
    for r in rows:      # (b) moves the trained data towards the population's strata
        assert r.mix_propensity_rural > r.mix_accuracy_rural
        assert r.mix_propensity_urban < r.mix_accuracy_urban
        assert abs(r.estimated_rural_share - r.true_rural_share) < 0.05
    text = fair_population.summary_table(rows)
    assert "(b) − (a), paired by seed | -" in text
