"""Benchmark: the balanced decomposition of one class of a heavy-tailed accuracy draw.

Run as a plain script (one line per draw: seconds, sets, and how far the decomposition's
value is below Jensen's bound ``g(L·y)`` of the class's marginals ``y``)::

    python benchmarks/bench_decomposition.py                       # n = 100,000, k = 1,000
    python benchmarks/bench_decomposition.py --workers 10000 --k 100 --cases pareto-equal --seeds 1
    python benchmarks/bench_decomposition.py --work 200000000      # the work cap before 2026-12-04
    python benchmarks/bench_decomposition.py --deadline 150        # what a 300 s solve gives it
    python benchmarks/bench_decomposition.py --workers 10000 --k 100 --cases pareto-equal --seeds 1 --relaxed
    python benchmarks/bench_decomposition.py --instance FILE.toml  # an instance file instead of the draws

The draws are those of ``bench_balanced.py`` (Pareto sizes, floors summing to ``k``); the
class is the one without a giant of :func:`fairsched.lp.pricing.balanced.level_classes`
(``x`` itself where no worker is a giant), or with ``--relaxed`` that of the giants' class
relaxation (:mod:`fairsched.lp.pricing.class_relaxation`, solved first and not timed),
decomposed by
:func:`fairsched.lp.pricing.balanced.balanced_columns` (no deadline unless given; within
``fairsched.lp.solve.optimum`` it must end by half the time limit).  To compare two
versions of the package, run this file from each checkout in one command (``PYTHONPATH``
pointing at the checkout), as ``benchmarks/README.md`` does; each line ends with a digest of
the sets and probabilities, equal where two versions decompose alike bit for bit.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Iterator

import numpy as np
from bench_balanced import CASES, instance

from fairsched.instances import load_instance
from fairsched.lp.pricing import balanced
from fairsched.lp.pricing.initial import column_values, starting_point
from fairsched.problem import Problem


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=100_000)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[1])
    parser.add_argument("--cases", nargs="+", default=["pareto-sparse"], choices=CASES)
    parser.add_argument("--work", type=int, default=balanced.BALANCE_WORK,
                        help="steps times n at most (default: the package's BALANCE_WORK)")
    parser.add_argument("--deadline", type=float, default=None, help="seconds the decomposition may take")
    parser.add_argument("--relaxed", action="store_true",
                        help="the rest class of the giants' class relaxation instead of the greedy classes'")
    parser.add_argument("--instance", nargs="+", metavar="FILE", default=[],
                        help="instance files (accuracy utility) to decompose instead of the draws")
    args = parser.parse_args()
    for label, problem in _problems(args):
        utility, k, r = problem.utility, problem.k, np.asarray(problem.r, dtype=float)
        _, x, _ = starting_point(utility, k, r)
        classes = balanced.level_classes(utility.sizes, x, k)
        if classes is not None and args.relaxed:
            classes = balanced._relaxed(utility, k, r, x, classes, classes.giants, None)
            if classes is None:
                print(f"{label}: the class relaxation is not solved")
                continue
        y = x if classes is None else classes.rest
        start = time.perf_counter()
        deadline = None if args.deadline is None else start + args.deadline
        columns, probabilities = balanced.balanced_columns(utility.sizes, y, k, work=args.work, deadline=deadline)
        seconds = time.perf_counter() - start
        value = float(probabilities @ column_values(utility, columns))
        bound = balanced.jensen_bound(utility, y)
        digest = hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes()
                                       for a in (columns.indptr, columns.indices, probabilities))).hexdigest()[:12]
        print(f"{label}: {seconds:.2f} s, {len(columns)} sets, {(bound - value) / bound:.2e} below Jensen's bound, "
              f"digest {digest}", flush=True)


def _problems(args: argparse.Namespace) -> Iterator[tuple[str, Problem]]:
    """The instance files given, else the draws of ``--cases`` and ``--seeds``, with a label each."""
    for path in args.instance:
        problem = load_instance(path)
        yield f"{path} n={problem.n} k={problem.k}", problem
    if args.instance:
        return
    for case in args.cases:
        for seed in args.seeds:
            yield f"{case} n={args.workers} k={args.k} seed={seed}", instance(case, args.workers, args.k, seed)


if __name__ == "__main__":
    main()
