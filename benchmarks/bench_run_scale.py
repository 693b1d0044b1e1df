"""``fairsched run`` at cross-device scale: an instance file of n workers to a schedule and a report.

    python -m pytest benchmarks/bench_run_scale.py --benchmark-only -s
    python benchmarks/bench_run_scale.py [--workers N] [--k K] [--optimum MODE ...]

Writes an accuracy instance (the costly structure of ``fairsched.bench.families``: ``k``
workers with 400–600 examples, the rest 50–150, ``Σ r = 0.8·k``) and runs the command line
on it in a subprocess, with ``--optimum auto`` (the default: U_opt within
``--optimum-time-limit``) and with ``--optimum none``, the baseline of the same command
without the LP. Prints the wall time, the child's peak RSS and what the JSON says of U_opt.
Target: n = 200,000, k = 1,000, 1,000 rounds of fairdg in
at most 120 s and 4 GiB, with a ratio against a certified bound or ``optimum: null`` and
the reason. Also the LP policies (lp-sequenced, lp-random) at n = 100,000, k = 1,000, whose
plan is the LP's support: no target beyond a certified optimum and, for lp-sequenced, a
max debt below 1; the time and peak are what to watch. And the first case on two draws nothing
was tuned on (``-k untuned``: ``bench_balanced.py``'s heavy-tailed and lognormal sizes).

Run as a script, the first case at any size (default ``n = 1,000,000``, ``k = 1,000``), once
per ``--optimum`` mode given (default ``auto none``: the command with and without U_opt), one
after the other: the seconds, the child's peak RSS and what the JSON says of U_opt.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import tomli_w

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_balanced import instance  # noqa: E402

from fairsched.instances import save_instance  # noqa: E402
from fairsched.instances.generators import _costly_floors  # noqa: E402

SIZES = [(20_000, 200), (200_000, 1_000)]
ROUNDS = 1_000


def write_instance(path: Path, n: int, k: int, seed: int = 0) -> Path:
    """The accuracy family member of size ``n`` (``fairsched.bench.families``) with ``k`` per round."""
    rng = np.random.default_rng(seed)
    sizes = np.where(np.arange(n) < k, rng.uniform(400, 600, n), rng.uniform(50, 150, n)).round()
    table = {"name": f"accuracy-n{n}-k{k}", "k": k, "rounds": ROUNDS,
             "workers": {"r": _costly_floors(n, k, 0.8)},
             "utility": {"kind": "accuracy", "sizes": sizes.tolist(), "a": 0.05, "b": 0.5, "c": -0.2}}
    path.write_text(tomli_w.dumps(table))
    return path


def run_cli(*argv: str) -> tuple[dict, float, float]:
    """(JSON report, wall seconds, peak RSS of the child in MiB).

    The peak is this child's own (``os.wait4``): ``RUSAGE_CHILDREN`` keeps the largest of
    every child so far, which would charge one case with an earlier, larger one."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "fairsched.cli", "run", *argv, "--json", "--quiet"],
                                 stdout=out, stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        seconds = time.perf_counter() - start
        out.seek(0)
        err.seek(0)
        assert os.waitstatus_to_exitcode(status) == 0, err.read()
        return json.loads(out.read()), seconds, usage.ru_maxrss / 1024


@pytest.mark.parametrize("n, k", SIZES, ids=[f"n{n}-k{k}" for n, k in SIZES])
def test_run_at_scale(benchmark, tmp_path, n, k):
    path = write_instance(tmp_path / "instance.toml", n, k)
    baseline, base_seconds, base_peak = run_cli(str(path), "--policy", "fairdg", "--optimum", "none")
    result = {}

    def full() -> None:
        result["data"], result["seconds"], result["peak"] = run_cli(str(path), "--policy", "fairdg")

    benchmark.pedantic(full, rounds=1, iterations=1)
    data = result["data"]
    print(f"\nn = {n:,}, k = {k:,}, {ROUNDS:,} rounds of fairdg: {result['seconds']:.1f} s, peak RSS "
          f"{result['peak']:,.0f} MiB (without U_opt: {base_seconds:.1f} s, {base_peak:,.0f} MiB); "
          f"optimum {data['optimum']} ({data['optimum_status']}), upper bound {data['optimum_upper_bound']}, "
          f"ratio {data['ratio']}, certified ratio >= {data['ratio_lower_bound']}, "
          f"max debt {data['max_debt']:.9f}; reason: {data['optimum_reason']}")
    assert data["max_debt"] < 1 and baseline["max_debt"] == data["max_debt"]
    assert (data["optimum_upper_bound"] is not None) or data["optimum_reason"]


