"""``credrank serve`` under hostile use (issue 23, part 6): work budgets, the heavy-request
limit, cancelled timed-out work and truthful 504s, idempotent writes, ``/index`` embedding
outside the store lock, strict JSON types.

Where timing matters the app runs in this process (tests/serving.py ``in_process``) and a
test hook holds the work at a named checkpoint (``Hold``): no sleeps, no wall-clock margins.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from credrank.serve.limits import APPLIED, CANCELLED, MAY_BE_APPLIED, NOT_APPLIED
from credrank.signals.feedback import FeedbackPriors
from serving import Deadline, Hold, asgi_client, in_process, running_server
from sparse_copy import copy_index

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
KEY = "hostile-test-key"
AUTH = {"X-API-Key": KEY}
QUERY = "does vitamin d prevent covid"
FEEDBACK = {"items": [{"source_type": "blog", "source_id": "b1", "relevant": False}],
            "reason": "hostile"}


@pytest.fixture
def app_factory(demo_index_hashing: Path, tmp_path: Path) -> Iterator[Any]:
    """``make(**config)``: an in-process app on a copy of the demo index with the key and a
    feedback store (``tmp_path / "priors"``); making another closes the previous one (a new
    server on the same index and store, as after a restart)."""
    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    FeedbackPriors(tmp_path / "priors", "current")
    opened: list[Any] = []

    def make(**config: Any) -> Any:
        while opened:
            opened.pop().__exit__(None, None, None)
        context = in_process(where, tables=(DEMO / "domains.csv",), api_key=KEY,
                             priors_store=tmp_path / "priors", **config)
        app = context.__enter__()
        opened.append(context)
        return app

    yield make
    while opened:
        opened.pop().__exit__(None, None, None)


def candidates(n: int, text: str = "vitamin d trial in adults") -> list[dict[str, Any]]:
    return [{"id": f"c{i}", "text": f"{text} {i}", "url": f"https://h{i % 40}.org/p"}
            for i in range(n)]


def run(scenario: Any) -> Any:
    return asyncio.run(scenario)


async def waited(event: Any) -> None:
    assert await asyncio.to_thread(event.wait, 60)


def version(tmp_path: Path) -> int:
    return FeedbackPriors(tmp_path / "priors").current


# -- the work budget ---------------------------------------------------------------------------

def test_coverage_over_a_large_pool_is_refused_before_any_work(app_factory: Any) -> None:
    app = app_factory()
    seen = Hold("nowhere")  # records the checkpoints, holds nothing
    app.state.service.hook = seen

    async def scenario() -> None:
        async with asgi_client(app) as c:
            got = await c.post("/rerank", json={"query": QUERY, "candidates": candidates(1000),
                                                "select": "coverage", "select_params": {
                                                    "lambda_ilad": 0.5, "lambda_coverage": 0.5}})
            assert got.status_code == 422, got.text
            body = got.json()
            assert body["errors"][0]["field"] == "candidates"
            assert body["detail"].startswith("candidates: ")
            assert "budget of 2,000" in body["detail"] and "--max-request-cost" in body["detail"]
            assert "send at most 283 candidates" in body["detail"]
            assert "select 'mmr'" in body["detail"] and "send vectors" not in body["detail"]
            assert body["cost"] == pytest.approx(24_975, abs=5) and body["budget"] == 2_000
            got = await c.post("/search", json={"query": QUERY, "top_k": 10, "fetch_k": 1000,
                                                "select": "coverage", "select_params": {
                                                    "lambda_ilad": 0.5, "lambda_coverage": 0.5}})
            assert got.status_code == 422 and got.json()["errors"][0]["field"] == "fetch_k"
            assert "a fetch_k of at most 283" in got.json()["detail"]
            small = await c.post("/rerank", json={"query": QUERY, "candidates": candidates(30),
                                                  "select": "coverage", "select_params": {
                                                      "lambda_ilad": 0.5,
                                                      "lambda_coverage": 0.5}})
            assert small.status_code == 200, small.text
            assert small.json()["info"]["select"]["selector"] == "coverage"

    run(scenario())
    assert [p for p, _ in seen.points].count("start") == 1  # only the accepted one started


def test_budget_is_configurable_and_zero_turns_it_off(app_factory: Any) -> None:
    body = {"query": QUERY, "candidates": candidates(1000), "select": "mmr",
            "select_params": {"diversity": 0.5}}

    async def post(app: Any, payload: dict[str, Any]) -> Any:
        async with asgi_client(app) as c:
            return await c.post("/rerank", json=payload)

    tight = app_factory(max_request_cost=50)
    got = run(post(tight, body))  # mmr over 1,000: 100 units
    assert got.status_code == 422 and "budget of 50" in got.json()["detail"]
    assert "send at most 691 candidates" in got.json()["detail"]  # embedding included
    assert "most: the stage mmr" in got.json()["detail"]
    long_texts = {"query": QUERY, "candidates": candidates(200, "x" * 5000)}
    got = run(post(tight, long_texts))  # every chunk priced: 200 × 5,503 characters read
    assert got.status_code == 422 and "send vectors" in got.json()["detail"]
    assert "embedding 200 passages with hashing: 110" in got.json()["detail"]
    assert got.json()["stage"] is None  # embedding costs most
    tight.state.service.config = replace(tight.state.service.config, max_request_cost=111)
    got = run(post(tight, long_texts))  # 0.1 units per 1,000 characters, chunks uncapped
    assert got.status_code == 200, got.text
    tight.state.service.config = replace(tight.state.service.config, max_request_cost=0)
    assert run(post(tight, body)).status_code == 200


def test_heavy_requests_beyond_the_limit_get_503_with_retry_after(app_factory: Any) -> None:
    app = app_factory(max_heavy_requests=1, heavy_cost=0)  # every priced request is heavy
    hold = Hold("start")
    app.state.service.hook = hold

    async def scenario() -> None:
        async with asgi_client(app) as c:
            first = asyncio.create_task(c.post("/search", json={"query": QUERY}))
            await waited(hold.reached)
            second = await c.post("/search", json={"query": QUERY})
            assert second.status_code == 503 and second.headers["retry-after"] == "1"
            assert second.json()["error"] == "unavailable"
            assert "--max-heavy-requests" in second.json()["detail"]
            priors = await c.get("/priors")  # not priced: never gated
            assert priors.status_code == 200
            hold.release.set()
            assert (await first).status_code == 200
            third = await c.post("/search", json={"query": QUERY})  # the slot is free again
            assert third.status_code == 200

    run(scenario())


# -- timed-out work ----------------------------------------------------------------------------

def test_a_timed_out_read_is_cancelled_between_stages(app_factory: Any) -> None:
    app = app_factory()
    hold, deadline = Hold("stage:given", until_cancelled=True), Deadline()
    app.state.service.hook, app.state.service.sleep = hold, deadline

    async def scenario() -> None:
        async with asgi_client(app) as c:
            sent = asyncio.create_task(c.post("/rerank", json={"query": QUERY,
                                                               "candidates": candidates(20)}))
            await waited(hold.reached)
            deadline.expire()  # the time limit passes while the work is in stage "given"
            got = await sent
            assert got.status_code == 504, got.text
            assert got.json()["outcome"] == CANCELLED
            assert "--timeout" in got.json()["detail"] and "cancelled" in got.json()["detail"]
            await waited(hold.ended)

    run(scenario())
    points = [p for p, _ in hold.points]
    held = points.index("stage:given")
    # released by the cancellation, the check found the flag: no later stage ran
    assert points[held + 1:] == ["end"] and hold.points[-1][1] == "cancelled"
    assert "done" not in points and not any(p.startswith("stage:combine") for p in points)


def test_a_read_whose_client_leaves_is_cancelled_and_answers_nothing(
        app_factory: Any, caplog: pytest.LogCaptureFixture) -> None:
    """A client that left while its read ran in a worker: the work ran on to its end and
    was logged as answered 200 with the bytes nobody got; now it is cancelled at its next
    stage, nothing is sent, and the access log says ``disconnect``."""
    from credrank.serve.logs import ACCESS_LOGGER

    app = app_factory()
    hold = Hold("stage:given", until_cancelled=True)
    app.state.service.hook = hold
    body = json.dumps({"query": QUERY, "candidates": candidates(20)}).encode()
    sent: list[dict[str, Any]] = []

    async def scenario() -> None:
        left = asyncio.Event()
        first = True

        async def receive() -> dict[str, Any]:
            nonlocal first
            if first:
                first = False
                return {"type": "http.request", "body": body, "more_body": False}
            await left.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        scope = {"type": "http", "method": "POST", "path": "/rerank", "root_path": "",
                 "query_string": b"", "headers": [(b"content-type", b"application/json"),
                                                  (b"content-length", str(len(body)).encode())]}
        call = asyncio.create_task(app(scope, receive, send))
        await waited(hold.reached)  # the work runs in a worker, held at a stage
        left.set()  # the client goes away
        await call
        await waited(hold.ended)

    with caplog.at_level("INFO", logger=ACCESS_LOGGER):
        run(scenario())
    assert sent == []  # nobody to answer
    points = [p for p, _ in hold.points]
    assert points[points.index("stage:given") + 1:] == ["end"]
    assert hold.points[-1][1] == "cancelled"  # stopped at its next check
    records = [r.fields for r in caplog.records if r.name == ACCESS_LOGGER]
    assert [(r["event"], r["route"], r["status"]) for r in records] == [
        ("disconnect", "/rerank", None)]


def test_a_timed_out_feedback_before_its_commit_is_not_applied(app_factory: Any,
                                                               tmp_path: Path) -> None:
    app = app_factory()
    state = app.state.service
    hold, deadline = Hold("before_commit", until_cancelled=True), Deadline()
    state.hook, state.sleep = hold, deadline
    start = version(tmp_path)
    headers = {**AUTH, "Idempotency-Key": "fb-not-applied"}

    async def scenario() -> None:
        async with asgi_client(app) as c:
            sent = asyncio.create_task(c.post("/feedback", json=FEEDBACK, headers=headers))
            await waited(hold.reached)
            deadline.expire()
            got = await sent
            assert got.status_code == 504 and got.json()["outcome"] == NOT_APPLIED
            assert "not applied" in got.json()["detail"]
            await waited(hold.ended)
            assert version(tmp_path) == start  # true: nothing was written
            state.sleep = asyncio.sleep
            again = await c.post("/feedback", json=FEEDBACK, headers=headers)
            assert again.status_code == 200 and "idempotent-replayed" not in again.headers
            assert again.json()["version"] == start + 1
            third = await c.post("/feedback", json=FEEDBACK, headers=headers)
            assert third.headers["idempotent-replayed"] == "true"
            assert third.json() == again.json()

    run(scenario())
    assert version(tmp_path) == start + 1


def test_a_key_less_write_that_may_be_applied_says_what_the_client_can_do(
        app_factory: Any, tmp_path: Path) -> None:
    """Without an Idempotency-Key there is no request to ask about: the 504 says so, and
    which write may be sent again (issue 37, N7)."""
    app = app_factory()
    state = app.state.service
    hold, deadline = Hold("commit"), Deadline()
    state.hook, state.sleep = hold, deadline

    async def scenario() -> None:
        async with asgi_client(app) as c:
            sent = asyncio.create_task(c.post("/feedback", json=FEEDBACK, headers=AUTH))
            await waited(hold.reached)
            deadline.expire()
            got = await sent
            assert got.status_code == 504 and got.json()["outcome"] == MAY_BE_APPLIED
            detail = got.json()["detail"]
            assert "sent without an Idempotency-Key" in detail
            assert "request id" not in detail and "POST /feedback may not" in detail
            hold.release.set()
            await waited(hold.ended)

    run(scenario())


def test_a_timed_out_feedback_retried_with_the_same_key_is_applied_once(
        app_factory: Any, tmp_path: Path) -> None:
    """The commit had begun when the limit passed: the 504 says it may still be applied;
    the retry with the same Idempotency-Key answers the first outcome, applied once."""
    app = app_factory()
    state = app.state.service
    hold, deadline = Hold("commit"), Deadline()  # held inside the commit until released
    state.hook, state.sleep = hold, deadline
    start = version(tmp_path)
    headers = {**AUTH, "Idempotency-Key": "fb-once"}

    async def scenario() -> None:
        async with asgi_client(app) as c:
            sent = asyncio.create_task(c.post("/feedback", json=FEEDBACK, headers=headers))
            await waited(hold.reached)
            deadline.expire()  # the limit and the grace period pass during the commit
            got = await sent
            assert got.status_code == 504, got.text
            assert got.json()["outcome"] == MAY_BE_APPLIED
            assert ("retry with the same Idempotency-Key to learn the outcome"
                    in got.json()["detail"])
            state.sleep = asyncio.sleep
            hold.release.set()
            retries = await asyncio.gather(*(c.post("/feedback", json=FEEDBACK, headers=headers)
                                             for _ in range(3)))
            for again in retries:
                assert again.status_code == 200, again.text
                assert again.headers["idempotent-replayed"] == "true"
                assert again.json()["version"] == start + 1
                assert again.json()["request_id"] == "fb-once"

    run(scenario())
    assert version(tmp_path) == start + 1
    store = FeedbackPriors(tmp_path / "priors")
    assert [r["event"] for r in store.history()[start + 1:]] == ["update"]


def test_a_write_finishing_in_its_grace_period_says_applied(app_factory: Any,
                                                            tmp_path: Path) -> None:
    app = app_factory(commit_grace_s=120)
    state = app.state.service
    hold, deadline = Hold("commit", until_cancelled=True), Deadline(real=120)
    state.hook, state.sleep = hold, deadline
    start = version(tmp_path)
    headers = {**AUTH, "Idempotency-Key": "rb-applied"}

    async def scenario() -> None:
        async with asgi_client(app) as c:
            sent = asyncio.create_task(c.post("/priors/rollback", json={"version": 0},
                                              headers=headers))
            await waited(hold.reached)
            deadline.expire()  # the limit passes during the commit, which then completes
            got = await sent
            assert got.status_code == 504 and got.json()["outcome"] == APPLIED
            assert got.json()["result"]["version"] == start + 1
            state.sleep = asyncio.sleep
            again = await c.post("/priors/rollback", json={"version": 0}, headers=headers)
            assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
            assert again.json()["version"] == start + 1

    run(scenario())
    assert version(tmp_path) == start + 1


# -- idempotency -------------------------------------------------------------------------------

def test_idempotency_key_conflicts_and_bad_keys_name_the_header(app_factory: Any) -> None:
    app = app_factory()

    async def scenario() -> None:
        async with asgi_client(app) as c:
            headers = {**AUTH, "Idempotency-Key": "k-1"}
            assert (await c.post("/feedback", json=FEEDBACK, headers=headers)).status_code == 200
            other = await c.post("/feedback", json={**FEEDBACK, "reason": "other"},
                                 headers=headers)
            assert other.status_code == 422
            assert other.json()["errors"][0]["field"] == "Idempotency-Key"
            for bad in ("has space", "x" * 201):
                got = await c.post("/feedback", json=FEEDBACK,
                                   headers={**AUTH, "Idempotency-Key": bad})
                assert got.status_code == 422, got.text
                assert got.json()["errors"][0]["field"] == "Idempotency-Key"
            # keys are per route: the same key on rollback is another write
            got = await c.post("/priors/rollback", json={"version": 0}, headers=headers)
            assert got.status_code == 200 and "idempotent-replayed" not in got.headers

    run(scenario())


def test_feedback_keys_survive_a_restart(app_factory: Any, tmp_path: Path) -> None:
    """The feedback store records each write's key: a new server does not re-apply it."""
    headers = {**AUTH, "Idempotency-Key": "fb-restart"}
    rollback = {**AUTH, "Idempotency-Key": "rb-restart"}

    async def send(app: Any, path: str, body: dict[str, Any], head: dict[str, str]) -> Any:
        async with asgi_client(app) as c:
            return await c.post(path, json=body, headers=head)

    first = run(send(app_factory(), "/feedback", FEEDBACK, headers))
    back = run(send(app_factory(), "/priors/rollback", {"version": 0}, rollback))
    assert first.status_code == 200 and back.status_code == 200
    current = version(tmp_path)
    fresh = app_factory()  # another process's memory: empty
    again = run(send(fresh, "/feedback", FEEDBACK, headers))
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    assert again.json()["version"] == first.json()["version"]
    assert run(send(fresh, "/priors/rollback", {"version": 0}, rollback)).json()[
        "version"] == back.json()["version"]
    other = run(send(fresh, "/feedback", {**FEEDBACK, "step": 0.2}, headers))
    assert other.status_code == 422 and other.json()["errors"][0]["field"] == "Idempotency-Key"
    assert version(tmp_path) == current


