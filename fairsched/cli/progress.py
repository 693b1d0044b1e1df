"""Progress on stderr for every long phase of a command, only when stderr is a terminal.

A phase prints one line when it starts and completes it with its duration
(``fairsched: solving U_opt ... 3.2 s``); column generation refreshes its line with the
iteration and the certified bounds at most ten times a second. Nothing is printed with
``--quiet`` or when stderr is a file or a pipe, so logs and ``--json`` output stay clean.
"""

from __future__ import annotations

import contextlib
import math
import sys
import time
from typing import Iterator, TextIO


class Progress:
    """Phase lines on ``stream`` (default stderr) when ``enabled`` and the stream is a terminal."""

    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled and _is_terminal(self.stream)
        self._last = -math.inf
        self._open = False

    @contextlib.contextmanager
    def phase(self, what: str) -> Iterator[None]:
        """Announce ``what``, run the block, then print how long it took."""
        if not self.enabled:
            yield
            return
        start = time.perf_counter()
        self._write(f"\rfairsched: {what} ...")
        self._open = True
        try:
            yield
        finally:
            self._write(f"\rfairsched: {what} ... {time.perf_counter() - start:.1f} s\n")
            self._open = False

    def column_generation(self, iteration: int, lower: float, upper: float, gap: float) -> None:
        """The ``progress`` callback of :func:`fairsched.optimum`: one refreshed line."""
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self._last < 0.1:
            return
        self._last = now
        self._write(f"\rfairsched: solving U_opt: column generation iteration {iteration:,}, "
                    f"value {lower:.10g}, certified upper bound {upper:.10g}, gap {gap:.2g}   ")

    def _write(self, text: str) -> None:
        # "\x1b[K" clears the rest of the line a longer refreshed line may have left.
        self.stream.write(text.replace("\r", "\r\x1b[K", 1) if text.startswith("\r") else text)
        self.stream.flush()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
