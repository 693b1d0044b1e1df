"""User-supplied utilities: a plain Python function of a set of workers.

This is the slow path: :meth:`CallableUtility.values` calls the function once per
distinct set in a Python loop (memoised by default). The function receives a sorted
tuple of ``int`` worker indices and must return a finite real number; it should be
monotone submodular with ``f(()) = 0`` — check with
:func:`fairsched.utilities.check.check_submodular`.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from numbers import Real
from typing import Any, Self

import numpy as np

from fairsched.errors import InstanceError
from fairsched.utilities.base import SetFunction
from fairsched.utilities.validation import as_masks, read_table


def load_callable(path: Any) -> Callable[..., Any]:
    """Import ``"module:attribute"`` (the attribute may be dotted) and return it.

    Note that importing runs the module's code: instance files naming a callable are code.
    """
    if not isinstance(path, str) or path.count(":") != 1 or not all(path.split(":")):
        raise InstanceError(f"is {path!r}, expected 'module:function'", key="callable")
    module_name, attr_path = path.split(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and not f"{module_name}.".startswith(f"{exc.name}."):
            # the module exists, but an import inside it failed
            raise InstanceError(f"importing module {module_name!r} failed: {exc}", key="callable") from exc
        raise InstanceError(f"module {module_name!r} not found (in {path!r})",
                            key="callable") from None
    except Exception as exc:
        raise InstanceError(f"importing module {module_name!r} failed: {exc}",
                            key="callable") from exc
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise InstanceError(f"module {module_name!r} has no attribute {attr_path!r}",
                                key="callable")
        obj = getattr(obj, part)
    if not callable(obj):
        raise InstanceError(f"{path!r} is a {type(obj).__name__}, not callable", key="callable")
    return obj


class CallableUtility(SetFunction):
    """``f(S) = func(tuple(sorted(S)))`` for a user function ``func`` on ``n`` workers.

    Results are cached by the set's mask bytes when ``memoize`` is true; :attr:`calls`
    counts the calls actually made to ``func``. A result that is not a finite real number,
    or an exception raised by ``func``, is an :class:`InstanceError` (key ``callable``).
    """

    kind = "python"

    def __init__(self, func: Callable[[tuple[int, ...]], float], n: int,
                 memoize: bool = True, name: str | None = None):
        if not callable(func):
            raise TypeError(f"func must be callable, got {type(func).__name__}")
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise InstanceError(f"number of workers is {n!r}, expected an int >= 1")
        self.func = func
        self.n = int(n)
        self.memoize = memoize
        self.name = name or getattr(func, "__qualname__", repr(func))
        self.path: str | None = None
        self.calls = 0
        self._cache: dict[bytes, float] = {}

    @property
    def submodular(self) -> None:
        """``None``: a user's function is monotone submodular only by the user's promise,
        which no bound is allowed to rest on."""
        return None

    def _call(self, row: np.ndarray) -> float:
        S = tuple(int(u) for u in np.flatnonzero(row))
        self.calls += 1
        try:
            result = self.func(S)
        except Exception as exc:  # the user's code: its failure is a bad instance, reported in one line
            raise InstanceError(f"{self.name} raised {type(exc).__name__}: {exc} for the set {S}",
                                key="callable") from exc
        if isinstance(result, bool) or not isinstance(result, Real):
            raise InstanceError(f"{self.name} returned {result!r} ({type(result).__name__}) "
                                f"for {S}, expected a number", key="callable")
        value = float(result)
        if not math.isfinite(value):
            raise InstanceError(f"{self.name} returned {value} for {S}, expected a finite number",
                                key="callable")
        return value

    def values(self, masks: np.ndarray) -> np.ndarray:
        masks = as_masks(masks, self.n)
        out = np.empty(masks.shape[0], dtype=np.float64)
        for i, row in enumerate(masks):
            if not self.memoize:
                out[i] = self._call(row)
                continue
            key = row.tobytes()
            if key not in self._cache:
                self._cache[key] = self._call(row)
            out[i] = self._cache[key]
        return out

    def to_config(self) -> dict[str, Any]:
        """``{"kind": "python", "callable": "module:function"}``.

        The path is the one loaded by :meth:`from_config`, else inferred from the function's
        module and qualified name if that imports back to the same object.
        """
        path = self.path or self._infer_path()
        if path is None:
            raise TypeError(f"cannot write {self.name} to a config: it is not importable as "
                            "'module:function' (use a module-level function)")
        return {"kind": self.kind, "callable": path}

    def _infer_path(self) -> str | None:
        module = getattr(self.func, "__module__", None)
        qualname = getattr(self.func, "__qualname__", None)
        if not module or not qualname or "<" in qualname:
            return None
        path = f"{module}:{qualname}"
        try:
            return path if load_callable(path) is self.func else None
        except InstanceError:
            return None

    @classmethod
    def from_config(cls, table: dict, n: int | None) -> Self:
        """Build from a ``[utility]`` table with ``callable = "module:function"``.

        ``n`` (the instance's number of workers) is required: a function does not know it.
        """
        table = read_table(table, cls.kind, ["callable"])
        if n is None:
            raise InstanceError("a 'python' utility needs the number of workers n",
                                key="callable")
        path = table["callable"]
        obj = cls(load_callable(path), n, name=path)
        obj.path = path
        return obj
