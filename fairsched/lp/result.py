"""The result of :func:`fairsched.optimum`: value, certified bound, distribution and prices."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
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
    ``upper_bound`` is certified, so ``U_opt ∈ [value, upper_bound]``: it is the Lagrangian
    bound ``pricing_bound − λ·r`` at ``λ = fairness_price``, where ``pricing_bound`` is a
    certified upper bound on ``max_{|S|=k} f(S) + λ(S)`` (the maximum over every column for
    enumeration, the pricing oracle's bound for column generation), raised to ``value`` if
    round-off put it below.  Anyone can check it with an exact maximisation at
    ``fairness_price``.  ``upper_bound`` is ``inf`` (``null`` in JSON) when no pricing
    certified a bound.  ``gap`` is the **relative** gap ``(upper_bound − value) /
    max(|value|, 1e-12)``, as everywhere in fairsched (the ``gap`` argument of
    :func:`optimum` and ``--gap`` mean the same), and ``absolute_gap`` the difference
    ``upper_bound − value``.  ``support`` lists each set as its sorted worker indices (column
    generation's are read-only int32 views of one array, so a support of about ``n`` sets of
    ``k`` costs ``4·n·k`` bytes once).  From ``optimum(..., support=False)`` an optimum that
    column generation certified comes without its sets: ``support`` and ``probabilities``
    are empty, and ``value`` is what the distribution it found is worth.

    ``fairness_price`` is λ, the utility lost per unit of ``r_u`` (at a certified gap of 0,
    an optimal dual).  ``master_fairness_price`` holds the duals of the LP whose solution is
    the returned distribution (``None`` when that distribution is column generation's
    starting sample, never re-optimised): they satisfy complementary slackness with it, but
    their own Lagrangian bound may be weaker.  ``columns`` counts the k-sets the LP saw (all
    of them for enumeration, the generated pool otherwise); ``iterations`` the
    column-generation iterations, those on the aggregated masters of the floor groups and of
    the size groups included (``None`` for enumeration).

    With caps (``problem.caps``) the LP also has ``Σ_{S∋u} p_S <= c_u``: ``cap_price`` is ν,
    the utility gained per unit of ``c_u`` (``None`` without caps), the pricing maximises
    ``f(S) + λ(S) − ν(S)`` and the bound is ``pricing_bound − λ·r + ν·c``.

    ``status`` is ``"optimal"`` exactly when the certified gap is at most the requested one
    (then ``success`` is true), otherwise why the computation stopped: ``"time-limit"``,
    ``"iteration-limit"``, ``"tailing-off"`` (the gap stopped shrinking) or ``"stalled"`` (no
    column prices out, or the LP solver's tolerances, leave the gap above the requested one;
    for instance with a heuristic pricing).
    """

    value: float
    upper_bound: float
    method: str
    support: list[np.ndarray]
    probabilities: np.ndarray
    fairness_price: np.ndarray
    columns: int
    iterations: int | None = None
    pricing_bound: float | None = None
    master_fairness_price: np.ndarray | None = None
    cap_price: np.ndarray | None = None

    @property
    def gap(self) -> float:
        """Relative gap ``(upper_bound − value) / max(|value|, 1e-12)`` (``inf`` without a bound)."""
        return relative_gap(self.value, self.upper_bound)

    @property
    def relative_gap(self) -> float:
        """The same as :attr:`gap` (the name of fairsched 0.1, where ``gap`` was absolute)."""
        return self.gap

    @property
    def absolute_gap(self) -> float:
        """``upper_bound − value``, at least 0."""
        return max(0.0, self.upper_bound - self.value)

    def as_dict(self, problem: Problem, *, streamed_support: bool = False) -> dict[str, Any]:
        """The JSON object of ``fairsched optimum --json`` (without the ``instance`` key).

        ``upper_bound``, ``gap`` and ``absolute_gap`` are certified, and ``None`` (JSON
        ``null``) when no bound was certified; ``relative_gap`` repeats ``gap`` for readers of
        fairsched 0.1, where ``gap`` was absolute.  With ``streamed_support``, ``support`` is
        :meth:`support_json`'s iterator over each record's JSON text instead of the list, whose
        Python objects cost 8 bytes per id at least (the command line writes it so).
        """
        data: dict[str, Any] = {
            "n": problem.n,
            "k": problem.k,
            "value": self.value,
            "upper_bound": _finite_or_none(self.upper_bound),
            "gap": _finite_or_none(self.gap),
            "absolute_gap": _finite_or_none(self.absolute_gap),
            "relative_gap": _finite_or_none(self.gap),
            "iterations": self.iterations,
            "method": self.method,
            "status": self.status,
            "success": self.success,
            "message": self.message,
        }
        if streamed_support:
            data["support"] = self.support_json(problem)
        else:
            ids = np.asarray(problem.ids, dtype=object)  # fancy indexing: n·k ids at scale
            data["support"] = [{"set": ids[S].tolist(), "probability": float(p)}
                               for S, p in zip(self.support, self.probabilities)]
        data["fairness_price"] = dict(zip(problem.ids, np.asarray(self.fairness_price, dtype=float).tolist()))
        if self.cap_price is not None:
            data["cap_price"] = dict(zip(problem.ids, np.asarray(self.cap_price, dtype=float).tolist()))
        data["seconds"] = self.seconds
        return data

    def support_json(self, problem: Problem) -> Iterator[str]:
        """The JSON text of each ``support`` record ``{"set": [ids], "probability": p}``, one
        at a time, as ``json.dumps`` writes it.

        At cross-device scale the support lists about ``n·k`` ids (``n = 200,000``,
        ``k = 1,000``: 2·10^8, a 1.7 GB JSON text); as Python lists, copied and encoded at
        once, they took 8.5 GB and 120 s of ``fairsched optimum --json``, so the command writes
        these records one by one instead.
        """
        quoted = np.array([json.dumps(worker) for worker in problem.ids], dtype=object)
        for S, p in zip(self.support, self.probabilities):
            yield f'{{"set": [{", ".join(quoted[S].tolist())}], "probability": {json.dumps(float(p))}}}'


def _finite_or_none(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None
