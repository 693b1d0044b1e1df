"""Learning the accuracy curve ``f(S) = (1 − a) − b·L(S)^c`` from set-level rewards.

The accuracy utility of Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A
Multi-Round Submodular Maximization Approach" (2021) is a concave increasing function of the
data size ``L(S) = Σ_{u∈S} L_u`` of the selected workers; the server knows the sizes (each
reply's ``num-examples``) but not ``(a, b, c)``. Each round gives a reward
``y_t = f(S_t) + ε_t``. The learner fits ``θ = (a, b, c)`` by nonlinear least squares
(``scipy.optimize.least_squares``, trust-region reflective, ``b > 0``, ``c < 0``) on the
rounds grouped by their size ``L`` (``n_L`` rounds with mean reward ``ȳ_L`` weigh
``n_L·(ȳ_L − f_θ(L))²``, the same objective as the ungrouped sum up to a constant, so the
state stays small), refitted when the number of rounds doubles. The covariance is
``σ̂²·(JᵀJ)⁻¹`` at the fit, ``σ̂²`` the residual variance over all rounds.

**Weak priors.** Rewards from the narrow range of sizes that ``k``-sets span barely tell
``(b, c)`` apart (a curve ``b·L^c`` is nearly ``b − b·c·log L`` there), and when the noise
hides the slope a least-squares fit goes to ``b = 0``, a flat curve with which the LP is
indifferent between every distribution meeting the floors (measured on the paper instance:
plans worth 0.9978 of ``U_opt``, against 1.0000 for any ``b > 0`` and ``c`` in ``[−1, 0)``).
The fit is therefore the posterior mode under ``c ~ N(C_PRIOR, C_PRIOR_SD²)`` and
``log b' ~ N(B_PRIOR, B_PRIOR_SD²)`` (``b' = b·L_max^c``, the curve's drop at the largest
size seen): the residuals get the terms ``σ̂_pure·(c − C_PRIOR)/C_PRIOR_SD`` and
``σ̂_pure·(log b' − B_PRIOR)/B_PRIOR_SD``, with ``σ̂_pure²`` the pure-error variance of the
rounds that repeated a size. With noiseless rewards ``σ̂_pure = 0`` and the fit is plain
least squares (exact recovery); with noise each prior weighs as one observation would.

Planning uses the point estimate: ``f_θ`` is increasing in ``L`` for every ``θ`` with
``b > 0, c < 0``, so every greedy step (FairDG's completion) takes the largest sizes whatever
``θ`` is, and only the LP's mixing depends on the curvature; the floors give the variety of
sizes that identifies ``θ`` (at least three distinct sizes are needed).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fairsched.feedback import Feedback
from fairsched.online.groups import RewardGroups
from fairsched.online.learner import Learner
from fairsched.utilities.accuracy import AccuracyUtility

#: the curve assumed before the first fit: a flat prior, not the truth of any instance
PRIOR = (0.0, 1.0, -0.5)
#: the exponents ``c`` the fit may take: learning curves of accuracy against data size have
#: exponents of about −0.05 to −1; a bound away from 0 keeps a noisy fit from the degenerate
#: ``b → ∞, c → 0`` direction (a nearly logarithmic curve of any scale), where the
#: rewards of a narrow range of sizes cannot tell the curves apart
C_RANGE = (-3.0, -0.01)
#: the weak priors on the exponent and on ``log b'`` (see the module docstring)
C_PRIOR, C_PRIOR_SD = -0.5, 0.5
B_PRIOR, B_PRIOR_SD = math.log(0.1), 3.0


class AccuracyCurveLearner(Learner):
    """Learner of ``(a, b, c)`` of the accuracy curve (see the module docstring).

    ``template`` gives the sizes ``L_u``; a reported ``num-examples`` metric replaces a
    worker's size.
    """

    name = "accuracy-curve"

    def __init__(self, template: AccuracyUtility) -> None:
        if not isinstance(template, AccuracyUtility):
            raise TypeError(f"the accuracy-curve learner needs an accuracy utility, got {template.kind!r}")
        super().__init__(template)
        self.sizes = np.asarray(template.sizes, dtype=float).copy()
        self.theta = np.array(PRIOR, dtype=float)
        self.covariance: np.ndarray | None = None
        self._groups = RewardGroups(1)  # by the size L(S)
        self._next_fit = 1

    def _update(self, served: np.ndarray, feedback: Feedback) -> None:
        workers, examples = feedback.metric("num-examples")
        if workers.size:
            self.sizes[workers] = np.maximum(examples, 1e-12)
        if feedback.reward is None or served.size == 0:
            return
        self._groups.add((float(self.sizes[served].sum()),), feedback.reward)
        if self.rounds >= self._next_fit:
            self._next_fit *= 2
            self.fit()

    def fit(self) -> None:
        """Refit ``θ`` on every round seen (needs three distinct sizes)."""
        if len(self._groups) < 3:
            return
        from scipy.optimize import least_squares

        keys, counts, means = self._groups.arrays()
        sizes = keys[:, 0]
        weights = np.sqrt(counts)
        scale = float(sizes.max())
        within = self._groups.within()
        prior = self._groups.pure_error_sd()

        def residuals(x: np.ndarray) -> np.ndarray:
            a, log_b, c = x
            curve = (1.0 - a) - np.exp(log_b) * (sizes / scale) ** c
            return np.concatenate([weights * (curve - means),
                                   [prior * (c - C_PRIOR) / C_PRIOR_SD, prior * (log_b - B_PRIOR) / B_PRIOR_SD]])

        # Fitted in x = (a, log b', c) with b' = b·scale^c the drop at the largest size seen:
        # sizes scaled to at most 1 keep b' and c apart, and log b' keeps b > 0.
        a, b, c = self.theta
        start = np.array([a, math.log(max(b * scale ** c, 1e-300)), c])
        fit = least_squares(residuals, start, bounds=([-np.inf, -50.0, C_RANGE[0]], [np.inf, 50.0, C_RANGE[1]]),
                            x_scale="jac", xtol=1e-15, ftol=1e-15, gtol=1e-15, max_nfev=2000)
        a, log_b, c = fit.x
        b = math.exp(log_b) * scale ** (-c)
        self.theta = np.array([a, b, c])
        total = float(counts.sum())
        data = fit.fun[: sizes.size]
        sigma2 = max(0.0, within + float(data @ data)) / max(1.0, total - 3)
        jac = fit.jac[: sizes.size]
        # delta method from x to θ = (a, b, c): b = exp(log b')·scale^(−c)
        to_theta = np.array([[1.0, 0.0, 0.0], [0.0, b, -b * math.log(scale)], [0.0, 0.0, 1.0]])
        try:
            self.covariance = to_theta @ (sigma2 * np.linalg.inv(jac.T @ jac)) @ to_theta.T
        except np.linalg.LinAlgError:
            self.covariance = None

    def estimate(self) -> AccuracyUtility:
        a, b, c = self.theta
        return AccuracyUtility(self.sizes, a=float(a), b=float(b), c=float(c))

    def parameters(self) -> dict[str, Any]:
        se = None if self.covariance is None else np.sqrt(np.clip(np.diag(self.covariance), 0, None)).tolist()
        return {"a": float(self.theta[0]), "b": float(self.theta[1]), "c": float(self.theta[2]),
                "standard_errors": se, "distinct_sizes": len(self._groups)}

    def _extra_state(self) -> dict[str, Any]:
        return {"sizes": self.sizes.tolist(), "theta": self.theta.tolist(),
                "covariance": None if self.covariance is None else self.covariance.tolist(),
                "groups": self._groups.state(), "next_fit": self._next_fit}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.sizes = np.asarray(state["sizes"], dtype=float)
        self.theta = np.asarray(state["theta"], dtype=float)
        self.covariance = None if state["covariance"] is None else np.asarray(state["covariance"], dtype=float)
        self._groups.load(state["groups"])
        self._next_fit = int(state["next_fit"])
