"""The distribution LP with one convexity row per group of columns.

For availability patterns ``g`` with weights ``w_g`` (their probabilities), each with its
own columns ``S ⊆ A_g``::

    max  Σ_g w_g Σ_{j ∈ g} p_j f_j
    s.t. Σ_g w_g Σ_{j ∈ g, u ∈ S_j} p_j >= r_u   (all u)
         Σ_g w_g Σ_{j ∈ g, u ∈ S_j} p_j <= c_u   (all u, only with caps)
         Σ_{j ∈ g} p_j = 1                        (all g),   p >= 0

Solved with HiGHS through ``scipy.optimize.linprog``. Returns the value, the
distributions and the fairness duals ``λ_u >= 0`` (and the cap duals ``ν_u >= 0``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog

from .errors import InfeasibleLPError, SolverError
from .result import Result


@dataclass(frozen=True)
class GroupedLPResult(Result):
    """Optimum of the grouped LP: value, per-column probabilities (within their group), prices λ."""

    value: float
    probabilities: np.ndarray
    fairness_price: np.ndarray
    cap_price: np.ndarray | None = None


def solve_grouped_distribution_lp(values: np.ndarray, members: np.ndarray, groups: np.ndarray,
                                  weights: np.ndarray, r: np.ndarray,
                                  caps: np.ndarray | None = None) -> GroupedLPResult:
    """Solve the grouped LP of the module docstring.

    ``groups[j]`` is the group of column ``j`` (``0..G-1``, every group non-empty) and
    ``weights[g]`` its weight (summing to 1).
    """
    start = time.perf_counter()
    values = np.asarray(values, dtype=float)
    members = np.asarray(members, dtype=bool)
    groups = np.asarray(groups, dtype=np.int64)
    weights = np.asarray(weights, dtype=float)
    r = np.asarray(r, dtype=float)
    m, n = members.shape
    if values.shape != (m,) or groups.shape != (m,) or r.shape != (n,):
        raise ValueError("values, groups and members rows must agree, and r must have one entry per worker")
    G = weights.size
    if np.bincount(groups, minlength=G).min() == 0:
        raise ValueError("every group needs at least one column")
    column_weight = weights[groups]
    fairness = sp.csr_matrix(members.T * column_weight[None, :])
    convexity = sp.csr_matrix((np.ones(m), (groups, np.arange(m))), shape=(G, m))
    A_ub, b_ub = -fairness, -r
    if caps is not None:
        A_ub, b_ub = sp.vstack([-fairness, fairness]).tocsr(), np.concatenate([-r, np.asarray(caps, dtype=float)])
    res = linprog(-(column_weight * values), A_ub=A_ub, b_ub=b_ub, A_eq=convexity, b_eq=np.ones(G),
                  bounds=(0, None), method="highs")
    if res.status == 2:
        raise InfeasibleLPError("the floors cannot be met under this availability")
    if res.status != 0:
        raise SolverError(f"HiGHS: {res.message}")
    return GroupedLPResult(value=float(-res.fun), probabilities=np.clip(res.x, 0, None),
                           fairness_price=np.maximum(-res.ineqlin.marginals[:n], 0.0),
                           cap_price=None if caps is None else np.maximum(-res.ineqlin.marginals[n:], 0.0),
                           status="optimal",
                           message=f"HiGHS: {res.message}", seconds=time.perf_counter() - start)
