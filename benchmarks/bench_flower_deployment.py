"""Real Flower deployments on loopback: node churn, a SIGKILLed node, a SIGKILLed ServerApp and its resume.

    python -m pytest benchmarks/bench_flower_deployment.py -s           # both scenarios (~5-10 min)
    python benchmarks/bench_flower_deployment.py churn|resume

These are benchmarks rather than tests because each takes minutes: every Flower message
starts a ClientApp process, and Flower polls every few seconds (the repository has no
pytest marker to deselect slow tests by default). Nothing of Flower is mocked: a
``flower-superlink --insecure`` and ``flower-supernode --insecure`` processes (one
partition each) on free local ports, ``examples/flower_app`` submitted with ``flwr run``
through a private ``FLWR_HOME``; every process is started in its own session and stopped
in a ``finally`` (:class:`fairsched.integrations.flower_testing.Deployment`).

``test_real_deployment`` (churn): a SuperNode starts late, one is SIGKILLed mid-run (Flower
keeps listing it until its heartbeats expire), one is SIGTERMed, one raises every fourth
round; checked: only available workers are selected, no round waits the full timeout
more than once for the killed node, every worker meets its floor up to FairDG's ``1/P``,
and the checkpoint counts what was served.

``test_serverapp_sigkill_and_resume``: the same five SuperNodes run the app twice, once
uninterrupted and once with its ``flwr-serverapp`` process SIGKILLed mid-run and the run
submitted again (``resume="auto"``, the restart procedure of ``docs/flower.md``); checked:
the same selections and weights in every round and the same final model, bit for bit.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("flwr")

from fairsched.integrations.flower import read_checkpoint, read_history
from fairsched.integrations.flower_testing import Deployment

APP_DIR = Path(__file__).resolve().parents[1] / "examples" / "flower_app"


# =============================================================================================
# churn: a late node, a SIGKILLed node, a SIGTERMed node, a failing node
# =============================================================================================
ROUNDS = 12
K, R = 2, 0.3
N_WORKERS = 5
FAIL_EVERY = 4          # worker "2" raises in rounds 4, 8, 12: a Flower error reply
LATE_WORKER = "4"       # its SuperNode starts once ROUND_LATE rounds are done
ROUND_LATE = 2
ROUND_KILL = 3          # then the SuperNode of worker "0" or "1" (the more in debt) gets SIGKILL
STOPPED_WORKER = "3"    # its SuperNode gets SIGTERM once ROUND_STOP rounds are done
ROUND_STOP = 6
ROUND_TIMEOUT = 25.0
TIME_LIMIT = 300.0      # seconds for the whole deployment, start to finish


def _rounds(path: Path) -> list[dict]:
    return read_history(path)["rounds"] if path.exists() else []


def test_real_deployment(tmp_path):
    started = time.monotonic()
    deadline = started + TIME_LIMIT
    history_path, checkpoint_path = tmp_path / "history.jsonl", tmp_path / "checkpoint.zip"
    run_config = " ".join([f"num-server-rounds={ROUNDS}", f"num-workers={N_WORKERS}", f"k={K}", f"r={R}",
                           'count="served"', 'weighting="ipw"', "leave-after=1", "min-nodes=2",
                           f"round-timeout={ROUND_TIMEOUT}", f'history-path="{history_path}"',
                           f'checkpoint-path="{checkpoint_path}"', 'resume="false"'])
    deployment = Deployment(tmp_path)
    alive: dict[str, tuple[float, float | None]] = {}  # worker -> (started at, stopped at)
    victim = killed_at = None
    try:
        deployment.start_superlink()
        for i in range(N_WORKERS):
            if str(i) != LATE_WORKER:
                alive[str(i)] = (time.time(), None)
                deployment.start_supernode(f"supernode-{i}", " ".join(
                    [f"partition-id={i}", *([f"fail-every={FAIL_EVERY}"] if i == 2 else [])]))
        run_id = deployment.submit(APP_DIR, run_config)
        late_started = stop_sent = False
        while True:
            if time.monotonic() > deadline:
                pytest.fail(f"the run did not finish in {TIME_LIMIT:.0f} s\n{deployment.tails()}")
            rounds = _rounds(history_path)
            done = len(rounds)
            if not late_started and done >= ROUND_LATE:
                alive[LATE_WORKER] = (time.time(), None)
                deployment.start_supernode(f"supernode-{LATE_WORKER}", f"partition-id={LATE_WORKER}")
                late_started = True
            if victim is None and done >= ROUND_KILL:
                # the most indebted of the never-failing workers: FairDG asks it again soon
                debt = {w: R * done - sum(w in r["served"] for r in rounds) for w in ("0", "1")}
                victim = max(debt, key=lambda w: (debt[w], w == "0"))
                deployment.kill(f"supernode-{victim}")   # a crash: the SuperLink still lists the node
                killed_at = time.time()
                alive[victim] = (alive[victim][0], killed_at)
            if not stop_sent and done >= ROUND_STOP:
                stop_sent = True
                deployment.stop(f"supernode-{STOPPED_WORKER}")  # returns once it exited (deregistered)
                alive[STOPPED_WORKER] = (alive[STOPPED_WORKER][0], time.time())
            if done >= ROUNDS:
                break
            time.sleep(0.5)
        status = deployment.status(run_id)
        while status == "running" and time.monotonic() < deadline:
            time.sleep(1.0)
            status = deployment.status(run_id)
        assert status == "finished:completed", status + deployment.tails()
    finally:
        deployment.stop_all()
    elapsed = time.monotonic() - started
    print(f"real Flower deployment: {ROUNDS} rounds in {elapsed:.1f} s")
    assert late_started and stop_sent and victim is not None

    history = read_history(history_path)
    rounds = history["rounds"]
    assert history["summary"] is not None and not history["resumes"]
    assert [r["server_round"] for r in rounds] == list(range(1, ROUNDS + 1))
    stopped_at = alive[STOPPED_WORKER][1]
    for r in rounds:
        connected, selected = set(r["connected_nodes"]), r["selected"]
        # selected only among the available workers, and only connected nodes were asked
        assert set(selected) <= set(r["available"]) and 1 <= len(selected) <= K, r
        assert set(selected.values()) <= connected, r
        # ... and only workers whose SuperNode was up (the killed one: until it missed a deadline)
        for w in r["available"]:
            up, down = alive[w]
            assert up <= r["time"] and (down is None or w == victim or r["time"] < down), (w, r)
        # served: replied without error; worker "2" raises in rounds divisible by FAIL_EVERY
        assert set(r["served"]) <= set(selected), r
        if "2" in selected and r["server_round"] % FAIL_EVERY == 0:
            assert "2" in r["failed"] and "2" not in r["served"], r
        late = r["time"] > killed_at - ROUND_TIMEOUT
        healthy = set(selected) - {STOPPED_WORKER, victim if late else None} - (
            {"2"} if r["server_round"] % FAIL_EVERY == 0 else set())
        assert healthy <= set(r["served"]), r
        if r["served"]:
            assert sum(r["weights"].values()) == pytest.approx(1.0)
    # every round configured after the stopped SuperNode was gone leaves its worker out
    assert all(STOPPED_WORKER not in r["available"] for r in rounds if r["time"] > stopped_at)
    assert any(LATE_WORKER in r["available"] for r in rounds)

    # the SIGKILLed node: one round waited the full timeout for it, and none again; it was
    # held back while Flower still listed its node (heartbeats expire after 2 x 30 s)
    node = next(r["selected"][victim] for r in rounds if victim in r["selected"])
    waited = [r["server_round"] for r in rounds if victim in r["missing"]]
    assert len(waited) == 1, [(r["server_round"], r["selected"], r["missing"], r["wait_seconds"]) for r in rounds]
    first = waited[0]
    assert rounds[first - 1]["timed_out"] and rounds[first - 1]["wait_seconds"] >= ROUND_TIMEOUT - 1
    after = rounds[first:]
    assert all(victim not in r["selected"] for r in after)
    held = [r["server_round"] for r in after if node in r["connected_nodes"]]
    assert held and all(victim in rounds[t - 1]["suspects"] for t in held), held
    for r in rounds:  # a round that waited its full timeout waited for the victim (once) or the stopped node
        if r["timed_out"]:
            assert set(r["missing"]) <= {victim, STOPPED_WORKER} and r["missing"], r

    # fairness: served fraction of the rounds a worker was available in >= r - tolerance.
    # FairDG keeps every debt below 1, so a worker that always serves when asked loses at
    # most one round (tolerance 1/P for P available rounds); worker "2" (injected
    # failures), the stopped and the killed worker (a round cut short) get 2/P.
    for w in map(str, range(N_WORKERS)):
        present = sum(w in r["available"] for r in rounds)
        served = sum(w in r["served"] for r in rounds)
        tolerance = (2.0 if w in ("2", STOPPED_WORKER, victim) else 1.0) / present
        assert present > 0 and served / present >= R - tolerance, (w, served, present, tolerance)

    # the checkpoint is the scheduler after the last round, and counts what was served
    state, arrays, model = read_checkpoint(checkpoint_path)
    assert state["server_round"] == ROUNDS and state["scheduler"]["round"] == ROUNDS
    assert state["scheduler"]["count"] == "served" and model is not None
    for w in {"0", "1", "2"} - {victim}:  # never away: no join credit, the counts are the served rounds
        assert arrays["scheduler_counts"][int(w)] == sum(w in r["served"] for r in rounds)
    assert elapsed < TIME_LIMIT + 30


# =============================================================================================
# the ServerApp is SIGKILLed mid-run and submitted again: it resumes from the checkpoint
# =============================================================================================
RESUME_ROUNDS = 8
KILL_AFTER = 3          # SIGKILL the ServerApp once this many rounds are in the history
RESUME_TIMEOUT = 90.0   # generous: a round that timed out would change the decisions
RESUME_LIMIT = 900.0


def _resume_config(tmp: Path, tag: str) -> str:
    return " ".join([f"num-server-rounds={RESUME_ROUNDS}", f"num-workers={N_WORKERS}", f"k={K}", f"r={R}",
                     'count="served"', 'weighting="ht"', 'inner="fedadam"', "leave-after=0", f"min-nodes={N_WORKERS}",
                     f"round-timeout={RESUME_TIMEOUT}", f'history-path="{tmp / (tag + ".jsonl")}"',
                     f'checkpoint-path="{tmp / (tag + ".zip")}"', 'resume="auto"'])


def _wait(deployment: Deployment, run_id: int, deadline: float) -> str:
    status = deployment.status(run_id)
    while status in ("running", "pending", "starting") and time.monotonic() < deadline:
        time.sleep(1.0)
        status = deployment.status(run_id)
    return status


def test_serverapp_sigkill_and_resume(tmp_path):
    started = time.monotonic()
    deadline = started + RESUME_LIMIT
    deployment = Deployment(tmp_path)
    timeline: dict[str, float] = {}
    try:
        deployment.start_superlink()
        for i in range(N_WORKERS):
            deployment.start_supernode(f"supernode-{i}", f"partition-id={i}")
        # the reference: an uninterrupted run
        ref = deployment.submit(APP_DIR, _resume_config(tmp_path, "reference"))
        assert _wait(deployment, ref, deadline) == "finished:completed", deployment.tails()
        timeline["reference"] = time.monotonic() - started
        # the same run, its ServerApp killed after KILL_AFTER rounds
        first = deployment.submit(APP_DIR, _resume_config(tmp_path, "resumed"))
        while len(_rounds(tmp_path / "resumed.jsonl")) < KILL_AFTER:
            if time.monotonic() > deadline:
                pytest.fail(f"no {KILL_AFTER} rounds before the deadline\n{deployment.tails()}")
            time.sleep(0.2)
        victims = deployment.serverapps()
        assert victims, "no flwr-serverapp process found"
        for pid in victims:
            os.kill(pid, signal.SIGKILL)
        killed_after = len(_rounds(tmp_path / "resumed.jsonl"))
        timeline["killed"] = time.monotonic() - started
        # the restart procedure: stop the dead run, submit the same run config again
        deployment.flwr("stop", str(first), "fairsched-test")
        second = deployment.submit(APP_DIR, _resume_config(tmp_path, "resumed"))
        assert _wait(deployment, second, deadline) == "finished:completed", deployment.tails()
        timeline["resumed"] = time.monotonic() - started
    finally:
        deployment.stop_all()
    print(f"SIGKILL of the ServerApp after {killed_after} rounds; reference run {timeline['reference']:.0f} s, "
          f"resumed run done at {timeline['resumed']:.0f} s")
    reference, resumed = read_history(tmp_path / "reference.jsonl"), read_history(tmp_path / "resumed.jsonl")
    assert len(resumed["resumes"]) == 1 and not reference["resumes"]
    assert [r["server_round"] for r in resumed["rounds"]] == list(range(1, RESUME_ROUNDS + 1))
    assert [r["selected"].keys() for r in resumed["rounds"]] == [r["selected"].keys() for r in reference["rounds"]]
    assert [r["weights"] for r in resumed["rounds"]] == [r["weights"] for r in reference["rounds"]]
    assert not any(r["timed_out"] for r in reference["rounds"] + resumed["rounds"])
    _, _, model_ref = read_checkpoint(tmp_path / "reference.zip")
    _, _, model_res = read_checkpoint(tmp_path / "resumed.zip")
    for a, b in zip(model_ref.to_numpy_ndarrays(), model_res.to_numpy_ndarrays()):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    assert np.isfinite(model_res.to_numpy_ndarrays()[0]).all()


if __name__ == "__main__":
    import tempfile

    which = sys.argv[1] if len(sys.argv) > 1 else "resume"
    with tempfile.TemporaryDirectory() as tmp:
        (test_real_deployment if which == "churn" else test_serverapp_sigkill_and_resume)(Path(tmp))
