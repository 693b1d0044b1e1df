"""The online harness: a policy that does not know ``f`` learns it from noisy rewards inside the floors.

:func:`simulate_online` hides the instance's utility from the policy (it runs on the same
``k``, floors and ids with a :class:`~fairsched.online.hidden.HiddenUtility`), and after each
round feeds back what an FL server would see: the set-level reward
``y_t = f(S_t) + ε_t`` with ``ε_t ~ N(0, (noise·U_opt)²)``, and for every selected worker its
``num-examples`` (the accuracy utility's size, else 1) and a ``loss`` whose product with it is
the worker's stand-alone value ``f({u})`` times ``1 + noise·N(0, 1)`` (what Oort's statistical
utility estimates). It reports the regret ``R(T) = T·U_opt − Σ_{t<=T} f(S_t)`` against the true
``U_opt`` (the LP of Li, Liu and Ji 2021 on the true ``f``), at ``T`` on a log grid, the fitted
slope of ``log R`` against ``log T`` between ``T = 1,000`` and the horizon, the max debt and
fairness slack of the whole schedule, and what the learner learned (with its parameter error
on the same grid).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from fairsched.errors import FairschedError
from fairsched.feedback import Feedback
from fairsched.lp import optimum
from fairsched.metrics import evaluate
from fairsched.online.accuracy_curve import AccuracyCurveLearner
from fairsched.online.hidden import HiddenUtility
from fairsched.online.learner import Learner
from fairsched.online.linear_features import LinearFeaturesLearner
from fairsched.online.oort import OortLearner, OortPolicy
from fairsched.online.policy import OnlinePolicy
from fairsched.online.stratum_curves import StratumCurvesLearner
from fairsched.policies import Policy, make_policy
from fairsched.problem import Problem
from fairsched.runtime.engine import Engine
from fairsched.schedule import Schedule
from fairsched.utilities import AccuracyUtility, PropensityWeightedAccuracy

LEARNERS: dict[str, type[Learner]] = {cls.name: cls for cls in (AccuracyCurveLearner, StratumCurvesLearner,
                                                                  LinearFeaturesLearner, OortLearner)}
#: policies that learn (``--learner`` needed), and the baselines that know ``f`` or ignore it
LEARNING_POLICIES = ("fairdg", "lp-sequenced", "oort")
KNOWN_POLICIES = {"fairdg-known": "fairdg", "lp-sequenced-known": "lp-sequenced", "random": "random"}
POLICY_NAMES = LEARNING_POLICIES + tuple(KNOWN_POLICIES)
#: regret is reported at these horizons (those up to the run's) and at the horizon itself
GRID = (100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000, 1_000_000)
#: the slope of log R against log T is fitted from this horizon on
SLOPE_FROM = 1000


def make_learner(name: str, problem: Problem) -> Learner:
    """The learner ``name`` for ``problem``'s utility structure (``FairschedError`` if it does not fit)."""
    try:
        cls = LEARNERS[name]
    except KeyError:
        raise FairschedError(f"unknown learner {name!r}; known: {', '.join(LEARNERS)}") from None
    try:
        return cls.for_problem(problem)
    except TypeError as exc:
        raise FairschedError(f"learner {name!r}: {exc}") from None


def make_online_policy(name: str, learner: Learner | None) -> tuple[Policy, bool]:
    """``(policy, hidden)``: the policy ``name`` and whether it runs without seeing ``f``."""
    if name in KNOWN_POLICIES:
        return make_policy(KNOWN_POLICIES[name]), False
    if name not in LEARNING_POLICIES:
        raise FairschedError(f"unknown online policy {name!r}; known: {', '.join(POLICY_NAMES)}")
    if learner is None:
        raise FairschedError(f"policy {name!r} learns the utility: give a learner")
    if name == "oort":
        if not isinstance(learner, OortLearner):
            raise FairschedError("policy 'oort' uses Oort's own statistical utility: give learner 'oort'")
        return OortPolicy(learner), True
    return OnlinePolicy(name, learner), True


def true_parameters(problem: Problem) -> dict[str, Any] | None:
    """The parameters a learner of ``problem``'s kind should recover (for the parameter error)."""
    u = problem.utility
    if isinstance(u, AccuracyUtility):
        return {"a": u.a, "b": u.b, "c": u.c}
    if isinstance(u, PropensityWeightedAccuracy):
        return {"a": u.a.tolist(), "b": u.b.tolist(), "c": u.c.tolist()}
    return None


