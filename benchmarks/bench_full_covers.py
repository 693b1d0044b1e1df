"""Benchmark: is coverage's bound, the total weight, within reach of a distribution of full covers?

    python benchmarks/bench_full_covers.py [--family powerlaw] [--seed S] [--seconds T]
                                           [--exact SECONDS] [--run R] [--steps t ...]

On ``coverage-powerlaw`` of ``bench_pricing.py`` (``n = 1,000``, ``k = 50``, 2,000 elements)
column generation's bound is the total weight ``W`` of the elements from the first exact
call to the last, while its distribution stays about 6e-3 below it at 120 s.  ``U_opt = W``
exactly when some distribution over *full covers* (sets of at most ``k`` workers covering
every coverable element) meets every floor, so three measurements:

1. **The shortfall of full covers.**  The LP ``min Σ_u s_u`` s.t. ``Σ_{S∋u} p_S + s_u >= r_u``,
   ``Σ_S p_S = 1``, ``p, s >= 0``, over full covers, by column generation for ``T`` seconds
   with a heuristic pricing of ``max λ(S)`` over full covers (the ``m`` highest-priced
   workers completed greedily to a cover, ``m`` found by bisection, the rest of the ``k``
   slots filled by price, then members every element of which is covered twice swapped for
   the highest-priced outsider); with ``--exact SECONDS`` also, in every round, by the
   package's exact coverage pricing at prices scaled down until no set that misses an element
   can win (:func:`exact_full_covers`), each call held to ``SECONDS``.  Its value bounds the
   least shortfall from above (a value of 0 would prove ``U_opt = W``).
2. **Do full covers help the master?**  Those covers added to the support of a ``fairsched.
   optimum`` run of ``R`` seconds: the LP over the support alone and over both.
3. **Do the shortfall's duals lower the bound?**  With ``λ_sf`` the shortfall LP's prices,
   every full cover has ``λ_sf(S) − λ_sf·r <= −shortfall`` (over the covers found), so the
   Lagrangian bound ``max_S [f(S) + t·λ_sf(S)] − t·λ_sf·r`` of column generation could fall
   below ``W`` for small ``t``; it is computed by the package's exact pricing (120 s a call)
   for each ``--steps`` value ``t``.  Below ``W`` would prove ``U_opt < W``.

Printed: each step's figures; ``benchmarks/README.md``, *Coverage: is the total weight
reachable by full covers?*, records a run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_pricing  # noqa: E402

import fairsched  # noqa: E402
from fairsched.lp.pricing import pricing_for  # noqa: E402
from fairsched.problem import Problem  # noqa: E402
from fairsched.solvers import InfeasibleLPError, solve_distribution_lp  # noqa: E402


class Covers:
    """The set system of a coverage problem, read off its utility
    (:class:`fairsched.utilities.Coverage`): ``incidence`` is its elements × workers matrix
    (``coverers()``), ``by_worker`` the transpose (``sparse_incidence()``)."""

    def __init__(self, problem: Problem):
        utility = problem.utility
        self.utility = utility
        self.covers = [np.asarray(c, dtype=np.int64) for c in utility.covers]
        self.weights = utility.weights
        self.k, self.n = int(problem.k), int(problem.n)
        self.r = np.asarray(problem.r, dtype=float)
        self.incidence = utility.coverers()
        self.by_worker = utility.sparse_incidence()
        self.coverable = np.diff(self.incidence.indptr) > 0

    def covered(self, members: np.ndarray) -> np.ndarray:
        return (self.incidence @ members.astype(float)) > 0

    def completed(self, members: np.ndarray) -> np.ndarray:
        """``members`` plus, greedily, the worker covering most uncovered elements, until every
        coverable element is covered."""
        members = members.copy()
        done = self.covered(members) | ~self.coverable
        while not done.all():
            gain = self.by_worker @ (~done).astype(float)
            gain[members] = -1.0
            best = int(gain.argmax())
            members[best] = True
            done[self.covers[best]] = True
        return members

    def best_full_cover(self, prices: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """A full cover of at most ``k`` workers with a high ``prices(S)`` (heuristic; docstring)."""
        order = np.argsort(-prices + 1e-9 * rng.random(self.n))
        best, best_value = None, -np.inf
        low, high = 0, self.k
        while low <= high:
            keep = (low + high) // 2
            members = np.zeros(self.n, dtype=bool)
            members[order[:keep]] = True
            members = self.completed(members)
            if members.sum() <= self.k:
                members[order[~members[order]][: self.k - int(members.sum())]] = True
                if prices[members].sum() > best_value:
                    best, best_value = members, prices[members].sum()
                low = keep + 1
            else:
                high = keep - 1
        if best is None:
            raise SystemExit("no full cover of at most k workers found")
        return self._swapped(best, prices)

    def _swapped(self, members: np.ndarray, prices: np.ndarray) -> np.ndarray:
        """Members whose every element is covered twice, cheapest first, swapped for the
        highest-priced outsider while that raises the price."""
        members = members.copy()
        for _ in range(5):
            count = self.incidence @ members.astype(float)
            improved = False
            for member in np.flatnonzero(members)[np.argsort(prices[members])]:
                if (count[self.covers[member]] >= 2).all():
                    outside = np.flatnonzero(~members)
                    other = outside[np.argmax(prices[outside])]
                    if prices[other] > prices[member] + 1e-12:
                        members[member], members[other] = False, True
                        count[self.covers[member]] -= 1
                        count[self.covers[other]] += 1
                        improved = True
            if not improved:
                break
        return members


def exact_full_covers(system: Covers, pricing, prices: np.ndarray, threshold: float) -> list[np.ndarray]:
    """Full covers with ``prices(S) > threshold`` from the package's exact coverage pricing at
    ``t·prices``, with ``t·k·max(prices)`` half the least element weight: there a set that
    leaves an element uncovered loses more weight than any prices can give back, so the
    pricing's maximum is a full cover of the highest price (to the pricing's resolution)."""
    least = float(system.weights[system.coverable].min())
    step = 0.5 * least / (system.k * max(float(prices.max()), 1e-12))
    result = pricing(step * prices)
    found = []
    for members in np.asarray(result.columns, dtype=bool):
        if (system.covered(members) | ~system.coverable).all() and prices[members].sum() > threshold + 1e-9:
            found.append(members)
    return found


def shortfall(system: Covers, seconds: float, per_round: int = 5, seed: int = 0, pricing=None
              ) -> tuple[float, np.ndarray, list[np.ndarray], int]:
    """Column generation for the shortfall LP (docstring, 1.): its value, its prices ``λ_sf``
    of the floor rows, the full covers found and how many came from exact calls (made with
    ``pricing``, when given, in every round beside the heuristic)."""
    rng = np.random.default_rng(seed)
    n, started, from_exact = system.n, time.perf_counter(), 0
    columns = [system.best_full_cover(system.r, rng)]
    while True:
        P = sp.csc_array(np.array(columns, dtype=float).T)
        m = P.shape[1]
        lp = linprog(np.concatenate([np.zeros(m), np.ones(n)]),
                     A_ub=sp.hstack([-P, -sp.identity(n, format="csc")]).tocsr(), b_ub=-system.r,
                     A_eq=np.concatenate([np.ones(m), np.zeros(n)])[None], b_eq=[1.0],
                     bounds=(0, None), method="highs")
        prices, threshold = -lp.ineqlin.marginals, -lp.eqlin.marginals[0]
        fresh = []
        for attempt in range(per_round):
            jitter = 1e-6 * rng.random(n) if attempt else 0.0
            members = system.best_full_cover(prices + jitter, rng)
            if prices[members].sum() > threshold + 1e-9:
                fresh.append(members)
        if pricing is not None and lp.fun >= 1e-9 and time.perf_counter() - started <= seconds:
            exact = exact_full_covers(system, pricing, prices, threshold)
            heuristic_best = max((prices[c].sum() for c in fresh), default=float("nan"))
            exact_best = max((prices[c].sum() for c in exact), default=float("nan"))
            print(f"   {time.perf_counter() - started:6.1f} s: shortfall {lp.fun:.6f} over {m} covers, "
                  f"threshold {threshold:.4f}; the heuristic's best {heuristic_best:.4f}, "
                  f"an exact call's {exact_best:.4f} ({len(exact)} covers)", file=sys.stderr, flush=True)
            fresh += exact
        else:
            exact = []
        if lp.fun < 1e-9 or not fresh or time.perf_counter() - started > seconds:
            return float(lp.fun), prices, columns, from_exact
        columns.extend(fresh)
        from_exact += len(exact)


def master_value(system: Covers, columns: list[np.ndarray]) -> float:
    """``max Σ p_S f(S)`` over these sets with every floor met and ``Σ p = 1`` (the package's
    distribution LP); ``nan`` where they cannot meet the floors."""
    masks = np.array(columns, dtype=bool)
    try:
        return float(solve_distribution_lp(system.utility.values(masks), masks, system.r).value)
    except InfeasibleLPError:
        return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", default="powerlaw", choices=["powerlaw", "geometric", "uniform"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seconds", type=float, default=120.0, help="column generation of the shortfall LP")
    parser.add_argument("--run", type=float, default=120.0, help="seconds of the fairsched.optimum run")
    parser.add_argument("--steps", type=float, nargs="*", default=[0.01, 0.001])
    parser.add_argument("--exact", type=float, default=0.0, metavar="SECONDS",
                        help="also price exactly in every round (seconds a call; 0: never)")
    args = parser.parse_args()
    case = f"coverage-{args.family}"
    problem = bench_pricing.problem(case, args.seed)
    system = Covers(problem)
    total = float(system.weights[system.coverable].sum())
    print(f"{case}/seed{args.seed}: n = {system.n}, k = {system.k}, Σ r = {system.r.sum():.4f}, "
          f"W = {total:.6f} ({int(system.coverable.sum())} coverable elements)", flush=True)

    exact = None
    if args.exact:
        exact = pricing_for(problem.utility, problem.k, "auto", max_columns=50)
        exact.set_rel_gap(1e-9)
        exact.time_budget = args.exact
    began = time.perf_counter()
    least, prices, covers, from_exact = shortfall(system, args.seconds, seed=args.seed, pricing=exact)
    print(f"1. shortfall LP over {len(covers)} full covers ({from_exact} from exact calls) after "
          f"{time.perf_counter() - began:.1f} s: {least:.6f} (of Σ r = {system.r.sum():.4f}); "
          f"λ_sf·r = {prices @ system.r:.6f}", flush=True)

    opt = fairsched.optimum(problem, gap=bench_pricing.GAP, time_limit=args.run)
    support = []
    for members in opt.support:
        mask = np.zeros(system.n, dtype=bool)
        mask[np.asarray(members)] = True
        support.append(mask)
    alone, both = master_value(system, support), master_value(system, support + covers)
    print(f"2. a {args.run:.0f} s run: {opt.status}, value {opt.value:.6f}, bound {opt.upper_bound:.6f}, "
          f"{len(support)} sets; the LP over its support {alone:.6f}, with the full covers {both:.6f} "
          f"({both - alone:+.6f})", flush=True)

    pricing = pricing_for(problem.utility, problem.k, "auto", max_columns=50)
    pricing.set_rel_gap(bench_pricing.GAP / 100)
    pricing.time_budget = 120.0
    for step in args.steps:
        lam = step * prices
        began = time.perf_counter()
        result = pricing(lam)
        found = float(result.values[0] + lam @ result.columns[0]) - float(lam @ problem.r)
        bound = float(result.upper_bound) - float(lam @ problem.r)
        print(f"3. t = {step:g}: {time.perf_counter() - began:.1f} s, exact {bool(result.exact)}: "
              f"L(t·λ_sf) between {found:.6f} and {bound:.6f}; W = {total:.6f} "
              f"({'below W: U_opt < W' if bound < total - 1e-9 else 'not below W'})", flush=True)


if __name__ == "__main__":
    main()
