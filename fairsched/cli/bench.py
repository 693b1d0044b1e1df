"""``fairsched bench``: sweep instances × policies × seeds × β (or r scales) and report.

Writes ``results.csv`` (deterministic columns, byte-identical for any ``--jobs`` and
backend), ``timings.csv``, ``results.md`` and, with matplotlib, ``ratio.png``,
``fairness_slack.png``, ``max_debt.png`` and ``seconds.png`` into ``--out``. Progress goes
to stderr (``--quiet`` silences it). ``python -m fairsched.cli.bench ARGS`` runs the same
command without the ``fairsched`` entry point.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from fairsched.atomic import probe_directory
from fairsched.bench.cases import build_cases, case_problem
from fairsched.bench.families import FAMILIES
from fairsched.bench.harness import parse_policy, sweep
from fairsched.bench.parallel import BACKENDS, check_backend
from fairsched.bench.plots import plot_sweep
from fairsched.bench.report import write_report
from fairsched.cli.errors import Parser, guarded
from fairsched.errors import FairschedError
from fairsched.policies import PAPER_POLICIES

DEFAULT_POLICIES = ",".join((*PAPER_POLICIES, "lp-sequenced"))
DEFAULT_ROUNDS = 10_000
DEFAULT_SIZES = "10,20,30"


def add_bench_parser(sub: Any, common: Callable[..., None] | None = None) -> None:
    """Add the ``bench`` subcommand to ``sub`` (argparse subparsers).

    ``common`` (the other subcommands' single-instance arguments) is accepted for a uniform
    wiring but not used: ``bench`` takes many instances and ``--betas`` rather than ``--beta``.
    """
    p = sub.add_parser("bench", help="sweep instances × policies × seeds × β and report ratios to U_opt",
                       description="Sweep instances × policies × seeds × β (or r scales); write results.csv, "
                                   "timings.csv, results.md and figures (ratio to U_opt with 95% intervals over "
                                   "seeds, fairness slack, max debt, run time). See docs/benchmarks.md.")
    p.add_argument("instances", nargs="*", metavar="INSTANCE", help="instance files (TOML)")
    p.add_argument("--family", action="append", default=[], metavar="KIND",
                   help=f"a generated family (repeatable): {', '.join(FAMILIES)}")
    p.add_argument("--sizes", default=DEFAULT_SIZES, metavar="N,N,...",
                   help=f"family sizes n, k = round(n/10) (default {DEFAULT_SIZES})")
    p.add_argument("--family-seed", type=int, default=0, metavar="S", help="seed of the generated instances (default 0)")
    p.add_argument("--policies", default=DEFAULT_POLICIES, metavar="P,P,...",
                   help=f"policies, NAME or NAME[KEY=VALUE,...] (default {DEFAULT_POLICIES})")
    p.add_argument("--seeds", type=int, default=3, metavar="N", help="seeds 0..N-1 per policy (default 3)")
    p.add_argument("--betas", default=None, metavar="B,B,...",
                   help="r = β·r_base for the instance files with workers.r_base (default: the file's β)")
    p.add_argument("--scales", default="1", metavar="S,S,...", help="multiply every instance's r (default 1)")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, metavar="T", help=f"rounds T (default {DEFAULT_ROUNDS:,})")
    p.add_argument("--no-optimum", action="store_true", help="skip the LP (no U_opt, no ratios)")
    p.add_argument("--jobs", type=int, default=1, metavar="N", help="parallel workers (default 1)")
    p.add_argument("--backend", choices=BACKENDS, default="loky",
                   help="joblib's loky processes, or Dask (a LocalCluster of --jobs workers, or --scheduler-address)")
    p.add_argument("--scheduler-address", default=None, metavar="ADDRESS",
                   help="an existing Dask scheduler, e.g. tcp://host:8786 (implies --backend dask)")
    p.add_argument("--out", default="bench-results", metavar="DIR", help="output folder (default bench-results)")
    p.add_argument("--no-plots", action="store_true", help="skip the figures")
    p.add_argument("--quiet", action="store_true", help="no progress on stderr")


def _numbers(text: str, option: str, convert: Callable[[str], Any]) -> list[Any]:
    try:
        values = [convert(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise FairschedError(f"{option} {text!r}: expected comma-separated numbers") from None
    if not values:
        raise FairschedError(f"{option} is empty")
    return values


def _policies(text: str) -> list:
    names, depth, current = [], 0, ""
    for ch in text:  # split on commas outside brackets: lyapunov[V=1,x=2],fairdg
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            names.append(current)
            current = ""
        else:
            current += ch
    names.append(current)
    specs = [parse_policy(name) for name in names if name.strip()]
    if not specs:
        raise FairschedError("--policies is empty")
    return specs


def command_line(args: argparse.Namespace) -> str:
    """The ``fairsched bench`` command that reproduces ``results.csv`` (wall times aside)."""
    parts = ["fairsched", "bench", *args.instances]
    for kind in args.family:
        parts += ["--family", kind]
    if args.family:
        parts += ["--sizes", args.sizes, "--family-seed", str(args.family_seed)]
    parts += ["--policies", args.policies, "--seeds", str(args.seeds), "--rounds", str(args.rounds)]
    if args.betas is not None:
        parts += ["--betas", args.betas]
    if args.scales != "1":
        parts += ["--scales", args.scales]
    if args.no_optimum:
        parts.append("--no-optimum")
    parts += ["--jobs", str(args.jobs), "--backend", args.backend, "--out", args.out]
    return shlex.join(parts)


def run_bench(args: argparse.Namespace) -> int:
    """Execute ``fairsched bench``; returns the exit code (bad input raises :class:`FairschedError`)."""
    if args.scheduler_address:
        args.backend = "dask"
    if args.seeds < 1:
        raise FairschedError(f"--seeds must be positive, got {args.seeds}")
    if args.rounds < 1:
        raise FairschedError(f"--rounds must be positive, got {args.rounds}")
    if not args.instances and not args.family:
        raise FairschedError("bench needs instance files and/or --family KIND")
    check_backend(args.backend, args.jobs, args.scheduler_address)
    policies = _policies(args.policies)
    sizes = _numbers(args.sizes, "--sizes", int) if args.family else []
    betas = _numbers(args.betas, "--betas", float) if args.betas is not None else None
    scales = _numbers(args.scales, "--scales", float)
    if any(b < 0 for b in betas or ()):
        raise FairschedError(f"--betas must be >= 0, got {args.betas}")
    if any(s <= 0 for s in scales):
        raise FairschedError(f"--scales must be positive, got {args.scales}")
    out = Path(args.out)
    _check_out_folder(out)
    cases = build_cases(args.instances, args.family, sizes, betas, scales, args.family_seed)
    for case in cases:  # bad or infeasible instances fail here, before any worker starts
        case_problem(case)
    log = None if args.quiet else progress_log
    rows = sweep(cases, policies, list(range(args.seeds)), args.rounds, jobs=args.jobs, backend=args.backend,
                 scheduler_address=args.scheduler_address, with_optimum=not args.no_optimum, log=log)
    written = write_report(rows, out, command_line(args))
    if not args.no_plots:
        try:
            written += plot_sweep(rows, out)
        except ImportError as exc:  # matplotlib missing: the tables are still written
            if log:
                log(f"no figures: {exc}")
    if log:
        log("wrote " + ", ".join(str(p) for p in written))
    return 0


def _check_out_folder(out: Path) -> None:
    """Fail before the sweep, not after it, if ``--out`` cannot be created or written (nothing is created now)."""
    existing = out
    while not existing.exists():  # ends at "." or "/" at the latest
        existing = existing.parent
    if not existing.is_dir():
        raise FairschedError(f"--out {out}: {existing} is not a directory")
    try:
        probe_directory(existing / f".{out.name or 'bench'}.probe")
    except OSError as exc:
        raise FairschedError(f"--out {out}: {exc.strerror}") from None


def progress_log(message: str) -> None:
    """A progress line on stderr (stdout is left to results)."""
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """``fairsched bench`` without the main entry point: same parser, same exit codes."""
    parser = Parser(prog="fairsched")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    add_bench_parser(sub)
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    return guarded(lambda: run_bench(args))


if __name__ == "__main__":
    sys.exit(main())
