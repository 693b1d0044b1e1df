"""Policies that play the LP optimum ``p*`` (``docs/mathematics.md`` §2 and §9): ``lp-random`` and ``lp-sequenced``.

``U_opt`` is reached by any schedule whose set frequencies converge to ``p*`` (Li, Liu and
Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular Maximization
Approach", 2021, Problem (5)). The plan (support and probabilities of ``p*``) is computed
once, on the first round, and kept in the policy's state (:meth:`Policy.state_dict`), so a
restored policy plays it without solving the LP again.

Under availability the plan is the LP without availability, and a planned set is played
by :func:`fairsched.policies.refill.refill`: its available members are kept and each
missing one is replaced by the most urgent available worker (earliest deadline).

``lp-random`` draws ``S_t ~ p*`` i.i.d. and ``lp-sequenced`` plays the support of ``p*``
deterministically; see their docstrings for the guarantees and the availability
assumption under which each holds.
"""

from __future__ import annotations

import base64
import math
import zlib
from dataclasses import replace
from typing import Any

import numpy as np

from fairsched.errors import FairschedError, PolicyError
from fairsched.lp import Optimum, optimum
from fairsched.policies.base import DEBT_TOLERANCE, Policy, count_param, number_param
from fairsched.policies.exact_period import ExactPeriod, period_floors, search_period
from fairsched.policies.batched import BatchedDraws
from fairsched.policies.refill import (
    behind_by,
    flattened,
    most_urgent,
    refill,
    refill_many,
    serve_urgent,
    urgency_keys,
)
from fairsched.problem import Problem
from fairsched.solvers.columns import CHUNK_NNZ, chunk_ranges
from fairsched.utilities import AccuracyUtility

BATCH_ROUNDS = 8192
MAX_GAP = 256
#: support sets lp-sequenced offers the guard per round (ranked by deficit and deadline
#: pressure, ``LPSequenced._candidates``) before falling back to EDF
MAX_CANDIDATES = 64
#: weight ``β`` of a set's deadline pressure against its deficit in lp-sequenced's ranking of
#: the candidates (``LPSequenced._candidates``)
URGENCY_WEIGHT = 10.0
#: most sets ranked for the candidates: the top ``MAX_CANDIDATES`` by deficit and those tied
#: with the last of them (many are tied where the plan has many sets of equal probability)
RANKED_SETS = 4 * MAX_CANDIDATES
#: candidates (in ranking order) the guard's least override may swap urgent workers into
OVERRIDE_CANDIDATES = 8
#: most workers the least override swaps in, as a share of ``k``, on utilities whose members
#: complement each other; a round needing more plays EDF (no cap for the accuracy utility)
MAX_SWAP_SHARE = 0.25
#: a worker whose planned share ``Σ_{S∋u} p_S`` is within this of 1 is one the plan always plays
ALWAYS_PLANNED_TOLERANCE = 1e-6
#: further draws lp-random makes for a set whose members are all available
REDRAWS = 3
#: lp-random serves a worker first once its count is this many standard deviations behind
SAFETY_DEVIATIONS = 3.0
#: far beyond any run: the "deadline" of a worker without a floor
NEVER = 2**62
#: lp-sequenced's default budget for the exact-period search (states kept; about 1 s per 200,000)
PERIOD_STATES = 2_000_000
#: relative gap to which an LP policy's plan is certified by default, ``value >= (1 − gap)·U_opt``:
#: a hundredth of the 0.999 ratio the package aims at (the plans measured on accuracy data
#: nothing was tuned on were within 3.3e-6 of ``U_opt``), and two to hundreds of times
#: cheaper to reach than the yardstick's 1e-6 where column generation tails off (floors
#: above ``k/n``)
PLAN_GAP = 1e-5


def substitute_weights(utility: Any) -> np.ndarray | None:
    """Weights ``w`` if ``f(S) = g(Σ_{u∈S} w_u)`` with ``g`` concave increasing, else ``None``.

    Then the members of a set are substitutes up to their weight: removing ``u`` loses
    ``g(w(S)) − g(w(S) − w_u)``, which grows with ``w_u``, whatever else is in the set. The
    accuracy utility ``f(S) = (1 − a) − b·(Σ_{u∈S} sizes_u)^c`` (Li, Liu and Ji, "Federated
    Learning with Fair Worker Selection: A Multi-Round Submodular Maximization Approach") is
    the one such utility in the package.
    """
    return utility.sizes if isinstance(utility, AccuracyUtility) else None


def room_to_keep(workers: np.ndarray, r: np.ndarray, k: int) -> np.ndarray | None:
    """``workers`` if their ``a`` machines can be kept for them in every round: ``0 < a < k`` and
    the other floors fit on the other machines, ``Σ_{u ∉ workers} r_u <= k − a``; else ``None``."""
    if not 0 < workers.size < k:
        return None
    others = float(r.sum() - r[workers].sum())
    return workers if others <= k - workers.size + DEBT_TOLERANCE else None


def plan_for(problem: Problem, given: Optimum | None, gap: float = PLAN_GAP) -> Optimum:
    """The LP optimum an LP policy plays: ``given`` (checked against ``problem``) or a fresh
    solve certified to the relative ``gap`` (its value at least ``(1 − gap)·U_opt``).

    The plan is the LP without availability: under availability the policies refill the
    unavailable members of a planned set (:mod:`fairsched.policies.refill`).
    """
    if given is None:
        return optimum(replace(problem, availability=None) if problem.availability is not None else problem,
                       gap=gap)
    check_plan(problem, given.support, given.probabilities, "the given optimum")
    return given


