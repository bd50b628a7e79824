"""``retrieval="auto"`` (issue 26): reuse what the caller already has — the passages' own
embeddings when they are of the embedder's model (checked), else their scores, else embed them
(with a one-time warning) — in the library, the three adapters and ``POST /rerank``.

Embedder calls are counted with a wrapper (:class:`Counting`); "another model" is the hashing
embedder's vector rolled by one position (same dimension, unrelated directions), which the
same-model check must refuse.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from credrank.adapters._common import CredrankScorer, Passage
from credrank.index.embed import get_embedder
from credrank.rerank import (
    FALLBACK_PREFIX,
    RETRIEVAL_SOURCES,
    SAME_MODEL_COSINE,
    AutoRetrieval,
    CandidateError,
    EmbeddingFallbackWarning,
    check_retrieval,
    rerank,
)
from credrank.searcher import Searcher
from serving import ServerHandle, running_server
from sparse_copy import copy_index

HASHING = get_embedder("hashing")
QUERY = "does vitamin d prevent covid"
TEXTS = ["Vitamin D and COVID-19: what the trials show", "Melatonin and sleep in children",
         "Vitamin D supplements in winter", "How to bake sourdough bread"]
URLS = ["https://www.cdc.gov/a", "https://medium.com/@x/y", None, "https://nih.gov/b"]
SCORES = [0.9, 0.3, 0.6, 0.1]
FRAMEWORKS = {"haystack": "haystack", "llamaindex": "llama_index", "langchain": "langchain_core"}


class Counting:
    """An embedder that counts what it is asked to embed (the texts, call by call)."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)

    @property
    def texts(self) -> list[str]:
        return [t for call in self.calls for t in call]


def same_model(texts: Sequence[str]) -> list[list[float]]:
    return HASHING.embed(list(texts)).astype(float).tolist()


def other_model(texts: Sequence[str]) -> list[list[float]]:
    """Vectors of the embedder's dimension from "another model"."""
    return np.roll(HASHING.embed(list(texts)), 1, axis=1).astype(float).tolist()


def records(*, vectors: list[list[float]] | None = None, scores: Sequence[float | None] | None
            = None) -> list[dict[str, Any]]:
    out = []
    for i, text in enumerate(TEXTS):
        r: dict[str, Any] = {"id": f"d{i}", "text": text, "url": URLS[i]}
        if vectors is not None:
            r["vector"] = vectors[i]
        if scores is not None and scores[i] is not None:
            r["score"] = scores[i]
        out.append(r)
    return out


def run(recs: list[dict[str, Any]], emb: Counting, auto: AutoRetrieval, **kw: Any) -> Any:
    return rerank(QUERY, recs, emb, Searcher.spec(top_k=4, priors="none"), auto=auto, **kw)


def fallbacks(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, EmbeddingFallbackWarning)]


# -- the library -------------------------------------------------------------------------------

def test_one_vocabulary_and_validator() -> None:
    assert RETRIEVAL_SOURCES == ("auto", "cosine", "given")
    assert check_retrieval("auto") == "auto"
    with pytest.raises(CandidateError, match=r"^retrieval: expected one of auto, cosine, "
                                             r"given, got 'bm25'$"):
        check_retrieval("bm25")
    with pytest.raises(ValueError, match=r"^retrieval: expected one of auto, cosine, given"):
        CredrankScorer(embedder="hashing", retrieval="bm25")
    assert CredrankScorer(embedder="hashing").retrieval == "auto"  # the default


