"""Shared pieces of the experiments: one tidy row per policy run, measuring, CSV output."""

from __future__ import annotations

import csv
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

from fairsched.atomic import atomic_write
from fairsched.metrics import evaluate
from fairsched.policies import make_policy
from fairsched.problem import Problem
from fairsched.schedule import Schedule
from fairsched.runtime.simulation import run


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
    """Run one policy (with ``params``) and evaluate it against ``u_opt``.

    The row's ``policy`` is the name, with the parameters in brackets when given
    (``lyapunov[V=10]``).
    """
    policy = make_policy(policy_name, **params)
    start = time.perf_counter()
    schedule = run(problem, policy, rounds, seed)
    seconds = time.perf_counter() - start
    report = evaluate(schedule, problem, u_opt)
    diag = policy.diagnostics(u_opt)
    label = policy_name + ("[" + ",".join(f"{k}={v:g}" if isinstance(v, (int, float)) else f"{k}={v}" for k, v in params.items()) + "]" if params else "")
    row = Row(instance, beta, label, rounds, seed, u_opt, report.time_average_utility,
              report.ratio, report.fairness_slack, report.max_debt,
              diag.get("multilinear_value"), diag.get("lower_bound"), seconds)
    return row, schedule


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


