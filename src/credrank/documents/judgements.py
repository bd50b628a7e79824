"""Queries and relevance judgements: JSONL/TSV queries, BEIR TSV and TREC qrels."""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from credrank.documents.fields import (
    SHOWN,
    excerpt,
    got,
    id_value,
    listing,
    unicode_problem,
)
from credrank.documents.files import BOM, format_suffix, open_binary
from credrank.documents.formats.jsonl import jsonl_records
from credrank.documents.records import CorpusError


@dataclass(frozen=True)
class Query:
    """A query; ``extra`` keeps any other fields of the record (e.g. BEIR ``metadata``)."""

    id: str
    text: str
    extra: dict[str, Any] = field(default_factory=dict)
    #: the line of its file (``None`` for a query made in code): errors about its other
    #: fields (a development query's ``answers``) name ``file:line``
    line: int | None = field(default=None, compare=False)


def read_queries(path: str | Path) -> list[Query]:
    """Read queries from JSONL (``_id``/``id``, ``text`` or ``query``), TSV (``id<TAB>query``:
    exactly two tab-separated fields per line; a first line ``id<TAB>query`` — any case, or
    another of :data:`TSV_QUERY_HEADERS` — is a header and skipped) or plain text (a ``.txt``
    file with no tab at all: one query per line, its id the line number).

    A directory means its ``queries.jsonl``. Integer ids become strings; other fields go to
    ``Query.extra``. Any bad record raises :class:`CorpusError` naming ``file:line``.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "queries.jsonl"
    suffix = format_suffix(p)
    if suffix in (".jsonl", ".ndjson"):
        rows = _query_rows_jsonl(p)
    elif suffix == ".txt" and not _has_tab(p):
        rows = _query_rows_plain(p)
    elif suffix in (".tsv", ".txt"):
        rows = _query_rows_tsv(p)
    else:
        raise CorpusError(f"{p}: cannot tell the query format from the extension "
                          f"{suffix or '(none)'!r}; expected .jsonl, .ndjson, .tsv or .txt")
    queries: list[Query] = []
    errors: list[str] = []
    seen: dict[str, int] = {}
    for line, rec, err in rows:
        if err is not None:
            errors.append(f"{p}:{line}: {err}")
            continue
        assert rec is not None
        alias, plain = rec.pop("_id", None), rec.pop("id", None)
        qid, qerr = id_value(alias if alias is not None else plain)
        if alias is not None and plain is not None and alias != plain:
            qerr = f"expected '_id' and 'id' to agree, got {alias!r} and {plain!r}"
        said = "text" if "text" in rec or "query" not in rec else "query"  # as written
        text = rec.pop("text") if "text" in rec else rec.pop("query", None)
        if qerr is not None:
            errors.append(f"{p}:{line}: field 'id': {qerr}")
        elif not isinstance(text, str) or not text.strip():
            errors.append(f"{p}:{line}: field {said!r}: expected non-empty query text, "
                          f"got {got(text)}")
        elif qid in seen:
            errors.append(f"{p}:{line}: field 'id': expected a unique query id, got {qid!r} "
                          f"again (first seen at line {seen[qid]})")
        else:
            assert qid is not None
            seen[qid] = line
            queries.append(Query(id=qid, text=text, extra=rec, line=line))
    if errors:
        raise CorpusError(listing(f"{p}: {len(errors)} bad query records", errors, SHOWN))
    return queries


def read_qrels(path: str | Path, split: str | None = None) -> dict[str, dict[str, int]]:
    """Read relevance judgements as ``{query_id: {doc_id: relevance}}``.

    Accepts BEIR TSV (header ``query-id corpus-id score``, header optional) and TREC qrels
    (``qid iter docid rel``, whitespace-separated, no header). Relevance must be an integer
    in :data:`RELEVANCE_RANGE`; a value ``<= 0`` is kept as written and means judged
    non-relevant (the TREC convention, e.g. the Web track's ``-2`` = spam), which
    :func:`credrank.evaluate.metrics.evaluate` scores as gain 0. A repeated (query, doc) pair
    must repeat the same relevance.
    A directory is a BEIR folder: ``qrels/<split>.tsv`` (``split`` may be omitted when there is
    exactly one file). Errors raise :class:`CorpusError` naming ``file:line``.
    """
    return _read_qrels(path, split)[0]


def qrels_rows(path: str | Path, split: str | None = None) -> list[tuple[int, str, str]]:
    """The judgement lines of :func:`read_qrels`'s file as ``(line, query_id, doc_id)``, in
    file order (a repeated pair once per line), read and checked as it reads them: where a
    report names each judgement by its line (the audit's label check)."""
    return _read_qrels(path, split)[1]


def _read_qrels(path: str | Path, split: str | None
                ) -> tuple[dict[str, dict[str, int]], list[tuple[int, str, str]]]:
    """:func:`read_qrels` and :func:`qrels_rows` of one reading."""
    p = Path(path)
    if p.is_dir():
        p = qrels_file(p, split)
    qrels: dict[str, dict[str, int]] = {}
    rows: list[tuple[int, str, str]] = []
    first_line: dict[tuple[str, str], int] = {}
    errors: list[str] = []
    ncols: int | None = None
    with open_binary(p) as fh:
        for n, raw in enumerate(fh, 1):
            if n == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                errors.append(f"{p}:{n}: expected UTF-8 text, got the byte "
                              f"0x{raw[e.start]:02x} at byte {e.start + 1}")
                continue
            parts = line.rstrip("\r\n").split("\t") if "\t" in line else line.split()
            parts = [x.strip() for x in parts]
            if not any(parts):
                continue
            if ncols is None and parts[0].lower() in ("query-id", "query_id", "qid", "queryid"):
                continue  # header
            if len(parts) not in (3, 4) or (ncols is not None and len(parts) != ncols):
                expected = ("3 columns (query-id corpus-id score) or 4 (qid iter docid rel)"
                            if ncols is None else f"{ncols} columns like the lines before")
                errors.append(f"{p}:{n}: expected {expected}, got {len(parts)}: "
                              f"{excerpt(line.strip())!r}")
                continue
            ncols = len(parts)
            qid, did, rel_s = (parts[0], parts[1], parts[2]) if ncols == 3 else (
                parts[0], parts[2], parts[3])
            rel, problem = _relevance(rel_s)
            if problem is not None:
                errors.append(f"{p}:{n}: field 'score': {problem}")
                continue
            if not qid or not did:
                errors.append(f"{p}:{n}: expected non-empty query and document ids, "
                              f"got {excerpt(line.strip())!r}")
                continue
            old = qrels.setdefault(qid, {}).get(did)
            if old is not None and old != rel:
                errors.append(f"{p}:{n}: field 'score': expected the relevance {old} given at "
                              f"line {first_line[(qid, did)]} for ({qid!r}, {did!r}), got {rel}")
                continue
            first_line.setdefault((qid, did), n)
            qrels[qid][did] = rel
            rows.append((n, qid, did))
    if errors:
        raise CorpusError(listing(f"{p}: {len(errors)} bad qrels lines", errors, SHOWN))
    return qrels, rows



#: the relevance range of a judgement: trec_eval's (a C ``int``: a larger value overflows
#: there and silently scores 0); :func:`credrank.evaluate.metrics.validate_qrels` checks the
#: same range
RELEVANCE_RANGE = (-(2**31), 2**31 - 1)


def _relevance(text: str) -> tuple[int, str | None]:
    """``(relevance, None)`` for an integer in :data:`RELEVANCE_RANGE`, else ``(0, problem)``;
    never converts more than a dozen digits."""
    low, high = RELEVANCE_RANGE
    digits = text.lstrip("+-")
    if digits.isdigit() and digits.isascii() and len(digits) > 12:
        return 0, (f"expected an integer relevance in [{low}, {high}], got an integer of "
                   f"{len(digits)} digits")
    try:
        rel = int(text)
    except ValueError:
        return 0, f"expected an integer relevance, got {excerpt(text)!r}"
    if not low <= rel <= high:
        return 0, f"expected an integer relevance in [{low}, {high}], got {rel}"
    return rel, None


def qrels_file(folder: Path, split: str | None) -> Path:
    """The qrels file of a BEIR folder: ``qrels/<split>.tsv``, or the only ``qrels/*.tsv``
    when ``split`` is ``None``; :class:`CorpusError` naming the splits there otherwise."""
    qdir = folder / "qrels"
    files = sorted(qdir.glob("*.tsv")) if qdir.is_dir() else []
    if split is not None:
        target = qdir / f"{split}.tsv"
        if not target.is_file():
            raise CorpusError(f"{folder}: no qrels/{split}.tsv; available splits: "
                              f"{[f.stem for f in files] or 'none'}")
        return target
    if len(files) != 1:
        raise CorpusError(f"{folder}: expected exactly one qrels/*.tsv or split=, got "
                          f"{[f.stem for f in files] or 'none'}")
    return files[0]


def _query_rows_jsonl(p: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    for raw in jsonl_records(p):
        if raw.error is not None:
            where = f"field '{raw.error_field}': " if raw.error_field else ""
            yield raw.line, None, where + raw.error
            continue
        assert raw.data is not None
        problem = unicode_problem(raw.data, raw.bad_bytes)
        if problem is not None:
            yield raw.line, None, f"field '{problem[0]}': {problem[1]}"
        else:
            yield raw.line, raw.data, None


def _has_tab(p: Path) -> bool:
    with open_binary(p) as fh:
        return any(b"\t" in raw for raw in fh)


def _text_lines(p: Path) -> Iterator[tuple[int, str | None, str | None]]:
    """``(line number, text, None)`` per line (BOM and line ending stripped), or
    ``(line number, None, error)`` for a line that is not UTF-8."""
    with open_binary(p) as fh:
        for n, raw in enumerate(fh, 1):
            if n == 1 and raw.startswith(BOM):
                raw = raw[len(BOM):]
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n"), None
            except UnicodeDecodeError as e:
                yield n, None, (f"expected UTF-8 text, got the byte 0x{raw[e.start]:02x} "
                                f"at byte {e.start + 1}")


def _query_rows_plain(p: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """One query per non-blank line; the id is the line number."""
    for n, line, err in _text_lines(p):
        if err is not None:
            yield n, None, err
        elif line is not None and line.strip():
            yield n, {"id": str(n), "text": line.strip()}, None


#: a first line that names the two columns instead of being a query (any case): skipped
TSV_QUERY_HEADERS = (["id", "query"], ["id", "text"], ["_id", "text"], ["query-id", "text"],
                     ["qid", "query"])


def _query_rows_tsv(p: Path) -> Iterator[tuple[int, dict[str, Any] | None, str | None]]:
    """``id<TAB>query`` per non-blank line: exactly two tab-separated fields (a third is an
    error, never glued into the query). A first line that is a header
    (:data:`TSV_QUERY_HEADERS`, such as the documented ``id<TAB>query``) is skipped."""
    first = True
    for n, line, err in _text_lines(p):
        if err is not None or line is None:
            yield n, None, err
            continue
        if not line.strip():
            continue
        parts = line.split("\t")
        if first and [x.strip().lower() for x in parts] in TSV_QUERY_HEADERS:
            first = False
            continue
        first = False
        if len(parts) != 2:
            yield n, None, (f"expected two tab-separated fields 'id<TAB>query', got "
                            f"{len(parts)}: {excerpt(line)!r}")
            continue
        yield n, {"id": parts[0].strip(), "text": parts[1]}, None
