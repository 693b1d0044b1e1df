"""FairschedStrategy as a Flower strategy, on an in-process grid (no network, no processes).

Composition with Flower's strategies (FedAvg, FedProx, FedAdam, FedYogi, the DP
wrappers), dtypes, waiting for nodes, evaluation on known workers, the worker-id query's
errors and retries, drop-outs (back-off until a node shows life, over-commitment), the
across-rounds Horvitz–Thompson weights, and resume from the checkpoint.
"""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest

pytest.importorskip("flwr")

from flwr.app import (
    ArrayRecord,
    ConfigRecord,
    Context,
    Error,
    Message,
    MessageType,
    MetricRecord,
    RecordDict,
)
from flwr.clientapp import ClientApp
from flwr.serverapp.strategy import (
    DifferentialPrivacyClientSideFixedClipping,
    DifferentialPrivacyServerSideAdaptiveClipping,
    DifferentialPrivacyServerSideFixedClipping,
    FedAdam,
    FedAvg,
    FedProx,
    FedYogi,
)

from fairsched.errors import CheckpointError
from fairsched.integrations.flower import (
    QUERY_MESSAGE_TYPE,
    QUERY_RECORD,
    FairschedStrategy,
    NodesUnavailableError,
    WorkerIdQueryError,
    read_history,
    register_worker_id_query,
)
from fairsched.integrations.flower_grid import exchange
from fairsched.integrations.flower_testing import LocalGrid, task_identity, time_limit
from fairsched.problem import Problem
from fairsched.runtime.scheduler import Scheduler
from fairsched.utilities import AccuracyUtility

NODE0 = 7_000_000_000_000


TIME_LIMIT = 300.0  # wall seconds per test (generous for a loaded CI machine): a wait that never ends fails


@pytest.fixture(autouse=True)
def _identity():
    with time_limit(TIME_LIMIT), task_identity():
        yield


def problem(n: int = 5, k: int = 2, r: float = 0.3, sizes=None) -> Problem:
    sizes = sizes if sizes is not None else [10 * (i + 1) for i in range(n)]
    return Problem(AccuracyUtility(list(sizes)), k=k, r=np.full(n, r), ids=[str(i) for i in range(n)])


def node(w: int) -> int:
    return NODE0 + w


def clients(sizes, dead=(), slow=(), dtype=np.float32, fail=lambda w, rnd: False):
    """Handler of a grid of nodes ``node(w)``: θ_i = θ + (w + 1) (in θ's dtype), num-examples = sizes[w]."""
    def handler(msg: Message) -> Message | None:
        w = int(msg.metadata.dst_node_id) - NODE0
        if w in dead or w in slow:
            return None
        kind = msg.metadata.message_type
        if kind == QUERY_MESSAGE_TYPE:
            return Message(RecordDict({QUERY_RECORD: ConfigRecord({"worker-id": str(w)})}), reply_to=msg)
        if kind == MessageType.TRAIN and fail(w, int(msg.content["config"]["server-round"])):
            return Message(Error(code=2, reason="boom"), reply_to=msg)
        if kind == MessageType.TRAIN:
            out = [(x + np.asarray(w + 1, dtype=x.dtype)).astype(x.dtype)
                   for x in msg.content["arrays"].to_numpy_ndarrays()]
            return Message(RecordDict({"arrays": ArrayRecord(out),
                                       "metrics": MetricRecord({"num-examples": int(sizes[w]), "loss": float(w)})}),
                           reply_to=msg)
        return Message(RecordDict({"metrics": MetricRecord({"num-examples": int(sizes[w]), "acc": float(w)})}),
                       reply_to=msg)
    return handler


def play(strategy: FairschedStrategy, grid: LocalGrid, first: int, last: int, arrays: ArrayRecord,
         timeout: float = 5.0) -> ArrayRecord:
    """Rounds ``first..last`` as ``FairschedStrategy.start`` plays them (train only)."""
    for rnd in range(first, last + 1):
        messages = list(strategy.configure_train(rnd, arrays, ConfigRecord(), grid))
        need = int(strategy._pending["selected"].size) if strategy.overcommit else None
        ex = exchange(grid, messages, timeout, enough=need, poll_interval=0.01)
        strategy._pending["exchange"] = ex
        new, _ = strategy.aggregate_train(rnd, ex.replies)
        arrays = new if new is not None else arrays
    return arrays


# ---------------------------------------------------------------------------------------------
# composition with Flower's strategies
# ---------------------------------------------------------------------------------------------
INNERS = {
    "FedAvg": lambda: FedAvg(fraction_train=0.2, min_train_nodes=3),
    "FedProx": lambda: FedProx(proximal_mu=0.25),
    "FedAdam": lambda: FedAdam(eta=0.05),
    "FedYogi": lambda: FedYogi(eta=0.05),
    "DP server-side clipping": lambda: DifferentialPrivacyServerSideFixedClipping(
        FedAvg(), noise_multiplier=0.0, clipping_norm=0.5, num_sampled_clients=2),
    "DP client-side clipping": lambda: DifferentialPrivacyClientSideFixedClipping(
        FedAvg(), noise_multiplier=0.0, clipping_norm=0.5, num_sampled_clients=2),
    "DP server-side adaptive clipping": lambda: DifferentialPrivacyServerSideAdaptiveClipping(
        FedAvg(), noise_multiplier=0.0, num_sampled_clients=2, initial_clipping_norm=0.5, clipped_count_stddev=0.0),
}


