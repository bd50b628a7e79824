"""A deadline for a request's line and headers (uvicorn has none: issue 37 N18).

uvicorn's ``timeout_keep_alive`` only covers an idle connection *between* requests and is
cancelled by the first byte that arrives, and no setting bounds the time a client takes to send
a request's headers (uvicorn issue #157, "--timeout-request-start", open), so a client sending
``POST /search HTTP/1.1\\r\\nHost: x\\r\\n`` and nothing more held a connection with no answer
for as long as it liked. :func:`with_header_deadline` subclasses uvicorn's HTTP protocol: from
the moment a connection opens, or a response completes, the next request's headers must be in
within ``seconds`` (``credrank serve --read-timeout``, the deadline its body already has:
:class:`~credrank.serve.limits.BodyLimitMiddleware`), else the connection answers 408 with a
JSON error body and is closed. A request whose headers are in is never touched (its body has
the body deadline, its work ``--timeout``). Each 408 sent so gets its access log line
(:mod:`credrank.serve.logs`: ``status`` 408, ``method`` and ``route`` null, as no headers came),
also where nothing of a request had come: a connection opened and left silent, or one idle
after an answer for longer than ``--read-timeout`` (uvicorn closes an idle connection silently
after its keep-alive of 5 s, so only a ``--read-timeout`` shorter than that sees this). What
the HTTP parser refuses gets a JSON 400 and its log line the same way (uvicorn answered plain
text and logged no request).

It reads the protocol's ``cycle`` (the request being answered; a new one once the headers of
a request are parsed), ``loop``, ``transport`` and ``on_response_complete``, which both of
uvicorn's HTTP/1.1 implementations (h11, httptools) have.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from typing import Any

from credrank.serve.logs import ACCESS_LOGGER
from credrank.serve.responses import dumps


def _answer(status: str, body: bytes, headers: Iterable[tuple[bytes, bytes]] = ()) -> bytes:
    """A whole HTTP/1.1 answer that closes its connection: the ``status`` line (``408 Request
    Timeout``), ``headers``, and the JSON ``body``."""
    head = [f"HTTP/1.1 {status}\r\n".encode("latin-1"),
            *(name + b": " + value + b"\r\n" for name, value in headers),
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
            "connection: close\r\n\r\n".encode("latin-1")]
    return b"".join(head) + body


def _logged(status: int, latency_ms: float, body: bytes) -> None:
    """The access log line of an answer the protocol gave before any app saw a request (no
    method, no route, no request body)."""
    logging.getLogger(ACCESS_LOGGER).info("request", extra={"fields": {
        "event": "request", "method": None, "route": None, "status": status,
        "latency_ms": latency_ms, "request_bytes": 0, "response_bytes": len(body)}})


def with_header_deadline(base: type[asyncio.Protocol], seconds: float
                         ) -> type[asyncio.Protocol]:
    """``base`` (a uvicorn HTTP protocol class) with the header deadline of the module
    docstring."""
    late = dumps({"error": "request_timeout",
                  "detail": f"the request headers did not arrive within {seconds:g} s "
                            "(--read-timeout); the connection is closed"})
    timeout_answer = _answer("408 Request Timeout", late)

    class HeaderDeadline(base):  # type: ignore[valid-type,misc]
        _deadline: asyncio.TimerHandle | None = None

        def _waiting(self) -> bool:
            """Whether the connection waits for a request's headers."""
            cycle = self.cycle
            return cycle is None or bool(cycle.response_complete)

        def _arm(self) -> None:
            self._disarm()
            if self._waiting() and not self.transport.is_closing():
                self._deadline = self.loop.call_later(seconds, self._expire)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self) -> None:
            self._deadline = None
            if self._waiting() and not self.transport.is_closing():
                self.transport.write(timeout_answer)
                self.transport.close()
                _logged(408, round(seconds * 1e3, 3), late)

        def send_400_response(self, msg: str) -> None:
            """What the HTTP parser refused (a negative ``Content-Length``, two of them, one
            beside ``Transfer-Encoding: chunked``): a JSON 400 and its access log line, as
            every other error (uvicorn's own answer is plain text and logs no request)."""
            bad = dumps({"error": "bad_request",
                         "detail": f"the request is not valid HTTP/1.1 ({msg.rstrip('.')}); "
                                   "the connection is closed"})
            if not self.transport.is_closing():
                self.transport.write(_answer("400 Bad Request", bad,
                                             self.server_state.default_headers))
                self.transport.close()
            _logged(400, 0.0, bad)

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._deadline is not None and not self._waiting():
                self._disarm()  # the request line and headers are in

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    HeaderDeadline.__name__ = HeaderDeadline.__qualname__ = f"HeaderDeadline{base.__name__}"
    return HeaderDeadline


__all__ = ["with_header_deadline"]
