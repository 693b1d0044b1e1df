"""Play one policy on a problem and evaluate the schedule: the measurement behind every table.

The experiments (:mod:`fairsched.experiments`) and the benchmark sweep (:mod:`fairsched.bench`)
both call :func:`measure`, so their numbers agree run for run; each turns the
:class:`Measurement` into its own row type.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from fairsched.metrics import Report, evaluate
from fairsched.policies import make_policy
from fairsched.problem import Problem
from fairsched.results import Result
from fairsched.runtime.simulation import run
from fairsched.schedule import Schedule


@dataclass(frozen=True)
class Measurement(Result):
    """One policy run: the evaluation, the schedule, the policy's diagnostics and the play time.

    ``seconds`` is the wall time of playing the ``rounds`` rounds only (not of evaluating
    them); ``diagnostics`` is ``policy.diagnostics(u_opt)`` (``multilinear_value``,
    ``lower_bound``, ... for the policies that report them); ``status`` is ``"measured"``
    and ``message`` the report's.
    """

    report: Report
    schedule: Schedule
    diagnostics: dict[str, Any]


def measure(problem: Problem, policy_name: str, rounds: int, seed: int, u_opt: float | None,
            **params: Any) -> Measurement:
    """Make the policy ``policy_name`` (with ``params``), play it for ``rounds`` rounds, evaluate it.

    ``u_opt`` is the yardstick of the report's ratio (``None`` when unknown).
    """
    policy = make_policy(policy_name, **params)
    start = time.perf_counter()
    schedule = run(problem, policy, rounds, seed)
    seconds = time.perf_counter() - start
    report = evaluate(schedule, problem, u_opt)
    return Measurement(report, schedule, policy.diagnostics(u_opt), status="measured",
                       message=f"{policy.name}: {report.message}", seconds=seconds)


__all__ = ["Measurement", "measure"]