@pytest.mark.parametrize("name", list(INNERS))
def test_inner_strategy_configures_and_aggregates_what_fairsched_chose(name, caplog):
    sizes = [10, 20, 30, 40, 50]
    p = problem(sizes=sizes)
    strategy = FairschedStrategy(Scheduler(p, "fairdg", count="served"), inner=INNERS[name](),
                                 node_to_worker=lambda v: str(v - NODE0), min_available_nodes=5)
    grid = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    theta = ArrayRecord([np.full(3, 0.5, dtype=np.float32)])
    reference = INNERS[name]()                    # the same strategy, fed the same replies by hand
    for s in [reference, getattr(reference, "strategy", None)]:
        if s is not None and hasattr(s, "fraction_train"):
            s.fraction_train, s.min_train_nodes, s.min_available_nodes = 1.0, 0, 0
    for rnd in (1, 2, 3):
        messages = list(strategy.configure_train(rnd, theta, ConfigRecord(), grid))
        selected = strategy._pending["selected"].tolist()
        # only fairsched's choice is asked, whatever the inner strategy's own sampling parameters
        assert sorted(int(m.metadata.dst_node_id) for m in messages) == [node(w) for w in selected]
        config = messages[0].content["config"]
        assert config["server-round"] == rnd
        if name == "FedProx":
            assert config["proximal-mu"] == 0.25          # FedProx's configuration reaches the clients
        if name == "DP client-side clipping":
            assert config["clipping_norm"] == 0.5
        replies = grid.send_and_receive(messages)
        arrays, metrics = strategy.aggregate_train(rnd, replies)

        ref_grid = LocalGrid(clients(sizes), [node(w) for w in selected])
        ref_messages = list(reference.configure_train(rnd, theta, ConfigRecord(), ref_grid))
        ref_replies = sorted(ref_grid.send_and_receive(ref_messages), key=lambda m: int(m.metadata.src_node_id))
        expected, _ = reference.aggregate_train(rnd, ref_replies)

        out = arrays.to_numpy_ndarrays()[0]
        assert arrays["0"].dtype == "float32" and out.dtype == np.float32     # dtype preserved
        assert out == pytest.approx(expected.to_numpy_ndarrays()[0].astype(np.float32), rel=1e-6)
        average = sum(sizes[w] * (theta.to_numpy_ndarrays()[0] + w + 1) for w in selected) / sum(
            sizes[w] for w in selected)
        if name in ("FedAdam", "FedYogi", "DP server-side adaptive clipping"):
            assert not np.allclose(out, average, rtol=1e-3)   # the server optimiser / adaptive clipping did run
        elif name.startswith("DP server"):                # the update was clipped to norm 0.5
            assert np.linalg.norm(out - theta.to_numpy_ndarrays()[0]) <= 0.5 + 1e-5
        else:
            assert out == pytest.approx(average.astype(np.float32), rel=1e-6)
        assert "num-examples" not in metrics and metrics["loss"] == pytest.approx(
            sum(sizes[w] * w for w in selected) / sum(sizes[w] for w in selected))
        theta = arrays
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="flwr"):
        strategy.summary()
    text = caplog.text
    assert "Fraction: train (replaced: fairsched's k = 2)" in text
    assert "Minimum available nodes: 5 (waited for by fairsched)" in text
    assert "Fraction: train (1.00)" not in text and "Fraction: train (0.20)" not in text


def test_default_fedavg_keeps_its_evaluation_options_and_dtypes():
    sizes = [10, 20, 30]
    strategy = FairschedStrategy(Scheduler(problem(3, 2, 0.3, sizes)), node_to_worker=lambda v: str(v - NODE0),
                                 fraction_evaluate=0.5, min_evaluate_nodes=1, min_available_nodes=1)
    assert strategy.inner.fraction_evaluate == 0.5 and strategy.inner.fraction_train == 1.0
    grid = LocalGrid(clients(sizes), [node(w) for w in range(3)])
    for dtype in (np.float64, np.float32, np.float16):
        rnd = strategy.scheduler.round + 1
        theta = ArrayRecord([np.zeros(4, dtype=dtype), np.arange(3, dtype=np.int64)])
        arrays, _ = strategy.aggregate_train(rnd, grid.send_and_receive(
            strategy.configure_train(rnd, theta, ConfigRecord(), grid)))
        assert [a.dtype for a in arrays.values()] == [np.dtype(dtype).name, "int64"]
        assert arrays["1"].numpy().tolist() == [v + 2 for v in range(3)] or strategy.history[-1]["weights"]


