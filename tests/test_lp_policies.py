"""lp-random, lp-sequenced and lyapunov (docs/mathematics.md §9)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fairsched.errors import PolicyError
from fairsched.instances import load_instance
from fairsched.instances.generators import PAPER_BETAS
from fairsched.lp.solve import optimum
from fairsched.solvers.colgen import DEFAULT_GAP
from fairsched.metrics import evaluate, set_values
from fairsched.policies import FairDG, LPRandom, LPSequenced, Lyapunov, make_policy
from fairsched.policies.lp import DeadlineGuard
from fairsched.runtime.simulation import run

from conftest import INSTANCES, bundled_instances
from test_fairdg import fair_instances, floors_always_met

ROUNDS = 100_000
#: the β sweep of the paper instance at a fifth of the paper's horizon (CI time: lp-sequenced
#: costs about 0.3 ms per round at n = 10); the bundled instances and the largest β at 10^5
SWEEP_ROUNDS = 20_000
CASES = [(INSTANCES / "paper.toml", beta) for beta in PAPER_BETAS] + [
    (path, None) for path in bundled_instances() if path.name != "paper.toml"]


@pytest.mark.parametrize("path, beta", CASES, ids=[f"{p.stem}-{b}" for p, b in CASES])
def test_lp_sequenced_reaches_u_opt_with_debt_below_one(path, beta):
    problem = load_instance(path, beta=beta)
    u_opt = optimum(problem).value
    rounds = ROUNDS if beta is None or beta == max(PAPER_BETAS) else SWEEP_ROUNDS
    schedule = run(problem, LPSequenced(), rounds)
    report = evaluate(schedule, problem, u_opt)
    assert report.ratio >= 0.999
    assert report.max_debt < 1
    assert floors_always_met(schedule, problem.r)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fair_instances())
def test_lp_sequenced_debt_below_one_on_random_instances(instance):
    problem, rounds = instance
    schedule = run(problem, LPSequenced(), rounds)
    assert floors_always_met(schedule, problem.r)


def test_margin_raises_every_rate_and_costs_at_most_the_allowed_loss():
    problem = load_instance(INSTANCES / "coverage.toml")
    policy = LPSequenced(margin=0.01, loss=2e-4)
    schedule = run(problem, policy, 20_000)
    u_opt = optimum(problem).value
    assert 0 < policy.epsilon <= 0.01
    assert policy.optimum.value >= (1 - 2e-4) * u_opt
    assert evaluate(schedule, problem, u_opt).ratio >= 0.999


def test_guard_flags_a_set_that_makes_a_floor_unreachable():
    guard = DeadlineGuard(np.array([0.5, 0.5, 0.5, 0.5]), k=2)
    guard.rebuild(np.array([1, 1, 0, 0]), t=2)  # before round 2 workers 2 and 3 are one behind
    assert guard.safe([np.array([0, 1]), np.array([2, 3])]).tolist() == [False, True]
    # worker 2 away this round: its overdue job waits, so {0, 3} is safe now (h = 0) ...
    away = np.array([True, True, False, True])
    assert guard.safe([np.array([0, 3])], guard.blocked(away, np.array([1, 1, 0, 0]))).tolist() == [True]
    assert guard.safe([np.array([0, 3])]).tolist() == [False]  # ... but not with everyone there


def brute_force_safe(r, k, window, counts, t, sets):
    """The demand-bound test by definition: O(n·W) per call."""
    steps = np.arange(window + 1)
    required = np.floor(r[:, None] * (t + steps)[None, :] + 1e-9)
    due = np.maximum(required - counts[:, None], 0).sum(axis=0)
    verdicts = []
    for S in sets:
        served = (required[S] - counts[S][:, None] >= 1).sum(axis=0)
        verdicts.append(bool((due - served <= k * steps).all()))
    return verdicts


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_incremental_guard_equals_its_rebuild_and_the_definition(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 12))
    k = int(rng.integers(1, n + 1))
    r = rng.choice([0.0, 0.05, 0.3, 0.5, 1 / 3, 1.0], n) * rng.uniform(0.5, 1, n)
    guard = DeadlineGuard(r, k, window=int(rng.integers(1, 30)))
    counts = np.zeros(n, dtype=np.int64)
    guard.rebuild(counts, 1)
    for t in range(1, 80):
        sets = [np.sort(rng.choice(n, size=int(rng.integers(0, k + 1)), replace=False)) for _ in range(3)]
        assert guard.safe(sets).tolist() == brute_force_safe(r, k, guard.window, counts, t, sets)
        served = sets[0]
        counts[served] += 1
        guard.observe(served, counts)
        fresh = DeadlineGuard(r, k, window=guard.window)
        fresh.rebuild(counts, t + 1)
        assert (guard.late, guard.ring.tolist(), guard.next_due.tolist()) == (
            fresh.late, np.roll(fresh.ring, 0).tolist(), fresh.next_due.tolist())


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_kept_machines_leave_the_other_workers_the_test_on_the_machines_left(seed):
    """``slack + reserve(kept)`` is the other workers' slack on ``k − a`` machines: the
    verdicts equal the demand-bound test by definition with the kept workers' floors removed
    and ``a`` fewer machines, whatever the kept workers owe."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 12))
    k = int(rng.integers(2, n))
    r = rng.choice([0.0, 0.05, 0.3, 0.5, 1 / 3, 1.0], n) * rng.uniform(0.5, 1, n)
    t = int(rng.integers(1, 60))
    counts = np.maximum(np.floor(r * t) + rng.integers(-2, 3, n), 0).astype(np.int64)
    kept = np.sort(rng.choice(n, size=int(rng.integers(1, k)), replace=False))
    others = np.ones(n, dtype=bool)
    others[kept] = False
    guard = DeadlineGuard(r, k, window=int(rng.integers(1, 30)))
    guard.rebuild(counts, t)
    reserve = guard.reserve(kept, counts)
    alone = DeadlineGuard(np.where(others, r, 0.0), k - kept.size, window=guard.window)
    alone.rebuild(counts, t)
    assert (guard.slack() + reserve).tolist() == alone.slack().tolist()
    sets = [np.sort(rng.choice(np.flatnonzero(others), size=int(rng.integers(0, min(k - kept.size, others.sum()) + 1)),
                               replace=False)) for _ in range(4)]
    assert guard.safe(sets, 0, reserve).tolist() == brute_force_safe(np.where(others, r, 0.0), k - kept.size,
                                                                     guard.window, counts, t, sets)