def check_plan(problem: Problem, support: list[np.ndarray], probabilities: np.ndarray, what: str) -> None:
    """A :class:`PolicyError` unless the sets fit ``problem`` and their marginals meet its floors
    (and stay within its caps)."""
    n, k = problem.n, problem.k
    if len(support) != len(probabilities) or not len(support):
        raise PolicyError(f"{what} has {len(support)} sets and {len(probabilities)} probabilities")
    if any(S.size > k or (S.size and (S.min() < 0 or S.max() >= n)) for S in support):
        raise PolicyError(f"{what}'s sets do not fit this problem (n = {n}, k = {k})")
    marginal = _marginals(support, probabilities, n)
    short = np.flatnonzero(marginal < problem.r - 1e-7)
    if short.size:
        u = int(short[0])
        raise PolicyError(f"{what} does not meet this problem's floors: worker {problem.ids[u]!r} "
                          f"gets {marginal[u]:.6g} < r = {problem.r[u]:.6g}")
    if problem.caps is not None:
        over = np.flatnonzero(marginal > problem.caps + 1e-7)
        if over.size:
            u = int(over[0])
            raise PolicyError(f"{what} exceeds this problem's caps: worker {problem.ids[u]!r} "
                              f"gets {marginal[u]:.6g} > c = {problem.caps[u]:.6g}")


#: members per chunk of :func:`_marginals`
MARGINAL_CHUNK = CHUNK_NNZ


def _marginals(support: list[np.ndarray], probabilities: np.ndarray, n: int) -> np.ndarray:
    """``Σ_{S ∋ u} p_S`` for every worker, from the sparse sets (no ``(m, n)`` mask), in
    chunks of about :data:`MARGINAL_CHUNK` members: the whole support at once (its members,
    as int64, and a weight per member) took 1.9 GB at ``n = 100,000``, ``k = 1,000``."""
    sizes = np.fromiter((S.size for S in support), dtype=np.int64, count=len(support))
    indptr = np.concatenate([[0], np.cumsum(sizes)])
    p = np.asarray(probabilities, dtype=float) / float(np.sum(probabilities))
    marginal = np.zeros(n)
    for lo, hi in chunk_ranges(indptr, MARGINAL_CHUNK):
        marginal += np.bincount(np.concatenate(support[lo:hi]), weights=np.repeat(p[lo:hi], sizes[lo:hi]),
                                minlength=n)
    return marginal


def _sorted_members(members: Any) -> np.ndarray:
    """``members`` as a sorted integer array: itself where it already is one (the LP's
    support is read-only views of one array; int64 copies of it took 0.77 GB at
    ``n = 100,000``, ``k = 1,000``)."""
    members = np.asarray(members)
    if members.dtype.kind not in "iu":
        members = members.astype(np.int64)
    return members if bool((members[1:] > members[:-1]).all()) else np.sort(members)


def _pack(array: np.ndarray, dtype: str) -> str:
    return base64.b64encode(zlib.compress(np.ascontiguousarray(array, dtype=dtype).tobytes())).decode()


def _unpack(text: str, dtype: str) -> np.ndarray:
    return np.frombuffer(zlib.decompress(base64.b64decode(text.encode("ascii"), validate=True)), dtype=dtype)


