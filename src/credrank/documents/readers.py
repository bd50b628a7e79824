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
* **optional strings** (title, url, source_id, source_type, claim_class): null or ``""``
  means absent. An empty CSV cell is null.
* **flags** (``persistent``, :data:`~credrank.documents.schema.FLAG_FIELDS`): ``true`` or
  ``false``, or that text in any case (a CSV cell); anything else (``yes``, ``1``) cannot be
  read (dropped, or rejected with ``strict``), never taken as false.
* **source_type**: when declared, exactly one of :data:`~credrank.documents.schema.SOURCE_TYPES`.
* **lenient reading** (the default; ``strict=False``, ``credrank index`` without
  ``--strict``): a record is rejected only for what it cannot be indexed without — a missing or
  unusable ``id`` or ``text``, an unreadable record (malformed JSON, bad CSV), a value conflict
  (``--field`` renames, BEIR metadata), a duplicate id, a payload bound. An *optional* field
  whose value cannot be read (a date, title, url, source_id, declared source_type,
  claim_class, persistent, cites, an
  unknown field with non-finite numbers or bad bytes) is **dropped** and reported as a
  :class:`~credrank.documents.records.DroppedField` (``file:line: field 'published_at'
  dropped: expected …, got …``) while the record is indexed. ``strict=True`` rejects the record
  instead, as before lenient reading existed.
* **dates** (:data:`~credrank.documents.schema.DATE_FIELDS`): normalised to UTC. Strict
  reading takes ISO 8601 only, with a timezone. Lenient reading also takes written dates
  (python-dateutil: ``11-Apr-20``, ``April 17, 2020 at 5:47 pm``, RFC 2822) but never guesses:
  a date without year, month or day, a day/month order that reads two ways (``2/11/20``), a
  relative date or an unknown zone name is dropped
  (:func:`~credrank.documents.fields.lenient_date_value`). A user who knows the source may
  declare the order of all-numeric day/month dates, ``date_order`` ``mdy`` or ``dmy``
  (``credrank index --date-order``): every such date is then read that way (counted in
  ``dates_ordered``), one that cannot be (``13/2/20`` under ``mdy``) is dropped naming the
  order, and ISO or written dates read as without it. Strict reading takes no
  ``date_order`` (ISO 8601 only). A date-only value (``2023-05-01``,
  or a Parquet ``date`` column) means midnight UTC of that day. A date and time *without*
  timezone takes ``assume_timezone`` (lenient default UTC, declared and counted in
  ``zones_assumed``; strict reading rejects it, "timezone missing", unless
  ``assume_timezone`` is given): guessing a zone silently shifts ages, which feed freshness
  (chapter 35.7). Parquet nanosecond timestamps (and times and durations, at any depth) are
  truncated to microseconds, Python's resolution.
* **required columns**: a CSV/TSV header or Parquet schema that names no ``id`` or no
  ``text`` column (after ``fields`` renames; ``_id`` counts as ``id``) raises
  :class:`CorpusError` once, naming the file and the header found, before any record.
* **cites**: a list of ids (strings; integers converted as for ``id``). In CSV the cell holds a
  JSON list (``["a", "b"]``) or a ``|``-separated string (``a|b``).
* **unknown fields** go to ``Document.extra`` (payload, never evidence of source type), as
  JSON data. A Parquet column of another Arrow type is converted by
  :func:`~credrank.documents.formats.parquet.json_value`: a timestamp with a zone → ISO 8601
  text in UTC, one without → ISO 8601 text without a zone (none is assumed), a date →
  ``YYYY-MM-DD``, a time → ``HH:MM:SS[.ffffff]``, a duration → seconds (a number), a decimal
  → its exact text, binary → base64 text, structs, maps and lists recursively. A value it
  cannot convert (an object with non-text keys) is an unreadable optional field: dropped
  (strict reading: rejected) naming the row and the column, as is a Parquet cell Python
  cannot hold at all (a date beyond year 9999, a map with a repeated key) in any optional
  column; in ``id`` or ``text`` it rejects the record.
* **duplicates**: among *accepted* documents, the later occurrence of an id is rejected and the
  message names the line of the first.
