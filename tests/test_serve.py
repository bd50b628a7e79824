"""``credrank serve`` as a real uvicorn process on loopback (tests/serving.py): endpoints,
auth before the body, limits, structured logs and a clean SIGTERM shutdown."""

from __future__ import annotations

import json
import signal
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from credrank.index.embed import get_embedder
from credrank.index.opener import open_store
from credrank.searcher import Searcher
from serving import ServerHandle, running_server
from sparse_copy import copy_index

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
TABLE = ("--table", str(DEMO / "domains.csv"))
KEY_ENV = "CREDRANK_TEST_SERVE_KEY"
KEY = "s3cret-key-for-tests"
QUERY = "does vitamin d prevent covid"


@pytest.fixture(scope="module")
def ro(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[ServerHandle]:
    """A server without a key (writes disabled) on a copy of the demo index."""
    where = copy_index(demo_index_hashing, tmp_path_factory.mktemp("ro") / "index")
    with running_server(where, *TABLE) as server:
        yield server


@pytest.fixture(scope="module")
def rw(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory
       ) -> Iterator[ServerHandle]:
    """A server with an API key and a feedback store on its own copy of the demo index."""
    base = tmp_path_factory.mktemp("rw")
    where = copy_index(demo_index_hashing, base / "index")
    with running_server(where, *TABLE, "--api-key-env", KEY_ENV, "--priors-store",
                        str(base / "priors"), env={KEY_ENV: KEY}) as server:
        yield server


def post(server: ServerHandle, path: str, body: object = None, **kw: object) -> httpx.Response:
    return httpx.post(server.url + path, json=body, timeout=60, **kw)  # type: ignore[arg-type]


# -- health, schema, page ------------------------------------------------------------------------

def test_health_ready_and_openapi(ro: ServerHandle) -> None:
    assert httpx.get(ro.url + "/healthz").json() == {"status": "ok"}
    ready = httpx.get(ro.url + "/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready" and ready.json()["writes"] is False
    spec = httpx.get(ro.url + "/openapi.json").json()
    assert {"/search", "/rerank", "/index", "/feedback", "/priors", "/priors/rollback",
            "/healthz", "/readyz"} <= set(spec["paths"])
    assert "hits" in spec["components"]["schemas"]["SearchResponse"]["properties"]
    assert spec["paths"]["/index"]["post"]["security"]  # the key schemes are declared
    for path, model in (("/search", "SearchRequest"), ("/rerank", "RerankRequest")):
        # the endpoints parse their own body (SelfParsedRoute): documented all the same
        body = spec["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        ref = body["content"]["application/json"]["schema"]["$ref"]
        assert ref == f"#/components/schemas/{model}"
        assert "query" in spec["components"]["schemas"][model]["properties"]
    page = httpx.get(ro.url + "/")
    assert page.status_code in (200, 404)  # the page is another component's file
    if page.status_code == 404:
        assert "index.html" in page.json()["detail"]


# -- search and rerank ---------------------------------------------------------------------------

@pytest.mark.parametrize("options", [
    {"top_k": 5},
    {"top_k": 3, "fetch_k": 20, "priors": "aggressive", "mode": "linear"},
    {"top_k": 4, "priors": "none"},
    {"top_k": 5, "select": "mmr", "select_params": {"diversity": 0.5}},
])
def test_search_matches_in_process(ro: ServerHandle, demo_index_hashing: Path,
                                   tmp_path: Path, options: dict[str, object]) -> None:
    where = copy_index(demo_index_hashing, tmp_path / "index")
    with Searcher.open(where, tables=[DEMO / "domains.csv"]) as searcher:
        spec = Searcher.spec(
            top_k=options["top_k"], fetch_k=options.get("fetch_k"),
            priors=options.get("priors", "current"), mode=options.get("mode", "multiply"),
            select=options.get("select"), select_params=options.get("select_params"))
        expected = searcher.search_json(QUERY, spec)
    got = post(ro, "/search", {"query": QUERY, **options})
    assert got.status_code == 200, got.text
    doc = got.json()
    assert doc["credrank_search"] == 2 and doc["settings"] == json.loads(
        json.dumps(expected["settings"]))
    assert [h["doc_id"] for h in doc["hits"]] == [h["doc_id"] for h in expected["hits"]]
    assert [h["score"] for h in doc["hits"]] == pytest.approx(
        [h["score"] for h in expected["hits"]], rel=1e-12)
    for hit in doc["hits"]:
        assert {"retrieval_score", "final"} <= set(hit["score_breakdown"])
        assert {"host", "source_type", "dates", "url"} <= set(hit)
    assert doc["elapsed_ms"] >= 0


def test_consensus_on_search_and_rerank(ro: ServerHandle, demo_index_hashing: Path,
                                        tmp_path: Path) -> None:
    where = copy_index(demo_index_hashing, tmp_path / "index")
    with Searcher.open(where, tables=[DEMO / "domains.csv"]) as searcher:
        spec = Searcher.spec(top_k=5, consensus=True, consensus_params={"threshold": 0.2})
        expected = searcher.search_json(QUERY, spec)
    got = post(ro, "/search", {"query": QUERY, "top_k": 5, "consensus": True,
                               "consensus_params": {"threshold": 0.2}})
    assert got.status_code == 200, got.text
    doc = got.json()
    assert doc["info"]["consensus"] == json.loads(json.dumps(expected["info"]["consensus"]))
    assert [h["doc_id"] for h in doc["hits"]] == [h["doc_id"] for h in expected["hits"]]
    assert doc["settings"]["consensus"]["threshold"] == 0.2
    copies = [{"id": f"c{i}", "text": "Hamlet was written by Christopher Marlowe in 1601."}
              for i in range(3)]
    lone = [{"id": "t", "text": "Hamlet is a play by William Shakespeare, written in 1600."}]
    reranked = post(ro, "/rerank", {"query": "Who wrote Hamlet?", "candidates": copies + lone,
                                    "priors": "none", "consensus": True})
    assert reranked.status_code == 200, reranked.text
    info = reranked.json()["info"]["consensus"]
    assert info["duplicate_groups"] == [["c0", "c1", "c2"]]
    assert sum(a["voices"] for a in info["answers"]) == 2  # three copies, one voice
    bad = post(ro, "/search", {"query": QUERY, "consensus_params": {"threshold": 0.2}})
    assert bad.status_code == 422 and "consensus_params: only with consensus" in bad.text


def test_rerank_uses_given_vectors_and_keeps_metadata(ro: ServerHandle) -> None:
    emb = get_embedder("hashing")
    q = np.asarray(emb.embed([QUERY])[0], dtype=np.float64)
    text = "Vitamin D and COVID-19: what the trials show"
    t = np.asarray(emb.embed([text])[0], dtype=np.float64)
    odd = np.zeros(emb.dim)
    odd[int(np.argmax(np.abs(q)))] = -3.0  # deliberately unrelated to its text
    metadata = {"nested": {"list": [1, 1.0, None, True, "é\u2028"], "deep": [[[{}]]]},
                "big": 12345678901234567890, "source_type": "peer_reviewed"}
    candidates = [
        {"id": "embedded", "text": text, "url": "https://www.cdc.gov/vitd", "metadata": metadata},
        {"id": "given", "text": text, "url": "https://www.cdc.gov/vitd2",
         "vector": odd.tolist(), "metadata": {"k": "v"}, "score": 7.5},
        {"id": "bare", "vector": t.tolist()},
    ]
    # retrieval "cosine" takes a vector as the index embedder's, unchecked ("auto" checks it:
    # the odd vector fails, and "bare" has no text to embed instead)
    got = post(ro, "/rerank", {"query": QUERY, "candidates": candidates, "priors": "none",
                               "retrieval": "cosine"})
    assert got.status_code == 200, got.text
    assert got.json()["info"]["retrieval"]["resolved"] == "cosine"
    auto = post(ro, "/rerank", {"query": QUERY, "candidates": candidates, "priors": "none"})
    assert auto.status_code == 422
    assert auto.json()["detail"].startswith("candidates[2]: expected a non-empty text to "
                                            "embed, got none (retrieval='auto' embeds it: "
                                            "its vector failed the same-model check")
    hits = {h["doc_id"]: h for h in got.json()["hits"]}
    cos = float(q @ t / (np.linalg.norm(q) * np.linalg.norm(t)))
    cos_odd = float(q @ odd / (np.linalg.norm(q) * np.linalg.norm(odd)))
    assert hits["embedded"]["score_breakdown"]["retrieval_score"] == pytest.approx(cos, abs=1e-6)
    assert hits["given"]["score_breakdown"]["retrieval_score"] == pytest.approx(cos_odd,
                                                                                abs=1e-6)
    assert cos_odd < 0 < cos
    assert hits["bare"]["score_breakdown"]["retrieval_score"] == pytest.approx(cos, abs=1e-6)
    assert hits["embedded"]["metadata"] == metadata  # untouched, including the claimed type
    assert hits["embedded"]["source_type"] == "government"  # from the URL, not the claim
    assert hits["given"]["client_score"] == 7.5 and hits["given"]["metadata"] == {"k": "v"}


def test_rerank_with_query_vector_embeds_nothing(ro: ServerHandle) -> None:
    """With the query's vector and every candidate's, the cosines are those of the given
    vectors: a query vector unrelated to the query text decides the order."""
    emb = get_embedder("hashing")
    texts = ["vitamin d trial results", "melatonin and sleep in children"]
    vecs = [np.asarray(v, dtype=np.float64) for v in emb.embed(texts)]
    candidates = [{"id": f"c{i}", "vector": v.tolist()} for i, v in enumerate(vecs)]
    for target in (0, 1):  # the query vector equals candidate `target`'s: cosine 1
        got = post(ro, "/rerank", {"query": QUERY, "candidates": candidates, "priors": "none",
                                   "query_vector": vecs[target].tolist()})
        assert got.status_code == 200, got.text
        doc = got.json()
        assert doc["settings"]["query_vector"] == "given"
        assert doc["hits"][0]["doc_id"] == f"c{target}"
        assert doc["hits"][0]["score_breakdown"]["retrieval_score"] == pytest.approx(1.0)
    bad = post(ro, "/rerank", {"query": QUERY, "candidates": candidates,
                               "query_vector": [1.0]})
    assert bad.status_code == 422 and "query_vector" in bad.json()["detail"]
    broken = post(ro, "/rerank", content=b'{"query": "x", "candidates": [',
                  headers={"Content-Type": "application/json"})
    assert broken.status_code == 422 and broken.json()["errors"][0]["field"] == "body"


def test_a_json_body_must_say_it_is_json(ro: ServerHandle) -> None:
    # issue 37 N18: a JSON body sent as text/plain was parsed; now 415 naming the type
    body = json.dumps({"query": QUERY, "top_k": 1}).encode()
    for path in ("/search", "/rerank"):
        for headers in ({"Content-Type": "text/plain"},
                        {"Content-Type": "application/x-www-form-urlencoded"}, {}):
            got = httpx.post(ro.url + path, content=body, headers=headers, timeout=60)
            assert got.status_code == 415, (path, headers, got.text)
            assert got.headers["content-type"] == "application/json"
            assert got.json()["error"] == "unsupported_media_type"
            given = headers.get("Content-Type")
            assert got.json()["detail"] == ("Content-Type: expected application/json, got "
                                            + (repr(given) if given else "none"))
    fine = httpx.post(ro.url + "/search", content=body, timeout=60,
                      headers={"Content-Type": "application/json; charset=utf-8"})
    assert fine.status_code == 200, fine.text
    # a query string was ignored (POST /search?top_k=5 answered the body's top_k): a 422
    # naming the parameter, for every JSON route, before the body is read
    for path in ("/search?top_k=5", "/rerank?top%5Fk=5&x=1"):
        got = httpx.post(ro.url + path, content=body, timeout=60,
                         headers={"Content-Type": "application/json"})
        assert got.status_code == 422, (path, got.text)
        route = path.split("?")[0]
        assert got.json()["detail"] == (f"top_k: POST {route} reads no query parameters; send "
                                        "the request's fields in its JSON body")
        assert got.json()["errors"][0]["field"] == "top_k"


def test_rerank_errors_name_the_candidate(ro: ServerHandle) -> None:
    good = [{"id": f"c{i}", "text": f"passage {i}"} for i in range(5)]
    dup = [*good[:3], {"id": "c0", "text": "again"}]
    got = post(ro, "/rerank", {"query": QUERY, "candidates": dup})
    assert got.status_code == 422 and "candidates[3].id" in got.json()["detail"]
    blank = [*good[:3], {"id": "", "text": "x"}]
    got = post(ro, "/rerank", {"query": QUERY, "candidates": blank})
    assert got.status_code == 422 and "candidates[3].id" in got.json()["detail"]
    short = [*good[:2], {"id": "v", "vector": [1.0, 2.0]}]
    got = post(ro, "/rerank", {"query": QUERY, "candidates": short})
    assert got.status_code == 422 and "candidates[2].vector" in got.json()["detail"]
    given = post(ro, "/rerank", {"query": QUERY, "candidates": good, "retrieval": "given"})
    assert given.status_code == 422 and "candidates[0].score" in given.json()["detail"]
    many = [{"id": f"c{i}", "text": "t"} for i in range(1001)]
    got = post(ro, "/rerank", {"query": QUERY, "candidates": many})
    assert got.status_code == 422 and got.json()["detail"].startswith("candidates:")


# -- limits --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "field"), [
    ({"query": QUERY, "top_k": 0}, "top_k"),
    ({"query": QUERY, "top_k": 1001}, "top_k"),
    ({"query": QUERY, "top_k": 10, "fetch_k": 10_001}, "fetch_k"),
    ({"query": QUERY, "top_k": 10, "fetch_k": 5}, "fetch_k"),
    ({"query": "x" * 2001}, "query"),
    ({"query": "   "}, "query"),
    ({"query": QUERY, "priors": "priors.toml"}, "priors"),
    ({"query": QUERY, "priors_store": "feedback"}, "priors"),
    ({"query": QUERY, "select": "mmr", "select_params": {"nope": 1}}, "nope"),
    ({"query": QUERY, "select": "mmr", "fetch_k": 2000}, "fetch_k"),
    ({"query": QUERY, "topk": 3}, "topk"),
])
def test_search_422_names_the_field(ro: ServerHandle, body: dict[str, object],
                                    field: str) -> None:
    got = post(ro, "/search", body)
    assert got.status_code == 422, got.text
    assert got.json()["error"] == "invalid_request" and field in got.json()["detail"]


def test_body_size_limit(demo_index_hashing: Path, tmp_path: Path) -> None:
    where = copy_index(demo_index_hashing, tmp_path / "index")
    with running_server(where, "--max-body-bytes", "131072", "--timeout", "0.001") as server:
        # announced too large: refused from the headers, before any body byte is read
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
            s.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: 10000000\r\n\r\n")
            answer = _read_response(s)
        assert answer.startswith(b"HTTP/1.1 413")
        assert b"131,072 bytes" in answer and b'"too_large"' in answer
        # streamed (chunked, no length): refused once the count passes the limit
        chunks = (b" " * 16384 for _ in range(9))
        got = httpx.post(server.url + "/rerank", content=chunks,
                         headers={"content-type": "application/json"}, timeout=60)
        assert got.status_code == 413 and got.json()["error"] == "too_large"
        # the per-request time limit: 504 naming it (1 ms is far below this work)
        candidates = [{"id": f"c{i}", "text": f"vitamin {i} trial", "url": f"https://h{i}.org/"}
                      for i in range(1000)]
        body = json.dumps({"query": QUERY, "candidates": candidates})
        assert len(body) < 131072
        got = httpx.post(server.url + "/rerank", content=body, timeout=60,
                         headers={"content-type": "application/json"})
        assert got.status_code == 504 and "--timeout" in got.json()["detail"]
        assert httpx.get(server.url + "/healthz").status_code == 200


def _read_response(s: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


# -- auth ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/index", "/feedback", "/priors/rollback"])
def test_writes_need_the_key_before_the_body(rw: ServerHandle, path: str) -> None:
    for body in (b"{not json", b'{"documents": 5}', b""):
        got = httpx.post(rw.url + path, content=body, timeout=60,
                         headers={"content-type": "application/json"})
        assert got.status_code == 401 and got.json()["error"] == "unauthorized"
        assert got.headers["www-authenticate"].startswith("Bearer")
        for headers in ({"X-API-Key": "wrong"}, {"Authorization": "Bearer wrong"}):
            got = httpx.post(rw.url + path, content=body, timeout=60,
                             headers={"content-type": "application/json", **headers})
            assert got.status_code == 403 and got.json()["error"] == "forbidden"
    # with the key, the body is validated
    got = httpx.post(rw.url + path, content=b"{not json", timeout=60,
                     headers={"content-type": "application/json", "X-API-Key": KEY})
    assert got.status_code == 422


def test_writes_disabled_without_a_key(ro: ServerHandle) -> None:
    got = post(ro, "/index", {"documents": []})
    assert got.status_code == 401 and "disabled" in got.json()["detail"]
    got = post(ro, "/index", {"documents": []}, headers={"X-API-Key": "anything"})
    assert got.status_code == 403 and "disabled" in got.json()["detail"]
    assert httpx.get(ro.url + "/priors").status_code == 404


def test_index_adds_documents_and_rejects_bad_ones(rw: ServerHandle) -> None:
    docs = [
        {"id": "new-1", "text": "Zinc lozenges and the common cold: a review",
         "url": "https://www.nih.gov/zinc-review", "published_at": "2024-01-02"},
        {"id": "new-2", "title": "no text here"},
        {"id": "new-3", "text": "dated", "published_at": "2024-01-02T10:00:00"},
        "not an object",
        {"id": "new-1", "text": "Zinc lozenges and the common cold: a review",
         "url": "https://www.nih.gov/zinc-review", "published_at": "2024-01-02"},
    ]
    got = post(rw, "/index", {"documents": docs}, headers={"X-API-Key": KEY})
    assert got.status_code == 200, got.text
    doc = got.json()
    # lenient reading (the default): new-3's date without a zone is read as UTC, and counted
    assert (doc["indexed"], doc["rejected"], doc["documents"]) == (2, 3, 122)
    # documents, not points, and the index's passages as `credrank index --json` says them
    assert doc["passages"] == {"points": 122, "chunk_tokens": 0, "chunk_overlap": 0}
    # a repeat within the request is a duplicate, named by its record (not a line)
    assert doc["rejects"][-1]["record"] == 5 and doc["rejects"][-1]["reason"].endswith(
        "(first seen at record 1)")
    assert doc["reading"] == {"strict": False, "assume_timezone": "UTC", "zones_assumed": 1,
                              "date_order": None, "dates_ordered": 0}
    rejects = {r["record"]: r for r in doc["rejects"]}
    assert rejects[2]["field"] == "text" and rejects[4]["field"] is None
    again = post(rw, "/index", {"documents": docs[:1]},
                 headers={"Authorization": f"Bearer {KEY}"})
    assert again.json()["unchanged"] == 1 and again.json()["indexed"] == 0
    hits = post(rw, "/search", {"query": "zinc lozenges common cold", "top_k": 1}).json()["hits"]
    assert hits[0]["doc_id"] == "new-1" and hits[0]["source_type"] == "government"


def test_feedback_priors_and_rollback(rw: ServerHandle) -> None:
    key = {"X-API-Key": KEY}
    start = httpx.get(rw.url + "/priors").json()
    items = [{"source_type": "blog", "relevant": False}] * 3 + [
        {"source_type": "government", "source_id": "cdc", "relevant": True}]
    got = post(rw, "/feedback", {"items": items, "reason": "test"}, headers=key)
    assert got.status_code == 200, got.text
    updated = got.json()
    assert updated["version"] == start["current"] + 1
    assert updated["types"]["blog"] < start["types"]["blog"] and "cdc" in updated["sources"]
    assert httpx.get(rw.url + "/priors").json()["types"] == updated["types"]
    used = post(rw, "/search", {"query": QUERY, "priors_store": "feedback"}).json()
    assert used["info"]["feedback_prior"]["version"] == updated["version"]
    back = post(rw, "/priors/rollback", {"version": start["current"]}, headers=key).json()
    assert back["restored_from"] == start["current"] and back["types"] == start["types"]
    old = httpx.get(rw.url + "/priors", params={"version": updated["version"]}).json()
    assert old["types"] == updated["types"]
    bad = post(rw, "/feedback", {"items": [{"source_type": "tabloid", "relevant": True}]},
               headers=key)
    assert bad.status_code == 422 and "items[0].source_type" in bad.json()["detail"]
    assert post(rw, "/priors/rollback", {"version": 999}, headers=key).status_code == 422


# -- logs and shutdown ---------------------------------------------------------------------------

def test_one_json_log_line_per_request_without_text(ro: ServerHandle) -> None:
    secret_query = "zebra-unique-query-text-4711"
    post(ro, "/search", {"query": secret_query})
    post(ro, "/rerank", {"query": secret_query, "candidates": [
        {"id": "a", "text": "zebra-unique-document-text"}]})
    ro.wait_for_record(lambda record: record.get("route") == "/rerank")
    lines = ro.stderr_lines()
    assert not any("zebra-unique" in line for line in lines)
    records = [r for r in ro.log_records() if r.get("event") == "request"]
    search = [r for r in records if r["route"] == "/search"]
    assert search and {"ts", "method", "route", "status", "latency_ms"} <= set(search[-1])
    assert search[-1]["status"] == 200 and search[-1]["method"] == "POST"


def test_sigterm_lets_the_request_in_flight_finish(demo_index_hashing: Path,
                                                   tmp_path: Path) -> None:
    """A request whose body is still arriving when SIGTERM comes completes with 200; the
    process then exits 0 and the index lock is released (a writer can open the index)."""
    where = copy_index(demo_index_hashing, tmp_path / "index")
    body = json.dumps({"query": QUERY, "top_k": 3}).encode()
    with running_server(where) as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
            s.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Expect: 100-continue\r\nContent-Length: " + str(len(body)).encode()
                      + b"\r\n\r\n")
            # "100 Continue" comes when the app starts reading the body: it is in flight
            assert _read_until(s, b"\r\n\r\n").startswith(b"HTTP/1.1 100")
            server.proc.send_signal(signal.SIGTERM)
            server.wait_for_line(lambda line: "Shutting down" in line)
            s.sendall(body)
            answer = _read_response(s)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        assert b'"credrank_search":2' in answer
        assert server.proc.wait(timeout=120) == 0
    with open_store(where, create=True):  # the exclusive lock: the server let go
        pass


def test_a_request_cut_short_at_shutdown_answers_json_503(demo_index_hashing: Path,
                                                          tmp_path: Path) -> None:
    """Past --graceful-timeout uvicorn cancels the request still in flight: the client gets
    a JSON 503 saying so (it got uvicorn's plain-text 500, and the log a traceback), the
    access log has its line, and the process exits 0."""
    where = copy_index(demo_index_hashing, tmp_path / "index")
    with running_server(where, "--graceful-timeout", "0") as server:
        with socket.create_connection(("127.0.0.1", server.port), timeout=60) as s:
            s.sendall(b"POST /search HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Expect: 100-continue\r\nContent-Length: 40\r\n\r\n")
            assert _read_until(s, b"\r\n\r\n").startswith(b"HTTP/1.1 100")  # in flight
            server.proc.send_signal(signal.SIGTERM)
            answer = _read_response(s)  # the body never comes: the server cuts it short
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), answer[:300]
        assert b"connection: close" in head.lower()
        doc = json.loads(body)
        assert doc["error"] == "unavailable" and "shutting down" in doc["detail"]
        assert "cancelled and changed nothing" in doc["detail"]
        assert server.proc.wait(timeout=120) == 0
        records = server.log_records()
        assert any(r.get("event") == "request" and r.get("route") == "/search"
                   and r.get("status") == 503 for r in records), records
        assert not any("Exception in ASGI application" in str(r.get("message"))
                       for r in records), records


