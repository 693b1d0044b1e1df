"""The result of :func:`fairsched.optimum`: value, certified bound, distribution and prices."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fairsched.problem import Problem
from fairsched.results import Result
from fairsched.solvers.colgen import relative_gap


@dataclass(frozen=True)
class Optimum(Result):
    """The LP optimum: value, certified bound, the optimal distribution and the fairness prices.

    ``value`` is attained by the returned distribution (``support``, ``probabilities``);
    ``upper_bound`` is certified (LP duality for enumeration, the Lagrangian bound for
    column generation), so ``U_opt ∈ [value, upper_bound]``. ``gap`` is the **relative**
    gap ``(upper_bound − value) / max(|value|, 1e-12)``, as everywhere in fairsched (the
    ``gap`` argument of :func:`optimum` and ``--gap`` mean the same), and ``absolute_gap``
    the difference ``upper_bound − value``. ``fairness_price`` is λ, the utility lost per
    unit of ``r_u``. ``columns`` counts the k-sets the LP saw (all of them for enumeration,
    the generated pool otherwise); ``iterations`` the column-generation iterations
    (``None`` for enumeration). ``status`` is ``"optimal"`` or why column generation
    stopped early (``"time-limit"``, ``"iteration-limit"``, ``"converged"`` with a
    heuristic pricing); ``success`` is true exactly when it is ``"optimal"``.
    """

    value: float
    upper_bound: float
    method: str
    support: list[np.ndarray]
    probabilities: np.ndarray
    fairness_price: np.ndarray
    columns: int
    iterations: int | None = None

    @property
    def gap(self) -> float:
        """Relative gap ``(upper_bound − value) / max(|value|, 1e-12)`` (0 for an exact solve)."""
        return relative_gap(self.value, self.upper_bound)

    @property
    def relative_gap(self) -> float:
        """The same as :attr:`gap` (the name of fairsched 0.1, where ``gap`` was absolute)."""
        return self.gap

    @property
    def absolute_gap(self) -> float:
        """``upper_bound − value``, at least 0."""
        return max(0.0, self.upper_bound - self.value)

    def as_dict(self, problem: Problem) -> dict[str, Any]:
        """The JSON object of ``fairsched optimum --json`` (without the ``instance`` key).

        ``relative_gap`` repeats ``gap`` for readers of fairsched 0.1, where ``gap`` was absolute.
        """
        ids = problem.ids
        return {
            "n": problem.n,
            "k": problem.k,
            "value": self.value,
            "upper_bound": self.upper_bound,
            "gap": self.gap,
            "absolute_gap": self.absolute_gap,
            "relative_gap": self.gap,
            "iterations": self.iterations,
            "method": self.method,
            "status": self.status,
            "success": self.success,
            "message": self.message,
            "support": [
                {"set": [ids[i] for i in S], "probability": float(p)}
                for S, p in zip(self.support, self.probabilities)
            ],
            "fairness_price": {w: float(v) for w, v in zip(ids, self.fairness_price)},
            "seconds": self.seconds,
        }
