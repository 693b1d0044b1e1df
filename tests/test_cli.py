"""The command-line contract (README, "The command line"): JSON keys, exit codes, one-line errors, atomic output."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from fairsched.cli import main

GOOD = """\
name = "tiny"
k = 2
rounds = 500
[workers]
ids = ["a", "b", "c", "d"]
r = [0.2, 0.2, 0.5, 0.1]
[utility]
kind = "accuracy"
sizes = [100, 200, 300, 400]
"""

RUN_KEYS = {"instance", "policy", "rounds", "seed", "time_average_utility", "optimum", "ratio",
            "optimum_upper_bound", "optimum_status", "optimum_reason", "ratio_lower_bound",
            "selection_fraction", "fairness_slack", "max_debt", "seconds"}
OPTIMUM_KEYS = {"instance", "n", "k", "value", "upper_bound", "gap", "absolute_gap", "relative_gap", "iterations",
                "method", "status", "success", "message", "support", "fairness_price", "seconds"}


def write(tmp_path, text, name="inst.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_check_json(tmp_path, capsys):
    assert main(["check", write(tmp_path, GOOD), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["feasible"] is True and data["n"] == 4 and data["k"] == 2
    assert data["sum_r"] == pytest.approx(1.0)


def test_optimum_json_keys_and_support(tmp_path, capsys):
    assert main(["optimum", write(tmp_path, GOOD), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == OPTIMUM_KEYS
    assert sum(item["probability"] for item in data["support"]) == pytest.approx(1.0)
    assert all(set(item["set"]) <= {"a", "b", "c", "d"} for item in data["support"])
    assert set(data["fairness_price"]) == {"a", "b", "c", "d"}
    assert data["gap"] == pytest.approx(0.0, abs=1e-9)


def test_run_json_keys_and_out_file(tmp_path, capsys):
    out = tmp_path / "schedule.csv"
    code = main(["run", write(tmp_path, GOOD), "--policy", "fairdg", "--rounds", "300",
                 "--seed", "5", "--out", str(out), "--json"])
    assert code == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data) == RUN_KEYS
    assert data["rounds"] == 300 and data["seed"] == 5 and data["policy"] == "fairdg"
    assert data["max_debt"] < 1 and data["fairness_slack"] >= -1 / 300
    assert 0.9 < data["ratio"] <= 1.0 + 1e-9
    lines = out.read_text().splitlines()
    assert lines[0] == "round,workers" and len(lines) == 301
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_run_uses_instance_rounds_by_default(tmp_path, capsys):
    assert main(["run", write(tmp_path, GOOD), "--policy", "round-robin", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rounds"] == 500


def test_beta_override_requires_r_base(tmp_path, capsys):
    assert main(["optimum", write(tmp_path, GOOD), "--beta", "0.3"]) == 2
    assert "r_base" in capsys.readouterr().err


BAD = [
    ("malformed TOML", GOOD.replace("k = 2", "k = = 2"), 2, "malformed TOML"),
    ("missing key", GOOD.replace("k = 2\n", ""), 2, "k: missing key"),
    ("wrong length", GOOD.replace("sizes = [100, 200, 300, 400]", "sizes = [100, 200]"), 2,
     "utility.sizes: has 2 entries, expected 4"),
    ("negative r", GOOD.replace("r = [0.2, 0.2, 0.5, 0.1]", "r = [0.2, -0.2, 0.5, 0.1]"), 2,
     "workers.r: entry 1 is -0.2"),
    ("r above one", GOOD.replace("r = [0.2, 0.2, 0.5, 0.1]", "r = [0.2, 1.5, 0.1, 0.1]"), 3,
     "worker 'b' needs r = 1.5 > 1"),
    ("sum r above k", GOOD.replace("r = [0.2, 0.2, 0.5, 0.1]", "r = [0.9, 0.9, 0.5, 0.1]"), 3,
     "sum to 2.4 > k = 2"),
    ("k above n", GOOD.replace("k = 2", "k = 5"), 2, "k: is 5, must be between 1 and n = 4"),
    ("nan size", GOOD.replace("sizes = [100, 200, 300, 400]", "sizes = [100, nan, 300, 400]"), 2,
     "utility.sizes: entry 1 is nan"),
    ("negative size", GOOD.replace("sizes = [100, 200, 300, 400]", "sizes = [100, -2, 300, 400]"), 2,
     "utility.sizes: entry 1 is -2"),
    ("unknown kind", GOOD.replace('kind = "accuracy"', 'kind = "magic"'), 2, "unknown utility kind 'magic'"),
    ("unknown key", GOOD.replace("k = 2", "k = 2\nkk = 3"), 2, "unknown key(s) kk"),
]


@pytest.mark.parametrize("label, text, code, message", BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("command", ["check", "optimum", "run"])
def test_bad_input_exit_code_one_line_nothing_written(tmp_path, capsys, label, text, code, message, command):
    out = tmp_path / "schedule.csv"
    extra = ["--policy", "fairdg", "--out", str(out)] if command == "run" else []
    assert main([command, write(tmp_path, text), *extra]) == code
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert len(err) == 1 and message in err[0], captured.err
    assert "inst.toml" in err[0]
    assert not out.exists()


def test_unknown_policy(tmp_path, capsys):
    out = tmp_path / "s.csv"
    assert main(["run", write(tmp_path, GOOD), "--policy", "oracle", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown policy 'oracle'" in err[0]
    assert not out.exists()


def test_missing_file_and_bad_option(tmp_path, capsys):
    assert main(["check", str(tmp_path / "nope.toml")]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["run", write(tmp_path, GOOD), "--policy", "fairdg", "--rounds", "many"])
    assert exc.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_check_json_reports_infeasible(tmp_path, capsys):
    bad = GOOD.replace("r = [0.2, 0.2, 0.5, 0.1]", "r = [0.9, 0.9, 0.5, 0.1]")
    assert main(["check", write(tmp_path, bad), "--json"]) == 3
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["feasible"] is False and "sum to 2.4" in data["reason"]


def test_console_script_has_no_traceback(tmp_path):
    bad = write(tmp_path, GOOD.replace('kind = "accuracy"', 'kind = "magic"'))
    proc = subprocess.run([sys.executable, "-m", "fairsched.cli", "check", bad],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_interrupt_leaves_no_partial_file(tmp_path, monkeypatch, capsys):
    out = tmp_path / "schedule.csv"

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("fairsched.schedule.Schedule.write", interrupted)
    code = main(["run", write(tmp_path, GOOD), "--policy", "fairdg", "--out", str(out)])
    assert code == 130 and not out.exists()
    assert "interrupted" in capsys.readouterr().err


def test_interrupt_during_write_removes_the_temporary(tmp_path):
    from fairsched.atomic import atomic_write

    target = tmp_path / "f.csv"
    target.write_text("old\n")
    with pytest.raises(KeyboardInterrupt):
        with atomic_write(target) as handle:
            handle.write("half")
            raise KeyboardInterrupt
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["f.csv"]


def _stderr_through_terminal(args):
    """Run the CLI with stderr attached to a pseudo-terminal; return (exit code, what it showed)."""
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "fairsched.cli", *args],
                            stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:  # the terminal closes when the process exits
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    return proc.wait(), b"".join(chunks).decode(errors="replace")


def test_progress_bar_only_on_a_terminal(tmp_path):
    inst = write(tmp_path, GOOD)
    code, shown = _stderr_through_terminal(["run", inst, "--policy", "fairdg", "--rounds", "20000"])
    assert code == 0 and "fairdg" in shown and "100%" in shown and "20000/20000" in shown
    code, shown = _stderr_through_terminal(["run", inst, "--policy", "fairdg", "--rounds", "20000", "--quiet"])
    assert code == 0 and shown == ""
    piped = subprocess.run([sys.executable, "-m", "fairsched.cli", "run", inst, "--policy", "fairdg",
                            "--rounds", "20000"], capture_output=True, text=True)
    assert piped.returncode == 0 and piped.stderr == ""
