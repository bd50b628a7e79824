"""Opening corpus, query and qrels files: ``.gz`` by name, the UTF-8 BOM, the suffix that names
the format and the :class:`~credrank.documents.records.CorpusError` of a damaged stream."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import IO, cast

from credrank.documents.records import CorpusError

__all__ = ["BOM", "READ_ERRORS", "format_suffix", "open_binary", "read_error"]

#: the UTF-8 byte-order mark, ignored at the start of a file
BOM = b"\xef\xbb\xbf"
#: what reading a truncated or corrupt (compressed) file raises
READ_ERRORS = (EOFError, OSError, zlib.error)


def format_suffix(p: Path) -> str:
    """The lowercase suffix that names the format (``.jsonl``), a final ``.gz`` skipped;
    ``""`` when there is none."""
    suffixes = [s.lower() for s in p.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes.pop()
    return suffixes[-1] if suffixes else ""


def open_binary(p: Path) -> IO[bytes]:
    """``p`` opened for reading bytes, decompressed when its name ends in ``.gz``."""
    if p.name.lower().endswith(".gz"):
        # a GzipFile has IO[bytes]'s methods; typeshed types it as a BufferedIOBase only
        return cast(IO[bytes], gzip.open(p, "rb"))
    return p.open("rb")


def read_error(p: Path, records: int, line: int, exc: BaseException) -> CorpusError:
    """A decompression/read failure as a :class:`CorpusError` naming file and progress."""
    what = ("expected a complete gzip stream, got a truncated or corrupt one"
            if p.name.lower().endswith(".gz") else "expected a readable file, got a read error")
    return CorpusError(f"{p}: {what} after {records} records (at line {line}): "
                       f"{type(exc).__name__}: {exc}")
