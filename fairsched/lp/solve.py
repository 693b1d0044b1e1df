"""``U_opt``: the best time-average utility of any fair policy (``docs/mathematics.md`` §2–§3).

    U_opt = max Σ_S p_S f(S)  s.t.  Σ_{S ∋ u} p_S >= r_u,  Σ_S p_S = 1,  p >= 0

(with caps also ``Σ_{S ∋ u} p_S <= c_u``, priced by ``ν_u >= 0``) over stationary randomised policies (Li, Liu and Ji, "Federated Learning with Fair Worker
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

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fairsched.availability import Availability
from fairsched.errors import (
    FairschedError,
    InfeasibleError,
    SolverFailedError,
    TooLargeError,
)
from fairsched.lp.availability import availability_optimum
from fairsched.lp.floor_groups import MAX_ROW_SHARE, floor_groups, grouped_column_generation
from fairsched.lp.pricing import has_exact_pricing, initial_pool, pricing_for
from fairsched.lp.pricing.balanced import balanced_pool, level_duals
from fairsched.lp.pricing.exchange import exchange_columns
from fairsched.lp.pricing.initial import StartingPool, column_values, priority_order
from fairsched.lp.pricing.recoupling import recoupled
from fairsched.lp.pricing.round_swaps import swept_distribution
from fairsched.lp.pricing.schedule_search import better_start, default_rounds, schedule_search
from fairsched.lp.result import Optimum
from fairsched.lp.size_groups import size_group_bound, size_groups
from fairsched.problem import Problem
from fairsched.solvers import (
    InfeasibleLPError,
    SolverError,
    TooManyColumnsError,
    count_k_subsets,
    k_subset_masks,
    solve_distribution_lp,
)
from fairsched.solvers.colgen import (
    DEFAULT_GAP,
    MASTER_TOLERANCE,
    POOL_NONZEROS,
    TAILING_OFF,
    PricingResult,
    column_generation,
    relative_gap,
)
from fairsched.solvers.columns import Columns
from fairsched.solvers.lp import LPTimeLimitError, check_floors, lagrangian_bound
from fairsched.utilities.accuracy import AccuracyUtility
from fairsched.utilities.coverage import Coverage

DEFAULT_MAX_COLUMNS = 1_000_000
#: ``method="auto"`` enumerates up to this many k-sets and uses column generation above.
#: Measured on a 2-core machine (best of 3): at C(16, 8) = 12,870 enumeration takes
#: 0.03-0.12 s and column generation is 1.2-1.9x faster for accuracy and concave-modular
#: but 2-5x slower for coverage and facility location (a HiGHS MILP per pricing call); at
#: C(18, 9) = 48,620 column generation wins for every kind (1.2-6.6x), at C(20, 10) by 3-11x.
ENUMERATION_THRESHOLD = 20_000
METHODS = ("auto", "enumeration", "column-generation")
#: columns a pricing call returns (the heuristic's local optima and their best swaps, the
#: MILP's improving solutions): as many as column generation lets enter per iteration, since
#: on the MILP-priced kinds the lower bound climbs by about one column's worth per master
#: solve (``benchmarks/bench_pricing.py``)
PRICING_COLUMNS = 50
#: share of the time limit by which the schedule search for a starting pool must end (it
#: starts after the sample's own search).  At 0.25 the mixture of
#: ``benchmarks/bench_pricing.py`` took 90.6-112.1 s to its certified 1e-4 (three runs),
#: at 0.1 79.6-94.3 s (two), 82.7-85.9 s without the search; facility location reached
#: 4.5e-3 and 5.2e-3
SCHEDULE_SHARE = 0.1
#: share of the time limit by which the balanced decomposition of an accuracy utility's
#: starting marginals must end (its work is capped too: about 0.1 s at n = 1,000)
BALANCE_SHARE = 0.5
#: without a time limit, the size groups' phase (accuracy, after column generation tails
#: off) gets at most this many times the time spent before it, or :data:`SIZE_GROUP_SECONDS`
#: if more.  Two-class draws (session 57, the start then 45 s at ``n = 10,000``): ``n = 1,000,
#: k = 50`` certified after 0.6x-1.1x, ``n = 2,000`` seed 8 after 2.1x, ``n = 10,000, k = 100``
#: seed 7 after 2.5x; ``n = 2,000`` seed 7 stops at 4x with 2.61e-6 (from 1.36e-5).  With a
#: time limit it may use all of it
SIZE_GROUP_SHARE = 4.0
#: ... and at least this many seconds: with the start's fit of bimodal sizes 4.5 times as fast
#: (10 s at ``n = 10,000``), 4x the time before stopped seed 7 at 1.02e-6 after 82 s of the
#: phase, its gap still shrinking
SIZE_GROUP_SECONDS = 120.0
#: where the size groups' phase may follow, column generation over every floor hands over to
#: it once its gap did not halve in this many iterations, instead of its own
#: :data:`~fairsched.solvers.colgen.TAILING_OFF`; where the phase then stops on its own short of
#: the gap (not at its budget), column generation over every floor resumes from the best
#: distribution and bound with its own rule, for what is left of the phase's budget
#: (:func:`_resume`).  Two-class ``n = 1,000, k = 20`` seed 7: column generation alone shrank
#: its gap by a third every 20 iterations of 2–3 s and certified after 559.9 s; handing over
#: after its tenth, 56–77 s in all
HAND_OVER = (10, 0.5)
#: ... and its tailing-off rules wait this share of the larger of the time before it and
#: :data:`SIZE_GROUP_SECONDS` (at least 30 s): where the phase finds nothing it costs little,
#: and where column generation handed over early the phase's bound may stand for a while
#: (two-class ``n = 2,000``, ``k = 50``, seed 8: 7 s and 50 iterations, then it came down and
#: certified after 77.6 s; stopped at 7 s, the phase and resumed column generation ended at
#: 1.0e-5)
SIZE_GROUP_PATIENCE = 0.25
#: recoupling (:func:`_recouple`) is tried on supports of at most this many members in all: its
#: passes hold a few int64 copies of them and may quadruple them
RECOUPLE_MEMBERS = 20_000_000

Progress = Callable[[int, float, float, float], None]


def optimum(problem: Problem, *, method: str = "auto", gap: float = DEFAULT_GAP,
            max_columns: int = DEFAULT_MAX_COLUMNS, time_limit: float | None = None,
            progress: Progress | None = None, backend: str = "highs",
            pricing: str = "auto", availability: Availability | None = None, support: bool = True) -> Optimum:
    """Solve the LP for ``U_opt``, the best time-average utility of any fair stationary policy.

        U_opt = max Σ_S p_S f(S)  s.t.  Σ_{S ∋ u} p_S >= r_u,  Σ_S p_S = 1,  p >= 0

    (Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round
    Submodular Maximization Approach", Problem (5)). Under availability (``availability``,
    or else the problem's own availability probabilities) it is the LP of policies that see
    each round's available set (:func:`fairsched.lp.availability.availability_optimum`).

    The answer is a certified bracket ``value <= U_opt <= upper_bound``: ``value`` is attained
    by the returned distribution, and ``upper_bound`` is the Lagrangian bound
    ``max_{|S|=k}[f(S) + λ(S)] − λ·r`` at ``λ = fairness_price``, with the maximum taken over
    every enumerated column (enumeration) or certified by the pricing oracle (column
    generation); see ``docs/mathematics.md`` §2–§3.  ``status == "optimal"`` (and
    ``success``) exactly when the relative gap ``(upper_bound − value)/|value|`` is at most
    ``gap``.

    **The stopping rule** ``gap = 1e-6`` (relative) is the smallest round number floating
    point certifies with a margin.  The bound side is exact arithmetic on float64 inputs
    (round-off about ``1e-15`` relative; accuracy pricing is exact to ``1e-12``, MILP pricing
    is asked for a MIP gap of ``gap/10``).  The value side rests on HiGHS, which solves the
    master to primal and dual feasibility tolerances ``ε = 1e-9`` (on the master scaled to
    ``max |f| = 1``): its distribution may miss a floor by ``ε``, worth up to ``ε·‖λ‖₁`` of
    utility, and it is optimal, and columns enter, only up to ``ε·max(1, |μ|)`` in reduced
    cost.  Column generation therefore cannot close gaps much below
    ``ε·(2 + ‖λ‖₁ + |μ|)/|U_opt|``: ``1e-9`` to ``1e-7`` on fairsched's instances (``‖λ‖₁``
    reaches about ``100·|U_opt|`` when fairness is costly).  ``1e-6`` is at least ten times
    that floor.  Smaller gaps may be asked for; when floating point cannot certify them the
    run ends ``"stalled"`` or ``"tailing-off"`` with its certified bracket.

    Parameters
    ----------
    method : {"auto", "enumeration", "column-generation"}
        ``auto`` enumerates when ``C(n, k) <= min(ENUMERATION_THRESHOLD, max_columns)``,
        when ``backend="cvxpy"``, or when the pricing would be heuristic (no exact oracle
        for the utility, see :func:`fairsched.lp.pricing.has_exact_pricing`) and
        ``C(n, k) <= max_columns``; it uses column generation otherwise.
    gap : float
        The stopping rule above: relative gap ``(upper_bound − value) / |value|`` at which the
        answer counts as optimal (default ``1e-6``).
    max_columns : int
        Enumeration limit: ``method="enumeration"`` (or the cvxpy backend) refuses with
        ``TooLargeError`` above it; ``C(22, 11) = 705,432`` columns take about 40 s and 200 MB.
    time_limit : float, optional
        Seconds for the whole computation: building the starting pool, every LP solve
        (HiGHS gets the remaining time) and pricing.  At the limit the best distribution
        found and the best certified bound are returned with ``status="time-limit"`` and
        ``success`` false.
    progress : callable, optional
        ``progress(iteration, lower, upper, relative_gap)`` after every column-generation
        iteration, and at iteration 0 with the starting distribution's value (``lower`` is
        ``-inf`` until the floors are met).
    backend : {"highs", "cvxpy"}
        LP solver for enumeration; column generation always uses HiGHS.
    pricing : str
        Pricing oracle for column generation (:func:`fairsched.lp.pricing.pricing_for`).
    availability : Availability, optional
        Solve the availability LP for this availability model (a trace or probabilities);
        default: the problem's ``availability`` probabilities, if any.
    support : bool
        ``False`` for the value and its certificate only: where column generation certifies
        the optimum, the distribution's sets are not gathered, and ``support`` and
        ``probabilities`` are empty (``value`` is still what that distribution is worth).
        At cross-device scale the support is about ``n`` sets of ``k``, gathered beside the
        starting sample that holds most of them: at ``n = 10^6``, ``k = 1,000`` that is
        3.7 GiB of a peak of 8 GiB.  Enumeration, the availability LP and runs that stop
        short of the gap return their support anyway.

    Raises
    ------
    InfeasibleError
        The floors cannot be met.
    TooLargeError
        Enumeration (or the availability LP) would exceed ``max_columns``.
    SolverFailedError
        The LP solver failed (not at the time limit: that returns bounds).

    Examples
    --------
    >>> import fairsched as fs
    >>> opt = fs.optimum(fs.load_instance("paper"))
    >>> round(opt.value, 6), opt.status, opt.success
    (0.845512, 'optimal', True)
    >>> opt.gap <= 1e-6 and len(opt.support) <= 11
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
    if backend == "cvxpy" and problem.caps is not None:
        raise FairschedError("the cvxpy backend does not take caps; use backend='highs'")
    if not (math.isfinite(gap) and gap >= 0):
        raise FairschedError(f"gap must be a number >= 0, got {gap}")
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise FairschedError(f"time_limit must be a finite number of seconds > 0, got {time_limit}")
    count = count_k_subsets(problem.n, problem.k)
    if method == "auto":
        small = count <= min(ENUMERATION_THRESHOLD, max_columns)
        # Without an exact pricing oracle column generation only brackets U_opt, so an
        # instance that can still be enumerated is enumerated.
        inexact = pricing == "greedy" or not has_exact_pricing(problem.utility, problem.k)
        enumerate_ = small or backend == "cvxpy" or (inexact and count <= max_columns)
        method = "enumeration" if enumerate_ else "column-generation"
    if method == "enumeration":
        return _enumerate(problem, backend, max_columns, time_limit, gap)
    if backend != "highs":
        raise FairschedError("column generation uses HiGHS; the cvxpy backend needs method='enumeration'")
    return _column_generation(problem, gap=gap, time_limit=time_limit, progress=progress, pricing=pricing,
                              keep_support=support)


