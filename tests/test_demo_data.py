"""Integrity of the packaged synthetic demo corpus (``src/credrank/data/demo``).

The checks read the files directly and hold their own host → source-type table (the one the
demo's design uses), so they do not depend on ``credrank.provenance``. One extra check feeds
the files through ``credrank.documents`` to confirm that the project's own readers accept every
record.
"""

from __future__ import annotations

import csv
import json
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"

N_DOCS, N_QUERIES, N_ADVERSARIAL = 120, 10, 10
DATE_FIELDS = ("observed_at", "verified_at", "published_at", "modified_at", "retrieved_at")
ALLOWED_FIELDS = {"id", "title", "text", "url", "source_id", "source_type", "cites",
                  *DATE_FIELDS}
SOURCE_TYPES = ("peer_reviewed", "government", "established_news", "blog", "user_generated",
                "ai_generated")
LOW_CREDIBILITY = {"blog", "user_generated", "ai_generated"}
HOSTS = {
    "peer_reviewed": {"pubmed.ncbi.nlm.nih.gov", "www.nejm.org", "www.thelancet.com",
                      "www.bmj.com", "jamanetwork.com", "www.cochranelibrary.com",
                      "journals.plos.org"},
    "government": {"www.cdc.gov", "www.nih.gov", "www.who.int", "www.nhs.uk", "www.fda.gov",
                   "medlineplus.gov"},
    "established_news": {"www.reuters.com", "apnews.com", "www.bbc.com", "www.nytimes.com",
                         "www.theguardian.com", "www.npr.org"},
    "user_generated": {"www.reddit.com", "www.quora.com", "twitter.com"},
}
BLOG_SUFFIXES = (".blogspot.com", ".wordpress.com", ".substack.com")
SPOOFED_AUTHORITY = ("According to the CDC", "CNN news:", "Reuters Health:")


# --------------------------------------------------------------------------- loaders

