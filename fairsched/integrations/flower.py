"""A Flower (Message API) strategy whose training rounds are chosen by a fairsched :class:`Scheduler`.

:class:`FairschedStrategy` subclasses Flower's Message-API ``FedAvg``
(``flwr.serverapp.strategy.FedAvg``) and replaces its uniform node sampling in
``configure_train`` and its aggregation in ``aggregate_train``. In round ``t``:

1. the available workers ``A_t`` are the Flower nodes connected now
   (``grid.get_node_ids()``) that map to a worker id of the scheduler's problem
   (see *Node ids* below);
2. ``S_t = scheduler.select(·, A_t)`` and a train message goes to the nodes of ``S_t`` only;
3. the served set ``V_t ⊆ S_t`` is the nodes that replied without an error within the
   round's timeout; ``scheduler.observe(·, V_t)`` records it (whether the scheduler counts
   ``S_t`` or ``V_t`` towards the floors is its ``count`` mode);
4. the replies of ``V_t`` are averaged, ``θ_{t+1} = Σ_{i∈V_t} ω_i θ_i`` with ``Σ ω_i = 1``:

   - ``weighting="fedavg"``: ``ω_i ∝ n_i``, the ``num-examples`` a node reports;
   - ``weighting="ipw"``: ``ω_i ∝ n_i / (π_select_i · π̂_part_i)``, the Hájek form of
     FedIPW's inverse-probability weighting (Morishita, "Who Trains Matters: Federated
     Learning under Enrollment and Participation Selection Biases", 2026;
     ``docs/mathematics.md`` §11), where ``π_select_i`` is the probability that worker
     ``i`` is selected when connected and ``π̂_part_i`` the probability that it serves
     once selected. By default both are running fractions over the rounds so far, this
     one included: ``π_select_i = sel_i / present_i`` and ``π̂_part_i = served_i / sel_i``
     (so their product is the worker's served fraction of its connected rounds); either
     can be a callable ``(worker_id, server_round) -> probability in (0, 1]`` instead;

5. if ``checkpoint_path`` is set, ``scheduler.save(checkpoint_path)`` after every round,
   and if ``history_path`` is set, :attr:`FairschedStrategy.history` is rewritten there
   as JSON (with the problem, the running counts, ``scheduler.fractions()`` and
   ``debts()``). One entry per round: ``server_round``, ``scheduler_round``, ``time``
   (Unix time when the round was configured), ``connected_nodes``, ``available``,
   ``departed``, ``selected`` (``{worker_id: node_id}``), ``served``, ``failed``
   (``{worker_id: error reason}``), ``missing`` (no reply before the timeout),
   ``weights`` (``{worker_id: ω}``) and ``aggregated``. The whole file is rewritten every
   round, which suits runs of hundreds, not millions, of rounds.

Node ids
--------
Flower gives every SuperNode a fresh random 64-bit node id when it connects, so the
worker id of a node is resolved, once per node id, by ``node_to_worker``:

- ``None``: ``str(node_id)`` (the problem's ids must then be node ids);
- a mapping ``{node_id: worker_id}`` or a callable ``node_id -> worker_id | None``;
- ``"query"``: the strategy asks each new node with a ``"query.fairsched_worker_id"``
  message; a ClientApp answers after :func:`register_worker_id_query` (for example with
  its ``partition-id`` node config). A node that does not answer in ``query_timeout``
  seconds is asked again next round; one that answers with an error is never scheduled.

Nodes whose worker id is not in the problem are never scheduled. If two connected nodes
resolve to the same worker (a SuperNode reconnected before its old id expired), the most
recently resolved one is used.

Workers that drop out
---------------------
A worker that is not connected cannot be selected; with ``leave_after=None`` its floor
still counts the rounds it misses, so it is owed those selections when it returns. With
``leave_after=m`` a worker absent for ``m`` consecutive rounds is ``scheduler.leave``-d,
and ``scheduler.join``-ed when it reconnects: its floor restarts from that round.

Evaluation is FedAvg's, unchanged: a uniform ``fraction_evaluate`` of the connected nodes
(no scheduling, no waiting for nodes: ``min_evaluate_nodes`` and ``min_available_nodes``
default to 0 here).

This module imports Flower; ``import fairsched`` does not import this module.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

try:
    from flwr.app import Array, ArrayRecord, ConfigRecord, Context, Message, MessageType, MetricRecord, RecordDict
    from flwr.serverapp import Grid
    from flwr.serverapp.strategy import FedAvg
except ImportError as exc:  # pragma: no cover - exercised only without flwr
    raise ImportError("fairsched.integrations.flower needs Flower's Message API (flwr >= 1.42): "
                      "pip install 'flwr>=1.42,<1.43', or from a fairsched checkout: pip install '.[flower]'") from exc

from fairsched.atomic import atomic_write
from fairsched.runtime.scheduler import Scheduler

__all__ = ["FairschedStrategy", "NodeDirectory", "QUERY_ACTION", "QUERY_MESSAGE_TYPE", "QUERY_RECORD",
           "WEIGHTINGS", "fedavg_weights", "inverse_probability_weights", "register_worker_id_query"]

logger = logging.getLogger("flwr")

QUERY_ACTION = "fairsched_worker_id"
QUERY_MESSAGE_TYPE = f"{MessageType.QUERY}.{QUERY_ACTION}"
QUERY_RECORD = "fairsched"
WORKER_ID_KEY = "worker-id"
WEIGHTINGS = ("fedavg", "ipw")

Probability = Callable[[str, int], float]


# -------------------------------------------------------------------------------------------
# pure pieces (no Grid needed)
# -------------------------------------------------------------------------------------------
def fedavg_weights(num_examples: Iterable[float]) -> np.ndarray:
    """FedAvg's weights ``ω_i = n_i / Σ_j n_j``."""
    n = np.asarray(list(num_examples), dtype=np.float64)
    if n.size == 0:
        return n
    if not np.all(np.isfinite(n)) or np.any(n < 0) or n.sum() <= 0:
        raise ValueError(f"num-examples must be finite, >= 0 and not all 0, got {n.tolist()}")
    return n / n.sum()


