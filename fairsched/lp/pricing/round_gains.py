"""Marginal gains across the rounds of a schedule under construction.

A schedule of ``T`` rounds is built one worker at a time
(:func:`~fairsched.lp.pricing.schedule_search.assigned_schedule`); each step needs the gains
``f(S_t + u) − f(S_t)`` of **one worker in every round** (where to place it), of **every
worker in some rounds** (what fills them) or of **given (worker, round) pairs** (lazy greedy).
:func:`round_gains_for` returns a state that keeps each round's sufficient statistic and
answers all three in numpy, for the kinds whose statistic is small:

- weighted coverage ``Σ_e w_e·[e covered]``: which elements each round covers (``T × E``);
- facility location ``Σ_i max_{u∈S} s_iu``: each point's best similarity per round (``T × P``);
- concave of modular ``Σ_j φ(W_j·1_S)``: each feature's sum per round (``T × J``);
- modular ``Σ_{u∈S} w_u``: nothing (the gain is ``w_u``);
- non-negative mixtures of these: the weighted sum of the components' gains.

All of these are monotone submodular, so a gain only falls as its round grows.  Memory is
``T`` times the statistic's width, never ``O(n²)``; the state is not built (``None``) beyond
:data:`MAX_STATE_CELLS` cells.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from fairsched.utilities import ConcaveModular, Coverage, FacilityLocation, Mixture, Modular
from fairsched.utilities.base import SetFunction
from fairsched.utilities.concave_modular import CONCAVE

#: the largest ``T × width`` state built (16 Mi cells: 128 MiB of float64)
MAX_STATE_CELLS = 1 << 24


class RoundGains(Protocol):
    """Per-round statistics of a schedule whose ``T`` rounds start empty."""

    def worker_gains(self, u: int) -> np.ndarray:
        """``f(S_t + u) − f(S_t)`` for every round ``t``: ``(T,)`` (the caller keeps ``u``
        out of rounds that hold it)."""

    def round_gains(self, rounds: np.ndarray) -> np.ndarray:
        """The gains of every worker (columns; members too) in ``rounds`` (rows):
        ``(len(rounds), n)``."""

    def pair_gains(self, workers: np.ndarray, rounds: np.ndarray) -> np.ndarray:
        """The gain of ``workers[i]`` in ``rounds[i]``, for each ``i``."""

    def add(self, workers: np.ndarray, rounds: np.ndarray) -> None:
        """Put ``workers[i]`` into ``rounds[i]`` for each ``i``."""

    def work(self) -> int:
        """About the operations of one row of :meth:`round_gains`."""


class CoverageRounds:
    """Coverage: ``covered[t, e]``; ``u`` gains the weight of its elements not yet covered."""

    @staticmethod
    def width(utility: Coverage) -> int:
        return int(utility.weights.size)

    def __init__(self, utility: Coverage, rounds: int):
        self.incidence = utility.sparse_incidence()
        self.weights = utility.weights
        self.covered = np.zeros((rounds, self.weights.size), dtype=bool)

    def _elements(self, u: int) -> np.ndarray:
        return self.incidence.indices[self.incidence.indptr[u]:self.incidence.indptr[u + 1]]

    def _pairs(self, workers: np.ndarray, rounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pair, round, element) of every element of every pair's worker."""
        starts, ends = self.incidence.indptr[workers], self.incidence.indptr[workers + 1]
        lengths = ends - starts
        pair = np.repeat(np.arange(workers.size), lengths)
        offsets = np.arange(pair.size) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return pair, np.repeat(rounds, lengths), self.incidence.indices[starts[pair] + offsets]

    def worker_gains(self, u: int) -> np.ndarray:
        mine = self._elements(u)
        return (~self.covered[:, mine]) @ self.weights[mine]

    def round_gains(self, rounds: np.ndarray) -> np.ndarray:
        uncovered = np.where(self.covered[rounds], 0.0, self.weights[None, :])
        return np.asarray(self.incidence @ uncovered.T, dtype=float).T

    def pair_gains(self, workers: np.ndarray, rounds: np.ndarray) -> np.ndarray:
        pair, round_of, element = self._pairs(workers, rounds)
        fresh = np.where(self.covered[round_of, element], 0.0, self.weights[element])
        return np.bincount(pair, weights=fresh, minlength=workers.size)

    def add(self, workers: np.ndarray, rounds: np.ndarray) -> None:
        _, round_of, element = self._pairs(workers, rounds)
        self.covered[round_of, element] = True

    def work(self) -> int:
        return int(self.incidence.nnz)


class FacilityRounds:
    """Facility location: ``best[t, i] = max_{u∈S_t} s_iu`` (0 for an empty round, as ``f(∅) = 0``)."""

    @staticmethod
    def width(utility: FacilityLocation) -> int:
        return int(utility.similarity.shape[0])

    def __init__(self, utility: FacilityLocation, rounds: int):
        self.similarity = utility.similarity
        self.best = np.zeros((rounds, self.similarity.shape[0]))

    def worker_gains(self, u: int) -> np.ndarray:
        return np.maximum(self.similarity[:, u][None, :] - self.best, 0.0).sum(axis=1)

    def round_gains(self, rounds: np.ndarray) -> np.ndarray:
        return np.maximum(self.similarity[None, :, :] - self.best[rounds][:, :, None], 0.0).sum(axis=1)

    def pair_gains(self, workers: np.ndarray, rounds: np.ndarray) -> np.ndarray:
        return np.maximum(self.similarity[:, workers].T - self.best[rounds], 0.0).sum(axis=1)

    def add(self, workers: np.ndarray, rounds: np.ndarray) -> None:
        np.maximum.at(self.best, rounds, self.similarity[:, workers].T)

    def work(self) -> int:
        return int(self.similarity.size)


