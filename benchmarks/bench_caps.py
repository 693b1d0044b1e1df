"""Upper caps at scale: column generation's convergence and every policy's cap excess.

    python benchmarks/bench_caps.py [--sizes 200 1000 5000] [--time-limit 120]

Part 1, the LP with caps: accuracy utility, sizes lognormal(3, 1), ``k = n/20`` (at least
10), floors 0.01, the largest ``n/10`` workers capped at 0.3; ``fairsched.optimum`` with its
defaults and ``--time-limit``; prints status, gap, seconds, and the optimum without caps.

Part 2, the policies: n = 40, k = 5, the 8 largest capped at 0.15, the others at 0.3,
floors 0.05, 5,000 rounds, everyone available and availability 0.7: ratio to the capped
``U_opt``, max debt and max cap excess of every registered policy.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import fairsched as fs
from fairsched.availability import Availability
from fairsched.policies.registry import POLICIES
from fairsched.utilities import AccuracyUtility


def lp_at_scale(n: int, time_limit: float) -> None:
    rng = np.random.default_rng(5)
    k = max(10, n // 20)
    utility = AccuracyUtility(rng.lognormal(3.0, 1.0, n))
    caps = np.ones(n)
    caps[np.argsort(-utility.sizes)[: n // 10]] = 0.3
    r = np.full(n, 0.01)
    start = time.perf_counter()
    opt = fs.optimum(fs.Problem(utility, k, r, caps=caps), time_limit=time_limit)
    seconds = time.perf_counter() - start
    free = fs.optimum(fs.Problem(utility, k, r))
    print(f"n = {n:>6,}  k = {k:>4}  capped {n // 10:>5,}: {opt.status:<11} gap {opt.gap:.2g}  {seconds:6.1f} s  "
          f"value {opt.value:.8f}  bound {opt.upper_bound:.8f}  (without caps {free.value:.8f}, "
          f"{free.seconds:.2f} s)", flush=True)


def policies() -> None:
    rng = np.random.default_rng(11)
    n, k, T = 40, 5, 5000
    utility = AccuracyUtility(rng.lognormal(3.0, 1.0, n))
    caps = np.full(n, 0.3)
    caps[np.argsort(-utility.sizes)[:8]] = 0.15
    problem = fs.Problem(utility, k, np.full(n, 0.05), caps=caps)
    opt = fs.optimum(problem)
    print(f"\npolicies: n = {n}, k = {k}, {T:,} rounds; U_opt with caps {opt.value:.6f} ({opt.status})")
    print(f"{'policy':<14} {'availability':<12} {'ratio':>8} {'max debt':>9} {'cap excess':>10}")
    for name in sorted(POLICIES):
        for label, availability in (("everyone", None),
                                    ("0.7", Availability(probabilities=np.full(n, 0.7), seed=1))):
            schedule = fs.run(problem, name, rounds=T, seed=0, availability=availability,
                              optimum=opt if POLICIES[name].uses_optimum else None)
            report = fs.evaluate(schedule, problem, opt)
            print(f"{name:<14} {label:<12} {report.ratio:8.5f} {report.max_debt:9.3f} "
                  f"{report.max_cap_excess:10.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 1000, 5000])
    parser.add_argument("--time-limit", type=float, default=120.0)
    args = parser.parse_args()
    for n in args.sizes:
        lp_at_scale(n, args.time_limit)
    policies()


if __name__ == "__main__":
    main()
