"""The CLI's one error contract: every failure is exit 2 (3, 130, 143) and one stderr line, never a traceback."""

from __future__ import annotations

import ast
import json
import math
import os
import signal
import stat
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from fairsched.atomic import atomic_write
from fairsched.cli import main
from fairsched.cli.errors import Terminated, classify, guarded
from fairsched.errors import (CheckpointError, FairschedError, InfeasibleError, InstanceError,
                              MissingDependencyError, SolverFailedError, TooLargeError)
from fairsched.schedule import Schedule
from fairsched.solvers.errors import SolverError

from conftest import INSTANCES

PAPER = str(INSTANCES / "paper.toml")
CLI = Path(__file__).resolve().parent.parent / "fairsched" / "cli"


def one_error_line(captured) -> str:
    """The single stderr line of a failed command (asserts there is exactly one, and no traceback)."""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("fairsched: error: ") and "Traceback" not in captured.err
    return lines[0]


# --- item 1: tracebacks that are now one line and exit 2 -------------------------------------


def test_negative_seed_is_bad_input(capsys):
    assert main(["run", "paper", "--policy", "fairdg", "--seed", "-1"]) == 2
    assert "--seed must be an integer >= 0, got -1" in one_error_line(capsys.readouterr())


def test_absurd_rounds_are_refused_before_allocating(capsys):
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "1000000000000"]) == 2
    assert "--rounds must be between 1 and 1,000,000,000" in one_error_line(capsys.readouterr())


@pytest.mark.parametrize("error, message", [
    (TooLargeError("2,000,000,000 rounds need 89.4 GiB for the schedule"), "89.4 GiB"),
    (MemoryError("Unable to allocate 7.28 TiB for an array"), "not enough memory: Unable to allocate 7.28 TiB"),
])
def test_a_schedule_too_large_for_memory_is_bad_input(monkeypatch, capsys, tmp_path, error, message):
    def too_large(*args, **kwargs):
        raise error

    monkeypatch.setattr("fairsched.cli.run.Simulation", too_large)
    out = tmp_path / "s.csv"
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "900000000", "--out", str(out)]) == 2
    assert message in one_error_line(capsys.readouterr())
    assert os.listdir(tmp_path) == []


@pytest.fixture
def helper_module(tmp_path, monkeypatch):
    """A module ``cli_helper_utility`` on ``sys.path`` with a utility that raises and one that works."""
    name = f"cli_helper_utility_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(
        "def broken(S):\n    raise ZeroDivisionError('no data for ' + str(len(S)))\n\n"
        "def size(S):\n    return float(len(S))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


def python_instance(callable_path: str) -> str:
    return ('k = 2\n[workers]\nids = ["a", "b", "c"]\nr = [0.3, 0.3, 0.3]\n'
            f'[utility]\nkind = "python"\ncallable = "{callable_path}"\n')


def test_a_python_utility_that_raises_is_an_instance_error(tmp_path, capsys, helper_module):
    path = tmp_path / "inst.toml"
    path.write_text(python_instance(f"{helper_module}:broken"))
    assert main(["optimum", str(path)]) == 2
    line = one_error_line(capsys.readouterr())
    assert f"{path}: callable: {helper_module}:broken raised ZeroDivisionError: no data for 2 for the set (" in line


def test_callable_utility_wraps_the_user_exception(helper_module):
    from fairsched.utilities.callable import CallableUtility

    utility = CallableUtility.from_config({"kind": "python", "callable": f"{helper_module}:broken"}, 3)
    with pytest.raises(InstanceError) as info:
        utility.values([[True, False, True]])
    assert info.value.key == "callable"
    assert str(info.value) == (f"callable: {helper_module}:broken raised ZeroDivisionError: no data for 2 "
                               "for the set (0, 2)")
    assert isinstance(info.value.__cause__, ZeroDivisionError)