def _enumerate(problem: Problem, backend: str, max_columns: int, time_limit: float | None,
               gap: float) -> Optimum:
    """All ``C(n, k)`` columns, one LP; the bound is recomputed over the columns, not read from
    the solver's duals: ``max_S [f(S) + λ(S)] − λ·r`` at the solver's ``λ`` clipped at 0."""
    start = time.perf_counter()
    try:
        members = k_subset_masks(problem.n, problem.k, max_columns=max_columns)
    except TooManyColumnsError as exc:
        raise TooLargeError(str(exc)) from None
    values = problem.utility.values(members)
    r = np.asarray(problem.r, dtype=float)
    caps = problem.caps
    remaining = None if time_limit is None else time_limit - (time.perf_counter() - start)
    if remaining is not None and remaining <= 0:  # building the columns used up the budget
        try:
            check_floors(members, r)  # on all k-sets: the floors' only obstructions
        except InfeasibleLPError as exc:
            raise InfeasibleError(f"infeasible: {exc}") from None
        return _enumeration_at_time_limit(problem, values, members, r, start, gap)
    try:
        result = solve_distribution_lp(values, members, r, backend=backend, time_limit=remaining, caps=caps)
    except InfeasibleLPError as exc:
        raise InfeasibleError(f"infeasible: {exc}") from None
    except LPTimeLimitError:
        return _enumeration_at_time_limit(problem, values, members, r, start, gap)
    except SolverError as exc:
        raise SolverFailedError(f"the enumeration LP was not solved: {exc}") from None
    lam = np.clip(np.asarray(result.fairness_price, dtype=float), 0.0, None)
    nu = None if caps is None else np.asarray(result.cap_price, dtype=float)
    pricing_bound, upper = lagrangian_bound(values, members, r, lam if nu is None else lam - nu, caps)
    value = float(result.value)
    keep = result.support()
    order = keep[np.argsort(-result.probabilities[keep], kind="stable")]
    certified = relative_gap(value, max(upper, value))
    status = "optimal" if certified <= gap else "stalled"
    message = (f"enumeration of all {members.shape[0]:,} k-sets, solved by {result.backend}; "
               f"the bound recomputed over every column certifies a relative gap of {certified:.2g}")
    if status != "optimal":
        message += f", above the requested {gap:g} (the solver's tolerances limit it)"
    return Optimum(
        value=value,
        upper_bound=float(max(upper, value)),
        method=f"enumeration+{result.backend}",
        support=[np.flatnonzero(members[i]) for i in order],
        probabilities=result.probabilities[order],
        fairness_price=lam,
        columns=int(members.shape[0]),
        status=status,
        success=status == "optimal",
        message=message,
        seconds=time.perf_counter() - start,
        pricing_bound=pricing_bound,
        master_fairness_price=lam,
        cap_price=nu,
    )


