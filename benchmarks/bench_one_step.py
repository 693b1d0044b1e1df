"""Benchmark: the one-step validation utility's closed-form gains against evaluating every ``S + u``.

    python -m pytest benchmarks/bench_one_step.py --benchmark-only -s
    python benchmarks/bench_one_step.py [N]

Random statistics (seeded): ``n`` workers, ``J = 8`` strata, ``d = 6`` parameters, per-worker
Hessians, the training schedule of the validity harness (100 rounds, 5 local steps), a set of
``|S| = 100`` workers. :meth:`OneStepValidation.gains` (the set's sums plus each worker's row,
``O(n·J·d²)``) against :meth:`SetFunction.gains`, the baseline in the same run, which builds the
``n − |S|`` masks ``S + u`` and calls ``values`` (``O(n²·J·d²)`` through the mask product); both
must agree to 1e-9. Printed: seconds of each and their ratio, and the closed form alone at
``n = 100,000``.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from fairsched.utilities import OneStepValidation
from fairsched.utilities.base import SetFunction

SCHEDULE = {"rounds": 100, "local_steps": 5, "local_lr": 0.5, "server_lr": 1.0, "server_decay": 0.1}


def instance(n: int, strata: int = 8, dim: int = 6, seed: int = 0) -> OneStepValidation:
    rng = np.random.default_rng(seed)
    sizes = rng.integers(0, 30, size=(n, strata)).astype(float)
    factor = rng.normal(size=(strata, dim, dim))
    mean_hessian = np.einsum("jde,jfe->jdf", factor, factor) / dim + np.eye(dim)
    return OneStepValidation(sizes, rng.normal(size=(n, strata, dim)), sizes[:, :, None, None] * mean_hessian[None],
                             np.full(strata, 1 / strata), np.zeros(dim), 0.01, np.ones(dim), np.eye(dim),
                             training=SCHEDULE)


def compare(n: int) -> dict[str, float]:
    f = instance(n)
    S = np.sort(np.random.default_rng(1).choice(n, 100, replace=False))
    start = time.perf_counter()
    closed = f.gains(S)
    closed_s = time.perf_counter() - start
    start = time.perf_counter()
    evaluated = SetFunction.gains(f, S)
    evaluated_s = time.perf_counter() - start
    np.testing.assert_allclose(closed, evaluated, rtol=1e-9, atol=1e-12)
    row = {"n": n, "closed_form_s": closed_s, "evaluated_s": evaluated_s, "ratio": evaluated_s / closed_s}
    print(f"n = {n:,}: closed-form gains {closed_s:.3f} s, evaluating every S + u {evaluated_s:.2f} s, "
          f"{row['ratio']:.0f}x", flush=True)
    return row


def closed_form_only(n: int = 100_000) -> float:
    f = instance(n)
    S = np.sort(np.random.default_rng(1).choice(n, 1000, replace=False))
    start = time.perf_counter()
    f.gains(S)
    seconds = time.perf_counter() - start
    print(f"n = {n:,}, |S| = 1,000: closed-form gains {seconds:.2f} s", flush=True)
    return seconds


def test_closed_form_gains(benchmark) -> None:
    benchmark.pedantic(compare, args=(20_000,), rounds=1, iterations=1)


def test_closed_form_gains_at_100k(benchmark) -> None:
    benchmark.pedantic(closed_form_only, rounds=1, iterations=1)


if __name__ == "__main__":
    compare(int(sys.argv[1]) if len(sys.argv) > 1 else 20_000)
    closed_form_only()