# -- /index: embedding outside the lock, exactly once --------------------------------------------

DOCS = [{"id": f"new-{i}", "text": f"Zinc lozenges and the common cold, trial {i}",
         "url": "https://www.nih.gov/zinc"} for i in range(40)]


def test_searches_do_not_wait_for_index_embedding(app_factory: Any) -> None:
    app = app_factory()
    hold = Hold("embed")  # the first embedding check: /index's
    app.state.service.hook = hold

    async def scenario() -> None:
        async with asgi_client(app) as c:
            indexing = asyncio.create_task(c.post("/index", json={"documents": DOCS},
                                                  headers=AUTH))
            await waited(hold.reached)
            found = await c.post("/search", json={"query": QUERY, "top_k": 3})
            assert found.status_code == 200  # the store lock is free while /index embeds
            assert not indexing.done()
            hold.release.set()
            done = await indexing
            assert done.status_code == 200 and done.json()["indexed"] == 40

    run(scenario())


def test_a_timed_out_index_is_not_applied_and_its_retry_indexes_once(app_factory: Any) -> None:
    app = app_factory()
    state = app.state.service
    hold, deadline = Hold("embed", until_cancelled=True), Deadline()
    state.hook, state.sleep = hold, deadline
    headers = {**AUTH, "Idempotency-Key": "ix-1"}

    async def scenario() -> None:
        async with asgi_client(app) as c:
            before = len(state.searcher.store)
            sent = asyncio.create_task(c.post("/index", json={"documents": DOCS},
                                              headers=headers))
            await waited(hold.reached)
            deadline.expire()  # the limit passes while /index embeds
            got = await sent
            assert got.status_code == 504 and got.json()["outcome"] == NOT_APPLIED
            await waited(hold.ended)
            assert len(state.searcher.store) == before
            state.sleep = asyncio.sleep
            first = await c.post("/index", json={"documents": DOCS}, headers=headers)
            assert first.status_code == 200 and first.json()["indexed"] == 40
            again = await c.post("/index", json={"documents": DOCS}, headers=headers)
            assert again.headers["idempotent-replayed"] == "true"
            assert again.json() == first.json()
            assert len(state.searcher.store) == before + 40

    run(scenario())


