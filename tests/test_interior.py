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
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = cols, rows
    lp.col_cost_ = rng.normal(size=cols)
    lp.col_lower_ = np.zeros(cols)
    lp.col_upper_ = np.where(rng.random(cols) < 0.5, 1.0, np.inf)
    lp.row_lower_ = np.where(kind == 2, -np.inf, activity - np.where(kind == 0, 0.0, rng.uniform(0.1, 0.5, rows)))
    lp.row_upper_ = np.where(kind == 1, np.inf, np.where(kind == 0, activity, activity + rng.uniform(0.1, 0.5, rows)))
    lp.sense_ = sense
    matrix = sp.csc_matrix(A)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, rows
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
    h = new_highs()
    h.passModel(lp)
    return h


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
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = 2, 1
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = np.ones(2), np.zeros(2), np.full(2, np.inf)
    lp.row_lower_, lp.row_upper_ = np.array([-np.inf]), np.array([row_upper])
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = 2, 1
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = [0, 1, 2], [0, 0], [1.0, 1.0]
    h = new_highs()
    h.passModel(lp)
    return h


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
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = cols, rows
    lp.col_cost_, lp.col_lower_, lp.col_upper_ = rng.normal(size=cols), np.zeros(cols), np.ones(cols)
    lp.row_lower_, lp.row_upper_ = np.full(rows, -np.inf), np.full(rows, 1.0)
    lp.sense_ = highspy.ObjSense.kMaximize
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = cols, rows
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    h = new_highs()
    h.passModel(lp)
    with pytest.raises(InteriorTimeLimit):
        solve_interior(h, time_limit=1e-6)