* **encoding**: input must be UTF-8 (a leading BOM is ignored). JSONL is checked per line, CSV per
  record, naming the field that holds the bad bytes when it can be found. Lone surrogate escapes
  (``"\\udc80"``) are refused too: they cannot be stored as UTF-8. Bad text in ``id`` or
  ``text`` rejects the record; in another field, lenient reading drops that field.
* **numbers**: JSON ``NaN``/``Infinity`` anywhere in a record make it unreadable (rejected);
  a non-finite float in an unknown field (Parquet) is dropped (strict reading: rejected).
* **payload bounds** (a reject in both readings): every field nests at most :data:`MAX_FIELD_DEPTH`
  (32) levels of lists and objects (a scalar is 0 levels, ``[1]`` is 1), and every unknown
  (``extra``) field serializes to at most :data:`MAX_EXTRA_BYTES` (64 KiB) of UTF-8 JSON. Deeper or
  larger values are rejected (``expected nesting at most 32 levels deep, got deeper``): vector
  engines store the payload in recursive formats (Qdrant Edge's WAL fails to load beyond ~120
  levels), so one such record would brick the index. A JSONL line is checked for depth *before* it
  is parsed, without recursion, so even 100,000 levels are a reject, never a ``RecursionError``.
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

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, tzinfo
from pathlib import Path
from typing import Any, NamedTuple

from credrank.core.structured import nesting_exceeds
from credrank.core.validation import check_bool
from credrank.documents.fields import (
    MAX_EXTRA_BYTES,
    MAX_FIELD_DEPTH,
    cites_value,
    date_order_value,
    date_value,
    excerpt,
    flag_value,
    got,
    id_value,
    json_size,
    lenient_date_value,
    nonfinite,
    numeric_day_month,
    timezone_value,
    unicode_problem,
    url_credentials,
    zone_name,
)
from credrank.documents.files import format_suffix
from credrank.documents.formats.csv import csv_records
from credrank.documents.formats.jsonl import jsonl_records
from credrank.documents.formats.parquet import Unreadable, json_value, parquet_records
from credrank.documents.records import (
    CorpusError,
    DroppedField,
    LoadResult,
    RawRecord,
    Reject,
    load_summary,
    write_rejects,
)
from credrank.documents.schema import (
    DATE_FIELDS,
    FLAG_FIELDS,
    OPTIONAL_STR_FIELDS,
    SOURCE_TYPES,
    Document,
)

__all__ = [
    "FORMATS",
    "MAX_EXTRA_BYTES",
    "MAX_FIELD_DEPTH",
    "CorpusError",
    "DocumentStream",
    "DroppedField",
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
                   fields: Mapping[str, str] | None = None, strict: bool = False,
                   assume_timezone: str | tzinfo | None = None,
                   date_order: str | None = None, unit: str = "line",
                   words: Callable[[str], str] | None = None) -> DocumentStream:
    """Yield a :class:`Document` or a :class:`Reject` per record, in file order (streaming).

    ``format`` is one of ``jsonl, csv, tsv, parquet, beir`` (default: from the extension; a
    directory is a BEIR folder). ``fields`` renames the file's fields to schema names, e.g.
    ``{"doc_id": "id", "timestamp": "retrieved_at"}``; messages keep the file's names.
    ``strict``, ``assume_timezone`` and ``date_order`` choose the reading (module docstring:
    lenient by default, an unreadable optional field dropped and listed in the stream's
    ``dropped``; ``assume_timezone`` is checked by
    :func:`~credrank.documents.fields.timezone_value`, ``date_order`` — ``mdy``, ``dmy`` or
    ``None`` — by :func:`~credrank.documents.fields.date_order_value`; with ``strict`` it is
    an error).
    ``unit`` names a record's position in rejects, dropped fields and reasons: ``line`` (the
    default) or ``record`` (records sent as a list, one per line: ``POST /index``); a Parquet
    file's is always ``row``. ``words(name)`` is how the caller spells the option ``name``
    in a message (``fields`` → ``--field`` for the CLI, which then says ``--field
    COLUMN=id``); default: both spellings, the flag and the keyword.
    A missing file, an unknown format, a bad option or an unusable header (no ``id`` or
    ``text`` column, repeated names) raises at once, not lazily: the first record is read
    here.
    """
    strict = check_bool("strict", strict)
    if unit not in ("line", "record"):
        raise ValueError(f"unit: expected line or record, got {unit!r}")
    order = date_order_value(date_order)
    if strict and order is not None:
        raise ValueError(f"date_order: expected no declared order with strict reading (it "
                         f"takes ISO 8601 dates only), got {order!r}")
    zone = (timezone_value(assume_timezone) if assume_timezone is not None or not strict
            else None)
    p = Path(path)
    fmt = _format_of(p, format)
    ctx = _Context(file=str(p), fields=dict(fields or {}), strict=strict, zone=zone,
                   order=order, unit=unit, words=words)
    if fmt == "beir":
        corpus = p / "corpus.jsonl"
        if not corpus.is_file():
            raise CorpusError(f"{p}: BEIR folder has no corpus.jsonl")
        ctx.file, ctx.beir = str(corpus), True
        raws: Iterator[RawRecord] = jsonl_records(corpus)
    elif fmt == "jsonl":
        raws = jsonl_records(p)
    elif fmt in ("csv", "tsv"):
        ctx.cells = True
        raws = csv_records(p, "\t" if fmt == "tsv" else ",", ctx.check_header)
    else:
        ctx.unit, ctx.arrow = "row", True
        raws = parquet_records(p, ctx.check_header)
    return DocumentStream((_converted(raw, ctx) for raw in raws), ctx)


