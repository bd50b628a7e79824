"""``POST /rerank/context``: the credibility-annotated context (chapter 35.4) of candidates
retrieved elsewhere over HTTP: the body of ``/rerank`` with the context's own fields of
``/context`` (the same validators), answering the ``/context`` document as
:meth:`credrank.searcher.Searcher.rerank_context` builds it; errors 422 naming the field; a
price that counts the embedding a context cannot skip (it never reads scores), the pool's
second ranking and the sentences. Driven in this process (tests/serving.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from credrank.index.embed import get_embedder
from credrank.searcher import Searcher
from credrank.serve.models import RerankContextRequest, RerankRequest
from serving import asgi_client, in_process
from sparse_copy import copy_index

QUERY = "does vitamin d prevent covid"
NOW = "2026-01-01"
ROUTE = "/rerank/context"

#: candidates a client retrieved elsewhere: provenance, dates (two undated), some scores
CANDIDATES: list[dict[str, Any]] = [
    {"id": "nejm", "text": "Vitamin D supplementation did not prevent COVID-19 infection in "
     "a randomised trial of adults.", "url": "https://www.nejm.org/doi/10.1056/x",
     "published_at": "2022-03-01", "score": 12.0},
    {"id": "blog", "text": "Vitamin D cures covid, doctors hate this one trick.",
     "url": "https://vitamin-truth.blogspot.com/2020/04/cure.html", "score": 14.0},
    {"id": "cdc", "text": "Vitamin D and COVID-19: what the evidence says about prevention.",
     "url": "https://www.cdc.gov/vitd", "published_at": "2015-01-01", "score": 9.5},
    {"id": "news", "text": "Does vitamin D prevent covid? Trials so far say no.",
     "url": "https://www.reuters.com/health/vitd", "published_at": "2024-11-20",
     "metadata": {"k": "v"}},
    {"id": "nih", "text": "Vitamin D levels and respiratory infections: a review.",
     "url": "https://www.nih.gov/news/vitd-review", "published_at": "2019-06-01"},
    {"id": "forum", "text": "I take vitamin D every day and never got covid.",
     "url": "https://www.reddit.com/r/covid/x", "published_at": "2021-02-02", "score": 3.0},
    {"id": "who", "text": "Coronavirus disease: myths about vitamin D and prevention.",
     "url": "https://www.who.int/myths", "published_at": "2023-08-15"},
    {"id": "undated", "text": "Vitamin D intake and covid outcomes in older adults.",
     "url": "https://www.nhs.uk/vitd"},
]


@pytest.fixture(scope="module")
def index(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_index(demo_index_hashing, tmp_path_factory.mktemp("rerank-context") / "index")


@pytest.fixture(scope="module")
def app(index: Path) -> Iterator[Any]:
    with in_process(index) as served:
        yield served


@pytest.fixture(scope="module")
def searcher(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> Iterator[Searcher]:
    """The library over its own copy of the served index (the same embedder and typer)."""
    where = copy_index(demo_index_hashing, tmp_path_factory.mktemp("library") / "index")
    with Searcher.open(where) as opened:
        yield opened


def post(app: Any, *bodies: dict[str, Any], path: str = ROUTE) -> list[httpx.Response]:
    async def scenario() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            return [await c.post(path, json=body) for body in bodies]

    return asyncio.run(scenario())


def _body(**fields: Any) -> dict[str, Any]:
    return {"query": QUERY, "candidates": CANDIDATES, "now": NOW, **fields}


@pytest.mark.parametrize(("fields", "library"), [
    ({}, {}),
    ({"top_k": 3, "half_life": "730d", "format": "plain", "cite": False,
      "priors": "aggressive"},
     {"half_life": "730d", "fmt": "plain", "cite": False}),
    ({"top_k": 4, "half_life": 365, "undated": "exclude", "format": "json", "text": "snippet",
      "retrieval": "cosine"},
     {"half_life": 365, "undated": "exclude", "fmt": "json", "text": "snippet",
      "retrieval": "cosine"}),
    ({"top_k": 2, "granularity": "sentence", "source_tier": "type",
      "freshness": "half_life=1y"},
     {"granularity": "sentence", "source_tier": "type"}),
])
def test_the_document_is_the_librarys(app: Any, searcher: Searcher, fields: dict[str, Any],
                                      library: dict[str, Any]) -> None:
    """The same candidates, ranking and tier options give the document of
    ``Searcher.rerank_context(...).to_json(format, cite)``, ``elapsed_ms`` added."""
    (got,) = post(app, _body(**fields))
    assert got.status_code == 200, got.text
    served = got.json()
    assert isinstance(served.pop("elapsed_ms"), float)
    fmt, cite = library.pop("fmt", "cag"), library.pop("cite", True)
    doc = searcher.rerank_context(QUERY, CANDIDATES, served["pipeline"], now=NOW,
                                  **library).to_json(fmt, cite)
    assert served == json.loads(json.dumps(doc))
    assert served["pipeline"]["top_k"] == fields.get("top_k", 5)
    assert served["settings"]["fetch_k"] == len(CANDIDATES)  # the pool is the candidates


def test_top_k_is_the_contexts_and_the_prompt_is_cag(app: Any) -> None:
    """5 passages unless top_k or a spec says (null is not sent); the CAG prompt labels each
    passage and cites its source."""
    first, null, spec = post(app, _body(), _body(top_k=None),
                             _body(pipeline={"credrank_pipeline": 1, "top_k": 3}))
    for got, k in ((first, 5), (null, 5), (spec, 3)):
        assert got.status_code == 200, got.text
        assert len(got.json()["passages"]) == k and got.json()["pipeline"]["top_k"] == k
    doc = first.json()
    assert doc["credrank_context"] == 3 and doc["format"] == "cag" and doc["cite"] is True
    assert doc["prompt"].startswith("Answer") and QUERY in doc["prompt"]
    for passage in doc["passages"]:
        assert f"{passage['label']}:" in doc["prompt"]
        assert passage["inputs"]["source"]["url"] in doc["prompt"]
    assert doc["now"].startswith(NOW)


def test_scores_are_never_read(app: Any) -> None:
    """Every candidate has a score (``/rerank`` with ``auto`` would take them as they are):
    the context embeds the passages instead and counts the scores it did not read."""
    scored = [{**c, "score": float(i)} for i, c in enumerate(CANDIDATES)]
    context, rerank = post(app, _body(candidates=scored))[0], post(
        app, {"query": QUERY, "candidates": scored}, path="/rerank")[0]
    assert context.status_code == rerank.status_code == 200, (context.text, rerank.text)
    used = context.json()["info"]["retrieval"]
    assert used["scores_unread"] == len(scored)
    assert used["resolved"] == "cosine" and used["embedded"] == len(scored)
    assert rerank.json()["info"]["retrieval"]["resolved"] == "given"  # /rerank reads them
    partly, = post(app, _body())
    assert partly.json()["info"]["retrieval"]["scores_unread"] == sum(
        "score" in c for c in CANDIDATES)


def test_given_vectors_of_the_model_are_used(app: Any) -> None:
    """With every candidate's vector (of the index's model) and the query's, nothing is
    embedded; the tiers' similarity is the given vectors' cosine."""
    emb = get_embedder("hashing")
    vectors = emb.embed([c["text"] for c in CANDIDATES])
    query = np.asarray(emb.embed([QUERY])[0], dtype=np.float64)
    sent = [{**c, "vector": np.asarray(v, dtype=np.float64).tolist()}
            for c, v in zip(CANDIDATES, vectors, strict=True)]
    got, = post(app, _body(candidates=sent, query_vector=query.tolist(), top_k=3))
    assert got.status_code == 200, got.text
    doc = got.json()
    assert doc["info"]["retrieval"]["embedded"] == 0
    assert doc["settings"]["query_vector"] == "given"
    by_id = {c["id"]: np.asarray(v, dtype=np.float64) for c, v in zip(CANDIDATES, vectors,
                                                                       strict=True)}
    for passage in doc["passages"]:
        v = by_id[passage["doc_id"]]
        cos = float(query @ v / (np.linalg.norm(query) * np.linalg.norm(v)))
        assert passage["inputs"]["similarity"]["value"] == pytest.approx(cos, abs=1e-6)


def test_undated_exclude_refills_from_the_candidates(app: Any) -> None:
    """``undated: exclude`` with ``half_life``: a candidate of unknown age that ranks in the
    top-k is left out and reported, and the next dated candidate takes its place."""
    first = {"id": "first", "text": QUERY, "url": "https://www.cdc.gov/first"}  # cosine 1
    pool = [first, *CANDIDATES]
    got, kept = post(app, _body(candidates=pool, top_k=3, half_life="1y", undated="exclude"),
                     _body(candidates=pool, top_k=3, half_life="1y"))
    assert got.status_code == kept.status_code == 200, (got.text, kept.text)
    doc = got.json()
    assert kept.json()["passages"][0]["doc_id"] == "first"  # it ranks first when kept
    assert "first" in [e["doc_id"] for e in doc["excluded"]]
    assert len(doc["passages"]) == 3  # refilled from the next candidates
    undated = {c["id"] for c in pool if "published_at" not in c}
    assert not undated & {p["doc_id"] for p in doc["passages"]}
    assert [p["inputs"]["freshness"]["date"] is not None for p in doc["passages"]] == [True] * 3


def test_a_pipeline_with_freshness_takes_the_contexts_now(app: Any) -> None:
    """``now`` is the freshness stage's ``T`` too (one clock); a stage with another ``now``
    is a 422 at its place in the pipeline."""
    stages = ["prior", {"stage": "freshness", "half_life": "1y"}, "combine", "topk"]
    got, other = post(
        app, _body(pipeline={"credrank_pipeline": 1, "top_k": 3, "stages": stages},
                   half_life="1y"),
        _body(pipeline={"credrank_pipeline": 1, "stages": [
            "prior", {"stage": "freshness", "half_life": "1y", "now": "2020-01-01"}]}))
    assert got.status_code == 200, got.text
    doc = got.json()
    fresh = next(s for s in doc["pipeline"]["stages"] if s["stage"] == "freshness")
    assert fresh["now"] == NOW and doc["now"].startswith(NOW)
    assert doc["info"]["freshness"]["now"].startswith(NOW)
    assert other.status_code == 422, other.text
    assert [e["field"] for e in other.json()["errors"]] == ["pipeline.stages[1].now"]
    assert "expected no now of its own or the context's now" in other.json()["detail"]


@pytest.mark.parametrize(("fields", "field", "said"), [
    ({"retrieval": "given"}, "retrieval", "expected auto or cosine for a context, got 'given'"),
    ({"retrieval": "bm25"}, "retrieval", "expected auto or cosine for a context, got 'bm25'"),
    ({"format": "xml"}, "format", "expected one of cag, json, plain"),
    ({"half_life": "soon"}, "half_life", "expected a duration such as 365d"),
    ({"now": "yesterday"}, "now", "expected an ISO 8601 date"),
    ({"undated": "exclude"}, "undated", "only with half_life"),
    ({"source_tier": "reliability"}, "source_tier", "the ranked batch has no factor"),
    ({"text": "none"}, "text", "format cag prints the passages' text"),
    ({"granularity": "paragraph"}, "granularity", "expected one of document, sentence"),
    ({"top_k": 0}, "top_k", "expected an integer in [1,"),
    ({"fetch_k": 20}, "fetch_k", "Extra inputs are not permitted"),  # as /rerank
    # the context's reason (its tiers bin cosines), not the rerank's, which offered 'given'
    ({"pipeline": {"credrank_pipeline": 1, "retrieval": "bm25"}}, "pipeline.retrieval",
     "context needs dense retrieval (relevance tiers bin cosine similarities"),
    ({"candidates": [*CANDIDATES[:3], {"id": "nejm", "text": "again"}]}, "candidates[3].id",
     "repeats"),
    ({"candidates": [*CANDIDATES[:2], {"id": "v", "text": "t", "vector": [1.0, 2.0]}],
      "retrieval": "cosine"}, "candidates[2].vector", "expected"),
    ({"candidates": [{**CANDIDATES[0], "published_at": "someday"}]},
     "candidates[0].published_at", ""),
])
def test_errors_name_the_field(app: Any, fields: dict[str, Any], field: str,
                               said: str) -> None:
    (got,) = post(app, _body(**fields))
    assert got.status_code == 422, got.text
    error = got.json()
    assert [e["field"] for e in error["errors"]] == [field], error
    assert said in error["detail"] and error["detail"].startswith(field)


def test_a_context_prices_the_embedding_it_cannot_skip(app: Any) -> None:
    """A context never reads scores: passages without a usable vector are priced as
    embedded, where ``/rerank`` with ``auto`` would take every candidate's score."""
    state = app.state.service
    scored = [{**c, "score": 1.0} for c in CANDIDATES]
    req = RerankContextRequest.model_validate({"query": QUERY, "candidates": scored})
    lengths = state.rerank_embeds(req.candidates, req.retrieval, False, read_scores=False)
    assert lengths == [len(c["text"]) + 1 for c in scored]  # title\ntext, no title
    rerank = RerankRequest.model_validate({"query": QUERY, "candidates": scored})
    assert state.rerank_embeds(rerank.candidates, rerank.retrieval, False) == []


