"""A Flower (Message API) strategy whose training nodes are chosen by a fairsched :class:`Scheduler`.

:class:`FairschedStrategy` is a Flower ``Strategy`` that *wraps* another one, ``inner``
(Flower's ``FedAvg`` by default; ``FedProx``, ``FedAdam``, ``FedYogi``, the DP wrappers or
any strategy built the same way): fairsched decides who trains and with what aggregation
weights, ``inner`` configures the messages and does the server-side update. In round ``t``:

1. wait, as FedAvg does, until at least ``min_available_nodes`` connected nodes are known
   workers of the scheduler's problem and one of them may be asked (never a round on zero
   nodes); the available workers ``A_t`` are those nodes' workers, less the ones held back
   after a timeout (see *Drop-outs*);
2. ``S_t = scheduler.select(A_t)`` (``k`` workers: this replaces ``fraction_train`` and
   ``min_train_nodes``, which ``inner`` no longer applies), plus ``overcommit = m`` backups,
   the available workers with the largest debt ``r_u·t − N_u(t)``;
3. ``inner.configure_train`` builds the train messages on a view of the grid whose nodes
   are exactly those of ``S_t`` and the backups;
4. :meth:`FairschedStrategy.start` waits for every reply, for the first ``|S_t|`` results
   when over-committing, or for the timeout; the round *uses* the first ``|S_t|`` results,
   the scheduler is told ``V_t ∩ S_t`` (:meth:`Scheduler.observe`; with ``count="served"``
   only those count towards the floors);
5. the used replies, in worker order, carry fairsched's weight in their ``num-examples``
   (``weighted_by_key``) entry and go to ``inner.aggregate_train``, so model *and* train
   metrics are averaged with the chosen weighting (``flower_weights``):

   - ``"fedavg"``: ``ω_i ∝ n_i``;
   - ``"ipw"``: per-round Hájek weights ``ω_i ∝ n_i / (π_select_i · π̂_part_i)`` (FedIPW;
     Morishita, "Who Trains Matters: Federated Learning under Enrollment and
     Participation Selection Biases", 2026), running fractions or callables;
   - ``"ht"``: Horvitz–Thompson weights across rounds, ``ω_u = s_u · t / N_u(t)`` for the
     target shares ``s_u``, unnormalised: each used reply ``θ_i`` is first moved to
     ``θ_t + c_t (θ_i − θ_t)`` with ``c_t = Σ ω``, so the inner average is
     ``θ_t + Σ ω_i (θ_i − θ_t)`` (and FedAdam's pseudo-gradient that step);

6. every aggregated array is given back the dtype of the global array it replaces;
7. a JSON line is appended to ``history_path`` and the checkpoint (scheduler, counters,
   node directory, back-off states and the new global model) is rewritten atomically at
   ``checkpoint_path`` (``flower_state``); with ``resume`` a restarted ServerApp continues
   from it and makes the same decisions. When a learning policy's reward comes from the
   round's evaluation (``reward_from``), the policy learns, and this step happens, after
   that evaluation.

Evaluation is ``inner``'s on the known workers' nodes (``evaluate_nodes="workers"``; or
``"all"`` connected nodes), never on nodes held back after a timeout; a round with fewer
such nodes than ``min_evaluate_nodes`` skips its evaluation (Flower's ``sample_nodes``
would wait for them without a deadline).

Node ids
--------
A SuperNode gets a fresh random node id each time it connects; ``node_to_worker`` maps it
to a worker id, once per node id: ``None`` (``str(node_id)``), a mapping, a callable, or
``"query"`` (the node is asked; the ClientApp answers after
:func:`register_worker_id_query`). A ClientApp that cannot answer is a
:class:`WorkerIdQueryError` with the fix; a handler that fails is retried
(``query_attempts``); a node that does not answer is asked again later.

Drop-outs
---------
A node that misses the deadline of a round is not asked again until it has shown life
(it answered the message it missed or a probe) and, after its ``j``-th consecutive miss,
``min(backoff_rounds · 2^(j−1), max_backoff_rounds)`` rounds have passed; Flower drops a
node that stops sending heartbeats. So a crashed node that Flower still lists costs at
most one full timeout. ``leave_after=m``: a worker not available for ``m`` consecutive
rounds ``leave``-s, and ``join``-s when it is back (its floor restarts).

This module imports Flower; ``import fairsched`` does not import it.
"""

from __future__ import annotations

import io
import logging
import math
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

try:
    from flwr.app import (
        Array,
        ArrayRecord,
        ConfigRecord,
        Message,
        MetricRecord,
        RecordDict,
    )
    from flwr.serverapp import Grid
    from flwr.serverapp.exception import InconsistentMessageReplies
    from flwr.serverapp.strategy import FedAvg, Result, Strategy
    from flwr.serverapp.strategy.strategy_utils import log_strategy_start_info
except ImportError as exc:  # pragma: no cover - exercised only without flwr
    raise ImportError("fairsched.integrations.flower needs Flower's Message API (flwr >= 1.42): "
                      "pip install 'flwr>=1.42,<1.43', or from a fairsched checkout: pip install '.[flower]'") from exc

from fairsched.errors import CheckpointError, FairschedError
from fairsched.feedback import Feedback, is_count
from fairsched.integrations import flower_weights as _weights
from fairsched.integrations.flower_grid import Exchange, NodeSubsetGrid, exchange
from fairsched.integrations.flower_nodes import (
    LIVENESS_ERRORS,
    QUERY_ACTION,
    QUERY_MESSAGE_TYPE,
    QUERY_RECORD,
    WORKER_ID_KEY,
    NodeDirectory,
    NodeHealth,
    WorkerIdQueryError,
    query_message,
    register_worker_id_query,
)
from fairsched.integrations.flower_state import (
    HistoryWriter,
    read_checkpoint,
    read_history,
    write_checkpoint,
)
from fairsched.integrations.flower_weights import (
    ParticipationCounts,
    fedavg_weights,
    horvitz_thompson_weights,
    inverse_probability_weights,
    target_shares,
    total_variation,
)

if TYPE_CHECKING:  # the runtime (policies, LP, SciPy) is imported only by a ServerApp that has a scheduler
    from fairsched.runtime.scheduler import Scheduler

__all__ = [
    "EVALUATE_NODES",
    "QUERY_ACTION",
    "QUERY_MESSAGE_TYPE",
    "QUERY_RECORD",
    "WEIGHTINGS",
    "WORKER_ID_KEY",
    "FairschedStrategy",
    "NodeDirectory",
    "WorkerIdQueryError",
    "fedavg_weights",
    "horvitz_thompson_weights",
    "inverse_probability_weights",
    "read_checkpoint",
    "read_history",
    "register_worker_id_query",
    "target_shares",
    "total_variation",
]

logger = logging.getLogger("flwr")

WEIGHTINGS = ("fedavg", "ipw", "ht")
EVALUATE_NODES = ("workers", "all")
#: where a learning policy's set-level reward comes from (see ``FairschedStrategy``'s ``reward_from``)
REWARD_SOURCES = ("train", "evaluate", "server")
Probability = Callable[[str, int], float]
#: options a resumed run must share with the checkpoint: they change its decisions
#: attributes in which Flower's strategies keep their server-side state between rounds
_INNER_ATTRS = ("m_t", "v_t", "momentum_vector", "clipping_norm")
_DECISIVE = ("weighting", "target_shares", "leave_after", "overcommit", "backoff", "weighted_by_key",
             "reward_metric", "reward_from", "reward_change")
#: the value a checkpoint written before an option existed stands for
_OPTION_DEFAULTS = {"reward_metric": None, "reward_from": "train", "reward_change": False}


