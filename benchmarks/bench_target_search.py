"""Benchmark: how many rounds the pricing's local search needs to reach a targeted call's target.

    python benchmarks/bench_target_search.py [CASE] [SEED] [SECONDS] [SEEDS] [ROUNDS]

Column generation on a case of ``bench_pricing.py`` (default ``facility-location``, seed 1)
runs for ``SECONDS`` (default 600) with the search of the exact pricing stopping at its
rounds (:data:`fairsched.lp.pricing.milp.TARGET_SEARCH_VS_MILP` = 0, the code before
session 46), and records every exact call made with a target that the search missed and
the MILP then reached: its ``λ``, its target and the sets the heuristic remembered then.
Each such call's start is rebuilt on a fresh pricing oracle by its heuristic from those sets
(with the restarts it always makes; the call itself may have made more, as time allowed),
and the iterated local search
(:meth:`fairsched.lp.pricing.greedy.GreedyPricing.perturbed`) runs from it with ``SEEDS``
seeds (default 20) for at most ``ROUNDS`` rounds (default 3,000).  Printed per call: when it
was made, the MILP's seconds and branch-and-bound nodes in the run, and per seed the round
at which the search reached the target (``-``: not within ``ROUNDS``), with the seconds per
round.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

import fairsched  # noqa: E402
import fairsched.lp.pricing.milp as milp  # noqa: E402
from fairsched.lp.solve import pricing_oracle  # noqa: E402


def missed_targets(case: str, seed: int, seconds: float) -> list[dict]:
    """The targeted exact calls of a run (search within its rounds) that needed the MILP."""
    kept: list[dict] = []
    start = time.perf_counter()

    def keep(call, self, lam, *args, **kwargs):
        archive = self.heuristic.remembered()
        rounds, nodes, began = self.stats["rounds"], self.stats["nodes"], time.perf_counter()
        result = call(self, lam, *args, **kwargs)
        target = kwargs.get("target")
        best = float(result.values[0] + result.columns[0] @ np.asarray(lam))
        if target is not None and self.stats["rounds"] > rounds and best >= target:
            kept.append({"lam": np.array(lam), "target": float(target), "archive": archive,
                         "at": began - start, "seconds": time.perf_counter() - began,
                         "nodes": self.stats["nodes"] - nodes})
        return result

    saved, milp.TARGET_SEARCH_VS_MILP = milp.TARGET_SEARCH_VS_MILP, 0.0
    try:
        with bench_pricing.exact_calls_through(keep):
            fairsched.optimum(bench_pricing.problem(case, seed), gap=bench_pricing.GAP, time_limit=seconds)
    finally:
        milp.TARGET_SEARCH_VS_MILP = saved
    return kept


def rounds_to_target(case: str, seed: int, call: dict, seeds: int, rounds: int) -> tuple[list[int | None], float]:
    """Per search seed, the round at which the search from the call's start reached its
    target (``None``: not within ``rounds``); and the seconds per round."""
    oracle = pricing_oracle(bench_pricing.problem(case, seed), bench_pricing.GAP)
    search = oracle.heuristic
    search.remember(*call["archive"])
    lam = call["lam"]
    start = search(lam).columns[0]
    reached, total_rounds, began = [], 0, time.perf_counter()
    for s in range(seeds):
        found = search.perturbed(lam, start, target=call["target"], rounds=rounds, seed=s)
        total_rounds += search.last_rounds
        best = max((float(oracle.utility.values(m[None, :])[0] + m @ lam) for m in found), default=-np.inf)
        reached.append(search.last_rounds if best >= call["target"] else None)
    return reached, (time.perf_counter() - began) / max(1, total_rounds)


def run(case: str = "facility-location", seed: int = 1, seconds: float = 600.0, seeds: int = 20,
        rounds: int = 3000) -> list[dict]:
    calls = missed_targets(case, seed, seconds)
    print(f"{case} seed {seed}: {len(calls)} targeted calls the search missed in a run of at most "
          f"{seconds:.0f} s (the search within its rounds)", flush=True)
    rows = []
    for call in calls:
        reached, per_round = rounds_to_target(case, seed, call, seeds, rounds)
        hits = [r for r in reached if r is not None]
        print(f"  call at {call['at']:6.1f} s: MILP {call['seconds']:5.1f} s, {call['nodes']:6d} nodes; search "
              f"reached the target with {len(hits)} of {seeds} seeds, rounds "
              f"{' '.join('-' if r is None else str(r) for r in reached)} ({1e3 * per_round:.2f} ms a round)",
              flush=True)
        rows.append({**call, "reached": reached, "per_round": per_round})
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    run(args[0] if args else "facility-location", int(args[1]) if len(args) > 1 else 1,
        float(args[2]) if len(args) > 2 else 600.0, int(args[3]) if len(args) > 3 else 20,
        int(args[4]) if len(args) > 4 else 3000)