# -- strict types and echoes -------------------------------------------------------------------

@pytest.mark.parametrize(("path", "body", "field", "message"), [
    ("/search", {"query": QUERY, "top_k": True}, "top_k", "expected an integer, got true"),
    ("/search", {"query": QUERY, "top_k": "1"}, "top_k", 'expected an integer, got "1"'),
    ("/search", {"query": QUERY, "fetch_k": 30.0}, "fetch_k", "expected an integer, got 30.0"),
    ("/search", {"query": QUERY, "lexical": 1}, "lexical", "expected true or false, got 1"),
    ("/search", {"query": 5}, "query", "expected a string, got 5"),
    ("/rerank", {"query": QUERY, "top_k": True, "candidates": []}, "top_k",
     "expected an integer, got true"),
    ("/rerank", {"query": QUERY, "candidates": [{"id": "a", "text": "t", "score": "1"}]},
     "candidates[0].score", 'expected a number, got "1"'),
    ("/feedback", {"items": [{"source_type": "blog", "relevant": "true"}]},
     "items[0].relevant", 'expected true or false, got "true"'),
    ("/feedback", {"items": [], "step": "0.1"}, "step", 'expected a number, got "0.1"'),
    ("/priors/rollback", {"version": "0"}, "version", 'expected an integer, got "0"'),
    ("/priors/rollback", {"version": False}, "version", "expected an integer, got false"),
    # lengths: what came is said too (its length where the text is long)
    ("/search", {"query": "q" * 2_001}, "query", "expected at most 2,000 characters, got 2,001"),
    ("/search", {"query": ""}, "query", 'expected at least 1 character, got ""'),
    ("/feedback", {"items": [], "author": ""}, "author", 'expected at least 1 character, got ""'),
])
def test_strict_json_types(app_factory: Any, path: str, body: dict[str, Any], field: str,
                           message: str) -> None:
    app = app_factory()

    async def scenario() -> Any:
        async with asgi_client(app) as c:
            return await c.post(path, json=body, headers=AUTH)

    got = run(scenario())
    assert got.status_code == 422, got.text
    assert got.json()["errors"][0]["field"] == field
    assert f"{field}: {message}" in got.json()["detail"]