def _read_until(s: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = s.recv(1)
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.slow
def test_minilm_server_search_and_rerank(demo_index_minilm: Path, tmp_path: Path) -> None:
    where = copy_index(demo_index_minilm, tmp_path / "index")
    with Searcher.open(where) as searcher:
        expected = searcher.search_json(QUERY, Searcher.spec(top_k=5))
    with running_server(where) as server:
        doc = post(server, "/search", {"query": QUERY, "top_k": 5}).json()
        assert [h["doc_id"] for h in doc["hits"]] == [h["doc_id"] for h in expected["hits"]]
        assert [h["score"] for h in doc["hits"]] == pytest.approx(
            [h["score"] for h in expected["hits"]], rel=1e-6)
        got = post(server, "/rerank", {"query": QUERY, "candidates": [
            {"id": "a", "text": "Vitamin D supplements and COVID-19 outcomes",
             "url": "https://www.nih.gov/x"},
            {"id": "b", "text": "How to bake sourdough bread", "url": "https://blog.example"}]})
        assert got.status_code == 200 and got.json()["hits"][0]["doc_id"] == "a"


def test_a_client_leaving_mid_body_is_logged_as_a_disconnect(ro: ServerHandle) -> None:
    with socket.create_connection(("127.0.0.1", ro.port), timeout=60) as s:
        s.sendall(b"POST /rerank HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 1000\r\n\r\n{\"query\": ")
    record = ro.wait_for_record(lambda r: r.get("event") == "disconnect")
    assert record["status"] is None and record["method"] == "POST"
    assert not any(record.get("status") == 500 for record in ro.log_records())


def test_work_budget_and_strict_types_on_a_real_server(ro: ServerHandle) -> None:
    candidates = [{"id": f"c{i}", "text": f"vitamin d trial {i}"} for i in range(1000)]
    got = post(ro, "/rerank", {"query": QUERY, "candidates": candidates, "select": "coverage",
                               "select_params": {"lambda_ilad": 0.5, "lambda_coverage": 0.5}})
    assert got.status_code == 422 and got.json()["errors"][0]["field"] == "candidates"
    assert "--max-request-cost" in got.json()["detail"]
    got = post(ro, "/search", {"query": QUERY, "top_k": True})
    assert got.status_code == 422
    assert "top_k: expected an integer, got true" in got.json()["detail"]


def test_feedback_is_applied_once_per_idempotency_key(rw: ServerHandle) -> None:
    headers = {"X-API-Key": KEY, "Idempotency-Key": "serve-test-once"}
    body = {"items": [{"source_type": "established_news", "relevant": True}],
            "reason": "once"}
    first = post(rw, "/feedback", body, headers=headers)
    again = post(rw, "/feedback", body, headers=headers)
    assert first.status_code == 200 and again.status_code == 200
    assert again.headers["idempotent-replayed"] == "true" and again.json() == first.json()
    assert httpx.get(rw.url + "/priors").json()["current"] == first.json()["version"]


def test_a_python_warning_is_a_json_log_line(capsys: pytest.CaptureFixture[str]) -> None:
    # a numpy RuntimeWarning in a stage printed two non-JSON lines among the JSON ones
    import logging
    import logging.config
    import warnings

    from credrank.serve.logs import LOG_CONFIG, captured_warnings

    # the loggers the configuration touches, restored after (a test process goes on)
    loggers = [logging.getLogger(name) for name in LOG_CONFIG["loggers"]]
    saved = [(lg.handlers[:], lg.propagate, lg.level, lg.disabled) for lg in loggers]
    logging.config.dictConfig(LOG_CONFIG)
    captured_warnings()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("overflow encountered in reduce", RuntimeWarning, stacklevel=1)
    finally:
        logging.captureWarnings(False)
        for lg, (handlers, propagate, level, disabled) in zip(loggers, saved, strict=True):
            lg.handlers[:], lg.propagate, lg.disabled = handlers, propagate, disabled
            lg.setLevel(level)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert lines, "nothing logged"
    record = json.loads(lines[-1])
    assert record["logger"] == "py.warnings" and record["level"] == "warning"
    assert "RuntimeWarning: overflow encountered in reduce" in record["message"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stop_signal_while_loading_says_so_and_releases_the_index(
        demo_index_hashing: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        signum: signal.Signals) -> None:
    """SIGTERM while the index loaded ended the process by the signal with no word (Ctrl-C
    with a traceback): now one line, exit 128 + the signal, the index closed."""
    import os

    from cli_inprocess import run_cli

    where = copy_index(demo_index_hashing, tmp_path / "index")

    def signalled(self: Searcher) -> None:  # the signal comes while the index is open
        os.kill(os.getpid(), signum)

    monkeypatch.setattr(Searcher, "keep_columns", signalled)
    got = run_cli("serve", "--index", where, "--port", "1")
    assert got.returncode == 128 + signum, got.stderr
    assert f"stopped by {signum.name} while loading the index" in got.stderr
    assert "Traceback" not in got.stderr and got.stdout == ""
    with open_store(where, create=True):  # the exclusive lock: the index was closed
        pass


def test_a_stop_signal_before_uvicorn_takes_the_handlers_still_stops(
        demo_index_hashing: Path, tmp_path: Path) -> None:
    """A SIGTERM between the index load and uvicorn's own handlers was recorded and never
    read: the server ran on. It stops as soon as it has started, exit 0."""
    import subprocess
    import sys

    from serving import free_port

    where = copy_index(demo_index_hashing, tmp_path / "index")
    script = (
        "import os, signal, sys, uvicorn\n"
        "run = uvicorn.Server.run\n"
        "def signalled(self, *a, **k):\n"
        "    os.kill(os.getpid(), signal.SIGTERM)  # before uvicorn's handlers\n"
        "    return run(self, *a, **k)\n"
        "uvicorn.Server.run = signalled\n"
        "from credrank.cli import main\n"
        f"sys.argv = ['credrank', 'serve', '--index', {str(where)!r}, '--port', "
        f"'{free_port()}']\n"
        "main()\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "Application startup complete" in proc.stderr
