"""Calibration answers: who answered what (chapter 35.3), loaded from CSV or JSONL.

An ANSWERS file has one row per (question, source) with the fields ``question_id``,
``source_id`` and ``answer``. An empty answer, a missing ``answer`` value (JSON ``null``) or an
IDK phrase (``"I don't know"``, ``"IDK"``, … see
:data:`~credrank.reliability.equivalence.ABSTENTION_PHRASES`) is an **abstention**; a source
that has no row for a question also abstains on it. A TRUTH file has ``question_id`` and
``answer``. Formats by suffix: ``.csv`` (header row required), ``.jsonl``/``.ndjson``
(one JSON object per line; blank lines skipped); either may end in ``.gz``.

Errors are :class:`AnswersFileError` and name ``path:line: field``, what was expected and
what came.
"""

from __future__ import annotations

import gzip
import io
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.structured import csv_rows, parse_json
from credrank.core.validation import is_integer, is_number
from credrank.reliability.equivalence import ABSTENTION_PHRASES, is_abstention

ANSWER_FIELDS: tuple[str, ...] = ("question_id", "source_id", "answer")
TRUTH_FIELDS: tuple[str, ...] = ("question_id", "answer")


class AnswersFileError(ValueError):
    """An answers or truth file is malformed; the message gives ``path:line: field``."""


@dataclass(frozen=True)
class AnswerTable:
    """Answers of ``S`` sources to ``Q`` calibration questions.

    Attributes:
        source_ids: source identifiers, in first-seen order.
        question_ids: question identifiers, in first-seen order.
        answers: ``answers[s][q]`` is the raw answer text of source ``s`` to question ``q``,
            or ``None`` for an abstention (IDK, empty, or no row).
    """

    source_ids: tuple[str, ...]
    question_ids: tuple[str, ...]
    answers: tuple[tuple[str | None, ...], ...]

    def __post_init__(self) -> None:
        if len(set(self.source_ids)) != len(self.source_ids):
            raise ValueError("source_ids: expected unique ids, got duplicates")
        if len(set(self.question_ids)) != len(self.question_ids):
            raise ValueError("question_ids: expected unique ids, got duplicates")
        if len(self.answers) != len(self.source_ids):
            raise ValueError(f"answers: expected {len(self.source_ids)} rows (one per source), "
                             f"got {len(self.answers)}")
        for s, row in enumerate(self.answers):
            if len(row) != len(self.question_ids):
                raise ValueError(f"answers[{s}] ({self.source_ids[s]!r}): expected "
                                 f"{len(self.question_ids)} entries, got {len(row)}")

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.source_ids), len(self.question_ids)

    @classmethod
    def from_records(
        cls,
        records: Iterable[tuple[str, str, str | None]],
        abstentions: Iterable[str] = ABSTENTION_PHRASES,
    ) -> AnswerTable:
        """Build from ``(question_id, source_id, answer)`` triples; duplicates are an error."""
        phrases = frozenset(abstentions)
        sources: dict[str, int] = {}
        questions: dict[str, int] = {}
        cells: dict[tuple[int, int], str | None] = {}
        for q, s, a in records:
            qi = questions.setdefault(str(q), len(questions))
            si = sources.setdefault(str(s), len(sources))
            if (si, qi) in cells:
                raise ValueError(f"duplicate answer for question {q!r} from source {s!r}; "
                                 "expected one answer per (question_id, source_id)")
            cells[(si, qi)] = None if is_abstention(a, phrases) else a
        rows = tuple(tuple(cells.get((s, q)) for q in range(len(questions)))
                     for s in range(len(sources)))
        return cls(tuple(sources), tuple(questions), rows)

    @classmethod
    def from_mapping(cls, answers: Mapping[str, Mapping[str, str | None]]) -> AnswerTable:
        """Build from ``{source_id: {question_id: answer}}``."""
        return cls.from_records((q, s, a) for s, row in answers.items() for q, a in row.items())

    def to_mapping(self) -> dict[str, dict[str, str]]:
        """``{source_id: {question_id: answer}}`` without the abstentions."""
        return {s: {q: a for q, a in zip(self.question_ids, row, strict=True) if a is not None}
                for s, row in zip(self.source_ids, self.answers, strict=True)}


