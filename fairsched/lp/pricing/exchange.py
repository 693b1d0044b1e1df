"""Exchange columns for the accuracy utility: two sets of a distribution trade members until
their sizes meet.

For ``f(S) = g(L(S))`` with ``g`` concave and ``L(S) = Σ_{u∈S} L_u`` (the accuracy utility of
Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular
Maximization Approach"), two sets ``S`` and ``T`` of the same weight with ``L(S) > L(T)``
are worth less than a pair whose sizes are closer with the same total:
``g(L(S) − d) + g(L(T) + d) >= g(L(S)) + g(L(T))`` for ``0 <= d <= L(S) − L(T)``.  Trading
``U ⊂ S \\ T`` for ``V ⊂ T \\ S`` with ``|U| = |V|`` gives ``S' = S − U + V`` and
``T' = T − V + U`` with ``d = L(U) − L(V)``, and moving weight ``w`` from ``{S, T}`` to
``{S', T'}`` keeps every marginal: each member of ``U`` loses ``w`` in ``S`` and gains it in
``T'``, and each member of ``V`` the other way round.

Column generation's master for this utility is degenerate where the floors pin the
marginals (``Σ r = k``): its duals barely change from one iteration to the next and the
columns priced at them do not lift its value (Pareto sizes, ``n = 1,000``, ``k = 50``: from
1.08e-4 below Jensen's bound to 8.6e-5 in 300 s).  Exchange columns come from the master's
*primal* solution instead: :func:`exchange_columns` pairs the largest set of the current
distribution with the smallest, the second largest with the second smallest and so on,
and returns both sets of each trade; the master decides how much weight they take.  This is
the pairwise interchange of local search for balanced partitioning, applied to a
distribution's support.

Measured with ``python benchmarks/bench_exchange.py`` (both runs in one process, default
settings): on pinned floors with six large workers that each fit alone in a set of the
common size but no two together (``n = 300``, ``k = 20``), optimal in 1.5-3.2 s (9-17
iterations) against 19.4-55.2 s (84-131 iterations) without; on the Pareto draw where the
failure was found, optimal (7.4e-7) in 21 s against "tailing-off" at 1.05e-4.  Where the
balanced start splits the marginals by giants
(:func:`~fairsched.lp.pricing.balanced.level_classes`) the trades are not used: a set
holding a giant must stay above the others, and on such a draw (Pareto, ``n = 1,000``,
``k = 50``, ``pareto-equal`` seed 1) they left the gap at 3.43e-5 while the master, 1.6 s
per solve with their columns, ran to the 120 s limit instead of ending "tailing-off" at
8.5 s.

A trade aims at ``d = (L(S) − L(T))/2``: the pairs ``(u_i, v_i)`` of the members of
``S \\ T`` by decreasing size and of ``T \\ S`` by increasing size give decreasing
differences; the longest prefix whose differences sum to at most ``d`` is taken, then the
one further pair among the others whose difference comes closest to what is left.  Each
trade is ``O(k log k)``; :data:`MAX_PAIRS` trades per call bound the work at
``O(MAX_PAIRS·k log k)`` and the memory at ``O(MAX_PAIRS·k)``.
"""

from __future__ import annotations

import numpy as np

from fairsched.solvers.columns import Columns

#: trades per call: each adds two columns to the master, whose re-solve is most of an
#: iteration (Pareto sizes, ``n = 1,000``, ``k = 50``: 100 trades optimal in 22.8 s, 25 in
#: 87.9 s, 50 in 28.3 s, 300 in 45.7 s, 2,000 in 48 s)
MAX_PAIRS = 100
#: sizes closer than this (relative to the larger) are not traded
SIZE_TOLERANCE = 1e-12


