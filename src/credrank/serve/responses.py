"""JSON responses and error bodies shared by the app and its middleware."""

from __future__ import annotations

import json
import math
from datetime import date, datetime
from pathlib import Path
from typing import Any

import numpy as np
from starlette.responses import JSONResponse
from starlette.types import Send


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


def dumps(content: Any) -> bytes:
    """Compact UTF-8 JSON; numpy values as numbers; never ``NaN`` (non-finite → ``null``)."""
    try:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"),
                          default=_default)
    except ValueError:
        text = json.dumps(_finite(json.loads(json.dumps(content, default=_default))),
                          ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8")


class JSON(JSONResponse):
    """The service's JSON response (see :func:`dumps`)."""

    def render(self, content: Any) -> bytes:
        return dumps(content)


def error(status: int, kind: str, detail: str, *, errors: list[dict[str, Any]] | None = None,
          headers: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> JSON:
    """``{"error": kind, "detail": detail}`` plus ``errors`` (422) and ``extra`` keys (a 504's
    ``outcome``)."""
    body: dict[str, Any] = {"error": kind, "detail": detail}
    if errors is not None:
        body["errors"] = errors
    body.update(extra or {})
    return JSON(body, status_code=status, headers=headers)


async def send_error(send: Send, status: int, kind: str, detail: str,
                     headers: dict[str, str] | None = None) -> None:
    """Send an error response from a middleware (before the app has answered)."""
    body = dumps({"error": kind, "detail": detail})
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
