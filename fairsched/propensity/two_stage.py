"""Two-stage inclusion propensities: enrollment times participation.

The two-stage selection model of FedIPW (Morishita, "Who Trains Matters: Federated Learning
under Enrollment and Participation Selection Biases", 2026; ``docs/mathematics.md`` §11).

Stage 1, enrollment, is fitted on a population frame (covariates ``Z_i`` of every unit,
enrolled or not, and the flag ``E_i``):

    π^enroll_i = P(E_i = 1 | Z_i) = expit(a_0 + Z_i·a).

Stage 2, participation, is fitted on round logs of the enrolled only (``Z_i``, pre-round
covariates ``X_{i,r}`` and the flag ``A_{i,r}``):

    π^part_{i,r} = P(A_{i,r} = 1 | E_i = 1, Z_i, X_{i,r}) = expit(b_0 + Z_i·b_Z + X_{i,r}·b_X).

The inclusion probability of unit ``i`` in round ``r`` factorises:

    p_{i,r} = π^enroll_i · π^part_{i,r},

and FedIPW weights a participant by ``1/p̂_{i,r}`` (:mod:`fairsched.propensity.ipw`).

Both stages are linear-logistic by default; ``model=`` (``"linear"``, ``"poly2"``,
``"spline"``, ``"boosting"``; :mod:`fairsched.propensity.flexible`) relaxes the index.

The participation rows are worker × round, so by default (``cluster=True``) the
participation model's standard errors are clustered by worker (the CR1 sandwich of
:func:`~fairsched.propensity.logistic.fit_logistic`): a worker's rounds share whatever
unmodelled propensity it has, and the independent-rows formula is then too small. The
coefficients, and hence the propensities and weights, do not depend on the clustering.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fairsched.propensity.errors import ShapeError
from fairsched.propensity.flexible import PropensityFit, check_model, fit_propensity
from fairsched.propensity.validation import as_matrix
from fairsched.results import Result


def _round_covariates(X: Any, rounds: int, units: int) -> np.ndarray:
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3 or arr.shape[:2] != (rounds, units):
        raise ShapeError(f"X_round: expected shape ({rounds}, {units}[, s]) (rounds, enrolled units"
                         f"[, covariates]) to match participated, got {np.shape(X)}")
    return arr


def participation_design(Z: Any, X_round: Any | None, rounds: int) -> np.ndarray:
    """Stack ``[Z_i, X_{i,r}]`` for every (round, unit) pair, round-major: ``(rounds·n, q + s)``."""
    Z = as_matrix(Z, "Z")
    n = Z.shape[0]
    parts = [np.broadcast_to(Z, (rounds, n, Z.shape[1]))]
    if X_round is not None:
        parts.append(_round_covariates(X_round, rounds, n))
    stacked = np.concatenate(parts, axis=2)
    if not np.isfinite(stacked).all():
        raise ShapeError("X_round: contains a non-finite value")
    return stacked.reshape(rounds * n, -1)


def fit_enrollment(Z_frame: Any, enrolled: Any, names: Sequence[str] | None = None, *,
                   model: str = "linear") -> PropensityFit:
    """Enrollment model ``P(E = 1 | Z)`` from a population frame (every unit, enrolled or not).

    ``model`` is ``"linear"`` (default, a :class:`~fairsched.propensity.logistic.LogisticFit`) or a flexible model of
    :mod:`fairsched.propensity.flexible` (``"poly2"``, ``"spline"``, ``"boosting"``).
    """
    Z = as_matrix(Z_frame, "Z_frame")
    return fit_propensity(Z, enrolled, check_model(model), names=names, labels=("Z_frame", "enrolled"))


def fit_participation(Z: Any, X_round: Any | None, participated: Any,
                      names: Sequence[str] | None = None, *, cluster: bool = True,
                      model: str = "linear") -> PropensityFit:
    """Participation model ``P(A = 1 | E = 1, Z, X_r)`` from round logs of the enrolled.

    ``Z`` is ``(n, q)`` (enrolled units), ``X_round`` is ``(rounds, n)`` or
    ``(rounds, n, s)`` (``None``: no round covariates) and ``participated`` is ``(rounds, n)``.
    With ``cluster`` (default) the standard errors are clustered by worker (``n`` clusters,
    ``cov_type == "cluster"``); ``cluster=False`` treats the ``rounds·n`` rows as independent.
    ``model`` as in :func:`fit_enrollment`, applied to the stacked ``[Z_i, X_{i,r}]``.
    """
    A = np.asarray(participated, dtype=np.float64)
    Z = as_matrix(Z, "Z")
    if A.ndim != 2 or A.shape[1] != Z.shape[0]:
        raise ShapeError(f"participated: expected shape (rounds, {Z.shape[0]}) (rounds, enrolled units), "
                         f"got {A.shape}")
    design = participation_design(Z, X_round, A.shape[0])
    # participation_design is round-major: row r·n + i is worker i in round r.
    groups = np.tile(np.arange(Z.shape[0]), A.shape[0]) if cluster else None
    return fit_propensity(design, A.reshape(-1), check_model(model), names=names,
                          labels=("Z, X_round", "participated"), groups=groups)


@dataclass(frozen=True)
class TwoStagePropensity(Result):
    """Fitted enrollment and participation models; ``p̂ = π̂^enroll · π̂^part`` (``status`` ``"fitted"``)."""

    enrollment: PropensityFit
    participation: PropensityFit

    def __post_init__(self) -> None:
        self._settle("fitted", True, f"enrollment on {self.enrollment.n} units, participation on "
                                     f"{self.participation.n} unit-rounds")

    def enroll_probability(self, Z: Any) -> np.ndarray:
        """``π̂^enroll_i`` for every row of ``Z``."""
        return self.enrollment.predict(Z)

    def participation_probability(self, Z: Any, X_round: Any | None = None) -> np.ndarray:
        """``π̂^part_{i,r}`` with shape ``(rounds, n)`` (``(1, n)`` without round covariates)."""
        Z = as_matrix(Z, "Z")
        rounds = 1 if X_round is None else np.shape(X_round)[0]
        p = self.participation.predict(participation_design(Z, X_round, rounds))
        return p.reshape(rounds, Z.shape[0])

    def inclusion(self, Z: Any, X_round: Any | None = None) -> np.ndarray:
        """``p̂_{i,r} = π̂^enroll_i · π̂^part_{i,r}``, shape ``(rounds, n)``."""
        return self.enroll_probability(Z)[None, :] * self.participation_probability(Z, X_round)


def fit_two_stage(Z_frame: Any, enrolled: Any, X_round: Any | None, participated: Any,
                  names: Sequence[str] | None = None,
                  round_names: Sequence[str] | None = None, *, model: str = "linear",
                  participation_model: str = "linear", cluster: bool = True) -> TwoStagePropensity:
    """Fit both stages: enrollment on the frame, participation on the enrolled units' logs.

    ``participated`` is ``(rounds, n_enrolled)`` over the enrolled units in frame order.
    ``model`` is the enrollment model and ``participation_model`` the participation model
    (:data:`fairsched.propensity.flexible.MODELS`; both ``"linear"`` by default);
    ``cluster`` clusters the participation standard errors by worker (default).
    """
    check_model(model)
    check_model(participation_model)
    Z = as_matrix(Z_frame, "Z_frame")
    E = np.asarray(enrolled).reshape(-1)
    if E.size != Z.shape[0]:
        raise ShapeError(f"enrolled: has {E.size} entries, expected {Z.shape[0]} (one per frame unit)")
    enroll = fit_enrollment(Z, E, names, model=model)
    mask = E.astype(bool)
    part_names = None
    if names is not None:
        s = 0 if X_round is None else (1 if np.ndim(X_round) == 2 else np.shape(X_round)[2])
        part_names = list(names) + list(round_names or [f"x_round{j}" for j in range(s)])
    part = fit_participation(Z[mask], X_round, participated, part_names, cluster=cluster,
                             model=participation_model)
    return TwoStagePropensity(enroll, part)
