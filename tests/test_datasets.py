"""Readers on the real files (skipped without ../shared/data) and on small synthetic files."""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from credrank_bench.datasets import (
    DATASETS,
    DEFAULT_PATHS,
    DatasetError,
    EvalSet,
    contains_answer,
    load_dataset,
    parse_day,
    read_coaid,
    read_cram_nq,
    read_newspolluted,
    read_trec2019_hm,
    strip_leaked_label,
)

Write = Callable[[str, str | bytes], Path]
LEAK = re.compile(r"(high|middle|medium|low) credibility of text", re.IGNORECASE)


def _load(shared_data: Path, name: str) -> EvalSet:
    return load_dataset(name, shared_data / DEFAULT_PATHS[name])


def _common_invariants(es: EvalSet) -> None:
    ids = [d.id for d in es.documents]
    assert len(ids) == len(set(ids))
    assert all(d.source_type is None for d in es.documents)
    assert [q for q, _ in es.queries] == list(es.qrels)
    for qid, bad in es.bad.items():
        assert all(es.qrels[qid].get(d, 0) == 0 for d in bad), "a bad doc is relevant"
    if es.pools is not None:
        assert sorted(d for pool in es.pools.values() for d in pool) == sorted(ids)


# ---------------------------------------------------------------- real files


def test_trec2019_hm_real(shared_data: Path) -> None:
    path = shared_data / DEFAULT_PATHS["trec2019-hm"]
    es = read_trec2019_hm(path)
    _common_invariants(es)
    with path.open(encoding="utf-8", newline="") as fh:
        csv.field_size_limit(2**31 - 1)
        rows = list(csv.DictReader(fh))
    topics = {r["topic_id"] for r in rows}
    assert len(es.documents) == len({r["doc_id"] for r in rows}) == 156  # SOURCES.md
    assert len(es.queries) == len(topics) == 15
    assert es.pools is None
    by_id = es.document_map()
    for r in rows:
        doc = by_id[r["doc_id"]]
        assert doc.url == r["url"]
        assert doc.published_at is None and "credibility" not in doc.extra
        assert doc.retrieved_at == datetime.fromisoformat(r["timestamp"])
        # the gain rule recomputed from the raw columns
        cs, stance = r["correct_stance"], int(r["stance"])
        correct = cs == "inconclusive" or stance == (1 if cs == "helpful" else 0)
        expected = int(r["usefulness"]) if correct and r["credibility"] == "1" else 0
        assert es.qrels[r["topic_id"]][r["doc_id"]] == expected
        assert (r["doc_id"] in es.bad[r["topic_id"]]) == (not correct)
        assert es.doc_labels[r["doc_id"]]["credibility"] == int(r["credibility"])
    assert dict(es.queries)["1"] == "Can cranberries prevent urinary tract infections?"
    crawl = [d.retrieved_at for d in es.documents]
    assert all(datetime(2012, 2, 1, tzinfo=UTC) <= t <= datetime(2012, 6, 1, tzinfo=UTC)
               for t in crawl if t is not None)


def test_newspolluted_real_strips_leaked_label(shared_data: Path) -> None:
    raw = json.loads((shared_data / DEFAULT_PATHS["newspolluted"]).read_text())
    assert sum(bool(LEAK.search(d["text"])) for r in raw for d in r["docs"]) == 453
    es = _load(shared_data, "newspolluted")
    _common_invariants(es)
    assert not any(LEAK.search(d.text) or LEAK.search(d.title or "") for d in es.documents)
    assert all(d.url is None for d in es.documents)
    # 480 records, 6 of them exact duplicates (counted in notes, not silently dropped)
    assert len(es.queries) == 474 and len(es.documents) == 474 * 4
    assert any("skipped 6" in n and "duplicate" in n for n in es.notes)
    for qid, judged in es.qrels.items():
        assert sum(judged.values()) == 1 and len(es.bad[qid]) == 3


def test_cram_nq_real(shared_data: Path) -> None:
    es = _load(shared_data, "cram-nq")
    _common_invariants(es)
    assert len(es.queries) == 1000 and len(es.documents) == 5000
    assert sum(len(b) for b in es.bad.values()) == 1000
    fakes = [d for d in es.documents if es.doc_labels[d.id]["is_misinformation"]]
    cnn = [d for d in fakes if d.text.startswith("CNN news:")]
    assert 0.6 < len(cnn) / len(fakes) < 0.9  # "~80%" in SOURCES.md, prefix kept
    assert all(d.url is None and d.source_id is None for d in es.documents)
    by_id = es.document_map()
    for qid, judged in es.qrels.items():
        answers = es.query_labels[qid]["answers"]
        for docid, gain in judged.items():
            fake = docid in es.bad[qid]
            assert gain == int(contains_answer(by_id[docid].text, answers) and not fake)


