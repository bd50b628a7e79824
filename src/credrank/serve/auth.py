"""The API key of the write endpoints, checked before anything reads the request body.

:class:`ApiKeyMiddleware` is an ASGI middleware: it looks at the path and the headers only, so
a write request without a key gets 401 and one with a wrong key 403 *whatever its body* —
malformed JSON, a wrong schema or an oversize body never reach validation first. The key is
sent as ``X-API-Key: KEY`` or ``Authorization: Bearer KEY`` and compared with
:func:`hmac.compare_digest` (constant time). A server started without a key has writes
disabled: every write answers 401 (no credentials) or 403 (credentials), saying so.

The route dependencies :data:`API_KEY_HEADER` and :data:`BEARER` only declare the two schemes
in ``/openapi.json``; the middleware is what enforces them.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from fastapi.security import APIKeyHeader, HTTPBearer
from starlette.types import ASGIApp, Receive, Scope, Send

from credrank.serve.config import guard_path, guarded_path
from credrank.serve.responses import send_error

API_KEY_HEADER = APIKeyHeader(name="X-API-Key", auto_error=False,
                              description="the key of --api-key-env")
BEARER = HTTPBearer(auto_error=False, description="the key of --api-key-env as a bearer token")

DISABLED = ("writes are disabled on this server: start `credrank serve` with --api-key-env VAR "
            "to enable them")
_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="credrank"'}


def presented_key(headers: Iterable[tuple[bytes, bytes]]) -> bytes | None:
    """The key a request presents: ``X-API-Key`` first, else an ``Authorization: Bearer``
    token; ``None`` when it presents neither (empty values count as absent)."""
    api_key = bearer = None
    for name, value in headers:
        if name == b"x-api-key" and api_key is None:
            api_key = value.strip()
        elif name == b"authorization" and bearer is None:
            scheme, _, token = value.strip().partition(b" ")
            if scheme.lower() == b"bearer":
                bearer = token.strip()
    return api_key or bearer or None


def check_key(expected: bytes | None, given: bytes | None) -> tuple[int, str, str] | None:
    """``None`` when ``given`` is the key, else ``(status, kind, detail)`` of the refusal."""
    if expected is None:
        if given is None:
            return 401, "unauthorized", DISABLED
        return 403, "forbidden", DISABLED
    if given is None:
        return 401, "unauthorized", ("this endpoint needs the API key: send it as "
                                     "'X-API-Key: KEY' or 'Authorization: Bearer KEY'")
    if not hmac.compare_digest(given, expected):
        return 403, "forbidden", "the API key is not valid"
    return None


class ApiKeyMiddleware:
    """Refuse requests to ``paths`` that do not present ``api_key`` (see the module
    docstring); ``api_key=None`` disables those paths."""

    def __init__(self, app: ASGIApp, api_key: str | None, paths: Iterable[str]) -> None:
        self.app = app
        self.expected = api_key.encode("utf-8") if api_key is not None else None
        self.paths = frozenset(guard_path(p) for p in paths)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and guarded_path(scope) in self.paths:
            refusal = check_key(self.expected, presented_key(scope["headers"]))
            if refusal is not None:
                status, kind, detail = refusal
                await send_error(send, status, kind, detail,
                                 _CHALLENGE if status == 401 else None)
                return
        await self.app(scope, receive, send)
