"""Corpus readers: JSONL, CSV/TSV, Parquet and BEIR-style folders → validated :class:`Document`.

Every physical record ends up either as a :class:`~credrank.documents.schema.Document` or as a
:class:`Reject` naming the file, the line (``row`` for Parquet), the field, what was expected and
what came; nothing is dropped silently (``LoadResult.n_records == accepted + rejected``).
Blank lines are not records and are skipped.

Policies (chosen here, applied in every format):

* **ids**: a non-empty string; an integer id (not a boolean) is accepted and converted to its
  decimal string, as BEIR corpora often carry numeric ids. ``_id`` is accepted as an alias of
  ``id`` (both may be present if they agree).
* **text**: required; an empty or whitespace-only text counts as missing.
* **optional strings** (title, url, source_id, source_type): null or ``""`` means absent.
  An empty CSV cell is null.
* **source_type**: when declared, exactly one of :data:`~credrank.documents.schema.SOURCE_TYPES`.
* **dates** (:data:`~credrank.documents.schema.DATE_FIELDS`): ISO 8601 and timezone-aware,
  normalised to UTC. A date-only value (``2023-05-01``, or a Parquet ``date`` column) means midnight
  UTC of that day. A datetime without timezone is rejected ("timezone missing"): guessing a zone
  silently shifts ages, which feed freshness (chapter 35.7). Parquet nanosecond timestamps are
  truncated to microseconds.
* **cites**: a list of ids (strings; integers converted as for ``id``). In CSV the cell holds a
  JSON list (``["a", "b"]``) or a ``|``-separated string (``a|b``).
* **unknown fields** go to ``Document.extra`` (payload, never evidence of source type).
* **duplicates**: among *accepted* documents, the later occurrence of an id is rejected and the
  message names the line of the first.
* **encoding**: input must be UTF-8 (a leading BOM is ignored). JSONL is checked per line, CSV per
  record, naming the field that holds the bad bytes when it can be found. Lone surrogate escapes
  (``"\\udc80"``) are rejected too: they cannot be stored as UTF-8.
* **numbers**: JSON ``NaN``/``Infinity`` and non-finite floats anywhere in a record are rejected.
* **payload bounds**: every field nests at most :data:`MAX_FIELD_DEPTH` (32) levels of lists and
  objects (a scalar is 0 levels, ``[1]`` is 1), and every unknown (``extra``) field serializes
  to at most :data:`MAX_EXTRA_BYTES` (64 KiB) of UTF-8 JSON. Deeper or larger values are
  rejected (``expected nesting at most 32 levels deep, got deeper``): vector engines store the
  payload in recursive formats (Qdrant Edge's WAL fails to load beyond ~120 levels), so one
  such record would brick the index. A JSONL line is checked for depth *before* it is parsed,
  without recursion, so even 100,000 levels are a reject, never a ``RecursionError``.
* **CSV quoting**: a quoted field may span lines (multi-line text). A record that spans lines
  and then fails to parse (an unterminated quote running to the end of the file, a stray
  quote) or has the wrong number of columns is rejected at the line where it starts, and the
  lines after that start are read again as records of their own, so a stray quote never
  absorbs the following records silently.
* **compressed input**: a truncated or corrupt ``.gz`` file raises :class:`CorpusError` naming
  the file and how many records were read before the damage (those were already yielded).
* **one reject per record**: the first problem in schema order is reported; the reason says how
  many more problems the record has.
* **line endings**: ``\n``, ``\r\n`` and a lone ``\r`` (old Mac) each end a line, in JSONL
  and CSV alike (as Python's universal newlines), so every record is read on its own line.
* **line numbers** are 1-based physical lines; for CSV the line where the record starts; for
  Parquet the 1-based row number, shown as ``path:row N``.

Format by extension (``.jsonl``/``.ndjson``, ``.csv``, ``.tsv``, ``.parquet``/``.pq``, text formats
optionally ``.gz``) or by ``format=``; a directory is a BEIR folder (``corpus.jsonl``,
``queries.jsonl``, ``qrels/<split>.tsv``). BEIR ``metadata`` objects are merged into the record
(a key that conflicts with a different top-level value is rejected).

This module holds the entry points and the conversion of a raw record to a document; the
pieces are beside it: the record types (:class:`Reject`, :class:`LoadResult`,
:class:`CorpusError`) in :mod:`credrank.documents.records`, the field checks these policies
describe in :mod:`credrank.documents.fields`, file opening in :mod:`credrank.documents.files`
and one record iterator per format in :mod:`credrank.documents.formats`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credrank.core.structured import nesting_exceeds
from credrank.documents.fields import (
    MAX_EXTRA_BYTES,
    MAX_FIELD_DEPTH,
    cites_value,
    date_value,
    got,
    id_value,
    json_size,
    nonfinite,
    unicode_problem,
)
from credrank.documents.files import format_suffix
from credrank.documents.formats.csv import csv_records
from credrank.documents.formats.jsonl import jsonl_records
from credrank.documents.formats.parquet import parquet_records
from credrank.documents.records import (
    CorpusError,
    LoadResult,
    RawRecord,
    Reject,
    load_summary,
    write_rejects,
)
from credrank.documents.schema import DATE_FIELDS, OPTIONAL_STR_FIELDS, SOURCE_TYPES, Document

__all__ = [
    "FORMATS",
    "MAX_EXTRA_BYTES",
    "MAX_FIELD_DEPTH",
    "CorpusError",
    "LoadResult",
    "Reject",
    "iter_documents",
    "load_summary",
    "read_corpus",
    "write_rejects",
]

FORMATS: tuple[str, ...] = ("jsonl", "csv", "tsv", "parquet", "beir")
_EXTENSIONS = {
    ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv",
    ".parquet": "parquet", ".pq": "parquet",
}


# --------------------------------------------------------------------------- entry points

def iter_documents(path: str | Path, *, format: str | None = None,
                   fields: Mapping[str, str] | None = None) -> Iterator[Document | Reject]:
    """Yield a :class:`Document` or a :class:`Reject` per record, in file order (streaming).

    ``format`` is one of ``jsonl, csv, tsv, parquet, beir`` (default: from the extension; a
    directory is a BEIR folder). ``fields`` renames the file's fields to schema names, e.g.
    ``{"doc_id": "id", "timestamp": "retrieved_at"}``; messages keep the file's names.
    A missing file, an unknown format or an unusable header raises at once (not lazily);
    Parquet/CSV header problems raise :class:`CorpusError` on the first ``next()``.
    """
    p = Path(path)
    fmt = _format_of(p, format)
    ctx = _Context(file=str(p), fields=dict(fields or {}))
    if fmt == "beir":
        corpus = p / "corpus.jsonl"
        if not corpus.is_file():
            raise CorpusError(f"{p}: BEIR folder has no corpus.jsonl")
        ctx = _Context(file=str(corpus), fields=ctx.fields, beir=True)
        raws: Iterator[RawRecord] = jsonl_records(corpus)
    elif fmt == "jsonl":
        raws = jsonl_records(p)
    elif fmt in ("csv", "tsv"):
        ctx.cells = True
        raws = csv_records(p, "\t" if fmt == "tsv" else ",")
    else:
        ctx.unit = "row"
        raws = parquet_records(p)
    return (_converted(raw, ctx) for raw in raws)


def read_corpus(path: str | Path, *, format: str | None = None,
                fields: Mapping[str, str] | None = None) -> LoadResult:
    """Collect :func:`iter_documents` into a :class:`LoadResult`."""
    docs: list[Document] = []
    rejects: list[Reject] = []
    for item in iter_documents(path, format=format, fields=fields):
        if isinstance(item, Reject):
            rejects.append(item)
        else:
            docs.append(item)
    return LoadResult(documents=docs, rejects=rejects, path=Path(path))


@dataclass
class _Context:
    file: str
    fields: dict[str, str]
    beir: bool = False
    cells: bool = False               # CSV: every value is a string cell
    unit: str = "line"
    seen: dict[str, int] = field(default_factory=dict)


def _format_of(p: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise CorpusError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
        return fmt
    if p.is_dir():
        return "beir"
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such corpus file or folder")
    found = _EXTENSIONS.get(format_suffix(p))
    if found is None:
        raise CorpusError(f"{p}: cannot tell the corpus format from the extension "
                          f"{format_suffix(p) or '(none)'!r}; expected one of "
                          f"{', '.join(_EXTENSIONS)} (optionally .gz), a BEIR folder, "
                          f"or pass format=")
    if found == "parquet" and p.name.lower().endswith(".gz"):
        raise CorpusError(f"{p}: Parquet compresses internally; expected no .gz suffix")
    return found


def _prepare(raw: RawRecord, ctx: _Context,
             problems: list[tuple[str | None, str]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Merge BEIR metadata, apply the rename map and the ``_id`` alias; note conflicts."""
    assert raw.data is not None
    rec = dict(raw.data)
    origin: dict[str, str] = {}
    if ctx.beir and "metadata" in rec:
        md = rec.pop("metadata")
        if isinstance(md, dict):
            for k, v in md.items():
                if k in rec and rec[k] != v:
                    problems.append((f"metadata.{k}", f"expected the same value as top-level "
                                     f"'{k}' ({got(rec[k])}), got {got(v)}"))
                elif k not in rec:
                    rec[k] = v
                    origin[k] = f"metadata.{k}"
        elif md is not None:
            problems.append(("metadata", f"expected an object, got {got(md)}"))
    rename = {"_id": "id", **ctx.fields}
    out: dict[str, Any] = {}
    for k, v in rec.items():
        name = rename.get(k, k)
        src = origin.get(k, k)
        if name in out and out[name] != v:
            problems.append((name, f"expected one value, got both '{origin.get(name, name)}' "
                             f"({got(out[name])}) and '{src}' ({got(v)}) mapped to '{name}'"))
            continue
        if name not in out or name == k:
            out[name] = v
            origin[name] = src
    return out, origin