def inverse_pareto_accuracy(n: int, k: int, seed: int):
    """Pareto(1.5) sizes from 20, floors proportional to ``1/√size`` scaled to ``Σ r = 0.9·k``:
    the plan plays its heaviest workers in every round and the others sit at their floors."""
    from fairsched.problem import Problem
    from fairsched.utilities import AccuracyUtility
    rng = np.random.default_rng(seed)
    sizes = np.minimum(20.0 * (1.0 + rng.pareto(1.5, n)), 50_000.0).round()
    r = 1.0 / np.sqrt(sizes)
    return Problem(AccuracyUtility(sizes), k, np.minimum(r * 0.9 * k / r.sum(), 1.0))


@pytest.mark.parametrize("seed", [0, 1])
def test_the_workers_the_plan_always_plays_keep_their_machines(monkeypatch, seed):
    """Where the plan plays its heaviest workers in every round and the other floors fill the
    other machines, lp-sequenced keeps those workers in every round (the guard judges the
    others on the machines left) with every debt below 1, and loses at most 1e-4 of U_opt;
    judged on all ``k`` machines the backlog it lets build takes their machines in some rounds
    (measured: rates 0.98 and 0.98, ratios 0.99905 and 0.99867 at ``n = 100``, ``k = 10``)."""
    problem = inverse_pareto_accuracy(100, 10, seed)
    opt = optimum(problem)
    policy = LPSequenced()
    schedule = run(problem, policy, 3000, optimum=opt)
    always = policy._always_planned
    assert policy._kept is not None and np.array_equal(policy._kept, np.flatnonzero(always))
    assert (schedule.masks()[:, always]).all()
    report = evaluate(schedule, problem, opt.value)
    assert report.ratio >= 1 - 1e-4 and report.max_debt < 1
    assert floors_always_met(schedule, problem.r)
    monkeypatch.setattr(LPSequenced, "_kept_machines", lambda self: None)
    before = run(problem, LPSequenced(), 3000, optimum=opt)
    assert not before.masks()[:, always].all()
    assert evaluate(before, problem, opt.value).ratio < report.ratio


