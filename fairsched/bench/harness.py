"""The sweep: ``U_opt`` once per case, then every policy × seed on it, as tidy rows.

Two phases through one :func:`~fairsched.bench.parallel.executor`: the LP of each case
(:func:`solve_case`), then one task per ``(case, policy, seed)`` (:func:`run_task`), which
plays the policy with :func:`fairsched.runtime.measure.measure`, the same call the
paper-reproduction (``seed003``) and comparison experiments make, so the numbers agree with theirs. Tasks are
independent and seeded, and results are collected in task order, so the rows (less the
wall-time columns, :data:`TIMING_COLUMNS`) are the same for any ``jobs`` and backend.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Callable, Sequence

from fairsched.bench.cases import Case, case_problem
from fairsched.bench.parallel import executor, run_all, single_threaded_blas
from fairsched.errors import FairschedError, PolicyError, TooLargeError
from fairsched.lp.solve import optimum
from fairsched.policies import make_policy, parse_params
from fairsched.runtime.measure import measure

Log = Callable[[str], None]


@dataclass(frozen=True)
class PolicySpec:
    """A policy name and its parameters; ``label`` is how tables name it (``lyapunov[V=10]``)."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @property
    def label(self) -> str:
        if not self.params:
            return self.name
        return self.name + "[" + ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                                          for k, v in self.params) + "]"


def parse_policy(text: str) -> PolicySpec:
    """``"fairdg"`` or ``"lyapunov[V=10]"`` (parameters comma-separated); unknown names raise :class:`PolicyError`."""
    text = text.strip()
    name, bracket, rest = text.partition("[")
    params: dict[str, Any] = {}
    if bracket:
        if not rest.endswith("]"):
            raise PolicyError(f"policy {text!r}: expected NAME[KEY=VALUE,...]")
        params = parse_params([p for p in rest[:-1].split(",") if p.strip()])
        text_valued = sorted(key for key, value in params.items() if isinstance(value, str))
        if text_valued:  # measure() labels runs with format(value, "g")
            raise PolicyError(f"policy {text!r}: the sweep takes numeric parameters only, "
                              f"not {', '.join(text_valued)}")
    make_policy(name, **params)  # validates the name and the parameters now, not in a worker
    return PolicySpec(name, tuple(sorted(params.items())))


@dataclass(frozen=True)
class OptimumInfo:
    """``U_opt`` of a case (``None`` when the LP is too large to solve), its bound and method."""

    value: float | None
    upper_bound: float | None
    method: str
    seconds: float


@dataclass(frozen=True)
class BenchRow:
    """One ``(case, policy, seed)`` run: the tidy record behind every table and figure."""

    instance: str
    n: int
    k: int
    beta: float | None
    scale: float
    policy: str
    seed: int
    rounds: int
    u_opt: float | None
    u_opt_upper_bound: float | None
    u_opt_method: str
    time_average_utility: float
    ratio: float | None
    fairness_slack: float
    max_debt: float
    multilinear_value: float | None
    lower_bound: float | None
    status: str
    seconds: float
    optimum_seconds: float


#: wall-time columns: the only ones that differ between runs with the same arguments
TIMING_COLUMNS = ("seconds", "optimum_seconds")
COLUMNS = tuple(f.name for f in fields(BenchRow))
DETERMINISTIC_COLUMNS = tuple(c for c in COLUMNS if c not in TIMING_COLUMNS)


def solve_case(case: Case) -> OptimumInfo:
    """``U_opt`` of the case's problem with :func:`fairsched.optimum` (its default method)."""
    single_threaded_blas()
    problem = case_problem(case)
    start = time.perf_counter()
    try:
        opt = optimum(problem)
    except TooLargeError:
        return OptimumInfo(None, None, "too-large", time.perf_counter() - start)
    return OptimumInfo(opt.value, opt.upper_bound, opt.method, time.perf_counter() - start)