class DocumentStream(Iterator[Document | Reject]):
    """The records of one corpus as :func:`iter_documents` reads them, with what the reading
    noted on the way: ``dropped`` (the optional fields left out of loaded documents, in file
    order), ``zones_assumed`` (dates without a time zone read in ``assume_timezone``),
    ``dates_ordered`` (all-numeric day/month dates read in the declared ``date_order``) and
    ``unused_fields`` (the mappings no record used). All are complete once the stream is
    exhausted."""

    def __init__(self, records: Iterator[Document | Reject], ctx: _Context) -> None:
        self._records = records
        self._ctx = ctx
        self._head: list[Document | Reject] = []
        try:  # the header (and the first record) now: a file-level problem raises here
            self._head.append(next(records))
        except StopIteration:
            pass

    def __iter__(self) -> DocumentStream:
        return self

    def __next__(self) -> Document | Reject:
        if self._head:
            return self._head.pop()
        return next(self._records)

    @property
    def file(self) -> str:
        return self._ctx.file

    @property
    def strict(self) -> bool:
        return self._ctx.strict

    @property
    def assume_timezone(self) -> str | None:
        """The zone of dates written without one (``UTC``), ``None`` when strict reading
        rejects them."""
        return zone_name(self._ctx.zone) if self._ctx.zone is not None else None

    @property
    def date_order(self) -> str | None:
        """The declared order of all-numeric day/month dates (``mdy``, ``dmy``), ``None``
        when none was (those that read two ways are dropped)."""
        return self._ctx.order

    @property
    def dates_ordered(self) -> int:
        return self._ctx.dates_ordered

    @property
    def dropped(self) -> list[DroppedField]:
        return self._ctx.dropped

    @property
    def zones_assumed(self) -> int:
        return self._ctx.zones_assumed

    @property
    def unused_fields(self) -> dict[str, str]:
        """The mappings of ``fields`` whose key no record had (``{"lnk": "url"}``): a
        misspelt ``--field`` of a JSONL file was never used, unreported (a header format
        refuses it at its header)."""
        return {k: v for k, v in self._ctx.fields.items() if k not in self._ctx.mapped_seen}


def read_corpus(path: str | Path, *, format: str | None = None,
                fields: Mapping[str, str] | None = None, strict: bool = False,
                assume_timezone: str | tzinfo | None = None,
                date_order: str | None = None) -> LoadResult:
    """Collect :func:`iter_documents` into a :class:`LoadResult` (with its ``dropped``
    fields, ``zones_assumed``, ``dates_ordered`` and ``unused_fields``)."""
    docs: list[Document] = []
    rejects: list[Reject] = []
    stream = iter_documents(path, format=format, fields=fields, strict=strict,
                            assume_timezone=assume_timezone, date_order=date_order)
    for item in stream:
        if isinstance(item, Reject):
            rejects.append(item)
        else:
            docs.append(item)
    return LoadResult(documents=docs, rejects=rejects, path=Path(path),
                      dropped=list(stream.dropped), zones_assumed=stream.zones_assumed,
                      assume_timezone=stream.assume_timezone,
                      date_order=stream.date_order, dates_ordered=stream.dates_ordered,
                      unused_fields=stream.unused_fields)


