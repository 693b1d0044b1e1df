"""Flexible propensity models: spline / quadratic features, or calibrated gradient boosting.

The linear-logistic propensity of :mod:`fairsched.propensity.logistic` is right only when
the true selection index is linear in the covariates. FedIPW (Morishita, "Who Trains
Matters: Federated Learning under Enrollment and Participation Selection Biases", 2026)
inherits any misspecification: an omitted ``z1²`` term in enrollment leaves weights that
balance ``z1`` on average but not its spread, and a bias floor remains
(``docs/selection_bias.md`` §7). Three ways to relax the index, chosen by name:

``"linear"``
    ``logit π = β_0 + z·β`` (:func:`~fairsched.propensity.logistic.fit_logistic`).
``"poly2"``
    the same logistic fit on ``z``, the squares of the non-binary columns and all pairwise
    products (scikit-learn's ``PolynomialFeatures(degree=2)``, minus squares of 0/1
    columns, which repeat the column, and products that are identically zero, such as two
    dummies of one categorical variable).
``"spline"``
    an additive logistic model ``logit π = β_0 + Σ_j f_j(z_j)``: every non-binary column
    is expanded into a cubic B-spline basis (``SplineTransformer``, ``SPLINE_KNOTS`` knots
    at quantiles, fewer where quantiles repeat, one basis function dropped so the basis is
    not collinear with the intercept, and any basis function that is zero on every row
    dropped); 0/1 columns enter linearly. Same maximum-likelihood fit, same separation
    and collinearity checks, standard errors for the basis coefficients.
``"boosting"``
    ``HistGradientBoostingClassifier`` whose probabilities are recalibrated by
    ``CalibratedClassifierCV`` (isotonic, ``BOOSTING_CV``-fold), then clipped to
    ``[PROBABILITY_FLOOR, 1]``: a tree ensemble can return 0, and ``1/0`` is no weight.
    No standard errors; deterministic for a given ``random_state``; runs on one thread.

All three fitted objects have ``predict(X) -> probabilities`` and ``n`` as
:class:`~fairsched.propensity.logistic.LogisticFit` does, so
:class:`~fairsched.propensity.two_stage.TwoStagePropensity` uses them unchanged.
scikit-learn is imported lazily.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from fairsched.extras import missing_dependency
from fairsched.propensity.errors import PropensityError, ShapeError
from fairsched.propensity.logistic import LogisticFit, fit_logistic
from fairsched.propensity.validation import as_binary, as_matrix
from fairsched.results import Result

MODELS = ("linear", "poly2", "spline", "boosting")
SPLINE_KNOTS = 5
SPLINE_DEGREE = 3
BOOSTING_CV = 5
PROBABILITY_FLOOR = 1e-3


def check_model(model: str) -> str:
    """``model`` if it is one of :data:`MODELS`, else :class:`PropensityError` listing them."""
    if model not in MODELS:
        raise PropensityError(f"model: unknown propensity model {model!r}; choose one of {', '.join(MODELS)}")
    return model


def _sklearn(what: str):
    try:
        from sklearn import preprocessing
    except ImportError as exc:
        raise missing_dependency(exc, what) from None
    return preprocessing


def _one_thread():
    """One OpenMP thread for the tree ensemble: on propensity-sized data (hundreds to
    thousands of rows) threads cost more than they save, and on a shared machine far more."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1)


def binary_columns(X: np.ndarray) -> np.ndarray:
    """Mask of the columns whose values are all 0 or 1."""
    return np.all((X == 0) | (X == 1), axis=0)


