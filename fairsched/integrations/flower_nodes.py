"""Flower nodes as fairsched workers: who a node is, and whether it is alive.

Two pieces of per-node bookkeeping for :class:`~fairsched.integrations.flower.FairschedStrategy`:

- :class:`NodeDirectory` maps Flower node ids to worker indices of the scheduler's problem,
  once per node id (a SuperNode gets a fresh random id every time it connects), through a
  mapping, a callable, or the worker-id query that :func:`register_worker_id_query`
  answers in the ClientApp. A query the ClientApp cannot answer (no handler, or an answer
  without a worker id) is a :class:`WorkerIdQueryError` whose message says how to fix it;
  a query that fails in the handler is retried up to ``attempts`` times, one that is not
  answered at all is asked again later, with exponentially growing pauses.
- :class:`NodeHealth` keeps the nodes that missed a deadline out of the next rounds until
  they have *shown life*: after the ``j``-th consecutive timeout a node is not asked for
  at least ``min(base · 2^(j-1), cap)`` rounds, and not before one of its outstanding
  messages (the one it missed, or a probe, the worker-id query, sent without waiting for
  it) has been answered. A node that is merely busy (its reply was not needed because
  over-committed replies came first) waits for its reply without the back-off. Flower
  itself drops a node that stops sending heartbeats (within 2 × 30 s in Flower 1.42), and
  a reconnecting SuperNode has a new node id, so a dead node is never waited for twice.

Only :mod:`fairsched.integrations.flower` imports this module (it imports Flower).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.common.constant import ErrorCode

from fairsched.errors import FairschedError

__all__ = [
    "LIVENESS_ERRORS",
    "QUERY_ACTION",
    "QUERY_MESSAGE_TYPE",
    "QUERY_RECORD",
    "WORKER_ID_KEY",
    "NodeDirectory",
    "NodeHealth",
    "WorkerIdQueryError",
    "query_message",
    "register_worker_id_query",
]

logger = logging.getLogger("flwr")

QUERY_ACTION = "fairsched_worker_id"
QUERY_MESSAGE_TYPE = f"{MessageType.QUERY}.{QUERY_ACTION}"
QUERY_RECORD = "fairsched"
WORKER_ID_KEY = "worker-id"

#: error codes that the SuperLink (not the node) writes: the node did not show life
LIVENESS_ERRORS = frozenset({ErrorCode.NODE_UNAVAILABLE, ErrorCode.MESSAGE_UNAVAILABLE,
                             ErrorCode.REPLY_MESSAGE_UNAVAILABLE})

_FIX = ("add `register_worker_id_query(app, lambda context: str(context.node_config[\"partition-id\"]))` "
        "(from fairsched.integrations.flower) to the ClientApp, or pass "
        "FairschedStrategy(node_to_worker={node_id: worker_id} or a callable) instead of \"query\"")


class WorkerIdQueryError(FairschedError):
    """A ClientApp cannot tell the strategy which worker it is; the message says how to fix it."""


def register_worker_id_query(app: Any, worker_id: Callable[[Context], str]) -> None:
    """Make a ``ClientApp`` answer the strategy's worker-id query (``node_to_worker="query"``).

    ``worker_id(context)`` returns the node's fairsched worker id, for example
    ``lambda context: str(context.node_config["partition-id"])``. The same query serves as
    the strategy's liveness probe.
    """

    @app.query(QUERY_ACTION)
    def _fairsched_worker_id(msg: Message, context: Context) -> Message:
        record = ConfigRecord({WORKER_ID_KEY: str(worker_id(context))})
        return Message(content=RecordDict({QUERY_RECORD: record}), reply_to=msg)


def query_message(node_id: int) -> Message:
    """The worker-id query (also the liveness probe) for ``node_id``."""
    content = RecordDict({QUERY_RECORD: ConfigRecord({"request": WORKER_ID_KEY})})
    return Message(content=content, dst_node_id=int(node_id), message_type=QUERY_MESSAGE_TYPE)


def is_missing_handler(reason: str) -> bool:
    """Whether an error reason is Flower's "no query function registered" for our query."""
    return "No query function registered" in reason and QUERY_ACTION in reason


_KEPT_QUERIES = 4


