"""Document schema: the fields a corpus record may carry, validated in one place.

A document has ``id`` and ``text`` (required), optional ``title``, ``url``, ``source_id``, a
*declared* ``source_type`` (trusted only when the configuration says so, see
:mod:`credrank.provenance.source_types`), five dates kept apart (chapter 35.7: observation,
verification, publication, modification and retrieval are different facts), ``cites``, the
ids it cites, and what a freshness config reads of a claim (chapter 35.7: "revisit claims
according to domain change rates"; "a historical fact need not decay";
:mod:`credrank.freshness.config`): its ``claim_class`` (text such as ``statistic`` or
``historical``, the ``[claim_class]`` and ``no_decay.claim_class`` keys) and ``persistent``
(``true``: a time-persistent claim, never decayed — the ``no_decay.field`` default).
Dates are timezone-aware :class:`datetime.datetime` values parsed from ISO 8601.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: the source taxonomy of seed 004, plus ``unknown``
SOURCE_TYPES: tuple[str, ...] = (
    "peer_reviewed",
    "government",
    "established_news",
    "blog",
    "user_generated",
    "ai_generated",
    "unknown",
)

#: date fields, kept apart (chapter 35.7)
DATE_FIELDS: tuple[str, ...] = (
    "observed_at",
    "verified_at",
    "published_at",
    "modified_at",
    "retrieved_at",
)

#: string fields besides id/text
OPTIONAL_STR_FIELDS: tuple[str, ...] = ("title", "url", "source_id", "source_type",
                                        "claim_class")
#: boolean fields (``true``/``false``; the text ``"true"``/``"false"`` of a CSV cell too)
FLAG_FIELDS: tuple[str, ...] = ("persistent",)

KNOWN_FIELDS: frozenset[str] = frozenset(
    ("id", "text", *OPTIONAL_STR_FIELDS, *FLAG_FIELDS, *DATE_FIELDS, "cites"))


@dataclass(frozen=True)
class Document:
    """One validated corpus record.

    ``extra`` keeps fields the schema does not know (they travel as payload, never as
    evidence of source type).
    """

    id: str
    text: str
    title: str | None = None
    url: str | None = None
    source_id: str | None = None
    source_type: str | None = None
    claim_class: str | None = None
    persistent: bool | None = None
    observed_at: datetime | None = None
    verified_at: datetime | None = None
    published_at: datetime | None = None
    modified_at: datetime | None = None
    retrieved_at: datetime | None = None
    cites: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict)

    def dates(self) -> dict[str, datetime | None]:
        return {name: getattr(self, name) for name in DATE_FIELDS}
