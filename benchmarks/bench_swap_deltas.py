"""Benchmark: the local search's swap values ``f(S − u + v) − f(S)``, closed form against a baseline.

    python benchmarks/bench_swap_deltas.py [--against REV] [--masks M] [CASE ...]
    python -m pytest benchmarks/bench_swap_deltas.py --benchmark-only -s

For each component of each case of ``bench_pricing.py`` (default: ``mixture`` on seeds 0-2,
``coverage``, ``facility-location`` at ``n = 200`` and ``400``; ``CASE`` is ``NAME[:SEED[:N]]``)
it draws ``M`` random ``k``-sets (seeded) and times the package's closed-form
``swap_deltas`` of that utility kind (:func:`fairsched.lp.pricing.swap_deltas_for`), per call,
against a baseline run in the same process on the same sets:

- by default, the brute force the heuristic falls back on without a closed form (``f`` of
  every swapped set through ``utility.values``; only where ``k·(n − k) <= 5,000``);
- with ``--against REV``, the same function at git revision ``REV`` of this repository
  (its module read with ``git show``), and whether the two matrices are **bitwise equal**.

Both are checked against each other (to 1e-9 relative for the brute force).  With
``--against``, facility location's ``values`` of the ``M`` sets in one batch (the columns a
pricing call ranks) is timed the same way against its class at ``REV``.  Why: in the
coverage + facility-location mixture at ``n = 100`` the swap values were 40% of a
column-generation run (``python -m cProfile -s tottime benchmarks/bench_pricing.py --seed 2
mixture``), most of it scipy building a sparse matrix per call rather than arithmetic.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

from fairsched.lp.pricing import swap_deltas_for  # noqa: E402
from fairsched.lp.pricing.greedy import SWAP_LIMIT, GreedyPricing  # noqa: E402
from fairsched.utilities import FacilityLocation, Mixture  # noqa: E402
from fairsched.utilities.base import SetFunction  # noqa: E402

REPOSITORY = Path(__file__).resolve().parent.parent
DEFAULT_CASES = ("mixture:0", "mixture:1", "mixture:2", "coverage:0", "facility-location:0:200",
                 "facility-location:0:400")
#: the module holding each kind's closed form, for ``--against``
MODULES = {"Coverage": "fairsched/lp/pricing/coverage.py",
           "FacilityLocation": "fairsched/lp/pricing/facility_location.py",
           "ConcaveModular": "fairsched/lp/pricing/concave.py"}
FUNCTIONS = {"Coverage": "swap_deltas", "FacilityLocation": "swap_deltas", "ConcaveModular": "concave_swap_deltas"}
VALUES_MODULE = "fairsched/utilities/facility_location.py"


def components(utility: SetFunction) -> list[SetFunction]:
    """The utility's components (itself unless a mixture)."""
    return list(utility.components) if isinstance(utility, Mixture) else [utility]


def module_at(path: str, revision: str) -> Any:
    """The repository's module at ``path`` as it was at git ``revision`` (loaded afresh from
    ``git show``)."""
    source = subprocess.run(["git", "-C", str(REPOSITORY), "show", f"{revision}:{path}"], check=True,
                            capture_output=True, text=True).stdout
    name = f"_at_{revision}_{path.replace('/', '_').removesuffix('.py')}"
    with tempfile.TemporaryDirectory() as folder:
        file = Path(folder) / f"{name}.py"
        file.write_text(source)
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses in the module look themselves up there
        spec.loader.exec_module(module)
    return module


def at_revision(kind: str, revision: str) -> Callable[[SetFunction, np.ndarray], np.ndarray]:
    """The closed form of ``kind`` as it was at git ``revision``."""
    return getattr(module_at(MODULES[kind], revision), FUNCTIONS[kind])


def per_call(function: Callable[[np.ndarray], np.ndarray], masks: list[np.ndarray], repeat: int) -> float:
    """Seconds per call of ``function`` over ``masks``, best of ``repeat`` passes."""
    best = np.inf
    for _ in range(repeat):
        started = time.perf_counter()
        for mask in masks:
            function(mask)
        best = min(best, (time.perf_counter() - started) / len(masks))
    return best


