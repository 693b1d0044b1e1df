"""The Flower adapter: its pure logic, and a real Flower deployment on loopback.

``test_real_deployment`` starts ``flower-superlink --insecure`` and SuperNodes
(``flower-supernode --insecure``, one partition each) on free local ports, submits
``examples/flower_app`` with ``flwr run --stream`` through a SuperLink connection in a
private ``FLWR_HOME``, starts a SuperNode late and stops another one mid-run, and then
checks the ServerApp's per-round JSON record and the scheduler checkpoint. No part of
Flower is mocked there. Every process it starts is stopped in a ``finally``.

Skipped only when ``flwr`` cannot be imported (``pip install '.[flower]'``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, Error, Message, MessageType, MetricRecord, RecordDict  # noqa: E402

from fairsched.integrations.flower import (  # noqa: E402
    QUERY_MESSAGE_TYPE,
    QUERY_RECORD,
    FairschedStrategy,
    NodeDirectory,
    fedavg_weights,
    inverse_probability_weights,
)
from fairsched.problem import Problem  # noqa: E402
from fairsched.runtime.scheduler import Scheduler  # noqa: E402
from fairsched.utilities import AccuracyUtility  # noqa: E402

APP_DIR = Path(__file__).resolve().parents[1] / "examples" / "flower_app"


# =============================================================================================
# pure logic: no deployment
# =============================================================================================
def test_fedavg_and_ipw_weights():
    assert fedavg_weights([10, 30]) == pytest.approx([0.25, 0.75])
    # ω ∝ n / (π_select · π_part): 10/(0.5·1) = 20, 30/(1·0.5) = 60, 20/(0.25·0.8) = 100
    w = inverse_probability_weights([10, 30, 20], [0.5, 1.0, 0.25], [1.0, 0.5, 0.8])
    assert w == pytest.approx(np.array([20, 60, 100]) / 180)
    assert w.sum() == pytest.approx(1.0)
    assert fedavg_weights([]).size == 0
    for bad in ([0.0, 1.0], [1.2, 0.5], [float("nan"), 1.0]):
        with pytest.raises(ValueError, match="pi_select"):
            inverse_probability_weights([1, 1], bad, [1, 1])
    with pytest.raises(ValueError, match="differ in length"):
        inverse_probability_weights([1, 1], [1], [1, 1])
    with pytest.raises(ValueError, match="num-examples"):
        fedavg_weights([0, 0])


def test_node_directory_mappings():
    plain = NodeDirectory(["11", "12"])
    plain.resolve_local([11, 12, 13])
    assert plain.workers([11, 12, 13]) == {"11": 11, "12": 12}  # "13" is not a worker of the problem

    mapped = NodeDirectory(["a", "b"], {101: "a", 102: "b", 103: "zzz"})
    mapped.resolve_local([101, 102, 103, 104])
    assert mapped.workers([101, 102, 103, 104]) == {"a": 101, "b": 102}
    assert mapped.workers([102]) == {"b": 102}

    calls = []
    by_callable = NodeDirectory(["a", "b"], lambda node: calls.append(node) or ("a" if node % 2 else None))
    by_callable.resolve_local([1, 2])
    by_callable.resolve_local([1, 2, 3])  # cached: 1 and 2 are not asked again
    assert calls == [1, 2, 3]
    # nodes 1 and 3 both say "a": the most recently resolved one wins
    assert by_callable.workers([1, 2, 3]) == {"a": 3}
    assert by_callable.workers([1, 2]) == {"a": 1}


class _LoopbackGrid:
    """Just enough of a Grid for configure_train's query: it answers as ClientApps would."""

    def __init__(self, nodes: dict[int, str | None]):
        self.nodes = nodes  # node id -> worker id it answers (None: answers with an error)
        self.sent: list[Message] = []

    def get_node_ids(self):
        return list(self.nodes)

    def send_and_receive(self, messages, *, timeout=None):
        replies = []
        for msg in messages:
            self.sent.append(msg)
            assert msg.metadata.message_type == QUERY_MESSAGE_TYPE
            wid = self.nodes[msg.metadata.dst_node_id]
            if wid is None:
                replies.append(Message(Error(code=0, reason="no query handler"), reply_to=msg))
            else:
                content = RecordDict({QUERY_RECORD: ConfigRecord({"worker-id": wid})})
                replies.append(Message(content, reply_to=msg))
        return replies


