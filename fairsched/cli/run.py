"""``fairsched run``: play a policy, report, write the schedule; checkpoints and resume.

``U_opt``, the yardstick of the report, is computed within a budget (``--optimum``):
``auto`` (default) solves the LP for at most ``--optimum-time-limit`` seconds and reports
the value reached with its certified upper bound; ``exact`` insists on a certified
optimum, without a time limit; ``bound`` reports only the certified upper bound (so the
ratio is a certified lower bound on the true one); ``none`` skips it. When the value is
missing the JSON says why (``optimum_reason``).

A checkpoint stores the run's *arguments* (checked on resume against
:data:`_ARGUMENT_CHECKS`): the instance and the availability trace as absolute path or
bundled name plus the SHA-256 of their bytes, so that ``--resume`` works from any
directory and refuses an edited file, and the options that decide the schedule (policy,
parameters, rounds, seed, beta). Options given together with ``--resume`` must agree with
them; a resumed run saves its checkpoints where it was resumed from (or at ``--checkpoint``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fairsched.atomic import probe_directory
from fairsched.availability import Availability, check_availability
from fairsched.cli.errors import blamed_on
from fairsched.cli.output import Output
from fairsched.cli.progress import Progress
from fairsched.errors import (CheckpointError, FairschedError, InfeasibleError, InstanceError, PolicyError,
                              SolverFailedError, TooLargeError)
from fairsched.instances import parse_table, problem_from_table, read_instance_bytes
from fairsched.instances.bundled import bundled_bytes, is_bundled_name
from fairsched.lp import DEFAULT_MAX_COLUMNS, availability_optimum, optimum
from fairsched.metrics import evaluate
from fairsched.policies import POLICIES, make_policy, parse_params
from fairsched.policies.base import Policy
from fairsched.problem import Problem
from fairsched.runtime.checkpoint import load_checkpoint, restore, save_checkpoint
from fairsched.runtime.simulation import Simulation
from fairsched.schedule import Schedule

DEFAULT_ROUNDS = 10_000
DEFAULT_SEED = 0
DEFAULT_CHECKPOINT_EVERY = 10_000
OPTIMUM_MODES = ("auto", "exact", "bound", "none")
#: seconds ``--optimum auto`` and ``bound`` give the LP by default
DEFAULT_OPTIMUM_TIME_LIMIT = 60.0
#: workers listed one per line in the text report; beyond, only those below their floor
WORKER_TABLE_LIMIT = 40
#: more rounds than anyone can play (a Python loop of 10^9 rounds takes days), refused up front
MAX_ROUNDS = 10**9


def add_run_parser(sub: Any, common: Callable[..., None]) -> None:
    """Add the ``run`` subcommand to ``sub`` (argparse subparsers).

    Defaults are ``None`` so that ``--resume`` can tell an option given from its default.
    """
    run_p = sub.add_parser("run", help="run a policy and report utility and fairness")
    common(run_p, optional_instance=True)
    run_p.add_argument("--policy", help=f"one of: {', '.join(sorted(POLICIES))}")
    run_p.add_argument("--param", action="append", default=None, metavar="KEY=VALUE",
                       help="a policy parameter, e.g. --param steps=200 (repeatable)")
    run_p.add_argument("--rounds", type=int, default=None,
                       help=f"rounds T (default: the instance's rounds, else {DEFAULT_ROUNDS:,})")
    run_p.add_argument("--seed", type=int, default=None, help=f"random seed >= 0 (default {DEFAULT_SEED})")
    run_p.add_argument("--out", default=None, help="write the schedule (CSV, one row per round) here")
    run_p.add_argument("--quiet", action="store_true", help="no progress bar")
    run_p.add_argument("--optimum", choices=OPTIMUM_MODES, default="auto",
                       help="U_opt for the report: auto (solve within --optimum-time-limit, report value and "
                            "certified bound), exact (certified optimum, no time limit), bound (the certified "
                            "upper bound only), none (skip)")
    run_p.add_argument("--optimum-time-limit", type=float, default=DEFAULT_OPTIMUM_TIME_LIMIT, metavar="S",
                       help=f"seconds for U_opt with --optimum auto or bound (default {DEFAULT_OPTIMUM_TIME_LIMIT:g})")
    run_p.add_argument("--max-columns", type=int, default=None,
                       help=f"largest enumeration LP for U_opt; beyond it optimum and ratio are null "
                            f"(default {DEFAULT_MAX_COLUMNS:,})")
    run_p.add_argument("--availability-trace", default=None, metavar="FILE",
                       help="CSV 'round,workers' (ids separated by spaces): who can be asked each round")
    run_p.add_argument("--checkpoint", default=None, metavar="PATH",
                       help="save the run's state here, atomically, every --checkpoint-every rounds "
                            "(with --resume: default the resumed checkpoint)")
    run_p.add_argument("--checkpoint-every", type=int, default=None, metavar="N",
                       help=f"rounds between checkpoints (default {DEFAULT_CHECKPOINT_EVERY:,})")
    run_p.add_argument("--resume", default=None, metavar="PATH",
                       help="continue the run saved in this checkpoint (its instance, policy and options)")


@dataclass
class _Setup:
    """Everything a run needs: what a checkpoint stores, the problem, the trace, and the state to continue from."""

    arguments: dict[str, Any]
    problem: Problem
    trace: np.ndarray | None
    document: dict[str, Any] | None


def run_command(args: argparse.Namespace, output: Output) -> int:
    """Execute ``fairsched run``; returns the exit code (errors raise, see :mod:`fairsched.cli.errors`)."""
    _check_options(args)
    progress = Progress(enabled=not args.quiet)
    checkpoint = args.checkpoint or args.resume  # a resumed run goes on saving where it was saved
    for option, path in (("--out", args.out), ("--checkpoint" if args.checkpoint else "--resume", checkpoint)):
        if path:
            _probe(option, path)
    with progress.phase("reading the instance"):
        setup = _resume(args) if args.resume else _fresh(args)
    arguments, problem = setup.arguments, setup.problem
    instance = arguments["instance"]["given"]
    policy = _policy(arguments["policy"], arguments["params"])
    with progress.phase("checking the floors under availability") if _has_availability(problem, setup) \
            else contextlib.nullcontext():
        availability = _availability(problem, setup.trace, arguments["seed"])
    with blamed_on(instance):
        with progress.phase("solving U_opt"):
            yardstick = _yardstick(problem, policy, args.optimum, args.optimum_time_limit,
                                   arguments["max_columns"], availability, progress)
        start = time.perf_counter()
        simulation = Simulation(problem, policy, arguments["rounds"], arguments["seed"], availability)
        if setup.document is not None:
            _restore(simulation, setup.document, args.resume)
        _play(simulation, arguments, checkpoint, quiet=args.quiet)
        seconds = time.perf_counter() - start
        schedule = simulation.schedule()
        with progress.phase("evaluating the schedule"):
            report = evaluate(schedule, problem, yardstick.value)
    if args.out:
        with progress.phase(f"writing {args.out}"):
            schedule.write(args.out, problem.ids)
    u_opt = yardstick.value
    data = {
        "instance": instance, "policy": policy.name, "rounds": arguments["rounds"], "seed": arguments["seed"],
        "time_average_utility": report.time_average_utility, "optimum": u_opt, "ratio": report.ratio,
        "optimum_upper_bound": yardstick.upper_bound, "optimum_status": yardstick.status,
        "optimum_reason": yardstick.reason,
        "ratio_lower_bound": _ratio(report.time_average_utility, yardstick.upper_bound),
        "selection_fraction": report.as_dict(problem.ids)["selection_fraction"],
        "fairness_slack": report.fairness_slack, "max_debt": report.max_debt, "seconds": seconds,
    }
    if report.max_cap_excess is not None:
        data["max_cap_excess"] = report.max_cap_excess
    extra = policy.diagnostics(u_opt)
    if "fractional_point" in extra:
        extra["fractional_point"] = {w: float(y) for w, y in zip(problem.ids, extra["fractional_point"])}
    data.update(extra)
    output.emit(data, _text(problem, policy.name, instance, arguments["rounds"], arguments["seed"], seconds,
                            yardstick, report, extra, args.out))
    return 0


# --- options -----------------------------------------------------------------------------


def _check_options(args: argparse.Namespace) -> None:
    """Refuse out-of-range numbers before anything is read or computed."""
    if args.rounds is not None and not 1 <= args.rounds <= MAX_ROUNDS:
        raise FairschedError(f"--rounds must be between 1 and {MAX_ROUNDS:,}, got {args.rounds}")
    if args.seed is not None and args.seed < 0:
        raise FairschedError(f"--seed must be an integer >= 0, got {args.seed}")
    if args.checkpoint_every is not None and args.checkpoint_every < 1:
        raise FairschedError(f"--checkpoint-every must be positive, got {args.checkpoint_every}")
    if args.max_columns is not None and args.max_columns < 1:
        raise FairschedError(f"--max-columns must be positive, got {args.max_columns}")
    if not (math.isfinite(args.optimum_time_limit) and args.optimum_time_limit > 0):
        raise FairschedError(f"--optimum-time-limit must be positive seconds, got {args.optimum_time_limit}")


def _probe(option: str, path: str) -> None:
    """Fail now, not after the run, if ``path`` cannot be written; the message names its directory."""
    try:
        probe_directory(path)
    except OSError as exc:
        raise FairschedError(f"{option} {path}: {exc.strerror}") from None


def _fresh(args: argparse.Namespace) -> _Setup:
    """A new run from the command line's options."""
    if not args.instance or not args.policy:
        raise FairschedError("run needs INSTANCE and --policy (or --resume CHECKPOINT)")
    data = read_instance_bytes(args.instance)
    problem = problem_from_table(parse_table(data, args.instance), source=args.instance, beta=args.beta)
    rounds = args.rounds if args.rounds is not None else (problem.rounds or DEFAULT_ROUNDS)
    if rounds > MAX_ROUNDS:
        raise InstanceError(f"is {rounds:,}, at most {MAX_ROUNDS:,} rounds can be played", key="rounds",
                            source=args.instance)
    trace, trace_source = None, None
    if args.availability_trace:
        trace_data = _read_trace_bytes(args.availability_trace)
        trace = _parse_trace(trace_data, problem, args.availability_trace)
        trace_source = _source(args.availability_trace, trace_data)
    arguments = {
        "instance": _source(args.instance, data), "beta": args.beta, "policy": args.policy,
        "params": parse_params(args.param or []), "rounds": rounds,
        "seed": DEFAULT_SEED if args.seed is None else args.seed,
        "max_columns": DEFAULT_MAX_COLUMNS if args.max_columns is None else args.max_columns,
        "availability_trace": trace_source,
        "checkpoint_every": DEFAULT_CHECKPOINT_EVERY if args.checkpoint_every is None else args.checkpoint_every,
    }
    return _Setup(arguments, problem, trace, None)


