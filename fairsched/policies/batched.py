"""Rounds drawn in batches from a policy's generator, resumable without storing the batch.

A randomised policy (FairCG's pipage rounding, lp-random's draws from ``p*``) draws many
rounds at once for speed. To save its state it keeps the generator state each batch was
drawn from, and a restored policy redraws the same batch from it: the state stays small
and the decisions stay identical.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Draw = Callable[[np.random.Generator, int], np.ndarray]


class BatchedDraws:
    """Serve the rows of ``draw(rng, size)`` one at a time, ``size`` rounds per batch."""

    def __init__(self, draw: Draw, size: int) -> None:
        self.draw = draw
        self.size = size
        self.batch: np.ndarray | None = None
        self.start_state: dict[str, Any] | None = None
        self.next = 0

    def take(self, rng: np.random.Generator) -> Any:
        """The next round's draw, drawing a new batch from ``rng`` when the last one is used up."""
        if self.batch is None or self.next >= len(self.batch):
            self.start_state = rng.bit_generator.state
            self.batch = self.draw(rng, self.size)
            self.next = 0
        row = self.batch[self.next]
        self.next += 1
        return row

    def state_dict(self) -> dict[str, Any]:
        """The generator state the current batch came from, its size and the position in it."""
        return {"batch_rng": self.start_state, "batch_size": 0 if self.batch is None else len(self.batch),
                "next": self.next}

    def load_state_dict(self, state: dict[str, Any], rng: np.random.Generator) -> None:
        """Redraw the saved batch from its generator state, leaving ``rng`` where it is."""
        self.next = int(state["next"])
        self.batch, self.start_state = None, state["batch_rng"]
        if self.start_state is not None and state["batch_size"]:
            after = rng.bit_generator.state
            rng.bit_generator.state = self.start_state
            try:
                self.batch = self.draw(rng, int(state["batch_size"]))
            finally:
                rng.bit_generator.state = after