def test_a_callable_module_whose_own_import_fails_is_not_reported_as_missing(tmp_path, monkeypatch, capsys):
    (tmp_path / "cli_helper_importer.py").write_text("import no_such_module_fairsched_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "inst.toml"
    path.write_text(python_instance("cli_helper_importer:f"))
    assert main(["check", str(path)]) == 2
    line = one_error_line(capsys.readouterr())
    assert "importing module 'cli_helper_importer' failed: No module named 'no_such_module_fairsched_xyz'" in line
    sys.modules.pop("cli_helper_importer", None)


@pytest.mark.parametrize("content, message", [
    (b"round,workers\n1,u1 u2\n2,u3\xff\xfe\n", "line 3: not UTF-8 text (byte 0xff)"),
    (b"round,workers\n1,u1\x00 u2\n", "line 2: contains a NUL byte"),
    (b"\xef\xbb\xbfround,workers\n1,u1\n", "line 1: expected header 'round,workers'"),
    (b"round,workers\n1,u1\n3,u2\n", "line 3: expected '2,<ids>'"),
    (b"round,workers\n1,\"u1\n", "line 2: malformed CSV"),
    (b"round,workers\n1,\"u1\"x\n", "line 2: malformed CSV"),
    (b"round,workers\n1,u1 zz\n", "line 2: unknown worker id 'zz'"),
])
def test_a_malformed_trace_names_the_file_and_the_line(tmp_path, capsys, content, message):
    trace = tmp_path / "trace.csv"
    trace.write_bytes(content)
    out = tmp_path / "s.csv"
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "50", "--availability-trace", str(trace),
                 "--out", str(out)]) == 2
    line = one_error_line(capsys.readouterr())
    assert f"{trace}: " in line and message in line, line
    assert not out.exists()


def test_schedule_read_raises_instance_errors_for_undecodable_files(tmp_path):
    path = tmp_path / "s.csv"
    path.write_bytes(b"round,workers\n1,a\n2,\xc3\n")
    with pytest.raises(InstanceError, match=r"s\.csv: line 3: not UTF-8 text"):
        Schedule.read(path, ["a", "b"])


def run_checkpoint(tmp_path) -> Path:
    path = tmp_path / "run.ckpt"
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "300", "--checkpoint", str(path),
                 "--checkpoint-every", "100", "--quiet"]) == 0
    return path


def flip_digit(text: str, where: int) -> str:
    digits = [i for i, ch in enumerate(text) if ch.isdigit()]
    i = digits[where % len(digits)]
    return text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1:]


@pytest.mark.parametrize("where", [0, 7, 200, -1])
def test_a_checkpoint_damaged_in_one_character_is_refused(tmp_path, capsys, where):
    path = run_checkpoint(tmp_path)
    path.write_text(flip_digit(path.read_text(), where))
    capsys.readouterr()
    out = tmp_path / "resumed.csv"
    assert main(["run", "--resume", str(path), "--out", str(out)]) == 2
    assert str(path) in one_error_line(capsys.readouterr())
    assert not out.exists()


@pytest.mark.parametrize("error", [zlib.error("invalid stored block lengths"), RuntimeError("bad generator"),
                                   OverflowError("int too large")])
def test_a_checkpoint_state_that_cannot_be_loaded_is_a_checkpoint_error(tmp_path, capsys, monkeypatch, error):
    path = run_checkpoint(tmp_path)

    def broken(simulation, document, where):
        raise error

    monkeypatch.setattr("fairsched.cli.run.restore", broken)
    capsys.readouterr()
    assert main(["run", "--resume", str(path)]) == 2
    line = one_error_line(capsys.readouterr())
    assert f"{path}: the checkpoint's state is malformed ({type(error).__name__}: {error})" in line


@pytest.mark.parametrize("argv, module, hint", [
    (["simulate", "fedipw", "--bias", "mild", "--seeds", "1", "--rounds", "2", "--quiet"], "sklearn",
     "pip install 'scikit-learn'"),
    (["optimum", "paper", "--backend", "cvxpy"], "cvxpy", "pip install 'cvxpy'"),
])
def test_a_missing_optional_dependency_is_bad_input_with_the_install_hint(monkeypatch, capsys, argv, module, hint):
    monkeypatch.setitem(sys.modules, module, None)
    assert main(argv) == 2
    line = one_error_line(capsys.readouterr())
    assert f"optional dependency '{module}'" in line and hint in line


