"""A Dask client for the batch jobs (``--workers N`` / ``--scheduler ADDRESS``), optional.

``dask[distributed]`` is the optional extra ``credrank[dask]``. Whether it is installed is asked
with :func:`importlib.util.find_spec` before anything is imported, so a missing extra gives
:data:`DASK_HINT` while an :class:`ImportError` *inside* an installed package still propagates
as it is (it names the real problem).

:func:`dask_client` yields a ``distributed.Client`` for a local cluster of ``workers``
processes, for a running scheduler (``tcp://host:8786``), or for a client the caller already
holds (borrowed: never closed here). What it creates it closes, also on errors.
"""

from __future__ import annotations

import importlib.util
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

DASK_HINT = "--workers needs the dask extra: pip install 'credrank[dask]'"
"""The message when ``distributed`` is not installed."""


class ClusterError(RuntimeError):
    """No Dask cluster to work on: the extra is missing or the scheduler cannot be reached."""


def dask_available() -> bool:
    """Whether ``distributed`` (the ``credrank[dask]`` extra) is installed."""
    return importlib.util.find_spec("distributed") is not None


def require_dask() -> None:
    """Raise :class:`ClusterError` with :data:`DASK_HINT` unless ``distributed`` is installed."""
    if not dask_available():
        raise ClusterError(DASK_HINT)


def check_cluster_options(workers: int, scheduler: str | None) -> None:
    """``workers`` >= 0, and not both a local cluster and a scheduler (``ValueError``)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"--workers: expected an integer >= 0, got {workers!r}")
    if scheduler is not None and workers:
        raise ValueError("--workers and --scheduler exclude each other: start a local cluster "
                         "of N workers, or use the running scheduler at ADDRESS")
    if scheduler is not None and not scheduler.strip():
        raise ValueError("--scheduler: expected a scheduler address such as "
                         "tcp://host:8786, got an empty string")


def wants_cluster(workers: int, scheduler: str | None) -> bool:
    """Whether the options ask for Dask at all (``--workers 0`` and no scheduler: no)."""
    return bool(workers) or scheduler is not None


@contextmanager
def dask_client(workers: int = 0, scheduler: Any = None, *, processes: bool = True,
                threads_per_worker: int = 1) -> Iterator[Any]:
    """A ``distributed.Client``: for ``scheduler`` (an address, or a ``Client`` you hold, which
    is yielded as is and left open) or else for a new ``LocalCluster`` of ``workers`` worker
    processes (``processes=False``: threads of this process) with one thread each, no dashboard.
    The cluster and client created here are closed when the block ends, also on errors."""
    if _is_client(scheduler):
        yield scheduler
        return
    check_cluster_options(workers, scheduler)
    if not wants_cluster(workers, scheduler):
        raise ValueError("dask_client: expected workers >= 1 or a scheduler address")
    require_dask()
    from distributed import Client, LocalCluster

    if scheduler is not None:
        try:
            client = Client(scheduler, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            raise ClusterError(f"--scheduler {scheduler}: cannot connect to a Dask scheduler "
                               f"there ({type(exc).__name__}: {exc})") from exc
        with client:
            yield client
        return
    with LocalCluster(n_workers=workers, threads_per_worker=threads_per_worker,
                      processes=processes, dashboard_address=None,
                      # no dashboard, and the scheduler's HTTP routes on a free local port
                      # (else it tries 8787 and warns when that is taken)
                      scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                      silence_logs=logging.ERROR) as cluster, \
            Client(cluster, set_as_default=False) as client:
        yield client


def _is_client(obj: Any) -> bool:
    if obj is None or isinstance(obj, str) or not dask_available():
        return False
    from distributed import Client

    return isinstance(obj, Client)