def trade(sizes: np.ndarray, above: np.ndarray, below: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """The sets ``(S', T')`` after the trade of the module docstring between ``above`` (``S``)
    and ``below`` (``T``), sorted index arrays of equal length, or None when no trade brings
    their sizes closer."""
    total = float(sizes[above].sum())
    target = 0.5 * (total - float(sizes[below].sum()))
    if target <= SIZE_TOLERANCE * total:
        return None
    only_above = np.setdiff1d(above, below, assume_unique=True)
    only_below = np.setdiff1d(below, above, assume_unique=True)
    if not only_above.size or not only_below.size:
        return None
    outgoing = only_above[np.argsort(-sizes[only_above], kind="stable")]
    incoming = only_below[np.argsort(sizes[only_below], kind="stable")]
    pairs = min(outgoing.size, incoming.size)
    differences = sizes[outgoing[:pairs]] - sizes[incoming[:pairs]]
    useful = int(np.count_nonzero(differences > 0))
    if not useful:
        return None
    moved = np.cumsum(differences[:useful])
    taken = int(np.searchsorted(moved, target, side="right"))
    out, into = list(outgoing[:taken]), list(incoming[:taken])
    rest = target - (float(moved[taken - 1]) if taken else 0.0)
    if rest > 0.0 and taken < pairs:
        # one more pair among the others: the difference nearest to what is left
        others_out, others_in = outgoing[taken:pairs], incoming[taken:pairs]
        in_sizes = sizes[others_in]  # increasing
        wanted = sizes[others_out] - rest
        right = np.minimum(np.searchsorted(in_sizes, wanted), in_sizes.size - 1)
        left = np.maximum(right - 1, 0)
        nearer = np.where(np.abs(in_sizes[right] - wanted) <= np.abs(in_sizes[left] - wanted), right, left)
        miss = np.abs(in_sizes[nearer] - wanted)
        best = int(np.argmin(miss))
        # the pair helps while it leaves less than ``rest`` to the midpoint (round-off aside)
        if rest - miss[best] > SIZE_TOLERANCE * total:
            out.append(others_out[best])
            into.append(others_in[nearer[best]])
    if not out:
        return None
    out_array, into_array = np.array(out, dtype=above.dtype), np.array(into, dtype=above.dtype)
    new_above = np.sort(np.concatenate([np.setdiff1d(above, out_array, assume_unique=True), into_array]))
    new_below = np.sort(np.concatenate([np.setdiff1d(below, into_array, assume_unique=True), out_array]))
    return new_above, new_below


def exchange_columns(sizes: np.ndarray, columns: Columns, probabilities: np.ndarray,
                     max_pairs: int = MAX_PAIRS) -> Columns:
    """The sets of the trades between the largest and smallest sets of a distribution.

    ``columns`` and ``probabilities`` are the distribution (sets with positive weight).
    Sorted by size, the ``i``-th largest set trades with the ``i``-th smallest
    (:func:`trade`) while it is larger; of those pairs the ``max_pairs`` whose sizes differ
    most are traded.  Every returned set has as many members as the pair it came from.
    """
    sizes = np.asarray(sizes, dtype=float)
    used = np.flatnonzero(np.asarray(probabilities, dtype=float) > 0.0)
    if used.size < 2 or max_pairs < 1:
        return Columns.empty(columns.n)
    support = columns.take(used)
    set_sizes = support.dot(sizes)
    ordered = np.argsort(set_sizes, kind="stable")
    half = ordered.size // 2
    larger, smaller = ordered[::-1][:half], ordered[:half]
    spread = set_sizes[larger] - set_sizes[smaller]
    apart = spread > SIZE_TOLERANCE * np.abs(set_sizes[larger])
    # the pairs are in decreasing spread already: the first max_pairs differ most
    larger, smaller = larger[apart][:max_pairs], smaller[apart][:max_pairs]
    rows: list[np.ndarray] = []
    for above, below in zip(larger.tolist(), smaller.tolist()):
        traded = trade(sizes, support[above], support[below])
        if traded is not None:
            rows.extend(traded)
    return Columns.from_sets(rows, columns.n) if rows else Columns.empty(columns.n)