def inverse_probability_weights(num_examples: Iterable[float], pi_select: Iterable[float],
                                pi_participate: Iterable[float]) -> np.ndarray:
    """Hájek inverse-probability weights ``ω_i ∝ n_i / (π_select_i · π̂_part_i)``, summing to 1.

    ``π_select_i · π̂_part_i`` is worker ``i``'s inclusion probability (selected, then
    served), so ``Σ ω_i θ_i`` estimates the ``n``-weighted average over all workers, not
    only over those that are selected and serve most often (FedIPW, Morishita 2026;
    ``docs/mathematics.md`` §11). Every probability must be in ``(0, 1]``.
    """
    n = np.asarray(list(num_examples), dtype=np.float64)
    ps = np.asarray(list(pi_select), dtype=np.float64)
    pp = np.asarray(list(pi_participate), dtype=np.float64)
    if not n.shape == ps.shape == pp.shape:
        raise ValueError(f"num-examples, pi_select and pi_participate differ in length: "
                         f"{n.size}, {ps.size}, {pp.size}")
    for name, p in (("pi_select", ps), ("pi_participate", pp)):
        if np.any(~np.isfinite(p)) or np.any(p <= 0) or np.any(p > 1):
            raise ValueError(f"{name} must be in (0, 1], got {p.tolist()}")
    return fedavg_weights(n / (ps * pp))


class NodeDirectory:
    """Flower node id → fairsched worker id, resolved once per node id and cached.

    ``lookup`` is ``None`` (``str(node_id)``), a mapping or a callable returning a worker
    id or ``None`` (not a worker). Worker ids outside ``known_ids`` resolve to ``None``.
    """

    def __init__(self, known_ids: Iterable[str],
                 lookup: Mapping[int, str] | Callable[[int], str | None] | None = None) -> None:
        self.known = frozenset(str(w) for w in known_ids)
        self.lookup = lookup
        self.worker_of: dict[int, str | None] = {}
        self._order: dict[int, int] = {}
        self._warned: set[str] = set()

    def unresolved(self, node_ids: Iterable[int]) -> list[int]:
        """The node ids not resolved yet."""
        return [int(n) for n in node_ids if int(n) not in self.worker_of]

    def record(self, node_id: int, worker_id: Any) -> None:
        """Remember that ``node_id`` is ``worker_id`` (``None``: not a worker of the problem)."""
        wid = None if worker_id is None else str(worker_id)
        if wid is not None and wid not in self.known:
            if wid not in self._warned:
                logger.warning("fairsched: node %s says it is worker %r, which is not in the problem; "
                               "it will not be scheduled", node_id, wid)
                self._warned.add(wid)
            wid = None
        self.worker_of[int(node_id)] = wid
        self._order[int(node_id)] = len(self._order)

    def resolve_local(self, node_ids: Iterable[int]) -> None:
        """Resolve new node ids through ``lookup`` (not used in ``"query"`` mode)."""
        for node_id in self.unresolved(node_ids):
            if self.lookup is None:
                self.record(node_id, str(node_id))
            elif isinstance(self.lookup, Mapping):
                self.record(node_id, self.lookup.get(node_id))
            else:
                self.record(node_id, self.lookup(node_id))

    def workers(self, node_ids: Iterable[int]) -> dict[str, int]:
        """``{worker_id: node_id}`` for the resolved ``node_ids``; the newest node wins a tie."""
        out: dict[str, int] = {}
        for node_id in sorted((int(n) for n in node_ids if self.worker_of.get(int(n)) is not None),
                              key=lambda n: self._order[n]):
            out[self.worker_of[node_id]] = node_id  # type: ignore[index]
        return out


