"""The adapters' credibility-annotated context (chapter 35.4): ``context(...)`` of the
LangChain, LlamaIndex and Haystack adapters, tested with the real packages (each skips with
a clear reason where its extra is not installed).

The central check per framework: the adapter's context of its documents is the one
:func:`credrank.searcher.rerank_context` builds over the same records (same tiers, same
passages in the same order, same document), with the hashing embedder.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from credrank.adapters._common import CredrankScorer
from credrank.context.build import ContextDocument
from credrank.index.embed import get_embedder
from credrank.pipeline.spec import PipelineSpec
from credrank.searcher import rerank_context

FRAMEWORKS = {"haystack": "haystack", "llamaindex": "llama_index", "langchain": "langchain_core"}
HASHING = get_embedder("hashing")
QUERY = "does vitamin d prevent covid infection"
NOW = "2024-01-01"
#: a pool with several source types, dated and undated passages and the retriever's scores
POOL: list[dict[str, Any]] = [
    {"text": "Vitamin D supplementation did not prevent COVID-19 infection in a randomised "
             "trial of adults.", "url": "https://www.nejm.org/doi/vitd", "title": "Trial",
     "published_at": "2022-03-01", "score": 0.9},
    {"text": "Vitamin D cures covid infection, doctors hate this one trick.",
     "url": "https://someblog.blogspot.com/p/vitd", "title": "Trick", "score": 0.95},
    {"text": "Vitamin D and COVID-19: what the evidence on infection says. Sunlight helps "
             "the body make it.", "url": "https://www.cdc.gov/vitd", "title": "CDC",
     "published_at": "2016-05-01", "score": 0.7},
    {"text": "Does vitamin D prevent covid? A news summary of the randomised trials.",
     "url": "https://www.reuters.com/health/vitd", "title": "News",
     "published_at": "2023-06-01", "score": 0.6},
    {"text": "Unrelated notes on gardening tomatoes in spring.",
     "url": "https://garden.example.org/tomatoes", "title": "Garden", "score": 0.1},
]
OPTIONS: dict[str, Any] = {"embedder": "hashing", "top_k": 3}


def spec(top_k: int = 3) -> PipelineSpec:
    """The pipeline the adapters run with :data:`OPTIONS` (and ``top_k``)."""
    return CredrankScorer(**OPTIONS).spec_for(top_k)


def need(extra: str) -> None:
    """Skip unless the framework of ``extra`` is installed."""
    pytest.importorskip(FRAMEWORKS[extra],
                        reason=f"the {extra} extra is not installed "
                               f"(pip install 'credrank[{extra}]')")


@pytest.fixture(autouse=True)
def _quiet_fallback() -> Iterator[None]:
    """The one-time notice that the passages were embedded (they carry no embedding)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="retrieval='auto' embedded")
        yield


def meta(row: dict[str, Any], date_key: str = "published_at") -> dict[str, Any]:
    out = {"url": row["url"], "title": row["title"], "my_key": [1, 2]}
    if "published_at" in row:
        out[date_key] = row["published_at"]
    return out


