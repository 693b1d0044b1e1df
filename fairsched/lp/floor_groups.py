"""Floor groups: column generation on a master with one floor row per group of workers that
the continuous relaxation cannot tell apart, then rotated back to every worker's floor.

**Why.**  Where most workers are fillers whose identity barely changes ``f`` (facility
location with costly floors: 360 of 400 weak workers, who add next to nothing to a set
holding a dozen strong ones), the master LP over all ``n`` floor rows is massively
degenerate: its duals jump between workers and column generation creeps (``n = 400``: the
lower bound 178.3685 after 600 s, the upper bound stuck at the relaxation's 179.163).  With
the fillers' rows summed into one, the master has about ``k`` floor rows, its prices are equal inside
each group, and its rotated optimum is ``U_opt`` itself well within 120 s there; what is
left is the one exact pricing call that certifies it, which takes minutes
(``benchmarks/README.md``, "Floor groups, and an interrupt flag HiGHS kept").

**The aggregated LP** (constraint aggregation, as in the dynamic aggregation of
set-partitioning rows of Elhallaoui, Villeneuve, Soumis & Desaulniers, "Dynamic aggregation
of set-partitioning constraints in column generation", *Operations Research* 53, 2005)::

    U_agg = max Σ_S p_S f(S)  s.t.  Σ_S p_S |S ∩ G| >= R_G = Σ_{u∈G} r_u  (every group G),
                                    Σ_S p_S = 1,  p >= 0.

It keeps only sums of the floors, so ``U_agg >= U_opt``; its duals ``λ_G`` give the per-worker
prices ``λ_u = λ_{G(u)}`` (non-negative, so ``max_{|S|=k}[f(S) + λ(S)] − λ·r`` is a valid
Lagrangian bound on ``U_opt`` like any other, computed by the same exact pricing).

**Back to every floor** (the rotation).  Within a group the members are in index order; the
``s``-th rotation of a set moves each member of the group in the set ``s`` places on
(cyclically).  Averaged over the ``|G|`` rotations, every member of ``G`` is in the set
``|S ∩ G| / |G|`` of the time, so with equal floors inside a group (groups are made so) the
uniform mixture over rotations of the aggregated optimum meets every ``r_u``.  Its value is
computed exactly (rotation changes ``f`` where the members are not interchangeable), and an LP
over the rotated sets picks the best distribution among them: a feasible lower bound on
``U_opt``.  (At a time limit the LP gets only the time left; without it the uniform mixture
stands in, where it meets every floor.)  Where the group's members are interchangeable it
equals ``U_agg``, and the bound at ``λ_agg`` closes the gap.

**Groups** (:func:`floor_groups`): workers with the same floor and the same *positive*
continuous-relaxation price share a group (the relaxation prices them alike because it cannot
tell them apart); workers whose floor the relaxation does not price stay alone, since summing
their rows could only drop floors that bind.  Used only when the groups cut the rows to at
most :data:`MAX_ROW_SHARE` of ``n``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import OptimizeResult, linprog

from fairsched.lp.pricing.initial import StartingPool, column_values
from fairsched.lp.pricing.schedule_search import better_start
from fairsched.solvers.colgen import (
    PricingResult,
    certifying_pricing_bound,
    certifying_slack,
    reduced_costs,
    relative_gap,
)
from fairsched.solvers.columns import Columns
from fairsched.utilities.base import SetFunction

#: groups are used only when they leave at most this share of the ``n`` floor rows
MAX_ROW_SHARE = 0.5
#: relaxation prices (relative to the largest) and floors that agree to this many digits are equal
DIGITS = 9
#: reduced cost a column needs to enter, relative to ``max(1, |U|)``
ENTER_TOLERANCE = 1e-9
#: rotated sets written at most (entries ``Σ |S|`` over all rotations); beyond it fewer,
#: evenly spaced rotations are used and the rotated pool may not meet every floor alone
MAX_ROTATED_ENTRIES = 1 << 22
#: iterations of the aggregated column generation at most
MAX_ITERATIONS = 10_000

Progress = Callable[[int, float, float, float], None]


def floor_groups(r: np.ndarray, prices: np.ndarray) -> np.ndarray | None:
    """Group ids ``(n,)`` (0, 1, ...): workers with equal floors and equal positive relaxation
    prices ``prices`` share a group, every other worker is alone.  ``None`` when no group has
    two members or the groups leave more than :data:`MAX_ROW_SHARE` of the rows."""
    r = np.asarray(r, dtype=float)
    prices = np.asarray(prices, dtype=float)
    n = r.size
    if prices.shape != (n,):
        raise ValueError(f"prices must have shape ({n},), got {prices.shape}")
    scale = max(1.0, float(np.abs(prices).max(initial=0.0)))
    priced = prices > 10.0 ** -DIGITS * scale
    if priced.sum() < 2:
        return None
    keys = np.round(np.stack([r[priced], prices[priced] / scale], axis=1), DIGITS)
    _, shared = np.unique(keys, axis=0, return_inverse=True)
    groups = np.empty(n, dtype=np.int64)
    groups[priced] = shared.ravel()
    alone = np.flatnonzero(~priced)
    groups[alone] = shared.max() + 1 + np.arange(alone.size)
    count = int(groups.max()) + 1
    if count > MAX_ROW_SHARE * n:
        return None
    return groups


def group_counts(columns: Columns, groups: np.ndarray, count: int) -> sp.csr_array:
    """``|S ∩ G|`` for every column ``S`` and group ``G``: a sparse ``(m, count)`` array (at
    most ``|S|`` entries per column)."""
    incidence = sp.csr_array((np.ones(columns.nnz), columns.indices, columns.indptr),
                             shape=(len(columns), columns.n))
    return (incidence @ sp.csr_array((np.ones(columns.n), (np.arange(columns.n), groups)),
                                     shape=(columns.n, count))).tocsr()


def rotations(columns: Columns, groups: np.ndarray, max_entries: int = MAX_ROTATED_ENTRIES) -> Columns:
    """Every column rotated inside every group of two or more members, by ``s = 0..M−1`` places
    (``M`` the largest group; a group of ``g`` members moves ``s mod g``), so the uniform mixture
    over a column's rotations gives each member of a group whose size divides ``M`` the same
    share.  With more than ``max_entries`` entries, fewer evenly spaced ``s`` are used."""
    groups = np.asarray(groups)
    order = np.argsort(groups, kind="stable")
    sizes = np.bincount(groups)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(groups.size, dtype=np.int64)
    rank[order] = np.arange(groups.size) - starts[groups[order]]
    largest = int(sizes.max())
    shifts = np.arange(largest)
    per_shift = max(1, columns.nnz)
    if largest * per_shift > max_entries:
        shifts = np.unique(np.linspace(0, largest, max(1, max_entries // per_shift), endpoint=False).astype(np.int64))
    members = columns.indices.astype(np.int64)
    g, size = groups[members], sizes[groups[members]]
    moved = np.concatenate([order[starts[g] + (rank[members] + s) % size] for s in shifts])
    sizes_out = np.tile(columns.sizes(), shifts.size)
    rows = np.repeat(np.arange(sizes_out.size), sizes_out)
    indptr = np.concatenate([[0], np.cumsum(sizes_out)]).astype(np.int64)
    return Columns(columns.n, indptr, moved[np.lexsort((moved, rows))])


@dataclass(frozen=True)
class GroupedStart:
    """What the aggregated column generation hands on.

    ``pool``: the start's sets and the rotated sets of the aggregated optimum's support, with
    a distribution that meets every floor: the better of the start's and the rotation LP's
    when that LP found one (``rotated`` true), else the start's; ``prices`` and ``pricing_bound``: the λ (equal inside
    each group) of the best Lagrangian bound found and ``max_{|S|=k}[f(S) + λ(S)]`` certified
    there (``None`` and ``inf`` without an exact call); ``aggregated_value``: the restricted
    aggregated master's last value (``U_agg`` once converged, not a bound on ``U_opt``);
    ``converged``: the last exact call found no column to add, or its bound certified the
    requested gap against that value.
    """

    pool: StartingPool
    rotated: bool
    prices: np.ndarray | None
    pricing_bound: float
    aggregated_value: float
    converged: bool
    iterations: int


def grouped_column_generation(utility: SetFunction, k: int, r: np.ndarray, groups: np.ndarray,
                              price: Callable[..., PricingResult],
                              heuristic: Callable[[np.ndarray], PricingResult],
                              start: StartingPool, *, gap: float, deadline: float | None = None,
                              dual_guess: np.ndarray | None = None, max_new_columns: int = 50,
                              progress: Progress | None = None) -> GroupedStart:
    """Column generation on the aggregated LP (module docstring) from ``start`` (which meets
    ``r``, so it meets every group's sum), then the rotation back to every floor.

    Each iteration solves the aggregated master (HiGHS through SciPy), prices its duals with
    ``heuristic`` and, when that finds no column with positive reduced cost, with the exact
    ``price``, asked (where it accepts them) for what the gap needs, as column generation's
    own loop asks: a column whose reduced cost is at least the slack ``δ = 0.9·gap·|value|``
    (:func:`~fairsched.solvers.colgen.certifying_slack`; ``target = μ + δ``), or a bound
    ``max_S[f(S) + λ(S)] − λ·r <= value + δ`` (``enough``,
    :func:`~fairsched.solvers.colgen.certifying_pricing_bound`), which certifies ``gap`` against
    the master's value with a margin.  (With ``enough`` at the full gap, facility location
    ``n = 400`` left this phase with its bound 1.000016e-4 above its value, and the main
    phase needed one more exact call, of 83-85 s, to certify 1e-4.)  It ends when an exact
    call finds nothing to add (``converged``), at ``deadline`` (a ``time.perf_counter()``
    value) or after :data:`MAX_ITERATIONS`.  ``dual_guess`` (prices equal inside each group,
    e.g. the relaxation's that made the groups) is priced exactly first: its bound stands when
    the deadline stops the calls that would improve on it, and its columns join the pool.
    ``progress(iteration, lower, upper, gap)`` gets the start's value (a valid lower bound) and
    the best Lagrangian bound so far.
    """
    r = np.asarray(r, dtype=float)
    groups = np.asarray(groups, dtype=np.int64)
    count = int(groups.max()) + 1
    need = np.bincount(groups, weights=r, minlength=count)
    columns, values = start.columns, np.asarray(start.values, dtype=float)
    counts = group_counts(columns, groups, count)
    seen = set(columns.hashes().tolist())
    lower = start.value()
    best_prices, best_pricing, best_bound = None, math.inf, math.inf
    value, weights, converged, iteration = -math.inf, None, False, 0

    def over() -> bool:
        return deadline is not None and time.perf_counter() >= deadline

    def add(found: PricingResult, fresh: np.ndarray) -> None:
        nonlocal columns, values, counts
        added = Columns.from_masks(_masks(found)[fresh[:max_new_columns]])
        seen.update(added.hashes().tolist())
        columns = Columns.concatenate([columns, added], columns.n)
        values = np.concatenate([values, np.asarray(found.values, dtype=float)[fresh[:max_new_columns]]])
        counts = sp.vstack([counts, group_counts(added, groups, count)], format="csr")

    if dual_guess is not None:
        guess = np.clip(np.asarray(dual_guess, dtype=float), 0.0, None)
        found = price(guess)
        best_prices, best_pricing = guess, float(found.upper_bound)
        best_bound = best_pricing - float(guess @ r)
        add(found, _entering(found, guess, -math.inf, 0.0, seen))
        if progress is not None:
            progress(0, lower, best_bound, relative_gap(lower, best_bound))

    while iteration < MAX_ITERATIONS and not over():
        iteration += 1
        solved = _best_distribution(values, counts.T, need)
        if solved.status != 0:
            break
        value, weights = -float(solved.fun), solved.x
        lam = np.clip(-solved.ineqlin.marginals, 0.0, None)[groups]
        mu = -float(solved.eqlin.marginals[0])
        tol = ENTER_TOLERANCE * max(1.0, abs(value))
        found = heuristic(lam)
        fresh = _entering(found, lam, mu, tol, seen)
        if not fresh.size:
            # as in column generation's own loop: a column worth less than the slack cannot
            # matter to the gap, and a bound within it certifies the gap with a margin
            options = {}
            if getattr(price, "accepts_target", False):
                options["target"] = mu + max(tol, certifying_slack(value, gap))
            enough = certifying_pricing_bound(value, gap, lam, r)
            if getattr(price, "accepts_enough", False):
                options["enough"] = enough
            found = price(lam, **options)
            bound = float(found.upper_bound) - float(lam @ r)
            if bound < best_bound:
                best_prices, best_pricing, best_bound = lam, float(found.upper_bound), bound
            fresh = _entering(found, lam, mu, tol, seen)
            if not fresh.size or float(found.upper_bound) <= enough:
                converged = bool(found.exact and not fresh.size) or best_bound <= (1.0 + gap) * value
                if progress is not None:
                    progress(iteration, lower, best_bound, relative_gap(lower, best_bound))
                break
        add(found, fresh)
        if progress is not None:
            progress(iteration, lower, best_bound, relative_gap(lower, best_bound))
    pool, rotated = start, False
    if weights is not None:
        support = np.flatnonzero(weights > 1e-12)
        pool, rotated = _rotated_start(utility, r, columns.take(support), weights[support], groups, start,
                                       deadline)
    return GroupedStart(pool=pool, rotated=rotated, prices=best_prices, pricing_bound=best_pricing, aggregated_value=value,
                        converged=converged, iterations=iteration)


def _entering(found: PricingResult, lam: np.ndarray, mu: float, tol: float, seen: set[int]) -> np.ndarray:
    """Indices of the priced columns with reduced cost above ``tol`` not yet in the pool, best
    first (known by their hash: a collision could only end the phase early, never make a
    bound wrong)."""
    masks, _, reduced = reduced_costs(found, lam, mu)
    if masks.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    hashes = Columns.from_masks(masks).hashes().tolist()
    entering, out = set(), []  # equal sets priced twice in one call enter once
    for j in np.argsort(-reduced, kind="stable"):
        if reduced[j] > tol and hashes[j] not in seen and hashes[j] not in entering:
            entering.add(hashes[j])
            out.append(j)
    return np.asarray(out, dtype=np.int64)


def _rotated_start(utility: SetFunction, r: np.ndarray, support: Columns, weights: np.ndarray,
                   groups: np.ndarray, start: StartingPool,
                   deadline: float | None = None) -> tuple[StartingPool, bool]:
    """``start``'s sets and the rotations of ``support`` (with their ``f``), weighted by the
    better of ``start``'s distribution and the rotation LP's optimum, with ``True``; when that
    LP does not meet every floor, by ``start``'s, with ``False`` (module docstring).

    The LP is given the time left before ``deadline`` (facility location ``n = 400``: 8,280
    rotated sets, 4.0–4.9 s).  Without it, the uniform mixture over each support set's
    rotations, weighted by ``weights`` (the aggregated optimum's), stands in for the LP's
    optimum when it meets every floor, as it does where every group's size divides the largest
    (module docstring): a feasible distribution, at most the LP's value."""
    everyone = rotations(support, groups)
    _, first, where = np.unique(everyone.hashes(), return_index=True, return_inverse=True)
    rotated = everyone.take(np.sort(first))
    values = column_values(utility, rotated)
    left = None if deadline is None else deadline - time.perf_counter()
    if left is None or left > 0:
        incidence = sp.csc_array((np.ones(rotated.nnz), rotated.indices, rotated.indptr),
                                 shape=(rotated.n, len(rotated)))
        solved = _best_distribution(values, incidence, r, time_limit=left)
        if solved.status == 0:
            probabilities = np.clip(solved.x, 0.0, None)
            probabilities /= probabilities.sum()
            if (rotated.marginals(probabilities) >= r - 1e-9).all():
                return better_start(start, StartingPool(rotated, values, probabilities)), True
    if left is not None:
        # out of time for the LP: the uniform mixture, its duplicate sets merged
        shares = np.tile(np.asarray(weights, dtype=float), len(everyone) // len(support))
        merged = np.bincount(where, weights=shares)[np.argsort(first)]  # in the order of rotated
        merged /= merged.sum()
        if (rotated.marginals(merged) >= r - 1e-9).all():
            return better_start(start, StartingPool(rotated, values, merged)), True
    joined = Columns.concatenate([start.columns, rotated], rotated.n)
    return StartingPool(joined, np.concatenate([start.values, values]),
                        np.concatenate([start.probabilities, np.zeros(values.size)])), False


def _best_distribution(values: np.ndarray, coverage: sp.sparray, need: np.ndarray,
                       time_limit: float | None = None) -> OptimizeResult:
    """``max values·p  s.t.  coverage·p >= need,  Σ p = 1,  p >= 0`` by HiGHS through SciPy
    (sparse, unlike :func:`fairsched.solvers.solve_distribution_lp`'s dense membership);
    status 1 when ``time_limit`` seconds ran out."""
    options = {} if time_limit is None else {"time_limit": max(1e-3, float(time_limit))}
    return linprog(-values, A_ub=-coverage, b_ub=-need, A_eq=np.ones((1, values.size)), b_eq=[1.0],
                   bounds=(0, None), method="highs", options=options)


def _masks(found: PricingResult) -> np.ndarray:
    return np.asarray(found.columns, dtype=bool).reshape(-1, np.shape(found.columns)[-1])
