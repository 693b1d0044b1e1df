"""The best period of a schedule with debt < 1, played by lp-sequenced where it is computable.

When the floors are rational with ``Σ_u r_u = k`` exactly, every schedule with debt ``< 1``
is back at its starting counts after each period ``P = lcm(denominators)`` (``N_u(jP) =
j·r_u·P``), and :func:`fairsched.policies.best_schedule.best_schedule` finds the best such
period exactly. There deficit sequencing of the LP optimum can lose utility (the LP's
probabilities need not fit a period, and the feasibility guard then overrides the plan), so
lp-sequenced plays the best period instead whenever the search fits its budget: with
everyone available, from any round ``t`` with ``t ≡ 1 (mod P)`` whose counts are exactly
``r·(t − 1)``, it plays the period's sets in order. A round with someone unavailable, a
departure, a forgiven debt or a new plan leaves the period; it is re-entered at the next
period boundary where the counts are back on it.

Eligible problems: no caps, ``n <= MAX_N``, ``C(n, k) <= MAX_SETS``, ``P <= MAX_PERIOD``;
the search keeps at most ``max_states`` states (deterministic work, not time, so every
machine makes the same decisions). The period is computed once per plan and kept in the
policy's state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from fairsched.errors import FairschedError, TooLargeError
from fairsched.policies.best_schedule import MAX_N, best_schedule, rational_floors
from fairsched.problem import Problem

#: the largest ``C(n, k)`` the search enumerates
MAX_SETS = 10_000
#: the longest period searched
MAX_PERIOD = 720


def period_floors(problem: Problem) -> tuple[int, np.ndarray] | None:
    """``(P, r·P)`` when ``problem`` is eligible for an exact period (see the module docstring), else ``None``."""
    n, k = problem.n, problem.k
    if problem.caps is not None or n > MAX_N or math.comb(n, k) > MAX_SETS:
        return None
    try:
        floors = rational_floors(problem.r)
    except FairschedError:
        return None
    if sum(floors) != k:
        return None
    P = math.lcm(*[f.denominator for f in floors])
    if P > MAX_PERIOD:
        return None
    return P, np.array([f.numerator * (P // f.denominator) for f in floors], dtype=np.int64)


def search_period(problem: Problem, prices: np.ndarray | None, incumbent: Callable[[int], list[np.ndarray] | None],
                  max_states: int) -> list[np.ndarray] | None:
    """The best period's sets, or ``None`` when the problem is not eligible, the search
    exceeds ``max_states``, or the period is worth no more than ``incumbent(P)`` (the
    schedule the policy would play anyway, which also prunes the search)."""
    eligible = period_floors(problem)
    if eligible is None or max_states <= 0:
        return None
    P, _ = eligible
    known = incumbent(P)
    lam = np.zeros(problem.n) if prices is None else np.asarray(prices, dtype=float)
    try:
        best = best_schedule(problem, lam, incumbent=known, max_states=max_states)
    except TooLargeError:
        return None
    except FairschedError:  # the incumbent broke a floor or did not close the period: search unpruned
        known = None
        try:
            best = best_schedule(problem, lam, max_states=max_states)
        except FairschedError:  # TooLargeError included: the budget ran out
            return None
    if known is not None:
        chosen = np.zeros((P, problem.n), dtype=bool)
        for t, S in enumerate(known):
            chosen[t, S] = True
        if best.value <= float(problem.utility.values(chosen).mean()) + 1e-12 * max(1.0, abs(best.value)):
            return None
    return [np.asarray(S, dtype=np.int64) for S in best.sets]


class ExactPeriod:
    """A period being played: its sets, ``r·P`` and whether the counts are on it."""

    def __init__(self, sets: list[np.ndarray], per_period: np.ndarray) -> None:
        self.sets = [np.sort(np.asarray(S, dtype=np.int64)) for S in sets]
        self.per_period = np.asarray(per_period, dtype=np.int64)
        self.on = False
        self.rounds = 0  # rounds played from the period

    @property
    def length(self) -> int:
        return len(self.sets)

    def set_for(self, t: int, counts: np.ndarray) -> np.ndarray | None:
        """The period's set for round ``t`` (everyone available), or ``None`` when off the period."""
        phase = (t - 1) % self.length
        if phase == 0:
            self.on = bool(np.array_equal(counts, self.per_period * ((t - 1) // self.length)))
        if not self.on:
            return None
        self.rounds += 1
        return self.sets[phase].copy()

    def leave(self) -> None:
        """Something else decided a round (or changed the counts): off the period until its next start."""
        self.on = False

    def state_dict(self) -> dict[str, Any]:
        return {"sets": [S.tolist() for S in self.sets], "per_period": self.per_period.tolist(), "on": self.on,
                "rounds": self.rounds}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> ExactPeriod:
        period = cls([np.asarray(S, dtype=np.int64) for S in state["sets"]], np.asarray(state["per_period"]))
        period.on, period.rounds = bool(state["on"]), int(state["rounds"])
        return period
