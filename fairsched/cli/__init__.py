"""The ``fairsched`` command line (:mod:`fairsched.cli.app`).

``main`` and ``build_parser`` are loaded on first use, so ``python -m fairsched.cli.bench``
does not load the other subcommands.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["build_parser", "main"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("fairsched.cli.app"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