def _enumeration_at_time_limit(problem: Problem, values: np.ndarray, members: np.ndarray, r: np.ndarray,
                               start: float, gap: float) -> Optimum:
    """The LP stopped at the time limit: the starting distribution of column generation as the
    value, and the Lagrangian bound at ``λ = 0`` (``max_S f(S)``) over every column."""
    pool = initial_pool(problem.utility, problem.k, r, caps=problem.caps)
    lam = np.zeros(problem.n)
    pricing_bound, upper = lagrangian_bound(values, members, r, lam)
    value = pool.value()
    certified = relative_gap(value, max(upper, value))
    used = np.flatnonzero(pool.probabilities > 0)
    sets = pool.columns.take(used).to_sets()
    order = np.argsort(-pool.probabilities[used], kind="stable")
    return Optimum(
        value=value,
        upper_bound=max(upper, value),
        method="enumeration+highs",
        support=[sets[i] for i in order],
        probabilities=pool.probabilities[used][order],
        fairness_price=lam,
        columns=int(members.shape[0]),
        # the stopping rule decides "optimal", as everywhere; a stop short of it is "time-limit"
        status="optimal" if certified <= gap else "time-limit",
        success=certified <= gap,
        message=(f"the enumeration of {members.shape[0]:,} k-sets reached the time limit before its LP "
                 f"was solved: value {value:.10g} of a systematic sample meeting the floors, certified "
                 f"upper bound {max(upper, value):.10g} (max f), relative gap {certified:.2g}"),
        seconds=time.perf_counter() - start,
        pricing_bound=pricing_bound,
        cap_price=None if problem.caps is None else np.zeros(problem.n),
    )