#: the columns a corpus cannot be indexed without
REQUIRED = ("id", "text")
#: header names shown in a missing-column error before ``… and N more``
_HEADER_SHOWN = 30


@dataclass
class _Context:
    file: str
    fields: dict[str, str]
    strict: bool = False
    zone: tzinfo | None = None
    order: str | None = None          # date_order: mdy, dmy or None
    beir: bool = False
    cells: bool = False               # CSV: every value is a string cell
    arrow: bool = False               # Parquet: values of Arrow types, extra ones made JSON
    unit: str = "line"
    #: how the caller spells an option (``fields`` → ``--field``); ``None``: the library
    words: Callable[[str], str] | None = None
    seen: dict[str, int] = field(default_factory=dict)
    dropped: list[DroppedField] = field(default_factory=list)
    #: the keys of ``fields`` some record had (a JSONL file has no header to check them by)
    mapped_seen: set[str] = field(default_factory=set)
    zones_assumed: int = 0
    dates_ordered: int = 0

    def schema_name(self, key: str) -> str:
        """The schema name a file's field is read as (``fields`` renames, ``_id`` → id)."""
        return self.fields.get(key, "id" if key == "_id" else key)

    def mapping(self, column: str, name: str) -> str:
        """The mapping of the file's ``column`` to the schema's ``name`` as the caller writes
        it: ``--field COLUMN=id`` (the CLI's ``words``); by default both spellings, the
        flag and the keyword (``in Python fields={'COLUMN': 'id'}``)."""
        if self.words is not None:
            return f"{self.words('fields')} {column}={name}"
        return f"--field {column}={name}, in Python fields={{{column!r}: {name!r}}}"

    def check_header(self, line: int | None, names: list[str]) -> None:
        """Raise :class:`CorpusError` when the header names no ``id`` or ``text`` column, or
        lacks a column ``fields`` maps (a misspelt ``--field lnk=url`` was never used: no URL
        was read, unreported)."""
        mapped = {self.schema_name(n) for n in names}
        missing = [n for n in REQUIRED if n not in mapped]
        shown = ", ".join(repr(excerpt(n)) for n in names[:_HEADER_SHOWN])
        if len(names) > _HEADER_SHOWN:
            shown += f" … and {len(names) - _HEADER_SHOWN} more"
        what = "header" if line is None else f"header (line {line})"
        absent = [k for k in self.fields if k not in names]
        if absent:
            key = absent[0]
            raise CorpusError(
                f"{self.file}: expected a {what} with the column {key!r} mapped by "
                f"{self.mapping(key, self.fields[key])}, got {len(names)} columns: "
                f"{shown}; nothing was read")
        if not missing:
            return
        name = missing[0]
        raise CorpusError(
            f"{self.file}: expected a {what} naming the columns "
            f"{' and '.join(repr(n) for n in REQUIRED)}, got {len(names)} columns: {shown} "
            f"(no {' and no '.join(repr(n) for n in missing)} column: map one with "
            f"{self.mapping('COLUMN', name)}); nothing was read")


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


class _Problem(NamedTuple):
    """A problem of one record: the field it is about (the file's name; ``None``: the whole
    record), the reason, and whether lenient reading may drop that field instead of
    rejecting the record (an optional field whose value cannot be read)."""

    field: str | None
    reason: str
    droppable: bool = False


