"""Randomized pipage rounding of a fractional point to a set (``docs/mathematics.md`` §7).

Chekuri, Vondrák, Zenklusen 2010 (randomized pipage / dependent rounding), as FairCG uses
it in Li, Liu and Ji 2021, Section IV. While two coordinates ``i, j`` are fractional, with
``α = min(1 − y_i, y_j)`` and ``β = min(y_i, 1 − y_j)``: with probability ``β/(α+β)``
set ``y_i += α, y_j −= α``, else ``y_i −= β, y_j += β``. Each step keeps ``E[y]`` and
``Σ y`` and makes at least one of the two integral; a last fractional coordinate is
included with probability equal to its value. Hence ``P[u ∈ S] = y_u`` exactly,
``|S| <= ceil(Σ y)``, ``|S| = Σ y`` when ``Σ y`` is an integer, and
``E f(S) >= F(y)`` for submodular ``f`` (``F`` is convex along ``e_i − e_j``).

Pairing is sequential: a "carry" fractional coordinate meets the next fractional one,
and whichever stays fractional becomes the carry, so one draw is ``O(n)``.
"""

from __future__ import annotations

from numbers import Integral
from typing import Any

import numpy as np

from fairsched.seeding import Seed, as_generator

SNAP = 1e-12


def check_fractional(y: Any) -> np.ndarray:
    """``y`` as a float64 vector in ``[0, 1]``, entries within ``1e-12`` of 0 or 1 snapped.

    ``ValueError`` naming the first entry outside ``[−1e-12, 1 + 1e-12]`` (or not finite).
    """
    try:
        arr = np.array(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("y must be a list of numbers") from None
    if arr.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got shape {arr.shape}")
    bad = ~((arr >= -SNAP) & (arr <= 1.0 + SNAP))  # also catches nan
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"y entry {i} is {arr[i]}, expected a value in [0, 1]")
    arr[arr <= SNAP] = 0.0
    arr[arr >= 1.0 - SNAP] = 1.0
    return arr


def _snap(x: np.ndarray) -> np.ndarray:
    return np.where(x <= SNAP, 0.0, np.where(x >= 1.0 - SNAP, 1.0, x))


