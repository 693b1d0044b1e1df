"""Instance files (TOML) and their loading, with errors that name the file and the key.

The schema (the README's "Instance files" section documents every key)::

    name = "example"          # optional
    k = 3                     # workers per round
    rounds = 100000           # optional default horizon for `run`
    [workers]
    ids = ["a", "b", "c"]     # optional; default "0".."n-1"
    r = [0.2, 0.2, 0.5]       # or: r_base = [...] and beta = 0.42 (r = beta * r_base)
    availability = [1, 0.5, 0.9]  # optional: P(worker can be asked in a round)
    cap = [1, 0.6, 0.8]       # optional: maximum fraction of rounds (r <= cap <= 1)
    [utility]
    kind = "accuracy"         # plus the keys of that kind (see fairsched.utilities)

``n`` is the length of ``workers.r`` (or ``workers.r_base``).
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import tomli_w

from fairsched.atomic import atomic_write
from fairsched.instances.bundled import bundled_bytes, bundled_names, is_bundled_name
from fairsched.errors import InfeasibleError, InstanceError
from fairsched.problem import Problem, check_worker_ids
from fairsched.utilities import utility_from_config

TOP_KEYS = {"name", "k", "rounds", "workers", "utility"}
WORKER_KEYS = {"ids", "r", "r_base", "beta", "availability", "cap"}


def read_instance_bytes(instance: str | os.PathLike[str]) -> bytes:
    """The bytes of an instance: a file path, or the name of a bundled instance (``"paper"``).

    A path that exists wins over a bundled name. Read once, so a pipe (``/dev/stdin``) works;
    unreadable files are an :class:`InstanceError` naming the file.
    """
    source = os.fspath(instance)
    if is_bundled_name(source):
        return bundled_bytes(source)
    try:
        with open(source, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        names = ", ".join(bundled_names())
        raise InstanceError(f"no such file (nor a bundled instance: {names})", source=source) from None
    except IsADirectoryError:
        raise InstanceError("is a directory, expected an instance file", source=source) from None
    except PermissionError:
        raise InstanceError("permission denied", source=source) from None
    except OSError as exc:
        raise InstanceError(f"cannot be read: {exc.strerror or exc}", source=source) from None


def parse_table(data: bytes, source: str | None = None) -> dict[str, Any]:
    """Parse instance TOML bytes into a dict; non-UTF-8 or malformed TOML is an InstanceError."""
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise InstanceError("not a UTF-8 text file", source=source) from None
    except tomllib.TOMLDecodeError as exc:
        raise InstanceError(f"malformed TOML: {exc}", source=source) from None


def read_table(instance: str | os.PathLike[str]) -> dict[str, Any]:
    """Parse an instance file (or a bundled instance, by name) into a dict."""
    return parse_table(read_instance_bytes(instance), source=os.fspath(instance))


def load_instance(instance: str | os.PathLike[str], beta: float | None = None) -> Problem:
    """Load an instance file, or a bundled instance by name, as a :class:`Problem`.

    ``beta`` overrides the file's ``workers.beta`` (the file must then give ``r_base``),
    which is how the ``r = β·r_base`` sweeps of Li, Liu and Ji are run.

    >>> problem = load_instance("paper")
    >>> problem.n, problem.k
    (10, 6)
    """
    return problem_from_table(read_table(instance), source=os.fspath(instance), beta=beta)


def problem_from_table(table: dict[str, Any], source: str | None = None, beta: float | None = None) -> Problem:
    """Build a :class:`Problem` from a parsed instance table (see the module docstring)."""
    try:
        return _build(table, beta)
    except InstanceError as exc:
        raise exc.located(source=source) from None
    except InfeasibleError as exc:
        raise InfeasibleError(f"{source}: {exc}" if source else str(exc)) from None


def _build(table: dict[str, Any], beta: float | None) -> Problem:
    _reject_unknown(table, TOP_KEYS, "")
    k = _require(table, "k", "")
    if isinstance(k, bool) or not isinstance(k, int):
        raise InstanceError(f"must be an integer, got {k!r}", key="k")
    workers = _require(table, "workers", "")
    if not isinstance(workers, dict):
        raise InstanceError("must be a table ([workers])", key="workers")
    _reject_unknown(workers, WORKER_KEYS, "workers.")
    r = _floors(workers, beta)
    n = len(r)
    ids = workers.get("ids", [str(i) for i in range(n)])
    if not isinstance(ids, list) or not all(isinstance(i, (str, int)) for i in ids):
        raise InstanceError("must be a list of strings", key="workers.ids")
    ids = [str(i) for i in ids]
    check_worker_ids(ids)
    utility_table = _require(table, "utility", "")
    if not isinstance(utility_table, dict):
        raise InstanceError("must be a table ([utility])", key="utility")
    try:
        utility = utility_from_config(utility_table, n)
    except InstanceError as exc:
        raise exc.located(key_prefix="utility") from None
    rounds = table.get("rounds")
    if rounds is not None and (isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1):
        raise InstanceError(f"must be a positive integer, got {rounds!r}", key="rounds")
    name = table.get("name", "")
    if not isinstance(name, str):
        raise InstanceError(f"must be a string, got {name!r}", key="name")
    availability = workers.get("availability")
    if availability is not None:
        availability = np.asarray(_numbers(availability, "workers.availability"), dtype=float)
    caps = workers.get("cap")
    if caps is not None:
        caps = np.asarray(_numbers(caps, "workers.cap"), dtype=float)
    return Problem(utility, k, np.asarray(r, dtype=float), tuple(ids), name, rounds, availability, caps)


def _floors(workers: dict[str, Any], beta: float | None) -> list[float]:
    has_r, has_base = "r" in workers, "r_base" in workers
    if has_r and has_base:
        raise InstanceError("give either r or r_base with beta, not both", key="workers")
    if beta is not None and not has_base:
        raise InstanceError("a beta override needs r_base in the file", key="workers.r_base")
    if has_r:
        return _numbers(workers["r"], "workers.r")
    if not has_base:
        raise InstanceError("missing key (give r, or r_base and beta)", key="workers.r")
    base = _numbers(workers["r_base"], "workers.r_base")
    if beta is None:
        beta = _require(workers, "beta", "workers.")
    if not _finite_number(beta) or beta < 0:
        raise InstanceError(f"must be a finite number >= 0, got {beta!r}", key="workers.beta")
    return [float(beta) * b for b in base]


def _numbers(values: Any, key: str) -> list[float]:
    if not isinstance(values, list) or not values:
        raise InstanceError("must be a non-empty list of numbers", key=key)
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise InstanceError(f"entry {i} is {v!r}, expected a number", key=key)
        if not _finite_number(v) and isinstance(v, int):
            raise InstanceError(f"entry {i} is too large for a float", key=key)
    return [float(v) for v in values]


def _finite_number(value: Any) -> bool:
    """A finite int or float (not a bool); Python ints too large for a float are not."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _require(table: dict[str, Any], key: str, prefix: str) -> Any:
    if key not in table:
        raise InstanceError("missing key", key=prefix + key)
    return table[key]


