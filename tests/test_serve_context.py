"""``POST /context``: the ``credrank context --json`` document over HTTP (chapter 35.4), with
the command's options as JSON fields (its flags with underscores, the same validators), the
ranking's fields or a whole ``pipeline``, errors 422 naming the field, and a price that counts
the pool's second ranking and the sentences. Driven in this process (tests/serving.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from cli_inprocess import run_cli
from credrank.serve.models import ContextRequest
from serving import asgi_client, in_process
from sparse_copy import copy_index

QUERY = "does vitamin d prevent covid"
NOW = "2026-01-01"


@pytest.fixture(scope="module")
def index(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_index(demo_index_hashing, tmp_path_factory.mktemp("context") / "index")


@pytest.fixture(scope="module")
def app(index: Path) -> Iterator[Any]:
    with in_process(index) as served:
        yield served


def post(app: Any, *bodies: dict[str, Any]) -> list[httpx.Response]:
    async def scenario() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            return [await c.post("/context", json=body) for body in bodies]

    return asyncio.run(scenario())


def cli(index: Path, *args: str) -> dict[str, Any]:
    out = run_cli("context", QUERY, "--index", index, "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _same(served: dict[str, Any], printed: dict[str, Any]) -> None:
    served = dict(served)
    assert isinstance(served.pop("elapsed_ms"), float)
    assert served == printed


@pytest.mark.parametrize(("body", "args"), [
    ({}, []),
    ({"top_k": 3, "half_life": "730d", "now": NOW, "format": "plain", "cite": False},
     ["--top-k", "3", "--half-life", "730d", "--now", NOW, "--format", "plain", "--no-cite"]),
    ({"top_k": 4, "half_life": 365, "now": NOW, "undated": "exclude", "priors": "aggressive",
      "format": "json", "text": "snippet"},
     ["--top-k", "4", "--half-life", "365", "--now", NOW, "--undated", "exclude", "--priors",
      "aggressive", "--format", "json", "--text", "snippet"]),
    ({"top_k": 2, "granularity": "sentence", "now": NOW, "source_tier": "type",
      "freshness": "half_life=1y"},
     ["--top-k", "2", "--granularity", "sentence", "--now", NOW, "--source-tier", "type",
      "--freshness", "half_life=1y"]),
])
def test_context_is_the_commands_document(app: Any, demo_index_hashing: Path,
                                           body: dict[str, Any], args: list[str]) -> None:
    """The same options give the same document as ``credrank context --json`` (``now`` given:
    the clock is one), ``elapsed_ms`` added as ``/search`` adds it."""
    body = {"query": QUERY, **body}
    if "now" not in body:
        body["now"], args = NOW, [*args, "--now", NOW]
    (got,) = post(app, body)
    assert got.status_code == 200, got.text
    _same(got.json(), cli(demo_index_hashing, *args))  # the served index is a copy of it


def test_context_defaults_and_replay(app: Any) -> None:
    """5 passages unless top_k or a spec says; the response's pipeline replays the ranking."""
    first, = post(app, {"query": QUERY, "now": NOW, "half_life": "1y"})
    assert first.status_code == 200, first.text
    doc = first.json()
    assert len(doc["passages"]) == 5 and doc["pipeline"]["top_k"] == 5
    # null is not sent: the context's default too (it gave /search's 10)
    null, = post(app, {"query": QUERY, "top_k": None})
    assert len(null.json()["passages"]) == 5 and null.json()["pipeline"]["top_k"] == 5
    assert doc["cite"] is True and doc["format"] == "cag" and doc["prompt"].startswith("Answer")
    again, fewer = post(app, {"query": QUERY, "now": NOW, "half_life": "1y",
                              "pipeline": doc["pipeline"]},
                        {"query": QUERY, "now": NOW, "pipeline": doc["pipeline"], "top_k": 2})
    assert again.status_code == fewer.status_code == 200, (again.text, fewer.text)
    assert [p["doc_id"] for p in again.json()["passages"]] == [
        p["doc_id"] for p in doc["passages"]]
    assert again.json()["prompt"] == doc["prompt"]
    assert len(fewer.json()["passages"]) == 2