def _reply(msg: Message, theta: float, n: int) -> Message:
    content = RecordDict({"arrays": ArrayRecord([np.array([theta, 2 * theta])]),
                          "metrics": MetricRecord({"num-examples": n, "loss": theta})})
    return Message(content, reply_to=msg)


@pytest.fixture
def serverapp_identity(monkeypatch):
    """Messages are created inside a ServerApp process, which knows its run and task ids."""
    from flwr.supercore.task_identity import TaskIdentity

    for attribute, value in (("_task_id", 1), ("_run_id", 1), ("_node_id", 0)):
        monkeypatch.setattr(TaskIdentity, attribute, value)


def test_strategy_round_logic(tmp_path, serverapp_identity):
    ids = ["a", "b", "c", "d"]
    problem = Problem(AccuracyUtility([10, 20, 30, 40]), k=2, r=np.full(4, 0.3), ids=ids)
    scheduler = Scheduler(problem, "fairdg", seed=0, count="served")
    strategy = FairschedStrategy(scheduler, node_to_worker="query", weighting="ipw", leave_after=1,
                                 checkpoint_path=tmp_path / "ckpt.json", history_path=tmp_path / "hist.json")
    # node 900 is a Flower node that is not a fairsched worker; node 904 ("d") is offline
    grid = _LoopbackGrid({901: "a", 902: "b", 903: "c", 900: None})
    sizes = {"a": 10, "b": 20, "c": 30, "d": 40}
    served_counts = dict.fromkeys(ids, 0)
    present_counts = dict.fromkeys(ids, 0)
    for rnd in range(1, 7):
        if rnd == 4:
            grid.nodes[904] = "d"  # "d" connects: asked once, then scheduled
        messages = list(strategy.configure_train(rnd, ArrayRecord([np.zeros(2)]), ConfigRecord(), grid))
        entry = strategy._pending
        worker_of = {901: "a", 902: "b", 903: "c", 904: "d"}
        targets = [m.metadata.dst_node_id for m in messages]
        assert all(m.metadata.message_type == MessageType.TRAIN for m in messages)
        assert set(targets) == set(entry["selected"].values()) and len(targets) <= 2
        assert 900 not in targets and (rnd >= 4 or 904 not in targets)
        assert all(m.content["config"]["server-round"] == rnd for m in messages)
        # "b" fails whenever asked in an even round
        replies = [Message(Error(code=1, reason="crash"), reply_to=m)
                   if worker_of[m.metadata.dst_node_id] == "b" and rnd % 2 == 0
                   else _reply(m, theta=float(m.metadata.dst_node_id), n=sizes[worker_of[m.metadata.dst_node_id]])
                   for m in messages]
        for w in entry["available"]:
            present_counts[w] += 1
        served = [worker_of[r.metadata.src_node_id] for r in replies if not r.has_error()]
        for w in served:
            served_counts[w] += 1
        arrays, metrics = strategy.aggregate_train(rnd, replies)
        last = strategy.history[-1]
        assert sorted(last["served"]) == sorted(served)
        assert set(last["failed"]) == ({"b"} if "b" in entry["selected"] and rnd % 2 == 0 else set())
        if served:
            # ω_i ∝ n_i / (π_select_i · π̂_part_i) = n_i · present_i / served_i
            raw = np.array([sizes[w] * present_counts[w] / served_counts[w] for w in served])
            expected = dict(zip(served, raw / raw.sum()))
            assert last["weights"] == pytest.approx(expected)
            theta = sum(expected[w] * {"a": 901, "b": 902, "c": 903, "d": 904}[w] for w in served)
            assert arrays.to_numpy_ndarrays()[0] == pytest.approx([theta, 2 * theta])
            assert "num-examples" not in metrics
        assert scheduler.round == rnd
    # the query went once to each node; the error answer (node 900) is never asked again
    asked = [m.metadata.dst_node_id for m in grid.sent]
    assert sorted(asked) == [900, 901, 902, 903, 904]
    # "d" was away for rounds 1-3 (left), then joined: its floor restarted at round 4
    assert strategy.history[0]["departed"] == ["d"] and strategy.history[3]["departed"] == []
    restored = Scheduler.load(tmp_path / "ckpt.json", problem, "fairdg")
    assert restored.round == 6 and restored.state_dict() == scheduler.state_dict()
    document = json.loads((tmp_path / "hist.json").read_text())
    assert [r["server_round"] for r in document["rounds"]] == list(range(1, 7))
    assert document["counts"]["served"] == served_counts


