"""The service's request path (credrank.serve.dispatch): ``POST /search`` and ``POST /rerank``
straight from the guards to their endpoint, everything else through FastAPI's stack; the same
answers, errors and log lines either way. In process (tests/serving.py ``in_process``)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware.cors import CORSMiddleware
from starlette.routing import Mount

from credrank.serve.dispatch import DirectRoutes, find_handler
from credrank.serve.logs import ACCESS_LOGGER
from serving import asgi_client, in_process
from sparse_copy import copy_index

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
QUERY = "does vitamin d prevent covid"


@pytest.fixture
def where(demo_index_hashing: Path, tmp_path: Path) -> Path:
    return copy_index(demo_index_hashing, tmp_path / "index")


def access_records(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.fields for r in caplog.records  # type: ignore[attr-defined]
            if r.name == ACCESS_LOGGER]


def test_find_handler_takes_a_status_code_first_then_the_classes_in_order() -> None:
    by_status, by_http, by_value, by_lookup = object(), object(), object(), object()
    handlers = {404: by_status, HTTPException: by_http, ValueError: by_value,
                LookupError: by_lookup}
    assert find_handler(handlers, HTTPException(404)) is by_status
    assert find_handler(handlers, HTTPException(409)) is by_http
    assert find_handler(handlers, KeyError("k")) is by_lookup  # KeyError → LookupError
    assert find_handler(handlers, UnicodeDecodeError("utf-8", b"", 0, 1, "x")) is by_value
    assert find_handler(handlers, RuntimeError("x")) is None


def direct_routes(app: Any) -> DirectRoutes:
    """The DirectRoutes layer of ``app``'s request path (built by a first request)."""
    stack = app.middleware_stack
    while stack is not None and not isinstance(stack, DirectRoutes):
        stack = getattr(stack, "app", None)
    assert isinstance(stack, DirectRoutes)
    return stack


