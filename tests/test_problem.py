from __future__ import annotations

import numpy as np
import pytest

from fairsched.errors import InfeasibleError, InstanceError
from fairsched.problem import Problem
from fairsched.utilities import AccuracyUtility


def make(k=2, r=(0.5, 0.5, 0.5), ids=()):
    return Problem(AccuracyUtility([1.0, 2.0, 3.0]), k, np.asarray(r, dtype=float), ids)


def test_valid_problem_defaults_ids():
    p = make()
    assert p.n == 3 and p.k == 2 and p.ids == ("0", "1", "2")


@pytest.mark.parametrize("k, message", [(0, "between 1 and n = 3"), (4, "between 1 and n = 3")])
def test_k_out_of_range(k, message):
    with pytest.raises(InstanceError, match=message):
        make(k=k)


def test_sum_of_floors_above_k_says_by_how_much():
    with pytest.raises(InfeasibleError, match=r"sum to 2\.4 > k = 2 \(excess 0\.4"):
        make(r=(0.8, 0.8, 0.8))


def test_floor_above_one_names_the_worker():
    with pytest.raises(InfeasibleError, match=r"worker 'b' needs r = 1\.2 > 1"):
        make(k=3, r=(0.1, 1.2, 0.1), ids=("a", "b", "c"))


@pytest.mark.parametrize("r, message", [
    ((0.1, -0.1, 0.1), "entry 1 is -0.1"),
    ((0.1, float("nan"), 0.1), "entry 1 is nan"),
    ((0.1, 0.1), "has 2 entries, expected 3"),
])
def test_malformed_floors(r, message):
    with pytest.raises(InstanceError, match=message):
        make(r=r)


def test_duplicate_ids():
    with pytest.raises(InstanceError, match="appears more than once"):
        make(ids=("a", "a", "b"))


def test_errors_are_value_errors():
    assert issubclass(InfeasibleError, ValueError) and issubclass(InstanceError, ValueError)


def test_sum_equal_to_k_is_feasible_despite_rounding():
    p = make(k=1, r=(0.1, 0.2, 0.7))  # 0.1 + 0.2 + 0.7 = 1.0000000000000002 in floats
    assert p.r.sum() == pytest.approx(1.0)
