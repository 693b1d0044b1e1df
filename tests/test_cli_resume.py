"""``run --resume`` against the checkpoint's arguments; instances read once, by path or bundled name; U_opt once."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fairsched.cli import main

from conftest import INSTANCES

PAPER = INSTANCES / "paper.toml"


def error_line(capsys) -> str:
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fairsched: error: "), captured.err
    return lines[0]


@pytest.fixture
def run_dir(tmp_path):
    """A folder with a copy of the paper instance and a trace, and a finished checkpointed run of it."""
    shutil.copy(PAPER, tmp_path / "paper.toml")
    rows = ["round,workers"] + [f"{t},u1 u2 u3 u4 u5 u6 u7 u8 u9 u10" for t in range(1, 4)]
    (tmp_path / "trace.csv").write_text("\n".join(rows) + "\n")
    return tmp_path


def checkpointed(folder: Path, *extra: str) -> Path:
    checkpoint = folder / "run.ckpt"
    argv = ["run", str(folder / "paper.toml"), "--policy", "lyapunov", "--param", "V=3", "--rounds", "3000",
            "--seed", "4", "--checkpoint", str(checkpoint), "--checkpoint-every", "1000", "--quiet",
            "--out", str(folder / "full.csv"), *extra]
    assert main(argv) == 0
    return checkpoint


@pytest.mark.parametrize("option, value, message", [
    ("--policy", "fairdg", "--policy fairdg contradicts the checkpoint, which has --policy lyapunov"),
    ("--param", "V=4", "--param V=4 contradicts the checkpoint, which has --param V=3"),
    ("--rounds", "5000", "--rounds 5000 contradicts the checkpoint, which has --rounds 3000"),
    ("--seed", "0", "--seed 0 contradicts the checkpoint, which has --seed 4"),
    ("--beta", "0.3", "--beta 0.3 contradicts the checkpoint, which has no --beta"),
    ("--availability-trace", "TRACE", "--availability-trace TRACE contradicts the checkpoint, which ran without"),
])
def test_resume_refuses_options_that_contradict_the_checkpoint(run_dir, capsys, option, value, message):
    checkpoint = checkpointed(run_dir)
    capsys.readouterr()
    value = value.replace("TRACE", str(run_dir / "trace.csv"))
    out = run_dir / "resumed.csv"
    assert main(["run", "--resume", str(checkpoint), option, value, "--out", str(out)]) == 2
    assert f"--resume {checkpoint}: {message.replace('TRACE', str(run_dir / 'trace.csv'))}" in error_line(capsys)
    assert not out.exists()


def test_resume_refuses_another_instance(run_dir, capsys):
    checkpoint = checkpointed(run_dir)
    capsys.readouterr()
    other = INSTANCES / "coverage.toml"
    assert main(["run", str(other), "--resume", str(checkpoint)]) == 2
    assert (f"INSTANCE {other} contradicts the checkpoint's instance {run_dir / 'paper.toml'} (different content)"
            in error_line(capsys))


def test_resume_accepts_the_options_it_stored(run_dir, capsys):
    checkpoint = checkpointed(run_dir)
    out = run_dir / "resumed.csv"
    assert main(["run", str(run_dir / "paper.toml"), "--resume", str(checkpoint), "--policy", "lyapunov",
                 "--param", "V=3", "--rounds", "3000", "--seed", "4", "--out", str(out), "--quiet"]) == 0
    assert out.read_bytes() == (run_dir / "full.csv").read_bytes()


def test_the_checkpoint_stores_absolute_paths_hashes_and_bundled_names(run_dir, monkeypatch):
    monkeypatch.chdir(run_dir)
    assert main(["run", "paper.toml", "--policy", "fairdg", "--rounds", "500", "--availability-trace", "trace.csv",
                 "--checkpoint", "a.ckpt", "--checkpoint-every", "100", "--quiet"]) == 0
    saved = json.loads((run_dir / "a.ckpt").read_text())["arguments"]
    assert saved["instance"] == {"given": "paper.toml", "path": str(run_dir / "paper.toml"), "bundled": None,
                                 "sha256": hashlib.sha256(PAPER.read_bytes()).hexdigest()}
    assert saved["availability_trace"]["path"] == str(run_dir / "trace.csv")
    assert saved["availability_trace"]["sha256"] == hashlib.sha256((run_dir / "trace.csv").read_bytes()).hexdigest()
    assert (saved["rounds"], saved["seed"], saved["policy"], saved["params"]) == (500, 0, "fairdg", {})
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "200", "--checkpoint", "b.ckpt", "--quiet"]) == 0
    bundled = json.loads((run_dir / "b.ckpt").read_text())["arguments"]["instance"]
    assert (bundled["given"], bundled["path"], bundled["bundled"]) == ("paper", None, "paper")


def test_resume_works_from_another_directory(run_dir, monkeypatch, capsys):
    monkeypatch.chdir(run_dir)
    args = ["--policy", "fairdg", "--rounds", "3000", "--availability-trace", "trace.csv", "--quiet"]
    assert main(["run", "paper.toml", *args, "--out", "full.csv"]) == 0
    proc = subprocess.run([sys.executable, "-m", "fairsched.cli", "run", "paper.toml", *args, "--checkpoint",
                           "run.ckpt", "--checkpoint-every", "1000"], capture_output=True, text=True, cwd=run_dir)
    assert proc.returncode == 0, proc.stderr
    elsewhere = run_dir / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert main(["run", "--resume", "../run.ckpt", "--out", "resumed.csv", "--quiet"]) == 0
    assert (elsewhere / "resumed.csv").read_bytes() == (run_dir / "full.csv").read_bytes()
    assert "paper.toml" in capsys.readouterr().out


@pytest.mark.parametrize("changed, what", [("paper.toml", "instance"), ("trace.csv", "availability trace")])
def test_resume_refuses_a_changed_file(run_dir, capsys, changed, what):
    checkpoint = checkpointed(run_dir, "--availability-trace", str(run_dir / "trace.csv"))
    with open(run_dir / changed, "a") as handle:
        handle.write("\n" if changed.endswith(".toml") else "4,u1 u2 u3 u4 u5 u6 u7 u8 u9 u10\n")
    capsys.readouterr()
    assert main(["run", "--resume", str(checkpoint)]) == 2
    assert (f"{checkpoint}: the {what} {run_dir / changed} changed since the checkpoint (its SHA-256 differs)"
            in error_line(capsys))


def test_resume_finds_a_moved_instance_given_as_instance(run_dir, capsys):
    checkpoint = checkpointed(run_dir)
    moved = run_dir / "moved.toml"
    (run_dir / "paper.toml").rename(moved)
    assert main(["run", "--resume", str(checkpoint)]) == 2
    line = error_line(capsys)
    assert "cannot read the checkpoint's instance" in line and "give its new location as INSTANCE" in line
    assert main(["run", str(moved), "--resume", str(checkpoint), "--quiet"]) == 0


def interrupted_after_first_checkpoint(folder: Path, monkeypatch) -> Path:
    """A checkpoint of a run stopped (Ctrl-C) right after its first save, at round 1000 of 3000."""
    import fairsched.cli.run as run_module

    real_save = run_module.save_checkpoint

    def save_then_interrupt(*args):
        real_save(*args)
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(run_module, "save_checkpoint", save_then_interrupt)
        checkpoint = folder / "run.ckpt"
        assert main(["run", str(folder / "paper.toml"), "--policy", "fairdg", "--rounds", "3000", "--quiet",
                     "--checkpoint", str(checkpoint), "--checkpoint-every", "1000"]) == 130
    assert json.loads(checkpoint.read_text())["simulation"]["t"] == 1000
    return checkpoint


def test_resume_saves_checkpoints_to_the_resumed_file_unless_told_otherwise(run_dir, monkeypatch):
    checkpoint = interrupted_after_first_checkpoint(run_dir, monkeypatch)
    copy = run_dir / "copy.ckpt"
    assert main(["run", "--resume", str(checkpoint), "--checkpoint", str(copy), "--quiet"]) == 0
    assert json.loads(copy.read_text())["simulation"]["t"] == 3000
    assert json.loads(checkpoint.read_text())["simulation"]["t"] == 1000
    assert main(["run", "--resume", str(checkpoint), "--quiet"]) == 0
    assert json.loads(checkpoint.read_text())["simulation"]["t"] == 3000


@pytest.mark.parametrize("key, value", [("rounds", "many"), ("seed", -3), ("instance", "paper.toml"),
                                        ("checkpoint_every", 0)])
def test_resume_refuses_damaged_arguments(run_dir, capsys, monkeypatch, key, value):
    checkpoint = checkpointed(run_dir)
    document = json.loads(checkpoint.read_text())
    document["arguments"][key] = value
    monkeypatch.setattr("fairsched.cli.run.load_checkpoint", lambda path: document)  # past the checksum
    capsys.readouterr()
    assert main(["run", "--resume", str(checkpoint)]) == 2
    assert f"the checkpoint's arguments are damaged or of another fairsched ({key} is {value!r})" in error_line(capsys)


# --- instances are read once, by path or by bundled name ------------------------------------------


def test_an_instance_on_a_pipe_is_read_once():
    proc = subprocess.run([sys.executable, "-m", "fairsched.cli", "run", "/dev/stdin", "--policy", "fairdg",
                           "--rounds", "100", "--json"], input=PAPER.read_bytes(), capture_output=True)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["instance"] == "/dev/stdin"


@pytest.mark.parametrize("argv", [["check", "paper"], ["optimum", "coverage"],
                                  ["run", "paper", "--policy", "fairdg", "--rounds", "100"],
                                  ["run", "facility-location.toml", "--policy", "greedy", "--rounds", "10"]])
def test_every_subcommand_accepts_a_bundled_name_from_any_directory(tmp_path, monkeypatch, capsys, argv):
    monkeypatch.chdir(tmp_path)
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["instance"] == argv[1]


# --- U_opt is solved once ------------------------------------------------------------------------


@pytest.mark.parametrize("policy", ["lp-random", "lp-sequenced"])
def test_run_solves_the_lp_once_for_an_lp_policy(monkeypatch, capsys, policy):
    import fairsched.cli.run as run_module
    import fairsched.policies.lp as lp_policies
    from fairsched.instances import load_instance

    paper = load_instance("paper")
    calls = []

    def counting(original):
        def solve(problem, *args, **kwargs):
            if problem.r.tolist() == paper.r.tolist():  # lp-sequenced also solves LPs of raised floors
                calls.append(problem)
            return original(problem, *args, **kwargs)
        return solve

    monkeypatch.setattr(run_module, "optimum", counting(run_module.optimum))
    monkeypatch.setattr(lp_policies, "optimum", counting(lp_policies.optimum))
    assert main(["run", "paper", "--policy", policy, "--rounds", "500", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(calls) == 1
    assert data["optimum"] == pytest.approx(0.8455122224, abs=1e-8)


def test_the_lp_policy_plays_the_optimum_the_report_uses(monkeypatch, capsys):
    from fairsched.policies.lp import LPRandom

    seen = []
    original = LPRandom.use_optimum

    def recording(self, opt):
        seen.append(opt)
        original(self, opt)

    monkeypatch.setattr(LPRandom, "use_optimum", recording)
    assert main(["run", "paper", "--policy", "lp-random", "--rounds", "100", "--json"]) == 0
    assert len(seen) == 1 and json.loads(capsys.readouterr().out)["optimum"] == seen[0].value
