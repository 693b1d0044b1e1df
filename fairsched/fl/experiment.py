"""The FedIPW experiment: six aggregation rules on one biased population.

After the synthetic experiment of Morishita, "Who Trains Matters: Federated Learning under
Enrollment and Participation Selection Biases" (2026); ``docs/selection_bias.md`` §7.

Per seed: draw a population (:mod:`fairsched.fl.population`) with enrollment bias at the
chosen level, solve ``F*`` centrally on the whole population, fit the two-stage propensity
model (enrollment on the population frame, participation on ``pilot_rounds`` rounds of
historical logs of the enrolled), then train ``R`` rounds with every rule on the *same*
participation draws (common random numbers, so rule differences are not seed noise).
Participant ``i`` in round ``r`` gets the aggregation weight

=====================  =========================================================
``fedavg``             1 (naive average over participants)
``participation_ipw``  ``1/π̂^part_{i,r}`` (participation corrected, enrollment not)
``fedipw``             ``1/(π̂^enroll_i·π̂^part_{i,r})`` (estimated two-stage, Hájek)
``oracle_ipw``         ``1/(π^enroll_i·π^part_{i,r})`` (true propensities)
``calibration``        ``w^cal_i/π̂^part_{i,r}``, ``w^cal`` raked to the exact population
                       margins of ``calibration_vars`` (default: region shares and the
                       mean of ``z1``; aggregate calibration)
``calibration_noisy``  the same with noisy margins (means + N(0, η²), shares × e^{N(0, η²)})
=====================  =========================================================

and the metric is the target-population excess loss ``F(θ_r) − F*`` for every round.

``ExperimentConfig.propensity_model`` picks the enrollment model behind ``fedipw``
(``"linear"``, the default, or a flexible model of :mod:`fairsched.propensity.flexible`:
``"poly2"``, ``"spline"``, ``"boosting"``); ``participation_model`` does the same for the
participation model (behind every weighted rule but the oracle). Together with
``PopulationConfig.enroll_z1_squared`` (an enrollment term the linear model omits) this
measures what misspecification costs and what a flexible model recovers.

Optionally a fairsched policy schedules the enrolled clients: a scheduled client
participates if it is available that round (availability is independent of the schedule,
so inclusion is ``π^enroll·q·π^part``), and ``q̂_{i,r}``, the policy's selection probability
(its fractional point ``y`` when it reports one, as FairCG does, else the empirical fraction
``N_i(r)/r``), divides every weighted rule's weight.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from fairsched.fl.errors import SimulationError
from fairsched.fl.model import client_objective
from fairsched.fl.population import Population, PopulationConfig, bias_strength, make_population
from fairsched.fl.training import TrainConfig, train
from fairsched.results import Result

RULES = ("fedavg", "participation_ipw", "fedipw", "oracle_ipw", "calibration", "calibration_noisy")


@dataclass(frozen=True)
class ExperimentConfig:
    """Everything but the bias level and the seeds."""

    population: PopulationConfig = field(default_factory=PopulationConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    pilot_rounds: int = 10
    margin_noise: float = 0.1
    calibration_vars: tuple[str, ...] = ("region", "z1")
    policy: str | None = None
    k: int | None = None
    floor: float | None = None
    propensity_model: str = "linear"
    participation_model: str = "linear"

    def __post_init__(self) -> None:
        from fairsched.propensity.flexible import MODELS

        for name in ("propensity_model", "participation_model"):
            if getattr(self, name) not in MODELS:
                raise SimulationError(f"{name}: unknown propensity model {getattr(self, name)!r}; "
                                      f"choose one of {', '.join(MODELS)}")


@dataclass(frozen=True)
class SeedRun:
    """One seed: ``excess[rule]`` is ``F(θ_r) − F*`` for ``r = 0..R``; plus weight diagnostics."""

    seed: int
    excess: dict[str, np.ndarray]
    enrolled: int
    mean_participants: float
    ess_fraction: dict[str, float]


def _policy_selection(pop: Population, config: ExperimentConfig, rounds: int,
                      rng: np.random.Generator) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Scheduled sets (enrolled-client indices) and ``q̂`` per round from a fairsched policy."""
    from fairsched.problem import Problem
    from fairsched.runtime.engine import Engine
    from fairsched.utilities import AccuracyUtility

    members = np.flatnonzero(pop.enrolled)
    n = members.size
    k = config.k if config.k is not None else max(1, n // 2)
    if not 1 <= k <= n:
        raise SimulationError(f"k: is {k}, must be between 1 and the {n} enrolled clients")
    floor = config.floor if config.floor is not None else 0.5 * k / n
    problem = Problem(AccuracyUtility(pop.data.sizes[members]), k, np.full(n, floor))
    engine = Engine(problem, config.policy, seed=rng)
    policy = engine.policy
    fractional = None
    chosen, probs = [], []
    for _ in range(rounds):
        selected = engine.select()
        engine.observe()
        if fractional is None:
            fractional = policy.diagnostics(None).get("fractional_point")
        q = np.asarray(fractional)[selected] if fractional is not None else policy.counts[selected] / policy.t
        chosen.append(members[selected])
        probs.append(np.asarray(q, dtype=np.float64))
    return chosen, probs


def _calibrated_weights(pop: Population, rng: np.random.Generator, noise: float,
                        variables: tuple[str, ...]) -> np.ndarray:
    from fairsched.propensity import build_margins, calibrate

    E = pop.enrolled
    shares = np.bincount(pop.region, minlength=3) / pop.region.size
    means = pop.z.mean(axis=0)
    if noise > 0:
        shares = shares * np.exp(rng.normal(0.0, noise, size=3))
        shares /= shares.sum()
        means = means + rng.normal(0.0, noise, size=2)
    continuous = {name: (pop.z[E, j], means[j]) for j, name in enumerate(("z1", "z2"))
                  if name in variables}
    categorical = {"region": (pop.region[E], dict(enumerate(shares)))} if "region" in variables else {}
    margins = build_margins(int(E.sum()), categorical=categorical, continuous=continuous)
    return calibrate(np.ones(int(E.sum())), margins, population_size=pop.region.size).weights


def rule_weights(rule: str, participants: list[np.ndarray], enroll_factor: np.ndarray, pi_part: np.ndarray,
                 pi_part_hat: np.ndarray, *, base: np.ndarray | None = None,
                 selection_prob: list[np.ndarray] | None = None) -> list[np.ndarray]:
    """Every round's aggregation weights of ``rule`` for its participants ``i``:
    ``b_i·e_i / (π^part_{i,r}·q_{i,r})`` (FedAvg: ``b_i·e_i``), with the client base weight
    ``b`` (1 by default; the record count for a record-level target), the rule's enrollment
    factor ``e`` (e.g. ``1/π̂^enroll``), the true participation propensity for
    ``oracle_ipw`` and the estimated one otherwise, and the selection probabilities ``q``
    (1 by default) of a scheduled run."""
    weights = []
    for r, clients in enumerate(participants):
        w = enroll_factor[clients] if base is None else base[clients] * enroll_factor[clients]
        if rule != "fedavg":
            part = pi_part[r, clients] if rule == "oracle_ipw" else pi_part_hat[r, clients]
            w = w / (part if selection_prob is None else part * selection_prob[r])
        weights.append(w)
    return weights


def run_seed(level: str, seed: int, config: ExperimentConfig = ExperimentConfig()) -> SeedRun:
    """All six rules on one population draw; same seed, same result."""
    from fairsched.propensity import fit_two_stage, kish_ess

    pop_rng, pilot_rng, round_rng, noise_rng, policy_rng = np.random.default_rng(seed).spawn(5)
    pop = make_population(level, pop_rng, config.population)
    N = config.population.clients
    objective = client_objective(pop.data, np.full(N, 1.0 / N), config.train.ridge)
    _, f_star = objective.solve()

    E = pop.enrolled
    members = np.flatnonzero(E)
    Z = pop.covariates
    x_pilot, _, avail_pilot = pop.draw_rounds(config.pilot_rounds, pilot_rng)
    model = fit_two_stage(Z, E, x_pilot[:, E], avail_pilot[:, E],
                          names=("z1", "z2", "region1", "region2"), round_names=("x_round",),
                          model=config.propensity_model, participation_model=config.participation_model)
    pi_e_hat = np.zeros(N)
    pi_e_hat[E] = model.enroll_probability(Z[E])

    R = config.train.rounds
    x_round, pi_part, available = pop.draw_rounds(R, round_rng)
    pi_p_hat = np.zeros((R, N))
    pi_p_hat[:, E] = model.participation_probability(Z[E], x_round[:, E])

    enroll_weight = {"fedavg": np.ones(N), "participation_ipw": np.ones(N),
                     "fedipw": np.divide(1.0, pi_e_hat, out=np.zeros(N), where=E),
                     "oracle_ipw": 1.0 / pop.pi_enroll}
    for rule, noise in (("calibration", 0.0), ("calibration_noisy", config.margin_noise)):
        w = np.zeros(N)
        w[E] = _calibrated_weights(pop, noise_rng, noise, config.calibration_vars)
        enroll_weight[rule] = w

    if config.policy is not None:
        scheduled, q = _policy_selection(pop, config, R, policy_rng)
    else:
        scheduled, q = [members] * R, [np.ones(members.size)] * R
    participants, selection_prob = [], []
    for r in range(R):
        keep = available[r, scheduled[r]]
        participants.append(scheduled[r][keep])
        selection_prob.append(q[r][keep])

    excess, ess = {}, {}
    for rule in RULES:
        weights = rule_weights(rule, participants, enroll_weight[rule], pi_part, pi_p_hat,
                               selection_prob=selection_prob)
        path = train(pop.data, participants, weights, config.train)
        excess[rule] = objective.values(path) - f_star
        nonempty = [w for w in weights if w.size]
        ess[rule] = float(np.mean([kish_ess(w) / w.size for w in nonempty])) if nonempty else float("nan")
    return SeedRun(seed, excess, int(E.sum()), float(np.mean([p.size for p in participants])), ess)


@dataclass(frozen=True)
class ExperimentResult(Result):
    """``curves[s, j, r]``: excess loss of rule ``RULES[j]`` after round ``r`` in seed ``s``
    (``status`` ``"completed"``)."""

    level: str
    seeds: tuple[int, ...]
    rounds: int
    curves: np.ndarray
    runs: tuple[SeedRun, ...]

    def final(self, rule: str) -> np.ndarray:
        """Final excess loss ``F(θ_R) − F*`` of ``rule`` per seed."""
        return self.curves[:, RULES.index(rule), -1]

    def summary(self) -> dict[str, dict[str, float | None]]:
        """``{rule: {"mean", "se"}}`` of the final excess loss over seeds (``se`` null for one seed)."""
        out = {}
        for rule in RULES:
            x = self.final(rule)
            se = float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else None
            out[rule] = {"mean": float(x.mean()), "se": se}
        return out


def run_experiment(level: str, seeds: int, rounds: int | None = None,
                   config: ExperimentConfig = ExperimentConfig(), first_seed: int = 0,
                   progress: Callable[[int, int, float], None] | None = None) -> ExperimentResult:
    """Seeds ``first_seed..first_seed + seeds − 1`` at one bias level; ``progress(done, total, s)``."""
    bias_strength(level)
    if isinstance(seeds, bool) or not isinstance(seeds, (int, np.integer)) or seeds < 1:
        raise SimulationError(f"seeds: is {seeds!r}, expected a positive integer")
    if rounds is not None:
        config = replace(config, train=replace(config.train, rounds=rounds))
    start = time.perf_counter()
    runs = []
    for i, seed in enumerate(range(first_seed, first_seed + int(seeds))):
        runs.append(run_seed(level, seed, config))
        if progress is not None:
            progress(i + 1, int(seeds), time.perf_counter() - start)
    curves = np.stack([np.stack([run.excess[rule] for rule in RULES]) for run in runs])
    return ExperimentResult(level, tuple(r.seed for r in runs), config.train.rounds, curves, tuple(runs),
                            status="completed",
                            message=f"{len(runs)} seeds of {config.train.rounds} rounds at bias {level!r}",
                            seconds=time.perf_counter() - start)


__all__ = ["RULES", "ExperimentConfig", "ExperimentResult", "SeedRun", "rule_weights", "run_experiment", "run_seed"]
