"""The freshness date of a document: the date of its *evidence*, kept apart from the others.

Chapter 35.7 separates five dates (``observed_at``, ``verified_at``, ``published_at``,
``modified_at``, ``retrieved_at``). A page published in 2023 that repeats a 2020 measurement is
2020 evidence. The rule (:func:`freshness_date`):

1. ``observed_at`` (when the measurement was made), else
2. ``verified_at`` (when it was last checked against its source), else
3. ``published_at``, else
4. **unknown** — never ``modified_at`` (an edit of the page, not of the evidence) and never
   ``retrieved_at`` (when we crawled it; using it would make every page look fresh).

:func:`freshness_date` sets a date after the evaluation time ``T`` to ``T`` and flags it
(``after_now``): what the citation-chain audit's distortion bound needs (chapter 35.7: a wrapper
cannot be dated after ``T``). The ranking and the context read a document's date through
:func:`evidence_date`, where a date after ``T`` is **no usable age** — unknown, under the
undated policy, flagged — never the best age: a future date is a data error to show, not a
boost. :func:`evidence_date` also gives a wrapper its origin's date (``lineage=cites``).

Values may be ``datetime`` (naive = UTC), ISO 8601 strings (as stored in index payloads) or
``None``. :func:`parse_instant` raises :class:`ValueError` naming the field for a string that
does not parse.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import numpy as np

from credrank.core.schema import Spec

#: the fields that may date a document's evidence, in order of preference
FRESHNESS_FIELDS = ("observed_at", "verified_at", "published_at")
#: fields that never date evidence (stated so the rule is visible in reports)
NOT_FRESHNESS_FIELDS = ("modified_at", "retrieved_at")
SECONDS_PER_DAY = 86_400.0


def parse_instant(value: Any, field: str = "date") -> datetime | None:
    """``value`` as an aware UTC ``datetime`` (``None`` for ``None`` or an empty string).

    Accepts ``datetime`` (naive taken as UTC) and ISO 8601 strings (``2024-05-01``,
    ``2024-05-01T12:00:00Z``, with offsets). Anything else raises ``ValueError`` naming
    ``field``, what was expected and what came."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str):
        text = value.strip()
        try:
            parsed = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)
        except ValueError:
            raise ValueError(f"{field}: expected an ISO 8601 date such as 2024-05-01 or "
                             f"2024-05-01T12:00:00Z, got {value!r}") from None
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    raise ValueError(f"{field}: expected an ISO 8601 date string or a datetime, got "
                     f"{type(value).__name__} ({value!r})")


class Instant(Spec):
    """A schema for an evaluation time: an ISO 8601 text (kept as given), or a native
    ``date`` / ``datetime`` — what a TOML or YAML file's unquoted ``2026-01-01`` or
    ``2026-01-01T00:00:00Z`` is, and what Python code passes — cleaned to ISO 8601 text (a date
    as ``2026-01-01``, a datetime as an aware one, naive taken as UTC), so that every echo of
    a spec is JSON; checked by :func:`parse_instant`."""

    def describe(self) -> str:
        return "an ISO 8601 date such as 2026-01-01"

    def clean(self, value: Any, at: str, fail: Any) -> Any:
        if isinstance(value, date) and not isinstance(value, datetime):
            return value.isoformat()  # a calendar date: midnight UTC, as the text would be
        if not isinstance(value, str | datetime):
            raise fail(at, self.describe(), value)
        try:
            parsed = parse_instant(value, at)
        except ValueError:
            raise fail(at, self.describe(), value) from None
        if parsed is None:
            raise fail(at, self.describe(), value)
        return value if isinstance(value, str) else parsed.isoformat()


@dataclass(frozen=True)
class FreshnessDate:
    """The date a document's evidence carries and where it came from.

    ``date`` is ``None`` (unknown) or aware UTC; ``basis`` is the field it came from
    (``observed_at``, ``verified_at``, ``published_at``, ``inherited:<doc_id>`` when a citation
    chain supplied it) or ``unknown``; ``after_now`` says the date was after ``T`` (set to ``T``
    by :func:`freshness_date`; ``None``, an unknown age, by :func:`evidence_date`); ``written``
    the document's own date where ``date`` is not it (after ``T``, or a wrapper's origin's
    date): what a citation of the document says."""

    date: datetime | None
    basis: str
    after_now: bool = False
    written: datetime | None = None


def freshness_date(dates: Mapping[str, Any], now: datetime | None = None,
                   where: str = "document") -> FreshnessDate:
    """The rule of the module docstring for one document's ``dates`` (a mapping with any of
    the five date fields). With ``now`` (the evaluation time ``T``), a later date is clamped to
    ``T`` and flagged."""
    for name in FRESHNESS_FIELDS:
        value = parse_instant(dates.get(name), f"{where}: field {name!r}")
        if value is not None:
            if now is not None and value > now:
                return FreshnessDate(now, name, after_now=True, written=value)
            return FreshnessDate(value, name)
    return FreshnessDate(None, "unknown")


#: a document's own evidence date: it is a re-measurement, never a wrapper (35.7)
OWN_EVIDENCE = ("observed_at", "verified_at")


def evidence_date(dates: Mapping[str, Any], now: datetime | None, where: str = "document",
                  inherited_at: Any = None, inherited_basis: str | None = None
                  ) -> FreshnessDate:
    """The date of a document's evidence at ``T`` = ``now`` as the ranking's freshness stage
    and the context read it (chapter 35.7): :func:`freshness_date`'s rule; then, for a wrapper
    (``inherited_basis`` ``inherited:<origin>`` and ``inherited_at`` the origin's date, from
    a citation chain; never a document with its own ``observed_at``/``verified_at``, a
    re-measurement), the origin's date — or unknown when every origin it reaches is undated,
    never its own publication date — unless the origin is newer than the document itself (an
    anachronism, a data error: its own date stands, never a boost). A date after ``T`` is an
    unknown age: ``date`` ``None``, ``after_now`` ``True``, the date in ``written``."""
    fd = freshness_date(dates, now, where)
    own = fd.written if fd.after_now else fd.date
    if fd.basis not in OWN_EVIDENCE and inherited_basis:
        origin = parse_instant(inherited_at, f"{where}: field 'inherited_at'")
        if origin is None or own is None or origin <= own:
            after = origin is not None and now is not None and origin > now
            return FreshnessDate(None if after else origin, str(inherited_basis), after,
                                 own)
    if fd.after_now:
        return FreshnessDate(None, fd.basis, True, fd.written)
    return fd


def elapsed_days(now: datetime, dates: Sequence[datetime | None]) -> np.ndarray:
    """``(T − t)`` in days per date (``NaN`` where the date is unknown: callers apply the
    unknown-age policy before anything leaves them); negative values are clamped to 0."""
    out = np.full(len(dates), np.nan)
    for i, t in enumerate(dates):
        if t is not None:
            out[i] = max((now - t).total_seconds() / SECONDS_PER_DAY, 0.0)
    return out
