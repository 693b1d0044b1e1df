"""Benchmark (diagnostic): which side of an accuracy instance's gap is open, by the LP over
groups of equal size without Gale's cuts (Kelley's cutting planes, the master re-solved by
SciPy each time).  ``fairsched optimum`` itself now runs that LP with Gale's cuts, an
incremental master and smoothing (:mod:`fairsched.lp.size_groups`); this script stays as the
record of the measurements that led there (``benchmarks/README.md``, "Two size classes").

Run as a plain script on an instance file of the accuracy utility, e.g. a draw written by
``bench_scheduler.py --save``::

    python benchmarks/bench_scheduler.py --untuned two-class --workers 10000 --k 100 --save two-class.toml
    python benchmarks/bench_size_groups.py two-class.toml [--iterations 40] [--time-limit 600]

**Why it brackets ``U_opt``.**  For ``f(S) = g(L(S))`` (the accuracy utility of Li, Liu and
Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular Maximization
Approach") workers of equal size are interchangeable in ``f``.  Summing the floor rows of
each group ``G`` of equal-size workers gives the aggregated LP (constraint aggregation,
Elhallaoui, Villeneuve, Soumis and Desaulniers, "Dynamic aggregation of set-partitioning
constraints in column generation", *Operations Research* 53, 2005)::

    U_agg = max Σ_S p_S f(S)  s.t.  Σ_S p_S |S ∩ G| >= Σ_{u∈G} r_u  (every G),  Σ p = 1,  p >= 0,

a relaxation: ``U_agg >= U_opt``.  The other way, a solution ``p`` of it (here: of its
restricted master, over the columns seen so far, worth ``v``) is worth ``v`` as a distribution
over actual sets meeting every floor when, in every group, marginals ``x_u >= r_u`` with
``Σ_{u∈G} x_u = M_G = E|S ∩ G|`` can be realised by choosing which members a set with
``c`` of them holds.  That is a transportation problem (counts ``c`` with supply
``c·P(C_G = c)``, members with demand ``x_u``, each arc at most ``P(C_G = c)``), feasible by
Gale's theorem exactly when the ``j`` largest ``x_u`` sum to at most
``E[min(C_G, j)] = Σ_{t<=j} P(C_G >= t)`` for every ``j``; the most even ``x`` (``x_u =
max(r_u, t)``, water-filling) is the one to test.  Choosing the members does not change ``f``
(equal sizes), so then ``U_opt >= v``: a certified lower bound, with no distribution written.

The script builds the start as ``fairsched optimum`` does for this utility (the systematic
sample and the balanced start, the better of the two), then runs column generation on the
aggregated LP from the start's sets with the exact accuracy pricing: every iteration prints
the restricted master's value ``v`` (a lower bound on ``U_opt`` when the test above holds),
and the Lagrangian bound at its prices (an upper bound on ``U_opt``, like any Lagrangian
bound), against the start's value and the best bound known before (the continuous
relaxation's, Jensen's).
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np
import scipy.sparse as sp

from fairsched.instances import load_instance
from fairsched.lp.floor_groups import _best_distribution as best_distribution, group_counts
from fairsched.lp.gale import capacities, most_even
from fairsched.lp.pricing.accuracy import AccuracyPricing
from fairsched.lp.pricing.balanced import balanced_pool
from fairsched.lp.pricing.initial import initial_pool, priority_order
from fairsched.lp.size_groups import size_groups
from fairsched.solvers.colgen import reduced_costs, relative_gap
from fairsched.solvers.columns import Columns
from fairsched.utilities import AccuracyUtility


def realisable(weights: np.ndarray, counts: sp.csr_array, groups: np.ndarray, r: np.ndarray,
               tol: float = 1e-12) -> str:
    """Gale's test (module docstring) in every group of two or more members: ``""`` where it
    holds, else where and why it fails first."""
    csc = counts.tocsc()
    sizes = np.bincount(groups)
    members = np.argsort(groups, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)])
    for g in np.flatnonzero(sizes > 1):
        lo, hi = csc.indptr[g], csc.indptr[g + 1]
        c = csc.data[lo:hi].astype(np.int64)
        w = weights[csc.indices[lo:hi]]
        size = int(sizes[g])
        capacity = capacities(c, w, size)  # E[min(C, j)], j = 1..size
        x = most_even(r[members[starts[g]:starts[g + 1]]], float(c @ w))
        demand = np.cumsum(np.sort(x)[::-1])
        short = np.flatnonzero(demand > capacity + tol)
        if short.size:
            j = int(short[0])
            return (f"group {g} ({size} workers): its {j + 1} largest marginals need {demand[j]:.4g}, "
                    f"E[min(C, {j + 1})] = {capacity[j]:.4g}")
    return ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("instance")
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--time-limit", type=float, default=600.0)
    args = parser.parse_args()
    began = time.perf_counter()
    problem = load_instance(args.instance)
    utility, k = problem.utility, problem.k
    if not isinstance(utility, AccuracyUtility):
        raise SystemExit("bench_size_groups.py: the instance's utility is not the accuracy utility")
    r = np.asarray(problem.r, dtype=float)
    sizes = np.asarray(utility.sizes, dtype=float)
    oracle = AccuracyPricing(utility, k, max_columns=50)
    relaxation = oracle.relaxation_duals(r)
    groups = size_groups(sizes, relaxation > 0)
    count = int(groups.max()) + 1
    need = np.bincount(groups, weights=r, minlength=count)
    priority = priority_order(utility, k)
    sample = initial_pool(utility, k, r, priority=priority)
    balanced, _ = balanced_pool(utility, k, r, beat=sample.value(), gap=1e-6, priority=priority)
    start = balanced if balanced.value() > sample.value() else sample
    first = oracle.price(relaxation)
    jensen = float(first.upper_bound - relaxation @ r)
    print(f"n = {r.size:,}, k = {k}: {count:,} groups ({np.unique(sizes).size:,} distinct sizes); start "
          f"{start.value():.12f} ({len(start.columns):,} sets), Jensen's bound {jensen:.12f}, relative gap "
          f"{relative_gap(start.value(), jensen):.3e} ({time.perf_counter() - began:.1f} s)", flush=True)
    columns, values = start.columns, np.asarray(start.values, dtype=float)
    counts = group_counts(columns, groups, count)
    # the control: a distribution over actual sets meeting every floor passes the test
    failure = realisable(np.asarray(start.probabilities, dtype=float), counts, groups, r)
    print(f"Gale's test on the start's own distribution (a control, it must hold): "
          f"{failure or 'holds'}", flush=True)
    best_bound, lower = jensen, -math.inf
    for iteration in range(1, args.iterations + 1):
        if time.perf_counter() - began > args.time_limit:
            break
        solved = best_distribution(values, counts.T, need)
        if solved.status != 0:
            print(f"aggregated master not solved: {solved.message}")
            break
        value, weights = -float(solved.fun), np.clip(solved.x, 0.0, None)
        failure = realisable(weights, counts, groups, r)
        if not failure:
            lower = max(lower, value)
        lam = np.clip(-solved.ineqlin.marginals, 0.0, None)[groups]
        found = oracle.price(lam)
        bound = float(found.upper_bound - lam @ r)
        best_bound = min(best_bound, bound) if found.exact else best_bound
        known = max(lower, start.value())
        print(f"[{time.perf_counter() - began:7.1f} s] iteration {iteration}: restricted U_agg {value:.12f} "
              f"({'realisable' if not failure else 'not realisable: ' + failure}); bound at its prices "
              f"{bound:.12f}; U_opt in [{known:.12f}, {best_bound:.12f}] (relative width "
              f"{relative_gap(known, best_bound):.3e})", flush=True)
        masks, found_values, reduced = reduced_costs(found, lam, -float(solved.eqlin.marginals[0]))
        entering = np.flatnonzero(reduced > 1e-12)
        if entering.size == 0:
            print("converged: U_agg reached")
            break
        added = Columns.from_masks(masks[entering])
        columns = Columns.concatenate([columns, added], columns.n)
        values = np.concatenate([values, found_values[entering]])
        counts = sp.vstack([counts, group_counts(added, groups, count)], format="csr")


if __name__ == "__main__":
    main()
