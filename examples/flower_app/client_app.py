"""ClientApp: local logistic-regression training on the node's synthetic partition.

Node config (``flower-supernode --node-config '...'``):

- ``partition-id`` (int): which synthetic partition this node holds; it is also the
  node's fairsched worker id, reported to the ServerApp through the fairsched
  worker-id query (:func:`fairsched.integrations.flower.register_worker_id_query`);
- ``fail-every`` (int, optional): raise in every round divisible by it, so Flower sends
  the ServerApp an error reply: a worker that was selected but did not serve.

Run config: ``local-epochs`` and ``learning-rate``. A ``proximal-mu`` in the train config
(sent by ``FedProx``) adds FedProx's proximal term to the local loss.
"""

from __future__ import annotations

import numpy as np
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from task import load_partition, local_train, loss_and_accuracy

from fairsched.integrations.flower import register_worker_id_query

app = ClientApp()

# Answer the ServerApp's "which fairsched worker are you?" query with the partition id.
register_worker_id_query(app, lambda context: str(context.node_config["partition-id"]))


@app.train()
def train(msg: Message, context: Context) -> Message:
    """Train the received global model on the local partition; reply with θ and num-examples."""
    config = msg.content["config"]
    server_round = int(config["server-round"])
    fail_every = int(context.node_config.get("fail-every", 0))
    if fail_every and server_round % fail_every == 0:
        raise RuntimeError(f"injected failure in round {server_round}")
    X, y = load_partition(int(context.node_config["partition-id"]))
    received = msg.content["arrays"].to_numpy_ndarrays()[0]
    theta = local_train(received, X, y, epochs=int(context.run_config["local-epochs"]),
                        lr=float(context.run_config["learning-rate"]),
                        proximal_mu=float(config.get("proximal-mu", 0.0)))
    loss, accuracy = loss_and_accuracy(theta, X, y)
    content = RecordDict({"arrays": ArrayRecord([np.asarray(theta, dtype=received.dtype)]),
                          "metrics": MetricRecord({"train-loss": loss, "train-accuracy": accuracy,
                                                   "num-examples": len(y)})})
    return Message(content=content, reply_to=msg)


@app.evaluate()
def evaluate(msg: Message, context: Context) -> Message:
    """Loss and accuracy of the received model on the local partition."""
    X, y = load_partition(int(context.node_config["partition-id"]))
    loss, accuracy = loss_and_accuracy(msg.content["arrays"].to_numpy_ndarrays()[0], X, y)
    content = RecordDict({"metrics": MetricRecord({"eval-loss": loss, "eval-accuracy": accuracy,
                                                   "num-examples": len(y)})})
    return Message(content=content, reply_to=msg)
