"""Corpus loaders: every record becomes a Document or a Reject that names file:line:field."""

from __future__ import annotations

import gzip
import json
import shutil
import tempfile
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credrank.documents import (
    CorpusError,
    Query,
    Reject,
    iter_documents,
    load_beir,
    load_summary,
    read_corpus,
    read_qrels,
    read_queries,
    write_rejects,
)
from credrank.documents.schema import SOURCE_TYPES, Document

GOOD_A = json.dumps({"id": "a", "text": "first good"})
GOOD_C = json.dumps({"id": "c", "text": "last good"})


def _line(obj: object) -> bytes:
    if isinstance(obj, bytes):
        return obj
    if isinstance(obj, str):
        return obj.encode("utf-8")
    return json.dumps(obj).encode("utf-8")


def _read_rejects_file(path: Path) -> list[dict]:
    raw = path.read_bytes().decode("utf-8")  # must be valid UTF-8 even for bad-byte excerpts
    return [json.loads(x) for x in raw.splitlines()]


# (bad line 2 between two good lines, expected field or None for record-level, reason part)
BAD_JSONL = {
    "missing_id": ({"text": "x"}, "id", "expected a non-empty id"),
    "blank_id": ({"id": "  ", "text": "x"}, "id", "expected a non-empty id"),
    "float_id": ({"id": 1.5, "text": "x"}, "id", "expected a string or integer id, got number 1.5"),
    "bool_id": ({"id": True, "text": "x"}, "id", "got boolean True"),
    "missing_text": ({"id": "b"}, "text", "expected non-empty text, got no 'text' field"),
    "empty_text": ({"id": "b", "text": ""}, "text", "expected non-empty text, got ''"),
    "whitespace_text": ({"id": "b", "text": " \t\n "}, "text", "expected non-empty text"),
    "null_text": ({"id": "b", "text": None}, "text", "expected non-empty text, got nothing"),
    "duplicate_id": ({"id": "a", "text": "again"}, "id", "got 'a' again (first seen at line 1)"),
    "bad_date": ({"id": "b", "text": "x", "published_at": "2023-13-45"}, "published_at",
                 "expected ISO 8601 date with timezone, got '2023-13-45'"),
    "naive_date": ({"id": "b", "text": "x", "verified_at": "2023-05-01T12:00:00"}, "verified_at",
                   "timezone missing"),
    "date_number": ({"id": "b", "text": "x", "observed_at": 1683000000}, "observed_at",
                    "expected ISO 8601 date with timezone, got integer 1683000000"),
    "unknown_source_type": ({"id": "b", "text": "x", "source_type": "tabloid"}, "source_type",
                            "got 'tabloid'"),
    "source_type_number": ({"id": "b", "text": "x", "source_type": 3}, "source_type",
                           "expected a string, got integer 3"),
    "text_number": ({"id": "b", "text": 42}, "text", "expected a string, got integer 42"),
    "title_object": ({"id": "b", "text": "x", "title": {"en": "T"}}, "title",
                     "expected a string, got object"),
    "url_list": ({"id": "b", "text": "x", "url": ["u"]}, "url", "expected a string, got list"),
    "cites_string": ({"id": "b", "text": "x", "cites": "a"}, "cites",
                     "expected a list of id strings, got 'a'"),
    "cites_element": ({"id": "b", "text": "x", "cites": ["a", 2.5]}, "cites[1]",
                      "got number 2.5"),
    "non_utf8_in_text": (b'{"id": "b", "text": "caf\xe9"}', "text",
                         "expected UTF-8 text, got the byte 0xe9"),
    "non_utf8_in_extra": (b'{"id": "b", "text": "x", "note": {"k": ["ok", "\xff"]}}',
                          "note.k[1]", "the byte 0xff"),
    "non_utf8_outside_string": (b'{"id": "b", "text": "x"}\xff', None,
                                "expected UTF-8 text, got the byte 0xff at byte 25"),
    "lone_surrogate_escape": ('{"id": "b", "text": "x\\ud800"}', "text", "lone surrogate U+D800"),
    "malformed_json": ('{"id": "b", "text": ', None, "got malformed JSON"),
    "non_object_array": ('["b", "x"]', None, "expected a JSON object, got array"),
    "non_object_string": ('"just text"', None, "expected a JSON object, got string"),
    "json_nan": ('{"id": "b", "text": "x", "score": NaN}', None, "NaN is not valid JSON"),
    "json_huge_number": ('{"id": "b", "text": "x", "w": 1e999}', None, "out of range"),
    "json_duplicate_key": ('{"id": "b", "text": "x", "text": "y"}', None, "duplicate key 'text'"),
}


@pytest.mark.parametrize("kind", sorted(BAD_JSONL))
def test_jsonl_bad_record_is_rejected_with_file_line_field(kind: str, write, tmp_path) -> None:
    bad, field, reason = BAD_JSONL[kind]
    path = write("c.jsonl", b"\n".join([_line(GOOD_A), _line(bad), _line(GOOD_C)]) + b"\n")
    res = read_corpus(path, strict=True)  # lenient reading: tests/test_ingest_lenient.py
    assert [d.id for d in res.documents] == ["a", "c"]  # good records around it are kept
    assert res.n_records == 3
    [rej] = res.rejects
    assert (rej.file, rej.line, rej.field) == (str(path), 2, field)
    prefix = f"{path}:2: " + (f"field '{field}': " if field else "")
    assert rej.message.startswith(prefix), rej.message
    assert reason in rej.message
    out = tmp_path / "out" / "rejects.jsonl"
    assert write_rejects(res.rejects, out) == 1
    [row] = _read_rejects_file(out)
    assert (row["file"], row["line"], row["field"]) == (str(path), 2, field)
    assert reason in row["reason"] and row["excerpt"]


