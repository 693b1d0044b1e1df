"""Exact pricing for concave functions of modular sums, by tangent cuts in one MILP.

The utilities ``f(S) = Σ_j c_j·φ_j(a_j(S))`` with ``a_j(S) = Σ_{u∈S} W_ju``, ``W >= 0``,
``c >= 0`` and ``φ_j`` concave increasing:

- concave of modular: ``φ = sqrt`` or ``log1p``, ``W`` the features, ``c = 1``;
- accuracy: one term, ``φ(s) = (1 − a) − b·s^c`` (``b > 0``, ``c < 0``), ``W`` the sizes;
- propensity-weighted accuracy: one term per stratum, ``W_j`` the effective sizes and
  ``c_j = π_j``.

The accuracy curves jump at ``∅`` (``f(∅) = 0``, not ``φ(0) = −∞``), which breaks
submodularity there; it does not matter here: ``|S| = k >= 1`` is forced, so ``a_j``
ranges over ``[lo_j, hi_j]`` (the sums of the ``k`` smallest and largest ``W_ju``) and only
``φ_j`` on that range enters.

MILP (outer approximation; Duran & Grossmann 1986, Kelley 1960)::

    max Σ_j c_j t_j + λ·x   s.t.  a_j = W_j·x,
                                   t_j <= φ_j(p) + φ_j'(p)·(a_j − p)   for the cut points p,
                                   φ_j(lo_j) <= t_j <= φ_j(hi_j),  lo_j <= a_j <= hi_j,
                                   Σ x = k,  x binary.

The sums ``a_j`` are columns of their own, so each tangent is a row with two nonzeros and
``W`` appears once; written on ``x`` directly every tangent repeats the dense row ``W_j``.
Measured on concave of modular (``sqrt``, ``n = 100``, ``k = 10``, 50 dense features,
the instance of ``benchmarks/bench_pricing.py``) at the relaxation duals, one exact call: 206,011
nonzeros and 33 s CPU on ``x``, 8,818 nonzeros and 6-8 s CPU with ``a_j`` (same bound,
same set).  What is left is the search: the root gap is about ``0.16 %`` and the first
MILP solve meets an integer point the tangents over-estimate (a second solve follows);
stopping that first solve at such a point (a HiGHS interrupt callback) and restarting was
tried and is slower (21 restarts, 21 s CPU), since every restart redoes the root.

Every tangent over-estimates the concave ``φ_j``, so the MILP's dual bound is an upper bound
on the pricing problem; the cut loop of :class:`~fairsched.lp.pricing.milp.MilpPricing`
adds the tangents at the incumbent's sums ``W_j·x̂`` until its true value meets that bound.
When ``lo_j = 0`` the chord ``t_j <= (φ(w_j)/w_j)·W_j·x`` (``w_j`` the least positive
``W_ju``) is exact at ``a_j = 0`` and valid at every ``k``-set, since ``a_j`` is then 0 or at
least ``w_j`` and ``φ(a)/a`` is non-increasing.  ``docs/mathematics.md`` §3.

**Submodular cuts** (``sqrt`` and ``log1p``, where ``φ(0) = 0``).  The tangents bound ``t_j`` by
``φ_j`` of the *fractional* sum ``W_j·x``, which a fractional ``x`` spread thinly over many
workers over-estimates badly (``sqrt`` is steep near 0).  Each term ``h(S) = φ(a_j(S))`` is
submodular, so for any set ``T`` the inequalities of Nemhauser, Wolsey and Fisher ("An
analysis of approximations for maximizing submodular set functions", 1978; used for
concave-of-modular utilities by Ahmed and Atamtürk, "Maximizing a class of submodular utility
functions", 2011) hold at every set ``S``, with ``ρ_u(A) = h(A + u) − h(A)``::

    h(S) <= h(T) + Σ_{u∈S∖T} ρ_u(T) − Σ_{u∈T∖S} δ_u,      δ_u = φ(A) − φ(A − W_ju),
    h(S) <= h(T) + Σ_{u∈S∖T} φ(W_ju) − Σ_{u∈T∖S} ρ_u(T − u),

the first with ``A = a_j(T)`` plus the ``k`` largest ``W_ju`` outside ``T`` (``|S| = k`` bounds
``a_j(S ∪ T)`` by it, a lifting of the textbook ``ρ_u(N − u)``).  At a fractional LP optimum
``x*`` they are written on ``x`` with ``T`` the ``k`` largest ``x*_u`` and added where violated.
Measured on sparse features (5 of 50 per worker, ``n = 100``, ``k = 10``; ``python
benchmarks/bench_concave_cuts.py --backend highs``): see ``benchmarks/README.md``, "Submodular
cuts for concave of modular".  With the SCIP backend the same cuts (:meth:`ConcaveTerm.submodular_cuts`)
are SCIP's separator (:mod:`fairsched.lp.pricing.concave_scip`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from fairsched.extras import require
from fairsched.lp.pricing.concave_scip import CURVES, scip_installed, solve_concave
from fairsched.lp.pricing.milp import MilpModel, MilpPricing, Term
from fairsched.solvers.colgen import PricingResult
from fairsched.submodular.lazy_greedy import top_by_key
from fairsched.utilities import (
    AccuracyUtility,
    ConcaveModular,
    PropensityWeightedAccuracy,
)
from fairsched.utilities.base import SetFunction

#: tangents per term placed before the first solve, geometrically over ``[lo_j, hi_j]``.
#: 24 rather than 4: fewer cut rounds per call (one MILP solve instead of two at the
#: relaxation duals), and at the 120 s limit of ``benchmarks/bench_pricing.py`` the certified
#: gap fell from 1.66e-3 to 9.9e-4 (sqrt) and from 3.95e-3 to 1.01e-3 (log1p), measured
#: back to back at load about 2
INITIAL_TANGENTS = 24
#: a term's variable counts as over-estimating once above ``φ(a)`` by this (relative)
CUT_TOLERANCE = 1e-10
#: an ``x_u`` this far from 0 and 1 makes a point fractional (the submodular cuts are sought there)
FRACTIONAL = 1e-6
#: whether the terms with ``φ(0) = 0`` add the submodular cuts (module docstring); off only to
#: measure what they bring (``benchmarks/bench_concave_cuts.py``)
SUBMODULAR_CUTS = True


@dataclass
class ConcaveForm:
    """``f(S) = Σ_j coef_j·φ_j(W_j·1_S)``; ``curve`` is ``"sqrt"``, ``"log1p"`` or
    ``"power"`` (``φ_j(s) = (1 − a_j) − b_j·s^{c_j}``)."""

    W: np.ndarray  # (J, n), >= 0
    coef: np.ndarray  # (J,), >= 0
    curve: str
    a: np.ndarray | None = None
    b: np.ndarray | None = None
    c: np.ndarray | None = None

    def _params(self, rows: np.ndarray, ndim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        shape = (-1,) + (1,) * (ndim - 1)
        return (self.a[rows].reshape(shape), self.b[rows].reshape(shape), self.c[rows].reshape(shape))

    def phi(self, s: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """``φ_j(s_j)`` for the terms ``rows`` (all by default); ``s`` has them on axis 0."""
        s = np.asarray(s, dtype=float)
        if self.curve == "sqrt":
            return np.sqrt(s)
        if self.curve == "log1p":
            return np.log1p(s)
        rows = np.arange(self.W.shape[0]) if rows is None else rows
        a, b, c = self._params(rows, s.ndim)
        return (1.0 - a) - b * np.power(s, c)

    def dphi(self, s: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """``φ_j'(s_j)`` (``s > 0``)."""
        s = np.asarray(s, dtype=float)
        if self.curve == "sqrt":
            return 0.5 / np.sqrt(s)
        if self.curve == "log1p":
            return 1.0 / (1.0 + s)
        rows = np.arange(self.W.shape[0]) if rows is None else rows
        _, b, c = self._params(rows, s.ndim)
        return -b * c * np.power(s, c - 1.0)


