"""``Scheduler.select`` latency at cross-device scale: n = 100,000 workers, k = 1,000 per round.

    python benchmarks/bench_scheduler.py                       # every policy, a table
    python benchmarks/bench_scheduler.py fairdg lyapunov       # some of them
    python benchmarks/bench_scheduler.py --untuned pareto-sparse lyapunov   # a draw nothing was tuned on
    python benchmarks/bench_scheduler.py --untuned uniform-gamma           # (or two-class, lognormal)
    python benchmarks/bench_scheduler.py --untuned two-class --workers 10000 --k 100 [--seed S] --save FILE
    python -m pytest benchmarks/bench_scheduler.py --benchmark-only -s

The accuracy family of ``fairsched.bench.families`` (the ``k`` strong workers have 400–600
examples, the rest 50–150, ``Σ r = 0.8·k``). Every round a fresh random 95% of the workers
is available, given as a boolean mask (``select(round, available_mask=...)``); the time of
the ``select`` call alone is recorded (``observe`` and drawing the mask are outside it),
after ``WARMUP`` rounds, over ``ROUNDS`` rounds. Wall time and process CPU time are both
printed: on a shared machine the CPU time is the figure to compare. Targets:
median and p99 at most 20 ms for fairdg, lp-sequenced and random, 50 ms for lyapunov.
``lp-sequenced`` needs the LP optimum of the instance first (its build time is printed).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

import fairsched as fs
from fairsched.instances import save_instance
from fairsched.instances.generators import _costly_floors
from fairsched.runtime.scheduler import Scheduler
from fairsched.utilities.accuracy import AccuracyUtility

N, K = 100_000, 1_000
AVAILABLE = 0.95
WARMUP, ROUNDS = 50, 300
TARGET_MS = {"fairdg": 20.0, "lp-sequenced": 20.0, "random": 20.0, "lyapunov": 50.0}
#: the table's policies, in its order (lp-sequenced, whose LP is solved first, last)
POLICIES = ["fairdg", "random", "lyapunov", "lp-sequenced"]


def instance(n: int = N, k: int = K, seed: int = 0) -> fs.Problem:
    """The accuracy instance of size ``n`` (``k`` strong workers, ``Σ r = 0.8·k``)."""
    rng = np.random.default_rng(seed)
    sizes = np.where(np.arange(n) < k, rng.uniform(400, 600, n), rng.uniform(50, 150, n)).round()
    return fs.Problem(AccuracyUtility(sizes), k=k, r=_costly_floors(n, k, 0.8))


def latencies(problem: fs.Problem, policy: str, rounds: int = ROUNDS, warmup: int = WARMUP,
              seed: int = 0) -> tuple[np.ndarray, np.ndarray, float]:
    """Wall and CPU seconds of each measured ``select`` call, and the scheduler's build time."""
    start = time.perf_counter()
    scheduler = Scheduler(problem, policy, seed=seed)
    build = time.perf_counter() - start
    rng = np.random.default_rng(seed + 1)
    wall, cpu = [], []
    for t in range(1, warmup + rounds + 1):
        mask = rng.random(problem.n) < AVAILABLE
        w0, c0 = time.perf_counter(), time.process_time()
        chosen = scheduler.select(t, available_mask=mask)
        w1, c1 = time.perf_counter(), time.process_time()
        if t > warmup:
            wall.append(w1 - w0)
            cpu.append(c1 - c0)
        assert len(chosen) <= problem.k
        scheduler.observe_indices(t)
    return np.array(wall), np.array(cpu), build


def summary(seconds: np.ndarray) -> dict[str, float]:
    """Median, p95 and p99 in milliseconds."""
    q = np.percentile(seconds, [50, 95, 99]) * 1e3
    return {"p50": float(q[0]), "p95": float(q[1]), "p99": float(q[2])}


def load() -> str:
    with open("/proc/loadavg") as handle:
        one, five = (float(x) for x in handle.read().split()[:2])
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def untuned(case: str, n: int = N, k: int = K, seed: int = 7) -> fs.Problem:
    """A draw of ``n`` workers, ``k`` per round, which nothing was tuned on:
    ``bench_balanced.py``'s ``case`` (seed 1): ``pareto-sparse`` (heavy-tailed sizes, floors
    all distinct and pinned, ``Σ r = k``), ``lognormal`` (lognormal sizes, floors summing to
    ``0.9·k``) and the others it lists; or one of :data:`DRAWS` (chosen in session 55 before
    measuring on them), drawn with ``seed``."""
    if case in DRAWS:
        return DRAWS[case](np.random.default_rng(seed), n, k)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_balanced import instance as draw

    return draw(case, n, k, 1)


