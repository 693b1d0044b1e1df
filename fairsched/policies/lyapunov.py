"""Lyapunov drift-plus-penalty (Neely 2010; RBCS-F, Huang et al. 2020): ``docs/mathematics.md`` §9.

Each worker has a virtual queue ``Q_u`` of unmet fairness. Every round

    S_t ∈ argmax_{|S| <= k}  V·f(S)/f_scale + Σ_{u ∈ S} Q_u        (greedy, (1 − 1/e))
    Q_u ← max(Q_u + r_u − 1[u ∈ S_t], 0)

``f_scale`` is the value of the greedy set, so ``V`` is dimensionless and means the same on
every utility. A larger ``V`` shrinks the utility gap like ``O(1/V)`` and lets the queues
(and the debts) grow like ``O(V)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from fairsched.submodular.greedy import greedy_complete
from fairsched.policies.base import Policy, number_param
from fairsched.utilities.base import SetFunction


class _Penalised(SetFunction):
    """``V·f(S)/f_scale + Σ_{u∈S} Q_u``: monotone submodular plus modular, for greedy."""

    kind = "lyapunov-score"

    def __init__(self, utility: SetFunction, weight: float, queues: np.ndarray):
        self.utility, self.weight, self.queues, self.n = utility, weight, queues, utility.n

    def values(self, masks: np.ndarray) -> np.ndarray:
        return self.weight * self.utility.values(masks) + masks @ self.queues

    def gains(self, S: Any) -> np.ndarray:
        out = self.weight * self.utility.gains(S) + self.queues
        out[np.asarray(S, dtype=np.int64)] = 0.0
        return out

    def to_config(self) -> dict[str, Any]:
        raise TypeError("a Lyapunov score is internal to the policy")


class Lyapunov(Policy):
    """Drift-plus-penalty with virtual fairness queues (see the module docstring)."""

    name = "lyapunov"

    def __init__(self, V: float = 10.0) -> None:
        super().__init__()
        self.V = number_param(self.name, "V", V, low=0.0, low_open=True)

    def params(self) -> dict[str, Any]:
        return {"V": self.V}

    def _prepare(self) -> None:
        utility = self.problem.utility
        scale = utility.value(greedy_complete(utility, self.problem.k))
        self.queues = np.zeros(self.problem.n)
        self.max_queue = 0.0
        self._score = _Penalised(utility, self.V / scale if scale > 0 else self.V, self.queues)

    def _select(self, available: np.ndarray) -> np.ndarray:
        return greedy_complete(self._score, self.problem.k, candidates=None if available.all() else available)

    def observe(self, selected: np.ndarray) -> None:
        super().observe(selected)
        self.queues += self.problem.r
        self.queues[selected] -= 1.0
        np.maximum(self.queues, 0.0, out=self.queues)
        self.max_queue = max(self.max_queue, float(self.queues.max()))

    def forgive(self, workers: np.ndarray) -> None:
        super().forgive(workers)
        self.queues[workers] = 0.0

    def _extra_state(self) -> dict[str, Any]:
        return {"queues": self.queues.tolist(), "max_queue": self.max_queue}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self.queues[:] = np.asarray(state["queues"], dtype=float)
        self.max_queue = float(state["max_queue"])

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        return {"V": self.V, "max_queue": self.max_queue}
