"""An LP held in HiGHS, solved by Clarabel's interior-point method with a direct factorisation.

Clarabel (Goulart and Chen, "Clarabel: An interior-point solver for conic programs with
quadratic objectives", 2024) factors the KKT system of each iteration directly (sparse
LDLᵀ).  Column generation's master for a utility whose sets hold many workers has few rows
and dense columns (covers by discs, ``n = 1,000``, ``k = 50``: 1,001 rows, 3,251 columns,
166,751 nonzeros), and there the simplex is slow in both its iterations (a dense basis) and
their number (a degenerate LP), and HiGHS's interior-point solver IPX, whose linear algebra
is iterative, is slow too: on that master, kept from a run (``python
benchmarks/bench_master_solvers.py``), the primal simplex took 38.4 s (13,470 iterations),
IPX with crossover 13.7 s (25 iterations) and Clarabel 1.4 s (24 iterations).

The LP is read from the HiGHS model as it stands (:meth:`highspy.Highs.getLp`) and its
solution returned in HiGHS's conventions, so that a caller reads it as it reads
``Highs.getSolution()``.
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass

import highspy
import numpy as np
import scipy.sparse as sp

#: Clarabel's relative duality gap and feasibility tolerances
TOLERANCE = 1e-10


@dataclass(frozen=True)
class InteriorSolution:
    """An optimum in HiGHS's conventions: primal values, row duals (for a maximisation: ``y``
    with reduced costs ``c − Aᵀy <= 0`` at columns on their lower bound), reduced costs."""

    col_value: np.ndarray
    row_dual: np.ndarray
    col_dual: np.ndarray
    iterations: int
    seconds: float


class InteriorTimeLimit(Exception):
    """Clarabel stopped at its time limit."""


def clarabel_installed() -> bool:
    """Whether the ``clarabel`` package is importable."""
    return importlib.util.find_spec("clarabel") is not None


def solve_interior(h: highspy.Highs, time_limit: float | None = None) -> InteriorSolution | None:
    """The LP of ``h`` solved by Clarabel; ``None`` when Clarabel is missing or does not solve it
    to its tolerances (the caller then solves it by HiGHS).  ``InteriorTimeLimit`` at the limit.

    Clarabel's standard form is ``min qᵀx  s.t.  Gx + s = b,  s ∈ K``: equality rows go in the
    zero cone, every finite row or column bound in the non-negative cone, and the duals of
    the bound rows give the reduced costs.
    """
    if not clarabel_installed():
        return None
    import clarabel

    lp = h.getLp()
    rows, cols = int(lp.num_row_), int(lp.num_col_)
    matrix = lp.a_matrix_
    if matrix.format_ != highspy.MatrixFormat.kColwise:
        return None
    A = sp.csc_matrix((np.asarray(matrix.value_), np.asarray(matrix.index_), np.asarray(matrix.start_)),
                      shape=(rows, cols))
    maximise = lp.sense_ == highspy.ObjSense.kMaximize
    cost = np.asarray(lp.col_cost_, dtype=float)
    row_lower, row_upper = np.asarray(lp.row_lower_, dtype=float), np.asarray(lp.row_upper_, dtype=float)
    col_lower, col_upper = np.asarray(lp.col_lower_, dtype=float), np.asarray(lp.col_upper_, dtype=float)
    equal = np.flatnonzero(row_lower == row_upper)
    above = np.flatnonzero((row_lower != row_upper) & np.isfinite(row_lower))  # a·x >= l
    below = np.flatnonzero((row_lower != row_upper) & np.isfinite(row_upper))  # a·x <= u
    floor = np.flatnonzero(np.isfinite(col_lower))
    ceiling = np.flatnonzero(np.isfinite(col_upper))
    identity = sp.identity(cols, format="csr")
    G = sp.vstack([A[equal], -A[above], A[below], -identity[floor], identity[ceiling]]).tocsc()
    b = np.concatenate([row_lower[equal], -row_lower[above], row_upper[below], -col_lower[floor],
                        col_upper[ceiling]])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = TOLERANCE
    if time_limit is not None:
        settings.time_limit = max(1e-3, float(time_limit))
    started = time.perf_counter()
    solution = clarabel.DefaultSolver(sp.csc_matrix((cols, cols)), -cost if maximise else cost, G, b,
                                      [clarabel.ZeroConeT(equal.size),
                                       clarabel.NonnegativeConeT(G.shape[0] - equal.size)],
                                      settings).solve()
    seconds = time.perf_counter() - started
    status = str(solution.status)
    if "MaxTime" in status:
        raise InteriorTimeLimit
    if status != "Solved":
        return None
    z = np.asarray(solution.z)
    # Gᵀz = −q at the optimum: for a maximisation, row i's multiplier y_i is z on its equality
    # row, −z on its ">=" row and +z on its "<=" row (the signs of G), negated once more for
    # q = −c; a column's reduced cost c_j − Aᵀ_j y is what its bound rows carry.
    parts = np.cumsum([equal.size, above.size, below.size, floor.size])
    on_equal, on_above, on_below, on_floor, on_ceiling = np.split(z, parts)
    sign = 1.0 if maximise else -1.0
    row_dual = np.zeros(rows)
    row_dual[equal] += sign * on_equal
    row_dual[above] -= sign * on_above
    row_dual[below] += sign * on_below
    col_dual = np.zeros(cols)
    col_dual[floor] -= sign * on_floor
    col_dual[ceiling] += sign * on_ceiling
    return InteriorSolution(np.asarray(solution.x), row_dual, col_dual, int(solution.iterations), seconds)
