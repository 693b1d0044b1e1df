"""The ``fairsched`` command line: ``check``, ``optimum``, ``run``, ``simulate`` and ``bench``.

Exit codes: 0 success, 2 bad input, 3 infeasible instance, 130 interrupted, 143
terminated; errors are one line on stderr (:mod:`fairsched.cli.errors`); ``--json``
prints exactly one JSON object on stdout (:mod:`fairsched.cli.output`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence

import numpy as np

from fairsched.cli.bench import add_bench_parser, run_bench
from fairsched.cli.errors import EXIT_OK, Parser, blamed_on, guarded
from fairsched.cli.output import EncodedArray, Output
from fairsched.cli.progress import Progress
from fairsched.cli.run import add_run_parser, run_command
from fairsched.cli.simulate import add_simulate_parser, simulate_command
from fairsched.errors import FairschedError, InfeasibleError
from fairsched.extras import require
from fairsched.instances import load_instance
from fairsched.lp import DEFAULT_MAX_COLUMNS, ENUMERATION_THRESHOLD, optimum
from fairsched.lp import METHODS as OPTIMUM_METHODS
from fairsched.lp.result import Optimum
from fairsched.problem import Problem
from fairsched.solvers.colgen import DEFAULT_GAP


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand; usage errors are one line and exit code 2."""
    parser = Parser(prog="fairsched", description="Fair worker scheduling for federated learning (MMSM-CF).")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)

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
    opt.add_argument("--gap", type=float, default=DEFAULT_GAP,
                     help=f"relative gap (upper - value) / value certified before the answer counts as "
                          f"optimal (default {DEFAULT_GAP:g}, what floating point certifies with a margin)")
    opt.add_argument("--time-limit", type=float, default=None,
                     help="seconds for the whole solve; at the limit the best value and its certified "
                          "bound are reported (status time-limit)")
    opt.add_argument("--quiet", action="store_true", help="no column-generation progress on stderr")

    add_run_parser(sub, common)
    add_simulate_parser(sub)
    add_bench_parser(sub, common)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fairsched`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    command = COMMANDS[args.command]

    def execute() -> int:
        with Output(getattr(args, "json", False)) as output:
            return command(args, output)

    return guarded(execute)


def _check(args: argparse.Namespace, output: Output) -> int:
    try:
        problem = load_instance(args.instance, beta=args.beta)
    except InfeasibleError as exc:
        if args.json:
            output.emit({"instance": args.instance, "feasible": False, "reason": str(exc)}, "")
        raise
    warnings = []
    problem_check = getattr(problem.utility, "submodularity_problem", None)
    with blamed_on(args.instance):
        if problem_check is not None and (issue := problem_check()):
            warnings.append(issue)
    total = float(problem.r.sum())
    data = {"instance": args.instance, "name": problem.name, "feasible": True, "n": problem.n,
            "k": problem.k, "sum_r": total, "utility": problem.utility.kind, "warnings": warnings}
    text = (f"{args.instance}: feasible: n = {problem.n}, k = {problem.k}, "
            f"sum r = {total:.6g} <= k, utility {problem.utility.kind}")
    text += "".join(f"\nwarning: {w}" for w in warnings)
    output.emit(data, text)
    return EXIT_OK


def _optimum(args: argparse.Namespace, output: Output) -> int:
    if not (math.isfinite(args.gap) and args.gap >= 0):
        raise FairschedError(f"--gap must be a number >= 0, got {args.gap}")
    if args.time_limit is not None and not (math.isfinite(args.time_limit) and args.time_limit > 0):
        raise FairschedError(f"--time-limit must be a finite number of seconds > 0, got {args.time_limit}")
    if args.max_columns < 1:
        raise FairschedError(f"--max-columns must be positive, got {args.max_columns}")
    if args.backend == "cvxpy":
        require("cvxpy", "--backend cvxpy")
    problem = load_instance(args.instance, beta=args.beta)
    progress = Progress(enabled=not args.quiet)
    with blamed_on(args.instance), progress.phase(f"solving U_opt for {args.instance} "
                                                  f"(n = {problem.n:,}, k = {problem.k:,})"):
        opt = optimum(problem, method=args.method, gap=args.gap, max_columns=args.max_columns,
                      time_limit=args.time_limit, progress=progress.column_generation, backend=args.backend)
    data = {"instance": args.instance, **opt.as_dict(problem, streamed_support=True)}
    data["support"] = EncodedArray(data["support"])  # n = 200,000, k = 1,000: 2·10^8 ids
    output.emit(data, _optimum_text(opt, problem))
    return EXIT_OK


#: sets of the support, and fairness prices, that the text output of ``optimum`` lists
SHOWN = 20


def _optimum_text(opt: Optimum, problem: Problem) -> str:
    """"U_opt = ..." only when the gap is certified below the stopping rule; otherwise the
    best value found, its certified bound and why the solve stopped."""
    details = f"{opt.method}, {opt.columns:,} columns"
    if opt.iterations is not None:
        details += f", {opt.iterations:,} iterations"
    details += f", {opt.seconds:.3f} s"
    bound = f"{opt.upper_bound:.10g}" if math.isfinite(opt.upper_bound) else "none"
    if opt.status == "optimal":
        head = f"U_opt = {opt.value:.10g}  (certified upper bound {bound}, gap {opt.gap:.2g}, {details})"
    else:
        head = (f"best value found {opt.value:.10g}  (certified upper bound {bound}, gap {_gap_text(opt.gap)}, "
                f"stopped: {opt.status}; {details})")
    lines = [head, f"support ({len(opt.support):,} sets):"]
    lines += [f"  p = {p:.6f}  {{{', '.join(problem.ids[i] for i in S)}}}"
              for S, p in zip(opt.support[:SHOWN], opt.probabilities[:SHOWN])]
    if len(opt.support) > SHOWN:
        lines.append(f"  ... and {len(opt.support) - SHOWN:,} sets of smaller probability (all of them with --json)")
    prices = np.asarray(opt.fairness_price, dtype=float)
    priced = np.flatnonzero(prices > 1e-12)
    top = priced[np.argsort(-prices[priced], kind="stable")[:SHOWN]] if priced.size > SHOWN else priced
    text = ", ".join(f"{problem.ids[u]} {prices[u]:.4g}" for u in top) or "none (no floor binds)"
    if priced.size > SHOWN:
        text += f", ... ({priced.size:,} workers priced, the {SHOWN} largest shown; all with --json)"
    lines.append("fairness price λ_u: " + text)
    return "\n".join(lines)


def _gap_text(gap: float) -> str:
    if not math.isfinite(gap):
        return "unknown (no certified bound)"
    return f"{100 * gap:.2g}%" if gap >= 1e-3 else f"{gap:.2g}"


COMMANDS: dict[str, Callable[[argparse.Namespace, Output], int]] = {
    "check": _check, "optimum": _optimum, "run": run_command, "simulate": simulate_command,
    "bench": lambda args, output: run_bench(args),
}

if __name__ == "__main__":
    sys.exit(main())
