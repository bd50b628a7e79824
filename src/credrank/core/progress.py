"""Progress callbacks of the long library loops (audit, benches, fits, calibration).

A loop that takes long reports ``on_progress(done, total, label)``: ``done`` of ``total`` units
of the step named ``label`` (a step's ``total`` never changes, ``done`` rises from 0 to
``total``). Library code only calls the callback, it never prints: the command line turns the
reports into bars on stderr (:class:`credrank.cli.common.Bars`), shown only in a terminal.
Every callback is optional; ``None`` costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from contextlib import contextmanager
from typing import TypeVar

#: ``on_progress(done, total, label)``: ``done`` of ``total`` units of the step ``label``
OnProgress = Callable[[int, int, str], None]
#: ``on_count(done, total)``: the counter of one step
OnCount = Callable[[int, int], None]

T = TypeVar("T")


def step(on_progress: OnProgress | None, label: str) -> OnCount | None:
    """The ``(done, total)`` counter of the step ``label`` (``None`` when nobody listens)."""
    if on_progress is None:
        return None
    report = on_progress
    return lambda done, total: report(done, total, label)


def counted(items: Iterable[T], on_progress: OnProgress | None, label: str,
            total: int | None = None) -> Iterator[T]:
    """``items`` one by one, reporting ``(0, n)`` before the first and ``(i, n)`` once the
    caller asks for the item after the i-th (``n``: ``total``, else ``len(items)``)."""
    if on_progress is None:
        yield from items
        return
    n = total if total is not None else len(items) if isinstance(items, Sized) else 0
    on_progress(0, n, label)
    done = 0
    for item in items:
        yield item
        done += 1
        on_progress(min(done, n), n, label)


@contextmanager
def one_step(on_progress: OnProgress | None, label: str) -> Iterator[None]:
    """A step that is not counted inside: ``(0, 1)`` when it starts, ``(1, 1)`` when it ends
    (not when it fails)."""
    if on_progress is not None:
        on_progress(0, 1, label)
    yield
    if on_progress is not None:
        on_progress(1, 1, label)


class Counter:
    """The counter of one step: reports ``(0, total)`` when made, then ``(done, total)`` at
    each :meth:`add` (``done`` capped at ``total``); with ``on_count`` ``None`` it only
    counts."""

    def __init__(self, on_count: OnCount | None, total: int) -> None:
        self.done, self.total, self.on_count = 0, int(total), on_count
        if on_count is not None:
            on_count(0, self.total)

    def add(self, n: int = 1) -> None:
        self.done += n
        if self.on_count is not None:
            self.on_count(min(self.done, self.total), self.total)