@dataclass
class _Reported:
    """What :func:`optimum` reports from column generation, before the size groups' phase may
    improve it."""

    value: float
    upper_bound: float
    support: Columns
    probabilities: np.ndarray
    fairness_price: np.ndarray
    pricing_bound: float
    master_fairness_price: np.ndarray | None
    status: str
    message: str
    iterations: int

    def take(self, *, gap: float, support: Columns | None = None, probabilities: np.ndarray | None = None,
             value: float = -math.inf, master_fairness_price: np.ndarray | None = None,
             bound: float = math.inf, prices: np.ndarray | None = None,
             pricing_bound: float = math.inf) -> tuple[bool, bool, float]:
        """Take a distribution worth more (``value``) and a lower certified ``bound`` (with its
        ``prices`` and ``pricing_bound``) where each improves; the status becomes ``"optimal"``
        once the gap is within ``gap``.  Returns which were taken and the relative gap."""
        took_distribution = support is not None and value > self.value
        if took_distribution:
            self.support, self.probabilities, self.value = support, probabilities, float(value)
            self.master_fairness_price = master_fairness_price
        took_bound = bound < self.upper_bound
        if took_bound:
            self.fairness_price, self.pricing_bound, self.upper_bound = prices, float(pricing_bound), float(bound)
        self.upper_bound = max(self.upper_bound, self.value)
        current = relative_gap(self.value, self.upper_bound)
        if current <= gap:
            self.status = "optimal"
        return took_distribution, took_bound, current