def test_the_direct_path_is_taken_and_answers_as_the_router_would(
        where: Path, caplog: pytest.LogCaptureFixture) -> None:
    """/search, /rerank and /context answer without FastAPI's stack, their errors by the app's
    handlers (422 in FastAPI's shape); other requests go through it (405 for a GET /search, a
    redirect for /search/, 404 elsewhere); every request logs its route template."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    with in_process(where, tables=(DEMO / "domains.csv",)) as app:
        async def scenario() -> None:
            async with asgi_client(app) as c:
                assert (await c.get("/healthz")).status_code == 200  # builds the stack
                direct = direct_routes(app)
                assert set(direct.routes) == {"/search", "/rerank", "/context",
                                              "/rerank/context"}
                fallback, seen = direct.fallback, []

                async def counted(scope: Any, receive: Any, send: Any) -> None:
                    seen.append((scope["method"], scope["path"]))
                    await fallback(scope, receive, send)

                direct.fallback = counted
                ok = await c.post("/search", json={"query": QUERY, "top_k": 3})
                assert ok.status_code == 200 and len(ok.json()["hits"]) == 3
                reranked = await c.post("/rerank", json={"query": QUERY, "candidates": [
                    {"id": "a", "text": "vitamin d and covid", "url": "https://nih.gov/a"}]})
                assert reranked.status_code == 200, reranked.text
                bad = await c.post("/search", json={"query": QUERY, "top_k": "many"})
                assert bad.status_code == 422
                assert bad.json()["errors"][0]["field"] == "top_k"
                assert bad.json()["errors"][0]["msg"] == 'expected an integer, got "many"'
                limit = await c.post("/search", json={"query": QUERY, "top_k": 10_000})
                assert limit.status_code == 422 and "this service's limit" in limit.text
                assert seen == []  # none of them through FastAPI's stack
                assert (await c.get("/search")).status_code == 405
                slash = await c.post("/search/", json={"query": QUERY})
                assert slash.status_code == 307 and slash.headers["location"].endswith("/search")
                assert (await c.post("/nowhere", json={})).status_code == 404
                assert seen == [("GET", "/search"), ("POST", "/search/"), ("POST", "/nowhere")]

        asyncio.run(scenario())
    records = access_records(caplog)
    assert [(r["route"], r["status"]) for r in records] == [
        ("/healthz", 200), ("/search", 200), ("/rerank", 200), ("/search", 422),
        ("/search", 422), ("/search", 405), ("/search/", 307), (None, 404)]


def test_an_unexpected_error_of_a_direct_route_is_a_500_and_logged_as_one(
        where: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    with in_process(where, tables=(DEMO / "domains.csv",)) as app:
        def broken(*_: Any, **__: Any) -> dict[str, Any]:
            raise RuntimeError("a bug in the search")

        app.state.service.search = broken

        async def scenario() -> httpx.Response:
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://app") as c:
                return await c.post("/search", json={"query": QUERY})

        got = asyncio.run(scenario())
    assert got.status_code == 500
    assert [(r["route"], r["status"]) for r in access_records(caplog)] == [("/search", 500)]


def test_mounted_under_a_prefix_the_same_routes_and_guards_apply(
        where: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Mounted under a prefix (a root_path), the direct routes, their handlers and every
    guard apply to the paths under it. Before, the guards matched the raw path: a write to
    /api/index went through without the API key, and a text/plain body was parsed. A request
    a guard refuses is logged with the path it was sent to (before: no route)."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    with in_process(where, tables=(DEMO / "domains.csv",), api_key="k3y") as app:
        outer = Starlette(routes=[Mount("/api", app=app)])

        async def scenario() -> None:
            async with asgi_client(outer) as c:
                direct = await c.post("/api/search", json={"query": QUERY, "top_k": 3})
                assert direct.status_code == 200, direct.text
                assert len(direct.json()["hits"]) == 3
                bad = await c.post("/api/search", json={"query": QUERY, "top_k": "many"})
                assert bad.status_code == 422
                assert bad.json()["errors"][0]["field"] == "top_k"
                typed = await c.post("/api/search", content=b'{"query": "x"}',
                                     headers={"content-type": "text/plain"})
                assert typed.status_code == 415
                write = {"documents": [{"id": "m1", "text": "a text", "url": "https://a.org/m"}]}
                refused = await c.post("/api/index", json=write)
                assert refused.status_code == 401, refused.text
                assert (await c.post("/api/index/", json=write)).status_code == 401
                done = await c.post("/api/index", json=write, headers={"x-api-key": "k3y"})
                assert done.status_code == 200 and done.json()["indexed"] == 1

        asyncio.run(scenario())
    assert [(r["route"], r["status"]) for r in access_records(caplog)] == [
        ("/search", 200), ("/search", 422), ("/search", 415), ("/index", 401),
        ("/index", 401), ("/index", 200)]


def test_middleware_an_application_adds_applies_to_the_direct_routes_too(where: Path) -> None:
    """An application that embeds the service and adds CORS gets it on /search as on every
    other route (the direct path runs inside the added middleware)."""
    with in_process(where, tables=(DEMO / "domains.csv",)) as app:
        app.add_middleware(CORSMiddleware, allow_origins=["https://example.org"],
                           allow_methods=["GET", "POST"])

        async def scenario() -> None:
            async with asgi_client(app) as c:
                origin = {"origin": "https://example.org"}
                searched = await c.post("/search", json={"query": QUERY}, headers=origin)
                health = await c.get("/healthz", headers=origin)
                for got in (searched, health):
                    assert got.status_code == 200
                    assert got.headers["access-control-allow-origin"] == "https://example.org"
                preflight = await c.options("/search", headers={
                    **origin, "access-control-request-method": "POST"})
                assert preflight.status_code == 200

        asyncio.run(scenario())


def test_a_static_file_is_logged_under_its_path(where: Path,
                                                caplog: pytest.LogCaptureFixture) -> None:
    """The /static mount extends the scope's root_path on its way: GET /static/app.js was
    logged as /app.js, a route that does not exist."""
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    with in_process(where, tables=(DEMO / "domains.csv",)) as app:
        async def scenario() -> None:
            async with asgi_client(app) as c:
                assert (await c.get("/static/app.js")).status_code == 200

        asyncio.run(scenario())
    assert [r["route"] for r in access_records(caplog)] == ["/static/app.js"]


def test_the_web_page_and_its_files_carry_the_page_headers(where: Path) -> None:
    """GET and HEAD of the page, and its files: revalidated at each load (no-cache), never
    sniffed, and a policy that allows nothing from elsewhere; the page answers 304 to its
    own ETag as /static does (it answered 200 and HEAD / was a 405)."""
    from credrank.serve.app import PAGE_HEADERS

    with in_process(where, tables=(DEMO / "domains.csv",)) as app:
        async def scenario() -> None:
            async with asgi_client(app) as c:
                for path in ("/", "/static/app.js", "/static/app.css"):
                    got = await c.get(path)
                    assert got.status_code == 200, path
                    for name, value in PAGE_HEADERS.items():
                        assert got.headers[name] == value, (path, name)
                    head = await c.head(path)
                    assert head.status_code == 200 and head.content == b"", path
                    assert head.headers["etag"] == got.headers["etag"]
                    again = await c.get(path, headers={"if-none-match": got.headers["etag"]})
                    assert again.status_code == 304, path
                page = await c.get("/")
                assert page.headers["content-type"].startswith("text/html")
                assert b"<script" in page.content and b"<script>" not in page.content

        asyncio.run(scenario())


def _call(app: Any, path: str, headers: list[tuple[bytes, bytes]] | None = None
          ) -> list[dict[str, Any]]:
    """The messages ``app`` sends for ``POST path``."""
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": path, "root_path": "",
             "headers": headers or [], "query_string": b""}
    asyncio.run(app(scope, receive, send))
    return sent


def test_a_request_cancelled_before_its_answer_gets_a_json_503_saying_what_it_did() -> None:
    from credrank.serve.limits import MAY_BE_APPLIED, NOT_APPLIED, CutShortMiddleware

    def cancelled(read: bool, said: str | None = None) -> Any:
        async def app(scope: Any, receive: Any, send: Any) -> None:
            if read:  # the whole body arrived, then the work was cut
                await receive()
            raise asyncio.CancelledError(*([said] if said else []))
        return app

    for app, path, headers, says in (
            (cancelled(True), "/search", None, "it was cancelled and changed nothing"),
            (cancelled(True, MAY_BE_APPLIED), "/feedback", [(b"idempotency-key", b"k1")],
             "may still be applied: retry with the same Idempotency-Key"),
            (cancelled(True), "/feedback", None, "sent without an Idempotency-Key"),
            # the body never all came, or the work stopped before its commit: not applied
            (cancelled(False), "/feedback", None, "not applied: its body had not all arrived"),
            (cancelled(True, NOT_APPLIED), "/feedback", None,
             "not applied: it was cancelled before it changed anything")):
        start, body = _call(CutShortMiddleware(app, write_paths=frozenset({"/feedback"})),
                            path, headers)
        assert start["status"] == 503 and (b"connection", b"close") in start["headers"]
        doc = json.loads(body["body"])
        assert doc["error"] == "unavailable" and says in doc["detail"], doc

    async def half(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        raise asyncio.CancelledError

    with pytest.raises(asyncio.CancelledError):  # part of an answer went out: no second one
        _call(CutShortMiddleware(half, write_paths=frozenset()), "/search")