def concave_form(utility: SetFunction) -> ConcaveForm:
    """The :class:`ConcaveForm` of a concave-modular or accuracy utility (on non-empty sets)."""
    if isinstance(utility, ConcaveModular):
        J = utility.features.shape[0]
        return ConcaveForm(utility.features, np.ones(J), utility.concave)
    if isinstance(utility, AccuracyUtility):
        one = np.ones(1)
        return ConcaveForm(utility.sizes[None, :], one, "power", utility.a * one, utility.b * one,
                           utility.c * one)
    if isinstance(utility, PropensityWeightedAccuracy):
        return ConcaveForm(utility.effective.T, utility.shares, "power", utility.a, utility.b, utility.c)
    raise TypeError(f"no concave form for a {type(utility).__name__}")


class ConcaveTerm(Term):
    """``Σ_j coef_j·φ_j(W_j·x)`` by outer-approximation tangents (module docstring)."""

    lazy = True

    def __init__(self, form: ConcaveForm, k: int):
        keep = (form.coef > 0) & (form.W.max(axis=1) > 0)
        self.form = form
        self.rows = np.flatnonzero(keep)
        W = form.W[self.rows]
        self.W = sp.csr_array(W)
        self.dense = W  # for the submodular cuts, computed at every LP point they are sought at
        ordered = np.sort(W, axis=1)
        self.lo = ordered[:, :k].sum(axis=1)
        self.hi = ordered[:, -k:].sum(axis=1)
        positive = np.where(W > 0, W, np.inf)
        self.least = positive.min(axis=1)
        self.k = k

    def build(self, model: MilpModel, weight: float) -> None:
        J = self.rows.size
        lower = self.form.phi(self.lo, self.rows)
        upper = self.form.phi(self.hi, self.rows)
        t = model.add_columns(weight * self.form.coef[self.rows], lower, upper)
        # a_j = W_j·x as its own column: every tangent is then a 2-nonzero row on (t_j, a_j)
        # instead of a dense row on x (module docstring: 25x fewer nonzeros, 5-10x faster LPs)
        slack = 1e-9 * np.maximum(1.0, self.hi)
        a = model.add_columns(np.zeros(J), np.maximum(0.0, self.lo - slack), self.hi + slack)
        self.t, self.a = t, a
        self.columns = np.concatenate([t, a])
        if J == 0:
            return
        row = np.repeat(np.arange(J), np.diff(self.W.indptr))
        matrix = model.difference_rows(a, row, self.W.indices, self.W.data)
        model.add_rows(np.zeros(J), matrix, lower=np.zeros(J))
        zero = np.flatnonzero(self.lo <= 0)
        if zero.size:  # the chord through 0 and the least positive entry (module docstring)
            slope = self.form.phi(self.least[zero], self.rows[zero]) / self.least[zero]
            model.add_rows(np.zeros(zero.size), self._rows(model, zero, slope))
        points = []
        for i in range(J):
            start = max(self.lo[i], self.least[i])
            if not self.hi[i] > start:
                points.append(np.array([self.hi[i]]))
                continue
            points.append(np.geomspace(start, self.hi[i], INITIAL_TANGENTS))
        terms = np.repeat(np.arange(J), [p.size for p in points])
        self._tangents(model, terms, np.concatenate(points))

    def _tangents(self, model: MilpModel, terms: np.ndarray, at: np.ndarray) -> int:
        """The tangents of the terms ``terms`` at the points ``at`` (each keyed by both, so
        none is added twice; cuts of the model's pool after the build)."""
        positive = at > 0
        terms, at = terms[positive], at[positive]
        if terms.size == 0:
            return 0

        def rows(fresh: np.ndarray) -> tuple[np.ndarray, sp.csr_array]:
            """``t_j − slope·a_j <= φ_j(p) − slope·p`` with ``slope = φ_j'(p)``."""
            which, point = terms[fresh], at[fresh]
            slope = self.form.dphi(point, self.rows[which])
            return self.form.phi(point, self.rows[which]) - slope * point, self._rows(model, which, slope)

        return model.add_cuts([(self, int(i), float(p)) for i, p in zip(terms, at)], rows)

    def _rows(self, model: MilpModel, terms: np.ndarray, slope: np.ndarray) -> sp.csr_array:
        """Left-hand sides ``t_j − slope·a_j`` for each (term, slope)."""
        return model.difference_rows(self.t[terms], np.arange(terms.size), self.a[terms], slope)

    def start(self, x: np.ndarray) -> np.ndarray:
        sums = self.W @ x.astype(float)
        return np.concatenate([self.form.phi(sums, self.rows), sums])

    def separate(self, model: MilpModel, x: np.ndarray, own: np.ndarray) -> int:
        x = np.asarray(x, dtype=float)
        sums = np.maximum(self.W @ x, 0.0)
        sums = np.clip(sums, self.lo, self.hi)
        true = self.form.phi(np.maximum(sums, 1e-300), self.rows)
        over = own[: self.rows.size] - true > CUT_TOLERANCE * np.maximum(1.0, np.abs(true))
        terms = np.flatnonzero(over & (sums > 0))
        added = self._tangents(model, terms, sums[terms])
        fractional = np.abs(x - np.round(x)) > FRACTIONAL
        if self.submodular and fractional.any():
            added += self._submodular_cuts(model, x, own[: self.rows.size])
        return added

    @property
    def submodular(self) -> bool:
        """Whether the submodular cuts apply: curves with ``φ(0) = 0`` (module docstring), unless
        :data:`SUBMODULAR_CUTS` is off."""
        return SUBMODULAR_CUTS and self.form.curve in ("sqrt", "log1p")

    def submodular_cuts(self, x: np.ndarray, members: np.ndarray | None = None,
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Both submodular cuts of every term at ``T`` = ``members`` (a mask; default the ``k``
        largest ``x_u``, as :meth:`separate` takes it; module docstring), as
        ``t_j <= const + coef·x``: ``(terms, const, coef)``, two rows per term (first form,
        then second), ``coef`` dense ``(2J, n)``."""
        W = self.dense
        J = W.shape[0]
        members = self._largest(x) if members is None else members
        phi = self.form.phi  # sqrt or log1p: no per-term parameters
        in_T = W[:, members].sum(axis=1)
        h_T = phi(in_T)
        outside = np.where(members[None, :], 0.0, W)
        reach = in_T + -np.sort(-outside, axis=1)[:, : self.k].sum(axis=1)
        # removing u ∈ T from any S ∪ T loses at least δ_u (concavity: the larger the sum, the less)
        lifted = phi(reach)[:, None] - phi(np.maximum(reach[:, None] - W, 0.0))
        add_first = phi(in_T[:, None] + W) - h_T[:, None]
        add_second = phi(W)
        drop_second = h_T[:, None] - phi(np.maximum(in_T[:, None] - W, 0.0))
        coefs, consts = [], []
        for add, drop in ((add_first, lifted), (add_second, drop_second)):
            coefs.append(np.where(members[None, :], drop, add))
            consts.append(h_T - np.where(members[None, :], drop, 0.0).sum(axis=1))
        terms = np.tile(np.arange(J), 2)
        return terms, np.concatenate(consts), np.concatenate(coefs)

    def _largest(self, x: np.ndarray) -> np.ndarray:
        """The mask of the ``k`` largest entries of ``x`` (the first on ties): the cuts' ``T``."""
        x = np.asarray(x, dtype=float)
        members = np.zeros(x.size, dtype=bool)
        members[top_by_key(x, np.arange(x.size), self.k)] = True
        return members

    def _submodular_cuts(self, model: MilpModel, x: np.ndarray, own: np.ndarray) -> int:
        members = self._largest(x)
        terms, const, coef = self.submodular_cuts(x, members)
        bound = const + coef @ x
        violated = np.flatnonzero(own[terms] - bound > CUT_TOLERANCE * np.maximum(1.0, np.abs(bound)))
        if violated.size == 0:
            return 0
        at = members.tobytes()  # the cuts' T: with the term and the form, what makes a cut
        keys = [(self, "submodular", int(i % self.rows.size), int(i // self.rows.size), at) for i in violated]

        def rows(fresh: np.ndarray) -> tuple[np.ndarray, sp.csr_array]:
            which = violated[fresh]
            row, col = np.nonzero(coef[which])
            return const[which], model.difference_rows(self.t[terms[which]], row, col, coef[which][row, col])

        return model.add_cuts(keys, rows)


def concave_swap_deltas(utility: SetFunction, mask: np.ndarray) -> np.ndarray:
    """``f(S − u + v) − f(S)`` for members ``u`` (rows) and outsiders ``v`` (columns), for
    every utility with a :func:`concave_form`; memory ``O(|S|·n)``."""
    form = concave_form(utility)
    inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
    sums = form.W[:, inside].sum(axis=1)
    out = np.zeros((inside.size, outside.size))
    for j in np.flatnonzero(form.coef > 0):
        moved = sums[j] - form.W[j, inside][:, None] + form.W[j, outside][None, :]
        rows = np.array([j])
        base = form.phi(np.array([sums[j]]), rows)[0]
        out += form.coef[j] * (form.phi(np.maximum(moved, 0.0)[None], rows)[0] - base)
    return out


def concave_modular_term(utility: ConcaveModular, k: int) -> ConcaveTerm:
    return ConcaveTerm(concave_form(utility), k)


def accuracy_term(utility: AccuracyUtility, k: int) -> ConcaveTerm:
    return ConcaveTerm(concave_form(utility), k)


def propensity_term(utility: PropensityWeightedAccuracy, k: int) -> ConcaveTerm:
    return ConcaveTerm(concave_form(utility), k)


#: the backend of :class:`ConcavePricing` when none is given (``benchmarks/bench_pricing.py
#: --concave-backend`` sets it to compare the two)
BACKEND = "auto"


class ConcavePricing(MilpPricing):
    """Exact pricing for :class:`~fairsched.utilities.ConcaveModular`, and for
    :class:`~fairsched.utilities.PropensityWeightedAccuracy` (one tangent-cut term per stratum).

    ``backend`` chooses who solves the exact part of a call, after the heuristic: ``"highs"``
    the tangent-cut MILP of this module, ``"scip"`` SCIP with the concave rows themselves
    (:mod:`fairsched.lp.pricing.concave_scip`; ``sqrt`` and ``log1p`` only, needs the ``scip``
    extra), ``"auto"`` SCIP where it applies and is installed, else HiGHS; without one,
    :data:`BACKEND`.  The continuous relaxation (:meth:`relaxation_duals`,
    :meth:`relaxation_bound`) is HiGHS's either way.
    """

    name = "concave-milp"
    swap_deltas = staticmethod(concave_swap_deltas)
    BACKENDS = ("auto", "highs", "scip")

    def __init__(self, utility: SetFunction, k: int, *, backend: str | None = None, **options: Any):
        backend = BACKEND if backend is None else backend
        if backend not in self.BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(self.BACKENDS)}, not {backend!r}")
        self.form = concave_form(utility)
        super().__init__(utility, k, **options)
        fits = options.get("terms") is None and self.form.curve in CURVES
        if backend == "scip":
            if not fits:
                given = "custom terms" if options.get("terms") is not None else f"a {self.form.curve!r} curve"
                raise ValueError(f"the SCIP backend handles concave of modular with the curves {CURVES} "
                                 f"and no custom terms, not {given}")
            require("pyscipopt", "SCIP pricing (backend='scip')")
        #: ``"scip"`` or ``"highs"``: who solves the exact part of each call
        self.backend = "scip" if fits and (backend == "scip" or (backend == "auto" and scip_installed())) \
            else "highs"
        if self.backend == "scip":
            self.name = "concave-scip"

    def make_terms(self, utility: SetFunction) -> list[tuple[float, Term]]:
        return [(1.0, ConcaveTerm(self.form, self.k))]

    def _solve_exactly(self, lam: np.ndarray, target: float | None, enough: float | None, stop: float,
                       warm: np.ndarray, columns: list[np.ndarray], best: float, best_mask: np.ndarray,
                       upper: float, tol: float, started: float) -> PricingResult:
        """SCIP's branch and bound from the heuristic's best set (``backend == "scip"``), else
        HiGHS's cut loop (:meth:`MilpPricing._solve_exactly`)."""
        if self.backend != "scip":
            return super()._solve_exactly(lam, target, enough, stop, warm, columns, best, best_mask,
                                          upper, tol, started)
        term = self.terms[0][1]
        with self._timed_exact():
            # the SCIP model is f itself: ConcaveTerm adds nothing to x_cost or the offset
            answer = solve_concave(self.form.W, self.form.coef, self.form.curve, lam, self.k,
                                   start=best_mask, rel_gap=self.rel_gap, stop=stop, target=target,
                                   enough=enough, max_solutions=self.max_columns,
                                   cuts=term.submodular_cuts if term.submodular else None)
        self.stats["rounds"] += 1
        self.stats["nodes"] += answer.nodes
        self.stats["cuts"] += answer.cuts
        columns.extend(answer.masks)
        # _finish values every column and counts the call exact if the bound is within the MIP gap of the best
        return self._finish(columns, lam, min(upper, answer.upper_bound), started, exact=True)