def _metric_rows(replies: Iterable[tuple[int, Message]], prefix: str = "") -> dict[int, dict[str, float]]:
    """``{worker: {prefix + metric: value}}``: the numeric entries of the replies' metric records.

    A client's non-finite value or negative count is left out (logged): one bad client must
    not stop the server, and the learner treats it as not reported.
    """
    rows: dict[int, dict[str, float]] = {}
    for w, reply in replies:
        row = rows.setdefault(w, {})
        for record in reply.content.metric_records.values():
            for key, value in record.items():
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    continue
                if not math.isfinite(value) or (is_count(key) and value < 0):
                    logger.warning("fairsched: node %s reported %s = %r; left out of the learner's feedback",
                                   reply.metadata.src_node_id, key, value)
                    continue
                row[prefix + key] = float(value)
    return rows


def _chain(strategy: Any) -> Iterator[Any]:
    """``strategy`` and the strategies it wraps (Flower's wrappers keep theirs in ``.strategy``)."""
    seen = set()
    while strategy is not None and id(strategy) not in seen:
        seen.add(id(strategy))
        yield strategy
        strategy = getattr(strategy, "strategy", None)


class NodesUnavailableError(FairschedError, TimeoutError):
    """Not enough nodes of known workers connected within ``wait_timeout`` seconds."""


class _SamplingLines(logging.Filter):
    """Rewrite FedAvg's sampling lines in ``inner.summary()``: fairsched has replaced them."""

    def __init__(self, k: str, min_available: int) -> None:
        super().__init__()
        self.k, self.min_available = k, min_available

    def filter(self, record: logging.LogRecord) -> bool:
        msg = str(record.msg)
        args = record.args if isinstance(record.args, tuple) else ()
        if "Fraction: train" in msg and len(args) == 2:
            record.msg, record.args = f"\t│\t├──Fraction: train (replaced: {self.k}) | evaluate (%.2f)", (args[1],)
        elif "Minimum nodes: train" in msg and len(args) == 2:
            record.msg, record.args = f"\t│\t├──Minimum nodes: train (replaced: {self.k}) | evaluate (%d)", (args[1],)
        elif "Minimum available nodes" in msg:
            record.msg, record.args = "\t│\t└──Minimum available nodes: %d (waited for by fairsched)", (
                self.min_available,)
        return True