def _open_text(path: Path) -> io.TextIOBase:
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8-sig", newline="")
    return open(path, encoding="utf-8-sig", newline="")


def _format(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    if last == ".csv":
        return "csv"
    if last in (".jsonl", ".ndjson"):
        return "jsonl"
    raise AnswersFileError(f"{path}: unsupported file type {last or '(no suffix)'!r}; expected "
                           ".csv or .jsonl (optionally .gz)")


def _rows(path: Path, fields: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, record)`` for each data row, checking that ``fields`` are present."""
    path = Path(path)
    if not path.is_file():
        raise AnswersFileError(_not_a_file(path))
    kind = _format(path)
    try:
        with _open_text(path) as fh:
            if kind == "csv":
                yield from _csv_rows(path, fh, fields)
                return
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                obj = parse_json(line, f"{path}:{lineno}", error=AnswersFileError)
                if not isinstance(obj, dict):
                    raise AnswersFileError(f"{path}:{lineno}: expected a JSON object, got "
                                           f"{type(obj).__name__}")
                for f in fields:
                    if f not in obj:
                        raise AnswersFileError(f"{path}:{lineno}: field {f!r}: missing; expected "
                                               f"fields {list(fields)}")
                yield lineno, obj
    except (EOFError, OSError, zlib.error) as exc:
        raise AnswersFileError(f"{path}: expected a complete gzip stream (or a readable "
                               f"file), got {type(exc).__name__}: {exc}") from None


def _not_a_file(path: Path) -> str:
    """Why ``path`` (not a regular file) cannot be read: a directory, something else that
    is not a regular file, or nothing at all."""
    if path.is_dir():
        return f"{path}: expected a file, got a directory"
    if path.exists():
        return f"{path}: expected a regular file, got something else (a device, FIFO or socket)"
    return f"{path}: no such file"


def _csv_rows(path: Path, fh: Iterable[str],
              fields: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Strict CSV (:func:`credrank.core.structured.csv_rows`): a field never spans lines, so
    an unterminated quote is an error naming the line where its field began; a row that ends
    before one of ``fields`` is an error naming it (a cut line, not an abstention: an
    abstention is written, as an empty value or an IDK phrase)."""
    for lineno, row in csv_rows(fh, str(path), required=fields, error=AnswersFileError):
        for f in fields:
            if row[f] is None:
                given = sum(v is not None for v in row.values())
                raise AnswersFileError(
                    f"{path}:{lineno}: field {f!r}: missing; the row ends after {given} of "
                    f"the header's {len(row)} values (write an empty value for an "
                    "abstention)")
        yield lineno, row


def _identifier(path: Path, lineno: int, field: str, value: Any) -> str:
    if not (isinstance(value, str) or is_integer(value)):
        raise AnswersFileError(f"{path}:{lineno}: field {field!r}: expected a non-empty string "
                               f"or integer, got {value!r}")
    text = str(value).strip()
    if not text:
        raise AnswersFileError(f"{path}:{lineno}: field {field!r}: expected a non-empty "
                               "identifier, got an empty value")
    return text


def _answer(path: Path, lineno: int, value: Any) -> str | None:
    if value is None:
        return None
    if not (isinstance(value, str) or is_number(value)):
        raise AnswersFileError(f"{path}:{lineno}: field 'answer': expected a string (or null "
                               f"for abstention), got {type(value).__name__} {value!r}")
    return str(value)


def load_answers(path: str | Path,
                 abstentions: Iterable[str] = ABSTENTION_PHRASES) -> AnswerTable:
    """Read an ANSWERS file (``question_id, source_id, answer``) into an :class:`AnswerTable`.

    Empty answers and IDK phrases become abstentions (chapter 35.3). A repeated
    ``(question_id, source_id)`` pair is an error naming both lines.

    A ``.csv`` (or ``.csv.gz``) file is parsed by pyarrow and checked column-wise
    (:func:`_load_csv_arrow`; when pyarrow, the ``parquet`` extra, is installed); a file that
    this fast path cannot vouch for — any quote character, a byte-order mark, NUL bytes, a
    lone carriage return, a ragged or duplicate header, a row with more or fewer values than
    the header, an empty identifier, a duplicate pair, an unreadable stream — or any file
    without pyarrow is read by the line-by-line reader, which returns the
    same table or raises its error naming ``path:line: field``. Either way every row is loaded
    or the file is rejected with its reason; nothing is dropped.
    """
    path = Path(path)
    phrases = frozenset(abstentions)
    if _format_or_none(path) == "csv":
        table = _load_csv_arrow(path, phrases)
        if table is not None:
            return table
    try:
        return _load_answers_python(path, phrases)
    except UnicodeDecodeError:
        raise _undecodable(path) from None


def _undecodable(path: Path) -> AnswersFileError:
    """The error for a file that is not UTF-8, naming the line of the first bad byte."""
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except (EOFError, OSError, zlib.error):
        return AnswersFileError(f"{path}: expected UTF-8 text (and a complete gzip stream)")
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - raw.rfind(b"\n", 0, exc.start)
        return AnswersFileError(f"{path}:{line}: expected UTF-8 text, got the byte "
                                f"0x{raw[exc.start]:02x} at column {column}")
    return AnswersFileError(f"{path}: expected UTF-8 text")


def _format_or_none(path: Path) -> str | None:
    try:
        return _format(path) if path.is_file() else None
    except AnswersFileError:
        return None


def _load_answers_python(path: str | Path,
                         abstentions: Iterable[str] = ABSTENTION_PHRASES) -> AnswerTable:
    """The line-by-line reader (the reference of :func:`load_answers`, and its error path)."""
    path = Path(path)
    phrases = frozenset(abstentions)
    seen: dict[tuple[str, str], int] = {}
    records: list[tuple[str, str, str | None]] = []
    for lineno, row in _rows(path, ANSWER_FIELDS):
        q = _identifier(path, lineno, "question_id", row["question_id"])
        s = _identifier(path, lineno, "source_id", row["source_id"])
        a = _answer(path, lineno, row["answer"])
        if (q, s) in seen:
            raise AnswersFileError(
                f"{path}:{lineno}: fields 'question_id','source_id': duplicate pair ({q!r}, "
                f"{s!r}), first seen on line {seen[(q, s)]}; expected one answer per pair")
        seen[(q, s)] = lineno
        records.append((q, s, a))
    if not records:
        raise AnswersFileError(f"{path}: no answer rows; expected at least one row with fields "
                               f"{list(ANSWER_FIELDS)}")
    return AnswerTable.from_records(records, phrases)


def _plain_csv_bytes(path: Path) -> bytes | None:
    """The decoded bytes of a CSV file when pyarrow reads it exactly as the strict
    line-by-line reader does (no quoting, valid UTF-8, ``\n`` or ``\r\n`` line ends, a
    header on the first line naming each column once, with the answer fields); else None."""
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
    except (EOFError, OSError, zlib.error):
        return None
    if (not raw or b'"' in raw or b"\x00" in raw or raw[:1] in (b"\n", b"\r")
            or raw.count(b"\r") != raw.count(b"\r\n")):
        return None
    if not raw.isascii():
        if raw.startswith(b"\xef\xbb\xbf"):
            return None
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    end = raw.find(b"\n")
    header = (raw if end < 0 else raw[:end]).removesuffix(b"\r").decode("utf-8").split(",")
    if len(set(header)) != len(header) or any(f not in header for f in ANSWER_FIELDS):
        return None
    return raw


def _codes(column: Any, strip: bool) -> tuple[np.ndarray, list[Any]] | None:
    """Per-row codes into the distinct values (first-seen order) of a string column; ids are
    stripped (None when one is empty: the line-by-line reader names it)."""
    import pyarrow.compute as pc  # here: pyarrow is optional; only the pyarrow path calls this

    encoded = pc.dictionary_encode(column.combine_chunks())
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    values = encoded.dictionary.to_pylist()
    if not strip:
        return codes, values
    order: dict[str, int] = {}
    remap = np.empty(len(values), dtype=np.int64)
    for k, value in enumerate(values):
        text = value.strip()
        if not text:
            return None
        remap[k] = order.setdefault(text, len(order))
    return remap[codes], list(order)


def _load_csv_arrow(path: Path, phrases: frozenset[str]) -> AnswerTable | None:
    """The answers of a plain CSV file parsed by pyarrow and validated column-wise, or None
    when the file needs the line-by-line reader (see :func:`load_answers`)."""
    raw = _plain_csv_bytes(path)
    if raw is None:
        return None
    # here, not at import time: only this reader needs pyarrow, the optional `parquet` extra;
    # without it the line-by-line reader reads the file (the same table, slower)
    try:
        import pyarrow as pa
        from pyarrow import csv as pacsv
    except ImportError:
        return None

    try:
        table = pacsv.read_csv(
            io.BytesIO(raw),
            read_options=pacsv.ReadOptions(use_threads=False, block_size=1 << 24),
            parse_options=pacsv.ParseOptions(quote_char=False, double_quote=False,
                                              escape_char=False, newlines_in_values=False,
                                              ignore_empty_lines=True),
            convert_options=pacsv.ConvertOptions(
                include_columns=list(ANSWER_FIELDS),
                column_types=dict.fromkeys(ANSWER_FIELDS, pa.string()),
                strings_can_be_null=False, quoted_strings_can_be_null=False,
                null_values=[]))
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None  # e.g. a row with more or fewer values than the header
    if table.num_rows == 0:
        return None
    questions = _codes(table.column("question_id"), strip=True)
    sources = _codes(table.column("source_id"), strip=True)
    if questions is None or sources is None:
        return None
    q_codes, question_ids = questions
    s_codes, source_ids = sources
    pair = q_codes * len(source_ids) + s_codes
    if np.bincount(pair, minlength=len(source_ids) * len(question_ids)).max() > 1:
        return None  # a duplicate pair: the line-by-line reader names both lines
    answers = _codes(table.column("answer"), strip=False)
    if answers is None:  # never: only stripped ids can be empty
        return None
    a_codes, values = answers
    kept = np.empty(len(values), dtype=object)
    kept[:] = [None if is_abstention(v, phrases) else v for v in values]
    grid = np.full((len(source_ids), len(question_ids)), None, dtype=object)
    grid[s_codes, q_codes] = kept[a_codes]
    return AnswerTable(tuple(source_ids), tuple(question_ids),
                       tuple(map(tuple, grid.tolist())))


def load_truth(path: str | Path) -> dict[str, str]:
    """Read a TRUTH file (``question_id, answer``) into ``{question_id: answer}``.

    Every truth answer must be a non-empty, non-abstention string; ids must be unique.
    """
    path = Path(path)
    try:
        return _load_truth(path)
    except UnicodeDecodeError:
        raise _undecodable(path) from None


def _load_truth(path: Path) -> dict[str, str]:
    truth: dict[str, str] = {}
    lines: dict[str, int] = {}
    for lineno, row in _rows(path, TRUTH_FIELDS):
        q = _identifier(path, lineno, "question_id", row["question_id"])
        a = _answer(path, lineno, row["answer"])
        if a is None or is_abstention(a):
            raise AnswersFileError(f"{path}:{lineno}: field 'answer': expected a known answer, "
                                   f"got an abstention {row['answer']!r}")
        if q in truth:
            raise AnswersFileError(f"{path}:{lineno}: field 'question_id': duplicate {q!r}, "
                                   f"first seen on line {lines[q]}")
        truth[q] = a
        lines[q] = lineno
    if not truth:
        raise AnswersFileError(f"{path}: no truth rows; expected fields {list(TRUTH_FIELDS)}")
    return truth
