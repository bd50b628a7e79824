"""Load test of ``credrank serve`` on loopback: throughput and p50/p99 latency.

Builds the demo index (``--embedder minilm`` by default, as ``make demo``; or uses ``--index``),
measures the in-process pipeline first (``Searcher.search`` of the same query, and
``Searcher.rerank`` of the same 30 candidates), then starts a real server
(``python -m credrank.cli serve``) and drives it with an asyncio load generator (httpx) at each
concurrency, bounded in count (``--requests``) and time (``--seconds``) per cell:

  * ``GET /healthz``     — the empty endpoint: HTTP, routing, middleware, JSON
  * ``POST /search``     — a demo query, top 10 of 30, current priors (pushdown)
  * ``POST /rerank``     — 30 demo passages WITH their vectors (retrieval = cosine: the server
                           embeds only the query)
  * ``POST /rerank`` query_vector — the same with the query's embedding sent too (nothing
                           embedded on the server)
  * ``POST /rerank`` base64 — the same with every vector as base64 float32 (a quarter of the
                           body, no float parsing)
  * ``POST /rerank`` given — retrieval = "given" (the client's scores; nothing embedded)

Goals (issue 10): ``/rerank`` of 30 candidates with vectors adds < 2 ms p50 over the empty
endpoint (judged on the query_vector rows, numbers and base64: the service's own cost;
embedding the query is the model's, shown by the row without it); ``/search`` p50 within 1.5×
of the in-process pipeline for the same query. The load
generator runs on the same machine as the server (loopback only), so its own CPU time is in
every number; this is a measurement, not a test.

    python bench/scripts/bench_serve.py [--embedder minilm|hashing] [--index DIR]
                                     [--concurrency 1,8,32] [--requests 400] [--seconds 30]
                                     [--json]

``--section concurrency`` measures instead what issue 24 changed: a search holds the store
lock only for retrieval (and stages that read the index), so the scoring of concurrent
searches runs in parallel. It drives ``POST /search`` with ``"consensus": true`` (top 10 of
30; the consensus stage reads each candidate's text and runs outside the lock) from 1 and
from 4 concurrent clients against one server, in one run, and prints both side by side as a
Markdown table with the settings (``--embedder`` default: MiniLM when its model is
available, else hashing)::

    python bench/scripts/bench_serve.py --section concurrency [--clients 1,4] [--rounds 5]
                                     [--requests 100] [--seconds 30] [--json]

``--section overhead`` measures what the service itself adds to a cheap search (issue 26): at
``--n`` documents (default 100,000: the demo corpus repeated, each copy's text made distinct,
embedder ``hashing``; built once into ``--cache DIR`` and reused, or into a temporary folder),
``Searcher.search_json`` in this process, the same ``POST /search`` straight into the ASGI app
(no socket) and over HTTP to a real ``credrank serve`` (uvicorn, loopback, one keep-alive
connection, sequential: ``http.client``, and a raw socket client as wrk measures), ``GET
/healthz`` with the raw client (the floor: HTTP, routing, middleware, access log, no work),
and the in-process search without the hits' text (``text="none"``: what the default snippets
cost). Three rows say where the rest of the HTTP time goes: ``GET /`` of a bare ASGI app
(:func:`bare_app`: two messages, no framework) on uvicorn with the server's settings (the
floor of the HTTP stack itself, no credrank); the same ``POST /search`` to a bare ASGI app on
uvicorn that runs ``Searcher.search_json`` over a copy of the index and nothing else
(:func:`bare_search_app`: the least any service on this HTTP stack reaches; ``credrank
serve``'s p50 above it is credrank's own); and the in-process search timed after an idle
wait of ``IDLE_GAP_S`` in the kernel (a server's core waits so for each request; the caches it
finds are colder than a loop of searches finds them). Rounds alternate the nine; p50, p95 and
the ratios to the in-process search (goal, issue 38: HTTP p50 ≤ 1.5×, judged on the raw
client). Each row also says the CPU a call cost (user + system): this process's for the
in-process rows, the server process's for the rows a server answers
(:func:`process_cpu_s`, Linux ``/proc``; the ten warm-up calls of each batch included, at
10 ms ticks): under one sequential client the server's CPU a request is its whole latency
(its work after an answer, the access log line among it, overlaps the client reading that
answer and is still in progress when the next request comes), a figure far less noisy on a
shared machine than wall time. Then the client's cost
of encoding one ``/rerank`` body (30 demo passages + query, 384-float32 vectors from numpy) as
JSON numbers vs base64, with ``json.dumps`` and with orjson::

    python bench/scripts/bench_serve.py --section overhead [--n 100000] [--cache DIR]
                                     [--requests 300] [--rounds 3] [--json]

With ``--base-src DIR`` (another checkout's ``src``, e.g. ``git archive REF src | tar -x -C
DIR``: the code before a change) the overhead section serves a copy of the same index with
that code too and alternates three rows only, the in-process search and ``POST /search`` to
each server (raw client), so a change to the service is measured against the code before it
in one run, under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import platform
import select
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from credrank.demo_corpus import build_demo_index, demo_dir
from credrank.documents import read_corpus
from credrank.index.embed import get_embedder
from credrank.index.ingest import embedding_text
from credrank.index.opener import open_store
from credrank.searcher import Searcher

QUERY = "does vitamin d prevent covid"


def candidates(embedder_name: str, n: int = 30) -> list[dict[str, Any]]:
    """The first ``n`` demo passages with their embeddings (as a client would send them)."""
    docs = read_corpus(demo_dir() / "corpus.jsonl").documents[:n]
    emb = get_embedder(embedder_name)
    vectors = emb.embed([embedding_text(d.title, d.text) for d in docs])
    return [{"id": d.id, "text": d.text, "title": d.title, "url": d.url,
             "score": float(i + 1) / n, "vector": np.asarray(v, dtype=np.float32).tolist()}
            for i, (d, v) in enumerate(zip(docs, vectors, strict=True))]


def query_vector(embedder_name: str) -> list[float]:
    """The query's embedding as a client that embeds with the same model would send it."""
    return np.asarray(get_embedder(embedder_name).embed([QUERY])[0], dtype=np.float32).tolist()