# ---------------------------------------------------------------------------------------------
# waiting, zero nodes, evaluation
# ---------------------------------------------------------------------------------------------
def test_waits_for_min_available_nodes_and_never_trains_on_nobody():
    sizes = [10, 20, 30]
    strategy = FairschedStrategy(Scheduler(problem(3, 2, 0.3, sizes)), node_to_worker=lambda v: str(v - NODE0),
                                 min_available_nodes=2, wait_timeout=1.5)
    grid = LocalGrid(clients(sizes), [node(0)])
    theta = ArrayRecord([np.zeros(2)])
    started = time.monotonic()
    with pytest.raises(NodesUnavailableError, match="1 connected nodes are workers of the problem.*raise wait_timeout"):
        strategy.configure_train(1, theta, ConfigRecord(), grid)
    assert time.monotonic() - started >= 1.4 and strategy.scheduler.round == 0 and strategy.engine.pending is None

    strategy.wait_timeout = 20.0
    threading.Timer(1.0, lambda: grid.nodes.append(node(1))).start()
    started = time.monotonic()
    messages = list(strategy.configure_train(1, theta, ConfigRecord(), grid))
    assert time.monotonic() - started >= 0.9 and len(messages) == 2

    # no worker of the problem at all (or only non-workers): no round, even with min_available_nodes = 0
    alone = FairschedStrategy(Scheduler(problem(3, 2, 0.3, sizes)), node_to_worker=lambda v: None,
                              min_available_nodes=0, wait_timeout=1.0)
    with pytest.raises(TimeoutError, match="0 of them may be asked"):
        alone.configure_train(1, theta, ConfigRecord(), LocalGrid(clients(sizes), [node(0), node(1)]))


def test_evaluation_is_restricted_to_known_workers():
    sizes = [10, 20]
    known = {node(0): "0", node(1): "1"}
    for where, expected in (("workers", [node(0), node(1)]), ("all", [node(0), node(1), 99])):
        strategy = FairschedStrategy(Scheduler(problem(2, 1, 0.3, sizes)), node_to_worker=known.get,
                                     evaluate_nodes=where, min_available_nodes=1, min_evaluate_nodes=1)
        grid = LocalGrid(clients(sizes), [node(0), 99, node(1)])
        messages = strategy.configure_evaluate(1, ArrayRecord([np.zeros(2)]), ConfigRecord(), grid)
        assert sorted(int(m.metadata.dst_node_id) for m in messages) == sorted(expected)
        assert all(m.metadata.message_type == MessageType.EVALUATE for m in messages)
    # fewer evaluable nodes than min_evaluate_nodes: the evaluation is skipped, Flower's sampling never waits
    strategy = FairschedStrategy(Scheduler(problem(2, 1, 0.3, sizes)), node_to_worker=known.get,
                                 min_available_nodes=1, min_evaluate_nodes=3)
    grid = LocalGrid(clients(sizes), [node(0), 99, node(1)])
    started = time.monotonic()
    assert list(strategy.configure_evaluate(1, ArrayRecord([np.zeros(2)]), ConfigRecord(), grid)) == []
    assert time.monotonic() - started < 5


# ---------------------------------------------------------------------------------------------
# the worker-id query
# ---------------------------------------------------------------------------------------------
def _clientapp_handler(app: ClientApp, raise_first: int = 0):
    """Run a real ClientApp on each message, turning its exceptions into Flower's error replies."""
    calls = {"n": 0}

    def handler(msg: Message) -> Message:
        w = int(msg.metadata.dst_node_id) - NODE0
        context = Context(run_id=1, node_id=msg.metadata.dst_node_id, node_config={"partition-id": w},
                          state=RecordDict(), run_config={})
        try:
            calls["n"] += 1
            if calls["n"] <= raise_first:
                raise RuntimeError("disk full")
            return app(msg, context)
        except Exception as ex:  # noqa: BLE001 - what flwr.supernode.runtime.run_clientapp replies
            return Message(Error(code=2, reason=str(type(ex)) + ":<'" + str(ex) + "'>"), reply_to=msg)
    return handler


def test_a_clientapp_without_the_query_handler_is_an_error_with_the_fix():
    app = ClientApp()

    @app.train()
    def train(msg, context):  # pragma: no cover - never reached
        raise AssertionError

    strategy = FairschedStrategy(Scheduler(problem(2, 1, 0.3)), node_to_worker="query", min_available_nodes=1)
    grid = LocalGrid(_clientapp_handler(app), [node(0), node(1)])
    with pytest.raises(WorkerIdQueryError, match=r"no handler .*register_worker_id_query\(app, lambda context"):
        strategy.configure_train(1, ArrayRecord([np.zeros(2)]), ConfigRecord(), grid)


