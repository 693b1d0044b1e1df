"""Aggregation weights for fairsched's Flower strategy, and the counts they need.

All weights multiply the replies a round *used* (``V_t``, at most ``k``):

- FedAvg: ``ω_i = n_i / Σ_{j∈V_t} n_j``, ``n_i`` the ``num-examples`` a reply reports.
- Per-round Hájek inverse-probability weights (FedIPW; Morishita, "Who Trains Matters:
  Federated Learning under Enrollment and Participation Selection Biases", 2026):
  ``ω_i ∝ n_i / (π_select_i · π̂_part_i)`` normalised to ``Σ ω_i = 1`` within the round.
  Whenever the workers of a round share a selection probability (FairDG with uniform
  floors selects everybody at the same rate), these are FedAvg's weights: the
  normalisation inside the round removes the correction.
- Horvitz–Thompson weights across rounds (D. G. Horvitz and D. J. Thompson, "A
  Generalization of Sampling Without Replacement from a Finite Universe", 1952):
  ``ω_{u,t} = s_u / π̄_u(t)`` with ``π̄_u(t) = N_u(t) / t`` the running frequency with
  which ``u``'s update was used (``N_u(t)`` rounds of the first ``t``, this one included)
  and ``s_u`` its target share. They are not normalised within the round: the round's
  step is ``c_t = Σ_{i∈V_t} ω_{i,t}`` (``E[c_t] = Σ_u s_u = 1`` when ``π̄`` is the true
  inclusion probability), so that a worker's aggregation weight summed over the run,
  ``W_u(T) = Σ_t ω_{u,t}``, is ``≈ s_u · T`` whatever the policy: exactly ``s_u · T`` for
  the end-of-run form ``ω_u = s_u · T / N_u(T)``, of which ``t / N_u(t)`` is the running
  estimate (in shares of the run's total, each update of ``u`` weighs ``s_u / N_u(T)``).

:func:`total_variation` measures ``½ Σ_u |W_u / Σ_v W_v − s_u|``, how far a run's summed
weights are from the targets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

__all__ = ["ParticipationCounts", "fedavg_weights", "horvitz_thompson_weights", "inverse_probability_weights",
           "target_shares", "total_variation"]


def fedavg_weights(num_examples: Iterable[float]) -> np.ndarray:
    """FedAvg's weights ``ω_i = n_i / Σ_j n_j``."""
    n = np.asarray(list(num_examples), dtype=np.float64)
    if n.size == 0:
        return n
    if not np.all(np.isfinite(n)) or np.any(n < 0) or n.sum() <= 0:
        raise ValueError(f"num-examples must be finite, >= 0 and not all 0, got {n.tolist()}")
    return n / n.sum()


