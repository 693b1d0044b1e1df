"""The price of short-term fairness: lp-sequenced and the best schedule with debt < 1, against ``U_opt``.

    python -m fairsched.experiments.lp_sequenced_price [--rounds 20000] [--instances 32]

On random costly facility-location instances (``fairsched.instances.generators``: ``k``
strong workers, the rest weak; ``n = 10..14``) with ``Σ r`` from ``0.8·k`` to ``k``, half of
them periodic floors with ``Σ r = k`` exactly (``1/D`` for the strong workers, the weak
ones share the rest in multiples of ``1/D``, ``D`` in 3, 4, 6), prints one row per instance:
``U_opt`` (the LP of Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A
Multi-Round Submodular Maximization Approach", Problem (5)), the time-average ratio of
lp-sequenced over ``rounds`` rounds and its largest debt, the same for its deficit
sequencing alone (``period_states=0``: without the exact period of
:mod:`fairsched.policies.exact_period`), and, where ``Σ r = k`` with rational floors, the
best ratio any schedule with debt < 1 can reach
(:func:`fairsched.policies.best_schedule.best_schedule`; ``-`` elsewhere).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from fractions import Fraction

import numpy as np

import fairsched as fs
from fairsched.instances.generators import _costly_floors, facility_location_instance
from fairsched.instances.io import problem_from_table
from fairsched.lp.solve import optimum
from fairsched.policies import LPSequenced
from fairsched.policies.best_schedule import best_schedule, period_of
from fairsched.problem import Problem

DENOMINATORS = (3, 4, 6)


def periodic_costly_floors(n: int, k: int, D: int) -> list[float]:
    """``1/D`` for the ``k`` strong workers; the weak share ``k − k/D`` in multiples of ``1/D`` (``Σ r = k``)."""
    m = np.ones(n, dtype=np.int64)
    left = k * D - k - (n - k)
    for i in range(left):
        m[k + i % (n - k)] += 1
    if (m > D).any():
        raise ValueError(f"n = {n}, k = {k}, D = {D}: the weak workers cannot absorb Σ r = k")
    return [float(Fraction(int(x), D)) for x in m]


def instance(i: int) -> tuple[str, Problem, bool]:
    """The ``i``-th instance: its label, the problem and whether its floors are periodic with ``Σ r = k``."""
    rng = np.random.default_rng(1000 + i)
    n = 10 + i % 5
    k = int(rng.integers(2, 5))
    table = facility_location_instance(n=n, k=k, points=40, load=0.8, seed=i)
    problem = problem_from_table(table)
    if i % 2 == 0:
        for D in rng.permutation(DENOMINATORS):
            try:
                return f"{i:02d}-fl-n{n}-k{k}-D{D}", problem.with_floors(periodic_costly_floors(n, k, int(D))), True
            except ValueError:
                continue
    load = float(rng.uniform(0.8, 1.0))
    return f"{i:02d}-fl-n{n}-k{k}-load{load:.2f}", problem.with_floors(np.array(_costly_floors(n, k, load))), False


def row(i: int, rounds: int) -> dict[str, object]:
    """The measurements of instance ``i`` over ``rounds`` rounds."""
    label, problem, periodic = instance(i)
    opt = optimum(problem)
    report = fs.evaluate(fs.run(problem, "lp-sequenced", rounds), problem, opt)
    alone = fs.run(problem, LPSequenced(period_states=0), rounds)
    alone_report = fs.evaluate(alone, problem, opt)
    best = None
    if periodic:
        # with Σ r = k any schedule with debt < 1 is back at its start after each period, so
        # deficit sequencing's first period is a feasible incumbent that prunes the search
        first = [alone.selected(t) for t in range(period_of(problem.r))]
        best = best_schedule(problem, opt.fairness_price, incumbent=first).value / opt.value
    return {"instance": label, "sum_r/k": float(problem.r.sum()) / problem.k, "U_opt": opt.value,
            "lp_sequenced_ratio": report.ratio, "max_debt": report.max_debt,
            "deficit_sequencing_ratio": alone_report.ratio, "deficit_sequencing_max_debt": alone_report.max_debt,
            "best_debt_below_1_ratio": best}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fairsched.experiments.lp_sequenced_price")
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--instances", type=int, default=32)
    args = parser.parse_args(argv)
    print("| instance | Σr/k | U_opt | lp-sequenced ratio | max debt | deficit sequencing alone: ratio | max debt "
          "| best ratio, debt < 1 |")
    print("|---|---|---|---|---|---|---|---|")
    for i in range(args.instances):
        r = row(i, args.rounds)
        best = "-" if r["best_debt_below_1_ratio"] is None else f"{r['best_debt_below_1_ratio']:.6f}"
        print(f"| {r['instance']} | {r['sum_r/k']:.4f} | {r['U_opt']:.6f} | {r['lp_sequenced_ratio']:.6f} | "
              f"{r['max_debt']:.6f} | {r['deficit_sequencing_ratio']:.6f} | {r['deficit_sequencing_max_debt']:.6f} "
              f"| {best} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
