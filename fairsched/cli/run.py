"""``fairsched run``: play a policy, report, write the schedule; checkpoints and resume."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Callable, Sequence

import numpy as np

from fairsched.availability import Availability, check_availability
from fairsched.lp.availability import availability_optimum
from fairsched.runtime.checkpoint import file_sha256, load_checkpoint, restore, save_checkpoint
from fairsched.errors import FairschedError, InfeasibleError, TooLargeError
from fairsched.instances import load_instance
from fairsched.lp.solve import DEFAULT_MAX_COLUMNS, optimum
from fairsched.metrics import evaluate
from fairsched.policies import POLICIES, make_policy, parse_params
from fairsched.problem import Problem
from fairsched.errors import CheckpointError
from fairsched.schedule import Schedule
from fairsched.runtime.simulation import Simulation

DEFAULT_ROUNDS = 10_000


def add_run_parser(sub: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Add the ``run`` subcommand to ``sub`` (argparse subparsers)."""
    run_p = sub.add_parser("run", help="run a policy and report utility and fairness")
    common(run_p, optional_instance=True)
    run_p.add_argument("--policy", help=f"one of: {', '.join(sorted(POLICIES))}")
    run_p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="a policy parameter, e.g. --param steps=200 (repeatable)")
    run_p.add_argument("--rounds", type=int, default=None,
                       help=f"rounds T (default: the instance's rounds, else {DEFAULT_ROUNDS:,})")
    run_p.add_argument("--seed", type=int, default=0)
    run_p.add_argument("--out", default=None, help="write the schedule (CSV, one row per round) here")
    run_p.add_argument("--quiet", action="store_true", help="no progress bar")
    run_p.add_argument("--max-columns", type=int, default=DEFAULT_MAX_COLUMNS,
                       help="largest enumeration LP for U_opt; beyond it optimum and ratio are null")
    run_p.add_argument("--availability-trace", default=None, metavar="FILE",
                       help="CSV 'round,available' (ids separated by spaces): who can be asked each round")
    run_p.add_argument("--checkpoint", default=None, metavar="PATH",
                       help="save the run's state here, atomically, every --checkpoint-every rounds")
    run_p.add_argument("--checkpoint-every", type=int, default=10_000, metavar="N")
    run_p.add_argument("--resume", default=None, metavar="PATH",
                       help="continue the run saved in this checkpoint (its instance, policy and options)")


def _arguments(args: argparse.Namespace) -> dict[str, Any]:
    """The options that define a run; a checkpoint stores them and ``--resume`` reuses them."""
    if args.resume:
        document = load_checkpoint(args.resume)
        saved = document["arguments"]
        if file_sha256(saved["instance"]) != saved.get("instance_sha256"):
            raise CheckpointError(f"{args.resume}: the instance {saved['instance']} changed since the checkpoint")
        saved["_document"] = document
        return saved
    if not args.instance or not args.policy:
        raise FairschedError("run needs INSTANCE and --policy (or --resume CHECKPOINT)")
    return {"instance": args.instance, "instance_sha256": file_sha256(args.instance), "beta": args.beta,
            "policy": args.policy, "params": parse_params(args.param), "rounds": args.rounds,
            "seed": args.seed, "max_columns": args.max_columns,
            "availability_trace": args.availability_trace, "checkpoint": args.checkpoint,
            "checkpoint_every": args.checkpoint_every}


def read_trace(path: str, problem: Problem) -> np.ndarray:
    """An availability trace file (same CSV shape as a schedule) as a boolean matrix."""
    return Schedule.read(path, problem.ids).masks()


