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
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, Any

from credrank.core.structured import json_too_deep, nesting_exceeds
from credrank.core.validation import is_integer
from credrank.documents.schema import DATE_FIELDS, SOURCE_TYPES, Document

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
_EXCERPT = 200
_SHOWN = 10
_BOM = b"\xef\xbb\xbf"
_STR_FIELDS = ("title", "url", "source_id", "source_type")
MAX_FIELD_DEPTH = 32
"""Most levels of nested lists/objects in one field's value (a scalar is 0 levels)."""
MAX_EXTRA_BYTES = 64 * 1024
"""Most bytes of UTF-8 JSON one unknown (``Document.extra``) field may serialize to."""
_READ_ERRORS = (EOFError, OSError, zlib.error)


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

    def raise_if_rejected(self, limit: int = _SHOWN) -> None:
        """Raise :class:`CorpusError` listing the first ``limit`` rejects, if there are any."""
        if self.rejects:
            raise CorpusError(_listing(
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
        raws: Iterator[_Raw] = _jsonl_records(corpus)
    elif fmt == "jsonl":
        raws = _jsonl_records(p)
    elif fmt in ("csv", "tsv"):
        ctx.cells = True
        raws = _csv_records(p, "\t" if fmt == "tsv" else ",")
    else:
        ctx.unit = "row"
        raws = _parquet_records(p)
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
class _Raw:
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
            return _excerpt(self.source)
        return _excerpt(json.dumps(self.source, default=str, ensure_ascii=False))


@dataclass
class _Context:
    file: str
    fields: dict[str, str]
    beir: bool = False
    cells: bool = False               # CSV: every value is a string cell
    unit: str = "line"
    seen: dict[str, int] = field(default_factory=dict)


def _suffix(p: Path) -> str:
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def _format_of(p: Path, fmt: str | None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise CorpusError(f"format: expected one of {', '.join(FORMATS)}, got {fmt!r}")
        return fmt
    if p.is_dir():
        return "beir"
    if not p.exists():
        raise FileNotFoundError(f"{p}: no such corpus file or folder")
    found = _EXTENSIONS.get(_suffix(p))
    if found is None:
        raise CorpusError(f"{p}: cannot tell the corpus format from the extension "
                          f"{_suffix(p) or '(none)'!r}; expected one of "
                          f"{', '.join(_EXTENSIONS)} (optionally .gz), a BEIR folder, "
                          f"or pass format=")
    if found == "parquet" and p.name.lower().endswith(".gz"):
        raise CorpusError(f"{p}: Parquet compresses internally; expected no .gz suffix")
    return found


def _open_binary(p: Path) -> IO[bytes]:
    if p.name.lower().endswith(".gz"):
        return gzip.open(p, "rb")
    return p.open("rb")


def _excerpt(text: str) -> str:
    clean = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    clean = clean.encode("utf-8", "replace").decode("utf-8")  # lone \ud800-style surrogates
    clean = clean.rstrip("\r\n")
    return clean if len(clean) <= _EXCERPT else clean[:_EXCERPT] + "…"


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


def _loads(text: str) -> Any:
    """Strict JSON: no NaN/Infinity, no non-finite numbers, no repeated keys."""
    return _DECODER.decode(text)


def _json_kind(v: Any) -> str:
    if isinstance(v, list):
        return "array"
    return {str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(v), "null" if v is None else type(v).__name__)


def _read_error(p: Path, records: int, line: int, exc: BaseException) -> CorpusError:
    """A decompression/read failure as a :class:`CorpusError` naming file and progress."""
    what = ("expected a complete gzip stream, got a truncated or corrupt one"
            if p.name.lower().endswith(".gz") else "expected a readable file, got a read error")
    return CorpusError(f"{p}: {what} after {records} records (at line {line}): "
                       f"{type(exc).__name__}: {exc}")


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]')


def _too_deep_json(text: str, limit: int) -> tuple[str | None, bool]:
    """Whether a JSON text nests deeper than ``limit`` (record level 1 included), and the
    top-level key under which it does; a linear scan without recursion, before parsing."""
    if text.count("[") + text.count("{") <= limit:
        return None, False
    depth = 0
    key: str | None = None
    last: str | None = None
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > limit:
                return key, True
        elif tok in "]}":
            depth -= 1
        elif tok == ":":
            if depth == 1 and last is not None and last.startswith('"'):
                try:
                    key = json.loads(last)
                except ValueError:
                    key = last[1:-1]
        last = tok
    return None, False


def _universal_lines(fh: IO[bytes]) -> Iterator[bytes]:
    """Lines ending in ``\n``, ``\r\n`` or a lone ``\r`` (old Mac), as universal newlines
    do; a ``\r`` byte never occurs inside a UTF-8 multi-byte character or valid JSON."""
    for line in fh:
        if b"\r" in line.rstrip(b"\r\n"):
            yield from line.splitlines(keepends=True)
        else:
            yield line


def _jsonl_records(p: Path) -> Iterator[_Raw]:
    records = 0
    n = 0
    with _open_binary(p) as fh:
        lines = _universal_lines(fh)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                break
            except _READ_ERRORS as e:
                raise _read_error(p, records, n + 1, e) from e
            n += 1
            records += bool(raw.strip())
            if n == 1 and raw.startswith(_BOM):
                raw = raw[len(_BOM):]
            if not raw.strip():
                continue
            bad: tuple[int, int] | None = None
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                bad = (e.start, raw[e.start])
                text = raw.decode("utf-8", "surrogateescape")
            excerpt = text[:_EXCERPT + 1]
            # the record object is level 1; BEIR metadata may add one more around a field
            key, deep = _too_deep_json(text, MAX_FIELD_DEPTH + 2)
            if deep:
                reason = f"expected nesting at most {MAX_FIELD_DEPTH} levels deep, got deeper"
                if key is None:
                    yield _Raw(n, None, excerpt, error=reason)
                else:
                    yield _Raw(n, {}, excerpt, error=reason, error_field=_excerpt(key))
                continue
            try:
                obj = _loads(text)
            except RecursionError:  # not reachable after the scan above; kept as a guard
                yield _Raw(n, None, excerpt, error=f"expected nesting at most "
                           f"{MAX_FIELD_DEPTH} levels deep, got deeper")
                continue
            except ValueError as e:
                if bad is not None:
                    msg = (f"expected UTF-8 text, got invalid byte 0x{bad[1]:02x} at byte "
                           f"{bad[0] + 1} of the line")
                elif isinstance(e, json.JSONDecodeError):
                    msg = (f"expected a JSON object, got malformed JSON "
                           f"({e.msg} at column {e.colno})")
                else:
                    msg = f"expected a JSON object, got malformed JSON ({e})"
                yield _Raw(n, None, excerpt, error=msg)
                continue
            if not isinstance(obj, dict):
                yield _Raw(n, None, excerpt,
                           error=f"expected a JSON object, got {_json_kind(obj)}")
                continue
            yield _Raw(n, obj, excerpt, bad_bytes=bad is not None,
                       check_unicode=bad is not None or "\\ud" in text or "\\uD" in text)


class _LineTap:
    """Line iterator that counts physical lines and keeps the start of the current record."""

    def __init__(self, lines: Iterator[str]) -> None:
        self._lines = lines
        self.n = 0
        self._buf: list[str] = []
        self._len = 0

    def __iter__(self) -> _LineTap:
        return self

    def __next__(self) -> str:
        line = next(self._lines)
        self.n += 1
        if self._len < _EXCERPT:
            self._buf.append(line)
            self._len += len(line)
        return line

    def take(self) -> str:
        text = "".join(self._buf)
        self._buf.clear()
        self._len = 0
        return text


def _csv_records(p: Path, delimiter: str) -> Iterator[_Raw]:
    """CSV/TSV records; a broken record spanning lines restarts parsing at its next line."""
    old_limit = csv.field_size_limit()
    csv.field_size_limit(max(old_limit, 1 << 30))
    state = _CsvState()
    try:
        skip = 0
        while skip >= 0:
            skip = yield from _csv_pass(p, delimiter, skip, state)
    finally:
        csv.field_size_limit(old_limit)


@dataclass
class _CsvState:
    header: list[str] | None = None
    header_line: int = 0
    records: int = 0


def _csv_pass(p: Path, delimiter: str, skip: int,
              state: _CsvState) -> Iterator[_Raw]:
    """Parse from physical line ``skip + 1``; return where to restart, or -1 at the end."""
    with _open_binary(p) as bfh:
        tfh = io.TextIOWrapper(bfh, encoding="utf-8-sig", errors="surrogateescape",
                               newline="")
        tap = _LineTap(iter(tfh))
        reader = csv.reader(tap, delimiter=delimiter, strict=True)
        try:
            for _ in range(skip):
                next(tap)
        except StopIteration:
            return -1
        except _READ_ERRORS as e:
            raise _read_error(p, state.records, tap.n + 1, e) from e
        tap.take()
        while True:
            start = tap.n + 1
            try:
                row = next(reader)
            except StopIteration:
                if state.header is None:
                    raise CorpusError(f"{p}: expected a header line naming the columns (id, "
                                      "text, …), got an empty file") from None
                return -1
            except _READ_ERRORS as e:
                raise _read_error(p, state.records, tap.n + 1, e) from e
            except csv.Error as e:
                text = tap.take()
                if state.header is None:
                    raise CorpusError(f"{p}:{start}: expected a CSV header, got an "
                                      f"unreadable line ({e})") from e
                state.records += 1
                if tap.n > start:  # a quoted field ran on: read its following lines again
                    yield _Raw(start, None, text, error=(
                        f"expected well-formed CSV, got a parse error ({e}) in a record "
                        f"running from line {start} to line {tap.n} (unterminated quote?); "
                        f"the lines after {start} are read as records of their own"))
                    return start
                yield _Raw(start, None, text,
                           error=f"expected well-formed CSV, got a parse error ({e})")
                continue
            text = tap.take()
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if state.header is None:
                state.header = [h.strip() for h in row]
                state.header_line = start
                _check_header(p, start, state.header)
                continue
            header = state.header
            state.records += 1
            if len(row) != len(header):
                reason = (f"expected {len(header)} columns as in the header "
                          f"(line {state.header_line}), got {len(row)}")
                if tap.n > start:
                    yield _Raw(start, None, text, error=(
                        f"{reason} in a record running from line {start} to line {tap.n} "
                        f"(unterminated quote?); the lines after {start} are read as "
                        f"records of their own"))
                    return start
                yield _Raw(start, None, text, error=reason)
                continue
            data = {h: (v if v != "" else None) for h, v in zip(header, row, strict=True)}
            bad = any(_has_surrogate(v) for v in row)
            yield _Raw(start, data, text, bad_bytes=bad, check_unicode=bad)


def _check_header(p: Path, line: int, header: list[str]) -> None:
    bad = [h for h in header if _has_surrogate(h)]
    if bad:
        raise CorpusError(f"{p}:{line}: expected a UTF-8 header, got invalid bytes in column "
                          f"{_excerpt(bad[0])!r}")
    dupes = sorted({h for h in header if header.count(h) > 1})
    if dupes:
        raise CorpusError(f"{p}:{line}: expected unique column names, got {dupes} repeated")


def _parquet_records(p: Path) -> Iterator[_Raw]:
    # Imported here on purpose: `import pyarrow.parquet` measured 40-180 ms on the 2-core
    # machine (as much as the rest of credrank.documents), which every CLI call would pay
    # although only Parquet corpora need it.
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(p)
    except (OSError, pa.ArrowException) as e:
        raise CorpusError(f"{p}: expected a Parquet file, got an unreadable one ({e})") from e
    names = pf.schema_arrow.names
    dupes = sorted({h for h in names if names.count(h) > 1})
    if dupes:
        raise CorpusError(f"{p}: expected unique column names, got {dupes} repeated")
    row = 0
    for batch in pf.iter_batches(batch_size=1024):
        cols = []
        for col, f in zip(batch.columns, batch.schema, strict=True):
            if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
                col = col.cast(pa.timestamp("us", tz=f.type.tz), safe=False)
            cols.append(col)
        for rec in pa.RecordBatch.from_arrays(cols, names=batch.schema.names).to_pylist():
            row += 1
            yield _Raw(row, rec, rec)



def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _unicode_problem(rec: Mapping[str, Any], bad_bytes: bool) -> tuple[str, str] | None:
    """First key or string value that is not valid Unicode, as (field path, reason)."""

    def reason(s: str) -> str:
        ch = next(c for c in s if 0xD800 <= ord(c) <= 0xDFFF)
        if bad_bytes and 0xDC80 <= ord(ch) <= 0xDCFF:
            return f"expected UTF-8 text, got invalid byte 0x{ord(ch) - 0xDC00:02x}"
        return f"expected valid Unicode, got a lone surrogate U+{ord(ch):04X}"

    def walk(path: str, v: Any) -> tuple[str, str] | None:
        if isinstance(v, str):
            return (path, reason(v)) if _has_surrogate(v) else None
        if isinstance(v, list):
            for i, x in enumerate(v):
                if (found := walk(f"{path}[{i}]", x)) is not None:
                    return found
        elif isinstance(v, dict):
            for k, x in v.items():
                sub = f"{path}.{_excerpt(k)}"
                if _has_surrogate(k):
                    return sub, reason(k)
                if (found := walk(sub, x)) is not None:
                    return found
        return None

    for k, v in rec.items():
        if _has_surrogate(k):
            return _excerpt(k), reason(k)
        if (found := walk(k, v)) is not None:
            return found
    return None


def _got(v: Any) -> str:
    if v is None:
        return "nothing"
    kind = {str: "", bool: "boolean ", int: "integer ", float: "number ", dict: "object ",
            list: "list "}.get(type(v), f"{type(v).__name__} ")
    text = repr(v)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{kind}{text}"


def _id_value(v: Any) -> tuple[str | None, str | None]:
    if is_integer(v):  # True is not an id
        return str(v), None
    if isinstance(v, str):
        if v.strip():
            return v, None
        return None, f"expected a non-empty id, got {v!r}"
    if v is None:
        return None, "expected a non-empty id (string or integer), got nothing"
    return None, f"expected a string or integer id, got {_got(v)}"


def _in_utc(dt: datetime, shown: str) -> tuple[datetime | None, str | None]:
    """``dt`` in UTC, or the reason it has no UTC instant within years 1–9999
    (``0001-01-01T00:00:00+14:00`` is in year 0 in UTC)."""
    try:
        return dt.astimezone(UTC), None
    except (OverflowError, ValueError):
        return None, (f"expected a date that stays within years 1–9999 in UTC, got {shown} "
                      "(out of range once its time zone is applied)")


def _date_value(v: Any) -> tuple[datetime | None, str | None]:
    expected = "expected ISO 8601 date with timezone"
    if isinstance(v, datetime):
        if v.tzinfo is None or v.utcoffset() is None:
            return None, f"{expected}, got {v.isoformat()!r} (timezone missing)"
        return _in_utc(v, repr(v.isoformat()))
    if isinstance(v, date):
        return datetime(v.year, v.month, v.day, tzinfo=UTC), None
    if not isinstance(v, str):
        return None, f"{expected}, got {_got(v)}"
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


def _cites_value(v: Any, cells: bool) -> tuple[tuple[str, ...], tuple[str, str] | None]:
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
                v = _loads(s)
            except (ValueError, RecursionError) as e:
                return (), ("", f"expected a JSON list or '|'-separated ids, got "
                                f"{_excerpt(s)!r} ({e})")
        else:
            return tuple(x.strip() for x in s.split("|") if x.strip()), None
    if not isinstance(v, list | tuple):
        return (), ("", f"expected a list of id strings, got {_got(v)}")
    out = []
    for i, x in enumerate(v):
        xid, err = _id_value(x)
        if err is not None:
            return (), (f"[{i}]", err)
        assert xid is not None
        out.append(xid)
    return tuple(out), None


def _json_size(v: Any) -> int:
    """Bytes of ``v`` as UTF-8 JSON (as stored in the payload)."""
    if v is None or isinstance(v, bool | int | float):
        return 8
    if isinstance(v, str) and len(v) * 4 <= MAX_EXTRA_BYTES:
        return len(v) * 4  # cheap upper bound: short strings always fit
    text = json.dumps(v, ensure_ascii=False, default=str)
    return len(text.encode("utf-8", "surrogatepass"))


def _nonfinite(v: Any) -> str | None:
    if isinstance(v, float) and not math.isfinite(v):
        return f"expected a finite number or null, got {v!r}"
    if isinstance(v, list | tuple):
        for x in v:
            if (r := _nonfinite(x)) is not None:
                return r
    if isinstance(v, dict):
        for x in v.values():
            if (r := _nonfinite(x)) is not None:
                return r
    return None


def _prepare(raw: _Raw, ctx: _Context,
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
                                     f"'{k}' ({_got(rec[k])}), got {_got(v)}"))
                elif k not in rec:
                    rec[k] = v
                    origin[k] = f"metadata.{k}"
        elif md is not None:
            problems.append(("metadata", f"expected an object, got {_got(md)}"))
    rename = {"_id": "id", **ctx.fields}
    out: dict[str, Any] = {}
    for k, v in rec.items():
        name = rename.get(k, k)
        src = origin.get(k, k)
        if name in out and out[name] != v:
            problems.append((name, f"expected one value, got both '{origin.get(name, name)}' "
                             f"({_got(out[name])}) and '{src}' ({_got(v)}) mapped to '{name}'"))
            continue
        if name not in out or name == k:
            out[name] = v
            origin[name] = src
    return out, origin


def _converted(raw: _Raw, ctx: _Context) -> Document | Reject:
    """:func:`_to_document`, with the declared policy for the unforeseen: any exception while
    converting one record makes that record a :class:`Reject` naming the exception, never the
    failure of the chunk or the run (the records around it are indexed as usual)."""
    try:
        return _to_document(raw, ctx)
    except Exception as exc:  # the record's own problem, reported as its reject
        return Reject(ctx.file, raw.line, None, f"expected a record credrank can convert, got "
                      f"one that raised {type(exc).__name__}: {exc}", raw.excerpt, ctx.unit)


def _to_document(raw: _Raw, ctx: _Context) -> Document | Reject:
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
    uni = _unicode_problem(raw.data, raw.bad_bytes) if raw.check_unicode else None
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
    doc_id, err = _id_value(rec.pop("id", None))
    if err is not None:
        if not has_id:
            err = f"expected a non-empty id (string or integer), got {absent('id')}"
        problems.append((label("id"), err))
    text = rec.pop("text", None)
    if not isinstance(text, str) and text is not None:
        problems.append((label("text"), f"expected a string, got {_got(text)}"))
    elif text is None or not text.strip():
        got = absent("text") if not has_text else "nothing" if text is None else repr(text)
        problems.append((label("text"), f"expected non-empty text, got {got}"))
    kwargs: dict[str, Any] = {}
    for name in _STR_FIELDS:
        v = rec.pop(name, None)
        if v is None or v == "":
            continue
        if not isinstance(v, str):
            problems.append((label(name), f"expected a string, got {_got(v)}"))
        elif name == "source_type" and v not in SOURCE_TYPES:
            problems.append((label(name), f"expected one of {', '.join(SOURCE_TYPES)}, "
                             f"got {v!r}"))
        else:
            kwargs[name] = v
    for name in DATE_FIELDS:
        v = rec.pop(name, None)
        if v is None or v == "":
            continue
        dt, err = _date_value(v)
        if err is not None:
            problems.append((label(name), err))
        else:
            kwargs[name] = dt
    cites, cerr = _cites_value(rec.pop("cites", None), ctx.cells)
    if cerr is not None:
        problems.append((label("cites") + cerr[0], cerr[1]))
    for k, v in rec.items():
        if (r := _nonfinite(v)) is not None:
            problems.append((label(k), r))
        elif (size := _json_size(v)) > MAX_EXTRA_BYTES:
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


def _listing(head: str, lines: list[str], limit: int) -> str:
    shown = lines[:max(limit, 0)]
    more = len(lines) - len(shown)
    body = "\n".join(f"  {m}" for m in shown)
    return head + (":\n" + body if body else "") + (f"\n  ... and {more} more" if more else "")
