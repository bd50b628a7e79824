"""User domain tables: ``domain,source_type`` and/or ``domain,score`` CSV files. A line whose
first non-blank character is ``#`` is a comment (no domain begins with ``#``): a table may say
where its rows come from."""
from __future__ import annotations

import io
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from credrank.core.structured import csv_records, read_text
from credrank.core.validation import check_choice
from credrank.documents.schema import SOURCE_TYPES
from credrank.provenance.hosts import HostError, is_public_suffix, normalize_host

#: score columns tried, in order, when a table names none
SCORE_COLUMNS: tuple[str, ...] = ("score", "pc1")


class DomainTableError(ValueError):
    """A user domain table is malformed; the message names file, line and field."""


# --------------------------------------------------------------------------- user tables


class UnmatchableRow(NamedTuple):
    """A table row whose domain cell is no valid host name (an en dash, an empty label …):
    no URL can ever name it, so the row types and scores nothing. ``line`` is the file's line,
    ``cell`` the domain cell as written, ``reason`` why it is no host name."""

    line: int
    cell: str
    reason: str


@dataclass(frozen=True)
class DomainTable:
    """A user table: ``types`` and ``scores`` keyed by ``host`` or ``host/path``.

    Keys are lowercase punycode; a ``www.`` is kept, so ``www.x.com`` and ``x.com`` may carry
    different values (the exact host is tried first). ``unmatchable`` lists the rows whose
    domain cell is not a valid host name (e.g. one containing an en dash): they can never
    match a URL; :meth:`unmatchable_warnings` says so, naming file, line and cell.
    """

    path: Path
    types: Mapping[str, str]
    scores: Mapping[str, float]
    score_column: str | None
    unmatchable: tuple[UnmatchableRow, ...] = ()
    #: rows naming a public suffix (``gov.uk``, ``ac.uk``, ``com``): they type that host
    #: itself, never a site under it (each is a registered domain of its own)
    suffixes: tuple[UnmatchableRow, ...] = ()

    @property
    def name(self) -> str:
        return self.path.name

    def unmatchable_warnings(self) -> list[str]:
        """One message per row that can never match a URL: ``FILE:LINE: field 'domain':
        expected a valid host name, got …``, why, and that the row is not used; and per row
        naming a public suffix, that it types that host alone."""
        return [f"{self.path}:{row.line}: field 'domain': expected a valid host name, got "
                f"{row.cell!r} ({row.reason}); no URL can match it, so the row is not used"
                for row in self.unmatchable] + [
            f"{self.path}:{row.line}: field 'domain': {row.cell!r} is a public suffix: the "
            f"row types the host {row.reason} itself, never a site under it ("
            f"site.{row.reason} is a registered domain of its own); name each site"
            for row in self.suffixes]


def _table_key(cell: str, where: str) -> tuple[str, str | None]:
    """(key, why the key can never match a URL, or ``None``) for a table's domain cell;
    raises DomainTableError."""
    text = cell.strip()
    if not text:
        raise DomainTableError(f"{where}: expected a domain such as 'example.com', got an "
                               "empty cell")
    if any(ch.isspace() for ch in text):
        raise DomainTableError(f"{where}: expected a domain without spaces, got {cell!r}")
    if "://" in text:
        raise DomainTableError(f"{where}: expected a bare domain such as 'example.com' "
                               f"(optionally 'example.com/path'), got the URL {cell!r}")
    host, _, rest = text.partition("/")
    host = host.lower()
    unmatchable: str | None = None
    try:
        host, _ = normalize_host(host)
    except HostError as exc:
        host, unmatchable = host.rstrip("."), str(exc)
    if not host:
        raise DomainTableError(f"{where}: expected a domain before the path, got {cell!r}")
    rest = rest.strip("/").lower()
    return (f"{host}/{rest}" if rest else host), unmatchable


def _set_once(table: dict[str, Any], key: str, value: Any, where: str, verb: str,
              first_line: Mapping[str, int]) -> None:
    """``table[key] = value`` unless ``key`` already holds a different value (an error naming
    the line that set it first)."""
    if table.get(key, value) != value:
        raise DomainTableError(f"{where}: {key!r} is already {verb} {table[key]!r} on line "
                               f"{first_line[key]}, here {value!r}")
    table[key] = value


