"""Benchmark: the balanced starting distribution for the accuracy utility, against the start without it.

Run as a plain script (one line per instance; each solved twice in this process, with and
without :func:`fairsched.lp.pricing.balanced.balanced_pool`, by ``fairsched.lp.solve.optimum``
with its default settings)::

    python benchmarks/bench_balanced.py                      # n = 1,000, k = 100, seeds 0-2
    python benchmarks/bench_balanced.py --workers 10000 --seeds 0
    python benchmarks/bench_balanced.py --no-baseline        # only the new start
    python benchmarks/bench_balanced.py --k 50 --write DIR    # write the instances as files
    python benchmarks/bench_balanced.py --no-baseline --relaxation-baseline  # with and without
                                                             # the class relaxation

Instances (drawn here, not by the project's generators; nothing was tuned on them): the
accuracy utility ``f(S) = 0.95 − 0.5·L(S)^−0.2`` of Li, Liu and Ji, "Federated Learning with
Fair Worker Selection: A Multi-Round Submodular Maximization Approach", with

- ``pareto-{sparse,uniform,equal}``: sizes ``20·(1 + Pareto(1.2))`` (heavy-tailed, not
  truncated) and floors summing to exactly ``k`` (every marginal is pinned): ``sparse``
  30% of floors 0, the others uniform on ``[0.5, 1]`` before scaling; ``uniform`` uniform on
  ``[0, 1]``; ``equal`` all ``k/n``;
- ``lognormal``: sizes ``e^N(5, 1.5)`` rounded up, floors uniform summing to ``0.9·k``.

Each line gives the status, certified relative gap and seconds of both runs, and ``fits``:
whether the largest worker with a positive marginal plus the ``k − 1`` smallest stays below
``L·x`` (else some sets must exceed ``L·x`` and Jensen's bound, which the balanced start
aims at, is out of reach).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from fairsched.instances import problem_to_table, save_instance
from fairsched.lp import solve
from fairsched.lp.pricing import balanced
from fairsched.lp.pricing.initial import starting_point
from fairsched.problem import Problem
from fairsched.utilities import AccuracyUtility

CASES = ("pareto-sparse", "pareto-uniform", "pareto-equal", "lognormal")


def floors(rng: np.random.Generator, n: int, total: float, kind: str) -> np.ndarray:
    """Floors of the given kind scaled to sum to ``total``, capped at 1 (excess spread)."""
    if kind == "sparse":
        r = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0.5, 1.0, n))
    elif kind == "uniform":
        r = rng.uniform(0.0, 1.0, n)
    else:
        r = np.ones(n)
    r = r * total / r.sum()
    while (r > 1).any():
        r = np.minimum(r, 1.0)
        loose = r < 1
        r[loose] *= (total - r[~loose].sum()) / r[loose].sum()
    return r


def instance(case: str, n: int, k: int, seed: int, pareto_share: float = 1.0) -> Problem:
    """The case's draw; the Pareto cases' floors sum to ``pareto_share·k`` (lognormal: ``0.9·k``)."""
    rng = np.random.default_rng(1000 + seed)
    if case == "lognormal":
        sizes = np.ceil(np.exp(rng.normal(5.0, 1.5, n)))
        r = floors(rng, n, 0.9 * k, "uniform")
    else:
        sizes = (rng.pareto(1.2, n) + 1.0) * 20.0
        r = floors(rng, n, pareto_share * k, case.split("-")[1])
    return Problem(AccuracyUtility(sizes), k, r)


def fits(problem: Problem) -> bool:
    sizes = problem.utility.sizes
    _, x, _ = starting_point(problem.utility, problem.k, problem.r)
    live = np.sort(sizes[x > 0])
    return bool(live[-1] + live[: problem.k - 1].sum() <= sizes @ x)


def run(problem: Problem, balanced: bool, time_limit: float | None) -> str:
    return solve_with(problem, time_limit, {} if balanced else {"balanced_pool": lambda *args, **kwargs: (None, None)})


def without_relaxation(problem: Problem, time_limit: float | None) -> str:
    """The solve as before the class relaxation: its LP stubbed to "not solved", so the greedy
    classes and their prices stand."""
    return solve_with(problem, time_limit, {"class_relaxation": lambda *args, **kwargs: None}, balanced)


def solve_with(problem: Problem, time_limit: float | None, stubs: dict[str, Any], module: Any = solve) -> str:
    """``fairsched.lp.solve.optimum`` with its defaults, ``module``'s names in ``stubs``
    replaced for the call: status, certified relative gap, seconds and iterations."""
    originals = {name: getattr(module, name) for name in stubs}
    for name, stub in stubs.items():
        setattr(module, name, stub)
    try:
        start = time.perf_counter()
        result = solve.optimum(problem, time_limit=time_limit)
        seconds = time.perf_counter() - start
    finally:
        for name, original in originals.items():
            setattr(module, name, original)
    return f"{result.status} {result.relative_gap:.2e} in {seconds:.2f} s ({result.iterations} it.)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=1000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--time-limit", type=float, default=None)
    parser.add_argument("--no-baseline", action="store_true", help="skip the run without the balanced start")
    parser.add_argument("--relaxation-baseline", action="store_true",
                        help="also run each instance without the class relaxation (its LP stubbed)")
    parser.add_argument("--write", metavar="DIR", help="write each instance to DIR (for `fairsched run`) "
                        "instead of solving it")
    args = parser.parse_args()
    if args.write:
        Path(args.write).mkdir(parents=True, exist_ok=True)
    for case in args.cases:
        for seed in args.seeds:
            problem = instance(case, args.workers, args.k, seed)
            if args.write:
                path = Path(args.write) / f"{case}-n{args.workers}-k{args.k}-s{seed}.toml"
                table = problem_to_table(problem)
                table.update(name=path.stem, rounds=20_000)
                save_instance(table, path)
                print(path)
                continue
            line = f"{case} n={args.workers} k={args.k} seed={seed} fits={fits(problem)}: "
            line += "balanced " + run(problem, True, args.time_limit)
            if args.relaxation_baseline:
                line += "; without the class relaxation " + without_relaxation(problem, args.time_limit)
            if not args.no_baseline:
                line += "; without " + run(problem, False, args.time_limit)
            print(line, flush=True)


if __name__ == "__main__":
    main()