def b64(vector: list[float]) -> str:
    """A vector as base64 of little-endian float32 (what /rerank also accepts)."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def ms(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples) * 1e3, q)) if samples else float("nan")


def in_process(index: Path, records: list[dict[str, Any]], n: int) -> dict[str, float]:
    """p50/p99 of the pipeline in this process: search, rerank (cosine), rerank (given)."""
    out: dict[str, float] = {}
    with Searcher.open(index, tables=[demo_dir() / "domains.csv"]) as searcher:
        settings = Searcher.spec(top_k=10)
        for name, run in (
                ("search", lambda: searcher.search_json(QUERY, settings)),
                ("rerank", lambda: searcher.rerank_json(QUERY, records, settings)),
                ("rerank_given", lambda: searcher.rerank_json(QUERY, records, settings,
                                                              retrieval="given"))):
            for _ in range(20):
                run()
            times = []
            for _ in range(n):
                t = time.perf_counter()
                run()
                times.append(time.perf_counter() - t)
            out[f"{name}_p50_ms"], out[f"{name}_p99_ms"] = ms(times, 50), ms(times, 99)
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """``credrank serve`` in a child process on a free loopback port (``extra``: more
    options of ``credrank serve``; ``env``: its environment, default this process's)."""

    def __init__(self, index: Path, deadline_s: float = 300, extra: Sequence[str] = (),
                 env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "credrank.cli", "serve", "--index", str(index), "--port",
             str(self.port), "--table", str(demo_dir() / "domains.csv"), *extra],
            stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
        end = time.monotonic() + deadline_s
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"server exited with {self.proc.returncode}:\n{self.output()}")
            try:
                if httpx.get(self.url + "/readyz", timeout=5).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            if time.monotonic() > end:
                self.stop()
                raise SystemExit(f"server not ready after {deadline_s} s:\n{self.output()}")
            try:
                self.proc.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-5000:]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


async def drive(url: str, method: str, path: str, body: bytes | None, concurrency: int,
                requests: int, seconds: float) -> dict[str, Any]:
    """``requests`` calls (fewer if ``seconds`` pass first) with ``concurrency`` workers."""
    latencies: list[float] = []
    errors = 0
    issued = 0
    headers = {"content-type": "application/json"}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=60) as client:
        for _ in range(min(10, requests)):  # warm the connections and the server
            await client.request(method, path, content=body, headers=headers)
        start = time.perf_counter()
        deadline = start + seconds

        async def worker() -> None:
            nonlocal issued, errors
            while issued < requests and time.perf_counter() < deadline:
                issued += 1
                t = time.perf_counter()
                try:
                    r = await client.request(method, path, content=body, headers=headers)
                    ok = r.status_code == 200
                except httpx.HTTPError:
                    ok = False
                latencies.append(time.perf_counter() - t)
                errors += not ok

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - start
    return {"requests": len(latencies), "errors": errors, "seconds": round(wall, 3),
            "throughput_rps": round(len(latencies) / wall, 1),
            "p50_ms": round(ms(latencies, 50), 2), "p99_ms": round(ms(latencies, 99), 2)}


def minilm_available() -> bool:
    """Whether the MiniLM embedder loads and embeds here (no download attempted beyond what
    the embedder itself does)."""
    try:
        get_embedder("minilm").embed(["ready"])
    except Exception:  # any failure means: use hashing
        return False
    return True


def concurrency(args: argparse.Namespace) -> None:
    """``POST /search`` with consensus from 1 and from N concurrent clients, side by side."""
    clients = [int(c) for c in args.clients.split(",")]
    name = args.embedder or ("minilm" if minilm_available() else "hashing")
    body = {"query": QUERY, "top_k": 10, "consensus": True}
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    try:
        index = args.index or build_demo_index(tmp / "index", name)
        embedder = json.loads((index / "manifest.json").read_text())["embedder"]
        with open_store(index) as store:
            documents = len(store)
        server = Server(index)
        rows = []
        try:
            check = httpx.post(server.url + "/search", json=body, timeout=60)
            if check.status_code != 200:
                raise SystemExit(f"POST /search answered {check.status_code}: {check.text}")
            fetch_k = check.json()["settings"]["fetch_k"]
            pipeline = check.json()["pipeline"]
            # rounds alternate the levels, so a load that drifts on a shared machine
            # weighs on each level alike; the rows report the medians over the rounds
            cells: dict[int, list[dict[str, Any]]] = {c: [] for c in clients}
            for round_ in range(args.rounds):
                for c in clients:
                    result = asyncio.run(drive(server.url, "POST", "/search",
                                               json.dumps(body).encode(), c, args.requests,
                                               args.seconds))
                    cells[c].append(result)
                    if not args.json:
                        print(f"round {round_ + 1} POST /search consensus c={c:<3} {result}",
                              file=sys.stderr)
        finally:
            exit_code = server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for c, results in cells.items():
        rows.append({"clients": c, "requests": sum(r["requests"] for r in results),
                     "errors": sum(r["errors"] for r in results),
                     "throughput_rps": statistics.median(r["throughput_rps"] for r in results),
                     "p50_ms": statistics.median(r["p50_ms"] for r in results),
                     "p99_ms": statistics.median(r["p99_ms"] for r in results),
                     "rounds_rps": [r["throughput_rps"] for r in results]})
    base = rows[0]["throughput_rps"] or float("nan")
    for r in rows:
        r["speedup"] = round(r["throughput_rps"] / base, 2)
    settings = {"endpoint": "POST /search", "body": body, "fetch_k": fetch_k,
                "stages": [s["stage"] for s in pipeline["stages"]], "embedder": embedder,
                "documents": documents, "server": "credrank serve, default options "
                "(one process; worker threads; --max-heavy-requests 2 does not apply: the "
                "request is priced below --heavy-cost)",
                "requests_per_cell": args.requests, "seconds_per_cell": args.seconds,
                "rounds": args.rounds,
                "machine": f"{platform.machine()}, {os.cpu_count()} cores, Python "
                           f"{platform.python_version()}",
                "load_generator": "httpx.AsyncClient on the same machine (loopback)"}
    result = {"bench": "serve-concurrency",
              "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "settings": settings, "rows": rows, "server_exit_code": exit_code,
              "errors": sum(r["errors"] for r in rows)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"POST /search {json.dumps(body)} — stages {' → '.join(settings['stages'])}, "
          f"fetch_k {fetch_k}, embedder {embedder}, {documents} documents (demo index); "
          f"{settings['machine']}; {args.rounds} rounds alternating the levels, each cell "
          f"{args.requests} requests or {args.seconds:g} s; medians over the rounds; "
          f"{settings['load_generator']}\n")
    print("| clients | requests | errors | req/s (median) | p50 ms | p99 ms | req/s per round "
          "| req/s vs 1 client |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['clients']} | {r['requests']} | {r['errors']} | {r['throughput_rps']} | "
              f"{r['p50_ms']} | {r['p99_ms']} | {', '.join(map(str, r['rounds_rps']))} | "
              f"{r['speedup']}× |")
    print(f"\nserver exit code {exit_code}")