def _phase_groups(problem: Problem, oracle: object, relaxation: np.ndarray | None) -> np.ndarray | None:
    """The size groups of :func:`_size_group_phase` where it may run (accuracy without caps,
    exact pricing, the relaxation's prices known, the groups of equal size leaving at most
    :data:`~fairsched.lp.floor_groups.MAX_ROW_SHARE` of the rows), else None."""
    if (type(problem.utility) is not AccuracyUtility or problem.caps is not None or relaxation is None
            or not oracle.exact):
        return None
    groups = size_groups(problem.utility.sizes, relaxation > 0)
    # sizes nearly all distinct: the aggregated LP would be the LP over every floor
    return groups if int(groups.max()) + 1 <= MAX_ROW_SHARE * problem.n else None


def _size_group_phase(problem: Problem, oracle: object, r: np.ndarray, relaxation: np.ndarray,
                      groups: np.ndarray, result: object, reported: _Reported, *, gap: float,
                      ends: float, budget_only: bool, spent: float, progress: Progress | None) -> str:
    """Run :func:`fairsched.lp.size_groups.size_group_bound` over ``groups`` until ``ends`` (a
    ``time.perf_counter()`` value: the time limit's deadline, else the phase's own budget,
    ``budget_only``) after column generation over every floor stopped short of the gap, and
    take its distribution (if worth more) and its bound (if lower) into ``reported``; return
    how the phase ended (its ``status``, ``"budget"`` at its own time budget, ``"failed"``)."""
    try:
        centre, centre_pricing_bound = _centre(oracle, relaxation, result)
        sized = size_group_bound(oracle.price, r, groups,
                                 result.support, result.values, centre=centre,
                                 centre_pricing_bound=centre_pricing_bound,
                                 lower=result.value, gap=gap, deadline=ends,
                                 patience=SIZE_GROUP_PATIENCE * max(spent, SIZE_GROUP_SECONDS), progress=progress,
                                 first_iteration=reported.iterations, primal_columns=_trades(problem.utility),
                                 quick=getattr(oracle, "quick", None))
    except SolverError as exc:  # column generation's result stands
        reported.message += f"; the LP over groups of equal size failed ({exc})"
        return "failed"
    reported.iterations += sized.iterations
    worth = -math.inf if sized.support is None else \
        float(sized.probabilities @ column_values(problem.utility, sized.support))
    # the realised distribution is no master's solution: no master prices go with it
    took_distribution, took_bound, current = reported.take(
        gap=gap, support=sized.support, probabilities=sized.probabilities, value=worth,
        bound=sized.bound, prices=sized.prices, pricing_bound=sized.pricing_bound)
    changes = ([f"a distribution realised from it, worth {worth:.10g}"] if took_distribution else []) + \
        ([f"its bound {sized.bound:.10g}"] if took_bound else [])
    ended = "budget" if sized.status == "time-limit" and budget_only else sized.status
    if ended == "time-limit" and reported.status != "optimal":  # the run's time limit stopped it
        reported.status = "time-limit"
    ending = f"{_phase_end(ended)} after {sized.iterations} iterations, {sized.cuts} of Gale's cuts"
    if changes:
        reported.message = (f"{reported.status}: the LP over groups of equal size ({ending}) gave "
                            f"{' and '.join(changes)}; relative gap {current:.3g}")
    else:
        reported.message += f"; the LP over groups of equal size improved nothing ({ending})"
    return ended


