"""The federated training loop with weighted (Hájek) aggregation (FedIPW, Morishita 2026).

Round ``r``: the participants ``A_r`` run ``K`` local steps from the global ``θ_r`` and
return ``Δ_{i,r}``; the server moves to

    θ_{r+1} = θ_r + η_r · Σ_{i∈A_r} w_{i,r} Δ_{i,r} / Σ_{i∈A_r} w_{i,r},   η_r = η_g / (1 + ρ·r).

The decay ``ρ`` averages out the round-to-round sampling noise of large IPW weights (the
variance term of Morishita's excess-loss bound), leaving the bias floor that the
experiment measures.

``w = 1`` is FedAvg over participants (equal local sizes) and ``w = 1/p̂`` is FedIPW's Hájek
form of ``(1/N) Σ_{i∈A_r} Δ_{i,r}/p̂_{i,r}``. A round without participants leaves ``θ``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fairsched.fl.errors import SimulationError
from fairsched.fl.model import ClientData, local_updates


@dataclass(frozen=True)
class TrainConfig:
    """Rounds ``R``, local steps ``K``, local and server learning rates, decay ``ρ``, ridge ``μ``."""

    rounds: int = 100
    local_steps: int = 5
    local_lr: float = 0.5
    server_lr: float = 1.0
    ridge: float = 0.01
    server_decay: float = 0.1

    def __post_init__(self) -> None:
        if isinstance(self.rounds, bool) or int(self.rounds) < 1:
            raise SimulationError(f"rounds: is {self.rounds}, expected a positive integer")
        if (self.local_steps < 1 or not self.local_lr > 0 or not self.server_lr > 0 or self.ridge < 0
                or self.server_decay < 0):
            raise SimulationError("train: need local_steps >= 1, local_lr > 0, server_lr > 0, "
                                  "ridge >= 0, server_decay >= 0")


def train(data: ClientData, participants: Sequence[np.ndarray], weights: Sequence[np.ndarray],
          config: TrainConfig, theta0: np.ndarray | None = None) -> np.ndarray:
    """Run ``len(participants)`` rounds; returns the iterates ``θ_0..θ_R`` as ``(R + 1, d)``.

    ``participants[r]`` are client indices of round ``r`` and ``weights[r]`` their
    aggregation weights (same length, nonnegative, finite).
    """
    if len(participants) != len(weights):
        raise SimulationError(f"participants ({len(participants)} rounds) and weights "
                              f"({len(weights)} rounds) differ in length")
    theta = np.zeros(data.dim) if theta0 is None else np.asarray(theta0, dtype=np.float64).copy()
    path = np.empty((len(participants) + 1, data.dim))
    path[0] = theta
    for r, (clients, w) in enumerate(zip(participants, weights)):
        clients = np.asarray(clients, dtype=np.int64)
        w = np.asarray(w, dtype=np.float64)
        if w.shape != clients.shape or not np.isfinite(w).all() or (w < 0).any():
            raise SimulationError(f"round {r}: weights must be finite, >= 0, one per participant")
        if clients.size and w.sum() > 0:
            delta = local_updates(theta, data, clients, config.local_steps, config.local_lr, config.ridge)
            step = config.server_lr / (1.0 + config.server_decay * r)
            theta = theta + step * (w @ delta) / w.sum()
        path[r + 1] = theta
    return path