def records(pool: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pool as :func:`rerank_context`'s records, ids = positions (as the adapters')."""
    return [{"id": str(i), **row} for i, row in enumerate(pool)]


def adapter_context(framework: str, pool: list[dict[str, Any]], query: str = QUERY, *,
                    adapter: dict[str, Any] | None = None, date_key: str = "published_at",
                    scores: bool = True, **options: Any) -> ContextDocument:
    """``pool`` as ``framework``'s documents (metadata and the retriever's scores), and
    their context by the adapter configured with ``adapter`` (default :data:`OPTIONS`)."""
    need(framework)
    config = OPTIONS if adapter is None else adapter
    score = [row["score"] if scores else None for row in pool]
    if framework == "haystack":
        from haystack import Document

        from credrank.adapters.haystack import CredibilityRanker
        docs = [Document(id=f"h{i}", content=row["text"], meta=meta(row, date_key),
                         score=score[i]) for i, row in enumerate(pool)]
        return CredibilityRanker(**config).context(docs, query, **options)
    if framework == "llamaindex":
        from llama_index.core.schema import NodeWithScore, TextNode

        from credrank.adapters.llamaindex import CredibilityPostprocessor
        nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=row["text"],
                                             metadata=meta(row, date_key)), score=score[i])
                 for i, row in enumerate(pool)]
        return CredibilityPostprocessor(**config).context(nodes, query, **options)
    from langchain_core.documents import Document as LCDocument

    from credrank.adapters.langchain import CredibilityCompressor
    lc_docs = [LCDocument(page_content=row["text"],
                          metadata={**meta(row, date_key), **(
                              {} if score[i] is None else {"score": score[i]})})
               for i, row in enumerate(pool)]
    return CredibilityCompressor(**config).context(lc_docs, query, **options)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
@pytest.mark.parametrize("options", [
    {"now": NOW},
    {"now": NOW, "half_life": "365d", "undated": "exclude"},
    {"now": NOW, "half_life": 400, "granularity": "sentence", "source_tier": "type"},
    {"now": NOW, "text": "snippet", "top_k": 2},
], ids=["default", "exclude", "sentence", "snippet"])
def test_context_is_rerank_context_over_the_same_records(framework, options):
    got = adapter_context(framework, POOL, **options)
    top_k = options.get("top_k", OPTIONS["top_k"])
    rest = {k: v for k, v in options.items() if k != "top_k"}
    expected = rerank_context(QUERY, records(POOL), "hashing", spec(top_k), **rest)
    assert got.to_json("cag", True) == expected.to_json("cag", True)
    assert got.render("plain", False) == expected.render("plain", False)
    assert [p.doc_id for p in got.passages] == [p.doc_id for p in expected.passages]
    assert len(got.passages) == top_k
    # the passages are the documents at their positions, with their metadata read
    for p in got.passages:
        row = POOL[int(p.doc_id)]
        assert p.url == row["url"] and p.title == row["title"]
        if options.get("text") != "snippet":
            assert p.text == row["text"]


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_the_frameworks_scores_are_not_read(framework):
    scored = adapter_context(framework, POOL, now=NOW)
    # reversed scores: another ranking if they were read; the same context when they are not
    flipped = [{**row, "score": 1.0 - row["score"]} for row in POOL]
    other = adapter_context(framework, flipped, now=NOW)
    unscored = adapter_context(framework, POOL, now=NOW, scores=False)
    assert scored.info["retrieval"]["scores_unread"] == len(POOL)
    assert unscored.info["retrieval"]["scores_unread"] == 0
    assert scored.info["retrieval"]["resolved"] == "cosine"
    assert scored.info["retrieval"]["embedded"] == len(POOL)
    for doc in (other, unscored):
        assert [(p.doc_id, p.tier, p.similarity) for p in doc.passages] == \
            [(p.doc_id, p.tier, p.similarity) for p in scored.passages]


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_retrieval_given_is_refused_naming_retrieval(framework):
    with pytest.raises(ValueError, match=r"^retrieval: expected auto or cosine for a context, "
                                         r"got 'given'"):
        adapter_context(framework, POOL, adapter={**OPTIONS, "retrieval": "given"}, now=NOW)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_retrieval_cosine_is_taken(framework):
    got = adapter_context(framework, POOL, adapter={**OPTIONS, "retrieval": "cosine"}, now=NOW)
    expected = rerank_context(QUERY, records(POOL), "hashing", spec(),
                              retrieval="cosine", now=NOW)
    assert got.to_json() == expected.to_json()


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_undated_exclude_with_half_life_leaves_the_undated_out(framework):
    undated = {i for i, row in enumerate(POOL) if "published_at" not in row}
    shown = adapter_context(framework, POOL, now=NOW, top_k=5)
    assert undated & {int(p.doc_id) for p in shown.passages}  # shown when not excluded
    doc = adapter_context(framework, POOL, now=NOW, half_life="365d", undated="exclude",
                          top_k=4)
    kept = [int(p.doc_id) for p in doc.passages]
    assert not undated & set(kept)
    assert all(p.freshness_date is not None for p in doc.passages)
    assert {int(e.doc_id) for e in doc.excluded} <= undated and doc.excluded
    assert all("undated policy exclude" in e.reason for e in doc.excluded)
    # refilled from the pool: every dated document, fewer than four
    dated = len(POOL) - len(undated)
    assert len(kept) == min(4, dated)
    assert any(line.startswith("excluded: #") for line in doc.notes())


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_metadata_fields_mapping_is_honoured(framework):
    adapter = {**OPTIONS, "fields": {"published_at": "date"}}
    mapped = adapter_context(framework, POOL, adapter=adapter, date_key="date", now=NOW,
                             top_k=5)
    dates = {int(p.doc_id): p.freshness_date for p in mapped.passages}
    for i, row in enumerate(POOL):
        if "published_at" in row:
            assert dates[i] is not None and dates[i].startswith(row["published_at"])
        else:
            assert dates[i] is None
    # the same key without the mapping: not a date the stages read, every passage undated
    plain = adapter_context(framework, POOL, date_key="date", now=NOW, top_k=5)
    assert all(p.freshness_date is None for p in plain.passages)
    # a key named in fields that no document carries: an error naming the field and key
    with pytest.raises(ValueError, match=r"fields\.published_at.*'date'"):
        adapter_context(framework, POOL, adapter=adapter, now=NOW)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
@pytest.mark.parametrize(("options", "expected"), [
    ({"half_life": "soon"}, r"^half_life: expected a duration"),
    ({"half_life": -1}, r"^half_life: expected a positive, finite half-life"),
    ({"undated": "exclude"}, r"^undated exclude: only with half_life"),
    ({"undated": "sometimes", "half_life": 30}, r"^undated: "),
    ({"granularity": "paragraph"}, r"^granularity: expected one of document, sentence, "
                                   r"got 'paragraph'"),
    ({"text": "all"}, r"^text: expected one of full, snippet, none, got 'all'"),
    ({"text": "none", "granularity": "sentence"}, r"^text none: granularity sentence"),
    ({"now": "yesterday"}, r"^now: expected an ISO 8601 date"),
    ({"source_tier": " "}, r"^source_tier: expected auto, type or a factor name"),
    ({"top_k": 0}, r"^top_k: expected an integer in \[1, 10000000\], got 0"),
])
def test_a_bad_option_is_refused_in_a_keyword_arguments_words(framework, options, expected):
    with pytest.raises(ValueError, match=expected):
        adapter_context(framework, POOL, **options)


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_freshness_now_beside_the_contexts_is_refused_where_it_was_configured(framework):
    spec = {"top_k": 3, "stages": [{"stage": "freshness", "half_life": "365d",
                                    "now": "2020-01-01"}, "topk"]}
    with pytest.raises(ValueError, match=r"^pipeline: stages\[0\]\.now: expected no now of its "
                                         r"own or the context's now 2024-01-01"):
        adapter_context(framework, POOL, adapter={"embedder": "hashing", "pipeline": spec},
                        now=NOW)
    shortcut = {**OPTIONS, "freshness": {"half_life": "365d", "now": "2020-01-01"}}
    with pytest.raises(ValueError, match=r"^freshness\.now: expected no now of its own"):
        adapter_context(framework, POOL, adapter=shortcut, now=NOW)
    # the same now, or none of the context's: the stage's T is the context's
    same = adapter_context(framework, POOL, adapter=shortcut, now="2020-01-01")
    assert same.now.isoformat().startswith("2020-01-01")
    assert adapter_context(framework, POOL, adapter=shortcut).now == same.now


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_an_unknown_option_is_a_type_error(framework):
    with pytest.raises(TypeError, match="half_lives"):
        adapter_context(framework, POOL, half_lives="365d")


def test_llamaindex_query_bundle_embeddings_embed_nothing():
    need("llamaindex")
    from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode

    from credrank.adapters.llamaindex import CredibilityPostprocessor

    vectors = HASHING.embed([f"{row['title']}\n{row['text']}" for row in POOL])
    nodes = [NodeWithScore(node=TextNode(id_=f"n{i}", text=row["text"], metadata=meta(row),
                                         embedding=[float(x) for x in vectors[i]],
                                         excluded_embed_metadata_keys=list(meta(row))),
                           score=row["score"])
             for i, row in enumerate(POOL)]
    bundle = QueryBundle(QUERY, embedding=[float(x) for x in HASHING.embed([QUERY])[0]])
    post = CredibilityPostprocessor(**OPTIONS)
    doc = post.context(nodes, bundle, now=NOW)
    retrieval = doc.info["retrieval"]
    assert retrieval["resolved"] == "embeddings" and retrieval["query"] == "given"
    assert retrieval["scores_unread"] == len(POOL)
    expected = rerank_context(QUERY, records(POOL), "hashing", spec(), now=NOW)
    assert [(p.doc_id, p.tier) for p in doc.passages] == \
        [(p.doc_id, p.tier) for p in expected.passages]
    with pytest.raises(TypeError, match="query: expected a string or a QueryBundle"):
        post.context(nodes, 3, now=NOW)  # type: ignore[arg-type]


def test_haystack_query_embedding_and_the_documents_embeddings_embed_nothing():
    need("haystack")
    from haystack import Document

    from credrank.adapters.haystack import CredibilityRanker

    vectors = HASHING.embed([f"{row['title']}\n{row['text']}" for row in POOL])
    docs = [Document(content=row["text"], meta=meta(row), score=row["score"],
                     embedding=[float(x) for x in vectors[i]]) for i, row in enumerate(POOL)]
    q = [float(x) for x in HASHING.embed([QUERY])[0]]
    doc = CredibilityRanker(**OPTIONS).context(docs, QUERY, query_embedding=q, now=NOW)
    assert doc.info["retrieval"]["resolved"] == "embeddings"
    assert doc.info["retrieval"]["query"] == "given"
    assert doc.info["retrieval"]["embedded"] == 0


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_a_bad_document_is_named_in_the_frameworks_words(framework):
    bad = [*POOL[:2], {**POOL[2], "published_at": "not a date"}]
    items = "nodes" if framework == "llamaindex" else "documents"
    with pytest.raises(ValueError, match=rf"^{items}\[2\]\.published_at"):
        adapter_context(framework, bad, now=NOW)