def _prepare(raw: RawRecord, ctx: _Context, data: dict[str, Any],
             problems: list[_Problem]) -> tuple[dict[str, Any], dict[str, str]]:
    """Merge BEIR metadata, apply the rename map and the ``_id`` alias; note conflicts."""
    rec = dict(data)
    from_metadata: dict[str, str] = {}  # a key of the record → "metadata.KEY" when it came so
    if ctx.beir and "metadata" in rec:
        md = rec.pop("metadata")
        if isinstance(md, dict):
            for k, v in md.items():
                if k in rec and rec[k] != v:
                    problems.append(_Problem(
                        f"metadata.{k}", f"expected the same value as top-level '{k}' "
                        f"({got(rec[k])}), got {got(v)}"))
                elif k not in rec:
                    rec[k] = v
                    from_metadata[k] = f"metadata.{k}"
        elif md is not None:
            problems.append(_Problem("metadata", f"expected an object, got {got(md)}"))
    rename = {"_id": "id", **ctx.fields}
    out: dict[str, Any] = {}
    origin: dict[str, str] = {}  # a field of the document → the key of the file it came from
    for k, v in rec.items():
        name = rename.get(k, k)
        if k in ctx.fields:
            ctx.mapped_seen.add(k)
        src = from_metadata.get(k, k)
        if name in out and out[name] != v:
            problems.append(_Problem(
                name, f"expected one value, got both '{origin.get(name, name)}' "
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


def _unicode_drops(raw: RawRecord, ctx: _Context, data: dict[str, Any],
                   problems: list[_Problem]) -> None:
    """Lenient reading: a field holding text that is not valid Unicode is taken out of
    ``data`` (a droppable problem naming it), unless it is read as ``id`` or ``text``: that
    stays, and its problem rejects the record (BEIR: a ``metadata`` entry on its own)."""
    for key in list(data):
        value = data[key]
        if ctx.beir and key == "metadata" and isinstance(value, dict) and \
                unicode_problem({key: value}, raw.bad_bytes) is not None:
            inner = dict(value)
            for sub in list(inner):
                found = unicode_problem({sub: inner[sub]}, raw.bad_bytes)
                if found is not None:
                    problem = _unicode_problem(f"metadata.{excerpt(sub)}",
                                               f"metadata.{found[0]}", found[1],
                                               ctx.schema_name(sub))
                    problems.append(problem)
                    if problem.droppable:
                        del inner[sub]
            data[key] = inner
            continue
        found = unicode_problem({key: value}, raw.bad_bytes)
        if found is not None:
            problem = _unicode_problem(excerpt(key), found[0], found[1], ctx.schema_name(key))
            problems.append(problem)
            if problem.droppable:
                del data[key]


def _unicode_problem(name: str, path: str, reason: str, schema_name: str) -> _Problem:
    if schema_name in REQUIRED:
        return _Problem(path, reason)
    return _Problem(name, reason if path == name else f"{reason} (at '{path}')", True)


def _to_document(raw: RawRecord, ctx: _Context) -> Document | Reject:
    def reject(fld: str | None, reason: str) -> Reject:
        return Reject(ctx.file, raw.line, fld, reason, raw.excerpt, ctx.unit)

    if raw.data is None or raw.error is not None:
        return reject(raw.error_field, raw.error or "unreadable record")
    for k, v in raw.data.items():  # before anything walks the values recursively
        if nesting_exceeds(v, MAX_FIELD_DEPTH + (1 if ctx.beir and k == "metadata" else 0)):
            return reject(k, f"expected nesting at most {MAX_FIELD_DEPTH} levels deep, got "
                          "deeper")
    problems: list[_Problem] = []
    data = dict(raw.data)
    if raw.check_unicode:
        if ctx.strict:
            uni = unicode_problem(data, raw.bad_bytes)
            if uni is not None:
                problems.append(_Problem(*uni))
        else:
            _unicode_drops(raw, ctx, data, problems)
    rec, origin = _prepare(raw, ctx, data, problems)

    def label(name: str) -> str:
        return origin.get(name, name)

    # Parquet cells Python cannot hold: their field's problem (droppable unless id or text)
    bad = {k: rec.pop(k).reason for k in list(rec) if isinstance(rec[k], Unreadable)}
    problems.extend(_Problem(label(k), why, k not in REQUIRED) for k, why in bad.items())

    def absent(name: str) -> str:
        kind = "column" if ctx.cells or ctx.arrow else "field"
        hint = (f" (map a column to it: {ctx.mapping('COLUMN', name)})" if kind == "column"
                else "")
        return f"no '{name}' {kind}{hint}"

    has_id, has_text = "id" in rec, "text" in rec
    doc_id, err = id_value(rec.pop("id", None))
    if err is not None and "id" not in bad:
        if not has_id:
            err = f"expected a non-empty id (string or integer), got {absent('id')}"
        problems.append(_Problem(label("id"), err))
    text = rec.pop("text", None)
    if "text" in bad:
        pass
    elif not isinstance(text, str) and text is not None:
        problems.append(_Problem(label("text"), f"expected a string, got {got(text)}"))
    elif text is None or not text.strip():
        came = absent("text") if not has_text else "nothing" if text is None else repr(text)
        problems.append(_Problem(label("text"), f"expected non-empty text, got {came}"))
    kwargs: dict[str, Any] = {}
    for name in OPTIONAL_STR_FIELDS:
        v = rec.pop(name, None)
        if v is None or v == "":
            continue
        if not isinstance(v, str):
            problems.append(_Problem(label(name), f"expected a string, got {got(v)}", True))
        elif name == "source_type" and v not in SOURCE_TYPES:
            problems.append(_Problem(label(name), f"expected one of {', '.join(SOURCE_TYPES)}, "
                                     f"got {v!r}", True))
        elif name == "url" and (secret := url_credentials(v)) is not None:
            problems.append(_Problem(label(name), secret))  # never dropped: the record goes
        else:
            kwargs[name] = v
    for name in FLAG_FIELDS:
        v = rec.pop(name, None)
        if v is None or v == "":
            continue
        flag, err = flag_value(v)
        if err is not None:
            problems.append(_Problem(label(name), err, True))
        else:
            kwargs[name] = flag
    assumed = ordered = 0
    for name in DATE_FIELDS:
        v = rec.pop(name, None)
        if v is None or v == "":
            continue
        if ctx.strict:
            dt, err = date_value(v, ctx.zone)
            naive = err is None and _naive(v)
        else:
            assert ctx.zone is not None
            dt, err, naive = lenient_date_value(v, ctx.zone, ctx.order)
        if err is not None:
            problems.append(_Problem(label(name), err, True))
        else:
            kwargs[name] = dt
            assumed += naive
            ordered += ctx.order is not None and numeric_day_month(v)
    cites, cerr = cites_value(rec.pop("cites", None), ctx.cells)
    if cerr is not None:
        if ctx.strict or not cerr[0]:
            problems.append(_Problem(label("cites") + cerr[0], cerr[1], True))
        else:
            problems.append(_Problem(label("cites"), f"{cerr[1]} (at {label('cites')}"
                                     f"{cerr[0]})", True))
    unreadable: list[str] = []
    for k, v in list(rec.items()):
        if ctx.arrow:  # Parquet: the value as JSON data (json_value), or the field's problem
            v, why = json_value(v, label(k))
            if why is not None:
                problems.append(_Problem(label(k), why, True))
                unreadable.append(k)
                continue
            rec[k] = v
        if (r := nonfinite(v)) is not None:
            problems.append(_Problem(label(k), r, True))
            unreadable.append(k)
        elif (size := json_size(v)) > MAX_EXTRA_BYTES:
            problems.append(_Problem(label(k), f"expected at most {MAX_EXTRA_BYTES} bytes of "
                                     f"JSON, got {size}"))

    hard = problems if ctx.strict else [p for p in problems if not p.droppable]
    if hard:
        first = hard[0]
        rest = [p for p in problems if p is not first]
        reason = first.reason
        if rest:
            others = ", ".join(f"'{p.field}'" if p.field else "record" for p in rest)
            reason += f" (and {len(rest)} more: {others})"
        return reject(first.field, reason)
    assert doc_id is not None and isinstance(text, str)
    first_seen = ctx.seen.get(doc_id)
    if first_seen is not None:
        return reject(label("id"), f"expected a unique id, got {doc_id!r} again "
                      f"(first seen at {ctx.unit} {first_seen})")
    ctx.seen[doc_id] = raw.line
    for k in unreadable:
        del rec[k]
    ctx.dropped.extend(DroppedField(ctx.file, raw.line, p.field or "", p.reason, raw.excerpt,
                                    doc_id, ctx.unit) for p in problems)
    ctx.zones_assumed += assumed
    ctx.dates_ordered += ordered
    return Document(id=doc_id, text=text, cites=cites, extra=rec, **kwargs)


def _naive(v: Any) -> bool:
    """Whether a date value accepted by strict reading had no time zone of its own (a
    date-only value is a day, not a time: it is midnight UTC and not counted)."""
    if isinstance(v, datetime):
        return v.tzinfo is None or v.utcoffset() is None
    if isinstance(v, date) or not isinstance(v, str):
        return False
    try:
        date.fromisoformat(v.strip())
        return False
    except ValueError:
        pass
    try:
        return datetime.fromisoformat(v.strip()).tzinfo is None
    except ValueError:
        return False
