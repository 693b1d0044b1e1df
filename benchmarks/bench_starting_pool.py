"""Starting pools and Lagrangian bounds on the MILP-priced cases of ``bench_pricing.py``.

Figures of ``benchmarks/README.md``, "Schedule search for the starting pool"::

    python benchmarks/bench_starting_pool.py starts [CASE ...]
    python benchmarks/bench_starting_pool.py long CASE SECONDS [WORKERS]
    python benchmarks/bench_starting_pool.py segment CASE
    python benchmarks/bench_starting_pool.py schedule-prices CASE
    python benchmarks/bench_starting_pool.py subgradient CASE
    python benchmarks/bench_starting_pool.py bundle CASE [STEPS [SEARCH]]

- ``starts``: the value of the systematic sample (``initial_pool``) and of the schedule of
  :mod:`fairsched.lp.pricing.schedule_search` when built, after each pass and at the end
  (29 s for its passes);
- ``long``: column generation with tailing-off disabled for ``SECONDS``, its bounds every
  10 s (facility location rescaled to ``n = WORKERS`` as by ``bench_pricing.py --workers``);
- ``segment``: a 120 s run, then the exact Lagrangian bound ``L(λ)`` (MILP to relative gap
  1e-5) at ``θ·λ_relax + (1 − θ)·λ_master`` for ``θ = 0.95, 0.8, 0.5, 0``: the relaxation's
  duals against the last master's;
- ``subgradient``: 1,000 projected subgradient steps on ``L`` from ``λ_relax`` with the
  pricing heuristic in place of the exact maximum (Polyak steps of half the distance to
  the target 178.35, the master's value), then the exact ``L`` at the step where the
  heuristic's ``L`` was least and at the average of the last 500 steps;
- ``bundle``: ``STEPS`` (default 60) proximal bundle steps on ``L`` from ``λ_relax`` with the
  pricing heuristic in place of the exact maximum: each step minimises the cutting-plane
  model of ``L`` (every set seen so far) plus ``‖λ − λ_c‖²/2t`` (a HiGHS QP) and prices
  the minimiser (plus ``SEARCH`` seconds, default 0, of the iterated local search that
  precedes each MILP, from the heuristic's best set); the centre ``λ_c`` moves when the
  heuristic's ``L`` there falls by a tenth of the model's prediction (the proximal bundle
  method: Kiwiel, "Proximity control in bundle methods for convex nondifferentiable
  minimization", 1990).  Then the exact ``L`` at the final centre and at the step whose
  heuristic ``L`` was least (``benchmarks/README.md``, "Facility location: where the goal
  stops holding, and why");
- ``schedule-prices``: ``L(λ)`` at prices read off the schedule: for a worker at its floor
  (its share of rounds within ``1/T`` of ``r_u``), the weighted mean over its rounds of
  ``max(0, max_v gain(u → v) + λ_v)``, iterated ten times from 0; 0 for the others.
"""

from __future__ import annotations

import functools
import sys
import time
from pathlib import Path

import highspy
import numpy as np
import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fairsched  # noqa: E402
import fairsched.lp.pricing.schedule_search as schedule_search  # noqa: E402
import fairsched.lp.solve as solve  # noqa: E402
from bench_pricing import GAP, TIME_LIMIT, printed_progress, problem  # noqa: E402
from fairsched.lp.pricing import initial_pool, pricing_for  # noqa: E402
from fairsched.problem import Problem  # noqa: E402

SEARCH_SECONDS = 29.0


def starts(case: str) -> None:
    prob = problem(case)
    r = np.asarray(prob.r, dtype=float)
    oracle = pricing_for(prob.utility, prob.k, "auto")
    print(f"{case}: systematic sample {initial_pool(prob.utility, prob.k, r).value():.6f}")
    rounds = schedule_search.default_rounds(prob.n, prob.k)
    first = schedule_search.initial_schedule(prob.utility, prob.k, schedule_search.floor_counts(r, rounds),
                                             rounds, np.random.default_rng([0, 29]))
    print(f"  schedule of {rounds} rounds, first {prob.utility.values(first).mean():.6f}")
    for passes in (1, schedule_search.MAX_PASSES):
        started = time.perf_counter()
        pool = schedule_search.schedule_search(prob.utility, prob.k, r, oracle.heuristic.swap_gains,
                                               max_passes=passes, deadline=started + SEARCH_SECONDS)
        print(f"  after {'one pass' if passes == 1 else 'the search'}: {pool.value():.6f}, "
              f"{len(pool.columns)} distinct sets, {time.perf_counter() - started:.1f} s", flush=True)