def heavy_tailed_accuracy(n: int, k: int, seed: int):
    """Pareto(1.2) sizes, floors uniform scaled to ``Σ r = 0.9·k``: many workers sit at their floor."""
    from fairsched.problem import Problem
    from fairsched.utilities import AccuracyUtility
    rng = np.random.default_rng(seed)
    sizes = np.round((rng.pareto(1.2, n) + 1) * 20, 6)
    r = rng.uniform(0, 1, n)
    return Problem(AccuracyUtility(sizes), k, np.minimum(r * 0.9 * k / r.sum(), 1.0))


def smallest_safe_swaps(policy, S, edf, blocked, reserve=None):
    """By definition: swap in EDF order; out the workers in every planned set last, before them
    the lightest for the accuracy utility (no cap) and the least urgent (r = 0 first) for any
    other (up to ``k/4`` swaps); scan every count. With ``reserve`` (the machines kept for the
    workers in every planned set): those never swap, and a set is judged by its other members
    on the other machines."""
    from fairsched.policies.lp import MAX_SWAP_SHARE
    from fairsched.utilities import AccuracyUtility
    debt = policy.problem.r * (policy.t + 1) - policy.counts
    with np.errstate(divide="ignore"):
        urgency = np.where(policy.problem.r > 0, (1 - debt) / np.where(policy.problem.r > 0, policy.problem.r, 1), np.inf)
    accuracy = isinstance(policy.problem.utility, AccuracyUtility)
    first = policy.problem.utility.sizes if accuracy else -urgency
    cap = policy.problem.k if accuracy else int(MAX_SWAP_SHARE * policy.problem.k)
    plan = policy.plan()
    in_every_set = set.intersection(*(set(np.asarray(T).tolist()) for T in plan.support))
    kept = in_every_set if reserve is not None else set()
    incoming = [u for u in edf if u not in set(S.tolist()) and u not in kept]
    outgoing = sorted((u for u in S if u not in set(edf.tolist()) and u not in kept),
                      key=lambda u: (u in in_every_set, first[u]))
    for j in range(min(len(incoming), len(outgoing), cap) + 1):
        T = np.sort(np.array([u for u in S if u not in set(outgoing[:j])] + incoming[:j], dtype=np.int64))
        judged = np.array([u for u in T if u not in kept], dtype=np.int64)
        if policy._guard.safe([judged], blocked, reserve)[0]:
            return j, T
    return None, None


def facility_location_overrides():
    from fairsched.instances.generators import facility_location_instance
    from fairsched.instances.io import problem_from_table
    return problem_from_table(facility_location_instance(n=40, k=8, points=60, load=0.95, seed=1))


@pytest.mark.parametrize("make", [lambda: heavy_tailed_accuracy(120, 12, seed=1), facility_location_overrides],
                         ids=["accuracy", "facility-location"])
def test_guard_plays_the_candidate_needing_the_fewest_urgent_swaps(monkeypatch, make):
    """Every override is safe, needs no fewer swaps by a scan of every count (members in the
    order of the utility's kind), and is the EDF set only when no swap count within the cap of
    any candidate is safe; debts stay below 1. With machines kept for the always-planned
    workers (accuracy), the override on the machines left is checked the same way, against
    the other workers' jobs, and played only where the whole guard finds it safe."""
    problem = make()
    policy = LPSequenced(period_states=0)
    original = LPSequenced._least_override
    checked, kept_played = [], []

    def checking(self, candidates, edf, blocked, reserve=None):
        result = original(self, candidates, edf, blocked, reserve)
        if reserve is None:
            assert not self._guard.safe(candidates, blocked).any()  # the override is the fallback
        else:
            kept_safe = self._guard.safe([self._others(S) for S in candidates], blocked, reserve)
            assert not (self._guard.safe(candidates, blocked) & kept_safe).any()
        scans = [smallest_safe_swaps(self, S, edf, blocked, reserve)[0] for S in candidates]
        found = [j for j in scans if j is not None]
        if result is None:
            assert not found
        else:
            which, chosen, swaps = result
            assert self._guard.safe([chosen if reserve is None else self._others(chosen)], blocked, reserve)[0]
            assert swaps == min(found) and scans.index(swaps) == which
            assert np.array_equal(chosen, smallest_safe_swaps(self, candidates[which], edf, blocked, reserve)[1])
        if reserve is None:
            checked.append(result is not None)
        else:
            kept_played.append(result is not None and bool(self._guard.safe([result[1]], blocked)[0]))
        return result

    monkeypatch.setattr(LPSequenced, "_least_override", checking)
    schedule = run(problem, policy, 1500)
    overrides = sum(checked) + sum(kept_played)
    assert overrides >= 20 and policy.swapped_in >= overrides
    assert policy.guarded_rounds == len(checked) + sum(kept_played)
    assert policy.edf_rounds == len(checked) - sum(checked)
    assert (policy._kept is not None) == (make is not facility_location_overrides)
    if policy._kept is not None:
        assert sum(kept_played) >= 20
    assert floors_always_met(schedule, problem.r)


