"""Benchmark: lp-sequenced's guard overrides, swapping urgent workers in against whole EDF rounds.

Run as a plain script (one line per variant; the plan is solved once and the variants of
:class:`fairsched.policies.LPSequenced` play it in this process)::

    python benchmarks/bench_sequencing.py                        # accuracy, n = 1,000, k = 50, seeds 0-1
    python benchmarks/bench_sequencing.py --cases coverage-geometric mixture --seeds 0
    python benchmarks/bench_sequencing.py --rounds 5000 --workers 200 --k 20
    python benchmarks/bench_sequencing.py --variants rule "deficit only"

Each round lp-sequenced offers the deadline guard the support sets of largest deficit,
ranked by deficit plus ``URGENCY_WEIGHT`` times their members' deadline pressure
(``LPSequenced._candidates``). When none is safe, it plays the candidate that needs the
fewest of the most urgent workers swapped in, each in place of a member outside the ``k``
most urgent (``LPSequenced._least_override``). Members the plan plays in every round go
last; before them, for the accuracy utility (a function of one modular sum) the lightest
member goes first, with no cap on the swaps, and for any other utility the least urgent,
with EDF (the ``k`` most urgent workers) when more than ``MAX_SWAP_SHARE·k`` swaps are
needed. For accuracy the guard first keeps the machines of the workers the plan plays in
every round (``LPSequenced._kept_machines``). Seven variants play each plan, each differing
from the package's rule in one respect: ``rule`` (the package's), ``deficit only`` (the
candidates in deficit order, without the pressure: the package's before session 65),
``whole guard`` (without kept machines, the package's before session 64), ``kept, any
utility`` (with kept machines for every utility), ``urgency`` (the rule for other
utilities, also on accuracy; no kept machines either), ``urgency, no cap`` (the same
without the cap) and ``EDF`` (every overridden round EDF, the rule before the override).
On utilities other than accuracy ``rule``, ``whole guard`` and ``urgency`` are the same; on
accuracy ``rule`` and ``kept, any utility`` are.

Instances (drawn here or by ``bench_pricing``'s untuned families; nothing but the cap was
tuned on them, and the cap on ``family`` and the small instances' first seed):

- accuracy ``f(S) = 0.95 − 0.5·L(S)^−0.2`` (Li, Liu and Ji, "Federated Learning with Fair
  Worker Selection: A Multi-Round Submodular Maximization Approach"), ``n = --workers``,
  ``k = --k``, floors summing to ``0.9·k``: ``pareto-uniform`` and ``pareto-sparse`` (sizes
  ``20·(1 + Pareto(1.2))``, floors as in ``bench_balanced``), ``lognormal`` (sizes
  ``e^N(5, 1.5)``), and ``family``, the accuracy family ``bench_lp_sequenced`` measures
  (``k`` strong workers, ``Σ r = 0.8·k``);
- small instances of the untuned families of ``bench_pricing`` (``facility-location-*`` at
  ``n = 100``, ``k = 10``, 50 points; ``coverage-*`` at ``n = 200``, ``k = 20``, 400 elements;
  ``concave-sqrt-*`` and ``mixture`` at ``n = 60``, ``k = 6``), whose plan is solved with a
  30 s limit (so the plan, and the ratio against it, can differ from run to run; the
  variants play the same plan).

Each line: the plan's status and value, then for each variant the ratio to the plan's value
over ``--rounds`` rounds, the largest debt, the rounds the guard overrode, the workers
swapped in and the EDF rounds, and the seconds of the run.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))

from bench_balanced import instance  # noqa: E402
from bench_lp_sequenced import accuracy_problem  # noqa: E402
from bench_pricing import untuned_concave, untuned_coverage, untuned_facility_location, untuned_mixture  # noqa: E402

from fairsched.instances.io import problem_from_table  # noqa: E402
from fairsched.lp import optimum  # noqa: E402
from fairsched.metrics import evaluate  # noqa: E402
from fairsched.policies import LPSequenced  # noqa: E402
from fairsched.policies import lp as lp_module  # noqa: E402
from fairsched.problem import Problem  # noqa: E402
from fairsched.runtime.simulation import run  # noqa: E402

ACCURACY = ("pareto-uniform", "pareto-sparse", "lognormal", "family")
SMALL = ("facility-location-uniform", "facility-location-gaussian", "facility-location-lognormal",
         "coverage-powerlaw", "coverage-geometric", "concave-sqrt-sparse", "concave-sqrt-quality", "mixture")
#: seconds for the plan of a small untuned instance
PLAN_LIMIT = 30.0
#: the variants played (see :func:`variant`)
VARIANTS = ("rule", "deficit only", "whole guard", "kept, any utility", "urgency", "urgency, no cap", "EDF")


def accuracy_instance(case: str, n: int, k: int, seed: int) -> Problem:
    """``bench_balanced``'s draw with floors summing to ``0.9·k``, or the accuracy family."""
    return accuracy_problem(n, k, seed) if case == "family" else instance(case, n, k, seed, pareto_share=0.9)


