"""A command's result on stdout: the text report, or with ``--json`` exactly one JSON object.

With ``--json`` nothing but that object may reach stdout, yet solvers (HiGHS prints a
banner through C ``printf``) write there on their own. So while a ``--json`` command
computes, file descriptor 1 and ``sys.stdout`` both point to stderr; they are restored only
for the moment the object is printed.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import math
import os
import sys
from types import TracebackType
from typing import Any, TextIO


class Output:
    """Context manager guarding stdout during a command; :meth:`emit` prints its result."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self._stdout: TextIO = sys.stdout
        self._saved_fd: int | None = None

    def __enter__(self) -> "Output":
        self._stdout = sys.stdout
        if self.as_json:
            _flush_everything(self._stdout)
            with contextlib.suppress(OSError):  # fd 1 closed: there is nothing to protect
                self._saved_fd = os.dup(1)
                os.dup2(2, 1)
            sys.stdout = sys.stderr
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if not self.as_json:
            return
        _flush_everything(sys.stderr)
        sys.stdout = self._stdout
        if self._saved_fd is not None:
            os.dup2(self._saved_fd, 1)
            os.close(self._saved_fd)
            self._saved_fd = None

    def emit(self, data: dict[str, Any], text: str) -> None:
        """Print ``text``, or with ``--json`` ``data`` as one JSON line (non-finite numbers as ``null``)."""
        if not self.as_json:
            print(text, file=self._stdout, flush=True)
            return
        line = json.dumps(_finite(data), allow_nan=False)
        _flush_everything(sys.stderr)
        if self._saved_fd is not None:
            os.dup2(self._saved_fd, 1)
        try:
            print(line, file=self._stdout, flush=True)
        finally:
            if self._saved_fd is not None:
                os.dup2(2, 1)


def _finite(value: Any) -> Any:
    """``value`` with NaN and infinities (which JSON cannot carry) replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    if hasattr(value, "tolist"):  # numpy scalars and arrays
        return _finite(value.tolist())
    return value


def _flush_everything(stream: TextIO) -> None:
    """Flush ``stream`` and C's stdio buffers, so that what a library buffered lands where fd 1 points now."""
    stream.flush()
    libc = _libc()
    if libc is not None:
        libc.fflush(None)


@functools.cache
def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None)
    except (OSError, TypeError):  # no C library to load by that name (Windows)
        return None