def test_strategy_rejects_bad_options():
    problem = Problem(AccuracyUtility([1, 2]), k=1, r=np.full(2, 0.2))
    with pytest.raises(ValueError, match="weighting"):
        FairschedStrategy(Scheduler(problem), weighting="magic")
    with pytest.raises(ValueError, match="node_to_worker"):
        FairschedStrategy(Scheduler(problem), node_to_worker="guess")
    with pytest.raises(ValueError, match="leave_after"):
        FairschedStrategy(Scheduler(problem), leave_after=0)


def test_import_fairsched_does_not_import_flower():
    code = "import sys, fairsched, fairsched.integrations; print('flwr' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# =============================================================================================
# a real deployment on loopback
# =============================================================================================
ROUNDS = 12
K, R = 2, 0.3
N_WORKERS = 5
FAIL_EVERY = 4          # worker "2" raises in rounds 4, 8, 12: a Flower error reply
LATE_WORKER = "4"       # its SuperNode starts once ROUND_LATE rounds are done
ROUND_LATE = 2
STOPPED_WORKER = "3"    # its SuperNode gets SIGTERM once ROUND_STOP rounds are done
ROUND_STOP = 6
TIME_LIMIT = 240.0      # seconds for the whole deployment, start to finish


def _free_ports(count: int) -> list[int]:
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


def _executable(name: str) -> str:
    here = Path(sys.executable).parent / name
    found = str(here) if here.exists() else shutil.which(name)
    if not found:
        pytest.fail(f"{name} not found next to {sys.executable} nor on PATH, although flwr is importable")
    return found


def _descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (read from /proc before anything is killed)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


class Deployment:
    """Processes started for the test, each in its own session (process group)."""

    def __init__(self, root: Path, env: dict[str, str]):
        self.root, self.env = root, env
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    def start(self, name: str, argv: list[str], home: Path | None = None) -> subprocess.Popen:
        env = dict(self.env)
        if home is not None:
            home.mkdir(parents=True, exist_ok=True)
            env["FLWR_HOME"] = str(home)
        log = self.root / f"{name}.log"
        with open(log, "wb") as handle:
            proc = subprocess.Popen(argv, stdout=handle, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=env, cwd=self.root, start_new_session=True)
        self.procs[name], self.logs[name] = proc, log
        return proc

    def stop(self, name: str, grace: float = 10.0) -> None:
        """SIGTERM the process group, then its other descendants; SIGKILL what is left after ``grace``."""
        proc = self.procs[name]
        family = _descendants(proc.pid) if proc.poll() is None else []
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, sig)
                except ProcessLookupError:
                    pass
            for pid in family:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                continue
            if sig == signal.SIGTERM:
                deadline = time.monotonic() + 2.0
                while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists()
                                                          and not _is_zombie(p) for p in family):
                    time.sleep(0.1)
                if not any(Path(f"/proc/{p}").exists() and not _is_zombie(p) for p in family):
                    return

    def stop_all(self) -> None:
        # SuperNodes and the CLI first, the SuperLink (and its ServerApp) last
        for name in sorted(self.procs, key=lambda n: n == "superlink"):
            self.stop(name)

    def tails(self, lines: int = 40) -> str:
        out = []
        for name, log in self.logs.items():
            text = log.read_text(errors="replace").splitlines() if log.exists() else []
            out.append(f"----- {name} (last {lines} lines) -----\n" + "\n".join(text[-lines:]))
        return "\n".join(out)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def _wait_for_port(port: int, deadline: float, proc: subprocess.Popen) -> None:
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the SuperLink exited with {proc.returncode} before listening")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port}")


