"""Request limits: body size (413), body read time (408) and time per request (504), each
answered as JSON naming the limit.

:class:`BodyLimitMiddleware` refuses a body announced larger than the limit
(``Content-Length``) before reading it, and counts the bytes of a streamed (chunked) body as
they arrive, refusing it as soon as the count passes the limit; a body that has not fully
arrived ``read_timeout_s`` after the request began to be read is cut with 408 and the
connection closed (declared policy: one deadline for the whole body, not per chunk, so a
client trickling bytes cannot hold a connection open). An accepted body is handed to the app
as it came.

:func:`run_limited` runs the blocking work of an endpoint in a worker thread with a
:class:`~credrank.serve.cancel.WorkToken` and answers 504 when it takes longer than the
limit. The 504 says what happened (its ``outcome``): a read is *cancelled* (its work stops at
its next check); a write that had not begun to commit is *not applied* (it never will be);
one whose commit had begun is awaited ``grace_s`` more: *applied* (the body carries its
``result``) or else *may still be applied*: with an ``Idempotency-Key``, the retry with the
same key answers the first request's outcome; without one the 504 says what the client can
do instead (:func:`unknown_outcome`).

:class:`CutShortMiddleware` answers a request the server cancels before it answered — uvicorn
cancels the requests still running when ``--graceful-timeout`` passes after SIGTERM — with a
JSON 503 saying so, where uvicorn would answer a plain-text 500 and log a traceback.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from concurrent.futures import Executor
from typing import Any, TypeVar
from urllib.parse import unquote_plus

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from credrank.serve.cancel import WorkToken
from credrank.serve.config import guard_path, guarded_path
from credrank.serve.responses import send_error

T = TypeVar("T")

#: the ``outcome`` of a 504: what the timed-out request did
CANCELLED = "cancelled"
NOT_APPLIED = "not applied"
APPLIED = "applied"
MAY_BE_APPLIED = "may still be applied"


def unknown_outcome(keyed: bool) -> str:
    """What a client can do about a write that *may still be applied*: retry with its
    ``Idempotency-Key`` (``keyed``), or, without one, what each write guarantees."""
    if keyed:
        return "retry with the same Idempotency-Key to learn the outcome"
    return ("it was sent without an Idempotency-Key, so its outcome cannot be asked for: "
            "POST /index may be sent again as it was (documents already stored with the same "
            "content are skipped), POST /feedback may not (it would count twice); send an "
            "Idempotency-Key with a write to retry it safely")


class LimitError(Exception):
    """A request passed a limit: ``status``, ``kind`` and ``detail`` of the JSON error;
    ``field`` (named in ``errors``), ``headers`` and ``extra`` body keys are optional."""

    def __init__(self, status: int, kind: str, detail: str, *, field: str | None = None,
                 headers: dict[str, str] | None = None,
                 extra: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.status, self.kind, self.detail = status, kind, detail
        self.field, self.headers, self.extra = field, headers, extra or {}


def too_large(limit: int) -> str:
    return (f"request body larger than the limit of {limit:,} bytes (--max-body-bytes); "
            "send fewer documents or candidates per request")


def too_slow(limit_s: float) -> str:
    return (f"the request body did not arrive within {limit_s:g} s (--read-timeout); the "
            "connection is closed")


def json_media_type(value: bytes | None) -> bool:
    """Whether a ``Content-Type`` header value is JSON (``application/json``, with or without
    parameters such as ``; charset=utf-8``, or a ``+json`` type)."""
    if value is None:
        return False
    media = value.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (media.startswith(b"application/")
                                            and media.endswith(b"+json"))


class JsonRequestMiddleware:
    """For a ``POST`` to ``paths``, whose request is its JSON body: 415 for a body not
    declared JSON (``Content-Type: application/json``; a JSON body sent as ``text/plain`` or a
    form is refused, not parsed), and 422 naming the parameter for a query string (``POST
    /search?top_k=5`` read nothing of it: the body's fields are the request). Decided from
    the request line and the headers, before the body is read."""

    def __init__(self, app: ASGIApp, paths: frozenset[str]) -> None:
        self.app, self.paths = app, frozenset(guard_path(p) for p in paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] == "http" and scope["method"] == "POST"
                and guarded_path(scope) in self.paths):
            value = next((v for k, v in scope["headers"] if k == b"content-type"), None)
            if not json_media_type(value):
                given = ("none" if value is None
                         else repr(value.decode("latin-1")[:80]))
                await send_error(send, 415, "unsupported_media_type",
                                 "Content-Type: expected application/json, got " + given)
                return
            if scope.get("query_string"):
                raw = scope["query_string"].decode("latin-1")
                name = unquote_plus(raw.split("&", 1)[0].split("=", 1)[0])[:80] or "query"
                await send_error(send, 422, "invalid_request",
                                 f"{name}: POST {guarded_path(scope)} reads no query "
                                 "parameters; send the request's fields in its JSON body",
                                 field=name)
                return
        await self.app(scope, receive, send)


class BodyLimitMiddleware:
    """413 for request bodies over ``max_bytes``, 408 for bodies slower than
    ``read_timeout_s`` (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_bytes: int, read_timeout_s: float | None = None
                 ) -> None:
        self.app, self.max_bytes, self.read_timeout_s = app, max_bytes, read_timeout_s

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
        # one deadline for the whole body: a timer of the loop that cancels this task, not a
        # task per receive() (asyncio.wait_for makes one: ≈ 0.03 ms of a cheap search)
        deadline = (None if self.read_timeout_s is None
                    else asyncio.get_running_loop().time() + self.read_timeout_s)
        chunks: list[bytes] = []
        size = 0
        try:
            async with asyncio.timeout_at(deadline):
                while size <= self.max_bytes:
                    message = await receive()
                    if message["type"] != "http.request":  # the client went away
                        return
                    chunk = message.get("body", b"")
                    size += len(chunk)
                    chunks.append(chunk)
                    if not message.get("more_body", False):
                        break
        except TimeoutError:
            assert self.read_timeout_s is not None
            await send_error(send, 408, "request_timeout", too_slow(self.read_timeout_s),
                             {"Connection": "close"})
            return
        if size > self.max_bytes:
            await send_error(send, 413, "too_large", too_large(self.max_bytes),
                             {"Connection": "close"})
            return
        body = b"".join(chunks)
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class CutShortMiddleware:
    """503 ``unavailable`` for a request cancelled before anything was answered (see the
    module docstring): a read was cancelled; a write (``write_paths``) was not applied when
    its body had not all arrived or its work was stopped before its commit began (what
    :func:`run_limited` says in the cancellation it raises), else it may have been, and the
    detail says how to learn it (:func:`unknown_outcome`). The connection is closed.
    The cancellation ends here: the request's task is over either way, and what it answered
    is in the access log."""

    def __init__(self, app: ASGIApp, write_paths: frozenset[str]) -> None:
        self.app, self.write_paths = app, frozenset(guard_path(p) for p in write_paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = arrived = False

        async def watched_receive() -> Message:
            nonlocal arrived
            message = await receive()
            arrived = arrived or (message["type"] == "http.request"
                                  and not message.get("more_body", False))
            return message

        async def watched_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, watched_receive, watched_send)
        except asyncio.CancelledError as exc:
            if started:
                raise  # part of an answer went out: the server closes the connection
            detail = "the server is shutting down and cut this request short"
            said = exc.args[0] if exc.args else None  # what run_limited knew of its work
            if guarded_path(scope) not in self.write_paths:
                detail += "; it was cancelled and changed nothing: send it again"
            elif not arrived or said == NOT_APPLIED:
                detail += (f"; the write is {NOT_APPLIED}: "
                           + ("its body had not all arrived" if not arrived else
                              "it was cancelled before it changed anything")
                           + " (send it again)")
            else:
                keyed = any(k == b"idempotency-key" for k, _ in scope["headers"])
                detail += f"; the write {MAY_BE_APPLIED}: {unknown_outcome(keyed)}"
            await send_error(send, 503, "unavailable", detail, {"Connection": "close"})


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Read a finished future's exception, so work that failed after its 504 logs nothing."""
    if not future.cancelled():
        future.exception()


def _checked(token: WorkToken, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        token.check("start")  # cancelled while it waited for a worker thread: never starts
        return func(*args, **kwargs)
    finally:
        if token.hook is not None:
            token.hook("end", token)


class ClientGone(Exception):
    """The client of a read went away while its work ran: the work was cancelled and nothing
    is answered (the access log says ``disconnect``)."""


async def _disconnected(receive: Receive) -> bool:
    """Whether the next message of ``receive`` (a request's, its body already read: an ASGI
    server answers it when the client leaves) says the client left; ``False`` for another
    message, after which the client is no longer watched."""
    return bool((await receive())["type"] == "http.disconnect")


async def _finished_within(future: asyncio.Future[Any], seconds: float,
                           sleep: Callable[[float], Awaitable[Any]],
                           gone: asyncio.Future[Any] | None = None) -> bool:
    """Whether ``future`` is done when ``sleep(seconds)`` ends, or ``gone`` (if given) is
    done, or before."""
    waited = {future} if gone is None else {future, gone}
    if sleep is asyncio.sleep:  # the real clock: a timer handle of the loop, not a task
        await asyncio.wait(waited, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        return future.done()
    timer = asyncio.ensure_future(sleep(seconds))
    try:
        await asyncio.wait({*waited, timer}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        timer.cancel()
    return future.done()


async def run_limited(executor: Executor, timeout_s: float, func: Callable[..., T],
                      *args: Any, token: WorkToken | None = None, write: bool = False,
                      grace_s: float = 5.0, keyed: bool = False,
                      on_done: Callable[[asyncio.Future[Any]], None] | None = None,
                      sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                      receive: Receive | None = None, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` on ``executor``; :class:`LimitError` 504 after ``timeout_s``
    with the outcome of the module docstring (``write``: the work commits through
    ``token``; ``keyed``: it came with an ``Idempotency-Key``). ``on_done(future)`` runs in
    the event loop when the work ends, even after a 504. ``sleep`` measures the limits (tests
    pass one they control).

    ``receive``: the request's (its body read), for a read only: when the client leaves before
    the work ends, the work is cancelled (it stops at its next check, as after a 504) and
    :class:`ClientGone` is raised. A write runs to its end whoever waits for it."""
    token = token or WorkToken()
    loop = asyncio.get_running_loop()
    future = loop.run_in_executor(executor, functools.partial(_checked, token, func, *args,
                                                              **kwargs))
    future.add_done_callback(_retrieve)
    if on_done is not None:
        future.add_done_callback(on_done)
    gone = None if receive is None or write else asyncio.ensure_future(_disconnected(receive))
    deadline = loop.time() + timeout_s
    try:
        finished = await _finished_within(future, timeout_s, sleep, gone)
        if not finished and gone is not None and gone.done():
            if not gone.cancelled() and gone.exception() is None and gone.result():
                token.cancel()
                raise ClientGone("the client went away: its work was cancelled")
            # the watch ended otherwise (a server's receive raised, or answered another
            # message): wait out the limit unwatched
            finished = await _finished_within(future, max(0.0, deadline - loop.time()), sleep)
        if finished:
            return future.result()  # the answer, or the work's own error
    except asyncio.CancelledError:  # the request itself was cancelled: so is its work
        stopped = token.cancel()  # before a write began to commit: it never will
        # what it did, for the answer of whoever cancelled it (:class:`CutShortMiddleware`)
        raise asyncio.CancelledError(
            CANCELLED if not write else NOT_APPLIED if stopped else MAY_BE_APPLIED) from None
    finally:
        if gone is not None:
            gone.cancel()
    limit = (f"the request took longer than the limit of {timeout_s:g} s per request "
             "(--timeout)")
    if token.cancel():
        if not write:
            raise LimitError(504, "timeout", f"{limit}; it was cancelled: its work stops at "
                             "its next stage and changes nothing", extra={"outcome": CANCELLED})
        raise LimitError(504, "timeout", f"{limit}; {NOT_APPLIED}: the write was cancelled "
                         "before it changed anything (send it again)",
                         extra={"outcome": NOT_APPLIED})
    # the write had begun to commit: give it the grace period to finish
    if not await _finished_within(future, grace_s, sleep):
        raise LimitError(504, "timeout", f"{limit}; the write had begun to commit and "
                         f"{MAY_BE_APPLIED}; {unknown_outcome(keyed)}",
                         extra={"outcome": MAY_BE_APPLIED})
    result = future.result()  # a write that failed raises its own error
    raise LimitError(504, "timeout", f"{limit}; {APPLIED}: the write completed after the "
                     "limit (its result is in 'result')",
                     extra={"outcome": APPLIED, "result": result})
