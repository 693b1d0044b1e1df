"""ServerApp: federated training where fairsched decides which nodes train each round.

``num-workers`` workers ``"0".."n-1"`` (the SuperNodes' ``partition-id``), ``k`` per round,
every worker selected (or, with ``count = "served"``, served) in at least a fraction ``r``
of the rounds. The accuracy utility uses the partitions' data sizes, so the scheduler
prefers the large partitions whenever the floors allow. ``inner`` is the Flower strategy
that configures the messages and aggregates (``fedavg``, ``fedprox``, ``fedadam``). Run
config keys: see ``pyproject.toml``; ``history-path`` and ``checkpoint-path`` (absolute,
"" for none) are where the per-round JSON lines and the checkpoint go, and ``resume``
(``"auto"``, ``"true"`` or ``"false"``) whether a restarted ServerApp continues from that
checkpoint.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAdam, FedAvg, FedProx, Strategy
from task import DIM, loss_and_accuracy, partition_size, test_set

from fairsched.integrations.flower import FairschedStrategy
from fairsched.problem import Problem
from fairsched.runtime.scheduler import Scheduler
from fairsched.utilities import AccuracyUtility

app = ServerApp()

RESUME = {"auto": "auto", "true": True, "false": False}


def make_inner(cfg: dict) -> Strategy:
    """The Flower strategy fairsched wraps; client-side evaluation off (the server evaluates)."""
    name = str(cfg["inner"])
    if name == "fedavg":
        return FedAvg(fraction_evaluate=0.0)
    if name == "fedprox":
        return FedProx(fraction_evaluate=0.0, proximal_mu=float(cfg["proximal-mu"]))
    if name == "fedadam":
        return FedAdam(fraction_evaluate=0.0, eta=float(cfg["server-learning-rate"]))
    raise ValueError(f"inner must be fedavg, fedprox or fedadam, got {name!r}")


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Build the fairsched problem and the strategy, then run (or resume) the rounds."""
    cfg = context.run_config
    n, k, r = int(cfg["num-workers"]), int(cfg["k"]), float(cfg["r"])
    problem = Problem(AccuracyUtility([partition_size(i) for i in range(n)]), k=k, r=np.full(n, r),
                      ids=[str(i) for i in range(n)])
    scheduler = Scheduler(problem, str(cfg["policy"]), seed=int(cfg["seed"]), count=str(cfg["count"]))
    leave_after = int(cfg["leave-after"])
    strategy = FairschedStrategy(
        scheduler,
        inner=make_inner(cfg),
        node_to_worker="query",
        weighting=str(cfg["weighting"]),
        min_available_nodes=int(cfg["min-nodes"]),         # wait for them before every round
        wait_timeout=float(cfg["wait-seconds"]) or None,
        overcommit=int(cfg["overcommit"]),
        checkpoint_path=str(cfg["checkpoint-path"]) or None,
        resume=RESUME[str(cfg["resume"])] if str(cfg["checkpoint-path"]) else False,
        history_path=str(cfg["history-path"]) or None,
        leave_after=leave_after if leave_after > 0 else None,
        poll_interval=float(cfg["poll-interval"]),
    )

    X_test, y_test = test_set()

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        loss, accuracy = loss_and_accuracy(arrays.to_numpy_ndarrays()[0], X_test, y_test)
        return MetricRecord({"loss": loss, "accuracy": accuracy})

    try:
        strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(DIM + 1)]),
                       num_rounds=int(cfg["num-server-rounds"]), timeout=float(cfg["round-timeout"]),
                       evaluate_fn=evaluate)
    finally:
        strategy.close()