def test_over_the_budget_is_a_422_naming_the_field(app: Any, demo_index_hashing: Path,
                                                   tmp_path: Path) -> None:
    """Priced as ``/rerank`` prices its candidates, plus the pool ranked again
    (``half_life``) and the sentences (``granularity: sentence``): a budget the ranking fits
    and the context does not is a 422 naming ``candidates`` with the estimate."""
    many = [{"id": f"c{i}", "text": f"vitamin d and covid, passage {i} " * 20,
             "url": f"https://example{i % 7}.org/p{i}"} for i in range(300)]
    ranking_fields = {"top_k": 5, "select": "mmr", "select_params": {"diversity": 0.5}}
    state = app.state.service
    req = RerankContextRequest.model_validate(
        {"query": QUERY, "candidates": many, **ranking_fields})
    plan = state.plan(req, pool=len(many), pool_field="candidates")
    lengths = state.rerank_embeds(req.candidates, req.retrieval, True, read_scores=False)
    ranking = state.budget(plan, embed_lengths=lengths).total
    context = state.context_budget(plan, pool_ranking=True, sentences=True,
                                   embed_lengths=lengths,
                                   passage_chars=[len(c["text"]) for c in many])
    assert context.total > ranking
    assert any(k.startswith("the pool ranked again") for k in context.parts)
    assert any(k.startswith("embedding the sentences of 5 passages") for k in context.parts)
    assert any(k.startswith("embedding 300 passages") for k in context.parts)
    own = copy_index(demo_index_hashing, tmp_path / "index")
    body = {"query": QUERY, "candidates": many, **ranking_fields}
    with in_process(own, max_request_cost=(ranking + context.total) / 2) as tight:
        ok, refused = post(tight, body, {**body, "half_life": "1y", "granularity": "sentence"})
    assert ok.status_code == 200, ok.text
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["field"] == "candidates"
    detail = refused.json()["detail"]
    assert detail.startswith("candidates: this context is estimated at")
    assert "the pool ranked again" in detail and "send fewer candidates" in detail