def long_run(case: str, seconds: float, workers: int | None = None) -> None:
    progress = printed_progress(time.perf_counter(), every=10.0)
    original = solve.column_generation
    solve.column_generation = functools.partial(original, tailing_off=None)
    try:
        opt = fairsched.optimum(problem(case, workers=workers), gap=GAP, time_limit=seconds, progress=progress)
    finally:
        solve.column_generation = original
    print(f"{opt.status} after {opt.seconds:.1f} s: value {opt.value:.6f}, upper bound {opt.upper_bound:.6f}, "
          f"gap {opt.gap:.3e}")


def exact_bound(prob: Problem, lam: np.ndarray) -> tuple[float, float]:
    """``L(λ)`` certified by a fresh MILP pricing (relative gap 1e-5) and its seconds."""
    oracle = pricing_for(prob.utility, prob.k, "auto")
    oracle.set_rel_gap(1e-5)
    started = time.perf_counter()
    result = oracle(lam)
    return result.upper_bound - lam @ np.asarray(prob.r, dtype=float), time.perf_counter() - started


def segment(case: str) -> None:
    prob = problem(case)
    opt = fairsched.optimum(prob, gap=GAP, time_limit=TIME_LIMIT)
    print(f"{TIME_LIMIT:g} s run: {opt.status}, value {opt.value:.6f}, upper bound {opt.upper_bound:.6f}")
    relax = np.asarray(pricing_for(prob.utility, prob.k, "auto").relaxation_duals(np.asarray(prob.r)), float)
    master = np.asarray(opt.master_fairness_price, dtype=float)
    for theta in (1.0, 0.95, 0.8, 0.5, 0.0):
        bound, seconds = exact_bound(prob, theta * relax + (1 - theta) * master)
        print(f"  theta {theta:4.2f}: L = {bound:.6f} ({seconds:.1f} s)", flush=True)


def schedule_prices(case: str) -> None:
    prob = problem(case)
    r = np.asarray(prob.r, dtype=float)
    oracle = pricing_for(prob.utility, prob.k, "auto")
    pool = schedule_search.schedule_search(prob.utility, prob.k, r, oracle.heuristic.swap_gains,
                                           deadline=time.perf_counter() + SEARCH_SECONDS)
    rounds = schedule_search.default_rounds(prob.n, prob.k)
    masks, weights = pool.columns.to_masks(), pool.probabilities
    at_floor = pool.columns.marginals(weights) <= r + 1.0 / rounds + 1e-12
    gains = [oracle.heuristic.swap_gains(mask) for mask in masks]
    lam = np.zeros(prob.n)
    for _ in range(10):
        total, share = np.zeros(prob.n), np.zeros(prob.n)
        for mask, weight, gain in zip(masks, weights, gains):
            inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
            total[inside] += weight * np.maximum(0.0, (gain + lam[outside][None, :]).max(axis=1))
            share[inside] += weight
        lam = np.where(at_floor & (share > 0), total / np.maximum(share, 1e-300), 0.0)
    heuristic = oracle.heuristic(lam)
    found = float((heuristic.values + heuristic.columns @ lam).max() - lam @ r)
    bound, seconds = exact_bound(prob, lam)
    print(f"{case}: schedule {pool.value():.6f}; at its prices the heuristic's best set gives {found:.6f}, "
          f"the exact L = {bound:.6f} ({seconds:.1f} s)")