def test_bad_date_message_has_the_documented_shape(write) -> None:
    path = write("d.jsonl", json.dumps({"id": "x", "text": "t", "published_at": "2023-13-45"}))
    [rej] = read_corpus(path, strict=True).rejects
    assert rej.message == (f"{path}:1: field 'published_at': expected ISO 8601 date with "
                           "timezone, got '2023-13-45'")


def test_unknown_source_type_lists_every_allowed_type(write) -> None:
    path = write("s.jsonl", json.dumps({"id": "x", "text": "t", "source_type": "Government"}))
    [rej] = read_corpus(path, strict=True).rejects
    assert all(t in rej.reason for t in SOURCE_TYPES)


def test_a_url_holding_credentials_is_rejected_without_repeating_them(write) -> None:
    """A user name or password in a URL is a credential the index would store and every
    answer return: the record is rejected (strict or lenient), the message masks it; an @ in
    the query, the fragment or a mailto: URL is no credential."""
    path = write("u.jsonl", "\n".join(json.dumps(r) for r in (
        {"id": "a", "text": "t", "url": "https://bob:hunter2@www.cdc.gov/x"},
        {"id": "b", "text": "t", "url": "https://TOKEN@github.com/o/r"},
        {"id": "c", "text": "t", "url": "https://www.cdc.gov/y?email=a@b.c#me@x"},
        {"id": "d", "text": "t", "url": "mailto:a@b.c"},
        {"id": "e", "text": "t", "url": "https://example.com\\@evil.com/"})))
    for strict in (True, False):
        result = read_corpus(path, strict=strict)
        assert [d.id for d in result.documents] == ["c", "d", "e"]
        assert [(r.field, r.line) for r in result.rejects] == [("url", 1), ("url", 2)]
        first = result.rejects[0].reason
        assert first.startswith("expected a URL without a user name or password")
        assert "'https://***@www.cdc.gov/x'" in first and "hunter2" not in first
        assert "TOKEN" not in result.rejects[1].reason


def test_several_problems_report_the_first_and_count_the_rest(write) -> None:
    path = write("m.jsonl", json.dumps({"text": 3, "title": 1, "published_at": "x"}))
    [rej] = read_corpus(path).rejects
    assert rej.field == "id"
    assert "(and 3 more: 'text', 'title', 'published_at')" in rej.reason


def test_valid_record_fields_and_policies(write) -> None:
    rec = {
        "id": 7, "text": "body", "title": "", "url": "https://example.org/a",
        "source_id": "example.org", "source_type": "government",
        "observed_at": "2023-05-01",                       # date only: midnight UTC
        "verified_at": "2023-05-01T12:30:00+02:00",        # normalised to UTC
        "published_at": "2023-05-01T10:30:00Z",
        "modified_at": "2023-05-01 10:30:00-01:00",
        "retrieved_at": None,
        "cites": ["p1", 2], "lang": "en", "scores": [1, 2.5],
    }
    [doc] = read_corpus(write("ok.jsonl", json.dumps(rec))).documents
    assert doc.id == "7" and doc.text == "body" and doc.title is None
    assert doc.url == "https://example.org/a" and doc.source_id == "example.org"
    assert doc.source_type == "government"
    assert doc.observed_at == datetime(2023, 5, 1, tzinfo=UTC)
    assert doc.verified_at == datetime(2023, 5, 1, 10, 30, tzinfo=UTC)
    assert doc.published_at == datetime(2023, 5, 1, 10, 30, tzinfo=UTC)
    assert doc.modified_at == datetime(2023, 5, 1, 11, 30, tzinfo=UTC)
    assert doc.verified_at.utcoffset() == timedelta(0)
    assert doc.retrieved_at is None
    assert doc.cites == ("p1", "2")
    assert doc.extra == {"lang": "en", "scores": [1, 2.5]}


def test_duplicate_only_counts_accepted_documents(write) -> None:
    lines = [
        {"id": "a", "text": "t", "published_at": "bad"},   # rejected: does not claim 'a'
        {"id": "a", "text": "t"},                           # accepted
        {"id": "a", "text": "t"},                           # duplicate of line 2
    ]
    res = read_corpus(write("dup.jsonl", "\n".join(json.dumps(x) for x in lines)), strict=True)
    assert [d.id for d in res.documents] == ["a"]
    assert [(r.line, r.field) for r in res.rejects] == [(1, "published_at"), (3, "id")]
    assert "first seen at line 2" in res.rejects[1].reason


def test_iter_documents_streams_in_file_order(write) -> None:
    text = "\n".join([GOOD_A, "{", "", GOOD_C, "[]"]) + "\n"
    it = iter_documents(write("s.jsonl", text))
    assert iter(it) is it
    items = list(it)
    assert [type(x) for x in items] == [Document, Reject, Document, Reject]
    assert [x.line for x in items if isinstance(x, Reject)] == [2, 5]  # blank line 3 skipped


def test_bom_and_crlf_are_accepted(write) -> None:
    path = write("b.jsonl", b"\xef\xbb\xbf" + GOOD_A.encode() + b"\r\n" + GOOD_C.encode() + b"\r\n")
    assert [d.id for d in read_corpus(path).documents] == ["a", "c"]


def test_summary_and_raise_if_rejected(write) -> None:
    lines = [GOOD_A, "{", "[1]", '"x"', GOOD_C]
    res = read_corpus(write("r.jsonl", "\n".join(lines)))
    assert load_summary(res) == "read 5 records: accepted 2, rejected 3"
    assert res.summary() == load_summary(res)
    with pytest.raises(CorpusError) as exc:
        res.raise_if_rejected(limit=2)
    assert isinstance(exc.value, ValueError)
    msg = str(exc.value)
    assert res.rejects[0].message in msg and res.rejects[1].message in msg
    assert res.rejects[2].message not in msg and "... and 1 more" in msg
    read_corpus(write("ok.jsonl", GOOD_A)).raise_if_rejected()  # no rejects: no error


