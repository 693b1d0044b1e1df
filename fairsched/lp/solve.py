"""``U_opt``: the best time-average utility of any fair policy (REFERENCE.md §2).

    U_opt = max Σ_S p_S f(S)  s.t.  Σ_{S ∋ u} p_S >= r_u,  Σ_S p_S = 1,  p >= 0

over stationary randomised policies (seed 003, Problem (5)). For a monotone ``f`` the
columns can be restricted to the ``C(n, k)`` sets of size exactly ``k``. The dual prices
``λ_u >= 0`` of the fairness rows are the utility lost per unit of ``r_u``.

Two methods: **enumeration** builds all ``C(n, k)`` columns and solves the LP once;
**column generation** (:func:`fairsched.solvers.colgen.column_generation`) grows a pool from a
feasible start (:func:`fairsched.lp.pricing.initial_pool`) with the pricing oracle of
:func:`fairsched.lp.pricing.pricing_for`, and certifies its answer with the Lagrangian bound
``U_opt <= max_{|S|=k}[f(S) + λ(S)] − λ·r``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from fairsched.errors import FairschedError, InfeasibleError, TooLargeError
from fairsched.lp.pricing import has_exact_pricing, initial_pool, pricing_for
from fairsched.problem import Problem
from fairsched.solvers import (InfeasibleLPError, TooManyColumnsError, count_k_subsets, k_subset_masks,
                     solve_distribution_lp)
from fairsched.solvers.colgen import column_generation, relative_gap

DEFAULT_MAX_COLUMNS = 1_000_000
#: ``method="auto"`` enumerates up to this many k-sets and uses column generation above.
#: Measured on a 2-core machine (best of 3): at C(16, 8) = 12,870 enumeration takes
#: 0.03-0.12 s and column generation is 1.2-1.9x faster for accuracy and concave-modular
#: but 2-5x slower for coverage and facility location (a HiGHS MILP per pricing call); at
#: C(18, 9) = 48,620 column generation wins for every kind (1.2-6.6x), at C(20, 10) by 3-11x.
ENUMERATION_THRESHOLD = 20_000
METHODS = ("auto", "enumeration", "column-generation")

Progress = Callable[[int, float, float, float], None]


@dataclass(frozen=True)
class Optimum:
    """The LP optimum: value, certified bound, the optimal distribution and the fairness prices.

    ``value`` is attained by the returned distribution (``support``, ``probabilities``);
    ``upper_bound`` is certified (LP duality for enumeration, the Lagrangian bound for
    column generation), so ``U_opt ∈ [value, upper_bound]``.  ``columns`` counts the
    k-sets the LP saw (all of them for enumeration, the generated pool otherwise);
    ``iterations`` the column-generation iterations (``None`` for enumeration);
    ``status`` is ``"optimal"`` or why column generation stopped early
    (``"time-limit"``, ``"iteration-limit"``, ``"converged"`` with a heuristic pricing).
    """

    value: float
    upper_bound: float
    method: str
    support: list[np.ndarray]
    probabilities: np.ndarray
    fairness_price: np.ndarray
    columns: int
    seconds: float
    iterations: int | None = None
    status: str = "optimal"

    @property
    def gap(self) -> float:
        """Absolute gap ``upper_bound − value`` (0 for an exact solve)."""
        return max(0.0, self.upper_bound - self.value)

    @property
    def relative_gap(self) -> float:
        """``(upper_bound − value) / max(|value|, 1e-12)``."""
        return relative_gap(self.value, self.upper_bound)

    def as_dict(self, problem: Problem) -> dict[str, Any]:
        """The JSON object of ``fairsched optimum --json`` (without the ``instance`` key)."""
        ids = problem.ids
        return {
            "n": problem.n,
            "k": problem.k,
            "value": self.value,
            "upper_bound": self.upper_bound,
            "gap": self.gap,
            "relative_gap": self.relative_gap,
            "iterations": self.iterations,
            "method": self.method,
            "support": [
                {"set": [ids[i] for i in S], "probability": float(p)}
                for S, p in zip(self.support, self.probabilities)
            ],
            "fairness_price": {w: float(v) for w, v in zip(ids, self.fairness_price)},
            "seconds": self.seconds,
        }


def optimum(problem: Problem, *, method: str = "auto", gap: float = 1e-9,
            max_columns: int = DEFAULT_MAX_COLUMNS, time_limit: float | None = None,
            progress: Progress | None = None, backend: str = "highs",
            pricing: str = "auto") -> Optimum:
    """Solve the LP for ``U_opt``.

    Parameters
    ----------
    method : {"auto", "enumeration", "column-generation"}
        ``auto`` enumerates when ``C(n, k) <= min(ENUMERATION_THRESHOLD, max_columns)``,
        when ``backend="cvxpy"``, or when the pricing would be heuristic (no exact oracle
        for the utility, see :func:`fairsched.lp.pricing.has_exact_pricing`) and
        ``C(n, k) <= max_columns``; it uses column generation otherwise.
    gap : float
        Relative gap ``(upper_bound − value) / |value|`` at which column generation stops.
    max_columns : int
        Enumeration limit: ``method="enumeration"`` (or the cvxpy backend) refuses with
        ``TooLargeError`` above it; ``C(22, 11) = 705,432`` columns take about 40 s and 200 MB.
    time_limit : float, optional
        Seconds; column generation then returns its best distribution and certified bound
        (``status="time-limit"``), enumeration raises.
    progress : callable, optional
        ``progress(iteration, lower, upper, relative_gap)`` after every column-generation
        iteration (``lower`` is ``-inf`` until the floors are met).
    backend : {"highs", "cvxpy"}
        LP solver for enumeration; column generation always uses HiGHS.
    pricing : str
        Pricing oracle for column generation (:func:`fairsched.lp.pricing.pricing_for`).
    """
    if method not in METHODS:
        raise FairschedError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    if backend not in ("highs", "cvxpy"):
        raise FairschedError(f"unknown backend {backend!r}; expected 'highs' or 'cvxpy'")
    count = count_k_subsets(problem.n, problem.k)
    if method == "auto":
        small = count <= min(ENUMERATION_THRESHOLD, max_columns)
        # Without an exact pricing oracle column generation only brackets U_opt, so an
        # instance that can still be enumerated is enumerated.
        inexact = pricing == "greedy" or not has_exact_pricing(problem.utility, problem.k)
        enumerate_ = small or backend == "cvxpy" or (inexact and count <= max_columns)
        method = "enumeration" if enumerate_ else "column-generation"
    if method == "enumeration":
        return _enumerate(problem, backend, max_columns, time_limit)
    if backend != "highs":
        raise FairschedError("column generation uses HiGHS; the cvxpy backend needs method='enumeration'")
    return _column_generation(problem, gap=gap, time_limit=time_limit, progress=progress, pricing=pricing)


def _enumerate(problem: Problem, backend: str, max_columns: int, time_limit: float | None) -> Optimum:
    start = time.perf_counter()
    try:
        members = k_subset_masks(problem.n, problem.k, max_columns=max_columns)
    except TooManyColumnsError as exc:
        raise TooLargeError(str(exc)) from None
    values = problem.utility.values(members)
    try:
        result = solve_distribution_lp(values, members, np.asarray(problem.r, dtype=float),
                                       backend=backend, time_limit=time_limit)
    except InfeasibleLPError as exc:
        raise InfeasibleError(f"infeasible: {exc}") from None
    keep = result.support()
    order = keep[np.argsort(-result.probabilities[keep], kind="stable")]
    return Optimum(
        value=float(result.value),
        upper_bound=float(max(result.value, result.dual_bound)),
        method=f"enumeration+{result.backend}",
        support=[np.flatnonzero(members[i]) for i in order],
        probabilities=result.probabilities[order],
        fairness_price=np.asarray(result.fairness_duals, dtype=float),
        columns=int(members.shape[0]),
        seconds=time.perf_counter() - start,
    )


def _column_generation(problem: Problem, *, gap: float, time_limit: float | None,
                       progress: Progress | None, pricing: str) -> Optimum:
    start = time.perf_counter()
    r = np.asarray(problem.r, dtype=float)
    try:
        oracle = pricing_for(problem.utility, problem.k, pricing)
    except ValueError as exc:
        raise FairschedError(str(exc)) from None
    if time_limit is not None and hasattr(oracle, "deadline"):
        oracle.deadline = start + time_limit
    if hasattr(oracle, "set_rel_gap"):
        # A MIP gap on the pricing objective f(S) + λ(S) (about U_opt's size) feeds straight
        # into the certified bound, so it is kept below the requested gap.
        oracle.set_rel_gap(min(1e-4, max(1e-9, gap / 10)))
    pool = initial_pool(problem.utility, problem.k, r)
    remaining = None if time_limit is None else max(1e-3, time_limit - (time.perf_counter() - start))
    guesses = [oracle.relaxation_duals(r)] if hasattr(oracle, "relaxation_duals") else []
    try:
        result = column_generation(problem.utility.values(pool), pool, r, oracle, gap=gap,
                                   time_limit=remaining, progress=progress, dual_guesses=guesses,
                                   heuristic=getattr(oracle, "heuristic", None))
    except InfeasibleLPError as exc:
        raise InfeasibleError(f"infeasible: {exc}") from None
    if oracle.exact:
        kind = "exact" if result.pricing_exact else "bounded"
        label = f"{kind}-pricing({oracle.name})"
    else:
        label = f"{oracle.name}-pricing"
    order = np.argsort(-result.probabilities, kind="stable")
    converged = result.status == "converged" and result.pricing_exact
    return Optimum(
        value=float(result.value),
        upper_bound=float(result.upper_bound),
        method=f"column-generation+{label}",
        support=[np.flatnonzero(result.members[i]) for i in order],
        probabilities=result.probabilities[order],
        fairness_price=np.asarray(result.fairness_duals, dtype=float),
        columns=int(result.columns),
        seconds=time.perf_counter() - start,
        iterations=int(result.iterations),
        status="optimal" if converged else result.status,
    )