def test_auto_uses_same_model_embeddings_without_embedding_a_passage() -> None:
    emb, auto = Counting(HASHING), AutoRetrieval()
    vecs = same_model(TEXTS)
    # scores and vectors but no query vector: the scores (the vectors would need the query
    # embedded), nothing embedded, nothing checked
    fast = run(records(vectors=vecs, scores=SCORES), emb, auto)
    assert fast.info["retrieval"]["resolved"] == "given"
    assert fast.info["retrieval"]["embedded"] == 0 and emb.calls == []
    assert auto.verdict(HASHING.dim) is None
    # vectors alone: checked once, then used; the query embedded
    first = run(records(vectors=vecs), emb, auto)
    info = first.info["retrieval"]
    assert info["resolved"] == "embeddings" and info["embedded"] == 0
    assert info["same_model"] is True and info["same_model_cosine"] >= SAME_MODEL_COSINE
    assert info["query"] == "embedded"
    # one check (the first passage, as it may have been embedded) and the query: no pool
    assert emb.calls == [[TEXTS[0]], [QUERY]]
    q = HASHING.embed([QUERY])[0]
    expected = {f"d{i}": float(np.dot(q, v)) for i, v in enumerate(vecs)}
    got = dict(zip(first.doc_ids, first.retrieval_score, strict=True))
    assert got == pytest.approx(expected, abs=1e-6)  # the cosines
    # the verdict is kept (per instance, keyed by the dimension): the next call checks nothing
    emb.calls.clear()
    second = run(records(vectors=vecs), emb, auto)
    assert second.info["retrieval"]["resolved"] == "embeddings"
    assert emb.calls == [[QUERY]]
    assert auto.verdict(HASHING.dim) is not None and auto.verdict(HASHING.dim).same_model
    # with the query's vector, the embeddings beat the scores and nothing at all is embedded
    emb.calls.clear()
    third = run(records(vectors=vecs, scores=SCORES), emb, auto, query_vector=q.tolist())
    assert emb.calls == [] and third.info["retrieval"]["query"] == "given"
    assert third.info["retrieval"]["resolved"] == "embeddings"
    got = dict(zip(third.doc_ids, third.retrieval_score, strict=True))
    assert got == pytest.approx(expected, abs=1e-6)  # the cosines, not the scores


def test_auto_falls_back_to_scores_for_another_models_embeddings() -> None:
    emb, auto = Counting(HASHING), AutoRetrieval()
    q = HASHING.embed([QUERY])[0].tolist()  # with the query's vector the vectors are checked
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(records(vectors=other_model(TEXTS), scores=SCORES), emb, auto,
                     query_vector=q)
    info = result.info["retrieval"]
    assert info["resolved"] == "given" and info["embedded"] == 0
    assert info["same_model"] is False and info["same_model_cosine"] < SAME_MODEL_COSINE
    assert info["query"] is None
    assert emb.calls == [[TEXTS[0]]]  # the check only: neither the pool nor the query
    assert list(result.retrieval_score) == sorted(SCORES, reverse=True)
    assert fallbacks(caught) == []  # scores are the fast path: nothing to warn about
    emb.calls.clear()
    run(records(vectors=other_model(TEXTS), scores=SCORES), emb, auto, query_vector=q)
    assert emb.calls == []  # the negative verdict is kept too (cache_negative=True)


def test_auto_uses_scores_when_there_are_no_embeddings() -> None:
    emb = Counting(HASHING)
    result = run(records(scores=SCORES), emb, AutoRetrieval())
    assert result.info["retrieval"]["resolved"] == "given"
    assert emb.calls == []
    assert [float(s) for s in result.column("client_score")] == sorted(SCORES, reverse=True)


def test_auto_embeds_with_one_warning_over_two_calls_when_neither_is_given() -> None:
    emb, auto = Counting(HASHING), AutoRetrieval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            result = run(records(), emb, auto)
            assert result.info["retrieval"]["resolved"] == "cosine"
            assert result.info["retrieval"]["embedded"] == len(TEXTS)
    messages = fallbacks(caught)
    assert len(messages) == 1
    assert messages[0].startswith(FALLBACK_PREFIX + ": no passage carries an embedding")
    assert f"embedding {len(TEXTS)} passage(s) with the 'hashing' embedder took" in messages[0]
    assert "retrieval='given'" in messages[0]
    # explicit cosine embeds as before, without a warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert run(records(), emb, AutoRetrieval(), retrieval="cosine"
                   ).info["retrieval"]["resolved"] == "cosine"
    assert fallbacks(caught) == []


def test_mixed_scores_embed_every_passage_and_say_which_lacks_one() -> None:
    """Policy: some passages with a score, some without → the cosine over all (a partial
    score column cannot rank the others on its scale; auto accepts what cosine accepts)."""
    emb, auto = Counting(HASHING), AutoRetrieval()
    mixed = records(scores=[0.9, None, 0.6, 0.1])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(mixed, emb, auto)
    assert result.info["retrieval"]["resolved"] == "cosine"
    assert result.info["retrieval"]["embedded"] == len(TEXTS)
    assert "3 of 4 a score (candidates[1] is the first without one" in fallbacks(caught)[0]
    # the scores that came are still returned as client_score
    by_id = dict(zip(result.doc_ids, result.column("client_score"), strict=True))
    assert by_id == {"d0": 0.9, "d1": None, "d2": 0.6, "d3": 0.1}
    # explicit given refuses the same input, naming the candidate
    with pytest.raises(CandidateError, match=r"candidates\[1\]\.score: required"):
        run(mixed, emb, auto, retrieval="given")


