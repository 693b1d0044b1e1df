"""Weight diagnostics and trimming, in the style of the ``balance`` package.

- Kish effective sample size ``ESS = (Σ w)² / Σ w²`` (equal weights give ``n``);
- weight range and ratios: ``max/min``, ``max/mean``, coefficient of variation;
- absolute standardised mean difference of covariate ``x`` between a weighted sample and
  the target population, ``ASMD = |x̄_w − x̄_target| / sd_target``, before (design weights)
  and after (adjusted weights) adjustment;
- ASMD of nonlinear terms: balance on the covariates' means does not imply balance on
  their spread or joint distribution. :func:`nonlinear_terms` expands ``Z`` into the
  squares of its non-binary columns and all pairwise products, and
  :func:`nonlinear_balance` reports the ASMD of covariates and terms together, flagging
  every term above ``ASMD_THRESHOLD = 0.1`` after weighting (the customary cut-off for a
  standardised difference, Austin, "Balance diagnostics for comparing the distribution of
  baseline covariates between treatment groups in propensity-score matched samples",
  Statistics in Medicine, 2009). A linear propensity model balances, in expectation,
  exactly the terms it contains; an imbalanced square or product after weighting is the
  sign of an omitted nonlinear term (``docs/selection_bias.md`` §3);
- trimming: cap weights at a quantile or at ``max_ratio × mean`` and rescale so the total
  weight is unchanged (repeated until the cap holds after rescaling).

Large weights are the price of correcting strong selection (in Morishita's 2026 analysis of
FedIPW they enter the variance term of the excess-loss bound); these diagnostics say how
much of the sample is effectively left.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from fairsched.propensity.errors import ShapeError
from fairsched.propensity.validation import as_matrix, as_vector
from fairsched.results import Result

# The usual cut-off for an absolute standardised mean difference (Austin 2009).
ASMD_THRESHOLD = 0.1


def _weights(w: Any, name: str = "weights", allow_negative: bool = False) -> np.ndarray:
    w = as_vector(w, name)
    if w.size == 0:
        raise ShapeError(f"{name}: is empty")
    if not allow_negative and (w < 0).any():
        i = int(np.flatnonzero(w < 0)[0])
        raise ShapeError(f"{name}: entry {i} is {w[i]:g}, weights must be >= 0")
    if not w.sum() > 0:
        raise ShapeError(f"{name}: all weights are 0")
    return w


def kish_ess(w: Any) -> float:
    """Kish effective sample size ``(Σ w)² / Σ w²``."""
    w = _weights(w)
    return float(w.sum() ** 2 / np.dot(w, w))


@dataclass(frozen=True)
class WeightSummary(Result):
    """Summary of a weight vector: size, ESS, range and dispersion (``status`` ``"summarised"``)."""

    n: int
    ess: float
    ess_fraction: float
    min: float
    max: float
    max_over_min: float
    max_over_mean: float
    cv: float

    def __post_init__(self) -> None:
        self._settle("summarised", True, f"{self.n} weights, Kish ESS {self.ess:.4g} ({self.ess_fraction:.1%}), "
                                         f"max/min {self.max_over_min:.4g}")

    def as_dict(self) -> dict[str, float]:
        """The numbers of the summary, JSON-ready."""
        return {name: getattr(self, name) for name in ("n", "ess", "ess_fraction", "min", "max", "max_over_min",
                                                       "max_over_mean", "cv")}


def weight_summary(w: Any) -> WeightSummary:
    """ESS, ``ESS/n``, min, max, ``max/min``, ``max/mean`` and the coefficient of variation."""
    w = _weights(w)
    ess = kish_ess(w)
    positive = w[w > 0]
    return WeightSummary(n=int(w.size), ess=ess, ess_fraction=ess / w.size, min=float(w.min()),
                         max=float(w.max()), max_over_min=float(positive.max() / positive.min()),
                         max_over_mean=float(w.max() / w.mean()), cv=float(w.std() / w.mean()))


def weighted_mean(X: Any, w: Any) -> np.ndarray:
    """Column means of ``X`` under weights ``w`` (negative weights, as linear calibration can
    give, are allowed as long as ``Σ w > 0``)."""
    X = as_matrix(X, "X")
    w = _weights(w, allow_negative=True)
    if w.size != X.shape[0]:
        raise ShapeError(f"weights: has {w.size} entries, X has {X.shape[0]} rows")
    return (w @ X) / w.sum()


def asmd(X: Any, w: Any, target_mean: Any, target_sd: Any) -> np.ndarray:
    """``|x̄_w − x̄_target| / sd_target`` for every column of ``X`` (``balance``'s ASMD).

    A column with ``sd_target = 0`` uses 1 in the denominator (a constant column).
    """
    mean = weighted_mean(X, w)
    tm = as_vector(np.atleast_1d(target_mean), "target_mean", length=mean.size)
    ts = as_vector(np.atleast_1d(target_sd), "target_sd", length=mean.size)
    if (ts < 0).any():
        raise ShapeError("target_sd: must be >= 0")
    return np.abs(mean - tm) / np.where(ts > 0, ts, 1.0)


@dataclass(frozen=True)
class BalanceReport(Result):
    """ASMD per covariate before and after weighting, with their means (``status`` ``"measured"``).

    ``imbalanced`` lists the covariates whose ASMD after weighting exceeds ``threshold``
    (default :data:`ASMD_THRESHOLD`, 0.1).
    """

    names: tuple[str, ...]
    before: np.ndarray
    after: np.ndarray
    threshold: float = ASMD_THRESHOLD

    def __post_init__(self) -> None:
        self._settle("measured", True, f"mean ASMD {float(self.before.mean()):.4g} before weighting, "
                                       f"{float(self.after.mean()):.4g} after")

    @property
    def mean_before(self) -> float:
        return float(self.before.mean())

    @property
    def mean_after(self) -> float:
        return float(self.after.mean())

    @property
    def imbalanced(self) -> tuple[str, ...]:
        """Covariates whose ASMD after weighting is above ``threshold``."""
        return tuple(n for n, a in zip(self.names, self.after) if a > self.threshold)

    def asmd_after(self, name: str) -> float:
        """The ASMD after weighting of the covariate (or term) ``name``."""
        try:
            return float(self.after[self.names.index(name)])
        except ValueError:
            raise ShapeError(f"name: no covariate {name!r}; have {', '.join(self.names)}") from None

    def table(self) -> str:
        """Markdown table ``covariate | ASMD before | ASMD after``."""
        lines = ["| covariate | ASMD before | ASMD after |", "|---|---|---|"]
        lines += [f"| {n} | {b:.4f} | {a:.4f} |" for n, b, a in zip(self.names, self.before, self.after)]
        lines.append(f"| mean | {self.mean_before:.4f} | {self.mean_after:.4f} |")
        return "\n".join(lines)


def balance_report(X: Any, before: Any, after: Any, target: Any,
                   names: Sequence[str] | None = None) -> BalanceReport:
    """ASMD of the sample ``X`` against the target population rows ``target``.

    ``before`` and ``after`` are the weights of the sample before and after adjustment;
    the target's means and standard deviations come from ``target`` (unweighted).
    """
    X = as_matrix(X, "X")
    T = as_matrix(target, "target")
    if T.shape[1] != X.shape[1]:
        raise ShapeError(f"target: has {T.shape[1]} columns, X has {X.shape[1]}")
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(X.shape[1]))
    tm, ts = T.mean(axis=0), T.std(axis=0)
    return BalanceReport(names, asmd(X, before, tm, ts), asmd(X, after, tm, ts))


def nonlinear_terms(X: Any, names: Sequence[str] | None = None, *, squares: bool = True,
                    interactions: bool = True, reference: Any | None = None) -> tuple[np.ndarray, tuple[str, ...]]:
    """Squares and pairwise products of the columns of ``X``, with names (``"z1²"``, ``"z1·z2"``).

    Squares of 0/1 columns (equal to the column) are left out, and so are terms that are
    identically zero in ``reference`` (default ``X``; e.g. the product of two dummies of
    one categorical variable). Pass the target population as ``reference`` so that the
    sample and the target get the same terms.
    """
    X = as_matrix(X, "X")
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(X.shape[1]))
    if len(names) != X.shape[1]:
        raise ShapeError(f"names: has {len(names)} entries, X has {X.shape[1]} columns")
    R = X if reference is None else as_matrix(reference, "reference")
    if R.shape[1] != X.shape[1]:
        raise ShapeError(f"reference: has {R.shape[1]} columns, X has {X.shape[1]}")
    binary = np.all((R == 0) | (R == 1), axis=0)
    cols, out = [], []
    k = X.shape[1]
    for a in range(k):
        for b in range(a, k):
            if a == b and (not squares or binary[a]):
                continue
            if a != b and not interactions:
                continue
            if not np.any(R[:, a] * R[:, b]):
                continue
            cols.append(X[:, a] * X[:, b])
            out.append(f"{names[a]}²" if a == b else f"{names[a]}·{names[b]}")
    matrix = np.column_stack(cols) if cols else np.zeros((X.shape[0], 0))
    return matrix, tuple(out)


def nonlinear_balance(X: Any, before: Any, after: Any, target: Any, names: Sequence[str] | None = None, *,
                      threshold: float = ASMD_THRESHOLD, squares: bool = True,
                      interactions: bool = True) -> BalanceReport:
    """:func:`balance_report` of the covariates and their squares and pairwise products.

    The terms come from :func:`nonlinear_terms` (decided on ``target``); the report's
    ``imbalanced`` lists every covariate or term whose ASMD after weighting is above
    ``threshold`` (default 0.1).
    """
    X = as_matrix(X, "X")
    T = as_matrix(target, "target")
    if T.shape[1] != X.shape[1]:
        raise ShapeError(f"target: has {T.shape[1]} columns, X has {X.shape[1]}")
    names = tuple(names) if names is not None else tuple(f"x{j}" for j in range(X.shape[1]))
    if not threshold > 0:
        raise ShapeError(f"threshold: is {threshold}, expected > 0")
    terms_x, term_names = nonlinear_terms(X, names, squares=squares, interactions=interactions, reference=T)
    terms_t, _ = nonlinear_terms(T, names, squares=squares, interactions=interactions, reference=T)
    report = balance_report(np.hstack([X, terms_x]), before, after, np.hstack([T, terms_t]),
                            names=names + term_names)
    return BalanceReport(report.names, report.before, report.after, float(threshold))


def trim_weights(w: Any, *, quantile: float | None = None, max_ratio: float | None = None,
                 max_iter: int = 100) -> np.ndarray:
    """Cap weights and rescale to the original total.

    ``quantile=q`` caps at the ``q``-quantile of ``w`` (e.g. 0.99); ``max_ratio=m`` caps at
    ``m × mean(w)`` and iterates (cap, rescale) until every weight is within ``m × mean``.
    Exactly one of the two must be given. Returns a new array; ``Σ`` is preserved.
    """
    w = _weights(w)
    if (quantile is None) == (max_ratio is None):
        raise ShapeError("trim_weights: give exactly one of quantile and max_ratio")
    total = w.sum()
    if quantile is not None:
        if not 0 < quantile <= 1:
            raise ShapeError(f"quantile: is {quantile}, expected in (0, 1]")
        out = np.minimum(w, np.quantile(w, quantile))
        return out * (total / out.sum())
    if not max_ratio > 1:
        raise ShapeError(f"max_ratio: is {max_ratio}, expected > 1 (a cap at the mean or below flattens all weights)")
    out = w.copy()
    for _ in range(max_iter):
        cap = max_ratio * out.mean()
        if out.max() <= cap * (1 + 1e-12):
            break
        out = np.minimum(out, cap)
        out *= total / out.sum()
    return out
