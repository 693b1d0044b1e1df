"""An in-process Flower grid for tests and benchmarks of fairsched's strategy (no network).

:class:`LocalGrid` implements Flower's ``Grid``: every pushed message is handed to
``handler(message)``, which returns the node's reply, or ``None`` for a node that never
answers (a crashed node that Flower still lists); :meth:`LocalGrid.release` delivers a
held reply later. :func:`task_identity` sets the process identity that Flower's
``Message`` constructor needs outside a ServerApp process.

:class:`Deployment` starts a real loopback deployment for integration tests: a
``flower-superlink`` and ``flower-supernode`` processes on free ports, each in its own
session with a private ``FLWR_HOME``, ``flwr run`` / ``flwr list`` against it, and the
signals a test needs (SIGTERM, SIGKILL of a node, of the ServerApp process).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

__all__ = ["Deployment", "LocalGrid", "TimeLimitExceeded", "descendants", "executable", "free_ports", "task_identity",
           "time_limit"]


class TimeLimitExceeded(BaseException):
    """Raised in the main thread by :func:`time_limit` (a ``BaseException``: no ``except Exception`` hides it)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Interrupt the block after ``seconds`` of wall time (``SIGALRM``; main thread, POSIX).

    A per-test guard without ``pytest-timeout``: a test that would block (a strategy
    waiting for nodes that never come) fails with :class:`TimeLimitExceeded` instead.
    Nested guards work: an enclosing one is re-armed, less the time spent, on exit.
    """
    def expire(signum, frame):  # type: ignore[no-untyped-def]
        raise TimeLimitExceeded(f"still running after {seconds:g} s: a wait that never ends?")

    started = time.monotonic()
    previous = signal.signal(signal.SIGALRM, expire)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, float(seconds))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0.0)
        signal.signal(signal.SIGALRM, previous)
        if outer > 0:
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - started), 1e-3))


@contextlib.contextmanager
def task_identity(run_id: int = 1, task_id: int = 1) -> Iterator[None]:
    """Act as a ServerApp process (node 0) of ``run_id`` while the block runs."""
    saved = (TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id)
    TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = task_id, run_id, 0
    try:
        yield
    finally:
        TaskIdentity._task_id, TaskIdentity._run_id, TaskIdentity._node_id = saved


class LocalGrid(Grid):
    """Connected nodes :attr:`nodes` answering through ``handler`` at once (or never: ``None``)."""

    def __init__(self, handler: Callable[[Message], Message | None], node_ids: Iterable[int]) -> None:
        self.handler = handler
        self.nodes = [int(v) for v in node_ids]
        self.sent: list[Message] = []
        self.held: dict[str, Message] = {}      # message id -> message with no reply yet
        self._replies: dict[str, Message] = {}
        self._ids = itertools.count(1)
        self._run = None

    def set_run(self, run):  # type: ignore[no-untyped-def]
        self._run = run

    @property
    def run(self):  # type: ignore[no-untyped-def]
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> list[int]:
        return self.nodes

    def push_messages(self, messages: Iterable[Message]) -> list[str]:
        ids = []
        for msg in messages:
            mid = f"m{next(self._ids)}"
            msg.metadata.__dict__["_message_id"] = mid
            self.sent.append(msg)
            reply = self.handler(msg)
            if reply is None:
                self.held[mid] = msg
            else:
                self._replies[mid] = reply
            ids.append(mid)
        return ids

    def release(self, message_id: str, reply: Message) -> None:
        """Deliver the reply to a held message (a late answer)."""
        self.held.pop(message_id, None)
        self._replies[message_id] = reply

    def pull_messages(self, message_ids: Iterable[str]) -> list[Message]:
        return [self._replies.pop(m) for m in list(message_ids) if m in self._replies]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> list[Message]:
        return self.pull_messages(self.push_messages(messages))


# -------------------------------------------------------------------------------------------
# a real deployment on loopback (SuperLink, SuperNodes, `flwr run`), for integration tests
# -------------------------------------------------------------------------------------------
def free_ports(count: int) -> list[int]:
    """``count`` distinct TCP ports free on 127.0.0.1 right now."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def executable(name: str) -> str:
    """The path of a Flower command installed next to this Python (or on ``PATH``)."""
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found next to {sys.executable} nor on PATH")
    return found


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (from ``/proc``)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        children.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


