"""fairsched run --checkpoint / --resume: a killed run resumes to the identical schedule."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from fairsched.cli import main
from fairsched.instances import load_instance
from fairsched.policies import make_policy
from fairsched.runtime.simulation import Simulation

from conftest import INSTANCES

PAPER = str(INSTANCES / "paper.toml")


def cli(*args):
    return subprocess.run([sys.executable, "-m", "fairsched.cli", *args], capture_output=True, text=True)


def test_sigkill_mid_run_then_resume_writes_the_same_schedule(tmp_path):
    args = ["run", PAPER, "--policy", "lyapunov", "--rounds", "40000", "--seed", "3", "--quiet"]
    reference = tmp_path / "reference.csv"
    assert cli(*args, "--out", str(reference)).returncode == 0

    checkpoint, resumed = tmp_path / "run.ckpt", tmp_path / "resumed.csv"
    proc = subprocess.Popen([sys.executable, "-m", "fairsched.cli", *args, "--out", str(resumed),
                             "--checkpoint", str(checkpoint), "--checkpoint-every", "2000"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            if checkpoint.exists() and json.loads(checkpoint.read_text())["simulation"]["t"] >= 6000:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run finished before it could be killed"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    saved_t = json.loads(checkpoint.read_text())["simulation"]["t"]
    assert 6000 <= saved_t < 40000
    assert not resumed.exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]

    done = cli("run", "--resume", str(checkpoint), "--out", str(resumed), "--quiet")
    assert done.returncode == 0, done.stderr
    assert resumed.read_bytes() == reference.read_bytes()


@pytest.mark.parametrize("policy", ["fairdg", "faircg1", "lp-random", "lp-sequenced", "random"])
def test_simulation_state_round_trip_continues_identically(policy):
    problem = load_instance(INSTANCES / "coverage.toml")
    whole = Simulation(problem, make_policy(policy), 9000, seed=2)
    whole.advance()
    part = Simulation(problem, make_policy(policy), 9000, seed=2)
    part.advance(5000)
    state = json.loads(json.dumps(part.state_dict()))
    again = Simulation(problem, make_policy(policy), 9000, seed=2)
    again.load_state_dict(state)
    again.advance()
    a, b = whole.schedule(), again.schedule()
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)


def _checkpoint(tmp_path):
    path = tmp_path / "run.ckpt"
    assert main(["run", PAPER, "--policy", "fairdg", "--rounds", "3000", "--quiet", "--checkpoint", str(path),
                 "--checkpoint-every", "1000", "--out", str(tmp_path / "first.csv")]) == 0
    return path


@pytest.mark.parametrize("damage, message", [
    (lambda text: text[: len(text) // 2], "corrupted or truncated"),
    (lambda text: json.dumps({**json.loads(text), "version": 7}), "version 7 is not supported"),
    (lambda text: json.dumps({**json.loads(text), "format": "other"}), "not a fairsched-run-checkpoint"),
    (lambda text: json.dumps({**json.loads(text), "simulation": {**json.loads(text)["simulation"],
                                                                "indices": "@@@"}}), "the checkpoint is damaged"),
])
def test_damaged_checkpoint_is_refused_and_nothing_is_written(tmp_path, capsys, damage, message):
    path = _checkpoint(tmp_path)
    path.write_text(damage(path.read_text()))
    out = tmp_path / "resumed.csv"
    assert main(["run", "--resume", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not out.exists()


def test_resume_refuses_a_changed_instance(tmp_path, capsys):
    instance = tmp_path / "paper.toml"
    instance.write_text(open(PAPER).read())
    path = tmp_path / "run.ckpt"
    assert main(["run", str(instance), "--policy", "fairdg", "--rounds", "2000", "--quiet",
                 "--checkpoint", str(path), "--checkpoint-every", "500"]) == 0
    instance.write_text(open(PAPER).read().replace("beta = 0.42", "beta = 0.3"))
    assert main(["run", "--resume", str(path), "--out", str(tmp_path / "x.csv")]) == 2
    assert "changed since the checkpoint" in capsys.readouterr().err


def test_run_needs_an_instance_and_a_policy(capsys):
    assert main(["run", PAPER]) == 2
    assert "needs INSTANCE and --policy" in capsys.readouterr().err
