"""The FastAPI application of ``credrank serve``: :func:`create_app` over an open
:class:`~credrank.searcher.Searcher`.

Endpoints (bodies in :mod:`credrank.serve.models`, documented in docs/json.md):

* ``POST /search``, ``POST /rerank`` — public; the ``credrank search --json`` document.
* ``POST /index``, ``POST /feedback``, ``POST /priors/rollback`` — writes: need the API key
  (:mod:`credrank.serve.auth`, checked before the body is read).
* ``GET /priors`` — public (it reads the feedback store).
* ``GET /healthz`` (the process answers), ``GET /readyz`` (the index and the model are loaded
  and the server is not shutting down), ``GET /openapi.json``, ``GET /`` (the web page) and
  ``/static``.

Middleware, outermost first: the access log (one JSON line per request), the API key of the
write paths, the body size limit; the endpoint then runs its blocking work in a worker thread
under the per-request time limit. Searches and index writes are serialised on the store
(the searcher's lock); reranking touches no store and runs concurrently.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from fastapi import FastAPI, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from credrank import __version__
from credrank.documents import Reject, iter_documents
from credrank.index.ingest import index_documents
from credrank.index.store import StoreError
from credrank.rerank import CandidateError
from credrank.search import SearchSettings
from credrank.searcher import Searcher
from credrank.serve.auth import API_KEY_HEADER, BEARER, ApiKeyMiddleware
from credrank.serve.config import MAX_SELECT_POOL, WRITE_PATHS, ServeConfig
from credrank.serve.limits import BodyLimitMiddleware, LimitError, run_limited
from credrank.serve.logs import AccessLogMiddleware
from credrank.serve.models import (
    ErrorBody,
    FeedbackRequest,
    Health,
    IndexRequest,
    IndexResponse,
    PriorsResponse,
    RerankRequest,
    RerankResponse,
    RollbackRequest,
    SearchRequest,
    SearchResponse,
    _Scoring,
)
from credrank.serve.responses import JSON, error
from credrank.signals.feedback import FeedbackPriors

STATIC_DIR = Path(__file__).resolve().parent / "static"
T = TypeVar("T")

_KINDS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
          405: "method_not_allowed", 409: "conflict", 413: "too_large",
          415: "unsupported_media_type", 422: "invalid_request", 503: "unavailable",
          504: "timeout"}


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {code: {"model": ErrorBody, "description": _KINDS.get(code, "error")}
            for code in codes}


def field_path(loc: Sequence[Any]) -> str:
    """``("body", "candidates", 3, "id")`` → ``candidates[3].id``."""
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header") and len(parts) > 1:
        parts = parts[1:]
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


class ServiceState:
    """What the endpoints share: the searcher, the configuration, the worker threads."""

    def __init__(self, searcher: Searcher, config: ServeConfig) -> None:
        self.searcher, self.config = searcher, config
        self.executor = ThreadPoolExecutor(thread_name_prefix="credrank-serve")
        # index writes take the lock searches take (Searcher serialises store access on it)
        self.store_lock: threading.Lock = searcher.lock
        self.ready = False
        self._closed = False
        self._close_lock = threading.Lock()

    async def run(self, func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return await run_limited(self.executor, self.config.timeout_s, func, *args, **kwargs)

    def close(self) -> None:
        """Wait for running work, then close the index (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self.ready = False
            self.executor.shutdown(wait=True)
            self.searcher.close()

    # -- settings ----------------------------------------------------------------------------
    def settings(self, req: _Scoring, *, pool: int, pool_field: str, fetch_k: int | None = None,
                 lexical: bool = False) -> SearchSettings:
        store = None
        if req.priors == "feedback":
            if self.config.priors_store is None:
                raise LimitError(422, "invalid_request", "priors: 'feedback' needs a feedback "
                                 "store; start `credrank serve` with --priors-store DIR")
            store = self.config.priors_store
        if req.select is not None and pool > MAX_SELECT_POOL:
            raise LimitError(422, "invalid_request", f"{pool_field}: at most "
                             f"{MAX_SELECT_POOL:,} with select, got {pool:,}")
        try:
            return self.searcher.settings(
                top_k=req.top_k, fetch_k=fetch_k, lexical=lexical,
                priors="current" if store is not None else req.priors, mode=req.mode,
                priors_store=store, select=req.select, select_params=dict(req.params),
                consensus=req.consensus, consensus_params=dict(req.consensus_params))
        except (ValueError, TypeError) as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None

    # -- the blocking work -------------------------------------------------------------------
    def search(self, query: str, settings: SearchSettings) -> dict[str, Any]:
        start = time.perf_counter()
        doc = self.searcher.search_json(query, settings)
        doc["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return doc

    def rerank(self, query: str, records: list[dict[str, Any]], settings: SearchSettings,
               retrieval: str, query_vector: list[float] | None = None) -> dict[str, Any]:
        start = time.perf_counter()
        doc = self.searcher.rerank_json(query, records, settings, retrieval=retrieval,
                                        query_vector=query_vector)
        doc["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return doc

    def index(self, documents: list[Any]) -> dict[str, Any]:
        searcher = self.searcher
        with tempfile.TemporaryDirectory(prefix="credrank-serve-") as tmp:
            path = Path(tmp) / "documents.jsonl"
            with path.open("w", encoding="utf-8", newline="\n") as out:
                for record in documents:  # ASCII JSON: one record per line, whatever it holds
                    out.write(json.dumps(record, ensure_ascii=True) + "\n")
            with self.store_lock:
                report = index_documents(iter_documents(path), searcher.store,
                                         searcher.embedder, searcher.typer)
                size = len(searcher.store)
        return {"credrank_index": 1, "indexed": report.indexed, "unchanged": report.unchanged,
                "rejected": report.rejected, "rejects": [_reject(r) for r in report.rejects],
                "conflicts": [{"doc_id": d, "conflict": c} for d, c in report.conflicts],
                "documents": size}

    def priors_store(self) -> FeedbackPriors:
        if self.config.priors_store is None:
            raise LimitError(404, "not_found", "no feedback store: start `credrank serve` with "
                                               "--priors-store DIR to enable /feedback and "
                                               "/priors")
        return FeedbackPriors(self.config.priors_store)


def _reject(r: Reject) -> dict[str, Any]:
    where = f"record {r.line}"
    message = f"{where}: {r.reason}" if r.field is None else \
        f"{where}: field '{r.field}': {r.reason}"
    return {"record": r.line, "field": r.field, "reason": r.reason, "message": message}


def priors_document(store: FeedbackPriors, version: int | None = None) -> dict[str, Any]:
    record = store.record(version)
    out = {"version": record["version"], "current": store.current, "base": store.base_name,
           "epsilon": store.epsilon, "max_change": store.max_change,
           "types": dict(record["types"]), "sources": dict(record["sources"]),
           "event": record["event"], "timestamp": record["timestamp"]}
    if "restored_from" in record:
        out["restored_from"] = record["restored_from"]
    return out


def create_app(searcher: Searcher, config: ServeConfig | None = None) -> FastAPI:
    """The service over ``searcher`` (closed when the app shuts down)."""
    config = config or ServeConfig()
    state = ServiceState(searcher, config)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        state.ready = True
        try:
            yield
        finally:
            state.ready = False
            # in-flight requests have finished (uvicorn drains them first); wait for any
            # timed-out work still running, then close the index (releases its lock)
            await asyncio.get_running_loop().run_in_executor(None, state.close)

    app = FastAPI(
        title="credrank", version=__version__, lifespan=lifespan, default_response_class=JSON,
        description="Credibility-aware retrieval: score = similarity × source-reliability "
                    "prior. The JSON documents are those of docs/json.md.")
    app.state.service = state
    write = [Security(API_KEY_HEADER), Security(BEARER)]

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSON:
        errors = [{"field": field_path(e.get("loc", ())), "loc": list(e.get("loc", ())),
                   "msg": str(e.get("msg", "")), "type": str(e.get("type", ""))}
                  for e in exc.errors()]
        for e in errors:
            if e["type"] == "json_invalid":
                e["field"] = "body"
        detail = "; ".join(f"{e['field']}: {e['msg']}" for e in errors[:5])
        if len(errors) > 5:
            detail += f"; … {len(errors) - 5} more"
        return error(422, "invalid_request", detail or "invalid request", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSON:
        return error(exc.status_code, _KINDS.get(exc.status_code, "error"), str(exc.detail),
                     headers=dict(exc.headers or {}))

    @app.exception_handler(LimitError)
    async def _limit(_: Request, exc: LimitError) -> JSON:
        return error(exc.status, exc.kind, exc.detail)

    @app.exception_handler(StoreError)
    async def _store(_: Request, exc: StoreError) -> JSON:
        return error(503, "unavailable", f"the index is not available: {exc}")

    # -- health ------------------------------------------------------------------------------
    @app.get("/healthz", response_model=Health, tags=["health"])
    async def healthz() -> JSON:
        """Liveness: the process answers."""
        return JSON({"status": "ok"})

    @app.get("/readyz", response_model=Health, responses=_errors(503), tags=["health"])
    async def readyz() -> JSON:
        """Readiness: the index and the embedder are loaded and the server is not stopping."""
        if not state.ready:
            return error(503, "unavailable", "not ready: starting or shutting down")
        return JSON({"status": "ready", "engine": searcher.store.manifest.engine,
                     "embedder": searcher.embedder.name, "writes": config.writable,
                     "priors_store": config.priors_store is not None})

    # -- search and rerank ---------------------------------------------------------------------
    @app.post("/search", response_model=SearchResponse, responses=_errors(413, 422, 503, 504),
              tags=["search"])
    async def search(req: SearchRequest) -> JSON:
        """Credibility-aware search over the served index (as `credrank search --json`)."""
        fetch_k = req.fetch_k if req.fetch_k is not None else 3 * req.top_k
        settings = state.settings(req, pool=fetch_k, pool_field="fetch_k", fetch_k=req.fetch_k,
                                  lexical=req.lexical)
        try:
            doc = await state.run(state.search, req.query, settings)
        except ValueError as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None
        return JSON(doc)

    @app.post("/rerank", response_model=RerankResponse, responses=_errors(413, 422, 504),
              tags=["search"], openapi_extra={"requestBody": {
                  "required": True, "content": {"application/json": {
                      "schema": {"$ref": "#/components/schemas/RerankRequest"}}}}})
    async def rerank(request: Request) -> JSON:
        """Rerank candidates retrieved elsewhere: provenance typed from their URLs, retrieval
        score = cosine (passages with a vector are not embedded again; with `query_vector`
        the query is not embedded either) or their own score; each hit returns the
        candidate's metadata untouched."""
        # parsed and validated in one pass by pydantic-core (json.loads + validation of 30
        # candidates with 384-float vectors costs ~4× more); the schema is RerankRequest's
        try:
            req = RerankRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            raise RequestValidationError(
                [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
            ) from None
        settings = state.settings(req, pool=len(req.candidates), pool_field="candidates")
        records = [{"id": c.id, "text": c.text, "url": c.url, "title": c.title,
                    "score": c.score, "vector": c.vector, "metadata": c.metadata}
                   for c in req.candidates]
        try:
            doc = await state.run(state.rerank, req.query, records, settings, req.retrieval,
                                  req.query_vector)
        except CandidateError as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None
        except ValueError as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None
        return JSON(doc)

    # -- writes --------------------------------------------------------------------------------
    @app.post("/index", response_model=IndexResponse, dependencies=write,
              responses=_errors(401, 403, 413, 422, 503, 504), tags=["write"])
    async def index(req: IndexRequest) -> JSON:
        """Index documents into the served index (validated and rejected as `credrank index`
        validates a JSONL file; record i is line i). Needs the API key."""
        try:
            doc = await state.run(state.index, req.documents)
        except ValueError as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None
        return JSON(doc)

    @app.post("/feedback", response_model=PriorsResponse, dependencies=write,
              responses=_errors(401, 403, 404, 413, 422, 504), tags=["priors"])
    async def feedback(req: FeedbackRequest) -> JSON:
        """One round of relevance feedback: a new version of the priors (bounded steps,
        logged, reversible). Needs the API key and --priors-store."""
        items = [(i.source_type, i.source_id, i.relevant) for i in req.items]

        def work() -> dict[str, Any]:
            store = state.priors_store()
            version = store.update(items, req.step, author=req.author, reason=req.reason)
            return priors_document(store, version)

        try:
            return JSON(await state.run(work))
        except (ValueError, OSError) as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None

    @app.get("/priors", response_model=PriorsResponse, responses=_errors(404, 422, 504),
             tags=["priors"])
    async def priors(version: int | None = Query(None, ge=0, description="default: current")
                     ) -> JSON:
        """The priors of a version of the feedback store (per type and per source)."""
        def work() -> dict[str, Any]:
            return priors_document(state.priors_store(), version)

        try:
            return JSON(await state.run(work))
        except (ValueError, OSError) as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None

    @app.post("/priors/rollback", response_model=PriorsResponse, dependencies=write,
              responses=_errors(401, 403, 404, 413, 422, 504), tags=["priors"])
    async def rollback(req: RollbackRequest) -> JSON:
        """Restore an earlier version of the priors, recorded as a new version."""
        def work() -> dict[str, Any]:
            store = state.priors_store()
            new = store.rollback(req.version, author=req.author, reason=req.reason)
            return priors_document(store, new)

        try:
            return JSON(await state.run(work))
        except (ValueError, OSError) as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None

    # -- the web page --------------------------------------------------------------------------
    @app.get("/", include_in_schema=False)
    async def page() -> Any:
        page = STATIC_DIR / "index.html"
        if not page.is_file():
            return error(404, "not_found", "the web page is not installed "
                                           "(credrank/serve/static/index.html is missing)")
        return FileResponse(page, media_type="text/html")

    if STATIC_DIR.is_dir():
        app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")

    # added innermost first: the access log wraps everything
    app.add_middleware(BodyLimitMiddleware, max_bytes=config.max_body_bytes)
    app.add_middleware(ApiKeyMiddleware, api_key=config.api_key, paths=WRITE_PATHS)
    app.add_middleware(AccessLogMiddleware)
    _document_body(app, RerankRequest)
    return app


def _document_body(app: FastAPI, model: type[BaseModel]) -> None:
    """Put ``model`` (a body an endpoint parses itself) into the OpenAPI components, where the
    endpoint's ``openapi_extra`` points."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            body = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for name, sub in body.pop("$defs", {}).items():
                components.setdefault(name, sub)
            components[model.__name__] = body
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