def test_enumeration_at_a_tiny_time_limit_returns_certified_bounds(capsys):
    # A time limit is an answer, not an error: the bounds reached, with an honest status.
    assert main(["optimum", "paper", "--method", "enumeration", "--time-limit", "1e-7"]) == 0
    out = capsys.readouterr().out
    first = out.splitlines()[0]
    assert "stopped: time-limit" in first and "certified upper bound" in first
    assert "U_opt" not in first
    assert main(["optimum", "paper", "--method", "enumeration", "--time-limit", "1e-7", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["status"] == "time-limit" and answer["success"] is False
    assert answer["value"] <= answer["upper_bound"] and math.isfinite(answer["upper_bound"])


def test_a_raw_solver_error_is_bad_input_with_advice(monkeypatch, capsys):
    def stopped(*args, **kwargs):
        raise SolverError("HiGHS reached the time limit of 1e-07 s before optimality")

    monkeypatch.setattr("fairsched.cli.app.optimum", stopped)
    assert main(["optimum", "paper", "--time-limit", "1e-7"]) == 2
    line = one_error_line(capsys.readouterr())
    assert "HiGHS reached the time limit" in line and "raise --time-limit or use --method column-generation" in line


@pytest.mark.parametrize("argv, message", [
    (["optimum", "paper", "--time-limit", "nan"], "--time-limit must be a finite number of seconds > 0, got nan"),
    (["optimum", "paper", "--time-limit", "inf"], "--time-limit must be a finite number of seconds > 0, got inf"),
    (["optimum", "paper", "--gap", "-1"], "--gap must be a number >= 0, got -1.0"),
    (["optimum", "paper", "--max-columns", "0"], "--max-columns must be positive, got 0"),
    (["run", "paper", "--policy", "fairdg", "--checkpoint-every", "0"], "--checkpoint-every must be positive"),
    (["run", "paper", "--policy", "fairdg", "--rounds", "0"], "--rounds must be between 1 and"),
    (["run", "paper", "--policy", "fairdg", "--beta", "nan"], "paper: workers.beta: must be a finite number"),
    (["check", str(INSTANCES / "paper.toml"), "--beta", "nan"], "workers.beta: must be a finite number >= 0, got nan"),
])
def test_out_of_range_options(capsys, argv, message):
    assert main(argv) == 2
    assert message in one_error_line(capsys.readouterr())


# --- item 3: one mapper ---------------------------------------------------------------------------


@pytest.mark.parametrize("error, code", [
    (InfeasibleError("infeasible: the floors sum to 7 > k = 6"), 3),
    (InstanceError("missing key", key="k"), 2),
    (MissingDependencyError("needs cvxpy"), 2),
    (CheckpointError("damaged"), 2),
    (SolverFailedError("no answer"), 2),
    (FairschedError("bad option"), 2),
    (SolverError("stopped"), 2),
    (FileNotFoundError(2, "No such file or directory", "x.toml"), 2),
    (MemoryError(), 2),
    (KeyboardInterrupt(), 130),
    (Terminated(), 143),
])
def test_classify_maps_each_error_to_its_exit_code(error, code):
    verdict = classify(error)
    assert verdict is not None and verdict[0] == code and verdict[1]


def test_classify_leaves_bugs_alone():
    assert classify(TypeError("a bug")) is None
    with pytest.raises(TypeError):
        guarded(lambda: (_ for _ in ()).throw(TypeError("a bug")))


def test_guarded_prints_one_line_even_for_a_multiline_message(capsys):
    def failing() -> int:
        raise InstanceError("first line\nsecond line\r\nthird\u2028fourth", source="f.toml")

    assert guarded(failing) == 2
    assert capsys.readouterr().err == "fairsched: error: f.toml: first line second line third fourth\n"


def test_broken_pipe_exits_quietly(capsys):
    def closed() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    assert guarded(closed) == 0
    assert capsys.readouterr().err == ""


def test_a_closed_stdout_pipe_is_not_an_error():
    proc = subprocess.Popen([sys.executable, "-m", "fairsched.cli", "optimum", "paper"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0 and err == ""


def test_bench_main_uses_the_same_mapper(capsys, tmp_path):
    from fairsched.cli import bench

    assert bench.main([PAPER, "--scales", "3", "--out", str(tmp_path / "out"), "--quiet"]) == 3
    assert "infeasible" in one_error_line(capsys.readouterr())
    assert bench.main(["--seeds", "0", PAPER]) == 2
    assert "--seeds must be positive" in one_error_line(capsys.readouterr())


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_bench_does_not_import_app_and_the_cli_does_not_import_the_experiments():
    assert not {"fairsched.cli.app", "fairsched.cli"} & imported_modules(CLI / "bench.py")
    for module in CLI.glob("*.py"):
        assert not [m for m in imported_modules(module) if m.startswith("fairsched.experiments")], module.name
    proc = subprocess.run([sys.executable, "-c", "import sys, fairsched.cli.bench; "
                           "print('fairsched.cli.app' in sys.modules, 'fairsched.cli.run' in sys.modules)"],
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.split() == ["False", "False"], proc.stderr


# --- item 4: SIGTERM ---------------------------------------------------------------------------


def test_sigterm_exits_143_with_one_line_and_leaves_no_file(tmp_path):
    outputs, states = tmp_path / "out", tmp_path / "states"
    outputs.mkdir()
    states.mkdir()
    checkpoint = states / "run.ckpt"
    proc = subprocess.Popen([sys.executable, "-m", "fairsched.cli", "run", "paper", "--policy", "fairdg",
                             "--rounds", "2000000", "--out", str(outputs / "schedule.csv"),
                             "--checkpoint", str(checkpoint), "--checkpoint-every", "50000"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=outputs)
    deadline = time.monotonic() + 120
    while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)  # the first checkpoint proves the rounds are being played
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert stderr.splitlines() == ["fairsched: error: terminated (SIGTERM); no partial file was written"]
    assert stdout == "" and os.listdir(outputs) == []
    assert os.listdir(states) == ["run.ckpt"]


def test_sigterm_during_the_write_removes_the_temporary(tmp_path, monkeypatch, capsys):
    out = tmp_path / "schedule.csv"

    def terminated_mid_write(self, path, ids):
        with atomic_write(path) as handle:
            handle.write("round,workers\n1,u1\n")
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)  # the handler raises Terminated before this ends

    before = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr("fairsched.schedule.Schedule.write", terminated_mid_write)
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "100", "--out", str(out)]) == 143
    assert "terminated" in one_error_line(capsys.readouterr())
    assert os.listdir(tmp_path) == []
    assert signal.getsignal(signal.SIGTERM) == before  # main put the previous handler back


# --- item 5: output files honour the umask ----------------------------------------------------------


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_output_files_honour_the_umask(tmp_path, capsys, umask, mode):
    out = tmp_path / "s.csv"
    previous = os.umask(umask)
    try:
        assert main(["run", "paper", "--policy", "round-robin", "--rounds", "20", "--out", str(out)]) == 0
        with atomic_write(tmp_path / "plain.txt") as handle:
            handle.write("x")
    finally:
        os.umask(previous)
    assert stat.S_IMODE(out.stat().st_mode) == mode
    assert stat.S_IMODE((tmp_path / "plain.txt").stat().st_mode) == mode


def test_an_existing_file_keeps_its_mode(tmp_path):
    target = tmp_path / "kept.csv"
    target.write_text("old")
    target.chmod(0o640)
    previous = os.umask(0o022)
    try:
        with atomic_write(target) as handle:
            handle.write("new")
    finally:
        os.umask(previous)
    assert target.read_text() == "new" and stat.S_IMODE(target.stat().st_mode) == 0o640


# --- item 6: unwritable outputs fail before the run ----------------------------------------------------


def fail_before_running(monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr("fairsched.cli.run.Simulation", never)


@pytest.mark.parametrize("option", ["--out", "--checkpoint"])
def test_output_into_a_missing_directory_fails_before_the_run(tmp_path, capsys, monkeypatch, option):
    fail_before_running(monkeypatch)
    target = tmp_path / "missing" / "f.csv"
    assert main(["run", "paper", "--policy", "fairdg", option, str(target)]) == 2
    line = one_error_line(capsys.readouterr())
    assert line == f"fairsched: error: {option} {target}: directory {tmp_path / 'missing'} does not exist"


def test_output_under_a_file_fails_before_the_run(tmp_path, capsys, monkeypatch):
    fail_before_running(monkeypatch)
    (tmp_path / "plain").write_text("")
    assert main(["run", "paper", "--policy", "fairdg", "--out", str(tmp_path / "plain" / "f.csv")]) == 2
    assert f"directory {tmp_path / 'plain'} is not a directory" in one_error_line(capsys.readouterr())


def test_output_onto_a_directory_or_device_fails_before_the_run(tmp_path, capsys, monkeypatch):
    fail_before_running(monkeypatch)
    assert main(["run", "paper", "--policy", "fairdg", "--out", str(tmp_path)]) == 2
    assert "exists and is not a regular file" in one_error_line(capsys.readouterr())
    assert main(["run", "paper", "--policy", "fairdg", "--out", os.devnull]) == 2
    assert f"--out {os.devnull}: exists and is not a regular file" in one_error_line(capsys.readouterr())


def test_output_into_an_unwritable_directory_names_the_directory(tmp_path, capsys, monkeypatch):
    fail_before_running(monkeypatch)
    locked = tmp_path / "locked"
    locked.mkdir()
    real_open = os.open

    def denied(path, flags, mode=0o777, **kwargs):  # what a read-only directory does, for any user
        if os.path.dirname(path) == str(locked):
            raise PermissionError(13, "Permission denied", path)
        return real_open(path, flags, mode, **kwargs)

    monkeypatch.setattr("fairsched.atomic.os.open", denied)
    assert main(["run", "paper", "--policy", "fairdg", "--out", str(locked / "f.csv")]) == 2
    line = one_error_line(capsys.readouterr())
    assert line == (f"fairsched: error: --out {locked / 'f.csv'}: cannot write in directory {locked}: "
                    "Permission denied")
    assert ".tmp" not in line


def test_output_into_a_read_only_file_system_fails_before_the_run(capsys, monkeypatch):
    fail_before_running(monkeypatch)
    assert main(["run", "paper", "--policy", "fairdg", "--out", "/proc/fairsched-test.csv"]) == 2
    line = one_error_line(capsys.readouterr())
    assert "cannot write in directory /proc" in line and ".tmp" not in line


def test_atomic_write_errors_name_the_target(tmp_path):
    with pytest.raises(OSError) as info:
        with atomic_write(tmp_path / "missing" / "f.csv") as handle:
            handle.write("x")
    assert info.value.filename == str(tmp_path / "missing" / "f.csv")
    with pytest.raises(OSError) as info:
        with atomic_write(tmp_path) as handle:  # renaming onto a directory fails
            handle.write("x")
    assert info.value.filename == str(tmp_path) and os.listdir(tmp_path) == []


def test_warnings_are_held_back_after_a_failure_and_shown_after_a_success(tmp_path):
    script = tmp_path / "warn.py"
    script.write_text(
        "import sys, warnings\n"
        "from fairsched.cli.errors import guarded\n"
        "from fairsched.errors import FairschedError\n"
        "def command():\n"
        "    warnings.warn('overflow encountered', RuntimeWarning)\n"
        "    if sys.argv[1] == 'fail':\n"
        "        raise FairschedError('bad input')\n"
        "    return 0\n"
        "sys.exit(guarded(command))\n")
    failed = subprocess.run([sys.executable, str(script), "fail"], capture_output=True, text=True)
    assert failed.returncode == 2 and failed.stderr == "fairsched: error: bad input\n"
    passed = subprocess.run([sys.executable, str(script), "pass"], capture_output=True, text=True)
    assert passed.returncode == 0 and "RuntimeWarning: overflow encountered" in passed.stderr


def test_bench_into_an_unusable_folder_fails_before_the_sweep(tmp_path, capsys, monkeypatch):
    from fairsched.cli import bench

    def never(*args, **kwargs):
        raise AssertionError("the sweep started")

    monkeypatch.setattr(bench, "sweep", never)
    (tmp_path / "plain").write_text("")
    assert bench.main([PAPER, "--out", str(tmp_path / "plain" / "results"), "--quiet"]) == 2
    assert f"--out {tmp_path / 'plain' / 'results'}: {tmp_path / 'plain'} is not a directory" in one_error_line(
        capsys.readouterr())
    assert main(["bench", PAPER, "--out", "/proc/fairsched-bench/results", "--quiet"]) == 2
    assert "cannot write in directory /proc" in one_error_line(capsys.readouterr())
    assert sorted(os.listdir(tmp_path)) == ["plain"]


def test_instance_rounds_beyond_what_can_be_played_are_refused(tmp_path, capsys):
    path = tmp_path / "inst.toml"
    path.write_text(Path(PAPER).read_text().replace("rounds = 100000", "rounds = 1000000000000"))
    assert main(["run", str(path), "--policy", "fairdg"]) == 2
    assert f"{path}: rounds: is 1,000,000,000,000, at most 1,000,000,000 rounds can be played" in one_error_line(
        capsys.readouterr())
