"""Benchmark: the exact best period (``fairsched.policies.best_schedule``) against a revision.

    python benchmarks/bench_best_schedule.py [--against REV] [--instances I ...] [--repeat R]

On the periodic instances of the lp-sequenced price experiment
(:func:`fairsched.experiments.lp_sequenced_price.instance`; default: the five with
``n >= 13``, whose searches keep 0.66-2.5 million states) it runs the search at the LP's
prices without an incumbent (every state kept: the test suite's independent check and the
worst case of the policy's own search), with the module as it is and as it was at git
revision ``REV`` (read with ``git show``; default ``d4a1997``, before the pairs were read
off each forced mask's sets and the layers merged in amortised batches), alternating,
``R`` times each. It prints the seconds of each, their ratio, and whether the two returned
the same sets, value and number of states (the search is deterministic: it must).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_swap_deltas import module_at  # noqa: E402

from fairsched.experiments.lp_sequenced_price import instance  # noqa: E402
from fairsched.lp.solve import optimum  # noqa: E402
from fairsched.policies import best_schedule as current  # noqa: E402

MODULE = "fairsched/policies/best_schedule.py"
BASELINE = "d4a1997"
#: periodic instances with n >= 13 (n = 10 + i % 5, periodic for even i)
LARGEST = (4, 8, 14, 24, 28)


def timed(module, problem, prices) -> tuple[float, object]:
    started = time.perf_counter()
    best = module.best_schedule(problem, prices)
    return time.perf_counter() - started, best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=BASELINE, help="git revision of the baseline (default %(default)s)")
    parser.add_argument("--instances", type=int, nargs="+", default=list(LARGEST))
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each version, alternating")
    args = parser.parse_args(argv)
    old = module_at(MODULE, args.against)
    print(f"| instance | n | k | P | states | now (s) | at {args.against} (s) | ratio | same |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i in args.instances:
        label, problem, periodic = instance(i)
        if not periodic:
            print(f"| {label} | not periodic: skipped |")
            continue
        prices = optimum(problem).fairness_price
        now, before = [], []
        for _ in range(args.repeat):
            seconds, new_best = timed(current, problem, prices)
            now.append(seconds)
            seconds, old_best = timed(old, problem, prices)
            before.append(seconds)
        same = (new_best.value == old_best.value and new_best.states == old_best.states
                and all((a == b).all() for a, b in zip(new_best.sets, old_best.sets)))
        print(f"| {label} | {problem.n} | {problem.k} | {new_best.period} | {new_best.states:,} | "
              f"{min(now):.2f} | {min(before):.2f} | {min(before) / min(now):.1f} | {'yes' if same else 'NO'} |",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
