"""``fairsched run`` computes U_opt only within a budget, and says what it reached and why."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tomli_w

import fairsched as fs
import fairsched.cli.run as cli_run
from fairsched.cli import main
from fairsched.lp.result import Optimum


def run_json(capsys, *argv: str) -> dict:
    assert main(["run", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_auto_reports_the_certified_optimum(capsys):
    data = run_json(capsys, "paper", "--policy", "fairdg", "--rounds", "500")
    opt = fs.optimum(fs.load_instance("paper"))
    assert data["optimum"] == pytest.approx(opt.value) and data["optimum_status"] == "optimal"
    assert data["optimum_reason"] is None and data["optimum_upper_bound"] >= data["optimum"]
    assert data["ratio"] == pytest.approx(data["time_average_utility"] / data["optimum"])
    assert data["ratio_lower_bound"] <= data["ratio"] + 1e-12


def test_none_skips_it_and_says_so(capsys, monkeypatch):
    monkeypatch.setattr(cli_run, "optimum", lambda *a, **k: pytest.fail("the LP was solved"))
    data = run_json(capsys, "paper", "--policy", "fairdg", "--rounds", "200", "--optimum", "none")
    assert data["optimum"] is None and data["ratio"] is None and data["optimum_upper_bound"] is None
    assert data["optimum_status"] == "not-computed" and "--optimum none" in data["optimum_reason"]


def test_bound_reports_only_the_certified_upper_bound(capsys):
    data = run_json(capsys, "coverage", "--policy", "fairdg", "--rounds", "300", "--optimum", "bound")
    assert data["optimum"] is None and data["ratio"] is None
    assert data["optimum_upper_bound"] >= fs.optimum(fs.load_instance("coverage")).value - 1e-9
    assert data["ratio_lower_bound"] == pytest.approx(data["time_average_utility"] / data["optimum_upper_bound"])
    assert "bound only" in data["optimum_reason"]


def _stopped_early(problem, **kwargs) -> Optimum:
    """What a time-limited column generation returns: a feasible value below a certified bound."""
    exact = fs.optimum(problem)
    return Optimum(value=exact.value * 0.99, upper_bound=exact.value * 1.01, method="column-generation+test",
                   support=exact.support, probabilities=exact.probabilities, fairness_price=exact.fairness_price,
                   columns=len(exact.support), iterations=3, status="time-limit", success=False,
                   message="column generation stopped after 3 iterations because the time limit was reached")


def test_a_budget_that_runs_out_gives_the_value_and_bound_reached(capsys, monkeypatch):
    seen = {}

    def limited(problem, **kwargs):
        seen.update(kwargs)
        return _stopped_early(problem)

    monkeypatch.setattr(cli_run, "optimum", limited)
    data = run_json(capsys, "paper", "--policy", "fairdg", "--rounds", "200", "--optimum-time-limit", "7")
    assert seen["time_limit"] == 7
    assert data["optimum_status"] == "time-limit" and "not certified optimal" in data["optimum_reason"]
    assert data["optimum"] < data["optimum_upper_bound"]
    assert data["ratio_lower_bound"] < data["ratio"]
    # the text output never calls an uncertified value U_opt
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "200"]) == 0
    text = capsys.readouterr().out
    assert "U_opt <=" in text and "LP value" in text and "time-limit" in text


def test_a_value_without_any_bound_is_reported_as_such(capsys, monkeypatch):
    """A heuristic pricing (a utility not certified submodular) gives an LP value and an infinite bound:
    the text says so instead of failing on the missing bound."""
    def unbounded(problem, **kwargs):
        exact = fs.optimum(problem)
        return Optimum(value=exact.value, upper_bound=float("inf"), method="column-generation+test", support=exact.support,
                       probabilities=exact.probabilities, fairness_price=exact.fairness_price,
                       columns=len(exact.support), iterations=3, status="stalled", success=False,
                       message="no column prices out at the master's duals (the pricing is heuristic)")

    monkeypatch.setattr(cli_run, "optimum", unbounded)
    data = run_json(capsys, "paper", "--policy", "fairdg", "--rounds", "200")
    assert data["optimum_upper_bound"] is None and data["optimum_status"] == "stalled"
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "200"]) == 0
    text = capsys.readouterr().out
    assert "LP value" in text and "no certified upper bound" in text and "U_opt <=" not in text


def test_exact_refuses_an_uncertified_optimum(capsys, monkeypatch):
    monkeypatch.setattr(cli_run, "optimum", lambda problem, **kwargs: _stopped_early(problem))
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "200", "--optimum", "exact"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--optimum exact" in err[0] and "certified optimum" in err[0]


def test_exact_has_no_time_limit(capsys, monkeypatch):
    seen = {}
    original = cli_run.optimum
    monkeypatch.setattr(cli_run, "optimum", lambda problem, **kwargs: seen.update(kwargs) or original(problem))
    run_json(capsys, "paper", "--policy", "fairdg", "--rounds", "100", "--optimum", "exact")
    assert seen["time_limit"] is None


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf"])
def test_bad_time_limit_is_refused(capsys, value):
    assert main(["run", "paper", "--policy", "fairdg", f"--optimum-time-limit={value}"]) == 2
    assert "--optimum-time-limit must be positive seconds" in capsys.readouterr().err


def test_large_instances_summarise_the_workers(tmp_path, capsys):
    n, k = 300, 30
    table = {"k": k, "workers": {"r": [0.09] * n},
             "utility": {"kind": "accuracy", "sizes": np.linspace(50, 500, n).round().tolist()}}
    path = tmp_path / "large.toml"
    path.write_text(tomli_w.dumps(table))
    assert main(["run", str(path), "--policy", "round-robin", "--rounds", "25", "--optimum", "none"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) < 10 and any(line.startswith("300 workers, ") and "below their floor" in line for line in lines)
