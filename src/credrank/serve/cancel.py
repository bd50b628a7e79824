"""Cancelling a request's work when its time is up, and telling truthfully what a write did.

Python cannot stop a thread. A request's work therefore carries a :class:`WorkToken` and looks
at it between stages (:meth:`WorkToken.check`): before it starts, before each embedding call
(:class:`CheckedEmbedder`) and between the stages of its pipeline.
When the request times out, the service calls :meth:`WorkToken.cancel`; the work raises
:class:`Cancelled` at its next check and its memory is released as the exception unwinds.
A stage already running (one MILP solve, one embedding batch) finishes first; the coverage
solver's own ``time_limit`` is capped by the request's time limit.

A write first does everything that has no effect (validation, embedding), then calls
:meth:`WorkToken.begin_commit` right before its first change. ``cancel`` and ``begin_commit``
are one handshake under a lock: exactly one of them wins. So when a write times out either
``cancel`` wins (the write never changes anything: *not applied*) or the commit had begun
(the service waits a grace period for it: *applied*, or *may still be applied*).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: a test-only observer of the work's checkpoints: ``hook(point, token)``
Hook = Callable[[str, "WorkToken"], None]

PENDING, COMMITTING, CANCELLED = "pending", "committing", "cancelled"


class Cancelled(Exception):
    """The request was cancelled (timed out) before this point of its work."""


class WorkToken:
    """The cancel flag of one request's work and its commit handshake (module docstring).

    ``hook`` (tests only) is called at every checkpoint with its name (``start``, ``embed``,
    ``store``, ``stage:NAME``, ``done``, ``before_commit``, ``commit``) and the token, before
    the flag is read, and with ``end`` when the work returns or raises, so a test can hold
    the work at a known point, or wait for its end, without sleeping.
    """

    def __init__(self, hook: Hook | None = None) -> None:
        self._state = PENDING
        self._lock = threading.Lock()
        self.hook = hook
        self.cancel_requested = threading.Event()

    @property
    def state(self) -> str:
        return self._state

    def cancel(self) -> bool:
        """Stop the work at its next check; ``True`` unless its commit had already begun."""
        self.cancel_requested.set()
        with self._lock:
            if self._state == PENDING:
                self._state = CANCELLED
            return self._state == CANCELLED

    def check(self, point: str) -> None:
        """:class:`Cancelled` when the request has been cancelled."""
        if self.hook is not None:
            self.hook(point, self)
        if self._state == CANCELLED:
            raise Cancelled(point)

    def begin_commit(self) -> None:
        """Mark the start of the write's first change; :class:`Cancelled` (and nothing may
        be changed) when the request was cancelled first."""
        if self.hook is not None:
            self.hook("before_commit", self)
        with self._lock:
            if self._state == CANCELLED:
                raise Cancelled("commit")
            self._state = COMMITTING
        if self.hook is not None:
            self.hook("commit", self)


class CheckedEmbedder:
    """An embedder that checks the token before each call (other attributes: the inner
    embedder's, so length measures and names are unchanged)."""

    def __init__(self, inner: Any, token: WorkToken) -> None:
        self.inner, self.token = inner, token

    @property
    def name(self) -> str:
        return str(self.inner.name)

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.token.check("embed")
        return self.inner.embed(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
