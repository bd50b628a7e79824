"""Field checks shared by every corpus, query and qrels reader.

Each check returns the parsed value or the reason it was refused (``expected …, got …``); the
policies they apply (ids, dates, cites, encoding, numbers, payload bounds) are listed in the
docstring of :mod:`credrank.documents.readers`. Nothing here reads a file: the record
iterators are in :mod:`credrank.documents.formats`, the file helpers in
:mod:`credrank.documents.files`.
"""

from __future__ import annotations

import calendar
import json
import math
import re
from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from credrank.core.structured import json_too_deep
from credrank.core.validation import is_integer

__all__ = [
    "DATE_ORDERS",
    "EXCERPT",
    "MAX_EXTRA_BYTES",
    "MAX_FIELD_DEPTH",
    "SHOWN",
    "cites_value",
    "date_order_value",
    "date_value",
    "excerpt",
    "flag_value",
    "got",
    "has_surrogate",
    "id_value",
    "json_kind",
    "json_size",
    "lenient_date_value",
    "listing",
    "nonfinite",
    "numeric_day_month",
    "strict_loads",
    "timezone_value",
    "unicode_problem",
    "zone_name",
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
            return f"expected UTF-8 text, got the byte 0x{ord(ch) - 0xDC00:02x}"
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


def url_credentials(url: str) -> str | None:
    """Why ``url`` may not be stored, or ``None``: a user name or password in it
    (``https://user:secret@host/…``) is a credential, which the index would store and every
    answer return (``hits[].url``). The message shows the URL with them masked."""
    head, sep, rest = url.partition("://")
    # the authority ends at the path, query or fragment (a backslash is a slash, as for
    # browsers and :mod:`credrank.provenance`: ``https://a.org\\@b.org/`` is a.org's path)
    authority = re.split(r"[/\\?#]", rest, maxsplit=1)[0] if sep else ""
    if "@" not in authority:
        return None
    masked = f"{head}://***@{rest[authority.rindex('@') + 1:]}"  # all of the user info
    return (f"expected a URL without a user name or password (a credential, stored and "
            f"returned with every hit), got {got(masked)}; remove them from the URL")


def id_value(v: Any) -> tuple[str | None, str | None]:
    """``(id, None)`` for a non-empty string without NUL or an integer (as its decimal
    string; a boolean is not an id), else ``(None, reason)``."""
    if is_integer(v):  # True is not an id
        return str(v), None
    if isinstance(v, str):
        if "\x00" in v:  # the separator of a passage's key (doc id, NUL, its number)
            return None, f"expected an id without a NUL character, got {v[:60]!r}"
        if v.strip():
            return v, None
        return None, f"expected a non-empty id, got {v!r}"
    if v is None:
        return None, "expected a non-empty id (string or integer), got nothing"
    return None, f"expected a string or integer id, got {got(v)}"


def _in_utc(dt: datetime, shown: str) -> tuple[datetime | None, str | None]:
    """``dt`` in UTC, or the reason it has none: a UTC offset of a day or more (``+25:00``,
    which Python's datetime refuses), or no UTC instant within years 1–9999
    (``0001-01-01T00:00:00+14:00`` is in year 0 in UTC)."""
    try:
        dt.utcoffset()
    except ValueError:  # the offset is not strictly between -24 h and +24 h
        return None, f"expected a UTC offset between -23:59 and +23:59, got {shown}"
    try:
        return dt.astimezone(UTC), None
    except (OverflowError, ValueError):
        return None, (f"expected a date that stays within years 1–9999 in UTC, got {shown} "
                      "(out of range once its time zone is applied)")


def _in_zone(dt: datetime, zone: tzinfo, shown: str) -> tuple[datetime | None, str | None]:
    """A wall time without an offset (``dt`` naive) read in ``zone``, in UTC; refused, never
    guessed, where the zone's clocks make it ambiguous (a time of the hour repeated when the
    clocks went back: two instants) or absent (the hour skipped when they went forward)."""
    early, late = dt.replace(tzinfo=zone, fold=0), dt.replace(tzinfo=zone, fold=1)
    try:
        offsets = early.utcoffset(), late.utcoffset()
    except (OverflowError, ValueError):
        return _in_utc(early, shown)
    if offsets[0] != offsets[1]:
        name = zone_name(zone)
        try:
            exists = early.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == dt
        except (OverflowError, ValueError):
            exists = True
        said = [_offset_text(o) for o in offsets]
        if exists:
            return None, (f"expected a time that occurs once in {name}, got {shown} (it occurs "
                          f"twice there, at {said[0]} and at {said[1]}, as the clocks went "
                          "back: write its offset)")
        return None, (f"expected a time that exists in {name}, got {shown} (the clocks "
                      "skipped it, going forward: write its offset)")
    return _in_utc(early, shown)


def _offset_text(offset: Any) -> str:
    """A UTC offset as ISO 8601 writes it (``+02:00``)."""
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


#: why a run of more than 8 digits is no date (:func:`_bare_number`)
BARE_NUMBER = "a bare number: epoch seconds or milliseconds?"


def _bare_number(s: str) -> bool:
    """Whether ``s`` is a run of more than 8 digits: epoch seconds or milliseconds, which
    Python's ISO reader takes as ``YYYYMMDDHH…`` (``1583020800`` a day of 1583); eight digits
    stay ISO's basic ``YYYYMMDD``. Refused by strict and lenient reading alike."""
    return s.isdigit() and len(s) > 8


def date_value(v: Any, assume: tzinfo | None = None) -> tuple[datetime | None, str | None]:
    """``(datetime in UTC, None)`` for an ISO 8601 date with timezone (a date-only value is
    midnight UTC), else ``(None, reason)``. A date and time without timezone is refused
    ("timezone missing") unless ``assume`` names the zone it is read in."""
    expected = "expected ISO 8601 date with timezone"
    if isinstance(v, datetime):
        if v.tzinfo is None or v.utcoffset() is None:
            if assume is not None:
                return _in_zone(v.replace(tzinfo=None), assume, repr(v.isoformat()))
            return None, f"{expected}, got {v.isoformat()!r} (timezone missing)"
        return _in_utc(v, repr(v.isoformat()))
    if isinstance(v, date):
        return datetime(v.year, v.month, v.day, tzinfo=UTC), None
    if not isinstance(v, str):
        return None, f"{expected}, got {got(v)}"
    s = v.strip()
    if _bare_number(s):
        return None, f"{expected}, got {v!r} ({BARE_NUMBER})"
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
        if assume is not None:
            return _in_zone(dt, assume, repr(v))
        return None, f"{expected}, got {v!r} (timezone missing)"
    return _in_utc(dt, repr(v))


# --------------------------------------------------------------------------- lenient dates

#: the default of ``assume_timezone`` in lenient reading
DEFAULT_TIMEZONE = "UTC"
_OFFSET_RE = re.compile(r"([+-])(\d{1,2})(?::?(\d{2}))?")


def timezone_value(value: str | tzinfo | None, name: str = "assume_timezone") -> tzinfo:
    """The zone a date written without one is read in: the one validator of the reader
    keyword ``assume_timezone`` and of ``credrank index --assume-timezone`` (``name`` is the
    word the message uses).

    ``None`` is :data:`DEFAULT_TIMEZONE` (UTC); a :class:`~datetime.tzinfo` is kept; a string
    is ``UTC``/``Z``, a UTC offset (``+02:00``, ``-0530``, ``+2``) or an IANA zone name
    (``Europe/Berlin``, from the system's or the ``tzdata`` zone database). Anything else
    raises ``ValueError`` naming ``name``, what was expected and what came.
    """
    if value is None:
        return UTC
    if isinstance(value, tzinfo):
        return value
    expected = (f"{name}: expected an IANA time zone name (UTC, Europe/Berlin, "
                "America/New_York) or a UTC offset such as +02:00")
    if not isinstance(value, str):
        raise ValueError(f"{expected}, got {got(value)}")
    text = value.strip()
    if text.upper() in ("UTC", "Z", "GMT"):
        return UTC
    m = _OFFSET_RE.fullmatch(text)
    if m:
        hours, minutes = int(m[2]), int(m[3] or 0)
        if hours > 23 or minutes > 59:
            raise ValueError(f"{expected}, got {value!r} (offset out of range)")
        delta = timedelta(hours=hours, minutes=minutes)
        return timezone(-delta if m[1] == "-" else delta)
    try:
        if not text or text.startswith(("/", ".")) or ".." in text:
            raise ValueError("not a zone name")
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(f"{expected}, got {value!r} (no such zone)") from None


def zone_name(zone: tzinfo) -> str:
    """How a zone is shown: ``UTC``, ``Europe/Berlin``, ``UTC+02:00``."""
    if zone is UTC:
        return "UTC"
    return str(zone)


#: zone names read in written dates: those of RFC 2822 (section 4.3, the e-mail and HTTP date
#: format), in seconds east of UTC. Other abbreviations are refused: many are ambiguous
#: (IST, BST, CST outside RFC 2822), and an unread zone must not become the assumed one.
ZONE_ABBREVIATIONS: dict[str, int] = {
    "UT": 0, "UTC": 0, "GMT": 0, "Z": 0,
    "EST": -5 * 3600, "EDT": -4 * 3600, "CST": -6 * 3600, "CDT": -5 * 3600,
    "MST": -7 * 3600, "MDT": -6 * 3600, "PST": -8 * 3600, "PDT": -7 * 3600,
}
_WRITTEN = "a date such as 2020-04-11, 11-Apr-20 or April 17, 2020 5:47 pm"
_NAMED_OFFSET_RE = re.compile(r"\b(?:GMT|UTC)\s*(?=[+-]\d)", re.IGNORECASE)
_AT_RE = re.compile(r"(?<=\d)\s*,?\s+at\s+(?=\d)", re.IGNORECASE)
_COMMENT_RE = re.compile(r"\s*\([^()]*\)\s*$")
_YEAR_FIRST_RE = re.compile(r"\d{4}\D")
#: a weekday a written date names (``Wednesday, March 5, 2020``): it must be the date's
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_WEEKDAY_RE = re.compile(r"\b(mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(day|nesday|rsday|"
                         r"urday|sday)?\b\.?", re.IGNORECASE)


class _UnknownZone(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def _zone(name: str | None, offset: int | None) -> int | None:
    """dateutil's ``tzinfos`` hook: no zone (``None``), an offset as written, or an RFC 2822
    zone name; any other name raises."""
    if name is None:
        return offset
    if name.upper() in ZONE_ABBREVIATIONS:
        return ZONE_ABBREVIATIONS[name.upper()]
    raise _UnknownZone(str(name))


def _written(text: str, **kw: Any) -> datetime:
    # imported on first use: `import dateutil.parser` measured ~40 ms on the 2-core machine,
    # and only written (non-ISO) dates need it
    from dateutil import parser

    return parser.parse(text, tzinfos=_zone, **kw)


#: how the doors that read records (``credrank index``, ``POST /index``, the readers) name
#: the option that declares the order of all-numeric day/month dates
DATE_ORDER_OPTION = "date_order (--date-order)"


def lenient_date_value(v: Any, zone: tzinfo, order: str | None = None, *,
                       order_option: str | None = DATE_ORDER_OPTION
                       ) -> tuple[datetime | None, str | None, bool]:
    """``(datetime in UTC, None, zone_assumed)`` for a date credrank can read without
    guessing, else ``(None, reason, False)``; ``zone_assumed`` says the value had no time
    zone and was read in ``zone`` (``assume_timezone``).

    ``order`` (``date_order``: ``mdy``, ``dmy`` or ``None``) is the declared order of an
    all-numeric day/month date (:func:`numeric_day_month`: ``2/11/20``, ``02.11.2020 14:05``):
    declared, every such date is read that way (``2/11/20`` is 11 February under ``mdy``,
    2 November under ``dmy``), and one that cannot be (``13/2/20`` under ``mdy``: no month 13)
    is refused, never swapped; ``None`` refuses those that read two ways, as below. ISO and
    written dates read the same under any order. ``order_option``: how the refusal names the
    option that declares the order (:data:`DATE_ORDER_OPTION`); ``None`` at a door without
    one (the rerank doors: the refusal asks for ISO 8601 only).

    Read: ISO 8601 and written dates parsed by python-dateutil (``11-Apr-20``, ``April 17, 2020 at
    5:47 pm``, ``Tue, 3 Jun 2008 11:05:30 GMT``, ``Sun Aug 02 2020 15:53:51 GMT+0200 (CEST)``).
    Refused, never guessed: a value without year, month or day (``15-May``, ``May 2020``), a numeric
    day/month order that reads two ways (``2/11/20``: 11 February or 2 November), relative dates
    (``3 months ago``), a weekday the date does not fall on (``Wednesday, March 5, 2020``: a
    Thursday), numbers (epoch seconds or milliseconds?) and zone names outside
    :data:`ZONE_ABBREVIATIONS`. ``GMT+0200`` means two hours east of UTC (as JavaScript writes
    it), not the POSIX reading. A two-digit year is the last number of the date. A day
    without a time (``2020-04-11``, ``11-Apr-20``) is midnight UTC, as in strict reading; only
    a time of day takes ``zone``.
    """
    if isinstance(v, datetime | date):
        dt, err = date_value(v, zone)
        naive = isinstance(v, datetime) and (v.tzinfo is None or v.utcoffset() is None)
        return dt, err, err is None and naive
    if not isinstance(v, str):
        return None, f"expected {_WRITTEN} (ISO 8601 preferred), got {got(v)}", False
    s = " ".join(v.split())  # every run of white space (no-break spaces too) as one space
    if s[:1] in "+-" and s[1:2].isdigit():  # ISO 8601's signed (expanded) years: no sign lost
        shown = v if len(v) <= 60 else v[:57] + "..."
        return None, (f"expected a date within years 1–9999, got {shown!r} (a signed year)"
                      ), False
    if _bare_number(s):
        shown = v if len(v) <= 60 else v[:57] + "..."
        return None, (f"expected {_WRITTEN}, got {shown!r} ({BARE_NUMBER} write the date as "
                      "ISO 8601)"), False
    if order is not None and (m := _NUMERIC_DMY_RE.fullmatch(s)) is not None:
        day, why = _ordered(m, order, v)
        if why is not None:
            return None, why, False
        s = f"{day}{m[5]}"  # ISO date, then the time (and zone) as written
    try:
        d = date.fromisoformat(s)
        return datetime(d.year, d.month, d.day, tzinfo=UTC), None, False
    except ValueError:
        pass
    try:
        iso = datetime.fromisoformat(s)
    except ValueError:
        iso = None
    if iso is not None:
        dt, err = date_value(iso, zone)
        return dt, err, err is None and iso.tzinfo is None
    text = _COMMENT_RE.sub("", s)
    text = _NAMED_OFFSET_RE.sub("", _AT_RE.sub(" ", text))
    shown = v if len(v) <= 60 else v[:57] + "..."
    if not text or not any(ch.isdigit() for ch in text):
        return None, f"expected {_WRITTEN}, got {shown!r}", False
    year_first = bool(_YEAR_FIRST_RE.match(text))
    try:
        a = _written(text, default=datetime(2000, 1, 1), yearfirst=year_first)
        b = _written(text, default=datetime(2001, 2, 2, 1, 1), yearfirst=year_first)
        flipped = None if year_first else _written(text, default=datetime(2000, 1, 1),
                                                   dayfirst=True)
    except _UnknownZone as exc:
        return None, (f"expected a time zone offset (+02:00) or one of "
                      f"{', '.join(ZONE_ABBREVIATIONS)}, got {exc.name!r} in {shown!r}"), False
    except (ValueError, OverflowError) as exc:
        why = str(exc).split(":")[0]
        return None, f"expected {_WRITTEN}, got {shown!r} ({why})", False
    missing = [part for part in ("year", "month", "day")
               if getattr(a, part) != getattr(b, part)]
    if missing:
        return None, (f"expected a full date (year, month and day), got {shown!r} "
                      f"({' and '.join(missing)} missing)"), False
    if flipped is not None and flipped.date() != a.date():
        way = (f"write it as ISO 8601 or declare the order: {order_option} mdy or dmy"
               if order_option else "write it as ISO 8601")
        return None, (f"expected a date that reads one way, got {shown!r} ({a.date()} month "
                      f"first or {flipped.date()} day first; {way})"), False
    named = _WEEKDAY_RE.search(text)
    if named is not None and not _WEEKDAYS[a.weekday()].startswith(named[1].lower()[:3]):
        # dateutil reads past a weekday: a date and its weekday that disagree say one is wrong
        return None, (f"expected a date that falls on the weekday it names, got {shown!r} "
                      f"({a.date()} is a {_WEEKDAYS[a.weekday()].title()}, not a "
                      f"{named[0].rstrip('.')})"), False
    if (m := _NUMERIC_DMY_RE.fullmatch(s)) is not None and a.year % 100 != int(m[4]) % 100:
        # the year is the last number: dateutil read 99/12/31 as 1999-12-31, year first
        return None, (f"expected a date whose last number is its year, got {shown!r} (read "
                      f"{a.date()} only with the year first; write it as ISO 8601)"), False
    if a.hour != b.hour and a.tzinfo is None:  # a day without a time: midnight UTC, as ISO
        return datetime(a.year, a.month, a.day, tzinfo=UTC), None, False
    if a.tzinfo is None:
        dt, err = _in_zone(a, zone, repr(shown))
        return dt, err, err is None
    dt, err = _in_utc(a, repr(shown))
    return dt, err, False


#: the orders an all-numeric day/month date may be declared in (``date_order``)
DATE_ORDERS: tuple[str, ...] = ("mdy", "dmy")
_ORDER_WORDS = {"mdy": "month-first", "dmy": "day-first"}
#: an all-numeric day/month date: two numbers of one or two digits and a year of two or
#: four, one separator (``/``, ``-`` or ``.``) throughout, then anything but a digit (a time)
_NUMERIC_DMY_RE = re.compile(r"(\d{1,2})([/.-])(\d{1,2})\2(\d{4}|\d{2})(?!\d)(.*)")


def date_order_value(value: Any, name: str = "date_order") -> str | None:
    """The declared order of all-numeric day/month dates: the one validator of the reader
    keyword ``date_order``, of ``credrank index --date-order`` (and its ``credrank.toml``
    key) and of ``POST /index``'s ``date_order`` (``name`` is the word the message uses).

    ``None`` (nothing declared: a date such as ``2/11/20`` that reads two ways is refused) or
    one of :data:`DATE_ORDERS`; anything else raises ``ValueError`` naming ``name``, what was
    expected and what came (``date_order: expected one of mdy, dmy, got 'ymd'``).
    """
    if value is None or (isinstance(value, str) and value in DATE_ORDERS):
        return value
    raise ValueError(f"{name}: expected one of {', '.join(DATE_ORDERS)}, got {got(value)}")


def numeric_day_month(v: Any) -> bool:
    """Whether ``v`` is an all-numeric day/month date (``2/11/20``, ``13.02.2020 8:30``),
    the only kind of date a declared ``date_order`` reads differently."""
    return isinstance(v, str) and _NUMERIC_DMY_RE.fullmatch(" ".join(v.split())) is not None


def _ordered(m: re.Match[str], order: str, v: str) -> tuple[str | None, str | None]:
    """The ISO day (``2020-02-11``) of a :data:`_NUMERIC_DMY_RE` match read in ``order``, or
    the reason it cannot be read so (no month 13, no 30 February)."""
    from dateutil import parser

    first, second = int(m[1]), int(m[3])
    month, day = (first, second) if order == "mdy" else (second, first)
    # a two-digit year as every other written date reads it (dateutil's century window)
    year = parser.parserinfo().convertyear(int(m[4]), len(m[4]) == 4)
    shown = v if len(v) <= 60 else v[:57] + "..."
    expected = (f"expected a {_ORDER_WORDS[order]} date (date_order {order}: "
                f"{'month/day/year' if order == 'mdy' else 'day/month/year'})")
    if not 1 <= month <= 12:
        return None, f"{expected}, got {shown!r} (no month {month})"
    if year < 1:
        return None, f"{expected}, got {shown!r} (no year 0)"
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None, (f"{expected}, got {shown!r} (no day {day} in "
                      f"{calendar.month_name[month]} {year})")
    return f"{year:04d}-{month:02d}-{day:02d}", None


def flag_value(v: Any) -> tuple[bool | None, str | None]:
    """``(flag, None)`` for a boolean (:data:`~credrank.documents.schema.FLAG_FIELDS`): ``true``
    or ``false``, or that text in any case (a CSV cell is text), else ``(None, reason)`` — a
    ``yes``, a ``1`` or a ``"maybe"`` is refused, never read as false."""
    if isinstance(v, bool):
        return v, None
    if isinstance(v, str) and v.strip().lower() in ("true", "false"):
        return v.strip().lower() == "true", None
    return None, f"expected true or false, got {got(v)}"


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