def _finite(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else float(x)


def plan_state(opt: Optimum, epsilon: float) -> dict[str, Any]:
    """The plan as JSON: the sets (sizes and members, packed), probabilities bit for bit, and the bracket."""
    sizes = np.fromiter((S.size for S in opt.support), dtype=np.int64, count=len(opt.support))
    return {"epsilon": float(epsilon), "value": float(opt.value), "upper_bound": _finite(opt.upper_bound),
            "method": opt.method, "status": opt.status, "success": bool(opt.success), "message": opt.message,
            "columns": int(opt.columns), "iterations": opt.iterations,
            "pricing_bound": _finite(opt.pricing_bound),
            "sizes": _pack(sizes, "<i4"), "members": _pack(np.concatenate(opt.support), "<i4"),
            "probabilities": _pack(opt.probabilities, "<f8"), "fairness_price": _pack(opt.fairness_price, "<f8")}


def plan_from_state(state: dict[str, Any], problem: Problem) -> tuple[Optimum, float]:
    """:func:`plan_state`'s ``(optimum, epsilon)``, checked against ``problem`` (a :class:`ValueError` if damaged)."""
    try:
        sizes = _unpack(state["sizes"], "<i4").astype(np.int64)
        members = _unpack(state["members"], "<i4").astype(np.int64)
        probabilities = _unpack(state["probabilities"], "<f8").copy()
        price = _unpack(state["fairness_price"], "<f8").copy()
    except (KeyError, TypeError, ValueError, zlib.error) as exc:
        raise ValueError(f"the stored LP plan is damaged ({exc})") from None
    if sizes.sum() != members.size or (sizes < 0).any() or price.size != problem.n:
        raise ValueError("the stored LP plan is inconsistent")
    support = np.split(members, np.cumsum(sizes)[:-1])
    epsilon = float(state["epsilon"])
    try:
        floors = problem.with_floors(np.minimum(problem.r + epsilon, problem.upper)) if epsilon else problem
        check_plan(floors, support, probabilities, "the stored LP plan")
    except FairschedError as exc:
        raise ValueError(str(exc)) from None
    upper = state["upper_bound"]
    opt = Optimum(value=float(state["value"]), upper_bound=math.inf if upper is None else float(upper),
                  method=str(state["method"]), support=support, probabilities=probabilities, fairness_price=price,
                  columns=int(state["columns"]), iterations=state["iterations"],
                  pricing_bound=state["pricing_bound"], status=str(state["status"]),
                  success=bool(state["success"]), message=str(state["message"]), seconds=0.0)
    return opt, epsilon


class _Planned(Policy):
    """An LP policy: the plan is solved on the first round (or restored), never in :meth:`reset`.

    Parameters
    ----------
    gap : float
        Relative gap to which the plan is certified when the policy solves it (not when an
        optimum is handed to it): the plan's value is at least ``(1 − gap)·U_opt``.
        Default :data:`PLAN_GAP`.
    """

    uses_optimum = True

    def __init__(self, gap: float = PLAN_GAP) -> None:
        super().__init__()
        self.gap = number_param(self.name, "gap", gap, low=0.0, high=1.0, low_open=True, high_open=True)

    def params(self) -> dict[str, Any]:
        return {"gap": self.gap}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        params = state.get("params")
        if isinstance(params, dict) and "gap" not in params:
            # a state saved before the plan's gap was a parameter: its plan is restored as
            # stored, so the gap it was solved to does not matter
            state = {**state, "params": {**params, "gap": self.gap}}
        super().load_state_dict(state)

    def _prepare(self) -> None:
        self._plan: Optimum | None = None
        self._epsilon = 0.0
        given = self._given_optimum
        if given is not None:  # refused at once, not at the first round
            check_plan(self.problem, given.support, given.probabilities, "the given optimum")

    @property
    def optimum(self) -> Optimum:
        """The LP optimum played (solved now if no round was played yet)."""
        self.plan()
        return self._plan

    @property
    def epsilon(self) -> float:
        """The fairness margin the plan was solved with (0 without one)."""
        self.plan()
        return self._epsilon

    def plan(self) -> Optimum:
        """Solve the plan if not done yet, and return it."""
        if self._plan is None:
            self._epsilon, opt = self._solve(plan_for(self.problem, self._given_optimum, self.gap))
            self._install(opt)
        return self._plan

    def _solve(self, exact: Optimum) -> tuple[float, Optimum]:
        return 0.0, exact

    def _install(self, opt: Optimum) -> None:
        self._plan = opt
        self._sets = [_sorted_members(S) for S in opt.support]
        self._p = np.asarray(opt.probabilities, dtype=float) / float(np.sum(opt.probabilities))

    def _extra_state(self) -> dict[str, Any]:
        return {"plan": None if self._plan is None else plan_state(self._plan, self._epsilon)}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        stored = state.get("plan")
        if stored is None:
            self._plan = None
            if self.t:  # a state saved before plans were stored: solve again
                self.plan()
        else:
            opt, self._epsilon = plan_from_state(stored, self.problem)
            self._install(opt)

    def _debts(self) -> np.ndarray:
        return self.problem.r * (self.t + 1) - self.counts


class LPRandom(_Planned):
    """``S_t`` drawn i.i.d. from the LP optimum ``p*``: ``U_opt`` in expectation, debts ``~√T``.

    Under availability ``A_t``: up to ``REDRAWS`` further draws are made for a set whose
    members are all available, else the first draw is refilled (:func:`~fairsched.policies.refill.refill`).
    Safety net: a worker whose count is ``SAFETY_DEVIATIONS = 3`` standard deviations of a
    Binomial(``t``, ``r_u``) behind, ``D_u >= 1 + 3·√(t·r_u(1 − r_u))``, is selected in
    every round it is available (the ``k`` most urgent if more are).

    Guarantee, in expectation and without availability: every worker's rate is its LP
    marginal ``>= r_u`` and the time-average utility ``U_opt``; i.i.d. draws cross the safety
    threshold rarely, so they stay (close to) i.i.d. Under availability certified feasible
    (:func:`fairsched.availability.check_availability`) the safety net keeps
    ``N_u(T)/T >= r_u − (1 + 3·√(T·r_u(1 − r_u)))/T``, i.e. within 3 standard errors of the
    floor (and a round), in every run where at most ``k`` workers are behind at once;
    property-tested at 4 standard errors (``tests/test_floors_under_availability.py``).
    """

    name = "lp-random"

    def _install(self, opt: Optimum) -> None:
        super()._install(opt)
        p = self._p
        self._draws = BatchedDraws(lambda rng, size: rng.choice(len(self._sets), size=size, p=p), BATCH_ROUNDS)

    def _prepare(self) -> None:
        super()._prepare()
        self._draws = BatchedDraws(lambda rng, size: np.zeros(0, np.int64), BATCH_ROUNDS)

    def _select(self, available: np.ndarray) -> np.ndarray:
        self.plan()
        chosen = self._sets[self._draws.take(self.rng)]
        full = available is self._everyone or available.all()
        for _ in range(0 if full else REDRAWS):
            if available[chosen].all():
                break
            chosen = self._sets[self._draws.take(self.rng)]
        r, debt = self.problem.r, self._debts()
        behind = behind_by(r, debt, self.t + 1, SAFETY_DEVIATIONS) & available
        if full and not behind.any():
            return chosen
        keys = urgency_keys(r, debt)
        if not full:
            chosen = refill(chosen, available, most_urgent(np.flatnonzero(available), keys, debt, self.problem.k))
        return serve_urgent(chosen, np.flatnonzero(behind), keys, debt, self.problem.k)

    def _extra_state(self) -> dict[str, Any]:
        return {**super()._extra_state(), **self._draws.state_dict()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        super()._load_extra_state(state)
        self._draws.load_state_dict(state, self.rng)

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        return {"support_size": len(self.optimum.support)}


class LPSequenced(_Planned):
    """Deterministic deficit sequencing of ``p*`` with a fairness margin and a feasibility guard.

    1. **Margin** (optional, off by default: ``margin=0``). Solve the LP with floors ``r + ε``
       (capped at 1 and at ``Σ = k``), where ``ε`` is the largest value up to ``margin`` whose
       utility loss, measured by re-solving, is at most ``loss`` (relative).
    2. **Deficit sequencing.** Each round take the ``MAX_CANDIDATES = 64`` support sets of
       largest deficit ``p_S·t − c_S(t−1)`` (and those tied with the last), rank them by
       ``deficit_S + β·Σ_{u∈S} π_u``, where ``π_u = 1/(e_u − t + 1)`` is the pressure of
       worker ``u``'s next deadline ``e_u`` (``β = 10``; :meth:`_candidates`), and play the
       first that the guard finds safe: set counts stay within a constant of ``p_S·t``, so
       the time-average utility is ``U_opt(r + ε) − O(1/T)``.
       Under availability each candidate is first refilled
       (:func:`~fairsched.policies.refill.refill`: missing members replaced by the most
       urgent available workers), and the guard judges the refilled set.
    3. **Feasibility guard** (:class:`DeadlineGuard`, a demand-bound test on the deadlines at
       which each worker's debt would reach 1, over a window of ``W`` rounds). If no
       candidate is safe (counted in ``guarded_rounds``), the candidate that needs the
       fewest of the most urgent workers swapped in, each in place of a member outside the
       ``k`` most urgent, is played with them (``swapped_in`` counts them; the candidate
       counts as played). Members the plan plays in every round go last; before them, for
       the accuracy utility the lightest goes first (:func:`substitute_weights`), for any
       other the least urgent, and there a round needing more than ``MAX_SWAP_SHARE·k =
       k/4`` swaps takes the ``k`` available workers with the earliest deadlines (EDF,
       counted in ``edf_rounds``; with the accuracy utility only when no number of swaps is
       safe).
       **Kept machines** (accuracy utility only, where the workers the plan plays in every
       round, ``a`` of them, leave room for the other floors, ``Σ_{others} r_u <= k − a``):
       a set is first judged by the guard for the other workers on ``k − a`` machines
       (:meth:`DeadlineGuard.reserve`), with the least override under that test swapping
       only other workers, and only then, if nothing passes, as above. Judged on all ``k``
       machines, deficit sequencing lets a backlog of floor workers build that later takes
       the heavy workers' machines (measured on heavy-tailed sizes with floors
       ``∝ 1/√size``, ``n = 1,000``, ``k = 50``: the five always-planned workers missed 1–2 %
       of the rounds and the ratio was 0.99931; kept, they play every round and it is
       0.99999). A set played is always safe for the whole guard.

    Guarantee, with everyone available: debt ``< 1`` in every round (EDF is optimal for
    these unit jobs, the guard only accepts a set after which EDF can still meet every
    deadline within its window; exact as long as the window covers the binding horizon,
    property-tested with tight ``Σ r = k``), and utility ``U_opt(r + ε) − O(1/T)`` minus what
    the guard's swaps and EDF rounds cost. Under availability certified feasible with a margin
    (:func:`fairsched.availability.check_availability` passes for ``r + 0.05``) a late worker
    is served in every round it is available unless ``k`` workers are later (the guard
    rejects any set leaving out an available worker whose floor would break, and EDF puts
    the latest first); its debt is then bounded by the backlog its absences build,
    measured at most 5.8 over 60 random instances of ``T = 2,000`` rounds (the property test
    asserts ``<= 10``, as for FairDG, ``tests/test_floors_under_availability.py``). Measured,
    not proved. At scale the guard judges only the first ``MAX_CANDIDATES`` sets in deficit
    order, so more rounds fall back to EDF (fairness is kept, utility is what is given up).

    4. **Exact period** (:mod:`fairsched.policies.exact_period`). With rational floors
       summing to ``k`` exactly on a small problem (no caps, ``n <= 15``, ``C(n, k) <=
       10,000``, period ``<= 720``), the best period of any schedule with debt ``< 1`` is
       searched (at most ``period_states`` states; its own first period prunes the search)
       and, if it is worth more than the deficit sequencing's, played whenever everyone is
       available and the counts are on it: there the LP's probabilities need not fit a
       period and the guard's overrides cost utility.

    Cost per round, independent of the number of rounds: ``O(m)`` for the deficits of the
    ``m`` support sets, ``O(MAX_CANDIDATES·(W + k))`` for the guard (twice with kept
    machines, plus ``O(a + their jobs in the window)`` for :meth:`DeadlineGuard.reserve`),
    ``O(n)`` for its update (:meth:`DeadlineGuard.observe`); no ``(m, n)`` or ``(n, W)`` array.

    Parameters
    ----------
    margin : float
        Largest extra floor ``ε`` tried; 0 disables the margin.
    loss : float
        Largest relative utility loss ``1 − U_opt(r + ε)/U_opt`` the margin may cost.
    period_states : int
        States the exact-period search may keep (0: never search).
    gap : float
        Relative gap to which the plan is certified when the policy solves it, so that
        ``U_opt(r + ε) − O(1/T)`` above reads ``(1 − gap)·U_opt(r + ε) − O(1/T)``; default
        :data:`PLAN_GAP`. An optimum handed to the policy (``use_optimum``, as ``fairsched
        run`` hands it the yardstick's) is played as it is.
    """

    name = "lp-sequenced"

    def __init__(self, margin: float = 0.0, loss: float = 2e-4, period_states: int = PERIOD_STATES,
                 gap: float = PLAN_GAP) -> None:
        super().__init__(gap)
        self.margin = number_param(self.name, "margin", margin, low=0.0, high=1.0)
        self.loss = number_param(self.name, "loss", loss, low=0.0, high=1.0, high_open=True)
        self.period_states = count_param(self.name, "period_states", period_states, minimum=0)

    def params(self) -> dict[str, Any]:
        return {"margin": self.margin, "loss": self.loss, "period_states": self.period_states, **super().params()}

    def _prepare(self) -> None:
        super()._prepare()
        self._period: ExactPeriod | None = None
        self._period_searched = False
        self._played = np.zeros(0, dtype=np.int64)
        self._always_planned = np.zeros(0, dtype=bool)
        self._kept: np.ndarray | None = None
        self._plan_start = 0  # the round after which the current plan's sets are counted
        self._guard = DeadlineGuard(self.problem.r, self.problem.k)
        self._guard.rebuild(self.counts, 1)
        self.guarded_rounds = 0
        self.edf_rounds = 0
        self.swapped_in = 0

    def _install(self, opt: Optimum) -> None:
        super()._install(opt)
        self._played = np.zeros(len(self._sets), dtype=np.int64)
        # the plan plays these in (nearly) every round, far above any floor: urgency alone
        # would rank them the first to drop, and they are what the plan values most
        self._always_planned = _marginals(self._sets, self._p, self.problem.n) >= 1 - ALWAYS_PLANNED_TOLERANCE
        self._kept = self._kept_machines()
        self._index: dict[tuple[int, ...], int] | None = None  # built when a period needs it
        self._period, self._period_searched = None, False

    def _kept_machines(self) -> np.ndarray | None:
        """The always-planned workers whose machines the guard keeps for them, or ``None``.

        Only where ``f(S) = g(Σ_{u∈S} w_u)`` (:func:`substitute_weights`): there the plan plays
        its heaviest workers in every round and dropping one costs far more than swapping one
        light worker for another. And only where they leave room (:func:`room_to_keep`)."""
        if substitute_weights(self.problem.utility) is None:
            return None
        return room_to_keep(np.flatnonzero(self._always_planned), self.problem.r, self.problem.k)

    def _plan_index(self, chosen: np.ndarray) -> int | None:
        """The support position of the period's set ``chosen`` (``None`` if the plan lacks it).

        The map is built on first use: only instances small enough for an exact period need
        it, and at ``n = 100,000``, ``k = 1,000`` its tuples of Python ints took 3.5 GB."""
        if self._index is None:
            self._index = {tuple(S.tolist()): j for j, S in enumerate(self._sets)}
        return self._index.get(tuple(chosen.tolist()))

    def _resume(self) -> None:
        # a new plan: its sets' deficits count from now, not from round 0
        self._plan_start = self.t
        self._guard.rebuild(self.counts, self.t + 1)

    def _search_period(self) -> None:
        """Find the exact period once per plan (see :mod:`fairsched.policies.exact_period`)."""
        self._period_searched = True
        eligible = period_floors(self.problem) if self.period_states else None
        if eligible is None:
            return
        sets = search_period(self.problem, self._plan.fairness_price, self._own_period, self.period_states)
        if sets is not None:
            self._period = ExactPeriod(sets, eligible[1])

    def _own_period(self, P: int) -> list[np.ndarray]:
        """The first ``P`` rounds deficit sequencing plays from the start, everyone available."""
        probe = LPSequenced(self.margin, self.loss, period_states=0, gap=self.gap)
        probe.use_optimum(self._plan)
        probe.reset(replace(self.problem, availability=None), seed=0)
        sets = []
        for _ in range(P):
            S = probe.select()
            probe.observe(S)
            sets.append(S)
        return sets

    def _solve(self, exact: Optimum) -> tuple[float, Optimum]:
        r, k = np.asarray(self.problem.r, dtype=float), self.problem.k
        room = (k - r.sum()) / r.size
        epsilon = min(self.margin, max(room, 0.0))
        while epsilon > 1e-6:
            raised = np.minimum(r + epsilon, self.problem.upper)
            candidate = optimum(replace(self.problem.with_floors(raised), availability=None), gap=self.gap)
            if candidate.value >= (1 - self.loss) * exact.value:
                return epsilon, candidate
            epsilon /= 2
        return 0.0, exact

    def _candidates(self, t: int, available: np.ndarray | None = None) -> np.ndarray:
        """The ``MAX_CANDIDATES`` support sets the guard is offered, best first.

        The sets of largest deficit ``p_S·t − c_S(t − 1)`` (the top ``MAX_CANDIDATES`` and any
        tied with the last of them, at most :data:`RANKED_SETS`) are ranked by
        ``deficit_S + β·Σ_{u∈S} π_u``, with ``β`` = :data:`URGENCY_WEIGHT` and ``π_u`` the
        deadline pressure of :meth:`DeadlineGuard.pressure` (ties to the larger ``p_S``, then
        the lower index). Among the sets that are due, the pressure term puts first those that
        serve the workers nearest their deadlines, so fewer rounds come to a state in which no
        planned set is safe (measured in ``benchmarks/README.md``, *lp-sequenced ranks the sets
        that are due by their members' deadlines*). It is at most ``β·k`` per set, so every
        set's count still stays within a constant of ``p_S·t``. With ``available`` (a mask;
        ``None`` when everyone is) only the available members count: an away member is
        refilled, not served (counting them raised the largest debt under certified
        availability from 7.06 to 8.06 on facility location, 3.78 to 5.18 on accuracy; without
        them 5.76 and 3.78)."""
        deficit = self._p * (t - self._plan_start) - self._played
        m = deficit.size
        pool = np.arange(m)
        if m > MAX_CANDIDATES:
            kth = np.partition(deficit, m - MAX_CANDIDATES)[m - MAX_CANDIDATES]
            pool = np.flatnonzero(deficit >= kth)
        top = pool[np.lexsort((pool, -self._p[pool], -deficit[pool]))[:RANKED_SETS]]
        members, owner = flattened([self._sets[j] for j in top])
        if members.size < self.problem.n:
            weights = self._guard.pressure(members)
            if available is not None:
                weights *= available[members]
        else:  # fewer passes over the workers once than over the (repeated) members
            every = self._guard.pressure()
            if available is not None:
                every *= available
            weights = every[members]
        pressure = np.bincount(owner, weights=weights, minlength=top.size)
        return top[np.lexsort((top, -self._p[top], -(deficit[top] + URGENCY_WEIGHT * pressure)))][:MAX_CANDIDATES]

    def _select(self, available: np.ndarray) -> np.ndarray:
        self.plan()
        t = self.t + 1
        full = available is self._everyone or available.all()
        if not self._period_searched:
            self._search_period()
        if self._period is not None:
            chosen = self._period.set_for(t, self.counts) if full else None
            if chosen is not None:
                j = self._plan_index(chosen)
                if j is not None:
                    self._played[j] += 1
                return chosen
            self._period.leave()
        ranked = self._candidates(t, None if full else available)
        if full:
            blocked, urgent = 0, None
        else:
            urgent = self._most_urgent(available)
            blocked = self._guard.blocked(available, self.counts)
        kept = self._kept
        reserve = None if kept is None else self._guard.reserve(kept, self.counts)

        # the best candidate is usually safe: the others are refilled and judged only if not
        first = self._sets[ranked[0]] if urgent is None else refill(self._sets[ranked[0]], available, urgent)
        first_safe = bool(self._guard.safe([first], blocked)[0])
        if first_safe and (reserve is None or self._guard.safe([self._others(first)], blocked, reserve)[0]):
            self._played[ranked[0]] += 1
            return first
        # the rest in one pass; only the sets played or overridden are taken out and sorted
        members, owner = refill_many([self._sets[j] for j in ranked[1:]], available, urgent)
        safe = self._guard.safe_members(members, owner, ranked.size - 1, blocked)

        def played(c: int) -> np.ndarray:
            return np.sort(members[owner == c])

        def override_inputs() -> tuple[list[np.ndarray], np.ndarray]:
            """The candidates the least override tries and the EDF set, built only when it runs."""
            edf = self._most_urgent(available) if urgent is None else urgent
            return [first] + [played(c) for c in range(min(OVERRIDE_CANDIDATES, ranked.size) - 1)], edf

        inputs = None
        if reserve is not None:
            other = ~self._always_planned[members]
            kept_safe = safe & self._guard.safe_members(members[other], owner[other], ranked.size - 1, blocked,
                                                        reserve)
            if kept_safe.any():
                best = int(np.argmax(kept_safe))
                self._played[ranked[best + 1]] += 1
                return played(best)
            inputs = override_inputs()
            overridden = self._least_override(*inputs, blocked, reserve)
            if overridden is not None and self._guard.safe([overridden[1]], blocked)[0]:
                return self._override(ranked, overridden)
            if first_safe:
                self._played[ranked[0]] += 1
                return first
        if safe.any():
            best = int(np.argmax(safe))
            self._played[ranked[best + 1]] += 1
            return played(best)
        sets, edf = inputs or override_inputs()
        overridden = self._least_override(sets, edf, blocked)
        if overridden is None:
            self.guarded_rounds += 1
            self.edf_rounds += 1
            return np.sort(edf)
        return self._override(ranked, overridden)

    def _others(self, members: np.ndarray) -> np.ndarray:
        """``members`` but the always-planned workers."""
        return members[~self._always_planned[members]]

    def _override(self, ranked: np.ndarray, overridden: tuple[int, np.ndarray, int]) -> np.ndarray:
        """Play a candidate with urgent workers swapped in (:meth:`_least_override`)."""
        which, chosen, swaps = overridden
        self.guarded_rounds += 1
        # the plan moves on as if the set was played: it was, but for the swapped members
        self._played[ranked[which]] += 1
        self.swapped_in += swaps
        return chosen

    def _least_override(self, candidates: list[np.ndarray], edf: np.ndarray, blocked: int,
                        reserve: np.ndarray | None = None) -> tuple[int, np.ndarray, int] | None:
        """The candidate that needs the fewest of the most urgent workers swapped in to be safe.

        For a candidate ``S``, the ``j``-th swap puts in the ``j``-th most urgent worker not in
        ``S`` (EDF order) and takes out a member of ``S`` outside ``edf``. Members the plan
        plays in every round (planned share ``Σ_{S∋u} p_S`` within ``ALWAYS_PLANNED_TOLERANCE``
        of 1) go last. Before them: if ``f(S) = g(Σ_{u∈S} w_u)`` (:func:`substitute_weights`,
        the accuracy utility) the lightest member first, the one whose removal loses least, up
        to ``k`` swaps; for any other utility the least urgent first (workers without a floor
        before others), up to ``MAX_SWAP_SHARE·k`` swaps. Every member outside ``edf`` is due
        no earlier than every worker in it, so whatever the order of the members, each swap
        moves a selection to an earlier deadline and safety grows with ``j``
        (:meth:`DeadlineGuard.swaps_needed` finds the smallest safe ``j``). Returns
        ``(candidate index, set, j)`` for the smallest ``j`` (ties to the earlier candidate),
        or ``None`` if no candidate is safe within the cap (all the swaps give the EDF set,
        which the round then plays).

        Why these orders (measured in ``benchmarks/README.md``, *lp-sequenced on data nothing
        was tuned on*): where members complement each other (coverage, facility location),
        dropping by value (marginal gain, removal loss), or keeping every member the plan
        selects above its floor until last, starts a cascade: a member dropped at its floor
        falls behind, is swapped in later and drops another, which cost up to 2.4 % of
        ``U_opt``; the cap keeps the worst measured case there higher (0.99955 against 0.99918
        without it). Where members are substitutes up to a weight, a later swap replaces one
        light worker by another and costs little, and dropping the lightest took the ratio on
        heavy-tailed accuracy data from 0.99974–0.99994 (by urgency) to 0.99996–0.99999.
        Dropping by urgency alone drops the very large workers of such data first (they are
        far ahead of their floors because the plan values them); keeping the always-planned
        members last prevents that for other utilities.
        """
        weights = substitute_weights(self.problem.utility)
        if weights is None:
            order_key, most_swaps = -urgency_keys(self.problem.r, self._debts()), int(MAX_SWAP_SHARE * self.problem.k)
        else:
            order_key, most_swaps = weights, self.problem.k
        slack = self._guard.slack(blocked)
        if reserve is not None:  # judged for the other workers on the machines left: the kept ones never swap
            slack = slack + reserve
            edf = self._others(edf)
        # membership by boolean masks over the workers: O(k) per candidate, no sort
        in_edf = np.zeros(self.problem.n, dtype=bool)
        in_edf[edf] = True
        in_set = np.zeros(self.problem.n, dtype=bool)
        best: tuple[int, np.ndarray, int] | None = None
        for c, S in enumerate(candidates):
            outgoing = S[~in_edf[S]]
            if reserve is not None:
                outgoing = self._others(outgoing)
            outgoing = outgoing[np.lexsort((order_key[outgoing], self._always_planned[outgoing]))]
            in_set[S] = True
            incoming = edf[~in_set[edf]]
            in_set[S] = False
            limit = min(outgoing.size, incoming.size, most_swaps if best is None else best[2] - 1)
            if limit <= 0:
                continue
            counted = S if reserve is None else self._others(S)
            j = self._guard.swaps_needed(slack + self._guard.served(counted), outgoing[:limit], incoming[:limit])
            if j is not None:
                in_set[outgoing[:j]] = True
                best = (c, np.sort(np.concatenate([S[~in_set[S]], incoming[:j]])), j)
                in_set[outgoing[:j]] = False
        return best

    def _most_urgent(self, available: np.ndarray) -> np.ndarray:
        """The ``k`` most urgent available workers, most urgent first (EDF order)."""
        debt = self._debts()
        return most_urgent(np.flatnonzero(available), urgency_keys(self.problem.r, debt), debt, self.problem.k)

    def observe(self, counted: np.ndarray) -> None:
        super().observe(counted)
        self._guard.observe(np.asarray(counted, dtype=np.int64), self.counts)

    def forgive(self, workers: np.ndarray) -> None:
        super().forgive(workers)
        self._guard.rebuild(self.counts, self.t + 1)
        if self._period is not None:
            self._period.leave()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        params = state.get("params")
        if isinstance(params, dict) and "period_states" not in params:
            # a state saved before the exact period existed: it ran with the search's default
            state = {**state, "params": {**params, "period_states": PERIOD_STATES}}
        super().load_state_dict(state)

    def _extra_state(self) -> dict[str, Any]:
        return {**super()._extra_state(), "played": self._played.tolist(), "guarded_rounds": self.guarded_rounds,
                "edf_rounds": self.edf_rounds, "swapped_in": self.swapped_in,
                "plan_start": self._plan_start, "period_searched": self._period_searched,
                "period": None if self._period is None else self._period.state_dict()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        super()._load_extra_state(state)
        if self._plan is not None and len(state["played"]) != len(self._sets):
            raise ValueError("state's LP support differs from this policy's; refusing to mix them")
        self._played = np.asarray(state["played"], dtype=np.int64)
        self.guarded_rounds = int(state["guarded_rounds"])
        # a state saved before the least override played every guarded round as EDF
        self.edf_rounds = int(state.get("edf_rounds", self.guarded_rounds))
        self.swapped_in = int(state.get("swapped_in", 0))
        self._plan_start = int(state.get("plan_start", 0))
        self._guard.rebuild(self.counts, self.t + 1)
        self._period_searched = bool(state.get("period_searched", False))
        stored = state.get("period")
        self._period = None if stored is None else ExactPeriod.from_state(stored)

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        return {"margin_epsilon": self.epsilon, "support_size": len(self._sets),
                "guarded_rounds": self.guarded_rounds, "edf_rounds": self.edf_rounds,
                "swapped_in": self.swapped_in, "planned_value": self.optimum.value,
                "exact_period": None if self._period is None else self._period.length,
                "exact_period_rounds": 0 if self._period is None else self._period.rounds}


class DeadlineGuard:
    """Can every future floor still be met after this round's set? A demand-bound test, kept incrementally.

    Worker ``u``, selected ``N_u`` times, owes its ``j``-th selection (``j > N_u``) by round
    ``d_{u,j} = min{s : ⌊r_u·s⌋ >= j}`` (else its debt reaches 1). These are unit jobs on ``k``
    machines, one per worker per round; by the optimality of earliest-deadline-first for such
    jobs they can all be met iff for every horizon ``H >= t`` at most ``k·(H − t)`` of them
    remain due by ``H`` after round ``t``. The guard checks the horizons
    ``t <= H <= t + W``, with ``W`` twice the longest gap ``1/r_u`` (capped at 256 rounds)
    plus ``4⌈n/k⌉``: a set ``S`` for round ``t`` is safe iff for ``h = 0..W``

        late + Σ_{s=t}^{t+h} c_s − |{u ∈ S : e_u <= t + h}| <= k·h

    where ``c_s`` counts the outstanding jobs due at ``s``, ``late`` those already overdue and
    ``e_u`` is ``u``'s next deadline (serving ``u`` removes that job). At ``h = 0`` the jobs
    of workers unavailable this round (:meth:`blocked`) are not counted: they cannot be
    served now, only later.

    State: ``c`` for the window (a ring of ``W + 1`` rounds), ``late``, ``e`` and ``⌊r·(t + W)⌋``.
    :meth:`observe` removes the served jobs (``O(k)``) and lets round ``t + W + 1`` in
    (``O(n)``); :meth:`rebuild` recomputes everything from the counts in
    ``O(n + Σ_u jobs_u)`` (at most ``k·W`` plus the overdue jobs).
    """

    def __init__(self, r: np.ndarray, k: int, window: int | None = None) -> None:
        self.r = np.asarray(r, dtype=float)
        self.k = k
        positive = self.r[self.r > 0]
        # A worker with a tiny floor has at most one job due in any short window, so very long
        # gaps are capped (in floating point: 1/r overflows an int for subnormal floors).
        with np.errstate(over="ignore"):
            longest_gap = int(np.ceil(min(1.0 / positive.min(), MAX_GAP))) if positive.size else 1
        self.window = window or 2 * longest_gap + 4 * int(np.ceil(self.r.size / k))
        self.steps = np.arange(self.window + 1)
        self.t = 1

    def required(self, s: int | np.ndarray, r: np.ndarray | None = None) -> np.ndarray:
        """``⌊r_u·s⌋``: the selections ``u`` owes by round ``s``."""
        return np.floor((self.r if r is None else r) * s + DEBT_TOLERANCE).astype(np.int64)

    def deadlines(self, r: np.ndarray, j: np.ndarray) -> np.ndarray:
        """``min{s >= 1 : ⌊r·s⌋ >= j}`` elementwise (``NEVER`` for ``r = 0``)."""
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            s = np.ceil((j - DEBT_TOLERANCE) / np.where(r > 0, r, 1.0))
        s = np.where(r > 0, np.minimum(np.maximum(s, 1.0), float(NEVER)), float(NEVER)).astype(np.int64)
        finite = s < NEVER
        s += finite & (np.floor(r * s + DEBT_TOLERANCE) < j)
        s -= finite & (s > 1) & (np.floor(r * (s - 1) + DEBT_TOLERANCE) >= j)
        return s

    def rebuild(self, counts: np.ndarray, t: int) -> None:
        """Recompute the state for round ``t`` from the counts ``N_u(t − 1)``."""
        W = self.window
        self.t = int(t)
        self.end_required = self.required(t + W)
        d = self._job_deadlines(np.arange(self.r.size), counts)
        self.late = int((d < t).sum())
        self.ring = np.bincount(d[d >= t] % (W + 1), minlength=W + 1).astype(np.int64)
        self.next_due = self.deadlines(self.r, counts + 1)

    def observe(self, served: np.ndarray, counts: np.ndarray) -> None:
        """Round :attr:`t` served ``served`` (the counts already include it); move on to ``t + 1``."""
        W, t = self.window, self.t
        e = self.next_due[served]
        self.late -= int((e < t).sum())
        inside = e[(e >= t) & (e <= t + W)]
        np.subtract.at(self.ring, inside % (W + 1), 1)
        self.next_due[served] = self.deadlines(self.r[served], counts[served] + 1)
        slot = t % (W + 1)
        self.late += int(self.ring[slot])
        # round t + W + 1 enters the window in the slot round t leaves
        required = self.required(t + W + 1)
        self.ring[slot] = int(((required > self.end_required) & (required > counts)).sum())
        self.end_required = required
        self.t = t + 1

    def blocked(self, available: np.ndarray, counts: np.ndarray) -> int:
        """Jobs due by round :attr:`t` of the workers not ``available`` (they wait for a later round)."""
        away = ~available
        return int(np.maximum(self.required(self.t, self.r[away]) - counts[away], 0).sum())

    def slack(self, blocked: int = 0) -> np.ndarray:
        """``k·h − late − Σ_{s=t}^{t+h} c_s`` for ``h = 0..W`` (``blocked`` added at ``h = 0``)."""
        W = self.window
        window = self.ring[(self.t + self.steps) % (W + 1)]
        slack = self.k * self.steps - self.late - np.cumsum(window)
        slack[0] += blocked
        return slack

    def reserve(self, workers: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """For ``h = 0..W``, ``A(h) − |workers|·h``, where ``A(h)`` counts the outstanding jobs
        of ``workers`` due by round ``t + h`` (overdue ones included).

        Added to :meth:`slack`, it gives the slack of the other workers' jobs on
        ``k − |workers|`` machines, as if ``workers`` held their machines in every round:
        ``(k − a)·h − late_o − Σ c_s^o = slack(h) + A(h) − a·h``. ``O(|workers| + their jobs
        in the window)``; workers far ahead of their floors have none.
        """
        W = self.window
        offset = np.clip(self._job_deadlines(workers, counts) - self.t, 0, W + 1)
        due = np.cumsum(np.bincount(offset, minlength=W + 2)[:W + 1])
        return due - workers.size * self.steps

    def _job_deadlines(self, workers: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """The deadlines of the outstanding jobs of ``workers`` up to the window's end: worker
        ``u``'s selections ``N_u + 1 .. ⌊r_u·(t + W)⌋``, one entry each."""
        jobs = np.maximum(self.end_required[workers] - counts[workers], 0)
        owner = np.repeat(workers, jobs)
        first = np.cumsum(jobs) - jobs
        j = counts[owner] + 1 + np.arange(owner.size) - np.repeat(first, jobs)
        return self.deadlines(self.r[owner], j)

    def pressure(self, members: np.ndarray | None = None) -> np.ndarray:
        """``π_u = 1/(e_u − t + 1)`` for each of ``members`` (every worker if ``None``), ``e_u``
        its next deadline: 1 for a worker due this round (or overdue), ``1/(h + 1)`` for one due
        ``h`` rounds later, 0 for a worker without a floor."""
        due = self.next_due if members is None else self.next_due[members]
        return np.where(due >= NEVER, 0.0, 1.0 / np.maximum(due - self.t + 1, 1))

    def served(self, members: np.ndarray) -> np.ndarray:
        """For ``h = 0..W``, how many of ``members`` have their next job due by round ``t + h``."""
        W = self.window
        offset = np.clip(self.next_due[members] - self.t, 0, W + 1)
        return np.cumsum(np.bincount(offset, minlength=W + 2)[:W + 1])

    def swaps_needed(self, margin: np.ndarray, outgoing: np.ndarray, incoming: np.ndarray) -> int | None:
        """Smallest ``j`` such that serving ``incoming[:j]`` instead of ``outgoing[:j]`` makes
        ``margin + served(incoming[:j]) − served(outgoing[:j]) >= 0`` at every horizon.

        ``margin`` is :meth:`slack` plus :meth:`served` of the set as planned. Each swap adds at
        most one at any horizon, so ``j`` is at least the largest shortfall; it is then found by
        bisection, each step ``O(j + W)`` without building a set. Safety grows with ``j`` when
        every incoming worker is due no later than every outgoing one (incoming in EDF order,
        outgoing outside the ``k`` most urgent, in any order); ``None`` if the full swap is not
        safe.
        """
        shortfall = int(-margin.min())
        if shortfall <= 0:
            return 0
        swaps = min(outgoing.size, incoming.size)

        def covered(j: int) -> bool:
            return bool((margin + self.served(incoming[:j]) - self.served(outgoing[:j]) >= 0).all())

        if shortfall > swaps or not covered(swaps):
            return None
        low, high = shortfall - 1, swaps  # not covered at low (each swap adds at most one), covered at high
        while high - low > 1:
            middle = (low + high) // 2
            if covered(middle):
                high = middle
            else:
                low = middle
        return high

    def safe(self, sets: list[np.ndarray], blocked: int = 0, reserve: np.ndarray | None = None) -> np.ndarray:
        """For each candidate set of round :attr:`t`, whether playing it is safe (with
        ``reserve``: whether it is for the other workers on the machines left,
        :meth:`reserve`; the sets then hold only the other workers)."""
        members, owner = flattened(sets)
        return self.safe_members(members, owner, len(sets), blocked, reserve)

    def safe_members(self, members: np.ndarray, owner: np.ndarray, count: int, blocked: int = 0,
                     reserve: np.ndarray | None = None) -> np.ndarray:
        """:meth:`safe` of ``count`` sets given flat: set ``c`` is ``members[owner == c]``."""
        if count == 0:
            return np.zeros(0, dtype=bool)
        W = self.window
        offset = np.clip(self.next_due[members] - self.t, 0, W + 1)
        cell = owner * (W + 2) + offset
        hits = np.bincount(cell, minlength=count * (W + 2)).reshape(count, W + 2)[:, :W + 1]
        slack = self.slack(blocked) if reserve is None else self.slack(blocked) + reserve
        return (slack[None, :] + np.cumsum(hits, axis=1) >= 0).all(axis=1)