def _read_history(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def test_real_deployment(tmp_path):
    started = time.monotonic()
    deadline = started + TIME_LIMIT
    link_port, *node_ports = _free_ports(1 + N_WORKERS)
    env = {**os.environ, "FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "PYTHONUNBUFFERED": "1"}
    cli_home = tmp_path / "cli-home"
    cli_home.mkdir()
    (cli_home / "config.toml").write_text(
        '[superlink]\ndefault = "fairsched-test"\n\n'
        f'[superlink.fairsched-test]\naddress = "127.0.0.1:{link_port}"\ninsecure = true\n')
    history_path, checkpoint_path = tmp_path / "history.json", tmp_path / "scheduler.json"
    run_config = " ".join([f"num-server-rounds={ROUNDS}", f"num-workers={N_WORKERS}", f"k={K}", f"r={R}",
                           'count="served"', 'weighting="ipw"', "leave-after=1", "min-nodes=4",
                           "round-timeout=30.0", f'history-path="{history_path}"',
                           f'checkpoint-path="{checkpoint_path}"'])
    superlink = [_executable("flower-superlink"), "--insecure", "--host", "127.0.0.1", "--port", str(link_port),
                 "--disable-runtime-dependency-installation"]

    def supernode(i: int, *extra: str) -> list[str]:
        return [_executable("flower-supernode"), "--insecure", "--superlink", f"127.0.0.1:{link_port}",
                "--port", str(node_ports[i]), "--node-config", " ".join([f"partition-id={i}", *extra])]

    flwr_run = [_executable("flwr"), "run", str(APP_DIR), "fairsched-test", "--run-config", run_config, "--stream"]

    deployment = Deployment(tmp_path, env)
    alive: dict[str, tuple[float, float | None]] = {}  # worker -> (started at, stopped at)
    try:
        link = deployment.start("superlink", superlink, home=tmp_path / "superlink-home")
        _wait_for_port(link_port, deadline, link)
        for i in range(N_WORKERS):
            if str(i) != LATE_WORKER:
                extra = (f"fail-every={FAIL_EVERY}",) if i == 2 else ()
                alive[str(i)] = (time.time(), None)
                deployment.start(f"supernode-{i}", supernode(i, *extra), home=tmp_path / f"supernode-{i}-home")
        run = deployment.start("flwr-run", flwr_run, home=cli_home)

        late_started = stop_sent = False
        while run.poll() is None:
            if time.monotonic() > deadline:
                pytest.fail(f"the run did not finish in {TIME_LIMIT:.0f} s\n{deployment.tails()}")
            done = len((_read_history(history_path) or {}).get("rounds", []))
            if not late_started and done >= ROUND_LATE:
                alive[LATE_WORKER] = (time.time(), None)
                deployment.start(f"supernode-{LATE_WORKER}", supernode(int(LATE_WORKER)),
                                 home=tmp_path / f"supernode-{LATE_WORKER}-home")
                late_started = True
            if not stop_sent and done >= ROUND_STOP:
                stop_sent = True
                deployment.stop(f"supernode-{STOPPED_WORKER}")  # returns once it exited (deregistered)
                gone = time.time()
                alive[STOPPED_WORKER] = (alive[STOPPED_WORKER][0], gone)
            time.sleep(0.5)
        assert run.returncode == 0, deployment.tails()
        run_log = deployment.logs["flwr-run"].read_text(errors="replace")
        run_id = re.search(r"started run (\d+)", run_log)
        assert run_id, run_log
        listing = subprocess.run([_executable("flwr"), "list", "fairsched-test", "--run-id", run_id.group(1),
                                  "--format", "json"], capture_output=True, text=True, timeout=60,
                                 env={**env, "FLWR_HOME": str(cli_home)})
        status = re.search(r'"status":\s*"([^"]+)"', listing.stdout)
        assert status and status.group(1) == "finished:completed", listing.stdout + deployment.tails()
    finally:
        deployment.stop_all()
    elapsed = time.monotonic() - started
    print(f"real Flower deployment: {ROUNDS} rounds in {elapsed:.1f} s")
    assert late_started and stop_sent

    history = _read_history(history_path)
    rounds = history["rounds"]
    assert [r["server_round"] for r in rounds] == list(range(1, ROUNDS + 1))
    for r in rounds:
        connected, selected = set(r["connected_nodes"]), r["selected"]
        # selected only among the available workers, and only connected nodes were asked
        assert set(selected) <= set(r["available"]) and len(selected) <= K, r
        assert set(selected.values()) <= connected, r
        # ... and only workers whose SuperNode process was up when the round was configured
        for w in r["available"]:
            up, down = alive[w]
            assert up <= r["time"] and (down is None or r["time"] < down), (w, r)
        # served: replied without error; worker "2" raises in rounds divisible by FAIL_EVERY
        assert set(r["served"]) <= set(selected), r
        if "2" in selected and r["server_round"] % FAIL_EVERY == 0:
            assert "2" in r["failed"] and "2" not in r["served"], r
        healthy = {w for w in selected if w != STOPPED_WORKER} - ({"2"} if r["server_round"] % FAIL_EVERY == 0 else set())
        assert healthy <= set(r["served"]), r
        if r["served"]:
            assert sum(r["weights"].values()) == pytest.approx(1.0)
    # every round configured after the stopped SuperNode was gone leaves its worker out
    after = [r for r in rounds if r["time"] > gone]
    assert after and all(STOPPED_WORKER not in r["available"] for r in after)
    assert any(LATE_WORKER in r["available"] for r in rounds)

    # fairness: served fraction of the rounds a worker was connected in >= r - tolerance.
    # FairDG keeps every debt below 1, so a worker that always serves when asked loses at
    # most one round (tolerance 1/P for P connected rounds); worker "2" (injected
    # failures) and the stopped worker (its last round may be cut) get 2/P.
    for w in map(str, range(N_WORKERS)):
        present = sum(w in r["available"] for r in rounds)
        served = sum(w in r["served"] for r in rounds)
        tolerance = (2.0 if w in ("2", STOPPED_WORKER) else 1.0) / present
        assert present > 0 and served / present >= R - tolerance, (w, served, present, tolerance)

    # the checkpoint is the scheduler after the last round, and counts what was served
    problem = Problem(AccuracyUtility([40 + 20 * i for i in range(N_WORKERS)]), k=K, r=np.full(N_WORKERS, R),
                      ids=[str(i) for i in range(N_WORKERS)])
    restored = Scheduler.load(checkpoint_path, problem, "fairdg")
    assert restored.round == ROUNDS and restored.count == "served"
    counts = restored.state_dict()["policy"]["counts"]
    for w in ("0", "1", "2"):  # never away: no join credit, the counts are the served rounds
        assert counts[int(w)] == sum(w in r["served"] for r in rounds)
    assert elapsed < TIME_LIMIT + 30