@dataclass
class _Attempts:
    errors: int = 0
    silences: int = 0
    retry_at: float = 0.0
    reason: str = ""
    queries: list[str] = field(default_factory=list)  # unanswered queries (a late answer still counts)


class NodeDirectory:
    """Flower node id → worker index of the problem, resolved once per node id and cached.

    ``lookup`` is ``None`` (the worker id is ``str(node_id)``), a mapping or a callable
    returning a worker id or ``None`` (not a worker). Worker ids outside ``ids`` resolve to
    "not a worker". If two connected nodes are the same worker (a SuperNode reconnected
    before its old id expired), the one resolved last is used. Lookups of a whole node
    list are numpy searches in the sorted resolved ids (``O(c log m)`` for ``c`` connected
    and ``m`` resolved nodes); only new nodes are handled one by one.
    """

    def __init__(self, ids: Iterable[str],
                 lookup: Mapping[int, str] | Callable[[int], str | None] | None = None) -> None:
        self.ids = [str(w) for w in ids]
        self.position = {w: i for i, w in enumerate(self.ids)}
        self.known = frozenset(self.ids)
        self.lookup = lookup
        self.index: dict[int, int] = {}     # node id -> worker index (-1: not a worker)
        self.attempts: dict[int, _Attempts] = {}
        self.version = 0                    # bumped by every record: invalidates the caches below
        self._nodes = np.zeros(64, dtype=np.uint64)    # resolved node ids in resolution order ...
        self._workers = np.zeros(64, dtype=np.int64)   # ... and their worker indices (first _size entries)
        self._size = 0
        self._warned: set[str] = set()
        self._sorted: tuple[int, np.ndarray, np.ndarray, np.ndarray] | None = None
        self._cache: tuple[list[int], int, np.ndarray, np.ndarray, list[int]] | None = None
        self._conn: tuple[list[int], np.ndarray] | None = None
        #: the node list of the last :meth:`map`, as ``uint64``
        self.connected = np.empty(0, dtype=np.uint64)

    # resolution ------------------------------------------------------------------------
    def record(self, node_id: int, worker_id: Any) -> None:
        """Remember that ``node_id`` is ``worker_id`` (``None``: not a worker of the problem)."""
        wid = None if worker_id is None else str(worker_id)
        if wid is not None and wid not in self.known:
            if wid not in self._warned:
                logger.warning("fairsched: node %s says it is worker %r, which is not in the problem; "
                               "it will not be scheduled", node_id, wid)
                self._warned.add(wid)
            wid = None
        node_id = int(node_id)
        if node_id in self.index:  # rare: a node re-recorded moves to the end of the order
            keep = self._nodes[:self._size] != np.uint64(node_id)
            self._size = int(keep.sum())
            self._nodes[:self._size], self._workers[:self._size] = self._nodes[:keep.size][keep], \
                self._workers[:keep.size][keep]
        self.index[node_id] = -1 if wid is None else self.position[wid]
        if self._size == self._nodes.size:
            self._nodes = np.concatenate([self._nodes, np.zeros_like(self._nodes)])
            self._workers = np.concatenate([self._workers, np.zeros_like(self._workers)])
        self._nodes[self._size], self._workers[self._size] = node_id, self.index[node_id]
        self._size += 1
        self.attempts.pop(node_id, None)
        self.version += 1

    def _search(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sorted node ids, their worker indices, their resolution order), rebuilt after a change."""
        if self._sorted is None or self._sorted[0] != self.version:
            nodes, workers = self._nodes[:self._size], self._workers[:self._size]
            order = np.argsort(nodes, kind="stable")
            self._sorted = (self.version, nodes[order], workers[order], order.astype(np.int64))
        return self._sorted[1], self._sorted[2], self._sorted[3]

    def _find(self, node_ids: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """``(connected, found, worker, order)`` arrays for the node list."""
        if self._conn is not None and self._conn[0] == node_ids:
            conn = self._conn[1]
        else:
            conn = np.fromiter(node_ids, dtype=np.uint64, count=len(node_ids))
            self._conn = (list(node_ids), conn)
        nodes, workers, order = self._search()
        if nodes.size == 0:
            none = np.zeros(conn.size, dtype=np.int64)
            return conn, np.zeros(conn.size, dtype=bool), none - 1, none
        pos = np.minimum(np.searchsorted(nodes, conn), nodes.size - 1)
        found = nodes[pos] == conn
        return conn, found, np.where(found, workers[pos], -1), order[pos]

    def unresolved(self, node_ids: Iterable[int]) -> list[int]:
        """The node ids not resolved yet."""
        node_ids = node_ids if isinstance(node_ids, list) else list(node_ids)
        if not self.index:
            return [int(v) for v in node_ids]
        self.map(node_ids, len(self.ids))
        assert self._cache is not None
        return self._cache[4]

    def resolve_local(self, node_ids: Iterable[int]) -> None:
        """Resolve new node ids through ``lookup`` (not used in ``"query"`` mode)."""
        for node_id in self.unresolved(node_ids):
            if self.lookup is None:
                self.record(node_id, str(node_id))
            elif isinstance(self.lookup, Mapping):
                self.record(node_id, self.lookup.get(node_id))
            else:
                self.record(node_id, self.lookup(node_id))

    def due(self, node_ids: Iterable[int], now: float) -> list[int]:
        """The unresolved node ids whose next query attempt is due at ``now`` (monotonic seconds)."""
        out = []
        for v in self.unresolved(node_ids):
            a = self.attempts.get(v)
            if a is None or a.retry_at <= now:
                out.append(v)
        return out

    def asked(self, node_id: int, message_id: str) -> None:
        """A query went to ``node_id``; its answer is collected whenever it comes (the last few are kept)."""
        a = self.attempts.setdefault(int(node_id), _Attempts())
        a.queries = [*a.queries[-(_KEPT_QUERIES - 1):], message_id]

    def outstanding(self) -> dict[str, int]:
        """``{message_id: node_id}`` of the unanswered queries of unresolved nodes."""
        return {m: v for v, a in self.attempts.items() if v not in self.index for m in a.queries}

    def answered(self, node_id: int, reply: Message, attempts: int) -> None:
        """Record one query reply; raises :class:`WorkerIdQueryError` when the ClientApp cannot answer."""
        a = self.attempts.get(int(node_id))
        if a is not None and reply.metadata.reply_to_message_id in a.queries:
            a.queries.remove(reply.metadata.reply_to_message_id)
        if not reply.has_error():
            try:
                wid = reply.content[QUERY_RECORD][WORKER_ID_KEY]
            except (KeyError, TypeError):
                raise WorkerIdQueryError(f"node {node_id} answered fairsched's worker-id query without "
                                         f"{QUERY_RECORD}.{WORKER_ID_KEY}: its ClientApp's query handler is not "
                                         f"fairsched's; {_FIX}") from None
            self.record(node_id, wid)
            return
        reason = str(reply.error.reason)
        code = int(reply.error.code)
        if is_missing_handler(reason):
            raise WorkerIdQueryError(f"node {node_id}'s ClientApp has no handler for fairsched's worker-id "
                                     f"query ({QUERY_MESSAGE_TYPE}): {_FIX}")
        a = self.attempts.setdefault(int(node_id), _Attempts())
        a.reason = reason
        if code in LIVENESS_ERRORS:
            self.silent(node_id, time.monotonic(), 1.0)
            return
        a.errors += 1
        if a.errors >= attempts:
            raise WorkerIdQueryError(f"node {node_id} failed fairsched's worker-id query {a.errors} times "
                                     f"(last error: {reason}); check the function given to "
                                     f"register_worker_id_query in the ClientApp, or pass "
                                     f"FairschedStrategy(query_attempts=...) to allow more attempts")
        a.retry_at = 0.0  # a handler error is transient: ask again at the next opportunity
        logger.warning("fairsched: node %s's worker-id query failed (attempt %d of %d): %s; asking again",
                       node_id, a.errors, attempts, reason)

    def silent(self, node_id: int, now: float, pause: float) -> None:
        """``node_id`` did not answer its query: ask again after ``pause · 2^(j-1)`` seconds (at most 10 min)."""
        a = self.attempts.setdefault(int(node_id), _Attempts())
        a.silences += 1
        a.retry_at = now + min(pause * 2.0 ** (a.silences - 1), 600.0)

    # lookup --------------------------------------------------------------------------------
    def map(self, node_ids: list[int], n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(node_of_worker, present)`` for the connected ``node_ids``.

        ``node_of_worker`` is a ``uint64`` array of length ``n`` (0, the SuperLink's id,
        where the worker has no connected node) and ``present`` its nonzero mask. Cached
        while the node list and the directory stay the same.
        """
        cache = self._cache
        if cache is not None and cache[1] == self.version and cache[0] == node_ids:
            return cache[2], cache[3]
        conn, found, worker, order = self._find(node_ids)
        conn_all = conn
        unresolved = [int(v) for v in conn[~found]]
        mine = found & (worker >= 0)
        conn, worker, order = conn[mine], worker[mine], order[mine]
        node_of = np.zeros(n, dtype=np.uint64)
        if worker.size and np.bincount(worker, minlength=n).max() > 1:  # a worker on two nodes: newest wins
            best = np.full(n, -1, dtype=np.int64)
            np.maximum.at(best, worker, order)
            newest = order == best[worker]
            worker, conn = worker[newest], conn[newest]
        node_of[worker] = conn
        present = node_of != 0
        self._cache = (list(node_ids), self.version, node_of, present, unresolved)
        self.connected = conn_all
        return node_of, present

    def workers(self, node_ids: Iterable[int]) -> dict[str, int]:
        """``{worker_id: node_id}`` for the resolved ``node_ids``; the newest node wins a tie."""
        node_of, present = self.map([int(v) for v in node_ids], len(self.ids))
        return {self.ids[w]: int(node_of[w]) for w in np.flatnonzero(present)}

    def worker_of(self, node_id: int) -> str | None:
        """The worker id of a resolved node (``None``: unknown or not a worker)."""
        w = self.index.get(int(node_id), -1)
        return None if w < 0 else self.ids[w]

    def compact(self, node_ids: Iterable[int], slack: int = 1024) -> int:
        """Forget resolved nodes that are not in ``node_ids`` once they outnumber them (plus ``slack``).

        A reconnecting SuperNode has a new node id, so without this the directory (and
        the checkpoint) would grow with every reconnection of the run; compacting only
        when at least ``len(node_ids) + slack`` entries are stale keeps its cost
        amortised ``O(1)`` per new node. A forgotten node that comes back is asked again.
        Returns the number of entries forgotten.
        """
        node_ids = node_ids if isinstance(node_ids, list) else list(node_ids)
        if self._size - len(node_ids) < len(node_ids) + slack:  # the common case: one comparison
            return 0
        conn = np.fromiter((int(v) for v in node_ids), dtype=np.uint64, count=len(node_ids))
        keep = np.isin(self._nodes[:self._size], conn)
        dropped = int(self._size - keep.sum())
        if dropped:
            self.load_arrays(self._nodes[:self._size][keep], self._workers[:self._size][keep], keep_attempts=True)
        return dropped

    # state ---------------------------------------------------------------------------------
    def arrays(self) -> dict[str, np.ndarray]:
        """The resolved nodes in resolution order, as arrays for a checkpoint."""
        return {"directory_nodes": self._nodes[:self._size], "directory_workers": self._workers[:self._size]}

    def load_arrays(self, nodes: np.ndarray, workers: np.ndarray, keep_attempts: bool = False) -> None:
        """Restore :meth:`arrays`; worker indices must be in range (or -1)."""
        if nodes.shape != workers.shape or (workers.size and (workers.min() < -1 or workers.max() >= len(self.ids))):
            raise ValueError("the node directory does not fit the problem")
        self._nodes, self._workers = nodes.astype(np.uint64), workers.astype(np.int64)
        self._size = int(nodes.size)
        self.index = dict(zip((int(v) for v in nodes.tolist()), (int(w) for w in workers.tolist())))
        if not keep_attempts:
            self.attempts = {}
        self.version += 1


