"""Benchmark: one exact facility-location pricing call with and without the cuts from the start.

    python benchmarks/bench_start_cuts.py [CASE] [SECONDS] [BUDGET] [LEVELS]

Column generation on a case of ``bench_pricing.py`` (default ``facility-location``, seed 0)
runs for ``SECONDS`` (default 250) with the defaults and records the arguments (``λ``,
``target``, ``enough``) of its last exact pricing call; on ``facility-location`` that is the
call that certifies the run's gap (the proof that no set is worth more than the bound asked
for).  The call is then replayed in the same process on fresh pricing models (as
``fairsched.optimum`` builds them), each given ``BUDGET`` seconds (default 400), once per
value of :data:`fairsched.lp.pricing.facility_location.START_LEVELS` in ``LEVELS`` (comma
separated, default ``1,12``; 1 is the model before session 45: no threshold row before the
cut loop adds them).  Printed per value: the model's rows, seconds, cut-loop rounds,
branch-and-bound nodes, the best set's value, the certified bound and which job the call did.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_cutoff  # noqa: E402
import bench_pricing  # noqa: E402

import fairsched.lp.pricing.facility_location as facility_location  # noqa: E402


@contextlib.contextmanager
def start_levels(levels: int) -> Iterator[None]:
    """Inside the block, facility-location pricing models are built with ``levels``."""
    saved = facility_location.START_LEVELS
    facility_location.START_LEVELS = levels
    try:
        yield
    finally:
        facility_location.START_LEVELS = saved


def run(case: str = "facility-location", seconds: float = 250.0, budget: float = 400.0,
        levels: tuple[int, ...] = (1, 12)) -> list[dict]:
    call = bench_pricing.last_exact_call(case, seconds)
    print(bench_pricing.call_header(case, call, seconds), flush=True)
    rows = []
    for level in levels:
        with start_levels(level):
            row = {"levels": level, **bench_cutoff.replay(case, call, budget, cutoff=True)}
        print(f"  START_LEVELS {level:3d}  {row['seconds']:6.1f} s  {row['rounds']:2d} rounds  "
              f"{row['nodes']:6d} nodes  best set {row['best']:.6f}  bound {row['upper']:.6f}  "
              f"{bench_cutoff.outcome(row, call['options'])}", flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    args = sys.argv[1:]
    run(args[0] if args else "facility-location", float(args[1]) if len(args) > 1 else 250.0,
        float(args[2]) if len(args) > 2 else 400.0,
        tuple(int(x) for x in args[3].split(",")) if len(args) > 3 else (1, 12))