def test_write_rejects_count_and_keys(write, tmp_path) -> None:
    path = write("w.jsonl", b'{"id": "a", "text": "\xff\xfe"}\n{\n[]\n' + GOOD_C.encode())
    res = read_corpus(path)
    out = tmp_path / "rej.jsonl"
    assert write_rejects(res.rejects, out) == 3
    rows = _read_rejects_file(out)
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert set(rows[0]) >= {"file", "line", "field", "reason", "excerpt"}
    assert "\ufffd" in rows[0]["excerpt"]  # bad bytes shown as replacement characters


KINDS = ["good", "blank", "bad_date", "no_text", "malformed", "non_object", "bad_bytes"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(KINDS), max_size=25))
def test_n_records_counts_every_non_blank_line(kinds: list[str]) -> None:
    lines: list[bytes] = []
    for i, kind in enumerate(kinds):
        rec = {"id": f"d{i}", "text": f"text {i}"}
        lines.append({
            "good": _line(rec),
            "blank": b"   ",
            "bad_date": _line({**rec, "published_at": "yesterday"}),
            "no_text": _line({"id": f"d{i}"}),
            "malformed": b'{"id": ',
            "non_object": b"[1, 2]",
            "bad_bytes": b'{"id": "d%d", "text": "\x80"}' % i,
        }[kind])
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.jsonl"
        path.write_bytes(b"\n".join(lines))
        res = read_corpus(path, strict=True)
    assert res.n_records == sum(k != "blank" for k in kinds)
    assert res.n_records == len(res.documents) + len(res.rejects)
    assert [d.id for d in res.documents] == [f"d{i}" for i, k in enumerate(kinds) if k == "good"]
    bad = [i + 1 for i, k in enumerate(kinds) if k not in ("good", "blank")]
    assert [r.line for r in res.rejects] == bad


# ------------------------------------------------------------------------------------ CSV

CSV_TEXT = (
    "id,title,text,published_at,cites,source_type,lang\n"          # 1
    'd1,T1,"first line\nsecond, with comma\nthird ""quoted""",'    # 2-4
    '2023-05-01,"[""d2""]",blog,en\n'
    "d2,,plain,2023-05-01T10:00:00+02:00,d1| d3 ,,it\n"             # 5
    "\n"                                                            # 6
    'd3,,"multi\nline",2023-13-45,,,en\n'                           # 7-8
    "d4,,four,,,,en\n"                                              # 9
    "d5,,too,many,columns,,,x\n"                                    # 10
    'd6,,"x",,"[""a"", 3.5]",,en\n'                                  # 11
)


def test_csv_multiline_quoted_text_keeps_physical_line_numbers(write) -> None:
    path = write("c.csv", CSV_TEXT)
    res = read_corpus(path, strict=True)
    assert [d.id for d in res.documents] == ["d1", "d2", "d4"]
    d1, d2, d4 = res.documents
    assert d1.text == 'first line\nsecond, with comma\nthird "quoted"'
    assert d1.cites == ("d2",) and d1.source_type == "blog" and d1.title == "T1"
    assert d2.cites == ("d1", "d3") and d2.title is None and d2.source_type is None
    assert d2.published_at == datetime(2023, 5, 1, 8, tzinfo=UTC)
    assert d4.extra == {"lang": "en"}
    assert [(r.line, r.field) for r in res.rejects] == [
        (7, "published_at"), (10, None), (11, "cites[1]")]
    assert res.rejects[0].message == (f"{path}:7: field 'published_at': expected ISO 8601 date "
                                      "with timezone, got '2023-13-45'")
    assert "expected 7 columns as in the header (line 1), got 8" in res.rejects[1].reason
    assert res.n_records == 6


def test_csv_non_utf8_bytes_rejected_per_record(write, tmp_path) -> None:
    data = (b"id,title,text\n"
            b"a,ok,fine\n"
            b'b,caf\xe9,"two\nlines"\n'
            b'c,x,"bad \xff\nin text"\n'
            b"d,ok,fine\n")
    path = write("u.csv", data)
    res = read_corpus(path, strict=True)
    assert [d.id for d in res.documents] == ["a", "d"]
    assert [(r.line, r.field) for r in res.rejects] == [(3, "title"), (5, "text")]
    assert res.rejects[0].message.startswith(f"{path}:3: field 'title': expected UTF-8 text, "
                                             "got the byte 0xe9")
    assert write_rejects(res.rejects, tmp_path / "r.jsonl") == 2
    assert len(_read_rejects_file(tmp_path / "r.jsonl")) == 2


def test_csv_unterminated_quote_is_one_reject_at_its_start(write) -> None:
    # the records after the stray quote are not absorbed into it: each is read on its own
    path = write("q.csv", 'id,text\na,ok\nb,"never closed\nc,x\nd,y,z\ne,fine\n')
    res = read_corpus(path)
    assert [d.id for d in res.documents] == ["a", "c", "e"]
    assert [(r.line, r.field) for r in res.rejects] == [(3, None), (5, None)]
    assert "expected well-formed CSV" in res.rejects[0].reason
    assert "unterminated quote" in res.rejects[0].reason
    assert "expected 2 columns" in res.rejects[1].reason
    assert res.n_records == 5


def test_csv_stray_quote_closing_later_does_not_absorb_records(write) -> None:
    # the quote opened on line 3 "closes" on line 5: one 2-column record would swallow c and d
    path = write("s.csv", 'id,text\na,ok\nb,"oops\nc,x\nd,"quoted" text\ne,fine\n')
    res = read_corpus(path)
    assert [d.id for d in res.documents] == ["a", "c", "e"]
    assert [r.line for r in res.rejects] == [3, 5]
    assert res.n_records == 5


def test_csv_header_problems_raise(write) -> None:
    with pytest.raises(CorpusError, match="unique column names"):
        read_corpus(write("h.csv", "id,text,id\n1,a,2\n"))