def test_a_failing_query_is_retried_and_a_persistent_failure_is_an_error():
    app = ClientApp()
    register_worker_id_query(app, lambda context: str(context.node_config["partition-id"]))
    strategy = FairschedStrategy(Scheduler(problem(2, 1, 0.3)), node_to_worker="query", min_available_nodes=2)
    grid = LocalGrid(_clientapp_handler(app, raise_first=1), [node(0), node(1)])
    messages = list(strategy.configure_train(1, ArrayRecord([np.zeros(2)]), ConfigRecord(), grid))
    assert len(messages) == 1 and strategy.directory.workers(grid.nodes) == {"0": node(0), "1": node(1)}
    queries = [int(m.metadata.dst_node_id) for m in grid.sent if m.metadata.message_type == QUERY_MESSAGE_TYPE]
    assert sorted(queries) == [node(0), node(0), node(1)]      # node 0 failed once, was asked again

    always = FairschedStrategy(Scheduler(problem(2, 1, 0.3)), node_to_worker="query", min_available_nodes=2,
                               query_attempts=3)
    grid = LocalGrid(_clientapp_handler(app, raise_first=10**6), [node(0), node(1)])
    with pytest.raises(WorkerIdQueryError, match="failed fairsched's worker-id query 3 times.*disk full"):
        always.configure_train(1, ArrayRecord([np.zeros(2)]), ConfigRecord(), grid)

    odd = ClientApp()

    @odd.query("fairsched_worker_id")
    def wrong(msg, context):
        return Message(RecordDict({"other": ConfigRecord({"x": 1})}), reply_to=msg)

    strategy = FairschedStrategy(Scheduler(problem(2, 1, 0.3)), node_to_worker="query", min_available_nodes=1)
    with pytest.raises(WorkerIdQueryError, match="without fairsched.worker-id"):
        strategy.configure_train(1, ArrayRecord([np.zeros(2)]), ConfigRecord(), LocalGrid(_clientapp_handler(odd),
                                                                                           [node(0)]))


def test_a_late_answer_to_the_worker_id_query_still_resolves_the_node():
    app = ClientApp()
    register_worker_id_query(app, lambda context: str(context.node_config["partition-id"]))
    slow = {node(1)}
    answer = _clientapp_handler(app)
    grid = LocalGrid(lambda msg: None if int(msg.metadata.dst_node_id) in slow else answer(msg), [node(0), node(1)])
    strategy = FairschedStrategy(Scheduler(problem(2, 1, 0.3)), node_to_worker="query", min_available_nodes=1,
                                 query_timeout=0.2, poll_interval=0.01)
    theta = ArrayRecord([np.zeros(2)])
    messages = list(strategy.configure_train(1, theta, ConfigRecord(), grid))
    assert strategy.directory.workers(grid.nodes) == {"0": node(0)}
    strategy.aggregate_train(1, grid.send_and_receive(messages))
    slow.clear()
    for mid, msg in list(grid.held.items()):  # the ClientApp of node 1 finally started and answered
        grid.release(mid, grid.handler(msg))
    list(strategy.configure_train(2, theta, ConfigRecord(), grid))
    assert strategy.directory.workers(grid.nodes) == {"0": node(0), "1": node(1)}
    queries = [int(m.metadata.dst_node_id) for m in grid.sent if m.metadata.message_type == QUERY_MESSAGE_TYPE]
    assert sorted(queries) == [node(0), node(1)]              # resolved by the late answer, not asked again


# ---------------------------------------------------------------------------------------------
# drop-outs
# ---------------------------------------------------------------------------------------------
def test_a_node_that_timed_out_is_held_back_until_it_shows_life(tmp_path):
    sizes = [10, 20, 30, 40]
    dead: set[int] = {3}  # worker 3's node crashed: Flower still lists it, it never answers
    strategy = FairschedStrategy(Scheduler(problem(4, 2, 0.3, sizes), "fairdg", count="served"),
                                 node_to_worker=lambda v: str(v - NODE0), min_available_nodes=1,
                                 backoff_rounds=2, history_path=tmp_path / "h.jsonl")
    grid = LocalGrid(clients(sizes, dead=dead), [node(w) for w in range(4)])
    theta = play(strategy, grid, 1, 10, ArrayRecord([np.zeros(2)]), timeout=0.3)
    rounds = read_history(tmp_path / "h.jsonl")["rounds"]
    waited = [r["server_round"] for r in rounds if r["timed_out"]]
    assert len(waited) == 1 and rounds[waited[0] - 1]["missing"] == ["3"]    # one full timeout, for it
    assert all("3" not in r["selected"] for r in rounds[waited[0]:])          # served-mode debt or not
    assert all(r["suspects"] == ["3"] and "3" not in r["available"] for r in rounds[waited[0]:])
    probes = [m for m in grid.sent if m.metadata.message_type == QUERY_MESSAGE_TYPE]
    assert [int(m.metadata.dst_node_id) for m in probes] == [node(3)]       # one probe, no waiting for it

    # it comes back: its late reply (the probe's answer) arrives; after the back-off it is asked again
    dead.clear()
    for mid, msg in list(grid.held.items()):
        grid.release(mid, grid.handler(msg))
    play(strategy, grid, 11, 16, theta, timeout=0.3)
    rounds = read_history(tmp_path / "h.jsonl")["rounds"]
    back = [r["server_round"] for r in rounds[10:] if "3" in r["selected"]]
    assert back and all(r["suspects"] == [] for r in rounds[11:]) and not any(r["timed_out"] for r in rounds[10:])
    assert "3" in rounds[back[0] - 1]["served"]


