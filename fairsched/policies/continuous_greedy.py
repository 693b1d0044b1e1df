"""FairCG1 and FairCG2: continuous greedy on the multilinear extension, then pipage rounding.

Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular
Maximization Approach" (2021), Section IV, state the properties of FairCG1 and FairCG2
(Theorems 1–4); the steps below are our **[reconstruction]** with those properties
(``docs/mathematics.md`` §6), as the algorithms' steps were not available to us. With ``F``
the multilinear extension of ``f``, ``P_r = {x ∈ [0,1]^n : Σx <= k, x >= r}`` (with caps
also ``x <= c``, and ``c`` in place of 1 below) and ``δ = 1/steps``:

- **FairCG1**: ``y(0) = 0``; each step ``v = argmax_{v ∈ P_r} <∇F(y), v>``, ``y += δ·v``.
  ``y(1)`` averages points of ``P_r`` so it lies in ``P_r``; intermediate points need not.
  Guarantee ``F(y(1)) >= (1 − (1 − δ)^{1/δ})·U_opt`` (up to gradient error).
- **FairCG2**: ``y(0) = r``; directions in ``Q = {0 <= v <= 1 − r, Σv <= k − Σr}``, so every
  intermediate point is in ``P_r``. Guarantee (``∇F`` is antitone and ``x* − r ∈ Q``)
  ``F(y(1)) >= max(F(r), e^{-1}·F(r) + (1 − e^{-1})·(U_opt − <∇F(r), r>))``.

Each round draws ``S_t`` by an independent randomized pipage rounding of ``y(1)``, so
``P[u ∈ S_t] = y_u >= r_u`` and ``E f(S_t) >= F(y(1))``; rounds are drawn in batches.

**Availability and debts** (our extension; ``A_t`` the available workers, ``d_u = r_u·t − N_u``
the debt before round ``t + 1``, ``θ`` = ``debt_limit``). A round in which every worker with
``y_u > 0`` is available and no available worker owes ``d_u >= θ`` plays the planned draw
above, unchanged. Otherwise the round is re-rounded on ``A_t``:

1. the *urgent* workers ``U = {u ∈ A_t : d_u >= θ}`` (the ``k`` largest debts if more,
   ties to the lower index) are selected;
2. the rest gets ``z = y`` restricted to ``A_t \\ U``, scaled down to the budget
   ``k − |U|`` if above it, else topped up with the mass of the unavailable and urgent
   workers along FairCG's own direction: the fractional knapsack of the gradient
   ``∇F(y(1))`` with caps ``1 − z`` (:func:`fill_budget`);
3. ``S_t = U ∪`` pipage rounding of ``z`` (so ``|S_t| <= k``, ``S_t ⊆ A_t``).

What is kept. (a) With everyone available and no debt reaching ``θ``, FairCG exactly:
``P[u ∈ S_t] = y_u`` and ``E f(S_t) >= F(y(1))``; in a re-rounded round without urgent
workers every available ``u`` still has ``P[u ∈ S_t] >= y_u``. (b) Floors in expectation,
whenever every selected worker is counted, the available sets are independent and
identically distributed across rounds (e.g. each worker available independently with
probability ``a_u``) and the floors are feasible under them (some rule choosing
``S ⊆ A_t``, ``|S| <= k`` from ``A_t`` alone gives every ``u`` rate ``>= r_u``; this is what
:func:`fairsched.availability.check_probabilities` checks): step 1 maximises
``Σ_u d_u^+·1[u ∈ S]`` over ``S ⊆ A_t``, ``|S| <= k`` up to ``k·θ``, so the drift of
``L = Σ_u (d_u^+)^2`` is at most ``C + 2kθ`` with ``C = k + Σ_u r_u^2`` (the max-weight
argument of Tassiulas and Ephremides, "Stability Properties of Constrained Queueing Systems
and Scheduling Policies for Maximum Throughput in Multihop Radio Networks", 1992), hence
``E[N_u(T)] >= r_u·T − sqrt(T·(k·(1 + 2θ) + Σ_u r_u^2))`` for every worker and ``T``.
``debt_limit = inf`` turns step 1 off (re-rounding on ``A_t`` only, no floor guarantee
when workers are away). The default ``debt_limit = "auto"`` is ``θ = 1`` from the first round
in which availability restricts the plan (some worker with ``y_u > 0`` is away) and ``inf``
before it, so with everyone available throughout FairCG1 and FairCG2 are exactly the
algorithms above; (b) then holds from that round on (its initial debts add a constant).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from fairsched.errors import PolicyError
from fairsched.policies.base import DEBT_TOLERANCE, Policy
from fairsched.policies.batched import BatchedDraws
from fairsched.results import Result
from fairsched.submodular.multilinear import MultilinearOracle, supported_methods
from fairsched.submodular.rounding import SNAP, pipage_round_batch, pipage_round_snapped
from fairsched.utilities.check import check_submodular

BATCH_ROUNDS = 4096
#: planned draws kept at once: at most this many mask entries (bytes), so O(n) per round
BATCH_CELLS = 1 << 25


def fill_budget(gradient: np.ndarray, caps: np.ndarray, budget: float) -> np.ndarray:
    """``argmax <gradient, v>`` over ``{0 <= v <= caps, Σv <= budget}``: a fractional knapsack.

    Fill the largest positive gradient entries up to their caps until the budget is spent
    (ties to the lower index, so the result is deterministic).
    """
    order = np.lexsort((np.arange(gradient.size), -gradient))
    order = order[gradient[order] > 0]
    caps_sorted = caps[order]
    spent_before = np.cumsum(caps_sorted) - caps_sorted
    v = np.zeros_like(caps, dtype=float)
    v[order] = np.clip(budget - spent_before, 0.0, caps_sorted)
    return v


@dataclass(frozen=True)
class ContinuousGreedyResult(Result):
    """The fractional point of a continuous-greedy run and what is needed for its bound
    (``status`` ``"completed"``, ``seconds`` the time of the ascent)."""

    y: np.ndarray
    value: float
    value_stderr: float
    value_at_floor: float
    gradient_dot_floor: float
    method: str
    steps: int
    #: every intermediate point y(τ), τ = 0..steps, when recorded
    path: np.ndarray | None = None
    #: ``∇F(y(1))``, the direction along which freed mass is topped up
    gradient: np.ndarray | None = None


class _ContinuousGreedy(Policy):
    """Shared machinery of FairCG1 and FairCG2 (see the module docstring).

    ``steps`` continuous-greedy steps with ``samples`` Monte-Carlo samples per gradient when
    ``method`` resolves to Monte Carlo; ``debt_limit`` is the debt ``θ`` from which an
    available worker is selected outright (``inf``: never; ``"auto"``: 1 once availability
    has restricted a round, see the module docstring).
    """

    start_at_floor: ClassVar[bool]

    def __init__(self, steps: int = 100, samples: int = 2000, method: str = "auto",
                 verify_submodular: bool = False, record_path: bool = False,
                 debt_limit: float | str = "auto") -> None:
        super().__init__()
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps <= 0:
            raise PolicyError(f"{self.name}: steps must be a positive integer, got {steps!r}")
        if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples <= 0:
            raise PolicyError(f"{self.name}: samples must be a positive integer, got {samples!r}")
        self.steps = int(steps)
        self.samples = int(samples)
        if not isinstance(method, str):
            raise PolicyError(f"{self.name}: method must be a name, got {method!r}")
        for flag, value in (("verify_submodular", verify_submodular), ("record_path", record_path)):
            if not isinstance(value, bool):
                raise PolicyError(f"{self.name}: {flag} must be true or false, got {value!r}")
        ok = isinstance(debt_limit, (int, float, np.integer, np.floating)) and not isinstance(debt_limit, bool)
        if debt_limit != "auto" and not (ok and float(debt_limit) > 0):  # also refuses nan
            raise PolicyError(f"{self.name}: debt_limit must be \"auto\" or a number > 0 (inf: no top-up), "
                              f"got {debt_limit!r}")
        self.debt_limit: float | str = debt_limit if debt_limit == "auto" else float(debt_limit)
        # "auto": the guard is armed by the first round that availability restricts
        self._guarding = debt_limit != "auto"
        self.method = method
        self.verify_submodular = verify_submodular
        self.record_path = record_path
        self.result: ContinuousGreedyResult | None = None

    def params(self) -> dict[str, Any]:
        return {"steps": self.steps, "samples": self.samples, "method": self.method,
                "debt_limit": self.debt_limit}

    def _prepare(self) -> None:
        problem = self.problem
        self._upper = problem.upper  # the caps, or 1: built once, not in every step or round
        if self.method not in ("auto", *supported_methods(problem.utility)):
            raise PolicyError(f"{self.name}: method {self.method!r} is not supported by "
                              f"{problem.utility.kind}; choose from "
                              f"{', '.join(('auto', *supported_methods(problem.utility)))}")
        if self.verify_submodular:
            report = check_submodular(problem.utility, seed=int(self.rng.integers(2**31)))
            if not report:
                raise PolicyError(f"{self.name}: the utility is not monotone submodular: {report.violation}")
        oracle = MultilinearOracle(problem.utility, method=self.method, samples=self.samples,
                                   seed=int(self.rng.integers(2**63)))
        self.result = self._ascend(oracle)
        self._guarding = self.debt_limit != "auto"
        y = self.result.y
        self._support = np.flatnonzero(y > 0)
        gradient = self.result.gradient
        order = np.lexsort((np.arange(y.size), -gradient))
        self._order = order[gradient[order] > 0]
        batch = max(1, min(BATCH_ROUNDS, BATCH_CELLS // max(1, y.size)))
        self._rounds = BatchedDraws(lambda rng, size: pipage_round_batch(y, size, rng), batch)

    def _ascend(self, oracle: MultilinearOracle) -> ContinuousGreedyResult:
        start = time.perf_counter()
        r = np.asarray(self.problem.r, dtype=float)
        k = self.problem.k
        at_floor = oracle(r)
        y = r.copy() if self.start_at_floor else np.zeros_like(r)
        path = [y.copy()] if self.record_path else None
        delta = 1.0 / self.steps
        for _ in range(self.steps):
            gradient = oracle(y).gradient
            y = y + delta * self._direction(gradient, r, k)
            if path is not None:
                path.append(y.copy())
        # Floating-point sums can leave y a hair outside [r, c]; rounding needs [0, 1].
        y = np.clip(y, r, self._upper)
        final = oracle(y)
        return ContinuousGreedyResult(
            y=y, value=final.value, value_stderr=final.value_stderr,
            value_at_floor=at_floor.value, gradient_dot_floor=float(at_floor.gradient @ r),
            method=oracle.method, steps=self.steps,
            path=None if path is None else np.array(path), gradient=final.gradient, status="completed",
            message=f"{self.steps} continuous-greedy steps ({oracle.method} gradients): F(y) = {final.value:.6g}",
            seconds=time.perf_counter() - start)

    def _direction(self, gradient: np.ndarray, r: np.ndarray, k: int) -> np.ndarray:
        raise NotImplementedError

    def _select(self, available: np.ndarray) -> np.ndarray:
        urgent = np.zeros(0, dtype=np.int64)
        planned = available is self._everyone or available[self._support].all()
        if not planned:
            self._guarding = True
        limit = 1.0 if self.debt_limit == "auto" else self.debt_limit
        if self._guarding and math.isfinite(limit):
            debt = self.problem.r * self.t - self.counts
            urgent = np.flatnonzero(available & (debt >= limit - DEBT_TOLERANCE))
            if urgent.size > self.problem.k:
                urgent = urgent[np.lexsort((urgent, -debt[urgent]))[: self.problem.k]]
        if urgent.size == 0 and planned:
            return np.flatnonzero(self._rounds.take(self.rng))
        return self._reround(available, urgent)

    def _reround(self, available: np.ndarray, urgent: np.ndarray) -> np.ndarray:
        """Steps 2 and 3 of the module docstring: ``U ∪`` pipage rounding of ``z`` on ``A_t \\ U``."""
        rest = available.copy()
        rest[urgent] = False
        budget = self.problem.k - urgent.size
        z = np.where(rest, self.result.y, 0.0)
        mass = float(z.sum())
        if mass > budget:
            z *= budget / mass
        elif mass < budget and self._order.size:
            order = self._order[rest[self._order]]
            caps = self._upper[order] - z[order]
            spent_before = np.cumsum(caps) - caps
            z[order] += np.clip(budget - mass - spent_before, 0.0, caps)
        np.clip(z, 0.0, 1.0, out=z)
        z[z <= SNAP] = 0.0
        z[z >= 1.0 - SNAP] = 1.0
        return np.sort(np.concatenate((urgent, pipage_round_snapped(z, self.rng))))

    def _extra_state(self) -> dict[str, Any]:
        return {"y": self.result.y.tolist(), "guarding": self._guarding, **self._rounds.state_dict()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        y = np.asarray(state["y"], dtype=float)
        if not np.array_equal(y, self.result.y):
            raise ValueError("state's fractional point differs from this policy's; refusing to mix them")
        self._rounds.load_state_dict(state, self.rng)
        self._guarding = bool(state.get("guarding", self.debt_limit != "auto"))

    def lower_bound(self, u_opt: float) -> float:
        """The guaranteed ``F(y(1))`` given ``U_opt`` (see the module docstring)."""
        raise NotImplementedError

    def diagnostics(self, u_opt: float | None) -> dict[str, Any]:
        """The fractional point, ``F(y)`` and the guaranteed bound, for reports."""
        res = self.result
        return {
            "fractional_point": res.y,
            "multilinear_value": res.value,
            "multilinear_stderr": res.value_stderr,
            "multilinear_method": res.method,
            "lower_bound": None if u_opt is None else self.lower_bound(u_opt),
        }


class FairCG1(_ContinuousGreedy):
    """FairCG1 (Li, Liu and Ji 2021, Theorem 2): continuous greedy from 0 over ``P_r``, then pipage rounding."""

    name = "faircg1"
    start_at_floor = False

    def _direction(self, gradient: np.ndarray, r: np.ndarray, k: int) -> np.ndarray:
        return r + fill_budget(gradient, self._upper - r, k - r.sum())

    def lower_bound(self, u_opt: float) -> float:
        """``(1 − (1 − δ)^{1/δ})·U_opt`` with ``δ = 1/steps``."""
        return (1.0 - (1.0 - 1.0 / self.steps) ** self.steps) * u_opt


class FairCG2(_ContinuousGreedy):
    """FairCG2 (Li, Liu and Ji 2021, Theorem 4): continuous greedy from ``r`` inside ``P_r``, then pipage rounding."""

    name = "faircg2"
    start_at_floor = True

    def _direction(self, gradient: np.ndarray, r: np.ndarray, k: int) -> np.ndarray:
        return fill_budget(gradient, self._upper - r, k - r.sum())

    def lower_bound(self, u_opt: float) -> float:
        """``max(F(r), e^{-1}·F(r) + (1 − e^{-1})·(U_opt − <∇F(r), r>))``."""
        res = self.result
        mixed = math.exp(-1) * res.value_at_floor + (1 - math.exp(-1)) * (u_opt - res.gradient_dot_floor)
        return max(res.value_at_floor, mixed)
