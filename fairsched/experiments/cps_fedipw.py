"""FedIPW on real data: the aggregation rules on CPS1988 clients (:mod:`fairsched.fl.cps`).

    python -m fairsched.experiments.cps_fedipw [--seeds 10] [--rounds 300] [--levels none moderate severe]

The question of Morishita, "Who Trains Matters: Federated Learning under Enrollment and
Participation Selection Biases" (2026), asked of real records: when enrollment and
participation are selective on recorded covariates, which aggregation rule brings the
federated model closest to the one the whole population would give? The target is the full
CPS1988 sample (every record equal), so a participant's weight carries its record count
``n_i``; per seed (a fresh partition into clients and a fresh selection draw):

=====================  ==========================================================
``fedavg``             ``n_i`` (size-weighted average over participants)
``participation_ipw``  ``n_i/π̂^part_{i,r}``
``fedipw``             ``n_i/(π̂^enroll_i·π̂^part_{i,r})`` (two-stage model fitted on the
                       client frame and ``pilot_rounds`` rounds of participation logs)
``oracle_ipw``         ``n_i/(π^enroll_i·π^part_{i,r})`` (the true propensities)
``calibration``        ``n_i·w^cal_i/π̂^part_{i,r}``, ``w^cal`` raked so that the enrolled
                       clients match the frame's counts by region and metro status and its
                       mean education (Deville and Särndal, "Calibration Estimators in
                       Survey Sampling", 1992)
=====================  ==========================================================

and the measure is the target excess loss ``F(θ_R) − F*`` after ``R`` rounds (mean and
standard error over seeds, and each rule's difference from the oracle paired by seed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from fairsched.fl.cps import (
    COVARIATES,
    GROUPS,
    REGIONS,
    CPSConfig,
    CPSPopulation,
    make_cps_population,
)
from fairsched.fl.experiment import rule_weights
from fairsched.fl.model import client_objective
from fairsched.fl.training import TrainConfig, train
from fairsched.propensity.errors import CalibrationError

RULES = ("fedavg", "participation_ipw", "fedipw", "oracle_ipw", "calibration")


@dataclass(frozen=True)
class CPSExperimentConfig:
    """Clients, training and the propensity model (defaults: the documented run)."""

    population: CPSConfig = field(default_factory=CPSConfig)
    # one local step: with several, FedAvg's fixed point drifts from the weighted optimum on
    # these heterogeneous groups by more than the selection bias being measured
    train: TrainConfig = field(default_factory=lambda: TrainConfig(rounds=300, local_steps=1, local_lr=2.0,
                                                                   ridge=1e-3, server_decay=0.02))
    pilot_rounds: int = 10
    propensity_model: str = "linear"


def _calibrated(pop: CPSPopulation) -> np.ndarray:
    """Raking weights of the enrolled clients to the frame's region and metro counts and mean education."""
    from fairsched.propensity import build_margins, calibrate

    E = pop.enrolled
    region = np.array([REGIONS.index(GROUPS[g][0]) for g in pop.group])
    metro = pop.Z[:, COVARIATES.index("metro")].astype(np.int64)
    education = pop.Z[:, COVARIATES.index("education")]
    shares = {"region": (region[E], dict(enumerate(np.bincount(region, minlength=4) / region.size))),
              "metro": (metro[E], dict(enumerate(np.bincount(metro, minlength=2) / metro.size)))}
    margins = build_margins(int(E.sum()), categorical=shares, continuous={"education": (education[E],
                                                                                         education.mean())})
    return calibrate(np.ones(int(E.sum())), margins, population_size=pop.clients).weights