class ConcaveRounds:
    """Concave of modular: ``sums[t, j] = W_j·1_{S_t}``; ``u`` gains ``Σ_j φ(sums + W_ju) − φ(sums)``."""

    @staticmethod
    def width(utility: ConcaveModular) -> int:
        return int(utility.features.shape[0])

    def __init__(self, utility: ConcaveModular, rounds: int):
        self.features = utility.features
        self.phi = CONCAVE[utility.concave]
        self.sums = np.zeros((rounds, self.features.shape[0]))

    def worker_gains(self, u: int) -> np.ndarray:
        mine = np.flatnonzero(self.features[:, u])
        sums = self.sums[:, mine]
        return (self.phi(sums + self.features[mine, u][None, :]) - self.phi(sums)).sum(axis=1)

    def round_gains(self, rounds: np.ndarray) -> np.ndarray:
        sums = self.sums[rounds][:, :, None]
        return (self.phi(sums + self.features[None, :, :]) - self.phi(sums)).sum(axis=1)

    def pair_gains(self, workers: np.ndarray, rounds: np.ndarray) -> np.ndarray:
        sums = self.sums[rounds]
        return (self.phi(sums + self.features[:, workers].T) - self.phi(sums)).sum(axis=1)

    def add(self, workers: np.ndarray, rounds: np.ndarray) -> None:
        np.add.at(self.sums, rounds, self.features[:, workers].T)

    def work(self) -> int:
        return int(self.features.size)


class ModularRounds:
    """Modular: the gain is the worker's weight in every round."""

    @staticmethod
    def width(utility: Modular) -> int:
        return 0

    def __init__(self, utility: Modular, rounds: int):
        self.weights = np.asarray(utility.weights, dtype=float)
        self.rounds = rounds

    def worker_gains(self, u: int) -> np.ndarray:
        return np.full(self.rounds, self.weights[u])

    def round_gains(self, rounds: np.ndarray) -> np.ndarray:
        return np.repeat(self.weights[None, :], len(rounds), axis=0)

    def pair_gains(self, workers: np.ndarray, rounds: np.ndarray) -> np.ndarray:
        return self.weights[workers]

    def add(self, workers: np.ndarray, rounds: np.ndarray) -> None:
        return None

    def work(self) -> int:
        return int(self.weights.size)


class MixtureRounds:
    """A non-negative mixture: the weighted sum of its components' gains."""

    def __init__(self, parts: list[tuple[float, RoundGains]]):
        self.parts = parts

    def worker_gains(self, u: int) -> np.ndarray:
        return sum(w * part.worker_gains(u) for w, part in self.parts)

    def round_gains(self, rounds: np.ndarray) -> np.ndarray:
        return sum(w * part.round_gains(rounds) for w, part in self.parts)

    def pair_gains(self, workers: np.ndarray, rounds: np.ndarray) -> np.ndarray:
        return sum(w * part.pair_gains(workers, rounds) for w, part in self.parts)

    def add(self, workers: np.ndarray, rounds: np.ndarray) -> None:
        for _, part in self.parts:
            part.add(workers, rounds)

    def work(self) -> int:
        return sum(part.work() for _, part in self.parts)


#: the kinds with a state of their own (exact types: a subclass may change ``f``)
_STATES: dict[type, type] = {Coverage: CoverageRounds, FacilityLocation: FacilityRounds,
                             ConcaveModular: ConcaveRounds, Modular: ModularRounds}


def _parts(mixture: Mixture) -> list[tuple[float, SetFunction]]:
    """A mixture's components of positive weight, with their weights."""
    return [(float(w), c) for w, c in zip(mixture.weights, mixture.components) if w > 0]


def _width(utility: SetFunction) -> int | None:
    """The statistic's cells per round, or ``None`` for a kind without one here."""
    kind = type(utility)
    if kind in _STATES:
        return _STATES[kind].width(utility)
    if kind is Mixture:
        widths = [_width(c) for _, c in _parts(utility)]
        return None if any(width is None for width in widths) else sum(widths)
    return None


def round_gains_for(utility: SetFunction, rounds: int) -> RoundGains | None:
    """The state of the module docstring for ``rounds`` empty rounds, or ``None`` when the
    utility's kind has none here (exact type matches: a subclass may change ``f``) or it
    would exceed :data:`MAX_STATE_CELLS`."""
    width = _width(utility)
    if width is None or rounds * max(width, 1) > MAX_STATE_CELLS:
        return None
    return _build(utility, rounds)


def _build(utility: SetFunction, rounds: int) -> RoundGains:
    kind = type(utility)
    if kind in _STATES:
        return _STATES[kind](utility, rounds)
    return MixtureRounds([(w, _build(c, rounds)) for w, c in _parts(utility)])