def _uncommented(text: str) -> Iterator[str]:
    """The lines of ``text``, each ``#`` comment line replaced by a blank one (line numbers
    in messages stay those of the file)."""
    for line in io.StringIO(text, newline=""):
        yield "\n" if line.lstrip().startswith("#") else line


def load_domain_table(path: str | Path, score_column: str | None = None) -> DomainTable:
    """Read a CSV domain table.

    Header: ``domain`` plus ``source_type`` (values in ``SOURCE_TYPES``) and/or a score
    column: ``score_column`` if given, else ``score``, else ``pc1``; scores must be finite
    numbers in [0, 1]. Column names are matched case-insensitively. Blank lines are skipped.
    A key repeated with a different value is an error. Every error names file, line and
    field (:class:`DomainTableError`). A row whose domain is no valid host name is kept in
    :attr:`DomainTable.unmatchable` (it can never match; the callers warn about it).
    """
    p = Path(path)
    text = read_text(p, what="domain table", error=DomainTableError)
    rows = csv_records(_uncommented(text), str(p), error=DomainTableError)
    at, header = next(((line, row) for line, row in rows
                       if any(cell.strip() for cell in row)), (1, None))
    if header is None:
        raise DomainTableError(f"{p}:1: empty file (or only comments); expected a header "
                               "'domain,source_type' or 'domain,score'")
    columns = [name.strip().lower() for name in header]
    if len(set(columns)) != len(columns):
        raise DomainTableError(f"{p}:{at}: duplicate column names in {header}")
    if "domain" not in columns:
        raise DomainTableError(f"{p}:{at}: field 'domain': no 'domain' column; found "
                               f"{', '.join(header)}")
    if score_column is not None:
        if score_column.strip().lower() not in columns:
            raise DomainTableError(f"{p}:{at}: score_column {score_column!r} is not a "
                                   f"column; found {', '.join(header)}")
        score_col: str | None = score_column.strip().lower()
    else:
        score_col = next((c for c in SCORE_COLUMNS if c in columns), None)
    type_col = "source_type" if "source_type" in columns else None
    if type_col is None and score_col is None:
        raise DomainTableError(
            f"{p}:{at}: expected a 'source_type' column or a score column "
            f"({', '.join(SCORE_COLUMNS)}, or score_column=...); found {', '.join(header)}")
    i_domain = columns.index("domain")
    i_type = columns.index(type_col) if type_col else None
    i_score = columns.index(score_col) if score_col else None

    types: dict[str, str] = {}
    scores: dict[str, float] = {}
    first_line: dict[str, int] = {}
    unmatchable: list[UnmatchableRow] = []
    suffixes: list[UnmatchableRow] = []
    for line, row in rows:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(columns):
            raise DomainTableError(f"{p}:{line}: expected {len(columns)} fields "
                                   f"({', '.join(header)}), got {len(row)}")
        key, why = _table_key(row[i_domain], f"{p}:{line}: field 'domain'")
        if why is not None:
            unmatchable.append(UnmatchableRow(line, row[i_domain].strip(), why))
        elif "/" not in key and is_public_suffix(key):
            suffixes.append(UnmatchableRow(line, row[i_domain].strip(), key))
        if i_type is not None:
            where = f"{p}:{line}: field 'source_type'"
            stype = check_choice(where, row[i_type].strip(), SOURCE_TYPES,
                                 error=DomainTableError)
            _set_once(types, key, stype, where, "typed", first_line)
        if i_score is not None:
            cell = row[i_score].strip()
            try:
                score = float(cell)
            except ValueError:
                score = math.nan
            if not (math.isfinite(score) and 0.0 <= score <= 1.0):
                raise DomainTableError(
                    f"{p}:{line}: field {score_col!r}: expected a number in [0, 1], "
                    f"got {row[i_score]!r}")
            _set_once(scores, key, score, f"{p}:{line}: field {score_col!r}", "scored",
                      first_line)
        first_line.setdefault(key, line)
    return DomainTable(path=p, types=types, scores=scores, score_column=score_col,
                       unmatchable=tuple(unmatchable), suffixes=tuple(suffixes))