def small_instance(case: str, seed: int) -> Problem:
    kind, _, family = case.partition("-")
    if kind == "facility":
        table = untuned_facility_location(case.rsplit("-", 1)[1], seed, n=100, k=10, points=50)
    elif kind == "coverage":
        table = untuned_coverage(family, seed, n=200, k=20, elements=400)
    elif kind == "concave":
        table = untuned_concave(family.split("-")[1], "sqrt", seed, n=60, k=6, features=30)
    else:
        table = untuned_mixture(seed, n=60, k=6)
    return problem_from_table(table)


def _kept_for_any_utility(policy: LPSequenced) -> np.ndarray | None:
    """``LPSequenced._kept_machines`` without its condition on the utility."""
    return lp_module.room_to_keep(np.flatnonzero(policy._always_planned), policy.problem.r, policy.problem.k)


@contextmanager
def variant(name: str):
    """lp-sequenced as the package plays it (``rule``), or with one of the alternatives."""
    saved = (lp_module.substitute_weights, lp_module.MAX_SWAP_SHARE, LPSequenced._least_override,
             lp_module.URGENCY_WEIGHT)
    kept = LPSequenced._kept_machines
    if name in ("urgency", "urgency, no cap"):
        lp_module.substitute_weights = lambda utility: None
    if name == "urgency, no cap":
        lp_module.MAX_SWAP_SHARE = 1.0
    if name == "deficit only":
        lp_module.URGENCY_WEIGHT = 0.0
    if name == "EDF":
        LPSequenced._least_override = lambda self, *args: None
    if name == "whole guard":
        LPSequenced._kept_machines = lambda self: None
    if name == "kept, any utility":
        LPSequenced._kept_machines = _kept_for_any_utility
    try:
        yield
    finally:
        (lp_module.substitute_weights, lp_module.MAX_SWAP_SHARE, LPSequenced._least_override,
         lp_module.URGENCY_WEIGHT) = saved
        LPSequenced._kept_machines = kept


def play(problem: Problem, plan, rounds: int) -> str:
    policy = LPSequenced()
    start = time.perf_counter()
    schedule = run(problem, policy, rounds, optimum=plan)
    seconds = time.perf_counter() - start
    report = evaluate(schedule, problem, plan.value)
    below = "" if report.max_debt < 1 else " (NOT below 1)"
    return (f"ratio {report.ratio:.6f}, max debt {report.max_debt:.9f}{below}, "
            f"overridden {policy.guarded_rounds:,}, swapped in {policy.swapped_in:,}, EDF {policy.edf_rounds:,}, "
            f"{seconds:.1f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workers", type=int, default=1000, help="n of the accuracy cases")
    parser.add_argument("--k", type=int, default=50, help="k of the accuracy cases")
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--cases", nargs="+", default=list(ACCURACY), choices=ACCURACY + SMALL)
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    args = parser.parse_args()
    for case in args.cases:
        for seed in args.seeds:
            if case in ACCURACY:
                problem = accuracy_instance(case, args.workers, args.k, seed)
                plan = optimum(problem)
            else:
                problem = small_instance(case, seed)
                plan = optimum(problem, time_limit=PLAN_LIMIT)
            print(f"{case} n={problem.n} k={problem.k} seed {seed}: plan {plan.status} {plan.value:.6f}", flush=True)
            for name in args.variants:
                with variant(name):
                    print(f"  {name:<17} {play(problem, plan, args.rounds)}", flush=True)


if __name__ == "__main__":
    main()