# -- the service's own overhead (issue 26) ---------------------------------------------------

def build_scaled_index(path: Path, n: int) -> Path:
    """A hashing index of ``n`` documents: the demo corpus repeated, each copy's text made
    distinct (``(copy i, w… w…)``), typed by the demo domain table; optimised (HNSW)."""
    import dataclasses

    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    emb = get_embedder("hashing")
    demo = read_corpus(demo_dir() / "corpus.jsonl").documents

    def docs() -> Any:
        for i in range(n):
            d = demo[i % len(demo)]
            yield dataclasses.replace(d, id=f"{d.id}-{i}", cites=(),
                                      text=f"{d.text} (copy {i}, w{i % 997} w{i % 991})")

    with open_store(path, "edge", embedder=emb.name, dim=emb.dim, create=True) as store:
        index_documents(docs(), store, emb, SourceTyper([demo_dir() / "domains.csv"]))
        store.optimize()
    return path


def scaled_index(args: argparse.Namespace, tmp: Path) -> Path:
    """``--index``, else ``--cache``/serve-hashing-N (built once, reused), else a temporary
    one."""
    if args.index:
        return Path(args.index)
    if args.cache is None:
        return build_scaled_index(tmp / "index", args.n)
    path = Path(args.cache) / f"serve-hashing-{args.n}"
    if not (path / "manifest.json").is_file():
        shutil.rmtree(path, ignore_errors=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        building = path.with_name(path.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        build_scaled_index(building, args.n)
        building.rename(path)
    return path


async def bare_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """The least an ASGI app answers (``{"status":"ok"}``, no framework, no middleware): served
    by uvicorn, the floor of the HTTP stack the overhead section compares with."""
    if scope["type"] != "http":
        return
    body = b'{"status":"ok"}'
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


#: the environment variable naming the index :func:`bare_search_app` serves
BARE_INDEX_ENV = "CREDRANK_BENCH_BARE_INDEX"


async def bare_search_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``POST`` of ``{"query", "top_k"}``: ``Searcher.search_json`` of the index named by
    :data:`BARE_INDEX_ENV` (opened at start-up, with the demo's domain table, as the bench's
    server), its spec built once per ``top_k`` (as ``credrank serve`` plans a request shape
    once), its document serialised by orjson, and nothing else: no validation, limits, plan,
    price, access log or framework. Served by uvicorn, the least any service on this HTTP stack
    adds to the search: what is above it in ``credrank serve``'s row is credrank's own."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                scope["state"]["searcher"] = Searcher.open(
                    Path(os.environ[BARE_INDEX_ENV]), tables=[demo_dir() / "domains.csv"])
                scope["state"]["specs"] = {}
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                scope["state"]["searcher"].close()
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    import orjson  # the serve extra's, as the server's

    request = json.loads(b"".join(chunks))
    searcher = scope["state"]["searcher"]
    # the spec built once per top_k, as credrank serve plans a request shape once: building
    # it per request (≈ 0.06 ms, the spec and its canonical key) is work the server does not do
    specs = scope["state"]["specs"]
    spec = specs.get(request["top_k"])
    if spec is None:
        spec = specs[request["top_k"]] = Searcher.spec(top_k=request["top_k"])
    body = orjson.dumps(searcher.search_json(request["query"], spec))
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


class BareServer:
    """uvicorn serving ``app`` (default :func:`bare_app`; :func:`bare_search_app` with
    ``index``) in a child process, with ``credrank serve``'s HTTP settings (uvloop and
    httptools when installed, no access log, no server header)."""

    def __init__(self, app: str = "bare_app", index: Path | None = None,
                 deadline_s: float = 120) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = None if index is None else {**os.environ, BARE_INDEX_ENV: str(index)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", f"bench_serve:{app}", "--app-dir",
             str(Path(__file__).resolve().parent), "--port", str(self.port), "--no-access-log",
             "--no-server-header", "--log-level", "warning",
             "--lifespan", "off" if index is None else "on"],
            stdin=subprocess.DEVNULL, env=env)
        end = time.monotonic() + deadline_s
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"uvicorn exited with {self.proc.returncode}")
            try:
                # uvicorn listens once the app has started (the index is open)
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > end:
                    self.stop()
                    raise SystemExit(f"uvicorn not listening after {deadline_s} s") from None
                time.sleep(0.1)

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=60)


