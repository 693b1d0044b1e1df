"""One-step validation utility: the validation loss a set's post-stratified model is predicted to reach.

Why. Count-based utilities (:class:`~fairsched.utilities.poststratified_accuracy.PoststratifiedAccuracy`)
see only how many examples of each stratum a set holds. Under post-stratified aggregation
most of what still varies between sets of the same size is the noise of *their own*
examples, which no function of the counts can see. This utility sees it, through one pilot
round in which every worker reports the gradient (and optionally the Hessian) of its loss
at a reference model, and predicts the model the set would train.

Model (``ℓ_k`` the loss of example ``k``, ``μ`` the ridge, strata ``j`` with target shares
``π_j``). Post-stratified aggregation (see :mod:`fairsched.fl.aggregation`) trains a set
``S`` towards the minimiser of

    F_S(θ) = Σ_j π̃_j(S)·(1/m_j(S))·Σ_{u∈S} Σ_{k∈(u,j)} ℓ_k(θ) + (μ/2)‖θ‖²,
    m_j(S) = Σ_{u∈S} L_{u,j},   π̃_j(S) = π_j·[m_j(S) > 0] / Σ_l π_l·[m_l(S) > 0].

With each worker's per-stratum gradient sums ``g_{u,j} = Σ_{k∈(u,j)} ∇ℓ_k(θ_ref)`` and
Hessian sums ``H_{u,j}`` at a reference model ``θ_ref`` (e.g. the post-stratified fit of all
workers), one Newton step gives the set's model

    θ_S = θ_ref − H_S⁻¹·g_S,   g_S = Σ_j (π̃_j/m_j)·Σ_{u∈S} g_{u,j} + μ·θ_ref,
                               H_S = Σ_j (π̃_j/m_j)·Σ_{u∈S} H_{u,j} + μ·I,

(with *pooled* Hessians, ``(1/m_j)·Σ_{u∈S} H_{u,j}`` is replaced by the per-example mean
``H̄_j`` of stratum ``j``, so only gradients are per worker). Its validation excess loss is
scored by the quadratic model of a validation objective around its minimiser ``θ_V`` with
Hessian ``H_V``, ``q(θ) = ½·(θ − θ_V)ᵀ H_V (θ − θ_V)``, and

    f(S) = q(θ_init) − q(θ_S)   for sets holding an example of a positive-share stratum,
    f(S) = 0                    otherwise (``∅`` included: the model stays at ``θ_init``).

So ``f`` is the predicted fall in validation loss from the initial model. The one-step
approximation is the classical "one-step estimator" (Le Cam; see Bickel, "One-step Huber
estimates in the linear model", JASA 1975); second order in ``‖θ_S − θ_ref‖``.

Training that stops before it converges (``training`` given: ``R`` rounds of ``K`` local
gradient steps with rate ``α``, server rate ``η_r = η_g/(1 + ρ·r)``, every member in every
round, as in :mod:`fairsched.fl.training`) is modelled on the same quadratic: a local step
is a gradient step on ``F_S`` (exact for one local step, since the aggregation weights sum
to 1), so a round maps ``θ − θ_S`` to ``[I − η_r·(I − (I − α·H_S)^K)]·(θ − θ_S)`` and

    θ_S^R = θ_S + M_S·(θ_init − θ_S),   M_S = Π_{r<R} [I − η_r·(I − (I − α·H_S)^K)],

computed on the eigenvalues of ``H_S``; ``θ_S^R`` replaces ``θ_S`` in ``q``. Exact for a
quadratic loss when the members share one Hessian; an approximation otherwise.

Assumptions: (i) training uses post-stratified aggregation with the same ``π`` and either
runs long enough to approach ``F_S``'s minimiser or follows the ``training`` schedule given;
(ii) the validation objective stands for the target (with ``π`` estimated, e.g. by IPW, a
bias of ``π`` is invisible to it); (iii) the statistics come from the workers' current data.
Sharing gradients and Hessians at ``θ_ref`` discloses what one round of Newton-type federated
training discloses.

**Not monotone, not submodular** (:attr:`submodular` is ``False``): adding a worker can
raise the predicted loss. Fair schedulers that need submodularity for their guarantees
(FairCG's ``1 − 1/e``, greedy pricing bounds) lose them; FairDG, the debt-tracking
policies and column generation with a bound-free pricing still run.

Memory ``O(n·J·d)`` (``O(n·J·d²)`` with per-worker Hessians), for ``d`` model parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction, as_index_set, index_set_to_mask
from fairsched.utilities.validation import (
    as_masks,
    check_array,
    check_number,
    read_table,
    row_chunks,
)

TRAINING_KEYS = ("rounds", "local_steps", "local_lr", "server_lr", "server_decay")


def _training(table: Any) -> dict[str, Any]:
    """The ``training`` schedule, checked: integer rounds and local steps >= 1, rates > 0, decay >= 0."""
    if not isinstance(table, Mapping):
        raise InstanceError(f"must be a table, got {type(table).__name__}", key="training")
    missing = [key for key in TRAINING_KEYS if key not in table]
    unknown = [key for key in table if key not in TRAINING_KEYS]
    if missing or unknown:
        raise InstanceError(f"needs exactly the keys {', '.join(TRAINING_KEYS)}; missing {missing}, unknown {unknown}",
                            key="training")
    out: dict[str, Any] = {}
    for key in ("rounds", "local_steps"):
        value = table[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise InstanceError(f"{key} is {value!r}, expected an integer >= 1", key="training")
        out[key] = int(value)
    for key in ("local_lr", "server_lr"):
        out[key] = check_number(table[key], f"training.{key}", positive=True)
    out["server_decay"] = check_number(table["server_decay"], "training.server_decay", nonnegative=True)
    return out


def _check_psd(matrices: np.ndarray, name: str) -> None:
    """Symmetric positive semi-definite (to a relative 1e-9) along the last two axes."""
    flat = matrices.reshape(-1, *matrices.shape[-2:])
    scale = max(1.0, float(np.abs(flat).max(initial=0.0)))
    if np.abs(flat - np.swapaxes(flat, 1, 2)).max(initial=0.0) > 1e-9 * scale:
        raise InstanceError("must be symmetric", key=name)
    if flat.size and np.linalg.eigvalsh(flat).min() < -1e-9 * scale:
        raise InstanceError("must be positive semi-definite", key=name)


class OneStepValidation(SetFunction):
    """``f(S) = q(θ_init) − q(θ_S)``: predicted validation gain of the set's post-stratified model.

    Parameters
    ----------
    sizes : (n, J) array
        ``L_{u,j}``: examples of stratum ``j`` held by worker ``u``.
    gradients : (n, J, d) array
        ``g_{u,j}``: sum over worker ``u``'s stratum-``j`` examples of the loss gradient at ``reference``.
    hessians : (n, J, d, d) or (J, d, d) array
        Per worker: the sums ``H_{u,j}`` of the loss Hessians at ``reference``; pooled: the
        per-example mean Hessian ``H̄_j`` of each stratum.
    shares : (J,) array
        Target shares ``π_j`` the aggregation uses (nonnegative, summing to 1).
    reference : (d,) array
        ``θ_ref``, where the statistics were taken.
    ridge : float
        ``μ >= 0`` of the training objective.
    validation_optimum, validation_hessian : (d,) and (d, d) arrays
        ``θ_V`` and ``H_V`` of the quadratic validation model ``q``.
    initial : (d,) array, optional
        ``θ_init``, the model training starts from (default zeros).
    training : mapping, optional
        The training schedule, keys ``rounds``, ``local_steps``, ``local_lr``, ``server_lr``,
        ``server_decay`` (module docstring); default: training runs to convergence.
    n : int, optional
        Number of workers ``sizes`` must describe.

    Examples
    --------
    One parameter, squared loss ``ℓ = (θ − y)²/2`` (gradient ``θ − y``, Hessian 1), so one
    Newton step is exact: the set's model is the post-stratified mean of its labels.

    >>> from fairsched.utilities.one_step_validation import OneStepValidation
    >>> f = OneStepValidation(sizes=[[2, 0], [0, 1]], gradients=[[[-2.0], [0.0]], [[0.0], [-3.0]]],
    ...                       hessians=[[[1.0]], [[1.0]]], shares=[0.5, 0.5], reference=[0.0],
    ...                       ridge=0.0, validation_optimum=[2.0], validation_hessian=[[1.0]])
    >>> f.models(np.array([[True, True]]))    # ½·(2/2) + ½·(3/1)
    array([[2.]])
    >>> round(f.value([0, 1]), 6), round(f.value([0]), 6)    # q(0) = 2; {0} trains to θ = 1
    (2.0, 1.5)
    """

    kind = "one-step-validation"

    def __init__(self, sizes: Any, gradients: Any, hessians: Any, shares: Any, reference: Any,
                 ridge: float, validation_optimum: Any, validation_hessian: Any,
                 initial: Any = None, training: Mapping[str, Any] | None = None, *, n: int | None = None):
        L = check_array(sizes, "sizes", (n, None))
        if (L < 0).any():
            raise InstanceError("must be >= 0", key="sizes")
        self.n, self.strata = L.shape
        self.sizes = L
        self.shares = check_array(shares, "shares", (self.strata,))
        if (self.shares < 0).any():
            raise InstanceError("must be >= 0", key="shares")
        if not np.isclose(self.shares.sum(), 1.0, rtol=0, atol=1e-9):
            raise InstanceError(f"must sum to 1, sum is {self.shares.sum():.12g}", key="shares")
        self.reference = check_array(reference, "reference", (None,))
        d = self.dim = self.reference.size
        self.gradients = check_array(gradients, "gradients", (self.n, self.strata, d))
        self.pooled = np.ndim(hessians) == 3
        shape = (self.strata, d, d) if self.pooled else (self.n, self.strata, d, d)
        self.hessians = check_array(hessians, "hessians", shape)
        _check_psd(self.hessians, "hessians")
        self.ridge = check_number(ridge, "ridge", nonnegative=True)
        self.validation_optimum = check_array(validation_optimum, "validation_optimum", (d,))
        self.validation_hessian = check_array(validation_hessian, "validation_hessian", (d, d))
        _check_psd(self.validation_hessian, "validation_hessian")
        self.initial = np.zeros(d) if initial is None else check_array(initial, "initial", (d,))
        self.training = None if training is None else _training(training)
        self._q_initial = self._q(self.initial[None, :])[0]

    @property
    def submodular(self) -> bool:
        """``False``: a predicted validation loss is neither monotone nor submodular in ``S``."""
        return False

    @property
    def submodular_off_empty(self) -> bool:
        return False

    def _q(self, theta: np.ndarray) -> np.ndarray:
        diff = theta - self.validation_optimum
        return 0.5 * np.einsum("bd,de,be->b", diff, self.validation_hessian, diff)

    def _step(self, counts: np.ndarray, grad_sums: np.ndarray, hess: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(θ_S, valid)`` from per-set stratum counts ``(B, J)``, gradient sums ``(B, J, d)`` and
        Hessian sums ``(B, J, d, d)`` (or ``None`` rows for pooled)."""
        present = self.shares * (counts > 0)
        total = present.sum(axis=1)
        valid = total > 0
        tilde = present / np.where(valid, total, 1.0)[:, None]
        coef = np.where(counts > 0, tilde / np.maximum(counts, 1e-300), 0.0)
        B, J, d = counts.shape[0], self.strata, self.dim
        g = (coef[:, None, :] @ grad_sums)[:, 0] + self.ridge * self.reference
        if self.pooled:
            H = (tilde @ self.hessians.reshape(J, d * d)).reshape(B, d, d)
        else:
            H = (coef[:, None, :] @ hess.reshape(B, J, d * d))[:, 0].reshape(B, d, d)
        H = H + self.ridge * np.eye(d)
        H[~valid] = np.eye(self.dim)
        try:
            theta = self.reference - np.linalg.solve(H, g[:, :, None])[:, :, 0]
        except np.linalg.LinAlgError:
            raise ValueError("the Hessian H_S of some set is singular (too few examples for d parameters); "
                             "give a ridge > 0") from None
        if self.training is not None:
            theta = theta + self._contraction(H, self.initial[None, :] - theta)
        theta[~valid] = self.initial
        return theta, valid

    def _contraction(self, H: np.ndarray, start: np.ndarray) -> np.ndarray:
        """``M_S·start`` for each row (module docstring), on the eigenvalues of ``H_S``."""
        t = self.training
        eigenvalues, vectors = np.linalg.eigh(H)
        factor = np.ones_like(eigenvalues)
        local = 1.0 - (1.0 - t["local_lr"] * eigenvalues) ** t["local_steps"]
        for r in range(t["rounds"]):
            factor *= 1.0 - t["server_lr"] / (1.0 + t["server_decay"] * r) * local
        along = np.einsum("bfe,bf->be", vectors, start)
        return np.einsum("bde,be->bd", vectors, factor * along)

    def models(self, masks: np.ndarray) -> np.ndarray:
        """``θ_S`` ``(m, d)`` of every set of a boolean batch ``(m, n)`` (``θ_init`` where the set
        holds no example of a positive-share stratum)."""
        masks = as_masks(masks, self.n)
        J, d = self.strata, self.dim
        out = np.empty((masks.shape[0], d))
        per_row = self.n + J * d * (1 if self.pooled else d + 1)
        for rows in row_chunks(masks.shape[0], per_row):
            m = masks[rows].astype(np.float64)
            counts = m @ self.sizes
            grads = (m @ self.gradients.reshape(self.n, -1)).reshape(-1, J, d)
            hess = None if self.pooled else (m @ self.hessians.reshape(self.n, -1)).reshape(-1, J, d, d)
            out[rows] = self._step(counts, grads, hess)[0]
        return out

    def values(self, masks: np.ndarray) -> np.ndarray:
        return self._q_initial - self._q(self.models(masks))

    def gains(self, S: Any) -> np.ndarray:
        """``f(S + u) − f(S)`` for every ``u`` from the set's sums plus each worker's row:
        ``O(n·J·d)`` work per block (``O(n·J·d²)`` with per-worker Hessians), no ``(n, n)`` mask."""
        S = as_index_set(S, self.n)
        base = index_set_to_mask(S, self.n)
        reference = float(self.values(base[None, :])[0])
        J, d = self.strata, self.dim
        counts = self.sizes[S].sum(axis=0)
        grads = self.gradients[S].sum(axis=0)
        hess = None if self.pooled else self.hessians[S].sum(axis=0)
        out = np.zeros(self.n)
        outside = np.flatnonzero(~base)
        for rows in row_chunks(outside.size, J * d * (1 if self.pooled else d + 1)):
            block = outside[rows]
            h = None if self.pooled else hess[None] + self.hessians[block]
            theta, _ = self._step(counts[None] + self.sizes[block], grads[None] + self.gradients[block], h)
            out[block] = self._q_initial - self._q(theta) - reference
        return out

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "sizes": self.sizes.tolist(), "gradients": self.gradients.tolist(),
                "hessians": self.hessians.tolist(), "shares": self.shares.tolist(),
                "reference": self.reference.tolist(), "ridge": self.ridge,
                "validation_optimum": self.validation_optimum.tolist(),
                "validation_hessian": self.validation_hessian.tolist(), "initial": self.initial.tolist(),
                **({} if self.training is None else {"training": dict(self.training)})}

    @classmethod
    def from_config(cls, table: dict, n: int | None = None) -> Self:
        """Build from a ``[utility]`` table with the constructor's keys (``initial`` optional)."""
        required = ["sizes", "gradients", "hessians", "shares", "reference", "ridge",
                    "validation_optimum", "validation_hessian"]
        table = read_table(table, cls.kind, required, ["initial", "training"])
        return cls(**{key: table[key] for key in required}, initial=table.get("initial"),
                   training=table.get("training"), n=n)

    def __repr__(self) -> str:
        hess = "pooled" if self.pooled else "per-worker"
        return f"{type(self).__name__}(n={self.n}, strata={self.strata}, dim={self.dim}, hessians={hess})"