def _resume(problem: Problem, oracle: object, r: np.ndarray, reported: _Reported, *, gap: float,
            deadline: float, budget_only: bool, heuristic: object, trades: object,
            progress: Progress | None) -> int:
    """Column generation over every floor again, with its own stopping rule and until
    ``deadline`` (the time limit's, else what is left of the phase's budget), from the best
    distribution and bound so far (``reported``, updated in place), where it handed over to
    the size groups' phase early (:data:`HAND_OVER`) and the phase stopped on its own short of
    the gap: what each side certified is kept.  Returns the columns it generated.  At the
    phase's budget the status stays what it was (no time limit was given)."""
    first = reported.iterations

    def shifted(iteration: int, lower: float, upper: float, current: float) -> None:
        progress(first + iteration, lower, upper, current)

    known = [(reported.fairness_price, reported.pricing_bound)] if math.isfinite(reported.pricing_bound) else []
    try:
        resumed = column_generation(column_values(problem.utility, reported.support), reported.support, r, oracle,
                                    gap=gap, deadline=deadline, progress=None if progress is None else shifted,
                                    known_bounds=known, heuristic=heuristic,
                                    start_probabilities=reported.probabilities, primal_columns=trades,
                                    tailing_off=TAILING_OFF)
    except SolverError as exc:  # what was certified stands
        reported.message += f"; column generation over every floor, resumed, failed ({exc})"
        return 0
    reported.iterations += int(resumed.iterations)
    _, _, current = reported.take(
        gap=gap, support=resumed.support, probabilities=resumed.probabilities, value=resumed.value,
        master_fairness_price=resumed.master_fairness_price, bound=resumed.upper_bound,
        prices=resumed.fairness_price, pricing_bound=resumed.pricing_bound)
    if reported.status != "optimal" and (resumed.status != "time-limit" or not budget_only):
        reported.status = resumed.status
    until = " until the phase's budget" if budget_only and resumed.status == "time-limit" else ""
    reported.message = (f"{reported.status}: column generation over every floor, resumed after the LP over "
                        f"groups of equal size{until} ({resumed.message}); relative gap {current:.3g}; "
                        f"before it: {reported.message}")
    return int(resumed.columns)


def _recouple(problem: Problem, reported: _Reported, *, gap: float, deadline: float | None) -> None:
    """Where ``reported`` is an accuracy utility's distribution short of the gap, recouple the
    coarse and fine parts of its sets (:func:`~fairsched.lp.pricing.recoupling.recoupled`)
    until its value is within ``gap`` of its bound or ``deadline``, and take the result where
    it is worth more: every marginal is kept, so it meets the floors (and caps) as the
    distribution it came from does."""
    if (type(problem.utility) is not AccuracyUtility or reported.status == "optimal"
            or reported.support.nnz > RECOUPLE_MEMBERS):
        return
    support, probabilities, value, passes = recoupled(
        lambda sets: column_values(problem.utility, sets), reported.support, reported.probabilities,
        problem.utility.sizes, target=reported.upper_bound / (1.0 + gap), deadline=deadline)
    if not passes:
        return
    took, _, current = reported.take(gap=gap, support=support, probabilities=probabilities, value=value,
                                     master_fairness_price=None)
    if took:
        reported.message = (f"{reported.status}: the sets' coarse and fine parts recoupled ({passes} passes), "
                            f"worth {value:.10g}; relative gap {current:.3g}; before: {reported.message}")


def _phase_end(ended: str) -> str:
    """How the size groups' phase ended, in words (``"budget"``: its own time budget, told apart
    from the time limit)."""
    if ended == "budget":
        return f"its budget (the larger of {SIZE_GROUP_SHARE:g}x the time before it and {SIZE_GROUP_SECONDS:g} s)"
    return ended


def _centre(oracle: object, relaxation: np.ndarray, result: object) -> tuple[np.ndarray, float]:
    """The prices the size groups' phase starts its smoothing from, with their certified
    pricing bound: column generation's certificate (the best bound it met; it priced the relaxation's
    prices first, so that is at most Jensen's), else the relaxation's prices, priced.  From
    Jensen's bound instead, the phase's own gap, which its stopping rules watch, ignored what
    column generation had already certified."""
    if math.isfinite(result.pricing_bound):
        return np.asarray(result.fairness_price, dtype=float), float(result.pricing_bound)
    return relaxation, float(oracle.price(relaxation).upper_bound)


def _joined_start(pool: StartingPool, other: StartingPool | None, r: np.ndarray,
                  caps: np.ndarray | None) -> StartingPool:
    """:func:`~fairsched.lp.pricing.schedule_search.better_start` (both pools' sets, weighted
    by the better distribution) where the start's sets can join column generation's master
    one by one (at most :data:`~fairsched.solvers.colgen.POOL_NONZEROS` members in all); beyond
    that the master takes the start as one aggregated column, so the better pool alone is
    kept where its distribution meets the floors (and caps): the other's sets would only be
    carried along (accuracy, Pareto sizes, ``n = 200,000``, ``k = 1,000``: the sample's 0.5
    GiB, and a 1.1 GiB join of it with the balanced pool, at the peak of ``fairsched run``)."""
    if other is None or pool.columns.nnz + other.columns.nnz <= POOL_NONZEROS:
        return better_start(pool, other)
    best = other if other.value() > pool.value() else pool
    return best if _meets(best, r, caps) else better_start(pool, other)


