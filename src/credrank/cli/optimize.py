"""``credrank optimize``: build an index's search graph after a bulk load, with progress.

``credrank index --no-optimize`` leaves a large corpus searchable at once (exact search over
the loaded segments); this command builds the HNSW graph later, when the machine is free. It
holds the index's writer lock while it runs, like ``credrank index``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from credrank.cli.common import (
    LogProgress,
    ProgressLike,
    QuietOption,
    console,
    err,
    fail,
    progress,
    show_progress,
)
from credrank.index.opener import open_store
from credrank.index.store import (
    StoreError,
    VectorStore,
    document_count,
    no_index_error,
    read_manifest,
)


def build_graph(idx: VectorStore, label: str, show: bool = True) -> tuple[bool, float]:
    """``idx.optimize()`` with a heartbeat on stderr (the engine's count of indexed vectors;
    Qdrant Edge may report the full count before its graph is done, so no percentage is
    shown): a spinner in a terminal (``(5,455 of 10,914 vectors indexed)``), a plain line now
    and then in a log, its count the vectors indexed (``…, vectors indexed (of 10,914):
    5,455, 2,000.0/s, elapsed 0:03``; never spinner frames in a file), nothing with ``show``
    off; ``(did anything, seconds)``."""
    start = time.perf_counter()
    with _heartbeat(show) as bar:
        task = bar.add_task(f"{label}: building the search graph")

        def beat(indexed: int, total: int) -> None:
            if isinstance(bar, LogProgress):  # its line prints the count after the label
                bar.update(task, completed=indexed,
                           description=f"{label}: building the search graph, vectors "
                                       f"indexed (of {total:,})")
                return
            bar.update(task, description=f"{label}: building the search graph "
                                         f"({indexed:,} of {total:,} vectors indexed)")

        did = idx.optimize(on_progress=beat)
    return did, time.perf_counter() - start


def _heartbeat(show: bool) -> ProgressLike:
    """A spinner with the time elapsed in a terminal; elsewhere :func:`progress`'s lines."""
    if not (show and err.is_terminal):
        return progress(show)
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    return Progress(SpinnerColumn(), TextColumn("{task.description}", style="bold",
                                                markup=False),
                    TimeElapsedColumn(), console=err, transient=False)


def optimize(
    index_dir: Annotated[Path, typer.Option("--index", help="index directory")],
    quiet: QuietOption = False,
) -> None:
    """Build the search graph of DIR (after `credrank index --no-optimize`)."""
    if not index_dir.is_dir():
        fail(f"--index {index_dir}: no such index directory")
    try:
        manifest = read_manifest(index_dir)
        if manifest is None:
            raise no_index_error(index_dir)
        if manifest.engine != "edge":
            console.print(f"{index_dir}: engine {manifest.engine!r} builds its graphs itself; "
                          "nothing to do", soft_wrap=True)
            return
        idx = open_store(index_dir, create=True)  # a writer: the lock is exclusive
    except (ValueError, StoreError) as exc:
        fail(str(exc))
    with idx:
        try:
            did, seconds = build_graph(idx, index_dir.name, show_progress(quiet))
        except StoreError as exc:  # a disk too full to merge segments: nothing was changed
            fail(f"{exc}; the index is unchanged and searchable")
        size = document_count(idx)
    what = "optimised" if did else "the engine found nothing to optimise"
    console.print(f"{index_dir}: {what} in {seconds:.1f} s; index holds {size} documents",
                  soft_wrap=True)
