"""The set-function protocol every utility oracle implements.

A utility is a monotone submodular ``f: 2^N -> R+`` with ``f(∅) = 0`` over workers
``0..n-1``, as in Li, Liu and Ji (2021), Section III (``docs/mathematics.md`` §1). Sets are
sorted ``int64`` index arrays; batches of sets are boolean masks of shape ``(m, n)``.
Subclasses implement :meth:`values` (vectorised over a batch) and should override
:meth:`gains` when a closed form for the marginal gains of all workers at once is cheaper
than ``n`` evaluations.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np

#: boolean mask entries the default :meth:`SetFunction.gains` builds per :meth:`values` call
GAINS_CHUNK_ELEMENTS = 4_000_000


def as_index_set(S: Any, n: int) -> np.ndarray:
    """Return ``S`` (any iterable of worker indices) as a sorted unique ``int64`` array."""
    if isinstance(S, np.ndarray) and S.dtype == np.int64 and S.ndim == 1 and (
            S.size < 2 or bool((S[1:] > S[:-1]).all())):
        idx = S  # already sorted and unique: the hot path of greedy and the policies
    else:
        idx = np.unique(np.asarray(S, dtype=np.int64).reshape(-1))
    if idx.size and (idx[0] < 0 or idx[-1] >= n):
        raise IndexError(f"worker index out of range 0..{n - 1}: {idx.tolist()}")
    return idx


def index_set_to_mask(S: np.ndarray, n: int) -> np.ndarray:
    """Boolean mask of length ``n`` with ``True`` at the indices in ``S``."""
    mask = np.zeros(n, dtype=bool)
    mask[np.asarray(S, dtype=np.int64)] = True
    return mask


class SetFunction(ABC):
    """A vectorised monotone submodular set function on ``n`` workers.

    Attributes
    ----------
    n : int
        Number of workers (ground-set size).
    kind : str
        The instance-file ``[utility] kind`` this class is loaded from.
    """

    kind: str = "abstract"
    n: int

    @property
    def submodular(self) -> bool | None:
        """Whether ``f`` is *certified* monotone submodular with ``f(∅) = 0`` on all of ``2^N``.

        ``True`` when the structure of the class proves it (coverage, facility location,
        modular, concave of modular with non-negative weights; the accuracy curves when
        :meth:`submodularity_problem` finds nothing), ``False`` when the utility knows it
        fails, ``None`` when nothing is known (a user's function: the user's promise is
        not a certificate).  Bounds that rest on submodularity, such as the greedy
        bounds of Nemhauser, Wolsey & Fisher (1978), are used only when this is ``True``.
        """
        return None

    @property
    def submodular_off_empty(self) -> bool | None:
        """Whether ``f`` is certified monotone submodular on the non-empty sets.

        That is, ``f(A) <= f(B)`` and ``f(A + u) − f(A) >= f(B + u) − f(B)`` for all
        ``∅ ≠ A ⊆ B``: enough for bounds that start from a non-empty set, such as the
        greedy-chain bound at ``S_i ≠ ∅`` (``docs/mathematics.md`` §3).  Implied by
        :attr:`submodular`; the accuracy utilities have it whatever the jump at ``∅``.
        """
        return True if self.submodular else None

    @abstractmethod
    def values(self, masks: np.ndarray) -> np.ndarray:
        """``f`` of every row of a boolean batch ``masks`` of shape ``(m, n)``; float64 ``(m,)``."""

    def value(self, S: Any) -> float:
        """``f(S)`` for one set of worker indices."""
        mask = index_set_to_mask(as_index_set(S, self.n), self.n)
        return float(self.values(mask[None, :])[0])

    def gains(self, S: Any) -> np.ndarray:
        """Marginal gains ``f(S ∪ {u}) − f(S)`` for every worker ``u`` at once.

        Returns a float64 array of length ``n``; entries for ``u ∈ S`` are 0.
        The default evaluates ``f(S)`` and the ``n − |S|`` sets ``S + u`` with
        :meth:`values`, in blocks of at most :data:`GAINS_CHUNK_ELEMENTS` mask entries
        (memory ``O(n)`` per block row, never an ``(n, n)`` mask).
        """
        S = as_index_set(S, self.n)
        base = index_set_to_mask(S, self.n)
        out = np.zeros(self.n, dtype=np.float64)
        reference = float(self.values(base[None, :])[0])
        outside = np.flatnonzero(~base)
        step = max(1, GAINS_CHUNK_ELEMENTS // max(1, self.n))
        for start in range(0, outside.size, step):
            block = outside[start: start + step]
            masks = np.repeat(base[None, :], block.size, axis=0)
            masks[np.arange(block.size), block] = True
            out[block] = self.values(masks) - reference
        return out

    @abstractmethod
    def to_config(self) -> dict[str, Any]:
        """The ``[utility]`` table (with ``kind``) that reloads this utility; TOML-serialisable."""

    def __call__(self, S: Any) -> float:
        return self.value(S)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n})"