UNTUNED = ["pareto-sparse", "lognormal"]


@pytest.mark.parametrize("case", UNTUNED)
def test_run_at_scale_untuned(benchmark, tmp_path, case):
    """The same command on ``bench_balanced.py``'s draws (seed 1), which nothing was tuned on:
    heavy-tailed sizes with every floor pinned (``pareto-sparse``), lognormal sizes; ``n =
    200,000``, ``k = 1,000``.  The Pareto draw's start is two pools of about ``n`` sets each,
    which the peak was made of (``benchmarks/README.md``, "A start the master takes as one
    column")."""
    n, k = SIZES[-1]
    path = tmp_path / "instance.toml"
    save_instance(instance(case, n, k, 1), path)
    result = {}

    def full() -> None:
        result["data"], result["seconds"], result["peak"] = run_cli(str(path), "--policy", "fairdg",
                                                                     "--rounds", str(ROUNDS))

    benchmark.pedantic(full, rounds=1, iterations=1)
    data = result["data"]
    print(f"\n{case}, n = {n:,}, k = {k:,}, {ROUNDS:,} rounds of fairdg: {result['seconds']:.1f} s, peak RSS "
          f"{result['peak']:,.0f} MiB; optimum {data['optimum']} ({data['optimum_status']}), upper bound "
          f"{data['optimum_upper_bound']}, ratio {data['ratio']}, certified ratio >= {data['ratio_lower_bound']}, "
          f"max debt {data['max_debt']:.9f}")
    assert data["max_debt"] < 1
    assert (data["optimum_upper_bound"] is not None) or data["optimum_reason"]


LP_SIZE = (100_000, 1_000)


@pytest.mark.parametrize("policy", ["lp-sequenced", "lp-random"])
def test_lp_policies_at_scale(benchmark, tmp_path, policy):
    """The LP policies at ``n = 100,000``, ``k = 1,000``: the plan is column generation's
    support (about ``n`` sets of ``k`` workers), so its copies are what the peak is made of
    (``benchmarks/README.md``, "Writing the support without copies")."""
    n, k = LP_SIZE
    path = write_instance(tmp_path / "instance.toml", n, k)
    result = {}

    def full() -> None:
        result["data"], result["seconds"], result["peak"] = run_cli(str(path), "--policy", policy)

    benchmark.pedantic(full, rounds=1, iterations=1)
    data = result["data"]
    print(f"\nn = {n:,}, k = {k:,}, {ROUNDS:,} rounds of {policy}: {result['seconds']:.1f} s, peak RSS "
          f"{result['peak']:,.0f} MiB; optimum {data['optimum']} ({data['optimum_status']}), "
          f"ratio {data['ratio']}, max debt {data['max_debt']:.9f}")
    assert data["optimum_status"] == "optimal"
    if policy == "lp-sequenced":
        assert data["max_debt"] < 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="fairsched run on the accuracy family at any size")
    parser.add_argument("--workers", type=int, default=1_000_000)
    parser.add_argument("--k", type=int, default=1_000)
    parser.add_argument("--optimum", nargs="+", default=["auto", "none"], choices=["auto", "exact", "bound", "none"])
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        path = write_instance(Path(folder) / "instance.toml", args.workers, args.k)
        for mode in args.optimum:
            data, seconds, peak = run_cli(str(path), "--policy", "fairdg", "--rounds", str(ROUNDS), "--optimum", mode)
            print(f"n = {args.workers:,}, k = {args.k:,}, {ROUNDS:,} rounds of fairdg, --optimum {mode}: "
                  f"{seconds:.1f} s, peak RSS {peak:,.0f} MiB; optimum {data['optimum']} "
                  f"({data['optimum_status']}), upper bound {data['optimum_upper_bound']}, ratio {data['ratio']}, "
                  f"max debt {data['max_debt']:.9f}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
