"""FedAvg vs fairsched in Flower's own simulation engine: floors met, shortfall and accuracy.

    python benchmarks/bench_flower_simulation.py [--clients 100] [--k 10] [--rounds 25] [--r 0.08]
    python -m pytest benchmarks/bench_flower_simulation.py -s

Flower's Simulation Runtime (``flwr.simulation.run_simulation``, Ray backend) runs
``--clients`` virtual SuperNodes, each the ClientApp of ``examples/flower_app`` on
partition ``partition-id`` (``40 + 20·i`` examples of a synthetic logistic regression,
features shifted by ``0.3·i``). Two ServerApps are run on the same data:

- FedAvg sampling ``fraction_train = k / clients`` nodes uniformly each round;
- ``FairschedStrategy`` around the same FedAvg: FairDG (Li, Liu & Ji, "Federated Learning
  with Fair Worker Selection: A Multi-Round Submodular Maximization Approach", 2021) with
  the accuracy utility, ``k`` workers per round, floor ``r`` for every worker, counting
  served rounds; node ids resolved by the worker-id query.

Reported: per strategy, how many clients were served in fewer than ``⌈r·T⌉`` of the ``T``
rounds (the floor), the total shortfall ``Σ_u max(0, ⌈r·T⌉ − N_u)``, the smallest
``N_u``, and the test accuracy and loss of the final model. With ``Σ_u r_u <= k`` FairDG
keeps every debt ``r·t − N_u(t)`` below 1, so every client meets its floor; uniform
sampling meets it only on average (``N_u ~ Binomial(T, k/n)``).
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from flwr.serverapp.strategy import FedAvg
from flwr.simulation import run_simulation

from fairsched.integrations.flower import FairschedStrategy, register_worker_id_query
from fairsched.problem import Problem
from fairsched.runtime.scheduler import Scheduler
from fairsched.utilities import AccuracyUtility

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "flower_app"))
from task import (
    DIM,
    load_partition,
    local_train,
    loss_and_accuracy,
    partition_size,
    test_set,
)

LOCAL_EPOCHS, LEARNING_RATE = 5, 0.5


def client_app() -> ClientApp:
    """The example's ClientApp; its train reply also names its partition (to count FedAvg's choices)."""
    app = ClientApp()
    register_worker_id_query(app, lambda context: str(context.node_config["partition-id"]))

    @app.train()
    def train(msg: Message, context: Context) -> Message:
        pid = int(context.node_config["partition-id"])
        X, y = load_partition(pid)
        received = msg.content["arrays"].to_numpy_ndarrays()[0]
        theta = local_train(received, X, y, epochs=LOCAL_EPOCHS, lr=LEARNING_RATE)
        content = RecordDict({"arrays": ArrayRecord([np.asarray(theta, dtype=received.dtype)]),
                              "metrics": MetricRecord({"num-examples": len(y), "partition": pid})})
        return Message(content=content, reply_to=msg)

    return app


class CountingFedAvg(FedAvg):
    """FedAvg that counts, per partition, the rounds whose aggregate used its update."""

    def __init__(self, clients: int, **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(**kwargs)
        self.served = np.zeros(clients, dtype=np.int64)

    def aggregate_train(self, server_round, replies):  # type: ignore[no-untyped-def]
        replies = list(replies)
        for reply in replies:
            if not reply.has_error():
                self.served[int(reply.content["metrics"]["partition"])] += 1
        return super().aggregate_train(server_round, replies)


def server_app(kind: str, clients: int, k: int, rounds: int, r: float, out: dict) -> ServerApp:
    """A ServerApp running ``kind`` ("fedavg" or "fairsched"); its results go into ``out``."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        X_test, y_test = test_set()
        inner = CountingFedAvg(clients, fraction_train=k / clients, min_train_nodes=k, fraction_evaluate=0.0,
                               min_available_nodes=clients)
        if kind == "fedavg":
            strategy = inner
        else:
            problem = Problem(AccuracyUtility([partition_size(i) for i in range(clients)]), k=k,
                              r=np.full(clients, r), ids=[str(i) for i in range(clients)])
            strategy = FairschedStrategy(Scheduler(problem, "fairdg", seed=0, count="served"), inner=inner,
                                         node_to_worker="query", min_available_nodes=clients, poll_interval=0.05,
                                         query_timeout=300)  # 100 queries through 2 Ray actors
        result = strategy.start(grid=grid, initial_arrays=ArrayRecord([np.zeros(DIM + 1)]), num_rounds=rounds,
                                timeout=600)
        loss, accuracy = loss_and_accuracy(result.arrays.to_numpy_ndarrays()[0], X_test, y_test)
        out.update(served=inner.served.copy(), accuracy=accuracy, loss=loss)

    return app


def measure(clients: int = 100, k: int = 10, rounds: int = 25, r: float = 0.08) -> dict[str, dict[str, float]]:
    """Run both strategies in the simulation engine; floors, shortfall and accuracy of each."""
    if clients * r > k:
        raise ValueError(f"the floors need {clients * r:g} > k = {k} workers per round")
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    floor = math.ceil(r * rounds - 1e-9)
    report: dict[str, dict[str, float]] = {}
    for kind in ("fedavg", "fairsched"):
        out: dict = {}
        started = time.perf_counter()
        run_simulation(server_app(kind, clients, k, rounds, r, out), client_app(), num_supernodes=clients,
                       backend_config={"client_resources": {"num_cpus": 1}, "init_args": {"num_cpus": 2}})
        if "served" not in out:
            raise RuntimeError(f"the {kind} ServerApp did not finish (see Flower's log above)")
        served = out["served"]
        report[kind] = {"below_floor": int((served < floor).sum()), "shortfall": int(np.maximum(floor - served, 0).sum()),
                        "min_served": int(served.min()), "served_total": int(served.sum()),
                        "accuracy": float(out["accuracy"]), "loss": float(out["loss"]),
                        "seconds": time.perf_counter() - started}
    report["floor"] = {"rounds": rounds, "floor": floor, "clients": clients, "k": k, "r": r}
    return report


def _print(report: dict[str, dict[str, float]]) -> None:
    f = report["floor"]
    print(f"\nFlower simulation, {f['clients']} clients, k = {f['k']}, r = {f['r']}, T = {f['rounds']} rounds "
          f"(floor: served in >= {f['floor']} rounds)")
    for kind in ("fedavg", "fairsched"):
        x = report[kind]
        print(f"  {kind:9s}: {x['below_floor']:3d} clients below the floor, shortfall {x['shortfall']:3d} rounds, "
              f"min served {x['min_served']}, test accuracy {x['accuracy']:.3f}, loss {x['loss']:.4f} "
              f"({x['seconds']:.0f} s)")


def test_fairsched_meets_every_floor_in_the_simulation_engine():
    report = measure()
    _print(report)
    assert report["fairsched"]["below_floor"] == 0, report
    assert report["fairsched"]["served_total"] == report["fedavg"]["served_total"] == 10 * 25, report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=25)
    parser.add_argument("--r", type=float, default=0.08)
    args = parser.parse_args()
    logging.getLogger("flwr").setLevel(logging.WARNING)
    result = measure(args.clients, args.k, args.rounds, args.r)
    _print(result)
    sys.exit(0 if result["fairsched"]["below_floor"] == 0 else 1)