def test_swapping_urgent_workers_in_beats_playing_edf(monkeypatch):
    """On heavy-tailed accuracy data (``n = 200``, ``k = 20``, 5,000 rounds, seeds 0–2) the guard's
    swaps keep more utility than whole EDF rounds (the fallback before them): ratios measured
    0.999920 / 0.999937 / 0.999962 against 0.999021 / 0.998150 / 0.998793, a mean gain of
    1.3e-3; the test asks for 6e-4, with every debt below 1 either way."""
    gains = []
    for seed in range(3):
        problem = heavy_tailed_accuracy(200, 20, seed)
        opt = optimum(problem)
        with monkeypatch.context() as patch:
            swapped = run(problem, LPSequenced(), 5000, optimum=opt)
            patch.setattr(LPSequenced, "_least_override", lambda self, *args: None)
            edf_only = run(problem, LPSequenced(), 5000, optimum=opt)
        with_swaps, without = (evaluate(s, problem, opt.value) for s in (swapped, edf_only))
        assert with_swaps.max_debt < 1 and without.max_debt < 1
        assert floors_always_met(swapped, problem.r)
        gains.append(with_swaps.ratio - without.ratio)
    assert np.mean(gains) >= 6e-4, gains


def test_a_restore_keeps_the_override_counters_and_plays_the_same_overrides():
    """Saved after 700 rounds of heavy-tailed accuracy data (hundreds of overrides) and
    restored, lp-sequenced keeps ``guarded_rounds``, ``swapped_in`` and ``edf_rounds``, finds
    the same always-planned members and plays the same 500 rounds as the original."""
    import json
    problem = heavy_tailed_accuracy(200, 20, 1)
    original = LPSequenced()
    original.use_optimum(optimum(problem))
    original.reset(problem, seed=0)
    for _ in range(700):
        original.observe(original.select())
    assert original.guarded_rounds > 100 and original.swapped_in > original.edf_rounds
    restored = LPSequenced()
    restored.reset(problem, seed=0)
    restored.load_state_dict(json.loads(json.dumps(original.state_dict())))
    counters = ("guarded_rounds", "swapped_in", "edf_rounds")
    assert [getattr(restored, c) for c in counters] == [getattr(original, c) for c in counters]
    assert np.array_equal(restored._always_planned, original._always_planned) and original._always_planned.any()
    for _ in range(500):
        chosen = original.select()
        assert np.array_equal(restored.select(), chosen)
        original.observe(chosen)
        restored.observe(chosen)
    assert [getattr(restored, c) for c in counters] == [getattr(original, c) for c in counters]


def test_lp_sequenced_state_restores_the_plan_without_solving(monkeypatch):
    import json

    import fairsched.policies.lp as lp_module
    from fairsched.runtime.scheduler import Scheduler

    problem = load_instance(INSTANCES / "coverage.toml")
    original = Scheduler(problem, "lp-sequenced", margin=0.01)
    for t in range(1, 301):
        original.observe_indices(t, original.select_indices(t)[1:])
    state = json.loads(json.dumps(original.state_dict()))

    def no_solve(*args, **kwargs):
        raise AssertionError("the LP was solved again")

    monkeypatch.setattr(lp_module, "optimum", no_solve)
    restored = Scheduler(problem, "lp-sequenced", margin=0.01)
    restored.load_state_dict(state)
    assert restored.policy.epsilon == original.policy.epsilon > 0
    assert np.array_equal(restored.policy.optimum.probabilities, original.policy.optimum.probabilities)
    for t in range(301, 601):
        mask = np.arange(problem.n) % 3 != t % 3
        a, b = original.select_indices(t, mask), restored.select_indices(t, mask)
        assert np.array_equal(a, b)
        original.observe_indices(t, a)
        restored.observe_indices(t, b)
    assert original.state_dict() == restored.state_dict()