def parameter_error(learner: Learner | None, problem: Problem) -> float | None:
    """``max |θ̂ − θ|`` of the accuracy curve, or the relative error ``‖f̂ − f‖/‖f‖`` over the
    sizes-``k`` sets of a sample for the linear features (``None`` for Oort's modular surrogate)."""
    if learner is None or isinstance(learner, OortLearner):
        return None
    truth = true_parameters(problem)
    if truth is not None and isinstance(learner, AccuracyCurveLearner):
        found = learner.parameters()
        return max(abs(found[key] - value) for key, value in truth.items())
    rng = np.random.default_rng(0)
    masks = np.zeros((256, problem.n), dtype=bool)
    for row in masks:
        row[rng.choice(problem.n, size=problem.k, replace=False)] = True
    true, learned = problem.utility.values(masks), learner.estimate().values(masks)
    return float(np.linalg.norm(learned - true) / max(np.linalg.norm(true), 1e-300))


def simulate_online(problem: Problem, policy: str, learner: str | None, rounds: int, noise: float,
                    seed: int = 0, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Run the harness of the module docstring; returns the JSON object of ``fairsched simulate online``."""
    if rounds < 1:
        raise FairschedError(f"rounds must be >= 1, got {rounds}")
    if not (math.isfinite(noise) and noise >= 0):
        raise FairschedError(f"noise must be a number >= 0, got {noise}")
    started = time.perf_counter()
    truth = optimum(problem)
    u_opt = float(truth.value)
    model = None if learner is None else make_learner(learner, problem)
    chosen_policy, hidden = make_online_policy(policy, model)
    seen = replace(problem, utility=HiddenUtility(problem.n)) if hidden else problem
    engine = Engine(seen, chosen_policy, seed=seed)
    rng = np.random.default_rng([seed, 1])
    f = problem.utility
    singles = np.asarray(f.gains(np.zeros(0, dtype=np.int64)), dtype=float)
    if isinstance(f, AccuracyUtility):
        examples = np.asarray(f.sizes, dtype=float)
    elif isinstance(f, PropensityWeightedAccuracy):
        examples = np.asarray(f.sizes, dtype=float).sum(axis=1)
    else:
        examples = np.ones(problem.n)
    sigma = noise * abs(u_opt)
    grid = sorted({t for t in GRID if t < rounds} | {rounds})
    curve, errors, sets, total = [], [], [], 0.0
    mask = np.zeros((1, problem.n), dtype=bool)
    for t in range(1, rounds + 1):
        S = engine.select()
        mask[0, S] = True
        value = float(f.values(mask)[0])
        mask[0, S] = False
        total += value
        loss = singles[S] / examples[S] * (1.0 + noise * rng.standard_normal(S.size))
        engine.observe(S, Feedback(reward=value + sigma * float(rng.standard_normal()), workers=S,
                                   metrics={"num-examples": examples[S], "loss": loss}))
        sets.append(S)
        if t == grid[len(curve)]:
            curve.append([t, t * u_opt - total])
            errors.append([t, parameter_error(model, problem)])
            if progress is not None:
                progress(t)
    report = evaluate(Schedule.from_sets(sets, problem.n, policy=policy, seed=seed), problem, truth)
    regret = rounds * u_opt - total
    return {"instance": problem.name, "policy": policy, "learner": learner, "rounds": rounds, "noise": noise,
            "seed": seed, "U_opt": u_opt, "time_average_utility": total / rounds, "regret": regret,
            "regret_per_round": regret / rounds, "regret_curve": curve, "slope": regret_slope(curve),
            "max_debt": report.max_debt, "fairness_slack": report.fairness_slack,
            "parameters": None if model is None else model.parameters(),
            "true_parameters": true_parameters(problem), "parameter_error": parameter_error(model, problem),
            "parameter_error_curve": errors,
            "seconds": time.perf_counter() - started}


def regret_slope(curve: list[list[float]], start: int = SLOPE_FROM) -> float | None:
    """Least-squares slope of ``log R`` against ``log T`` over the points with ``T >= start``
    (``None`` with fewer than two such points or a regret ``<= 0`` among them)."""
    points = [(t, r) for t, r in curve if t >= start]
    if len(points) < 2 or any(r <= 0 for _, r in points):
        return None
    x, y = np.log([p[0] for p in points]), np.log([p[1] for p in points])
    return float(np.polyfit(x, y, 1)[0])