def measure(case: str, against: str | None = None, count: int = 30, repeat: int = 5) -> list[dict]:
    """One row per component of ``case`` (``NAME[:SEED[:N]]``): seconds per call of the closed
    form and of the baseline, their ratio and whether they agree."""
    name, *rest = case.split(":")
    seed = int(rest[0]) if rest else 0
    workers = int(rest[1]) if len(rest) > 1 else None
    problem = bench_pricing.problem(name, seed=seed, workers=workers)
    rng = np.random.default_rng([seed, 7])
    masks = []
    for _ in range(count):
        mask = np.zeros(problem.n, dtype=bool)
        mask[rng.choice(problem.n, problem.k, replace=False)] = True
        masks.append(mask)
    rows = []
    for utility in components(problem.utility):
        kind = type(utility).__name__
        closed = swap_deltas_for(utility)
        if closed is None:
            continue
        if against is not None:
            old = at_revision(kind, against)
            baseline = lambda mask, old=old, utility=utility: old(utility, mask)  # noqa: E731
            label = f"at {against}"
        elif problem.k * (problem.n - problem.k) <= SWAP_LIMIT:
            brute = GreedyPricing(utility, problem.k)  # no closed form: f of every swap
            baseline, label = brute.swap_gains, "brute force"
        else:
            continue
        new = [closed(utility, mask) for mask in masks]
        old_values = [baseline(mask) for mask in masks]
        if against is not None:
            agree = all(np.array_equal(a, b) for a, b in zip(new, old_values))
        else:
            agree = all(np.allclose(a, b, rtol=1e-9, atol=1e-9 * max(1.0, float(np.abs(b).max())))
                        for a, b in zip(new, old_values))
        closed_seconds = per_call(lambda mask, utility=utility: closed(utility, mask), masks, repeat)
        baseline_seconds = per_call(baseline, masks, repeat)
        rows.append({"case": case, "kind": kind, "n": problem.n, "k": problem.k, "baseline": label,
                     "closed_ms": 1e3 * closed_seconds, "baseline_ms": 1e3 * baseline_seconds,
                     "ratio": baseline_seconds / closed_seconds, "agree": agree})
        if against is not None and isinstance(utility, FacilityLocation):
            rows.append(values_row(case, utility, problem.k, np.array(masks), against, repeat))
    return rows


def values_row(case: str, utility: FacilityLocation, k: int, masks: np.ndarray, against: str,
               repeat: int) -> dict:
    """``utility.values`` of all ``masks`` in one batch against the class at ``against``."""
    old = module_at(VALUES_MODULE, against).FacilityLocation(utility.similarity)
    agree = bool(np.array_equal(utility.values(masks), old.values(masks)))
    new_seconds = per_call(utility.values, [masks], repeat * 10)
    old_seconds = per_call(old.values, [masks], repeat * 10)
    return {"case": case, "kind": f"values of {masks.shape[0]}", "n": utility.n, "k": k,
            "baseline": f"at {against}", "closed_ms": 1e3 * new_seconds, "baseline_ms": 1e3 * old_seconds,
            "ratio": old_seconds / new_seconds, "agree": agree}


def report(row: dict) -> None:
    agreement = ("bitwise equal" if row["baseline"].startswith("at ") else "equal") if row["agree"] else "DIFFER"
    print(f"{row['case']:26s} {row['kind']:16s} n={row['n']:5d} k={row['k']:3d}  this checkout "
          f"{row['closed_ms']:7.3f} ms  {row['baseline']} {row['baseline_ms']:8.3f} ms  "
          f"ratio {row['ratio']:6.2f}  {agreement}", flush=True)


def test_swap_deltas(benchmark) -> None:
    rows = benchmark.pedantic(lambda: measure("mixture:0"), rounds=1, iterations=1)
    for row in rows:
        report(row)
        assert row["agree"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="*", metavar="CASE", help="NAME[:SEED[:N]] (default: "
                        + ", ".join(DEFAULT_CASES) + ")")
    parser.add_argument("--against", metavar="REV", help="time the closed form at this git revision instead "
                        "of the brute force, and compare bitwise")
    parser.add_argument("--masks", type=int, default=30, metavar="M", help="random k-sets per case (default 30)")
    arguments = parser.parse_args()
    for case in arguments.cases or DEFAULT_CASES:
        for row in measure(case, arguments.against, arguments.masks):
            report(row)