def test_csv_missing_column_hint_and_field_mapping(write) -> None:
    path = write("m.csv", "doc_id,body,timestamp\nx1,hello,2020-01-02T03:04:05Z\nx2,hi,soon\n")
    with pytest.raises(CorpusError, match="no 'id' and no 'text' column") as exc:
        read_corpus(path)  # the header, once and up front: not a reject per record
    assert "--field COLUMN=id" in str(exc.value)
    assert "'doc_id', 'body', 'timestamp'" in str(exc.value)
    res = read_corpus(path, fields={"doc_id": "id", "body": "text", "timestamp": "retrieved_at"},
                      strict=True)
    [doc] = res.documents
    assert doc.id == "x1" and doc.retrieved_at == datetime(2020, 1, 2, 3, 4, 5, tzinfo=UTC)
    [rej] = res.rejects
    assert rej.message.startswith(f"{path}:3: field 'timestamp': expected ISO 8601")


def test_field_mapping_conflict_is_rejected(write) -> None:
    path = write("k.csv", "id,doc_id,text\na,a,same\nb,c,differ\n")
    res = read_corpus(path, fields={"doc_id": "id"})
    assert [d.id for d in res.documents] == ["a"]
    [rej] = res.rejects
    assert (rej.line, rej.field) == (3, "id") and "'id'" in rej.reason and "'doc_id'" in rej.reason
    # the renamed column first: the message named it twice ("both 'doc_id' … and 'doc_id'")
    first = write("f.csv", "doc_id,id,text\nb,c,differ\n")
    [rej] = read_corpus(first, fields={"doc_id": "id"}).rejects
    assert "got both 'doc_id' ('b') and 'id' ('c') mapped to 'id'" in rej.reason, rej.reason
    alias = write("a.jsonl", '{"_id": "b2", "id": "b3", "text": "z"}\n')
    [rej] = read_corpus(alias).rejects
    assert "got both '_id' ('b2') and 'id' ('b3')" in rej.reason, rej.reason


def test_tsv_and_gzip_and_explicit_format(write) -> None:
    tsv = write("c.tsv", "id\ttext\tcites\na\thello, world\tx|y\n")
    [doc] = read_corpus(tsv).documents
    assert doc.text == "hello, world" and doc.cites == ("x", "y")
    gz = write("c.jsonl.gz", gzip.compress((GOOD_A + "\n" + GOOD_C).encode()))
    assert [d.id for d in read_corpus(gz).documents] == ["a", "c"]
    txt = write("c.txt", GOOD_A)
    with pytest.raises(CorpusError, match=r"'\.txt'.*format="):
        read_corpus(txt)
    assert [d.id for d in read_corpus(txt, format="jsonl").documents] == ["a"]
    with pytest.raises(CorpusError, match="format: expected one of"):
        read_corpus(txt, format="xml")
    with pytest.raises(FileNotFoundError):
        iter_documents(txt.with_name("absent.jsonl"))  # raised at call time, not lazily


# ------------------------------------------------------------------------------------ Parquet

def test_parquet_rows_types_and_rejects(tmp_path) -> None:
    table = pa.table({
        "id": pa.array([1, 2, 3, 4, 5], pa.int64()),
        "text": ["one", None, "three", "four", "five"],
        "published_at": pa.array(
            [datetime(2023, 5, 1, 12, tzinfo=UTC), None, None, None, None],
            pa.timestamp("us", tz="UTC")),
        "observed_at": pa.array([date(2023, 1, 2), None, None, None, None], pa.date32()),
        "cites": pa.array([["2"], [], None, ["x"], None], pa.list_(pa.string())),
        "title": pa.array([None, None, None, {"en": "T"}, None]),
        "weight": pa.array([0.5, 1.0, 2.0, 1.0, float("nan")]),
    })
    path = tmp_path / "c.parquet"
    pq.write_table(table, path, row_group_size=2)  # several batches: row numbers continue
    res = read_corpus(path, strict=True)
    assert [d.id for d in res.documents] == ["1", "3"]
    one = res.documents[0]
    assert one.published_at == datetime(2023, 5, 1, 12, tzinfo=UTC)
    assert one.observed_at == datetime(2023, 1, 2, tzinfo=UTC)
    assert one.cites == ("2",) and one.extra == {"weight": 0.5}
    assert [(r.line, r.field, r.unit) for r in res.rejects] == [
        (2, "text", "row"), (4, "title", "row"), (5, "weight", "row")]
    assert res.rejects[0].message.startswith(f"{path}:row 2: field 'text': ")
    assert "expected a finite number" in res.rejects[2].reason
    assert res.n_records == 5


def test_parquet_naive_and_nanosecond_timestamps(tmp_path) -> None:
    naive = datetime(2023, 5, 1, 12)
    table = pa.table({
        "id": ["a", "b"], "text": ["x", "y"],
        "published_at": pa.array([naive, None], pa.timestamp("us")),
        "retrieved_at": pa.array([None, 1_683_000_000_123_456_789], pa.timestamp("ns", tz="UTC")),
    })
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    res = read_corpus(path, strict=True)
    [rej] = res.rejects
    assert (rej.line, rej.field) == (1, "published_at") and "timezone missing" in rej.reason
    [doc] = res.documents
    expected = datetime(2023, 5, 2, 4, tzinfo=UTC) + timedelta(microseconds=123_456)
    assert doc.retrieved_at == datetime.fromtimestamp(1_683_000_000.123456, tz=UTC) == expected


def _index_parquet(tmp_path: Path, table: pa.Table, **reading):
    """Index ``table`` as a Parquet corpus (hashing embedder, Qdrant Edge) and return the
    report and the stored ``doc_id -> extra``."""
    from credrank.index.embed import HashingEmbedder
    from credrank.index.ingest import index_documents
    from credrank.index.opener import open_store
    from credrank.provenance import SourceTyper

    path = tmp_path / "c.parquet"
    pq.write_table(table, path)
    emb = HashingEmbedder()
    with open_store(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True) as store:
        report = index_documents(iter_documents(path, **reading), store, emb, SourceTyper([]))
        rows = store.read_payloads(None, ("doc_id", "extra"))
    return report, {r["doc_id"]: r["extra"] for r in rows}


