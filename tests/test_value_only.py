"""``optimum(..., support=False)``: ``U_opt`` and its certificate without gathering the sets of
the distribution, and ``fairsched run`` asking for that where its policy has no plan."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tomli_w
from test_colgen import (
    KINDS,
    accuracy_lp,
    brute_force_max,
    check_distribution,
    enumeration_oracle,
    random_floors,
    random_problem,
)

import fairsched as fs
import fairsched.cli.run as cli_run
from fairsched.cli import main
from fairsched.lp.solve import optimum
from fairsched.problem import Problem
from fairsched.solvers import column_generation
from fairsched.utilities import AccuracyUtility


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", range(4))
def test_value_only_is_the_optimum_with_a_certificate_and_no_sets(kind, seed):
    problem = random_problem(kind, seed)
    reference = optimum(problem, method="enumeration").value
    bare = optimum(problem, method="column-generation", gap=1e-9, support=False)
    assert bare.status == "optimal" and bare.success
    assert bare.support == [] and bare.probabilities.size == 0
    assert bare.value == pytest.approx(reference, abs=1e-7)
    # the bound holds at the reported prices, by a maximisation written here
    lam = np.asarray(bare.fairness_price, dtype=float)
    assert bare.upper_bound >= brute_force_max(problem.utility, problem.k, lam) - lam @ problem.r - 1e-9
    assert bare.upper_bound >= reference - 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_the_solver_drops_only_the_sets(seed):
    """Same pool, same oracle: the value, bound and prices of the full answer, no sets."""
    values, members, r = accuracy_lp(seed)
    pool = np.arange(3)  # three sets: the floors are met only after the elastic phase
    full = column_generation(values[pool], members[pool], r, enumeration_oracle(values, members), gap=1e-9)
    bare = column_generation(values[pool], members[pool], r, enumeration_oracle(values, members), gap=1e-9,
                             keep_support=False)
    assert full.status == bare.status == "optimal"
    assert len(full.support) > 0 and len(bare.support) == 0 and bare.probabilities.size == bare.values.size == 0
    assert bare.value == pytest.approx(full.value, rel=1e-12)
    assert bare.upper_bound == full.upper_bound and bare.pricing_bound == full.pricing_bound
    assert np.array_equal(bare.fairness_price, full.fairness_price)


def test_a_run_that_stops_short_keeps_its_sets():
    """A caller may go on from a distribution that is not certified, so it is returned whole."""
    rng = np.random.default_rng(3)
    n, k = 300, 30
    problem = Problem(AccuracyUtility(rng.integers(50, 1001, n).astype(float)), k, random_floors(n, k, rng))
    opt = optimum(problem, time_limit=1e-3, gap=1e-12, support=False)
    assert opt.status == "time-limit" and len(opt.support) > 0
    check_distribution(opt, problem)


@pytest.fixture(scope="module")
def accuracy_instance(tmp_path_factory) -> tuple[str, Problem, float]:
    """An accuracy instance column generation solves (``C(120, 12)`` sets), with its ``U_opt``."""
    rng = np.random.default_rng(5)
    n, k = 120, 12
    sizes = rng.integers(50, 1001, n).astype(float)
    r = random_floors(n, k, rng).round(6)
    table = {"name": "accuracy-n120", "k": k, "rounds": 200, "workers": {"r": r.tolist()},
             "utility": {"kind": "accuracy", "sizes": sizes.tolist()}}
    path = tmp_path_factory.mktemp("value-only") / "instance.toml"
    path.write_text(tomli_w.dumps(table))
    problem = fs.load_instance(path)
    reference = optimum(problem)
    assert reference.method.startswith("column-generation") and reference.status == "optimal"
    return str(path), problem, reference.value


@pytest.mark.parametrize("policy, wants_sets", [("fairdg", False), ("random", False), ("lp-sequenced", True)])
def test_run_asks_for_the_sets_only_when_its_policy_plays_them(accuracy_instance, capsys, monkeypatch, policy,
                                                                wants_sets):
    path, problem, reference = accuracy_instance
    asked = []

    def spy(*args, **kwargs):
        asked.append(kwargs.get("support", True))
        return optimum(*args, **kwargs)

    monkeypatch.setattr(cli_run, "optimum", spy)
    assert main(["run", path, "--policy", policy, "--rounds", "200", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert asked == [wants_sets]
    assert data["optimum_status"] == "optimal"
    assert data["optimum"] == pytest.approx(reference, rel=1e-6)
    assert data["optimum_upper_bound"] >= data["optimum"]
    assert data["max_debt"] < 1 or policy == "random"
