"""Worker ids: one validation for files and the API; every valid id survives ``Schedule.write``/``read``."""

from __future__ import annotations

import numpy as np
import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from fairsched.cli import main
from fairsched.errors import InstanceError
from fairsched.instances import load_instance
from fairsched.problem import Problem, is_valid_worker_id
from fairsched.schedule import Schedule
from fairsched.utilities.modular import Modular

#: isprintable() is false for these categories (space aside); Zs is whitespace
NOT_PRINTABLE = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp", "Zs")
id_chars = st.one_of(st.sampled_from('",\'#;=[]{}\\'), st.characters(exclude_categories=NOT_PRINTABLE))
valid_ids = st.text(id_chars, min_size=1, max_size=8)
bad_chars = st.sampled_from([" ", "\t", "\n", "\r", "\x00", "\x1b", "\u00a0", "\u2028", "\u3000", "\ufeff"])
invalid_ids = st.one_of(st.just(""), st.builds(lambda a, c, b: a + c + b, valid_ids | st.just(""), bad_chars,
                                               valid_ids | st.just("")))


def instance_table(ids: list[str]) -> dict:
    n = len(ids)
    return {"k": 1, "workers": {"ids": ids, "r": [0.5 / n] * n},
            "utility": {"kind": "modular", "weights": [1.0] * n}}


@settings(max_examples=150, deadline=None)
@given(ids=st.lists(valid_ids, min_size=1, max_size=6, unique=True), data=st.data())
def test_any_valid_id_survives_write_then_read(tmp_path_factory, ids, data):
    assert all(is_valid_worker_id(w) for w in ids)
    problem = Problem(Modular(np.ones(len(ids))), 1, np.full(len(ids), 0.5 / len(ids)), tuple(ids))
    sets = data.draw(st.lists(st.lists(st.integers(0, len(ids) - 1), unique=True), max_size=5))
    schedule = Schedule.from_sets(sets, len(ids))
    path = tmp_path_factory.mktemp("ids") / "s.csv"
    schedule.write(path, problem.ids)
    back = Schedule.read(path, problem.ids)
    assert np.array_equal(back.indptr, schedule.indptr) and np.array_equal(back.indices, schedule.indices)
    instance = path.with_name("inst.toml")
    instance.write_text(tomli_w.dumps(instance_table(ids)))
    assert load_instance(instance).ids == tuple(ids)


@settings(max_examples=100, deadline=None)
@given(bad=invalid_ids, position=st.integers(0, 2))
def test_invalid_ids_are_refused_by_the_api_and_the_loader_with_the_same_message(tmp_path_factory, bad, position):
    ids = ["a", "b", "c"]
    ids[position] = bad
    with pytest.raises(InstanceError) as api:
        Problem(Modular(np.ones(3)), 1, np.full(3, 0.1), tuple(ids))
    instance = tmp_path_factory.mktemp("bad") / "inst.toml"
    instance.write_text(tomli_w.dumps(instance_table(ids)))
    with pytest.raises(InstanceError) as loader:
        load_instance(instance)
    assert api.value.message == loader.value.message
    assert api.value.key == loader.value.key == "workers.ids"
    assert api.value.message == (f"worker id {bad!r} is invalid: an id is a non-empty string of printable "
                                 "characters without whitespace")
    assert str(loader.value) == f"{instance}: workers.ids: {api.value.message}"


def test_ordinary_ids_are_written_as_before(tmp_path):
    path = tmp_path / "s.csv"
    Schedule.from_sets([[0, 1], [], [2]], 3).write(path, ["u1", "u2", "u3"])
    assert path.read_bytes() == b"round,workers\n1,u1 u2\n2,\n3,u3\n"


def test_ids_with_quotes_and_commas_are_quoted(tmp_path):
    path = tmp_path / "s.csv"
    ids = ['"a', "b,c", "d"]
    Schedule.from_sets([[0, 1, 2]], 3).write(path, ids)
    assert path.read_text() == 'round,workers\n1,"""a b,c d"\n'
    assert Schedule.read(path, ids).selected(0).tolist() == [0, 1, 2]


def test_the_cli_runs_an_instance_with_unusual_ids(tmp_path, capsys):
    ids = ['"q', "x,y", "é", "z'"]
    instance = tmp_path / "inst.toml"
    instance.write_text(tomli_w.dumps(instance_table(ids) | {"k": 2}))
    out = tmp_path / "s.csv"
    assert main(["run", str(instance), "--policy", "fairdg", "--rounds", "40", "--out", str(out), "--quiet"]) == 0
    assert Schedule.read(out, ids).rounds == 40
