"""Cancellation checkpoints inside long stages.

The run loop (:meth:`credrank.searcher.Searcher.run`) checks a request's cancellation between
stages; a stage whose own work grows faster than its pool (the planted defence's graph, answer
consensus, a PageRank iteration) also calls :func:`checkpoint` inside its loops, so a request
that timed out stops within one block of that work instead of at the next stage. Outside a
checked run (the library, the CLI, tests) :func:`checkpoint` does nothing.

The check is the run's ``check`` callable (the service's
:meth:`~credrank.serve.cancel.WorkToken.check`: it raises to stop the work), kept in a
:class:`contextvars.ContextVar`, so concurrent requests in other threads keep their own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_CHECK: ContextVar[Callable[[str], None] | None] = ContextVar("credrank_check", default=None)


@contextmanager
def checking(check: Callable[[str], None] | None) -> Iterator[None]:
    """Calls to :func:`checkpoint` in this context call ``check`` until the block ends."""
    token = _CHECK.set(check)
    try:
        yield
    finally:
        _CHECK.reset(token)


def checkpoint(stage: str) -> None:
    """Call the run's check with ``within:STAGE`` (it raises when the work is cancelled);
    nothing outside a checked run."""
    check = _CHECK.get()
    if check is not None:
        check(f"within:{stage}")