def test_negative_scores_are_not_used_by_auto() -> None:
    emb = Counting(HASHING)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(records(scores=[0.9, -2.0, 0.6, 0.1]), emb, AutoRetrieval())
    assert result.info["retrieval"]["resolved"] == "cosine"
    assert "candidates[1].score is negative" in fallbacks(caught)[0]
    given = run(records(scores=[0.9, -2.0, 0.6, 0.1]), emb, AutoRetrieval(), retrieval="given")
    assert given.info["retrieval"]["resolved"] == "given"


def test_other_model_vectors_without_scores_embed_the_text() -> None:
    emb, auto = Counting(HASHING), AutoRetrieval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(records(vectors=other_model(TEXTS)), emb, auto)
    assert result.info["retrieval"]["resolved"] == "cosine"
    assert result.info["retrieval"]["embedded"] == len(TEXTS)
    assert "not of the 'hashing' model" in fallbacks(caught)[0]
    with pytest.warns(EmbeddingFallbackWarning, match="no passage carries an embedding"):
        plain = run(records(), Counting(HASHING), AutoRetrieval())
    np.testing.assert_allclose(result.retrieval_score, plain.retrieval_score, atol=1e-6)
    # a vector that fails the check, on a passage without text: a clear error
    bare = records(vectors=other_model(TEXTS))
    bare[2]["text"] = None
    with pytest.raises(CandidateError, match=r"^candidates\[2\]: expected a non-empty text to "
                                             r"embed, got none \(retrieval='auto' embeds it: "
                                             r"its vector failed the same-model check"):
        run(bare, emb, auto)


def test_a_server_keeps_only_positive_verdicts() -> None:
    """``cache_negative=False`` (the service, :func:`rerank`'s shared state): one caller's
    vectors of another model do not demote the next caller's."""
    emb, auto = Counting(HASHING), AutoRetrieval(cache_negative=False)
    q = HASHING.embed([QUERY])[0].tolist()
    run(records(vectors=other_model(TEXTS), scores=SCORES), emb, auto, query_vector=q)
    assert auto.verdict(HASHING.dim) is None
    result = run(records(vectors=same_model(TEXTS), scores=SCORES), emb, auto, query_vector=q)
    assert result.info["retrieval"]["resolved"] == "embeddings"
    assert auto.verdict(HASHING.dim).same_model


