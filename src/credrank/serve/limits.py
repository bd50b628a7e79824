"""Request limits: body size (413) and time per request (504), each answered as JSON naming
the limit.

:class:`BodyLimitMiddleware` refuses a body announced larger than the limit
(``Content-Length``) before reading it, and counts the bytes of a streamed (chunked) body as
they arrive, refusing it as soon as the count passes the limit; an accepted body is handed to
the app as it came. :func:`run_limited` runs the blocking work of an endpoint in a worker
thread and answers 504 when it takes longer than the limit (Python cannot interrupt a thread:
the work finishes in the background and its result is dropped).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import Executor
from typing import Any, TypeVar

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from credrank.serve.responses import send_error

T = TypeVar("T")


class LimitError(Exception):
    """A request passed a limit: ``status``, ``kind`` and ``detail`` of the JSON error."""

    def __init__(self, status: int, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.status, self.kind, self.detail = status, kind, detail


def too_large(limit: int) -> str:
    return (f"request body larger than the limit of {limit:,} bytes (--max-body-bytes); "
            "send fewer documents or candidates per request")


class BodyLimitMiddleware:
    """413 for request bodies over ``max_bytes`` (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope["headers"]:
            if name == b"content-length":
                try:
                    announced = int(value)
                except ValueError:
                    announced = 0  # the HTTP layer has already refused a bad header
                if announced > self.max_bytes:
                    await send_error(send, 413, "too_large", too_large(self.max_bytes),
                                     {"Connection": "close"})
                    return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await send_error(send, 413, "too_large", too_large(self.max_bytes),
                                 {"Connection": "close"})
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def run_limited(executor: Executor, timeout_s: float, func: Callable[..., T],
                      *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` on ``executor``; :class:`LimitError` 504 after ``timeout_s``."""
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(executor, functools.partial(func, *args, **kwargs))
    try:
        return await asyncio.wait_for(future, timeout_s)
    except TimeoutError:
        raise LimitError(504, "timeout", f"the request took longer than the limit of "
                                         f"{timeout_s:g} s per request (--timeout); it was "
                                         "not completed") from None
