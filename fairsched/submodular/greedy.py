"""Discrete greedy for ``max f(S)`` subject to ``|S| <= k`` (Nemhauser, Wolsey, Fisher 1978).

The ``(1 − 1/e)`` greedy that FairDG uses to complete a partial set (Li, Liu and Ji 2021,
Algorithm 3; ``docs/mathematics.md`` §4 and §8).
Ties are broken towards the lowest worker index so that schedules are deterministic.
"""

from __future__ import annotations

import numpy as np

from fairsched.utilities.base import SetFunction


def greedy_complete(utility: SetFunction, k: int, base: np.ndarray | None = None,
                    candidates: np.ndarray | None = None) -> np.ndarray:
    """Extend ``base`` to ``k`` workers, each step adding the largest marginal gain.

    Parameters
    ----------
    utility : SetFunction
        Monotone submodular oracle; one vectorised :meth:`~SetFunction.gains` call per step.
    k : int
        Target size. Zero-gain workers are still added: for a monotone ``f`` they cost
        nothing and a fuller set only helps fairness.
    base : sorted int64 array, optional
        Workers already chosen (kept even if ``|base| > k``).
    candidates : bool mask of length n, optional
        Workers that may be added; default all.

    Returns
    -------
    Sorted int64 array of the selected workers; fewer than ``k`` only if the candidates
    run out.
    """
    n = utility.n
    chosen = np.zeros(n, dtype=bool)
    if base is not None:
        chosen[base] = True
    allowed = np.ones(n, dtype=bool) if candidates is None else candidates.copy()
    allowed &= ~chosen
    size = int(chosen.sum())
    while size < k and allowed.any():
        gains = utility.gains(np.flatnonzero(chosen))
        gains = np.where(allowed, gains, -np.inf)
        best = int(np.argmax(gains))
        chosen[best] = True
        allowed[best] = False
        size += 1
    return np.flatnonzero(chosen)