#: the overhead section's goal (issue 38)
OVERHEAD_GOAL = ("POST /search p50 <= 1.5x Searcher.search_json (issue 38), judged on the raw "
                 "client")

#: the idle wait before each search of the "after an idle wait" row: about a loopback round
#: trip's, what a server's core waits between a client's sequential requests
IDLE_GAP_S = 50e-6


class AfterIdle:
    """``run()`` timed after blocking ``IDLE_GAP_S`` in the kernel (``select`` on a socket
    that never becomes readable), the wait itself not timed."""

    def __init__(self, run: Any) -> None:
        self.run = run
        self.quiet, self.other = socket.socketpair()

    def __call__(self) -> float:
        select.select([self.quiet], [], [], IDLE_GAP_S)
        start = time.perf_counter()
        self.run()
        return time.perf_counter() - start

    def close(self) -> None:
        self.quiet.close()
        self.other.close()


class AsgiCall:
    """``POST path`` straight into the ASGI app in this process (no socket, no HTTP parsing):
    what the app itself adds — routing, middleware, validation, response building."""

    def __init__(self, app: Any, path: str, body: bytes) -> None:
        self.app, self.body = app, body
        self.scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
                      "method": "POST", "scheme": "http", "path": path,
                      "raw_path": path.encode(), "query_string": b"", "root_path": "",
                      "headers": [(b"content-type", b"application/json"),
                                  (b"content-length", str(len(body)).encode()),
                                  (b"host", b"bench")],
                      "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 2)}
        self.loop = asyncio.new_event_loop()
        self.status = 0
        self.answer = b""

    async def _call(self) -> None:
        sent = False
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": self.body, "more_body": False}
            await asyncio.sleep(3600)  # no disconnect while the app runs
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(dict(self.scope), receive, send)
        self.answer = b"".join(chunks)

    def __call__(self) -> None:
        self.loop.run_until_complete(self._call())

    def close(self) -> None:
        self.loop.close()


class HttpCall:
    """``POST path`` over one keep-alive connection (stdlib ``http.client``: the lightest
    Python client, so the number is mostly the server's)."""

    def __init__(self, url: str, path: str, body: bytes) -> None:
        import http.client
        import urllib.parse

        parts = urllib.parse.urlsplit(url)
        self.conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        self.path, self.body = path, body
        self.headers = {"content-type": "application/json"}
        self.status = 0
        self.answer = b""

    def __call__(self) -> None:
        import http.client

        try:
            self.conn.request("POST", self.path, body=self.body, headers=self.headers)
            response = self.conn.getresponse()
        except (http.client.RemoteDisconnected, ConnectionError):
            # the server closed the idle keep-alive connection (uvicorn's 5 s, while the other
            # rows of a round ran): http.client connects again on the next request
            self.conn.close()
            self.conn.request("POST", self.path, body=self.body, headers=self.headers)
            response = self.conn.getresponse()
        self.answer, self.status = response.read(), response.status

    def close(self) -> None:
        self.conn.close()


class RawCall:
    """``METHOD path`` over one keep-alive socket, the way a load generator in C (wrk, ab)
    measures a server: the request's bytes built once, the answer read by its
    ``content-length`` with no header parsing beyond that. What ``http.client`` adds on top
    (building the request, parsing every header with ``email.parser``) is the Python client's
    own cost, not the server's: the overhead section shows both."""

    def __init__(self, url: str, method: str, path: str, body: bytes = b"") -> None:
        import urllib.parse

        parts = urllib.parse.urlsplit(url)
        self.address = (parts.hostname, parts.port)
        self.sock = self._connect()
        head = f"{method} {path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        if method == "POST":
            head += f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
        self.request = (head + "\r\n").encode("latin-1") + body
        self.buffer = b""
        self.status = 0
        self.answer = b""

    def _connect(self) -> socket.socket:
        sock = socket.create_connection(self.address, timeout=60)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def __call__(self) -> None:
        try:
            self.sock.sendall(self.request)
            self._fill()
        except ConnectionError:
            # the server closed the idle keep-alive connection (uvicorn's 5 s, while the other
            # rows of a round ran): send again on a new one, as an HTTP client does
            self.sock.close()
            self.sock, self.buffer = self._connect(), b""
            self.sock.sendall(self.request)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        self.status = int(lines[0].split()[1])
        length = next(int(line.split(b":", 1)[1]) for line in lines[1:]
                      if line[:15].lower() == b"content-length:")
        while len(self.buffer) < length:
            self._fill()
        self.answer, self.buffer = self.buffer[:length], self.buffer[length:]

    def close(self) -> None:
        self.sock.close()


def process_cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system, all threads) process ``pid`` has used so far, from Linux's
    ``/proc/PID/stat`` (10 ms ticks); ``None`` where there is none."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed(run: Any, n: int) -> list[float]:
    """Seconds of each of ``n`` calls of ``run`` (after 10 unmeasured ones)."""
    for _ in range(10):
        run()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        run()
        out.append(time.perf_counter() - t)
    return out


def self_timed(run: AfterIdle, n: int) -> list[float]:
    """The seconds each of ``n`` calls of ``run`` reports (after 10 unmeasured ones)."""
    for _ in range(10):
        run()
    return [run() for _ in range(n)]


