"""The command line's error contract, in one place: an exception becomes an exit code and one line.

Exit codes: 0 success, 2 bad input (an invalid file or option, a missing optional
dependency, an unwritable output), 3 infeasible instance, 130 interrupted (Ctrl-C), 143
terminated (SIGTERM). Every error is one line ``fairsched: error: ...`` on stderr, never a
traceback. ``fairsched`` (:mod:`fairsched.cli.app`) and ``python -m fairsched.cli.bench``
both run their command through :func:`guarded`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import threading
import warnings
from typing import Any, Callable, Iterator, NoReturn

from fairsched.errors import FairschedError, InfeasibleError, InstanceError
from fairsched.solvers.errors import SolverError

EXIT_OK, EXIT_BAD_INPUT, EXIT_INFEASIBLE, EXIT_INTERRUPTED, EXIT_TERMINATED = 0, 2, 3, 130, 143


class Terminated(BaseException):
    """SIGTERM, raised in the main thread by :func:`guarded`'s handler.

    A ``BaseException`` like ``KeyboardInterrupt``: cleanups (``atomic_write`` removing its
    temporary file) run on the way out, and no ``except Exception`` swallows it.
    """


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors follow the contract: one line, exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"fairsched: error: {one_line(message)}\n")


def one_line(message: str) -> str:
    """``message`` with its line breaks (any that ``str.splitlines`` knows) folded into spaces."""
    return " ".join(part.strip() for part in message.splitlines() if part.strip())


def fail(message: str, code: int) -> int:
    """Print ``fairsched: error: message`` (one line) on stderr and return ``code``."""
    print(f"fairsched: error: {one_line(message)}", file=sys.stderr, flush=True)
    return code


def classify(exc: BaseException) -> tuple[int, str | None] | None:
    """The exit code and stderr message for ``exc`` (message ``None``: exit quietly).

    ``None`` for an exception that is not a user's error (a bug): it keeps its traceback.
    """
    if isinstance(exc, InfeasibleError):
        return EXIT_INFEASIBLE, str(exc)
    if isinstance(exc, FairschedError):  # MissingDependencyError, CheckpointError, TooLargeError, ...
        return EXIT_BAD_INPUT, str(exc)
    if isinstance(exc, SolverError):
        return EXIT_BAD_INPUT, (f"the LP solver stopped without an answer: {exc} (if a time limit stopped it, "
                                "raise --time-limit or use --method column-generation)")
    if isinstance(exc, BrokenPipeError):  # stdout closed early (`| head`): not an error of the input
        return EXIT_OK, None
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else ""
        return EXIT_BAD_INPUT, f"{where}: {exc.strerror or exc}".lstrip(": ")
    if isinstance(exc, MemoryError):
        return EXIT_BAD_INPUT, (f"not enough memory: {exc or 'an allocation failed'} "
                                "(fewer --rounds or a smaller instance)")
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED, "interrupted; no partial file was written"
    if isinstance(exc, Terminated):
        return EXIT_TERMINATED, "terminated (SIGTERM); no partial file was written"
    return None


def guarded(command: Callable[[], int]) -> int:
    """Run ``command`` (which returns an exit code) under the contract; returns the exit code.

    While it runs, SIGTERM raises :class:`Terminated` in the main thread, and Python
    warnings (numpy's overflow warnings, say) are held back: after a failure only the error
    line is printed.
    """
    with _sigterm_raises(), warnings.catch_warnings(record=True) as caught:
        try:
            code = command()
        except BaseException as exc:
            verdict = classify(exc)
            if verdict is None:
                raise
            code, message = verdict
            if isinstance(exc, BrokenPipeError):
                _silence_stdout()
            return code if message is None else fail(message, code)
    for warning in caught:  # held back so that a failure is one line; shown as usual after a success
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return code


@contextlib.contextmanager
def blamed_on(source: str | None) -> Iterator[None]:
    """Name ``source`` in instance errors found while computing (a ``python`` utility raising), as load errors do."""
    try:
        yield
    except InstanceError as exc:
        if exc.source or not source:
            raise
        raise exc.located(source=source) from exc


def _raise_terminated(signum: int, frame: Any) -> NoReturn:
    raise Terminated


@contextlib.contextmanager
def _sigterm_raises() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():  # signal.signal works there only
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so that flushing it at exit cannot raise ``BrokenPipeError`` again."""
    with contextlib.suppress(OSError, ValueError):  # ValueError: a replaced stdout without a descriptor
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
