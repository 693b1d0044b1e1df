"""Benchmark: ``fairsched optimum`` on accuracy draws with sizes in far-apart classes, with and
without recoupling (:mod:`fairsched.lp.pricing.recoupling`).

Run as a plain script (one line per draw and run; each draw solved in this process by
``fairsched.lp.solve.optimum`` with its default settings, first as the package does, then
with recoupling turned off, unless ``--no-baseline``)::

    python benchmarks/bench_recoupling.py                                  # two-class, seeds 7 8 9
    python benchmarks/bench_recoupling.py --family three-class --seeds 0 1 2 3
    python benchmarks/bench_recoupling.py --family wide-two-class --workers 1000 --k 50

Families (``n`` workers, ``k`` per round; all but ``two-class`` were chosen in session 61 before
anything was measured on them, after recoupling had been built on ``two-class`` seed 7):

- ``two-class``: ``benchmarks/bench_scheduler.py``'s draw: 5 % large workers (5,000–20,000
  examples, floor 0.001), the rest 20–200 with uniform floors, ``Σ r = 0.85·k``.
- ``three-class``: 2 % huge workers (20,000–60,000, floor 0.0005), 10 % medium
  (1,000–3,000) and the rest small (10–300), the medium and small floors uniform, scaled to
  ``Σ r = 0.9·k``.
- ``wide-two-class``: 10 % large workers with log-uniform sizes on [2,000, 40,000] and floors
  uniform on [0, 0.004], the rest small (5–500, log-uniform) with floors Gamma(2) scaled to
  ``Σ r = 0.8·k``.
- ``lognormal-mixture``: 4 % large workers (lognormal sizes, median 10,000, σ 0.6, floors
  uniform on [0.0005, 0.0015]), the rest lognormal (median 60, σ 0.8) with uniform floors,
  scaled to ``Σ r = 0.85·k``.
- ``three-class-tiny``: 1 % huge workers (30,000–60,000, floor 0.0005), 6 % medium
  (2,000–6,000, floor 0.002), the rest small (10–250) with uniform floors, scaled to
  ``Σ r = 0.85·k``.

``three-class`` and ``wide-two-class`` turned out to be certified by the balanced start at
iteration 0, where recoupling never runs; the last two were then drawn, again before
measuring, with what makes ``two-class`` hard: many large workers whose tiny floors leave
them out of most sets.

Each line: family, seed, run (``recoupled`` or ``without``), status, certified relative
gap, seconds (the solve, as ``optimum`` reports it), iterations, the support's size, the
seconds and HiGHS runs of the size groups' aggregated master in it, and the start of the
message.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import fairsched.lp.size_groups as size_groups_module
import fairsched.lp.solve as solve_module
from fairsched.lp.solve import optimum
from fairsched.problem import Problem
from fairsched.utilities import AccuracyUtility

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_scheduler import untuned  # noqa: E402


def _problem(sizes: np.ndarray, r: np.ndarray, free: np.ndarray, share: float, k: int) -> Problem:
    """The accuracy problem with ``sizes`` and the floors ``r``, those of ``free`` scaled so
    that ``Σ r = share·k`` (then capped at 1)."""
    r = r.copy()
    r[free] *= (share * k - r[~free].sum()) / r[free].sum()
    return Problem(AccuracyUtility(sizes), k=k, r=np.minimum(r, 1.0))


def _two_class(n: int, k: int, seed: int) -> Problem:
    """The ``two-class`` family of the module docstring."""
    return untuned("two-class", n, k, seed)


def _three_sizes(rng: np.random.Generator, n: int, huge_share: float, medium_share: float,
                 ranges: tuple[tuple[float, float], ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Huge, medium and small workers by their shares, with sizes uniform on their ``ranges``
    (huge, medium, small), rounded: ``(sizes, huge, medium)``."""
    kind = rng.random(n)
    huge, medium = kind < huge_share, (kind >= huge_share) & (kind < huge_share + medium_share)
    (huge_range, medium_range, small_range) = ranges
    sizes = np.where(huge, rng.uniform(*huge_range, n),
                     np.where(medium, rng.uniform(*medium_range, n), rng.uniform(*small_range, n))).round()
    return sizes, huge, medium