def _source(given: str, data: bytes) -> dict[str, Any]:
    """How a checkpoint finds an input file again: as given, absolute path or bundled name, and SHA-256."""
    bundled = is_bundled_name(given)
    return {"given": given, "path": None if bundled else os.path.abspath(given),
            "bundled": given if bundled else None, "sha256": hashlib.sha256(data).hexdigest()}


def _read_trace_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise InstanceError(f"cannot be read: {exc.strerror or exc}", source=path) from None


def _parse_trace(data: bytes, problem: Problem, source: str) -> np.ndarray:
    """An availability trace (same CSV shape as a schedule) as a boolean ``(rounds, n)`` matrix."""
    trace = Schedule.parse(data, problem.ids, source=source)
    if trace.rounds == 0:
        raise InstanceError("the availability trace has no rounds", source=source)
    return trace.masks()


# --- resume ------------------------------------------------------------------------------


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_source(value: Any) -> bool:
    optional = (str, type(None))
    return (isinstance(value, dict) and isinstance(value.get("given"), str) and isinstance(value.get("sha256"), str)
            and isinstance(value.get("path"), optional) and isinstance(value.get("bundled"), optional)
            and (value.get("path") is None) != (value.get("bundled") is None))


#: what a checkpoint's arguments must look like; anything else is a damaged or foreign checkpoint
_ARGUMENT_CHECKS: dict[str, Callable[[Any], bool]] = {
    "instance": _is_source,
    "beta": lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)),
    "policy": lambda v: isinstance(v, str),
    "params": lambda v: isinstance(v, dict),
    "rounds": lambda v: _is_int(v) and 1 <= v <= MAX_ROUNDS,
    "seed": lambda v: _is_int(v) and v >= 0,
    "max_columns": lambda v: _is_int(v) and v >= 1,
    "availability_trace": lambda v: v is None or _is_source(v),
    "checkpoint_every": lambda v: _is_int(v) and v >= 1,
}


