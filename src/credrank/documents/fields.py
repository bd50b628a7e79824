"""Field checks shared by every corpus, query and qrels reader.

Each check returns the parsed value or the reason it was refused (``expected …, got …``); the
policies they apply (ids, dates, cites, encoding, numbers, payload bounds) are listed in the
docstring of :mod:`credrank.documents.readers`. Nothing here reads a file: the record
iterators are in :mod:`credrank.documents.formats`, the file helpers in
:mod:`credrank.documents.files`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

from credrank.core.structured import json_too_deep
from credrank.core.validation import is_integer

__all__ = [
    "EXCERPT",
    "MAX_EXTRA_BYTES",
    "MAX_FIELD_DEPTH",
    "SHOWN",
    "cites_value",
    "date_value",
    "excerpt",
    "got",
    "has_surrogate",
    "id_value",
    "json_kind",
    "json_size",
    "listing",
    "nonfinite",
    "strict_loads",
    "unicode_problem",
]

#: characters of a record kept in a reject's excerpt (``…`` marks a cut)
EXCERPT = 200
#: rejects or bad lines listed in an error message before ``... and N more``
SHOWN = 10
MAX_FIELD_DEPTH = 32
"""Most levels of nested lists/objects in one field's value (a scalar is 0 levels)."""
MAX_EXTRA_BYTES = 64 * 1024
"""Most bytes of UTF-8 JSON one unknown (``Document.extra``) field may serialize to."""


def excerpt(text: str) -> str:
    """``text`` as printable UTF-8 (bad bytes and lone surrogates replaced), line ending
    stripped, cut to :data:`EXCERPT` characters."""
    clean = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    clean = clean.encode("utf-8", "replace").decode("utf-8")  # lone \ud800-style surrogates
    clean = clean.rstrip("\r\n")
    return clean if len(clean) <= EXCERPT else clean[:EXCERPT] + "…"


def listing(head: str, lines: list[str], limit: int) -> str:
    """``head``, then the first ``limit`` of ``lines`` indented, then ``... and N more``."""
    shown = lines[:max(limit, 0)]
    more = len(lines) - len(shown)
    body = "\n".join(f"  {m}" for m in shown)
    return head + (":\n" + body if body else "") + (f"\n  ... and {more} more" if more else "")


# --------------------------------------------------------------------------- strict JSON

def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(s: str) -> float:
    x = float(s)
    if not math.isfinite(x):
        raise ValueError(f"number {s} is out of range")
    return x


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float,
                            object_pairs_hook=_pairs)


def strict_loads(text: str) -> Any:
    """Strict JSON: no NaN/Infinity, no non-finite numbers, no repeated keys."""
    return _DECODER.decode(text)


def json_kind(v: Any) -> str:
    """The JSON name of a parsed value's type (``array``, ``string``, ``number`` …)."""
    if isinstance(v, list):
        return "array"
    return {str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(v), "null" if v is None else type(v).__name__)


# --------------------------------------------------------------------------- encoding

def has_surrogate(s: str) -> bool:
    """Whether ``s`` holds a surrogate (a bad byte decoded with ``surrogateescape``, or a lone
    ``\\ud800``-style escape), so it cannot be stored as UTF-8."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def unicode_problem(rec: Mapping[str, Any], bad_bytes: bool) -> tuple[str, str] | None:
    """First key or string value that is not valid Unicode, as (field path, reason)."""

    def reason(s: str) -> str:
        ch = next(c for c in s if 0xD800 <= ord(c) <= 0xDFFF)
        if bad_bytes and 0xDC80 <= ord(ch) <= 0xDCFF:
            return f"expected UTF-8 text, got invalid byte 0x{ord(ch) - 0xDC00:02x}"
        return f"expected valid Unicode, got a lone surrogate U+{ord(ch):04X}"

    def walk(path: str, v: Any) -> tuple[str, str] | None:
        if isinstance(v, str):
            return (path, reason(v)) if has_surrogate(v) else None
        if isinstance(v, list):
            for i, x in enumerate(v):
                if (found := walk(f"{path}[{i}]", x)) is not None:
                    return found
        elif isinstance(v, dict):
            for k, x in v.items():
                sub = f"{path}.{excerpt(k)}"
                if has_surrogate(k):
                    return sub, reason(k)
                if (found := walk(sub, x)) is not None:
                    return found
        return None

    for k, v in rec.items():
        if has_surrogate(k):
            return excerpt(k), reason(k)
        if (found := walk(k, v)) is not None:
            return found
    return None


# --------------------------------------------------------------------------- values

def got(v: Any) -> str:
    """What came, for a message's ``got …``: ``nothing``, or the kind and a short repr."""
    if v is None:
        return "nothing"
    kind = {str: "", bool: "boolean ", int: "integer ", float: "number ", dict: "object ",
            list: "list "}.get(type(v), f"{type(v).__name__} ")
    text = repr(v)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind}{text}"


