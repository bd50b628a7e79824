"""The store-agnostic reranker: candidates retrieved elsewhere, ranked as ``credrank search``."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from credrank.demo_corpus import demo_dir
from credrank.documents import iter_documents, read_queries
from credrank.index.embed import get_embedder
from credrank.provenance import SourceTyper
from credrank.rerank import CandidateError, check_candidates, rerank, rerank_hits
from credrank.searcher import Searcher

EMB = get_embedder("hashing")


def _records(n: int = 4) -> list[dict]:
    urls = ["https://www.cdc.gov/a", "https://medium.com/@x/y", None, "https://nih.gov/b"]
    return [{"id": f"d{i}", "text": f"vitamin d and covid study number {i}", "url": urls[i % 4],
             "metadata": {"rank_in_my_store": i, "nested": {"k": [i]}}} for i in range(n)]


def test_same_ranking_as_search_on_the_demo_corpus(demo_index_hashing):
    """The pool of 15 from the index, reranked here, orders as the index search does."""
    docs = {d.id: d for d in iter_documents(demo_dir() / "corpus.jsonl")}
    with Searcher.open(demo_index_hashing, tables=[demo_dir() / "domains.csv"]) as searcher:
        for q in read_queries(demo_dir() / "queries.jsonl"):
            for pushdown in (None, False):
                expected = searcher.search(q.text, Searcher.spec(top_k=5, pushdown=pushdown))
                pool = searcher.search(q.text, Searcher.spec(top_k=15, fetch_k=15,
                                                             priors="none"))
                records = [{"id": i, "text": docs[i].text, "title": docs[i].title,
                            "url": docs[i].url} for i in pool.doc_ids]
                got = searcher.rerank(q.text, records, Searcher.spec(top_k=5))
                assert list(got.doc_ids) == list(expected.doc_ids), q.id
                np.testing.assert_allclose(got.score, expected.score, atol=1e-6)
                assert list(got.column("source_type")) == list(expected.column("source_type"))


def test_a_blank_query_is_refused():
    records = [{"id": "a", "text": "vitamin d", "url": "https://nih.gov/a", "score": 0.5}]
    with pytest.raises(ValueError, match=r"^query: expected non-empty text, got ' '"):
        rerank(" ", records, "hashing")


def test_metadata_returned_untouched_and_inputs_not_modified():
    records = _records()
    before = copy.deepcopy(records)
    result = rerank("vitamin d covid", records, EMB, Searcher.spec(top_k=4))
    hits = rerank_hits(result)
    assert records == before
    by_id = {r["id"]: r for r in records}
    for hit in hits:
        assert hit["metadata"] is by_id[hit["doc_id"]]["metadata"]
        assert hit["client_score"] is None
        assert set(hit["score_breakdown"]) == {"retrieval_score", "prior", "final"}


def test_the_spec_is_the_fourth_parameter():
    records = _records()
    by_position = rerank("vitamin d covid", records, EMB, Searcher.spec(top_k=3))
    by_name = rerank("vitamin d covid", records, EMB, spec=Searcher.spec(top_k=3))
    as_data = rerank("vitamin d covid", records, EMB, Searcher.spec(top_k=3).to_dict())
    assert len(by_position) == 3
    assert list(by_position.doc_ids) == list(by_name.doc_ids) == list(as_data.doc_ids)
    with pytest.raises(TypeError, match="settings"):  # the keyword of the removed settings
        rerank("vitamin d covid", records, EMB, settings=Searcher.spec(top_k=3))
    # a spec passed third was "AttributeError: 'dict' object has no attribute 'dim'"
    with pytest.raises(TypeError, match=r"^embedder: expected an embedder name .* got dict; "
                                        r"the spec is the fourth argument"):
        rerank("vitamin d covid", records, {"top_k": 3})


def test_source_type_from_url_never_from_metadata_claims():
    records = _records()
    records[2]["metadata"] = {"source_type": "peer_reviewed"}  # a claim, not provenance
    hits = {h["doc_id"]: h for h in rerank_hits(rerank("q", records, EMB))}
    assert hits["d2"]["source_type"] == "unknown"
    assert hits["d0"]["source_type"] == "government"


def test_given_vectors_are_used_not_reembedded():
    """``retrieval="cosine"`` takes a record's vector as the embedder's (this API's contract),
    unchecked: vectors unrelated to their text decide. (``auto`` checks them first:
    tests/test_retrieval_auto.py.)"""
    records = _records(3)
    q = EMB.embed(["vitamin d covid"])[0]
    records[1]["vector"] = list(map(float, q))        # identical to the query: cosine 1
    records[2]["vector"] = list(map(float, -q))       # opposite: cosine -1
    result = rerank("vitamin d covid", records, EMB, Searcher.spec(top_k=3, priors="none"),
                    retrieval="cosine")
    rs = dict(zip(result.doc_ids, result.retrieval_score, strict=True))
    assert rs["d1"] == pytest.approx(1.0)
    assert rs["d2"] == pytest.approx(-1.0)
    assert result.info["retrieval"]["resolved"] == "cosine"     # d0 was embedded
    assert result.info["retrieval"]["embedded"] == 1
    zero = _records(1)
    zero[0]["vector"] = [0.0] * EMB.dim                # zero-norm policy: cosine 0
    assert rerank("q", zero, EMB, retrieval="cosine").retrieval_score[0] == 0.0


def test_retrieval_given_uses_client_scores():
    records = _records(3)
    for r, s in zip(records, (3.0, 9.0, 1.0), strict=True):
        r["score"] = s
    result = rerank("q", records, EMB, Searcher.spec(top_k=3, priors="none"),
                    retrieval="given")
    assert list(result.doc_ids) == ["d1", "d0", "d2"]
    assert list(result.retrieval_score) == [9.0, 3.0, 1.0]
    del records[0]["score"]
    with pytest.raises(CandidateError, match=r"candidates\[0\]\.score: required"):
        rerank("q", records, EMB, retrieval="given")


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda rs: rs[1].update(id=""), r"candidates\[1\]\.id: expected a non-empty string"),
    (lambda rs: rs[2].update(id="d0"), r"candidates\[2\]\.id: 'd0' repeats candidates\[0\]"),
    (lambda rs: rs[0].update(vectors=[1.0]), r"candidates\[0\]: unknown field\(s\) 'vectors'"),
    (lambda rs: rs[3].update(vector=[1.0, 2.0]), r"candidates\[3\]\.vector: expected 256"),
    (lambda rs: rs[0].update(vector=[float("nan")] * 256), r"finite numbers"),
    (lambda rs: rs[1].update(score=float("inf")), r"candidates\[1\]\.score: expected a finite"),
    (lambda rs: rs[1].update(score=True), r"candidates\[1\]\.score"),
    # finite as float64, infinite in the float32 vectors are kept in (was NaN deep inside)
    (lambda rs: rs[2].update(vector=[0.1] * 255 + [1e39]),
     r"candidates\[2\]\.vector: expected finite float32 numbers \(magnitude at most "
     r"3\.403e\+38\), got 1e\+39 at \[255\]"),
    (lambda rs: rs[1].update(score=10**400),
     r"candidates\[1\]\.score: expected a finite number, got an integer of about 401 digits"),
    (lambda rs: rs[1].update(score="0.5"), r"candidates\[1\]\.score: expected a finite number, "
                                           r"got '0\.5'"),
    (lambda rs: rs[0].update(url=5), r"candidates\[0\]\.url: expected a string"),
    (lambda rs: rs[0].update(metadata=[1]), r"candidates\[0\]\.metadata: expected an object"),
    (lambda rs: rs.append("x"), r"candidates\[4\]: expected an object"),
])
def test_bad_candidates_named(mutate, message):
    records = _records()
    mutate(records)
    with pytest.raises(CandidateError, match=message):
        check_candidates(records, dim=EMB.dim)


def test_a_passage_without_text_is_refused_where_it_must_be_embedded():
    """``cosine`` refuses it when the records are checked; ``auto`` only when it embeds (every
    passage with a score: nothing is embedded, so no text is needed, as under ``given``)."""
    records = _records()
    records[0]["text"] = None
    with pytest.raises(CandidateError, match=r"^candidates\[0\]: expected a non-empty text or "
                                             r"a vector to embed, got neither \(retrieval="
                                             r"'cosine'"):
        check_candidates(records, dim=EMB.dim, retrieval="cosine")
    assert check_candidates(records, dim=EMB.dim)[0]["text"] is None  # auto: not yet
    with pytest.raises(CandidateError, match=r"^candidates\[0\]: expected a non-empty text or "
                                             r"a vector to embed, got neither \(retrieval="
                                             r"'auto' embeds the passages: not every "
                                             r"candidate has a non-negative score\)"):
        rerank("vitamin d", records, EMB)
    scored = [{**r, "score": 1.0 + i} for i, r in enumerate(records)]
    for retrieval in ("auto", "given"):
        result = rerank("vitamin d", scored, EMB, retrieval=retrieval)
        assert result.info["retrieval"]["resolved"] == "given"
        assert sorted(result.doc_ids) == sorted(r["id"] for r in records)
    # a stage that reads vectors must embed it: refused then, saying why
    with pytest.raises(CandidateError, match=r"^candidates\[0\]: .*the pipeline reads vectors"):
        rerank("vitamin d", scored, EMB,
               Searcher.spec(select="mmr", select_params={"diversity": 0.5}))


def test_numpy_scores_are_numbers_and_a_huge_query_vector_is_named():
    # a numpy score was refused as "expected a finite number, got np.float32(0.7)"
    records = _records(3)
    for r, s in zip(records, (np.float32(0.25), np.int64(2), np.float64(0.5)), strict=True):
        r["score"] = s
    result = rerank("q", records, EMB, Searcher.spec(top_k=3, priors="none"),
                    retrieval="given")
    assert list(result.retrieval_score) == [2.0, 0.5, 0.25]
    with pytest.raises(CandidateError, match=r"^query_vector: expected finite float32 numbers"):
        rerank("q", _records(), EMB, query_vector=[1e300] * EMB.dim)


def test_candidates_must_be_a_list():
    with pytest.raises(CandidateError, match="expected a list of objects, got dict"):
        check_candidates({"id": "x"})


def test_empty_pool_gives_empty_result():
    result = rerank("q", [], EMB)
    assert len(result) == 0
    # info.retrieval is said for every call (it was missing: `info: {}`)
    assert result.info["retrieval"]["resolved"] == "none"
    assert result.info["retrieval"]["requested"] == "auto"
    assert result.info["retrieval"]["embedded"] == 0


def test_domain_tables_type_hosts_like_indexing():
    typer = SourceTyper([demo_dir() / "domains.csv"])
    docs = [d for d in iter_documents(demo_dir() / "corpus.jsonl") if d.url][:20]
    records = [{"id": d.id, "text": d.text, "url": d.url} for d in docs]
    result = rerank("q", records, EMB, Searcher.spec(top_k=20), typer)
    got = dict(zip(result.doc_ids, result.column("source_type"), strict=True))
    assert got == {d.id: typer.classify(d.url).source_type for d in docs}


def test_query_vector_given_is_used_instead_of_embedding_the_query():
    records = _records(4)
    q = EMB.embed(["vitamin d covid"])[0]
    embedded = rerank("vitamin d covid", records, EMB, Searcher.spec(top_k=4))
    given = rerank("vitamin d covid", records, EMB, Searcher.spec(top_k=4),
                   query_vector=list(map(float, q)))
    assert list(given.doc_ids) == list(embedded.doc_ids)
    np.testing.assert_allclose(given.retrieval_score, embedded.retrieval_score, atol=1e-6)
    other = EMB.embed(["completely different words"])[0]
    moved = rerank("vitamin d covid", records, EMB, Searcher.spec(top_k=4, priors="none"),
                   query_vector=list(map(float, other)))
    assert not np.allclose(moved.retrieval_score, embedded.retrieval_score)
    with pytest.raises(CandidateError, match=r"query_vector: expected 256 numbers"):
        rerank("q", records, EMB, query_vector=[1.0, 2.0])


def test_base64_float32_vectors_equal_number_lists():
    import base64

    records = _records(3)
    q = np.asarray(EMB.embed(["vitamin d covid"])[0], dtype=np.float32)
    vecs = np.asarray(EMB.embed([r["text"] for r in records]), dtype=np.float32)
    as_lists = [{**r, "vector": v.tolist()} for r, v in zip(records, vecs, strict=True)]
    as_b64 = [{**r, "vector": base64.b64encode(v.astype("<f4").tobytes()).decode()}
              for r, v in zip(records, vecs, strict=True)]
    a = rerank("x", as_lists, EMB, query_vector=q.tolist())
    b = rerank("x", as_b64, EMB, query_vector=base64.b64encode(q.astype("<f4").tobytes()).decode())
    assert list(a.doc_ids) == list(b.doc_ids)
    np.testing.assert_array_equal(a.retrieval_score, b.retrieval_score)
    bad = [{**records[0], "vector": "not base64!"}]
    with pytest.raises(CandidateError, match=r"candidates\[0\]\.vector: expected base64"):
        rerank("x", bad, EMB)
    short = [{**records[0], "vector": base64.b64encode(b"\0\0\0\0\0").decode()}]
    with pytest.raises(CandidateError, match=r"4 bytes each"):
        rerank("x", short, EMB)
    nan = [{**records[0], "vector": base64.b64encode(
        np.full(EMB.dim, np.nan, dtype="<f4").tobytes()).decode()}]
    with pytest.raises(CandidateError, match="finite"):
        rerank("x", nan, EMB)


def test_rerank_json_echo_pins_the_clock_it_read(demo_index_hashing):
    # the rerank document echoed "now": null for a freshness stage that read the clock, so a
    # replay later ranked with another "now" (search's echo pinned it; rerank's did not)
    records = [{"id": "a", "text": "vitamin d", "url": "https://www.cdc.gov/a", "score": 1.0,
                "published_at": "2020-01-01"}]
    with Searcher.open(demo_index_hashing) as searcher:
        doc = searcher.rerank_json("vitamin d", records, Searcher.spec(freshness="half_life=1y"))
    stage = next(s for s in doc["pipeline"]["stages"] if s["stage"] == "freshness")
    assert stage["now"] is not None
    assert doc["settings"]["freshness"]["now"] == stage["now"] == doc["info"]["freshness"]["now"]


def test_a_score_beyond_1e100_is_refused_naming_the_candidate():
    """Scores near the largest float passed the check, and the stages' sums of them were
    infinite (a coverage objective of inf, a utility loss of NaN)."""
    records = [{"id": "a", "text": "vitamin d", "score": 1.7e308}]
    with pytest.raises(CandidateError, match=r"candidates\[0\]\.score: expected a number of "
                                             r"magnitude at most 1e\+100"):
        check_candidates(records)
    assert check_candidates([{"id": "a", "text": "x", "score": -1e100}])[0]["score"] == -1e100
