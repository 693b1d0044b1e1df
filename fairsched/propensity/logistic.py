"""Unpenalised logistic regression with standard errors: the default propensity model.

fairsched estimates both selection stages of FedIPW (Morishita 2026) by logistic regression:
``logit P(y = 1 | x) = β_0 + x·β``. The fit is the maximum-likelihood estimate; by default
(``cov_type = "nonrobust"``) standard errors come from the inverse observed Fisher information

    Cov(β̂) = H⁻¹,   H = Dᵀ W D,   W = diag(p̂_i (1 − p̂_i)),   D = [1, X].

That formula assumes independent rows. Participation logs are not: the rows are worker ×
round, and a worker that is unobservedly keen (or flaky) is so in every round, so its rows
are positively correlated and ``H⁻¹`` understates the sampling spread. With ``groups``
(``cov_type = "cluster"``) the standard errors are the cluster-robust sandwich of Liang and
Zeger ("Longitudinal data analysis using generalized linear models", 1986; Cameron and
Miller, "A practitioner's guide to cluster-robust inference", 2015), with the CR1
small-sample factor that statsmodels' ``cov_type="cluster"`` applies by default:

    Cov_CR1(β̂) = c · H⁻¹ (Σ_g s_g s_gᵀ) H⁻¹,   s_g = Σ_{i∈g} d_i (y_i − p̂_i),
    c = G/(G − 1) · (n − 1)/(n − k),

over the ``G`` groups (``n`` rows, ``k`` coefficients including the intercept). It is
consistent as ``G → ∞`` whatever the correlation within a group, but needs many groups
(Cameron and Miller advise against trusting it below a few dozen).

Why scikit-learn: its ``LogisticRegression`` works on plain numpy arrays, so fairsched
stays free of pandas (statsmodels' ``Logit`` would give standard errors directly but
pulls in pandas and patsy). scikit-learn does not report standard errors, so they are
computed here from the formula above. It is imported lazily: ``import fairsched`` does
not need it.

Before fitting, the design is checked: a rank-deficient design (perfect collinearity) and
complete or quasi-complete separation (detected exactly by the linear programme of
Konis 2007: maximise ``Σ s_i d_i·β`` subject to ``s_i d_i·β >= 0``, ``|β| <= 1``,
``s_i = 2y_i − 1``; a positive optimum means a direction along which the likelihood
increases forever) raise :class:`SingularDesignError` naming the covariates involved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fairsched.extras import missing_dependency
from fairsched.propensity.errors import EstimationError, ShapeError, SingularDesignError
from fairsched.propensity.validation import as_binary, as_matrix
from fairsched.results import Result

# A separating direction must gain more than this (on standardised columns, per unit).
SEPARATION_TOLERANCE = 1e-7
RANK_TOLERANCE = 1e-9


@dataclass(frozen=True)
class LogisticFit(Result):
    """A fitted logistic model ``P(y = 1 | x) = expit(β_0 + x·β)``.

    ``coef`` and ``se`` list the intercept first (when fitted) then one entry per column
    of ``X``; ``names`` label the entries. ``cov`` is ``(Dᵀ W D)⁻¹`` when ``cov_type`` is
    ``"nonrobust"`` and the CR1 cluster-robust sandwich over ``n_groups`` groups when it is
    ``"cluster"`` (module docstring); ``naive_se`` is always the ``(Dᵀ W D)⁻¹`` one.
    """

    coef: np.ndarray
    se: np.ndarray
    cov: np.ndarray
    names: tuple[str, ...]
    intercept: bool
    n: int
    loglik: float
    cov_type: str = "nonrobust"
    n_groups: int | None = None
    naive_se: np.ndarray | None = None

    def __post_init__(self) -> None:
        clusters = f", standard errors clustered over {self.n_groups} groups" if self.cov_type == "cluster" else ""
        self._settle("fitted", True,
                     f"logistic regression on {self.n} rows, log-likelihood {self.loglik:.6g}{clusters}")
        if self.naive_se is None:
            object.__setattr__(self, "naive_se", self.se)

    def linear_predictor(self, X: Any) -> np.ndarray:
        """``β_0 + x·β`` for every row of ``X``."""
        X = as_matrix(X, "X")
        k = self.coef.size - int(self.intercept)
        if X.shape[1] != k:
            raise ShapeError(f"X: has {X.shape[1]} columns, the model was fitted on {k}")
        eta = X @ self.coef[int(self.intercept):]
        return eta + self.coef[0] if self.intercept else eta

    def predict(self, X: Any) -> np.ndarray:
        """Fitted probabilities ``expit(β_0 + x·β)``."""
        from scipy.special import expit

        return expit(self.linear_predictor(X))

    def z_scores(self, truth: Any) -> np.ndarray:
        """``(β̂ − truth)/se`` entry by entry, for coverage checks."""
        return (self.coef - np.asarray(truth, dtype=np.float64)) / self.se

    def as_dict(self) -> dict[str, dict[str, float]]:
        """``{name: {"coef", "se"}}`` (``se`` of ``cov_type``), JSON-ready."""
        return {n: {"coef": float(c), "se": float(s)} for n, c, s in zip(self.names, self.coef, self.se)}


def design_matrix(X: np.ndarray, intercept: bool) -> np.ndarray:
    """``[1, X]`` (or ``X``)."""
    return np.hstack([np.ones((X.shape[0], 1)), X]) if intercept else X


def _check_rank(D: np.ndarray, names: Sequence[str]) -> None:
    scale = np.linalg.norm(D, axis=0)
    if (scale == 0).any():
        j = int(np.flatnonzero(scale == 0)[0])
        raise SingularDesignError(f"singular design: column {names[j]!r} is identically zero")
    _, sv, vt = np.linalg.svd(D / scale, full_matrices=False)
    if sv[-1] <= RANK_TOLERANCE * sv[0]:
        null = vt[-1]
        involved = [names[j] for j in np.flatnonzero(np.abs(null) > 1e-6 * np.abs(null).max())]
        raise SingularDesignError(
            "singular design: perfect collinearity among " + ", ".join(repr(v) for v in involved)
            + " (one is a linear combination of the others); drop one of them")


def _check_separation(D: np.ndarray, y: np.ndarray, names: Sequence[str]) -> None:
    from scipy.optimize import linprog

    scale = np.linalg.norm(D, axis=0) / np.sqrt(D.shape[0])
    signed = (2.0 * y - 1.0)[:, None] * (D / scale)
    res = linprog(-signed.sum(axis=0), A_ub=-signed, b_ub=np.zeros(D.shape[0]),
                  bounds=[(-1.0, 1.0)] * D.shape[1], method="highs")
    if res.status != 0:
        raise EstimationError(f"separation check failed: {res.message}")
    gain = -float(res.fun) / D.shape[0]
    if gain > SEPARATION_TOLERANCE:
        margins = signed @ res.x
        count = int(np.count_nonzero(margins > SEPARATION_TOLERANCE))
        main = names[int(np.argmax(np.abs(res.x)))]
        raise SingularDesignError(
            f"separation: a linear combination of the covariates (mostly {main!r}) predicts the "
            f"outcome perfectly for {count} of {D.shape[0]} units, so the maximum-likelihood "
            "coefficients diverge; merge or drop that covariate, or pool sparse categories")


def _sklearn_unpenalised(**kwargs: Any):
    try:
        import sklearn
        from sklearn.linear_model import LogisticRegression
    except ImportError as exc:
        raise missing_dependency(exc, "the logistic propensity models") from None
    major, minor = (int(v) for v in sklearn.__version__.split(".")[:2])
    # scikit-learn 1.8 deprecated penalty=None in favour of C=inf (same estimator).
    if (major, minor) >= (1, 8):
        return LogisticRegression(C=np.inf, **kwargs)
    return LogisticRegression(penalty=None, **kwargs)


def as_groups(groups: Any, n: int) -> tuple[np.ndarray, int]:
    """Cluster labels (any hashable values, one per row) as codes ``0..G−1`` and ``G``.

    Raises :class:`ShapeError` for a wrong length, a non-flat array, a missing label (nan
    or None) or fewer than two groups (the sandwich needs ``G >= 2``).
    """
    arr = np.asarray(groups)
    if arr.ndim != 1:
        raise ShapeError(f"groups: expected a flat vector of cluster labels, got shape {arr.shape}")
    if arr.size != n:
        raise ShapeError(f"groups: has {arr.size} entries, expected {n} (one cluster label per row)")
    if arr.dtype == object:
        missing = np.fromiter((v is None or (isinstance(v, float) and np.isnan(v)) for v in arr.tolist()),
                              dtype=bool, count=n)
        if missing.any():
            raise ShapeError(f"groups: entry {int(np.flatnonzero(missing)[0])} is missing; every row needs a cluster label")
        arr = arr.astype(str)
    elif np.issubdtype(arr.dtype, np.number) or arr.dtype == bool:
        if np.issubdtype(arr.dtype, np.complexfloating):
            raise ShapeError("groups: complex cluster labels are not supported")
        bad = ~np.isfinite(arr.astype(np.float64))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ShapeError(f"groups: entry {i} is {arr[i]}; every row needs a finite cluster label")
    _, codes = np.unique(arr, return_inverse=True)
    count = int(codes.max()) + 1 if n else 0
    if count < 2:
        raise ShapeError(f"groups: all {n} rows are in one cluster; cluster-robust standard errors "
                         "need at least two (and, to be reliable, a few dozen) clusters")
    return codes.reshape(-1), count


def cluster_robust_cov(D: np.ndarray, residual: np.ndarray, bread: np.ndarray, codes: np.ndarray,
                       n_groups: int) -> np.ndarray:
    """CR1 sandwich ``c · H⁻¹ (Σ_g s_g s_gᵀ) H⁻¹`` with ``c = G/(G−1)·(n−1)/(n−k)``.

    ``D`` is the ``(n, k)`` design, ``residual`` the score residual ``y − p̂``, ``bread``
    ``H⁻¹`` and ``codes`` the group of each row (``0..G−1``).
    """
    n, k = D.shape
    if n <= k:
        raise ShapeError(f"groups: {n} rows for {k} coefficients; the CR1 factor needs n > k")
    scores = np.zeros((n_groups, k))
    np.add.at(scores, codes, D * residual[:, None])
    meat = scores.T @ scores
    factor = n_groups / (n_groups - 1.0) * (n - 1.0) / (n - k)
    cov = factor * (bread @ meat @ bread)
    return 0.5 * (cov + cov.T)


def fit_logistic(X: Any, y: Any, *, intercept: bool = True, names: Sequence[str] | None = None,
                 labels: tuple[str, str] = ("X", "y"), groups: Any | None = None) -> LogisticFit:
    """Maximum-likelihood logistic regression of the 0/1 outcome ``y`` on ``X``.

    Parameters
    ----------
    X : (n, k) array
        Covariates (a 1-D array is one covariate).
    y : (n,) array of 0/1
        Outcome (enrolled, participated, responded).
    intercept : bool
        Fit ``β_0`` (default).
    names : k strings, optional
        Covariate names for reports and error messages; default ``x0, x1, …``.
    labels : (str, str)
        What to call ``X`` and ``y`` in error messages (``("Z_frame", "enrolled")``).
    groups : (n,) array of cluster labels, optional
        Rows with the same label are one cluster (e.g. the worker of a worker × round log);
        the standard errors are then the CR1 cluster-robust sandwich (module docstring;
        ``cov_type == "cluster"``). Default: independent rows, ``(Dᵀ W D)⁻¹``. The
        coefficients do not depend on ``groups``.

    Raises
    ------
    ShapeError
        ``X`` and ``y`` describe different numbers of units, ``y`` is not 0/1, or
        ``groups`` has the wrong length, a missing label or fewer than two clusters.
    SingularDesignError
        The outcome never varies, the design is collinear, or the data are separated.
    """
    X = as_matrix(X, labels[0])
    y = as_binary(y, labels[1], length=X.shape[0])
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(X.shape[1]))
    if len(names) != X.shape[1]:
        raise ShapeError(f"names: has {len(names)} entries, X has {X.shape[1]} columns")
    all_names = (("intercept",) if intercept else ()) + names
    codes, n_groups = as_groups(groups, X.shape[0]) if groups is not None else (None, None)
    if y.min() == y.max():
        raise SingularDesignError(
            f"{labels[1]}: outcome is {int(y[0])} for all {y.size} units; a logistic model needs both outcomes")
    D = design_matrix(X, intercept)
    _check_rank(D, all_names)
    _check_separation(D, y, all_names)

    model = _sklearn_unpenalised(fit_intercept=intercept, solver="newton-cholesky",
                                 tol=1e-10, max_iter=1000)
    model.fit(X, y.astype(np.int64))
    coef = np.concatenate([model.intercept_, model.coef_[0]]) if intercept else model.coef_[0].copy()
    eta = D @ coef
    p = 1.0 / (1.0 + np.exp(-eta))
    w = p * (1.0 - p)
    info = D.T @ (D * w[:, None])
    try:
        cov = np.linalg.inv(info)
    except np.linalg.LinAlgError:
        raise SingularDesignError("the Fisher information (Dᵀ W D) is singular") from None
    naive_se = np.sqrt(np.diag(cov))
    loglik = float(np.sum(y * eta - np.logaddexp(0.0, eta)))
    if codes is None:
        return LogisticFit(coef, naive_se, cov, all_names, intercept, int(y.size), loglik)
    robust = cluster_robust_cov(D, y - p, cov, codes, n_groups)
    return LogisticFit(coef, np.sqrt(np.diag(robust)), robust, all_names, intercept, int(y.size), loglik,
                       cov_type="cluster", n_groups=n_groups, naive_se=naive_se)