def test_a_damaged_or_foreign_plan_is_refused():
    from fairsched.errors import CheckpointError
    from fairsched.runtime.scheduler import Scheduler

    problem = load_instance(INSTANCES / "coverage.toml")
    scheduler = Scheduler(problem, "lp-random")
    scheduler.observe_indices(1, scheduler.select_indices(1))
    state = scheduler.state_dict()
    plan = state["policy"]["plan"]
    plan["probabilities"] = plan["probabilities"][:-4]
    with pytest.raises(CheckpointError, match="stored LP plan is damaged"):
        Scheduler(problem, "lp-random").load_state_dict(state)
    state = scheduler.state_dict()
    state["policy"]["plan"]["epsilon"] = 0.05  # the binding floors, raised, are not met
    with pytest.raises(CheckpointError, match="stored LP plan does not meet"):
        Scheduler(problem, "lp-random").load_state_dict(state)


def test_lp_random_matches_u_opt_and_the_lp_marginals():
    problem = load_instance(INSTANCES / "coverage.toml")
    opt = optimum(problem)
    schedule = run(problem, LPRandom(), ROUNDS, seed=3)
    values = set_values(problem, schedule.masks())
    se = values.std(ddof=1) / np.sqrt(ROUNDS)
    assert abs(values.mean() - opt.value) <= 3 * se
    marginals = np.zeros(problem.n)
    for S, p in zip(opt.support, opt.probabilities):
        marginals[S] += p
    fractions = schedule.counts() / ROUNDS
    assert (np.abs(fractions - marginals) <= 4 * np.sqrt(marginals * (1 - marginals) / ROUNDS) + 1e-12).all()


@pytest.mark.parametrize("name", ["lp-random", "lp-sequenced", "lyapunov"])
def test_same_seed_same_schedule(name):
    problem = load_instance(INSTANCES / "facility-location.toml")
    a = run(problem, make_policy(name), 2000, seed=9)
    b = run(problem, make_policy(name), 2000, seed=9)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)


def test_lyapunov_trades_utility_gap_for_queue_length():
    problem = load_instance(INSTANCES / "coverage.toml")
    u_opt = optimum(problem).value
    gaps, queues = [], []
    for V in (0.3, 3.0, 30.0):
        policy = Lyapunov(V=V)
        report = evaluate(run(problem, policy, 20_000), problem, u_opt)
        gaps.append(1 - report.ratio)
        queues.append(policy.max_queue)
    assert gaps[0] > gaps[1] > gaps[2]
    assert queues[0] < queues[1] < queues[2]


def test_lyapunov_meets_floors_in_the_long_run():
    problem = load_instance(INSTANCES / "paper.toml")
    report = evaluate(run(problem, Lyapunov(V=10), 20_000), problem)
    assert report.fairness_slack >= -1e-3


@pytest.mark.parametrize("cls, params, message", [
    (Lyapunov, {"V": 0}, "V must be a finite number > 0, got 0"),
    (Lyapunov, {"V": float("nan")}, "V must be a finite number > 0, got nan"),
    (Lyapunov, {"V": "ten"}, "V must be a finite number > 0, got 'ten'"),
    (LPSequenced, {"margin": -0.1}, "margin must be a finite number >= 0 and <= 1, got -0.1"),
    (LPSequenced, {"loss": 1.0}, "loss must be a finite number >= 0 and < 1, got 1.0"),
    (LPSequenced, {"gap": 0}, "gap must be a finite number > 0 and < 1, got 0"),
    (LPRandom, {"gap": 1.0}, "gap must be a finite number > 0 and < 1, got 1.0"),
    (LPRandom, {"gap": float("inf")}, "gap must be a finite number > 0 and < 1, got inf"),
    (FairDG, {"cache_size": 0}, "cache_size must be an integer >= 1, got 0"),
    (FairDG, {"cache_size": 2.5}, "cache_size must be an integer >= 1, got 2.5"),
])
def test_bad_parameters(cls, params, message):
    with pytest.raises(PolicyError, match=message):
        cls(**params)


@pytest.mark.parametrize("make", [lambda gap: LPRandom(gap=gap), lambda gap: LPSequenced(margin=0.01, gap=gap)],
                         ids=["lp-random", "lp-sequenced-margin"])
