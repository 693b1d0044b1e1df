"""The instances that ship with fairsched, found by name through :mod:`importlib.resources`.

``paper`` (the simulation of Li, Liu and Ji, "Federated Learning with Fair Worker Selection:
A Multi-Round Submodular Maximization Approach"), ``coverage``, ``facility-location`` and
``concave-modular`` (instances where fairness is costly). Wherever fairsched is installed,
``fairsched run paper --policy fairdg`` finds them.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from fairsched.errors import InstanceError

SUFFIX = ".toml"


def _folder() -> resources.abc.Traversable:
    return resources.files("fairsched.instances") / "data"


def bundled_names() -> list[str]:
    """Names of the bundled instances, sorted.

    >>> "paper" in bundled_names()
    True
    """
    return sorted(entry.name[: -len(SUFFIX)] for entry in _folder().iterdir() if entry.name.endswith(SUFFIX))


def bundled_bytes(name: str) -> bytes:
    """The TOML bytes of the bundled instance ``name`` (with or without ``.toml``)."""
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    entry = _folder() / f"{stem}{SUFFIX}"
    if stem not in bundled_names():
        raise InstanceError(f"no such file or bundled instance; bundled: {', '.join(bundled_names())}",
                            source=name)
    return entry.read_bytes()


def is_bundled_name(text: str | os.PathLike[str]) -> bool:
    """Whether ``text`` names a bundled instance rather than a file: no such file exists and the
    name (without directories) is bundled."""
    text = os.fspath(text)
    if Path(text).exists() or os.sep in text or (os.altsep and os.altsep in text):
        return False
    stem = text[: -len(SUFFIX)] if text.endswith(SUFFIX) else text
    return stem in bundled_names()
