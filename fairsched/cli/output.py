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
import itertools
import json
import math
import os
import sys
from collections.abc import Iterable
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
        _flush_everything(sys.stderr)
        if self._saved_fd is not None:
            os.dup2(self._saved_fd, 1)
        try:
            write_json(data, self._stdout)
            self._stdout.write("\n")
            self._stdout.flush()
        finally:
            if self._saved_fd is not None:
                os.dup2(2, 1)


class EncodedArray:
    """A JSON array given as the JSON text of its elements, written one batch at a time by
    :func:`write_json`, so that an array of millions of values is never held as Python objects."""

    def __init__(self, elements: Iterable[str], batch: int = 256) -> None:
        self.elements = elements
        self.batch = batch

    def write(self, stream: TextIO) -> None:
        stream.write("[")
        elements = iter(self.elements)
        separator = ""
        while part := list(itertools.islice(elements, self.batch)):  # itertools.batched is 3.12+
            stream.write(separator + ", ".join(part))
            separator = ", "
        stream.write("]")


def write_json(data: dict[str, Any], stream: TextIO) -> None:
    """``data`` as one JSON object on ``stream`` (the text ``json.dumps`` gives, non-finite
    numbers as ``null``), key by key; an :class:`EncodedArray` value is written element by element."""
    stream.write("{")
    for position, (key, value) in enumerate(data.items()):
        stream.write(("" if position == 0 else ", ") + json.dumps(str(key)) + ": ")
        if isinstance(value, EncodedArray):
            value.write(stream)
        else:
            stream.write(json.dumps(_finite(value), allow_nan=False))
    stream.write("}")


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
