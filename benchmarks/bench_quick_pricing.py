"""Benchmark: the accuracy pricing's quick call (no branch and bound), per call, against the
package at a git revision.

    python benchmarks/bench_quick_pricing.py [--against REV] [--calls C] [--repeat R] [CASE ...]

Cases are the untuned draws of ``bench_scheduler.py`` at ``n = 10,000, k = 100``, seed 7:
``two-class`` (integer sizes, 668 distinct among 10,000 workers) and ``uniform-gamma`` (every
size distinct).  The prices are the continuous relaxation's duals
(:meth:`~fairsched.lp.pricing.accuracy.AccuracyPricing.relaxation_duals`: ``λ_u = η(τ − L_u)``
on the workers at their floor, so thousands of swaps tie to first order, the hardest case for
the best-swap search) and ``C − 1`` seeded draws of them plus uniform noise on ``[0, 1e-7]``,
as the size groups' phase prices near its centre.  Printed per case: milliseconds per
:meth:`~fairsched.lp.pricing.accuracy.AccuracyPricing.quick` call (the best of ``R`` passes
over the ``C`` prices) and, with ``--against REV``, the same for the accuracy pricing and
``ranked`` as they were at git revision ``REV`` of this repository (their modules read with
``git show``, run in this process), the ratio, and the largest relative difference between the
two in the best column's ``f(S) + λ(S)`` with the number of calls where the package's is lower
(the local search may break ties differently and so end elsewhere).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scheduler import untuned  # noqa: E402
from bench_swap_deltas import module_at  # noqa: E402

from fairsched.lp.pricing.accuracy import AccuracyPricing  # noqa: E402

PRICING_MODULE = "fairsched/lp/pricing/accuracy.py"
RANKED_MODULE = "fairsched/lp/pricing/base.py"


def pricing_at(revision: str) -> type:
    """``AccuracyPricing`` as it was at git ``revision``, with ``ranked`` of that revision."""
    module = module_at(PRICING_MODULE, revision)
    module.ranked = module_at(RANKED_MODULE, revision).ranked
    return module.AccuracyPricing


def prices(problem: object, calls: int) -> list[np.ndarray]:
    """The relaxation's duals, then ``calls − 1`` noisy copies of them (seeded)."""
    centre = AccuracyPricing(problem.utility, problem.k).relaxation_duals(problem.r)
    rng = np.random.default_rng(0)
    return [centre] + [centre + 1e-7 * rng.random(centre.size) for _ in range(calls - 1)]


def per_call(pricing_class: type, problem: object, points: list[np.ndarray],
             repeat: int) -> tuple[float, np.ndarray]:
    """Seconds per quick call (best of ``repeat`` passes, a fresh oracle each) and each call's
    best ``f(S) + λ(S)``."""
    best, objectives = np.inf, np.zeros(len(points))
    for _ in range(repeat):
        pricing = pricing_class(problem.utility, problem.k, max_columns=50)
        started = time.perf_counter()
        results = [pricing.quick(lam) for lam in points]
        best = min(best, (time.perf_counter() - started) / len(points))
        objectives = np.array([result.values[0] + result.columns[0] @ lam for result, lam in zip(results, points)])
    return best, objectives


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", default=["two-class", "uniform-gamma"])
    parser.add_argument("--against", metavar="REV", help="time the accuracy pricing at this git revision too")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    baseline = pricing_at(args.against) if args.against else None
    for case in args.cases:
        problem = untuned(case)
        points = prices(problem, args.calls)
        seconds, objectives = per_call(AccuracyPricing, problem, points, args.repeat)
        line = f"{case}: {seconds * 1e3:.1f} ms per quick call"
        if baseline is not None:
            before, before_objectives = per_call(baseline, problem, points, args.repeat)
            worst = float(np.max(np.abs(objectives - before_objectives) / np.abs(before_objectives)))
            found_less = int(np.sum(objectives < before_objectives * (1 - 1e-12)))
            line += (f"; {args.against}: {before * 1e3:.1f} ms ({before / seconds:.2f}x); best f + λ differs "
                     f"by at most {worst:.1e} relative, lower in {found_less} of {len(points)} calls")
        print(line, flush=True)


if __name__ == "__main__":
    main()
