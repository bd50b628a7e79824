"""The credibility-annotated context (chapter 35.4) over candidates retrieved elsewhere:
``Searcher.rerank_context`` and ``credrank.rerank_context`` (credrank.context.given)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import credrank
from credrank.context.build import search_context
from credrank.demo_corpus import demo_dir
from credrank.documents import read_queries
from credrank.index.embed import get_embedder
from credrank.rerank import AutoRetrieval, EmbeddingFallbackWarning
from credrank.searcher import Searcher, rerank_context

EMB = get_embedder("hashing")
CORPUS = {r["id"]: r for r in map(json.loads, (demo_dir() / "corpus.jsonl").open())}
#: the fields a candidate carries of an indexed record (cites: ids, which rerank resolves not)
FIELDS = ("id", "title", "text", "url", "published_at", "observed_at", "modified_at",
          "retrieved_at", "source_id")
NOW = "2025-06-01"


def _candidates(ids: list[str]) -> list[dict]:
    return [{k: CORPUS[i][k] for k in FIELDS if k in CORPUS[i]} for i in ids]


def _tiers(doc) -> list[tuple[str, int]]:
    return [(p.doc_id, p.tier) for p in doc.passages]


@pytest.mark.parametrize("ranked_fresh", [True, False])
@pytest.mark.parametrize("undated", ["neutral", "exclude", "penalty:0.5"])
def test_the_context_of_a_pool_is_the_context_of_the_same_search(demo_index_hashing, undated,
                                                                 ranked_fresh):
    """The index's pool of 15, handed over as candidates, gives the context the index's own
    search gives (same passages, order, tiers and excluded), for every undated policy, with
    and without a freshness stage in the ranking (without it, the neutral median is the whole
    pool's, ranked once more): the ranking is the same (test_rerank) and so is the tiering,
    refills included."""
    fresh = {"freshness": "half_life=365d"} if ranked_fresh else {}
    spec = Searcher.spec(top_k=5, fetch_k=15, **fresh)
    options = {"now": NOW, "half_life": "365d", "undated": undated}
    seen = set()
    with Searcher.open(demo_index_hashing, tables=[demo_dir() / "domains.csv"]) as searcher:
        for q in read_queries(demo_dir() / "queries.jsonl"):
            expected = search_context(searcher, q.text, spec, **options)
            pool = searcher.search(q.text, Searcher.spec(top_k=15, fetch_k=15, priors="none"),
                                   text="none")
            got = searcher.rerank_context(q.text, _candidates(list(pool.doc_ids)),
                                          Searcher.spec(top_k=5, **fresh), **options)
            seen.add(expected.used["undated_weight"]["from"])
            seen.add(bool(expected.excluded))
            assert got.used == expected.used, q.id
            assert _tiers(got) == _tiers(expected), q.id
            assert [e.doc_id for e in got.excluded] == [e.doc_id for e in expected.excluded]
            np.testing.assert_allclose([p.retrieval_score for p in got.passages],
                                       [p.retrieval_score for p in expected.passages],
                                       atol=1e-6)
    # the paths the comparison is about were taken
    if undated == "exclude":
        assert True in seen  # a refill
    if undated == "neutral":
        assert ("freshness stage" if ranked_fresh else "pool") in seen


class CountingEmbedder:
    """The hashing embedder, counting the texts it embeds."""

    def __init__(self) -> None:
        self.inner, self.texts = EMB, 0
        self.name, self.dim = EMB.name, EMB.dim

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


def _with_undated(n: int = 8) -> list[dict]:
    records = _candidates(sorted(CORPUS)[:n])
    for r in records[:3]:  # the best-ranked may be undated: refills and the pool's median
        r.pop("published_at", None)
        r.pop("observed_at", None)
    return records


@pytest.mark.parametrize("undated", ["neutral", "exclude"])
def test_the_candidates_are_embedded_once(undated):
    """A context asks for more than one ranking (a refill under exclude, the pool's ranking for
    the neutral median); the candidates are embedded once, with the query, whatever it asks."""
    records = _with_undated()
    embedder = CountingEmbedder()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", EmbeddingFallbackWarning)
        doc = rerank_context("diabetes fasting insulin", records, embedder,  # type: ignore[arg-type]
                             {"top_k": 3, "stages": ["prior"]}, now=NOW, half_life=365,
                             undated=undated)
    assert embedder.texts == len(records) + 1  # the passages and the query, once
    if undated == "exclude":
        assert len(doc.passages) == 3 and doc.excluded  # refilled from the pool
        assert all(p.document_date is not None for p in doc.passages)
    else:
        assert doc.used["undated_weight"]["from"] in ("ranked", "pool")


def test_scores_are_not_read_and_say_so():
    """Relevance tiers bin cosines: the candidates' own scores (a BM25 run's) are not read
    under auto; the ranking is that of the same candidates without scores, and
    info.retrieval counts the scores left unread. The fallback warning does not suggest
    sending scores."""
    records = _candidates(sorted(CORPUS)[:6])
    scored = [{**r, "score": 10.0 * (i + 1)} for i, r in enumerate(records)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = rerank_context("fasting diabetes", scored, EMB, {"top_k": 4},
                             auto=AutoRetrieval())  # its own state: the warning is said
        plain = rerank_context("fasting diabetes", records, EMB, {"top_k": 4})
    assert _tiers(got) == _tiers(plain)
    retrieval = got.to_json("json", True)["info"]["retrieval"]
    assert retrieval["resolved"] == "cosine" and retrieval["scores_unread"] == 6
    assert plain.to_json("json", True)["info"]["retrieval"]["scores_unread"] == 0
    said = [str(w.message) for w in caught if issubclass(w.category, EmbeddingFallbackWarning)]
    assert said and all("score" not in m for m in said), said


def test_the_scores_are_still_read_by_rerank():
    """Reranking (no context) keeps reading the scores: the key is not in its info."""
    records = [{**r, "score": 0.5} for r in _candidates(sorted(CORPUS)[:3])]
    result = credrank.rerank("fasting", records, EMB, {"top_k": 2})
    assert result.info["retrieval"]["resolved"] == "given"
    assert "scores_unread" not in result.info["retrieval"]


@pytest.mark.parametrize("call", ["library", "searcher"])
def test_given_scores_are_refused(call, demo_index_hashing):
    records = _candidates(sorted(CORPUS)[:3])
    with pytest.raises(ValueError, match=r"^retrieval: expected auto or cosine for a context, "
                                         r"got 'given': relevance tiers bin cosine"):
        if call == "library":
            rerank_context("fasting", records, EMB, retrieval="given")
        else:
            with Searcher.open(demo_index_hashing) as searcher:
                searcher.rerank_context("fasting", records, retrieval="given")


def test_a_candidate_without_text_says_a_context_reads_no_scores():
    records = [{"id": "a", "text": "fasting and diabetes", "url": "https://nih.gov/a",
                "score": 1.0}, {"id": "b", "text": " ", "url": "https://nih.gov/b",
                                "score": 0.5}]
    with pytest.raises(ValueError, match=r"candidates\[1\]: expected a non-empty text or a "
                                         r"vector .*a context's relevance tiers bin cosines"
                                         r".*a context reads no scores"):
        rerank_context("fasting", records, EMB)


def test_the_document_says_the_rerank_settings_and_replays():
    """The settings are a rerank's (fetch_k = the candidates, never pushed down, the query
    embedded); the prompt holds the kept passages' text; the spec is under pipeline."""
    records = _candidates(sorted(CORPUS)[:7])
    doc = rerank_context("fasting diabetes", records, EMB, {"top_k": 2, "stages": ["prior"]},
                         now=NOW)
    out = doc.to_json("cag", True)
    assert out["settings"]["fetch_k"] == 7 and out["settings"]["pushdown"] is False
    assert out["settings"]["retrieval"] == "auto"
    assert out["settings"]["query_vector"] == "embedded"
    assert out["pipeline"]["top_k"] == 2
    assert [p["doc_id"] for p in out["passages"]] == [p.doc_id for p in doc.passages]
    for p in doc.passages:
        assert p.text in out["prompt"]
    # the spec it answers ranks the same candidates the same way
    again = rerank_context("fasting diabetes", records, EMB, out["pipeline"], now=NOW)
    assert _tiers(again) == _tiers(doc)