def encode_costs(n: int, dim: int = 384, candidates_n: int = 30) -> list[dict[str, Any]]:
    """The client's cost of encoding one ``/rerank`` body of ``candidates_n`` demo passages
    with ``dim``-float32 vectors (numpy, as an embedder returns them) and a query vector: as
    JSON numbers and as base64, with the standard library and with orjson when installed."""
    docs = read_corpus(demo_dir() / "corpus.jsonl").documents[:candidates_n]
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(docs), dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    qv = vectors.mean(axis=0)
    qv /= np.linalg.norm(qv)

    def request(vector: Any) -> dict[str, Any]:
        return {"query": QUERY, "top_k": 10, "query_vector": vector(qv),
                "candidates": [{"id": d.id, "text": d.text, "title": d.title, "url": d.url,
                                "vector": vector(v)} for d, v in zip(docs, vectors,
                                                                       strict=True)]}

    def numbers(v: np.ndarray) -> list[float]:
        return v.tolist()  # type: ignore[no-any-return]

    def as_b64(v: np.ndarray) -> str:
        return base64.b64encode(v.astype("<f4", copy=False).tobytes()).decode("ascii")

    ways: list[tuple[str, Any]] = [
        ("JSON numbers, json.dumps", lambda: json.dumps(request(numbers)).encode()),
        ("base64 float32, json.dumps", lambda: json.dumps(request(as_b64)).encode())]
    try:
        import orjson
    except ImportError:
        pass
    else:
        ways += [
            ("JSON numbers, orjson (OPT_SERIALIZE_NUMPY)",
             lambda: orjson.dumps(request(lambda v: v), option=orjson.OPT_SERIALIZE_NUMPY)),
            ("base64 float32, orjson", lambda: orjson.dumps(request(as_b64)))]
    rows = []
    for name, encode in ways:
        samples = timed(encode, n)
        rows.append({"encoding": name, "bytes": len(encode()), "p50_ms": round(ms(samples, 50), 3),
                     "p95_ms": round(ms(samples, 95), 3)})
    base = next(r["p50_ms"] for r in rows if r["encoding"] == "base64 float32, json.dumps")
    for r in rows:
        r["vs_base64"] = round(r["p50_ms"] / base, 2) if base else None
    return rows


