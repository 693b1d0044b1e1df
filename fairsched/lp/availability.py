"""``U_opt`` under availability: the LP of stationary policies that see each round's available set.

    max Σ_A q(A) Σ_{S ⊆ A} p(S|A) f(S)  s.t.  Σ_A q(A) Σ_{S ∋ u} p(S|A) >= r_u,  Σ_S p(S|A) = 1

(with caps also ``Σ_A q(A) Σ_{S ∋ u} p(S|A) <= c_u``) over the availability patterns ``A`` with probabilities ``q(A)`` (one convexity row per
pattern, :func:`fairsched.solvers.solve_grouped_distribution_lp`).
"""

from __future__ import annotations

import math
import time

import numpy as np

from fairsched.availability import Availability
from fairsched.errors import InfeasibleError, TooLargeError
from fairsched.lp.result import Optimum
from fairsched.problem import Problem
from fairsched.solvers import InfeasibleLPError, k_subset_masks, solve_grouped_distribution_lp


def availability_patterns(availability: Availability, max_patterns: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """Distinct availability patterns (boolean rows) and their probabilities.

    A trace gives its distinct rows with their frequencies; probabilities give all ``2^n``
    patterns (refused above ``max_patterns``).
    """
    if availability.trace is not None:
        patterns, counts = np.unique(availability.trace, axis=0, return_counts=True)
        return patterns, counts / counts.sum()
    a = availability.probabilities
    if 2 ** a.size > max_patterns:
        raise TooLargeError(f"{a.size} workers have 2^{a.size} availability patterns, above {max_patterns:,}; "
                            "give a trace instead")
    patterns = ((np.arange(2 ** a.size)[:, None] >> np.arange(a.size)[None, :]) & 1).astype(bool)
    weights = np.where(patterns, a[None, :], 1 - a[None, :]).prod(axis=1)
    keep = weights > 0
    return patterns[keep], weights[keep]


def availability_optimum(problem: Problem, availability: Availability, max_columns: int = 500_000) -> Optimum:
    """``U_opt`` when only the available workers can be selected (stationary policies that see ``A_t``).

        max Σ_A q(A) Σ_{S ⊆ A} p(S|A) f(S)  s.t.  Σ_A q(A) Σ_{S ∋ u} p(S|A) >= r_u,  Σ_S p(S|A) = 1

    over the availability patterns ``A`` with probabilities ``q(A)`` (a trace's empirical
    distribution, or independent probabilities when ``2^n`` patterns can be listed). For a
    monotone ``f`` the columns of ``A`` are its ``k``-subsets, or ``A`` itself when
    ``|A| < k``. Applies where the patterns and their columns fit in ``max_columns``.

    The returned :class:`~fairsched.lp.result.Optimum` describes the mixture: each set ``S``
    with its overall probability ``Σ_A q(A) p(S|A)``; the policy itself is conditional on ``A``.
    """
    start = time.perf_counter()
    patterns, weights = availability_patterns(availability)
    sizes = patterns.sum(axis=1)
    counts = np.array([math.comb(int(s), problem.k) if s >= problem.k else 1 for s in sizes])
    if counts.sum() > max_columns:
        raise TooLargeError(f"availability LP needs {int(counts.sum()):,} columns, above {max_columns:,}")
    blocks, groups = [], []
    for g, (pattern, size) in enumerate(zip(patterns, sizes)):
        where = np.flatnonzero(pattern)
        if size >= problem.k:
            local = k_subset_masks(int(size), problem.k)
        else:
            local = np.ones((1, int(size)), dtype=bool)
        block = np.zeros((local.shape[0], problem.n), dtype=bool)
        block[:, where] = local
        blocks.append(block)
        groups.append(np.full(local.shape[0], g))
    members = np.concatenate(blocks)
    values = problem.utility.values(members)
    try:
        result = solve_grouped_distribution_lp(values, members, np.concatenate(groups), weights, problem.r,
                                               caps=problem.caps)
    except InfeasibleLPError as exc:
        raise InfeasibleError(f"infeasible under availability: {exc}") from None
    overall = result.probabilities * weights[np.concatenate(groups)]
    packed = np.packbits(members, axis=1)
    distinct, inverse = np.unique(packed, axis=0, return_inverse=True)
    mass = np.bincount(inverse.reshape(-1), weights=overall, minlength=distinct.shape[0])
    keep = np.flatnonzero(mass > 1e-12)
    keep = keep[np.argsort(-mass[keep], kind="stable")]
    sets = np.unpackbits(distinct[keep], axis=1, count=problem.n).astype(bool)
    return Optimum(
        value=float(result.value),
        upper_bound=float(result.value),
        method="availability-enumeration+highs",
        support=[np.flatnonzero(row) for row in sets],
        probabilities=mass[keep] / mass[keep].sum(),
        fairness_price=np.asarray(result.fairness_price, dtype=float),
        cap_price=result.cap_price,
        columns=int(members.shape[0]),
        status="optimal",
        message=f"availability LP over {patterns.shape[0]:,} patterns and {members.shape[0]:,} columns",
        seconds=time.perf_counter() - start,
    )