@dataclass(frozen=True, eq=False)
class FeatureMap:
    """A fitted expansion ``z ↦ features(z)`` (``kind`` ``"poly2"`` or ``"spline"``)."""

    kind: str
    n_inputs: int
    names: tuple[str, ...]
    binary: np.ndarray
    keep: np.ndarray | None = None
    transformer: Any = None

    def transform(self, X: Any) -> np.ndarray:
        """The features of every row of ``X`` (same column layout as at fit time)."""
        X = as_matrix(X, "X")
        if X.shape[1] != self.n_inputs:
            raise ShapeError(f"X: has {X.shape[1]} columns, the feature map was fitted on {self.n_inputs}")
        if self.kind == "poly2":
            return self.transformer.transform(X)[:, self.keep]
        cont = np.flatnonzero(~self.binary)
        parts = [t.transform(X[:, [j]]) for j, t in zip(cont, self.transformer)]
        parts.append(X[:, self.binary])
        return np.hstack(parts)[:, self.keep]


def fit_feature_map(X: Any, kind: str, names: Sequence[str] | None = None) -> FeatureMap:
    """Fit the ``"poly2"`` or ``"spline"`` expansion of ``X`` (module docstring)."""
    X = as_matrix(X, "X")
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(X.shape[1]))
    if len(names) != X.shape[1]:
        raise ShapeError(f"names: has {len(names)} entries, X has {X.shape[1]} columns")
    pre = _sklearn("the flexible propensity models")
    binary = binary_columns(X)
    if kind == "poly2":
        poly = pre.PolynomialFeatures(degree=2, include_bias=False).fit(X)
        out_names, keep = [], []
        F = poly.transform(X)
        for j, powers in enumerate(poly.powers_):
            used = np.flatnonzero(powers)
            if powers.sum() == 2 and used.size == 1 and binary[used[0]]:
                keep.append(False)                 # b² = b for a 0/1 column
                continue
            if powers.sum() == 2 and not np.any(F[:, j]):
                keep.append(False)                 # e.g. two dummies of one variable
                continue
            keep.append(True)
            out_names.append("·".join(names[i] if powers[i] == 1 else f"{names[i]}²" for i in used))
        return FeatureMap("poly2", X.shape[1], tuple(out_names), binary, np.array(keep), poly)
    if kind != "spline":
        raise PropensityError(f"kind: unknown feature map {kind!r}; choose poly2 or spline")
    transformers, out_names = [], []
    for j in np.flatnonzero(~binary):
        # distinct quantile knots: a covariate with a point mass (many clients at 0) repeats
        # quantiles, and a B-spline on repeated knots can be zero on every row
        knots = np.unique(np.quantile(X[:, j], np.linspace(0.0, 1.0, SPLINE_KNOTS)))
        if knots.size < 2:
            knots = np.array([knots[0] - 0.5, knots[0] + 0.5])
        t = pre.SplineTransformer(knots=knots[:, None], degree=SPLINE_DEGREE, extrapolation="linear",
                                  include_bias=False).fit(X[:, [j]])
        transformers.append(t)
        out_names += [f"{names[j]}:s{b}" for b in range(t.n_features_out_)]
    out_names += [names[j] for j in np.flatnonzero(binary)]
    fitted = FeatureMap("spline", X.shape[1], tuple(out_names), binary, np.ones(len(out_names), bool), transformers)
    keep = np.any(fitted.transform(X) != 0, axis=0)  # a basis function no row reaches
    return FeatureMap("spline", X.shape[1], tuple(n for n, k in zip(out_names, keep) if k), binary, keep,
                      transformers)


@dataclass(frozen=True, eq=False)
class FeatureLogisticFit(Result):
    """A logistic fit on expanded features: ``P(y = 1 | x) = expit(β_0 + features(x)·β)``."""

    model: str
    features: FeatureMap
    logistic: LogisticFit

    def __post_init__(self) -> None:
        self._settle("fitted", True, f"{self.model} logistic model with {len(self.features.names)} "
                                     f"features: {self.logistic.message}")

    @property
    def n(self) -> int:
        return self.logistic.n

    @property
    def names(self) -> tuple[str, ...]:
        return self.logistic.names

    @property
    def coef(self) -> np.ndarray:
        return self.logistic.coef

    @property
    def se(self) -> np.ndarray:
        return self.logistic.se

    def predict(self, X: Any) -> np.ndarray:
        """Fitted probabilities for every row of ``X`` (the original covariates)."""
        return self.logistic.predict(self.features.transform(X))


