"""Upper caps ``c_u`` on each worker's selection fraction: the problem, the LP and every policy.

- the LP with ``r_u <= Σ_{S∋u} p_S <= c_u``: enumeration against an independent
  ``scipy.optimize.linprog`` model, column generation (structured pricing) against
  enumeration, and the certificate ``max_S [f(S) + λ(S) − ν(S)] − λ·r + ν·c`` recomputed
  over every ``k``-set;
- every registered policy keeps ``N_u(t) − c_u·t < 1`` in every round, with and without
  availability, and the caps take nothing from the floors of the deterministic policies;
- problems, instance files and saved states carry the caps.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.optimize import linprog

import fairsched as fs
from fairsched.availability import Availability
from fairsched.errors import InfeasibleError, InstanceError
from fairsched.policies.registry import POLICIES
from fairsched.runtime.state import problem_fingerprint
from fairsched.utilities import (
    AccuracyUtility,
    ConcaveModular,
    Coverage,
    FacilityLocation,
    Mixture,
    Modular,
)

KINDS = ("accuracy", "coverage", "facility-location", "sqrt", "modular", "mixture")


def utility_of(kind: str, n: int, rng: np.random.Generator):
    if kind == "accuracy":
        return AccuracyUtility(rng.uniform(1, 50, n))
    if kind == "coverage":
        return Coverage([sorted(rng.choice(3 * n, size=4, replace=False).tolist()) for _ in range(n)],
                        rng.uniform(0.5, 2.0, 3 * n))
    if kind == "facility-location":
        return FacilityLocation(rng.uniform(0, 1, size=(2 * n, n)) ** 2)
    if kind == "sqrt":
        return ConcaveModular(rng.exponential(1.0, size=(3, n)), "sqrt")
    if kind == "modular":
        return Modular(rng.uniform(0, 1, n))
    return Mixture([utility_of("coverage", n, rng), utility_of("accuracy", n, rng)], [1.0, 0.5])


def capped_problem(kind: str, seed: int, n: int = 9, k: int = 3) -> fs.Problem:
    """Floors on everyone, caps that bind on the best singletons (below what the LP without caps gives them)."""
    rng = np.random.default_rng(seed)
    utility = utility_of(kind, n, rng)
    r = rng.uniform(0.0, 0.6 * k / n, n)
    singles = utility.gains(np.zeros(0, dtype=np.int64))
    caps = np.full(n, 0.8)
    caps[np.argsort(-singles, kind="stable")[:k]] = np.maximum(r[np.argsort(-singles, kind="stable")[:k]], 0.25)
    return fs.Problem(utility, k, r, caps=caps)


def all_k_sets(n: int, k: int) -> np.ndarray:
    masks = np.zeros((math.comb(n, k), n), dtype=bool)
    for row, subset in enumerate(itertools.combinations(range(n), k)):
        masks[row, list(subset)] = True
    return masks


def marginals(opt: fs.Optimum, n: int) -> np.ndarray:
    x = np.zeros(n)
    for S, p in zip(opt.support, opt.probabilities):
        x[S] += p
    return x


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("seed", [0, 1])
def test_lp_with_caps_matches_an_independent_model(kind: str, seed: int) -> None:
    problem = capped_problem(kind, seed)
    n, k = problem.n, problem.k
    masks = all_k_sets(n, k)
    values = problem.utility.values(masks)
    M = masks.T.astype(float)
    reference = linprog(-values, A_ub=np.vstack([-M, M]), b_ub=np.concatenate([-problem.r, problem.caps]),
                        A_eq=np.ones((1, masks.shape[0])), b_eq=[1.0], bounds=(0, None), method="highs")
    assert reference.status == 0
    uncapped = fs.optimum(fs.Problem(problem.utility, k, problem.r))
    assert -reference.fun < uncapped.value - 1e-6  # the caps bind
    exact = fs.optimum(problem, method="enumeration")
    assert exact.status == "optimal"
    assert exact.value == pytest.approx(-reference.fun, rel=1e-9)
    x = marginals(exact, n)
    assert (x >= problem.r - 1e-9).all() and (x <= problem.caps + 1e-9).all()
    # the certificate, recomputed over every k-set from the reported prices
    lam, nu = exact.fairness_price, exact.cap_price
    assert (lam >= 0).all() and (nu >= 0).all() and nu.max() > 0
    bound = float((values + masks @ (lam - nu)).max() - lam @ problem.r + nu @ problem.caps)
    assert bound == pytest.approx(exact.upper_bound, rel=1e-9, abs=1e-12)
    assert bound >= -reference.fun - 1e-9


@pytest.mark.parametrize("kind", KINDS)
def test_column_generation_with_caps_reaches_the_enumeration_optimum(kind: str) -> None:
    problem = capped_problem(kind, 3, n=10, k=4)
    exact = fs.optimum(problem, method="enumeration")
    pricing = {"sqrt": "concave", "mixture": "milp"}.get(kind, kind)
    generated = fs.optimum(problem, method="column-generation", pricing=pricing)
    assert generated.status == "optimal", generated.message
    assert generated.value == pytest.approx(exact.value, rel=1e-6)
    assert generated.value <= exact.value + 1e-9 <= generated.upper_bound + 2e-9
    x = marginals(generated, problem.n)
    assert (x >= problem.r - 1e-9).all() and (x <= problem.caps + 1e-9).all()
    # the certificate of column generation, recomputed by brute force
    masks = all_k_sets(problem.n, problem.k)
    lam, nu = generated.fairness_price, generated.cap_price
    bound = float((problem.utility.values(masks) + masks @ (lam - nu)).max()
                  - lam @ problem.r + nu @ problem.caps)
    assert bound <= generated.upper_bound + 1e-9 * max(1.0, abs(bound))
    assert bound >= exact.value - 1e-9


def test_column_generation_with_caps_beyond_enumeration() -> None:
    """n = 200, k = 10 (C(200, 10) ≈ 2e16 sets), the 20 largest workers capped at 0.3:
    optimal, marginals within the caps, below the optimum without caps."""
    rng = np.random.default_rng(5)
    n, k = 200, 10
    utility = AccuracyUtility(rng.lognormal(3.0, 1.0, n))
    caps = np.ones(n)
    caps[np.argsort(-utility.sizes)[:20]] = 0.3
    problem = fs.Problem(utility, k, np.full(n, 0.01), caps=caps)
    opt = fs.optimum(problem)
    assert opt.method.startswith("column-generation") and opt.status == "optimal", opt.message
    x = marginals(opt, n)
    assert (x <= caps + 1e-8).all() and (x >= problem.r - 1e-8).all()
    assert opt.upper_bound < fs.optimum(fs.Problem(utility, k, problem.r)).value


AVAILABILITY = ("everyone", "probabilities", "alternating")


def availability_for(kind: str, n: int) -> Availability | None:
    if kind == "everyone":
        return None
    if kind == "probabilities":
        return Availability(probabilities=np.full(n, 0.8), seed=7)
    trace = np.zeros((2, n), dtype=bool)
    trace[0, : n // 2 + 2] = True
    trace[1, n // 2 - 2:] = True
    return Availability(trace=np.tile(trace, (1000, 1)))


@pytest.mark.parametrize("availability", AVAILABILITY)
@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_keeps_cap_excess_below_one(policy: str, availability: str) -> None:
    rng = np.random.default_rng(11)
    n, k = 10, 3
    utility = AccuracyUtility(rng.uniform(1, 30, n))
    caps = np.full(n, 0.45)
    caps[np.argsort(-utility.sizes)[:4]] = 0.2
    problem = fs.Problem(utility, k, np.full(n, 0.1), caps=caps)
    T = 2000
    schedule = fs.run(problem, policy, rounds=T, seed=3, availability=availability_for(availability, n))
    masks = schedule.masks()
    counts = np.cumsum(masks, axis=0)
    excess = counts - np.arange(1, T + 1)[:, None] * caps
    assert excess.max() < 1, (policy, availability, excess.max())
    report = fs.evaluate(schedule, problem)
    assert report.max_cap_excess == pytest.approx(excess.max(), abs=1e-9)
    if policy in ("fairdg", "lp-sequenced", "round-robin") and availability == "everyone":
        assert report.max_debt < 1  # the caps take nothing from the floors
    if POLICIES[policy].fair:
        assert report.fairness_slack >= -0.02


def test_lp_sequenced_with_caps_reaches_the_capped_optimum() -> None:
    problem = capped_problem("accuracy", 4, n=12, k=4)
    opt = fs.optimum(problem)
    schedule = fs.run(problem, "lp-sequenced", rounds=20_000, seed=0, optimum=opt)
    report = fs.evaluate(schedule, problem, opt)
    assert report.ratio >= 0.999 and report.max_debt < 1 and report.max_cap_excess < 1


def test_caps_are_checked_when_the_problem_is_built() -> None:
    utility = Modular([3.0, 2.0, 1.0, 1.0])
    with pytest.raises(InfeasibleError, match=r"floor r = 0.5 above its cap 0.4"):
        fs.Problem(utility, 2, [0.5, 0.1, 0.1, 0.1], caps=[0.4, 1, 1, 1])
    with pytest.raises(InfeasibleError, match=r"the caps sum to 1.6 < k = 2"):
        fs.Problem(utility, 2, [0.1] * 4, caps=[0.4] * 4)
    with pytest.raises(InstanceError, match=r"workers.cap.*entry 1 is 1.5"):
        fs.Problem(utility, 2, [0.1] * 4, caps=[1, 1.5, 1, 1])
    with pytest.raises(InstanceError, match=r"workers.cap.*3 entries, expected 4"):
        fs.Problem(utility, 2, [0.1] * 4, caps=[1, 1, 1])
    assert fs.Problem(utility, 2, [0.1] * 4, caps=[0.5] * 4).with_floors([0.2] * 4).caps.tolist() == [0.5] * 4


def test_caps_survive_instance_files_and_name_their_states(tmp_path) -> None:
    problem = fs.Problem(Modular([3.0, 2.0, 1.0, 1.0]), 2, [0.1] * 4, ids=("a", "b", "c", "d"),
                         caps=[0.5, 0.5, 0.75, 1.0])
    path = tmp_path / "capped.toml"
    fs.save_instance(problem, path)
    assert "cap = [" in path.read_text()
    loaded = fs.load_instance(path)
    assert loaded.caps.tolist() == [0.5, 0.5, 0.75, 1.0]
    assert problem_fingerprint(loaded) == problem_fingerprint(problem)
    assert problem_fingerprint(loaded) != problem_fingerprint(fs.Problem(problem.utility, 2, problem.r, problem.ids))
    scheduler = fs.Scheduler(loaded, "lp-sequenced", seed=1)
    for t in range(1, 31):
        scheduler.observe(t, scheduler.select(t))
    state_file = tmp_path / "state.json"
    scheduler.save(state_file)
    restored = fs.Scheduler.load(state_file, loaded, "lp-sequenced")
    for t in range(31, 61):
        chosen = scheduler.select(t)
        assert restored.select(t) == chosen
        scheduler.observe(t, chosen)
        restored.observe(t, chosen)
    with pytest.raises(fs.errors.CheckpointError, match="different problem"):
        fs.Scheduler.load(state_file, fs.Problem(problem.utility, 2, problem.r, problem.ids), "lp-sequenced")


def test_cli_reports_the_cap_excess(tmp_path, capsys) -> None:
    from fairsched.cli.app import main

    problem = capped_problem("accuracy", 2)
    path = tmp_path / "capped.toml"
    fs.save_instance(problem, path)
    assert main(["run", str(path), "--policy", "fairdg", "--rounds", "500", "--json"]) == 0
    import json

    data = json.loads(capsys.readouterr().out)
    assert 0 < data["max_cap_excess"] < 1 and data["max_debt"] < 1
    assert main(["optimum", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["status"] == "optimal" and max(data["cap_price"].values()) > 0


def test_the_availability_lp_keeps_the_caps() -> None:
    """Availability and caps together: the LP of policies that see ``A_t`` adds the cap rows."""
    rng = np.random.default_rng(8)
    n, k = 6, 2
    utility = AccuracyUtility(rng.uniform(1, 30, n))
    caps = np.full(n, 0.6)
    caps[int(np.argmax(utility.sizes))] = 0.2
    base = fs.Problem(utility, k, np.full(n, 0.1), availability=np.full(n, 0.8))
    capped = fs.Problem(utility, k, np.full(n, 0.1), availability=np.full(n, 0.8), caps=caps)
    free, bound = fs.optimum(base), fs.optimum(capped)
    assert bound.value < free.value - 1e-6
    x = marginals(bound, n)
    assert (x <= caps + 1e-9).all() and (x >= capped.r - 1e-9).all()
    assert bound.cap_price[int(np.argmax(utility.sizes))] > 0
