"""JSON responses and error bodies shared by the app and its middleware.

Every answer is serialised once, by :func:`dumps` — orjson (the ``serve`` extra), with the
standard library for what orjson refuses (integers beyond 64 bits, non-string keys, text with
lone surrogates) — into compact UTF-8 JSON without ``NaN`` (non-finite numbers are ``null``).
``/search``, ``/rerank`` and ``GET /priors`` serialise in their worker thread (:class:`Rendered`),
so the event loop only sends the bytes.
"""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np
import orjson
from starlette.responses import JSONResponse
from starlette.types import Send

#: what :func:`dumps` serialises with (benchmarks print it)
JSON_LIBRARY = f"orjson {orjson.__version__}"
#: datetimes and dataclasses through :func:`_default`, as the standard library path writes
#: them (``isoformat()``); numpy values too (``.item()``: a float32 is written as the float64
#: it widens to, not in float32's shortest form)
_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Path):
        return str(value)
    return str(value)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by ``None`` (JSON has no NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _stdlib_dumps(content: Any) -> bytes:
    """:func:`dumps` with the standard library (what orjson cannot write)."""
    try:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                          default=_default)
    except ValueError:
        text = json.dumps(_finite(json.loads(json.dumps(content, default=_default))),
                          ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: said as its escape
        return json.dumps(json.loads(text), ensure_ascii=True, allow_nan=False,
                          separators=(",", ":")).encode("ascii")


def dumps(content: Any) -> bytes:
    """Compact UTF-8 JSON; numpy values as numbers; never ``NaN`` (non-finite → ``null``)."""
    try:
        return orjson.dumps(content, default=_default, option=_OPTIONS)
    except orjson.JSONEncodeError:
        return _stdlib_dumps(content)


class Rendered(bytes):
    """A document already serialised by :func:`dumps` (in the worker thread that built it):
    :class:`JSON` sends it as it is."""

    @classmethod
    def of(cls, content: Any) -> Rendered:
        return cls(dumps(content))


class JSON(JSONResponse):
    """The service's JSON response (see :func:`dumps`; :class:`Rendered` bytes as they are)."""

    def render(self, content: Any) -> bytes:
        return content if isinstance(content, Rendered) else dumps(content)


def error(status: int, kind: str, detail: str, *, errors: list[dict[str, Any]] | None = None,
          headers: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> JSON:
    """``{"error": kind, "detail": detail}`` plus ``errors`` (422) and ``extra`` keys (a 504's
    ``outcome``)."""
    body: dict[str, Any] = {"error": kind, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    body.update(extra or {})
    return JSON(body, status_code=status, headers=headers)


def field_errors(field: str, detail: str, kind: str) -> list[dict[str, Any]]:
    """The ``errors`` of an error about one request field, as every 422 names its field."""
    return [{"field": field, "loc": [field], "msg": detail, "type": kind}]


async def send_error(send: Send, status: int, kind: str, detail: str,
                     headers: dict[str, str] | None = None, *, field: str | None = None
                     ) -> None:
    """Send an error response from a middleware (before the app has answered); ``field``: the
    request field it names, in ``errors`` as the app's 422s name theirs."""
    content: dict[str, Any] = {"error": kind, "detail": detail}
    if field is not None:
        content["errors"] = field_errors(field, detail, kind)
    body = dumps(content)
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
