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

from fairsched.cli.bench import add_bench_parser, run_bench
from fairsched.cli.run import add_run_parser, run_command
from fairsched.cli.simulate import add_simulate_parser, run_simulate
from fairsched.errors import FairschedError, InfeasibleError
from fairsched.instances import load_instance
from fairsched.lp.solve import DEFAULT_MAX_COLUMNS, ENUMERATION_THRESHOLD, METHODS as OPTIMUM_METHODS, optimum

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERRUPTED = 0, 2, 3, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, exit 2, as for any bad input
        self.exit(EXIT_BAD_INPUT, f"fairsched: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fairsched", description="Fair worker scheduling for federated learning (MMSM-CF).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def common(p: argparse.ArgumentParser, optional_instance: bool = False) -> None:
        p.add_argument("instance", nargs="?" if optional_instance else None, help="instance file (TOML)")
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
    opt.add_argument("--method", choices=OPTIMUM_METHODS, default="auto",
                     help=f"auto: enumerate up to {ENUMERATION_THRESHOLD:,} k-sets, column generation above")
    opt.add_argument("--gap", type=float, default=1e-9,
                     help="relative gap (upper - value) / value at which column generation stops (default 1e-9)")
    opt.add_argument("--time-limit", type=float, default=None,
                     help="seconds; column generation then reports its best value and certified bound")
    opt.add_argument("--quiet", action="store_true", help="no column-generation progress on stderr")

    add_run_parser(sub, common)
    add_simulate_parser(sub)
    add_bench_parser(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fairsched`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return {"check": _check, "optimum": _optimum,
                "run": lambda a: run_command(a, _emit), "simulate": run_simulate,
                "bench": run_bench}[args.command](args)
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
    if not (math.isfinite(args.gap) and args.gap >= 0):
        raise FairschedError(f"--gap must be a number >= 0, got {args.gap}")
    if args.time_limit is not None and not args.time_limit > 0:
        raise FairschedError(f"--time-limit must be positive seconds, got {args.time_limit}")
    problem = load_instance(args.instance, beta=args.beta)
    show = not args.quiet and sys.stderr.isatty()
    progress = _ColumnGenerationProgress() if show else None
    try:
        opt = optimum(problem, method=args.method, gap=args.gap, max_columns=args.max_columns,
                      time_limit=args.time_limit, progress=progress, backend=args.backend)
    finally:
        if progress is not None:
            progress.close()
    data = {"instance": args.instance, **opt.as_dict(problem)}
    iterations = "" if opt.iterations is None else (
        f", {opt.iterations:,} iterations, relative gap {opt.relative_gap:.2g}"
        + ("" if opt.status == "optimal" else f", stopped: {opt.status}"))
    lines = [f"U_opt = {opt.value:.10g}  (upper bound {opt.upper_bound:.10g}, gap {opt.gap:.3g}, "
             f"{opt.method}, {opt.columns:,} columns{iterations}, {opt.seconds:.3f} s)",
             f"support ({len(opt.support)} sets):"]
    lines += [f"  p = {p:.6f}  {{{', '.join(problem.ids[i] for i in S)}}}"
              for S, p in zip(opt.support, opt.probabilities)]
    priced = [(w, v) for w, v in zip(problem.ids, opt.fairness_price) if v > 1e-12]
    lines.append("fairness price λ_u: " + (", ".join(f"{w} {v:.4g}" for w, v in priced) or "none (no floor binds)"))
    _emit(args, data, "\n".join(lines))
    return EXIT_OK


class _ColumnGenerationProgress:
    """``progress`` callback of :func:`optimum`: one refreshed stderr line, at most 10 per second."""

    def __init__(self) -> None:
        self.last = -math.inf
        self.shown = False

    def __call__(self, iteration: int, lower: float, upper: float, gap: float) -> None:
        now = time.monotonic()
        if now - self.last < 0.1:
            return
        self.last = now
        self.shown = True
        sys.stderr.write(f"\rcolumn generation: iteration {iteration:,}  lower {lower:.10g}  "
                         f"upper {upper:.10g}  gap {gap:.2g}   ")
        sys.stderr.flush()

    def close(self) -> None:
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()


if __name__ == "__main__":
    sys.exit(main())
