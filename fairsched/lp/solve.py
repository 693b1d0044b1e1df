"""``U_opt``: the best time-average utility of any fair policy (``docs/mathematics.md`` §2–§3).

    U_opt = max Σ_S p_S f(S)  s.t.  Σ_{S ∋ u} p_S >= r_u,  Σ_S p_S = 1,  p >= 0

over stationary randomised policies (Li, Liu and Ji, "Federated Learning with Fair Worker
Selection: A Multi-Round Submodular Maximization Approach", 2021, Problem (5)). For a
monotone ``f`` the columns can be restricted to the ``C(n, k)`` sets of size exactly ``k``. The dual prices
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

from fairsched.errors import FairschedError, InfeasibleError, SolverFailedError, TooLargeError
from fairsched.lp.result import Optimum
from fairsched.lp.pricing import has_exact_pricing, initial_pool, pricing_for
from fairsched.availability import Availability
from fairsched.lp.availability import availability_optimum
from fairsched.problem import Problem
from fairsched.solvers import (InfeasibleLPError, SolverError, TooManyColumnsError, count_k_subsets,
                               k_subset_masks, solve_distribution_lp)
from fairsched.solvers.colgen import column_generation

DEFAULT_MAX_COLUMNS = 1_000_000
#: ``method="auto"`` enumerates up to this many k-sets and uses column generation above.
#: Measured on a 2-core machine (best of 3): at C(16, 8) = 12,870 enumeration takes
#: 0.03-0.12 s and column generation is 1.2-1.9x faster for accuracy and concave-modular
#: but 2-5x slower for coverage and facility location (a HiGHS MILP per pricing call); at
#: C(18, 9) = 48,620 column generation wins for every kind (1.2-6.6x), at C(20, 10) by 3-11x.
ENUMERATION_THRESHOLD = 20_000
METHODS = ("auto", "enumeration", "column-generation")

Progress = Callable[[int, float, float, float], None]


def optimum(problem: Problem, *, method: str = "auto", gap: float = 1e-9,
            max_columns: int = DEFAULT_MAX_COLUMNS, time_limit: float | None = None,
            progress: Progress | None = None, backend: str = "highs",
            pricing: str = "auto", availability: Availability | None = None) -> Optimum:
    """Solve the LP for ``U_opt``, the best time-average utility of any fair stationary policy.

        U_opt = max Σ_S p_S f(S)  s.t.  Σ_{S ∋ u} p_S >= r_u,  Σ_S p_S = 1,  p >= 0

    (Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round
    Submodular Maximization Approach", Problem (5)). Under availability (``availability``,
    or else the problem's own availability probabilities) it is the LP of policies that see
    each round's available set (:func:`fairsched.lp.availability.availability_optimum`).

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
    availability : Availability, optional
        Solve the availability LP for this availability model (a trace or probabilities);
        default: the problem's ``availability`` probabilities, if any.

    Raises
    ------
    InfeasibleError
        The floors cannot be met.
    TooLargeError
        Enumeration (or the availability LP) would exceed ``max_columns``.
    SolverFailedError
        The LP solver stopped without an answer (e.g. enumeration at ``time_limit``).

    Examples
    --------
    >>> import fairsched as fs
    >>> opt = fs.optimum(fs.load_instance("paper"))
    >>> round(opt.value, 6), opt.status, opt.success
    (0.845512, 'optimal', True)
    >>> opt.gap <= 1e-9 and len(opt.support) <= 11
    True
    """
    if availability is None and problem.availability is not None:
        availability = Availability(probabilities=problem.availability)
    if availability is not None:
        return availability_optimum(problem, availability, max_columns=max_columns)
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
    except SolverError as exc:
        hint = (" (raise the time limit, or use column generation, which returns certified bounds "
                "at its time limit)" if time_limit is not None else "")
        raise SolverFailedError(f"the enumeration LP was not solved: {exc}{hint}") from None
    keep = result.support()
    order = keep[np.argsort(-result.probabilities[keep], kind="stable")]
    return Optimum(
        value=float(result.value),
        upper_bound=float(max(result.value, result.dual_bound)),
        method=f"enumeration+{result.backend}",
        support=[np.flatnonzero(members[i]) for i in order],
        probabilities=result.probabilities[order],
        fairness_price=np.asarray(result.fairness_price, dtype=float),
        columns=int(members.shape[0]),
        status="optimal",
        message=f"enumeration of all {members.shape[0]:,} k-sets, solved exactly by {result.backend}",
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
    except SolverError as exc:
        raise SolverFailedError(f"column generation failed: {exc}") from None
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
        fairness_price=np.asarray(result.fairness_price, dtype=float),
        columns=int(result.columns),
        iterations=int(result.iterations),
        status="optimal" if converged else result.status,
        success=result.status == "optimal" or converged,
        message=result.message,
        seconds=time.perf_counter() - start,
    )
