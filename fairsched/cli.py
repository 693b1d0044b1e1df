"""The ``fairsched`` command line: ``check``, ``optimum`` and ``run`` (DESIGN.md contract).

Exit codes: 0 success, 2 bad input, 3 infeasible instance, 130 interrupted. Errors are
one line on stderr; ``--json`` prints exactly one JSON object on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any, NoReturn, Sequence

from fairsched.cli_run import add_run_parser, run_command
from fairsched.cli_simulate import add_simulate_parser, run_simulate
from fairsched.errors import FairschedError, InfeasibleError
from fairsched.instances import load_instance
from fairsched.lp_optimum import DEFAULT_MAX_COLUMNS, optimum

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

    add_run_parser(sub, common)
    add_simulate_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fairsched`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    try:
        return {"check": _check, "optimum": _optimum,
                "run": lambda a: run_command(a, _emit), "simulate": run_simulate}[args.command](args)
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


if __name__ == "__main__":
    sys.exit(main())
