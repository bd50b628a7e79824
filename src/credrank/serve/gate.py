"""The concurrency limit of heavy requests: at most ``limit`` run at once, the next get 503.

A request is heavy when its estimated cost (:mod:`credrank.serve.cost`) reaches
``--heavy-cost`` (default :data:`~credrank.serve.cost.HEAVY_UNITS`). Declared policy: a
heavy request that finds ``limit`` heavy requests running is refused at once with 503 and
``Retry-After`` (seconds); it never queues (a queue would hold its body in memory and its
client past the time limit).
A slot is held until the request's *work* ends, not its answer: work still running after a
504 (until its next cancellation check) keeps its slot. ``limit=0`` turns the limit off.
"""

from __future__ import annotations

import threading

from credrank.serve.limits import LimitError

#: the ``Retry-After`` seconds a refused heavy request is told to wait
RETRY_AFTER_S = 1


class HeavyGate:
    """Slots for heavy requests (see the module docstring); thread-safe."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.running = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        """Take a slot, or raise :class:`LimitError` 503 with ``Retry-After``."""
        with self._lock:
            if self.limit and self.running >= self.limit:
                raise LimitError(
                    503, "unavailable",
                    f"the server is running its limit of {self.limit} heavy requests at once "
                    f"(--max-heavy-requests); retry after {RETRY_AFTER_S} s, or send a "
                    "cheaper request (fewer candidates, a smaller fetch_k, select mmr)",
                    headers={"Retry-After": str(RETRY_AFTER_S)})
            self.running += 1

    def leave(self) -> None:
        with self._lock:
            self.running -= 1
