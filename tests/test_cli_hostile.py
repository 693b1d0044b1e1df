"""Must hold: hostile input never breaks the CLI's contract.

Malformed and hostile instance files, availability traces, checkpoints and option values:
the exit code is 0, 2 or 3; a failure is exactly one stderr line ``fairsched: error: ...``;
no traceback anywhere; and the output folder holds no temporary file, and an ``--out``
file only when the exit code is 0, then a schedule :meth:`Schedule.read` accepts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Callable, Sequence

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fairsched.instances
from fairsched.cli import main
from fairsched.instances import load_instance
from fairsched.schedule import Schedule

DATA = Path(fairsched.instances.__file__).parent / "data"
BUNDLED = {path.stem: path.read_text() for path in sorted(DATA.glob("*.toml"))}
PAPER_IDS = [f"u{i}" for i in range(1, 11)]
HELPER = f"fairsched_hostile_helper_{os.getpid()}"
HELPER_CODE = """\
def raises(S):
    raise RuntimeError("hostile\\nmultiline failure")

def nan(S):
    return float("nan")

def text(S):
    return "1.0"

def huge(S):
    return 1e308 * len(S)

def size(S):
    return float(len(S))

not_callable = 3
"""
CALLABLES = [f"{HELPER}:{name}" for name in ("raises", "nan", "text", "huge", "size", "not_callable", "absent")] + [
    "fairsched_no_such_module_q:f", "fairsched_no_such_package.sub:f", "a:b:c", ":f", "m:", "..relative:f", ""]
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                           HealthCheck.too_slow])


@pytest.fixture(scope="module")
def helper_on_path(tmp_path_factory):
    """A module of ``python`` utilities that misbehave, importable for the duration of this file."""
    folder = tmp_path_factory.mktemp("helper")
    (folder / f"{HELPER}.py").write_text(HELPER_CODE)
    sys.path.insert(0, str(folder))
    yield
    sys.path.remove(str(folder))
    sys.modules.pop(HELPER, None)


@pytest.fixture(scope="module")
def checkpoint_text(tmp_path_factory) -> str:
    """A real checkpoint: ``run paper --policy fairdg --rounds 300 --checkpoint C --checkpoint-every 100``."""
    path = tmp_path_factory.mktemp("checkpoint") / "C"
    assert main(["run", "paper", "--policy", "fairdg", "--rounds", "300", "--checkpoint", str(path),
                 "--checkpoint-every", "100", "--quiet"]) == 0
    return path.read_text()


# --- running and judging ----------------------------------------------------------------------------


def run_in_process(argv: list[str], capfd) -> tuple[int, str, str]:
    capfd.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse refusing an option
        code = exc.code
    out, err = capfd.readouterr()
    return code, out, err


def assert_contract(code: int, out: str, err: str, folder: Path, inputs: set[str], out_file: Path | None,
                    ids: Callable[[], Sequence[str]]) -> None:
    """The contract, for one command run with its files in ``folder``."""
    assert code in (0, 2, 3), (code, err)
    assert "Traceback" not in out and "Traceback" not in err, err
    if code != 0:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("fairsched: error: "), err
    left = set(os.listdir(folder)) - inputs
    assert not [name for name in left if name.endswith(".tmp")], left
    if out_file is not None:
        assert left == ({out_file.name} if code == 0 else set()), (code, left, err)
        if code == 0:
            assert Schedule.read(out_file, ids()).rounds >= 1


def check_command(argv: list[str], capfd, folder: Path, inputs: set[str], out_file: Path | None,
                  ids: Callable[[], Sequence[str]]) -> int:
    code, out, err = run_in_process(argv, capfd)
    assert_contract(code, out, err, folder, inputs, out_file, ids)
    return code


# --- strategies ----------------------------------------------------------------------------------------

scalars = st.one_of(
    st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 1, 2, 2**63, 10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([float("nan"), float("inf"), -0.0, 1e308, 5e-324]),
    st.text(max_size=8), st.sampled_from(["u1 u2", "a,b", '"q', "", " ", "é", "\x00", "u1", "accuracy", "python"]),
    st.booleans())
values = st.one_of(scalars, st.lists(scalars, max_size=14), st.dictionaries(st.text(max_size=4), scalars, max_size=3))
hostile_ids = st.lists(st.one_of(st.sampled_from(PAPER_IDS + ['"u1', "u,2", "u 3", "", "u\t4", "ü", "u1"]),
                                 st.text(max_size=4)), min_size=1, max_size=12)


def paths(table: dict) -> list[tuple[str, ...]]:
    """Every key path of the instance table, and a few new ones."""
    found = [(key,) for key in table] + [("extra",), ("workers", "extra"), ("utility", "callable")]
    for section in ("workers", "utility"):
        if isinstance(table.get(section), dict):
            found += [(section, key) for key in table[section]]
    return found


@st.composite
def mutated_tables(draw) -> bytes:
    """A bundled instance with one to three keys replaced, deleted or made hostile."""
    table = tomllib.loads(BUNDLED[draw(st.sampled_from(sorted(BUNDLED)))])
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths(table)))
        parent = table
        for key in path[:-1]:
            parent = parent.setdefault(key, {}) if isinstance(parent.get(key, {}), dict) else {}
        action = draw(st.sampled_from(["set", "delete", "ids", "python"]))
        if action == "set":
            parent[path[-1]] = draw(values)
        elif action == "delete":
            parent.pop(path[-1], None)
        elif action == "ids" and isinstance(table.get("workers"), dict):
            table["workers"]["ids"] = draw(hostile_ids)
        elif action == "python":
            table["utility"] = {"kind": "python", "callable": draw(st.sampled_from(CALLABLES))}
    return tomli_w.dumps(table).encode()


@st.composite
def damaged_text(draw, text: str) -> bytes:
    """``text`` truncated, with one character changed, or with a run of random characters inserted."""
    cut = draw(st.integers(0, len(text)))
    action = draw(st.sampled_from(["truncate", "flip", "insert"]))
    if action == "truncate":
        return text[:cut].encode()
    if action == "flip":
        return (text[:cut] + draw(st.characters()) + text[cut + 1:]).encode("utf-8", "surrogatepass")
    return (text[:cut] + draw(st.text(max_size=6)) + text[cut:]).encode("utf-8", "surrogatepass")


instance_bytes = st.one_of(st.binary(max_size=300), mutated_tables(),
                           st.sampled_from(sorted(BUNDLED)).flatmap(lambda name: damaged_text(BUNDLED[name])))


def trace_text(rows: list[list[str]]) -> str:
    return "round,workers\n" + "".join(f"{t},{' '.join(row)}\n" for t, row in enumerate(rows, start=1))


valid_traces = st.lists(st.lists(st.sampled_from(PAPER_IDS), unique=True, min_size=6), min_size=1, max_size=12)
trace_bytes = st.one_of(st.binary(max_size=200), valid_traces.map(trace_text).flatmap(damaged_text),
                        valid_traces.map(lambda rows: trace_text(rows).encode()))


def number_changed(text: str, index: int, replacement: str) -> bytes:
    numbers = list(re.finditer(r"-?\d+(\.\d+)?", text))
    match = numbers[index % len(numbers)]
    return (text[:match.start()] + replacement + text[match.end():]).encode()


OPTION_VALUES = {
    "--rounds": ["-1", "0", "nan", "1e3", "10000000000000", "99999999999999999999", "abc", "", "1", "7"],
    "--seed": ["-1", "0", "nan", str(2**64), str(10**40), "1e3", "-0", "x", "3"],
    "--beta": ["-1", "nan", "inf", "-inf", "1e308", "0", "0.3", "0.7", "abc", "1e-320"],
    "--checkpoint-every": ["-1", "0", "1", "7", "1e3", "99999999999999", "nan"],
    "--max-columns": ["-5", "0", "1", "10", "99999999999999999999"],
}
OPTIMUM_VALUES = {
    "--gap": ["-1", "nan", "inf", "0", "1e-12", "1e300", "x"],
    "--time-limit": ["-1", "0", "nan", "inf", "1e-9", "1e-7", "1e308", "x"],
    "--beta": OPTION_VALUES["--beta"],
    "--max-columns": OPTION_VALUES["--max-columns"],
}
PARAMS = {
    "fairdg": ["speed=2", "rank=-1", "rank=nan", "rank=abc", "rank=position", "cache_size=-5", "cache_size=nan",
               "cache_size=abc", "cache_size=1e400", "=3", "novalue", "cache_size=99999999999999999999"],
    "lyapunov": ["V=nan", "V=-1", "V=inf", "V=abc", "V=1e-300", "V=true", "q=1"],
    "lp-sequenced": ["margin=x", "margin=-1", "margin=nan", "loss=1", "loss=abc", "margin=0.5"],
    "faircg1": ["steps=0", "steps=-3", "steps=abc", "steps=2.5", "method=bogus", "samples=0", "steps=3"],
}


# --- the properties ------------------------------------------------------------------------------------


@SETTINGS
@given(data=instance_bytes, command=st.sampled_from(["check", "optimum", "run-fairdg", "run-lp-random",
                                                     "run-greedy"]),
       beta=st.one_of(st.none(), st.sampled_from(OPTION_VALUES["--beta"])))
def test_hostile_instances(tmp_path_factory, capfd, helper_on_path, data, command, beta):
    folder = tmp_path_factory.mktemp("instance")
    instance = folder / "inst.toml"
    instance.write_bytes(data)
    argv, out_file = [command, str(instance)], None
    if command.startswith("run"):
        out_file = folder / "s.csv"
        argv = ["run", str(instance), "--policy", command[4:], "--rounds", "20", "--out", str(out_file)]
    if beta is not None:
        argv += ["--beta", beta]
    check_command(argv, capfd, folder, {"inst.toml"}, out_file,
                  lambda: load_instance(instance, beta=None if beta is None else float(beta)).ids)


@SETTINGS
@given(data=trace_bytes, policy=st.sampled_from(["fairdg", "lp-random", "round-robin"]))
def test_hostile_availability_traces(tmp_path_factory, capfd, data, policy):
    folder = tmp_path_factory.mktemp("trace")
    trace, out_file = folder / "trace.csv", folder / "s.csv"
    trace.write_bytes(data)
    check_command(["run", "paper", "--policy", policy, "--rounds", "20", "--availability-trace", str(trace),
                   "--out", str(out_file)], capfd, folder, {"trace.csv"}, out_file, lambda: PAPER_IDS)


@SETTINGS
@given(draw=st.data())
def test_hostile_checkpoints(tmp_path_factory, capfd, checkpoint_text, draw):
    damage = draw.draw(st.sampled_from(["flip", "truncate", "number"]))
    if damage == "number":
        data = number_changed(checkpoint_text, draw.draw(st.integers(0, 10**6)),
                              draw.draw(st.sampled_from(["-1", "0", "7", "1e308", "99999999999999999999", "3.5",
                                                         "NaN", '"x"', "null", "[]"])))
    elif damage == "truncate":
        data = checkpoint_text[:draw.draw(st.integers(0, len(checkpoint_text) - 1))].encode()
    else:
        at = draw.draw(st.integers(0, len(checkpoint_text) - 1))
        data = (checkpoint_text[:at] + draw.draw(st.characters(exclude_categories=("Cs",)))
                + checkpoint_text[at + 1:]).encode()
    folder = tmp_path_factory.mktemp("checkpoint")
    (folder / "C").write_bytes(data)
    out_file = folder / "s.csv"
    code = check_command(["run", "--resume", str(folder / "C"), "--out", str(out_file)], capfd, folder, {"C"},
                         out_file, lambda: PAPER_IDS)
    if code == 0:  # only a change that leaves the document as it was (white space) may be resumed
        assert json.loads(data) == json.loads(checkpoint_text)


@SETTINGS
@given(values=st.dictionaries(st.sampled_from(sorted(OPTION_VALUES)), st.none(), min_size=1, max_size=2),
       draw=st.data())
def test_hostile_run_options(tmp_path_factory, capfd, values, draw):
    folder = tmp_path_factory.mktemp("options")
    out_file = folder / "s.csv"
    policy = draw.draw(st.sampled_from(sorted(PARAMS)))
    argv = ["run", "paper", "--policy", policy, "--out", str(out_file), "--checkpoint", str(folder / "C")]
    if "--rounds" not in values:
        argv += ["--rounds", "30"]
    for option in values:
        argv += [option, draw.draw(st.sampled_from(OPTION_VALUES[option]))]
    for pair in draw.draw(st.lists(st.sampled_from(PARAMS[policy]), max_size=2)):
        argv += ["--param", pair]
    code = check_command(argv, capfd, folder, {"C"}, out_file, lambda: PAPER_IDS)
    assert code == 0 or not (folder / "C").exists()  # refused before the run, not after it


@SETTINGS
@given(values=st.dictionaries(st.sampled_from(sorted(OPTIMUM_VALUES)), st.none(), min_size=1, max_size=3),
       draw=st.data())
def test_hostile_optimum_options(tmp_path_factory, capfd, values, draw):
    folder = tmp_path_factory.mktemp("optimum")
    method = draw.draw(st.sampled_from(["auto", "enumeration", "column-generation"]))
    argv = ["optimum", draw.draw(st.sampled_from(["paper", "coverage"])), "--method", method, "--json"]
    for option in values:
        argv += [option, draw.draw(st.sampled_from(OPTIMUM_VALUES[option]))]
    check_command(argv, capfd, folder, set(), None, lambda: PAPER_IDS)


# --- a few real processes ---------------------------------------------------------------------------------

SUBPROCESS_CASES = [
    ("random bytes", lambda folder: ["check", write(folder, "inst.toml", bytes(range(256)))]),
    ("python utility that raises", lambda folder: ["optimum", write(folder, "inst.toml", tomli_w.dumps(
        {"k": 1, "workers": {"r": [0.5, 0.5]}, "utility": {"kind": "python", "callable": "fairsched.cli:nope"}}
    ).encode())]),
    ("non-UTF-8 trace", lambda folder: ["run", "paper", "--policy", "fairdg", "--rounds", "10", "--out",
                                        str(folder / "s.csv"), "--availability-trace",
                                        write(folder, "t.csv", b"round,workers\n1,\xff\n")]),
    ("damaged checkpoint", lambda folder: ["run", "--resume", write(folder, "C", b'{"format": "fairsched-run'),
                                           "--out", str(folder / "s.csv")]),
    ("huge rounds", lambda folder: ["run", "paper", "--policy", "fairdg", "--rounds", "1" + "0" * 30]),
    ("nan gap", lambda folder: ["optimum", "paper", "--gap", "nan", "--json"]),
]


def write(folder: Path, name: str, data: bytes) -> str:
    (folder / name).write_bytes(data)
    return str(folder / name)


@pytest.mark.parametrize("label, build", SUBPROCESS_CASES, ids=[case[0] for case in SUBPROCESS_CASES])
def test_hostile_input_in_a_real_process(tmp_path, label, build):
    argv = build(tmp_path)
    inputs = set(os.listdir(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "fairsched.cli", *argv], capture_output=True, text=True,
                          cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert_contract(proc.returncode, proc.stdout, proc.stderr, tmp_path, inputs, None, lambda: PAPER_IDS)
    assert proc.stdout == "" and not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("policy", ["fairdg", "lp-random", "lp-sequenced"])
def test_subnormal_floors_keep_the_contract(tmp_path_factory, capfd, policy):
    """Found by the properties above: ``--beta 1e-320`` makes ``r`` subnormal, ``1 / r`` infinite."""
    folder = tmp_path_factory.mktemp("subnormal")
    out_file = folder / "s.csv"
    code = check_command(["run", "paper", "--policy", policy, "--rounds", "30", "--beta", "1e-320", "--out",
                          str(out_file)], capfd, folder, set(), out_file, lambda: PAPER_IDS)
    assert code == 0


@pytest.mark.parametrize("beta, message", [(10**30, "needs r = 5e\\+29 > 1"), (10**400, "must be a finite number")])
def test_integer_beta_too_large_for_numpy_is_an_instance_error(beta, message):
    """Found by test_hostile_instances: an integer ``beta`` beyond int64 reached ``np.isfinite``
    as an object and raised TypeError instead of a located error."""
    from fairsched.errors import FairschedError
    from fairsched.instances import problem_from_table

    table = {"k": 1, "workers": {"r_base": [0.5, 0.5], "beta": beta},
             "utility": {"kind": "modular", "weights": [1.0, 2.0]}}
    with pytest.raises(FairschedError, match=message):
        problem_from_table(table)
    table["workers"] = {"r": [0.1, 10**400]}
    with pytest.raises(FairschedError, match="too large"):
        problem_from_table(table)
