"""ServerApp: FedAvg-style training where fairsched decides which nodes train each round.

``num-workers`` workers ``"0".."n-1"`` (the SuperNodes' ``partition-id``), ``k`` per round,
every worker selected (or, with ``count = "served"``, served) in at least a fraction ``r``
of the rounds. The accuracy utility uses the partitions' data sizes, so the scheduler
prefers the large partitions whenever the floors allow. Run config keys: see
``pyproject.toml``; ``history-path`` and ``checkpoint-path`` (absolute, "" for none) are
where the per-round JSON record and the scheduler checkpoint go.
"""

from __future__ import annotations

import time

import numpy as np
from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.serverapp import Grid, ServerApp

from fairsched.integrations.flower import FairschedStrategy
from fairsched.problem import Problem
from fairsched.runtime.scheduler import Scheduler
from fairsched.utilities import AccuracyUtility
from task import DIM, loss_and_accuracy, partition_size, test_set

app = ServerApp()


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Build the fairsched problem, wait for the first nodes, run the rounds."""
    cfg = context.run_config
    n, k, r = int(cfg["num-workers"]), int(cfg["k"]), float(cfg["r"])
    problem = Problem(AccuracyUtility([partition_size(i) for i in range(n)]), k=k, r=np.full(n, r),
                      ids=[str(i) for i in range(n)])
    scheduler = Scheduler(problem, str(cfg["policy"]), seed=int(cfg["seed"]), count=str(cfg["count"]))
    leave_after = int(cfg["leave-after"])
    strategy = FairschedStrategy(
        scheduler,
        node_to_worker="query",
        weighting=str(cfg["weighting"]),
        checkpoint_path=str(cfg["checkpoint-path"]) or None,
        history_path=str(cfg["history-path"]) or None,
        leave_after=leave_after if leave_after > 0 else None,
        fraction_evaluate=0.0,  # evaluate centrally instead (evaluate_fn below)
    )

    # Start when the first `min-nodes` nodes are connected (at most `wait-seconds`).
    deadline = time.monotonic() + float(cfg["wait-seconds"])
    while len(list(grid.get_node_ids())) < int(cfg["min-nodes"]) and time.monotonic() < deadline:
        time.sleep(0.5)

    X_test, y_test = test_set()

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        loss, accuracy = loss_and_accuracy(arrays.to_numpy_ndarrays()[0], X_test, y_test)
        return MetricRecord({"loss": loss, "accuracy": accuracy})

    strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(DIM + 1)]),
                   num_rounds=int(cfg["num-server-rounds"]), timeout=float(cfg["round-timeout"]),
                   evaluate_fn=evaluate)
