"""Learning the weights of a utility that is linear in known submodular features.

Coverage, facility location, concave-of-modular and modular utilities are all
``f_w(S) = Σ_j w_j φ_j(S)`` with known monotone submodular features ``φ_j`` and weights
``w_j >= 0`` (coverage: ``φ_e(S) = 1[e covered by S]``; facility location:
``φ_i(S) = max_{u∈S} sim[i, u]``; concave of modular: ``φ_j(S) = g(Σ_{u∈S} x_{ju})``;
modular: ``φ_u(S) = 1[u ∈ S]``). The structure (covers, similarities, features) is known, the
weights are not. With set-level rewards ``y_t = w·φ(S_t) + ε_t`` the learner keeps the ridge
regression ``V_t = ρI + Σ_s φ(S_s)φ(S_s)ᵀ``, ``ŵ_t = V_t⁻¹ Σ_s y_s φ(S_s)`` and the confidence
ellipsoid ``‖w − ŵ_t‖_{V_t} <= β_t`` of Abbasi-Yadkori, Pál and Szepesvári, "Improved
Algorithms for Linear Stochastic Bandits" (NeurIPS 2011), with
``β_t = σ̂·sqrt(d·log(1 + t·φ_max²/(ρd)) + 2·log(1/δ)) + sqrt(ρ)·‖ŵ_t‖``. As in Yue and
Guestrin, "Linear Submodular Bandits and their Application to Diversified Retrieval" (NeurIPS
2011), optimism keeps submodularity: the optimistic utility uses the per-weight upper
confidence ``w⁺_j = max(0, ŵ_j + β_t·sqrt((V_t⁻¹)_{jj}))``, which bounds every ``w_j`` inside
the ellipsoid, so ``f_{w⁺}(S) >= f_w(S)`` for every ``S`` (``φ >= 0``) and ``f_{w⁺}`` is a
utility of the same kind, planned with fairsched's own oracles. ``O(d²)`` per round.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from fairsched.feedback import Feedback
from fairsched.online.learner import Learner
from fairsched.utilities import (
    ConcaveModular,
    Coverage,
    FacilityLocation,
    Mixture,
    Modular,
)
from fairsched.utilities.base import SetFunction
from fairsched.utilities.concave_modular import CONCAVE

if TYPE_CHECKING:
    from fairsched.problem import Problem

#: ``confidence="auto"`` uses the set-level bound up to this many k-sets (it is priced by enumeration)
SET_UCB_LIMIT = 20_000
#: the default factor on the confidence radius (see :class:`LinearFeaturesLearner`)
EXPLORATION = 0.1


def feature_map(template: SetFunction) -> tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], SetFunction]]:
    """``(φ, build)``: ``φ(masks) -> (m, d)`` features of the sets, ``build(w)`` the utility ``f_w``.

    ``TypeError`` for a utility that is not linear in known features.
    """
    if type(template) is Coverage:
        incidence = np.asarray(template.sparse_incidence().toarray(), dtype=float)

        def phi(masks: np.ndarray) -> np.ndarray:
            return (masks.astype(float) @ incidence > 0).astype(float)

        return phi, lambda w: Coverage(template.covers, w, n=template.n)
    if type(template) is FacilityLocation:
        sim = np.asarray(template.similarity, dtype=float)

        def phi(masks: np.ndarray) -> np.ndarray:
            return np.stack([np.max(np.where(mask[None, :], sim, 0.0), axis=1) for mask in masks])

        return phi, lambda w: FacilityLocation(sim * np.asarray(w, dtype=float)[:, None])
    if type(template) is ConcaveModular:
        features, concave = np.asarray(template.features, dtype=float), template.concave

        def phi(masks: np.ndarray) -> np.ndarray:
            return CONCAVE[concave](masks.astype(float) @ features.T)

        def build(w: np.ndarray) -> SetFunction:
            w = np.asarray(w, dtype=float)
            if concave == "sqrt":  # w·sqrt(x) = sqrt(w²·x): the same kind, exact pricing
                return ConcaveModular(features * (w ** 2)[:, None], "sqrt")
            return Mixture([ConcaveModular(row[None, :], concave) for row in features], w)

        return phi, build
    if type(template) is Modular:
        return (lambda masks: masks.astype(float)), (lambda w: Modular(w))
    raise TypeError(f"the linear-features learner needs a coverage, facility-location, concave-modular or "
                    f"modular utility (linear in known features), got {template.kind!r}")


class LinearFeaturesLearner(Learner):
    """Ridge regression of the weights with optimistic (UCB) weights (see the module docstring).

    Parameters
    ----------
    ridge : float
        ``ρ``, the ridge penalty.
    delta : float
        The confidence level ``1 − δ``.
    confidence : {"auto", "set", "coordinate", "ellipsoid"}
        ``"set"``: the set-level bound ``ŵ·φ(S) + β_t·‖φ(S)‖_{V⁻¹}`` (:class:`SetUCB`, priced by
        enumeration); ``"coordinate"``: per-weight intervals ``ŵ_j ± β_t·sqrt((V⁻¹)_{jj})``, a
        utility of the template's kind (structured pricing at any size); with
        ``β_t = σ̂·sqrt(2·log(d·t²/δ)) + sqrt(ρ)·‖ŵ‖`` (a union bound over the weights and the
        rounds, exact for a fixed design), or for ``"ellipsoid"`` the OFUL radius above, valid
        for adaptive designs but ``sqrt(d)`` wider. ``"auto"``: ``"set"`` when
        ``C(n, k) <= SET_UCB_LIMIT`` (``k`` given), else ``"coordinate"``.
    exploration : float
        A factor on ``β_t``. The default 0.1 was chosen on the bundled coverage and
        facility-location instances (lp-sequenced, 20,000 rounds, noise 5% of ``U_opt``):
        with ``β_t`` itself the optimism costs 2-3% of ``U_opt`` per round there, with 0.1
        0.2-0.4% and the regret levels off (``docs/online.md``). It is a tuned constant.
    k : int, optional
        The round size, for ``confidence="auto"``.
    """

    name = "linear-features"

    def __init__(self, template: SetFunction, ridge: float = 1.0, delta: float = 0.05,
                 confidence: str = "auto", exploration: float = EXPLORATION, k: int | None = None) -> None:
        super().__init__(template)
        self.exploration = float(exploration)
        if confidence not in ("auto", "set", "coordinate", "ellipsoid"):
            raise ValueError(f"confidence must be 'auto', 'set', 'coordinate' or 'ellipsoid', got {confidence!r}")
        if confidence == "auto":
            small = k is not None and math.comb(self.n, k) <= SET_UCB_LIMIT
            confidence = "set" if small else "coordinate"
        self.confidence = confidence
        self._phi, self._build = feature_map(template)
        probe = self._phi(np.zeros((1, self.n), dtype=bool))
        self.d = int(probe.shape[1])
        self.ridge, self.delta = float(ridge), float(delta)
        self.gram = self.ridge * np.eye(self.d)
        self.moment = np.zeros(self.d)
        self.sum_y2 = 0.0
        self.observations = 0
        self.phi_max = float(self._phi(np.ones((1, self.n), dtype=bool)).max(initial=1.0))

    @classmethod
    def for_problem(cls, problem: Problem) -> LinearFeaturesLearner:
        """Sized for ``problem``'s ``k`` (which picks the confidence set, see ``confidence``)."""
        return cls(problem.utility, k=problem.k)

    def _update(self, served: np.ndarray, feedback: Feedback) -> None:
        if feedback.reward is None:
            return
        mask = np.zeros((1, self.n), dtype=bool)
        mask[0, served] = True
        phi = self._phi(mask)[0]
        self.gram += np.outer(phi, phi)
        self.moment += feedback.reward * phi
        self.sum_y2 += feedback.reward ** 2
        self.observations += 1

    def weights(self) -> np.ndarray:
        """The ridge estimate ``ŵ``."""
        return np.linalg.solve(self.gram, self.moment)

    def noise(self, w: np.ndarray | None = None) -> float:
        """``σ̂``, the residual standard deviation of the rewards (1 before ``d`` rounds)."""
        w = self.weights() if w is None else w
        t = self.observations
        rss = self.sum_y2 - 2 * float(w @ self.moment) + float(w @ (self.gram - self.ridge * np.eye(self.d)) @ w)
        return math.sqrt(max(rss, 0.0) / max(1, t - self.d)) if t > self.d else 1.0

    def radius(self, w: np.ndarray | None = None) -> float:
        """The multiplier ``β_t`` of the per-weight widths ``sqrt((V⁻¹)_{jj})`` (module docstring)."""
        w = self.weights() if w is None else w
        t = max(1, self.observations)
        sigma = self.noise(w)
        if self.confidence == "ellipsoid":  # OFUL's radius
            log_det = self.d * math.log(1 + t * self.phi_max ** 2 / (self.ridge * self.d))
            spread = math.sqrt(log_det + 2 * math.log(1 / self.delta))
        else:
            spread = math.sqrt(2 * math.log(self.d * t * t / self.delta))
        return self.exploration * (sigma * spread + math.sqrt(self.ridge) * float(np.linalg.norm(w)))

    def estimate(self) -> SetFunction:
        return self._build(np.clip(self.weights(), 0.0, None))

    def optimistic(self) -> SetFunction:
        w = self.weights()
        inverse = np.linalg.inv(self.gram)
        if self.confidence == "set":
            return SetUCB(self._phi, self.n, w, np.linalg.cholesky((inverse + inverse.T) / 2), self.radius(w))
        widths = np.sqrt(np.clip(np.diag(inverse), 0.0, None))
        return self._build(np.clip(w + self.radius(w) * widths, 0.0, None))

    def planned_from_config(self, config: dict[str, Any]) -> SetFunction:
        """The utility :meth:`optimistic` returned, from its ``to_config`` (for restored states)."""
        if config.get("kind") == SetUCB.kind:
            return SetUCB(self._phi, self.n, np.asarray(config["weights"]), np.asarray(config["factor"]),
                          float(config["beta"]))
        return super().planned_from_config(config)

    def parameters(self) -> dict[str, Any]:
        return {"weights": self.weights().tolist(), "radius": self.radius(), "noise": self.noise(),
                "features": self.d}

    def _extra_state(self) -> dict[str, Any]:
        return {"gram": self.gram.tolist(), "moment": self.moment.tolist(), "sum_y2": self.sum_y2,
                "observations": self.observations}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.gram = np.asarray(state["gram"], dtype=float)
        self.moment = np.asarray(state["moment"], dtype=float)
        self.sum_y2 = float(state["sum_y2"])
        self.observations = int(state["observations"])


class SetUCB(SetFunction):
    """The set-level upper confidence ``ŵ·φ(S) + β·‖φ(S)‖_{V⁻¹}`` (``V⁻¹ = C·Cᵀ``).

    It follows the confidence ellipsoid's correlations (a coordinate-wise bound does not: it
    adds every uncertain weight's width, even along directions the rewards pin down), but it
    is not submodular, so the LP prices it by enumeration: for small ``C(n, k)`` only.
    """

    kind = "linear-ucb"

    def __init__(self, phi: Callable[[np.ndarray], np.ndarray], n: int, weights: np.ndarray,
                 factor: np.ndarray, beta: float) -> None:
        self._phi, self.n = phi, int(n)
        self.weights, self.factor, self.beta = np.asarray(weights, float), np.asarray(factor, float), float(beta)

    @property
    def submodular(self) -> bool | None:
        return None

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = np.asarray(masks, dtype=bool).reshape(-1, self.n)
        features = self._phi(masks)
        out = features @ self.weights + self.beta * np.sqrt(((features @ self.factor) ** 2).sum(axis=1))
        out[~masks.any(axis=1)] = 0.0
        return out

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "weights": self.weights.tolist(), "factor": self.factor.tolist(),
                "beta": self.beta}