def _resume(args: argparse.Namespace) -> _Setup:
    """The run saved in ``--resume``'s checkpoint, with the options given now checked against it."""
    path = args.resume
    document = load_checkpoint(path)
    saved = document["arguments"]
    for key, valid in _ARGUMENT_CHECKS.items():
        if key not in saved or not valid(saved[key]):
            raise CheckpointError(f"{path}: the checkpoint's arguments are damaged or of another fairsched "
                                  f"({key} is {saved.get(key)!r})")
    _refuse_contradictions(args, saved, path)
    arguments = {key: saved[key] for key in _ARGUMENT_CHECKS}
    if args.max_columns is not None:
        arguments["max_columns"] = args.max_columns
    if args.checkpoint_every is not None:
        arguments["checkpoint_every"] = args.checkpoint_every
    instance = arguments["instance"]
    data = _saved_bytes(instance, args.instance, "INSTANCE", "instance", path, read_instance_bytes)
    problem = problem_from_table(parse_table(data, instance["given"]), source=instance["given"],
                                 beta=arguments["beta"])
    trace = None
    if arguments["availability_trace"] is not None:
        saved_trace = arguments["availability_trace"]
        trace_data = _saved_bytes(saved_trace, args.availability_trace, "--availability-trace",
                                  "availability trace", path, _read_trace_bytes)
        trace = _parse_trace(trace_data, problem, saved_trace["given"])
    elif args.availability_trace:
        raise FairschedError(f"--resume {path}: --availability-trace {args.availability_trace} contradicts the "
                             "checkpoint, which ran without --availability-trace")
    return _Setup(arguments, problem, trace, document)


