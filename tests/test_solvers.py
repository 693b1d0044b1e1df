"""Tests of the solvers package: columns, the HiGHS LP, and the cvxpy model."""

from __future__ import annotations

import dataclasses
import itertools
import math
import subprocess
import sys

import cvxpy as cp
import numpy as np
import pytest
from fairsched.solvers import (
    DistributionLPResult,
    InfeasibleLPError,
    SolverError,
    TooManyColumnsError,
    build_cvxpy_model,
    count_k_subsets,
    k_subset_masks,
    solve_distribution_lp,
    solve_with_cvxpy,
)
from scipy.optimize import linprog

# ----------------------------------------------------------------------------- helpers


def random_instance(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Random (values, members, r) with feasible floors.

    r is a convex combination of a few columns (so it is met by that mixture), scaled
    by c <= 1 and with some entries zeroed; a third of the instances keep c = 1 and no
    zeros, so sum(r) = k exactly.
    """
    rng = np.random.default_rng(seed)
    n = int(rng.integers(4, 10))
    k = int(rng.integers(1, n))
    members = k_subset_masks(n, k)
    if seed % 4 == 3 and members.shape[0] > n + 2:
        keep = np.sort(rng.choice(members.shape[0], size=members.shape[0] // 2, replace=False))
        members = members[keep]
    values = rng.uniform(0.0, 1.0, size=members.shape[0])
    mix = rng.choice(members.shape[0], size=min(members.shape[0], int(rng.integers(1, 5))), replace=False)
    r = rng.dirichlet(np.ones(mix.size)) @ members[mix].astype(float)
    if seed % 3 != 0:
        r = r * rng.uniform(0.3, 1.0)
        r[rng.random(n) < 0.3] = 0.0
    return values, members, r


def linprog_value(values: np.ndarray, members: np.ndarray, r: np.ndarray) -> float:
    """Solve the same LP independently with scipy.optimize.linprog."""
    m = values.size
    res = linprog(
        -values,
        A_ub=-members.T.astype(float),
        b_ub=-r,
        A_eq=np.ones((1, m)),
        b_eq=[1.0],
        bounds=(0, None),
        method="highs",
    )
    assert res.status == 0, res.message
    return -res.fun


def assert_optimal_certificate(res: DistributionLPResult, values, members, r, *, tol: float) -> None:
    p, lam, mu = res.probabilities, res.fairness_price, res.convexity_dual
    coverage = members.T.astype(float) @ p
    # primal feasibility
    assert p.min() >= 0.0
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    assert (coverage >= r - 1e-8).all()
    assert res.value == pytest.approx(values @ p, abs=1e-12)
    # dual feasibility: lambda >= 0 and mu >= f(S) + lambda(S) for EVERY column
    assert lam.min() >= 0.0
    assert (mu >= values + members.astype(float) @ lam - tol).all()
    # strong duality
    assert res.dual_bound == pytest.approx(mu - r @ lam, abs=1e-12)
    assert abs(res.dual_bound - res.value) <= tol
    # complementary slackness
    priced = lam > tol
    assert np.abs(coverage[priced] - r[priced]).max(initial=0.0) <= 1e-8
    used = p > 1e-9
    reduced = mu - values - members.astype(float) @ lam
    assert np.abs(reduced[used]).max(initial=0.0) <= tol


# ----------------------------------------------------------------------------- columns


@pytest.mark.parametrize("n,k", [(0, 0), (1, 0), (1, 1), (5, 0), (5, 5), (6, 2), (7, 3), (9, 4), (10, 9)])
def test_k_subset_masks_are_all_k_subsets_in_lex_order(n: int, k: int) -> None:
    masks = k_subset_masks(n, k)
    assert masks.dtype == bool
    assert masks.shape == (math.comb(n, k), n) == (count_k_subsets(n, k), n)
    assert (masks.sum(axis=1) == k).all()
    assert len({row.tobytes() for row in masks}) == masks.shape[0]
    expected = [tuple(np.flatnonzero(row)) for row in masks]
    assert expected == list(itertools.combinations(range(n), k))


def test_k_subset_masks_large_counts() -> None:
    masks = k_subset_masks(16, 8)
    assert masks.shape == (12_870, 16)
    assert (masks.sum(axis=1) == 8).all()
    assert np.unique(np.packbits(masks, axis=1), axis=0).shape[0] == 12_870


def test_too_many_columns_message() -> None:
    with pytest.raises(TooManyColumnsError) as info:
        k_subset_masks(22, 11, max_columns=100_000)
    message = str(info.value)
    assert "705,432" in message and "100,000" in message
    assert "11-subsets of 22 workers" in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("n,k", [(5, 6), (5, -1), (-1, 0)])
def test_k_subset_masks_rejects_bad_k(n: int, k: int) -> None:
    with pytest.raises(ValueError):
        k_subset_masks(n, k)


# ----------------------------------------------------------------------------- LP: random instances


@pytest.mark.parametrize("seed", range(40))
def test_highs_matches_linprog_and_is_certified_optimal(seed: int) -> None:
    values, members, r = random_instance(seed)
    res = solve_distribution_lp(values, members, r)
    assert res.status == "optimal" and res.backend == "highs"
    assert res.value == pytest.approx(linprog_value(values, members, r), abs=1e-7)
    assert_optimal_certificate(res, values, members, r, tol=1e-7)
    # a basic optimum uses at most one column per constraint row
    assert res.support().size <= members.shape[1] + 1
    assert res.seconds >= 0 and res.iterations is not None


@pytest.mark.parametrize("seed", range(0, 40, 3))
def test_cvxpy_backend_matches_highs(seed: int) -> None:
    values, members, r = random_instance(seed)
    reference = linprog_value(values, members, r)
    res = solve_distribution_lp(values, members, r, backend="cvxpy")
    assert res.backend.startswith("cvxpy:")
    assert res.value == pytest.approx(reference, abs=1e-6)
    assert_optimal_certificate(res, values, members, r, tol=1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_cvxpy_clarabel_matches(seed: int) -> None:
    values, members, r = random_instance(seed)
    res = solve_with_cvxpy(values, members, r, solver="CLARABEL")
    assert res.backend == "cvxpy:CLARABEL"
    assert res.value == pytest.approx(linprog_value(values, members, r), abs=1e-6)
    assert res.dual_bound == pytest.approx(res.value, abs=1e-6)
    assert res.fairness_price.min() >= 0.0


@pytest.mark.parametrize("seed", range(5))
def test_zero_floors_give_best_single_column(seed: int) -> None:
    values, members, _ = random_instance(seed)
    r = np.zeros(members.shape[1])
    res = solve_distribution_lp(values, members, r)
    assert res.value == pytest.approx(values.max(), abs=1e-12)
    assert res.convexity_dual == pytest.approx(values.max(), abs=1e-9)
    # lambda need not be 0: with r = 0 the dual is degenerate (any small lambda on
    # workers outside the best column is optimal too), so only certify it.
    assert_optimal_certificate(res, values, members, r, tol=1e-7)


def test_hand_solved_instance_dual_signs() -> None:
    # columns {0}: 3, {1}: 2, {}: 1; r = (0.1, 0.5) -> p = (0.5, 0.5, 0), U = 2.5;
    # raising r_1 trades column {0} (3) for {1} (2): lambda_1 = 1, mu = 3.
    members = np.array([[1, 0], [0, 1], [0, 0]], dtype=bool)
    values = np.array([3.0, 2.0, 1.0])
    r = np.array([0.1, 0.5])
    for backend in ("highs", "cvxpy"):
        res = solve_distribution_lp(values, members, r, backend=backend)
        assert res.value == pytest.approx(2.5, abs=1e-9)
        assert np.allclose(res.probabilities, [0.5, 0.5, 0.0], atol=1e-9)
        assert np.allclose(res.fairness_price, [0.0, 1.0], atol=1e-8)
        assert res.convexity_dual == pytest.approx(3.0, abs=1e-8)
        assert res.dual_bound == pytest.approx(2.5, abs=1e-8)
    assert list(solve_distribution_lp(values, members, r).support()) == [0, 1]


def test_result_is_immutable() -> None:
    values, members, r = random_instance(0)
    res = solve_distribution_lp(values, members, r)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.value = 0.0  # type: ignore[misc]
    with pytest.raises(ValueError):
        res.probabilities[0] = 1.0


def test_integer_members_and_strided_inputs_accepted() -> None:
    values, members, r = random_instance(5)
    expected = solve_distribution_lp(values, members, r).value
    strided_values = np.repeat(values, 2)[::2]
    strided_r = np.repeat(r, 2)[::2]
    res = solve_distribution_lp(strided_values, members.astype(np.int64), strided_r)
    assert res.value == pytest.approx(expected, abs=1e-12)


# ----------------------------------------------------------------------------- infeasibility


@pytest.mark.parametrize("backend", ["highs", "cvxpy"])
def test_floor_above_one_names_worker(backend: str) -> None:
    members = k_subset_masks(4, 2)
    with pytest.raises(InfeasibleLPError, match=r"worker 2 .*> 1"):
        solve_distribution_lp(np.ones(6), members, np.array([0.0, 0.2, 1.5, 0.1]), backend=backend)


@pytest.mark.parametrize("backend", ["highs", "cvxpy"])
def test_uncovered_worker_named(backend: str) -> None:
    members = k_subset_masks(4, 2)
    members = members[~members[:, 3]]  # no column holds worker 3
    r = np.array([0.1, 0.1, 0.1, 0.2])
    with pytest.raises(InfeasibleLPError, match=r"worker 3 .*no column contains it"):
        solve_distribution_lp(np.ones(len(members)), members, r, backend=backend)


def test_uncovered_worker_with_zero_floor_is_fine() -> None:
    members = k_subset_masks(4, 2)
    members = members[~members[:, 3]]
    res = solve_distribution_lp(np.arange(len(members), dtype=float), members, np.array([0.1, 0.1, 0.1, 0.0]))
    assert res.fairness_price[3] == 0.0


def test_floors_above_column_size() -> None:
    members = k_subset_masks(3, 1)
    with pytest.raises(InfeasibleLPError, match="largest column size 1"):
        solve_distribution_lp(np.ones(3), members, np.array([0.6, 0.6, 0.0]))


@pytest.mark.parametrize("backend", ["highs", "cvxpy"])
def test_joint_infeasibility_reported_by_solver(backend: str) -> None:
    # columns {0,1} and {2}: p_{01} >= 0.5 and p_{2} >= 0.6 cannot both hold
    members = np.array([[1, 1, 0], [0, 0, 1]], dtype=bool)
    with pytest.raises(InfeasibleLPError, match="jointly"):
        solve_distribution_lp(np.ones(2), members, np.array([0.5, 0.5, 0.6]), backend=backend)


def test_no_columns_is_infeasible() -> None:
    with pytest.raises(InfeasibleLPError, match="no columns"):
        solve_distribution_lp(np.zeros(0), np.zeros((0, 3), dtype=bool), np.zeros(3))


# ----------------------------------------------------------------------------- input validation


@pytest.mark.parametrize(
    "values,members,r,match",
    [
        (np.ones(5), np.ones((6, 3), bool), np.zeros(3), "values has length 5 but members has 6 rows"),
        (np.ones((6, 1)), np.ones((6, 3), bool), np.zeros(3), "values must be 1-D"),
        (np.ones(6), np.ones(6, bool), np.zeros(3), "members must be 2-D"),
        (np.ones(6), np.ones((6, 3), bool), np.zeros(4), r"r must have shape \(3,\)"),
        (np.ones(6), np.full((6, 3), 2), np.zeros(3), "boolean"),
        (np.ones(6), np.ones((6, 3), bool), np.array([0.1, -0.1, 0.0]), ">= 0"),
        (np.array([1, 1, np.nan, 1, 1, 1]), np.ones((6, 3), bool), np.zeros(3), "finite"),
    ],
)
@pytest.mark.parametrize("backend", ["highs", "cvxpy"])
def test_shape_and_value_errors(values, members, r, match: str, backend: str) -> None:
    with pytest.raises(ValueError, match=match):
        solve_distribution_lp(values, members, r, backend=backend)


def test_bad_options() -> None:
    values, members, r = random_instance(1)
    with pytest.raises(ValueError, match="unknown backend"):
        solve_distribution_lp(values, members, r, backend="gurobi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="time_limit"):
        solve_distribution_lp(values, members, r, backend="cvxpy", time_limit=1.0)
    with pytest.raises(ValueError):
        solve_distribution_lp(values, members, r, tol=0.0)


def test_time_limit_is_accepted() -> None:
    values, members, r = random_instance(2)
    try:
        res = solve_distribution_lp(values, members, r, time_limit=60.0)
    except SolverError:  # pragma: no cover - only on a hopelessly slow machine
        pytest.fail("a tiny LP hit a 60 s time limit")
    assert res.status == "optimal"


# ----------------------------------------------------------------------------- cvxpy model


def test_cvxpy_model_can_be_extended_with_user_constraints() -> None:
    values, members, r = random_instance(4)
    model = build_cvxpy_model(values, members, r)
    best = int(np.argmax(values))
    extended = cp.Problem(model.problem.objective, model.constraints + [model.p[best] == 0])
    extended.solve(solver="HIGHS")
    keep = np.arange(len(values)) != best
    expected = solve_distribution_lp(values[keep], members[keep], r)
    assert extended.value == pytest.approx(expected.value, abs=1e-7)
    assert model.constraints == [model.fairness, model.convexity]
    assert model.p.shape == (len(values),)


def test_missing_cvxpy_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cvxpy", None)
    values, members, r = random_instance(0)
    with pytest.raises(ImportError, match=r"pip install 'cvxpy', or from a fairsched checkout: pip install '\.\[cvxpy\]'"):
        solve_distribution_lp(values, members, r, backend="cvxpy")


def test_import_is_light_and_independent() -> None:
    code = (
        "import sys, solvers; "
        "assert 'fairsched' not in sys.modules, 'solvers imported fairsched'; "
        "assert 'cvxpy' not in sys.modules, 'solvers imported cvxpy eagerly'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_time_limits_are_per_call_for_a_model_solved_again() -> None:
    """HiGHS compares ``time_limit`` with the run time accumulated over every ``run`` of the
    object: a master LP or pricing MILP re-solved many times stopped "at the time limit" as
    soon as its past runs added up to the remaining budget.  ``set_time_limit`` gives the
    budget on top of the accumulated time."""
    import highspy

    from fairsched.solvers.lp import new_highs, set_time_limit

    rng = np.random.default_rng(0)
    n = m = 300
    A = rng.uniform(0, 1, (m, n))
    h = new_highs()
    inf = highspy.kHighsInf
    costs = rng.uniform(0, 1, n)
    h.passModel(n, m, m * n, int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMaximize), 0.0,
                costs, np.zeros(n), np.full(n, inf), np.full(m, -inf), np.ones(m),
                np.arange(0, m * n + 1, m).astype(np.int32), np.tile(np.arange(m), n).astype(np.int32),
                np.ascontiguousarray(A.T.reshape(-1)), np.zeros(n, dtype=np.int32))
    h.run()
    spent = h.getRunTime()
    assert spent > 0.002
    for _ in range(3):  # slightly changed costs: re-solves from the warm basis take a fraction of the first
        set_time_limit(h, spent)
        h.changeColsCost(n, np.arange(n, dtype=np.int32), costs * rng.uniform(0.99, 1.01, n))
        h.run()
        assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal



def test_a_mip_time_limit_counts_from_the_start_of_its_run() -> None:
    """The other half of HiGHS's behaviour that the MILP pricing relies on: for a MIP,
    ``time_limit`` is per run (each run of a hard MIP takes the limit, whatever ran before)."""
    import time

    import highspy

    h = _knapsack_mip(np.random.default_rng(0), 60, 40)
    h.setOptionValue("time_limit", 0.3)
    for i in range(3):
        h.changeColCost(0, float(i + 1))
        started = time.perf_counter()
        h.run()
        assert h.getModelStatus() == highspy.HighsModelStatus.kTimeLimit
        assert time.perf_counter() - started >= 0.25  # not stopped at once by the time run before


def test_highs_declares_lazy_constraints_but_never_asks_for_them() -> None:
    """Why the MILP pricing keeps its cut loop (``fairsched.lp.pricing.milp``): HiGHS (1.16)
    declares a lazy-constraint callback type, but its branch and bound never calls it, while the
    solution callback of the same solve is called.  If a HiGHS release starts asking, this
    fails, and the loop's rounds could become one branch and bound."""
    import highspy

    h = _knapsack_mip(np.random.default_rng(1), 30, 10)
    calls: dict[object, int] = {}

    def count(callback_type, message, data_out, data_in, user_data) -> None:
        calls[callback_type] = calls.get(callback_type, 0) + 1

    kinds = highspy.cb.HighsCallbackType
    h.setCallback(count, None)
    h.startCallback(kinds.kCallbackMipDefineLazyConstraints)
    h.startCallback(kinds.kCallbackMipSolution)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    assert calls.get(kinds.kCallbackMipSolution, 0) > 0
    assert calls.get(kinds.kCallbackMipDefineLazyConstraints, 0) == 0


def _knapsack_mip(rng: np.random.Generator, n: int, m: int):
    """A HiGHS model of a random multi-dimensional knapsack: ``n`` binaries, ``m`` rows."""
    import highspy

    from fairsched.solvers.lp import new_highs

    A = rng.integers(1, 30, (m, n)).astype(float)
    h = new_highs()
    h.passModel(n, m, m * n, int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMaximize), 0.0,
                rng.uniform(1, 10, n), np.zeros(n), np.ones(n), np.full(m, -highspy.kHighsInf), A.sum(axis=1) / 3,
                np.arange(0, m * n + 1, m).astype(np.int32), np.tile(np.arange(m), n).astype(np.int32),
                np.ascontiguousarray(A.T.reshape(-1)), np.ones(n, dtype=np.int32))
    return h


