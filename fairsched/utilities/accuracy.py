"""Accuracy utility: an inverse power-law learning curve of the total data size.

``f(S) = (1 − a) − b · (Σ_{u∈S} sizes_u)^c`` for non-empty ``S`` and ``f(∅) = 0``, with
``b > 0`` and ``c < 0``: the utility of the simulations of Li, Liu and Ji, "Federated
Learning with Fair Worker Selection: A Multi-Round Submodular Maximization Approach"
(2021), Section VI (``docs/mathematics.md`` §10).
"""

from __future__ import annotations

from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction, as_index_set
from fairsched.utilities.validation import (
    as_masks,
    check_number,
    check_vector,
    read_table,
)


class AccuracyUtility(SetFunction):
    """``f(S) = (1 − a) − b·(Σ_{u∈S} sizes_u)^c`` for ``S ≠ ∅``, ``f(∅) = 0``.

    On non-empty sets this is a concave increasing function of a modular one, hence
    monotone submodular there; the jump from ``∅`` can break both properties when sizes
    are small, see :meth:`submodularity_problem`. ``n``, if given, is the number of
    workers ``sizes`` must describe.

    Examples
    --------
    >>> from fairsched.utilities import AccuracyUtility
    >>> f = AccuracyUtility([100, 200, 300])          # (a, b, c) = (0.05, 0.5, -0.2)
    >>> round(f.value([0, 2]), 6), f.value([])
    (0.799146, 0.0)
    >>> f.gains([0]).round(6).tolist()                 # f({0, u}) - f({0}) for every u
    [0.0, 0.039265, 0.048199]
    >>> f.submodularity_problem() is None
    True
    >>> AccuracyUtility([0.01, 1.0]).submodularity_problem()
    'not monotone: f({0}) = -0.305943 < 0 = f({}) (size 0.01 is too small for a=0.05, b=0.5, c=-0.2)'
    """

    kind = "accuracy"

    def __init__(self, sizes: Any, a: float = 0.05, b: float = 0.5, c: float = -0.2,
                 *, n: int | None = None):
        self.sizes = check_vector(sizes, "sizes", length=n, positive=True)
        if self.sizes.size == 0:
            raise InstanceError("must list at least one worker", key="sizes")
        self.n = int(self.sizes.size)
        self.a = check_number(a, "a")
        self.b = check_number(b, "b", positive=True)
        self.c = check_number(c, "c", negative=True)

    @property
    def submodular(self) -> bool:
        """Whether ``f`` is monotone submodular on all of ``2^N``: :meth:`submodularity_problem`
        finds no failure of the jump from ``∅``."""
        return self.submodularity_problem() is None

    @property
    def submodular_off_empty(self) -> bool:
        """Always ``True``: on non-empty sets ``f`` is a concave increasing function of a
        modular one with positive weights."""
        return True

    def curve(self, total: np.ndarray) -> np.ndarray:
        """``g(s) = (1 − a) − b·s^c`` of total sizes ``s > 0``: ``f(S) = g(L(S))`` for ``S ≠ ∅``."""
        return (1.0 - self.a) - self.b * np.power(total, self.c)

    def slope(self, total: np.ndarray | float) -> np.ndarray | float:
        """``g'(s) = −b·c·s^(c − 1)``, positive and decreasing: ``g`` is concave increasing."""
        return -self.b * self.c * np.power(total, self.c - 1.0)

    def level_at_slope(self, eta: np.ndarray | float) -> np.ndarray | float:
        """The total size where the slope is ``η > 0``: ``s = (η / (−b·c))^(1/(c − 1))``, the
        inverse of :meth:`slope`, so the maximiser of ``g(s) − η·s`` over ``s > 0``."""
        return np.power(np.asarray(eta, dtype=float) / (-self.b * self.c), 1.0 / (self.c - 1.0))

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = as_masks(masks, self.n)
        total = masks @ self.sizes
        nonempty = masks.any(axis=1)
        return np.where(nonempty, self.curve(np.where(nonempty, total, 1.0)), 0.0)

    def gains(self, S: Any) -> np.ndarray:
        S = as_index_set(S, self.n)
        if S.size == 0:
            return self.curve(self.sizes)
        total = float(self.sizes[S].sum())
        out = self.curve(total + self.sizes) - self.curve(np.float64(total))
        out[S] = 0.0
        return out

    def submodularity_problem(self) -> str | None:
        """Why ``f`` is not monotone submodular on these sizes, or ``None`` if it is.

        Away from ``∅`` the curve is concave and increasing, so only the jump from ``∅``
        can fail: every ``f({u}) >= 0`` (monotonicity), and ``f({u}) >= f({u, v}) − f({v})``
        for ``v`` the smallest other worker, the largest gain ``u`` can have on a non-empty
        set (diminishing returns).
        """
        tol = 1e-12
        singles = self.curve(self.sizes)
        params = f"a={self.a:g}, b={self.b:g}, c={self.c:g}"
        u = int(np.argmin(singles))
        if singles[u] < -tol:
            return (f"not monotone: f({{{u}}}) = {singles[u]:.6g} < 0 = f({{}}) "
                    f"(size {self.sizes[u]:g} is too small for {params})")
        if self.n < 2:
            return None
        order = np.argsort(self.sizes, kind="stable")
        smallest_other = np.where(np.arange(self.n) == order[0], order[1], order[0])
        partner = self.sizes[smallest_other]
        jump = self.curve(self.sizes + partner) - self.curve(partner)
        bad = np.flatnonzero(singles < jump - tol)
        if bad.size:
            u = int(bad[0])
            v = int(smallest_other[u])
            return (f"not submodular: gain of {u} on {{}} is {singles[u]:.6g} < gain on "
                    f"{{{v}}} = {jump[u]:.6g} (sizes {self.sizes[u]:g} and "
                    f"{self.sizes[v]:g} are too small for {params})")
        return None

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind, "sizes": self.sizes.tolist(),
                "a": self.a, "b": self.b, "c": self.c}

    @classmethod
    def from_config(cls, table: dict, n: int | None = None) -> Self:
        """Build from a ``[utility]`` table with ``sizes`` and optional ``a``, ``b``, ``c``."""
        table = read_table(table, cls.kind, ["sizes"], ["a", "b", "c"])
        params = {k: table[k] for k in ("a", "b", "c") if k in table}
        return cls(table["sizes"], **params, n=n)