def _refuse_contradictions(args: argparse.Namespace, saved: dict[str, Any], path: str) -> None:
    """Options given with ``--resume`` that decide the schedule must be the checkpoint's."""
    given = {"--policy": args.policy, "--param": None if args.param is None else parse_params(args.param),
             "--rounds": args.rounds, "--seed": args.seed, "--beta": args.beta}
    stored = {"--policy": saved["policy"], "--param": saved["params"], "--rounds": saved["rounds"],
              "--seed": saved["seed"], "--beta": saved["beta"]}
    for option, value in given.items():
        if value is not None and value != stored[option]:
            had = f"no {option}" if stored[option] in (None, {}) else f"{option} {_shown(stored[option])}"
            raise FairschedError(f"--resume {path}: {option} {_shown(value)} contradicts the checkpoint, "
                                 f"which has {had}")


def _shown(value: Any) -> str:
    """An option's value as typed: ``--param`` dicts as ``KEY=VALUE`` pairs."""
    if isinstance(value, dict):
        return " ".join(f"{key}={item}" for key, item in value.items())
    return str(value)


def _saved_bytes(source: dict[str, Any], given: str | None, option: str, what: str, path: str,
                 read: Callable[[str], bytes]) -> bytes:
    """The bytes of a checkpoint's input file, found again (or at ``given``) and checked by SHA-256."""
    if given:
        data = read(given)
        if hashlib.sha256(data).hexdigest() != source["sha256"]:
            raise FairschedError(f"--resume {path}: {option} {given} contradicts the checkpoint's {what} "
                                 f"{source['path'] or source['bundled']} (different content)")
        return data
    where = source["path"] or source["bundled"]
    try:
        data = bundled_bytes(source["bundled"]) if source["bundled"] else read(source["path"])
    except InstanceError as exc:
        raise CheckpointError(f"{path}: cannot read the checkpoint's {what}: {exc} "
                              f"(give its new location as {option})") from None
    if hashlib.sha256(data).hexdigest() != source["sha256"]:
        raise CheckpointError(f"{path}: the {what} {where} changed since the checkpoint (its SHA-256 differs)")
    return data


