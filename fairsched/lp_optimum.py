"""``U_opt``: the best time-average utility of any fair policy (REFERENCE.md §2).

    U_opt = max Σ_S p_S f(S)  s.t.  Σ_{S ∋ u} p_S >= r_u,  Σ_S p_S = 1,  p >= 0

over stationary randomised policies (seed 003, Problem (5)). For a monotone ``f`` the
columns can be restricted to the ``C(n, k)`` sets of size exactly ``k``. The dual prices
``λ_u >= 0`` of the fairness rows are the utility lost per unit of ``r_u``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from fairsched.errors import InfeasibleError, TooLargeError
from fairsched.problem import Problem
from solvers import InfeasibleLPError, TooManyColumnsError, k_subset_masks, solve_distribution_lp

DEFAULT_MAX_COLUMNS = 1_000_000


@dataclass(frozen=True)
class Optimum:
    """The LP optimum: value, certified bound, the optimal distribution and the fairness prices."""

    value: float
    upper_bound: float
    method: str
    support: list[np.ndarray]
    probabilities: np.ndarray
    fairness_price: np.ndarray
    columns: int
    seconds: float

    @property
    def gap(self) -> float:
        """``upper_bound − value`` (0 for an exact solve)."""
        return max(0.0, self.upper_bound - self.value)

    def as_dict(self, problem: Problem) -> dict[str, Any]:
        """The JSON object of ``fairsched optimum --json`` (without the ``instance`` key)."""
        ids = problem.ids
        return {
            "n": problem.n,
            "k": problem.k,
            "value": self.value,
            "upper_bound": self.upper_bound,
            "gap": self.gap,
            "method": self.method,
            "support": [
                {"set": [ids[i] for i in S], "probability": float(p)}
                for S, p in zip(self.support, self.probabilities)
            ],
            "fairness_price": {w: float(v) for w, v in zip(ids, self.fairness_price)},
            "seconds": self.seconds,
        }


def optimum(problem: Problem, *, backend: str = "highs", max_columns: int = DEFAULT_MAX_COLUMNS) -> Optimum:
    """Solve the LP over all ``k``-sets exactly.

    Parameters
    ----------
    backend : {"highs", "cvxpy"}
        HiGHS through highspy directly, or the same LP as a cvxpy model.
    max_columns : int
        Refuse (``TooLargeError``) rather than build more than this many columns;
        ``C(22, 11) = 705,432`` columns take about 40 s and 200 MB.
    """
    start = time.perf_counter()
    try:
        members = k_subset_masks(problem.n, problem.k, max_columns=max_columns)
    except TooManyColumnsError as exc:
        raise TooLargeError(str(exc)) from None
    values = problem.utility.values(members)
    try:
        result = solve_distribution_lp(values, members, np.asarray(problem.r, dtype=float), backend=backend)
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