def _pair(c: np.ndarray, v: np.ndarray, up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One pipage step on the pair (carry ``c``, next ``v``); ``up``: move mass to ``c``.

    The coordinate that the step makes integral is set to exactly 0 or 1 (not computed),
    and the other one gets ``c + v`` minus that, so ``Σ y`` is kept to rounding.
    """
    total = c + v
    c_full = (1.0 - c) <= v      # up: α = 1 − c, c becomes 1; else α = v, v becomes 0
    c_empty = c <= (1.0 - v)     # down: β = c, c becomes 0; else β = 1 − v, v becomes 1
    c_up = np.where(c_full, 1.0, total)
    c_down = np.where(c_empty, 0.0, total - 1.0)
    new_c = np.where(up, c_up, c_down)
    v_up = np.where(c_full, total - 1.0, 0.0)
    v_down = np.where(c_empty, total, 1.0)
    new_v = np.where(up, v_up, v_down)
    return _snap(new_c), _snap(new_v)


def _up_probability(c: np.ndarray, v: np.ndarray) -> np.ndarray:
    alpha = np.minimum(1.0 - c, v)
    beta = np.minimum(c, 1.0 - v)
    return beta / (alpha + beta)


def _snap_scalar(x: float) -> float:
    return 0.0 if x <= SNAP else 1.0 if x >= 1.0 - SNAP else x


def _pair_scalar(c: float, v: float, u: float) -> tuple[float, float]:
    """:func:`_pair` for one draw; ``u`` uniform on [0, 1)."""
    alpha, beta = min(1.0 - c, v), min(c, 1.0 - v)
    total = c + v
    if u * (alpha + beta) < beta:
        new = (1.0, total - 1.0) if 1.0 - c <= v else (total, 0.0)
    else:
        new = (0.0, total) if c <= 1.0 - v else (total - 1.0, 1.0)
    return _snap_scalar(new[0]), _snap_scalar(new[1])


def pipage_round(y: Any, seed: Seed) -> np.ndarray:
    """Round ``y ∈ [0, 1]^n`` to a random set ``S`` with ``P[u ∈ S] = y_u``.

    Randomized pipage rounding (Chekuri, Vondrák, Zenklusen 2010 (randomized pipage /
    dependent rounding); Li, Liu and Ji 2021, Section IV): while two coordinates ``i, j`` are
    fractional, ``α = min(1 − y_i, y_j)``, ``β = min(y_i, 1 − y_j)``; with probability
    ``β/(α+β)`` ``y_i += α, y_j −= α``, else ``y_i −= β, y_j += β``; a last fractional
    coordinate is included with probability equal to its value. ``|S| <= ceil(Σ y)``,
    with equality when ``Σ y`` is an integer (to ``1e-12``). ``O(n)``.

    Returns the sorted ``int64`` indices of ``S``. ``seed``: an int or a numpy Generator.
    """
    return pipage_round_snapped(check_fractional(y), as_generator(seed))


def pipage_round_snapped(y: np.ndarray, gen: np.random.Generator) -> np.ndarray:
    """:func:`pipage_round` without the checks: ``y`` float64 in ``[0, 1]`` with entries within
    ``SNAP`` of 0 or 1 already set to exactly 0 or 1 (as :func:`check_fractional` leaves them)."""
    chosen = y == 1.0
    carry, c = -1, 0.0
    for j in np.flatnonzero((y > 0.0) & (y < 1.0)).tolist():
        v = float(y[j])
        if carry < 0:
            carry, c = j, v
            continue
        c, v = _pair_scalar(c, v, gen.random())
        if 0.0 < c < 1.0:
            chosen[j] = v == 1.0
            continue
        chosen[carry] = c == 1.0
        if 0.0 < v < 1.0:
            carry, c = j, v
        else:
            chosen[j] = v == 1.0
            carry = -1
    if carry >= 0:
        chosen[carry] = gen.random() < c
    return np.flatnonzero(chosen).astype(np.int64)


def pipage_round_batch(y: Any, draws: int, seed: Seed) -> np.ndarray:
    """``draws`` independent pipage roundings of ``y`` as boolean masks ``(draws, n)``.

    The same procedure as :func:`pipage_round` (Chekuri, Vondrák, Zenklusen 2010
    (randomized pipage / dependent rounding); Li, Liu and Ji 2021, Section IV), vectorised across
    draws: one pass over the coordinates, each step a numpy operation over all draws
    (every draw meets coordinate ``j`` still at ``y_j``; only the carry differs).
    Row ``d`` has ``P[u ∈ S_d] = y_u``, ``|S_d| <= ceil(Σ y)``, ``= Σ y`` if integer.
    """
    y = check_fractional(y)
    if isinstance(draws, bool) or not isinstance(draws, Integral) or draws < 0:
        raise ValueError(f"draws is {draws!r}, expected an integer >= 0")
    gen = as_generator(seed)
    m, n = int(draws), y.size
    masks = np.zeros((m, n), dtype=bool)
    masks[:, y == 1.0] = True
    rows = np.arange(m)
    carry = np.full(m, -1, dtype=np.int64)
    c = np.zeros(m)
    for j in np.flatnonzero((y > 0.0) & (y < 1.0)):
        has = carry >= 0
        v = np.full(m, y[j])
        up = gen.random(m) < np.where(has, _up_probability(c, v), 0.0)
        new_c, new_v = _pair(c, v, up)
        new_v = np.where(has, new_v, y[j])
        keep = has & (new_c > 0.0) & (new_c < 1.0)
        done = has & ~keep
        masks[rows[done], carry[done]] = new_c[done] == 1.0
        start = ~keep & (new_v > 0.0) & (new_v < 1.0)
        masks[:, j] = ~start & (new_v == 1.0)
        carry = np.where(start, j, np.where(keep, carry, -1))
        c = np.where(start, new_v, np.where(keep, new_c, c))
    has = carry >= 0
    last = gen.random(m) < c
    masks[rows[has], carry[has]] = last[has]
    return masks
