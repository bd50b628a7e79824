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

import csv
import gzip
import io
import json
import zlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8", newline="")
    return open(path, encoding="utf-8", newline="")


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
        raise AnswersFileError(f"{path}: no such file")
    kind = _format(path)
    try:
        with _open_text(path) as fh:
            if kind == "csv":
                yield from _csv_rows(path, fh, fields)
                return
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise AnswersFileError(f"{path}:{lineno}: expected one JSON object per line, "
                                           f"got invalid JSON ({exc.msg})") from None
                except RecursionError:
                    raise AnswersFileError(f"{path}:{lineno}: expected one JSON object per line, "
                                           "got JSON nested too deeply to read") from None
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


def _csv_rows(path: Path, fh: Iterable[str],
              fields: tuple[str, ...]) -> Iterator[tuple[int, dict[str, Any]]]:
    """Strict CSV: a field never spans lines, and every quote closes on its own line.

    Answers and ids never contain newlines, so a quoted field that runs past the end of its
    line (an unterminated quote, which would otherwise absorb the following rows into one
    answer) is an error naming the line where that field began.
    """
    reader = csv.reader(fh, strict=True)
    header: list[str] | None = None
    start = 1
    while True:
        start = reader.line_num + 1
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            hint = (f" (a quoted field that begins on line {start} is never closed: "
                    "unterminated quote?)" if "end of data" in str(exc) else "")
            raise AnswersFileError(f"{path}:{start}: expected well-formed CSV, got a parse "
                                   f"error ({exc}){hint}") from None
        if reader.line_num > start:
            where = next((i for i, v in enumerate(row) if "\n" in v or "\r" in v), 0)
            name = (header[where] if header is not None and where < len(header)
                    else f"column {where + 1}")
            raise AnswersFileError(
                f"{path}:{start}: field {name!r}: expected a value on one line, got a quoted "
                f"value running on to line {reader.line_num} (unterminated quote?)")
        if header is None:
            header = row
            missing = [f for f in fields if f not in header]
            if missing:
                raise AnswersFileError(f"{path}:{start}: header: expected columns "
                                       f"{list(fields)}, missing {missing}; got {header}")
            continue
        if not row:
            continue
        if len(row) > len(header):
            raise AnswersFileError(f"{path}:{start}: row has more values than the "
                                   f"{len(header)} header columns")
        yield start, {h: (row[i] if i < len(row) else None) for i, h in enumerate(header)}
    if header is None:
        raise AnswersFileError(f"{path}:1: header: expected columns {list(fields)}, missing "
                               f"{list(fields)}; got []")


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
    """
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


def load_truth(path: str | Path) -> dict[str, str]:
    """Read a TRUTH file (``question_id, answer``) into ``{question_id: answer}``.

    Every truth answer must be a non-empty, non-abstention string; ids must be unique.
    """
    path = Path(path)
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