def test_a_json_body_must_say_it_is_json(app: Any) -> None:
    async def scenario() -> httpx.Response:
        async with asgi_client(app) as c:
            return await c.post(ROUTE, content=json.dumps(_body()).encode(),
                                headers={"Content-Type": "text/plain"})

    got = asyncio.run(scenario())
    assert got.status_code == 415 and got.json()["error"] == "unsupported_media_type"


def test_rerank_context_in_the_openapi(app: Any) -> None:
    async def scenario() -> httpx.Response:
        async with asgi_client(app) as c:
            return await c.get("/openapi.json")

    spec = asyncio.run(scenario()).json()
    route = spec["paths"][ROUTE]["post"]
    assert route["requestBody"]["content"]["application/json"]["schema"]["$ref"] == \
        "#/components/schemas/RerankContextRequest"
    assert route["responses"]["200"]["content"]["application/json"]["schema"]["$ref"] == \
        "#/components/schemas/ContextResponse"
    fields = spec["components"]["schemas"]["RerankContextRequest"]["properties"]
    assert {"query", "candidates", "retrieval", "query_vector", "pipeline", "top_k", "format",
            "granularity", "half_life", "now", "undated", "source_tier", "cite",
            "text"} <= set(fields)
    assert "fetch_k" not in fields and fields["retrieval"]["enum"] == ["auto", "cosine"]
