"""Peak memory of evaluating a long schedule: streamed chunks against a materialised Schedule.

    python -m pytest benchmarks/bench_memory.py --benchmark-only -s

T = 10^6 rounds of k = 100 out of n = 10^4 workers (uniform random k-subsets, seeded, built
in chunks by :func:`fairsched.bench.streams.random_schedule_chunks`), accuracy utility.
Each variant runs in a fresh subprocess that reports its peak RSS: ``VmHWM`` of
``/proc/self/status`` (``getrusage`` maxrss where ``/proc`` is missing; on Linux maxrss of a
child can include the parent's peak from before ``exec``):

- **streaming**: :func:`fairsched.metrics.evaluate_stream` over a generator of CSR chunks
  of 25 evaluation blocks each; only one chunk exists at a time. Target: peak < 1 GiB.
- **materialised** (the baseline in the same run): the whole CSR :class:`Schedule`
  (10^8 int64 indices, 800 MB) evaluated with :func:`fairsched.evaluate`.

Both give the same report (checked field by field, exactly: the chunks are whole blocks).
``python benchmarks/bench_memory.py streaming|materialised [--rounds T]`` runs one variant.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

N, K, ROUNDS, SEED = 10_000, 100, 1_000_000, 0
GIB = 1 << 30


def peak_bytes() -> int:
    """Peak resident memory of this process image since ``exec``."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _problem(n: int, k: int):
    from fairsched.problem import Problem
    from fairsched.utilities import AccuracyUtility

    sizes = np.random.default_rng(SEED).uniform(100, 1000, n)
    return Problem(AccuracyUtility(sizes), k, np.full(n, 0.5 * k / n))


def child(mode: str, rounds: int, n: int = N, k: int = K) -> dict:
    """Run one variant in this process; returns the report, seconds and peak RSS."""
    from fairsched.bench.streams import random_schedule_chunks
    from fairsched.metrics import CHUNK_CELLS, evaluate, evaluate_stream
    from fairsched.schedule import Schedule

    problem = _problem(n, k)
    baseline = peak_bytes()
    chunk_rounds = 25 * max(1, CHUNK_CELLS // n)  # whole evaluation blocks: the same sums as evaluate
    start = time.perf_counter()
    chunks = random_schedule_chunks(n, k, rounds, chunk_rounds, SEED)
    if mode == "streaming":
        report = evaluate_stream(chunks, problem)
    else:
        indices = np.empty(rounds * k, dtype=np.int64)
        at = 0
        for chunk in chunks:
            indices[at:at + chunk.indices.size] = chunk.indices
            at += chunk.indices.size
        schedule = Schedule(n, np.arange(0, rounds * k + 1, k, dtype=np.int64), indices)
        report = evaluate(schedule, problem)
    seconds = time.perf_counter() - start
    peak = peak_bytes()
    return {"mode": mode, "rounds": rounds, "n": n, "k": k, "seconds": seconds, "peak_bytes": peak,
            "baseline_bytes": baseline, "time_average_utility": report.time_average_utility,
            "max_debt": report.max_debt, "fairness_slack": report.fairness_slack,
            "fraction_sum": float(report.selection_fraction.sum()),
            "worker_max_debt_sum": float(report.worker_max_debt.sum())}


def measure(mode: str, rounds: int = ROUNDS) -> dict:
    """:func:`child` in a fresh interpreter, so the peak is this variant's alone."""
    out = subprocess.run([sys.executable, str(Path(__file__).resolve()), mode, "--rounds", str(rounds)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def test_streaming_evaluation_peak_memory(benchmark):
    stream = benchmark.pedantic(measure, args=("streaming",), rounds=1, iterations=1)
    whole = measure("materialised")
    for key in ("time_average_utility", "max_debt", "fairness_slack", "fraction_sum", "worker_max_debt_sum"):
        assert stream[key] == whole[key], key
    benchmark.extra_info.update(streaming_peak_mib=stream["peak_bytes"] / 2**20,
                                materialised_peak_mib=whole["peak_bytes"] / 2**20)
    print(f"\nT = {ROUNDS:,}, n = {N:,}, k = {K}: streaming peak RSS {stream['peak_bytes'] / 2**20:.0f} MiB "
          f"({stream['seconds']:.1f} s; interpreter and imports {stream['baseline_bytes'] / 2**20:.0f} MiB), "
          f"materialised Schedule + evaluate {whole['peak_bytes'] / 2**20:.0f} MiB ({whole['seconds']:.1f} s); "
          f"{whole['peak_bytes'] / stream['peak_bytes']:.1f}x less memory, same report")
    assert stream["peak_bytes"] < GIB


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("streaming", "materialised"))
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    print(json.dumps(child(args.mode, args.rounds)))