def test_parquet_extra_columns_of_arrow_types_are_indexed_as_json(tmp_path) -> None:
    from decimal import Decimal

    berlin = datetime(2020, 1, 1, 12, 30, tzinfo=timezone(timedelta(hours=1)))
    table = pa.table({
        "id": ["a", "b"], "text": ["vitamin d", "zinc"],
        "zoned": pa.array([berlin, None], pa.timestamp("us", tz="Europe/Berlin")),
        "naive": pa.array([datetime(2020, 1, 1), datetime(2021, 5, 5, 8, 0, 0, 250_000)],
                          pa.timestamp("ms")),
        "nanos": pa.array([1_577_836_800_123_456_789, 0], pa.timestamp("ns", tz="UTC")),
        "day": pa.array([date(2020, 2, 29), date(1, 1, 1)], pa.date32()),
        "at": pa.array([13 * 3600 * 10**6 + 5 * 10**6 + 7, 0], pa.time64("us")),
        "took": pa.array([timedelta(minutes=1, microseconds=500), timedelta(0)],
                         pa.duration("us")),
        "price": pa.array([Decimal("19.90"), Decimal("-0.01")], pa.decimal128(6, 2)),
        "exact": pa.array([Decimal("12345678901234567890.12345678901234567"), None],
                          pa.decimal128(38, 17)),
        "blob": pa.array([b"\x00\xffcred", b""], pa.binary()),
        "meta": pa.array([{"when": 1_577_836_800_000_000_001, "tags": ["x"]}, None],
                         pa.struct([("when", pa.timestamp("ns", tz="UTC")),
                                    ("tags", pa.list_(pa.string()))])),
        "days": pa.array([[("first", date(2020, 1, 2))], []],
                         pa.map_(pa.string(), pa.date32())),
    })
    report, extra = _index_parquet(tmp_path, table)
    assert (report.indexed, report.rejected, report.dropped) == (2, 0, [])
    assert extra["a"] == {
        "zoned": "2020-01-01T11:30:00+00:00", "naive": "2020-01-01T00:00:00",
        "nanos": "2020-01-01T00:00:00.123456+00:00", "day": "2020-02-29",
        "at": "13:00:05.000007", "took": 60.0005, "price": "19.90",
        "exact": "12345678901234567890.12345678901234567", "blob": "AP9jcmVk",
        "meta": {"when": "2020-01-01T00:00:00+00:00", "tags": ["x"]},
        "days": {"first": "2020-01-02"}}
    assert extra["b"] == {
        "zoned": None, "naive": "2021-05-05T08:00:00.250000", "nanos": "1970-01-01T00:00:00+00:00",
        "day": "0001-01-01", "at": "00:00:00", "took": 0.0, "price": "-0.01", "exact": None,
        "blob": "", "meta": None, "days": {}}


def test_parquet_value_that_cannot_be_json_names_row_and_column(tmp_path) -> None:
    table = pa.table({
        "id": ["a", "b", "c"], "text": ["x", "y", "z"],
        # 10**15 ms after 1970 is in year 33658: no Python datetime holds it
        "seen": pa.array([0, 10**15, 0], pa.timestamp("ms")),
        "codes": pa.array([[], [], [(7, "seven")]], pa.map_(pa.int64(), pa.string())),
    })
    path = tmp_path / "u.parquet"
    pq.write_table(table, path)
    strict = read_corpus(path, strict=True)
    assert [d.id for d in strict.documents] == ["a"]
    assert [(r.line, r.field, r.unit) for r in strict.rejects] == [
        (2, "seen", "row"), (3, "codes", "row")]
    assert strict.rejects[0].message.startswith(
        f"{path}:row 2: field 'seen': expected a timestamp[ms] value Python can represent")
    assert strict.rejects[1].reason == "expected an object with text keys, got the key integer 7"
    # lenient reading (the default): indexed without the field, which is reported as dropped
    report, extra = _index_parquet(tmp_path, table)
    assert (report.indexed, report.rejected) == (3, 0)
    assert [(d.line, d.field, d.doc_id) for d in report.dropped] == [
        (2, "seen", "b"), (3, "codes", "c")]
    assert extra == {"a": {"seen": "1970-01-01T00:00:00", "codes": {}}, "b": {"codes": {}},
                     "c": {"seen": "1970-01-01T00:00:00"}}


def test_parquet_cell_out_of_range_in_a_known_column(tmp_path) -> None:
    table = pa.table({
        "id": ["a", "b"], "text": ["x", "y"],
        "published_at": pa.array([10**15, 0], pa.timestamp("ms", tz="UTC")),
    })
    path = tmp_path / "k.parquet"
    pq.write_table(table, path)
    lenient = read_corpus(path)
    assert [d.id for d in lenient.documents] == ["a", "b"]
    assert [(d.line, d.field) for d in lenient.dropped] == [(1, "published_at")]
    [rej] = read_corpus(path, strict=True).rejects
    assert (rej.line, rej.field) == (1, "published_at")
    assert "out of its range" in rej.reason


def test_document_payload_reports_extra_that_is_not_json() -> None:
    from credrank.index.payload import document_payload

    doc = Document(id="d1", text="x", extra={"ok": [1, {"k": "v"}],
                                              "meta": {"when": datetime(2020, 1, 1)}})
    with pytest.raises(ValueError, match=r"document 'd1': extra field 'meta'\['when'\]: "
                                         r"expected JSON data .* got datetime"):
        document_payload(doc, {}, "h")
    assert document_payload(Document(id="d2", text="x", extra={"ok": [1, None]}), {},
                            "h")["extra"] == {"ok": [1, None]}


# ------------------------------------------------------------------------------------ BEIR