def inverse_probability_weights(num_examples: Iterable[float], pi_select: Iterable[float],
                                pi_participate: Iterable[float]) -> np.ndarray:
    """Hájek inverse-probability weights ``ω_i ∝ n_i / (π_select_i · π̂_part_i)``, summing to 1.

    ``π_select_i · π̂_part_i`` is worker ``i``'s inclusion probability (selected, then
    served), so ``Σ ω_i θ_i`` estimates the ``n``-weighted average over all workers, not
    only over those that are selected and serve most often (FedIPW; Morishita, "Who Trains
    Matters: Federated Learning under Enrollment and Participation Selection Biases",
    2026). Every probability must be in ``(0, 1]``.
    """
    n = np.asarray(list(num_examples), dtype=np.float64)
    ps = np.asarray(list(pi_select), dtype=np.float64)
    pp = np.asarray(list(pi_participate), dtype=np.float64)
    if not n.shape == ps.shape == pp.shape:
        raise ValueError(f"num-examples, pi_select and pi_participate differ in length: "
                         f"{n.size}, {ps.size}, {pp.size}")
    for name, p in (("pi_select", ps), ("pi_participate", pp)):
        if np.any(~np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
            raise ValueError(f"{name} must be in (0, 1], got {p.tolist()}")
    return fedavg_weights(n / (ps * pp))


def horvitz_thompson_weights(shares: Iterable[float], used: Iterable[float], rounds: int) -> np.ndarray:
    """Horvitz–Thompson weights across rounds, ``ω_u = s_u · t / N_u(t)`` (not normalised).

    ``shares`` are the target shares ``s_u`` of the workers used this round, ``used``
    their ``N_u(t) >= 1`` (this round included) and ``rounds`` the ``t >= 1`` rounds so
    far. ``ω_u = s_u / π̄_u(t)`` with ``π̄_u(t) = N_u(t)/t``.
    """
    s = np.asarray(list(shares), dtype=np.float64)
    N = np.asarray(list(used), dtype=np.float64)
    if s.shape != N.shape:
        raise ValueError(f"shares and used counts differ in length: {s.size}, {N.size}")
    if int(rounds) < 1 or np.any(N < 1) or np.any(N > rounds):
        raise ValueError(f"need 1 <= N_u(t) <= t = {rounds}, got {N.tolist()}")
    if np.any(~np.isfinite(s)) or np.any(s < 0):
        raise ValueError(f"target shares must be finite and >= 0, got {s.tolist()}")
    return s * float(rounds) / N


def target_shares(ids: Sequence[str], shares: Mapping[str, float] | Sequence[float] | None,
                  sizes: np.ndarray | None = None) -> np.ndarray:
    """The target shares ``s_u`` (summing to 1) of the workers ``ids``.

    ``shares``: a mapping by worker id (missing workers get 0) or a sequence in ``ids``
    order, normalised; ``None``: proportional to ``sizes`` (the last ``num-examples`` each
    worker reported; a worker not heard from yet counts as the mean of those that were),
    or uniform when nobody has reported.
    """
    n = len(ids)
    if shares is None:
        if sizes is None or not np.isfinite(sizes).any():
            return np.full(n, 1.0 / n)
        s = np.where(np.isfinite(sizes), sizes, np.nanmean(sizes))
    elif isinstance(shares, Mapping):
        unknown = set(map(str, shares)) - set(ids)
        if unknown:
            raise ValueError(f"target shares name workers outside the problem: {sorted(unknown)[:5]}")
        s = np.array([float(shares.get(w, 0.0)) for w in ids])
    else:
        s = np.asarray(list(shares), dtype=np.float64)
        if s.shape != (n,):
            raise ValueError(f"target shares must have one entry per worker ({n}), got {s.size}")
    if np.any(~np.isfinite(s)) or np.any(s < 0) or s.sum() <= 0:
        raise ValueError("target shares must be finite, >= 0 and not all 0")
    return s / s.sum()


def total_variation(weights: Iterable[float], shares: Iterable[float]) -> float:
    """``½ Σ_u |w_u / Σ w − s_u / Σ s|``: 0 when the summed weights are the target shares, 1 at worst."""
    w = np.asarray(list(weights), dtype=np.float64)
    s = np.asarray(list(shares), dtype=np.float64)
    if w.shape != s.shape or w.sum() <= 0 or s.sum() <= 0:
        raise ValueError("weights and shares must have the same length and positive sums")
    return float(0.5 * np.abs(w / w.sum() - s / s.sum()).sum())


class ParticipationCounts:
    """Per-worker running counts, by worker index: rounds available, asked, used, absent.

    ``present``: rounds the worker could be asked (connected, known, not suspected);
    ``asked``: rounds it was sent a train message (selected or over-committed);
    ``used``: rounds its update was aggregated; ``absent``: consecutive rounds it could not
    be asked; ``weight``: its aggregation weight summed over the run; ``sizes``: the last
    ``num-examples`` it reported (NaN before the first).
    """

    FIELDS = ("present", "asked", "used", "absent")

    def __init__(self, n: int) -> None:
        self.present = np.zeros(n, dtype=np.int64)
        self.asked = np.zeros(n, dtype=np.int64)
        self.used = np.zeros(n, dtype=np.int64)
        self.absent = np.zeros(n, dtype=np.int64)
        self.weight = np.zeros(n, dtype=np.float64)
        self.sizes = np.full(n, np.nan)

    def pi_select(self, w: np.ndarray) -> np.ndarray:
        """``asked_i / present_i``: the fraction of its available rounds ``i`` was asked in."""
        return self.asked[w] / np.maximum(self.present[w], 1)

    def pi_participate(self, w: np.ndarray) -> np.ndarray:
        """``used_i / asked_i``: the fraction of the times it was asked that its update was used."""
        return self.used[w] / np.maximum(self.asked[w], 1)

    def arrays(self) -> dict[str, np.ndarray]:
        return {"counts": np.stack([getattr(self, f) for f in self.FIELDS]).astype(np.int32), "weight": self.weight,
                "sizes": self.sizes}

    def load_arrays(self, counts: np.ndarray, weight: np.ndarray, sizes: np.ndarray) -> None:
        n = self.present.size
        if counts.shape != (len(self.FIELDS), n) or weight.shape != (n,) or sizes.shape != (n,):
            raise ValueError("the participation counts do not fit the problem")
        for f, row in zip(self.FIELDS, counts.astype(np.int64)):
            setattr(self, f, row.copy())
        self.weight, self.sizes = weight.astype(np.float64), sizes.astype(np.float64)

    def as_dict(self, ids: Sequence[str]) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {f: dict(zip(ids, getattr(self, f).tolist())) for f in self.FIELDS[:3]}
        out["weight"] = dict(zip(ids, self.weight.tolist()))
        return out