def test_a_worker_whose_first_answer_is_an_error_is_scheduled_again(tmp_path):
    sizes = [10, 20, 30, 40]
    failed_once: set[int] = set()

    def first_time(w: int, rnd: int) -> bool:  # every worker's first train reply is an error
        if w in failed_once:
            return False
        failed_once.add(w)
        return True

    strategy = FairschedStrategy(Scheduler(problem(4, 2, 0.3, sizes), "fairdg", count="served"),
                                 node_to_worker=lambda v: str(v - NODE0), min_available_nodes=1)
    grid = LocalGrid(clients(sizes, fail=first_time), [node(w) for w in range(4)])
    play(strategy, grid, 1, 8, ArrayRecord([np.zeros(2)]))
    failed = [w for r in strategy.history for w in r["failed"]]
    assert sorted(failed) == ["0", "1", "2", "3"]                       # each failed exactly once ...
    served = {w for r in strategy.history for w in r["served"]}
    assert served == {"0", "1", "2", "3"}                               # ... and was asked and served later
    assert all(r["suspects"] == [] for r in strategy.history)           # an error is a sign of life


def test_overcommitment_uses_the_first_k_results(tmp_path):
    sizes = [10, 20, 30, 40]
    slow: set[int] = set()
    strategy = FairschedStrategy(Scheduler(problem(4, 2, 0.25, sizes), "fairdg", count="served"),
                                 node_to_worker=lambda v: str(v - NODE0), min_available_nodes=1, overcommit=1,
                                 history_path=tmp_path / "h.jsonl")
    grid = LocalGrid(clients(sizes, slow=slow), [node(w) for w in range(4)])
    theta = play(strategy, grid, 1, 2, ArrayRecord([np.zeros(2)]), timeout=30)
    last = strategy.history[-1]
    assert len(last["selected"]) == 2 and len(last["backups"]) == 1 and len(last["used"]) == 2

    # round 3: one of the selected is slow; the backup's result takes its place at once
    messages = list(strategy.configure_train(3, theta, ConfigRecord(), grid))
    late = int(strategy._pending["selected"][0])
    slow.add(late)
    started = time.monotonic()
    ex = exchange(grid, messages, 30, enough=2, poll_interval=0.01)
    assert time.monotonic() - started < 5 and ex.stopped_early and not ex.timed_out
    strategy._pending["exchange"] = ex
    strategy.aggregate_train(3, ex.replies)
    line = strategy.history[-1]
    assert line["missing"] == [str(late)] and len(line["used"]) == 2 and line["stopped_early"]
    assert set(line["served"]) == set(line["used"]) & set(line["selected"])   # what the scheduler was told
    counts = strategy.scheduler.state_dict()["policy"]["counts"]
    assert counts[late] == sum(str(late) in r["served"] for r in strategy.history)
    # the slow node is busy, not dead: not asked before its reply arrives, and no back-off after it
    messages = list(strategy.configure_train(4, theta, ConfigRecord(), grid))
    assert node(late) not in [int(m.metadata.dst_node_id) for m in messages]
    assert strategy._pending["suspects"] == [str(late)]
    strategy.aggregate_train(4, grid.send_and_receive(messages))
    slow.clear()
    for mid, msg in list(grid.held.items()):
        grid.release(mid, grid.handler(msg))
    list(strategy.configure_train(5, theta, ConfigRecord(), grid))
    assert strategy._pending["suspects"] == [] and str(late) in [strategy.problem.ids[w] for w in
                                                                 np.flatnonzero(strategy._pending["available"])]


# ---------------------------------------------------------------------------------------------
# across-rounds weights
# ---------------------------------------------------------------------------------------------
def _run_weighting(weighting: str, r: np.ndarray, availability=None, rounds: int = 200):
    n, k = r.size, 4
    sizes = np.array([20 + 10 * i for i in range(n)])
    rng = np.random.default_rng(0)
    strategy = FairschedStrategy(Scheduler(problem(n, k, 0.0, sizes).__class__(
        AccuracyUtility(sizes.tolist()), k=k, r=r, ids=[str(i) for i in range(n)]), "fairdg", count="served"),
        node_to_worker=lambda v: str(v - NODE0), weighting=weighting, target_shares=sizes.tolist(),
        min_available_nodes=1, fraction_evaluate=0.0)
    grid = LocalGrid(clients(sizes, dtype=np.float64), [node(w) for w in range(n)])
    arrays = ArrayRecord([np.zeros(2)])
    for t in range(1, rounds + 1):
        if availability is not None:
            grid.nodes = [node(w) for w in range(n) if rng.random() < availability[w]]
        arrays, _ = strategy.aggregate_train(t, grid.send_and_receive(
            strategy.configure_train(t, arrays, ConfigRecord(), grid)))
    return strategy