def _uniform_gamma(rng: np.random.Generator, n: int, k: int) -> fs.Problem:
    """Sizes uniform on [10, 1000] (all distinct), floors Gamma(0.5) scaled to ``Σ r = 0.95·k``:
    many workers of similar score, so Lyapunov's greedy looks at many of them."""
    sizes = rng.uniform(10, 1000, n)
    r = rng.gamma(0.5, 1.0, n)
    return fs.Problem(AccuracyUtility(sizes), k=k, r=np.minimum(r * 0.95 * k / r.sum(), 1.0))


def _two_class(rng: np.random.Generator, n: int, k: int) -> fs.Problem:
    """5 % large workers (sizes 5,000–20,000, floor 0.001), the rest small (20–200) with floors
    uniform, scaled to ``Σ r = 0.85·k``."""
    big = rng.random(n) < 0.05
    sizes = np.where(big, rng.uniform(5000, 20000, n), rng.uniform(20, 200, n)).round()
    r = np.where(big, 0.001, rng.uniform(0.0, 2.0, n))
    r[~big] *= (0.85 * k - r[big].sum()) / r[~big].sum()
    return fs.Problem(AccuracyUtility(sizes), k=k, r=np.minimum(r, 1.0))


#: draws of this file's own (``--untuned NAME``)
DRAWS = {"uniform-gamma": _uniform_gamma, "two-class": _two_class}


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("policies", nargs="*", default=POLICIES)
    parser.add_argument("--untuned", metavar="CASE", help="a draw nothing was tuned on instead of the accuracy "
                        "family: bench_balanced.py's CASE (seed 1), e.g. pareto-sparse or lognormal, or "
                        "uniform-gamma or two-class")
    parser.add_argument("--save", metavar="FILE", help="write the draw as an instance file (with --workers "
                        "and --k, e.g. for `fairsched optimum FILE`) and stop")
    parser.add_argument("--workers", type=int, default=N, help="n of the draw saved with --save")
    parser.add_argument("--k", type=int, default=K, help="k of the draw saved with --save")
    parser.add_argument("--seed", type=int, default=7, help="seed of uniform-gamma and two-class (default 7)")
    args = parser.parse_args(argv)
    if args.save:
        draw = (instance(args.workers, args.k) if args.untuned is None
                else untuned(args.untuned, args.workers, args.k, args.seed))
        save_instance(draw, args.save)
        print(f"wrote {args.save}: n = {draw.n:,}, k = {draw.k:,}, Σ r = {float(np.sum(draw.r)):.6g}")
        return
    problem = instance() if args.untuned is None else untuned(args.untuned, seed=args.seed)
    print(f"n = {N:,}, k = {K:,}, {AVAILABLE:.0%} available, {ROUNDS} rounds after {WARMUP}; "
          f"{args.untuned or 'accuracy family'}; {load()}")
    print("policy        build s   wall p50 / p95 / p99 ms    cpu p50 / p95 / p99 ms   target")
    for policy in args.policies:
        wall, cpu, build = latencies(problem, policy)
        w, c = summary(wall), summary(cpu)
        print(f"{policy:<12} {build:8.2f}   {w['p50']:6.2f} / {w['p95']:6.2f} / {w['p99']:6.2f}"
              f"      {c['p50']:6.2f} / {c['p95']:6.2f} / {c['p99']:6.2f}     {TARGET_MS.get(policy, '-')}")
    print(load())


def _bench(benchmark, policy: str) -> None:
    problem = instance()
    wall, cpu, build = benchmark.pedantic(latencies, args=(problem, policy), rounds=1, iterations=1)
    w, c = summary(wall), summary(cpu)
    benchmark.extra_info.update(build_seconds=build, wall_ms=w, cpu_ms=c)
    print(f"\n{policy}: build {build:.2f} s; wall p50 {w['p50']:.2f} p95 {w['p95']:.2f} p99 {w['p99']:.2f} ms; "
          f"cpu p50 {c['p50']:.2f} p95 {c['p95']:.2f} p99 {c['p99']:.2f} ms; {load()}")


def test_fairdg(benchmark):
    _bench(benchmark, "fairdg")


def test_random(benchmark):
    _bench(benchmark, "random")


def test_lyapunov(benchmark):
    _bench(benchmark, "lyapunov")


def test_lp_sequenced(benchmark):
    _bench(benchmark, "lp-sequenced")


if __name__ == "__main__":
    main(sys.argv[1:])
