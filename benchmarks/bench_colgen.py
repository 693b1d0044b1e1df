"""Benchmarks: U_opt by column generation against enumeration, and at sizes enumeration cannot reach.

Run with ``python -m pytest benchmarks/bench_colgen.py --benchmark-only -s`` (``-s`` shows the
printed figures).  Instances (all seeded, so every run solves the same LPs):

- accuracy utility ``f(S) = 0.95 − 0.5·(Σ_{u∈S} L_u)^−0.2``, integer sizes ``L_u`` drawn
  uniformly from 50..1000, floors ``r`` uniform random scaled to ``Σ r = 0.8·k`` (capped at 1);
- weighted coverage and facility location from :mod:`fairsched.instances.generators` (costly floors,
  ``Σ r = 0.8·k``) with ``n = 200``, ``k = 20``.

Timings of column generation are the minimum over rounds; enumeration is timed once in
the same run.  The large instance runs in a subprocess so that its peak resident memory is
its own: ``VmHWM`` of ``/proc/self/status`` (the peak RSS of the process image since
``exec``), because on Linux ``getrusage(RUSAGE_SELF).ru_maxrss`` of a child started by
``subprocess`` also counts the parent's peak from before ``exec`` (here: the pytest process
after enumerating ``C(22, 11)`` columns, about 1 GB).  ``ru_maxrss`` is used where
``/proc`` is missing; tracemalloc's peak of the Python-level allocations is printed too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest

from fairsched.instances.generators import coverage_instance, facility_location_instance
from fairsched.instances import problem_from_table
from fairsched.lp.solve import optimum
from fairsched.problem import Problem
from fairsched.utilities import AccuracyUtility


def accuracy_problem(n: int, k: int, seed: int = 0) -> Problem:
    """Accuracy utility with integer sizes 50..1000 and random floors summing to 0.8·k."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(50, 1001, n).astype(float)
    r = rng.uniform(0.0, 1.0, n)
    r *= 0.8 * k / r.sum()
    while (r > 1).any():  # cap at 1 and spread the excess over the others
        r = np.minimum(r, 1.0)
        r *= 0.8 * k / r.sum()
    return Problem(AccuracyUtility(sizes), k, np.minimum(r, 1.0))


@pytest.mark.parametrize("n,k,speedup", [(20, 10, 10), (22, 11, 50)])
def test_column_generation_against_enumeration(benchmark, n: int, k: int, speedup: float) -> None:
    problem = accuracy_problem(n, k)
    cg = benchmark.pedantic(optimum, args=(problem,), kwargs={"method": "column-generation"},
                            rounds=5, iterations=1, warmup_rounds=1)
    cg_seconds = benchmark.stats.stats.min
    start = time.perf_counter()
    enum = optimum(problem, method="enumeration")
    enum_seconds = time.perf_counter() - start
    print(f"\naccuracy n={n} k={k}: enumeration {enum.columns:,} columns {enum_seconds:.2f} s; "
          f"column generation {cg.iterations} iterations, {cg.columns} columns, {cg_seconds:.3f} s "
          f"(min of 5); speed-up {enum_seconds / cg_seconds:.0f}x; "
          f"|value difference| {abs(cg.value - enum.value):.1e}, relative gap {cg.relative_gap:.1e}")
    assert abs(cg.value - enum.value) <= 1e-7
    assert enum_seconds >= speedup * cg_seconds


_LARGE = """
import json, resource, sys, time, tracemalloc
sys.path.insert(0, {here!r})
from bench_colgen import accuracy_problem
from fairsched.lp.solve import optimum
problem = accuracy_problem(1000, 100)
tracemalloc.start()
start = time.perf_counter()
opt = optimum(problem, gap=1e-6, time_limit=60)
seconds = time.perf_counter() - start
traced = tracemalloc.get_traced_memory()[1] / 2**20
try:
    with open("/proc/self/status") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({{"value": opt.value, "upper_bound": opt.upper_bound, "gap": opt.relative_gap,
                  "seconds": seconds, "iterations": opt.iterations, "columns": opt.columns,
                  "method": opt.method, "status": opt.status, "peak_rss_mib": peak,
                  "traced_mib": traced}}))
"""


def test_accuracy_n1000_k100(benchmark) -> None:
    here = str(__import__("pathlib").Path(__file__).resolve().parent)

    def solve() -> dict:
        out = subprocess.run([sys.executable, "-c", _LARGE.format(here=here)], check=True,
                             capture_output=True, text=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    data = benchmark.pedantic(solve, rounds=1, iterations=1)
    print(f"\naccuracy n=1000 k=100: value {data['value']:.10f}, certified upper bound "
          f"{data['upper_bound']:.10f}, relative gap {data['gap']:.1e}, {data['seconds']:.2f} s, "
          f"{data['iterations']} iterations, {data['columns']} columns, {data['method']}, "
          f"peak RSS {data['peak_rss_mib']:.0f} MiB (VmHWM of the solving process), "
          f"tracemalloc peak {data['traced_mib']:.0f} MiB")
    assert data["gap"] <= 1e-6
    assert data["seconds"] <= 60
    assert data["peak_rss_mib"] < 2048


@pytest.mark.parametrize("kind,size", [("coverage", 500), ("facility-location", 40)])
def test_milp_priced_n200_k20(benchmark, kind: str, size: int) -> None:
    if kind == "coverage":
        table = coverage_instance(n=200, k=20, elements=size, seed=0)
    else:
        table = facility_location_instance(n=200, k=20, points=size, seed=0)
    problem = problem_from_table(table)
    opt = benchmark.pedantic(optimum, args=(problem,), kwargs={"gap": 1e-4, "time_limit": 60},
                             rounds=1, iterations=1)
    seconds = benchmark.stats.stats.min
    what = "elements" if kind == "coverage" else "points"
    print(f"\n{kind} n=200 k=20 ({size} {what}): value {opt.value:.8g}, upper bound "
          f"{opt.upper_bound:.8g}, relative gap {opt.relative_gap:.1e}, {seconds:.1f} s, "
          f"{opt.iterations} iterations, {opt.columns} columns, {opt.method}, {opt.status}")
    assert opt.relative_gap <= 1e-4
    assert seconds <= 60