def test_params_without_select_are_refused(app_factory: Any) -> None:
    app = app_factory()

    async def scenario() -> None:
        async with asgi_client(app) as c:
            for path, extra in (("/search", {}), ("/rerank", {"candidates": candidates(3)})):
                got = await c.post(path, json={"query": QUERY,
                                               "select_params": {"diversity": 0.5}, **extra})
                assert got.status_code == 422
                assert got.json()["errors"][0]["field"] == "select_params"
                assert got.json()["detail"].startswith("select_params: only with select")

    run(scenario())


def test_feedback_priors_are_echoed_with_the_store_version(app_factory: Any,
                                                           tmp_path: Path) -> None:
    app = app_factory()

    async def scenario() -> None:
        async with asgi_client(app) as c:
            updated = await c.post("/feedback", json=FEEDBACK, headers=AUTH)
            searched = await c.post("/search", json={"query": QUERY, "priors_store": "feedback"})
            reranked = await c.post("/rerank", json={"query": QUERY, "priors_store": "feedback",
                                                     "candidates": candidates(3)})
            for got in (searched, reranked):
                assert got.status_code == 200, got.text
                priors = got.json()["settings"]["priors"]
                assert priors["name"] == "feedback"
                assert priors["version"] == updated.json()["version"]
                assert priors["values"] == updated.json()["types"]
                assert got.json()["info"]["feedback_prior"]["version"] == priors["version"]

    run(scenario())


