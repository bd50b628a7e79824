"""``credrank advise --index DIR``: a profile derived from an index's payloads
(credrank.advise.from_index), on synthetic rows and as a process."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_inprocess import run_cli
from credrank.advise import advise_pool
from credrank.advise.from_index import (
    MIN_SHARE,
    NOT_DERIVED,
    derive_pool,
    index_facts,
    profile_from_rows,
)


def _doc(i: int, *, stype: str = "unknown", host: str | None = "x.com",
         source_id: str | None = None, **dates: str) -> dict[str, Any]:
    return {"doc_id": f"d{i}", "url": f"https://{host}/{i}" if host else None, "host": host,
            "source_type": stype, "source_id": source_id, **dates}


def _values(rows: list[dict[str, Any]]) -> dict[str, Any]:
    pool, derived = derive_pool(index_facts(rows))
    assert pool.stated == {d.key for d in derived}
    return {d.key: d.value for d in derived}


def test_empty_index_derives_absent_without_dividing_by_zero() -> None:
    facts = index_facts([])
    assert facts.documents == 0 and facts.share(0) == 0.0
    assert _values([]) == {"provenance": False, "dates": False, "sources": 0,
                           "stable_source_ids": False}
    assert facts.to_dict()["documents_per_identity_mean"] == 0.0


def test_provenance_needs_half_typed_and_two_types() -> None:
    two_types = [_doc(0, stype="government"), _doc(1, stype="blog"), _doc(2)]
    assert _values(two_types)["provenance"] is True
    one_type = [_doc(0, stype="government"), _doc(1, stype="government"), _doc(2)]
    assert _values(one_type)["provenance"] is False  # one type distinguishes nothing
    mostly_unknown = [_doc(0, stype="government"), _doc(1, stype="blog"), _doc(2), _doc(3),
                      _doc(4)]
    assert _values(mostly_unknown)["provenance"] is False  # 2 of 5 < MIN_SHARE
    assert MIN_SHARE == 0.5


def test_dates_are_evidence_dates_only() -> None:
    crawled = [_doc(i, retrieved_at="2012-02-11T17:38:02+00:00",
                    modified_at="2012-01-01T00:00:00+00:00") for i in range(4)]
    facts = index_facts(crawled)
    assert facts.with_date["retrieved_at"] == 4 and facts.with_evidence_date == 0
    assert _values(crawled)["dates"] is False
    published = [_doc(0, published_at="2020-01-01T00:00:00+00:00"),
                 _doc(1, observed_at="2020-01-01T00:00:00+00:00"), _doc(2), _doc(3)]
    assert _values(published)["dates"] is True  # 2 of 4 = MIN_SHARE


def test_identity_is_source_id_when_carried_else_host() -> None:
    by_host = [_doc(0, host="a.org"), _doc(1, host="www.a.org"), _doc(2, host="b.org"),
               _doc(3, host=None)]
    facts = index_facts(by_host)
    assert facts.identity == "host" and facts.identities == 2  # www. is the same host
    assert facts.in_repeated_identity == 2
    # one site, as provenance types it: its front ends (m., amp., www2.) are that site (only
    # www. was taken off); another subdomain is another host
    fronts = [_doc(0, host="news.b.co.uk", registered_domain="b.co.uk"),
              _doc(1, host="m.news.b.co.uk"), _doc(2, host="amp.news.b.co.uk"),
              _doc(3, host="www2.news.b.co.uk"), _doc(4, host="blog.b.co.uk")]
    facts = index_facts(fronts)
    assert facts.identities == 2 and facts.documents_per_identity_max == 4
    assert _values(by_host) == {"provenance": False, "dates": False, "sources": 2,
                                "stable_source_ids": True}
    by_sid = [_doc(i, source_id=f"s{i % 2}") for i in range(4)] + [_doc(4), _doc(5)]
    facts = index_facts(by_sid)
    assert facts.identity == "source_id" and facts.identities == 2
    assert facts.with_source_id == 4 and facts.documents_per_identity_max == 2
    singletons = [_doc(i, host=f"h{i}.org") for i in range(4)]
    values = _values(singletons)
    assert values["sources"] == 4 and values["stable_source_ids"] is False


def test_scores_are_counted_not_mapped() -> None:
    rows = [{**_doc(0), "machine_text": 0.3, "domain_score": 0.8},
            {**_doc(1), "credibility": 0.7}]
    facts = index_facts(rows)
    assert (facts.with_machine_text, facts.with_domain_score) == (1, 1)
    assert facts.with_credibility == 1  # stored learned scores were not counted
    pool, _ = derive_pool(facts)
    assert pool.document_scorer is False and "document_scorer" not in pool.stated
    assert "document_scorer" in NOT_DERIVED and "labelled_pages" in NOT_DERIVED


def test_derived_pool_feeds_the_advice() -> None:
    rows = [_doc(i, stype=("government", "blog")[i % 2], host=f"h{i % 3}.org",
                 published_at="2020-01-01T00:00:00+00:00") for i in range(6)]
    profile, facts, derived = profile_from_rows(rows, "index test")
    (pool,) = profile.pools
    advice = advise_pool(pool)
    assert advice.feasible == ("source_type_priors",)
    ra_rag = next(m for m in advice.methods if m.method.id == "ra_rag")
    missing = {m.key: m.stated for m in ra_rag.missing}
    assert missing == {"calibration_questions": False}  # not derivable: "not stated"
    freshness = next(m for m in advice.methods if m.method.id == "freshness")
    assert freshness.feasible
    assert facts.identities == 3 and pool.sources == 3
    assert all(d.measured and d.rule for d in derived)


# ---------------------------------------------------------------- the command

@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("advise-index")
    corpus = root / "corpus.jsonl"
    hosts = ("www.cdc.gov", "blog.example.org", "clinic-example.com")
    records = [{"id": f"d{i}", "text": f"page {i} on influenza treatment",
                "url": f"https://{hosts[i % 3]}/{i}",
                "published_at": "2021-05-01T00:00:00Z"} for i in range(6)]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    where = root / "index"
    done = run_cli("index", str(corpus), "--index", str(where), "--embedder", "hashing")
    assert done.returncode == 0, done.stderr
    return where


def test_cli_index_json(index_dir: Path) -> None:
    done = run_cli("advise", "--index", str(index_dir), "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["credrank_advise"] == 1
    derived = doc["derived"]
    assert derived["index"] == str(index_dir)
    assert derived["facts"]["documents"] == 6 and derived["facts"]["typed"] == 4
    assert derived["facts"]["with_evidence_date"] == 6
    fields = {f["key"]: f["value"] for f in derived["fields"]}
    assert fields == {"provenance": True, "dates": True, "sources": 3,
                      "stable_source_ids": True}
    assert {f["key"] for f in derived["not_derived"]} == set(NOT_DERIVED)
    (pool,) = doc["pools"]
    assert "source_type_priors" in pool["feasible"]


def test_cli_index_text(index_dir: Path) -> None:
    done = run_cli("advise", "--index", str(index_dir))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "derived from the index (6 documents):" in out
    assert "provenance = true: 4 of 6 documents (66.7%) typed by their URL" in out
    assert "not derived (state them in a profile file to use them):" in out


def test_cli_profile_and_index_exclude_each_other(index_dir: Path, tmp_path: Path) -> None:
    both = run_cli("advise", "marketplace", "--index", str(index_dir))
    assert both.returncode == 2
    assert both.stderr.startswith("error:")
    assert "PROFILE" in both.stderr and "--index" in both.stderr
    neither = run_cli("advise")
    assert neither.returncode == 2 and "--index" in neither.stderr
    missing = run_cli("advise", "--index", str(tmp_path / "absent"))
    assert missing.returncode == 2 and "--index" in missing.stderr
    # the profile file still works alone
    alone = run_cli("advise", "marketplace", "--json")
    assert alone.returncode == 0 and "derived" not in json.loads(alone.stdout)


def test_trusted_declared_types_are_not_provenance() -> None:
    """Types declared and trusted (``--trust-declared``, no URLs) were counted as "typed by
    their URL": ``provenance = true: 10 of 10 … 0 of 10 have a URL``."""
    kinds = ("government", "blog")
    declared = [{"doc_id": f"d{i}", "url": None, "host": None, "source_type": kinds[i % 2],
                 "url_source_type": "unknown", "provenance_rule": "declared"}
                for i in range(10)]
    facts = index_facts(declared)
    assert (facts.typed, facts.declared, facts.distinct_types) == (0, 10, 0)
    values = _values(declared)
    assert values["provenance"] is False
    _, derived = derive_pool(facts)
    measured = next(d.measured for d in derived if d.key == "provenance")
    assert measured.startswith("0 of 10 documents (0.0%) typed by their URL")
    assert "10 of 10 documents (100.0%) typed by a trusted declared type (not provenance" in \
        measured
    assert facts.to_dict()["typed_by_declaration"] == 10
    # a trusted declaration over a URL that types the page too: the URL's type counts
    urls = [{**row, "url": f"https://h{i}.org/", "host": f"h{i}.org",
             "url_source_type": kinds[i % 2]} for i, row in enumerate(declared)]
    assert index_facts(urls).typed == 10 and _values(urls)["provenance"] is True
    # rows without the URL's own type (made by hand): a declared rule never counts
    legacy = [{k: v for k, v in row.items() if k != "url_source_type"} for row in declared]
    assert index_facts(legacy).typed == 0


def test_cli_index_of_declared_types(tmp_path: Path) -> None:
    corpus = tmp_path / "declared.jsonl"
    kinds = ("government", "blog", "peer_reviewed")
    corpus.write_text("".join(json.dumps({"id": f"x{i}", "text": f"page {i} on flu",
                                          "source_type": kinds[i % 3]}) + "\n"
                              for i in range(6)), encoding="utf-8")
    where = tmp_path / "index"
    done = run_cli("index", str(corpus), "--index", str(where), "--embedder", "hashing",
                   "--trust-declared")
    assert done.returncode == 0, done.stderr
    done = run_cli("advise", "--index", str(where))
    assert done.returncode == 0, done.stderr
    assert "provenance = false: 0 of 6 documents (0.0%) typed by their URL" in done.stdout
    assert "6 of 6 documents (100.0%) typed by a trusted declared type" in done.stdout
    doc = json.loads(run_cli("advise", "--index", str(where), "--json").stdout)
    facts = doc["derived"]["facts"]
    assert (facts["typed"], facts["typed_by_declaration"]) == (0, 6)
    assert facts["by_source_type"] == {"blog": 2, "government": 2, "peer_reviewed": 2}