def _restore(simulation: Simulation, document: dict[str, Any], path: str) -> None:
    try:
        restore(simulation, document, path)
    except CheckpointError:
        raise
    except Exception as exc:  # the state is untrusted data: failing to load it means a damaged checkpoint
        raise CheckpointError(f"{path}: the checkpoint's state is malformed ({type(exc).__name__}: {exc})") from None


# --- the run -----------------------------------------------------------------------------


def _policy(name: str, params: dict[str, Any]) -> Policy:
    """The policy ``name`` with ``params``; a constructor that chokes on a value's type is bad input too."""
    try:
        return make_policy(name, **params)
    except FairschedError:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise PolicyError(f"{name}: invalid --param value in {_shown(params)} ({exc})") from None


def _availability(problem: Problem, trace: np.ndarray | None, seed: int) -> Availability | None:
    if trace is not None:
        availability = Availability(trace=trace)
    elif problem.availability is not None:
        availability = Availability(probabilities=problem.availability, seed=seed)
    else:
        return None
    verdict = check_availability(problem.r, problem.k, availability, problem.ids)
    if not verdict:
        raise InfeasibleError(verdict.reason)
    return availability


def _has_availability(problem: Problem, setup: _Setup) -> bool:
    return setup.trace is not None or problem.availability is not None


@dataclass(frozen=True)
class Yardstick:
    """``U_opt`` as far as it was computed: the value reached (``None`` with a ``reason``),
    the certified upper bound, and how the LP ended (``status``)."""

    value: float | None
    upper_bound: float | None
    status: str
    reason: str | None


def _yardstick(problem: Problem, policy: Policy, mode: str, time_limit: float, max_columns: int,
               availability: Availability | None, progress: Progress) -> Yardstick:
    """``U_opt`` within the budget of ``--optimum``; an LP policy is handed the same optimum to play.

    An LP policy needs the LP's distribution whatever ``--max-columns`` says; with
    ``--optimum none`` it solves the LP itself.
    """
    if mode == "none":
        return Yardstick(None, None, "not-computed", "not computed (--optimum none)")
    limit = None if mode == "exact" else time_limit
    try:
        if availability is not None:
            solved = availability_optimum(problem, availability, max_columns=max_columns)
        else:
            columns = None if policy.uses_optimum else max_columns
            # a policy without a plan needs U_opt and its bound, not the distribution's sets
            solved = optimum(problem, time_limit=limit, progress=progress.column_generation,
                             support=policy.uses_optimum,
                             **({} if columns is None else {"max_columns": columns}))
    except TooLargeError as exc:
        return Yardstick(None, None, "too-large", f"not computed: {exc}")
    except SolverFailedError as exc:
        if mode == "exact":
            raise
        return Yardstick(None, None, "failed", f"not computed within --optimum-time-limit {time_limit:g} s: {exc}")
    if availability is None and policy.uses_optimum and solved.support:
        policy.use_optimum(solved)
    upper = solved.upper_bound if math.isfinite(solved.upper_bound) else None
    value = solved.value if math.isfinite(solved.value) else None
    reason = None if solved.success else f"not certified optimal: {solved.message}"
    if mode == "exact" and not solved.success:
        raise SolverFailedError(f"--optimum exact: the LP stopped before a certified optimum ({solved.message})")
    if mode == "bound":
        value, reason = None, "bound only (--optimum bound): U_opt is at most optimum_upper_bound"
    return Yardstick(value, upper, solved.status, reason)