def run_seed(level: str, seed: int, config: CPSExperimentConfig = CPSExperimentConfig()) -> dict[str, float]:
    """Final target excess loss of every rule on one partition and selection draw."""
    from fairsched.propensity import fit_two_stage

    pop_rng, pilot_rng, round_rng = np.random.default_rng(seed).spawn(3)
    pop = make_cps_population(level, pop_rng, config.population)
    objective = client_objective(pop.data, pop.target_weights, config.train.ridge)
    _, f_star = objective.solve()
    E, M = pop.enrolled, pop.clients
    x_pilot, _, avail_pilot = pop.draw_rounds(config.pilot_rounds, pilot_rng)
    model = fit_two_stage(pop.Z, E, x_pilot[:, E], avail_pilot[:, E], names=COVARIATES,
                          round_names=("x_round",), model=config.propensity_model)
    pi_e_hat = np.zeros(M)
    pi_e_hat[E] = model.enroll_probability(pop.Z[E])
    R = config.train.rounds
    x_round, pi_part, available = pop.draw_rounds(R, round_rng)
    pi_p_hat = np.ones((R, M))
    pi_p_hat[:, E] = model.participation_probability(pop.Z[E], x_round[:, E])
    calibrated = np.zeros(M)
    try:
        calibrated[E] = _calibrated(pop)
    except CalibrationError:  # the frame's margins lie outside what the enrolled clients can reach
        calibrated = None
    sizes = pop.data.sizes
    enroll_factor = {"fedavg": np.ones(M), "participation_ipw": np.ones(M),
                     "fedipw": np.divide(1.0, pi_e_hat, out=np.zeros(M), where=E),
                     "oracle_ipw": 1.0 / pop.pi_enroll, "calibration": calibrated}  # None: unreachable
    participants = [np.flatnonzero(E & available[r]) for r in range(R)]
    out = {}
    for rule in RULES:
        if enroll_factor[rule] is None:
            out[rule] = float("nan")
            continue
        weights = rule_weights(rule, participants, enroll_factor[rule], pi_part, pi_p_hat, base=sizes)
        out[rule] = float(objective.value(train(pop.data, participants, weights, config.train)[-1]) - f_star)
    return out


def run(level: str, seeds: int, config: CPSExperimentConfig = CPSExperimentConfig(),
        first_seed: int = 0) -> dict[str, dict[str, float]]:
    """``{rule: {"mean", "se", "minus_oracle", "minus_oracle_se", "seeds"}}`` of the final excess
    loss over the seeds where the rule ran (calibration fails where the margins are unreachable)."""
    rows = [run_seed(level, first_seed + s, config) for s in range(seeds)]
    table = {}
    oracle = np.array([row["oracle_ipw"] for row in rows])
    for rule in RULES:
        x = np.array([row[rule] for row in rows])
        ran = np.isfinite(x)
        x, d = x[ran], (x - oracle)[ran]
        se = (lambda v: float(v.std(ddof=1) / np.sqrt(v.size)) if v.size > 1 else float("nan"))
        table[rule] = {"mean": float(x.mean()) if x.size else float("nan"), "se": se(x),
                       "minus_oracle": float(d.mean()) if d.size else float("nan"), "minus_oracle_se": se(d),
                       "seeds": int(x.size)}
    return table


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fairsched.experiments.cps_fedipw")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--levels", nargs="+", default=["none", "moderate", "severe"])
    parser.add_argument("--propensity-model", default="linear")
    args = parser.parse_args(argv)
    base = CPSExperimentConfig()
    config = CPSExperimentConfig(train=replace(base.train, rounds=args.rounds), propensity_model=args.propensity_model)
    print(f"CPS1988, {base.population.clients_per_group * len(GROUPS)} clients, {args.rounds} rounds, "
          f"{args.seeds} seeds; target excess loss F(θ_R) − F* (mean ± SE; minus the oracle, paired)")
    print("| bias | " + " | ".join(RULES) + " |")
    print("|---|" + "---|" * len(RULES))
    for level in args.levels:
        t = run(level, args.seeds, config)
        cells = [f"{t[r]['mean']:.5f} ± {t[r]['se']:.5f} ({t[r]['minus_oracle']:+.5f} ± {t[r]['minus_oracle_se']:.5f})"
                 + ("" if t[r]["seeds"] == args.seeds else f" [{t[r]['seeds']} seeds]") for r in RULES]
        print(f"| {level} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
