"""Where benchmark tasks run: in this process, on joblib's loky workers, or on a Dask cluster.

:func:`executor` yields ``map(func, items)``, an iterator over ``func(item)`` **in the order
of ``items``** whatever the backend, so results never depend on which worker finished first.
The Dask backend is joblib's (``joblib.parallel_config(backend="dask")``) on a
``distributed.Client``: a :class:`~distributed.LocalCluster` of ``jobs`` single-threaded worker
processes, or the cluster at ``scheduler_address`` (``tcp://host:8786``, or the
``scheduler_address`` of a cluster started in this process).

Determinism: every task runs with single-threaded BLAS (:func:`single_threaded_blas`), so a
matrix product adds in the same order on every worker and in this process.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, Sequence

from fairsched.errors import FairschedError, MissingDependencyError
from fairsched.extras import install_hint

BACKENDS = ("loky", "dask")
Map = Callable[[Callable[[Any], Any], Sequence[Any]], Iterator[Any]]

_limited_pid: int | None = None


def single_threaded_blas() -> None:
    """Limit BLAS/OpenMP to one thread in this process, once (threadpoolctl; a no-op without it).

    Worker processes keep the limit: they only run tasks, and one thread per task is what
    ``jobs`` workers on ``jobs`` cores want anyway. :func:`executor` sets and restores it for
    the calling process itself.
    """
    global _limited_pid
    if _limited_pid == os.getpid():
        return
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # determinism then relies on BLAS not splitting these small products
        return
    threadpool_limits(limits=1)
    _limited_pid = os.getpid()


@contextmanager
def _limited_here() -> Iterator[None]:
    """Single-threaded BLAS in this process for the duration (tasks may run here: jobs = 1, in-process Dask)."""
    global _limited_pid
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    previous = _limited_pid
    with threadpool_limits(limits=1):
        _limited_pid = os.getpid()
        try:
            yield
        finally:
            _limited_pid = previous


def check_backend(backend: str, jobs: int, scheduler_address: str | None) -> None:
    """Raise :class:`FairschedError` for a bad combination, or a backend that is not installed."""
    if backend not in BACKENDS:
        raise FairschedError(f"unknown backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise FairschedError(f"--jobs must be a positive integer, got {jobs!r}")
    if scheduler_address and backend != "dask":
        raise FairschedError("--scheduler-address needs --backend dask")
    if backend == "dask" or jobs > 1:
        _require("joblib")
    if backend == "dask":
        _require("distributed")


def _require(module: str) -> None:
    try:
        __import__(module)
    except ImportError:
        raise MissingDependencyError(f"this needs {module}, which is not installed: {install_hint(module)}") from None


@contextmanager
def executor(jobs: int = 1, backend: str = "loky", scheduler_address: str | None = None) -> Iterator[Map]:
    """A ``map(func, items)`` over ``jobs`` loky workers, a Dask cluster, or (``jobs = 1``, loky) this process."""
    check_backend(backend, jobs, scheduler_address)
    with _limited_here():
        if backend == "loky" and jobs == 1:
            yield lambda func, items: (func(item) for item in items)
        elif backend == "loky":
            yield _joblib_map(jobs, "loky")
        else:
            with _dask_client(jobs, scheduler_address):
                yield _joblib_map(-1, "dask")


def _joblib_map(jobs: int, backend: str) -> Map:
    import joblib

    def run(func: Callable[[Any], Any], items: Sequence[Any]) -> Iterator[Any]:
        with joblib.parallel_config(backend=backend, n_jobs=jobs):
            yield from joblib.Parallel(return_as="generator")(joblib.delayed(func)(item) for item in items)

    return run


@contextmanager
def _dask_client(jobs: int, scheduler_address: str | None) -> Iterator[Any]:
    from distributed import Client, LocalCluster

    if scheduler_address:
        with Client(scheduler_address) as client:
            yield client
        return
    with LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        yield client


def run_all(func: Callable[[Any], Any], items: Iterable[Any], map_: Map,
            on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
    """``[func(item) for item in items]`` through ``map_``, calling ``on_result(i, result)`` as they arrive."""
    items = list(items)
    results = []
    for i, result in enumerate(map_(func, items)):
        if on_result is not None:
            on_result(i, result)
        results.append(result)
    return results
