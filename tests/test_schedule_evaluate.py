from __future__ import annotations

import numpy as np
import pytest

from fairsched.metrics import evaluate
from fairsched.policies import make_policy
from fairsched.problem import Problem
from fairsched.runtime.simulation import run
from fairsched.schedule import Schedule
from fairsched.utilities import AccuracyUtility, Coverage


def small_problem(r=(0.5, 0.25, 0.25, 0.0)):
    return Problem(AccuracyUtility([4.0, 3.0, 2.0, 1.0]), 2, np.asarray(r), ("a", "b", "c", "d"))


def test_csv_round_trip(tmp_path):
    s = Schedule.from_sets([[0, 2], [1], [3, 0], []], 4)
    path = tmp_path / "s.csv"
    s.write(path, ["a", "b", "c", "d"])
    assert path.read_text().splitlines()[:3] == ["round,workers", "1,a c", "2,b"]
    back = Schedule.read(path, ["a", "b", "c", "d"])
    assert np.array_equal(back.indptr, s.indptr) and np.array_equal(back.indices, s.indices)


def test_masks_and_counts():
    s = Schedule.from_sets([[0, 2], [1], [2, 0]], 3)
    assert s.masks(1, 3).tolist() == [[False, True, False], [True, False, True]]
    assert s.counts().tolist() == [2, 1, 2]


def test_evaluate_against_hand_computation():
    problem = small_problem()
    sets = [[0, 1], [0, 2], [1, 2], [0, 1]]
    report = evaluate(Schedule.from_sets(sets, 4), problem, optimum=1.0)
    expected = np.mean([problem.utility.value(S) for S in sets])
    assert report.time_average_utility == pytest.approx(expected)
    assert report.ratio == pytest.approx(expected)
    assert report.selection_fraction.tolist() == [0.75, 0.75, 0.5, 0.0]
    assert report.fairness_slack == pytest.approx(0.0)  # worker d: 0 - 0
    # debts r_u t - N_u(t): worker c after round 1 is 0.25; worker a never positive
    assert report.max_debt == pytest.approx(0.25)


def test_evaluate_in_chunks_equals_one_pass(monkeypatch):
    problem = small_problem()
    schedule = run(problem, make_policy("random"), rounds=997, seed=3)
    whole = evaluate(schedule, problem)
    monkeypatch.setattr("fairsched.metrics.CHUNK_CELLS", 20)
    chunked = evaluate(schedule, problem)
    assert chunked.time_average_utility == pytest.approx(whole.time_average_utility, rel=1e-12)
    assert chunked.max_debt == pytest.approx(whole.max_debt)
    assert np.array_equal(chunked.selection_fraction, whole.selection_fraction)


def test_same_seed_same_schedule_and_different_seed_differs():
    problem = small_problem()
    a = run(problem, make_policy("random"), rounds=200, seed=7)
    b = run(problem, make_policy("random"), rounds=200, seed=7)
    c = run(problem, make_policy("random"), rounds=200, seed=8)
    assert np.array_equal(a.indices, b.indices)
    assert not np.array_equal(a.indices, c.indices)


def test_round_robin_visits_everyone_evenly():
    problem = small_problem()
    report = evaluate(run(problem, make_policy("round-robin"), rounds=400), problem)
    assert np.allclose(report.selection_fraction, 0.5)


def test_greedy_repeats_the_greedy_set():
    problem = Problem(Coverage([[0, 1], [1], [2, 3, 4], [0]], [1, 1, 1, 1, 1]), 2, np.zeros(4))
    schedule = run(problem, make_policy("greedy"), rounds=5)
    assert all(S.tolist() == [0, 2] for S in schedule)


def test_random_is_uniform_k_subsets():
    problem = small_problem()
    schedule = run(problem, make_policy("random"), rounds=4000, seed=1)
    assert (schedule.sizes() == 2).all()
    assert np.allclose(schedule.counts() / 4000, 0.5, atol=0.03)


@pytest.mark.parametrize("n", [1, 7, 64, 65, 300])
def test_distinct_rows_matches_numpy_unique(n):
    from fairsched.metrics import distinct_rows

    rng = np.random.default_rng(n)
    base = rng.random((5, n)) < 0.4
    masks = base[rng.integers(0, 5, 200)]
    first, inverse = distinct_rows(masks)
    assert np.array_equal(masks[first][inverse], masks)
    assert len(first) == np.unique(masks, axis=0).shape[0]
    assert len(set(map(bytes, np.packbits(masks[first], axis=1)))) == len(first)  # no row twice
