"""Benchmark: lp-sequenced's build with its plan certified to the policy's gap, against the
yardstick ``U_opt`` certified to ``optimum``'s default, on accuracy draws nothing was tuned on.

Run as a plain script (one line per draw)::

    python benchmarks/bench_plan_gap.py --family two-class --seeds 7 8
    python benchmarks/bench_plan_gap.py --family inverse-pareto --seeds 0 1 2 3
    python benchmarks/bench_plan_gap.py --family two-class --seeds 7 --gap 1e-6   # the build before
    python benchmarks/bench_plan_gap.py --bundled --rounds 100000

For each draw (``n`` workers, ``k`` per round, default ``n = 1,000``, ``k = 50``), in this
process, one after the other (their order alternating from draw to draw):

- **build**: ``Engine(problem, LPSequenced(gap=GAP))`` and its first round, which solves the
  plan by column generation to the relative gap ``GAP`` (default
  :data:`fairsched.policies.lp.PLAN_GAP`); wall and CPU seconds;
- **U_opt**: ``optimum(problem)`` with its defaults (relative gap 1e-6), which is what the
  build solved before the plan had a gap of its own, so its seconds are the build's
  baseline;
- **rounds**: ``--rounds`` rounds of lp-sequenced playing the plan, everyone available;
  the ratio of their time-average utility to ``U_opt``'s value, the ratio to its certified
  upper bound (a lower bound on the true ratio), and the largest debt ``r_u·t − N_u(t)``.

Families: those of ``bench_recoupling.py`` (``two-class``, ``three-class``,
``wide-two-class``, ``lognormal-mixture``, ``three-class-tiny``; all with many large workers
whose tiny floors keep them out of most sets, and the other floors above ``k/n``), and
``inverse-pareto``, drawn for this benchmark before anything was measured on it: Pareto
sizes (shape 1.5, scale 20, capped at 50,000) and floors proportional to ``1/√size``, scaled
to ``Σ r = 0.9·k``, so the smallest workers need the most rounds.

``--bundled`` plays lp-sequenced instead on every bundled instance (the paper's at each
``β`` of its sweep, and the others), one line each: the plan's certified gap, the ratio to
``U_opt``, the largest debt over ``--rounds`` rounds and the rounds the guard overrode.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from fairsched.instances import load_instance
from fairsched.instances.bundled import bundled_names
from fairsched.instances.generators import PAPER_BETAS
from fairsched.lp import Optimum
from fairsched.lp.solve import optimum
from fairsched.metrics import evaluate
from fairsched.policies import LPSequenced
from fairsched.policies.lp import PLAN_GAP
from fairsched.problem import Problem
from fairsched.runtime.engine import Engine
from fairsched.runtime.simulation import run

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_recoupling import FAMILIES, _problem  # noqa: E402


def _inverse_pareto(n: int, k: int, seed: int) -> Problem:
    """The ``inverse-pareto`` family of the module docstring."""
    rng = np.random.default_rng(seed)
    sizes = np.minimum(20.0 * (1.0 + rng.pareto(1.5, n)), 50_000.0).round()
    return _problem(sizes, 1.0 / np.sqrt(sizes), np.ones(n, dtype=bool), 0.9, k)


DRAWS = {**FAMILIES, "inverse-pareto": _inverse_pareto}


def build(problem: Problem, gap: float) -> tuple[Engine, float, float]:
    """The engine after its first round, and the wall and CPU seconds it took."""
    wall, cpu = time.perf_counter(), time.process_time()
    engine = Engine(problem, LPSequenced(gap=gap))
    engine.select()
    engine.observe()
    return engine, time.perf_counter() - wall, time.process_time() - cpu


def yardstick(problem: Problem) -> tuple[Optimum, float]:
    """``U_opt`` by ``optimum``'s defaults, and the wall seconds it took."""
    started = time.perf_counter()
    u_opt = optimum(problem)
    return u_opt, time.perf_counter() - started


def bundled(rounds: int, gap: float) -> None:
    """The ``--bundled`` lines of the module docstring."""
    cases = [("paper", beta) for beta in PAPER_BETAS] + [(name, None) for name in bundled_names() if name != "paper"]
    worst_ratio, worst_debt = 1.0, 0.0
    for name, beta in cases:
        problem = load_instance(name, beta=beta)
        u_opt = optimum(problem)
        policy = LPSequenced(gap=gap)
        report = evaluate(run(problem, policy, rounds), problem, u_opt.value)
        worst_ratio, worst_debt = min(worst_ratio, report.ratio), max(worst_debt, report.max_debt)
        print(f"{name}{'' if beta is None else f' beta {beta:g}'}: plan gap {policy.optimum.relative_gap:.2e}, "
              f"ratio {report.ratio:.9f}, max debt {report.max_debt:.4f}, overridden {policy.guarded_rounds:,}",
              flush=True)
    print(f"lowest ratio {worst_ratio:.9f}, largest debt {worst_debt:.4f}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--family", choices=sorted(DRAWS), default="two-class")
    parser.add_argument("--workers", type=int, default=1_000)
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--seeds", type=int, nargs="+", default=[7, 8])
    parser.add_argument("--rounds", type=int, default=20_000)
    parser.add_argument("--gap", type=float, default=PLAN_GAP, help=f"the plan's gap (default {PLAN_GAP:g})")
    parser.add_argument("--bundled", action="store_true", help="play every bundled instance instead")
    args = parser.parse_args(argv)
    if args.bundled:
        bundled(args.rounds, args.gap)
        return
    print(f"{args.family}, n = {args.workers:,}, k = {args.k}, plan gap {args.gap:g}, {args.rounds:,} rounds",
          flush=True)
    for i, seed in enumerate(args.seeds):
        problem = DRAWS[args.family](args.workers, args.k, seed)
        if i % 2:
            u_opt, u_opt_seconds = yardstick(problem)
            engine, wall, cpu = build(problem, args.gap)
        else:
            engine, wall, cpu = build(problem, args.gap)
            u_opt, u_opt_seconds = yardstick(problem)
        plan = engine.policy.optimum
        played = LPSequenced(gap=args.gap)
        report = evaluate(run(problem, played, args.rounds, optimum=plan), problem, u_opt.value)
        print(f"seed {seed}: build {wall:6.1f} s wall ({cpu:6.1f} s CPU), plan {plan.status} gap "
              f"{plan.relative_gap:.2e}, plan/U_opt {plan.value / u_opt.value:.8f}; "
              f"U_opt {u_opt_seconds:6.1f} s ({u_opt.status}, gap {u_opt.relative_gap:.2e}); "
              f"ratio {report.ratio:.8f} (to the bound {report.time_average_utility / u_opt.upper_bound:.8f}), "
              f"max debt {report.max_debt:.10f}, guarded rounds {played.guarded_rounds:,}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