def _meets(pool: StartingPool, r: np.ndarray, caps: np.ndarray | None) -> bool:
    """Whether the pool's distribution meets the floors (and caps) within column generation's
    :data:`~fairsched.solvers.colgen.MASTER_TOLERANCE`, as column generation checks it."""
    marginals = pool.columns.marginals(pool.probabilities)
    return bool((marginals >= r - MASTER_TOLERANCE).all()) and (
        caps is None or bool((marginals <= caps + MASTER_TOLERANCE).all()))


def _trades(utility: AccuracyUtility) -> Callable[[Columns, np.ndarray], tuple[Columns, np.ndarray]]:
    """Column generation's ``primal_columns`` for the accuracy utility: the sets of
    :func:`~fairsched.lp.pricing.exchange.exchange_columns` and their values."""

    def traded(support: Columns, weights: np.ndarray) -> tuple[Columns, np.ndarray]:
        columns = exchange_columns(utility.sizes, support, weights)
        return columns, column_values(utility, columns)

    return traded


def pricing_oracle(problem: Problem, gap: float, pricing: str = "auto",
                   deadline: float | None = None) -> Callable[..., PricingResult]:
    """The pricing oracle :func:`optimum` builds for ``problem`` and the requested ``gap``:
    :func:`~fairsched.lp.pricing.pricing_for` with :data:`PRICING_COLUMNS` columns per call,
    the run's ``deadline`` (a ``time.perf_counter()`` value) where the oracle takes one, and
    a relative MIP gap of ``gap / 10`` (within ``[1e-9, 1e-4]``) where it has one.
    ``ValueError`` when ``pricing`` does not fit the utility."""
    oracle = pricing_for(problem.utility, problem.k, pricing, max_columns=PRICING_COLUMNS)
    if deadline is not None and hasattr(oracle, "deadline"):
        oracle.deadline = deadline
    if hasattr(oracle, "set_rel_gap"):
        # A MIP gap on the pricing objective f(S) + λ(S) (about U_opt's size) feeds straight
        # into the certified bound, so it is kept below the requested gap.
        oracle.set_rel_gap(min(1e-4, max(1e-9, gap / 10)))
    return oracle