class ParticipationCounts:
    """Per-worker running counts: rounds connected, selected and served."""

    def __init__(self, ids: Iterable[str]) -> None:
        ids = list(ids)
        self.present = dict.fromkeys(ids, 0)
        self.selected = dict.fromkeys(ids, 0)
        self.served = dict.fromkeys(ids, 0)

    def pi_select(self, worker_id: str) -> float:
        """``sel_i / present_i``: the fraction of its connected rounds ``i`` was selected in."""
        return self.selected[worker_id] / max(self.present[worker_id], 1)

    def pi_participate(self, worker_id: str) -> float:
        """``served_i / sel_i``: the fraction of its selections ``i`` served."""
        return self.served[worker_id] / max(self.selected[worker_id], 1)

    def as_dict(self) -> dict[str, dict[str, int]]:
        return {"present": dict(self.present), "selected": dict(self.selected), "served": dict(self.served)}


def register_worker_id_query(app: Any, worker_id: Callable[[Context], str]) -> None:
    """Make a ``ClientApp`` answer the strategy's worker-id query (``node_to_worker="query"``).

    ``worker_id(context)`` returns the node's fairsched worker id, for example
    ``lambda context: str(context.node_config["partition-id"])``.
    """

    @app.query(QUERY_ACTION)
    def _fairsched_worker_id(msg: Message, context: Context) -> Message:
        record = ConfigRecord({WORKER_ID_KEY: str(worker_id(context))})
        return Message(content=RecordDict({QUERY_RECORD: record}), reply_to=msg)


def _average_arrays(contents: list[RecordDict], weights: np.ndarray) -> ArrayRecord:
    """``Σ ω_i · arrays_i`` key by key (every reply carries one ArrayRecord with the same keys)."""
    total: dict[str, np.ndarray] = {}
    for content, w in zip(contents, weights):
        for record in content.array_records.values():
            for key, value in record.items():
                term = value.numpy().astype(np.float64) * w
                total[key] = total[key] + term if key in total else term
    return ArrayRecord({key: Array(np.asarray(value)) for key, value in total.items()})