def test_openapi_declares_the_idempotency_key_and_new_answers(app_factory: Any) -> None:
    spec = app_factory().openapi()
    for path in ("/index", "/feedback", "/priors/rollback"):
        params = spec["paths"][path]["post"]["parameters"]
        assert any(p["name"] == "Idempotency-Key" and p["in"] == "header" for p in params)
        assert "504" in spec["paths"][path]["post"]["responses"]
    for path in ("/search", "/rerank"):
        assert {"408", "503", "504"} <= set(spec["paths"][path]["post"]["responses"])
    # every POST can answer 415 (a body not declared JSON): the schema did not list it
    for path in ("/search", "/rerank", "/index", "/feedback", "/priors/rollback"):
        assert "415" in spec["paths"][path]["post"]["responses"], path
    json.dumps(spec)


# -- start-up and the HTTP layer (real processes) ----------------------------------------------

@pytest.mark.parametrize("value", [" key", "key\n", "\tkey "])
def test_an_api_key_with_surrounding_whitespace_is_refused_at_start(tmp_path: Path,
                                                                    value: str) -> None:
    from typer.testing import CliRunner

    from credrank.cli import app as cli

    got = CliRunner().invoke(cli, ["serve", "--index", str(tmp_path / "index"),
                                   "--api-key-env", "HOSTILE_KEY"], env={"HOSTILE_KEY": value})
    assert got.exit_code == 2, got.output
    assert got.output.lstrip().startswith("error:")
    assert "HOSTILE_KEY" in got.output and "whitespace" in got.output
    with pytest.raises(ValueError, match="api_key: expected a key without"):
        from credrank.serve.config import ServeConfig

        ServeConfig(api_key=value)


def test_a_slow_body_is_cut_with_408(demo_index_hashing: Path, tmp_path: Path) -> None:
    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    with running_server(where, "--read-timeout", "0.5") as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
            s.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 100\r\n\r\n{\"query\": ")  # and never the rest
            answer = b""
            while chunk := s.recv(65536):  # the server answers, then closes
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b'"request_timeout"' in answer and b"--read-timeout" in answer
        server.wait_for_record(lambda record: record.get("status") == 408)


def test_incomplete_headers_are_cut_with_408(demo_index_hashing: Path, tmp_path: Path) -> None:
    # issue 37 N18: a request line and half its headers held a connection with no answer for
    # over a minute (uvicorn has no header timeout); now the body's deadline applies
    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)

    def until_closed(s: socket.socket) -> bytes:
        answer = b""
        while chunk := s.recv(65536):  # the server answers, then closes
            answer += chunk
        return answer

    with running_server(where, "--read-timeout", "0.5") as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
            s.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\n")  # and never the rest
            answer = until_closed(s)
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b'"request_timeout"' in answer and b"request headers" in answer
        # the cut request has its access log line (it had none); the headers never came
        record = server.wait_for_record(lambda r: r.get("status") == 408)
        assert record["event"] == "request" and record["method"] is None
        assert record["route"] is None and record["response_bytes"] > 0
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
            # a whole request is answered; the next one on the connection gets the deadline
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\n")
            answer = until_closed(s)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert answer.count(b"HTTP/1.1 408") == 1, answer
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
            assert until_closed(s).startswith(b"HTTP/1.1 408")  # connected, sent nothing
    # (the process has stopped and its output is read to the end)
    # every 408 sent is logged: two requests cut, a connection that sent nothing
    assert sum(r.get("status") == 408 for r in server.log_records()) == 3


# -- every stage priced (issue 37, N1) and /rerank's embedding priced before the check (N3) --

