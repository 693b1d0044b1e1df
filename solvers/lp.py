"""The distribution LP over a fixed set of columns, solved with HiGHS (highspy).

Primal (columns S with values f(S), fairness floors r, optional caps c)::

    U_opt = max  sum_S p_S f(S)
            s.t. r_u <= sum_{S ∋ u} p_S <= c_u   for every worker u   (duals lambda_u, nu_u >= 0)
                 sum_S p_S = 1                                         (dual mu, free)
                 p >= 0

Dual::

    min  mu - sum_u r_u lambda_u + sum_u c_u nu_u
    s.t. mu >= f(S) + sum_{u in S} (lambda_u - nu_u)   for every column S,   lambda, nu >= 0

Without caps ``c_u = +inf`` and ``nu = 0``.  A worker's row is one ranged HiGHS row, whose
signed dual is ``nu_u - lambda_u``: at most one of the two is non-zero.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

import highspy
import numpy as np

from .errors import InfeasibleLPError, SolverError
from .result import Result

Backend = Literal["highs", "cvxpy"]


class LPTimeLimitError(SolverError):
    """HiGHS reached the time limit before an optimum (no solution is returned)."""


@dataclass(frozen=True, eq=False)
class DistributionLPResult(Result):
    """Optimal solution of the distribution LP, primal and dual.

    ``value`` = U_opt = sum_S p_S f(S); ``probabilities`` = p (m,), non-negative and
    summing to 1; ``fairness_price`` = lambda (n,) >= 0, the marginal loss of U_opt per
    unit increase of r_u; ``convexity_dual`` = mu; ``dual_bound`` = mu - r . lambda,
    which equals ``value`` at an optimum (strong duality).  With caps, ``cap_price`` = nu
    (n,) >= 0, the utility gained per unit increase of c_u, and ``dual_bound`` = mu -
    r . lambda + c . nu; without caps it is ``None``.  ``seconds`` is the wall-clock
    time spent building and solving the model.
    """

    value: float
    probabilities: np.ndarray
    fairness_price: np.ndarray
    convexity_dual: float
    backend: str
    iterations: int | None
    dual_bound: float
    cap_price: np.ndarray | None = None

    def support(self, tol: float = 1e-12) -> np.ndarray:
        """Return the indices of the columns with p_S > tol, in increasing order."""
        return np.flatnonzero(self.probabilities > tol)


def solve_distribution_lp(
    values: np.ndarray,
    members: np.ndarray,
    r: np.ndarray,
    *,
    backend: Backend = "highs",
    tol: float = 1e-9,
    time_limit: float | None = None,
    caps: np.ndarray | None = None,
) -> DistributionLPResult:
    """Solve max sum_S p_S f(S) s.t. r_u <= sum_{S ∋ u} p_S (<= c_u), sum_S p_S = 1, p >= 0.

    ``values`` (m,) holds f(S), ``members`` (m, n) is the boolean membership matrix of
    the columns, ``r`` (n,) the fairness floors, ``caps`` (n,) the optional upper caps
    (``"highs"`` backend only).  ``tol`` is the primal and dual
    feasibility tolerance given to HiGHS (at least 1e-10); ``time_limit`` is in seconds.
    Both apply to the ``"highs"`` backend only.

    Raises ValueError on malformed input, InfeasibleLPError when the floors cannot be
    met (naming the worker when one alone is to blame), SolverError on any other
    non-optimal outcome.
    """
    if backend == "cvxpy":
        if caps is not None:
            raise ValueError("caps are only supported by the 'highs' backend")
        if time_limit is not None:
            raise ValueError("time_limit is only supported by the 'highs' backend")
        from .cvxpy_model import solve_with_cvxpy

        return solve_with_cvxpy(values, members, r)
    if backend != "highs":
        raise ValueError(f"unknown backend {backend!r}; expected 'highs' or 'cvxpy'")
    if not (np.isfinite(tol) and tol > 0):
        raise ValueError(f"tol must be a positive number, got {tol}")
    if time_limit is not None and not time_limit > 0:
        raise ValueError(f"time_limit must be positive seconds, got {time_limit}")

    values, members, r = check_lp_inputs(values, members, r)
    check_floors(members, r, tol=tol)
    if caps is not None:
        caps = check_caps(caps, r)
    return _solve_highs(values, members, r, tol=tol, time_limit=time_limit, caps=caps)


def check_caps(caps: np.ndarray, r: np.ndarray) -> np.ndarray:
    """``caps`` as a contiguous float64 array of ``r``'s shape with ``r <= caps``, or ``ValueError``."""
    caps = np.ascontiguousarray(caps, dtype=float)
    if caps.shape != r.shape:
        raise ValueError(f"caps must have shape {r.shape} (one cap per worker), got {caps.shape}")
    if np.isnan(caps).any() or (caps < r).any():
        u = int(np.flatnonzero(np.isnan(caps) | (caps < r))[0])
        raise InfeasibleLPError(f"the LP is infeasible: worker {u} has cap c_{u} = {caps[u]:g} "
                                f"below its floor r_{u} = {r[u]:g}")
    return caps