@pytest.mark.parametrize(("body", "field", "said"), [
    ({"format": "xml"}, "format", "expected one of cag, json, plain"),
    ({"granularity": "paragraph"}, "granularity", "expected one of document, sentence"),
    ({"half_life": 0}, "half_life", "expected a positive, finite half-life"),
    ({"half_life": "soon"}, "half_life", "expected a duration such as 365d"),
    ({"now": "yesterday"}, "now", "expected an ISO 8601 date"),
    ({"undated": "sometimes"}, "undated", "expected one of neutral, penalty, exclude"),
    ({"undated": "exclude"}, "undated", "only with half_life"),
    ({"source_tier": " "}, "source_tier", "expected auto, type or a factor name"),
    ({"source_tier": "reliability"}, "source_tier", "the ranked batch has no factor"),
    ({"text": "none"}, "text", "format cag prints the passages' text"),
    ({"text": "none", "format": "json", "granularity": "sentence"}, "text", "granularity"),
    ({"lexical": True}, "lexical", "context needs dense retrieval"),
    ({"pipeline": {"credrank_pipeline": 1, "retrieval": "bm25"}}, "pipeline.retrieval",
     "context needs dense retrieval"),
    ({"top_k": 0}, "top_k", "expected an integer in [1,"),
    ({"cite": "yes"}, "cite", "expected true or false"),
    ({"now": "2020-01-01", "freshness": "half_life=1y,now=2021-01-01"}, "freshness.now",
     "expected no now of its own or the context's now 2020-01-01, got '2021-01-01'"),
    ({"now": "2020-01-01", "pipeline": {"credrank_pipeline": 1, "stages": [
        {"stage": "freshness", "half_life": "1y", "now": "2021-01-01"}]}},
     "pipeline.stages[0].now", "expected no now of its own"),
])
def test_context_errors_name_the_field(app: Any, body: dict[str, Any], field: str,
                                       said: str) -> None:
    (got,) = post(app, {"query": QUERY, **body})
    assert got.status_code == 422, got.text
    error = got.json()
    assert [e["field"] for e in error["errors"]] == [field], error
    assert said in error["detail"] and error["detail"].startswith(field)


def test_context_is_priced_with_its_second_ranking_and_sentences(
        app: Any, demo_index_hashing: Path, tmp_path: Path) -> None:
    state = app.state.service
    req = ContextRequest.model_validate({"query": QUERY, "top_k": 5, "fetch_k": 200})
    plan = state.plan(req)
    ranking = state.budget(plan).total
    both = state.context_budget(plan, pool_ranking=True, sentences=True)
    assert both.total > ranking
    assert any(k.startswith("the pool ranked again") for k in both.parts)
    assert any(k.startswith("embedding the sentences of 5 passages") for k in both.parts)
    # a budget the ranking fits and the context does not: 422
    own = copy_index(demo_index_hashing, tmp_path / "index")
    with in_process(own, max_request_cost=(ranking + both.total) / 2) as tight:
        ok, refused = post(tight, {"query": QUERY, "top_k": 5, "fetch_k": 200},
                           {"query": QUERY, "top_k": 5, "fetch_k": 200, "half_life": "1y",
                            "granularity": "sentence"})
    assert ok.status_code == 200, ok.text
    # named by the field of its dearest part: the sentences grow with top_k, the rest with
    # fetch_k
    sentences = sum(v for k, v in both.parts.items() if k.startswith("embedding the sentences"))
    field = "top_k" if sentences * 2 >= both.total else "fetch_k"
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == field
    assert "this context is estimated at" in refused.json()["detail"]
    # without sentences, the pool's second ranking costs most: fetch_k (priced whole first;
    # /search's own check had suggested a fetch_k this ranking then put over again)
    pooled = state.context_budget(plan, pool_ranking=True, sentences=False)
    with in_process(own, max_request_cost=(ranking + pooled.total) / 2) as tight:
        refused, = post(tight, {"query": QUERY, "top_k": 5, "fetch_k": 200,
                                "half_life": "1y"})
    assert refused.status_code == 422 and refused.json()["errors"][0]["field"] == "fetch_k"


def test_an_over_budget_sentence_context_names_top_k(demo_index_hashing: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The sentences' embedding grows with top_k: the 422 named fetch_k, which the client
    had already brought down to top_k. (Their price made dear, as MiniLM's is.)"""
    import credrank.serve.work as work

    monkeypatch.setattr(work, "embed_units", lambda name, lengths: 100.0 * len(lengths))
    own = copy_index(demo_index_hashing, tmp_path / "index")
    with in_process(own, max_request_cost=300) as tight:
        refused, = post(tight, {"query": QUERY, "top_k": 5, "fetch_k": 5,
                                "granularity": "sentence"})
    assert refused.status_code == 422, refused.text
    assert refused.json()["errors"][0]["field"] == "top_k"
    assert refused.json()["detail"].startswith("top_k: this context is estimated at")
    assert "send a smaller top_k, or granularity document" in refused.json()["detail"]


def test_context_in_the_openapi(app: Any) -> None:
    async def scenario() -> httpx.Response:
        async with asgi_client(app) as c:
            return await c.get("/openapi.json")

    spec = asyncio.run(scenario()).json()
    body = spec["paths"]["/context"]["post"]["requestBody"]
    assert body["content"]["application/json"]["schema"]["$ref"] == \
        "#/components/schemas/ContextRequest"
    fields = spec["components"]["schemas"]["ContextRequest"]["properties"]
    assert {"query", "pipeline", "top_k", "format", "granularity", "half_life", "now",
            "undated", "source_tier", "cite", "text"} <= set(fields)
    assert "passages" in spec["components"]["schemas"]["ContextResponse"]["properties"]