class FairschedStrategy(Strategy):
    """A Flower strategy that lets a fairsched :class:`Scheduler` choose who trains, around ``inner``.

    See the module docstring for the round, the weights, node ids and drop-outs.

    Parameters
    ----------
    scheduler : Scheduler
        Chooses the workers; its problem's ids are the worker ids and its ``k`` the number
        of workers per round (replacing ``fraction_train`` and ``min_train_nodes``).
    inner : Strategy, optional
        The Flower strategy that configures the messages and aggregates (``FedAvg``,
        ``FedProx``, ``FedAdam``, ``FedYogi``, ``DifferentialPrivacy...(FedAvg(...))``, ...).
        Its node sampling is switched off (``fraction_train = 1``, ``min_train_nodes =
        min_available_nodes = 0``, logged by :meth:`summary`). Default: ``FedAvg(**fedavg_kwargs)``.
    node_to_worker : None, mapping, callable or ``"query"``
        How a Flower node id becomes a worker id.
    weighting : {"fedavg", "ipw", "ht"}
        FedAvg's ``ω ∝ n``, per-round Hájek inverse-probability weights, or Horvitz–Thompson
        weights across rounds.
    target_shares : mapping or sequence, optional
        ``s_u`` for ``"ht"`` (by worker id, or in problem order; normalised). Default:
        proportional to the ``num-examples`` the workers report.
    selection_probability, participation_probability : callable, optional
        ``(worker_id, server_round) -> p`` in ``(0, 1]`` replacing the running fractions in ``"ipw"``.
    min_available_nodes : int, optional
        Connected nodes of known workers to wait for before every round (default:
        ``inner``'s, 2 for FedAvg).
    wait_timeout : float or None
        Give up waiting for nodes after this many seconds (:class:`NodesUnavailableError`,
        a ``TimeoutError``); default one hour, ``None``: wait as long as it takes.
    overcommit : int
        ``m``: ask ``k + m`` workers, use the first ``k`` results.
    backoff_rounds, max_backoff_rounds : int
        After a node's ``j``-th consecutive timeout, it is not asked for at least
        ``min(backoff_rounds · 2^(j−1), max_backoff_rounds)`` rounds (and not before it showed life).
    evaluate_nodes : {"workers", "all"}
        Evaluate on the nodes of known workers, or on all connected nodes.
    checkpoint_path : path, optional
        Rewrite the checkpoint (scheduler, counters, node directory, back-off, model) there
        atomically after every round.
    resume : bool or "auto"
        In :meth:`start`, continue from ``checkpoint_path``: ``True`` requires it, ``"auto"``
        uses it if it exists, ``False`` starts over (overwriting it).
    history_path : path, optional
        Append one JSON line per round there (:func:`read_history` reads it back).
    leave_after : int, optional
        Rounds of unavailability after which a worker ``leave``-s (and ``join``-s on return).
    query_timeout : float
        Seconds to wait for the answers to a worker-id query.
    query_attempts : int
        Failed answers (the handler raised) tolerated per node before :class:`WorkerIdQueryError`.
    poll_interval : float
        Seconds between two pulls of replies in :meth:`start`.
    reward_metric : str, optional
        When the scheduler's policy learns the utility (:mod:`fairsched.online`), every
        numeric metric of the used train replies goes to it each round
        (:class:`~fairsched.feedback.Feedback`: ``loss``, ``num-examples``, ...), and this
        metric, taken from ``reward_from``, is the round's set-level reward.
    reward_from : {"train", "evaluate", "server"}
        ``"train"``: the ``weighted_by_key``-weighted mean of ``reward_metric`` over the
        used train replies (e.g. a validation-accuracy gain the clients report);
        ``"evaluate"``: ``reward_metric`` of ``inner.aggregate_evaluate``'s record (the
        federated evaluation of the round's new model; the evaluated workers' own metrics
        reach the policy too, named ``evaluate.<metric>``); ``"server"``: ``reward_metric`` of
        the record ``evaluate_fn`` returns in :meth:`start` (a server-side evaluation).
        With the last two the policy learns the round after its evaluation, and the
        round's history line and checkpoint are written then (so a resumed run has learned
        exactly what the original had); a round whose evaluation did not happen or lacks
        the metric teaches the policy its train metrics without a reward.
    reward_change : bool
        The reward is the change of the metric since the previous round (``"server"``:
        since the initial evaluation in round 1) instead of its value; a round after one
        without the metric has no reward.
    **fedavg_kwargs
        For the default ``FedAvg`` (``fraction_evaluate``, ``min_evaluate_nodes``,
        ``weighted_by_key``, ``arrayrecord_key``, ``configrecord_key``, ``*_metrics_aggr_fn``).
    """

    def __init__(self, scheduler: Scheduler, *, inner: Strategy | None = None,
                 node_to_worker: Mapping[int, str] | Callable[[int], str | None] | str | None = None,
                 weighting: str = "fedavg",
                 target_shares: Mapping[str, float] | Sequence[float] | None = None,
                 selection_probability: Probability | None = None,
                 participation_probability: Probability | None = None,
                 min_available_nodes: int | None = None,
                 wait_timeout: float | None = 3600.0,
                 overcommit: int = 0,
                 backoff_rounds: int = 1,
                 max_backoff_rounds: int = 32,
                 evaluate_nodes: str = "workers",
                 reward_metric: str | None = None,
                 reward_from: str = "train",
                 reward_change: bool = False,
                 checkpoint_path: str | os.PathLike[str] | None = None,
                 resume: bool | str = False,
                 history_path: str | os.PathLike[str] | None = None,
                 leave_after: int | None = None,
                 query_timeout: float = 30.0,
                 query_attempts: int = 3,
                 poll_interval: float = 0.2,
                 **fedavg_kwargs: Any) -> None:
        super().__init__()
        for replaced in ("fraction_train", "min_train_nodes"):
            if replaced in fedavg_kwargs:
                raise ValueError(f"{replaced} is replaced by the scheduler's k = {scheduler.problem.k} workers per "
                                 f"round (plus overcommit); remove it")
        if inner is not None and fedavg_kwargs:
            raise TypeError(f"pass FedAvg arguments ({', '.join(fedavg_kwargs)}) to the inner strategy, not "
                            f"to FairschedStrategy, when inner= is given")
        if weighting not in WEIGHTINGS:
            raise ValueError(f"weighting must be one of {', '.join(WEIGHTINGS)}, got {weighting!r}")
        if isinstance(node_to_worker, str) and node_to_worker != "query":
            raise ValueError(f"node_to_worker must be None, a mapping, a callable or 'query', got {node_to_worker!r}")
        if leave_after is not None and int(leave_after) < 1:
            raise ValueError(f"leave_after must be a positive number of rounds, got {leave_after}")
        if int(overcommit) < 0:
            raise ValueError(f"overcommit must be >= 0, got {overcommit}")
        if evaluate_nodes not in EVALUATE_NODES:
            raise ValueError(f"evaluate_nodes must be one of {', '.join(EVALUATE_NODES)}, got {evaluate_nodes!r}")
        if resume not in (False, True, "auto"):
            raise ValueError(f"resume must be False, True or 'auto', got {resume!r}")
        if resume and checkpoint_path is None:
            raise ValueError("resume needs a checkpoint_path")
        if reward_from not in REWARD_SOURCES:
            raise ValueError(f"reward_from must be one of {', '.join(REWARD_SOURCES)}, got {reward_from!r}")
        if reward_metric is None and (reward_from != "train" or reward_change):
            raise ValueError("reward_from and reward_change say where the reward_metric comes from: give reward_metric")
        if int(query_attempts) < 1:
            raise ValueError(f"query_attempts must be >= 1, got {query_attempts}")

        self.scheduler = scheduler
        self.problem = scheduler.problem
        self.engine = scheduler.engine  # by worker index: the strategy keeps its own ids -> index maps
        self.inner: Strategy = inner if inner is not None else FedAvg(**fedavg_kwargs)
        self._samplers = [s for s in _chain(self.inner) if hasattr(s, "fraction_train")]
        self.replaced = [(type(s).__name__, float(s.fraction_train), int(s.min_train_nodes)) for s in self._samplers]
        inner_min = int(getattr(self._samplers[0], "min_available_nodes", 0)) if self._samplers else 0
        for s in self._samplers:
            s.fraction_train, s.min_train_nodes = 1.0, 0
            if hasattr(s, "min_available_nodes"):
                s.min_available_nodes = 0
        for name, fraction, _ in self.replaced:
            if fraction != 1.0:
                logger.warning("fairsched: %s's fraction_train = %s is replaced by the scheduler's k = %d",
                               name, fraction, self.problem.k)
        self.min_available_nodes = inner_min if min_available_nodes is None else int(min_available_nodes)
        keyed = next((s for s in _chain(self.inner) if hasattr(s, "weighted_by_key")), None)
        self.weighted_by_key = getattr(keyed, "weighted_by_key", "num-examples")
        self.arrayrecord_key = getattr(keyed, "arrayrecord_key", "arrays")
        self.configrecord_key = getattr(keyed, "configrecord_key", "config")

        self.query = node_to_worker == "query"
        self.directory = NodeDirectory(self.problem.ids, None if self.query else node_to_worker)  # type: ignore[arg-type]
        self.health = NodeHealth(backoff_rounds, max_backoff_rounds)
        self.counts = ParticipationCounts(self.problem.n)
        self.weighting = weighting
        self._fixed_shares = None if target_shares is None else _weights.target_shares(self.problem.ids,
                                                                                        target_shares)
        self.selection_probability = selection_probability
        self.participation_probability = participation_probability
        self.wait_timeout = wait_timeout
        self.overcommit = int(overcommit)
        self.evaluate_nodes = evaluate_nodes
        self.reward_metric = reward_metric
        self.reward_from = reward_from
        self.reward_change = bool(reward_change)
        self.checkpoint_path = checkpoint_path
        self.resume = resume
        self.history_path = history_path
        self.leave_after = None if leave_after is None else int(leave_after)
        self.query_timeout = float(query_timeout)
        self.query_attempts = int(query_attempts)
        self.poll_interval = float(poll_interval)

        self.rounds_run = 0                       # rounds aggregated by this strategy (resumed ones included)
        self.history: list[dict[str, Any]] = []   # the round lines, as written
        self._history: HistoryWriter | None = None
        self._history_offset: int | None = None
        self._last: dict[str, Any] | None = None  # the previous round's lists, for the diffs
        self._pending: dict[str, Any] | None = None
        self._evaluating: dict[str, Any] | None = None
        #: a round whose learning waits for its evaluation: ``served``, ``feedback`` and the history line
        self._learning: dict[str, Any] | None = None
        self._reward_before: float | None = None  # the reward metric's previous value (``reward_change``)
        self._reward_warned = False
        self._global: ArrayRecord | None = None
        self._model: ArrayRecord | None = None
        self._fingerprint: str | None = None
        self._fast_state = False
        #: seconds spent in the last round: ``configure`` / ``aggregate`` (all of it), ``inner_*`` (the
        #: inner strategy's part), ``files`` (history line and checkpoint)
        self.timings: dict[str, float] = {}

    # ---------------------------------------------------------------------------------------
    # reporting
    # ---------------------------------------------------------------------------------------
    def summary(self) -> None:
        """Log the configuration: fairsched's, then ``inner``'s with its replaced sampling lines marked."""
        p = self.problem
        k = f"fairsched's k = {p.k}" + (f" + {self.overcommit}" if self.overcommit else "")
        logger.info("\t├──> fairsched: policy %s, count %r, n = %d workers, k = %d per round, r in [%.3g, %.3g]",
                    self.scheduler.policy.name, self.scheduler.count, p.n, p.k, float(p.r.min()), float(p.r.max()))
        for name, fraction, minimum in self.replaced:
            logger.info("\t│\t├── replaces %s's fraction_train (%.2f) and min_train_nodes (%d) by %s",
                        name, fraction, minimum, k)
        logger.info("\t│\t├── waits for %d available nodes; over-commit %d; back-off %d..%d rounds",
                    self.min_available_nodes, self.overcommit, self.health.base, self.health.cap)
        logger.info("\t│\t├── weighting %s, node ids %s, leave after %s rounds, evaluation on %s nodes",
                    self.weighting, "by query" if self.query else "by mapping", self.leave_after,
                    self.evaluate_nodes)
        logger.info("\t│\t└── checkpoint %s (resume %s), history %s", self.checkpoint_path, self.resume,
                    self.history_path)
        logger.info("\t├──> inner strategy %s:", type(self.inner).__name__)
        rewrite = _SamplingLines(k, self.min_available_nodes)
        logger.addFilter(rewrite)
        try:
            self.inner.summary()
        finally:
            logger.removeFilter(rewrite)

    def shares(self) -> np.ndarray:
        """The target shares ``s_u`` of the ``"ht"`` weights (and of :meth:`total_variation`)."""
        if self._fixed_shares is not None:
            return self._fixed_shares
        return target_shares(self.problem.ids, None, self.counts.sizes)

    def total_variation(self) -> float:
        """TV distance between the aggregation weight summed over the run and the target shares."""
        return total_variation(self.counts.weight, self.shares())

    # ---------------------------------------------------------------------------------------
    # nodes
    # ---------------------------------------------------------------------------------------
    def _resolve(self, nodes: list[int], grid: Grid) -> None:
        if not self.query:
            self.directory.resolve_local(nodes)
            return
        late = self.directory.outstanding()
        if late:  # answers to queries that missed their deadline: a slow first start, not a failure
            for reply in grid.pull_messages(list(late)):
                v = late.get(reply.metadata.reply_to_message_id)
                if v is not None and v not in self.directory.index:
                    self.directory.answered(v, reply, self.query_attempts)
        due = self.directory.due(nodes, time.monotonic())
        if not due:
            return
        asks = [query_message(v) for v in due]
        done = exchange(grid, asks, self.query_timeout, poll_interval=self.poll_interval)
        node_of = {m.metadata.message_id: int(m.metadata.dst_node_id) for m in asks}
        for m in asks:
            if m.metadata.message_id:
                self.directory.asked(int(m.metadata.dst_node_id), m.metadata.message_id)
        answered = set()
        for reply in done.replies:
            v = node_of.get(reply.metadata.reply_to_message_id)
            if v is not None and v not in answered:
                answered.add(v)
                self.directory.answered(v, reply, self.query_attempts)
        now = time.monotonic()
        for v in due:
            if v not in answered:
                logger.warning("fairsched: node %s did not answer the worker-id query in %.0f s; asking again later",
                               v, self.query_timeout)
                self.directory.silent(v, now, self.query_timeout)

    def _poll_life(self, grid: Grid, connected: set[int]) -> None:
        """Collect the answers that show life, and probe the suspects with no probe outstanding (no waiting)."""
        if not self.health.suspects:
            return
        outstanding = self.health.outstanding()
        if outstanding:
            for reply in grid.pull_messages(list(outstanding)):
                mid = reply.metadata.reply_to_message_id
                if mid in outstanding:
                    lost = reply.has_error() and int(reply.error.code) in LIVENESS_ERRORS
                    self.health.signal(outstanding[mid], mid, shows_life=not lost)
        probes = [query_message(v) for v in self.health.need_probe(v for v in self.health.suspects if v in connected)]
        if probes:
            for probe, mid in zip(probes, grid.push_messages(probes)):
                if mid:
                    self.health.probed(int(probe.metadata.dst_node_id), mid)
        self.health.forget(connected)

    def _ready(self, grid: Grid, server_round: int) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
        """Wait until a round can run: ``(nodes, node_of_worker, present, available)``."""
        started = time.monotonic()
        said = -1.0
        while True:
            nodes = list(grid.get_node_ids())
            self._resolve(nodes, grid)
            self._poll_life(grid, set(nodes) if self.health.suspects else set())
            node_of, present = self.directory.map(nodes, self.problem.n)
            available = present
            blocked = self._blocked_workers(node_of, server_round)
            if blocked.size:
                available = present.copy()
                available[blocked] = False
            askable = available if self.leave_after is not None else available & ~self.engine.departed
            if int(present.sum()) >= self.min_available_nodes and askable.any():
                return nodes, node_of, present, available
            waited = time.monotonic() - started
            if self.wait_timeout is not None and waited >= self.wait_timeout:
                raise NodesUnavailableError(
                    f"fairsched: round {server_round} cannot start after {waited:.0f} s: {int(present.sum())} "
                    f"connected nodes are workers of the problem (min_available_nodes = {self.min_available_nodes}), "
                    f"{int(askable.sum())} of them may be asked; start more SuperNodes, lower min_available_nodes, "
                    f"or raise wait_timeout (None: no limit)")
            if waited - said >= 10.0 or said < 0:
                said = waited
                logger.info("Waiting for nodes: %d of %d connected nodes are workers of the problem, %d may be "
                            "asked (minimum required: %d, and one to ask).", int(present.sum()), len(nodes),
                            int(askable.sum()), self.min_available_nodes)
            time.sleep(1.0)

    def _blocked_workers(self, node_of: np.ndarray, server_round: int) -> np.ndarray:
        """Workers whose connected node may not be asked in ``server_round`` (held back after a timeout)."""
        if not self.health.suspects:
            return np.empty(0, dtype=np.int64)
        out = []
        for v in self.health.blocked(self.health.suspects, server_round):
            w = self.directory.index.get(v, -1)
            if w >= 0 and int(node_of[w]) == v:
                out.append(w)
        return np.array(sorted(out), dtype=np.int64)

    def _update_membership(self, available: np.ndarray) -> None:
        c = self.counts
        c.absent = np.where(available, 0, c.absent + 1)
        if self.leave_after is None:
            return
        departed = self.engine.departed
        back = np.flatnonzero(available & departed)
        gone = np.flatnonzero(~available & ~departed & (c.absent >= self.leave_after))
        if back.size:
            self.engine.join(back)
        if gone.size:
            self.engine.leave(gone)

    def _backups(self, available: np.ndarray, selected: np.ndarray) -> np.ndarray:
        """The ``overcommit`` available, unselected workers under their caps with the largest debt (sorted)."""
        if not self.overcommit:
            return np.empty(0, dtype=np.int64)
        candidates = available & ~self.engine.departed & ~self.engine.policy.capped()
        candidates[selected] = False
        m = min(self.overcommit, int(candidates.sum()))
        if m == 0:
            return np.empty(0, dtype=np.int64)
        score = np.where(candidates, self.engine.debts(), -np.inf)
        return np.sort(np.argpartition(-score, m - 1)[:m]).astype(np.int64)

    # ---------------------------------------------------------------------------------------
    # training
    # ---------------------------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Choose ``S_t`` (and the backups) among the available workers; ``inner`` builds their messages."""
        self._learn_without_reward()
        started, clock = time.time(), time.perf_counter()
        if self.engine.pending is not None:
            raise FairschedError(f"configure_train: scheduler round {self.engine.round + 1} was selected but "
                                 f"never aggregated")
        self._global = arrays
        nodes, node_of, _, available = self._ready(grid, server_round)
        self.directory.compact(nodes)
        self._update_membership(available)
        selected = self.engine.select(available)
        backups = self._backups(available, selected)
        asked = np.concatenate([selected, backups])
        self.counts.present += available
        self.counts.asked[asked] += 1
        targets = [int(v) for v in node_of[asked]]
        view = NodeSubsetGrid(grid, lambda: targets)
        inner_started = time.perf_counter()
        messages = list(self.inner.configure_train(server_round, arrays, config, view))
        self.timings = {"configure": 0.0, "inner_configure": time.perf_counter() - inner_started}
        sent = sorted(int(m.metadata.dst_node_id) for m in messages)
        if sent != sorted(targets):
            raise FairschedError(f"{type(self.inner).__name__}.configure_train sent train messages to nodes {sent} "
                                 f"instead of the {len(targets)} nodes fairsched chose {sorted(targets)}: an inner "
                                 f"strategy must sample every node of the grid it is given")
        worker_of_node = dict(zip(targets, asked.tolist()))
        ids = self.problem.ids
        self._pending = {
            "server_round": server_round, "scheduler_round": self.engine.round + 1, "time": started,
            "nodes": nodes, "connected": self.directory.connected, "available": available.copy(), "departed": self.engine.departed.copy(),
            "suspects": [ids[w] for w in self._blocked_workers(node_of, server_round).tolist()],
            "selected": selected, "backups": backups, "messages": messages,
            "worker_of_node": worker_of_node, "exchange": None,
        }
        self.timings["configure"] = time.perf_counter() - clock
        logger.info("configure_train: fairsched selected %s%s (workers) of %d available, %d connected nodes",
                    [ids[w] for w in selected], f" + backups {[ids[w] for w in backups]}" if backups.size else "",
                    int(available.sum()), len(nodes))
        return messages

    def _weights(self, workers: np.ndarray, contents: list[RecordDict], server_round: int) -> tuple[np.ndarray, float]:
        """``(ω normalised within the round, c_t)``; ``c_t = Σ ω`` before normalisation (1 but for ``"ht"``)."""
        n = np.array([self._weight_of(c) for c in contents])
        self.counts.sizes[workers] = n
        if self.weighting == "fedavg":
            return fedavg_weights(n), 1.0
        if self.weighting == "ipw":
            ids = self.problem.ids
            ps = ([self.selection_probability(ids[w], server_round) for w in workers] if self.selection_probability
                  else self.counts.pi_select(workers))
            pp = ([self.participation_probability(ids[w], server_round) for w in workers]
                  if self.participation_probability else self.counts.pi_participate(workers))
            return inverse_probability_weights(n, ps, pp), 1.0
        raw = horvitz_thompson_weights(self.shares()[workers], self.counts.used[workers], self.rounds_run)
        step = float(raw.sum())
        if step <= 0:
            raise ValueError("every worker used this round has target share 0: the round would not move the model")
        return raw / step, step

    def _weight_of(self, content: RecordDict) -> float:
        """The ``weighted_by_key`` value of a reply (its only MetricRecord), as FedAvg's checks require."""
        records = [r for r in content.values() if isinstance(r, MetricRecord)]
        value = records[0].get(self.weighted_by_key) if len(records) == 1 else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InconsistentMessageReplies(reason=f"Expected exactly one MetricRecord with a numeric "
                                                    f"`{self.weighted_by_key}` in every reply. Skipping aggregation.")
        return float(value)

    def _set_weight(self, content: RecordDict, value: float) -> None:
        next(r for r in content.values() if isinstance(r, MetricRecord))[self.weighted_by_key] = value

    def _stretch(self, contents: list[RecordDict], step: float) -> None:
        """``θ_i ← θ_t + c_t (θ_i − θ_t)`` in every used reply, so the inner average takes the step ``c_t``."""
        if step == 1.0 or self._global is None:
            return
        base = {key: value.numpy() for key, value in self._global.items()}
        for content in contents:
            for name, record in [(key, r) for key, r in content.items() if isinstance(r, ArrayRecord)]:
                out = ArrayRecord()
                for key, value in record.items():
                    x = value.numpy()
                    if key in base and np.issubdtype(x.dtype, np.floating) and x.shape == base[key].shape:
                        x = (base[key] + step * (x.astype(np.float64) - base[key])).astype(x.dtype)
                    out[key] = Array(np.asarray(x))
                content[name] = out

    def _keep_dtypes(self, arrays: ArrayRecord | None) -> ArrayRecord | None:
        """Give every aggregated array the dtype of the global array it replaces (inner strategies promote)."""
        if arrays is None or self._global is None:
            return arrays
        ref = self._global
        if all(key not in ref or (value.dtype == ref[key].dtype) for key, value in arrays.items()):
            return arrays
        out = ArrayRecord()
        for key, value in arrays.items():
            if key in ref and value.dtype != ref[key].dtype and tuple(value.shape) == tuple(ref[key].shape):
                target = np.dtype(ref[key].dtype)
                x = value.numpy()
                x = np.rint(x) if np.issubdtype(target, np.integer) and not np.issubdtype(x.dtype, np.integer) else x
                out[key] = Array(np.asarray(x.astype(target)))
            else:
                out[key] = value
        return out

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """Use the first ``|S_t|`` results, report them to the scheduler, aggregate them through ``inner``."""
        clock = time.perf_counter()
        self.timings["aggregate_started"] = clock
        pending = self._pending
        if pending is None or pending["server_round"] != server_round:
            raise FairschedError(f"aggregate_train: round {server_round} was not configured by this strategy")
        self._pending = None
        ids = self.problem.ids
        ex: Exchange | None = pending["exchange"]
        by_message = {m.metadata.message_id: int(m.metadata.dst_node_id) for m in pending["messages"]
                      if m.metadata.message_id}
        worker_of_node: dict[int, int] = pending["worker_of_node"]
        need = int(pending["selected"].size)
        used: list[tuple[int, Message]] = []
        failed: dict[str, str] = {}
        lost: dict[str, str] = {}
        surplus: list[str] = []
        seen: set[int] = set()
        for reply in replies:
            node = by_message.get(reply.metadata.reply_to_message_id, int(reply.metadata.src_node_id))
            w = worker_of_node.get(node)
            if w is None or node in seen:
                continue
            seen.add(node)
            if reply.has_error():
                if int(reply.error.code) in LIVENESS_ERRORS:
                    lost[ids[w]] = str(reply.error.reason)
                    self.health.timed_out(node, server_round, None)
                else:
                    failed[ids[w]] = str(reply.error.reason)
                    self.health.answered(node)
            else:
                self.health.answered(node)
                if len(used) < need:
                    used.append((w, reply))
                else:
                    surplus.append(ids[w])
        unpushed = {int(m.metadata.dst_node_id) for m in ex.unpushed} if ex is not None else set()
        missing = []
        for m in pending["messages"]:
            node = int(m.metadata.dst_node_id)
            if node in seen:
                continue
            w = worker_of_node[node]
            if node in unpushed:
                failed[ids[w]] = "not accepted by the SuperLink"
                continue
            missing.append(ids[w])
            if ex is not None and ex.stopped_early:
                self.health.busy(node, server_round, m.metadata.message_id or None)
            else:
                strikes = self.health.timed_out(node, server_round, m.metadata.message_id or None)
                logger.info("fairsched: worker %s (node %s) missed the deadline of round %d (%d in a row): not "
                            "asked again before it shows life", ids[w], node, server_round, strikes)

        used.sort(key=lambda item: item[0])
        workers = np.array([w for w, _ in used], dtype=np.int64)
        selected = set(pending["selected"].tolist())
        served = np.array([w for w in workers.tolist() if w in selected], dtype=np.int64)
        rows = self._learning_rows(used)
        waits = rows is not None and self.reward_from != "train"
        feedback = None if rows is None or waits else self._feedback(rows)
        self.engine.observe(served, feedback)
        self.counts.used[workers] += 1
        self.rounds_run += 1

        contents = [reply.content for _, reply in used]
        weights, step = np.empty(0), 1.0
        if used:
            weights, step = self._weights(workers, contents, server_round)
            self.counts.weight[workers] += weights * step
            if self.weighting != "fedavg":
                total = float(np.nansum(self.counts.sizes[workers]))
                for content, w in zip(contents, weights):
                    self._set_weight(content, float(w * total))
            self._stretch(contents, step)
        inner_started = time.perf_counter()
        arrays, metrics = self.inner.aggregate_train(server_round, [reply for _, reply in used])
        self.timings["inner_aggregate"] = time.perf_counter() - inner_started
        arrays = self._keep_dtypes(arrays)
        self._model = arrays if arrays is not None else self._global

        entry = self._round_line(pending, served, workers, weights, step, failed, lost, missing, surplus,
                                 arrays is not None, ex)
        t = self.timings
        entry["overhead_ms"] = round(1e3 * (t["configure"] - t["inner_configure"] + time.perf_counter()
                                             - t["aggregate_started"] - t["inner_aggregate"]), 3)
        if waits:
            self._learning = {"server_round": server_round, "served": served, "rows": rows, "entry": entry}
        else:
            if feedback is not None:
                entry["reward"] = feedback.reward
            self._record(entry)
        self.timings["aggregate"] = time.perf_counter() - clock
        return arrays, metrics

    # ---------------------------------------------------------------------------------------
    # evaluation
    # ---------------------------------------------------------------------------------------
    def _evaluation_nodes(self, grid: Grid, server_round: int) -> list[int]:
        """The nodes ``inner`` may evaluate on: known workers' (or all) connected nodes, less the suspects."""
        nodes = list(grid.get_node_ids())
        if self.evaluate_nodes == "workers":
            self._resolve(nodes, grid)
            node_of, present = self.directory.map(nodes, self.problem.n)
            nodes = [int(v) for v in node_of[present]]
        blocked = self.health.blocked(self.health.suspects, server_round + 1)
        return [v for v in nodes if v not in blocked] if blocked else nodes

    def _evaluation_minimum(self) -> int:
        """The fewest nodes ``inner``'s node sampling insists on for an evaluation (it waits for them)."""
        return max([int(getattr(s, "min_evaluate_nodes", 0)) for s in self._samplers
                    if float(getattr(s, "fraction_evaluate", 0.0)) > 0.0] or [0])

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        """``inner``'s evaluation, sampled among the known workers' nodes (or all nodes), never suspects.

        Flower's ``sample_nodes`` waits, without a deadline, for ``min_evaluate_nodes``
        nodes; when fewer may be evaluated on, the round's evaluation is skipped (logged)
        instead, so a round never blocks on nodes that are not there.
        """
        nodes = self._evaluation_nodes(grid, server_round)
        minimum = self._evaluation_minimum()
        self._evaluating = None
        if len(nodes) < minimum:
            logger.warning("fairsched: round %d's evaluation skipped: %d nodes may be evaluated on (%s), "
                           "min_evaluate_nodes = %d", server_round, len(nodes), self.evaluate_nodes, minimum)
            return []
        view = NodeSubsetGrid(grid, lambda: nodes)
        messages = list(self.inner.configure_evaluate(server_round, arrays, config, view))
        self._evaluating = {"server_round": server_round, "messages": messages, "exchange": None}
        return messages

    def _learning_rows(self, used: list[tuple[int, Message]]) -> dict[int, dict[str, float]] | None:
        """The used train replies' numeric metrics by worker, when the policy learns (else ``None``)."""
        from fairsched.policies.base import Policy  # not at import: the ClientApp side stays light

        if type(self.engine.policy).learn is Policy.learn or not used:
            return None
        return _metric_rows(used)

    def _feedback(self, rows: dict[int, dict[str, float]]) -> Feedback:
        """The train metrics ``rows`` (and, with ``reward_from="train"``, the reward metric's
        weighted mean as the reward), for a policy that learns."""
        feedback = Feedback.from_rows(None, rows)
        if self.reward_from != "train" or self.reward_metric is None:
            return feedback
        value = None
        workers, values = feedback.metric(self.reward_metric)
        if values.size:
            sizes = feedback.metrics.get(self.weighted_by_key, np.ones(feedback.workers.size))
            sizes = sizes[np.isin(feedback.workers, workers)]
            keep = np.isfinite(sizes) & (sizes > 0)
            if keep.any():
                value = float(np.average(values[keep], weights=sizes[keep]))
        return replace(feedback, reward=self._reward(value))

    def _reward(self, value: float | None) -> float | None:
        """The round's reward from the reward metric's ``value`` (its change with ``reward_change``)."""
        if value is None and not self._reward_warned:
            self._reward_warned = True
            logger.warning("fairsched: round without %s in its %s metrics: the learning policy gets no reward for "
                           "it (warned once)", self.reward_metric, self.reward_from)
        if not self.reward_change:
            return value
        before, self._reward_before = self._reward_before, value
        return None if value is None or before is None else value - before

    def _metric_value(self, record: MetricRecord | None) -> float | None:
        """``reward_metric``'s finite numeric value in ``record``, or ``None``."""
        value = None if record is None else record.get(self.reward_metric)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            return None
        return float(value)

    def _learn(self, server_round: int, record: MetricRecord | None,
               evaluated: list[tuple[int, Message]] | None = None) -> None:
        """The waiting round learns, with the reward from its evaluation ``record`` (and the
        ``evaluated`` workers' replies' metrics, named ``evaluate.<metric>``), and is recorded."""
        waiting, self._learning = self._learning, None
        if waiting is None:
            return
        if waiting["server_round"] != server_round:
            raise FairschedError(f"round {server_round}'s evaluation arrived while round {waiting['server_round']} "
                                 f"waits for its own")
        rows = waiting["rows"]
        for w, row in _metric_rows(evaluated or [], prefix="evaluate.").items():
            rows.setdefault(w, {}).update(row)
        reward = self._reward(self._metric_value(record))
        self.engine.learn(waiting["served"], Feedback.from_rows(reward, rows))
        waiting["entry"]["reward"] = reward
        self._record(waiting["entry"])

    def _learn_without_reward(self) -> None:
        """A round still waiting for its evaluation (none came) learns without a reward."""
        if self._learning is not None:
            self._learn(self._learning["server_round"], None)

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        """``inner``'s aggregation; nodes that missed the evaluation deadline are held back like in training."""
        replies = list(replies)
        pending, self._evaluating = self._evaluating, None
        if pending is not None and pending["server_round"] == server_round:
            answered = {r.metadata.reply_to_message_id for r in replies
                        if not (r.has_error() and int(r.error.code) in LIVENESS_ERRORS)}
            ex: Exchange | None = pending["exchange"]
            for m in pending["messages"]:
                node = int(m.metadata.dst_node_id)
                if m.metadata.message_id in answered:
                    self.health.answered(node)
                elif ex is None or not ex.stopped_early:
                    self.health.timed_out(node, server_round, m.metadata.message_id or None)
        aggregated = self.inner.aggregate_evaluate(server_round, replies)
        if self.reward_from == "evaluate":
            worker_of = self.directory.index
            evaluated = [(worker_of[int(r.metadata.src_node_id)], r) for r in replies
                         if not r.has_error() and worker_of.get(int(r.metadata.src_node_id), -1) >= 0]
            self._learn(server_round, aggregated, evaluated)
        return aggregated

    # ---------------------------------------------------------------------------------------
    # history and checkpoint
    # ---------------------------------------------------------------------------------------
    def _options(self) -> dict[str, Any]:
        return {"policy": self.scheduler.policy.name, "count": self.scheduler.count, "weighting": self.weighting,
                "target_shares": None if self._fixed_shares is None else self._fixed_shares.tolist(),
                "leave_after": self.leave_after, "overcommit": self.overcommit,
                "backoff": [self.health.base, self.health.cap], "weighted_by_key": self.weighted_by_key,
                "reward_metric": self.reward_metric, "reward_from": self.reward_from,
                "reward_change": self.reward_change,
                "inner": type(self.inner).__name__, "n": self.problem.n, "k": self.problem.k}

    def _header(self) -> dict[str, Any]:
        p = self.problem
        return {"problem": {"ids": list(p.ids), "k": p.k, "r": p.r.tolist()}, **self._options(),
                "min_available_nodes": self.min_available_nodes, "time": time.time()}

    def _open_history(self, resumed: bool) -> None:
        if self.history_path is None or self._history is not None:
            return
        self._history = HistoryWriter(self.history_path, self._header(),
                                      self._history_offset if resumed else None)
        if resumed:
            if not self._history.continued:
                logger.warning("fairsched: %s is shorter than the checkpoint says; it starts over here",
                               self.history_path)
            self._history.append({"type": "resume", "server_round": self.rounds_run + 1, "time": time.time()})
        self._last = None

    def _round_line(self, pending: dict[str, Any], served: np.ndarray, workers: np.ndarray, weights: np.ndarray,
                    step: float, failed: dict[str, str], lost: dict[str, str], missing: list[str],
                    surplus: list[str], aggregated: bool, ex: Exchange | None) -> dict[str, Any]:
        ids = self.problem.ids
        node_of = {w: v for v, w in pending["worker_of_node"].items()}
        entry: dict[str, Any] = {"type": "round", "server_round": pending["server_round"],
                                 "scheduler_round": pending["scheduler_round"], "time": pending["time"],
                                 "n_connected": len(pending["nodes"]), "n_available": int(pending["available"].sum())}
        last = self._last
        nodes = pending["nodes"]
        if last is None:
            entry["connected_nodes"] = nodes
        elif last["connected_nodes"] != nodes:  # unchanged, the common case, costs one comparison
            now, before = pending["connected"], last["connected"]
            added = now[~np.isin(now, before, assume_unique=True)]
            removed = before[~np.isin(before, now, assume_unique=True)]
            if added.size:
                entry["connected_nodes_added"] = [int(v) for v in added]
            if removed.size:
                entry["connected_nodes_removed"] = [int(v) for v in removed]
        mask_now = {"available": pending["available"], "departed": pending["departed"]}
        for key, mask in mask_now.items():
            prev = None if last is None else last.get(f"{key}_mask")
            if prev is None:
                entry[key] = [ids[w] for w in np.flatnonzero(mask)]
            else:
                changed = np.flatnonzero(mask != prev)
                added = [ids[w] for w in changed if mask[w]]
                removed = [ids[w] for w in changed if not mask[w]]
                if added:
                    entry[f"{key}_added"] = added
                if removed:
                    entry[f"{key}_removed"] = removed
        entry.update({
            "suspects": pending["suspects"],
            "selected": {ids[w]: node_of[w] for w in pending["selected"].tolist()},
            "backups": {ids[w]: node_of[w] for w in pending["backups"].tolist()},
            "served": [ids[w] for w in served.tolist()], "used": [ids[w] for w in workers.tolist()],
            "failed": failed, "lost": lost, "missing": missing, "surplus": surplus,
            "weights": {ids[w]: float(x) for w, x in zip(workers.tolist(), weights.tolist())},
            "step": step, "aggregated": aggregated,
            "wait_seconds": None if ex is None else round(ex.seconds, 3),
            "timed_out": None if ex is None else ex.timed_out,
            "stopped_early": None if ex is None else ex.stopped_early,
        })
        self._last = {"connected_nodes": nodes, "connected": pending["connected"], "available_mask": pending["available"],
                      "departed_mask": pending["departed"]}
        return entry

    def _record(self, entry: dict[str, Any]) -> None:
        """Append the round line, then rewrite the checkpoint (which records the history's length)."""
        t = self.timings
        self.history.append(entry)
        written = time.perf_counter()
        if self.history_path is not None:
            self._open_history(resumed=False)
            assert self._history is not None
            self._history_offset = self._history.append(entry)
        if self.checkpoint_path is not None:
            self.save_checkpoint(self.checkpoint_path, entry["server_round"])
        t["files"] = time.perf_counter() - written

    def _scheduler_state(self) -> dict[str, Any]:
        """The scheduler's state document; its problem fingerprint (O(n) JSON + SHA-256) computed once."""
        if self._fingerprint is None:
            full = self.scheduler.state_dict()
            self._fingerprint = full["problem"]
            self._fast_state = self._state_with_fingerprint() == full
            return full
        return self._state_with_fingerprint() if self._fast_state else self.scheduler.state_dict()

    def _state_with_fingerprint(self) -> dict[str, Any]:
        from fairsched.runtime.engine import STATE_FORMAT
        from fairsched.runtime.state import STATE_VERSION

        e = self.engine
        return {"format": STATE_FORMAT, "version": STATE_VERSION, "problem": self._fingerprint, "seed": e.seed,
                "count": e.count, "round": e.round, "pending": None if e.pending is None else e.pending.tolist(),
                "departed": np.flatnonzero(e.departed).tolist(), "policy": e.policy.state_dict()}

    def _inner_state(self) -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
        """The server-side state of ``inner`` (and the strategies it wraps), JSON and arrays.

        Flower keeps it in attributes: the FedOpt family's moments ``m_t`` / ``v_t``,
        FedAvgM's ``momentum_vector``, adaptive clipping's ``clipping_norm``. A strategy with
        ``state_dict()`` / ``load_state_dict(state)`` (JSON) is saved through those instead.
        """
        described: list[dict[str, Any]] = []
        arrays: dict[str, np.ndarray] = {}
        for depth, s in enumerate(_chain(self.inner)):
            entry: dict[str, Any] = {"class": type(s).__name__, "attrs": {}}
            if callable(getattr(s, "state_dict", None)) and callable(getattr(s, "load_state_dict", None)):
                entry["custom"] = s.state_dict()
            for attr in _INNER_ATTRS:
                if not hasattr(s, attr):
                    continue
                value = getattr(s, attr)
                if value is None:
                    entry["attrs"][attr] = {"kind": "none"}
                elif isinstance(value, (int, float)):
                    entry["attrs"][attr] = {"kind": "float", "value": float(value)}
                elif isinstance(value, dict):
                    entry["attrs"][attr] = {"kind": "dict", "keys": list(value)}
                    for i, v in enumerate(value.values()):
                        arrays[f"inner.{depth}.{attr}.{i}"] = np.asarray(v)
                elif isinstance(value, (list, tuple)):
                    entry["attrs"][attr] = {"kind": "list", "length": len(value)}
                    for i, v in enumerate(value):
                        arrays[f"inner.{depth}.{attr}.{i}"] = np.asarray(v)
            described.append(entry)
        return described, arrays

    def _load_inner_state(self, described: list[dict[str, Any]], arrays: dict[str, np.ndarray]) -> None:
        chain = list(_chain(self.inner))
        if [e["class"] for e in described] != [type(s).__name__ for s in chain]:
            raise CheckpointError(f"the checkpoint's inner strategies are {[e['class'] for e in described]}, "
                                  f"this strategy's {[type(s).__name__ for s in chain]}")
        for depth, (entry, s) in enumerate(zip(described, chain)):
            if "custom" in entry:
                s.load_state_dict(entry["custom"])
            for attr, spec in entry["attrs"].items():
                kind = spec["kind"]
                if kind == "none":
                    value: Any = None
                elif kind == "float":
                    value = spec["value"]
                elif kind == "dict":
                    value = {key: arrays[f"inner.{depth}.{attr}.{i}"] for i, key in enumerate(spec["keys"])}
                else:
                    value = [arrays[f"inner.{depth}.{attr}.{i}"] for i in range(spec["length"])]
                setattr(s, attr, value)

    def save_checkpoint(self, path: str | os.PathLike[str], server_round: int) -> None:
        """Write everything a restarted ServerApp needs after ``server_round`` to ``path``, atomically."""
        scheduler = self._scheduler_state()
        arrays = {**self.counts.arrays(), **self.directory.arrays()}
        policy = scheduler.get("policy")
        if isinstance(policy, dict) and isinstance(policy.get("counts"), list):
            # the one O(n) list of the scheduler's state goes into the archive as an array, not as JSON
            arrays["scheduler_counts"] = np.asarray(policy["counts"], dtype=np.int64)
            scheduler = {**scheduler, "policy": {**policy, "counts": "scheduler_counts.npy"}}
        inner, inner_arrays = self._inner_state()
        arrays.update(inner_arrays)
        state = {"server_round": int(server_round), "rounds_run": self.rounds_run, "scheduler": scheduler,
                 "inner": inner, "options": self._options(), "health": self.health.state_dict(),
                 "history_offset": self._history_offset, "reward_before": self._reward_before, "time": time.time()}
        write_checkpoint(path, state, arrays, self._model)

    def restore(self, path: str | os.PathLike[str]) -> tuple[int, ArrayRecord | None]:
        """Continue from the checkpoint at ``path``: ``(last completed server round, global model)``.

        Refuses (:class:`CheckpointError`) a checkpoint of another problem, policy, count
        mode, or with other decisive options (weighting, target shares, leave_after,
        overcommit, back-off, weighted_by_key).
        """
        state, arrays, model = read_checkpoint(path)
        saved = state.get("options", {})
        mine = self._options()
        for key in _DECISIVE + ("policy", "count", "n", "k"):
            theirs = saved.get(key, _OPTION_DEFAULTS.get(key))
            if theirs != mine.get(key):
                raise CheckpointError(f"{path}: the checkpoint has {key} = {theirs!r}, this strategy "
                                      f"{mine.get(key)!r}")
        try:
            scheduler = state["scheduler"]
            if scheduler.get("policy", {}).get("counts") == "scheduler_counts.npy":
                scheduler["policy"]["counts"] = arrays["scheduler_counts"].tolist()
            self.scheduler.load_state_dict(scheduler)
            self.counts.load_arrays(arrays["counts"], arrays["weight"], arrays["sizes"])
            self.directory.load_arrays(arrays["directory_nodes"], arrays["directory_workers"])
            self.health.load_state_dict(state["health"])
            self._load_inner_state(state["inner"], arrays)
            server_round, self.rounds_run = int(state["server_round"]), int(state["rounds_run"])
        except CheckpointError as exc:
            raise CheckpointError(f"{path}: {exc}") from None
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"{path}: the checkpoint's state is malformed ({exc})") from None
        for s in self.health.suspects.values():  # their messages belonged to the previous ServerApp's run
            s.signals.clear()
            s.probe = ""
        self._history_offset = state.get("history_offset")
        self._reward_before = state.get("reward_before")
        self._learning = None
        self._model = model
        self._last = None
        self._fingerprint = state["scheduler"]["problem"]
        self._fast_state = self._state_with_fingerprint() == self.scheduler.state_dict()
        logger.info("fairsched: resumed from %s after round %d (scheduler round %d)", path, server_round,
                    self.scheduler.round)
        return server_round, model

    def _summary_line(self) -> dict[str, Any]:
        ids = self.problem.ids
        return {"type": "summary", "server_round": self.rounds_run, "scheduler_round": self.scheduler.round,
                "fractions": self.scheduler.fractions(), "debts": self.scheduler.debts(),
                "counts": self.counts.as_dict(ids), "shares": dict(zip(ids, self.shares().tolist())),
                "total_variation": self.total_variation() if self.counts.weight.sum() > 0 else None,
                "time": time.time()}

    # ---------------------------------------------------------------------------------------
    # the loop
    # ---------------------------------------------------------------------------------------
    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3, timeout: float = 3600,
              train_config: ConfigRecord | None = None, evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None) -> Result:
        """Flower's ``Strategy.start`` loop, with fairsched's waiting, over-commitment and resume.

        With ``resume`` and an existing checkpoint, ``initial_arrays`` is ignored: the run
        continues after the checkpoint's round with its model (and returns at once if that
        round is ``num_rounds`` or later).
        """
        if self.reward_from == "server" and evaluate_fn is None:
            raise ValueError("reward_from='server' takes the reward from evaluate_fn's record: pass evaluate_fn")
        logger.info("Starting %s strategy:", type(self).__name__)
        log_strategy_start_info(num_rounds, initial_arrays, train_config, evaluate_config)
        self.summary()
        logger.info("")
        train_config = ConfigRecord() if train_config is None else train_config
        evaluate_config = ConfigRecord() if evaluate_config is None else evaluate_config
        result = Result()
        arrays, first = initial_arrays, 1
        if self.resume and self.checkpoint_path is not None and os.path.exists(self.checkpoint_path):
            done, model = self.restore(self.checkpoint_path)
            arrays, first = (model if model is not None else initial_arrays), done + 1
        elif self.resume is True:
            raise CheckpointError(f"{self.checkpoint_path}: no such checkpoint to resume from")
        self._open_history(resumed=first > 1)
        result.arrays = arrays
        t_start = time.time()
        if evaluate_fn and first == 1:
            res = evaluate_fn(0, initial_arrays)
            logger.info("Initial global evaluation results: %s", res)
            if self.reward_from == "server" and self.reward_change:
                self._reward_before = self._metric_value(res)
            if res is not None:
                result.evaluate_metrics_serverapp[0] = res

        for current in range(first, num_rounds + 1):
            logger.info("")
            logger.info("[ROUND %s/%s]", current, num_rounds)
            messages = list(self.configure_train(current, arrays, train_config, grid))
            need = int(self._pending["selected"].size) if self._pending is not None and self.overcommit else None
            ex = exchange(grid, messages, timeout, enough=need, poll_interval=self.poll_interval)
            if self._pending is not None:
                self._pending["exchange"] = ex
            agg_arrays, agg_metrics = self.aggregate_train(current, ex.replies)
            if agg_arrays is not None:
                result.arrays = arrays = agg_arrays
            if agg_metrics is not None:
                logger.info("\t└──> Aggregated MetricRecord: %s", agg_metrics)
                result.train_metrics_clientapp[current] = agg_metrics

            messages = list(self.configure_evaluate(current, arrays, evaluate_config, grid))
            ex = exchange(grid, messages, timeout, poll_interval=self.poll_interval)
            if self._evaluating is not None:
                self._evaluating["exchange"] = ex
            agg_eval = self.aggregate_evaluate(current, ex.replies)
            if agg_eval is not None:
                logger.info("\t└──> Aggregated MetricRecord: %s", agg_eval)
                result.evaluate_metrics_clientapp[current] = agg_eval
            if evaluate_fn:
                logger.info("Global evaluation")
                res = evaluate_fn(current, arrays)
                logger.info("\t└──> MetricRecord: %s", res)
                if self.reward_from == "server":
                    self._learn(current, res)
                if res is not None:
                    result.evaluate_metrics_serverapp[current] = res
            self._learn_without_reward()

        if self._history is not None:
            self._history.append(self._summary_line())
        logger.info("")
        logger.info("Strategy execution finished in %.2fs", time.time() - t_start)
        logger.info("")
        logger.info("Final results:")
        logger.info("")
        for line in io.StringIO(str(result)):
            logger.info("\t%s", line.strip("\n"))
        logger.info("")
        return result

    def close(self) -> None:
        """Record a round still waiting for its evaluation and close the history file (the
        checkpoint is complete after every round)."""
        self._learn_without_reward()
        if self._history is not None:
            self._history.close()
            self._history = None