def _beir_line(doc: Document) -> str:
    meta = {k: getattr(doc, k).isoformat() for k in ("published_at",) if getattr(doc, k)}
    meta.update({k: getattr(doc, k) for k in ("url", "source_type") if getattr(doc, k)})
    meta.update(doc.extra)
    rec = {"_id": doc.id, "title": doc.title or "", "text": doc.text, "metadata": meta}
    if doc.cites:
        rec["cites"] = list(doc.cites)
    return json.dumps(rec)


def _write_beir(folder: Path, docs: list[Document], extra_lines: list[str]) -> None:
    (folder / "qrels").mkdir(parents=True)
    lines = [_beir_line(d) for d in docs] + extra_lines
    (folder / "corpus.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text(
        '{"_id": "q1", "text": "what is alpha", "metadata": {"k": 1}}\n'
        '{"_id": 2, "text": "beta?"}\n', encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\t2\t0\n2\t2\t1\n", encoding="utf-8")


def test_beir_folder_round_trip(tmp_path) -> None:
    docs = [
        Document(id="d1", text="alpha", title="Alpha", url="https://who.int/a",
                 source_type="government",
                 published_at=datetime(2021, 3, 4, 5, 6, tzinfo=UTC), cites=("2",),
                 extra={"lang": "en"}),
        Document(id="2", text="beta"),
    ]
    folder = tmp_path / "beir"
    conflict = json.dumps({"_id": "d3", "title": "X", "text": "g", "metadata": {"title": "Y"}})
    int_id = json.dumps({"_id": 9, "text": "nine", "metadata": {}})
    _write_beir(folder, docs, [conflict, int_id])
    ds = load_beir(folder)
    assert ds.split == "test"
    assert ds.corpus.documents == [*docs, Document(id="9", text="nine")]
    [rej] = ds.corpus.rejects
    assert rej.file == str(folder / "corpus.jsonl")
    assert (rej.line, rej.field) == (3, "metadata.title")
    assert ds.queries == [Query("q1", "what is alpha", {"metadata": {"k": 1}}), Query("2", "beta?")]
    assert ds.qrels == {"q1": {"d1": 2, "2": 0}, "2": {"2": 1}}
    assert read_corpus(folder).documents == ds.corpus.documents  # a directory is a BEIR folder
    assert read_queries(folder) == ds.queries and read_qrels(folder) == ds.qrels
    (folder / "qrels" / "dev.tsv").write_text("q1\td1\t1\n", encoding="utf-8")
    with pytest.raises(CorpusError, match=r"split=.*\['dev', 'test'\]"):
        load_beir(folder)
    assert load_beir(folder, split="dev").qrels == {"q1": {"d1": 1}}
    with pytest.raises(CorpusError, match=r"no qrels/train\.tsv"):
        load_beir(folder, split="train")


def test_beir_folder_without_corpus(tmp_path) -> None:
    with pytest.raises(CorpusError, match=r"no corpus\.jsonl"):
        read_corpus(tmp_path)


# ------------------------------------------------------------------------------- queries, qrels

def test_read_queries_errors_name_file_and_line(write) -> None:
    path = write("q.jsonl", '{"id": "q1", "text": "ok"}\n{"id": "q2", "text": "  "}\n'
                            '{"_id": "q1", "text": "dup"}\n{"text": "no id"}\n')
    with pytest.raises(CorpusError) as exc:
        read_queries(path)
    msg = str(exc.value)
    assert f"{path}:2: field 'text': expected non-empty query text" in msg
    assert f"{path}:3: field 'id': expected a unique query id, got 'q1' again " \
           "(first seen at line 1)" in msg
    assert f"{path}:4: field 'id'" in msg


def test_a_tsv_is_read_as_written_without_quoting(write) -> None:
    """TSV has no quoting: a statement that opens with a quotation (LIAR's ``"John wasn't …"
    when he ran``) was refused as malformed CSV, and a whole quoted one lost its quotation
    marks, unreported."""
    path = write("q.tsv", 'id\ttext\n'
                          'a\t"John wasn\'t this raging populist" when he ran.\n'
                          'b\t"Gov. Romney\'s own plan"\n'
                          'c\ta "quoted" word\n')
    result = read_corpus(path, strict=True)
    assert not result.rejects
    assert [d.text for d in result.documents] == [
        '"John wasn\'t this raging populist" when he ran.', '"Gov. Romney\'s own plan"',
        'a "quoted" word']


def test_read_queries_tsv(write) -> None:
    path = write("q.tsv", "id\ttext\nq1\tfirst query\n\n7\tsecond\n")
    assert read_queries(path) == [Query("q1", "first query"), Query("7", "second")]
    # a third field is an error naming the line, never glued into the query text (it was:
    # '7<TAB>second<TAB>with tab' searched 'second<TAB>with tab')
    glued = write("g.tsv", "id\ttext\nq1\tfirst query\n\n7\tsecond\twith tab\n")
    with pytest.raises(CorpusError, match=r"g\.tsv:4: expected two tab-separated fields "
                                          r"'id<TAB>query', got 3"):
        read_queries(glued)


def test_read_qrels_trec_without_header(write) -> None:
    path = write("q.txt", "q1 0 d1 2\nq1 0 d2 0\n\nq2 Q0 d1 -1\nq1 0 d1 2\n")
    assert read_qrels(path) == {"q1": {"d1": 2, "d2": 0}, "q2": {"d1": -1}}


@pytest.mark.parametrize(("text", "line", "part"), [
    ("q1 0 d1 1\nq1 0 d2 x\n", 2, "field 'score': expected an integer relevance, got 'x'"),
    ("q1 0 d1 1\nq1 d2 1\n", 2, "expected 4 columns like the lines before, got 3"),
    ("q1 d1\n", 1, "expected 3 columns"),
    ("query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td1\t0\n", 3,
     "field 'score': expected the relevance 1 given at line 2"),
    (b"q1 0 d1 1\nq\xff 0 d1 1\n", 2, "expected UTF-8 text, got the byte 0xff"),
])
def test_read_qrels_errors_name_file_and_line(write, text, line, part) -> None:
    path = write("bad.tsv", text)
    with pytest.raises(CorpusError) as exc:
        read_qrels(path)
    assert f"{path}:{line}: {part}" in str(exc.value)


# ------------------------------------------------------------------------------------ real data

def test_trec2019_health_misinformation_csv(shared_data, tmp_path) -> None:
    src = shared_data / "trec2019_hm" / "trec2019_hm_dev.csv"
    if not src.is_file():
        pytest.skip(f"{src} is absent")
    mapping = {"doc_id": "id", "timestamp": "retrieved_at"}
    res = read_corpus(src, fields=mapping)
    assert (len(res.documents), len(res.rejects)) == (156, 0)  # 156 pages, see SOURCES.md
    assert all(d.retrieved_at is not None and d.retrieved_at.tzinfo is not None
               for d in res.documents)
    assert any("\n" in d.text for d in res.documents)  # multi-line quoted fields
    assert {"topic_id", "stance", "credibility"} <= set(res.documents[0].extra)
    # an appended bad row is reported at the physical line after the last one
    copy = tmp_path / "hm.csv"
    shutil.copyfile(src, copy)
    data = copy.read_bytes()
    assert data.endswith(b"\n")
    with copy.open("ab") as fh:
        fh.write(b"1,extra-doc,0,0,0,q,d,helpful,some text,2012-02-11T17:38:02,http://x.org\r\n")
    [rej] = read_corpus(copy, fields=mapping, strict=True).rejects
    assert (rej.line, rej.field) == (data.count(b"\n") + 1, "timestamp")
    assert "timezone missing" in rej.reason


def test_timezone_helper_values_are_utc(write) -> None:
    east = timezone(timedelta(hours=5, minutes=30))
    stamp = datetime(2024, 2, 29, 23, 0, tzinfo=east)
    [doc] = read_corpus(write("tz.jsonl", json.dumps(
        {"id": "x", "text": "t", "published_at": stamp.isoformat()}))).documents
    assert doc.published_at == stamp and doc.published_at.tzinfo == UTC


# --------------------------------------------------------------------------- payload bounds

def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


@pytest.mark.parametrize("levels", [33, 200, 100_000])
def test_too_deep_extra_field_is_a_reject_never_a_recursion_error(levels, write) -> None:
    evil = '{"id": "evil", "text": "hi", "meta": ' + _nested(levels) + "}"
    path = write("deep.jsonl", "\n".join([GOOD_A, evil, GOOD_C]) + "\n")
    res = read_corpus(path)
    assert [d.id for d in res.documents] == ["a", "c"]
    [rej] = res.rejects
    assert rej.message == (f"{path}:2: field 'meta': expected nesting at most 32 levels deep, "
                           "got deeper")


def test_nesting_up_to_the_limit_is_kept(write) -> None:
    ok = json.dumps({"id": "b", "text": "x", "meta": json.loads(_nested(32)),
                     "obj": {"k": [[{"deep": [1]}]]}})
    [doc] = read_corpus(write("ok.jsonl", ok + "\n")).documents
    assert doc.extra["meta"] == json.loads(_nested(32))


def test_too_deep_value_inside_an_object_names_its_top_level_field(write) -> None:
    inner = '{"a": ' + _nested(40) + "}"
    line = '{"id": "b", "text": "x", "note": "[[[[", "outer": ' + inner + "}"
    [rej] = read_corpus(write("o.jsonl", line + "\n")).rejects
    assert rej.field == "outer" and "at most 32 levels deep" in rej.reason


def test_too_large_extra_field_is_rejected(write) -> None:
    big = json.dumps({"id": "b", "text": "x", "blob": ["y" * 1000] * 70})
    small = json.dumps({"id": "s", "text": "x", "blob": "y" * 60_000})
    res = read_corpus(write("big.jsonl", big + "\n" + small + "\n"))
    assert [d.id for d in res.documents] == ["s"]
    [rej] = res.rejects
    assert rej.field == "blob" and rej.reason.startswith("expected at most 65536 bytes of JSON")


def test_deep_parquet_column_is_rejected(tmp_path) -> None:
    deep: object = [1]
    for _ in range(40):
        deep = [deep]
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"id": ["a"], "text": ["x"], "meta": [deep]}), path)
    [rej] = read_corpus(path).rejects
    assert rej.field == "meta" and "at most 32 levels deep" in rej.reason


