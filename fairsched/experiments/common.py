"""Shared pieces of the experiments: bundled instances, one tidy row per policy run, CSV output."""

from __future__ import annotations

import csv
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from fairsched.atomic import atomic_write
from fairsched.instances import parse_table, problem_from_table
from fairsched.instances.bundled import bundled_bytes
from fairsched.problem import Problem
from fairsched.runtime.measure import measure as measure_run
from fairsched.schedule import Schedule


@dataclass(frozen=True)
class Row:
    """One policy run on one instance: the tidy record behind every table and figure."""

    instance: str
    beta: float | None
    policy: str
    rounds: int
    seed: int
    u_opt: float
    time_average_utility: float
    ratio: float
    fairness_slack: float
    max_debt: float
    multilinear_value: float | None
    lower_bound: float | None
    seconds: float


def measure(problem: Problem, policy_name: str, rounds: int, seed: int, u_opt: float,
            instance: str, beta: float | None, **params: Any) -> tuple[Row, Schedule]:
    """Run one policy (with ``params``) and evaluate it against ``u_opt``
    (:func:`fairsched.runtime.measure.measure`), as a :class:`Row`.

    The row's ``policy`` is the name, with the parameters in brackets when given
    (``lyapunov[V=10]``).
    """
    run = measure_run(problem, policy_name, rounds, seed, u_opt, **params)
    report, diag = run.report, run.diagnostics
    row = Row(instance, beta, policy_label(policy_name, params), rounds, seed, u_opt, report.time_average_utility,
              report.ratio, report.fairness_slack, report.max_debt,
              diag.get("multilinear_value"), diag.get("lower_bound"), run.seconds)
    return row, run.schedule


def policy_label(name: str, params: dict[str, Any]) -> str:
    """``name``, or ``name[key=value,...]`` with numbers in ``%g`` form (``lyapunov[V=10]``)."""
    if not params:
        return name
    return name + "[" + ",".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}"
                                 for k, v in params.items()) + "]"


def bundled_problem(name: str, beta: float | None = None) -> Problem:
    """The bundled instance ``name`` (``"paper.toml"``) as a :class:`Problem`, at ``beta`` if given.

    Read from the installed package (:mod:`importlib.resources`), never from the working
    directory, so the experiments run the same from a wheel in any folder.
    """
    return problem_from_table(parse_table(bundled_bytes(name), source=name), source=name, beta=beta)


def instance_stem(name: str) -> str:
    """``"paper"`` for ``"paper.toml"``: how progress lines name an instance."""
    return Path(name).stem


def log(message: str) -> None:
    """Progress line on stderr (the experiments keep stdout for results)."""
    print(message, file=sys.stderr, flush=True)


def output_folder(path: str) -> Path:
    """The output folder, created if needed."""
    out = Path(path)
    out.mkdir(parents=True, exist_ok=True)
    return out


def write_csv(rows: Sequence[Any], path: Path) -> None:
    """Tidy CSV, one dataclass row per line."""
    with atomic_write(path) as handle:
        writer = csv.DictWriter(handle, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        for row in rows:
            writer.writerow(asdict(row))


