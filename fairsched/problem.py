"""The MMSM-CF problem: a utility, a per-round budget ``k`` and fairness floors ``r``.

Li, Liu and Ji, "Federated Learning with Fair Worker Selection: A Multi-Round Submodular
Maximization Approach" (2021), Section III: in every round pick ``S_t`` with ``|S_t| <= k``
so that every worker ``u`` is selected a long-run fraction ``>= r_u`` of the rounds,
maximising the time-average utility. The floors are feasible iff ``0 <= r_u <= 1`` for all
``u`` and ``Σ_u r_u <= k`` (``docs/mathematics.md`` §1).

Optional upper caps ``c_u`` bound each worker's long-run fraction from above (a worker may
not be asked in more than a fraction ``c_u`` of the rounds: the analogue of Oort's
blacklist of over-selected clients, Lai et al., "Oort: Efficient Federated Learning via
Guided Participant Selection", OSDI 2021). With caps, rounds still select ``k`` workers, so
the problem is feasible iff ``r_u <= c_u <= 1`` for all ``u``, ``Σ r <= k`` and
``Σ c >= k`` (then marginals ``r <= x <= c`` with ``Σ x = k`` exist, and every such ``x``
is a mixture of ``k``-sets).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from fairsched.errors import InfeasibleError, InstanceError
from fairsched.utilities.base import SetFunction

# Σ r may exceed k by float rounding when the floors are written as decimals.
FEASIBILITY_TOLERANCE = 1e-9


@dataclass(frozen=True, eq=False)
class Problem:
    """One MMSM-CF instance.

    Parameters
    ----------
    utility : SetFunction
        Monotone submodular ``f`` on workers ``0..n-1``.
    k : int
        Workers selected per round, ``1 <= k <= n``.
    r : array-like of float
        Minimum selection fraction of every worker.
    ids : sequence of str, optional
        Worker names used at the edges (files, CLI); default ``"0".."n-1"``.
    name : str
        Instance name, for reports.
    rounds : int, optional
        Default horizon for :func:`fairsched.run`.
    availability : array-like of float, optional
        Probability that each worker can be asked in a round (independent across workers
        and rounds); ``None`` means always available.
    caps : array-like of float, optional
        Maximum long-run selection fraction ``c_u`` of every worker (``r_u <= c_u <= 1``);
        ``None`` means no cap. The LP adds ``Σ_{S ∋ u} p_S <= c_u``, and every policy keeps
        ``N_u(t) < c_u·t + 1`` in every round (:meth:`fairsched.policies.base.Policy.select`).

    Raises
    ------
    InstanceError
        Malformed input: ``k`` outside ``1..n``, a non-finite or negative ``r_u``, ids of
        the wrong length, repeated or invalid (:func:`is_valid_worker_id`).
    InfeasibleError
        Well-formed but unsatisfiable floors: some ``r_u > 1`` or ``Σ r > k``, or with caps
        some ``r_u > c_u`` or ``Σ c < k``; the message says which and by how much.

    Examples
    --------
    >>> import fairsched as fs
    >>> from fairsched.utilities import Modular
    >>> problem = fs.Problem(Modular([3.0, 2.0, 1.0]), k=2, r=[0.2, 0.5, 0.5], ids=("a", "b", "c"))
    >>> problem.n, problem.k, problem.ids, problem.r.tolist()
    (3, 2, ('a', 'b', 'c'), [0.2, 0.5, 0.5])
    >>> round(fs.optimum(problem).value, 6)
    4.5
    >>> fs.Problem(Modular([3.0, 2.0, 1.0]), k=1, r=[0.2, 0.5, 0.5])
    Traceback (most recent call last):
    ...
    fairsched.errors.InfeasibleError: infeasible: the floors sum to 1.2 > k = 1 (excess 0.2; at most k workers fit in a round)
    """

    utility: SetFunction
    k: int
    r: np.ndarray
    ids: tuple[str, ...] = field(default=())
    name: str = ""
    rounds: int | None = None
    availability: np.ndarray | None = None
    caps: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = int(self.utility.n)
        if isinstance(self.k, bool) or not isinstance(self.k, (int, np.integer)):
            raise InstanceError(f"must be an integer, got {self.k!r}", key="k")
        if not 1 <= int(self.k) <= n:
            raise InstanceError(f"is {self.k}, must be between 1 and n = {n}", key="k")
        object.__setattr__(self, "k", int(self.k))
        r = _check_floors(self.r, n)
        r.setflags(write=False)
        object.__setattr__(self, "r", r)
        ids = tuple(str(i) for i in self.ids) if len(self.ids) else tuple(str(i) for i in range(n))
        if len(ids) != n:
            raise InstanceError(f"has {len(ids)} entries, expected {n} (one per worker)", key="workers.ids")
        check_worker_ids(ids)
        if len(set(ids)) != n:
            dup = next(i for i in ids if ids.count(i) > 1)
            raise InstanceError(f"worker id {dup!r} appears more than once", key="workers.ids")
        object.__setattr__(self, "ids", ids)
        if self.rounds is not None and (isinstance(self.rounds, bool) or int(self.rounds) < 1):
            raise InstanceError(f"is {self.rounds}, must be a positive integer", key="rounds")
        check_feasible(self.r, self.k, self.ids)
        if self.availability is not None:
            a = _check_floors(self.availability, n, key="workers.availability")
            if (a > 1).any():
                i = int(np.flatnonzero(a > 1)[0])
                raise InstanceError(f"entry {i} is {a[i]}, a probability must be <= 1", key="workers.availability")
            a.setflags(write=False)
            object.__setattr__(self, "availability", a)
        if self.caps is not None:
            c = _check_floors(self.caps, n, key="workers.cap")
            if (c > 1 + FEASIBILITY_TOLERANCE).any():
                i = int(np.flatnonzero(c > 1 + FEASIBILITY_TOLERANCE)[0])
                raise InstanceError(f"entry {i} is {c[i]}, a fraction must be <= 1", key="workers.cap")
            c = np.minimum(c, 1.0)
            check_caps(self.r, c, self.k, self.ids)
            c.setflags(write=False)
            object.__setattr__(self, "caps", c)

    @property
    def n(self) -> int:
        """Number of workers."""
        return int(self.utility.n)

    def with_floors(self, r: Sequence[float] | np.ndarray) -> "Problem":
        """The same problem with other fairness floors ``r``."""
        return Problem(self.utility, self.k, np.asarray(r, dtype=float), self.ids, self.name, self.rounds,
                       self.availability, self.caps)

    @property
    def upper(self) -> np.ndarray:
        """The caps ``c`` (all 1 without caps): the largest fraction each worker may reach."""
        return np.ones(self.n) if self.caps is None else self.caps

    def index_of(self, worker_id: str) -> int:
        """Index of the worker named ``worker_id``."""
        try:
            return self.ids.index(worker_id)
        except ValueError:
            raise InstanceError(f"unknown worker id {worker_id!r}") from None

    def __repr__(self) -> str:
        return (f"Problem(name={self.name!r}, n={self.n}, k={self.k}, "
                f"sum_r={float(self.r.sum()):.4g}, utility={self.utility!r})")


def is_valid_worker_id(worker_id: object) -> bool:
    """Whether ``worker_id`` is a valid worker id: a non-empty string of printable characters without whitespace.

    Schedules and traces separate ids by spaces, so an id with whitespace could not be read back.
    """
    return (isinstance(worker_id, str) and bool(worker_id) and worker_id.isprintable()
            and not any(ch.isspace() for ch in worker_id))


def check_worker_ids(ids: Sequence[object]) -> None:
    """Raise :class:`InstanceError` (key ``workers.ids``) naming the first invalid id (see :func:`is_valid_worker_id`).

    The one check of ids, for instance files and the Python API alike.
    """
    for worker_id in ids:
        if not is_valid_worker_id(worker_id):
            raise InstanceError(f"worker id {worker_id!r} is invalid: an id is a non-empty string of printable "
                                "characters without whitespace", key="workers.ids")


def _check_floors(r: Any, n: int, key: str = "workers.r") -> np.ndarray:
    try:
        arr = np.array(r, dtype=np.float64).reshape(-1) if np.ndim(r) <= 1 else None
    except (TypeError, ValueError):
        arr = None
    if arr is None:
        raise InstanceError("must be a list of numbers, one per worker", key=key)
    if arr.size != n:
        raise InstanceError(f"has {arr.size} entries, expected {n} (one per worker)", key=key)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InstanceError(f"entry {i} is {arr[i]}, expected a finite number", key=key)
    if (arr < 0).any():
        i = int(np.flatnonzero(arr < 0)[0])
        raise InstanceError(f"entry {i} is {arr[i]}, a fraction must be >= 0", key=key)
    return arr


def check_feasible(r: np.ndarray, k: int, ids: Sequence[str]) -> None:
    """Raise :class:`InfeasibleError` unless ``r_u <= 1`` for all ``u`` and ``Σ r <= k``."""
    over = np.flatnonzero(r > 1 + FEASIBILITY_TOLERANCE)
    if over.size:
        u = int(over[0])
        raise InfeasibleError(
            f"infeasible: worker {ids[u]!r} needs r = {r[u]:.6g} > 1 "
            f"(a worker cannot be selected in more than every round; excess {r[u] - 1:.6g})")
    total = float(r.sum())
    if total > k + FEASIBILITY_TOLERANCE:
        raise InfeasibleError(
            f"infeasible: the floors sum to {total:.6g} > k = {k} "
            f"(excess {total - k:.6g}; at most k workers fit in a round)")


def check_caps(r: np.ndarray, caps: np.ndarray, k: int, ids: Sequence[str]) -> None:
    """Raise :class:`InfeasibleError` unless ``r_u <= c_u`` for all ``u`` and ``Σ c >= k``."""
    below = np.flatnonzero(caps < r - FEASIBILITY_TOLERANCE)
    if below.size:
        u = int(below[0])
        raise InfeasibleError(
            f"infeasible: worker {ids[u]!r} has floor r = {r[u]:.6g} above its cap {caps[u]:.6g} "
            f"(excess {r[u] - caps[u]:.6g})")
    total = float(caps.sum())
    if total < k - FEASIBILITY_TOLERANCE:
        raise InfeasibleError(
            f"infeasible: the caps sum to {total:.6g} < k = {k} (short by {k - total:.6g}; every round "
            "selects k workers, so the caps must leave room for k selections per round)")