def test_partial_embeddings_embed_only_the_rest() -> None:
    emb = Counting(HASHING)
    vecs: list[Any] = same_model(TEXTS)
    recs = records(vectors=vecs)
    del recs[3]["vector"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = run(recs, emb, AutoRetrieval())
    assert result.info["retrieval"]["resolved"] == "cosine"
    assert result.info["retrieval"]["embedded"] == 1
    # the same-model check, the query (a long text is scored by its chunk nearest the query),
    # the one missing
    assert emb.calls == [[TEXTS[0]], [QUERY], [TEXTS[3]]]
    assert "3 of 4 passages carry one" in fallbacks(caught)[0]


# -- the adapters ------------------------------------------------------------------------------

def counted(scorer: CredrankScorer) -> Counting:
    scorer.warm_up()
    emb = Counting(scorer.warm_up())
    scorer._embedder = emb  # the scorer's model, counted
    return emb


def test_scorer_uses_embeddings_then_scores_then_embeds() -> None:
    scorer = CredrankScorer(embedder="hashing", priors="none")
    emb = counted(scorer)
    q = HASHING.embed([QUERY])[0].tolist()
    with_both = [Passage(text=t, metadata={"url": u} if u else {}, score=s, embedding=v)
                 for t, u, s, v in zip(TEXTS, URLS, SCORES, same_model(TEXTS), strict=True)]
    ranked = scorer.rank(QUERY, with_both, query_vector=q)
    assert {r.breakdown["retrieval"] for r in ranked} == {"embeddings"}
    assert emb.calls == [[TEXTS[0]]]  # the check; the framework's query vector is reused
    emb.calls.clear()
    scorer.rank(QUERY, with_both, query_vector=q)
    assert emb.calls == []  # nothing embedded at all
    # use_given_embeddings does not bypass the check under auto
    other = CredrankScorer(embedder="hashing", priors="none", use_given_embeddings=True)
    emb = counted(other)
    foreign = [Passage(text=t, metadata={}, score=s, embedding=v)
               for t, s, v in zip(TEXTS, SCORES, other_model(TEXTS), strict=True)]
    ranked = other.rank(QUERY, foreign, query_vector=q)
    assert {r.breakdown["retrieval"] for r in ranked} == {"given"}
    assert [r.score for r in ranked] == sorted(SCORES, reverse=True)
    assert emb.calls == [[TEXTS[0]]]  # the check; the foreign query vector is not used
    # neither: embed, one warning per instance over two calls
    bare = [Passage(text=t, metadata={}) for t in TEXTS]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            assert {r.breakdown["retrieval"] for r in other.rank(QUERY, bare)} == {"cosine"}
    assert len(fallbacks(caught)) == 1


def test_scorer_keeps_the_dimension_warning_of_use_given_embeddings() -> None:
    scorer = CredrankScorer(embedder="hashing", priors="none", use_given_embeddings=True)
    short = [Passage(text=t, metadata={}, score=s, embedding=[1.0, 0.0])
             for t, s in zip(TEXTS, SCORES, strict=True)]
    with pytest.warns(UserWarning, match="another dimension"):
        ranked = scorer.rank(QUERY, short)
    assert {r.breakdown["retrieval"] for r in ranked} == {"given"}  # the scores, under auto


def need(framework: str) -> None:
    pytest.importorskip(FRAMEWORKS[framework],
                        reason=f"the {framework} extra is not installed "
                               f"(pip install 'credrank[{framework}]')")


def test_llamaindex_default_reuses_node_embeddings_and_the_query_bundle() -> None:
    need("llamaindex")
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

    from credrank.adapters.llamaindex import CredibilityPostprocessor

    # LlamaIndex embeds the metadata with the text: the check tries that text too
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=t, metadata={"url": u or ""}),
                           score=s) for i, (t, u, s) in enumerate(zip(TEXTS, URLS, SCORES,
                                                                      strict=True))]
    embedded = [n.node.get_content(metadata_mode=MetadataMode.EMBED) for n in nodes]
    assert embedded[0] != TEXTS[0]
    for n, v in zip(nodes, same_model(embedded), strict=True):
        n.node.embedding = v
    post = CredibilityPostprocessor(embedder="hashing", priors="none")
    emb = counted(post._scorer)
    bundle = QueryBundle(QUERY, embedding=HASHING.embed([QUERY])[0].tolist())
    out = post.postprocess_nodes(nodes, query_bundle=bundle)
    assert {n.node.metadata["credrank"]["retrieval"] for n in out} == {"embeddings"}
    assert emb.calls == [[TEXTS[0], embedded[0]]]  # the check only
    emb.calls.clear()
    post.postprocess_nodes(nodes, query_bundle=bundle)
    assert emb.calls == []
    # without embeddings: the retriever's scores, nothing embedded
    for n in nodes:
        n.node.embedding = None
    out = post.postprocess_nodes(nodes, query_bundle=bundle)
    assert {n.node.metadata["credrank"]["retrieval"] for n in out} == {"given"}
    assert emb.calls == []


def test_haystack_default_uses_scores_and_query_embedding() -> None:
    need("haystack")
    from haystack import Document

    from credrank.adapters.haystack import CredibilityRanker

    ranker = CredibilityRanker(embedder="hashing", priors="none")
    emb = counted(ranker._scorer)
    scored = [Document(id=f"h{i}", content=t, score=s) for i, (t, s) in
              enumerate(zip(TEXTS, SCORES, strict=True))]
    out = ranker.run(documents=scored, query=QUERY)["documents"]
    assert [d.meta["credrank"]["retrieval"] for d in out] == ["given"] * 4
    assert [d.score for d in out] == sorted(SCORES, reverse=True)
    assert emb.calls == []
    embedded = [Document(id=f"h{i}", content=t, embedding=v) for i, (t, v) in
                enumerate(zip(TEXTS, same_model(TEXTS), strict=True))]
    q = HASHING.embed([QUERY])[0].tolist()
    out = ranker.run(documents=embedded, query=QUERY, query_embedding=q)["documents"]
    assert [d.meta["credrank"]["retrieval"] for d in out] == ["embeddings"] * 4
    assert emb.calls == [[TEXTS[0]]]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(2):
            out = ranker.run(documents=[Document(content=t) for t in TEXTS],
                             query=QUERY)["documents"]
            assert out[0].meta["credrank"]["retrieval"] == "cosine"
    assert len(fallbacks(caught)) == 1