def test_expensive_stages_are_refused_naming_the_stage_and_the_pool_that_fits(
        demo_index_hashing: Path, tmp_path: Path) -> None:
    """The N1 requests over a real server: ``planted`` at fetch_k 10,000 (16–37 s and up to
    8 GB before it had a price), smoothing with m = 10⁶: refused before any work; the
    largest pool the refusal names runs."""
    import httpx

    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    with running_server(where) as server, httpx.Client(base_url=server.url,
                                                       timeout=120) as client:
        for mode in ("planted", "grada", "ragdefender", "trustrag", "outlier"):
            spec = {"fetch_k": 10_000, "stages": ["prior", {"stage": "planted", "mode": mode}]}
            got = client.post("/search", json={"query": QUERY, "pipeline": spec})
            assert got.status_code == 422, got.text
            body = got.json()
            assert body["errors"][0]["field"] == "pipeline.fetch_k"
            assert body["stage"] == "planted" and "the stage planted" in body["detail"]
            assert f"a fetch_k of at most {body['largest_pool']:,}" in body["detail"]
            assert 30 <= body["largest_pool"] < 10_000
            fits = {**spec, "fetch_k": body["largest_pool"]}
            ok = client.post("/search", json={"query": QUERY, "pipeline": fits})
            assert ok.status_code == 200, ok.text
            assert ok.json()["info"]["planted"]["mode"] == mode
        complete = {"fetch_k": 5_000, "stages": [
            "prior", {"stage": "planted", "linkage": "complete"}]}
        got = client.post("/search", json={"query": QUERY, "pipeline": complete})
        assert got.status_code == 422 and got.json()["stage"] == "planted", got.text
        got = client.post("/search", json={"query": QUERY, "pipeline": {
            "fetch_k": 100, "stages": ["prior", {"stage": "smoothing", "m": 10**6}]}})
        assert got.status_code == 422, got.text
        assert got.json()["errors"][0]["field"] == "pipeline.stages[1].m"
        assert "expected" in got.json()["detail"] and "10000" in got.json()["detail"]
        got = client.post("/search", json={"query": QUERY, "pipeline": {
            "fetch_k": 10_000, "stages": ["prior", {"stage": "smoothing", "m": 10_000}]}})
        assert got.status_code == 422 and got.json()["stage"] == "smoothing", got.text
        assert "expected at most 3,000 with the stage smoothing" in got.json()["detail"]
        assert got.json()["largest_pool"] == 3_000  # the cap: within it the budget fits
        ok = client.post("/search", json={"query": QUERY, "pipeline": {
            "fetch_k": 3_000, "stages": ["prior", {"stage": "smoothing", "m": 10_000}]}})
        assert ok.status_code == 200, ok.text[:300]  # ≈ 1,000 units: within the budget
        assert ok.json()["info"]["smoothing"]["m_effective"] < 3_000


def test_rerank_auto_prices_vectors_that_fail_the_same_model_check_as_embedded(
        demo_index_hashing: Path, tmp_path: Path) -> None:
    """N3: texts with random vectors were priced as cheap, failed the check and were embedded
    anyway. Now they are priced as embedded until the check (run before pricing, one
    passage) says the vectors are the index model's."""
    import httpx
    import numpy as np

    from credrank.index.embed import get_embedder

    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    texts = [f"vitamin d trial in adults, passage {i} " + "word " * 40 for i in range(1_000)]
    embedder = get_embedder("hashing")
    rng = np.random.default_rng(7)
    fake = rng.normal(size=(len(texts), embedder.dim))
    real = np.asarray(embedder.embed(texts))

    def body(vectors: Any) -> dict[str, Any]:
        return {"query": QUERY, "retrieval": "auto", "candidates": [
            {"id": f"c{i}", "text": t, "vector": [float(x) for x in v]}
            for i, (t, v) in enumerate(zip(texts, vectors, strict=True))]}

    # 1,000 passages of ≈ 240 characters: ≈ 24 units to embed with hashing; budget 15
    with running_server(where, "--max-request-cost", "15") as server, \
            httpx.Client(base_url=server.url, timeout=120) as client:
        got = client.post("/rerank", json=body(fake))
        assert got.status_code == 422, got.text
        assert "embedding 1,000 passages with hashing" in got.json()["detail"]
        assert got.json()["errors"][0]["field"] == "candidates"
        bare = client.post("/rerank", json={"query": QUERY, "candidates": [
            {"id": f"c{i}", "text": t} for i, t in enumerate(texts)]})
        assert bare.status_code == 422  # the same texts without vectors: the same price
        assert bare.json()["cost"] == pytest.approx(got.json()["cost"])
        ok = client.post("/rerank", json=body(real))  # the check passes: the vectors are used
        assert ok.status_code == 200, ok.text
        assert ok.json()["info"]["retrieval"]["resolved"] == "embeddings"
        assert ok.json()["info"]["retrieval"]["embedded"] == 0
        # each request is checked: the vectors that passed before say nothing of these (a
        # kept verdict priced them cheap and used them as declared)
        again = client.post("/rerank", json=body(fake))
        assert again.status_code == 422, again.text
        assert again.json()["cost"] == pytest.approx(got.json()["cost"])


def test_a_timed_out_search_is_cancelled_inside_the_planted_stage(app_factory: Any) -> None:
    """The planted stage checks the request's cancellation inside its loops (``within:
    planted``, once per block of the pool's graph and every 20 PageRank steps): a 504 stops
    its work there, not after the whole stage."""
    app = app_factory()
    hold, deadline = Hold("within:planted", until_cancelled=True), Deadline()
    app.state.service.hook, app.state.service.sleep = hold, deadline

    async def scenario() -> None:
        async with asgi_client(app) as c:
            sent = asyncio.create_task(c.post("/search", json={"query": QUERY, "pipeline": {
                "fetch_k": 100, "stages": ["prior", {"stage": "planted", "mode": "grada"}]}}))
            await waited(hold.reached)
            deadline.expire()  # the time limit passes inside the planted stage
            got = await sent
            assert got.status_code == 504, got.text
            assert got.json()["outcome"] == CANCELLED
            await waited(hold.ended)

    run(scenario())
    points = [p for p, _ in hold.points]
    held = points.index("within:planted")
    assert points[held - 1] == "stage:planted"  # the stage had started
    assert points[held + 1:] == ["end"] and hold.points[-1][1] == "cancelled"
    assert not any(p.startswith("stage:combine") for p in points)


