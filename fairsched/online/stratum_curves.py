"""Learning the per-stratum curves of the propensity-weighted accuracy from set-level rewards.

The propensity-weighted accuracy (:class:`~fairsched.utilities.PropensityWeightedAccuracy`)
is ``f(S) = Σ_j π_j·[(1 − a_j) − b_j·m_j(S)^{c_j}]`` with known shares ``π_j``, transfer ``τ``
and effective sizes ``m_j(S)`` (the workers' data per stratum), and unknown curves. The
intercepts enter only through ``A = Σ_j π_j·a_j``, so the learner fits ``A`` and, per
stratum, ``(b_j, c_j)`` by nonlinear least squares (``scipy.optimize.least_squares``) on the
rounds grouped by their vector ``m(S)``, refitted when the rounds double, with the weak priors
of :mod:`fairsched.online.accuracy_curve` on every ``c_j`` and ``log b'_j`` (weighted by the
pure-error noise, so none without noise); also refitted the first time there are more
distinct size vectors than parameters. It reports ``a_j = A`` for every stratum (any split
of ``A`` gives the same ``f``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.feedback import Feedback
from fairsched.online.accuracy_curve import (
    B_PRIOR,
    B_PRIOR_SD,
    C_PRIOR,
    C_PRIOR_SD,
    C_RANGE,
    PRIOR,
)
from fairsched.online.groups import RewardGroups
from fairsched.online.learner import Learner
from fairsched.utilities import PropensityWeightedAccuracy


class StratumCurvesLearner(Learner):
    """Learner of the per-stratum curves of a propensity-weighted accuracy (module docstring)."""

    name = "stratum-curves"

    def __init__(self, template: PropensityWeightedAccuracy) -> None:
        if not isinstance(template, PropensityWeightedAccuracy):
            raise TypeError(f"the stratum-curves learner needs a propensity-accuracy utility, got {template.kind!r}")
        super().__init__(template)
        self.J = int(template.shares.size)
        self.intercept = PRIOR[0]
        self.b = np.full(self.J, PRIOR[1])
        self.c = np.full(self.J, PRIOR[2])
        self._groups = RewardGroups(self.J)  # by the effective sizes m(S)
        self._next_fit = 1

    def _update(self, served: np.ndarray, feedback: Feedback) -> None:
        if feedback.reward is None or served.size == 0:
            return
        m = tuple(float(x) for x in self.template.effective[served].sum(axis=0))
        if self._groups.add(m, feedback.reward) and len(self._groups) == 2 + 2 * self.J:  # the first round the curves are identifiable
            self.fit()
        if self.rounds >= self._next_fit:
            self._next_fit *= 2
            self.fit()

    def fit(self) -> None:
        """Refit on every round seen (needs more distinct size vectors than parameters)."""
        J = self.J
        if not self.identified():
            return
        from scipy.optimize import least_squares

        m, counts, means = self._groups.arrays()
        weights = np.sqrt(counts)
        scale = m.max(axis=0)
        shares = np.asarray(self.template.shares, dtype=float)
        prior = self._groups.pure_error_sd()

        def residuals(x: np.ndarray) -> np.ndarray:
            A, log_b, c = x[0], x[1: 1 + J], x[1 + J:]
            curve = (1.0 - A) - (shares * np.exp(log_b) * (m / scale) ** c).sum(axis=1)
            return np.concatenate([weights * (curve - means), prior * (c - C_PRIOR) / C_PRIOR_SD,
                                   prior * (log_b - B_PRIOR) / B_PRIOR_SD])

        start = np.concatenate([[self.intercept], np.log(np.maximum(self.b * scale ** self.c, 1e-300)), self.c])
        low = np.concatenate([[-np.inf], np.full(J, -50.0), np.full(J, C_RANGE[0])])
        high = np.concatenate([[np.inf], np.full(J, 50.0), np.full(J, C_RANGE[1])])
        fit = least_squares(residuals, np.clip(start, low, high), bounds=(low, high), x_scale="jac",
                            xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=5000)
        self.intercept = float(fit.x[0])
        self.c = fit.x[1 + J:].copy()
        self.b = np.exp(fit.x[1: 1 + J]) * scale ** (-self.c)

    def identified(self) -> bool:
        """Whether the rounds seen can identify the curves: more distinct size vectors than
        the ``1 + 2J`` parameters."""
        return len(self._groups) > 1 + 2 * self.J

    def optimistic(self) -> PropensityWeightedAccuracy:
        """The estimate once :meth:`identified`; before, exponents ``c_j`` drawn from the weak
        prior ``N(C_PRIOR, C_PRIOR_SD)`` (clipped to ``C_RANGE``, seeded by the rounds seen).

        The floors try every worker, but not every set: a plan of the prior alone may play
        fewer distinct size vectors than there are parameters, and then the curves are never
        fitted and the plan never changes (on a 12-worker, 3-stratum instance, 5 distinct
        vectors in 4,000 rounds of lp-sequenced). Each re-plan on other exponents weighs
        the strata differently and plays other sets, until the curves are identified."""
        if self.identified():
            return self.estimate()
        rng = np.random.default_rng(self.rounds)
        return self._utility(np.clip(rng.normal(C_PRIOR, C_PRIOR_SD, self.J), *C_RANGE))

    def estimate(self) -> PropensityWeightedAccuracy:
        return self._utility(self.c)

    def _utility(self, c: np.ndarray) -> PropensityWeightedAccuracy:
        """The template with the fitted intercept and ``b`` and the exponents ``c``."""
        t = self.template
        return PropensityWeightedAccuracy(t.sizes, t.shares, t.transfer, a=np.full(self.J, self.intercept),
                                          b=self.b, c=c)

    def parameters(self) -> dict[str, Any]:
        return {"a": [self.intercept] * self.J, "b": self.b.tolist(), "c": self.c.tolist(),
                "intercept": self.intercept, "distinct_size_vectors": len(self._groups)}

    def _extra_state(self) -> dict[str, Any]:
        return {"intercept": self.intercept, "b": self.b.tolist(), "c": self.c.tolist(),
                "groups": self._groups.state(), "next_fit": self._next_fit}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.intercept = float(state["intercept"])
        self.b, self.c = np.asarray(state["b"], dtype=float), np.asarray(state["c"], dtype=float)
        self._groups.load(state["groups"])
        self._next_fit = int(state["next_fit"])
