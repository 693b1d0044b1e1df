"""A stratified population of clients (urban, suburban, rural) for fair, population-aligned selection.

The population of the fair-population experiment (:mod:`fairsched.experiments.fair_population`)
and of the utility-validity harness (:mod:`fairsched.fl.utility_validity`): every client has
a home stratum (shares ``π``), holds mostly data of that stratum (``home_fraction``), with
lognormal sizes around its stratum's ``mean_size``, and enrolls with a probability that
depends on its stratum (``enroll``; the rural stratum is under-enrolled). Stratum ``j``'s
labels follow its own logistic model; the target ``F = Σ_j π_j F_j`` is evaluated on
``test_per_stratum`` fresh examples of every stratum.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from fairsched.fl.model import ClientData, Objective, sigmoid
from fairsched.fl.training import TrainConfig

if TYPE_CHECKING:
    from fairsched.propensity.flexible import PropensityFit

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


def stratum_models(J: int, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-stratum logistic models ``θ_j`` and feature means ``μ_j`` (the three strata cycle for ``J > 3``)."""
    theta = np.zeros((J, d))
    mu = np.zeros((J, d))
    base = np.resize([1.0, -1.0, 0.5, -0.5], d - 1)
    for j in range(J):
        theta[j, 0] = (0.5, 0.0, -0.8)[j % 3]
        theta[j, 1:] = base * (1.0, 0.4, -1.0)[j % 3]
        mu[j, 1:] = np.resize([0.0, 0.5, -0.5][j % 3], d - 1)
    return theta, mu


def stratum_examples(rng: np.random.Generator, theta: np.ndarray, mu: np.ndarray,
                     count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` examples ``(x, y)`` of one stratum: ``x = (1, μ + N(0, I))``, ``y ~ Bernoulli(σ(x·θ))``."""
    X = np.concatenate([np.ones((count, 1)), mu[1:] + rng.normal(size=(count, mu.size - 1))], axis=1)
    y = (rng.random(count) < sigmoid(X @ theta)).astype(np.float64)
    return X, y


def make_stratified_population(seed: int, config: FairPopulationConfig = FairPopulationConfig()
                               ) -> StratifiedPopulation:
    """Draw clients, their per-stratum data, enrollment and the target objective."""
    rng = np.random.default_rng(seed)
    J, d, M = len(config.shares), config.dim, config.clients
    theta, mu = stratum_models(J, d)
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
            X[i, start:start + c], y[i, start:start + c] = stratum_examples(rng, theta[j], mu[j], c)
            start += c
        mask[i, :start] = 1.0
    enrolled = rng.random(M) < np.asarray(config.enroll)[home]
    tests = [stratum_examples(rng, theta[j], mu[j], config.test_per_stratum) for j in range(J)]
    weights = np.concatenate([np.full(config.test_per_stratum, s / config.test_per_stratum)
                              for s in np.bincount(home, minlength=J) / M])
    objective = Objective(np.vstack([t[0] for t in tests]), np.concatenate([t[1] for t in tests]),
                          weights, config.train.ridge)
    _, f_star = objective.solve()
    return StratifiedPopulation(home, sizes, ClientData(X, y, mask), enrolled, objective, f_star)


def stratum_dummies(home: np.ndarray, J: int) -> np.ndarray:
    """The enrollment model's design: one 0/1 column per stratum but the first."""
    return np.eye(J)[home][:, 1:]


def estimated_shares(home: np.ndarray, enrolled: np.ndarray, frame: np.ndarray, names: tuple[str, ...],
                     J: int, model: str = "linear") -> tuple[PropensityFit, np.ndarray]:
    """The enrollment model ``model`` (``"linear"`` or a flexible one of
    :mod:`fairsched.propensity.flexible`) fitted on the population ``frame`` and the IPW stratum
    shares of the enrolled (``π̂_j ∝ Σ_{i enrolled in j} 1/π̂^enroll_i``; FedIPW, Morishita 2026)."""
    from fairsched.propensity import (  # not at import: fairsched.fl stays light
        fit_enrollment,
        ipw_shares,
    )

    members = np.flatnonzero(enrolled)
    fit = fit_enrollment(frame, enrolled, names=names, model=model)
    return fit, ipw_shares(home[members], fit.predict(frame[members]), J)
