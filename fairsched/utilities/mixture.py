"""Non-negative mixtures of utilities: ``f = Σ_i w_i · f_i``.

A non-negative combination of monotone submodular functions is monotone submodular, so a
mixture is certified (:attr:`Mixture.submodular`) exactly when every component with a
positive weight is; otherwise nothing is claimed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction
from fairsched.utilities.validation import as_masks, check_number, read_table


class Mixture(SetFunction):
    """``f(S) = Σ_i weights_i · components_i(S)`` with ``weights_i >= 0``, all on the same ``n``.

    Examples
    --------
    >>> from fairsched.utilities import Coverage, Mixture, Modular
    >>> f = Mixture([Modular([1.0, 2.0, 3.0]), Coverage([[0], [0], [1]], [1.0, 1.0])],
    ...             weights=[0.5, 2.0])
    >>> f.value([0, 1])                   # 0.5·(1 + 2) + 2·1
    3.5
    >>> [c["kind"] for c in f.to_config()["components"]]
    ['modular', 'coverage']
    """

    kind = "mixture"

    def __init__(self, components: Sequence[SetFunction], weights: Sequence[float]):
        components = list(components)
        weights = list(weights)
        if not components:
            raise InstanceError("must list at least one component", key="components")
        if len(weights) != len(components):
            raise InstanceError(f"{len(weights)} weights for {len(components)} components",
                                key="components")
        for i, comp in enumerate(components):
            if not isinstance(comp, SetFunction):
                raise InstanceError(f"is a {type(comp).__name__}, expected a utility",
                                    key=f"components[{i}]")
            if comp.n != components[0].n:
                raise InstanceError(f"has {comp.n} workers, expected {components[0].n} "
                                    "(as components[0])", key=f"components[{i}]")
        self.weights = np.array([check_number(w, f"components[{i}].weight", nonnegative=True)
                                 for i, w in enumerate(weights)])
        self.components = components
        self.n = components[0].n

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = as_masks(masks, self.n)
        out = np.zeros(masks.shape[0], dtype=np.float64)
        for w, comp in zip(self.weights, self.components):
            out += w * comp.values(masks)
        return out

    def gains(self, S: Any) -> np.ndarray:
        out = np.zeros(self.n, dtype=np.float64)
        for w, comp in zip(self.weights, self.components):
            out += w * comp.gains(S)
        return out

    def _active(self) -> list[tuple[int, SetFunction]]:
        return [(i, comp) for i, (w, comp) in enumerate(zip(self.weights, self.components)) if w > 0]

    @property
    def submodular(self) -> bool | None:
        """``True`` when every component with a positive weight is certified monotone
        submodular; ``None`` (unknown) otherwise: a non-submodular part may or may not be
        compensated by the others."""
        return True if all(comp.submodular is True for _, comp in self._active()) else None

    @property
    def submodular_off_empty(self) -> bool | None:
        """``True`` when every component with a positive weight is certified monotone
        submodular on the non-empty sets; ``None`` otherwise."""
        return True if all(comp.submodular_off_empty is True for _, comp in self._active()) else None

    def submodularity_problem(self) -> str | None:
        """The components' own :meth:`submodularity_problem` findings, or ``None``.

        A component that fails makes the mixture's monotone submodularity unproven (the
        others may or may not make up for it), and every bound resting on it unsafe.
        """
        found = []
        for i, comp in self._active():
            check = getattr(comp, "submodularity_problem", None)
            issue = check() if check is not None else None
            if issue:
                found.append(f"component {i} ({comp.kind}, weight {self.weights[i]:g}): {issue}")
        if not found:
            return None
        return "the mixture may not be monotone submodular: " + "; ".join(found)

    def to_config(self) -> dict[str, Any]:
        return {"kind": self.kind,
                "components": [{**comp.to_config(), "weight": float(w)}
                               for w, comp in zip(self.weights, self.components)]}

    @classmethod
    def from_config(cls, table: dict, build: Callable[[dict], SetFunction]) -> Self:
        """Build from a table whose ``components`` are utility tables, each with a ``weight``.

        ``build`` turns one component table (without ``weight``) into a utility; it is a
        parameter so this module need not import the kind registry. Errors inside
        component ``i`` are re-raised with their key under ``components[i].``.
        """
        table = read_table(table, cls.kind, ["components"])
        tables = table["components"]
        if isinstance(tables, (str, bytes, Mapping)) or not isinstance(tables, Sequence):
            raise InstanceError("must be a list of utility tables", key="components")
        components, weights = [], []
        for i, sub in enumerate(tables):
            where = f"components[{i}]"
            if not isinstance(sub, Mapping):
                raise InstanceError(f"is {sub!r}, expected a utility table", key=where)
            if "weight" not in sub:
                raise InstanceError("missing key", key=f"{where}.weight")
            weights.append(sub["weight"])
            try:
                components.append(build({k: v for k, v in sub.items() if k != "weight"}))
            except InstanceError as exc:
                raise exc.located(key_prefix=where) from exc
        return cls(components, weights)