def test_evotemp_real_dates(shared_data: Path) -> None:
    es = _load(shared_data, "evotemp")
    _common_invariants(es)
    assert len(es.queries) == 499  # 500 records, one exact duplicate id
    undated = [d for d in es.documents if d.published_at is None]
    assert 0.30 < len(undated) / len(es.documents) < 0.45  # "37% undated"
    for d in undated:
        assert es.doc_labels[d.id]["date_kind"] not in ("ymd", "d-mon-y", "d.m.y")
    for d in es.documents:
        assert d.retrieved_at is None
        cred = es.doc_labels[d.id]["cred"]
        qid = es.doc_labels[d.id]["qid"]
        assert (es.qrels[qid][d.id] == 1) == (cred == "high")
        assert (d.id in es.bad[qid]) == (cred == "low")
    assert es.query_labels["1"]["q_date"] == datetime(2023, 11, 17, tzinfo=UTC)
    assert any("document without text" in n for n in es.notes)


def test_ramdocs_real(shared_data: Path) -> None:
    es = _load(shared_data, "ramdocs")
    _common_invariants(es)
    assert len(es.queries) == 500 and len(es.documents) == 2766
    types = [es.doc_labels[d.id]["type"] for d in es.documents]
    assert types.count("misinfo") == sum(len(b) for b in es.bad.values()) == 307
    assert types.count("correct") == es.summary()["relevant"]
    assert all("gold_answers" in labels for labels in es.query_labels.values())


def test_coaid_real(shared_data: Path) -> None:
    es = _load(shared_data, "coaid")
    _common_invariants(es)
    n_rows = 0
    for f in (shared_data / "coaid").rglob("News*COVID-19.csv"):
        with f.open(encoding="utf-8-sig", newline="") as fh:
            n_rows += sum(1 for _ in csv.DictReader(fh))
    assert n_rows == 5457
    skipped = sum(int(m[1]) for n in es.notes if (m := re.match(r"skipped (\d+):", n)))
    assert len(es.documents) + skipped == n_rows  # every row accounted for
    labels = {es.doc_labels[d.id]["label"] for d in es.documents}
    assert labels == {"real", "fake"}
    assert all(d.url for d in es.documents)
    assert all(d.published_at is None for d in es.documents)


# ---------------------------------------------------------------- synthetic files

_TREC_HEADER = ("topic_id,doc_id,usefulness,stance,credibility,query,description,"
                "correct_stance,text,timestamp,url\n")


def test_trec_synthetic_dedupe_and_skips(write: Write) -> None:
    path = write("t.csv", _TREC_HEADER
                 + "1,d1,2,1,1,q one,Does A help?,helpful,page one,2012-02-11T17:38:02Z,http://a/x\n"
                 + "1,d2,1,0,1,q one,Does A help?,helpful,page two,2012-02-12T00:00:00Z,http://b/y\n"
                 + "2,d1,1,1,0,q two,Does B help?,unhelpful,page one,2012-02-11T17:38:02Z,http://a/x\n"
                 + "2,d9,1,1,1,q two,Does B help?,unhelpful,same page,2012-02-11T17:38:02Z,http://b/y\n"
                 + "2,d3,1,7,1,q two,Does B help?,unhelpful,odd stance,2012-02-11T17:38:02Z,http://c/z\n"
                 + "3,d4,1,0,1,q three,Does C help?,inconclusive,page four,not a date,http://d\n")
    es = read_trec2019_hm(path)
    assert sorted(d.id for d in es.documents) == ["d1", "d2", "d4"]  # d9 merged into d2 by url
    assert es.qrels == {"1": {"d1": 2, "d2": 0}, "2": {"d1": 0, "d2": 0}, "3": {"d4": 1}}
    assert es.bad == {"1": {"d2"}, "2": {"d1", "d2"}, "3": set()}
    assert set(es.doc_labels["d1"]["judgements"]) == {"1", "2"}
    assert es.document_map()["d4"].retrieved_at is None
    assert any("skipped 1" in n and "stance" in n for n in es.notes)
    assert any("merged" in n for n in es.notes)
    assert any("timestamp" in n and "kept but changed 1" in n for n in es.notes)


def test_trec_missing_column(write: Write) -> None:
    path = write("t.csv", "topic_id,doc_id,text\n1,d1,x\n")
    with pytest.raises(DatasetError, match="missing column"):
        read_trec2019_hm(path)