def id_value(v: Any) -> tuple[str | None, str | None]:
    """``(id, None)`` for a non-empty string or an integer (as its decimal string; a boolean
    is not an id), else ``(None, reason)``."""
    if is_integer(v):  # True is not an id
        return str(v), None
    if isinstance(v, str):
        if v.strip():
            return v, None
        return None, f"expected a non-empty id, got {v!r}"
    if v is None:
        return None, "expected a non-empty id (string or integer), got nothing"
    return None, f"expected a string or integer id, got {got(v)}"


def _in_utc(dt: datetime, shown: str) -> tuple[datetime | None, str | None]:
    """``dt`` in UTC, or the reason it has no UTC instant within years 1–9999
    (``0001-01-01T00:00:00+14:00`` is in year 0 in UTC)."""
    try:
        return dt.astimezone(UTC), None
    except (OverflowError, ValueError):
        return None, (f"expected a date that stays within years 1–9999 in UTC, got {shown} "
                      "(out of range once its time zone is applied)")


def date_value(v: Any) -> tuple[datetime | None, str | None]:
    """``(datetime in UTC, None)`` for an ISO 8601 date with timezone (a date-only value is
    midnight UTC), else ``(None, reason)``."""
    expected = "expected ISO 8601 date with timezone"
    if isinstance(v, datetime):
        if v.tzinfo is None or v.utcoffset() is None:
            return None, f"{expected}, got {v.isoformat()!r} (timezone missing)"
        return _in_utc(v, repr(v.isoformat()))
    if isinstance(v, date):
        return datetime(v.year, v.month, v.day, tzinfo=UTC), None
    if not isinstance(v, str):
        return None, f"{expected}, got {got(v)}"
    s = v.strip()
    try:
        d = date.fromisoformat(s)
        return datetime(d.year, d.month, d.day, tzinfo=UTC), None
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(s)
    except ValueError:
        return None, f"{expected}, got {v!r}"
    if dt.tzinfo is None:
        return None, f"{expected}, got {v!r} (timezone missing)"
    return _in_utc(dt, repr(v))


def cites_value(v: Any, cells: bool) -> tuple[tuple[str, ...], tuple[str, str] | None]:
    """Parsed cites, or ('', reason) / ('[i]', reason) for the first problem."""
    if v is None:
        return (), None
    if cells and isinstance(v, str):
        s = v.strip()
        if s.startswith("["):
            if json_too_deep(s, MAX_FIELD_DEPTH):
                return (), ("", f"expected nesting at most {MAX_FIELD_DEPTH} levels deep, "
                                "got deeper")
            try:
                v = strict_loads(s)
            except (ValueError, RecursionError) as e:
                return (), ("", f"expected a JSON list or '|'-separated ids, got "
                                f"{excerpt(s)!r} ({e})")
        else:
            return tuple(x.strip() for x in s.split("|") if x.strip()), None
    if not isinstance(v, list | tuple):
        return (), ("", f"expected a list of id strings, got {got(v)}")
    out = []
    for i, x in enumerate(v):
        xid, err = id_value(x)
        if err is not None:
            return (), (f"[{i}]", err)
        assert xid is not None
        out.append(xid)
    return tuple(out), None


def json_size(v: Any) -> int:
    """Bytes of ``v`` as UTF-8 JSON (as stored in the payload)."""
    if v is None or isinstance(v, bool | int | float):
        return 8
    if isinstance(v, str) and len(v) * 4 <= MAX_EXTRA_BYTES:
        return len(v) * 4  # cheap upper bound: short strings always fit
    text = json.dumps(v, ensure_ascii=False, default=str)
    return len(text.encode("utf-8", "surrogatepass"))


def nonfinite(v: Any) -> str | None:
    """The reason a value holds a non-finite float (at any depth), else ``None``."""
    if isinstance(v, float) and not math.isfinite(v):
        return f"expected a finite number or null, got {v!r}"
    if isinstance(v, list | tuple):
        for x in v:
            if (r := nonfinite(x)) is not None:
                return r
    if isinstance(v, dict):
        for x in v.values():
            if (r := nonfinite(x)) is not None:
                return r
    return None