def test_horvitz_thompson_weights_match_the_target_shares_over_the_run(capsys):
    """TV distance between each worker's summed aggregation weight and its target share (``s_u ∝ n_u``)."""
    n = 20
    scenarios = {"FairDG, uniform floors r = k/n": (np.full(n, 4 / n), None),
                 "FairDG, uniform floors r = 0.1": (np.full(n, 0.1), None),
                 "FairDG, r = 0.1, availability 0.3..1.0": (np.full(n, 0.1), np.linspace(0.3, 1.0, n))}
    table = {}
    for name, (r, availability) in scenarios.items():
        table[name] = {w: _run_weighting(w, r, availability) for w in ("fedavg", "ipw", "ht")}
    with capsys.disabled():
        print("\nTV(summed aggregation weight, target share), 200 rounds, n = 20, k = 4:")
        for name, runs in table.items():
            print(f"  {name}: " + ", ".join(f"{w} {s.total_variation():.3f}" for w, s in runs.items()))
    for name, runs in table.items():
        tv = {w: s.total_variation() for w, s in runs.items()}
        assert tv["ht"] < 0.07 and tv["ht"] < tv["ipw"] / 3 and tv["ht"] < tv["fedavg"] / 3, (name, tv)
    # with uniform floors everybody is selected at the same rate: per-round Hájek = FedAvg exactly
    for name in list(scenarios)[:2]:
        fedavg, ipw = table[name]["fedavg"], table[name]["ipw"]
        assert ipw.total_variation() == pytest.approx(fedavg.total_variation(), abs=1e-12)
        assert fedavg.total_variation() > 0.15
    # the across-rounds step: E[c_t] = 1, and the model moved
    steps = [e["step"] for e in table["FairDG, uniform floors r = k/n"]["ht"].history[20:]]
    assert 0.8 < np.mean(steps) < 1.2


# ---------------------------------------------------------------------------------------------
# resume
# ---------------------------------------------------------------------------------------------
def _strategy(path, **kw):
    sizes = [10, 20, 30, 40, 50]
    return FairschedStrategy(Scheduler(problem(sizes=sizes), "fairdg", seed=3, count="served"),
                             inner=FedAdam(eta=0.05), node_to_worker="query", weighting="ht",
                             min_available_nodes=1, checkpoint_path=path / "ckpt.zip",
                             history_path=path / "history.jsonl", leave_after=2, **kw), sizes


