"""What a corpus load yields: the raw record a format reader produces, the :class:`Reject` of
a record that was not loaded, the :class:`DroppedField` of an optional field left out of a
record that was loaded (lenient reading), the :class:`LoadResult` of a whole corpus and the
:class:`CorpusError` of a file that cannot be used at all."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credrank.documents.fields import SHOWN, excerpt, listing
from credrank.documents.schema import Document

__all__ = [
    "CorpusError",
    "DroppedField",
    "LoadResult",
    "RawRecord",
    "Reject",
    "load_summary",
    "write_rejects",
]


class CorpusError(ValueError):
    """A corpus, query or qrels file that cannot be used as it is."""


@dataclass(frozen=True)
class Reject:
    """A record that was not loaded, and why.

    ``line`` is the 1-based physical line (``unit == "line"``) or Parquet row (``unit == "row"``);
    ``field`` is ``None`` when the whole record is unusable (malformed JSON, bad CSV, ...).
    """

    file: str
    line: int
    field: str | None
    reason: str
    record_excerpt: str
    unit: str = "line"

    @property
    def message(self) -> str:
        where = f"{self.file}:{self.line}" if self.unit == "line" else (
            f"{self.file}:{self.unit} {self.line}")
        if self.field is None:
            return f"{where}: {self.reason}"
        return f"{where}: field '{self.field}': {self.reason}"

    def __str__(self) -> str:
        return self.message


def _where(file: str, line: int, unit: str) -> str:
    return f"{file}:{line}" if unit == "line" else f"{file}:{unit} {line}"


@dataclass(frozen=True)
class DroppedField:
    """An optional field left out of a record that *was* loaded (lenient reading): its value
    could not be read (``reason``: what was expected and what came). ``doc_id`` is the loaded
    document's id; ``line``, ``unit`` and ``record_excerpt`` as in :class:`Reject`."""

    file: str
    line: int
    field: str
    reason: str
    record_excerpt: str
    doc_id: str
    unit: str = "line"

    @property
    def message(self) -> str:
        return f"{_where(self.file, self.line, self.unit)}: field '{self.field}' dropped: " \
               f"{self.reason}"

    def __str__(self) -> str:
        return self.message


@dataclass
class LoadResult:
    """Documents and rejects of one corpus; ``n_records`` counts both. ``dropped`` lists the
    optional fields left out of loaded documents (lenient reading); ``zones_assumed`` counts
    the dates without a time zone read in ``assume_timezone``, ``dates_ordered`` the
    all-numeric day/month dates read in the declared ``date_order``; ``unused_fields`` the
    ``fields`` mappings no record used."""

    documents: list[Document]
    rejects: list[Reject]
    path: Path
    dropped: list[DroppedField] = field(default_factory=list)
    zones_assumed: int = 0
    assume_timezone: str | None = None
    date_order: str | None = None
    dates_ordered: int = 0
    unused_fields: dict[str, str] = field(default_factory=dict)

    @property
    def n_records(self) -> int:
        return len(self.documents) + len(self.rejects)

    def summary(self) -> str:
        return load_summary(self)

    def raise_if_rejected(self, limit: int = SHOWN) -> None:
        """Raise :class:`CorpusError` listing the first ``limit`` rejects, if there are any."""
        if self.rejects:
            raise CorpusError(listing(
                f"{self.path}: {len(self.rejects)} of {self.n_records} records rejected",
                [r.message for r in self.rejects], limit))


def load_summary(result: LoadResult) -> str:
    """``read N records: accepted A, rejected M`` (then ``; K fields dropped in J records``,
    ``; Z dates without a time zone read as UTC``, ``; D numeric dates read month first``
    when there are any)."""
    text = (f"read {result.n_records} records: accepted {len(result.documents)}, "
            f"rejected {len(result.rejects)}")
    if result.dropped:
        text += f"; {dropped_summary(result.dropped)}"
    if result.zones_assumed:
        text += f"; {zones_summary(result.zones_assumed, result.assume_timezone)}"
    if result.dates_ordered and result.date_order is not None:
        text += f"; {ordered_summary(result.dates_ordered, result.date_order)}"
    return text


def dropped_summary(dropped: Iterable[DroppedField]) -> str:
    """``K fields dropped in J records``."""
    items = list(dropped)
    records = len({(d.file, d.line) for d in items})
    return (f"{len(items)} field{'s' if len(items) != 1 else ''} dropped in {records} "
            f"record{'s' if records != 1 else ''}")


def zones_summary(count: int, zone: str | None) -> str:
    """``Z dates without a time zone read as UTC``."""
    return f"{count} date{'s' if count != 1 else ''} without a time zone read as {zone}"


def ordered_summary(count: int, order: str) -> str:
    """``D numeric dates read month first`` (``date_order`` ``mdy``; ``dmy``: day first)."""
    return (f"{count} numeric date{'s' if count != 1 else ''} read "
            f"{'month' if order == 'mdy' else 'day'} first")


def reject_row(r: Reject) -> dict[str, object]:
    """One line of the rejects file for a rejected record (``kind: "rejected"``)."""
    return {"kind": "rejected", "file": r.file, "line": r.line, "unit": r.unit,
            "field": r.field, "reason": r.reason, "excerpt": r.record_excerpt,
            "message": r.message}


def dropped_row(d: DroppedField) -> dict[str, object]:
    """One line of the rejects file for a dropped field of a loaded record
    (``kind: "dropped"``, ``id`` the document's id)."""
    return {"kind": "dropped", "file": d.file, "line": d.line, "unit": d.unit,
            "field": d.field, "reason": d.reason, "excerpt": d.record_excerpt,
            "message": d.message, "id": d.doc_id}


def write_rejects(rejects: Iterable[Reject], path: str | Path,
                  dropped: Iterable[DroppedField] = ()) -> int:
    """Write rejects as JSONL (kind, file, line, unit, field, reason, excerpt, message) and,
    in file order among them, the ``dropped`` fields of loaded records (``kind: "dropped"``,
    with the document ``id``); return the number of lines."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = [(r.file, r.line, 0, reject_row(r)) for r in rejects]
    rows += [(d.file, d.line, 1, dropped_row(d)) for d in dropped]
    if any(kind for _, _, kind, _ in rows):
        order = {f: i for i, f in enumerate(dict.fromkeys(f for f, _, _, _ in rows))}
        rows.sort(key=lambda r: (order[r[0]], r[1], r[2]))
    with out.open("w", encoding="utf-8") as fh:
        for *_, row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    return len(rows)


@dataclass
class RawRecord:
    """One physical record as a format reader found it, before any field check.

    ``data`` is the parsed record (``None`` when the whole record is unusable: ``error`` then
    says why); ``line`` is the 1-based line (the row for Parquet).
    """

    line: int
    data: dict[str, Any] | None
    source: Any                       # raw text (or the Parquet row), turned into an excerpt
    error: str | None = None          # record-level problem (data is None)
    error_field: str | None = None    # the field an ``error`` is about, when known
    bad_bytes: bool = False           # decoded with surrogateescape
    check_unicode: bool = False       # strings may hold surrogates (bad bytes, \\u escapes)

    @property
    def excerpt(self) -> str:
        if isinstance(self.source, str):
            return excerpt(self.source)
        return excerpt(json.dumps(self.source, default=str, ensure_ascii=False))
