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
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

import fairsched
from fairsched.atomic import atomic_write
from fairsched.experiments.common import log, output_folder, write_csv
from fairsched.fl.model import ClientData, Objective, sigmoid
from fairsched.fl.training import TrainConfig, train
from fairsched.propensity import fit_enrollment
from fairsched.utilities import AccuracyUtility, PropensityWeightedAccuracy
from fairsched.propensity import ipw_shares

STRATA = ("urban", "suburban", "rural")


@dataclass(frozen=True)
class FairPopulationConfig:
    """Population, selection, scheduling and training parameters (defaults: the documented run)."""

    clients: int = 600
    shares: tuple[float, ...] = (0.5, 0.3, 0.2)
    enroll: tuple[float, ...] = (0.5, 0.4, 0.06)
    mean_size: tuple[float, ...] = (60.0, 40.0, 20.0)
    home_fraction: float = 0.9
    dim: int = 5
    test_per_stratum: int = 20_000
    k: int = 10
    floor_fraction: float = 0.5
    rounds: int = 100
    transfer: float = 0.05
    curve: tuple[float, float, float] = (0.05, 0.5, -0.5)
    policy: str = "fairdg"
    train: TrainConfig = field(default_factory=lambda: TrainConfig(rounds=100))


@dataclass(frozen=True)
class StratifiedPopulation:
    """Clients' home strata and per-stratum data, enrollment, the workers and the target ``F``."""

    home: np.ndarray          # (M,) stratum of every client
    sizes: np.ndarray         # (M, J) L_{i,j}
    data: ClientData          # every client's examples
    enrolled: np.ndarray      # (M,) bool
    objective: Objective      # F = Σ_j π_j F_j on a large sample of every stratum
    f_star: float


def _stratum_models(J: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    theta = np.zeros((J, d))
    mu = np.zeros((J, d))
    base = np.resize([1.0, -1.0, 0.5, -0.5], d - 1)
    for j in range(J):
        theta[j, 0] = (0.5, 0.0, -0.8)[j % 3]
        theta[j, 1:] = base * (1.0, 0.4, -1.0)[j % 3]
        mu[j, 1:] = np.resize([0.0, 0.5, -0.5][j % 3], d - 1)
    return theta, mu


def _examples(rng: np.random.Generator, theta: np.ndarray, mu: np.ndarray,
              count: int) -> tuple[np.ndarray, np.ndarray]:
    X = np.concatenate([np.ones((count, 1)), mu[1:] + rng.normal(size=(count, mu.size - 1))], axis=1)
    y = (rng.random(count) < sigmoid(X @ theta)).astype(np.float64)
    return X, y


def make_stratified_population(seed: int, config: FairPopulationConfig = FairPopulationConfig()
                               ) -> StratifiedPopulation:
    """Draw clients, their per-stratum data, enrollment and the target objective."""
    rng = np.random.default_rng(seed)
    J, d, M = len(config.shares), config.dim, config.clients
    theta, mu = _stratum_models(J, d)
    home = rng.choice(J, size=M, p=np.asarray(config.shares))
    total = np.maximum(5, np.round(np.asarray(config.mean_size)[home] * rng.lognormal(0.0, 0.3, M))).astype(int)
    away = (1.0 - config.home_fraction) / max(1, J - 1)
    mix = np.full((M, J), away)
    mix[np.arange(M), home] = config.home_fraction
    sizes = np.vstack([rng.multinomial(t, p) for t, p in zip(total, mix)]).astype(np.float64)
    n_max = int(total.max())
    X = np.zeros((M, n_max, d))
    y = np.zeros((M, n_max))
    mask = np.zeros((M, n_max))
    for i in range(M):
        start = 0
        for j in range(J):
            c = int(sizes[i, j])
            X[i, start:start + c], y[i, start:start + c] = _examples(rng, theta[j], mu[j], c)
            start += c
        mask[i, :start] = 1.0
    enrolled = rng.random(M) < np.asarray(config.enroll)[home]
    tests = [_examples(rng, theta[j], mu[j], config.test_per_stratum) for j in range(J)]
    weights = np.concatenate([np.full(config.test_per_stratum, s / config.test_per_stratum)
                              for s in np.bincount(home, minlength=J) / M])
    objective = Objective(np.vstack([t[0] for t in tests]), np.concatenate([t[1] for t in tests]),
                          weights, config.train.ridge)
    _, f_star = objective.solve()
    return StratifiedPopulation(home, sizes, ClientData(X, y, mask), enrolled, objective, f_star)


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
    frame = np.eye(J)[pop.home][:, 1:]
    enroll_model = fit_enrollment(frame, pop.enrolled, names=STRATA[1:J])
    shares = ipw_shares(pop.home[members], enroll_model.predict(frame[members]), J)
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