def test_index_keys_replay_reordered_bodies_and_a_surrogate_is_one_reject(
        app_factory: Any) -> None:
    """A retry whose serialiser orders an object's keys otherwise was refused as "a different
    request" (the fingerprint was the body as pydantic wrote it); a lone surrogate in one
    record failed the whole POST /index while fingerprinting (a 422 without ``errors``), where
    ``credrank index`` rejects that record alone."""
    app = app_factory()

    async def scenario() -> None:
        async with asgi_client(app) as c:
            headers = {**AUTH, "Idempotency-Key": "ix-1"}
            first = await c.post("/index", headers=headers, json={"documents": [
                {"id": "k1", "text": "idempotent document one", "url": "https://a.org/1"}]})
            assert first.status_code == 200, first.text
            again = await c.post("/index", headers=headers, json={"documents": [
                {"url": "https://a.org/1", "text": "idempotent document one", "id": "k1"}]})
            assert again.status_code == 200, again.text
            assert again.headers.get("idempotent-replayed") == "true"
            other = await c.post("/index", headers=headers, json={"documents": [
                {"id": "k1", "text": "another text", "url": "https://a.org/1"}]})
            assert other.status_code == 422
            body = ('{"documents": [{"id": "s1", "text": "broken \\ud83d here"}, '
                    '{"id": "s2", "text": "a fine document"}]}')
            for head in (AUTH, {**AUTH, "Idempotency-Key": "ix-2"}):
                got = await c.post("/index", content=body.encode(),
                                   headers={**head, "Content-Type": "application/json"})
                assert got.status_code == 200, got.text
                doc = got.json()
                assert doc["rejected"] == 1 and "surrogate" in json.dumps(doc)

    run(scenario())


def test_write_and_priors_errors_name_the_request_field(app_factory: Any) -> None:
    """A version the store does not hold (``POST /priors/rollback``, ``GET /priors``) was a
    422 without ``errors``; a blank ``source_id`` was said as the library's ``feedback[0]
    source_id``, after the request had been taken. Each names the request's field."""
    app = app_factory()

    async def scenario() -> list[Any]:
        async with asgi_client(app) as c:
            return [await c.post("/priors/rollback", json={"version": 99}, headers=AUTH),
                    await c.get("/priors", params={"version": 99}),
                    await c.post("/feedback", headers=AUTH, json={"items": [
                        {"source_type": "blog", "source_id": "   ", "relevant": True}]})]

    rollback, priors, feedback = run(scenario())
    for got, field in ((rollback, "version"), (priors, "version"),
                       (feedback, "items[0].source_id")):
        assert got.status_code == 422, got.text
        assert got.json()["errors"][0]["field"] == field, got.text
    assert feedback.json()["errors"][0]["msg"] == "expected a source id or null, got '   '"


def test_a_port_in_use_and_a_bad_priors_store_say_the_option(demo_index_hashing: Path,
                                                              tmp_path: Path) -> None:
    """A port in use ended with uvicorn's exit 3 and no ``error:`` line (its own message and
    exit were never reached); a --priors-store that cannot be a store said a bare
    ``[Errno 17] File exists``, and a store was made before a failed start."""
    import subprocess
    import sys

    where = copy_index(demo_index_hashing, tmp_path / "index")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        got = subprocess.run([sys.executable, "-m", "credrank.cli", "serve", "--index",
                              str(where), "--port", str(port)], capture_output=True, text=True,
                             timeout=300, stdin=subprocess.DEVNULL)
    assert got.returncode == 1, got.stderr
    assert f"error: --host 127.0.0.1 --port {port}: the server did not start" in got.stderr
    (tmp_path / "a-file").write_text("x", encoding="utf-8")
    got = subprocess.run([sys.executable, "-m", "credrank.cli", "serve", "--index", str(where),
                          "--port", str(port), "--priors-store", str(tmp_path / "a-file")],
                         capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert got.returncode == 2 and f"error: --priors-store {tmp_path / 'a-file'}: " in got.stderr


def test_openapi_says_the_services_pool_bounds() -> None:
    """The schema said the library's bound ("at most 10,000,000") and no minimum or maximum,
    where the service refuses top_k over 1,000 and fetch_k over 10,000; its descriptions
    contradicted themselves ("not with pipeline (where it replaces the spec's)")."""
    from credrank.serve.config import MAX_FETCH_K, MAX_TOP_K
    from credrank.serve.models import SearchRequest

    props = SearchRequest.model_json_schema()["properties"]
    for name, most in (("top_k", MAX_TOP_K), ("fetch_k", MAX_FETCH_K)):
        assert (props[name]["minimum"], props[name]["maximum"]) == (1, most)
        assert f"at most {most:,} on this service" in props[name]["description"]
        assert "not with pipeline" not in props[name]["description"]
    assert "JSON object" in props["select_params"]["description"]


def test_a_zero_vector_a_selector_cannot_use_is_named_at_its_field(app_factory: Any) -> None:
    """A selector's refusal of a candidate's vector of zeros had no ``errors`` entry (and
    named the stage by its class): it is said at ``candidates[i].vector``."""
    from credrank.index.embed import get_embedder

    app = app_factory()
    v = get_embedder("hashing").embed(["vitamin d"])[0].tolist()
    cands = [{"id": "a", "text": "vitamin d", "vector": v},
             {"id": "b", "text": "zero", "vector": [0.0] * len(v)}]

    async def scenario() -> Any:
        async with asgi_client(app) as c:
            return await c.post("/rerank", json={"query": "vitamin d", "candidates": cands,
                                                 "query_vector": v, "select": "mmr",
                                                 "select_params": {"diversity": 0.5}})

    got = run(scenario())
    assert got.status_code == 422, got.text
    assert got.json()["errors"][0]["field"] == "candidates[1].vector"
    assert got.json()["detail"].startswith("mmr: the candidate 'b' has a vector of zeros")


def test_malformed_http_is_a_json_400_with_its_log_line(demo_index_hashing: Path,
                                                        tmp_path: Path) -> None:
    """What the HTTP parser refuses got uvicorn's plain-text 400 ("Invalid HTTP request
    received.") and no access log line."""
    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    with running_server(where) as server:
        for head in (b"Content-Length: -1\r\n",
                     b"Content-Length: 5\r\nContent-Length: 6\r\n"):
            with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
                s.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: "
                          b"application/json\r\n" + head + b"\r\n{}")
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
            status, _, rest = answer.partition(b"\r\n")
            assert status == b"HTTP/1.1 400 Bad Request", answer[:200]
            assert b"content-type: application/json" in rest.lower()
            body = json.loads(rest.partition(b"\r\n\r\n")[2])
            assert body["error"] == "bad_request" and "not valid HTTP/1.1" in body["detail"]
    records = [r for r in server.log_records() if r.get("status") == 400]
    assert len(records) == 2 and all(r["event"] == "request" for r in records)


