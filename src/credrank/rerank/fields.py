"""What a candidate carries beyond its text, score and vector: the fields stages read.

A candidate retrieved elsewhere carries what a corpus record carries (:mod:`credrank.documents`):
its provenance (``url``, ``title``, ``source_id``, the *declared* ``source_type``), the five
dates kept apart (``observed_at``, ``verified_at``, ``published_at``, ``modified_at``,
``retrieved_at``), ``cites`` and the claim a freshness config reads (``claim_class``,
``persistent``; chapter 35.7, :mod:`credrank.freshness.config`) — :data:`EVIDENCE_FIELDS`.
Freshness reads the dates, the claim class and the opt-out, the source typer the URL (and
records a declared type that differs as a conflict), the reliability and feedback priors
``source_id``. Each value is checked by the validators
``credrank index`` uses (:func:`field_value`), so a candidate's date reads as the same record's
date does in an index:

* **dates**: ISO 8601 (a date-only value is midnight UTC) or a written date python-dateutil
  reads without guessing (``April 17, 2020``, RFC 2822), as lenient indexing reads them
  (:func:`~credrank.documents.fields.lenient_date_value`); a date and time without a zone is
  read in UTC (``credrank index``'s default ``--assume-timezone``); a ``datetime``/``date``
  object is taken as such (naive: UTC). Stored as ISO 8601 strings in UTC, as the index stores
  them. A date that cannot be read is an error naming ``candidates[i].<field>`` — never
  dropped (a rerank has no report of dropped fields);
* **source_type**: a *claim*, one of :data:`~credrank.documents.schema.SOURCE_TYPES`. Exactly as
  ``credrank index`` treats it: passed to the source typer as the declared type, which never
  becomes the type (the typer does not trust declared types) — a declared type other than the
  URL's is recorded as a ``provenance_conflict``;
* **url**, **title**, **source_id**, **claim_class**: strings; **cites**: a list of ids;
* **persistent**: ``true`` or ``false`` (or that text, in any case:
  :func:`~credrank.documents.fields.flag_value`); ``true`` opts the candidate out of decay
  (a freshness config's ``no_decay.field``, whose default it is).

``None`` or ``""`` is absent. :class:`MetadataFields` reads the fields from a framework
document's metadata (the adapters): the documented default keys (:data:`DEFAULT_KEYS`: each
field's own name; the URL from ``url``, else ``source``, else ``link``), or the keys of a
mapping such as ``fields={"published_at": "date"}`` (``None`` for a field: not read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from typing import Any

from credrank.documents.fields import cites_value, flag_value, got, lenient_date_value
from credrank.documents.schema import DATE_FIELDS, FLAG_FIELDS, SOURCE_TYPES

#: the fields of a candidate that stages read besides its id, text, score and vector
EVIDENCE_FIELDS: tuple[str, ...] = ("url", "title", "source_id", "source_type", *DATE_FIELDS,
                                    "cites", "claim_class", *FLAG_FIELDS)
#: the metadata keys each field is read from by default, the first present winning
DEFAULT_KEYS: dict[str, tuple[str, ...]] = {
    **{name: (name,) for name in EVIDENCE_FIELDS}, "url": ("url", "source", "link")}


def field_value(name: str, value: Any) -> tuple[Any, str | None]:
    """``(value as stored, None)`` for a readable value of field ``name`` (``None`` for an
    absent one: ``None`` or ``""``), else ``(None, reason)`` (``expected …, got …``)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None, None
    if name in DATE_FIELDS:
        dt, err, _ = lenient_date_value(value, UTC, order_option=None)  # no date_order here
        return (None, err) if dt is None else (dt.isoformat(), None)
    if name in FLAG_FIELDS:
        return flag_value(value)
    if name == "cites":
        cites, problem = cites_value(value, cells=False)
        if problem is not None:
            at, reason = problem
            return None, f"{reason}{f' (at cites{at})' if at else ''}"
        return list(cites), None
    if not isinstance(value, str):
        return None, f"expected a string, got {got(value)}"
    if name == "source_type" and value not in SOURCE_TYPES:
        return None, f"expected one of {', '.join(SOURCE_TYPES)}, got {value!r}"
    return value, None


def check_fields(value: Any, name: str = "fields") -> dict[str, str | None]:
    """The mapping option ``fields`` (field → metadata key, ``None``: not read) as a dict, or
    ``ValueError`` naming ``name`` and the entry (``fields.publishd_at: expected one of url,
    …``); ``None`` is no mapping (the default keys)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ValueError(f"{name}: expected a mapping of field to metadata key such as "
                         f"{{'published_at': 'date'}}, got {got(value)}")
    out: dict[str, str | None] = {}
    for key, target in value.items():
        if key not in EVIDENCE_FIELDS:
            raise ValueError(f"{name}.{key}: expected one of {', '.join(EVIDENCE_FIELDS)} (the "
                             f"fields read from metadata), got {key!r}")
        if target is not None and (not isinstance(target, str) or not target.strip()):
            raise ValueError(f"{name}.{key}: expected a metadata key (a non-empty string) or "
                             f"None (not read), got {got(target)}")
        out[key] = target
    return out


@dataclass(frozen=True)
class MetadataFields:
    """Where each of :data:`EVIDENCE_FIELDS` is read from in a document's metadata: ``mapping``
    (checked by :func:`check_fields`) over :data:`DEFAULT_KEYS`; ``option`` is the name errors
    give the mapping (``fields``).

    A key named in ``mapping`` is *required of the call*: when no candidate of a call carries
    it, :meth:`missing` names it (a misspelt key would otherwise make every document silently
    undated — the no-op this option exists to end); a document without it, among others that
    have it, is read as without that field (an undated document is ``age: unknown`` in the
    freshness report). A default key may be absent everywhere."""

    mapping: Mapping[str, str | None] = field(default_factory=dict)
    option: str = "fields"

    def keys(self, name: str) -> tuple[str, ...]:
        """The metadata keys field ``name`` is read from, in order."""
        if name in self.mapping:
            key = self.mapping[name]
            return () if key is None else (key,)
        return DEFAULT_KEYS[name]

    def read(self, metadata: Mapping[str, Any]) -> dict[str, tuple[str, Any]]:
        """``field -> (metadata key, raw value)`` for each field present in ``metadata`` (the
        first of its keys whose value is not ``None`` or ``""``)."""
        out: dict[str, tuple[str, Any]] = {}
        for name in EVIDENCE_FIELDS:
            for key in self.keys(name):
                value = metadata.get(key)
                if value is not None and not (isinstance(value, str) and not value.strip()):
                    out[name] = (key, value)
                    break
        return out

    def missing(self, metadatas: Sequence[Mapping[str, Any] | None]) -> str | None:
        """The error when a key named in the mapping is on none of ``metadatas`` (``None`` when
        every named key is on at least one, or there are no documents)."""
        if not metadatas:
            return None
        for name, key in self.mapping.items():
            if key is None:
                continue
            if not any(m is not None and m.get(key) not in (None, "") for m in metadatas):
                seen = sorted({str(k) for m in metadatas if m is not None for k in m})
                shown = ", ".join(seen[:12]) + (", …" if len(seen) > 12 else "")
                return (f"{self.option}.{name}: expected metadata key {key!r} on the documents, "
                        f"got it on none of {len(metadatas)} (keys seen: {shown or 'none'}); "
                        f"name the key the documents carry, or drop {name!r} from "
                        f"{self.option} to read the default key "
                        f"{' / '.join(map(repr, DEFAULT_KEYS[name]))}")
        return None
