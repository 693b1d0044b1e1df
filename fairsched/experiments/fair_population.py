"""Fair selection that serves the population: accuracy utility vs propensity-weighted accuracy.

    python -m fairsched.experiments.fair_population --out docs/fair_population --seeds 10

A population of clients falls into strata (urban, suburban, rural) with shares ``π_j``;
the rural stratum is under-enrolled and its clients hold less data. The enrolled clients
are the workers; worker ``u`` holds ``L_{u,j}`` examples of stratum ``j`` (mostly its home
stratum). Both utilities are scheduled by the same fair policy (``fairdg``) with the same
``k`` and floors ``r`` for ``T`` rounds (the MMSM-CF problem of Li, Liu and Ji 2021):

(a) ``AccuracyUtility`` on total sizes ``Σ_j L_{u,j}`` (Li, Liu and Ji 2021, Section VI);
(b) ``PropensityWeightedAccuracy`` with shares estimated by IPW from the enrolled clients'
    strata and their estimated enrollment propensities (FedIPW, Morishita 2026).

Each schedule then trains federated logistic regression (:mod:`fairsched.fl`; the selected
clients of round ``t`` run ``K`` local steps, aggregated by data size as FedAvg does) and
the target-population excess loss ``F(θ_T) − F*``, ``F = Σ_j π_j F_j`` with ``F_j`` the loss
on stratum ``j``'s distribution, is measured. Writes ``results.md`` and ``results.csv``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

import fairsched
from fairsched.atomic import atomic_write
from fairsched.experiments.common import log, output_folder, write_csv
from fairsched.fl.stratified import (
    STRATA,
    FairPopulationConfig,
    StratifiedPopulation,
    estimated_shares,
    make_stratified_population,
    stratum_dummies,
)
from fairsched.fl.training import train
from fairsched.utilities import AccuracyUtility, PropensityWeightedAccuracy

__all__ = ["STRATA", "FairPopulationConfig", "Row", "StratifiedPopulation", "make_stratified_population", "run_all",
           "run_seed", "summary_table", "main"]


@dataclass(frozen=True)
class Row:
    """One seed: target excess loss and the stratum mix of the trained data under (a) and (b)."""

    seed: int
    workers: int
    enrolled_rural: int
    estimated_rural_share: float
    true_rural_share: float
    excess_accuracy: float
    excess_propensity: float
    mix_accuracy_urban: float
    mix_accuracy_suburban: float
    mix_accuracy_rural: float
    mix_propensity_urban: float
    mix_propensity_suburban: float
    mix_propensity_rural: float
    seconds: float


def run_seed(seed: int, config: FairPopulationConfig = FairPopulationConfig()) -> Row:
    """Schedule both utilities with ``config.policy`` and train FL on each schedule."""
    start = time.perf_counter()
    pop = make_stratified_population(seed, config)
    J = len(config.shares)
    members = np.flatnonzero(pop.enrolled)
    _, shares = estimated_shares(pop.home, pop.enrolled, stratum_dummies(pop.home, J), STRATA[1:J], J)
    L = pop.sizes[members]
    n = members.size
    r = np.full(n, config.floor_fraction * config.k / n)
    ids = tuple(f"c{i}" for i in members)
    a, b, c = config.curve
    utilities = {"accuracy": AccuracyUtility(L.sum(axis=1), a, b, c),
                 "propensity": PropensityWeightedAccuracy(L, shares, config.transfer, a, b, c)}
    excess, mix = {}, {}
    for name, utility in utilities.items():
        problem = fairsched.Problem(utility, config.k, r, ids)
        schedule = fairsched.run(problem, fairsched.make_policy(config.policy), config.rounds, seed)
        participants = [members[s] for s in schedule]
        weights = [pop.data.sizes[p] for p in participants]
        path = train(pop.data, participants, weights, config.train)
        excess[name] = float(pop.objective.value(path[-1]) - pop.f_star)
        picked = pop.sizes[np.concatenate(participants)].sum(axis=0)
        mix[name] = picked / picked.sum()
    true_share = float(np.mean(pop.home == J - 1))
    return Row(seed, n, int(np.sum(pop.home[members] == J - 1)), float(shares[-1]), true_share,
               excess["accuracy"], excess["propensity"], *map(float, mix["accuracy"]),
               *map(float, mix["propensity"]), time.perf_counter() - start)


def run_all(seeds: int, config: FairPopulationConfig = FairPopulationConfig(),
            log: Callable[[str], None] = print) -> list[Row]:
    """Seeds ``0..seeds−1``."""
    rows = []
    for seed in range(seeds):
        row = run_seed(seed, config)
        rows.append(row)
        log(f"seed {seed}: excess (a) accuracy {row.excess_accuracy:.5f}  (b) propensity "
            f"{row.excess_propensity:.5f}  ({row.seconds:.1f} s)")
    return rows


def _mean_se(x: Sequence[float]) -> tuple[float, float]:
    a = np.asarray(x, dtype=np.float64)
    return float(a.mean()), float(a.std(ddof=1) / np.sqrt(a.size)) if a.size > 1 else float("nan")


def summary_table(rows: Sequence[Row], shares: Sequence[float] = FairPopulationConfig.shares) -> str:
    """Markdown: target excess loss and the stratum mix of the trained data, mean ± se."""
    def cell(values: Sequence[float], spec: str = ".5f", sign: str = "") -> str:
        m, s = _mean_se(values)
        return f"{m:{sign}{spec}} ± {s:{spec}}"

    a = [r.excess_accuracy for r in rows]
    b = [r.excess_propensity for r in rows]

    def mix(kind: str) -> str:
        return " | ".join(cell([getattr(r, f"mix_{kind}_{s}") for r in rows], ".3f") for s in STRATA)

    lines = ["| utility scheduled by the policy | target excess loss F(θ_T) − F* | "
             + " | ".join(f"{s} share of trained data" for s in STRATA) + " |",
             "|---|---|---|---|---|",
             f"| (a) AccuracyUtility (total sizes) | {cell(a)} | {mix('accuracy')} |",
             f"| (b) PropensityWeightedAccuracy (IPW shares) | {cell(b)} | {mix('propensity')} |",
             f"| (b) − (a), paired by seed | {cell(np.subtract(b, a), sign='+')} | | | |",
             "| population shares (target) | – | " + " | ".join(f"{x:g}" for x in shares) + " |"]
    return "\n".join(lines)



def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="docs/fair_population", help="output folder")
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args(argv)
    if args.seeds < 2:
        parser.error("--seeds must be at least 2 (standard errors)")
    out = output_folder(args.out)

    config = FairPopulationConfig()
    rows = run_all(args.seeds, config, log=log)
    write_csv(rows, out / "results.csv")
    est = _mean_se([r.estimated_rural_share for r in rows])
    true = _mean_se([r.true_rural_share for r in rows])
    enrolled_share = np.mean([r.enrolled_rural / r.workers for r in rows])
    text = "\n\n".join([
        "# Fair selection that serves the population",
        f"Produced by `python -m fairsched.experiments.fair_population --out {args.out} --seeds {args.seeds}` "
        f"({sum(r.seconds for r in rows):.0f} s).",
        f"Population: {config.clients} clients in strata {', '.join(STRATA)} with shares "
        f"{', '.join(f'{s:g}' for s in config.shares)}; enrollment probability "
        f"{', '.join(f'{e:g}' for e in config.enroll)} by stratum; mean data size "
        f"{', '.join(f'{m:g}' for m in config.mean_size)}, {config.home_fraction:.0%} from the home stratum. "
        f"Workers = enrolled clients (mean {np.mean([r.workers for r in rows]):.0f}; rural share among them "
        f"{enrolled_share:.3f}). Policy `{config.policy}`, k = {config.k}, r_u = {config.floor_fraction}·k/n, "
        f"T = {config.rounds} rounds, learning curve (a, b, c) = {config.curve} for both utilities, "
        f"transfer τ = {config.transfer}; FL: K = {config.train.local_steps} local "
        f"steps, data-size-weighted aggregation. IPW-estimated rural share {est[0]:.3f} ± {est[1]:.3f} "
        f"(population {true[0]:.3f} ± {true[1]:.3f}).",
        "## Target-population excess loss after T rounds (mean ± se over seeds)",
        summary_table(rows, config.shares),
    ]) + "\n"
    with atomic_write(out / "results.md") as handle:
        handle.write(text)
    log(f"wrote {out}/results.md and results.csv")
    return 0


if __name__ == "__main__":
    sys.exit(main())