@dataclass
class _Suspect:
    strikes: int = 0                 # consecutive rounds in which the node missed the deadline
    blocked_until: int = 0           # first server round in which it may be asked again
    alive: bool = False              # answered something since it was last suspected
    signals: list[str] = field(default_factory=list)  # message ids whose answer shows life
    probe: str = ""                  # the outstanding probe's message id (at most one per node)


class NodeHealth:
    """Which connected nodes may be asked this round.

    A node missing from :attr:`suspects` is healthy. :meth:`timed_out` (the ``j``-th
    consecutive missed deadline) blocks it for ``min(base · 2^(j-1), cap)`` rounds and
    until it shows life; :meth:`busy` blocks it until its outstanding reply arrives;
    :meth:`answered` clears it.
    """

    def __init__(self, base: int = 1, cap: int = 32) -> None:
        if int(base) < 0 or int(cap) < int(base):
            raise ValueError(f"back-off must satisfy 0 <= backoff_rounds <= max_backoff_rounds, got {base}, {cap}")
        self.base, self.cap = int(base), int(cap)
        self.suspects: dict[int, _Suspect] = {}

    def eligible(self, node_id: int, server_round: int) -> bool:
        s = self.suspects.get(node_id)
        return s is None or (s.alive and server_round >= s.blocked_until)

    def blocked(self, node_ids: Iterable[int], server_round: int) -> set[int]:
        """The ``node_ids`` that may not be asked in ``server_round``."""
        if not self.suspects:
            return set()
        return {v for v in node_ids if not self.eligible(v, server_round)}

    def answered(self, node_id: int) -> None:
        """The node answered in time (a result or an error of its own): healthy again."""
        self.suspects.pop(int(node_id), None)

    def timed_out(self, node_id: int, server_round: int, message_id: str | None) -> int:
        """The node missed the deadline of ``server_round``; returns its number of strikes."""
        s = self.suspects.setdefault(int(node_id), _Suspect())
        s.strikes += 1
        s.alive = False
        s.blocked_until = server_round + 1 + min(self.base * 2 ** (s.strikes - 1), self.cap)
        if message_id:
            s.signals.append(message_id)
        return s.strikes

    def busy(self, node_id: int, server_round: int, message_id: str | None) -> None:
        """The node's reply was not waited for: do not ask it again before that reply arrives."""
        s = self.suspects.setdefault(int(node_id), _Suspect())
        s.alive = False
        s.blocked_until = max(s.blocked_until, server_round + 1)
        if message_id:
            s.signals.append(message_id)

    def outstanding(self) -> dict[str, int]:
        """``{message_id: node_id}`` of every message whose answer would show life."""
        return {m: v for v, s in self.suspects.items() for m in s.signals}

    def signal(self, node_id: int, message_id: str, shows_life: bool) -> None:
        """An outstanding message was answered (``shows_life``) or given up by the SuperLink."""
        s = self.suspects.get(int(node_id))
        if s is None:
            return
        if message_id in s.signals:
            s.signals.remove(message_id)
        if message_id == s.probe:
            s.probe = ""
        if shows_life:
            s.alive = True
            if s.strikes == 0:  # only busy, never late: nothing left to hold against it
                self.suspects.pop(int(node_id), None)

    def need_probe(self, connected: Iterable[int]) -> list[int]:
        """Connected suspects that have not shown life and have no probe outstanding.

        The message a node missed may stay unanswered for its whole TTL (hours, by
        Flower's default) even after the node is back, so a suspect is probed once, and
        again only when the SuperLink gives the probe up.
        """
        return [v for v in connected if (s := self.suspects.get(v)) is not None and not s.alive and not s.probe]

    def probed(self, node_id: int, message_id: str) -> None:
        """A probe was sent to the suspect ``node_id``."""
        s = self.suspects[int(node_id)]
        s.probe = message_id
        s.signals.append(message_id)

    def forget(self, connected: set[int]) -> None:
        """Drop the nodes that are gone, outstanding messages and all (a returning SuperNode has a new id).

        Otherwise every dead node's probe, unanswered until its TTL, would be pulled again
        each round for as long as the run lasts.
        """
        for v in [v for v in self.suspects if v not in connected]:
            del self.suspects[v]

    def state_dict(self) -> list[dict[str, Any]]:
        return [{"node": v, "strikes": s.strikes, "blocked_until": s.blocked_until, "alive": s.alive,
                 "signals": list(s.signals), "probe": s.probe} for v, s in self.suspects.items()]

    def load_state_dict(self, state: list[dict[str, Any]]) -> None:
        self.suspects = {int(e["node"]): _Suspect(int(e["strikes"]), int(e["blocked_until"]), bool(e["alive"]),
                                                  [str(m) for m in e["signals"]], str(e.get("probe", "")))
                         for e in state}