def _ratio(value: float, bound: float | None) -> float | None:
    return None if bound is None or bound <= 0 else value / bound


def _play(simulation: Simulation, arguments: dict[str, Any], checkpoint: str | None, quiet: bool) -> None:
    from tqdm import tqdm

    every = arguments["checkpoint_every"] if checkpoint else None
    step = max(1, simulation.rounds // 200)
    if every:
        step = min(step, every)
    disable = quiet or not sys.stderr.isatty()
    with tqdm(total=simulation.rounds, initial=simulation.t, disable=disable, file=sys.stderr, unit="round",
              desc=simulation.policy.name) as bar:
        while not simulation.done:
            before = simulation.t
            target = simulation.t + step
            if every:
                target = min(target, (simulation.t // every + 1) * every)
            simulation.advance(target)
            bar.update(simulation.t - before)
            if every and (simulation.t % every == 0 or simulation.done):
                save_checkpoint(checkpoint, arguments, simulation)


def _text(problem: Problem, name: str, instance: str, rounds: int, seed: int, seconds: float,
          yardstick: Yardstick, report: Any, extra: dict[str, Any], out: str | None) -> str:
    ratio = "n/a" if report.ratio is None else f"{report.ratio:.6f}"
    if yardstick.value is not None and yardstick.reason is None:
        optimum_text = f"U_opt {yardstick.value:.6f}"
    elif yardstick.value is not None and yardstick.upper_bound is not None:
        optimum_text = f"LP value {yardstick.value:.6f} (U_opt <= {yardstick.upper_bound:.6f}, {yardstick.status})"
    elif yardstick.value is not None:  # a pricing without a bound (the utility is not certified submodular)
        optimum_text = f"LP value {yardstick.value:.6f} (no certified upper bound: {yardstick.reason})"
    elif yardstick.upper_bound is not None:
        optimum_text = f"U_opt <= {yardstick.upper_bound:.6f}"
    else:
        optimum_text = f"U_opt n/a ({yardstick.reason})"
    lines = [f"{name} on {instance}: {rounds:,} rounds, seed {seed}, {seconds:.2f} s",
             f"time-average utility {report.time_average_utility:.6f}   {optimum_text}   ratio {ratio}"]
    if yardstick.upper_bound is not None and yardstick.reason is not None:
        lines.append(f"ratio to the certified upper bound {report.time_average_utility / yardstick.upper_bound:.6f} "
                     "(a certified lower bound on the ratio to U_opt)")
    caps = "" if report.max_cap_excess is None else f"   max cap excess {report.max_cap_excess:.4f}"
    lines.append(f"fairness slack {report.fairness_slack:+.4f}   max debt {report.max_debt:.4f}{caps}")
    fraction = report.selection_fraction
    below = fraction < problem.r - 1e-12
    if problem.n <= WORKER_TABLE_LIMIT:
        lines.append("worker  r        fraction")
        lines += [f"{w:<7} {r:<8.4f} {f:.4f}{'  below floor' if low else ''}"
                  for w, r, f, low in zip(problem.ids, problem.r, fraction, below)]
    else:
        worst = np.flatnonzero(below)[np.argsort((fraction - problem.r)[below], kind="stable")][:10]
        shown = ", ".join(f"{problem.ids[u]} ({fraction[u]:.4f} < {problem.r[u]:.4f})" for u in worst)
        lines.append(f"{problem.n:,} workers, {int(below.sum()):,} below their floor"
                     + (f"; the largest shortfalls: {shown}" if worst.size else ""))
    if "multilinear_value" in extra:
        bound = extra["lower_bound"]
        lines.append(f"fractional point: F(y) = {extra['multilinear_value']:.6f} ({extra['multilinear_method']}), "
                     f"guaranteed >= {'n/a' if bound is None else f'{bound:.6f}'}")
    if out:
        lines.append(f"schedule written to {out}")
    return "\n".join(lines)