def run_command(args: argparse.Namespace, emit: Callable[[argparse.Namespace, dict, str], None]) -> int:
    """Execute ``fairsched run``; returns the exit code."""
    arguments = _arguments(args)
    problem = load_instance(arguments["instance"], beta=arguments["beta"])
    policy = make_policy(arguments["policy"], **arguments["params"])
    rounds = arguments["rounds"] if arguments["rounds"] is not None else (problem.rounds or DEFAULT_ROUNDS)
    if rounds < 1:
        raise FairschedError(f"--rounds must be positive, got {rounds}")
    if arguments["checkpoint_every"] < 1:
        raise FairschedError(f"--checkpoint-every must be positive, got {arguments['checkpoint_every']}")
    availability = _availability(problem, arguments)
    start = time.perf_counter()
    simulation = Simulation(problem, policy, rounds, arguments["seed"], availability)
    if "_document" in arguments:
        restore(simulation, arguments.pop("_document"), args.resume)
    _play(simulation, arguments, quiet=args.quiet)
    seconds = time.perf_counter() - start
    schedule = simulation.schedule()
    u_opt = _optimum_or_none(problem, arguments["max_columns"], availability)
    report = evaluate(schedule, problem, u_opt)
    if args.out:
        schedule.write(args.out, problem.ids)
    instance = arguments["instance"]
    data = {
        "instance": instance, "policy": policy.name, "rounds": rounds, "seed": arguments["seed"],
        "time_average_utility": report.time_average_utility, "optimum": u_opt, "ratio": report.ratio,
        "selection_fraction": report.as_dict(problem.ids)["selection_fraction"],
        "fairness_slack": report.fairness_slack, "max_debt": report.max_debt, "seconds": seconds,
    }
    extra = policy.diagnostics(u_opt)
    if "fractional_point" in extra:
        extra["fractional_point"] = {w: float(y) for w, y in zip(problem.ids, extra["fractional_point"])}
    data.update(extra)
    emit(args, data, _text(problem, policy.name, instance, rounds, arguments["seed"], seconds, u_opt, report,
                           extra, args.out))
    return 0


def _availability(problem: Problem, arguments: dict[str, Any]) -> Availability | None:
    if arguments["availability_trace"]:
        availability = Availability(trace=read_trace(arguments["availability_trace"], problem))
    elif problem.availability is not None:
        availability = Availability(probabilities=problem.availability, seed=arguments["seed"])
    else:
        return None
    verdict = check_availability(problem.r, problem.k, availability, problem.ids)
    if not verdict:
        raise InfeasibleError(verdict.reason)
    return availability


def _play(simulation: Simulation, arguments: dict[str, Any], quiet: bool) -> None:
    from tqdm import tqdm

    every = arguments["checkpoint_every"] if arguments["checkpoint"] else None
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
                save_checkpoint(arguments["checkpoint"], arguments, simulation)


def _optimum_or_none(problem: Problem, max_columns: int, availability: Availability | None) -> float | None:
    """``U_opt`` (under availability when there is one), or ``None`` when it is too large to compute."""
    try:
        if availability is not None:
            return availability_optimum(problem, availability, max_columns=max_columns).value
        return optimum(problem, max_columns=max_columns).value
    except TooLargeError:
        return None


def _text(problem: Problem, name: str, instance: str, rounds: int, seed: int, seconds: float,
          u_opt: float | None, report, extra: dict[str, Any], out: str | None) -> str:
    ratio = "n/a" if report.ratio is None else f"{report.ratio:.6f}"
    optimum_text = "n/a" if u_opt is None else f"{u_opt:.6f}"
    lines = [f"{name} on {instance}: {rounds:,} rounds, seed {seed}, {seconds:.2f} s",
             f"time-average utility {report.time_average_utility:.6f}   U_opt {optimum_text}   ratio {ratio}",
             f"fairness slack {report.fairness_slack:+.4f}   max debt {report.max_debt:.4f}",
             "worker  r        fraction"]
    lines += [f"{w:<7} {r:<8.4f} {f:.4f}{'' if f >= r - 1e-12 else '  below floor'}"
              for w, r, f in zip(problem.ids, problem.r, report.selection_fraction)]
    if "multilinear_value" in extra:
        bound = extra["lower_bound"]
        lines.append(f"fractional point: F(y) = {extra['multilinear_value']:.6f} ({extra['multilinear_method']}), "
                     f"guaranteed >= {'n/a' if bound is None else f'{bound:.6f}'}")
    if out:
        lines.append(f"schedule written to {out}")
    return "\n".join(lines)