def test_an_empty_pool_is_an_empty_context():
    doc = rerank_context("fasting", [], EMB, {"top_k": 3})
    assert doc.passages == [] and doc.excluded == []
    assert doc.to_json("json", True)["info"]["retrieval"]["scores_unread"] == 0


@pytest.mark.parametrize("option", [{"granularity": "paragraph"}, {"text": "nope"},
                                    {"text": "none", "granularity": "sentence"}])
def test_a_bad_option_is_refused_before_anything_is_embedded(option):
    embedder = CountingEmbedder()
    with pytest.raises(ValueError, match=r"^(granularity|text)"):
        rerank_context("fasting", _candidates(sorted(CORPUS)[:3]), embedder,  # type: ignore[arg-type]
                       {"top_k": 2}, **option)
    assert embedder.texts == 0


def test_the_front_door_exports_it():
    assert credrank.rerank_context is rerank_context
    assert "rerank_context" in credrank.__all__


class RecordingEmbedder(CountingEmbedder):
    """Counting, and keeping every text it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen.extend(texts)
        return super().embed(texts)


def test_sentence_tiers_use_the_rankings_query_vector():
    """Sentence tiers compare each sentence with the query vector the ranking used: the query
    is embedded once (it was embedded again for the sentences), and a given query_vector
    tiers the sentences too (they were tiered by the re-embedded query)."""
    records = _candidates(sorted(CORPUS)[:5])
    embedder = RecordingEmbedder()
    query = "fasting diabetes insulin"
    rerank_context(query, records, embedder, {"top_k": 2},  # type: ignore[arg-type]
                   granularity="sentence", auto=AutoRetrieval())
    assert embedder.seen.count(query) == 1
    other = EMB.embed(["vaccines and measles outbreaks"])[0]
    given = rerank_context(query, records, EMB, {"top_k": 2}, granularity="sentence",
                           retrieval="cosine", query_vector=other)
    embedded = rerank_context(query, records, EMB, {"top_k": 2}, granularity="sentence",
                              retrieval="cosine")

    def sentence_sims(doc):
        return [s.similarity for p in doc.passages for s in (p.sentences or ())]

    assert sentence_sims(given) and sentence_sims(given) != sentence_sims(embedded)
    unit = other / np.linalg.norm(other)
    first = given.passages[0].sentences[0]
    vector = EMB.embed([first.text])[0]
    assert first.similarity == pytest.approx(float(vector @ unit / np.linalg.norm(vector)),
                                             abs=1e-6)


def test_the_library_door_checks_and_defaults_as_the_other_doors():
    """check is honoured without an index too (it was dropped); an unknown keyword names the
    function called; no spec means the context's top_k of 5, as credrank context and POST
    /rerank/context; a half-life of 0 says how a context turns the downgrade off."""
    records = _candidates(sorted(CORPUS)[:12])
    seen: list[str] = []
    doc = rerank_context("fasting", records, EMB, check=seen.append)
    assert seen[0] == "stage:given" and seen[-1] == "done"
    assert len(doc.passages) == 5 and doc.to_json("json", True)["pipeline"]["top_k"] == 5

    def stop(name: str) -> None:
        if name.startswith("stage:topk"):
            raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError, match="cancelled"):
        rerank_context("fasting", records, EMB, check=stop)
    with pytest.raises(TypeError, match=r"rerank_context\(\) got an unexpected keyword "
                                        r"argument 'half_lives'"):
        rerank_context("fasting", records, EMB, half_lives="1y")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"^half_life: .*omit half_life for no time "
                                         r"downgrade"):
        rerank_context("fasting", records, EMB, half_life=0)


def test_unread_scores_are_not_checked():
    """A score a context never reads is not validated (a framework's NaN, a text): counted in
    scores_unread, the same context as without it."""
    records = _candidates(sorted(CORPUS)[:4])
    odd = [{**r, "score": s} for r, s in zip(records, [float("nan"), "high", 1e300, -2.0],
                                             strict=True)]
    got = rerank_context("fasting", odd, EMB, {"top_k": 3})
    assert _tiers(got) == _tiers(rerank_context("fasting", records, EMB, {"top_k": 3}))
    assert got.to_json("json", True)["info"]["retrieval"]["scores_unread"] == 4


def test_a_lexical_spec_is_refused_with_the_contexts_reason():
    """The rerank's reason offered retrieval 'given' (their own scores, a BM25 run's), which a
    context refuses; the context's own reason comes first: its tiers bin cosines."""
    records = _candidates(sorted(CORPUS)[:3])
    with pytest.raises(ValueError, match=r"^retrieval: expected dense \(relevance tiers bin "
                                         r"cosine similarities"):
        rerank_context("fasting", records, EMB, {"retrieval": "bm25"})
