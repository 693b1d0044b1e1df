"""The wheel works anywhere: built from the checkout, installed into a fresh virtual environment
outside it, and used from a working directory that knows nothing of the repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import fairsched

ROOT = Path(__file__).resolve().parent.parent
#: not part of the source a wheel is built from (virtual environments, build output, caches)
NOT_SOURCE = shutil.ignore_patterns(".git", ".ci-venv", ".venv", "venv", "build", "dist", "*.egg-info",
                                    "__pycache__", ".pytest_cache", ".hypothesis", ".benchmarks")
BIN = "Scripts" if os.name == "nt" else "bin"


@dataclass(frozen=True)
class Installed:
    """The wheel and the virtual environment it is installed in."""

    wheel: Path
    venv: Path
    home: Path  # a working directory outside the checkout

    @property
    def python(self) -> Path:
        return self.venv / BIN / "python"

    def env(self) -> dict[str, str]:
        """This process's environment without anything that points Python at the checkout."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONSAFEPATH")}
        env["PATH"] = str(self.venv / BIN) + os.pathsep + env.get("PATH", "")
        env["PYTHONNOUSERSITE"] = "1"
        return env

    def run(self, *argv: str | Path, cwd: Path | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` (a program of the venv, or ``python ...``) in ``cwd`` (default :attr:`home`)."""
        program, *rest = argv
        if program == "python":
            program = self.python
        elif not Path(program).is_absolute():
            program = self.venv / BIN / program
        result = subprocess.run([str(program), *map(str, rest)], cwd=cwd or self.home, env=self.env(),
                                capture_output=True, text=True, timeout=timeout)
        if check:
            assert result.returncode == 0, f"{argv} exited {result.returncode}:\n{result.stdout}\n{result.stderr}"
        return result


def _build_wheel(work: Path) -> Path:
    """``pip wheel`` of a copy of the checkout (setuptools builds in-tree: keep ``build/`` out of it)."""
    source = work / "source"
    shutil.copytree(ROOT, source, symlinks=True, ignore=NOT_SOURCE)
    dist = work / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-q",
                    "-w", str(dist), str(source)], check=True, capture_output=True, text=True, timeout=300)
    (wheel,) = dist.glob("fairsched-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    work = tmp_path_factory.mktemp("packaging")
    assert ROOT not in work.parents
    wheel = _build_wheel(work)
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=120)
    home = work / "home"
    home.mkdir()
    result = Installed(wheel, venv, home)
    result.run("python", "-m", "pip", "install", "--disable-pip-version-check", "-q", wheel, timeout=600)
    return result


# --- the wheel's contents -----------------------------------------------------------------------

def _names(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


def test_wheel_holds_solvers_inside_fairsched_and_the_bundled_instances(installed):
    names = _names(installed.wheel)
    assert {"fairsched/solvers/__init__.py", "fairsched/solvers/lp.py", "fairsched/instances/data/paper.toml",
            "fairsched/py.typed", "fairsched/runtime/measure.py"} <= names
    tops = {name.split("/")[0] for name in names}
    assert tops == {"fairsched", f"fairsched-{fairsched.__version__}.dist-info"}, tops


def test_wheel_holds_every_module_and_instance_of_the_checkout(installed):
    """``[tool.setuptools] packages`` is an explicit list: a new subpackage must be added to it."""
    names = _names(installed.wheel)
    expected = {f"fairsched/{p.relative_to(ROOT / 'fairsched').as_posix()}" for p in (ROOT / "fairsched").rglob("*.py")}
    expected |= {f"fairsched/solvers/{p.relative_to(ROOT / 'solvers').as_posix()}" for p in (ROOT / "solvers").rglob("*.py")}
    expected |= {f"fairsched/instances/data/{p.name}" for p in (ROOT / "fairsched" / "instances" / "data").glob("*.toml")}
    assert not expected - names, sorted(expected - names)


def test_wheel_metadata(installed):
    with zipfile.ZipFile(installed.wheel) as archive:
        info = f"fairsched-{fairsched.__version__}.dist-info"
        assert archive.read(f"{info}/top_level.txt").decode().split() == ["fairsched"]
        assert "fairsched = fairsched.cli:main" in archive.read(f"{info}/entry_points.txt").decode()
        metadata = archive.read(f"{info}/METADATA").decode()
    assert f"Version: {fairsched.__version__}\n" in metadata
    assert "Provides-Extra: cvxpy" in metadata and "Requires-Dist: numpy" in metadata


# --- the installed package, used from a directory outside the checkout ---------------------------

def test_installed_from_the_wheel_not_the_checkout(installed):
    out = installed.run("python", "-c", "import fairsched, fairsched.solvers as s; print(fairsched.__file__); "
                                        "print(s.__file__)").stdout.split()
    for path in map(Path, out):
        assert installed.venv in path.parents and ROOT not in path.parents


def test_version_defined_once(installed):
    out = installed.run("python", "-c", "import importlib.metadata as m, fairsched; "
                                        "print(m.version('fairsched'), fairsched.__version__)").stdout.split()
    assert out == [fairsched.__version__, fairsched.__version__]
    assert installed.wheel.name.startswith(f"fairsched-{fairsched.__version__}-")


def test_run_a_bundled_instance_by_name(installed):
    report = json.loads(installed.run("fairsched", "run", "paper", "--policy", "fairdg", "--rounds", "1000",
                                      "--json").stdout)
    assert report["policy"] == "fairdg" and report["rounds"] == 1000
    assert 0.99 < report["ratio"] <= 1 + 1e-9
    assert report["max_debt"] < 1
    assert sum(report["selection_fraction"].values()) == pytest.approx(6)  # k = 6 workers a round


def test_seed003_experiment_runs_from_the_wheel(installed):
    out = installed.home / "seed003"
    installed.run("python", "-m", "fairsched.experiments.seed003", "--out", out, "--rounds", "1000",
                  "--costly-rounds", "300", "--no-plots")
    assert {p.name for p in out.iterdir()} == {"results.md", "paper_sweep.csv", "costly.csv"}
    sweep = (out / "paper_sweep.csv").read_text().splitlines()
    assert sweep[0].startswith("instance,beta,policy,")
    assert len(sweep) == 1 + 11 * 4 and all(line.startswith("paper.toml,") for line in sweep[1:])
    costly = {line.split(",")[0] for line in (out / "costly.csv").read_text().splitlines()[1:]}
    assert costly == {"coverage.toml", "facility-location.toml", "concave-modular.toml"}
    assert "| 0.42 |" in (out / "results.md").read_text()


def test_missing_plot_extra_says_how_to_install_it(installed):
    result = installed.run("python", "-c", "from fairsched.experiments.plots import pyplot; pyplot()", check=False)
    assert result.returncode == 1
    message = result.stderr.strip().splitlines()[-1]
    assert message.startswith("ImportError:") and "matplotlib" in message and "[plot]" in message
    assert "fairsched[" not in message  # fairsched is not on the package index


def test_nothing_installed_as_bare_solvers(installed):
    folder = installed.home / "empty"
    folder.mkdir()
    result = installed.run("python", "-c", "import solvers", cwd=folder, check=False)
    assert result.returncode == 1
    assert "ModuleNotFoundError: No module named 'solvers'" in result.stderr


def test_a_solvers_module_in_the_working_directory_does_not_shadow_fairsched(installed):
    folder = installed.home / "shadow"
    folder.mkdir()
    (folder / "solvers.py").write_text('raise ImportError("the working directory\'s solvers.py was imported")\n')
    code = ("import fairsched, fairsched.solvers as s; "
            "print(fairsched.optimum(fairsched.load_instance('paper')).value); print(s.__file__)")
    value, where = installed.run("python", "-c", code, cwd=folder).stdout.split()
    assert float(value) == pytest.approx(fairsched.optimum(fairsched.load_instance("paper")).value, rel=1e-9)
    assert Path(where).parent.name == "solvers" and installed.venv in Path(where).parents