def test_newspolluted_synthetic(write: Write) -> None:
    records = [
        {"id": "q", "question": "Who?", "choices": ["A", "B"], "answer": "A", "docs": [
            {"id": 0, "title": "", "text": "HIGH credibility of text:Real story.", "cred": "high"},
            {"id": 1, "title": "", "text": "Intro\nlow Credibility of text: Fake.", "cred": "low"},
            {"id": 2, "title": "", "text": "Low credibility of text: ", "cred": "low"},
            {"id": 3, "title": "", "text": "nested Low credLow credibility of text: ibility of "
             "text: x", "cred": "low"}]},
        {"id": "q", "question": "Other?", "docs": []},
        {"question": "no id"},
    ]
    es = read_newspolluted(write("n.json", json.dumps(records)))
    texts = {d.id: d.text for d in es.documents}
    assert texts == {"q/d0": "Real story.", "q/d1": "Intro\nFake.", "q/d3": "nested x"}
    assert [q for q, _ in es.queries] == ["q", "q~2"]
    assert es.qrels["q"] == {"q/d0": 1, "q/d1": 0, "q/d3": 0}
    assert any("empty after removing" in n for n in es.notes)
    assert any("without id" in n for n in es.notes)
    assert any("renamed" in n for n in es.notes)


def test_strip_leaked_label() -> None:
    assert strip_leaked_label("Medium credibility of text: a") == ("a", 1)
    assert strip_leaked_label("no label here") == ("no label here", 0)


def test_cram_synthetic_relevance_rule(write: Write) -> None:
    rec = {"id": "7", "question": "q?", "answers": ["The Beatles"], "wrong_answer": "x",
           "docs": [
               {"text": "CNN news: the Beatles did not.", "is_misinformation": True,
                "gpt_truthfulness_0_10": 2},
               {"text": "Songs by Beatles, released 1963.", "is_misinformation": False,
                "gpt_truthfulness_0_10": 9},
               {"text": "The Beatlesque sound.", "is_misinformation": False,
                "gpt_truthfulness_0_10": 5},
               {"text": "", "is_misinformation": False}]}
    es = read_cram_nq(write("c.jsonl", json.dumps(rec) + "\n\n"))
    assert es.qrels["7"] == {"7/d0": 0, "7/d1": 1, "7/d2": 0}
    assert es.bad["7"] == {"7/d0"}
    assert es.document_map()["7/d0"].text.startswith("CNN news:")
    assert any("skipped 1" in n for n in es.notes)
    with pytest.raises(DatasetError, match=r":2: not valid JSON"):
        read_cram_nq(write("bad.jsonl", json.dumps(rec) + "\n{oops\n"))


def test_parse_day_forms() -> None:
    day = datetime(2023, 9, 11, tzinfo=UTC)
    assert parse_day("2023/09/11") == (day, "ymd")
    assert parse_day("11 Sept 2023") == (day, "d-mon-y")
    assert parse_day("11.09.2023") == (day, "d.m.y")
    assert parse_day("5 days ago") == (None, "relative")
    assert parse_day("2018") == (None, "year-only")
    assert parse_day("07/02/2023") == (None, "ambiguous")
    assert parse_day(None) == (None, "missing")
    assert parse_day(float("nan")) == (None, "missing")
    assert parse_day("2023/02/30") == (None, "invalid")
    assert parse_day("18 pages") == (None, "other")


def test_coaid_synthetic(write: Write) -> None:
    header = ",type,news_url,title,content,publish_date\n"
    write("c/05-01-2020/NewsRealCOVID-19.csv",
          "\ufeff" + header + "0,article,https://www.cdc.gov/a,T,body,2/11/20\n"
          "1,article,,T2,body2,\n")
    write("c/07-01-2020/NewsRealCOVID-19.csv", header + "0,article,https://www.cdc.gov/a,T,b,\n")
    write("c/07-01-2020/NewsFakeCOVID-19.csv", header + "0,post,https://fb.com/p,Claim,,\n")
    es = read_coaid(write("c/.keep", "").parent)
    assert sorted(es.doc_labels[d.id]["label"] for d in es.documents) == ["fake", "real"]
    fake = next(d for d in es.documents if es.doc_labels[d.id]["fake"])
    assert fake.text == "Claim" and es.doc_labels[fake.id]["text_field"] == "title"
    assert any("without news_url" in n for n in es.notes)
    assert any("duplicate (news_url, label)" in n for n in es.notes)
    with pytest.raises(DatasetError, match="no News"):
        read_coaid(write("empty/x.txt", "").parent)


def test_registry_and_errors(write: Write, tmp_path: Path) -> None:
    assert set(DATASETS) == set(DEFAULT_PATHS) | {"demo"}  # demo: packaged, no shared path
    with pytest.raises(DatasetError, match=r"known: \['coaid'"):
        load_dataset("msmarco", tmp_path)
    with pytest.raises(DatasetError, match="not found"):
        load_dataset("evotemp", tmp_path / "missing.json")
    with pytest.raises(DatasetError, match="JSON list"):
        load_dataset("evotemp", write("e.json", json.dumps({"id": 1})))
