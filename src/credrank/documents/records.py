"""What a corpus load yields: the raw record a format reader produces, the :class:`Reject` of
a record that was not loaded, the :class:`LoadResult` of a whole corpus and the
:class:`CorpusError` of a file that cannot be used at all."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from credrank.documents.fields import SHOWN, excerpt, listing
from credrank.documents.schema import Document

__all__ = [
    "CorpusError",
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


@dataclass
class LoadResult:
    """Documents and rejects of one corpus; ``n_records`` counts both."""

    documents: list[Document]
    rejects: list[Reject]
    path: Path

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
    """``read N records: accepted A, rejected M``."""
    return (f"read {result.n_records} records: accepted {len(result.documents)}, "
            f"rejected {len(result.rejects)}")


def write_rejects(rejects: Iterable[Reject], path: str | Path) -> int:
    """Write rejects as JSONL (file, line, unit, field, reason, excerpt, message); return count."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with out.open("w", encoding="utf-8") as fh:
        for r in rejects:
            fh.write(json.dumps({
                "file": r.file, "line": r.line, "unit": r.unit, "field": r.field,
                "reason": r.reason, "excerpt": r.record_excerpt, "message": r.message,
            }, ensure_ascii=False) + "\n")
            n += 1
    return n


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