def subgradient(case: str, steps: int = 1000, target: float = 178.35) -> None:
    prob = problem(case)
    r = np.asarray(prob.r, dtype=float)
    oracle = pricing_for(prob.utility, prob.k, "auto")
    heuristic = oracle.heuristic
    lam = np.asarray(oracle.relaxation_duals(r), float)
    least, average = (np.inf, lam.copy()), np.zeros_like(lam)
    for step in range(steps):
        found = heuristic(lam)
        scores = found.values + found.columns @ lam
        best = int(np.argmax(scores))
        estimate = float(scores[best] - lam @ r)
        if estimate < least[0]:
            least = (estimate, lam.copy())
        direction = found.columns[best].astype(float) - r
        lam = np.maximum(0.0, lam - 0.5 * (estimate - target) / (direction @ direction) * direction)
        if step >= steps // 2:
            average += lam / (steps - steps // 2)
    for name, point in (("least heuristic L", least[1]), ("average", average)):
        found = heuristic(point)
        estimate = float((found.values + found.columns @ point).max() - point @ r)
        bound, seconds = exact_bound(prob, point)
        print(f"{case}, {name}: heuristic L {estimate:.6f}, exact L {bound:.6f} ({seconds:.1f} s)", flush=True)


def proximal_point(masks: np.ndarray, values: np.ndarray, r: np.ndarray, center: np.ndarray,
                   t: float) -> tuple[np.ndarray, float] | None:
    """``argmin_{λ >= 0} max_S [f(S) + λ(S)] − λ·r + ‖λ − center‖²/(2t)`` over the sets
    ``masks`` (a HiGHS QP in ``(λ, θ)``), with the model's value there; ``None`` when HiGHS
    does not solve it within 30 s."""
    n, m = r.size, values.size
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("time_limit", 30.0)
    inf = highspy.kHighsInf
    # rows θ − Σ_{u∈S} λ_u >= f(S); columns λ_0..λ_{n−1}, θ
    rows = sp.hstack([-sp.csr_array(masks.astype(float)), sp.csr_array(np.ones((m, 1)))]).tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n + 1, m
    lp.col_cost_ = np.append(-r - center / t, 1.0)
    lp.col_lower_, lp.col_upper_ = np.append(np.zeros(n), -inf), np.full(n + 1, inf)
    lp.row_lower_, lp.row_upper_ = values.astype(float), np.full(m, inf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = rows.indptr, rows.indices, rows.data
    h.passModel(lp)
    hessian = highspy.HighsHessian()
    hessian.dim_, hessian.format_ = n + 1, highspy.HessianFormat.kTriangular
    hessian.start_ = np.append(np.arange(n + 1), n).astype(np.int32)
    hessian.index_, hessian.value_ = np.arange(n, dtype=np.int32), np.full(n, 1.0 / t)
    h.passHessian(hessian)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    lam = np.clip(np.asarray(h.getSolution().col_value)[:n], 0.0, None)
    return lam, float(np.max(values + masks @ lam) - lam @ r)


def bundle(case: str, steps: int = 60, search: float = 0.0, t: float = 1.0) -> None:
    prob = problem(case)
    r = np.asarray(prob.r, dtype=float)
    oracle = pricing_for(prob.utility, prob.k, "auto", max_columns=solve.PRICING_COLUMNS)
    heuristic = oracle.heuristic
    start = initial_pool(prob.utility, prob.k, r)
    masks, values = start.columns.to_masks(), np.asarray(start.values, dtype=float)

    def estimate(lam: np.ndarray) -> float:
        """The heuristic's L at λ: the best of its sets and of every set seen so far."""
        nonlocal masks, values
        found = heuristic(lam)
        masks, values = np.vstack([masks, found.columns]), np.concatenate([values, found.values])
        if search > 0:
            climbed = heuristic.perturbed(lam, found.columns[0], rounds=10**9,
                                          stop=time.perf_counter() + search, seed=1)
            if climbed:
                climbed = np.array(climbed)
                masks = np.vstack([masks, climbed])
                values = np.concatenate([values, prob.utility.values(climbed)])
        return float(np.max(values + masks @ lam) - lam @ r)

    center = np.asarray(oracle.relaxation_duals(r), float)
    center_value = estimate(center)
    least = (np.inf, center.copy())  # over the steps
    began = time.perf_counter()
    for step in range(steps):
        point = proximal_point(masks, values, r, center, t)
        if point is None:
            print(f"  step {step}: the QP was not solved; stopping", flush=True)
            break
        lam, predicted = point
        value = estimate(lam)
        if value < least[0]:
            least = (value, lam.copy())
        serious = center_value - value >= 0.1 * (center_value - predicted)
        if serious:
            center, center_value = lam, value
        else:
            center_value = float(np.max(values + masks @ center) - center @ r)  # more sets seen there
        print(f"  step {step:3d} {time.perf_counter() - began:6.1f} s  heuristic L {value:.6f}  model "
              f"{predicted:.6f}  centre {center_value:.6f}{'  (moved)' if serious else ''}", flush=True)
    points = [("final centre", center)]
    if not np.array_equal(least[1], center):
        points.append(("least heuristic L", least[1]))
    for name, point in points:
        bound, seconds = exact_bound(prob, point)
        print(f"{case}, {name}: heuristic L {estimate(point):.6f}, exact L {bound:.6f} ({seconds:.1f} s)",
              flush=True)


if __name__ == "__main__":
    command, *rest = sys.argv[1:] or ["starts"]
    if command == "starts":
        for name in rest or ["facility-location", "coverage", "mixture", "concave-log1p"]:
            starts(name)
    elif command == "long":
        long_run(rest[0], float(rest[1]), *(int(value) for value in rest[2:3]))
    elif command == "segment":
        segment(rest[0])
    elif command == "schedule-prices":
        schedule_prices(rest[0])
    elif command == "subgradient":
        subgradient(rest[0])
    elif command == "bundle":
        bundle(rest[0], *(int(value) for value in rest[1:2]), *(float(value) for value in rest[2:3]))
    else:
        sys.exit(f"unknown command {command!r}: starts, long, segment, schedule-prices, subgradient or bundle")
