"""Grid plumbing for fairsched's Flower strategy: a restricted view of the grid, and one exchange.

- :class:`NodeSubsetGrid` is the real grid with ``get_node_ids()`` replaced: an inner
  Flower strategy (FedAvg, FedProx, FedAdam, a DP wrapper, ...) that samples "all
  connected nodes" from it samples exactly the nodes fairsched chose, and builds its
  messages (configuration, proximal term, clipping norm, ...) for them as it would for
  its own sample.
- :func:`exchange` pushes messages and pulls replies until every node answered, enough
  results arrived (over-commitment: the first ``k`` of ``k + m``), or the timeout passed.
  Flower's ``Grid.send_and_receive`` only stops on the first or the last of those and
  polls every 3 s on a deployment; the poll interval here is a parameter.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from flwr.app import Message, RecordDict
from flwr.serverapp import Grid

__all__ = ["Exchange", "NodeSubsetGrid", "exchange"]


class NodeSubsetGrid(Grid):
    """``grid`` whose ``get_node_ids()`` is ``node_ids()``; everything else is ``grid``'s."""

    def __init__(self, grid: Grid, node_ids: Callable[[], Iterable[int]]) -> None:
        self._grid = grid
        self._node_ids = node_ids

    def get_node_ids(self) -> Iterable[int]:
        return list(self._node_ids())

    def set_run(self, run):  # type: ignore[no-untyped-def]
        self._grid.set_run(run)

    @property
    def run(self):  # type: ignore[no-untyped-def]
        return self._grid.run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return self._grid.create_message(content, message_type, dst_node_id, group_id, ttl)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        return self._grid.push_messages(messages)

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return self._grid.pull_messages(message_ids)

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        return self._grid.send_and_receive(messages, timeout=timeout)


@dataclass
class Exchange:
    """What one :func:`exchange` did."""

    replies: list[Message] = field(default_factory=list)   # in order of arrival
    unpushed: list[Message] = field(default_factory=list)  # the SuperLink refused them
    timed_out: bool = False                                # stopped at the deadline with replies missing
    stopped_early: bool = False                            # stopped because enough results had arrived
    seconds: float = 0.0


def exchange(grid: Grid, messages: Iterable[Message], timeout: float | None, *, enough: int | None = None,
             poll_interval: float = 0.2) -> Exchange:
    """Push ``messages``; pull until all are answered, ``enough`` are answered without error, or ``timeout``."""
    started = time.monotonic()
    messages = list(messages)
    out = Exchange()
    if not messages:
        return out
    ids = list(grid.push_messages(messages))
    pending = {i for i in ids if i}
    out.unpushed = [m for m, i in zip(messages, ids) if not i] + messages[len(ids):]
    deadline = None if timeout is None else started + float(timeout)
    ok = 0
    while pending:
        for reply in grid.pull_messages(list(pending)):
            pending.discard(reply.metadata.reply_to_message_id)
            out.replies.append(reply)
            ok += not reply.has_error()
        if not pending:
            break
        if enough is not None and ok >= enough:
            out.stopped_early = True
            break
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            out.timed_out = True
            break
        time.sleep(poll_interval if deadline is None else max(0.0, min(poll_interval, deadline - now)))
    out.seconds = time.monotonic() - started
    return out