class Deployment:
    """Processes of a loopback Flower deployment, each in its own session; :meth:`stop_all` ends them all.

    ``root`` holds the logs and the private ``FLWR_HOME`` of every process. Only the
    processes started here (and their descendants) are ever signalled.
    """

    def __init__(self, root: Path, env: Mapping[str, str] | None = None) -> None:
        self.root = Path(root)
        self.env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
                    "PYTHONUNBUFFERED": "1",
                    "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
                    **(env or {})}
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.link_port = 0
        self.cli_home = self.root / "cli-home"

    def start(self, name: str, argv: list[str]) -> subprocess.Popen:
        """Start ``argv`` as ``name`` with its own ``FLWR_HOME`` and log file."""
        home = self.root / f"{name}-home"
        home.mkdir(parents=True, exist_ok=True)
        log = self.root / f"{name}.log"
        with open(log, "ab") as handle:
            proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**self.env, "FLWR_HOME": str(home)}, cwd=self.root,
                                    start_new_session=True)
        self.procs[name], self.logs[name] = proc, log
        return proc

    def start_superlink(self, timeout: float = 60.0) -> None:
        """A SuperLink on free ports (``--insecure``, the app's dependencies taken as installed)."""
        (self.link_port,) = free_ports(1)  # Fleet and Control APIs both on it (Flower 1.42's --port)
        link = self.start("superlink", [executable("flower-superlink"), "--insecure", "--host", "127.0.0.1",
                                        "--port", str(self.link_port), "--disable-runtime-dependency-installation"])
        deadline = time.monotonic() + timeout
        while True:
            if link.poll() is not None:
                raise RuntimeError(f"the SuperLink exited with {link.returncode}:\n{self.tails()}")
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex(("127.0.0.1", self.link_port)) == 0:
                    break
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on 127.0.0.1:{self.link_port}")
            time.sleep(0.2)
        self.cli_home.mkdir(parents=True, exist_ok=True)
        (self.cli_home / "config.toml").write_text(
            '[superlink]\ndefault = "fairsched-test"\n\n'
            f'[superlink.fairsched-test]\naddress = "127.0.0.1:{self.link_port}"\ninsecure = true\n')

    def start_supernode(self, name: str, node_config: str) -> subprocess.Popen:
        """A SuperNode connected to the SuperLink, with its own free runtime port."""
        (port,) = free_ports(1)
        return self.start(name, [executable("flower-supernode"), "--insecure", "--superlink",
                                 f"127.0.0.1:{self.link_port}", "--port", str(port), "--node-config", node_config])

    def flwr(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run a ``flwr`` command against the SuperLink and wait for it."""
        return subprocess.run([executable("flwr"), *args], capture_output=True, text=True, timeout=timeout, check=False,
                              env={**self.env, "FLWR_HOME": str(self.cli_home)}, cwd=self.root)

    def submit(self, app: Path, run_config: str) -> int:
        """``flwr run APP`` (not streamed): the run id."""
        done = self.flwr("run", str(app), "fairsched-test", "--run-config", run_config, "--format", "json")
        match = re.search(r'"run-id":\s*"?(\d+)', done.stdout) or re.search(r"run (\d+)", done.stdout + done.stderr)
        if done.returncode != 0 or not match:
            raise RuntimeError(f"flwr run failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
        return int(match.group(1))

    def status(self, run_id: int) -> str:
        """The run's status as ``flwr list`` reports it (``"running"``, ``"finished:completed"``, ...)."""
        done = self.flwr("list", "fairsched-test", "--run-id", str(run_id), "--format", "json")
        match = re.search(r'"status":\s*"([^"]+)"', done.stdout)
        return match.group(1) if match else f"unknown ({done.stdout.strip()} {done.stderr.strip()})"

    def serverapps(self) -> list[int]:
        """PIDs of the ``flwr-serverapp`` processes the SuperLink started."""
        link = self.procs.get("superlink")
        if link is None:
            return []
        return [p for p in descendants(link.pid) if "flwr-serverapp" in _cmdline(p) and _alive(p)]

    def signal(self, name: str, sig: int) -> None:
        """Send ``sig`` to ``name``'s process group and to every descendant."""
        proc = self.procs[name]
        family = descendants(proc.pid) if proc.poll() is None else []
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        for pid in family:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def kill(self, name: str) -> None:
        """SIGKILL ``name`` and its descendants at once (a crash: nothing deregisters)."""
        self.signal(name, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.procs[name].wait(timeout=10)

    def stop(self, name: str, grace: float = 10.0) -> None:
        """SIGTERM ``name`` (and its descendants), SIGKILL whatever is left after ``grace`` seconds."""
        proc = self.procs[name]
        family = descendants(proc.pid) if proc.poll() is None else []
        self.signal(name, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and (proc.poll() is None or any(_alive(p) for p in family)):
            time.sleep(0.1)
        if proc.poll() is None or any(_alive(p) for p in family):
            self.signal(name, signal.SIGKILL)
            for pid in family:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)

    def stop_all(self) -> None:
        """SuperNodes and CLIs first, the SuperLink (and its ServerApps) last."""
        for name in sorted(self.procs, key=lambda n: n == "superlink"):
            self.stop(name)

    def tails(self, lines: int = 40) -> str:
        out = []
        for name, log in self.logs.items():
            text = log.read_text(errors="replace").splitlines() if log.exists() else []
            out.append(f"----- {name} (last {lines} lines) -----\n" + "\n".join(text[-lines:]))
        return "\n".join(out)
