"""A synthetic population of clients with enrollment and participation selection.

Modelled on the synthetic federated-logistic-regression experiment of Morishita, "Who Trains
Matters: Federated Learning under Enrollment and Participation Selection Biases" (2026); the
population and its parameters below are fairsched's own.

Every client ``i = 1..N`` has pre-enrollment covariates ``Z_i = (z1, z2, region)``
(``z1, z2 ~ N(0, 1)``, ``region ∈ {0, 1, 2}`` with shares 0.5/0.3/0.2). The covariates
drive both the data and the selection:

- data: ``n_local`` examples ``x = (1, x_1..x_{d−1})``, ``x_k ~ N(0, 1)``, labels
  ``y ~ Bernoulli(expit(x·θ_i))`` with ``θ_i = θ_0 + z1·u_1 + z2·u_2 + v_{region}``
  (the gradient heterogeneity ``G`` of Morishita's bias-floor bound);
- enrollment: ``logit π^enroll_i = a_0 + s·(z1 + z2 − [region = 2])`` with the bias
  strength ``s`` = 0 / 0.5 / 1.0 / 1.5 for the levels none / mild / moderate / severe
  (``a_0 = 0``: about half the population enrolls); with
  ``PopulationConfig.enroll_z1_squared = c ≠ 0`` the index gains a term the linear
  propensity model omits, ``s·(z1 + z2 − [region = 2] + c·(z1² − 1))`` (the misspecified
  enrollment of ``docs/selection_bias.md`` §7; ``c = 0``, the default, draws exactly the
  populations of before);
- participation in round ``r`` of the enrolled: ``logit π^part_{i,r} = b_0 + b_z·z1 + x_{i,r}``
  (``b_0 = 0``, ``b_z = 0.25``) with a round covariate ``x_{i,r} ~ N(0, 1)`` (battery,
  network) drawn afresh every round.

The enrollment index points the same way as the data heterogeneity, so who enrolls and
who participates is informative about ``θ_i``, which is what biases FedAvg. Participation
depends on ``z1`` only weakly: alone it biases FedAvg little (the ``none`` level), but it
adds to the enrollment bias (the cross term ``2ab`` of a squared bias ``(a + b)²``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairsched.fl.errors import SimulationError
from fairsched.fl.model import ClientData, sigmoid
from fairsched.seeding import Seed, as_generator

BIAS_LEVELS: dict[str, float] = {"none": 0.0, "mild": 0.5, "moderate": 1.0, "severe": 1.5}
REGION_SHARES = (0.5, 0.3, 0.2)


def bias_strength(level: str) -> float:
    """The enrollment coefficient ``s`` of a bias level; :class:`SimulationError` if unknown."""
    try:
        return BIAS_LEVELS[level]
    except (KeyError, TypeError):
        raise SimulationError(f"unknown bias level {level!r}; choose one of "
                              f"{', '.join(BIAS_LEVELS)}") from None


@dataclass(frozen=True)
class PopulationConfig:
    """Sizes and coefficients of the synthetic population (defaults: the documented experiment)."""

    clients: int = 500
    n_local: int = 20
    dim: int = 5
    enroll_intercept: float = 0.0
    part_intercept: float = 0.0
    part_z1: float = 0.25
    heterogeneity: float = 1.0
    enroll_z1_squared: float = 0.0


@dataclass(frozen=True, eq=False)
class Population:
    """One draw of the population: covariates, data, true propensities and the enrolled set."""

    z: np.ndarray            # (N, 2) continuous covariates z1, z2
    region: np.ndarray       # (N,) 0/1/2
    data: ClientData
    pi_enroll: np.ndarray    # (N,) true enrollment probabilities
    enrolled: np.ndarray     # (N,) bool
    config: PopulationConfig
    strength: float

    @property
    def covariates(self) -> np.ndarray:
        """``Z`` as a design: ``(z1, z2, [region = 1], [region = 2])``."""
        return np.column_stack([self.z, self.region == 1, self.region == 2]).astype(np.float64)

    def participation_logit(self, round_covariate: np.ndarray) -> np.ndarray:
        """True ``logit π^part`` of every client for round covariates of shape ``(rounds, N)``."""
        c = self.config
        return c.part_intercept + c.part_z1 * self.z[:, 0][None, :] + round_covariate

    def draw_rounds(self, rounds: int, seed: Seed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Round covariates, true ``π^part`` and availability of every client, each ``(rounds, N)``.

        Availability is drawn for all clients; only the enrolled can ever participate.
        """
        rng = as_generator(seed)
        x = rng.normal(size=(rounds, self.config.clients))
        pi = sigmoid(self.participation_logit(x))
        available = rng.random(pi.shape) < pi
        return x, pi, available


def make_population(level: str, seed: Seed,
                    config: PopulationConfig = PopulationConfig()) -> Population:
    """Draw a population and its enrollment at bias ``level`` (module docstring)."""
    s = bias_strength(level)
    if config.clients < 10 or config.n_local < 1 or config.dim < 2:
        raise SimulationError("population: need at least 10 clients, 1 example each and dim >= 2")
    rng = as_generator(seed)
    N, n, d = config.clients, config.n_local, config.dim
    z = rng.normal(size=(N, 2))
    region = rng.choice(3, size=N, p=REGION_SHARES)
    theta0 = np.zeros(d)
    theta0[1:] = np.resize([1.0, -1.0, 0.5, -0.5], d - 1)
    u1 = np.zeros(d)
    u1[:2] = (0.6, 0.6)
    u2 = np.zeros(d)
    u2[0] = 0.4
    u2[min(2, d - 1)] = 0.6
    v = np.zeros((3, d))
    v[2, 0], v[2, 1] = -1.0, -0.6
    theta = theta0 + config.heterogeneity * (np.outer(z[:, 0], u1) + np.outer(z[:, 1], u2) + v[region])
    X = np.concatenate([np.ones((N, n, 1)), rng.normal(size=(N, n, d - 1))], axis=2)
    y = (rng.random((N, n)) < sigmoid(np.einsum("ind,id->in", X, theta))).astype(np.float64)
    index = z[:, 0] + z[:, 1] - (region == 2)
    if config.enroll_z1_squared != 0:
        index = index + config.enroll_z1_squared * (z[:, 0] ** 2 - 1.0)
    pi_enroll = sigmoid(config.enroll_intercept + s * index)
    enrolled = rng.random(N) < pi_enroll
    if enrolled.sum() < 10:
        raise SimulationError(f"population: only {int(enrolled.sum())} clients enrolled; use more clients")
    data = ClientData(X, y, np.ones((N, n)))
    return Population(z, region, data, pi_enroll, enrolled, config, s)
