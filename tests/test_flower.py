"""The Flower adapter's pure logic: weights, the node directory, the round, options, light imports.

The real loopback deployments (node churn, a SIGKILLed node, a SIGKILLed ServerApp and
its resume) take minutes each and are benchmarks: ``benchmarks/bench_flower_deployment.py``.
Skipped only when ``flwr`` cannot be imported (``pip install '.[flower]'``).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Error,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)

from fairsched.integrations.flower import (
    QUERY_MESSAGE_TYPE,
    QUERY_RECORD,
    FairschedStrategy,
    NodeDirectory,
    fedavg_weights,
    horvitz_thompson_weights,
    inverse_probability_weights,
    read_checkpoint,
    read_history,
    total_variation,
)
from fairsched.integrations.flower_nodes import NodeHealth
from fairsched.integrations.flower_testing import (
    LocalGrid,
    TimeLimitExceeded,
    task_identity,
    time_limit,
)
from fairsched.problem import Problem
from fairsched.runtime.scheduler import Scheduler
from fairsched.utilities import AccuracyUtility


@pytest.fixture(autouse=True)
def _time_limit():
    """No test here may block: a wait that never ends fails after 300 wall seconds instead."""
    with time_limit(300.0):
        yield


# =============================================================================================
# pure logic: no deployment
# =============================================================================================
def test_fedavg_ipw_and_horvitz_thompson_weights():
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
    # ω_u = s_u · t / N_u(t), not normalised: s = (0.1, 0.3), t = 10, N = (2, 5) -> (0.5, 0.6)
    assert horvitz_thompson_weights([0.1, 0.3], [2, 5], 10) == pytest.approx([0.5, 0.6])
    with pytest.raises(ValueError, match="N_u"):
        horvitz_thompson_weights([0.1], [0], 3)
    assert total_variation([1, 1], [1, 1]) == 0.0
    assert total_variation([1, 0], [0, 1]) == pytest.approx(1.0)
    assert total_variation([3, 1], [1, 1]) == pytest.approx(0.25)


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
    # Flower node ids are unsigned 64-bit
    big = NodeDirectory(["x"], {2**64 - 1: "x"})
    big.resolve_local([2**64 - 1, 5])
    assert big.workers([5, 2**64 - 1]) == {"x": 2**64 - 1}
    restored = NodeDirectory(["a", "b"])
    restored.load_arrays(**{k.replace("directory_", ""): v for k, v in by_callable.arrays().items()})
    assert restored.workers([1, 2, 3]) == {"a": 3} and restored.unresolved([1, 2, 3, 4]) == [4]
    # reconnections leave stale node ids behind; compaction forgets them once they outnumber the live ones
    churn = NodeDirectory([str(i) for i in range(10)])
    churn.resolve_local(range(100, 110))
    assert churn.compact(range(100, 110), slack=5) == 0
    for generation in range(1, 3):   # every worker reconnects with a new node id
        churn.resolve_local(range(100 * generation + 100, 100 * generation + 110))
    live = list(range(300, 310))
    assert churn.compact(live, slack=5) == 20 and churn.arrays()["directory_nodes"].tolist() == live
    assert churn.compact(live, slack=5) == 0 and churn.unresolved(list(range(100, 110))) == list(range(100, 110))


def test_node_health_back_off_probes_and_forgetting():
    h = NodeHealth(base=2, cap=4)
    assert h.timed_out(5, 1, "m1") == 1 and h.suspects[5].blocked_until == 1 + 1 + 2
    assert h.need_probe([5, 6]) == [5]
    h.probed(5, "p1")
    assert h.outstanding() == {"m1": 5, "p1": 5} and h.need_probe([5]) == []     # one probe at a time
    assert not h.eligible(5, 10)                                                  # no sign of life yet
    h.signal(5, "p1", shows_life=False)                                           # the SuperLink gave it up
    assert h.need_probe([5]) == [5] and not h.eligible(5, 10)
    h.signal(5, "m1", shows_life=True)                                            # the late reply arrived
    assert not h.eligible(5, 3) and h.eligible(5, 4)                              # ... and the back-off ran out
    assert h.timed_out(5, 4, None) == 2 and h.suspects[5].blocked_until == 4 + 1 + 4
    assert h.timed_out(5, 9, None) == 3 and h.suspects[5].blocked_until == 9 + 1 + 4   # capped
    h.answered(5)
    assert h.suspects == {}
    h.timed_out(7, 1, "m2")
    h.forget({7})
    assert 7 in h.suspects
    h.forget(set())                                    # gone: a returning SuperNode has a new node id
    assert h.suspects == {} and h.outstanding() == {}


def _answering(worker_of: dict[int, str], sizes: dict[str, int], fail=lambda w, rnd: False):
    """A ClientApp-like handler: answers the worker-id query, trains (θ + node id), evaluates."""
    def handler(msg: Message) -> Message | None:
        node = int(msg.metadata.dst_node_id)
        kind = msg.metadata.message_type
        if kind == QUERY_MESSAGE_TYPE:
            return Message(RecordDict({QUERY_RECORD: ConfigRecord({"worker-id": worker_of[node]})}), reply_to=msg)
        w = worker_of[node]
        rnd = int(msg.content["config"]["server-round"])
        if kind == MessageType.TRAIN:
            if fail(w, rnd):
                return Message(Error(code=2, reason="crash"), reply_to=msg)
            theta = msg.content["arrays"].to_numpy_ndarrays()[0]
            content = RecordDict({"arrays": ArrayRecord([theta + node]),
                                  "metrics": MetricRecord({"num-examples": sizes[w], "loss": float(node)})})
            return Message(content, reply_to=msg)
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": sizes[w], "acc": 1.0})}), reply_to=msg)
    return handler


def test_strategy_round_logic(tmp_path):
    ids = ["a", "b", "c", "d"]
    sizes = {"a": 10, "b": 20, "c": 30, "d": 40}
    worker_of = {901: "a", 902: "b", 903: "c", 904: "d", 900: "not-a-worker"}
    problem = Problem(AccuracyUtility([10, 20, 30, 40]), k=2, r=np.full(4, 0.3), ids=ids)
    scheduler = Scheduler(problem, "fairdg", seed=0, count="served")
    strategy = FairschedStrategy(scheduler, node_to_worker="query", weighting="ipw", leave_after=1,
                                 min_available_nodes=1, checkpoint_path=tmp_path / "ckpt.zip",
                                 history_path=tmp_path / "hist.jsonl")
    # "b" fails whenever asked in an even round; node 900 is a Flower node that is not a worker
    grid = LocalGrid(_answering(worker_of, sizes, fail=lambda w, rnd: w == "b" and rnd % 2 == 0),
                     [901, 902, 903, 900])
    served_counts = dict.fromkeys(ids, 0)
    present_counts = dict.fromkeys(ids, 0)
    with task_identity():
        for rnd in range(1, 7):
            if rnd == 4:
                grid.nodes.append(904)  # "d" connects: asked once, then scheduled
            messages = list(strategy.configure_train(rnd, ArrayRecord([np.zeros(2)]), ConfigRecord(), grid))
            pending = strategy._pending
            targets = [int(m.metadata.dst_node_id) for m in messages]
            assert all(m.metadata.message_type == MessageType.TRAIN for m in messages)
            assert len(targets) <= 2 and 900 not in targets and (rnd >= 4 or 904 not in targets)
            assert all(m.content["config"]["server-round"] == rnd for m in messages)
            for w in np.flatnonzero(pending["available"]):
                present_counts[ids[w]] += 1
            replies = grid.send_and_receive(messages)
            served = [worker_of[int(r.metadata.src_node_id)] for r in replies if not r.has_error()]
            for w in served:
                served_counts[w] += 1
            arrays, metrics = strategy.aggregate_train(rnd, replies)
            last = strategy.history[-1]
            assert sorted(last["served"]) == sorted(served)
            assert set(last["failed"]) == ({"b"} if "b" in last["selected"] and rnd % 2 == 0 else set())
            if served:
                # ω_i ∝ n_i / (π_select_i · π̂_part_i) = n_i · present_i / served_i
                raw = np.array([sizes[w] * present_counts[w] / served_counts[w] for w in sorted(served)])
                expected = dict(zip(sorted(served), raw / raw.sum()))
                assert last["weights"] == pytest.approx(expected)
                theta = sum(expected[w] * {"a": 901, "b": 902, "c": 903, "d": 904}[w] for w in served)
                assert arrays.to_numpy_ndarrays()[0] == pytest.approx([theta, theta])
                # the train metrics are averaged with the same weights (and without num-examples)
                assert metrics["loss"] == pytest.approx(theta) and "num-examples" not in metrics
            assert scheduler.round == rnd
    # the query went once to each node, non-worker node 900 included, and never again
    asked = [int(m.metadata.dst_node_id) for m in grid.sent if m.metadata.message_type == QUERY_MESSAGE_TYPE]
    assert sorted(asked) == [900, 901, 902, 903, 904]
    history = read_history(tmp_path / "hist.jsonl")
    rounds = history["rounds"]
    # "d" was away for rounds 1-3 (left), then joined: its floor restarted at round 4
    assert rounds[0]["departed"] == ["d"] and rounds[3]["departed"] == []
    assert [r["server_round"] for r in rounds] == list(range(1, 7))
    state, arrays, model = read_checkpoint(tmp_path / "ckpt.zip")
    assert state["server_round"] == 6 and state["scheduler"]["round"] == 6
    assert model.to_numpy_ndarrays()[0] == pytest.approx(strategy._model.to_numpy_ndarrays()[0])
    assert arrays["counts"][2].tolist() == [served_counts[w] for w in ids]  # "used", per worker


def test_strategy_rejects_bad_options():
    problem = Problem(AccuracyUtility([1, 2]), k=1, r=np.full(2, 0.2))
    with pytest.raises(ValueError, match="weighting"):
        FairschedStrategy(Scheduler(problem), weighting="magic")
    with pytest.raises(ValueError, match="node_to_worker"):
        FairschedStrategy(Scheduler(problem), node_to_worker="guess")
    with pytest.raises(ValueError, match="leave_after"):
        FairschedStrategy(Scheduler(problem), leave_after=0)
    for replaced in ("fraction_train", "min_train_nodes"):
        with pytest.raises(ValueError, match=f"{replaced} is replaced by the scheduler's k = 1"):
            FairschedStrategy(Scheduler(problem), **{replaced: 0.5})
    with pytest.raises(TypeError, match="inner strategy"):
        from flwr.serverapp.strategy import FedAvg
        FairschedStrategy(Scheduler(problem), inner=FedAvg(), fraction_evaluate=0.5)
    with pytest.raises(ValueError, match="resume needs a checkpoint_path"):
        FairschedStrategy(Scheduler(problem), resume=True)
    with pytest.raises(ValueError, match="overcommit"):
        FairschedStrategy(Scheduler(problem), overcommit=-1)


def test_import_fairsched_does_not_import_flower():
    code = "import sys, fairsched, fairsched.integrations; print('flwr' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == "False"


def test_the_clientapp_side_import_is_light():
    """A ClientApp imports ``fairsched.integrations.flower`` for its query handler; it spawns per message."""
    code = "import sys, fairsched.integrations.flower; print('fairsched.policies' in sys.modules, 'scipy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.split() == ["False", "False"]


def test_the_time_limit_guard_interrupts_a_wait_that_never_ends():
    started = time.monotonic()
    with pytest.raises(TimeLimitExceeded, match="still running after 0.5 s"), time_limit(0.5):
        while True:  # what Flower's sample_nodes does when the nodes never come
            time.sleep(1.0)
    assert time.monotonic() - started < 30
    with time_limit(0.5):
        pass
    assert 200 < signal.getitimer(signal.ITIMER_REAL)[0] <= 300   # the autouse guard is armed again