def test_a_resumed_run_makes_the_same_decisions_and_model(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    fail = (lambda w, rnd: w == 1 and rnd % 3 == 0)
    a, sizes = _strategy(tmp_path / "a")
    grid_a = LocalGrid(clients(sizes, fail=fail), [node(w) for w in range(5)])
    model_a = a.start(grid_a, ArrayRecord([np.zeros(3, dtype=np.float32)]), num_rounds=8, timeout=5).arrays

    b, _ = _strategy(tmp_path / "b")
    grid_b = LocalGrid(clients(sizes, fail=fail), [node(w) for w in range(5)])
    b.start(grid_b, ArrayRecord([np.zeros(3, dtype=np.float32)]), num_rounds=4, timeout=5)
    b.close()
    # a restarted ServerApp: a new scheduler and strategy, the same SuperNodes (node ids)
    c, _ = _strategy(tmp_path / "b", resume=True)
    model_c = c.start(grid_b, ArrayRecord([np.ones(3, dtype=np.float32)]), num_rounds=8, timeout=5).arrays
    c.close()
    assert model_c["0"].numpy().tobytes() == model_a["0"].numpy().tobytes()
    ha, hb = read_history(tmp_path / "a" / "history.jsonl"), read_history(tmp_path / "b" / "history.jsonl")
    assert [r["selected"] for r in hb["rounds"]] == [r["selected"] for r in ha["rounds"]]
    assert [r["weights"] for r in hb["rounds"]] == [r["weights"] for r in ha["rounds"]]
    assert [r["server_round"] for r in hb["rounds"]] == list(range(1, 9)) and len(hb["resumes"]) == 1
    assert not [m for m in grid_b.sent[-40:] if m.metadata.message_type == QUERY_MESSAGE_TYPE]  # directory kept
    # resume="auto" after the end: nothing to do, the final model comes back
    d, _ = _strategy(tmp_path / "b", resume="auto")
    assert d.start(grid_b, ArrayRecord([np.ones(3, dtype=np.float32)]), num_rounds=8).arrays["0"].numpy().tobytes() \
        == model_a["0"].numpy().tobytes()


def test_the_history_is_cut_back_to_the_checkpoint_and_bad_checkpoints_are_refused(tmp_path):
    a, sizes = _strategy(tmp_path)
    grid = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    a.start(grid, ArrayRecord([np.zeros(3, dtype=np.float32)]), num_rounds=3, timeout=5)
    a.close()
    ckpt = tmp_path / "ckpt.zip"
    saved = ckpt.read_bytes()
    with open(tmp_path / "history.jsonl", "ab") as handle:   # a round 4 line written, then the kill
        handle.write(b'{"type":"round","server_round":4}\n{"type":"rou')
    b, _ = _strategy(tmp_path, resume=True)
    b.start(grid, ArrayRecord([np.zeros(3, dtype=np.float32)]), num_rounds=5, timeout=5)
    b.close()
    assert [r["server_round"] for r in read_history(tmp_path / "history.jsonl")["rounds"]] == [1, 2, 3, 4, 5]

    for damage in (saved[: len(saved) // 2], saved[:100] + bytes([saved[100] ^ 1]) + saved[101:]):
        ckpt.write_bytes(damage)
        c, _ = _strategy(tmp_path, resume=True)
        with pytest.raises(CheckpointError):
            c.restore(ckpt)
    ckpt.write_bytes(saved)
    other, _ = _strategy(tmp_path, resume=True, overcommit=1)
    with pytest.raises(CheckpointError, match="overcommit = 0, this strategy 1"):
        other.restore(ckpt)


def test_caps_bound_how_often_a_node_trains(tmp_path):
    """A problem with caps: the two largest clients may train in at most 30% of the rounds.
    Without caps FairDG asks them nearly every round; with caps no node's count ever exceeds
    ``c·t + 1``, and an over-committed backup is never a capped node."""
    sizes = [10, 20, 30, 200, 400]
    caps = np.array([1.0, 1.0, 1.0, 0.3, 0.3])
    capped = Problem(AccuracyUtility(sizes), k=2, r=np.full(5, 0.1), ids=[str(i) for i in range(5)], caps=caps)
    strategy = FairschedStrategy(Scheduler(capped, "fairdg", count="served"),
                                 node_to_worker=lambda v: str(v - NODE0), min_available_nodes=1, overcommit=1,
                                 history_path=tmp_path / "h.jsonl")
    grid = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    play(strategy, grid, 1, 60, ArrayRecord([np.zeros(2)]))
    served = np.zeros(5)
    for t, line in enumerate(strategy.history, start=1):
        for w in line["backups"]:
            assert served[int(w)] < caps[int(w)] * t  # not at its cap when asked
        for w in line["served"]:
            served[int(w)] += 1
        assert (served - caps * t < 1).all(), (t, served)
    assert served[3] + served[4] >= 0.55 * 60 - 2  # the caps bind: both big ones near 0.3


def test_train_metrics_reach_a_learning_policy(tmp_path):
    """With a policy that learns the utility, every numeric train metric of the used replies is
    its feedback, and ``reward_metric``'s example-weighted mean the round's reward."""
    from fairsched.online import AccuracyCurveLearner, OnlinePolicy

    sizes = [10, 20, 30, 40, 50]
    learner = AccuracyCurveLearner(AccuracyUtility([1.0] * 5))
    strategy = FairschedStrategy(Scheduler(problem(5, 2, 0.2, sizes), OnlinePolicy("fairdg", learner)),
                                 node_to_worker=lambda v: str(v - NODE0), min_available_nodes=1,
                                 reward_metric="num-examples")
    grid = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    play(strategy, grid, 1, 6, ArrayRecord([np.zeros(2)]))
    assert learner.rounds == 6
    assert sorted(learner.sizes.tolist()) == sizes  # learned from the replies' num-examples
    assert len(learner._groups) >= 2  # rewards arrived (the weighted mean of num-examples)


def _learning_strategy(path=None, learner=None, **kw):
    from fairsched.online import AccuracyCurveLearner, OnlinePolicy

    sizes = [10, 20, 30, 40, 50]
    learner = learner or AccuracyCurveLearner(AccuracyUtility([1.0] * 5))
    files = {} if path is None else {"checkpoint_path": path / "ckpt.zip", "history_path": path / "history.jsonl"}
    strategy = FairschedStrategy(Scheduler(problem(5, 2, 0.2, sizes), OnlinePolicy("fairdg", learner), seed=5),
                                 node_to_worker=lambda v: str(v - NODE0), min_available_nodes=1, **files, **kw)
    return strategy, learner, sizes


def _rewards_seen(strategy):
    """Wrap the policy's ``learn`` to record the rewards it is given."""
    seen, policy = [], strategy.engine.policy
    learn = policy.learn

    def recording(served, feedback):
        seen.append(feedback.reward)
        learn(served, feedback)
    policy.learn = recording
    return seen


def _model_mean(server_round, arrays):
    return MetricRecord({"mean": float(np.mean(arrays.to_numpy_ndarrays()[0]))})


def test_server_evaluation_is_the_reward_and_its_change_with_reward_change(tmp_path):
    """``reward_from="server"``: the reward is ``evaluate_fn``'s metric, with ``reward_change`` its
    change since the previous round (round 1: since the initial evaluation)."""
    strategy, learner, sizes = _learning_strategy(tmp_path, reward_metric="mean", reward_from="server",
                                                  reward_change=True)
    seen = _rewards_seen(strategy)
    grid = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    result = strategy.start(grid, ArrayRecord([np.zeros(2)]), num_rounds=5, timeout=5, evaluate_fn=_model_mean)
    strategy.close()
    values = [result.evaluate_metrics_serverapp[t]["mean"] for t in range(6)]
    assert seen == pytest.approx(np.diff(values).tolist(), abs=1e-12)
    assert len(set(np.round(seen, 9))) > 1  # the model moved by different amounts: a real signal
    assert [line["reward"] for line in read_history(tmp_path / "history.jsonl")["rounds"]] == seen
    assert learner.rounds == 5


def test_federated_evaluation_is_the_reward(tmp_path):
    """``reward_from="evaluate"``: the reward is ``reward_metric`` of the inner strategy's aggregated
    evaluation (FedAvg: the num-examples-weighted mean of the clients' ``acc`` = their index), and
    each evaluated worker's own metrics arrive as ``evaluate.<metric>``."""
    strategy, learner, sizes = _learning_strategy(reward_metric="acc", reward_from="evaluate",
                                                  fraction_evaluate=1.0, min_evaluate_nodes=5)
    seen = _rewards_seen(strategy)
    policy, feedbacks = strategy.engine.policy, []
    recording = policy.learn
    policy.learn = lambda served, feedback: (feedbacks.append((served, feedback)), recording(served, feedback))
    grid = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    strategy.start(grid, ArrayRecord([np.zeros(2)]), num_rounds=4, timeout=5)
    expected = sum(s * w for w, s in enumerate(sizes)) / sum(sizes)
    assert seen == pytest.approx([expected] * 4, rel=1e-12)
    assert learner.rounds == 4 and [line["reward"] for line in strategy.history] == seen
    for served, feedback in feedbacks:  # every evaluated worker's metrics, beside the trained ones' own
        assert feedback.workers.tolist() == list(range(5))
        assert feedback.metric("evaluate.acc")[1].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
        trained, losses = feedback.metric("loss")
        assert trained.tolist() == served.tolist() and losses.tolist() == [float(w) for w in served]


def test_rounds_without_their_evaluation_learn_without_a_reward(caplog):
    """Driven without evaluations, each round still teaches its train metrics (at the next
    ``configure_train`` and at ``close``), with no reward, and the missing metric is logged once."""
    strategy, learner, sizes = _learning_strategy(reward_metric="acc", reward_from="evaluate")
    seen = _rewards_seen(strategy)
    grid = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    play(strategy, grid, 1, 4, ArrayRecord([np.zeros(2)]))
    assert learner.rounds == 3 and len(strategy.history) == 3  # round 4 waits for its evaluation
    strategy.close()
    assert learner.rounds == 4 and seen == [None] * 4 and len(strategy.history) == 4
    assert sum("without acc" in r.getMessage() for r in caplog.records) == 1


def test_a_resumed_learning_run_has_learned_what_the_original_had(tmp_path):
    """A restart between rounds of a run whose rewards come from the server's evaluation: the
    checkpoint of round t is written after round t's evaluation taught the policy, so the
    resumed run's learned state, decisions and rewards equal an uninterrupted run's."""
    kw = {"reward_metric": "mean", "reward_from": "server", "reward_change": True}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, _, sizes = _learning_strategy(tmp_path / "a", **kw)
    grid_a = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    a.start(grid_a, ArrayRecord([np.zeros(2)]), num_rounds=8, timeout=5, evaluate_fn=_model_mean)
    a.close()
    b, _, _ = _learning_strategy(tmp_path / "b", **kw)
    grid_b = LocalGrid(clients(sizes), [node(w) for w in range(5)])
    b.start(grid_b, ArrayRecord([np.zeros(2)]), num_rounds=4, timeout=5, evaluate_fn=_model_mean)
    b.close()
    c, _, _ = _learning_strategy(tmp_path / "b", resume=True, **kw)
    c.start(grid_b, ArrayRecord([np.ones(2)]), num_rounds=8, timeout=5, evaluate_fn=_model_mean)
    c.close()
    ha, hb = read_history(tmp_path / "a" / "history.jsonl"), read_history(tmp_path / "b" / "history.jsonl")
    assert [r["selected"] for r in hb["rounds"]] == [r["selected"] for r in ha["rounds"]]
    assert [r["reward"] for r in hb["rounds"]] == [r["reward"] for r in ha["rounds"]]
    assert c.scheduler.state_dict() == a.scheduler.state_dict()  # learned state included

    other, _, _ = _learning_strategy(tmp_path / "b", reward_metric="mean", reward_from="server")
    with pytest.raises(CheckpointError, match="reward_change = True, this strategy False"):
        other.restore(tmp_path / "b" / "ckpt.zip")


def test_reward_options_are_checked():
    with pytest.raises(ValueError, match="reward_from must be one of train, evaluate, server"):
        _learning_strategy(reward_metric="acc", reward_from="client")
    with pytest.raises(ValueError, match="give reward_metric"):
        _learning_strategy(reward_from="evaluate")
    strategy, _, sizes = _learning_strategy(reward_metric="acc", reward_from="server")
    with pytest.raises(ValueError, match="pass evaluate_fn"):
        strategy.start(LocalGrid(clients(sizes), [node(0)]), ArrayRecord([np.zeros(2)]), num_rounds=1)
