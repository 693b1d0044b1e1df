"""The experiments (the reproduction of Li, Liu and Ji 2021, Section VI; the policy comparison) on short horizons, and what they share."""

from __future__ import annotations

import csv
import sys

import pytest

from fairsched.experiments import seed003
from fairsched.experiments.common import bundled_problem, measure
from fairsched.experiments.plots import pyplot
from fairsched.instances import load_instance
from fairsched.lp.solve import optimum
from fairsched.runtime.measure import measure as measure_run

from conftest import INSTANCES


def test_reproduction_writes_tables_csv_and_figures(tmp_path, capsys):
    assert seed003.main(["--out", str(tmp_path), "--rounds", "3000", "--costly-rounds", "1000"]) == 0
    names = {p.name for p in tmp_path.iterdir()}
    assert {"results.md", "paper_sweep.csv", "costly.csv", "fig2a_utility.png", "fig2b_fractions.png",
            "fig2c_worker1.png", "fig3_ratios.png"} <= names
    rows = list(csv.DictReader(open(tmp_path / "paper_sweep.csv")))
    assert len(rows) == 11 * len(seed003.PAPER_POLICIES)
    for row in rows:
        if row["policy"] in ("faircg1", "faircg2"):
            assert float(row["multilinear_value"]) >= float(row["lower_bound"]) - 1e-12
        if row["policy"] == "fairdg":
            assert float(row["max_debt"]) < 1
    costly = list(csv.DictReader(open(tmp_path / "costly.csv")))
    assert len(costly) == 3 * len(seed003.COSTLY_POLICIES)
    text = (tmp_path / "results.md").read_text()
    assert "| 0.42 |" in text and "coverage.toml" in text
    assert (tmp_path / "fig3_ratios.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "paper β=0.42 fairdg" in capsys.readouterr().err


def test_policy_comparison_writes_table_sweep_and_plot(tmp_path):
    from fairsched.experiments import compare

    assert compare.main(["--out", str(tmp_path), "--rounds", "400"]) == 0
    rows = list(csv.DictReader(open(tmp_path / "compare.csv")))
    assert len(rows) == len(compare.cases()) * len(compare.POLICIES)
    assert {r["policy"] for r in rows} >= {"lp-sequenced", "lyapunov[V=10]", "round-robin"}
    for r in rows:
        if r["policy"] in ("lp-sequenced", "fairdg"):
            assert float(r["max_debt"]) < 1
    sweep = list(csv.DictReader(open(tmp_path / "lyapunov_sweep.csv")))
    assert [float(s["V"]) for s in sweep] == list(compare.SWEEP_VS)
    assert (tmp_path / "lyapunov_sweep.png").stat().st_size > 1000
    assert "## Summary over all cases" in (tmp_path / "results.md").read_text()


def test_experiments_read_the_bundled_instances_whatever_the_working_directory(tmp_path, monkeypatch):
    """Not ``instances/paper.toml`` beside the sources, nor a ``paper.toml`` in the working directory."""
    expected = optimum(load_instance(INSTANCES / "paper.toml", beta=0.42)).value
    (tmp_path / "instances").mkdir()
    for decoy in (tmp_path / "paper.toml", tmp_path / "paper", tmp_path / "instances" / "paper.toml"):
        decoy.write_text("not an instance")
    monkeypatch.chdir(tmp_path)
    assert bundled_problem("paper.toml").n == 10
    rows, fig2, _ = seed003.paper_sweep(200, 0, betas=(0.42,), log=lambda message: None)
    assert {r.instance for r in rows} == {"paper.toml"} and set(fig2) == set(seed003.PAPER_POLICIES)
    assert {r.u_opt for r in rows} == {expected}
    costly = seed003.costly_runs(100, 0, log=lambda message: None)
    assert [r.instance for r in costly[::len(seed003.COSTLY_POLICIES)]] == list(seed003.COSTLY)


def test_experiment_rows_are_the_shared_measurement():
    problem = load_instance("paper")
    row, schedule = measure(problem, "lyapunov", 500, 3, 0.84, "paper.toml", None, V=10.0)
    run = measure_run(problem, "lyapunov", 500, 3, 0.84, V=10.0)
    assert row.policy == "lyapunov[V=10]" and schedule.rounds == run.schedule.rounds == 500
    assert (row.time_average_utility, row.ratio, row.fairness_slack, row.max_debt) == (
        run.report.time_average_utility, run.report.ratio, run.report.fairness_slack, run.report.max_debt)
    assert (schedule.counts() == run.schedule.counts()).all()


def test_missing_matplotlib_says_how_to_install_it_from_the_checkout(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"matplotlib.*\[plot\]") as info:
        pyplot()
    assert "fairsched[" not in str(info.value)
