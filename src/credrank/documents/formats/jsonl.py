"""JSONL records (also BEIR ``corpus.jsonl`` and ``queries.jsonl``): one JSON object a line."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from credrank.documents.fields import (
    EXCERPT,
    MAX_FIELD_DEPTH,
    excerpt,
    json_kind,
    strict_loads,
)
from credrank.documents.files import BOM, READ_ERRORS, open_binary, read_error
from credrank.documents.records import CorpusError, RawRecord

__all__ = ["jsonl_records"]

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


#: the byte-order marks of UTF-16 (little- and big-endian), which a JSONL file must not be in
UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def jsonl_records(p: Path) -> Iterator[RawRecord]:
    """One :class:`RawRecord` per non-blank line, in file order (BOM, line endings and the
    nesting bound handled here; a damaged ``.gz`` raises :class:`CorpusError`)."""
    records = 0
    n = 0
    with open_binary(p) as fh:
        lines = _universal_lines(fh)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                break
            except READ_ERRORS as e:
                raise read_error(p, records, n + 1, e) from e
            n += 1
            records += bool(raw.strip())
            if n == 1 and raw.startswith(UTF16_BOMS):  # every line would be rejected as noise
                raise CorpusError(f"{p}: expected UTF-8 text, got UTF-16 (it opens with the "
                                  f"byte-order mark {raw[:2].hex(' ').upper()}); convert the "
                                  "file to UTF-8")
            if n == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            if not raw.strip():
                continue
            bad: tuple[int, int] | None = None
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                bad = (e.start, raw[e.start])
                text = raw.decode("utf-8", "surrogateescape")
            head = text[:EXCERPT + 1]
            # the record object is level 1; BEIR metadata may add one more around a field
            key, deep = _too_deep_json(text, MAX_FIELD_DEPTH + 2)
            if deep:
                reason = f"expected nesting at most {MAX_FIELD_DEPTH} levels deep, got deeper"
                if key is None:
                    yield RawRecord(n, None, head, error=reason)
                else:
                    yield RawRecord(n, {}, head, error=reason, error_field=excerpt(key))
                continue
            try:
                obj = strict_loads(text)
            except RecursionError:  # not reachable after the scan above; kept as a guard
                yield RawRecord(n, None, head, error=f"expected nesting at most "
                                f"{MAX_FIELD_DEPTH} levels deep, got deeper")
                continue
            except ValueError as e:
                if bad is not None:
                    msg = (f"expected UTF-8 text, got the byte 0x{bad[1]:02x} at byte "
                           f"{bad[0] + 1} of the line")
                elif raw.startswith(BOM):  # files joined: the second one's mark mid-file
                    msg = ("expected a JSON object, got a UTF-8 byte-order mark (EF BB BF) "
                           "before it: the start of another file joined to this one? remove "
                           "the mark")
                elif isinstance(e, json.JSONDecodeError):
                    msg = (f"expected a JSON object, got malformed JSON "
                           f"({e.msg} at column {e.colno})")
                else:
                    msg = f"expected a JSON object, got malformed JSON ({e})"
                yield RawRecord(n, None, head, error=msg)
                continue
            if not isinstance(obj, dict):
                yield RawRecord(n, None, head,
                                error=f"expected a JSON object, got {json_kind(obj)}")
                continue
            yield RawRecord(n, obj, head, bad_bytes=bad is not None,
                            check_unicode=bad is not None or "\\ud" in text or "\\uD" in text)