def dual_offset(prices: np.ndarray, r: np.ndarray, caps: np.ndarray | None) -> float:
    """``λ·r − ν·c`` for signed prices ``π = λ − ν`` (``λ = π⁺``, ``ν = π⁻``; ``ν = 0`` without caps).

    With it the Lagrangian bound of the LP with floors and caps is
    ``max_S [f(S) + π(S)] − dual_offset(π)``: for any distribution meeting
    ``r <= x <= c``, ``Σ p_S f(S) = Σ p_S [f(S) + π(S)] − π·x`` and ``−π·x <= −λ·r + ν·c``.
    """
    lam = np.clip(prices, 0.0, None)
    offset = float(lam @ np.asarray(r, dtype=float))
    if caps is not None:
        offset -= float(np.clip(-prices, 0.0, None) @ np.asarray(caps, dtype=float))
    return offset


def lagrangian_bound(values: np.ndarray, members: np.ndarray, r: np.ndarray,
                     lam: np.ndarray, caps: np.ndarray | None = None) -> tuple[float, float]:
    """``(max_S f(S) + π(S),  max_S f(S) + π(S) − λ·r + ν·c)`` over the given columns.

    For any prices the second number bounds the LP optimum over these columns from above
    (weak duality with the best ``μ``), whatever solver produced them: it is the certificate
    that needs no trust in the solver's dual feasibility.  Without ``caps``, ``lam`` is λ,
    clipped at 0; with caps it is the signed ``π = λ − ν`` (:func:`dual_offset`).
    """
    lam = np.asarray(lam, dtype=float)
    if caps is None:
        lam = np.clip(lam, 0.0, None)
    values = np.asarray(values, dtype=float)
    best = -np.inf
    rows = max(1, (1 << 24) // max(1, members.shape[1]))
    for lo in range(0, values.size, rows):  # bounded temporaries for a million columns
        best = max(best, float((values[lo: lo + rows] + members[lo: lo + rows] @ lam).max(initial=-np.inf)))
    return best, best - dual_offset(lam, r, caps)


def check_lp_inputs(
    values: np.ndarray, members: np.ndarray, r: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate shapes and entries; return (values float64, members bool, r float64)."""
    # HiGHS reads raw buffers: arrays handed to it must be C-contiguous float64.
    values = np.ascontiguousarray(values, dtype=float)
    if values.ndim != 1:
        raise ValueError(f"values must be 1-D (one f(S) per column), got shape {values.shape}")
    members_in = np.asarray(members)
    if members_in.ndim != 2:
        raise ValueError(f"members must be 2-D (columns x workers), got shape {members_in.shape}")
    if members_in.dtype != bool:
        if not np.isin(members_in, (0, 1)).all():
            raise ValueError("members must be boolean (or 0/1) membership indicators")
        members_in = members_in.astype(bool)
    m, n = members_in.shape
    if values.shape[0] != m:
        raise ValueError(
            f"values has length {values.shape[0]} but members has {m} rows (one per column)"
        )
    r = np.ascontiguousarray(r, dtype=float)
    if r.ndim != 1 or r.shape[0] != n:
        raise ValueError(f"r must have shape ({n},) (one floor per worker), got {r.shape}")
    if not np.isfinite(values).all():
        raise ValueError("values must be finite")
    if not np.isfinite(r).all() or (r < 0).any():
        raise ValueError("fairness floors r must be finite and >= 0")
    return values, members_in, r


def check_floors(members: np.ndarray, r: np.ndarray, *, tol: float = 1e-9) -> None:
    """Raise InfeasibleLPError for floors that no distribution over ``members`` can meet.

    Detects the causes that can be named: no columns at all, r_u > 1, r_u > 0 for a
    worker in no column, and sum_u r_u > max_S |S| (since sum_u sum_{S ∋ u} p_S =
    sum_S p_S |S|).  Joint infeasibility beyond these is left to the solver.
    """
    m, n = members.shape
    if m == 0:
        raise InfeasibleLPError("the LP is infeasible: there are no columns to distribute over")
    over_one = np.flatnonzero(r > 1 + tol)
    if over_one.size:
        u = int(over_one[0])
        raise InfeasibleLPError(
            f"the LP is infeasible: worker {u} has floor r_{u} = {r[u]:g} > 1"
        )
    uncovered = np.flatnonzero((r > tol) & ~members.any(axis=0))
    if uncovered.size:
        u = int(uncovered[0])
        raise InfeasibleLPError(
            f"the LP is infeasible: worker {u} has floor r_{u} = {r[u]:g} > 0 "
            f"but no column contains it"
        )
    largest = int(members.sum(axis=1).max())
    if r.sum() > largest + tol * max(1, n):
        raise InfeasibleLPError(
            f"the LP is infeasible: the floors sum to {r.sum():g}, more than the largest "
            f"column size {largest}"
        )


def make_result(
    *,
    values: np.ndarray,
    r: np.ndarray,
    primal: np.ndarray,
    fairness_price: np.ndarray,
    convexity_dual: float,
    status: str,
    backend: str,
    iterations: int | None,
    seconds: float,
    caps: np.ndarray | None = None,
) -> DistributionLPResult:
    """Clean raw solver output into a DistributionLPResult.

    Tiny negative probabilities and duals (solver round-off) are clipped to 0 and p is
    renormalised, so ``value`` is recomputed as values . p.  With ``caps``,
    ``fairness_price`` is the signed ``λ − ν`` and is split into its two parts.
    """
    p = np.clip(np.asarray(primal, dtype=float), 0.0, None)
    total = p.sum()
    if not total > 0:
        raise SolverError(f"{backend} returned a primal solution that sums to {total}")
    p /= total
    signed = np.asarray(fairness_price, dtype=float)
    lam = np.clip(signed, 0.0, None)
    nu = None if caps is None else np.clip(-signed, 0.0, None)
    mu = float(convexity_dual)
    p.setflags(write=False)
    lam.setflags(write=False)
    return DistributionLPResult(
        value=float(values @ p),
        probabilities=p,
        fairness_price=lam,
        convexity_dual=mu,
        backend=backend,
        iterations=iterations,
        dual_bound=mu - dual_offset(signed, r, caps),
        cap_price=nu,
        status=status,
        success=status == "optimal",
        message=f"{backend}: {status}, value {float(values @ p):.10g}",
        seconds=seconds,
    )


def new_highs() -> highspy.Highs:
    """A silent HiGHS instance (no banner on stdout, ``output_flag`` off)."""
    # highspy.Highs() prints the HiGHS banner to stdout before any option can be set;
    # the bare pybind class does not, and the callback machinery is unused here.
    cls = getattr(highspy, "_Highs", highspy.Highs)
    h = cls()
    h.setOptionValue("output_flag", False)
    return h


def set_option(h: highspy.Highs, name: str, value: object) -> None:
    """Set a HiGHS option; ``ValueError`` if HiGHS rejects it."""
    if h.setOptionValue(name, value) != highspy.HighsStatus.kOk:
        raise ValueError(f"HiGHS rejected option {name} = {value!r}")


def set_time_limit(h: highspy.Highs, seconds: float | None) -> None:
    """Give an LP ``seconds`` more for its next ``run`` (``None``: no limit).

    For an LP, HiGHS (1.16) compares its ``time_limit`` option with the run time the object
    has accumulated over **all** its ``run`` calls (``getRunTime``), not with the time of the
    current call. A model solved again and again (the column-generation master) must therefore
    be given the accumulated time plus the budget; otherwise it stops at once, as "time limit
    reached", as soon as its past runs add up to the budget. A MIP's time limit counts from
    the start of its run, so MIP models set ``time_limit`` directly. Both behaviours are
    pinned by ``tests/test_solvers.py``.
    """
    if seconds is None or not np.isfinite(seconds):
        set_option(h, "time_limit", highspy.kHighsInf)
    else:
        set_option(h, "time_limit", float(h.getRunTime()) + max(1e-3, float(seconds)))


def _solve_highs(
    values: np.ndarray,
    members: np.ndarray,
    r: np.ndarray,
    *,
    tol: float,
    time_limit: float | None,
    caps: np.ndarray | None = None,
) -> DistributionLPResult:
    start_time = time.perf_counter()
    m, n = members.shape
    h = new_highs()
    set_option(h, "primal_feasibility_tolerance", tol)
    set_option(h, "dual_feasibility_tolerance", tol)
    # Primal simplex returns a basic optimum (support <= n + 1) and, on these wide LPs
    # (few rows, up to ~10^6 columns), is 5-15x faster than dual simplex or IPM; HiGHS
    # presolve only costs time here (measured: n=20, k=10 takes 7.7 s with the
    # defaults, 0.5 s like this).
    set_option(h, "solver", "simplex")
    set_option(h, "simplex_strategy", 4)
    set_option(h, "presolve", "off")
    if time_limit is not None:
        set_option(h, "time_limit", float(time_limit))

    # Column S has a 1 in the row of every u in S and in the convexity row n; the
    # row-major flat positions of the augmented matrix are exactly CSC order.
    augmented = np.empty((m, n + 1), dtype=bool)
    augmented[:, :n] = members
    augmented[:, n] = True
    row_index = (np.flatnonzero(augmented) % (n + 1)).astype(np.int32)
    col_start = np.zeros(m + 1, dtype=np.int32)
    np.cumsum(np.count_nonzero(augmented, axis=1), out=col_start[1:])

    inf = highspy.kHighsInf
    # The flat-array passModel copies numpy buffers directly (setting HighsLp fields
    # converts element by element).  It reads num_col integrality entries even for an
    # LP, so they must be passed explicitly.
    status = h.passModel(
        m,
        n + 1,
        row_index.size,
        int(highspy.MatrixFormat.kColwise),
        int(highspy.ObjSense.kMaximize),
        0.0,
        values,
        np.zeros(m),
        np.full(m, inf),
        np.append(r, 1.0),
        np.append(np.full(n, inf) if caps is None else caps, 1.0),
        col_start,
        row_index,
        np.ones(row_index.size),
        np.zeros(m, dtype=np.int32),
    )
    if status == highspy.HighsStatus.kError:
        raise SolverError("HiGHS rejected the LP model")

    run_status = h.run()
    model_status = h.getModelStatus()
    status_text = h.modelStatusToString(model_status)
    if model_status in (
        highspy.HighsModelStatus.kInfeasible,
        highspy.HighsModelStatus.kUnboundedOrInfeasible,
    ):
        raise InfeasibleLPError(
            f"the LP is infeasible: the fairness floors cannot be met jointly "
            f"(HiGHS status: {status_text})"
        )
    if model_status == highspy.HighsModelStatus.kTimeLimit:
        raise LPTimeLimitError(f"HiGHS reached the time limit of {time_limit} s before optimality")
    if model_status != highspy.HighsModelStatus.kOptimal or run_status == highspy.HighsStatus.kError:
        raise SolverError(f"HiGHS did not solve the LP (status: {status_text})")

    solution = h.getSolution()
    row_dual = np.asarray(solution.row_dual)
    info = h.getInfo()
    iterations = sum(
        max(0, int(c))
        for c in (info.simplex_iteration_count, info.ipm_iteration_count, info.crossover_iteration_count)
    )
    # HiGHS reports row duals as d(objective)/d(row bound) in the model's own sense:
    # raising r_u lowers the maximum, so the >= rows carry -lambda_u (a binding cap carries
    # +nu_u); the equality row carries +mu.
    return make_result(
        values=values,
        r=r,
        primal=np.asarray(solution.col_value),
        fairness_price=-row_dual[:n],
        convexity_dual=float(row_dual[n]),
        status="optimal",
        backend="highs",
        iterations=iterations,
        seconds=time.perf_counter() - start_time,
        caps=caps,
    )