def test_langchain_default_uses_metadata_scores() -> None:
    need("langchain")
    from langchain_core.documents import Document

    from credrank.adapters.langchain import CredibilityCompressor

    compressor = CredibilityCompressor(embedder="hashing", priors="none")
    emb = counted(compressor._scorer)
    docs = [Document(page_content=t, metadata={"score": s}) for t, s in
            zip(TEXTS, SCORES, strict=True)]
    out = compressor.compress_documents(docs, QUERY)
    assert [d.metadata["credrank"]["retrieval"] for d in out] == ["given"] * 4
    assert emb.calls == []
    bad = [Document(page_content="x", metadata={"score": "high"})]
    with pytest.raises(ValueError, match=r"documents\[0\]\.metadata\['score'\] \(score_key\): "
                                         r"expected a finite number"):
        compressor.compress_documents(bad, QUERY)


# -- the service ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory
           ) -> Iterator[ServerHandle]:
    where = tmp_path_factory.mktemp("auto") / "index"
    copy_index(demo_index_hashing, where)
    with running_server(where) as handle:
        yield handle


def post(server: ServerHandle, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(server.url + "/rerank", json=body, timeout=60)


def test_rerank_with_scores_and_no_vectors_takes_the_fast_path(server: ServerHandle) -> None:
    candidates = [{"id": f"c{i}", "text": t, "score": s}
                  for i, (t, s) in enumerate(zip(TEXTS, SCORES, strict=True))]
    got = post(server, {"query": QUERY, "candidates": candidates, "priors": "none"})
    assert got.status_code == 200, got.text
    doc = got.json()
    assert doc["settings"]["retrieval"] == "auto"
    assert doc["info"]["retrieval"]["resolved"] == "given"
    assert doc["info"]["retrieval"]["embedded"] == 0
    assert [h["score_breakdown"]["retrieval_score"] for h in doc["hits"]] == \
        sorted(SCORES, reverse=True)
    bad = post(server, {"query": QUERY, "candidates": candidates, "retrieval": "bm25"})
    assert bad.status_code == 422
    assert "expected one of auto, cosine, given, got 'bm25'" in bad.text
    assert "retrieval" in bad.text


def test_rerank_embeds_with_one_log_line_and_says_so(server: ServerHandle) -> None:
    candidates = [{"id": f"c{i}", "text": t} for i, t in enumerate(TEXTS)]
    for _ in range(2):
        got = post(server, {"query": QUERY, "candidates": candidates})
        assert got.status_code == 200, got.text
        info = got.json()["info"]["retrieval"]
        assert info["resolved"] == "cosine" and info["embedded"] == len(TEXTS)
    server.wait_for_record(lambda record: record.get("event") == "rerank_embeds")
    lines = [r for r in server.log_records() if r.get("event") == "rerank_embeds"]
    assert len(lines) == 1
    assert lines[0]["embedded"] == len(TEXTS) and lines[0]["embedder"] == "hashing"
    assert lines[0]["message"].startswith(FALLBACK_PREFIX)


def test_rerank_same_model_vectors_are_used(server: ServerHandle) -> None:
    candidates = [{"id": f"c{i}", "text": t, "vector": v}
                  for i, (t, v) in enumerate(zip(TEXTS, same_model(TEXTS), strict=True))]
    got = post(server, {"query": QUERY, "candidates": candidates,
                        "query_vector": HASHING.embed([QUERY])[0].tolist()})
    assert got.status_code == 200, got.text
    doc = got.json()
    assert doc["info"]["retrieval"]["resolved"] == "embeddings"
    assert doc["info"]["retrieval"]["same_model"] is True
    assert doc["settings"]["query_vector"] == "given"
    # vectors of another model of the same size, after those passed: checked again, not
    # trusted on the earlier request's verdict (nor said to have its cosine)
    rng = np.random.default_rng(3)
    foreign = [{**c, "vector": rng.normal(size=HASHING.dim).tolist()} for c in candidates]
    got = post(server, {"query": QUERY, "candidates": foreign,
                        "query_vector": HASHING.embed([QUERY])[0].tolist()})
    assert got.status_code == 200, got.text
    retrieval = got.json()["info"]["retrieval"]
    assert retrieval["same_model"] is False and retrieval["resolved"] == "cosine"
    assert retrieval["same_model_cosine"] < SAME_MODEL_COSINE
