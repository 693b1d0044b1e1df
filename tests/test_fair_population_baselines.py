"""The fair-population experiment against strong baselines (fairsched.experiments.fair_population_baselines)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fairsched.experiments.fair_population_baselines import RULES, run_seed, train_schedule
from fairsched.fl.aggregation import example_strata, poststratified_client_data
from fairsched.fl.stratified import FairPopulationConfig, make_stratified_population
from fairsched.fl.training import TrainConfig, train

CONFIG = FairPopulationConfig(clients=200, test_per_stratum=2000)


def test_round_by_round_training_equals_the_training_loop():
    """Size and IPW aggregation equal :func:`train` on the whole data with the same weights; a
    post-stratified schedule of one fixed set equals :func:`train` on that set's ω-weighted data."""
    pop = make_stratified_population(0, CONFIG)
    strata = example_strata(pop.sizes, pop.data.X.shape[1])
    rng = np.random.default_rng(0)
    members = np.flatnonzero(pop.enrolled)
    schedule = [np.sort(rng.choice(members, 6, replace=False)) for _ in range(12)]
    config = TrainConfig(rounds=12)
    enroll_weight = rng.uniform(1.0, 3.0, pop.data.clients)
    shares = np.array([0.5, 0.3, 0.2])
    for aggregation, factor in (("size", np.ones(pop.data.clients)), ("ipw", enroll_weight)):
        ours = train_schedule(pop.data, strata, schedule, aggregation, enroll_weight, shares, config)
        reference = train(pop.data, schedule, [pop.data.sizes[c] * factor[c] for c in schedule], config)[-1]
        np.testing.assert_allclose(ours, reference, rtol=1e-10, atol=1e-12)
    fixed = schedule[0]
    ours = train_schedule(pop.data, strata, [fixed] * 12, "poststratified", enroll_weight, shares, config)
    data, w = poststratified_client_data(pop.data, strata, fixed, shares)
    reference = train(data, [np.arange(w.size)] * 12, [w] * 12, config)[-1]
    np.testing.assert_allclose(ours, reference, rtol=1e-10, atol=1e-12)


def test_every_rule_is_measured_in_the_same_run():
    config = replace(CONFIG, train=replace(CONFIG.train, rounds=20))
    row = run_seed(1, 20, 0.9, config)
    assert set(row) == {"floor_selections"} | {f"{s}+{a}" for s, a in RULES}
    assert all(np.isfinite(v) and v > 0 for v in row.values())
    assert row == run_seed(1, 20, 0.9, config)  # same seed, same result


def test_the_comparison_runs_on_the_real_data():
    from fairsched.experiments.fair_population_baselines import run_cps_seed

    row = run_cps_seed("moderate", 0, 10, 0.9)
    assert set(row) == {"floor_selections"} | {f"{s}+{a}" for s, a in RULES}
    assert all(np.isfinite(v) and v > 0 for v in row.values())
