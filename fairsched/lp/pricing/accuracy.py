"""Exact pricing for the accuracy utility: ``max_{|S|=k} g(L(S)) + λ(S)``.

``g(s) = (1 − a) − b·s^c`` (``b > 0``, ``c < 0``) is concave and increasing and
``L(S) = Σ_{u∈S} L_u`` with positive sizes.  Three steps:

1. **Lagrangian bound.**  For a slope ``η >= 0`` let ``φ(η) = max_{s∈[s_lo, s_hi]} g(s) − ηs``
   (``s_lo``/``s_hi`` the smallest/largest size of a ``k``-set).  Then ``g(s) <= φ(η) + ηs``
   on that range, so with ``w = ηL + λ``::

       max_S g(L(S)) + λ(S)  <=  B(η) = φ(η) + (sum of the k largest w_u).

   ``B`` is convex in ``η`` with subgradient ``L(T_η) − s(η)`` (``T_η`` the top-``k`` set,
   ``s(η)`` the maximiser in ``φ``); bracketing its sign change finds ``min_η B``.  This is the
   value of the continuous relaxation over the ``k``-set polytope.  Every ``T_η`` met is a
   candidate; a 1-swap local search on the true objective improves the best.
2. **Variable fixing** (reduced-cost fixing, as in Lagrangian relaxation for knapsack
   problems; Martello & Toth 1990, §2.8): relative to ``T_η``, any set ``S`` satisfies
   ``g(L(S)) + λ(S) <= B(η) − Σ_{u∈S△T} |w_u − τ|`` for a threshold ``τ`` between the
   ``k``-th and ``k+1``-st largest ``w``.  A member of ``T_η`` with
   ``w_u − w_(k+1) >= B(η) − best`` is in every better set, an outsider with
   ``w_(k) − w_u >= B(η) − best`` in none.  Fixing repeats on the reduced problem.
3. **Exact search on the free items**: depth-first branch and bound whose nodes are bounded
   and fixed as above (both children's bounds and top sets computed as soon as a node is
   split, so that a sibling's incumbent can close a child whose bound ties the optimum to
   round-off) and branched on the item nearest the top-``k`` threshold, or first on
   an outlier (a free item :data:`OUTLIER` times the top set's mean size): the bound's size
   range ``[s_lo, s_hi]`` spans its presence and stays loose until it is decided, while at
   prices under which thousands of items tie at the threshold
   (:func:`~fairsched.lp.pricing.balanced.level_duals`, ``n = 10,000``) branching there ran
   out of budget, and on the outlier first it closes in 9 nodes.  A node
   with at most :data:`ENUMERATE_LIMIT` completions is enumerated; with
   integer sizes a node whose free items are few enough is solved outright by a dynamic
   programme over (swaps in − swaps out, size change in units of ``gcd(L)``) keeping the
   least Lagrangian loss ``Σ |w_u − τ|``; it is exact by the identity
   ``g(L(S)) + λ(S) = ψ(L(S)) + ηs_0 + w(S)`` with ``ψ(s) = g(s) − ηs``.

Why not the parametric sweep alone: the sets ``T_η`` (top ``k`` of ``ηL + λ`` over all
``η >= 0``) are the upper-hull vertices of the points ``(L(S), λ(S))``, and ``g(x) + y`` is
increasing in both but only quasi-concave, so its best point can lie strictly inside that
hull (between two hull vertices whose sizes straddle the bend of ``g``).  The sweep therefore
gives the bound ``min_η B(η)`` (the maximum over the hull) and candidates, and steps 2–3
close the gap to the maximum over the actual ``k``-sets.

All arithmetic is in float64 on the original objective, so "exact" means to round-off:
the returned ``upper_bound`` equals the best value found up to :data:`EXACT_RTOL`.  (A
HiGHS MILP with outer-approximation tangent cuts was tried first: its pruning tolerance,
``mip_feasibility_tolerance`` >= 1e-10 on an objective whose candidates differ by 1e-9,
left bounds open.)  Only when the search exceeds :data:`NODE_LIMIT` nodes,
:data:`TIME_BUDGET` CPU seconds per call (CPU time, so that a loaded machine does not change
the answer) or the caller's wall-clock ``deadline`` is ``exact`` false; ``upper_bound`` is
then the largest bound of an open node, still certified.

:meth:`AccuracyPricing.relaxation_duals` gives the λ at which the Lagrangian bound equals
Jensen's bound ``g(max{L·x : x >= r, Σx = k, x <= 1})`` on ``U_opt``; column generation
prices it first, so its upper bound is at least that good from the start.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from fairsched.lp.pricing.base import EXACT_RTOL, PricingOracle, ranked
from fairsched.solvers import k_subset_masks
from fairsched.solvers.colgen import PricingResult
from fairsched.utilities.accuracy import AccuracyUtility

#: items × states a DP table may have before the node is branched on instead
DP_WORK_LIMIT = 30_000_000
#: a node whose free items admit at most this many completions is enumerated outright
ENUMERATE_LIMIT = 5_000
#: runners-up of an enumerated node returned as extra columns
EXTRA_FROM_ENUMERATION = 10
#: branch-and-bound nodes per pricing call before giving up exactness
NODE_LIMIT = 20_000
#: CPU seconds (``time.process_time``) of branch and bound per pricing call (checked between nodes)
TIME_BUDGET = 2.0
#: members × outsiders first evaluated exactly when looking for the best swaps, and the most
SWAP_BLOCK = 64
SWAP_BLOCK_MAX = 2048
#: a free item this many times the top-k set's mean size is branched on first
OUTLIER = 10.0
_GRID = 15  # slopes evaluated per bracketing round
_ROUNDS = 12  # 16^12: the bracket reaches double precision in log η
_TRAIL = 8  # best (η, B(η), T_η) kept for candidates and fixing
#: relative round-off margin of the Lagrangian's candidate filter (it keeps, never drops, near-ties)
_FILTER_TOLERANCE = 1e-12


@dataclass
class _Sub:
    """The (reduced) problem: pick ``k`` of ``items`` on top of a fixed base (size, λ)."""

    items: np.ndarray  # worker indices that are still free
    k: int
    base_size: float
    base_lam: float


class AccuracyPricing(PricingOracle):
    """Exact ``max_{|S|=k} f(S) + λ(S)`` for :class:`~fairsched.utilities.AccuracyUtility`."""

    exact = True

    def __init__(self, utility: AccuracyUtility, k: int, *, max_columns: int = 10,
                 dp_work_limit: int = DP_WORK_LIMIT, node_limit: int = NODE_LIMIT,
                 time_budget: float = TIME_BUDGET, enumerate_limit: int = ENUMERATE_LIMIT):
        super().__init__(utility.n, k, max_columns)
        self.utility = utility
        self.sizes = np.asarray(utility.sizes, dtype=float)
        ordered = np.sort(self.sizes)
        self.s_lo, self.s_hi = float(ordered[:k].sum()), float(ordered[-k:].sum())
        integral = bool(np.all(self.sizes == np.round(self.sizes))) and self.s_hi < 2**52
        self.unit = int(np.gcd.reduce(self.sizes.astype(np.int64))) if integral else 0
        self.name = "accuracy-dp" if integral else "accuracy-bb"
        self.dp_work_limit = dp_work_limit
        self.node_limit = node_limit
        self.time_budget = time_budget
        #: a ``time.perf_counter()`` value: branch and bound stops there too (set by optimum)
        self.deadline: float | None = None
        self.enumerate_limit = enumerate_limit
        #: bound both children when a node is split (:meth:`_child`); off only to measure
        #: the search without it (``benchmarks/bench_near_ties.py``)
        self.look_ahead = True
        self._masks: dict[tuple[int, int], np.ndarray] = {}
        self.stats = {"calls": 0, "enumerated": 0, "dp": 0, "nodes": 0, "inexact": 0, "free": 0}

    # -- the curve -------------------------------------------------------------------------
    def g(self, s: np.ndarray | float) -> np.ndarray | float:
        return self.utility.curve(s)

    def dg(self, s: np.ndarray | float) -> np.ndarray | float:
        return self.utility.slope(s)

    def _argmax_s(self, eta: float, lo: float, hi: float) -> float:
        """The ``s`` in ``[lo, hi]`` maximising ``g(s) − ηs`` (``g'(s) = η``, clipped)."""
        if eta <= 0:
            return hi
        return float(min(hi, max(lo, self.utility.level_at_slope(eta))))

    def relaxation(self, r: np.ndarray) -> tuple[np.ndarray, float, np.ndarray]:
        """The continuous relaxation ``max g(L·x), x >= r, Σx = k, x <= 1``: its optimum
        ``x*`` (``r`` plus the spare mass ``k − Σr`` by decreasing size), the threshold size
        ``τ`` (of ``f``, the last worker to receive spare mass, or the largest unsaturated
        worker) and which workers ``x*`` holds at their floor."""
        r = np.clip(np.asarray(r, dtype=float), 0.0, 1.0)
        x = r.copy()
        spare = self.k - float(x.sum())
        last = -1
        for u in np.argsort(-self.sizes, kind="stable"):
            if spare <= 1e-12:
                break
            add = min(1.0 - x[u], spare)
            if add > 0:
                x[u] += add
                spare -= add
                last = int(u)
        open_ = x < 1.0 - 1e-12
        if last >= 0 and open_[last]:
            threshold = float(self.sizes[last])
        else:
            threshold = float(self.sizes[open_].max(initial=0.0))
        return x, threshold, x <= r + 1e-12

    def relaxation_duals(self, r: np.ndarray) -> np.ndarray:
        """λ solving the dual of the continuous relaxation (:meth:`relaxation`).

        With ``η = g'(L·x*)``, ``λ_u = max(0, η·(τ − L_u))`` on workers held at their floor
        makes ``x*`` a maximiser of ``g(L·x) + λ·x`` over the ``k``-set polytope, so the
        Lagrangian bound at λ equals Jensen's bound ``g(L·x*) >= U_opt``.
        """
        x, threshold, at_floor = self.relaxation(r)
        eta = float(self.dg(self.sizes @ x))
        return np.where(at_floor, np.maximum(0.0, eta * (threshold - self.sizes)), 0.0)

    # -- pricing ---------------------------------------------------------------------------
    def price(self, lam: np.ndarray) -> PricingResult:
        return self._price(lam, search=True)

    def quick(self, lam: np.ndarray) -> PricingResult:
        """:meth:`price` without the branch and bound (steps 2–3 of the module docstring):
        the top sets of the Lagrangian sweep improved by 1-swaps, and their best swaps, with
        the sweep's bound ``min_η B(η)`` as ``upper_bound`` (certified, not tight unless
        ``exact``).  Where the branch and bound takes seconds a call (two-class sizes at
        ``n = 10,000``: about 2 s, half of the calls stopped at :data:`TIME_BUDGET`) this is
        a fraction of it, for columns."""
        return self._price(lam, search=False)

    def _price(self, lam: np.ndarray, search: bool) -> PricingResult:
        self.stats["calls"] += 1
        n, k = self.n, self.k
        pool: list[np.ndarray] = []
        sub = _Sub(np.arange(n), k, 0.0, 0.0)
        bound, trail = self._lagrangian(sub, lam)
        pool.extend(self._lift(sub, T) for _, _, T in trail)
        best_mask = self._local_search(max(pool, key=lambda m: self._obj(m, lam)), lam)
        pool.append(best_mask)
        best = self._obj(best_mask, lam)
        upper = bound
        exact = _tight(best, upper)
        if not exact and search:
            upper, best_mask, exact = self._search(lam, best_mask, pool, (bound, trail))
        if not exact and search:
            self.stats["inexact"] += 1
        pool.extend(self._neighbours(best_mask, lam, self.max_columns))
        columns = np.array(pool + [best_mask])
        return ranked(columns, self.utility.values(columns), lam, self.max_columns,
                      upper_bound=float(upper), exact=exact)

    def _obj(self, mask: np.ndarray, lam: np.ndarray) -> float:
        return float(self.g(self.sizes @ mask) + lam @ mask)

    def _lift(self, sub: _Sub, chosen: np.ndarray, base: np.ndarray | None = None) -> np.ndarray:
        mask = np.zeros(self.n, dtype=bool) if base is None else base.copy()
        mask[sub.items[chosen]] = True
        return mask

    def _lagrangian(self, sub: _Sub, lam: np.ndarray) -> tuple[float, list[tuple[float, float, np.ndarray]]]:
        """``min_η B(η)`` for ``sub``: bracket the sign change of the subgradient on a grid.

        Each round evaluates :data:`_GRID` slopes in one vectorised pass (log-spaced in the
        current bracket) and keeps the cell where the subgradient ``L(T_η) − s(η)`` turns
        positive, so the bracket shrinks ``_GRID + 1``-fold per round.  Returns the bound
        and the ``_TRAIL`` best ``(η, B(η), top-k positions in sub.items)``, best first.
        """
        L, lm, k = self.sizes[sub.items], lam[sub.items], sub.k
        ordered = np.sort(L)
        lo_s = sub.base_size + float(ordered[:k].sum())
        hi_s = sub.base_size + float(ordered[-k:].sum())
        # the positions of L that can be in a top-k set at a slope inside the bracket (None: all)
        cand: np.ndarray | None = None

        def evaluate(etas: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            Lc, lc = (L, lm) if cand is None else (L[cand], lm[cand])
            w = etas[:, None] * Lc + lc
            if k < Lc.size:
                top = np.argpartition(-w, k - 1, axis=1)[:, :k]
            else:
                top = np.broadcast_to(np.arange(Lc.size), (etas.size, Lc.size))
            s = np.clip(self.utility.level_at_slope(etas), lo_s, hi_s)
            values = (self.g(s) - etas * s + etas * sub.base_size + sub.base_lam
                      + np.take_along_axis(w, top, axis=1).sum(axis=1))
            top = top if cand is None else cand[top]
            return values, L[top].sum(axis=1) + sub.base_size - s, top

        def narrowed(a: float, b: float, tops: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
            """The positions of ``cand`` that may be in a top-k set at a slope in ``[a, b]``.

            ``w_u(η) = η·L_u + λ_u`` is linear in ``η``, so on ``[a, b]`` a top set ``T`` of
            either end keeps ``k`` values at least ``c_T = min_{v∈T} min(w_v(a), w_v(b))``
            and the ``k``-th largest value never falls below ``c = max_T c_T``; a worker whose
            larger end value is below ``c`` (with a round-off margin) is in no top set there.
            """
            pos = np.arange(L.size) if cand is None else cand
            wa, wb = a * L[pos] + lm[pos], b * L[pos] + lm[pos]
            c = max(float(np.minimum(a * L[T] + lm[T], b * L[T] + lm[T]).min()) for T in tops)
            reach = np.maximum(wa, wb)
            slack = _FILTER_TOLERANCE * (abs(c) + float(np.abs(reach).max()))
            return pos[reach >= c - slack]

        eta_lo, eta_hi = float(self.dg(hi_s)), float(self.dg(lo_s))
        if not eta_hi > eta_lo * (1 + 1e-15):
            values, _, tops = evaluate(np.array([eta_lo]))
            return float(values[0]), [(eta_lo, float(values[0]), tops[0])]
        etas = [np.array([eta_lo, eta_hi])]
        values, _, top = evaluate(etas[0])
        all_values, all_tops = [values], [top]
        log_lo, log_hi = math.log(eta_lo), math.log(eta_hi)
        top_lo, top_hi = top[0], top[1]
        for _ in range(_ROUNDS):
            if _one_swap_apart(top_lo, top_hi):
                break
            if k < L.size:
                cand = narrowed(math.exp(log_lo), math.exp(log_hi), (top_lo, top_hi))
            grid = np.linspace(log_lo, log_hi, _GRID + 2)[1:-1]
            points = np.exp(grid)
            values, slopes, top = evaluate(points)
            etas.append(points)
            all_values.append(values)
            all_tops.append(top)
            if (slopes == 0).any():
                break
            i = int(np.searchsorted(slopes > 0, True))  # first positive slope (slopes increase)
            if i > 0:
                log_lo, top_lo = grid[i - 1], top[i - 1]
            if i < _GRID:
                log_hi, top_hi = grid[i], top[i]
            if log_hi - log_lo < 1e-13:
                break
        # At most one breakpoint left in the bracket: B is φ(η) + ηL(T) + λ(T) on each side,
        # minimised where g'(L(T)) = η, or at the breakpoint where the two sides cross.
        finish = []
        for T in (top_lo, top_hi):
            finish.append(float(self.dg(sub.base_size + L[T].sum())))
        d_size = float(L[top_lo].sum() - L[top_hi].sum())
        if d_size != 0:
            finish.append(float(lm[top_hi].sum() - lm[top_lo].sum()) / d_size)
        finish = np.clip(np.array(finish), math.exp(log_lo), math.exp(log_hi))
        values, _, top = evaluate(finish)
        etas.append(finish)
        all_values.append(values)
        all_tops.append(top)
        etas_all = np.concatenate(etas)
        values_all = np.concatenate(all_values)
        tops_all = np.concatenate(all_tops)
        best = np.argsort(values_all, kind="stable")[:_TRAIL]
        trail = [(float(etas_all[i]), float(values_all[i]), tops_all[i]) for i in best]
        return trail[0][1], trail

    def _best_swaps(self, mask: np.ndarray, lam: np.ndarray, count: int,
                    floor: float = -math.inf) -> list[tuple[float, int, int]]:
        """The ``count`` best single swaps ``(δ, out, in)`` of ``mask`` with ``δ > floor``, where
        ``δ = g(s − L_out + L_in) − g(s) + λ_in − λ_out`` and ``s = L(mask)``.

        By concavity ``g(s + d) <= g(s) + g'(s)·d``, so ``δ <= w_in − w_out`` with
        ``w = g'(s)·L + λ``: only pairs with a large ``w_in − w_out`` can be best.  The pairs
        of the ``K`` members with the least ``w`` and the ``K`` outsiders with the largest are
        evaluated exactly; ``K`` grows (up to :data:`SWAP_BLOCK_MAX`) until every pair left out
        is bounded below the ``count``-th best.  ``O(K² + n log n)``, never ``O(k·n)``.
        """
        inside, outside = np.flatnonzero(mask), np.flatnonzero(~mask)
        if not inside.size or not outside.size:
            return []
        s = float(self.sizes @ mask)
        w = float(self.dg(s)) * self.sizes + lam
        members = inside[np.argsort(w[inside], kind="stable")]
        others = outside[np.argsort(-w[outside], kind="stable")]
        base = float(self.g(s))
        block = max(SWAP_BLOCK, count)
        while True:
            a, b = members[:block], others[:block]
            delta = (self.g(s - self.sizes[a][:, None] + self.sizes[b][None, :]) - base
                     - lam[a][:, None] + lam[b][None, :])
            flat = delta.ravel()
            take = min(count, flat.size)
            picks = np.argpartition(-flat, take - 1)[:take]
            picks = picks[np.argsort(-flat[picks], kind="stable")]
            worst = float(flat[picks[-1]]) if take == count else -math.inf
            left_out = -math.inf
            if block < members.size:
                left_out = max(left_out, float(w[others[0]] - w[members[block]]))
            if block < others.size:
                left_out = max(left_out, float(w[others[block]] - w[members[0]]))
            if left_out <= max(worst, floor) or block >= SWAP_BLOCK_MAX:
                break
            block *= 4
        out = []
        for flat_index in picks:
            i, j = divmod(int(flat_index), b.size)
            if flat[flat_index] > floor:
                out.append((float(flat[flat_index]), int(a[i]), int(b[j])))
        return out

    def _neighbours(self, mask: np.ndarray, lam: np.ndarray, count: int) -> list[np.ndarray]:
        """The ``count`` best single swaps of ``mask`` (extra columns: near-optimal, distinct)."""
        out = []
        for _, i, j in self._best_swaps(mask, lam, count):
            swap = mask.copy()
            swap[i], swap[j] = False, True
            out.append(swap)
        return out

    def _local_search(self, mask: np.ndarray, lam: np.ndarray, rounds: int = 50) -> np.ndarray:
        """Best-improvement 1-swaps on the true objective (until :attr:`deadline`)."""
        mask = mask.copy()
        for _ in range(rounds):
            if self.deadline is not None and time.perf_counter() > self.deadline:
                break
            base = float(self.g(self.sizes @ mask))
            swaps = self._best_swaps(mask, lam, 1, EXACT_RTOL * max(1.0, abs(base)))
            if not swaps:
                break
            _, i, j = swaps[0]
            mask[i], mask[j] = False, True
        return mask

    def _search(self, lam: np.ndarray, best_mask: np.ndarray, pool: list[np.ndarray],
                root_bound: tuple[float, list] | None = None) -> tuple[float, np.ndarray, bool]:
        """Depth-first branch and bound; each node is fixed, then solved by the DP or split.

        Returns (certified upper bound, best mask, exact).  When :attr:`node_limit` nodes
        or :attr:`time_budget` seconds have been spent, the bound of every open node
        enters the upper bound.
        """
        state = {"best": self._obj(best_mask, lam), "mask": best_mask}
        root = _Sub(np.arange(self.n), self.k, 0.0, 0.0)
        # the root's bound is the Lagrangian one already computed: a stop before the root is
        # explored still certifies it
        root_upper = root_bound[0] if root_bound is not None else math.inf
        stack: list[tuple[_Sub, np.ndarray, float, tuple[float, list] | None]] = [
            (root, np.zeros(self.n, dtype=bool), root_upper, root_bound)]
        nodes, open_bound = 0, -math.inf
        started = time.process_time()
        while stack:
            if nodes >= self.node_limit or time.process_time() - started > self.time_budget or (
                    self.deadline is not None and time.perf_counter() > self.deadline):
                open_bound = max(bound for _, _, bound, _ in stack)
                break
            sub, fixed_in, bound, known = stack.pop()
            if _tight(state["best"], bound):
                continue  # a sibling's candidates reached this node's bound
            branch = self._node(sub, fixed_in, lam, state, pool, known)
            nodes += 1
            if branch is None:
                continue
            sub, fixed_in, bound, item, inside = branch
            children = []
            for take in (False, True):
                rest = np.delete(sub.items, item)
                u = sub.items[item]
                if take:
                    grown = fixed_in.copy()
                    grown[u] = True
                    child = _Sub(rest, sub.k - 1, sub.base_size + self.sizes[u], sub.base_lam + lam[u])
                else:
                    child, grown = _Sub(rest, sub.k, sub.base_size, sub.base_lam), fixed_in
                children.append(self._child(child, grown, bound, lam, state, pool))
            # Both children's bounds and top sets are in before either is explored: where a
            # child's bound ties the optimum (to round-off) but its top sets miss it, depth
            # first into it never closes, while its sibling's top set may be the optimum
            # (the class relaxation's prices at n = 1,000, k = 100, 900 workers tied to
            # 1e-16: over 1,000 nodes and no certificate depth first, 1 node with the
            # look-ahead).  The child that agrees with the Lagrangian top-k set goes first.
            stack.extend(children if inside else children[::-1])
        self.stats["nodes"] = max(self.stats["nodes"], nodes)
        best, mask = state["best"], state["mask"]
        upper = max(best, open_bound)
        return upper, mask, _tight(best, upper)

    def _child(self, sub: _Sub, fixed_in: np.ndarray, parent_bound: float, lam: np.ndarray,
               state: dict, pool: list[np.ndarray]) -> tuple[_Sub, np.ndarray, float, tuple[float, list] | None]:
        """A child node for the stack, with its Lagrangian bound computed and its top sets
        offered as incumbents (:meth:`_node` reuses the bound)."""
        if not self.look_ahead or sub.k == 0 or sub.k == sub.items.size:
            return sub, fixed_in, parent_bound, None
        known = self._lagrangian(sub, lam)
        self._offer_tops(sub, known[1], fixed_in, lam, state, pool)
        return sub, fixed_in, min(parent_bound, known[0]), known

    def _offer_tops(self, sub: _Sub, trail: list, fixed_in: np.ndarray, lam: np.ndarray, state: dict,
                    pool: list[np.ndarray]) -> None:
        """Offer the top-``k`` sets of the best three slopes of a node's Lagrangian trail."""
        for _, _, top in trail[:3]:
            self._offer(self._lift(sub, top, fixed_in), lam, state, pool)

    def _offer(self, mask: np.ndarray, lam: np.ndarray, state: dict, pool: list[np.ndarray]) -> None:
        """Make ``mask`` the incumbent (and a column) if it beats the incumbent."""
        value = self._obj(mask, lam)
        if value > state["best"]:
            state["best"], state["mask"] = value, mask
            pool.append(mask)

    def _node(self, sub: _Sub, fixed_in: np.ndarray, lam: np.ndarray, state: dict,
              pool: list[np.ndarray], known: tuple[float, list] | None = None,
              ) -> tuple[_Sub, np.ndarray, float, int, bool] | None:
        """Bound, fix and (if small) solve one node; None when closed, else how to branch."""

        def offer(mask: np.ndarray) -> None:
            self._offer(mask, lam, state, pool)

        fixed_in = fixed_in.copy()
        while True:
            if sub.k == 0 or sub.k == sub.items.size:
                offer(self._lift(sub, np.arange(sub.items.size) if sub.k else np.zeros(0, int), fixed_in))
                return None
            if known is not None:
                # computed by _child (its top sets offered then) or at the root by price (its
                # top sets seeded the incumbent's local search): offering them again is moot
                bound, trail = known
                known = None
            else:
                bound, trail = self._lagrangian(sub, lam)
                self._offer_tops(sub, trail, fixed_in, lam, state, pool)
            best = state["best"]
            if _tight(best, bound):
                return None
            L, lm = self.sizes[sub.items], lam[sub.items]
            keep_in = np.zeros(sub.items.size, dtype=bool)
            drop = np.zeros(sub.items.size, dtype=bool)
            for eta, value, top in trail:
                room = value - best + 1e-13 * max(1.0, abs(best))
                w = eta * L + lm
                in_top = np.zeros(w.size, dtype=bool)
                in_top[top] = True
                kth, next_ = float(w[top].min()), float(w[~in_top].max())
                keep_in |= in_top & (w - next_ >= room)
                drop |= ~in_top & (kth - w >= room)
            if (keep_in & drop).any():
                return None  # contradictory fixings: no set in this node beats the incumbent
            if not keep_in.any() and not drop.any():
                break
            fixed_in[sub.items[keep_in]] = True
            free = ~keep_in & ~drop
            k_left = sub.k - int(keep_in.sum())
            if k_left < 0 or k_left > int(free.sum()):
                return None
            sub = _Sub(sub.items[free], k_left, sub.base_size + float(L[keep_in].sum()),
                       sub.base_lam + float(lm[keep_in].sum()))
        self.stats["free"] = max(self.stats["free"], int(sub.items.size))
        eta, bound, top = trail[0]
        if math.comb(sub.items.size, sub.k) <= self.enumerate_limit:
            self.stats["enumerated"] += 1
            masks = self._masks.get((sub.items.size, sub.k))
            if masks is None:
                masks = self._masks[sub.items.size, sub.k] = k_subset_masks(sub.items.size, sub.k).astype(float)
            values = (self.g(sub.base_size + masks @ self.sizes[sub.items])
                      + sub.base_lam + masks @ lam[sub.items])
            order = np.argsort(-values)[: EXTRA_FROM_ENUMERATION + 1]
            offer(self._lift(sub, np.flatnonzero(masks[order[0]] > 0), fixed_in))
            # the runners-up are good columns too, and cost nothing more
            pool.extend(self._lift(sub, np.flatnonzero(masks[i] > 0), fixed_in) for i in order[1:])
            return None
        if self.unit:
            solved = self._dp(sub, lam, eta, bound, top, state["best"], fixed_in)
            if solved is not None:
                self.stats["dp"] += 1
                if solved[1] is not None:
                    offer(solved[1])
                return None
        # Branch on the item nearest the top-k threshold (the "fractional" one).
        w = eta * self.sizes[sub.items] + lam[sub.items]
        in_top = np.zeros(w.size, dtype=bool)
        in_top[top] = True
        tau = 0.5 * (float(w[top].min()) + float(w[~in_top].max()))
        item = int(np.argmin(np.abs(w - tau)))
        sizes = self.sizes[sub.items]
        largest = int(np.argmax(sizes))
        if sizes[largest] > OUTLIER * float(sizes[top].mean()):
            # φ's size range spans an outlier's presence, so the bound is loose until it is
            # decided; the items at the threshold may tie by the thousand (branching there
            # never ends)
            item = largest
        return sub, fixed_in, bound, item, bool(in_top[item])

    def _dp(self, sub: _Sub, lam: np.ndarray, eta: float, bound: float, top: np.ndarray,
            best: float, fixed_in: np.ndarray) -> tuple[float, np.ndarray | None] | None:
        """Exact search over swaps relative to the top-k set ``top`` of ``sub``.

        State (swaps in − swaps out, size change in units) → least Lagrangian loss
        ``Σ |w_u − τ|``; only sets with loss below ``bound − best`` can beat ``best``, which
        caps the number of swaps.  Returns (max over all sets, its mask or None when no set
        beats ``best``), or None when the table exceeds the work limit.
        """
        L, lm = self.sizes[sub.items], lam[sub.items]
        w = eta * L + lm
        in_top = np.zeros(w.size, dtype=bool)
        in_top[top] = True
        tau = 0.5 * (float(w[top].min()) + float(w[~in_top].max()))
        loss = np.abs(w - tau)
        budget = bound - best + 1e-13 * max(1.0, abs(best))
        useful = loss < budget
        out_loss = np.sort(loss[in_top & useful])
        in_loss = np.sort(loss[~in_top & useful])
        pairs = min(out_loss.size, in_loss.size)
        cum = np.cumsum(out_loss[:pairs]) + np.cumsum(in_loss[:pairs])
        swaps = int(np.searchsorted(cum, budget))  # largest j with cum[j-1] < budget
        units = np.round(L / self.unit).astype(np.int64)
        base_s = sub.base_size + float(L[top].sum())
        base_w = float(w[top].sum())
        if swaps == 0:
            return best, None  # only T itself, already a candidate
        items = np.flatnonzero(useful)
        sign = np.where(in_top[items], -1, 1)
        d = units[items]
        lo = -int(np.sort(d[sign < 0])[::-1][:swaps].sum())
        hi = int(np.sort(d[sign > 0])[::-1][:swaps].sum())
        rows, cols = 2 * swaps + 1, hi - lo + 1
        if items.size * rows * cols > self.dp_work_limit:
            return None
        table = np.full((rows, cols), np.inf)
        table[swaps, -lo] = 0.0
        took = np.zeros((items.size, rows, cols), dtype=bool)
        for t, (sg, size, cost) in enumerate(zip(sign, d, loss[items])):
            r0, c0 = (1, int(size)) if sg > 0 else (-1, -int(size))
            src = (slice(max(0, -r0), rows - max(0, r0)), slice(max(0, -c0), cols - max(0, c0)))
            dst = (slice(max(0, r0), rows - max(0, -r0)), slice(max(0, c0), cols - max(0, -c0)))
            moved = table[src] + cost  # a copy: reads the table before this item's update
            target = table[dst]
            better = moved < target
            took[t][dst] = better
            np.copyto(target, moved, where=better)
        final = table[swaps]
        reachable = np.flatnonzero(final < budget)
        if reachable.size == 0:
            return best, None
        s = base_s + (reachable + lo) * float(self.unit)
        values = self.g(s) - eta * s + eta * sub.base_size + sub.base_lam + base_w - final[reachable]
        pick = int(np.argmax(values))
        upper = float(values[pick])
        # Backtrack the chosen state to the swaps that reach it.
        r, col = swaps, int(reachable[pick])
        chosen = in_top.copy()
        for t in range(items.size - 1, -1, -1):
            if took[t, r, col]:
                chosen[items[t]] = not chosen[items[t]]
                r -= 1 if sign[t] > 0 else -1
                col -= d[t] if sign[t] > 0 else -d[t]
        return upper, self._lift(sub, np.flatnonzero(chosen), fixed_in)


def _one_swap_apart(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two top-k position sets differ by at most one swap."""
    marked = np.zeros(int(max(a.max(initial=0), b.max(initial=0))) + 1, dtype=bool)
    marked[a] = True
    return int(np.count_nonzero(~marked[b])) <= 1


def _tight(best: float, upper: float) -> bool:
    return upper - best <= EXACT_RTOL * max(1.0, abs(best))
