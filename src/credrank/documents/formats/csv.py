"""CSV/TSV records: a header naming the columns, then one record a row. CSV: a quoted field may
span lines (a broken record spanning lines is read again from its next line). TSV: one record
a line, every field as it is written: a tab separates, nothing quotes (IANA
``text/tab-separated-values``; LIAR's statements keep their quotation marks, which CSV quoting
stripped from 747 of them, and 35 rows were refused as malformed CSV)."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

from credrank.documents.fields import EXCERPT, excerpt, has_surrogate
from credrank.documents.files import READ_ERRORS, open_binary, read_error
from credrank.documents.records import CorpusError, RawRecord

__all__ = ["csv_records"]


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
        if self._len < EXCERPT:
            self._buf.append(line)
            self._len += len(line)
        return line

    def take(self) -> str:
        text = "".join(self._buf)
        self._buf.clear()
        self._len = 0
        return text


#: called with the header's line and its column names once it is read (may raise
#: :class:`CorpusError`, e.g. for a required column that is missing)
HeaderCheck = Callable[[int | None, list[str]], None]


def csv_records(p: Path, delimiter: str,
                on_header: HeaderCheck | None = None) -> Iterator[RawRecord]:
    """CSV/TSV records; a broken record spanning lines restarts parsing at its next line.
    ``on_header(line, names)`` checks the header before any record is yielded."""
    old_limit = csv.field_size_limit()
    csv.field_size_limit(max(old_limit, 1 << 30))
    state = _CsvState(on_header=on_header)
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
    on_header: HeaderCheck | None = None


def _csv_pass(p: Path, delimiter: str, skip: int,
              state: _CsvState) -> Generator[RawRecord, None, int]:
    """Parse from physical line ``skip + 1``; return where to restart, or -1 at the end."""
    with open_binary(p) as bfh:
        tfh = io.TextIOWrapper(bfh, encoding="utf-8-sig", errors="surrogateescape",
                               newline="")
        tap = _LineTap(iter(tfh))
        reader = csv.reader(tap, delimiter=delimiter, strict=True,
                            quoting=csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL)
        try:
            for _ in range(skip):
                next(tap)
        except StopIteration:
            return -1
        except READ_ERRORS as e:
            raise read_error(p, state.records, tap.n + 1, e) from e
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
            except READ_ERRORS as e:
                raise read_error(p, state.records, tap.n + 1, e) from e
            except csv.Error as e:
                text = tap.take()
                if state.header is None:
                    raise CorpusError(f"{p}:{start}: expected a CSV header, got an "
                                      f"unreadable line ({e})") from e
                state.records += 1
                if tap.n > start:  # a quoted field ran on: read its following lines again
                    yield RawRecord(start, None, text, error=(
                        f"expected well-formed CSV, got a parse error ({e}) in a record "
                        f"running from line {start} to line {tap.n} (unterminated quote?); "
                        f"the lines after {start} are read as records of their own"))
                    return start
                yield RawRecord(start, None, text,
                                error=f"expected well-formed CSV, got a parse error ({e})")
                continue
            text = tap.take()
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if state.header is None:
                state.header = [h.strip() for h in row]
                state.header_line = start
                _check_header(p, start, state.header)
                if state.on_header is not None:
                    state.on_header(start, state.header)
                continue
            header = state.header
            state.records += 1
            if len(row) != len(header):
                reason = (f"expected {len(header)} columns as in the header "
                          f"(line {state.header_line}), got {len(row)}")
                if tap.n > start:
                    yield RawRecord(start, None, text, error=(
                        f"{reason} in a record running from line {start} to line {tap.n} "
                        f"(unterminated quote?); the lines after {start} are read as "
                        f"records of their own"))
                    return start
                yield RawRecord(start, None, text, error=reason)
                continue
            data = {h: (v if v != "" else None) for h, v in zip(header, row, strict=True)}
            bad = any(has_surrogate(v) for v in row)
            yield RawRecord(start, data, text, bad_bytes=bad, check_unicode=bad)


def _check_header(p: Path, line: int, header: list[str]) -> None:
    bad = [h for h in header if has_surrogate(h)]
    if bad:
        raise CorpusError(f"{p}:{line}: expected a UTF-8 header, got invalid bytes in column "
                          f"{excerpt(bad[0])!r}")
    counts = Counter(header)  # one pass: a 100,000-column header is linear, not quadratic
    dupes = sorted(h for h, n in counts.items() if n > 1)
    if dupes:
        raise CorpusError(f"{p}:{line}: expected unique column names, got {dupes} repeated")
