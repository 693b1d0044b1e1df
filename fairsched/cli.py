"""The ``fairsched`` command line: ``check``, ``optimum`` and ``run`` (DESIGN.md contract).

Exit codes: 0 success, 2 bad input, 3 infeasible instance, 130 interrupted. Errors are
one line on stderr; ``--json`` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import Any, NoReturn, Sequence

from fairsched.errors import FairschedError, InfeasibleError, TooLargeError
from fairsched.metrics import evaluate
from fairsched.instances import load_instance
from fairsched.lp_optimum import DEFAULT_MAX_COLUMNS, optimum
from fairsched.policies import POLICIES, make_policy
from fairsched.problem import Problem
from fairsched.simulate import run

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERRUPTED = 0, 2, 3, 130
DEFAULT_ROUNDS = 10_000


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, as for any bad input
        self.exit(EXIT_BAD_INPUT, f"fairsched: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fairsched", description="Fair worker scheduling for federated learning (MMSM-CF).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("instance", help="instance file (TOML)")
        p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
        p.add_argument("--beta", type=float, default=None,
                       help="override workers.beta (r = beta * r_base; the file must give r_base)")

    check = sub.add_parser("check", help="validate an instance and report feasibility")
    common(check)

    opt = sub.add_parser("optimum", help="solve the LP for U_opt")
    common(opt)
    opt.add_argument("--backend", choices=("highs", "cvxpy"), default="highs")
    opt.add_argument("--max-columns", type=int, default=DEFAULT_MAX_COLUMNS,
                     help=f"refuse to enumerate more k-sets than this (default {DEFAULT_MAX_COLUMNS:,})")

    run_p = sub.add_parser("run", help="run a policy and report utility and fairness")
    common(run_p)
    run_p.add_argument("--policy", required=True, help=f"one of: {', '.join(sorted(POLICIES))}")
    run_p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                       help="a policy parameter, e.g. --param steps=200 (repeatable)")
    run_p.add_argument("--rounds", type=int, default=None,
                       help=f"rounds T (default: the instance's rounds, else {DEFAULT_ROUNDS:,})")
    run_p.add_argument("--seed", type=int, default=0)
    run_p.add_argument("--out", default=None, help="write the schedule (CSV, one row per round) here")
    run_p.add_argument("--quiet", action="store_true", help="no progress bar")
    run_p.add_argument("--max-columns", type=int, default=DEFAULT_MAX_COLUMNS,
                       help="largest LP to solve for U_opt; beyond it optimum and ratio are null")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fairsched`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return {"check": _check, "optimum": _optimum, "run": _run}[args.command](args)
    except InfeasibleError as exc:
        return _fail(str(exc), EXIT_INFEASIBLE)
    except FairschedError as exc:
        return _fail(str(exc), EXIT_BAD_INPUT)
    except BrokenPipeError:  # stdout closed early (`| head`): not an error of the input
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except OSError as exc:
        return _fail(f"{exc.filename or ''}: {exc.strerror or exc}".lstrip(": "), EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        return _fail("interrupted; nothing written", EXIT_INTERRUPTED)


def _fail(message: str, code: int) -> int:
    print(f"fairsched: error: {message}", file=sys.stderr)
    return code


def _emit(args: argparse.Namespace, data: dict[str, Any], text: str) -> None:
    if args.json:
        print(json.dumps(data, allow_nan=False, default=_json_default))
    else:
        print(text)


def _json_default(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def _check(args: argparse.Namespace) -> int:
    try:
        problem = load_instance(args.instance, beta=args.beta)
    except InfeasibleError as exc:
        if args.json:
            print(json.dumps({"instance": args.instance, "feasible": False, "reason": str(exc)}))
        raise
    warnings = []
    problem_check = getattr(problem.utility, "submodularity_problem", None)
    if problem_check is not None and (issue := problem_check()):
        warnings.append(issue)
    total = float(problem.r.sum())
    data = {"instance": args.instance, "name": problem.name, "feasible": True, "n": problem.n,
            "k": problem.k, "sum_r": total, "utility": problem.utility.kind, "warnings": warnings}
    text = (f"{args.instance}: feasible: n = {problem.n}, k = {problem.k}, "
            f"sum r = {total:.6g} <= k, utility {problem.utility.kind}")
    text += "".join(f"\nwarning: {w}" for w in warnings)
    _emit(args, data, text)
    return EXIT_OK


def _optimum(args: argparse.Namespace) -> int:
    problem = load_instance(args.instance, beta=args.beta)
    opt = optimum(problem, backend=args.backend, max_columns=args.max_columns)
    data = {"instance": args.instance, **opt.as_dict(problem)}
    lines = [f"U_opt = {opt.value:.10g}  (upper bound {opt.upper_bound:.10g}, gap {opt.gap:.3g}, "
             f"{opt.method}, {opt.columns:,} columns, {opt.seconds:.3f} s)",
             f"support ({len(opt.support)} sets):"]
    lines += [f"  p = {p:.6f}  {{{', '.join(problem.ids[i] for i in S)}}}"
              for S, p in zip(opt.support, opt.probabilities)]
    priced = [(w, v) for w, v in zip(problem.ids, opt.fairness_price) if v > 1e-12]
    lines.append("fairness price λ_u: " + (", ".join(f"{w} {v:.4g}" for w, v in priced) or "none (no floor binds)"))
    _emit(args, data, "\n".join(lines))
    return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    problem = load_instance(args.instance, beta=args.beta)
    policy = make_policy(args.policy, **parse_params(args.param))
    rounds = args.rounds if args.rounds is not None else (problem.rounds or DEFAULT_ROUNDS)
    if rounds < 1:
        raise FairschedError(f"--rounds must be positive, got {rounds}")
    start = time.perf_counter()
    schedule = _run_with_progress(problem, policy, rounds, args.seed, quiet=args.quiet)
    seconds = time.perf_counter() - start
    u_opt = _optimum_or_none(problem, args.max_columns)
    report = evaluate(schedule, problem, u_opt)
    if args.out:
        schedule.write(args.out, problem.ids)
    fractions = report.as_dict(problem.ids)["selection_fraction"]
    data = {
        "instance": args.instance, "policy": policy.name, "rounds": rounds, "seed": args.seed,
        "time_average_utility": report.time_average_utility, "optimum": u_opt, "ratio": report.ratio,
        "selection_fraction": fractions, "fairness_slack": report.fairness_slack,
        "max_debt": report.max_debt, "seconds": seconds,
    }
    extra = policy.diagnostics(u_opt)
    if "fractional_point" in extra:
        extra["fractional_point"] = {w: float(y) for w, y in zip(problem.ids, extra["fractional_point"])}
    data.update(extra)
    ratio = "n/a" if report.ratio is None else f"{report.ratio:.6f}"
    optimum_text = "n/a" if u_opt is None else f"{u_opt:.6f}"
    lines = [f"{policy.name} on {args.instance}: {rounds:,} rounds, seed {args.seed}, {seconds:.2f} s",
             f"time-average utility {report.time_average_utility:.6f}   U_opt {optimum_text}   ratio {ratio}",
             f"fairness slack {report.fairness_slack:+.4f}   max debt {report.max_debt:.4f}",
             "worker  r        fraction"]
    lines += [f"{w:<7} {r:<8.4f} {f:.4f}{'' if f >= r - 1e-12 else '  below floor'}"
              for w, r, f in zip(problem.ids, problem.r, report.selection_fraction)]
    if "multilinear_value" in extra:
        bound = extra["lower_bound"]
        lines.append(f"fractional point: F(y) = {extra['multilinear_value']:.6f} ({extra['multilinear_method']}), "
                     f"guaranteed >= {'n/a' if bound is None else f'{bound:.6f}'}")
    if args.out:
        lines.append(f"schedule written to {args.out}")
    _emit(args, data, "\n".join(lines))
    return EXIT_OK


def _run_with_progress(problem: Problem, policy, rounds: int, seed: int, quiet: bool):
    from tqdm import tqdm

    disable = quiet or not sys.stderr.isatty()
    with tqdm(total=rounds, disable=disable, file=sys.stderr, unit="round", desc=policy.name) as bar:
        done = [0]

        def progress(t: int) -> None:
            bar.update(t - done[0])
            done[0] = t

        return run(problem, policy, rounds, seed, progress=None if disable else progress,
                   progress_every=max(1, rounds // 200))


def parse_params(pairs: Sequence[str]) -> dict[str, Any]:
    """``["steps=200", "method=exact"]`` → ``{"steps": 200, "method": "exact"}`` (ints, floats, booleans, strings)."""
    params: dict[str, Any] = {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            raise FairschedError(f"--param {pair!r}: expected KEY=VALUE")
        value: Any = text
        if text.lower() in ("true", "false"):
            value = text.lower() == "true"
        else:
            for convert in (int, float):
                try:
                    value = convert(text)
                    break
                except ValueError:
                    continue
        params[key.strip().replace("-", "_")] = value
    return params


def _optimum_or_none(problem: Problem, max_columns: int) -> float | None:
    if math.comb(problem.n, problem.k) > max_columns:
        return None
    try:
        return optimum(problem, max_columns=max_columns).value
    except TooLargeError:
        return None


if __name__ == "__main__":
    sys.exit(main())
