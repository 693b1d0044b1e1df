"""Benchmarks: ``U_opt`` through MILP pricing, to a certified relative gap of ``1e-4``.

Run with either of::

    python -m pytest benchmarks/bench_pricing.py --benchmark-only -s
    python benchmarks/bench_pricing.py [CASE ...]

Each case is solved once by the public ``fairsched.optimum(problem, gap=1e-4,
time_limit=120)`` (column generation, since ``C(n, k)`` is far beyond enumeration) and
prints wall and CPU seconds (``time.process_time``, all threads of the process, HiGHS
runs two), the certified gap, the status, the column-generation iterations and the method.
The target is a certified gap ``<= 1e-4`` within 120 s on each case.

Instances (seeded; :mod:`fairsched.instances.generators`, costly floors ``Σ r = 0.8·k``):

- ``coverage``: weighted coverage, ``n = 1,000``, ``k = 50``, 2,000 elements;
- ``facility-location``: ``n = 400``, ``k = 40``, 200 points;
- ``concave-sqrt`` and ``concave-log1p``: concave of modular, ``n = 100``, ``k = 10``,
  50 features;
- ``mixture``: coverage (200 elements) + facility location (50 points), weights 1 and 1,
  ``n = 100``, ``k = 10`` (built here from the two generators' tables, floors of the
  coverage one).
- ``facility-location-uniform``, ``-gaussian``, ``-lognormal``: facility location at
  ``n = 400``, ``k = 40``, 200 points from data-generating processes nothing was tuned on
  (:func:`untuned_facility_location`; ``benchmarks/README.md``, "Facility location on
  data nothing was tuned on").
- ``coverage-powerlaw``, ``coverage-geometric`` (:func:`untuned_coverage`),
  ``concave-{sqrt,log1p}-{sparse,quality}`` (:func:`untuned_concave`) and
  ``mixture-untuned`` (:func:`untuned_mixture`): the other kinds at their cases' sizes from
  data-generating processes nothing was tuned on (``benchmarks/README.md``, "Coverage,
  concave of modular and the mixture on data nothing was tuned on").
- ``coverage-uniform``, ``concave-{sqrt,log1p}-uniform``: the plainest random instances of
  those sizes (uniformly random covers; dense uniform features), where the exact pricing
  itself is out of reach (``benchmarks/README.md``, "Plain random instances: where exact
  pricing is out of reach"; ``benchmarks/bench_one_pricing.py``).

The figures measured with this benchmark, each with its date, the commit it was compared
against and the command, are in ``benchmarks/README.md``: the *Cross-device scale* table and
its sections *Certifying the requested gap*, *Restarts from the exact columns*, *Schedule
search for the starting pool*, *Cut pool*, *Facility location: where the goal stops holding*,
*Swap values without a sparse matrix built per call*, *Floor groups, and an interrupt flag
HiGHS kept*, *Facility location on data nothing was tuned on* and *Coverage, concave of
modular and the mixture on data nothing was tuned on*.  (This docstring used to
repeat them as a change log.)

    python benchmarks/bench_pricing.py [--perturbations N] [--time-limit S] [--trace] [--seed S]
                                       [--cut-pool-rows N] [--start-levels N] [--target-search X]
                                       [--highs OPTION=VALUE ...] [--workers N]
                                       [--no-tailing-off] [--duals] [--pool-nonzeros N]
                                       [--concave-backend auto|highs|scip] [CASE ...]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import fairsched
import fairsched.lp.floor_groups as floor_groups
import fairsched.lp.pricing.concave as concave
import fairsched.lp.pricing.coverage as coverage_pricing
import fairsched.lp.pricing.facility_location as facility_location
import fairsched.lp.pricing.milp as milp
import fairsched.lp.solve as solve_module
import fairsched.solvers.colgen as colgen
from fairsched.instances import problem_from_table
from fairsched.instances.generators import (
    concave_modular_instance,
    coverage_instance,
    facility_location_instance,
)
from fairsched.problem import Problem

GAP = 1e-4
TIME_LIMIT = 120.0


def mixture_table(n: int = 100, k: int = 10, seed: int = 0) -> dict[str, Any]:
    cover = coverage_instance(n=n, k=k, elements=2 * n, seed=seed)
    facility = facility_location_instance(n=n, k=k, points=n // 2, seed=seed)
    table = dict(cover, name=f"coverage+facility-location-n{n}-k{k}")
    table["utility"] = {"kind": "mixture", "components": [dict(cover["utility"], weight=1.0),
                                                         dict(facility["utility"], weight=1.0)]}
    return table


#: the cases, each a table from the generators' seed (0: the instances of the figures quoted)
def facility_location_table(workers: int, seed: int = 0) -> dict[str, Any]:
    """The facility-location case's proportions at ``n = workers``: ``k = n/10``, ``n/2`` points."""
    return facility_location_instance(n=workers, k=max(1, workers // 10), points=max(1, workers // 2),
                                      seed=seed)


def untuned_floors(rng: np.random.Generator, n: int, k: int, quality: np.ndarray | None = None) -> np.ndarray:
    """Floors for the untuned families: uniform on ``[0, 1.6·k/n]`` (``Σ r ≈ 0.8·k``), or with a
    worker ``quality``, decreasing in it (``∝ quality^−0.3``) and scaled to ``Σ r = 0.85·k``."""
    if quality is None:
        return rng.uniform(0.0, 1.6 * k / n, n)
    floors = (quality.max() / quality) ** 0.3
    return floors * (0.85 * k / floors.sum())


def untuned_table(name: str, k: int, floors: np.ndarray, utility: dict[str, Any]) -> dict[str, Any]:
    """An instance table of the untuned families: floors rounded to 6 decimals, 20,000 rounds."""
    return {"name": name, "k": k, "rounds": 20_000, "workers": {"r": np.round(floors, 6).tolist()},
            "utility": utility}


def untuned_facility_location(family: str, seed: int = 0, n: int = 400, k: int = 40,
                              points: int = 200) -> dict[str, Any]:
    """Facility location at the case's size from data-generating processes nothing in the
    package was tuned on (the ``facility-location`` case and its generator were):

    - ``uniform``: similarities uniform on [0, 1], every floor ``0.8·k/n``;
    - ``gaussian``: points and workers uniform in the unit square, similarity
      ``exp(−‖p − w‖² / 0.02)``, floors uniform on ``[0, 1.6·k/n]``;
    - ``lognormal``: worker quality ``q_u`` lognormal (σ = 0.7), similarity ``U³·q_u``,
      floors decreasing in quality (``∝ q_u^−0.3``) scaled to ``Σ r = 0.85·k``.
    """
    rng = np.random.default_rng(seed)
    if family == "uniform":
        similarity = rng.uniform(0.0, 1.0, (points, n))
        floors = np.full(n, 0.8 * k / n)
    elif family == "gaussian":
        where_points, where_workers = rng.uniform(0.0, 1.0, (points, 2)), rng.uniform(0.0, 1.0, (n, 2))
        # one worker at a time: no (points, n, 2) array
        similarity = np.stack([np.exp(-((where_points - w) ** 2).sum(axis=1) / 0.02) for w in where_workers],
                              axis=1)
        floors = untuned_floors(rng, n, k)
    elif family == "lognormal":
        quality = rng.lognormal(0.0, 0.7, n)
        similarity = rng.uniform(0.0, 1.0, (points, n)) ** 3 * quality
        floors = untuned_floors(rng, n, k, quality)
    else:
        raise ValueError(f"unknown facility-location family {family!r}")
    return untuned_table(f"facility-location-{family}-n{n}-k{k}-s{seed}", k, floors,
                         {"kind": "facility-location", "similarity": similarity.round(4).tolist()})


def untuned_coverage(family: str, seed: int = 0, n: int = 1000, k: int = 50,
                     elements: int = 2000) -> dict[str, Any]:
    """Weighted coverage at the ``coverage`` case's size from data-generating processes nothing
    in the package was tuned on (its generator, ``k`` strong workers and equal weak floors, was):

    - ``powerlaw``: element popularity ``∝ rank^−0.8`` (ranks shuffled), each worker's number of
      elements lognormal around ``0.03·elements`` (σ = 1, between 1 and half the elements),
      drawn by popularity; weights lognormal (σ = 0.5); floors uniform on ``[0, 1.6·k/n]``;
    - ``geometric``: elements and workers uniform in a square of area ``n/1000`` (the unit
      square at the case's size), each worker covering the
      elements within a radius uniform on ``[0.02, 0.1]`` (at least its nearest); weights uniform
      on ``[0.5, 1.5]``; floors decreasing in the weight a worker covers, ``Σ r = 0.85·k``;
    - ``uniform``: each worker covers a uniformly random subset of the elements, of a size
      uniform on ``[0.01, 0.03]·elements``; weights uniform on ``[0, 1]``; floors uniform on
      ``[0, 1.6·k/n]`` (the plainest random set system).
    """
    rng = np.random.default_rng(seed)
    if family == "powerlaw":
        popularity = rng.permutation(np.arange(1, elements + 1) ** -0.8)
        popularity /= popularity.sum()
        sizes = np.clip(np.round(rng.lognormal(np.log(0.03 * elements), 1.0, n)), 1, elements // 2).astype(int)
        covers = [np.sort(rng.choice(elements, size=size, replace=False, p=popularity)) for size in sizes]
        weights = rng.lognormal(0.0, 0.5, elements)
        floors = untuned_floors(rng, n, k)
    elif family == "geometric":
        # a square of area n/1000: other sizes keep the density of workers and elements
        side = np.sqrt(n / 1000)
        where_elements, where_workers = rng.uniform(0.0, side, (elements, 2)), rng.uniform(0.0, side, (n, 2))
        radius = rng.uniform(0.02, 0.1, n)
        weights = rng.uniform(0.5, 1.5, elements)
        covers = []
        for w, rho in zip(where_workers, radius):
            distance = np.sqrt(((where_elements - w) ** 2).sum(axis=1))
            covers.append(np.union1d(np.flatnonzero(distance <= rho), [int(distance.argmin())]))
        floors = untuned_floors(rng, n, k, np.array([weights[c].sum() for c in covers]))
    elif family == "uniform":
        sizes = rng.integers(elements // 100, 3 * elements // 100 + 1, n)
        covers = [np.sort(rng.choice(elements, size=size, replace=False)) for size in sizes]
        weights = rng.uniform(0.0, 1.0, elements)
        floors = untuned_floors(rng, n, k)
    else:
        raise ValueError(f"unknown coverage family {family!r}")
    return untuned_table(f"coverage-{family}-n{n}-k{k}-s{seed}", k, floors,
                         {"kind": "coverage", "covers": [c.tolist() for c in covers],
                          "weights": np.round(weights, 4).tolist()})


def untuned_concave(family: str, concave: str, seed: int = 0, n: int = 100, k: int = 10,
                    features: int = 50) -> dict[str, Any]:
    """Concave of modular sums at the ``concave-*`` cases' size from data-generating processes
    nothing in the package was tuned on (their generator, ``k`` strong workers, was):

    - ``sparse``: each worker has 5 nonzero features, lognormal (σ = 1); floors uniform on
      ``[0, 1.6·k/n]``;
    - ``quality``: worker quality ``q_u`` lognormal (σ = 0.7), features ``q_u·Gamma(0.5)``;
      floors decreasing in quality, ``Σ r = 0.85·k``;
    - ``uniform``: every feature uniform on ``[0, 1]`` (dense); floors uniform on
      ``[0, 1.6·k/n]``.
    """
    rng = np.random.default_rng(seed)
    if family == "sparse":
        values = np.zeros((features, n))
        for u in range(n):
            values[rng.choice(features, size=5, replace=False), u] = rng.lognormal(0.0, 1.0, 5)
        floors = untuned_floors(rng, n, k)
    elif family == "quality":
        quality = rng.lognormal(0.0, 0.7, n)
        values = rng.gamma(0.5, 1.0, (features, n)) * quality
        floors = untuned_floors(rng, n, k, quality)
    elif family == "uniform":
        values = rng.uniform(0.0, 1.0, (features, n))
        floors = untuned_floors(rng, n, k)
    else:
        raise ValueError(f"unknown concave-of-modular family {family!r}")
    return untuned_table(f"concave-{concave}-{family}-n{n}-k{k}-s{seed}", k, floors,
                         {"kind": "concave-modular", "features": values.round(4).tolist(), "concave": concave})


def untuned_mixture(seed: int = 0, n: int = 100, k: int = 10) -> dict[str, Any]:
    """The ``mixture`` case's kinds and size (coverage over ``2n`` elements plus facility location
    over ``n/2`` points, weight 1 each) from the untuned families: ``powerlaw`` coverage and
    ``gaussian`` facility location on the same workers, floors uniform on ``[0, 1.6·k/n]``."""
    cover = untuned_coverage("powerlaw", seed, n, k, 2 * n)
    facility = untuned_facility_location("gaussian", seed, n, k, n // 2)
    floors = untuned_floors(np.random.default_rng([seed, 1]), n, k)
    return untuned_table(f"mixture-untuned-n{n}-k{k}-s{seed}", k, floors,
                         {"kind": "mixture", "components": [dict(cover["utility"], weight=1.0),
                                                           dict(facility["utility"], weight=1.0)]})


CASES = {
    "coverage": lambda seed=0: coverage_instance(n=1000, k=50, elements=2000, seed=seed),
    "facility-location": lambda seed=0: facility_location_table(400, seed),
    "facility-location-uniform": lambda seed=0: untuned_facility_location("uniform", seed),
    "facility-location-gaussian": lambda seed=0: untuned_facility_location("gaussian", seed),
    "facility-location-lognormal": lambda seed=0: untuned_facility_location("lognormal", seed),
    "concave-sqrt": lambda seed=0: concave_modular_instance(n=100, k=10, features=50, concave="sqrt",
                                                            seed=seed),
    "concave-log1p": lambda seed=0: concave_modular_instance(n=100, k=10, features=50, concave="log1p",
                                                             seed=seed),
    "mixture": mixture_table,
    "coverage-powerlaw": lambda seed=0: untuned_coverage("powerlaw", seed),
    "coverage-geometric": lambda seed=0: untuned_coverage("geometric", seed),
    "concave-sqrt-sparse": lambda seed=0: untuned_concave("sparse", "sqrt", seed),
    "concave-sqrt-quality": lambda seed=0: untuned_concave("quality", "sqrt", seed),
    "concave-log1p-sparse": lambda seed=0: untuned_concave("sparse", "log1p", seed),
    "concave-log1p-quality": lambda seed=0: untuned_concave("quality", "log1p", seed),
    "coverage-uniform": lambda seed=0: untuned_coverage("uniform", seed),
    "concave-sqrt-uniform": lambda seed=0: untuned_concave("uniform", "sqrt", seed),
    "concave-log1p-uniform": lambda seed=0: untuned_concave("uniform", "log1p", seed),
    "mixture-untuned": untuned_mixture,
}


def problem(case: str, seed: int = 0, workers: int | None = None) -> Problem:
    """The case's instance; ``workers`` rescales facility location (:func:`facility_location_table`)
    or covers by discs (``k = n/20``, ``2n`` elements, the same density: :func:`untuned_coverage`)
    to ``n = workers`` with the case's proportions."""
    if workers is None:
        return problem_from_table(CASES[case](seed=seed))
    if case == "coverage-geometric":
        return problem_from_table(untuned_coverage("geometric", seed, n=workers, k=max(1, round(workers / 20)),
                                                   elements=2 * workers))
    if case != "facility-location":
        raise ValueError(f"only facility-location and coverage-geometric can be rescaled, not {case!r}")
    return problem_from_table(facility_location_table(workers, seed))


@contextlib.contextmanager
def exact_calls_through(wrapper: Callable[..., Any]) -> Iterator[None]:
    """Inside the block every exact pricing call goes through
    ``wrapper(call, self, lam, *args, **kwargs)``, where ``call`` is the real
    ``MilpPricing.__call__`` (restored on leaving the block)."""
    original = milp.MilpPricing.__call__

    def call(self, lam, *args, **kwargs):
        return wrapper(original, self, lam, *args, **kwargs)

    milp.MilpPricing.__call__ = call
    try:
        yield
    finally:
        milp.MilpPricing.__call__ = original


@contextlib.contextmanager
def column_generation_options(**options: Any) -> Iterator[None]:
    """Inside the block ``fairsched.optimum``'s column generation runs with these keyword
    options of :func:`fairsched.solvers.colgen.column_generation` on top of its own."""
    original = solve_module.column_generation
    solve_module.column_generation = functools.partial(original, **options)
    try:
        yield
    finally:
        solve_module.column_generation = original


def without_tailing_off() -> contextlib.AbstractContextManager[None]:
    """Inside the block ``fairsched.optimum``'s column generation never stops on tailing-off
    (only on its gap, the time limit or its iteration limit): to see where a run that
    stopped so would have gone."""
    return column_generation_options(tailing_off=None)


def start_nonzeros(limit: int) -> contextlib.AbstractContextManager[None]:
    """Inside the block the starting pool joins column generation's master one by one only
    up to ``limit`` indices (its ``pool_nonzeros``; 0: the start only as its aggregated
    column, which is what the code before session 43 did with a pool over 200,000 indices,
    the coverage cases')."""
    return column_generation_options(pool_nonzeros=limit)


@contextlib.contextmanager
def master_duals_printed(started: float) -> Iterator[None]:
    """Inside the block every master solve prints its seconds and iterations (HiGHS's simplex
    iterations, 0 for its interior point; Clarabel's iterations where Clarabel solved it), its
    value and its duals λ: on how many workers they are positive, their largest and their sum
    (seconds from ``started``)."""
    original = colgen._Master.solve

    def solve(self, time_limit):
        began = time.perf_counter()
        solution = original(self, time_limit)
        lam = solution.lam
        iterations = (f"{self._interior.iterations} Clarabel iterations" if self._interior is not None
                      else f"{self.h.getInfo().simplex_iteration_count} simplex iterations")
        print(f"    master at {time.perf_counter() - started:6.1f} s ({time.perf_counter() - began:.2f} s, "
              f"{iterations}): {self.size} columns, value "
              f"{self.value(solution):.6f}, λ > 0 on {int((lam > 0).sum())} workers, largest "
              f"{lam.max(initial=0.0):.4g}, sum {lam.sum():.4g}", flush=True)
        return solution

    colgen._Master.solve = solve
    try:
        yield
    finally:
        colgen._Master.solve = original


def last_exact_call(case: str, seconds: float,
                    snapshot: Callable[[Any], dict[str, Any]] | None = None, seed: int = 0) -> dict[str, Any]:
    """Column generation on ``case`` (the generators' ``seed``) for ``seconds`` with the defaults: the arguments of its
    last exact pricing call (``lam``, ``options``, and ``at``, seconds from the start) and,
    with ``snapshot``, what ``snapshot(oracle)`` returned just before that call."""
    seen: dict[str, Any] = {}
    start = time.perf_counter()

    def keep(call, self, lam, *args, **kwargs):
        seen.update(lam=np.array(lam), options=dict(kwargs), at=time.perf_counter() - start,
                    **(snapshot(self) if snapshot is not None else {}))
        return call(self, lam, *args, **kwargs)

    with exact_calls_through(keep):
        fairsched.optimum(problem(case, seed), gap=GAP, time_limit=seconds)
    return seen


def option_value(text: str) -> object:
    """A HiGHS option's value from the command line: an int, a float, a boolean or the text."""
    for cast in (int, float):
        with contextlib.suppress(ValueError):
            return cast(text)
    return {"true": True, "false": False}.get(text.lower(), text)


def call_header(case: str, call: dict[str, Any], seconds: float) -> str:
    """One line naming a call :func:`last_exact_call` recorded: when, and its options."""
    options = {k: round(v, 6) for k, v in call["options"].items() if v is not None}
    return f"{case}: last exact call at {call['at']:.1f} s of a {seconds:.0f} s run, {options}"


def last_bound_call(case: str, seconds: float, seed: int = 0) -> tuple[Any, np.ndarray, float, float]:
    """Column generation on ``case`` (the generators' ``seed``) for ``seconds`` with the
    defaults: its result and, of its
    last exact pricing call made for the bound (no target), the duals ``λ``, the master's
    value when the call began and when it began (seconds from the start)."""
    seen: dict[str, Any] = {"lower": float("nan")}
    start = time.perf_counter()

    def keep(call, self, lam, *args, **kwargs):
        if not args and kwargs.get("target") is None:
            seen.update(lam=np.array(lam), at=seen["lower"], t=time.perf_counter() - start)
        return call(self, lam, *args, **kwargs)

    def progress(iteration, lower, upper, gap):
        seen["lower"] = lower

    with exact_calls_through(keep):
        opt = fairsched.optimum(problem(case, seed), gap=GAP, time_limit=seconds, progress=progress)
    return opt, seen["lam"], float(seen["at"]), float(seen["t"])


def printed_progress(started: float, every: float = 0.0) -> Any:
    """A ``progress`` callback printing the bounds, at most once per ``every`` seconds
    (seconds from ``started``)."""
    last = [-np.inf]

    def progress(iteration, lower, upper, gap):
        now = time.perf_counter() - started
        if now - last[0] >= every:
            last[0] = now
            print(f"  {now:6.1f} s  iteration {iteration:5d}  lower {lower:.6f}  upper {upper:.6f}  "
                  f"gap {gap:.3e}", flush=True)

    return progress


def traced(started: float) -> Callable[..., Any]:
    """A wrapper for :func:`exact_calls_through` printing when each exact call began, how long
    it took, whether it had a target, and its MILP (or SCIP) solves and branch-and-bound
    nodes (seconds from ``started``)."""

    def call(original, self, lam, *args, **kwargs):
        began = time.perf_counter()
        rounds, nodes = self.stats["rounds"], self.stats["nodes"]
        result = original(self, lam, *args, **kwargs)
        print(f"    exact call at {began - started:6.1f} s took {time.perf_counter() - began:6.1f} s, "
              f"target {'yes' if kwargs.get('target') is not None else 'no'}, exact {result.exact}, "
              f"{self.stats['rounds'] - rounds} solves, {self.stats['nodes'] - nodes} nodes", flush=True)
        return result

    return call


@contextlib.contextmanager
def aggregated_values_printed(started: float) -> Iterator[None]:
    """Print the floor groups' aggregated master value whenever it changes (seconds from
    ``started``; :func:`fairsched.lp.floor_groups.grouped_column_generation`): the trace's
    iteration lines show the start's value as the lower bound during that phase."""
    original = floor_groups._best_distribution
    last = [math.nan]

    def solve(values, coverage, need, time_limit=None):
        solved = original(values, coverage, need, time_limit=time_limit)
        value = -float(solved.fun) if solved.status == 0 else math.nan
        if not math.isclose(value, last[0], rel_tol=1e-12):
            print(f"    aggregated master at {time.perf_counter() - started:6.1f} s: value {value:.6f}", flush=True)
            last[0] = value
        return solved

    floor_groups._best_distribution = solve
    try:
        yield
    finally:
        floor_groups._best_distribution = original


def solve(case: str, time_limit: float = TIME_LIMIT, trace: bool = False, seed: int = 0,
          workers: int | None = None, tailing_off: bool = True, duals: bool = False,
          pool_nonzeros: int | None = None) -> dict[str, Any]:
    """Solve one case (the instance of the generators' ``seed``, rescaled to ``workers``: see
    :func:`problem`); the figures printed and returned (``trace``: also every iteration,
    every exact pricing call and :func:`aggregated_values_printed`; ``tailing_off`` false:
    :func:`without_tailing_off`; ``duals``:
    :func:`master_duals_printed`; ``pool_nonzeros``: :func:`start_nonzeros`)."""
    prob = problem(case, seed, workers)
    wall, cpu = time.perf_counter(), time.process_time()
    progress = printed_progress(wall) if trace else None
    with contextlib.ExitStack() as stack:
        if trace:
            stack.enter_context(exact_calls_through(traced(wall)))
            stack.enter_context(aggregated_values_printed(wall))
        if not tailing_off:
            stack.enter_context(without_tailing_off())
        if duals:
            stack.enter_context(master_duals_printed(wall))
        if pool_nonzeros is not None:
            stack.enter_context(start_nonzeros(pool_nonzeros))
        opt = fairsched.optimum(prob, gap=GAP, time_limit=time_limit, progress=progress)
    row = {"case": case, "seed": seed, "n": prob.n, "k": prob.k, "wall": time.perf_counter() - wall,
           "cpu": time.process_time() - cpu, "gap": opt.gap, "status": opt.status,
           "iterations": opt.iterations, "method": opt.method, "value": opt.value,
           "upper_bound": opt.upper_bound}
    label = case if workers is None else f"{case}-n{workers}"
    label = label if seed == 0 else f"{label}/seed{seed}"
    print(f"{label:18s} n={row['n']:5d} k={row['k']:3d}  wall {row['wall']:7.1f} s  cpu {row['cpu']:7.1f} s  "
          f"gap {row['gap']:.2e}  {row['status']:12s} iterations {row['iterations']:4d}  {row['method']}  "
          f"value {row['value']:.6f}  bound {row['upper_bound']:.6f}",
          flush=True)
    return row


@pytest.mark.parametrize("case", list(CASES))
def test_pricing_case(benchmark, case: str) -> None:
    row = benchmark.pedantic(solve, args=(case,), rounds=1, iterations=1)
    assert row["upper_bound"] >= row["value"]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="U_opt through MILP pricing, to a certified gap of 1e-4")
    parser.add_argument("cases", nargs="*", metavar="CASE", help=f"cases to run (default all): {', '.join(CASES)}")
    parser.add_argument("--perturbations", type=int, metavar="N",
                        help="iterated-local-search rounds before each MILP (0 turns it off; the baseline "
                             "of the comparison in benchmarks/README.md)")
    parser.add_argument("--time-limit", type=float, default=TIME_LIMIT, metavar="S",
                        help=f"seconds per case (default {TIME_LIMIT:g}, the goal's budget)")
    parser.add_argument("--trace", action="store_true",
                        help="print every iteration's bounds, every exact pricing call and the floor "
                             "groups' aggregated master value when it changes")
    parser.add_argument("--no-tailing-off", action="store_true",
                        help="never stop on tailing-off (only at the gap or the time limit): where a run "
                             "that stopped so would have gone")
    parser.add_argument("--duals", action="store_true",
                        help="print every master solve's value and where its duals λ sit")
    parser.add_argument("--pool-nonzeros", type=int, metavar="N",
                        help="the starting pool joins the master one by one only up to N indices (default "
                             f"{colgen.POOL_NONZEROS:,}; 0: only as one aggregated column, as the code before "
                             "session 43 did with the coverage cases' pools; benchmarks/README.md, \"Coverage on data nothing was tuned on: the "
                             "master, not the pricing\")")
    parser.add_argument("--seed", type=int, default=0, metavar="S",
                        help="the generators' seed (default 0, the instances of the figures quoted; "
                             "others are instances nothing was tuned on)")
    parser.add_argument("--cut-pool-rows", type=int, metavar="N",
                        help=f"cuts the pricing MILP keeps across calls (default {milp.CUT_POOL_ROWS}; 0 keeps "
                             "only those used in the call before, a huge N keeps all: the policies compared "
                             "in benchmarks/README.md, \"Cut pool\")")
    parser.add_argument("--concave-backend", choices=concave.ConcavePricing.BACKENDS,
                        help="who solves the exact concave-of-modular pricing (default auto: SCIP where "
                             "the scip extra is installed, else HiGHS's tangent-cut loop; "
                             "benchmarks/README.md, \"SCIP for concave of modular\")")
    parser.add_argument("--start-levels", type=int, metavar="N",
                        help="facility-location pricing models (not a mixture's) start with each point's threshold rows at its N "
                             f"largest similarities (default {facility_location.START_LEVELS}; 1: none, as "
                             "before session 45; benchmarks/README.md, \"Facility location: cuts from the start\")")
    parser.add_argument("--target-search", type=float, metavar="X",
                        help="with a target, the pricing's local search goes on past its rounds for X times the "
                             f"longest MILP solve so far (default {milp.TARGET_SEARCH_VS_MILP:g}; 0: not past its "
                             "rounds, as before session 46; benchmarks/README.md, \"A longer search before a "
                             "targeted MILP\")")
    parser.add_argument("--highs", nargs="+", default=[], metavar="OPTION=VALUE",
                        help="HiGHS options of the facility-location pricing models (not a mixture's), over the "
                             "package's (e.g. mip_pscost_minreliable=1: reliability branching; not threads, which HiGHS "
                             "fixes at a process's first solve; benchmarks/README.md, \"The certifying call's cut "
                             "loop, threads and branching\")")
    parser.add_argument("--workers", type=int, metavar="N",
                        help="facility location: n = N workers, k = N/10, N/2 points (the case's "
                             "proportions; where the 1e-4 goal stops being met, benchmarks/README.md); "
                             "coverage-geometric: k = N/20, 2N elements, the same density")
    parser.add_argument("--schedule-share", type=float, metavar="X",
                        help="the schedule search for the starting pool ends at X times the time limit, for every "
                             "kind (default: the pricing kind's own, coverage 0.4, else "
                             f"{solve_module.SCHEDULE_SHARE:g}; benchmarks/README.md, \"Sweeps of swaps between "
                             "rounds\")")
    parser.add_argument("--no-interior-point", action="store_true",
                        help="every master solve by HiGHS's primal simplex (neither HiGHS's interior point nor "
                             "Clarabel), as before session 49 (with --duals: the first solve's seconds; "
                             "benchmarks/README.md, \"Sweeps of swaps between rounds\")")
    args = parser.parse_args()
    if args.workers is not None and (args.workers < 10 or len(args.cases) != 1
                                     or args.cases[0] not in ("facility-location", "coverage-geometric")):
        parser.error("--workers N (N >= 10) rescales the facility-location or the coverage-geometric case: "
                     "name just one of them")
    unknown = [name for name in args.cases if name not in CASES]
    if unknown:
        parser.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    if args.no_interior_point:
        colgen.INTERIOR_POINT_COLUMNS_PER_ROW = math.inf
        colgen.CLARABEL_MAX_ROWS = 0
    if args.schedule_share is not None:
        solve_module.SCHEDULE_SHARE = args.schedule_share
        for kind in (milp.MilpPricing, coverage_pricing.CoveragePricing):
            kind.schedule_share = args.schedule_share
    if args.perturbations is not None:
        import fairsched.lp.pricing.greedy as greedy

        greedy.PERTURBATIONS = args.perturbations
    if args.cut_pool_rows is not None:
        milp.CUT_POOL_ROWS = args.cut_pool_rows
    if args.concave_backend is not None:
        concave.BACKEND = args.concave_backend
    if args.start_levels is not None:
        facility_location.START_LEVELS = args.start_levels
    if args.target_search is not None:
        milp.TARGET_SEARCH_VS_MILP = args.target_search
    for setting in args.highs:
        name, _, value = setting.partition("=")
        if not value:
            parser.error(f"--highs takes OPTION=VALUE, got {setting!r}")
        facility_location.HIGHS_OPTIONS[name] = option_value(value)
    for name in args.cases or list(CASES):
        solve(name, args.time_limit, args.trace, args.seed, args.workers, tailing_off=not args.no_tailing_off,
              duals=args.duals, pool_nonzeros=args.pool_nonzeros)
