"""Inputs every rerank door takes alike (``rerank()``, ``Searcher.rerank``, ``POST /rerank``): a
pool that mixes URLs without a host (file paths, ``ftp://``) with normal ones, in either order;
an ambiguous date refused without naming an option these doors do not have; the spec keys of
a door that retrieves refused by the library."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from credrank.index.embed import get_embedder
from credrank.pipeline.spec import SpecError
from credrank.rerank import CandidateError, rerank
from credrank.searcher import Searcher
from serving import asgi_client, in_process
from sparse_copy import copy_index

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
QUERY = "does vitamin d prevent covid"
ODD = ["ftp://x.org/a", "/home/u/doc.pdf", "https://"]


def pools() -> list[list[dict[str, Any]]]:
    """Each URL without a host before a normal URL, and after it."""
    out = []
    for odd in ODD:
        a = {"id": "odd", "text": "vitamin d and covid", "url": odd, "score": 0.5}
        b = {"id": "nih", "text": "vitamin d trial", "url": "https://nih.gov/a", "score": 0.4}
        out += [[a, b], [b, a]]
    return out


def check(types: dict[str, str]) -> None:
    assert types == {"odd": "unknown", "nih": "government"}


def test_a_mixed_pool_ranks_through_the_library_and_the_searcher(
        demo_index_hashing: Path) -> None:
    """It was ``KeyError: 'url_error'`` when the URL without a host came first."""
    emb = get_embedder("hashing")
    with Searcher.open(demo_index_hashing, tables=[DEMO / "domains.csv"]) as searcher:
        for pool in pools():
            result = rerank(QUERY, pool, emb)
            check(dict(zip(result.doc_ids, result.column("source_type"), strict=True)))
            errors = dict(zip(result.doc_ids, result.column("url_error"), strict=True))
            assert errors["odd"] and errors["nih"] is None
            hits = searcher.rerank_json(QUERY, pool)["hits"]
            check({h["doc_id"]: h["source_type"] for h in hits})
            # the reason reaches the hit too (it was in the adapters' breakdown only)
            said = {h["doc_id"]: h.get("url_error") for h in hits}
            assert said["odd"] and said["nih"] is None and "url_error" not in hits[
                [h["doc_id"] for h in hits].index("nih")]


def test_a_mixed_pool_ranks_through_post_rerank(demo_index_hashing: Path,
                                                tmp_path: Path) -> None:
    """It was an HTTP 500."""
    where = copy_index(demo_index_hashing, tmp_path / "index")

    async def scenario(app: Any) -> list[httpx.Response]:
        async with asgi_client(app) as c:
            return [await c.post("/rerank", json={"query": QUERY, "candidates": pool})
                    for pool in pools()]

    with in_process(where, tables=(DEMO / "domains.csv",)) as app:
        answers = asyncio.run(scenario(app))
    for got in answers:
        assert got.status_code == 200, got.text
        check({h["doc_id"]: h["source_type"] for h in got.json()["hits"]})
        assert [bool(h.get("url_error")) for h in got.json()["hits"]] == [
            h["doc_id"] == "odd" for h in got.json()["hits"]]


def test_an_ambiguous_date_names_no_date_order_at_a_rerank_door(demo_index_hashing: Path,
                                                                tmp_path: Path) -> None:
    """``date_order`` is an option of ``credrank index`` and ``POST /index`` only."""
    pool = [{"id": "a", "text": "vitamin d", "url": "https://nih.gov/a",
             "published_at": "2/11/20", "score": 0.5}]
    expected = ("expected a date that reads one way, got '2/11/20' (2020-02-11 month first or "
                "2020-11-02 day first; write it as ISO 8601)")
    with pytest.raises(CandidateError, match=re.escape(f"candidates[0].published_at: "
                                                       f"{expected}")):
        rerank(QUERY, pool, "hashing")
    where = copy_index(demo_index_hashing, tmp_path / "index")

    async def scenario(app: Any) -> httpx.Response:
        async with asgi_client(app) as c:
            return await c.post("/rerank", json={"query": QUERY, "candidates": pool})

    with in_process(where) as app:
        got = asyncio.run(scenario(app))
    assert got.status_code == 422
    assert expected in got.text and "date_order" not in got.text


@pytest.mark.parametrize(("key", "value"), [("retrieval", "bm25"), ("unit", "passage"),
                                            ("pushdown", True)])
def test_rerank_refuses_spec_keys_of_a_door_that_retrieves(key: str, value: Any) -> None:
    pool = [{"id": "a", "text": "vitamin d", "url": "https://nih.gov/a", "score": 0.5}]
    with pytest.raises(SpecError, match=rf"^spec: {key}: expected .*, got .*: .*retrieved "
                                        rf"elsewhere"):
        rerank(QUERY, pool, "hashing", {key: value})
    assert len(rerank(QUERY, pool, "hashing", {"pushdown": False, "retrieval": "dense"})) == 1


def test_the_searcher_and_post_rerank_refuse_them_alike(demo_index_hashing: Path,
                                                        tmp_path: Path) -> None:
    """``Searcher.rerank`` reranked a ``retrieval: bm25`` or ``unit: passage`` spec as a dense
    one without a word, and ``POST /rerank`` refused only ``pushdown: true``."""
    pool = [{"id": "a", "text": "vitamin d", "url": "https://nih.gov/a", "score": 0.5}]
    keys = [("retrieval", "bm25"), ("unit", "passage"), ("pushdown", True)]
    with Searcher.open(demo_index_hashing) as searcher:
        for key, value in keys:
            with pytest.raises(SpecError, match=rf"^spec: {key}: expected "):
                searcher.rerank(QUERY, pool, {key: value})
    where = copy_index(demo_index_hashing, tmp_path / "index")

    async def scenario(app: Any) -> list[httpx.Response]:
        async with asgi_client(app) as c:
            return [await c.post("/rerank", json={"query": QUERY, "candidates": pool,
                                                  "pipeline": {key: value}})
                    for key, value in keys]

    with in_process(where) as app:
        answers = asyncio.run(scenario(app))
    for (key, _), got in zip(keys, answers, strict=True):
        assert got.status_code == 422, got.text
        assert got.json()["errors"][0]["field"] == f"pipeline.{key}"
        assert got.json()["detail"].startswith(f"pipeline.{key}: expected ")


def test_a_long_title_is_cut_as_indexing_cuts_it() -> None:
    """A candidate's title over half a passage was embedded whole before each chunk, so the
    model cut the chunk's own text (listed as truncated); it is cut to half a passage, as
    ``credrank index`` embeds it, and no chunk overflows the window."""
    minilm = get_embedder("minilm")
    title = " ".join(["headline"] * 300)
    pool = [{"id": "long-title", "title": title, "text": "Vitamin D trial results. " * 60},
            {"id": "short", "text": "vitamin d and covid"}]
    result = rerank(QUERY, pool, minilm, retrieval="cosine")
    assert result.info["retrieval"]["truncated"] == []
    assert sorted(result.doc_ids) == ["long-title", "short"]