def run_task(task: tuple[Case, PolicySpec, int, int, OptimumInfo]) -> BenchRow:
    """Play one policy for one seed on one case and measure it against the case's ``U_opt``."""
    single_threaded_blas()
    case, spec, seed, rounds, opt = task
    problem = case_problem(case)
    common = dict(instance=case.instance, n=problem.n, k=problem.k, beta=case.beta, scale=case.scale,
                  policy=spec.label, seed=seed, rounds=rounds, u_opt=opt.value,
                  u_opt_upper_bound=opt.upper_bound, u_opt_method=opt.method, optimum_seconds=opt.seconds)
    try:
        run = measure(problem, spec.name, rounds, seed, opt.value, **dict(spec.params))
    except FairschedError as exc:  # e.g. an LP policy on an instance too large to enumerate
        nan = math.nan
        return BenchRow(**common, time_average_utility=nan, ratio=None, fairness_slack=nan, max_debt=nan,
                        multilinear_value=None, lower_bound=None, status=f"error: {exc}", seconds=nan)
    report = run.report
    return BenchRow(**common, time_average_utility=report.time_average_utility, ratio=report.ratio,
                    fairness_slack=report.fairness_slack, max_debt=report.max_debt,
                    multilinear_value=run.diagnostics.get("multilinear_value"),
                    lower_bound=run.diagnostics.get("lower_bound"), status="ok", seconds=run.seconds)


def sweep(cases: Sequence[Case], policies: Sequence[PolicySpec], seeds: Sequence[int], rounds: int, *,
          jobs: int = 1, backend: str = "loky", scheduler_address: str | None = None,
          with_optimum: bool = True, log: Log | None = None) -> list[BenchRow]:
    """Every policy × seed on every case; rows in the order cases × policies × seeds.

    ``U_opt`` is solved once per case (skipped with ``with_optimum=False``: ratios are then
    empty) and shared by the case's runs. ``log`` receives one progress line per result.
    """
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise FairschedError(f"--rounds must be a positive integer, got {rounds!r}")
    if not seeds:
        raise FairschedError("at least one seed is needed")
    if not policies:
        raise FairschedError("at least one policy is needed")
    with executor(jobs, backend, scheduler_address) as map_:
        if with_optimum:
            optima = run_all(solve_case, cases, map_, _optimum_logger(cases, log))
        else:
            optima = [OptimumInfo(None, None, "skipped", 0.0)] * len(cases)
        tasks = [(case, spec, seed, rounds, opt) for case, opt in zip(cases, optima)
                 for spec in policies for seed in seeds]
        return run_all(run_task, tasks, map_, _run_logger(len(tasks), log))


def _optimum_logger(cases: Sequence[Case], log: Log | None) -> Callable[[int, OptimumInfo], None] | None:
    if log is None:
        return None

    def report(i: int, opt: OptimumInfo) -> None:
        value = "n/a (LP too large)" if opt.value is None else f"{opt.value:.6g}"
        log(f"U_opt {describe(cases[i])}: {value} ({opt.method}, {opt.seconds:.2f} s)")

    return report


def _run_logger(total: int, log: Log | None) -> Callable[[int, BenchRow], None] | None:
    if log is None:
        return None
    width = len(str(total))

    def report(i: int, row: BenchRow) -> None:
        where = f"[{i + 1:>{width}}/{total}] {row.instance}{_floor_label(row.beta, row.scale)} {row.policy} seed {row.seed}"
        if row.status != "ok":
            log(f"{where}: {row.status}")
            return
        ratio = "n/a" if row.ratio is None else f"{row.ratio:.5f}"
        log(f"{where}: ratio {ratio} slack {row.fairness_slack:+.4f} debt {row.max_debt:.2f} ({row.seconds:.2f} s)")

    return report


def describe(case: Case) -> str:
    """``paper.toml β=0.42`` or ``coverage-n50-s0 ×0.5``: a case in progress lines and tables."""
    return case.instance + _floor_label(case.beta, case.scale)


def _floor_label(beta: float | None, scale: float) -> str:
    return ("" if beta is None else f" β={beta:g}") + ("" if scale == 1.0 else f" ×{scale:g}")


def row_dict(row: BenchRow, columns: Sequence[str] = COLUMNS) -> dict[str, Any]:
    """The row as a dict restricted to ``columns``."""
    data = asdict(row)
    return {c: data[c] for c in columns}


__all__ = ["BenchRow", "COLUMNS", "DETERMINISTIC_COLUMNS", "OptimumInfo", "PolicySpec", "TIMING_COLUMNS",
           "describe", "parse_policy", "row_dict", "run_task", "solve_case", "sweep"]
