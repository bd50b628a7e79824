"""Lenient, reported ingestion (issue 27, item 2).

An unreadable *optional* field is dropped and reported (``file:line: field 'published_at'
dropped: …``) while its record is indexed; written dates (``11-Apr-20``, ``April 17, 2020 At 5:47
pm``) are read by python-dateutil, never guessed; a date and time without a zone takes
``assume_timezone`` (default UTC, reported); ``strict`` keeps the old rejects. A tabular header
without an ``id`` or ``text`` column fails once, up front, naming the header; a ``credrank
index`` run that indexes nothing exits non-zero. Checked in the library, through the real
``credrank`` process and through ``POST /index``; on CoAID when ``../shared/data`` is there.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cli_inprocess import FORBIDDEN, run_cli
from cli_process import CREDRANK
from credrank.documents import (
    CorpusError,
    DroppedField,
    iter_documents,
    load_summary,
    read_corpus,
    write_rejects,
)
from credrank.documents.fields import lenient_date_value, timezone_value
from serving import asgi_client, in_process
from sparse_copy import copy_index
from test_corpus import BAD_JSONL, GOOD_A, GOOD_C, _line

COAID_FAKE = Path("coaid") / "05-01-2020" / "NewsFakeCOVID-19.csv"
COAID_FIELDS = ("--field", "=id", "--field", "news_url=url", "--field",
                "publish_date=published_at")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# ------------------------------------------------------------------------------ dates

@pytest.mark.parametrize(("value", "expected", "assumed"), [
    # the three CoAID examples of the issue
    ("11-Apr-20", utc(2020, 4, 11), False),                      # a day: midnight UTC
    ("April 17, 2020 At 5:47 pm", utc(2020, 4, 17, 17, 47), True),
    ("2020-03-04T08:39:59", utc(2020, 3, 4, 8, 39, 59), True),   # ISO without a zone
    # ISO 8601 as strict reading takes it
    ("2020-03-04", utc(2020, 3, 4), False),
    ("2020-03-04T08:39:59+02:00", utc(2020, 3, 4, 6, 39, 59), False),
    ("2020-03-04T08:39:59Z", utc(2020, 3, 4, 8, 39, 59), False),
    ("20200331T17:35:54Z", utc(2020, 3, 31, 17, 35, 54), False),
    # written dates with a zone of their own (RFC 2822 names, offsets, JavaScript's GMT+hhmm)
    ("Tue, 3 Jun 2008 11:05:30 GMT", utc(2008, 6, 3, 11, 5, 30), False),
    ("Apr 8, 2020 at 4:43pm PDT", utc(2020, 4, 8, 23, 43), False),
    ("Sun Aug 02 2020 15:53:51 GMT+0200 (CEST)", utc(2020, 8, 2, 13, 53, 51), False),
    ("Apr 1 2020 10:00 +05:30", utc(2020, 4, 1, 4, 30), False),
    # written dates that read one way only
    ("March 3, 2020", utc(2020, 3, 3), False),
    ("2020/03/04", utc(2020, 3, 4), False),
    ("4/13/20", utc(2020, 4, 13), False),                        # 13 is no month
    ("13/04/2020", utc(2020, 4, 13), False),
    ("12/12/2020", utc(2020, 12, 12), False),                    # both orders agree
    ("9/16/20 17:09", utc(2020, 9, 16, 17, 9), True),
    ("  April\u00a017,  2020 ", utc(2020, 4, 17), False),         # white space of any kind
])
def test_lenient_dates_read(value: str, expected: datetime, assumed: bool) -> None:
    assert lenient_date_value(value, UTC) == (expected, None, assumed)


@pytest.mark.parametrize(("value", "reason"), [
    ("2/11/20", "expected a date that reads one way, got '2/11/20' (2020-02-11 month first "
                "or 2020-11-02 day first; write it as ISO 8601 or declare the order: "
                "date_order (--date-order) mdy or dmy)"),
    ("9/3/20 8:30", "reads one way"),
    ("15-May", "expected a full date (year, month and day), got '15-May' (year missing)"),
    ("May 2020", "(day missing)"),
    ("3 months ago", "expected a date such as 2020-04-11, 11-Apr-20 or April 17, 2020 5:47 pm"),
    ("2020-04-11 10:00 IST", "got 'IST' in '2020-04-11 10:00 IST'"),  # ambiguous zone names
    ("2020-13-45", "got '2020-13-45'"),
    ("", "got ''"),
    ("yesterday", "got 'yesterday'"),
    ("0001-01-01T00:00:00+14:00", "years 1–9999 in UTC"),
    # epoch seconds and milliseconds were read as a day of 1583 (ISO's YYYYMMDDHH)
    ("1583020800", "got '1583020800' (a bare number: epoch seconds or milliseconds?"),
    ("1583020800000", "(a bare number: epoch seconds or milliseconds?"),
    # the year is the last number: 99/12/31 was read year first
    ("99/12/31", "expected a date whose last number is its year, got '99/12/31'"),
])
def test_lenient_dates_refused_never_guessed(value: str, reason: str) -> None:
    dt, err, assumed = lenient_date_value(value, UTC)
    assert dt is None and not assumed
    assert err is not None and reason in err, err


@pytest.mark.parametrize("value", [1683000000, 1.5, ["2020-01-01"], {"d": 1}, True])
def test_lenient_dates_refuse_non_strings(value: Any) -> None:
    dt, err, _ = lenient_date_value(value, UTC)
    assert dt is None and err is not None and "got " in err


def test_naive_times_take_the_assumed_zone_and_days_stay_midnight_utc() -> None:
    berlin = timezone_value("Europe/Berlin")
    # winter (CET, +1) and summer (CEST, +2): the zone's rules, not a fixed offset
    assert lenient_date_value("2020-03-04T08:39:59", berlin)[0] == utc(2020, 3, 4, 7, 39, 59)
    assert lenient_date_value("April 17, 2020 At 5:47 pm", berlin)[0] == utc(2020, 4, 17, 15,
                                                                               47)
    minus5 = timezone_value("-05:00")
    assert lenient_date_value("April 17, 2020 At 5:47 pm", minus5)[0] == utc(2020, 4, 17, 22,
                                                                               47)
    # a day without a time is midnight UTC whatever the zone (as in strict reading)
    assert lenient_date_value("11-Apr-20", minus5) == (utc(2020, 4, 11), None, False)
    # a value with its own zone ignores the assumed one
    assert lenient_date_value("Apr 8, 2020 at 4:43pm PDT", berlin)[0] == utc(2020, 4, 8, 23,
                                                                              43)
    naive = datetime(2020, 1, 1, 12)  # a Parquet timestamp without a zone
    assert lenient_date_value(naive, minus5) == (utc(2020, 1, 1, 17), None, True)
    assert lenient_date_value(date(2020, 1, 1), minus5) == (utc(2020, 1, 1), None, False)


@pytest.mark.parametrize(("value", "reason"), [
    # the hour repeated when the clocks went back: two instants (summer time was picked)
    ("2020-10-25T02:30:00", "expected a time that occurs once in Europe/Berlin, got "
                            "'2020-10-25T02:30:00' (it occurs twice there, at +02:00 and at "
                            "+01:00, as the clocks went back: write its offset)"),
    (datetime(2020, 10, 25, 2, 30), "occurs twice there"),
    ("Oct 25, 2020 2:30 am", "occurs twice there"),
    # the hour skipped when they went forward (it was read as 01:30Z)
    ("2020-03-29T02:30:00", "expected a time that exists in Europe/Berlin, got "
                            "'2020-03-29T02:30:00' (the clocks skipped it"),
    # a signed (expanded) ISO year: the minus sign was dropped (read as 2020-01-01)
    ("-2020-01-01", "expected a date within years 1–9999, got '-2020-01-01' (a signed year)"),
])
def test_a_wall_time_the_zone_makes_ambiguous_is_refused_not_guessed(value: Any,
                                                                     reason: str) -> None:
    berlin = timezone_value("Europe/Berlin")
    dt, err, assumed = lenient_date_value(value, berlin)
    assert dt is None and not assumed
    assert err is not None and reason in err, err
    # with its offset written, the same time reads
    assert lenient_date_value("2020-10-25T02:30:00+01:00", berlin)[0] == utc(2020, 10, 25, 1,
                                                                              30)


@pytest.mark.parametrize(("value", "offset"), [
    (None, timedelta(0)), ("UTC", timedelta(0)), ("z", timedelta(0)),
    ("+02:00", timedelta(hours=2)), ("-0530", -timedelta(hours=5, minutes=30)),
    ("+2", timedelta(hours=2)), (timezone(timedelta(hours=3)), timedelta(hours=3)),
])
def test_timezone_value_offsets(value: Any, offset: timedelta) -> None:
    assert timezone_value(value).utcoffset(datetime(2020, 1, 1)) == offset


def test_timezone_value_iana_names() -> None:
    assert timezone_value("America/New_York") == ZoneInfo("America/New_York")
    assert timezone_value(" Europe/Berlin ") == ZoneInfo("Europe/Berlin")


@pytest.mark.parametrize(("value", "why"), [
    ("Mars/Olympus", "no such zone"), ("+25:00", "offset out of range"),
    ("+02:75", "offset out of range"), ("", "no such zone"), ("../etc/passwd", "no such zone"),
    ("/etc/localtime", "no such zone"), (3, "got integer 3"),
])
def test_timezone_value_errors_name_the_option(value: Any, why: str) -> None:
    for name in ("assume_timezone", "--assume-timezone"):
        with pytest.raises(ValueError) as exc:
            timezone_value(value, name)
        message = str(exc.value)
        assert message.startswith(f"{name}: expected an IANA time zone name"), message
        assert why in message


# ------------------------------------------------------------------------------ the reader

def test_an_unreadable_optional_field_is_dropped_and_reported(write, tmp_path) -> None:
    lines = [
        {"id": "a", "text": "t", "published_at": "11-Apr-20", "title": "fine"},
        {"id": "b", "text": "t", "published_at": "2/11/20", "url": ["not", "a", "string"]},
        {"id": "c", "text": "t", "observed_at": "2020-03-04T08:39:59"},
        {"text": "no id", "published_at": "bad"},
    ]
    path = write("c.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n")
    res = read_corpus(path)
    assert [d.id for d in res.documents] == ["a", "b", "c"]
    a, b, c = res.documents
    assert a.published_at == utc(2020, 4, 11) and a.title == "fine"
    assert b.published_at is None and b.url is None
    assert c.observed_at == utc(2020, 3, 4, 8, 39, 59)
    assert [(d.line, d.field, d.doc_id) for d in res.dropped] == [
        (2, "url", "b"), (2, "published_at", "b")]
    assert all(isinstance(d, DroppedField) for d in res.dropped)
    assert res.dropped[1].message == (
        f"{path}:2: field 'published_at' dropped: expected a date that reads one way, got "
        "'2/11/20' (2020-02-11 month first or 2020-11-02 day first; write it as ISO 8601 "
        "or declare the order: date_order (--date-order) mdy or dmy)")
    # the record without an id is rejected; its bad date is counted in its reason
    [rej] = res.rejects
    assert (rej.line, rej.field) == (4, "id") and "(and 1 more: 'published_at')" in rej.reason
    assert (res.zones_assumed, res.assume_timezone) == (1, "UTC")
    assert load_summary(res) == ("read 4 records: accepted 3, rejected 1; 2 fields dropped in "
                                 "1 record; 1 date without a time zone read as UTC")
    out = tmp_path / "rejects.jsonl"
    assert write_rejects(res.rejects, out, res.dropped) == 3
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [(r["kind"], r["line"], r["field"]) for r in rows] == [
        ("dropped", 2, "url"), ("dropped", 2, "published_at"), ("rejected", 4, "id")]
    assert rows[1]["id"] == "b" and rows[1]["message"] == res.dropped[1].message


# what lenient reading does with each bad record of test_corpus.BAD_JSONL: an optional field
# is dropped (the field, with strict reading's reason, or lenient reading's own for dates);
# everything else is rejected exactly as in strict reading; a date without a zone is read as UTC
LENIENT_DATE = "expected a date such as 2020-04-11, 11-Apr-20 or April 17, 2020 5:47 pm"
DROPPED = {"bad_date": f"{LENIENT_DATE}, got '2023-13-45' (month must be in 1..12)",
           "date_number": f"{LENIENT_DATE} (ISO 8601 preferred), got integer 1683000000",
           **dict.fromkeys(["unknown_source_type", "source_type_number", "title_object",
                            "url_list", "cites_string", "cites_element", "non_utf8_in_extra"])}
READ = {"naive_date"}


@pytest.mark.parametrize("kind", sorted(BAD_JSONL))
def test_lenient_reading_of_every_bad_record(kind: str, write) -> None:
    bad, field, reason = BAD_JSONL[kind]
    path = write("c.jsonl", b"\n".join([_line(GOOD_A), _line(bad), _line(GOOD_C)]) + b"\n")
    strict, lenient = read_corpus(path, strict=True), read_corpus(path)
    assert len(strict.rejects) == 1 and not strict.dropped
    if kind in READ:
        assert [d.id for d in lenient.documents] == ["a", "b", "c"]
        assert not lenient.rejects and not lenient.dropped and lenient.zones_assumed == 1
    elif kind in DROPPED:
        assert [d.id for d in lenient.documents] == ["a", "b", "c"] and not lenient.rejects
        [drop] = lenient.dropped
        assert (drop.line, drop.doc_id) == (2, "b")
        assert drop.field == field.split(".")[0].split("[")[0]  # the whole field goes
        assert (DROPPED[kind] or reason) in drop.reason
        assert drop.message.startswith(f"{path}:2: field '{drop.field}' dropped: ")
        assert drop.field not in lenient.documents[1].extra
    else:
        assert [(r.line, r.field, r.reason) for r in lenient.rejects] == [
            (r.line, r.field, r.reason) for r in strict.rejects]
        assert not lenient.dropped


def test_strict_reading_keeps_the_old_rejects_and_takes_a_declared_zone(write) -> None:
    path = write("s.jsonl", "\n".join(json.dumps(x) for x in [
        {"id": "a", "text": "t", "published_at": "2020-03-04T08:39:59"},
        {"id": "b", "text": "t", "published_at": "11-Apr-20"},
    ]))
    res = read_corpus(path, strict=True)
    assert [(r.line, r.field) for r in res.rejects] == [(1, "published_at"), (2, "published_at")]
    assert "timezone missing" in res.rejects[0].reason and res.assume_timezone is None
    declared = read_corpus(path, strict=True, assume_timezone="+01:00")
    assert [d.published_at for d in declared.documents] == [utc(2020, 3, 4, 7, 39, 59)]
    assert declared.zones_assumed == 1 and declared.assume_timezone == "UTC+01:00"
    with pytest.raises(ValueError, match=r"^strict: expected True or False"):
        iter_documents(path, strict="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^assume_timezone: expected an IANA"):
        iter_documents(path, assume_timezone="Nowhere/Else")


def test_a_stream_reports_its_reading(write) -> None:
    path = write("z.jsonl", json.dumps({"id": "a", "text": "t",
                                        "verified_at": "April 17, 2020 At 5:47 pm"}))
    stream = iter_documents(path, assume_timezone="America/New_York")
    assert (stream.strict, stream.assume_timezone) == (False, "America/New_York")
    [doc] = list(stream)
    assert doc.verified_at == utc(2020, 4, 17, 21, 47)  # EDT: UTC-4
    assert stream.zones_assumed == 1 and stream.dropped == []


# ------------------------------------------------------------------------------ the header

def _no_id_table(tmp_path: Path, kind: str) -> Path:
    rows = [("1", "first text", "2020-01-02"), ("2", "second text", "2020-01-03")]
    names = ("doc_id", "text", "published_at")
    if kind == "parquet":
        path = tmp_path / "c.parquet"
        pq.write_table(pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)}), path)
        return path
    sep = "\t" if kind == "tsv" else ","
    path = tmp_path / f"c.{kind}"
    path.write_text("\n".join(sep.join(r) for r in [names, *rows]) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("kind", ["csv", "tsv", "parquet"])
def test_a_header_without_id_fails_once_up_front(kind: str, tmp_path) -> None:
    path = _no_id_table(tmp_path, kind)
    for strict in (False, True):
        with pytest.raises(CorpusError) as exc:
            iter_documents(path, strict=strict)  # at the call, before any record is read
        message = str(exc.value)
        where = "header (line 1)" if kind != "parquet" else "header"
        assert message.startswith(f"{path}: expected a {where} naming the columns 'id' and "
                                   "'text', got 3 columns: 'doc_id', 'text', 'published_at' "
                                   "(no 'id' column: map one with --field COLUMN=id")
        assert message.endswith("nothing was read")
    res = read_corpus(path, fields={"doc_id": "id"})
    assert [d.id for d in res.documents] == ["1", "2"] and not res.rejects


def test_a_header_names_both_missing_columns_and_accepts_the_id_alias(write) -> None:
    path = write("n.csv", "a,b\n1,2\n")
    with pytest.raises(CorpusError, match="no 'id' and no 'text' column"):
        iter_documents(path)
    alias = write("alias.csv", "_id,text\nx,hello\n")
    assert [d.id for d in read_corpus(alias).documents] == ["x"]


# ------------------------------------------------------------------------------ the CLI

def run_index(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``credrank index`` as a user runs it, with the hashing embedder (no model)."""
    proc = run_cli("index", *args, "--embedder", "hashing", "--no-optimize", cwd=cwd,
                   timeout=600)
    for bad in FORBIDDEN:
        assert bad not in proc.stderr, proc.stderr
    return proc