def overhead(args: argparse.Namespace) -> None:
    """In-process search vs the same ``POST /search`` into the ASGI app and over a real
    server, at ``--n`` documents (hashing), side by side; then the client's cost of a
    ``/rerank`` body as JSON numbers vs base64."""
    body = {"query": QUERY, "top_k": 10}
    raw = json.dumps(body).encode()
    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    samples: dict[str, list[float]] = {"in-process": [], "asgi": [], "http": [],
                                       "http, raw client": [], "healthz, raw client": [],
                                       "bare app, raw client": [],
                                       "bare search app, raw client": [],
                                       "in-process, after an idle wait": [],
                                       "in-process, no text": []}
    # CPU seconds of each row's calls, warm-ups included: the server process's
    # (:func:`process_cpu_s`) for the rows a server answers, this process's otherwise; not
    # counted for the bare app
    served: tuple[str, ...] = ("http", "http, raw client", "healthz, raw client",
                               "bare search app, raw client")
    uncounted = "bare app, raw client"
    if args.base_src is not None:  # the same request to a server of another checkout's code
        samples = {"in-process": [], "http, raw client": [], "base, raw client": []}
        served = ("http, raw client", "base, raw client")
    cpu_s: dict[str, float | None] = {}
    try:
        t0 = time.perf_counter()
        index = scaled_index(args, tmp)
        ready_s = time.perf_counter() - t0
        embedder = json.loads((index / "manifest.json").read_text())["embedder"]
        server = Server(index)
        bare = BareServer()
        base = bare_search = None
        try:
            if args.base_src is None:  # a copy: one process opens a shard at a time
                bare_search = BareServer("bare_search_app", shutil.copytree(
                    index, tmp / "bare", ignore=shutil.ignore_patterns(".credrank.lock")))
            if args.base_src is not None:  # a copy: one process opens a shard at a time
                base = Server(shutil.copytree(index, tmp / "base",
                                              ignore=shutil.ignore_patterns(".credrank.lock")),
                              env={**os.environ, "PYTHONPATH": os.pathsep.join(
                                  [str(args.base_src.resolve()),
                                   *filter(None, os.environ.get("PYTHONPATH", "").split(
                                       os.pathsep))])})
            pids = {name: server.proc.pid for name in served}
            if base is not None:
                pids["base, raw client"] = base.proc.pid
            if bare_search is not None:
                pids["bare search app, raw client"] = bare_search.proc.pid
            from credrank.serve.app import create_app

            # the engine opens a shard in one process at a time: this process reads a copy
            mine = shutil.copytree(index, tmp / "copy",
                                   ignore=shutil.ignore_patterns(".credrank.lock"))
            with Searcher.open(mine, tables=[demo_dir() / "domains.csv"]) as searcher:
                documents = len(searcher.store)
                settings = Searcher.spec(top_k=10)
                app = create_app(searcher)
                asgi = AsgiCall(app, "/search", raw)
                http = HttpCall(server.url, "/search", raw)
                raw_http = RawCall(server.url, "POST", "/search", raw)
                healthz = RawCall(server.url, "GET", "/healthz")
                bare_call = RawCall(bare.url, "GET", "/")
                idle = AfterIdle(lambda: searcher.search_json(QUERY, settings))
                base_http = None if base is None else RawCall(base.url, "POST", "/search", raw)
                bare_search_http = (None if bare_search is None
                                    else RawCall(bare_search.url, "POST", "/search", raw))
                # the three answer hits of the same scores (checked before timing; copies of
                # one demo passage tie within float noise, so ids may swap among them)
                expected = [h["score"] for h in searcher.search_json(QUERY, settings)["hits"]]
                answering: list[Any] = [asgi, http, raw_http]
                answering += [call for call in (base_http, bare_search_http) if call is not None]
                for call in answering:
                    call()
                    if call.status != 200:
                        raise SystemExit(f"POST /search answered {call.status}: "
                                         f"{call.answer[:2000]!r}")
                    got = [h["score"] for h in json.loads(call.answer)["hits"]]
                    if len(got) != len(expected) or not np.allclose(got, expected, rtol=1e-4):
                        raise SystemExit(f"POST /search scores differ: {got} vs {expected}")
                response_bytes = len(http.answer)
                runs = {"in-process": lambda: searcher.search_json(QUERY, settings),
                        "asgi": asgi, "http": http, "http, raw client": raw_http,
                        # the floor: HTTP, routing, middleware and the access log, no work
                        "healthz, raw client": healthz,
                        # the HTTP stack alone: uvicorn and a bare app, no credrank
                        "bare app, raw client": bare_call,
                        # the least a service on this HTTP stack adds to the search
                        "bare search app, raw client": bare_search_http,
                        # the search as a server's core finds its caches, after a wait
                        "in-process, after an idle wait": idle,
                        # what the hits' snippets cost (the default text) in the same run
                        "in-process, no text":
                            lambda: searcher.search_json(QUERY, settings, text="none"),
                        # --base-src: the same request to the other checkout's server
                        "base, raw client": base_http}
                runs = {name: run for name, run in runs.items() if name in samples}
                # rounds alternate the paths: load drifting on a shared machine weighs on
                # each alike
                for round_ in range(args.rounds):
                    for name, run in runs.items():
                        if name in served:
                            before = process_cpu_s(pids[name])
                        elif name != uncounted:
                            before = time.process_time()
                        samples[name] += (self_timed(run, args.requests)
                                          if isinstance(run, AfterIdle)
                                          else timed(run, args.requests))
                        if name in served:
                            after = process_cpu_s(pids[name])
                            if before is None or after is None:
                                cpu_s[name] = None
                            elif cpu_s.get(name, 0.0) is not None:
                                cpu_s[name] = cpu_s.get(name, 0.0) + after - before
                        elif name != uncounted:
                            cpu_s[name] = cpu_s.get(name, 0.0) + time.process_time() - before
                    if not args.json:
                        print(f"round {round_ + 1}/{args.rounds}: " + ", ".join(
                            f"{k} p50 {ms(v[-args.requests:], 50):.2f} ms"
                            for k, v in samples.items()), file=sys.stderr)
                for call in (*answering, healthz, bare_call):
                    call.close()
                idle.close()
        finally:
            exit_code = server.stop()
            bare.stop()
            for other in (base, bare_search):
                if other is not None:
                    other.stop()
        encoding = encode_costs(args.requests) if args.base_src is None else []
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    base50, base95 = ms(samples["in-process"], 50), ms(samples["in-process"], 95)
    labels = {"in-process": "Searcher.search_json (in process)",
              "asgi": "POST /search into the ASGI app (in process, no socket)",
              "http": "POST /search over HTTP (credrank serve, uvicorn; http.client keep-alive)",
              "http, raw client": "POST /search over HTTP (the same server; raw socket client, "
                                  "keep-alive, as wrk measures)",
              "healthz, raw client": "GET /healthz over HTTP (raw socket client): the floor, "
                                     "no work",
              "bare app, raw client": "GET / of a bare ASGI app on uvicorn (raw socket client): "
                                      "the HTTP stack's own floor, no credrank",
              "bare search app, raw client": "POST /search to a bare ASGI app on uvicorn that "
                                             "runs Searcher.search_json and orjson, nothing "
                                             "else (raw socket client): the least a service "
                                             "on this HTTP stack adds",
              "in-process, after an idle wait": "Searcher.search_json after a 50 µs idle wait "
                                                "(in process; the wait not timed)",
              "in-process, no text": "Searcher.search_json, text none (no snippets: their cost)",
              "base, raw client": f"POST /search over HTTP, the code of --base-src "
                                  f"{args.base_src} (raw socket client)"}
    if args.base_src is not None:
        labels["http, raw client"] = ("POST /search over HTTP, this checkout's code (raw socket "
                                      "client)")
    calls = args.rounds * (args.requests + 10)  # the warm-up calls of each batch included

    def cpu_ms(name: str) -> float | None:
        seconds = cpu_s.get(name)
        return None if seconds is None else round(seconds / calls * 1e3, 3)

    rows = [{"path": labels[k], "samples": len(v), "p50_ms": round(ms(v, 50), 3),
             "p95_ms": round(ms(v, 95), 3), "p50_ratio": round(ms(v, 50) / base50, 2),
             "p95_ratio": round(ms(v, 95) / base95, 2), "cpu_ms_per_call": cpu_ms(k),
             "cpu_of": ("server" if k in served
                        else None if cpu_ms(k) is None else "this process")}
            for k, v in samples.items()]
    if args.base_src is not None:
        _report_against_base(args, rows, samples, documents, response_bytes, exit_code)
        return
    http_ratio = rows[list(samples).index("http")]["p50_ratio"]
    raw_ratio = rows[list(samples).index("http, raw client")]["p50_ratio"]
    floor_ms = ms(samples["healthz, raw client"], 50)
    bare_search_ratio = rows[list(samples).index("bare search app, raw client")]["p50_ratio"]
    own_ms = ms(samples["http, raw client"], 50) - ms(samples["bare search app, raw client"], 50)
    settings_out = {"body": body, "documents": documents, "embedder": embedder,
                    "index": str(index), "index_ready_s": round(ready_s, 1),
                    "response_bytes": response_bytes, "rounds": args.rounds,
                    "requests_per_round": args.requests,
                    "server": "python -m credrank.cli serve (uvicorn, default options), "
                              "loopback, one client, sequential",
                    "json_library": _json_library(),
                    "machine": _machine()}
    result = {"bench": "serve-overhead", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "settings": settings_out, "rows": rows, "http_over_in_process_p50": http_ratio,
              "raw_http_over_in_process_p50": raw_ratio,
              # credrank's floor (GET /healthz, no work) added to the in-process search
              "floor_over_in_process_p50": round((base50 + floor_ms) / base50, 2),
              # the least any service on this HTTP stack reaches (measured: a bare app that
              # only searches), and what credrank serve adds above it
              "bare_search_over_in_process_p50": bare_search_ratio,
              "credrank_over_bare_search_p50_ms": round(own_ms, 3),
              "goal": OVERHEAD_GOAL,
              "goal_met": raw_ratio <= 1.5,
              # the server's CPU a POST /search (raw client) over this process's a search_json
              "server_cpu_over_in_process_cpu": (
                  None if cpu_ms("http, raw client") is None or not cpu_ms("in-process")
                  else round(cpu_ms("http, raw client") / cpu_ms("in-process"), 2)),
              "rerank_encoding": encoding,
              "server_exit_code": exit_code}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"POST /search {json.dumps(body)} vs Searcher.search_json, {documents:,} documents "
          f"(demo corpus repeated), embedder {embedder}; {args.rounds} rounds alternating the "
          f"paths, {args.requests} calls each; answer {response_bytes:,} bytes; service JSON: "
          f"{settings_out['json_library']}; {settings_out['machine']}\n")
    _print_rows(rows)
    print(f"\nHTTP / in-process p50: {raw_ratio:.2f}× with the raw client, {http_ratio:.2f}× "
          f"with http.client (goal ≤ 1.5×, judged on the raw client: "
          f"{'met' if result['goal_met'] else 'not met'}); the floor (GET /healthz, no work) "
          f"added to the in-process search: {result['floor_over_in_process_p50']:.2f}×; "
          f"a bare app that only searches, on the same HTTP stack: {bare_search_ratio:.2f}×, "
          f"credrank serve {own_ms * 1e3:+.0f} µs p50 above it; the server's CPU a POST /search "
          f"over this process's a search_json: "
          + ("—" if result["server_cpu_over_in_process_cpu"] is None
             else f"{result['server_cpu_over_in_process_cpu']:.2f}×")
          + f"; server exit code {exit_code}\n")
    print("Client cost of one /rerank body: 30 demo passages + query, 384-float32 vectors "
          f"from numpy ({args.requests} encodings each)\n")
    print("| encoding | body bytes | p50 ms | p95 ms | p50 × base64 (json.dumps) |")
    print("|---|---|---|---|---|")
    for r in encoding:
        print(f"| {r['encoding']} | {r['bytes']:,} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | "
              f"{r['vs_base64']}× |")


