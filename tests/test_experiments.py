"""The seed-003 reproduction script, on short horizons."""

from __future__ import annotations

import csv

from fairsched.experiments import seed003


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
