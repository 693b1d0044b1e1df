"""Post-stratified target accuracy: the target-population accuracy a set buys under
post-stratified aggregation.

Why not :class:`~fairsched.utilities.propensity_accuracy.PropensityWeightedAccuracy`. That
utility assumes stratum ``j``'s accuracy depends only on the data useful for ``j``, so more
data never hurts a stratum. Under FedAvg (aggregation by data size) it does: a large urban
worker pulls the shared model towards urban data and lowers rural accuracy. The utility
here is meant for a model trained with *post-stratified* aggregation
(:mod:`fairsched.fl.aggregation`): each example of stratum ``j`` in the set ``S`` is
weighted ``π_j / m_j(S)``, so stratum ``j`` contributes its target share ``π_j`` whatever the
set's composition, and the set's composition enters the trained model only through the
per-stratum data ``m_j(S) = Σ_{u∈S} L_{u,j}``.

Model. The target population is a mixture of strata with shares ``π_j`` (a census, or IPW
estimates as in FedIPW, Morishita, "Who Trains Matters: Federated Learning under Enrollment
and Participation Selection Biases", 2026). The post-stratified model ``θ̂_S`` minimises
``Σ_j π_j F̂_j`` (``F̂_j`` the empirical loss of stratum ``j``'s examples in ``S``); to first order
its target excess loss is ``½·tr(H⁻¹ Σ_j π_j² V_j / m_j(S))`` plus a bias that does not depend
on ``S`` (``H`` the target Hessian, ``V_j`` stratum ``j``'s gradient covariance), a sum over strata
of a decreasing power of ``m_j``. The individual stratum losses are *not* separable (the
model is shared, so every ``m_l`` moves every ``F_j``); their ``π``-weighted sum is. Hence
per-stratum learning curves of the stratum's contribution to the target loss,

    acc_j(m) = (1 − a_j) − b_j·m^{c_j}      for m > 0  (b_j > 0, c_j < 0),
    acc_j(0) = (1 − a_j) − t_j              (stratum missing: its loss under transfer),
    f(S) = Σ_j π_j·acc_j(m_j(S))  for S ≠ ∅,   f(∅) = 0,

fitted jointly on pilot training runs' target loss (:func:`fairsched.fl.curves.fit_stratum_curves`).
``1 − f(S)`` is the predicted target loss. The learning-curve form is the accuracy utility
of Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular
Maximization Approach" (2021), Section VI, applied per stratum.

Assumptions: (i) training uses post-stratified aggregation with the same ``π`` (under FedAvg
this utility does not predict the loss); (ii) within a stratum, examples are exchangeable
across workers (per-worker effects make ``m_j`` overstate the effective data); (iii) the
curves were fitted on runs of the same model, training schedule and data.

Monotone submodular on non-empty sets where every stratum with a positive share is present
in every non-empty set (all ``L_{u,j} > 0``): ``acc_j`` is concave increasing on ``m > 0`` and
``m_j`` is modular. Where a non-empty set can miss stratum ``j`` the extension to ``m = 0`` must
not break concavity: :meth:`PoststratifiedAccuracy.submodularity_problem` checks it (and the
jump from ``∅``), and :attr:`submodular_off_empty` reports the result. The empty set is
``f(∅) = 0`` by convention (the model at ``θ_0`` is not scored).
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction
from fairsched.utilities.propensity_accuracy import (
    _per_stratum,
    pairwise_jump_problem,
    stratum_sizes_and_shares,
    stratum_sum_values,
)
from fairsched.utilities.validation import (
    read_table,
)

TOLERANCE = 1e-12


class PoststratifiedAccuracy(SetFunction):
    """``f(S) = Σ_j π_j·acc_j(m_j(S))``, ``m_j(S) = Σ_{u∈S} L_{u,j}``, for ``S ≠ ∅``; ``f(∅) = 0``.

    ``acc_j(m) = (1 − a_j) − b_j·m^{c_j}`` for ``m > 0`` and ``(1 − a_j) − t_j`` for ``m = 0``.

    Parameters
    ----------
    sizes : (n, J) array
        ``L_{u,j}``: examples of stratum ``j`` held by worker ``u``.
    shares : (J,) array
        Target shares ``π_j`` (nonnegative, summing to 1), the shares the aggregation uses.
    a, b, c : float or (J,) array
        Curve parameters (``b > 0``, ``c < 0``), e.g. from :func:`fairsched.fl.curves.fit_stratum_curves`.
    missing : float or (J,) array
        ``t_j >= 0``: loss contribution of stratum ``j`` when the set holds none of its data.
    n : int, optional
        Number of workers ``sizes`` must describe.

    Examples
    --------
    >>> from fairsched.utilities.poststratified_accuracy import PoststratifiedAccuracy
    >>> f = PoststratifiedAccuracy([[100, 10], [20, 50]], shares=[0.7, 0.3], a=0.3, b=0.5, c=-1.0,
    ...                            missing=0.2)
    >>> round(f.value([0]), 6), round(f.value([0, 1]), 6)
    (0.6815, 0.694583)
    >>> f.submodularity_problem() is None
    True
    """

    kind = "poststratified-accuracy"

    def __init__(self, sizes: Any, shares: Any, a: Any = 0.0, b: Any = 0.5, c: Any = -1.0,
                 missing: Any = 1.0, *, n: int | None = None):
        L, self.shares = stratum_sizes_and_shares(sizes, shares, n)
        if (L.sum(axis=1) <= 0).any():
            raise InstanceError(f"worker {int(np.flatnonzero(L.sum(axis=1) <= 0)[0])} holds no data", key="sizes")
        self.sizes = L
        self.n, J = L.shape
        self.a = _per_stratum(a, "a", J)
        self.b = _per_stratum(b, "b", J, positive=True)
        self.c = _per_stratum(c, "c", J, negative=True)
        self.missing = _per_stratum(missing, "missing", J, nonnegative=True)

    @property
    def strata(self) -> int:
        """Number of strata ``J``."""
        return int(self.sizes.shape[1])

    def curves(self, m: Any) -> np.ndarray:
        """``acc_j(m_j)`` for an ``(..., J)`` array of per-stratum sizes."""
        m = np.asarray(m, dtype=np.float64)
        pos = m > 0
        powered = np.power(np.where(pos, m, 1.0), self.c)
        return (1.0 - self.a) - np.where(pos, self.b * powered, self.missing)

    def predicted_loss(self, S: Any) -> float:
        """``1 − f(S)``: the predicted target loss of the post-stratified model of ``S ≠ ∅``."""
        return 1.0 - self.value(S)

    def values(self, masks: np.ndarray) -> np.ndarray:
        return stratum_sum_values(masks, self.n, self.sizes, lambda m: self.curves(m) @ self.shares)

    def submodularity_problem(self, off_empty: bool = False) -> str | None:
        """Why ``f`` is not monotone submodular (on non-empty sets if ``off_empty``), or ``None``.

        Per stratum ``j`` with ``π_j > 0`` the one-dimensional function ``g(m) = acc_j(m)`` on
        the achievable sizes must be increasing and have decreasing increments. On ``m > 0`` it
        is concave increasing. If some worker has ``L_{u,j} = 0`` a non-empty set can have
        ``m_j = 0``; then for every worker ``u`` with ``x = L_{u,j} > 0`` and the smallest
        positive size ``y`` another worker adds: ``g(x) >= g(0)`` and
        ``g(x) − g(0) >= g(y + x) − g(y)`` (increments on ``m > 0`` shrink as ``m`` grows, so ``y``
        is the worst case). Without ``off_empty`` also the jump from ``f(∅) = 0``: every
        ``f({u}) >= 0`` and ``f({u}) >= f({u, v}) − f({v})`` for all pairs.
        """
        L = self.sizes
        for j in np.flatnonzero(self.shares > 0):
            col = L[:, j]
            if not (col == 0).any() or not (col > 0).any():
                continue
            pos = np.flatnonzero(col > 0)
            g0 = self.curves(np.zeros(self.strata))[j]
            for u in pos:
                x = col[u]
                others = col[(col > 0) & (np.arange(self.n) != u)]
                e = np.zeros(self.strata)
                e[j] = x
                gx = self.curves(e)[j]
                if gx < g0 - TOLERANCE:
                    return (f"not monotone: stratum {j} accuracy with worker {u}'s {x:g} examples is "
                            f"{gx:.6g} < {g0:.6g} with none (missing = {self.missing[j]:g} is too small)")
                if others.size:
                    y = others.min()
                    e2 = np.zeros(self.strata)
                    e2[j], e[j] = y, y + x
                    later = self.curves(e)[j] - self.curves(e2)[j]
                    if gx - g0 < later - TOLERANCE:
                        return (f"not submodular: in stratum {j} worker {u} gains {gx - g0:.6g} from none "
                                f"but {later:.6g} on top of {y:g} examples")
        if off_empty:
            return None
        singles = self.curves(L) @ self.shares
        u = int(np.argmin(singles))
        if singles[u] < -TOLERANCE:
            return f"not monotone: f({{{u}}}) = {singles[u]:.6g} < 0 = f({{}})"
        return pairwise_jump_problem(self.n, self.strata,
                                     lambda rows: self.curves(L[rows, None, :] + L[None, :, :]) @ self.shares,
                                     singles, TOLERANCE)

    @property
    def submodular(self) -> bool:
        """Monotone submodular on all of ``2^N`` (with ``f(∅) = 0``): :meth:`submodularity_problem` is ``None``."""
        return self.submodularity_problem() is None

    @property
    def submodular_off_empty(self) -> bool:
        """Monotone submodular on the non-empty sets (checked at the missing-stratum boundary)."""
        return self.submodularity_problem(off_empty=True) is None

    def to_config(self) -> dict[str, Any]:
        def compact(x: np.ndarray) -> Any:
            return float(x[0]) if np.all(x == x[0]) else x.tolist()

        return {"kind": self.kind, "sizes": self.sizes.tolist(), "shares": self.shares.tolist(),
                "a": compact(self.a), "b": compact(self.b), "c": compact(self.c),
                "missing": compact(self.missing)}

    @classmethod
    def from_config(cls, table: dict, n: int | None = None) -> Self:
        """Build from a ``[utility]`` table with ``sizes``, ``shares`` and optional ``a``, ``b``, ``c``, ``missing``."""
        table = read_table(table, cls.kind, ["sizes", "shares"], ["a", "b", "c", "missing"])
        params = {k: table[k] for k in ("a", "b", "c", "missing") if k in table}
        return cls(table["sizes"], table["shares"], **params, n=n)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n={self.n}, strata={self.strata})"