def _print_rows(rows: list[dict[str, Any]]) -> None:
    """The overhead section's rows as a Markdown table."""
    print("| path | calls | p50 ms | p95 ms | p50 × in-process | p95 × in-process | "
          "CPU ms a call (whose) |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = ("—" if r["cpu_ms_per_call"] is None
               else f"{r['cpu_ms_per_call']:.3f} ({r['cpu_of']})")
        print(f"| {r['path']} | {r['samples']} | {r['p50_ms']:.2f} | {r['p95_ms']:.2f} | "
              f"{r['p50_ratio']:.2f}× | {r['p95_ratio']:.2f}× | {cpu} |")


def _report_against_base(args: argparse.Namespace, rows: list[dict[str, Any]],
                         samples: dict[str, list[float]], documents: int, response_bytes: int,
                         exit_code: int) -> None:
    """The overhead section with ``--base-src``: this checkout's server and the other's, side by
    side with the in-process search (the same rounds, the same request)."""
    new50, old50 = ms(samples["http, raw client"], 50), ms(samples["base, raw client"], 50)
    by_name = dict(zip(samples, rows, strict=True))
    result = {"bench": "serve-overhead-against-base",
              "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "settings": {"documents": documents, "base_src": str(args.base_src),
                           "rounds": args.rounds, "requests_per_round": args.requests,
                           "response_bytes": response_bytes,
                           "machine": _machine()},
              "rows": rows,
              "raw_http_over_in_process_p50": by_name["http, raw client"]["p50_ratio"],
              "base_raw_http_over_in_process_p50": by_name["base, raw client"]["p50_ratio"],
              "p50_ms_less_than_base": round(old50 - new50, 3),
              "goal": OVERHEAD_GOAL,
              "goal_met": by_name["http, raw client"]["p50_ratio"] <= 1.5,
              "server_exit_code": exit_code}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"POST /search vs Searcher.search_json, {documents:,} documents, this checkout's "
          f"server and --base-src {args.base_src}'s; {args.rounds} rounds alternating the "
          f"three, {args.requests} calls each; answer {response_bytes:,} bytes\n")
    _print_rows(rows)
    print(f"\nthis checkout: {result['raw_http_over_in_process_p50']:.2f}× the in-process "
          f"p50, --base-src: {result['base_raw_http_over_in_process_p50']:.2f}×; p50 of "
          f"--base-src less this checkout's: {result['p50_ms_less_than_base'] * 1e3:+.0f} µs "
          f"(goal ≤ 1.5×: {'met' if result['goal_met'] else 'not met'}); server exit code "
          f"{exit_code}")


