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
from typing import Any

from credrank.serve.logs import ACCESS_LOGGER
from credrank.serve.responses import dumps


def _timeout_response(seconds: float) -> tuple[bytes, bytes]:
    """The 408's head and body."""
    body = dumps({"error": "request_timeout",
                  "detail": f"the request headers did not arrive within {seconds:g} s "
                            "(--read-timeout); the connection is closed"})
    head = ("HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n")
    return head.encode("latin-1"), body


def with_header_deadline(base: type[asyncio.Protocol], seconds: float
                         ) -> type[asyncio.Protocol]:
    """``base`` (a uvicorn HTTP protocol class) with the header deadline of the module
    docstring."""
    head, body = _timeout_response(seconds)
    access = logging.getLogger(ACCESS_LOGGER)

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
                self.transport.write(head + body)
                self.transport.close()
                access.info("request", extra={"fields": {
                    "event": "request", "method": None, "route": None, "status": 408,
                    "latency_ms": round(seconds * 1e3, 3), "request_bytes": 0,
                    "response_bytes": len(body)}})

        def send_400_response(self, msg: str) -> None:
            """What the HTTP parser refused (a negative ``Content-Length``, two of them, one
            beside ``Transfer-Encoding: chunked``): a JSON 400 and its access log line, as
            every other error (uvicorn's own answer is plain text and logs no request)."""
            bad = dumps({"error": "bad_request",
                         "detail": f"the request is not valid HTTP/1.1 ({msg.rstrip('.')}); "
                                   "the connection is closed"})
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            head += [name + b": " + value + b"\r\n"
                     for name, value in self.server_state.default_headers]
            head += [b"content-type: application/json\r\n",
                     b"content-length: " + str(len(bad)).encode("ascii") + b"\r\n",
                     b"connection: close\r\n\r\n"]
            if not self.transport.is_closing():
                self.transport.write(b"".join(head) + bad)
                self.transport.close()
            access.info("request", extra={"fields": {
                "event": "request", "method": None, "route": None, "status": 400,
                "latency_ms": 0.0, "request_bytes": 0, "response_bytes": len(bad)}})

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