def _column_generation(problem: Problem, *, gap: float, time_limit: float | None,
                       progress: Progress | None, pricing: str, keep_support: bool = True) -> Optimum:
    start = time.perf_counter()

    def until(share: float) -> float | None:
        """The moment ``share`` of the time limit has passed (none without a limit)."""
        return None if time_limit is None else start + share * time_limit

    deadline = until(1.0)
    r = np.asarray(problem.r, dtype=float)
    try:
        oracle = pricing_oracle(problem, gap, pricing, deadline)
    except ValueError as exc:
        raise FairschedError(str(exc)) from None
    priority = priority_order(problem.utility, problem.k)
    # the search for a better starting sample is optional: at most a quarter of the budget
    pool = initial_pool(problem.utility, problem.k, r, caps=problem.caps, deadline=until(0.25),
                        priority=priority)
    heuristic = getattr(oracle, "heuristic", None)
    relaxation, marginals = None, None
    if hasattr(oracle, "relaxation_solution"):
        relaxation, marginals = oracle.relaxation_solution(r)
    elif hasattr(oracle, "relaxation_duals"):
        relaxation = oracle.relaxation_duals(r)
    groups = None
    if heuristic is not None and problem.caps is None and relaxation is not None:
        groups = floor_groups(r, relaxation)
    known: list[tuple[np.ndarray, float]] = []
    class_prices = None
    classes = None
    grouped_iterations = 0
    if groups is not None:
        # most workers are fillers the relaxation prices alike: a master with one row per
        # group climbs where the full one, degenerate, creeps (floor_groups's docstring)
        grouped = grouped_column_generation(problem.utility, problem.k, r, groups, oracle, heuristic, pool,
                                            gap=gap, deadline=deadline, dual_guess=relaxation,
                                            max_new_columns=PRICING_COLUMNS, progress=progress)
        pool = grouped.pool
        grouped_iterations = grouped.iterations
        if grouped.prices is not None:
            known.append((grouped.prices, grouped.pricing_bound))
    elif heuristic is not None and problem.caps is None:
        # where pricing needs a MILP the master climbs slowly from the sample: a whole
        # feasible schedule improved by swaps starts it higher (schedule_search's docstring)
        schedule = schedule_search(problem.utility, problem.k, r, heuristic.swap_gains,
                                   deadline=until(getattr(oracle, "schedule_share", None) or SCHEDULE_SHARE),
                                   beat=pool.value(), priority=priority,
                                   marginals=marginals if getattr(oracle, "wished_start", False) else None)
        pool = _joined_start(pool, schedule, r, problem.caps)
    elif type(problem.utility) is AccuracyUtility:
        # f = g(L(S)): sets of alike size reach Jensen's bound where the sample's spread of
        # sizes costs more than the gap, and the degenerate master does not win it back
        # (balanced's docstring)
        balanced, classes = balanced_pool(problem.utility, problem.k, r, beat=pool.value(), gap=gap,
                                          caps=problem.caps, deadline=until(BALANCE_SHARE), priority=priority)
        pool = _joined_start(pool, balanced, r, problem.caps)
        del balanced  # the start alone stays alive
        if classes is not None:  # some workers do not fit, or not in pairs: priced by their classes
            class_prices = list(classes.prices) or [level_duals(oracle, r, classes)]
    # the master is degenerate where the floors pin the marginals: trades between its own
    # sets lift it where priced columns do not (accuracy: exchange_columns; coverage: its
    # distribution swept as a schedule, round_swaps.swept_distribution).  Not with giants:
    # sets holding one must stay above the others, and there the trades cost master time
    # without lifting it (both measured in exchange's docstring)
    trades = None
    if type(problem.utility) is AccuracyUtility and (classes is None or not classes.any_giant()):
        trades = _trades(problem.utility)
    elif type(problem.utility) is Coverage and heuristic is not None and problem.caps is None:
        trades = swept_distribution(problem.utility, problem.k, default_rounds(problem.n, problem.k),
                                    deadline=deadline)
    guesses = [relaxation] if relaxation is not None and not known else []
    if class_prices is not None:
        guesses.extend(class_prices)
    phase_groups = _phase_groups(problem, oracle, relaxation)
    try:
        result = column_generation(pool.values, pool.columns, r, oracle, gap=gap, deadline=deadline,
                                   progress=progress, dual_guesses=guesses, known_bounds=known,
                                   heuristic=heuristic,
                                   start_probabilities=pool.probabilities, caps=problem.caps,
                                   primal_columns=trades, keep_support=keep_support,
                                   tailing_off=TAILING_OFF if phase_groups is None else HAND_OVER)
    except InfeasibleLPError as exc:
        raise InfeasibleError(f"infeasible: {exc}") from None
    except SolverError as exc:
        raise SolverFailedError(f"column generation failed: {exc}") from None
    if oracle.exact:
        kind = "exact" if result.pricing_exact else "bounded"
        label = f"{kind}-pricing({oracle.name})"
    else:
        label = f"{oracle.name}-pricing"
    reported = _Reported(value=float(result.value), upper_bound=float(result.upper_bound), support=result.support,
                         probabilities=result.probabilities, fairness_price=result.fairness_price,
                         pricing_bound=float(result.pricing_bound), master_fairness_price=result.master_fairness_price,
                         status=result.status, message=result.message,
                         iterations=int(result.iterations) + grouped_iterations)
    columns = int(result.columns)
    _recouple(problem, reported, gap=gap, deadline=deadline)
    if phase_groups is not None and reported.status in ("tailing-off", "stalled", "iteration-limit"):
        # Jensen's bound, out of reach of any distribution when sizes come in classes, and a
        # degenerate master: the LP over equal-size groups prices lower and climbs (size_groups)
        spent = time.perf_counter() - start
        ends = deadline if deadline is not None else \
            time.perf_counter() + max(SIZE_GROUP_SHARE * spent, SIZE_GROUP_SECONDS)
        ended = _size_group_phase(problem, oracle, r, relaxation, phase_groups, result, reported, gap=gap,
                                  ends=ends, budget_only=deadline is None, spent=spent, progress=progress)
        if (reported.status != "optimal" and result.status == "tailing-off"
                and ended in ("tailing-off", "converged", "iteration-limit") and time.perf_counter() < ends):
            columns += _resume(problem, oracle, r, reported, gap=gap, deadline=ends, budget_only=deadline is None,
                               heuristic=heuristic, trades=trades, progress=progress)
        _recouple(problem, reported, gap=gap, deadline=deadline)
    order = np.argsort(-reported.probabilities, kind="stable")
    sets = reported.support.to_sets()
    return Optimum(
        value=reported.value,
        upper_bound=reported.upper_bound,
        method=f"column-generation+{label}",
        support=[sets[i] for i in order],
        probabilities=np.asarray(reported.probabilities)[order],
        fairness_price=np.asarray(reported.fairness_price, dtype=float),
        columns=columns,
        iterations=reported.iterations,
        status=reported.status,
        success=reported.status == "optimal",
        message=reported.message,
        seconds=time.perf_counter() - start,
        pricing_bound=reported.pricing_bound,
        master_fairness_price=(None if reported.master_fairness_price is None
                               else np.asarray(reported.master_fairness_price, dtype=float)),
        cap_price=result.cap_price,
    )