def _machine() -> str:
    """The machine a report names: architecture, cores, Python."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def _json_library() -> str:
    """What the service serialises its answers with."""
    try:
        from credrank.serve.responses import JSON_LIBRARY
    except ImportError:
        return "json (standard library)"
    return str(JSON_LIBRARY)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--section", choices=("load", "concurrency", "overhead"), default="load",
                    help="load: every endpoint at each --concurrency; concurrency: POST "
                         "/search with consensus from 1 and 4 clients; overhead: in-process "
                         "search vs POST /search at --n documents, and /rerank body encoding")
    ap.add_argument("--embedder", choices=("minilm", "hashing"), default=None,
                    help="default: minilm (load); minilm when available, else hashing "
                         "(concurrency)")
    ap.add_argument("--index", type=Path, help="an index of the demo corpus (default: build)")
    ap.add_argument("--concurrency", default="1,8,32", help="the load section's levels")
    ap.add_argument("--clients", default="1,4", help="the concurrency section's levels")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds of the concurrency section (default 5; each runs every level "
                         "once) and of the overhead section (default 3; each runs every path)")
    ap.add_argument("--requests", type=int, default=None,
                    help="per endpoint and concurrency (default 400; concurrency: 100 a round)")
    ap.add_argument("--seconds", type=float, default=30.0, help="time bound per cell")
    ap.add_argument("--n", type=int, default=100_000,
                    help="the overhead section's index size (hashing; default 100,000)")
    ap.add_argument("--cache", type=Path, default=None,
                    help="the overhead section: keep its index in CACHE/serve-hashing-N and "
                         "reuse it (default: build in a temporary folder)")
    ap.add_argument("--base-src", type=Path, default=None,
                    help="the overhead section: also serve the same index with another "
                         "checkout's src (PYTHONPATH), the code before a change, and time "
                         "both servers and the in-process search, alternating")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    if args.base_src is not None and args.section != "overhead":
        ap.error("--base-src: only with --section overhead")
    if args.base_src is not None and not (args.base_src / "credrank" / "__init__.py").is_file():
        ap.error(f"--base-src {args.base_src}: expected another checkout's src folder (one "
                 "that holds credrank/__init__.py)")
    if args.section == "overhead":
        args.requests = args.requests or 300
        args.rounds = args.rounds or 3
        overhead(args)
        return
    if args.section == "concurrency":
        args.requests = args.requests or 100
        args.rounds = args.rounds or 5
        concurrency(args)
        return
    args.embedder = args.embedder or "minilm"
    args.requests = args.requests or 400
    levels = [int(c) for c in args.concurrency.split(",")]

    tmp = Path(tempfile.mkdtemp(prefix="bench-serve-"))
    try:
        index = args.index or build_demo_index(tmp / "index", args.embedder)
        embedder = json.loads((index / "manifest.json").read_text())["embedder"]
        records = candidates(embedder)
        pipeline = in_process(index, records, 200)
        search_body = json.dumps({"query": QUERY, "top_k": 10}).encode()
        rerank_body = json.dumps({"query": QUERY, "top_k": 10, "candidates": records}).encode()
        given_body = json.dumps({"query": QUERY, "top_k": 10, "candidates": records,
                                 "retrieval": "given"}).encode()
        qv_body = json.dumps({"query": QUERY, "top_k": 10, "candidates": records,
                              "query_vector": query_vector(embedder)}).encode()
        b64_body = json.dumps({"query": QUERY, "top_k": 10,
                               "candidates": [{**r, "vector": b64(r["vector"])} for r in records],
                               "query_vector": b64(query_vector(embedder))}).encode()
        cells = [("GET /healthz", "GET", "/healthz", None),
                 ("POST /search", "POST", "/search", search_body),
                 ("POST /rerank (30, vectors)", "POST", "/rerank", rerank_body),
                 ("POST /rerank (30, vectors, query_vector)", "POST", "/rerank", qv_body),
                 ("POST /rerank (30, base64 vectors, query_vector)", "POST", "/rerank",
                  b64_body),
                 ("POST /rerank (30, vectors, given)", "POST", "/rerank", given_body)]
        server = Server(index)
        rows = []
        try:
            for name, method, path, body in cells:
                for c in levels:
                    result = asyncio.run(drive(server.url, method, path, body, c,
                                               args.requests, args.seconds))
                    rows.append({"endpoint": name, "concurrency": c, **result})
                    if not args.json:
                        print(f"{name:34} c={c:<3} {result}", file=sys.stderr)
        finally:
            exit_code = server.stop()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    def p50(name: str, c: int) -> float:
        return next(r["p50_ms"] for r in rows if r["endpoint"] == name and r["concurrency"] == c)

    c0 = levels[0]
    goals = {
        "rerank_minus_empty_p50_ms": round(p50("POST /rerank (30, vectors)", c0)
                                           - p50("GET /healthz", c0), 2),
        "rerank_query_vector_minus_empty_p50_ms": round(
            p50("POST /rerank (30, vectors, query_vector)", c0) - p50("GET /healthz", c0), 2),
        "rerank_base64_minus_empty_p50_ms": round(
            p50("POST /rerank (30, base64 vectors, query_vector)", c0)
            - p50("GET /healthz", c0), 2),
        "rerank_given_minus_empty_p50_ms": round(p50("POST /rerank (30, vectors, given)", c0)
                                                 - p50("GET /healthz", c0), 2),
        "search_over_in_process_p50": round(p50("POST /search", c0)
                                            / pipeline["search_p50_ms"], 2),
    }
    # nothing embedded on the server: the service's own cost (the query embedding is model
    # time, shown by the row without query_vector)
    goals["rerank_goal_met_numbers"] = goals["rerank_query_vector_minus_empty_p50_ms"] < 2.0
    goals["rerank_goal_met_base64"] = goals["rerank_base64_minus_empty_p50_ms"] < 2.0
    goals["search_goal_met"] = goals["search_over_in_process_p50"] <= 1.5
    result = {"bench": "serve", "date": datetime.now(UTC).isoformat(timespec="seconds"),
              "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
                         f"Python {platform.python_version()}",
              "embedder": embedder, "query": QUERY, "candidates": len(records),
              "rerank_body_bytes": len(rerank_body), "in_process": pipeline,
              "rows": rows, "goals_at_concurrency": c0, "goals": goals,
              "server_exit_code": exit_code,
              "errors": sum(r["errors"] for r in rows)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print("| endpoint | concurrency | requests | errors | req/s | p50 ms | p99 ms |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['endpoint']} | {r['concurrency']} | {r['requests']} | {r['errors']} | "
              f"{r['throughput_rps']} | {r['p50_ms']} | {r['p99_ms']} |")
    print(f"\nin-process ({embedder}): " + ", ".join(f"{k} {v:.2f}"
                                                   for k, v in pipeline.items()))
    print(f"goals at concurrency {c0}: {goals}; server exit code {exit_code}")
    print(f"median of p50s: {statistics.median(r['p50_ms'] for r in rows):.2f} ms")


if __name__ == "__main__":
    main()