# --------------------------------------------------------------------------- damaged gzip

def _gz_lines(n: int) -> bytes:
    return gzip.compress("".join(
        json.dumps({"id": f"d{i}", "text": f"text {i} " + "pad " * 50}) + "\n"
        for i in range(n)).encode())


@pytest.mark.parametrize("name", ["t.jsonl.gz", "t.csv.gz"])
def test_truncated_gzip_raises_corpus_error_with_file_and_count(name, write) -> None:
    if name.endswith(".csv.gz"):
        data = gzip.compress(("id,text\n" + "".join(
            f"d{i},text {i} {'pad ' * 50}\n" for i in range(2000))).encode())
    else:
        data = _gz_lines(2000)
    path = write(name, data[: len(data) // 2])
    seen = []
    with pytest.raises(CorpusError, match=r"truncated or corrupt.* after \d+ records") as exc:
        for item in iter_documents(path):
            seen.append(item)
    assert str(path) in str(exc.value)
    assert 0 < len(seen) < 2000 and all(isinstance(d, Document) for d in seen)
    assert f"after {len(seen)} records" in str(exc.value)


def test_corrupt_gzip_header_raises_corpus_error(write) -> None:
    path = write("bad.jsonl.gz", b"xx" + _gz_lines(5)[2:])
    with pytest.raises(CorpusError, match=r"bad\.jsonl\.gz: expected a complete gzip stream.*"
                                          r"after 0 records"):
        read_corpus(path)


def test_a_very_wide_csv_header_is_read_in_one_pass(tmp_path: Path) -> None:
    # issue 37, N9: the repeated-column check was quadratic (205 s at 100,000 columns)
    names = ["id", "text", *(f"c{i}" for i in range(100_000))]
    path = tmp_path / "wide.csv"
    path.write_text(",".join(names) + "\n" + ",".join(["a", "hello", *["x"] * 100_000]) + "\n")
    docs = [d for d in iter_documents(path) if isinstance(d, Document)]
    assert [d.id for d in docs] == ["a"] and len(docs[0].extra) == 100_000
    path.write_text(",".join([*names, "c7"]) + "\n")
    with pytest.raises(CorpusError, match=r"expected unique column names, got \['c7'\] "
                                          "repeated"):
        list(iter_documents(path))


def test_cli_index_format_reads_a_file_whose_extension_says_none(tmp_path) -> None:
    # the library's format= had no CLI door: its error said "or pass format=" to a user of
    # credrank index, which had no such option
    from cli_inprocess import run_cli

    notes = tmp_path / "notes.txt"
    notes.write_text(GOOD_A + "\n" + GOOD_C + "\n", encoding="utf-8")
    proc = run_cli("index", notes, "--index", tmp_path / "idx", "--embedder", "hashing",
                   "--format", "jsonl", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["indexed"] == 2


def test_utf16_and_a_joined_files_byte_order_mark_are_said_as_such(write) -> None:
    # a UTF-16 file gave one reject per line with unrelated reasons; a second file's UTF-8
    # byte-order mark mid-file was "malformed JSON (Expecting value at column 1)"
    u16 = write("u16.jsonl", (GOOD_A + "\n" + GOOD_C + "\n").encode("utf-16"))
    with pytest.raises(CorpusError, match=r"u16\.jsonl: expected UTF-8 text, got UTF-16 \(it "
                                          r"opens with the byte-order mark FF FE\)"):
        read_corpus(u16)
    joined = write("joined.jsonl", (GOOD_A + "\n").encode() + b"\xef\xbb\xbf"
                   + (GOOD_C + "\n").encode())
    res = read_corpus(joined)
    assert [d.id for d in res.documents] == ["a"]
    [rej] = res.rejects
    assert rej.line == 2 and "a UTF-8 byte-order mark (EF BB BF) before it" in rej.reason


def test_a_field_mapping_of_a_column_the_header_lacks_is_refused(write) -> None:
    """``--field lnk=url`` on a file whose column is ``link`` was never used: the documents
    were indexed without their URLs and dates, unreported."""
    path = write("m.csv", "doc,body,link\nd1,hello world,https://www.cdc.gov/a\n")
    with pytest.raises(CorpusError, match=r"m\.csv: expected a header \(line 1\) with the "
                                          r"column 'lnk' mapped by --field lnk=url, in Python "
                                          r"fields=\{'lnk': 'url'\}"):
        read_corpus(path, fields={"doc": "id", "body": "text", "lnk": "url"})
    [doc] = read_corpus(path, fields={"doc": "id", "body": "text", "link": "url"}).documents
    assert doc.url == "https://www.cdc.gov/a"


def test_a_jsonl_field_mapping_no_record_uses_is_reported(write) -> None:
    """A JSONL file has no header to check a mapping by: ``--field lnk=url`` where the
    records say ``link`` was never used, unreported. The reading says which mappings no
    record used."""
    path = write("m.jsonl", json.dumps({"doc": "d1", "body": "hi", "link": "https://a.org/"}))
    result = read_corpus(path, fields={"doc": "id", "body": "text", "lnk": "url"})
    assert [d.id for d in result.documents] == ["d1"] and result.documents[0].url is None
    assert result.unused_fields == {"lnk": "url"}
    assert read_corpus(path, fields={"doc": "id", "body": "text"}).unused_fields == {}


def test_records_sent_as_a_list_are_named_records(write) -> None:
    """``POST /index`` reads its records as one JSONL line each: its duplicate reason said
    "first seen at line 1" in an answer whose unit is ``record``."""
    path = write("r.jsonl", '{"id": "z1", "text": "same"}\n{"id": "z1", "text": "same"}\n'
                            '{"id": "z2", "text": "t", "published_at": "soon"}\n')
    records = list(iter_documents(path, unit="record"))
    rej = records[1]
    assert isinstance(rej, Reject) and rej.unit == "record" and rej.line == 2
    assert rej.reason == "expected a unique id, got 'z1' again (first seen at record 1)"
    [line] = [r for r in iter_documents(path) if isinstance(r, Reject)]
    assert line.reason.endswith("(first seen at line 1)") and line.message.startswith(
        f"{path}:2: ")
    with pytest.raises(ValueError, match="unit: expected line or record, got 'row'"):
        iter_documents(path, unit="row")


@pytest.mark.parametrize("value", ["2020-04-11T10:00:00+25:00", "2020-04-11T10:00:00-24:00",
                                   "Sat, 11 Apr 2020 10:00:00 +2500"])
def test_an_offset_of_a_day_or_more_is_said_as_such(write, value: str) -> None:
    # it was "expected a date that stays within years 1–9999 in UTC": the year was fine
    path = write("o.jsonl", json.dumps({"id": "x", "text": "t", "published_at": value}) + "\n")
    res = read_corpus(path)
    [dropped] = res.dropped
    assert dropped.reason == (f"expected a UTC offset between -23:59 and +23:59, got "
                              f"{value!r}")
    assert read_corpus(write("y.jsonl", json.dumps(
        {"id": "x", "text": "t", "published_at": "2020-04-11T10:00:00+23:59"}) + "\n")
    ).documents[0].published_at == datetime(2020, 4, 10, 10, 1, tzinfo=UTC)