def _reject_unknown(table: dict[str, Any], known: set[str], prefix: str) -> None:
    unknown = sorted(set(table) - known)
    if unknown:
        raise InstanceError(f"unknown key(s) {', '.join(prefix + u for u in unknown)}; "
                            f"known: {', '.join(sorted(known))}", key=prefix.rstrip(".") or None)


def problem_to_table(problem: Problem) -> dict[str, Any]:
    """The instance table that :func:`problem_from_table` turns back into ``problem``."""
    table: dict[str, Any] = {}
    if problem.name:
        table["name"] = problem.name
    table["k"] = problem.k
    if problem.rounds is not None:
        table["rounds"] = int(problem.rounds)
    table["workers"] = {"ids": list(problem.ids), "r": [float(x) for x in problem.r]}
    if problem.availability is not None:
        table["workers"]["availability"] = [float(a) for a in problem.availability]
    if problem.caps is not None:
        table["workers"]["cap"] = [float(c) for c in problem.caps]
    table["utility"] = problem.utility.to_config()
    return table


def save_instance(problem: Problem | dict[str, Any], path: str | os.PathLike[str], header: str = "") -> None:
    """Write a problem (or a ready instance table) as TOML, atomically; ``header`` becomes comments."""
    table = problem_to_table(problem) if isinstance(problem, Problem) else problem
    text = tomli_w.dumps(table)
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    with atomic_write(Path(path)) as handle:
        handle.write(comments + ("\n" if comments else "") + text)
