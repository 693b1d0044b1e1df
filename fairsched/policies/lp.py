"""Policies that play the LP optimum ``p*`` (``docs/mathematics.md`` §2 and §9): ``lp-random`` and ``lp-sequenced``.

``U_opt`` is reached by any schedule whose set frequencies converge to ``p*``. Drawing
``S_t ~ p*`` i.i.d. (``lp-random``) gets there in expectation but lets debts drift like
``√T``. ``lp-sequenced`` plays the support of ``p*`` deterministically:

1. **Margin** (optional, off by default: ``margin=0``). Solve the LP with floors ``r + ε``
   (capped at 1 and at ``Σ = k``), where ``ε`` is the largest value up to ``margin`` whose
   utility loss, measured by re-solving, is at most ``loss`` (relative). Every worker's expected rate then exceeds its floor by
   ``ε``, so debts drift downwards at rate ``ε``.
2. **Deficit sequencing.** Each round play the support set with the largest deficit
   ``p_S·t − c_S(t−1)`` (ties to the larger ``p_S``, then the lower index): set counts stay
   within a constant of ``p_S·t``, so the time-average utility is ``U_opt(r + ε) − O(1/T)``.
3. **Feasibility guard.** A set is played only if afterwards every future floor can still
   be met (:class:`DeadlineGuard`, a demand-bound test on the deadlines at which each
   worker's debt would reach 1). The deficit rule takes the safe set of largest deficit; if no
   support set is safe, the round takes the ``k`` workers with the earliest deadlines (EDF).

Guarantee: debt ``< 1`` in every round, as long as the guard's window covers the binding
horizon (it spans twice the longest gap ``1/r_u``, capped at 256, plus ``4⌈n/k⌉`` rounds;
property-tested);
utility ``U_opt(r + ε) − O(1/T)`` with ``U_opt(r + ε) >= (1 − loss)·U_opt`` by construction,
minus the rounds the guard overrides (reported as ``guarded_rounds``). Measured, not proved.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from fairsched.errors import PolicyError
from fairsched.lp import Optimum, optimum
from fairsched.problem import Problem
from fairsched.policies.base import DEBT_TOLERANCE, Policy, number_param
from fairsched.policies.batched import BatchedDraws

BATCH_ROUNDS = 8192
MAX_GAP = 256


def plan_for(problem: Problem, given: Optimum | None) -> Optimum:
    """The LP optimum an LP policy plays: ``given`` (checked against ``problem``) or a fresh solve.

    The plan is the LP without availability: the policies play full sets and let the
    runtime drop the unavailable members.
    """
    if given is None:
        return optimum(replace(problem, availability=None) if problem.availability is not None else problem)
    n, k = problem.n, problem.k
    if any(S.size > k or (S.size and (S.min() < 0 or S.max() >= n)) for S in given.support):
        raise PolicyError(f"the given optimum's sets do not fit this problem (n = {n}, k = {k})")
    marginal = _support_masks(given, n).T.astype(float) @ given.probabilities
    short = np.flatnonzero(marginal < problem.r - 1e-7)
    if short.size:
        u = int(short[0])
        raise PolicyError(f"the given optimum does not meet this problem's floors: worker {problem.ids[u]!r} "
                          f"gets {marginal[u]:.6g} < r = {problem.r[u]:.6g}")
    return given


def _support_masks(opt: Optimum, n: int) -> np.ndarray:
    masks = np.zeros((len(opt.support), n), dtype=bool)
    for j, S in enumerate(opt.support):
        masks[j, S] = True
    return masks


class LPRandom(Policy):
    """``S_t`` drawn i.i.d. from the LP optimum ``p*``: ``U_opt`` in expectation, debts ``~√T``."""

    name = "lp-random"
    uses_optimum = True

    def _prepare(self) -> None:
        self.optimum = plan_for(self.problem, self._given_optimum)
        self._sets = self.optimum.support
        p = self.optimum.probabilities / self.optimum.probabilities.sum()
        self._draws = BatchedDraws(lambda rng, size: rng.choice(len(self._sets), size=size, p=p), BATCH_ROUNDS)

    def _select(self, available: np.ndarray) -> np.ndarray:
        return self._sets[self._draws.take(self.rng)]

    def _extra_state(self) -> dict[str, Any]:
        return self._draws.state_dict()

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._draws.load_state_dict(state, self.rng)

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        return {"support_size": len(self._sets)}


class LPSequenced(Policy):
    """Deterministic deficit sequencing of ``p*`` with a fairness margin and a feasibility guard.

    Parameters
    ----------
    margin : float
        Largest extra floor ``ε`` tried (see the module docstring); 0 disables the margin.
    loss : float
        Largest relative utility loss ``1 − U_opt(r + ε)/U_opt`` the margin may cost.
    """

    name = "lp-sequenced"
    uses_optimum = True

    def __init__(self, margin: float = 0.0, loss: float = 2e-4) -> None:
        super().__init__()
        self.margin = number_param(self.name, "margin", margin, low=0.0, high=1.0)
        self.loss = number_param(self.name, "loss", loss, low=0.0, high=1.0, high_open=True)

    def params(self) -> dict[str, Any]:
        return {"margin": self.margin, "loss": self.loss}

    def _prepare(self) -> None:
        problem = self.problem
        exact = plan_for(problem, self._given_optimum)
        self.epsilon, self.optimum = self._with_margin(exact)
        self._sets = self.optimum.support
        self._masks = _support_masks(self.optimum, problem.n)
        self._p = self.optimum.probabilities / self.optimum.probabilities.sum()
        self._played = np.zeros(len(self._sets), dtype=np.int64)
        self._order = np.lexsort((np.arange(len(self._sets)), -self._p))
        self._guard = DeadlineGuard(problem.r, problem.k)
        self.guarded_rounds = 0

    def _with_margin(self, exact: Optimum) -> tuple[float, Optimum]:
        r, k = np.asarray(self.problem.r, dtype=float), self.problem.k
        room = (k - r.sum()) / r.size
        epsilon = min(self.margin, max(room, 0.0))
        while epsilon > 1e-6:
            raised = np.minimum(r + epsilon, 1.0)
            candidate = optimum(replace(self.problem.with_floors(raised), availability=None))
            if candidate.value >= (1 - self.loss) * exact.value:
                return epsilon, candidate
            epsilon /= 2
        return 0.0, exact

    def _select(self, available: np.ndarray) -> np.ndarray:
        t = self.t + 1
        deficit = self._p * t - self._played
        ranked = self._order[np.argsort(-deficit[self._order], kind="stable")]
        safe = self._guard.safe(self._masks[ranked[:1]], self.counts, t)
        if not safe[0]:
            safe = self._guard.safe(self._masks[ranked], self.counts, t)
            if not safe.any():
                self.guarded_rounds += 1
                return self._guard.earliest_deadlines(self.counts, t)
        best = ranked[int(np.argmax(safe))]
        self._played[best] += 1
        return self._sets[best]

    def _extra_state(self) -> dict[str, Any]:
        return {"played": self._played.tolist(), "guarded_rounds": self.guarded_rounds}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        if len(state["played"]) != len(self._sets):
            raise ValueError("state's LP support differs from this policy's; refusing to mix them")
        self._played = np.asarray(state["played"], dtype=np.int64)
        self.guarded_rounds = int(state["guarded_rounds"])

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        return {"margin_epsilon": self.epsilon, "support_size": len(self._sets),
                "guarded_rounds": self.guarded_rounds, "planned_value": self.optimum.value}


class DeadlineGuard:
    """Can every future floor still be met after this round's set? A demand-bound test.

    Worker ``u``, selected ``N_u`` times after round ``t``, must be selected for the
    ``(N_u + j)``-th time by round ``d_{u,j} = ceil((N_u + j)/r_u)`` (else its debt reaches 1).
    These are unit jobs on ``k`` machines, one job per worker per round, released at once; by
    the optimality of earliest-deadline-first for such jobs they can all be met iff for every
    horizon ``H > t`` at most ``k·(H − t)`` of them are due by ``H``, and none is overdue.
    The test checks the horizons ``t < H <= t + window``, with ``window`` twice the longest
    gap ``1/r_u`` (capped at 256 rounds) plus ``4⌈n/k⌉``.
    """

    def __init__(self, r: np.ndarray, k: int, window: int | None = None) -> None:
        self.r = np.asarray(r, dtype=float)
        self.k = k
        positive = self.r[self.r > 0]
        # A worker with a tiny floor has at most one job due in any short window, so very long
        # gaps are capped (in floating point: 1/r overflows an int for subnormal floors); the
        # cost per round is O(n·window).
        with np.errstate(over="ignore"):
            longest_gap = int(np.ceil(min(1.0 / positive.min(), MAX_GAP))) if positive.size else 1
        self.window = window or 2 * longest_gap + 4 * int(np.ceil(self.r.size / k))
        self.steps = np.arange(self.window + 1)

    def _due(self, counts: np.ndarray, t: int) -> np.ndarray:
        """``due[u, h] = max(0, ⌊r_u·(t + h)⌋ − N_u)``: jobs of ``u`` due by round ``t + h``."""
        required = np.floor(self.r[:, None] * (t + self.steps)[None, :] + DEBT_TOLERANCE)
        return np.maximum(required - counts[:, None], 0.0)

    def safe(self, masks: np.ndarray, counts: np.ndarray, t: int) -> np.ndarray:
        """For each candidate set (rows of ``masks``), whether playing it in round ``t`` is safe."""
        due_skip = self._due(counts, t)
        due_pick = self._due(counts + 1, t)
        demand = due_skip.sum(axis=0)[None, :] + masks @ (due_pick - due_skip)
        capacity = self.k * self.steps
        return (demand <= capacity[None, :]).all(axis=1)

    def earliest_deadlines(self, counts: np.ndarray, t: int) -> np.ndarray:
        """The ``k`` workers whose next selection is due soonest (EDF); ties to the lower index."""
        with np.errstate(divide="ignore"):
            deadline = np.where(self.r > 0, (counts + 1) / np.where(self.r > 0, self.r, 1.0), np.inf)
        order = np.lexsort((np.arange(self.r.size), deadline - t))
        return np.sort(order[: self.k])