def _three_class(n: int, k: int, seed: int) -> Problem:
    """The ``three-class`` family of the module docstring."""
    rng = np.random.default_rng(seed)
    sizes, huge, _ = _three_sizes(rng, n, 0.02, 0.1, ((20_000, 60_000), (1_000, 3_000), (10, 300)))
    return _problem(sizes, np.where(huge, 0.0005, rng.uniform(0.0, 2.0, n)), ~huge, 0.9, k)


def _wide_two_class(n: int, k: int, seed: int) -> Problem:
    """The ``wide-two-class`` family of the module docstring."""
    rng = np.random.default_rng(seed)
    large = rng.random(n) < 0.1
    sizes = np.where(large, np.exp(rng.uniform(np.log(2_000), np.log(40_000), n)),
                     np.exp(rng.uniform(np.log(5), np.log(500), n))).round()
    return _problem(sizes, np.where(large, rng.uniform(0.0, 0.004, n), rng.gamma(2.0, 1.0, n)), ~large, 0.8, k)


def _lognormal_mixture(n: int, k: int, seed: int) -> Problem:
    """The ``lognormal-mixture`` family of the module docstring."""
    rng = np.random.default_rng(seed)
    large = rng.random(n) < 0.04
    sizes = np.where(large, rng.lognormal(np.log(10_000), 0.6, n), rng.lognormal(np.log(60), 0.8, n)).round() + 1
    return _problem(sizes, np.where(large, rng.uniform(0.0005, 0.0015, n), rng.uniform(0.0, 2.0, n)), ~large,
                    0.85, k)


def _three_class_tiny(n: int, k: int, seed: int) -> Problem:
    """The ``three-class-tiny`` family of the module docstring."""
    rng = np.random.default_rng(seed)
    sizes, huge, medium = _three_sizes(rng, n, 0.01, 0.06, ((30_000, 60_000), (2_000, 6_000), (10, 250)))
    return _problem(sizes, np.where(huge, 0.0005, np.where(medium, 0.002, rng.uniform(0.0, 2.0, n))),
                    ~huge & ~medium, 0.85, k)


FAMILIES = {"two-class": _two_class, "three-class": _three_class, "wide-two-class": _wide_two_class,
            "lognormal-mixture": _lognormal_mixture, "three-class-tiny": _three_class_tiny}


class MasterClock:
    """Seconds and HiGHS runs of the size groups' aggregated master
    (``fairsched.lp.size_groups._AggregatedMaster._run``, wrapped while in use)."""

    def __init__(self) -> None:
        self.seconds, self.runs = 0.0, 0

    def __enter__(self) -> MasterClock:
        self._real = size_groups_module._AggregatedMaster._run
        real = self._real

        def timed(master: object, time_limit: float | None) -> object:
            started = time.perf_counter()
            try:
                return real(master, time_limit)
            finally:
                self.seconds += time.perf_counter() - started
                self.runs += 1

        size_groups_module._AggregatedMaster._run = timed
        return self

    def __exit__(self, *exc: object) -> None:
        size_groups_module._AggregatedMaster._run = self._real


def solve(problem: Problem, recouple: bool, time_limit: float | None) -> str:
    """One ``optimum`` run, recoupling on or off (a support limit of 0 members turns it off),
    with the time of the size groups' aggregated master in it."""
    saved = solve_module.RECOUPLE_MEMBERS
    solve_module.RECOUPLE_MEMBERS = saved if recouple else 0
    try:
        with MasterClock() as master:
            started = time.perf_counter()
            result = optimum(problem, time_limit=time_limit)
            seconds = time.perf_counter() - started
    finally:
        solve_module.RECOUPLE_MEMBERS = saved
    return (f"{result.status:>12} gap {result.relative_gap:.3e} {seconds:7.1f} s {result.iterations:4d} it "
            f"support {len(result.support):6d} aggregated master {master.seconds:5.1f} s ({master.runs} runs)  "
            f"{result.message[:110]}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=sorted(FAMILIES), default="two-class")
    parser.add_argument("--workers", type=int, default=10_000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs="+", default=[7, 8, 9])
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--no-baseline", action="store_true", help="skip the run without recoupling")
    args = parser.parse_args(argv)
    print(f"{args.family}, n = {args.workers:,}, k = {args.k}", flush=True)
    for seed in args.seeds:
        problem = FAMILIES[args.family](args.workers, args.k, seed)
        runs = [True] if args.no_baseline else [True, False]
        for recouple in runs:
            line = solve(problem, recouple, args.time_limit)
            print(f"seed {seed} {'recoupled' if recouple else 'without':>9}: {line}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
