"""``--json`` prints exactly one JSON object on stdout, whatever the libraries print while computing."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import pytest

from fairsched.cli import main

from conftest import INSTANCES


def only_json(out: str) -> dict:
    """The one JSON object that is the whole of ``out`` (asserts nothing else is there)."""
    assert out.endswith("\n") and out.count("\n") == 1, out
    data = json.loads(out)
    assert isinstance(data, dict)
    return data


COMMANDS = [
    ["check", "paper"],
    ["optimum", "paper"],
    ["optimum", "paper", "--backend", "cvxpy"],
    ["optimum", "coverage", "--method", "column-generation"],
    ["run", "paper", "--policy", "fairdg", "--rounds", "200"],
    ["run", "paper", "--policy", "faircg1", "--rounds", "50"],
    ["run", "paper", "--policy", "lp-random", "--rounds", "200"],
    ["simulate", "fedipw", "--bias", "mild", "--seeds", "1", "--rounds", "3", "--quiet"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(a[:2] + a[2:4]) for a in COMMANDS])
def test_stdout_is_exactly_one_json_object(capfd, argv):
    assert main([*argv, "--json"]) == 0
    captured = capfd.readouterr()
    only_json(captured.out)


def test_an_infeasible_check_prints_its_json_and_one_error_line(capfd):
    assert main(["check", "paper", "--beta", "0.7", "--json"]) == 3
    captured = capfd.readouterr()
    assert only_json(captured.out)["feasible"] is False
    assert captured.err.startswith("fairsched: error: paper: infeasible") and captured.err.count("\n") == 1


def test_a_failing_json_command_prints_nothing_on_stdout(capfd):
    assert main(["run", "paper", "--policy", "oracle", "--json"]) == 2
    captured = capfd.readouterr()
    assert captured.out == "" and "unknown policy 'oracle'" in captured.err


def test_whatever_a_library_prints_while_computing_goes_to_stderr(capfd, monkeypatch):
    from fairsched.lp import optimum

    libc = ctypes.CDLL(None)

    def noisy_optimum(*args, **kwargs):
        os.write(1, b"banner on fd 1\n")
        print("banner on sys.stdout")
        libc.printf(b"banner through C stdio, still buffered ")
        return optimum(*args, **kwargs)

    monkeypatch.setattr("fairsched.cli.app.optimum", noisy_optimum)
    assert main(["optimum", "paper", "--json"]) == 0
    captured = capfd.readouterr()
    assert only_json(captured.out)["k"] == 6
    for banner in ("banner on fd 1", "banner on sys.stdout", "banner through C stdio"):
        assert banner in captured.err
    os.write(1, b"fd 1 is stdout again\n")
    print("sys.stdout is stdout again", flush=True)
    assert capfd.readouterr().out == "fd 1 is stdout again\nsys.stdout is stdout again\n"


def test_text_output_is_unchanged_by_the_guard(capfd):
    assert main(["check", "paper"]) == 0
    assert capfd.readouterr().out == "paper: feasible: n = 10, k = 6, sum r = 4.2 <= k, utility accuracy\n"


def test_the_cvxpy_banner_stays_off_stdout_in_a_real_process():
    proc = subprocess.run([sys.executable, "-m", "fairsched.cli", "optimum", str(INSTANCES / "paper.toml"),
                           "--backend", "cvxpy", "--json"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert only_json(proc.stdout)["value"] == pytest.approx(0.8455122224, abs=1e-8)
    assert "Traceback" not in proc.stderr


def test_the_streamed_object_is_the_text_json_dumps_writes():
    """``write_json`` writes key by key what ``json.dumps`` writes at once (non-finite numbers
    as null), and an ``EncodedArray`` element by element across its batches."""
    import io
    import math

    from fairsched.cli.output import EncodedArray, write_json

    data = {"a": 1.5, "b": [math.inf, {"c": math.nan, "d": "é\"x"}], "e": None, "f": {"g": [1, 2]}}
    stream = io.StringIO()
    write_json(data, stream)
    expected = {"a": 1.5, "b": [None, {"c": None, "d": "é\"x"}], "e": None, "f": {"g": [1, 2]}}
    assert stream.getvalue() == json.dumps(expected)
    for size in (0, 1, 3, 4, 7):
        records = [{"set": [f"w{i}", f"w{i + 1}"], "probability": i / 7} for i in range(size)]
        stream = io.StringIO()
        write_json({"n": size, "support": EncodedArray((json.dumps(x) for x in records), batch=3)}, stream)
        assert stream.getvalue() == json.dumps({"n": size, "support": records})


def test_optimum_json_streams_the_same_object_as_as_dict(capfd):
    """The command writes the support from ``support_json``; it must say what ``as_dict`` says."""
    from fairsched.instances import load_instance
    from fairsched.lp import optimum

    assert main(["optimum", "coverage", "--method", "column-generation", "--json"]) == 0
    printed = only_json(capfd.readouterr().out)
    problem = load_instance("coverage")
    solved = optimum(problem, method="column-generation")
    expected = {"instance": "coverage", **json.loads(json.dumps(solved.as_dict(problem)))}
    assert len(printed["support"]) > 1
    for key in ("instance", "n", "k", "status", "method", "support", "fairness_price"):
        assert printed[key] == expected[key], key
    assert printed["value"] == pytest.approx(expected["value"], abs=1e-12)
    assert list(printed) == list(expected)  # the keys in as_dict's order, support before the prices
