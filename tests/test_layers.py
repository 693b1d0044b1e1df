"""The layering of fairsched, as import-linter contracts (``[tool.importlinter]`` in pyproject.toml),
the independence of ``solvers/``, and a light ``import fairsched``."""

from __future__ import annotations

import ast
import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fairsched

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "pyproject.toml"
SOLVERS = ROOT / "solvers"

#: what ``solvers/`` may import besides the standard library (cvxpy and clarabel only lazily)
SOLVER_DEPENDENCIES = {"numpy", "scipy", "highspy"}
LAZY_SOLVER_DEPENDENCIES = {"cvxpy", "clarabel"}

#: modules that ``import fairsched`` and its core modules must not load
HEAVY = ("scipy.optimize", "highspy", "networkx", "joblib", "tqdm", "cvxpy", "clarabel", "sklearn", "flwr",
         "matplotlib")


# --- import-linter -----------------------------------------------------------------------------

def _lint(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repository's contracts, in a fresh interpreter."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    code = ("import sys; from importlinter.cli import lint_imports; "
            "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True, no_logo=True, verbose=True))")
    return subprocess.run([sys.executable, "-c", code, str(CONFIG)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def _installed_layout(tmp_path: Path) -> Path:
    """A copy of the package as a wheel lays it out (``solvers/`` inside ``fairsched/``); returns its folder.

    The editable install maps ``fairsched.solvers`` to the top-level ``solvers/`` through an
    import hook, which grimp does not follow, so the contracts see ``fairsched.solvers``
    only in a layout like this one.
    """
    site = tmp_path / "site"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(ROOT / "fairsched", site / "fairsched", ignore=ignore)
    shutil.copytree(SOLVERS, site / "fairsched" / "solvers", ignore=ignore)
    return site


def _graph_modules(site: Path | None, cwd: Path) -> set[str]:
    """The modules grimp finds in ``fairsched`` (from ``site`` first when given)."""
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    code = "import grimp; print('\\n'.join(grimp.build_graph('fairsched', cache_dir=None).modules))"
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                         check=True, timeout=120)
    return set(out.stdout.split())


def _layered() -> set[str]:
    """Every module named in a layer of the contracts (without the optional-layer parentheses)."""
    (contract,) = tomllib.loads(CONFIG.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    return {name.strip().strip("()") for layer in contract["layers"] for name in layer.split("|")}


def test_every_top_level_module_is_in_a_layer():
    """A new module or subpackage of fairsched must be placed in the layering, not escape it."""
    top = {f"fairsched.{m.name}" for m in pkgutil.iter_modules([str(ROOT / "fairsched")])} - {"fairsched.__main__"}
    top.add("fairsched.solvers")
    assert top == _layered(), f"unlayered: {sorted(top - _layered())}; no such module: {sorted(_layered() - top)}"


def test_contracts_kept_in_the_checkout(tmp_path):
    result = _lint(cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken." in result.stdout


def test_editable_install_hides_solvers_from_grimp(tmp_path):
    """Why the solvers layer is optional, and why the installed layout is linted as well."""
    modules = _graph_modules(None, tmp_path)
    assert "fairsched.lp.solve" in modules and "fairsched.runtime.measure" in modules
    assert not any(m.startswith("fairsched.solvers") for m in modules)


def test_contracts_kept_in_the_installed_layout(tmp_path):
    site = _installed_layout(tmp_path)
    modules = _graph_modules(site, tmp_path)
    assert {"fairsched.solvers", "fairsched.solvers.lp", "fairsched.solvers.colgen"} <= modules
    result = _lint(cwd=tmp_path, pythonpath=site)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 1 kept, 0 broken." in result.stdout


@pytest.mark.parametrize("where, line, chain", [
    ("bench/harness.py", "from fairsched.experiments.common import measure", "fairsched.bench.harness -> "
     "fairsched.experiments.common"),
    ("experiments/common.py", "import fairsched.bench.report", "fairsched.experiments.common -> "
     "fairsched.bench.report"),
    ("policies/base.py", "from fairsched.runtime.simulation import run", "fairsched.policies.base -> "
     "fairsched.runtime.simulation"),
    ("utilities/base.py", "from fairsched.problem import Problem", "fairsched.utilities.base -> fairsched.problem"),
    ("solvers/lp.py", "from fairsched.errors import FairschedError", "fairsched.solvers.lp -> fairsched.errors"),
], ids=["bench-to-experiments", "experiments-to-bench", "policies-to-runtime", "utilities-to-problem",
        "solvers-to-fairsched"])
def test_contracts_catch_an_inverted_import(tmp_path, where, line, chain):
    """The contracts are not vacuous: one upward import, even inside a function, breaks them."""
    site = _installed_layout(tmp_path)
    path = site / "fairsched" / where
    path.write_text(path.read_text() + f"\n\ndef _inverted():\n    {line}\n")
    result = _lint(cwd=tmp_path, pythonpath=site)
    assert result.returncode == 1, result.stdout
    assert "Contracts: 0 kept, 1 broken." in result.stdout
    assert chain in result.stdout


# --- solvers/ stands alone ------------------------------------------------------------------

def _imports(tree: ast.AST) -> list[tuple[ast.stmt, bool]]:
    """Every import statement of a module, with whether it runs at import time (module level,
    outside ``if TYPE_CHECKING``)."""
    found: list[tuple[ast.stmt, bool]] = []

    def visit(node: ast.AST, eager: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, eager))
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, False)
            elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(child, False)
            else:
                visit(child, eager)

    visit(tree, True)
    return found


def _top_modules(node: ast.stmt) -> list[str | None]:
    """The top-level package each name of an import comes from; ``None`` for a relative import
    that stays inside ``solvers``, ``".."`` for one that leaves it."""
    if isinstance(node, ast.Import):
        return [alias.name.split(".")[0] for alias in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level == 1:
        return [None]
    if node.level > 1:
        return [".."]
    return [node.module.split(".")[0]]


def _solver_files() -> list[Path]:
    return sorted(SOLVERS.rglob("*.py"))


def test_solver_scan_sees_every_file():
    names = {p.name for p in _solver_files()}
    assert {"__init__.py", "lp.py", "colgen.py", "cvxpy_model.py", "grouped.py"} <= names


@pytest.mark.parametrize("path", _solver_files(), ids=lambda p: p.name)
def test_solvers_import_only_the_standard_library_numpy_scipy_highspy(path):
    """``solvers/`` is numbers in, numbers out: nothing of fairsched, and only these dependencies."""
    problems = []
    for node, eager in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        for top in _top_modules(node):
            where = f"{path.name}:{node.lineno} {ast.unparse(node)}"
            if top is None or top in sys.stdlib_module_names or top in SOLVER_DEPENDENCIES:
                continue
            if top in LAZY_SOLVER_DEPENDENCIES:
                if eager:
                    problems.append(f"{where} (import {top} lazily, inside the function that needs it)")
                continue
            problems.append(where)
    assert not problems, "solvers/ imports outside its allowance:\n" + "\n".join(problems)


def test_solver_scan_flags_fairsched_relative_escapes_and_eager_cvxpy():
    source = ("import fairsched.errors\nfrom .. import problem\nimport cvxpy\nimport matplotlib\n"
              "from .lp import x\nimport numpy\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import cvxpy\n"
              "def f():\n    import cvxpy\n")
    found = [(top, eager) for node, eager in _imports(ast.parse(source)) for top in _top_modules(node)]
    assert found == [("fairsched", True), ("..", True), ("cvxpy", True), ("matplotlib", True), (None, True),
                     ("numpy", True), ("typing", True), ("cvxpy", False), ("cvxpy", False)]


# --- a light import -------------------------------------------------------------------------

def _loaded_by(module: str, cwd: Path) -> set[str]:
    """Every module ``python -X importtime -c "import MODULE"`` reports."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-c", f"import {module}"], cwd=cwd,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert len(lines) > 1, result.stderr
    return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}


def _heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.mark.parametrize("module", ["fairsched", "fairsched.utilities", "fairsched.problem", "fairsched.schedule"])
def test_light_import(module, tmp_path):
    loaded = _loaded_by(module, tmp_path)
    assert module in loaded
    assert not _heavy(loaded), f"import {module} loads {_heavy(loaded)}"


def test_importtime_parsing_sees_heavy_modules(tmp_path):
    """The check above can fail: importing the LP layer does load scipy.optimize or highspy."""
    assert _heavy(_loaded_by("fairsched.lp.solve", tmp_path))


def test_every_public_name_resolves():
    assert fairsched.__all__
    for name in fairsched.__all__:
        assert getattr(fairsched, name) is not None, name
    assert fairsched.Problem.__name__ == "Problem"
    assert callable(fairsched.load_instance) and callable(fairsched.run) and callable(fairsched.optimum)
    with pytest.raises(AttributeError):
        fairsched.no_such_name  # noqa: B018
