"""Cancelling a request's work when its time is up, and telling truthfully what a write did.

Python cannot stop a thread. A request's work therefore carries a :class:`WorkToken` and looks
at it between stages (:meth:`WorkToken.check`): before it starts, before each embedding call
(:class:`RequestEmbedder`) and between the stages of its pipeline.
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from credrank.index.ingest import EMBED_BATCH

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
    the work at a known point, or wait for its end, without sleeping; such a hook may wait
    for ``cancel_requested``, set when the request is cancelled (a token without a hook has
    none: an event costs ≈ 2 µs, and every request makes a token).
    """

    def __init__(self, hook: Hook | None = None) -> None:
        self._state = PENDING
        self._lock = threading.Lock()
        self.hook = hook
        self.cancel_requested = threading.Event() if hook is not None else None

    @property
    def state(self) -> str:
        return self._state

    def cancel(self) -> bool:
        """Stop the work at its next check; ``True`` unless its commit had already begun."""
        if self.cancel_requested is not None:
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


class RequestEmbedder:
    """The served searcher's embedder: every call checks the :class:`WorkToken` of the request
    whose worker thread makes it (:meth:`working`) and embeds at most :data:`EMBED_BATCH`
    texts at a time, so a large request is cancelled between batches rather than after all of
    them. Compiled pipelines are kept across requests (:meth:`Searcher.compile
    <credrank.searcher.Searcher.compile>`); their stages embed through this object, whichever
    request runs them. Other attributes are the inner embedder's (names, length measures)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name: str = str(inner.name)
        self.dim: int = int(inner.dim)
        self._local = threading.local()

    @contextmanager
    def working(self, token: WorkToken | None) -> Iterator[None]:
        """Calls from this thread check ``token`` until the block ends (``None``: none)."""
        self._local.token = token
        try:
            yield
        finally:
            self._local.token = None

    def _check(self) -> None:
        token = getattr(self._local, "token", None)
        if token is not None:
            token.check("embed")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) <= EMBED_BATCH:
            self._check()
            return self.inner.embed(texts)
        parts = []
        for s in range(0, len(texts), EMBED_BATCH):
            self._check()
            parts.append(self.inner.embed(texts[s:s + EMBED_BATCH]))
        return np.concatenate(parts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