@pytest.mark.parametrize("max_nnz", [1, 3, 1 << 22])
def test_gather_equals_the_taken_parts_joined(max_nnz: int) -> None:
    """Columns.gather writes the picked columns of each part straight into one array: the same
    columns as taking them from each part and joining the copies, for parts of one common size
    (a 2-D view) and of unequal sizes (chunks of ``max_nnz`` indices), repeats and empty picks."""
    from fairsched.solvers.columns import Columns

    rng = np.random.default_rng(3)
    n = 9
    common = Columns.from_rows(np.array([rng.choice(n, 3, replace=False) for _ in range(7)]), n)
    unequal = Columns.from_sets([rng.choice(n, size, replace=False) for size in (2, 0, 5, 1, 4, 3)], n)
    picks = [(common, np.array([5, 0, 2])), (unequal, np.array([1, 2, 2, 4, 0])), (common, np.array([], dtype=int)),
             (unequal, np.array([5]))]
    gathered = Columns.gather(picks, n, max_nnz)
    joined = Columns.concatenate([part.take(index) for part, index in picks], n)
    assert gathered.n == n and len(gathered) == 9
    np.testing.assert_array_equal(gathered.indptr, joined.indptr)
    np.testing.assert_array_equal(gathered.indices, joined.indices)
    assert [gathered[j].tolist() for j in range(3)] == [common[5].tolist(), common[0].tolist(), common[2].tolist()]
    assert len(Columns.gather([], n)) == 0
    with pytest.raises(IndexError, match="out of range"):
        Columns.gather([(common, np.array([7])), (unequal, np.array([0]))], n)


def test_to_sets_are_read_only_views_of_the_columns_indices() -> None:
    """A support of m sets of size k is not copied again (n = 200,000, k = 1,000: 1.5 GiB of
    int64 copies at the peak of ``fairsched run`` before)."""
    from fairsched.solvers.columns import Columns

    for columns in (Columns.from_sets([np.array([4, 1]), np.array([2]), np.array([0, 3, 4])], 5),
                    Columns.from_rows(np.array([[3, 0], [2, 1]]), 5)):
        sets = columns.to_sets()
        assert [S.tolist() for S in sets] == [sorted(columns[j].tolist()) for j in range(len(columns))]
        assert all(np.shares_memory(S, columns.indices) and not S.flags.writeable for S in sets)
        assert columns.indices.flags.writeable  # the columns' own array is untouched
