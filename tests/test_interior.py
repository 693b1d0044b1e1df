"""Clarabel on an LP held in HiGHS (fairsched.solvers.interior): the optimum and its duals in
HiGHS's conventions, against HiGHS's own simplex, on LPs with every kind of row and bound."""

from __future__ import annotations

import highspy
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from fairsched.solvers import interior
from fairsched.solvers.interior import InteriorTimeLimit, solve_interior
from fairsched.solvers.lp import new_highs


def highs_lp(A, cost: np.ndarray, col_bounds: tuple[np.ndarray, np.ndarray],
             row_bounds: tuple[np.ndarray, np.ndarray],
             sense: highspy.ObjSense = highspy.ObjSense.kMaximize) -> highspy.Highs:
    """A HiGHS model of the LP ``sense cost·x  s.t.  row_bounds on A·x,  col_bounds on x``."""
    matrix = sp.csc_matrix(A)
    rows, cols = matrix.shape
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = cols, rows
    lp.col_cost_ = np.asarray(cost, dtype=float)
    lp.col_lower_, lp.col_upper_ = (np.asarray(bound, dtype=float) for bound in col_bounds)
    lp.row_lower_, lp.row_upper_ = (np.asarray(bound, dtype=float) for bound in row_bounds)
    lp.sense_ = sense
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, rows
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
    h = new_highs()
    h.passModel(lp)
    return h


def random_lp(seed: int, sense: highspy.ObjSense) -> highspy.Highs:
    """Equality, ">=", "<=" and ranged rows, columns bounded below or on both sides, around
    a feasible point, the last row bounding the sum of all columns; random data make the
    optimum and its duals unique."""
    rng = np.random.default_rng(seed)
    rows, cols = int(rng.integers(2, 7)), int(rng.integers(4, 14))
    A = rng.uniform(0.0, 1.0, (rows, cols)) * (rng.random((rows, cols)) < 0.8)
    A[-1] = 1.0  # a "<=" row over every column: the optimum is finite
    activity = A @ rng.uniform(0.2, 0.8, cols)
    kind = rng.integers(0, 4, rows)  # 0: =, 1: >=, 2: <=, 3: ranged
    kind[-1] = 2
    cost = rng.normal(size=cols)
    upper = np.where(rng.random(cols) < 0.5, 1.0, np.inf)
    row_lower = np.where(kind == 2, -np.inf, activity - np.where(kind == 0, 0.0, rng.uniform(0.1, 0.5, rows)))
    row_upper = np.where(kind == 1, np.inf, np.where(kind == 0, activity, activity + rng.uniform(0.1, 0.5, rows)))
    return highs_lp(A, cost, (np.zeros(cols), upper), (row_lower, row_upper), sense)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([highspy.ObjSense.kMaximize, highspy.ObjSense.kMinimize]))
def test_optimum_and_duals_are_highs_own(seed, sense):
    h = random_lp(seed, sense)
    solution = solve_interior(h)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    reference = h.getSolution()
    assert solution is not None and solution.iterations > 0
    assert solution.col_value == pytest.approx(np.asarray(reference.col_value), abs=1e-6)
    assert solution.row_dual == pytest.approx(np.asarray(reference.row_dual), abs=1e-6)
    assert solution.col_dual == pytest.approx(np.asarray(reference.col_dual), abs=1e-6)


def tiny_lp(row_upper: float) -> highspy.Highs:
    """max x_0 + x_1  s.t.  x_0 + x_1 <= row_upper,  x >= 0 (infeasible below 0)."""
    return highs_lp(np.ones((1, 2)), np.ones(2), (np.zeros(2), np.full(2, np.inf)), ([-np.inf], [row_upper]))


def test_no_solution_where_the_lp_is_infeasible_or_clarabel_is_missing(monkeypatch):
    feasible = solve_interior(tiny_lp(1.0))
    assert feasible is not None and feasible.col_value.sum() == pytest.approx(1.0, abs=1e-8)
    assert feasible.row_dual == pytest.approx([1.0], abs=1e-8)
    assert solve_interior(tiny_lp(-1.0)) is None
    monkeypatch.setattr(interior, "clarabel_installed", lambda: False)
    assert solve_interior(tiny_lp(1.0)) is None


def test_time_limit_raises():
    rng = np.random.default_rng(0)
    rows, cols = 400, 4000
    A = sp.random(rows, cols, density=0.05, random_state=rng, format="csc")
    h = highs_lp(A, rng.normal(size=cols), (np.zeros(cols), np.ones(cols)), (np.full(rows, -np.inf), np.ones(rows)))
    with pytest.raises(InteriorTimeLimit):
        solve_interior(h, time_limit=1e-6)