# -------------------------------------------------------------------------------------------
# the strategy
# -------------------------------------------------------------------------------------------
class FairschedStrategy(FedAvg):
    """Flower ``FedAvg`` whose training nodes are chosen by a fairsched :class:`Scheduler`.

    See the module docstring for the round, the weights and the node-id resolution.

    Parameters
    ----------
    scheduler : Scheduler
        Chooses the workers; its problem's ids are the worker ids. It may be restored from
        a checkpoint: its round counter simply continues.
    node_to_worker : None, mapping, callable or ``"query"``
        How a Flower node id becomes a worker id.
    weighting : {"fedavg", "ipw"}
        ``ω_i ∝ n_i`` or ``ω_i ∝ n_i / (π_select_i · π̂_part_i)``.
    selection_probability, participation_probability : callable, optional
        ``(worker_id, server_round) -> p`` in ``(0, 1]``, replacing the running fractions
        ``π_select_i`` and ``π̂_part_i`` in the ``"ipw"`` weights.
    checkpoint_path : path, optional
        ``scheduler.save(checkpoint_path)`` after every round.
    history_path : path, optional
        Rewrite :attr:`history` (and the running counts) there as JSON after every round.
    leave_after : int, optional
        Rounds of absence after which a worker ``leave``-s (and ``join``-s on return).
    query_timeout : float
        Seconds to wait for the answers to a worker-id query.
    **fedavg_kwargs
        Passed to ``FedAvg`` (``fraction_evaluate``, ``weighted_by_key``,
        ``arrayrecord_key``, ``configrecord_key``, ``train_metrics_aggr_fn``, ...).
        ``fraction_train`` and ``min_train_nodes`` have no effect: the scheduler decides.
    """

    def __init__(self, scheduler: Scheduler, *,
                 node_to_worker: Mapping[int, str] | Callable[[int], str | None] | str | None = None,
                 weighting: str = "fedavg",
                 selection_probability: Probability | None = None,
                 participation_probability: Probability | None = None,
                 checkpoint_path: str | os.PathLike[str] | None = None,
                 history_path: str | os.PathLike[str] | None = None,
                 leave_after: int | None = None,
                 query_timeout: float = 30.0,
                 **fedavg_kwargs: Any) -> None:
        fedavg_kwargs.setdefault("min_train_nodes", 0)  # unused: the scheduler decides
        fedavg_kwargs.setdefault("min_evaluate_nodes", 0)
        fedavg_kwargs.setdefault("min_available_nodes", 0)
        super().__init__(**fedavg_kwargs)
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
        if isinstance(node_to_worker, str) and node_to_worker != "query":
            raise ValueError(f"node_to_worker must be None, a mapping, a callable or 'query', got {node_to_worker!r}")
        if leave_after is not None and int(leave_after) < 1:
            raise ValueError(f"leave_after must be a positive number of rounds, got {leave_after}")
        self.scheduler = scheduler
        self.query = node_to_worker == "query"
        self.directory = NodeDirectory(scheduler.problem.ids, None if self.query else node_to_worker)  # type: ignore[arg-type]
        self.weighting = weighting
        self.selection_probability = selection_probability
        self.participation_probability = participation_probability
        self.checkpoint_path = checkpoint_path
        self.history_path = history_path
        self.leave_after = None if leave_after is None else int(leave_after)
        self.query_timeout = float(query_timeout)
        self.counts = ParticipationCounts(scheduler.problem.ids)
        self.absent = dict.fromkeys(scheduler.problem.ids, 0)
        self.history: list[dict[str, Any]] = []
        self._pending: dict[str, Any] | None = None

    def summary(self) -> None:
        """Log the configuration."""
        problem = self.scheduler.problem
        logger.info("\t├──> fairsched: policy %s, count %r, n = %d, k = %d, r in [%.3g, %.3g]",
                    self.scheduler.policy.name, self.scheduler.count, problem.n, problem.k,
                    float(problem.r.min()), float(problem.r.max()))
        logger.info("\t├──> weighting %s, node ids %s, leave after %s rounds", self.weighting,
                    "by query" if self.query else "by mapping", self.leave_after)
        super().summary()

    # ---------------------------------------------------------------------------------------
    def _resolve(self, node_ids: list[int], grid: Grid) -> dict[str, int]:
        """``{worker_id: node_id}`` for the connected ``node_ids``, asking new nodes if in query mode."""
        if not self.query:
            self.directory.resolve_local(node_ids)
            return self.directory.workers(node_ids)
        new = self.directory.unresolved(node_ids)
        if new:
            content = RecordDict({QUERY_RECORD: ConfigRecord({"request": WORKER_ID_KEY})})
            asks = [Message(content=content, dst_node_id=node_id, message_type=QUERY_MESSAGE_TYPE)
                    for node_id in new]
            for reply in grid.send_and_receive(asks, timeout=self.query_timeout):
                node_id = int(reply.metadata.src_node_id)
                if reply.has_error():
                    logger.warning("fairsched: node %s did not answer the worker-id query (%s); "
                                   "it will not be scheduled", node_id, reply.error.reason)
                    self.directory.record(node_id, None)
                    continue
                try:
                    self.directory.record(node_id, reply.content[QUERY_RECORD][WORKER_ID_KEY])
                except (KeyError, TypeError):
                    logger.warning("fairsched: node %s answered the worker-id query without %r", node_id,
                                   WORKER_ID_KEY)
                    self.directory.record(node_id, None)
        return self.directory.workers(node_ids)

    def _update_membership(self, present: set[str]) -> None:
        for w in self.scheduler.problem.ids:
            self.absent[w] = 0 if w in present else self.absent[w] + 1
        if self.leave_after is None:
            return
        position = {w: i for i, w in enumerate(self.scheduler.problem.ids)}
        for w in self.scheduler.problem.ids:
            departed = bool(self.scheduler.departed[position[w]])
            if w in present and departed:
                self.scheduler.join(w)
            elif w not in present and not departed and self.absent[w] >= self.leave_after:
                self.scheduler.leave(w)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Ask the scheduler which connected workers train in ``server_round``; message only them."""
        started = time.time()
        node_ids = sorted(int(n) for n in grid.get_node_ids())
        node_of = self._resolve(node_ids, grid)
        present = set(node_of)
        self._update_membership(present)
        available = [w for w in self.scheduler.problem.ids if w in present]
        sched_round = self.scheduler.round + 1
        selected = self.scheduler.select(sched_round, available)
        for w in available:
            self.counts.present[w] += 1
        for w in selected:
            self.counts.selected[w] += 1
        self._pending = {"server_round": server_round, "scheduler_round": sched_round, "time": started,
                         "connected_nodes": node_ids, "available": available,
                         "selected": {w: node_of[w] for w in selected},
                         "departed": [w for w, d in zip(self.scheduler.problem.ids, self.scheduler.departed) if d]}
        logger.info("configure_train: fairsched selected %s (workers) of %d available, %d connected nodes",
                    selected, len(available), len(node_ids))
        config["server-round"] = server_round
        record = RecordDict({self.arrayrecord_key: arrays, self.configrecord_key: config})
        return [Message(content=record, dst_node_id=node_of[w], message_type=MessageType.TRAIN)
                for w in selected]

    def _ipw_probabilities(self, workers: list[str], server_round: int) -> tuple[list[float], list[float]]:
        ps = [self.selection_probability(w, server_round) if self.selection_probability
              else self.counts.pi_select(w) for w in workers]
        pp = [self.participation_probability(w, server_round) if self.participation_probability
              else self.counts.pi_participate(w) for w in workers]
        return ps, pp

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Report the nodes that replied without error to the scheduler, then average their arrays."""
        pending = self._pending
        if pending is None or pending["server_round"] != server_round:
            raise RuntimeError(f"aggregate_train: round {server_round} was not configured by this strategy")
        self._pending = None
        worker_of_node = {node: w for w, node in pending["selected"].items()}
        replies = list(replies)
        ok = [m for m in replies if not m.has_error() and int(m.metadata.src_node_id) in worker_of_node]
        failed = {worker_of_node[int(m.metadata.src_node_id)]: str(m.error.reason) for m in replies
                  if m.has_error() and int(m.metadata.src_node_id) in worker_of_node}
        served = sorted({worker_of_node[int(m.metadata.src_node_id)] for m in ok},
                        key=self.scheduler.problem.ids.index)
        self.scheduler.observe(pending["scheduler_round"], served)
        for w in served:
            self.counts.served[w] += 1
        if self.checkpoint_path is not None:
            self.scheduler.save(self.checkpoint_path)
        entry = {**pending, "served": served, "failed": failed,
                 "missing": sorted(set(pending["selected"]) - set(served) - set(failed)),
                 "weights": {}, "aggregated": False}
        self.history.append(entry)
        try:
            arrays, metrics = None, None
            ours = [m for m in replies if int(m.metadata.src_node_id) in worker_of_node]
            valid, _ = self._check_and_log_replies(ours, is_train=True)
            if valid:
                contents = [m.content for m in valid]
                workers = [worker_of_node[int(m.metadata.src_node_id)] for m in valid]
                n = [float(next(iter(c.metric_records.values()))[self.weighted_by_key]) for c in contents]
                if self.weighting == "ipw":
                    weights = inverse_probability_weights(n, *self._ipw_probabilities(workers, server_round))
                else:
                    weights = fedavg_weights(n)
                entry["weights"] = {w: float(x) for w, x in zip(workers, weights)}
                arrays = _average_arrays(contents, weights)
                metrics = self.train_metrics_aggr_fn(contents, self.weighted_by_key)
                entry["aggregated"] = True
            return arrays, metrics
        finally:
            self._write_history()

    def _write_history(self) -> None:
        if self.history_path is None:
            return
        document = {"format": "fairsched-flower-history", "version": 1,
                    "problem": {"ids": list(self.scheduler.problem.ids), "k": self.scheduler.problem.k,
                                "r": self.scheduler.problem.r.tolist()},
                    "policy": self.scheduler.policy.name, "count": self.scheduler.count,
                    "weighting": self.weighting, "leave_after": self.leave_after,
                    "scheduler_round": self.scheduler.round, "fractions": self.scheduler.fractions(),
                    "debts": self.scheduler.debts(), "counts": self.counts.as_dict(),
                    "rounds": self.history}
        with atomic_write(self.history_path) as handle:
            json.dump(document, handle, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value) if math.isfinite(value) else None
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
