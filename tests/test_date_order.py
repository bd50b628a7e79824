"""Dates the user can declare (issue 36, item 3): ``date_order`` ``mdy`` or ``dmy``.

An all-numeric day/month date that reads two ways (``2/11/20``) is dropped and reported unless
the user declares the order of the source: then every such date is read that way, one that
cannot be (``13/2/20`` under ``mdy``) is dropped naming the order, never swapped, and ISO or
written dates read as without it. One option, one validator
(:func:`credrank.documents.fields.date_order_value`), whatever the door: the reader keyword,
``credrank index --date-order`` (and ``date_order`` in ``credrank.toml``) and ``POST /index``.
Checked on CoAID when ``../shared/data`` is there.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from cli_inprocess import assert_clean_error
from cli_process import CREDRANK
from credrank.documents import iter_documents, read_corpus
from credrank.documents.fields import (
    DATE_ORDERS,
    date_order_value,
    lenient_date_value,
    numeric_day_month,
)
from serving import asgi_client, in_process
from sparse_copy import copy_index
from test_ingest_lenient import rejects_file, run_index

#: the file of the issue: 987 of its 1,127 rows are loaded with their article text, and 206
#: of those lose ``publish_date`` (``2/11/20``) when no order is declared
COAID_REAL = Path("coaid") / "07-01-2020" / "NewsRealCOVID-19.csv"
COAID_FIELDS = {"": "id", "content": "text", "news_url": "url", "publish_date": "published_at"}

needs_cli = pytest.mark.skipif(not CREDRANK.exists(),
                               reason="the credrank console script is not installed")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


# ------------------------------------------------------------------------------ the parser

#: value → (no order, mdy, dmy): a datetime read, or a fragment of the reason it is refused
CASES: list[tuple[str, Any, Any, Any]] = [
    ("2/11/20", "reads one way", utc(2020, 2, 11), utc(2020, 11, 2)),
    ("02/11/2020", "reads one way", utc(2020, 2, 11), utc(2020, 11, 2)),
    ("2.11.20", "reads one way", utc(2020, 2, 11), utc(2020, 11, 2)),
    ("2-11-2020", "reads one way", utc(2020, 2, 11), utc(2020, 11, 2)),
    ("12/12/2020", utc(2020, 12, 12), utc(2020, 12, 12), utc(2020, 12, 12)),
    # one number above 12: read one way without an order; a declared order that cannot
    # read it refuses it, naming the order (never swapped)
    ("13/2/20", utc(2020, 2, 13), "expected a month-first date (date_order mdy: "
     "month/day/year), got '13/2/20' (no month 13)", utc(2020, 2, 13)),
    ("4/13/20", utc(2020, 4, 13), utc(2020, 4, 13), "expected a day-first date (date_order "
     "dmy: day/month/year), got '4/13/20' (no month 13)"),
    ("2/30/20", "day is out of range", "got '2/30/20' (no day 30 in February 2020)",
     "(no month 30)"),
    ("2/29/21", "day is out of range", "(no day 29 in February 2021)", "(no month 29)"),
    ("2/29/20", utc(2020, 2, 29), utc(2020, 2, 29), "(no month 29)"),
    ("0/5/20", "month must be in 1..12", "(no month 0)", "(no day 0 in May 2020)"),
    # ISO and written dates read the same under any order
    ("2020-02-11", utc(2020, 2, 11), utc(2020, 2, 11), utc(2020, 2, 11)),
    ("2020/02/11", utc(2020, 2, 11), utc(2020, 2, 11), utc(2020, 2, 11)),
    ("2020-02-11T10:00:00+02:00", utc(2020, 2, 11, 8), utc(2020, 2, 11, 8),
     utc(2020, 2, 11, 8)),
    ("11-Apr-20", utc(2020, 4, 11), utc(2020, 4, 11), utc(2020, 4, 11)),
    ("April 17, 2020", utc(2020, 4, 17), utc(2020, 4, 17), utc(2020, 4, 17)),
    # a time (and zone) after a numeric date is read as without an order
    ("2/11/20 17:09", "reads one way", utc(2020, 2, 11, 17, 9), utc(2020, 11, 2, 17, 9)),
    ("2/11/2020 5:47 pm", "reads one way", utc(2020, 2, 11, 17, 47), utc(2020, 11, 2, 17, 47)),
    ("2/11/2020T10:00+02:00", "reads one way", utc(2020, 2, 11, 8), utc(2020, 11, 2, 8)),
    # still refused under any order: no year, a relative date
    ("2/11", "(year missing)", "(year missing)", "(year missing)"),
    ("3 months ago", "expected a date such as", "expected a date such as",
     "expected a date such as"),
]


@pytest.mark.parametrize(("value", "none", "mdy", "dmy"), CASES)
def test_numeric_dates_under_each_order(value: str, none: Any, mdy: Any, dmy: Any) -> None:
    for order, expected in ((None, none), ("mdy", mdy), ("dmy", dmy)):
        dt, err, _ = lenient_date_value(value, UTC, order)
        if isinstance(expected, datetime):
            assert (dt, err) == (expected, None), (order, err)
        else:
            assert dt is None and err is not None and expected in err, (order, err)


def test_a_declared_order_keeps_the_zone_rules() -> None:
    # a time without a zone takes the assumed zone (and says so); a day is midnight UTC
    plus2 = timezone(timedelta(hours=2))
    assert lenient_date_value("2/11/20", plus2, "mdy") == (utc(2020, 2, 11), None, False)
    assert lenient_date_value("2/11/20 17:09", plus2, "mdy") == (utc(2020, 2, 11, 15, 9),
                                                                  None, True)
    assert lenient_date_value("2/11/20 17:09 PST", UTC, "dmy") == (utc(2020, 11, 3, 1, 9),
                                                                    None, False)


def test_without_an_order_the_refusal_says_how_to_declare_one() -> None:
    _, err, _ = lenient_date_value("2/11/20", UTC)
    assert err == ("expected a date that reads one way, got '2/11/20' (2020-02-11 month first "
                   "or 2020-11-02 day first; write it as ISO 8601 or declare the order: "
                   "date_order (--date-order) mdy or dmy)")


@pytest.mark.parametrize(("value", "numeric"), [
    ("2/11/20", True), (" 13.02.2020  8:30 ", True), ("2-11-2020T10:00", True),
    ("2020-02-11", False), ("2020/02/11", False), ("11-Apr-20", False), ("2/11", False),
    ("2/11/202", False), (20200211, False), (None, False),
])
def test_numeric_day_month(value: Any, numeric: bool) -> None:
    assert numeric_day_month(value) is numeric


def test_date_order_value_is_the_one_validator() -> None:
    assert DATE_ORDERS == ("mdy", "dmy")
    assert [date_order_value(v) for v in (None, "mdy", "dmy")] == [None, "mdy", "dmy"]
    for name in ("date_order", "--date-order"):
        with pytest.raises(ValueError) as info:
            date_order_value("ymd", name)
        assert str(info.value) == f"{name}: expected one of mdy, dmy, got 'ymd'"
    for bad, shown in (("MDY", "'MDY'"), ("", "''"), (1, "integer 1"), (True, "boolean True")):
        with pytest.raises(ValueError, match=r"^date_order: expected one of mdy, dmy, got "):
            date_order_value(bad)
        with pytest.raises(ValueError) as info:
            date_order_value(bad)
        assert str(info.value).endswith(f"got {shown}")


# ------------------------------------------------------------------------------ the reader

CSV = ("id,text,published_at,modified_at\n"
       "a,zinc and colds,2/11/20,2020-02-12\n"
       "b,vitamin c and colds,13/2/20,11-Apr-20\n"
       "c,echinacea and colds,12/1/2020 17:09,\n"
       "d,garlic and colds,2020-03-04,2/11/20\n")


def test_the_reader_takes_a_declared_order(write) -> None:
    path = write("c.csv", CSV)
    plain = read_corpus(path)
    assert [(d.line, d.field) for d in plain.dropped] == [(2, "published_at"),
                                                         (4, "published_at"),
                                                         (5, "modified_at")]
    assert (plain.date_order, plain.dates_ordered) == (None, 0)
    assert plain.documents[1].published_at == utc(2020, 2, 13)  # reads one way

    mdy = read_corpus(path, date_order="mdy")
    a, b, c, d = mdy.documents
    assert (a.published_at, a.modified_at) == (utc(2020, 2, 11), utc(2020, 2, 12))
    assert b.published_at is None and b.modified_at == utc(2020, 4, 11)
    assert c.published_at == utc(2020, 12, 1, 17, 9)
    assert (d.published_at, d.modified_at) == (utc(2020, 3, 4), utc(2020, 2, 11))
    # 13/2/20 is not swapped: dropped, naming the file, line, field and order
    [dropped] = mdy.dropped
    assert dropped.message == (
        f"{path}:3: field 'published_at' dropped: expected a month-first date (date_order "
        "mdy: month/day/year), got '13/2/20' (no month 13)")
    assert (mdy.date_order, mdy.dates_ordered, mdy.zones_assumed) == ("mdy", 3, 1)
    assert mdy.summary() == ("read 4 records: accepted 4, rejected 0; 1 field dropped in 1 "
                             "record; 1 date without a time zone read as UTC; 3 numeric dates "
                             "read month first")

    dmy = read_corpus(path, date_order="dmy")
    a, b, c, d = dmy.documents
    assert (a.published_at, b.published_at, d.modified_at) == (
        utc(2020, 11, 2), utc(2020, 2, 13), utc(2020, 11, 2))
    assert c.published_at == utc(2020, 1, 12, 17, 9)
    assert dmy.dropped == [] and dmy.dates_ordered == 4
    assert dmy.summary().endswith("; 4 numeric dates read day first")


def test_the_stream_reports_its_order_and_refuses_a_bad_one(write) -> None:
    path = write("c.jsonl", json.dumps({"id": "a", "text": "t", "published_at": "2/11/20"})
                 + "\n")
    stream = iter_documents(path, date_order="dmy")
    [doc] = list(stream)
    assert doc.published_at == utc(2020, 11, 2)
    assert (stream.date_order, stream.dates_ordered) == ("dmy", 1)
    with pytest.raises(ValueError) as info:
        iter_documents(path, date_order="ymd")
    assert str(info.value) == "date_order: expected one of mdy, dmy, got 'ymd'"
    with pytest.raises(ValueError, match=r"^date_order: expected no declared order with "
                                         r"strict reading .*got 'mdy'"):
        read_corpus(path, strict=True, date_order="mdy")


# ------------------------------------------------------------------------------ the CLI

@needs_cli
def test_cli_reads_a_declared_order_and_reports_it(tmp_path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text(CSV, encoding="utf-8")
    plain = run_index(str(corpus), "--index", "plain", "--json", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    doc = json.loads(plain.stdout)
    assert doc["fields_dropped"] == 3
    assert (doc["reading"]["date_order"], doc["reading"]["dates_ordered"]) == (None, 0)

    proc = run_index(str(corpus), "--index", "mdy", "--date-order", "mdy", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert ("indexed 4, rejected 0; 1 field dropped in 1 record; 1 date without a time zone "
            "read as UTC (--assume-timezone, default UTC); 3 numeric dates read month first "
            "(--date-order mdy); index holds 4 documents") in proc.stdout
    assert (f"warning: {corpus}:3: field 'published_at' dropped: expected a month-first date "
            "(date_order mdy: month/day/year), got '13/2/20' (no month 13)") in proc.stderr
    [row] = rejects_file(tmp_path / "mdy")
    assert (row["kind"], row["line"], row["field"], row["id"]) == (
        "dropped", 3, "published_at", "b")

    proc = run_index(str(corpus), "--index", "dmy", "--date-order", "dmy", "--json",
                     cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["indexed"], doc["fields_dropped"]) == (4, 0)
    assert doc["reading"] == {"strict": False, "assume_timezone": "UTC", "zones_assumed": 1,
                              "date_order": "dmy", "dates_ordered": 4}


@needs_cli
@pytest.mark.parametrize("value", ["ymd", "MDY", ""])
def test_cli_bad_date_order_is_an_error_naming_the_option(value: str, tmp_path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text(CSV, encoding="utf-8")
    proc = run_index(str(corpus), "--index", "idx", "--date-order", value, cwd=tmp_path)
    assert_clean_error(proc, f"--date-order: expected one of mdy, dmy, got {value!r}",
                       starts=True)
    assert not (tmp_path / "idx").exists()


@needs_cli
def test_cli_date_order_with_strict_is_an_error(tmp_path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text(CSV, encoding="utf-8")
    proc = run_index(str(corpus), "--index", "idx", "--strict", "--date-order", "mdy",
                     cwd=tmp_path)
    assert_clean_error(proc, "--date-order mdy: expected no declared order with --strict",
                       starts=True)
    assert not (tmp_path / "idx").exists()


@needs_cli
def test_credrank_toml_declares_the_order(tmp_path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text(CSV, encoding="utf-8")
    # at the top level (beside `index`, which allows no [index] table) and in [index]
    (tmp_path / "credrank.toml").write_text('index = "top"\ndate-order = "dmy"\n',
                                            encoding="utf-8")
    proc = run_index(str(corpus), "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "credrank: defaults from" in proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["index"], doc["reading"]["date_order"]) == (str(tmp_path / "top"), "dmy")
    (tmp_path / "credrank.toml").write_text('[index]\ndate_order = "dmy"\n', encoding="utf-8")
    proc = run_index(str(corpus), "--index", "idx", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["reading"]["date_order"] == "dmy"
    # the command line wins over the file
    proc = run_index(str(corpus), "--index", "idx2", "--date-order", "mdy", "--json",
                     cwd=tmp_path)
    assert json.loads(proc.stdout)["reading"]["date_order"] == "mdy"
    # the file's value is checked by the same validator
    (tmp_path / "credrank.toml").write_text('[index]\ndate_order = "ymd"\n', encoding="utf-8")
    proc = run_index(str(corpus), "--index", "idx3", cwd=tmp_path)
    assert_clean_error(proc, "--date-order: expected one of mdy, dmy, got 'ymd'")


# ------------------------------------------------------------------------------ POST /index

def test_post_index_takes_date_order(demo_index_hashing: Path, tmp_path) -> None:
    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    docs = [{"id": "o-1", "text": "zinc and colds", "published_at": "2/11/20"},
            {"id": "o-2", "text": "zinc again", "published_at": "13/2/20"},
            {"id": "o-3", "text": "zinc in april", "published_at": "11-Apr-20"}]
    key = {"X-API-Key": "k"}

    async def scenario() -> list[Any]:
        with in_process(where, api_key="k") as app:
            async with asgi_client(app) as client:
                mdy = await client.post("/index", headers=key, json={
                    "documents": docs, "date_order": "mdy"})
                bad = await client.post("/index", headers=key, json={
                    "documents": docs, "date_order": "ymd"})
                number = await client.post("/index", headers=key, json={
                    "documents": docs, "date_order": 1})
                strict = await client.post("/index", headers=key, json={
                    "documents": docs, "strict": True, "date_order": "dmy"})
                return [mdy, bad, number, strict]

    mdy, bad, number, strict = asyncio.run(scenario())
    assert mdy.status_code == 200, mdy.text
    doc = mdy.json()
    assert (doc["indexed"], doc["rejected"], doc["fields_dropped"]) == (3, 0, 1)
    assert doc["reading"] == {"strict": False, "assume_timezone": "UTC", "zones_assumed": 0,
                              "date_order": "mdy", "dates_ordered": 1}
    assert doc["dropped"] == [{
        "record": 2, "id": "o-2", "field": "published_at",
        "reason": "expected a month-first date (date_order mdy: month/day/year), got "
                  "'13/2/20' (no month 13)",
        "message": "record 2: field 'published_at' dropped: expected a month-first date "
                   "(date_order mdy: month/day/year), got '13/2/20' (no month 13)"}]
    for resp in (bad, number, strict):
        assert resp.status_code == 422, resp.text
    [error] = bad.json()["errors"]
    assert (error["field"], error["msg"]) == ("date_order", "expected one of mdy, dmy, got "
                                                            "'ymd'")
    assert number.json()["errors"][0]["field"] == "date_order"
    [error] = strict.json()["errors"]
    assert error["field"] == "date_order"
    assert error["msg"].startswith("expected no declared order with strict reading")


# ------------------------------------------------------------------------------ CoAID

def _coaid(shared_data: Path) -> Path:
    src = shared_data / COAID_REAL
    if not src.is_file():
        pytest.skip(f"CoAID is absent: expected {src} (see shared/data/SOURCES.md)")
    return src


def test_coaid_dropped_dates_are_read_month_first(shared_data) -> None:
    """The file of the issue: without an order 206 of its 987 loaded rows lose
    ``publish_date`` (``2/11/20`` reads two ways); declared ``mdy`` reads all of them, and
    84 more numeric dates that read one way only (``7/22/20``) month first as before.
    ``dmy`` drops those 84 naming the order: the file is month-first."""
    src = _coaid(shared_data)
    plain = read_corpus(src, fields=COAID_FIELDS)
    lost = {d.doc_id: d for d in plain.dropped if d.field == "publish_date"}
    assert (len(plain.documents), len(lost)) == (987, 206)
    assert all("reads one way" in d.reason for d in lost.values())

    mdy = read_corpus(src, fields=COAID_FIELDS, date_order="mdy")
    assert len(mdy.documents) == 987 and mdy.dropped == []
    assert mdy.dates_ordered == 290
    read = {d.id: d.published_at for d in mdy.documents}
    assert all(read[i] is not None for i in lost)
    assert {read[i] for i in lost if "'2/11/20'" in lost[i].reason} == {utc(2020, 2, 11)}
    before = {d.id: d.published_at for d in plain.documents}
    assert all(before[i] == read[i] for i in before if i not in lost)  # nothing else moved

    dmy = read_corpus(src, fields=COAID_FIELDS, date_order="dmy")
    refused = [d for d in dmy.dropped if d.field == "publish_date"]
    assert len(refused) == 84 and dmy.dates_ordered == 206
    assert all(d.reason.startswith("expected a day-first date (date_order dmy") for d in refused)


@needs_cli
def test_coaid_cli_date_order_mdy(shared_data, tmp_path) -> None:
    src = _coaid(shared_data)
    args = [str(src), "--field", "=id", "--field", "content=text", "--field",
            "publish_date=published_at", "--json"]
    plain = run_index(*args, "--index", "plain", cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr
    doc = json.loads(plain.stdout)
    assert (doc["indexed"], doc["rejected"], doc["fields_dropped"]) == (987, 140, 206)
    proc = run_index(*args, "--index", "mdy", "--date-order", "mdy", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert (doc["indexed"], doc["rejected"], doc["fields_dropped"]) == (987, 140, 0)
    assert (doc["reading"]["date_order"], doc["reading"]["dates_ordered"]) == ("mdy", 290)
    assert not any(r["kind"] == "dropped" for r in rejects_file(tmp_path / "mdy"))


def test_a_weekday_the_date_does_not_fall_on_is_refused() -> None:
    """dateutil reads past a weekday: ``Wednesday, March 5, 2020`` (a Thursday) was read as
    5 March, one of the two facts silently dropped."""
    from datetime import UTC

    from credrank.documents.fields import lenient_date_value

    dt, why, _ = lenient_date_value("Wednesday, March 5, 2020", UTC)
    assert dt is None and why == ("expected a date that falls on the weekday it names, got "
                                  "'Wednesday, March 5, 2020' (2020-03-05 is a Thursday, not a "
                                  "Wednesday)")
    for agreeing in ("Thursday, March 5, 2020", "Thu, 5 Mar 2020 10:00:00 GMT",
                     "Sun Aug 02 2020 15:53:51 GMT+0200 (CEST)"):
        assert lenient_date_value(agreeing, UTC)[1] is None, agreeing