@pytest.mark.parametrize("gap", [1e-3, 1e-6])
def test_the_plan_is_solved_to_the_policys_gap_and_certified_within_it(monkeypatch, make, gap):
    """Every LP the policy solves for its plan (the margin's re-solves included) asks for the
    policy's gap, and the plan is certified within it: worth at least ``(1 − gap)·U_opt``,
    times ``1 − loss`` where a fairness margin was bought."""
    import fairsched.policies.lp as lp_module

    problem = load_instance(INSTANCES / "facility-location.toml")
    asked = []

    def recorded(*args, **kwargs):
        asked.append(kwargs.get("gap"))
        return optimum(*args, **kwargs)

    monkeypatch.setattr(lp_module, "optimum", recorded)
    policy = make(gap)
    run(problem, policy, 50)
    assert asked and set(asked) == {gap}
    plan = policy.optimum
    assert plan.upper_bound - plan.value <= gap * abs(plan.value) + 1e-12
    loss = policy.loss if policy.epsilon > 0 else 0.0
    assert plan.value >= (1 - loss) * (1 - gap) * optimum(problem).value - 1e-12


@pytest.mark.parametrize("name", ["lp-random", "lp-sequenced"])
def test_a_state_saved_before_the_plan_gap_was_a_parameter_still_loads(name):
    from fairsched.runtime.scheduler import Scheduler

    problem = load_instance(INSTANCES / "coverage.toml")
    original = Scheduler(problem, name, seed=2)
    for t in range(1, 21):
        original.observe_indices(t, original.select_indices(t))
    state = original.state_dict()
    del state["policy"]["params"]["gap"]
    restored = Scheduler(problem, name, seed=2)
    restored.load_state_dict(state)
    for t in range(21, 61):
        a, b = original.select_indices(t), restored.select_indices(t)
        assert np.array_equal(a, b)
        original.observe_indices(t, a)
        restored.observe_indices(t, b)
    with pytest.raises(ValueError, match="state is for policy"):
        Scheduler(problem, name, seed=2, gap=1e-3).load_state_dict(original.state_dict())


def test_lp_policies_run_on_column_generation_support_at_large_n():
    from fairsched.problem import Problem
    from fairsched.utilities import AccuracyUtility

    rng = np.random.default_rng(0)
    n, k = 60, 6  # C(60, 6) = 50,063,860 sets: only column generation can solve it
    r = rng.uniform(0, 1, n)
    r *= 0.8 * k / r.sum()
    problem = Problem(AccuracyUtility(rng.integers(50, 1001, n).astype(float)), k, r)
    opt = optimum(problem)
    assert opt.method.startswith("column-generation") and opt.success and opt.relative_gap <= DEFAULT_GAP
    sequenced = evaluate(run(problem, LPSequenced(), 3000), problem, opt.value)
    assert sequenced.max_debt < 1 and sequenced.ratio >= 0.999
    randomised = evaluate(run(problem, LPRandom(), 3000, seed=1), problem, opt.value)
    assert abs(randomised.ratio - 1) < 0.01
    assert evaluate(run(problem, Lyapunov(V=30), 3000), problem, opt.value).ratio >= 0.98


@pytest.mark.parametrize("chunk", [1, 3, 1 << 22])
def test_plan_marginals_in_chunks_equal_the_dense_sum(monkeypatch, chunk):
    """``Σ_{S ∋ u} p_S`` summed a few members at a time is the sum over the dense masks."""
    import fairsched.policies.lp as lp_module

    monkeypatch.setattr(lp_module, "MARGINAL_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    for _ in range(50):
        n, m = int(rng.integers(1, 20)), int(rng.integers(1, 9))
        support = [np.sort(rng.choice(n, size=int(rng.integers(0, n + 1)), replace=False)).astype(np.int32)
                   for _ in range(m)]
        weights = rng.random(m) + 0.01
        dense = np.zeros((m, n))
        for row, S in zip(dense, support):
            row[S] = 1.0
        expected = (weights / weights.sum()) @ dense
        assert np.allclose(lp_module._marginals(support, weights, n), expected, rtol=0, atol=1e-12)


def test_plan_sets_are_the_supports_own_sorted_arrays():
    """Sorted support sets are used as they are (no copy per set); others are sorted copies."""
    from fairsched.policies.lp import _sorted_members

    view = np.arange(10, dtype=np.int32)[2:6]
    view.flags.writeable = False
    assert _sorted_members(view) is view
    unsorted = np.array([5, 1, 3])
    assert _sorted_members(unsorted).tolist() == [1, 3, 5] and unsorted.tolist() == [5, 1, 3]
    assert _sorted_members([4, 2]).tolist() == [2, 4]
    assert _sorted_members(np.array([2.0, 1.0])).dtype.kind == "i"
