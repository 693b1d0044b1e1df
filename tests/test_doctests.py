"""Every ``>>>`` example in fairsched's docstrings runs and prints what it claims.

The modules are found by scanning the source files under ``fairsched/`` and ``solvers/``
for ``>>>``; ``solvers/`` is installed as ``fairsched.solvers``. One test per module, so a
failure names the module, and the failing examples are in the assertion message.
"""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: source folder -> the package it is imported as
PACKAGES = {"fairsched": "fairsched", "solvers": "fairsched.solvers"}
OPTIONFLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def module_name(path: Path) -> str:
    """``fairsched/lp/solve.py`` -> ``fairsched.lp.solve``; ``solvers/lp.py`` -> ``fairsched.solvers.lp``."""
    relative = path.relative_to(ROOT).with_suffix("")
    parts = [PACKAGES[relative.parts[0]], *relative.parts[1:]]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules_with_examples() -> list[str]:
    found = []
    for folder in PACKAGES:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if ">>>" in path.read_text(encoding="utf-8"):
                found.append(module_name(path))
    return found


MODULES = modules_with_examples()


def test_examples_were_found():
    assert "fairsched.lp.solve" in MODULES and "fairsched.utilities.accuracy" in MODULES, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=OPTIONFLAGS)
    report = io.StringIO()
    for test in finder.find(module, name):
        runner.run(test, out=report.write)
    result = runner.summarize(verbose=False)
    assert result.attempted >= 1, f"{name} contains '>>>' but doctest found no example in it"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}:\n{report.getvalue()}"
