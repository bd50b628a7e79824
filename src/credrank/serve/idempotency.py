"""Idempotent writes: the outcome of each write by its client-supplied ``Idempotency-Key``.

Convention: a write (``POST /index``, ``/feedback``, ``/priors/rollback``) may carry the
header ``Idempotency-Key: KEY`` (1 to 200 visible ASCII characters, chosen by the client,
unique per intended write). Keys are scoped per route. Declared policy:

* the first request with a key runs; while it runs, a retry with the key waits for it (up to
  the time limit) and then answers its outcome;
* a write that took effect is remembered: a retry answers the first answer's body again,
  with the header ``Idempotent-Replayed: true``, and applies nothing;
* a write that took no effect (refused with 4xx, or cancelled by its time limit: 504 *not
  applied*) is forgotten: a retry runs it as new;
* the same key with a different body is refused with 422 naming ``Idempotency-Key``.

This memory (:class:`IdempotencyKeys`) is the server process's: the last ``size`` keys
(default :data:`~credrank.serve.config.DEFAULT_IDEMPOTENCY_KEYS`) and at most ``max_bytes``
of remembered answers, least recently used dropped first. The feedback store also keeps the
key of every version it made (:mod:`credrank.signals.feedback`, its last 10,000), so
``/feedback`` and ``/priors/rollback`` are not applied twice across restarts either; a
re-sent ``/index`` after a restart re-indexes nothing (content hashes: its documents are
``unchanged``), though its answer then counts them as unchanged rather than indexed.

Everything here runs on the event loop's thread (no locks).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

#: the header a write's key comes in, and the one a replayed answer carries
HEADER = "Idempotency-Key"
REPLAYED_HEADER = "Idempotent-Replayed"
#: what a key may be: 1 to 200 visible ASCII characters
PATTERN = r"^[!-~]{1,200}$"


def canonical(content: Any) -> str:
    """A request body as canonical JSON text: keys sorted at every level (a retry whose
    serialiser orders an object's keys otherwise is the same request), ASCII with escapes (a
    lone surrogate in a text is written, not an error: the record is the reader's to refuse)."""
    return json.dumps(content, sort_keys=True, ensure_ascii=True, separators=(",", ":"))


def fingerprint(body: str) -> str:
    """The digest a key's first request is remembered by (of its :func:`canonical` body)."""
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass(eq=False)
class Remembered:
    """One key's write: in flight until ``done`` is set; ``body`` is its answer when it
    took effect (``None``: it is running, or it ended without effect)."""

    fingerprint: str
    done: asyncio.Event = field(default_factory=asyncio.Event)
    body: bytes | None = None


class IdempotencyKeys:
    """Writes by ``(route, key)``: in flight, or finished with effect (LRU, bounded)."""

    def __init__(self, size: int, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.size, self.max_bytes = size, max_bytes
        self._running: dict[tuple[str, str], Remembered] = {}
        self._done: OrderedDict[tuple[str, str], Remembered] = OrderedDict()
        self._bytes = 0

    def get(self, route: str, key: str) -> Remembered | None:
        entry = self._running.get((route, key))
        if entry is None:
            entry = self._done.get((route, key))
            if entry is not None:
                self._done.move_to_end((route, key))
        return entry

    def start(self, route: str, key: str, digest: str) -> Remembered:
        entry = Remembered(digest)
        self._running[(route, key)] = entry
        return entry

    def finish(self, route: str, key: str, entry: Remembered, body: bytes) -> None:
        """The write took effect and answered ``body``: remember it."""
        if self._running.get((route, key)) is entry:
            del self._running[(route, key)]
        entry.body = body
        entry.done.set()
        if self.size <= 0 or len(body) > self.max_bytes:
            return
        self._done[(route, key)] = entry
        self._bytes += len(body)
        while len(self._done) > self.size or self._bytes > self.max_bytes:
            _, old = self._done.popitem(last=False)
            self._bytes -= len(old.body or b"")

    def forget(self, route: str, key: str, entry: Remembered) -> None:
        """The write ended without effect: a retry runs it again."""
        if self._running.get((route, key)) is entry:
            del self._running[(route, key)]
        entry.done.set()

    def __len__(self) -> int:
        return len(self._done)
