"""CR-only line endings (issue 9): a lone ``\\r`` ends a line in JSONL and CSV, as ``\\n`` and
``\\r\\n`` do (Python's universal newlines), so each record is indexed or rejected on its own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credrank.documents.readers import Reject, iter_documents, read_corpus

RECORDS = [{"id": "a", "text": "first"}, {"id": "b"}, {"id": "c", "text": "third"}]


@pytest.mark.parametrize("end", ["\r", "\n", "\r\n"])
def test_jsonl_lines_end_in_cr_lf_or_crlf(tmp_path: Path, end: str) -> None:
    path = tmp_path / "old_mac.jsonl"
    path.write_bytes(end.join(json.dumps(r) for r in RECORDS).encode() + end.encode())
    result = read_corpus(path)
    assert [d.id for d in result.documents] == ["a", "c"]
    assert [r.message for r in result.rejects] == [
        f"{path}:2: field 'text': expected non-empty text, got no 'text' field"]
    assert result.n_records == 3


def test_jsonl_mixed_endings_and_blank_cr_lines(tmp_path: Path) -> None:
    path = tmp_path / "mixed.jsonl"
    a, b, c = (json.dumps(r) for r in RECORDS)
    path.write_bytes(f"{a}\r\r{b}\r\n\n{c}".encode())  # no end after the last record
    items = list(iter_documents(path))
    assert [(type(x).__name__, x.line if isinstance(x, Reject) else x.id) for x in items] == [
        ("Document", "a"), ("Reject", 3), ("Document", "c")]


def test_jsonl_cr_line_with_bad_bytes_is_one_reject(tmp_path: Path) -> None:
    path = tmp_path / "bytes.jsonl"
    path.write_bytes(b'{"id": "a", "text": "ok"}\r{"id": "b", "text": "\xff"}\r'
                     b'{"id": "c", "text": "ok"}\r')
    result = read_corpus(path)
    assert [d.id for d in result.documents] == ["a", "c"]
    assert len(result.rejects) == 1 and result.rejects[0].line == 2
    assert "the byte 0xff" in result.rejects[0].message


def test_jsonl_gz_with_cr_endings(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "old_mac.jsonl.gz"
    path.write_bytes(gzip.compress("\r".join(json.dumps(r) for r in RECORDS).encode()))
    result = read_corpus(path)
    assert [d.id for d in result.documents] == ["a", "c"] and len(result.rejects) == 1


@pytest.mark.parametrize("end", ["\r", "\n", "\r\n"])
def test_csv_lines_end_in_cr_lf_or_crlf(tmp_path: Path, end: str) -> None:
    path = tmp_path / "old_mac.csv"
    path.write_bytes(end.join(["id,text", "a,first", "b,", "c,third"]).encode() + end.encode())
    result = read_corpus(path)
    assert [d.id for d in result.documents] == ["a", "c"]
    assert [r.line for r in result.rejects] == [3]
    assert result.rejects[0].field == "text"


def test_csv_quoted_field_keeps_its_line_breaks_with_cr_endings(tmp_path: Path) -> None:
    path = tmp_path / "quoted.csv"
    path.write_bytes(b'id,text\r"a","two\rlines"\r"b","x"\r')
    result = read_corpus(path)
    assert [(d.id, d.text) for d in result.documents] == [("a", "two\rlines"), ("b", "x")]
    assert result.rejects == []


def test_cr_only_corpus_is_indexed_record_by_record(tmp_path: Path) -> None:
    from credrank.index import open_store
    from credrank.index.embed import HashingEmbedder
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    path = tmp_path / "old_mac.jsonl"
    path.write_bytes("\r".join(json.dumps(r) for r in RECORDS).encode())
    emb = HashingEmbedder(64)
    store = open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim, create=True)
    try:
        report = index_documents(iter_documents(path), store, emb, SourceTyper())
    finally:
        store.close()
    assert (report.indexed, report.rejected) == (2, 1)
    assert report.rejects[0].line == 2
