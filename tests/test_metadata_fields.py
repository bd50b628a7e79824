"""Metadata at every door (issue 36, items 2 and 5): what stages read of a candidate — the dates,
provenance, a declared source type, cites — reaches them from the library, ``POST /rerank`` and
the three adapters (real framework documents, stores and retrievers, no network); the adapters'
``fields`` mapping and ``score_threshold``; the README's LangChain example on the fast path.

The freshness cases are two otherwise equal pages (same text, same kind of host) dated 2022 and
2023, under a 30-day half-life at ``now=2024-01-01``: the 2023 page must come first. Before
this change the adapters and ``/rerank`` never saw the dates (every page undated, freshness 0.5
each), and the older page, given first, stayed first.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from credrank.adapters._common import CredrankScorer, Passage
from credrank.index.embed import get_embedder
from credrank.rerank import CandidateError, rerank
from credrank.rerank.fields import check_fields, field_value

FRESHNESS = "half_life=30d,now=2024-01-01"
TEXT = "Vitamin D supplements did not prevent COVID-19 in a randomised trial."
QUERY = "does vitamin d prevent covid"
OLD, NEW = "2022-06-01", "2023-06-01"
#: two pages of one publisher kind, the older first (a tie keeps the input order)
PAGES = [("https://www.nih.gov/old-page", OLD), ("https://www.cdc.gov/new-page", NEW)]


def need(module: str) -> None:
    pytest.importorskip(module, reason=f"{module} is not installed")


class Counting:
    """An embedder that counts what it embeds (the hashing embedder underneath)."""

    def __init__(self, name: str = "hashing") -> None:
        self.inner = get_embedder("hashing")
        self.name, self.dim = name, self.inner.dim
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return self.inner.embed(texts)


# --------------------------------------------------------------------------------------------
# the one reader of the fields (credrank.rerank.fields)
# --------------------------------------------------------------------------------------------
def test_field_values_are_read_as_credrank_index_reads_them():
    assert field_value("published_at", "2023-06-01") == ("2023-06-01T00:00:00+00:00", None)
    assert field_value("published_at", "April 17, 2020")[0] == "2020-04-17T00:00:00+00:00"
    assert field_value("published_at", "2023-06-01T12:00:00")[0] == "2023-06-01T12:00:00+00:00"
    assert field_value("published_at", "") == (None, None)
    value, reason = field_value("published_at", "2/11/20")  # two readings: never guessed
    assert value is None and "reads one way" in str(reason)
    assert field_value("source_type", "blog") == ("blog", None)
    assert "expected one of peer_reviewed" in str(field_value("source_type", "news")[1])
    assert field_value("cites", ["a", 7]) == (["a", "7"], None)
    assert field_value("url", 5)[1] == "expected a string, got integer 5"


def test_fields_option_is_checked_once_naming_the_entry():
    assert check_fields({"published_at": "date", "title": None}) == {
        "published_at": "date", "title": None}
    with pytest.raises(ValueError, match=r"^fields\.publishd_at: expected one of url, title"):
        check_fields({"publishd_at": "date"})
    with pytest.raises(ValueError, match=r"^fields\.published_at: expected a metadata key"):
        check_fields({"published_at": ""})
    with pytest.raises(ValueError, match=r"^fields: expected a mapping"):
        check_fields("published_at=date")
    with pytest.raises(ValueError, match=r"^fields\.nope: expected one of"):
        CredrankScorer(embedder="hashing", fields={"nope": "x"})


def test_library_rerank_reads_the_dates_of_records():
    records = [{"id": f"p{i}", "text": TEXT, "url": url, "published_at": date, "score": 0.8}
               for i, (url, date) in enumerate(PAGES)]
    spec = {"stages": ["prior", {"stage": "freshness", "half_life": "30d",
                                 "now": "2024-01-01"}]}
    got = rerank(QUERY, records, "hashing", spec)
    assert list(got.doc_ids) == ["p1", "p0"]
    hits = got.hits("none")
    assert hits[0]["dates"]["published_at"] == "2023-06-01T00:00:00+00:00"
    undated = rerank(QUERY, [{k: v for k, v in r.items() if k != "published_at"}
                             for r in records], "hashing", spec)
    assert list(undated.doc_ids) == ["p0", "p1"]  # what every door did before: a tie
    with pytest.raises(CandidateError, match=r"^candidates\[1\]\.published_at: expected"):
        rerank(QUERY, [records[0], {**records[1], "published_at": "yesterday"}], "hashing")


def test_declared_source_type_is_a_claim_as_in_credrank_index():
    records = [{"id": "a", "text": TEXT, "url": "https://vitamin-truth.blogspot.com/x",
                "source_type": "peer_reviewed", "score": 0.5}]
    got = rerank(QUERY, records, "hashing")
    assert got.hits("none")[0]["source_type"] == "blog"  # the URL's type, not the claim
    conflict = got.info["provenance"]["conflicts"][0]
    assert conflict["id"] == "a" and "declared source_type 'peer_reviewed'" in \
        conflict["conflict"]
    with pytest.raises(CandidateError, match=r"candidates\[0\]\.source_type: expected one of"):
        rerank(QUERY, [{**records[0], "source_type": "news"}], "hashing")


# --------------------------------------------------------------------------------------------
# the adapters' mapping: a key named in fields must be on some document of the call
# --------------------------------------------------------------------------------------------
def test_mapping_a_key_no_document_carries_is_an_error_naming_it():
    scorer = CredrankScorer(embedder="hashing", freshness=FRESHNESS,
                            fields={"published_at": "date"})
    passages = [Passage(TEXT, {"url": url, "published": date}, score=0.8)
                for url, date in PAGES]
    with pytest.raises(ValueError) as err:
        scorer.rank(QUERY, passages)
    message = str(err.value)
    assert message.startswith("fields.published_at: expected metadata key 'date' on the "
                              "documents, got it on none of 2 (keys seen: published, url)")
    # a document without it, among others that have it, is undated (reported as such)
    some = [Passage(TEXT, {"url": PAGES[0][0]}, score=0.8),
            Passage(TEXT, {"url": PAGES[1][0], "date": NEW}, score=0.8)]
    dates = {r.index: r.breakdown["dates"]["published_at"] for r in scorer.rank(QUERY, some)}
    assert dates == {0: None, 1: "2023-06-01T00:00:00+00:00"}  # 0 weighs as undated does
    # a value that cannot be read names the field, the key and the way out
    bad = [some[0], Passage(TEXT, {"url": PAGES[1][0], "date": "2/11/20"}, score=0.8)]
    with pytest.raises(ValueError, match=re.escape(
            "candidates[1].published_at (metadata key 'date'): expected a date that reads "
            "one way")):
        scorer.rank(QUERY, bad)


# --------------------------------------------------------------------------------------------
# freshness through each framework, as a user runs it
# --------------------------------------------------------------------------------------------
def test_freshness_through_haystack_pipeline():
    need("haystack")
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from credrank.adapters.haystack import CredibilityRanker

    store = InMemoryDocumentStore()
    store.write_documents([Document(content=TEXT, meta={"url": url, "published_at": date})
                           for url, date in PAGES])
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=10))
    pipe.add_component("ranker", CredibilityRanker(embedder="hashing", freshness=FRESHNESS))
    pipe.connect("retriever.documents", "ranker.documents")
    out = pipe.run({"retriever": {"query": QUERY}, "ranker": {"query": QUERY}})
    docs = out["ranker"]["documents"]
    assert [d.meta["published_at"] for d in docs] == [NEW, OLD]
    factors = [d.meta["credrank"]["score_breakdown"]["freshness"] for d in docs]
    assert factors[0] > factors[1] > 0
    assert docs[0].meta["credrank"]["retrieval"] == "given"  # BM25's scores: nothing embedded


def test_freshness_through_llamaindex_retriever():
    need("llama_index.core")
    from llama_index.core import VectorStoreIndex
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.schema import TextNode

    from credrank.adapters.llamaindex import CredibilityPostprocessor

    nodes = [TextNode(text=TEXT, metadata={"url": url, "date": date}) for url, date in PAGES]
    index = VectorStoreIndex(nodes, embed_model=MockEmbedding(embed_dim=8))
    retrieved = index.as_retriever(similarity_top_k=10).retrieve(QUERY)
    assert len(retrieved) == 2 and retrieved[0].score == retrieved[1].score
    post = CredibilityPostprocessor(embedder="hashing", freshness=FRESHNESS,
                                    fields={"published_at": "date"})
    # the older first, as a tie would leave it
    ordered = sorted(retrieved, key=lambda n: n.node.metadata["date"])
    out = post.postprocess_nodes(ordered, query_str=QUERY)
    assert [n.node.metadata["date"] for n in out] == [NEW, OLD]
    assert out[0].node.metadata["credrank"]["dates"]["published_at"].startswith("2023-06-01")
    stale = CredibilityPostprocessor(embedder="hashing", freshness=FRESHNESS)
    tie = stale.postprocess_nodes(ordered, query_str=QUERY)  # 'date' is not a default key
    assert [n.node.metadata["date"] for n in tie] == [OLD, NEW]


def test_freshness_through_langchain_retriever_and_compressor():
    need("langchain_core")
    from langchain_core.documents import Document
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=32))
    store.add_documents([Document(page_content=TEXT, metadata={"url": url, "published_at": d})
                         for url, d in PAGES])
    compressor = CredibilityCompressor(embedder="hashing", freshness=FRESHNESS)
    docs = CredibilityRetriever(vectorstore=store, compressor=compressor).invoke(QUERY)
    assert [d.metadata["published_at"] for d in docs] == [NEW, OLD]
    older_first = [Document(page_content=TEXT, metadata={"url": url, "published_at": d,
                                                         "score": 0.7}) for url, d in PAGES]
    docs = compressor.compress_documents(older_first, QUERY)
    assert [d.metadata["published_at"] for d in docs] == [NEW, OLD]


def test_freshness_through_rerank_endpoint_and_bad_date(demo_index_hashing: Path,
                                                        tmp_path: Path) -> None:
    from serving import asgi_client, in_process
    from sparse_copy import copy_index

    where = copy_index(demo_index_hashing, tmp_path / "index")

    def post(app: Any, path: str, body: dict[str, Any]) -> httpx.Response:
        async def scenario() -> httpx.Response:
            async with asgi_client(app) as c:
                return await c.post(path, json=body)
        return asyncio.run(scenario())

    with in_process(where) as ro:
        _rerank_endpoint(ro, post)


def _rerank_endpoint(ro: Any, post: Any) -> None:
    candidates = [{"id": f"p{i}", "text": TEXT, "url": url, "published_at": date,
                   "score": 0.8, "source_type": "blog"} for i, (url, date) in enumerate(PAGES)]
    got = post(ro, "/rerank", {"query": QUERY, "candidates": candidates,
                               "freshness": FRESHNESS})
    assert got.status_code == 200, got.text
    doc = got.json()
    assert [h["doc_id"] for h in doc["hits"]] == ["p1", "p0"]
    assert doc["hits"][0]["dates"]["published_at"] == "2023-06-01T00:00:00+00:00"
    assert doc["hits"][0]["source_type"] == "government"  # the claim 'blog' is not the type
    assert len(doc["info"]["provenance"]["conflicts"]) == 2
    bad = [candidates[0], {**candidates[1], "published_at": "June 2023"}]
    got = post(ro, "/rerank", {"query": QUERY, "candidates": bad})
    assert got.status_code == 422
    body = got.json()
    assert "candidates[1].published_at" in body["detail"]
    assert "expected a full date (year, month and day)" in body["detail"]
    cites = post(ro, "/rerank", {"query": QUERY, "candidates": [
        {**candidates[0], "cites": "p1"}]})
    assert cites.status_code == 422 and "candidates[0].cites" in cites.json()["detail"]


# --------------------------------------------------------------------------------------------
# score_threshold, declared once for every adapter
# --------------------------------------------------------------------------------------------
def test_score_threshold_in_the_scorer_and_each_adapter():
    passages = [Passage(TEXT, {"url": url}, score=s)
                for url, s in [("https://www.nih.gov/a", 0.9), ("https://x.blogspot.com/b", 0.9),
                               ("https://www.cdc.gov/c", 0.1)]]
    every = CredrankScorer(embedder="hashing").rank(QUERY, passages)
    scores = sorted(r.score for r in every)
    cut = (scores[1] + scores[2]) / 2  # only the best stays
    kept = CredrankScorer(embedder="hashing", score_threshold=cut).rank(QUERY, passages)
    assert [r.index for r in kept] == [every[0].index]
    with pytest.raises(ValueError, match=r"^score_threshold: expected a finite number"):
        CredrankScorer(embedder="hashing", score_threshold="0.5")
    docs = 0
    if _has("haystack"):
        from haystack import Document as HDoc

        from credrank.adapters.haystack import CredibilityRanker
        out = CredibilityRanker(embedder="hashing", score_threshold=cut).run(
            [HDoc(content=p.text, meta=dict(p.metadata), score=p.score) for p in passages],
            QUERY)["documents"]
        assert len(out) == 1 and out[0].score >= cut
        docs += 1
    if _has("llama_index.core"):
        from llama_index.core.schema import NodeWithScore, TextNode

        from credrank.adapters.llamaindex import CredibilityPostprocessor
        out = CredibilityPostprocessor(embedder="hashing", score_threshold=cut).postprocess_nodes(
            [NodeWithScore(node=TextNode(text=p.text, metadata=dict(p.metadata)), score=p.score)
             for p in passages], query_str=QUERY)
        assert len(out) == 1 and out[0].score >= cut
        docs += 1
    if _has("langchain_core"):
        from langchain_core.documents import Document as LDoc

        from credrank.adapters.langchain import CredibilityCompressor
        out = CredibilityCompressor(embedder="hashing", score_threshold=cut).compress_documents(
            [LDoc(page_content=p.text, metadata={**p.metadata, "score": p.score})
             for p in passages], QUERY)
        assert len(out) == 1 and out[0].metadata["relevance_score"] >= cut
        docs += 1
    assert docs == 3, "the three frameworks are installed in the project's environment"


def _has(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


# --------------------------------------------------------------------------------------------
# the README's LangChain example: the fast path, nothing embedded by credrank
# --------------------------------------------------------------------------------------------
def test_readme_langchain_example_embeds_nothing(monkeypatch: pytest.MonkeyPatch, capsys):
    need("langchain_core")
    import credrank.adapters._common as common
    from readme_blocks import read_blocks

    counting = Counting(name="minilm")  # what the example's default embedder is called
    monkeypatch.setattr(common, "get_embedder", lambda name: counting)
    readme = Path(__file__).resolve().parents[1] / "README.md"
    block = next(b for b in read_blocks(readme)
                 if b.lang == "python" and "CredibilityRetriever(vectorstore=store" in b.text)
    from langchain_core.embeddings import DeterministicFakeEmbedding
    calls = {"documents": 0, "query": 0}
    real_docs, real_query = (DeterministicFakeEmbedding.embed_documents,
                             DeterministicFakeEmbedding.embed_query)

    def docs(self: Any, texts: list[str]) -> list[list[float]]:
        calls["documents"] += len(texts)
        return real_docs(self, texts)

    def query(self: Any, text: str) -> list[float]:
        calls["query"] += 1
        return real_query(self, text)

    monkeypatch.setattr(DeterministicFakeEmbedding, "embed_documents", docs)
    monkeypatch.setattr(DeterministicFakeEmbedding, "embed_query", query)
    scope: dict[str, Any] = {}
    exec(compile(block.text, "README.md", "exec"), scope)
    assert calls["documents"] == 2  # the store's own add_documents, once
    assert calls["query"] == 1  # the store's search
    assert counting.texts == 0  # credrank embedded neither the pool nor the query
    assert {d.metadata["credrank"]["retrieval"] for d in scope["docs"]} == {"given"}
    assert "government" in capsys.readouterr().out
    # what it shows: the blog is the closer page, and the NIH page ranks first (with size=64
    # the NIH page's cosine was negative, scored 0: the example put the blog first)
    docs = scope["docs"]
    assert [d.metadata["credrank"]["source_type"] for d in docs] == ["government", "blog"]
    sims = [d.metadata["credrank"]["score_breakdown"]["retrieval_score"] for d in docs]
    assert sims[1] > sims[0] > 0