@dataclass(frozen=True, eq=False)
class BoostingFit(Result):
    """Calibrated gradient-boosting propensities (no standard errors)."""

    estimator: Any
    n: int
    n_inputs: int
    floor: float = PROBABILITY_FLOOR
    model: str = field(default="boosting")

    def __post_init__(self) -> None:
        self._settle("fitted", True, f"calibrated gradient boosting on {self.n} rows "
                                     f"(probabilities clipped to [{self.floor:g}, 1])")

    def predict(self, X: Any) -> np.ndarray:
        """Calibrated probabilities, clipped to ``[floor, 1]``."""
        X = as_matrix(X, "X")
        if X.shape[1] != self.n_inputs:
            raise ShapeError(f"X: has {X.shape[1]} columns, the model was fitted on {self.n_inputs}")
        with _one_thread():
            return np.clip(self.estimator.predict_proba(X)[:, 1], self.floor, 1.0)


def fit_boosting(X: Any, y: Any, *, labels: tuple[str, str] = ("X", "y"), random_state: int = 0,
                 floor: float = PROBABILITY_FLOOR) -> BoostingFit:
    """``HistGradientBoostingClassifier`` + isotonic ``CalibratedClassifierCV`` (module docstring)."""
    X = as_matrix(X, labels[0])
    y = as_binary(y, labels[1], length=X.shape[0])
    if y.min() == y.max():
        raise PropensityError(f"{labels[1]}: outcome is {int(y[0])} for all {y.size} units; a propensity "
                              "model needs both outcomes")
    if min(np.count_nonzero(y), np.count_nonzero(1 - y)) < BOOSTING_CV:
        raise PropensityError(f"{labels[1]}: fewer than {BOOSTING_CV} units with one of the outcomes; too few "
                              f"for {BOOSTING_CV}-fold calibration")
    try:
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.ensemble import HistGradientBoostingClassifier
    except ImportError as exc:
        raise missing_dependency(exc, "the boosting propensity model") from None
    base = HistGradientBoostingClassifier(max_iter=100, learning_rate=0.05, max_depth=3, min_samples_leaf=20,
                                          random_state=random_state)
    with _one_thread():
        clf = CalibratedClassifierCV(base, method="isotonic", cv=BOOSTING_CV).fit(X, y.astype(np.int64))
    return BoostingFit(clf, int(y.size), int(X.shape[1]), float(floor))


PropensityFit = LogisticFit | FeatureLogisticFit | BoostingFit


def fit_propensity(X: Any, y: Any, model: str = "linear", *, names: Sequence[str] | None = None,
                   labels: tuple[str, str] = ("X", "y"), groups: Any | None = None) -> PropensityFit:
    """Fit ``P(y = 1 | x)`` with the named model (:data:`MODELS`; module docstring).

    ``groups`` (cluster labels, one per row) gives cluster-robust standard errors for the
    logistic models (:func:`~fairsched.propensity.logistic.fit_logistic`); boosting has no
    standard errors and ignores it.
    """
    check_model(model)
    if model == "linear":
        return fit_logistic(X, y, names=names, labels=labels, groups=groups)
    if model == "boosting":
        return fit_boosting(X, y, labels=labels)
    X = as_matrix(X, labels[0])
    fmap = fit_feature_map(X, model, names)
    fit = fit_logistic(fmap.transform(X), y, names=fmap.names, labels=labels, groups=groups)
    return FeatureLogisticFit(model, fmap, fit)


__all__ = ["BOOSTING_CV", "MODELS", "PROBABILITY_FLOOR", "SPLINE_KNOTS", "BoostingFit", "FeatureLogisticFit",
           "FeatureMap", "PropensityFit", "binary_columns", "check_model", "fit_boosting", "fit_feature_map",
           "fit_propensity"]