def rejects_file(where: Path) -> list[dict[str, Any]]:
    text = (where / "rejects.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


LENIENT_CORPUS = [
    {"id": "a", "text": "zinc lozenges and colds", "url": "https://www.nih.gov/a",
     "published_at": "2020-04-11"},
    {"id": "b", "text": "vitamin c and colds", "published_at": "2/11/20"},
    {"id": "c", "text": "echinacea and colds", "published_at": "2020-03-04T08:39:59"},
    {"id": "d", "text": "garlic and colds", "published_at": "11-Apr-20"},
    {"text": "no id here"},
]

needs_cli = pytest.mark.skipif(not CREDRANK.exists(),
                               reason="the credrank console script is not installed")


@needs_cli
def test_cli_lenient_run_reports_dropped_fields_and_the_assumed_zone(tmp_path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in LENIENT_CORPUS), encoding="utf-8")
    proc = run_index(str(corpus), "--index", "idx", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (f"warning: {corpus}:2: field 'published_at' dropped: expected a date that reads "
            "one way, got '2/11/20'") in proc.stderr
    assert f"rejected {corpus}:5: field 'id'" in proc.stderr
    assert ("indexed 4, rejected 1; 1 field dropped in 1 record; 1 date without a time zone "
            "read as UTC (--assume-timezone, default UTC); index holds 4 documents"
            ) in proc.stdout
    rows = rejects_file(tmp_path / "idx")
    assert [(r["kind"], r["line"], r["field"]) for r in rows] == [
        ("dropped", 2, "published_at"), ("rejected", 5, "id")]
    # the same run as JSON, in another zone: the stored date is the zone's
    proc = run_index(str(corpus), "--index", "idx2", "--assume-timezone", "Europe/Berlin",
                     "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["credrank_index"] == 1
    assert (doc["indexed"], doc["rejected"], doc["fields_dropped"]) == (4, 1, 1)
    assert doc["reading"] == {"strict": False, "assume_timezone": "Europe/Berlin",
                              "zones_assumed": 1, "date_order": None, "dates_ordered": 0}
    [dropped] = doc["dropped"]
    assert (dropped["id"], dropped["line"], dropped["field"]) == ("b", 2, "published_at")
    assert dropped["message"].startswith(f"{corpus}:2: field 'published_at' dropped: ")
    assert [r["field"] for r in doc["rejects"]] == ["id"]
    search = run_cli("search", "echinacea and colds", "--index", "idx2", "--json", "--top-k", "1",
                     cwd=tmp_path, timeout=600)
    assert search.returncode == 0, search.stderr
    [hit] = json.loads(search.stdout)["hits"]
    assert hit["doc_id"] == "c"
    assert datetime.fromisoformat(hit["dates"]["published_at"]) == utc(2020, 3, 4, 7, 39, 59)


@needs_cli
def test_cli_strict_keeps_the_rejects_and_exits_1(tmp_path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in LENIENT_CORPUS), encoding="utf-8")
    proc = run_index(str(corpus), "--index", "idx", "--strict", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "indexed 1, rejected 4" in proc.stdout and "dropped" not in proc.stderr
    rows = rejects_file(tmp_path / "idx")
    assert [(r["kind"], r["line"]) for r in rows] == [
        ("rejected", 2), ("rejected", 3), ("rejected", 4), ("rejected", 5)]
    assert "timezone missing" in rows[1]["reason"]
    assert "expected ISO 8601 date with timezone, got '11-Apr-20'" in rows[2]["reason"]


@needs_cli
@pytest.mark.parametrize("zone", ["Mars/Olympus", "+31:00", "local"])
def test_cli_bad_assume_timezone_is_an_error_naming_the_option(zone: str, tmp_path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps(LENIENT_CORPUS[0]) + "\n", encoding="utf-8")
    proc = run_index(str(corpus), "--index", "idx", "--assume-timezone", zone, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: --assume-timezone: expected an IANA time zone name")
    assert repr(zone) in proc.stderr and not (tmp_path / "idx").exists()


@pytest.mark.parametrize("kind", ["csv", "parquet"])
@needs_cli
def test_cli_header_without_id_fails_once_with_the_header(kind: str, tmp_path) -> None:
    path = _no_id_table(tmp_path, kind)
    proc = run_index(str(path), "--index", "idx", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("error:") == 1 and "rejected" not in proc.stderr
    assert "got 3 columns: 'doc_id', 'text', 'published_at' (no 'id' column" in proc.stderr
    assert not (tmp_path / "idx").exists()  # refused before the index folder is made
    proc = run_index(str(path), "--index", "idx", "--field", "doc_id=id", cwd=tmp_path)
    assert proc.returncode == 0 and "indexed 2, rejected 0" in proc.stdout, proc.stderr


@needs_cli
def test_cli_a_run_that_indexes_nothing_exits_1(tmp_path) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "a"}\n{"text": "b"}\n', encoding="utf-8")
    proc = run_index(str(corpus), "--index", "idx", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert (f"error: {corpus}: nothing was indexed: all 2 records were rejected (reasons in "
            "idx/rejects.jsonl)") in proc.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    proc = run_index(str(empty), "--index", "idx2", cwd=tmp_path)
    assert proc.returncode == 1 and "nothing was indexed: it holds no records" in proc.stderr


# ------------------------------------------------------------------------------ CoAID

@needs_cli
def test_coaid_rows_are_indexed_with_dropped_dates_reported(shared_data, tmp_path) -> None:
    """CoAID's fake-news file of May 2020 through the CLI, titles as text (as the issue
    counted): strict reading rejects 14 of 572 rows for their dates; lenient reading indexes
    all 572 and reports the one date it cannot read."""
    src = shared_data / COAID_FAKE
    if not src.is_file():
        pytest.skip(f"CoAID is absent: expected {src} (see shared/data/SOURCES.md)")
    title = ("--field", "title=text")
    strict = run_index(str(src), "--index", "strict", *COAID_FIELDS, *title, "--strict",
                       cwd=tmp_path)
    assert strict.returncode == 1 and "indexed 558, rejected 14" in strict.stdout
    rejected = rejects_file(tmp_path / "strict")
    assert {r["field"] for r in rejected} == {"publish_date"}
    proc = run_index(str(src), "--index", "lenient", *COAID_FIELDS, *title, "--json",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["indexed"], doc["rejected"], doc["documents"]) == (572, 0, 572)
    assert doc["reading"]["zones_assumed"] == 3
    [dropped] = doc["dropped"]  # "Friday, 06 March 2020 2:18 PM [ Last Update: …"
    assert (dropped["line"], dropped["field"]) == (380, "publish_date")
    assert dropped["message"] in proc.stderr  # every dropped field reported
    assert {r["line"] for r in rejected} >= {dropped["line"]}
    # with the article text as text: the rejects are exactly the rows without one
    proc = run_index(str(src), "--index", "content", *COAID_FIELDS, "--field", "content=text",
                     "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["indexed"], doc["rejected"]) == (125, 447)
    assert {(r["field"], r["reason"].split(",")[0]) for r in doc["rejects"]} == {
        ("content", "expected non-empty text")}


def test_coaid_example_dates_are_read(shared_data) -> None:
    src = shared_data / COAID_FAKE
    if not src.is_file():
        pytest.skip(f"CoAID is absent: expected {src} (see shared/data/SOURCES.md)")
    fields = {"": "id", "title": "text", "publish_date": "published_at"}
    res = read_corpus(src, fields=fields)
    assert not res.rejects and len(res.documents) == 572 and len(res.dropped) == 1
    read = {d.published_at for d in res.documents}
    assert {utc(2020, 4, 11), utc(2020, 4, 17, 17, 47), utc(2020, 3, 4, 8, 39, 59)} <= read


# ------------------------------------------------------------------------------ POST /index

def test_post_index_drops_reports_and_validates_the_reading(demo_index_hashing: Path,
                                                            tmp_path: Path) -> None:
    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    docs = [{"id": "l-1", "text": "zinc and colds", "published_at": "2020-04-11"},
            {"id": "l-2", "text": "zinc again", "published_at": "2/11/20"},
            {"id": "l-3", "text": "zinc at noon", "observed_at": "2020-03-04T12:00:00"},
            {"id": "l-4", "text": "zinc in april", "published_at": "11-Apr-20"},
            {"text": "no id"}]
    key = {"X-API-Key": "k"}

    async def scenario() -> list[Any]:
        with in_process(where, api_key="k") as app:
            async with asgi_client(app) as client:
                lenient = await client.post("/index", headers=key, json={
                    "documents": docs, "assume_timezone": "+02:00"})
                strict = await client.post("/index", headers=key, json={
                    "documents": docs, "strict": True})
                bad = await client.post("/index", headers=key, json={
                    "documents": docs, "assume_timezone": "Mars/Olympus"})
                not_bool = await client.post("/index", headers=key, json={
                    "documents": docs, "strict": "yes"})
                return [lenient, strict, bad, not_bool]

    lenient, strict, bad, not_bool = asyncio.run(scenario())
    assert lenient.status_code == 200, lenient.text
    doc = lenient.json()
    assert (doc["indexed"], doc["rejected"], doc["fields_dropped"]) == (4, 1, 1)
    assert doc["reading"] == {"strict": False, "assume_timezone": "UTC+02:00",
                              "zones_assumed": 1, "date_order": None, "dates_ordered": 0}
    assert doc["dropped"] == [{
        "record": 2, "id": "l-2", "field": "published_at",
        "reason": doc["dropped"][0]["reason"],
        "message": "record 2: field 'published_at' dropped: " + doc["dropped"][0]["reason"]}]
    assert "reads one way" in doc["dropped"][0]["reason"]
    assert [r["record"] for r in doc["rejects"]] == [5]
    assert strict.status_code == 200, strict.text
    sdoc = strict.json()  # l-1 is unchanged; l-2, l-3 and l-4 are rejected for their dates
    assert (sdoc["indexed"], sdoc["unchanged"], sdoc["rejected"]) == (0, 1, 4)
    assert sdoc["dropped"] == [] and sdoc["reading"]["assume_timezone"] is None
    for resp in (bad, not_bool):
        assert resp.status_code == 422, resp.text
    assert "assume_timezone" in bad.text and "Mars/Olympus" in bad.text
    assert "strict" in not_bool.text


def test_an_indexing_run_says_which_urls_name_no_host(tmp_path: Path) -> None:
    """A URL that names no web host (``javascript:``, ``http://``) was stored and typed
    ``unknown`` without a word at index time (a later ``provenance hosts`` counted it); a
    declared type on a record without a URL went unused unsaid. Both are in the run's JSON
    and its summary line."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(json.dumps(r) for r in (
        {"id": "a", "text": "x", "url": "javascript:alert(1)"},
        {"id": "b", "text": "y", "url": "http://"},
        {"id": "c", "text": "z", "url": "https://www.cdc.gov/x"},
        {"id": "d", "text": "w", "source_type": "peer_reviewed"})) + "\n", encoding="utf-8")
    got = run_cli("index", str(corpus), "--index", str(tmp_path / "idx"), "--embedder",
                  "hashing", "--json", timeout=600)
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert doc["indexed"] == 4
    assert [e["doc_id"] for e in doc["url_errors"]] == ["a", "b"]
    assert "not http(s)" in doc["url_errors"][0]["url_error"]
    assert [c["doc_id"] for c in doc["conflicts"]] == ["d"]
    text = run_cli("index", str(corpus), "--index", str(tmp_path / "idx2"), "--embedder",
                   "hashing", timeout=600)
    assert "2 URL(s) name no host, typed unknown (e.g. 'a': " in text.stdout + text.stderr
