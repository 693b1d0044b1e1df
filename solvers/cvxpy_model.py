"""The distribution LP as a cvxpy model, for users who want to add their own constraints.

    max  values . p   s.t.  members^T p >= r  (fairness, dual lambda >= 0),
                            1^T p = 1         (convexity, dual mu),   p >= 0

cvxpy is an optional dependency and is imported only when these functions are called.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from .errors import InfeasibleLPError, SolverError
from .lp import DistributionLPResult, check_floors, check_lp_inputs, make_result

if TYPE_CHECKING:
    import cvxpy


@dataclass(frozen=True, eq=False)
class DistributionModel:
    """A built cvxpy model of the distribution LP.

    ``problem`` = Problem(Maximize(values @ p), constraints) with ``p`` a non-negative
    Variable (m,); ``constraints`` = [fairness, convexity].  Extend it with
    ``cvxpy.Problem(model.problem.objective, model.constraints + extra)``.
    """

    problem: cvxpy.Problem
    p: cvxpy.Variable
    fairness: cvxpy.Constraint
    convexity: cvxpy.Constraint
    constraints: list


def _import_cvxpy() -> Any:
    try:
        import cvxpy
    except ImportError as exc:
        raise ImportError(
            "the cvxpy backend needs cvxpy, which is not installed: pip install 'cvxpy', "
            "or from a fairsched checkout: pip install '.[cvxpy]'"
        ) from exc
    return cvxpy


def build_cvxpy_model(values: np.ndarray, members: np.ndarray, r: np.ndarray) -> DistributionModel:
    """Build max values.p s.t. members^T p >= r, sum(p) = 1, p >= 0 as a cvxpy Problem."""
    cp = _import_cvxpy()
    values, members, r = check_lp_inputs(values, members, r)
    m, _ = members.shape
    incidence = sp.csr_array(members.T.astype(float))  # (n, m): row u marks the columns holding u
    p = cp.Variable(m, nonneg=True, name="p")
    fairness = incidence @ p >= r
    convexity = cp.sum(p) == 1
    constraints = [fairness, convexity]
    problem = cp.Problem(cp.Maximize(values @ p), constraints)
    return DistributionModel(
        problem=problem, p=p, fairness=fairness, convexity=convexity, constraints=constraints
    )


def default_cvxpy_solver() -> str:
    """Return "HIGHS" if cvxpy has it installed, else "CLARABEL"."""
    cp = _import_cvxpy()
    return "HIGHS" if "HIGHS" in cp.installed_solvers() else "CLARABEL"


def solve_with_cvxpy(
    values: np.ndarray,
    members: np.ndarray,
    r: np.ndarray,
    solver: str | None = None,
) -> DistributionLPResult:
    """Solve the distribution LP through cvxpy and return the same result as the HiGHS path.

    cvxpy reports the dual of ``expr >= r`` in a maximisation as lambda >= 0 and the dual
    of the equality as mu, so mu - r . lambda equals the optimum.
    """
    cp = _import_cvxpy()
    values, members, r = check_lp_inputs(values, members, r)
    check_floors(members, r)
    solver = solver or default_cvxpy_solver()

    start_time = time.perf_counter()
    model = build_cvxpy_model(values, members, r)
    try:
        model.problem.solve(solver=solver)
    except cp.error.SolverError as exc:
        raise SolverError(f"cvxpy solver {solver} failed: {exc}") from exc
    status = model.problem.status
    if status in (cp.INFEASIBLE, cp.INFEASIBLE_INACCURATE):
        raise InfeasibleLPError(
            f"the LP is infeasible: the fairness floors cannot be met jointly "
            f"(cvxpy status: {status})"
        )
    if status not in (cp.OPTIMAL, cp.OPTIMAL_INACCURATE):
        raise SolverError(f"cvxpy solver {solver} did not solve the LP (status: {status})")
    seconds = time.perf_counter() - start_time

    n = members.shape[1]
    lam = np.zeros(n) if n == 0 else np.asarray(model.fairness.dual_value, dtype=float).reshape(n)
    stats = model.problem.solver_stats
    return make_result(
        values=values,
        r=r,
        primal=np.asarray(model.p.value, dtype=float),
        fairness_price=lam,
        convexity_dual=float(np.asarray(model.convexity.dual_value).reshape(())),
        status=status,
        backend=f"cvxpy:{solver}",
        iterations=None if stats is None else stats.num_iters,
        seconds=seconds,
    )