def test_two_idempotency_keys_and_pydantic_s_wording_are_said_plainly(app_factory: Any
                                                                        ) -> None:
    """Two Idempotency-Key headers: the first was used and a retry with the second applied
    the write again; a validator's message came as "Value error, FIELD: …" and a bad key as
    pydantic's "String should match pattern"."""
    app = app_factory()

    async def scenario() -> None:
        async with asgi_client(app) as c:
            got = await c.post("/feedback", json=FEEDBACK, headers=[
                ("X-API-Key", KEY), ("Idempotency-Key", "dupA"), ("Idempotency-Key", "dupB")])
            assert got.status_code == 422, got.text
            assert got.json()["errors"][0]["field"] == "Idempotency-Key"
            assert "given 2 times; give it once" in got.json()["detail"]
            got = await c.post("/feedback", json=FEEDBACK,
                               headers={**AUTH, "Idempotency-Key": "has space"})
            assert got.status_code == 422
            assert 'expected 1 to 200 visible ASCII characters, got "has space"' in \
                got.json()["detail"]
            got = await c.post("/search", json={"query": "   "})
            assert got.status_code == 422 and "Value error" not in got.json()["detail"]
            assert got.json()["detail"].startswith("query: expected non-empty text")

    run(scenario())


def test_top_k_out_of_range_is_said_in_this_service_s_bounds(app_factory: Any) -> None:
    """``top_k: 0`` answered the library's "[1, 10000000]" though this service takes at most
    1,000."""
    app = app_factory()

    async def scenario() -> None:
        async with asgi_client(app) as c:
            for body, field in (({"query": QUERY, "top_k": 0}, "top_k"),
                                ({"query": QUERY, "fetch_k": 0}, "fetch_k")):
                got = await c.post("/search", json=body)
                assert got.status_code == 422 and got.json()["errors"][0]["field"] == field
                assert "(this service's limit), got 0" in got.json()["detail"]
                assert "10000000" not in got.json()["detail"]

    run(scenario())


def test_a_damaged_feedback_store_is_the_servers_fault_said_by_its_name(
        app_factory: Any, tmp_path: Path) -> None:
    """A priors.json the server cannot read (cut short by hand, removed) answered 422
    invalid_request with the server's path in it: the client was blamed for the server's
    store. It is a 503 naming the store 'feedback', never its path, for reads and writes."""
    app = app_factory()
    app.state.service.ready = True  # as the lifespan sets it (the client runs none)
    store = tmp_path / "priors" / "priors.json"
    whole = store.read_text(encoding="utf-8")

    async def scenario() -> list[httpx.Response]:
        async with asgi_client(app) as c:
            return [await c.get("/priors"),
                    await c.post("/feedback", json=FEEDBACK, headers={"X-API-Key": KEY}),
                    await c.get("/readyz")]

    for damage in (lambda: store.write_text(whole[:200], encoding="utf-8"), store.unlink):
        damage()
        *answers, ready = run(scenario())
        for got in answers:
            assert got.status_code == 503, got.text
            body = got.json()
            assert body["error"] == "unavailable"
            assert "the feedback store is not available: 'feedback'" in body["detail"]
            assert str(tmp_path) not in got.text
        # readiness says the store cannot be read (it said true), and stays ready: searches
        # that do not read the store are served
        assert ready.status_code == 200 and ready.json()["status"] == "ready"
        assert ready.json()["priors_store"] is False
        assert "'feedback'" in ready.json()["priors_store_error"]
        assert str(tmp_path) not in ready.text
        store.write_text(whole, encoding="utf-8")
        ready = run(scenario())[-1]
        assert ready.json()["priors_store"] is True and "priors_store_error" not in ready.json()


def test_priors_naming_the_feedback_store_points_to_its_stage(app_factory: Any) -> None:
    """``"priors": "feedback"`` (the store's registered name, a folder) was refused as a prior
    file with "got 'no suffix'"; it says it got a folder, and which stage reads a store."""
    app = app_factory()

    async def scenario() -> httpx.Response:
        async with asgi_client(app) as c:
            return await c.post("/search", json={"query": QUERY, "priors": "feedback"})

    got = run(scenario())
    assert got.status_code == 422
    assert got.json()["errors"][0]["field"] == "priors"
    assert got.json()["detail"] == (
        "priors: expected a preset or a prior file, got the folder 'feedback'; a feedback "
        "store is read by the feedback_prior stage")