@pytest.fixture(scope="module")
def docs() -> list[dict[str, Any]]:
    lines = (DEMO / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    out = []
    for n, line in enumerate(lines, 1):
        assert line.strip(), f"corpus.jsonl:{n}: blank line"
        rec = json.loads(line)
        assert isinstance(rec, dict), f"corpus.jsonl:{n}: expected a JSON object"
        out.append(rec)
    return out


@pytest.fixture(scope="module")
def by_id(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["id"]: d for d in docs}


@pytest.fixture(scope="module")
def queries() -> dict[str, str]:
    recs = [json.loads(x) for x in
            (DEMO / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert all(set(r) == {"id", "text"} for r in recs)
    return {r["id"]: r["text"] for r in recs}


@pytest.fixture(scope="module")
def qrels() -> list[tuple[str, str, str, int]]:
    rows = []
    for n, line in enumerate((DEMO / "qrels.tsv").read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split()
        assert len(parts) == 4, f"qrels.tsv:{n}: expected 'qid 0 docid rel', got {line!r}"
        rows.append((parts[0], parts[1], parts[2], int(parts[3])))
    return rows


@pytest.fixture(scope="module")
def adversarial() -> list[tuple[str, str]]:
    lines = (DEMO / "adversarial.tsv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "doc_id\tquery_id"
    rows = [tuple(x.split("\t")) for x in lines[1:]]
    assert all(len(r) == 2 for r in rows)
    return rows  # type: ignore[return-value]


@pytest.fixture(scope="module")
def ai_domains() -> dict[str, str]:
    with (DEMO / "domains.csv").open(encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == ["domain", "source_type"]
        return {row["domain"]: row["source_type"] for row in reader}


def url_type(url: str, ai_domains: dict[str, str]) -> str:
    """The source type a URL's host implies under the demo's design (host only)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    for kind, hosts in HOSTS.items():
        if host in hosts:
            return kind
    if host.endswith(BLOG_SUFFIXES) or (host == "medium.com" and parts.path.startswith("/@")):
        return "blog"
    if host.endswith(".example") and ai_domains.get(host) == "ai_generated":
        return "ai_generated"
    raise AssertionError(f"host {host!r} of {url!r} is not one of the demo's host kinds")


def parse_date(value: str) -> datetime:
    dt = datetime.fromisoformat(value)
    assert dt.tzinfo is not None and dt.utcoffset() is not None, f"{value!r}: no timezone"
    return dt


# --------------------------------------------------------------------------- corpus

def test_counts(docs: list[dict[str, Any]], queries: dict[str, str],
                adversarial: list[tuple[str, str]]) -> None:
    assert len(docs) == N_DOCS
    assert len(queries) == N_QUERIES
    assert len(adversarial) == N_ADVERSARIAL


def test_ids_unique(docs: list[dict[str, Any]], queries: dict[str, str]) -> None:
    ids = [d["id"] for d in docs]
    assert len(set(ids)) == len(ids)
    assert all(isinstance(i, str) and i for i in ids)
    qids = [json.loads(x)["id"] for x in
            (DEMO / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(set(qids)) == len(qids) == len(queries)


def test_fields_reveal_no_label(docs: list[dict[str, Any]]) -> None:
    for d in docs:
        assert set(d) <= ALLOWED_FIELDS, f"{d['id']}: unexpected fields {set(d) - ALLOWED_FIELDS}"
        assert isinstance(d["text"], str)
        assert 40 <= len(d["text"].split()) <= 120, f"{d['id']}: text length out of 40-120 words"
        assert d.get("title") is None or (isinstance(d["title"], str) and d["title"].strip())


def test_every_doc_has_a_url_of_a_known_host_kind(docs: list[dict[str, Any]],
                                                 ai_domains: dict[str, str]) -> None:
    counts = Counter()
    for d in docs:
        url = d.get("url")
        assert isinstance(url, str) and url.startswith("https://"), f"{d['id']}: bad url {url!r}"
        counts[url_type(url, ai_domains)] += 1
    assert set(counts) == set(SOURCE_TYPES)
    assert all(counts[t] >= 10 for t in SOURCE_TYPES), counts


def test_domains_table_covers_every_ai_farm_host(docs: list[dict[str, Any]],
                                                 ai_domains: dict[str, str]) -> None:
    assert set(ai_domains.values()) == {"ai_generated"}
    assert all(dom.endswith(".example") for dom in ai_domains)
    hosts = {urlsplit(d["url"]).hostname for d in docs}
    farm_hosts = {h for h in hosts if h and h.endswith(".example")}
    assert farm_hosts == set(ai_domains)
    assert 4 <= len(farm_hosts) <= 6


def test_declared_types_all_conflict_with_the_url(docs: list[dict[str, Any]],
                                                  ai_domains: dict[str, str]) -> None:
    declared = [d for d in docs if "source_type" in d]
    assert len(declared) == 3
    for d in declared:
        assert d["source_type"] in SOURCE_TYPES
        assert d["source_type"] != url_type(d["url"], ai_domains), d["id"]


def test_dates_are_iso_8601_with_timezone_and_ordered(docs: list[dict[str, Any]]) -> None:
    undated = 0
    for d in docs:
        dates = {f: parse_date(d[f]) for f in DATE_FIELDS if f in d}
        assert "retrieved_at" in dates, f"{d['id']}: no retrieved_at"
        undated += "published_at" not in dates
        chain = [dates[f] for f in ("observed_at", "published_at", "modified_at",
                                    "retrieved_at") if f in dates]
        assert chain == sorted(chain), f"{d['id']}: dates out of order"
    assert 1 <= undated <= 10
    assert any("observed_at" in d for d in docs)
    assert any("modified_at" in d for d in docs)


def test_cites_point_to_other_documents(docs: list[dict[str, Any]],
                                        by_id: dict[str, dict[str, Any]]) -> None:
    for d in docs:
        cites = d.get("cites", [])
        assert isinstance(cites, list)
        assert all(c in by_id and c != d["id"] for c in cites), d["id"]


# --------------------------------------------------------------------------- judgements

def test_qrels_ids_exist_and_grades_are_valid(qrels: list[tuple[str, str, str, int]],
                                              by_id: dict[str, dict[str, Any]],
                                              queries: dict[str, str]) -> None:
    pairs = [(q, d) for q, _, d, _ in qrels]
    assert len(set(pairs)) == len(pairs), "a (query, doc) pair is judged twice"
    for q, it, d, rel in qrels:
        assert q in queries and d in by_id and it == "0"
        assert rel in (0, 1, 2)


def test_every_query_has_relevant_documents(qrels: list[tuple[str, str, str, int]],
                                            queries: dict[str, str]) -> None:
    relevant = Counter(q for q, _, _, rel in qrels if rel == 2)
    for q in queries:
        assert relevant[q] >= 1, f"{q}: no relevant document"


def test_adversarial_documents(adversarial: list[tuple[str, str]],
                               qrels: list[tuple[str, str, str, int]],
                               by_id: dict[str, dict[str, Any]], queries: dict[str, str],
                               ai_domains: dict[str, str]) -> None:
    judged = {(q, d): rel for q, _, d, rel in qrels}
    assert len({d for d, _ in adversarial}) == N_ADVERSARIAL
    assert sorted(q for _, q in adversarial) == sorted(queries)  # one per query
    for d, q in adversarial:
        assert d in by_id and q in queries
        assert judged.get((q, d)) == 0, f"{d}: adversarial but not judged 0 for {q}"
        assert url_type(by_id[d]["url"], ai_domains) in LOW_CREDIBILITY, d
    spoofed = [d for d, _ in adversarial if by_id[d]["text"].startswith(SPOOFED_AUTHORITY)]
    assert len(spoofed) >= 2


def test_project_readers_accept_the_files() -> None:
    corpus = pytest.importorskip("credrank.documents")
    result = corpus.read_corpus(DEMO / "corpus.jsonl")
    assert result.rejects == [], [r.message for r in result.rejects[:5]]
    assert len(result.documents) == N_DOCS
    assert len(corpus.read_queries(DEMO / "queries.jsonl")) == N_QUERIES
    assert sum(len(v) for v in corpus.read_qrels(DEMO / "qrels.tsv").values()) > N_QUERIES


def test_readme_says_synthetic() -> None:
    head = (DEMO / "README.md").read_text(encoding="utf-8")[:600]
    assert "SYNTHETIC TEST MATERIAL" in head