def _converted(raw: RawRecord, ctx: _Context) -> Document | Reject:
    """:func:`_to_document`, with the declared policy for the unforeseen: any exception while
    converting one record makes that record a :class:`Reject` naming the exception, never the
    failure of the chunk or the run (the records around it are indexed as usual)."""
    try:
        return _to_document(raw, ctx)
    except Exception as exc:  # the record's own problem, reported as its reject
        return Reject(ctx.file, raw.line, None, f"expected a record credrank can convert, got "
                      f"one that raised {type(exc).__name__}: {exc}", raw.excerpt, ctx.unit)


def _to_document(raw: RawRecord, ctx: _Context) -> Document | Reject:
    def reject(fld: str | None, reason: str) -> Reject:
        return Reject(ctx.file, raw.line, fld, reason, raw.excerpt, ctx.unit)

    if raw.data is None or raw.error is not None:
        return reject(raw.error_field, raw.error or "unreadable record")
    problems: list[tuple[str | None, str]] = []
    for k, v in raw.data.items():  # before anything walks the values recursively
        if nesting_exceeds(v, MAX_FIELD_DEPTH + (1 if ctx.beir and k == "metadata" else 0)):
            problems.append((k, f"expected nesting at most {MAX_FIELD_DEPTH} levels deep, "
                             "got deeper"))
    if problems:
        return reject(*problems[0])
    uni = unicode_problem(raw.data, raw.bad_bytes) if raw.check_unicode else None
    if uni is not None:
        problems.append(uni)
    rec, origin = _prepare(raw, ctx, problems)

    def label(name: str) -> str:
        return origin.get(name, name)

    def absent(name: str) -> str:
        kind = "field" if ctx.unit == "line" and not ctx.cells else "column"
        hint = (f" (map a column to it: fields={{'COLUMN': '{name}'}}, on the command line "
                f"--field COLUMN={name})" if kind == "column" else "")
        return f"no '{name}' {kind}{hint}"

    has_id, has_text = "id" in rec, "text" in rec
    doc_id, err = id_value(rec.pop("id", None))
    if err is not None:
        if not has_id:
            err = f"expected a non-empty id (string or integer), got {absent('id')}"
        problems.append((label("id"), err))
    text = rec.pop("text", None)
    if not isinstance(text, str) and text is not None:
        problems.append((label("text"), f"expected a string, got {got(text)}"))
    elif text is None or not text.strip():
        came = absent("text") if not has_text else "nothing" if text is None else repr(text)
        problems.append((label("text"), f"expected non-empty text, got {came}"))
    kwargs: dict[str, Any] = {}
    for name in OPTIONAL_STR_FIELDS:
        v = rec.pop(name, None)
        if v is None or v == "":
            continue
        if not isinstance(v, str):
            problems.append((label(name), f"expected a string, got {got(v)}"))
        elif name == "source_type" and v not in SOURCE_TYPES:
            problems.append((label(name), f"expected one of {', '.join(SOURCE_TYPES)}, "
                             f"got {v!r}"))
        else:
            kwargs[name] = v
    for name in DATE_FIELDS:
        v = rec.pop(name, None)
        if v is None or v == "":
            continue
        dt, err = date_value(v)
        if err is not None:
            problems.append((label(name), err))
        else:
            kwargs[name] = dt
    cites, cerr = cites_value(rec.pop("cites", None), ctx.cells)
    if cerr is not None:
        problems.append((label("cites") + cerr[0], cerr[1]))
    for k, v in rec.items():
        if (r := nonfinite(v)) is not None:
            problems.append((label(k), r))
        elif (size := json_size(v)) > MAX_EXTRA_BYTES:
            problems.append((label(k), f"expected at most {MAX_EXTRA_BYTES} bytes of JSON, "
                             f"got {size}"))

    if problems:
        (fld, reason), rest = problems[0], problems[1:]
        if rest:
            others = ", ".join(f"'{f}'" if f else "record" for f, _ in rest)
            reason += f" (and {len(rest)} more: {others})"
        return reject(fld, reason)
    assert doc_id is not None and isinstance(text, str)
    first = ctx.seen.get(doc_id)
    if first is not None:
        return reject(label("id"), f"expected a unique id, got {doc_id!r} again "
                      f"(first seen at {ctx.unit} {first})")
    ctx.seen[doc_id] = raw.line
    return Document(id=doc_id, text=text, cites=cites, extra=rec, **kwargs)
