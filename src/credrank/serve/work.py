"""What the endpoints of ``credrank serve`` share and the work they run: :class:`ServiceState`.

Every ``/search`` and ``/rerank`` is validated, then priced (:mod:`credrank.serve.cost`) and
refused over the budget, then — if heavy — admitted by the concurrency gate
(:mod:`credrank.serve.gate`), and only then run in a worker thread under the time limit with
a :class:`~credrank.serve.cancel.WorkToken` its pipeline checks between stages. Writes run
with the same token and commit through it (:mod:`credrank.serve.limits` says what a 504
reports), remembered by ``Idempotency-Key`` (:mod:`credrank.serve.idempotency`).

Store access: searches and the *write* of ``/index`` hold the searcher's lock; ``/index``
validates, types and embeds its documents before taking it (reading the stored content
hashes under it briefly), so searches never wait for its embedding. Reranking touches no
store and runs concurrently.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from fastapi import Response

from credrank.documents import Reject, iter_documents
from credrank.index.ingest import EMBED_BATCH, prepare_documents, write_prepared
from credrank.rerank import rerank_hits, rerank_pipeline
from credrank.search import SearchSettings, build_pipeline, describe, search_document
from credrank.searcher import Searcher
from credrank.select.stages import CoverageSelect
from credrank.serve.cancel import CheckedEmbedder, Hook, WorkToken, checked_pipeline
from credrank.serve.config import MAX_SELECT_POOL, ServeConfig
from credrank.serve.cost import Estimate, estimate, largest_pool
from credrank.serve.gate import HeavyGate
from credrank.serve.idempotency import (
    REPLAYED_HEADER,
    IdempotencyKeys,
    fingerprint,
)
from credrank.serve.limits import MAY_BE_APPLIED, LimitError, run_limited
from credrank.serve.models import _Scoring
from credrank.serve.responses import JSON, dumps
from credrank.signals.feedback import FeedbackPrior, FeedbackPriors

T = TypeVar("T")
#: a write's work: ``token → (answer, applied)``
WriteWork = Callable[[WorkToken], tuple[dict[str, Any], bool]]


class _ChunkedEmbedder(CheckedEmbedder):
    """:class:`CheckedEmbedder` that embeds :data:`EMBED_BATCH` texts per call, so a large
    request is cancelled between batches rather than after all of them."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) <= EMBED_BATCH:
            return super().embed(texts)
        return np.concatenate([super(_ChunkedEmbedder, self).embed(texts[s:s + EMBED_BATCH])
                               for s in range(0, len(texts), EMBED_BATCH)])


def _libc_trim() -> Callable[[], None]:
    """glibc's ``malloc_trim(0)`` (gives freed heap pages back to the OS), else a no-op."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return lambda: None

    def release() -> None:
        trim(0)

    return release


#: called after each heavy request's work: without it the allocator keeps the peak of a
#: large selection (hundreds of MB) as the process's resident size
release_memory = _libc_trim()


def _then_release(func: Callable[..., T]) -> Callable[..., T]:
    def run(*args: Any) -> T:
        try:
            return func(*args)
        finally:
            release_memory()

    return run


class ServiceState:
    """The searcher, the configuration, the worker threads and the request policies."""

    def __init__(self, searcher: Searcher, config: ServeConfig) -> None:
        self.searcher, self.config = searcher, config
        self.executor = ThreadPoolExecutor(thread_name_prefix="credrank-serve")
        # index writes take the lock searches take (Searcher serialises store access on it)
        self.store_lock: threading.Lock = searcher.lock
        self.gate = HeavyGate(config.max_heavy_requests)
        self.keys = IdempotencyKeys(config.idempotency_keys)
        #: tests only: observes (and may hold) the work at its checkpoints
        self.hook: Hook | None = None
        #: measures the time limits (tests replace it by one they control)
        self.sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
        self.ready = False
        self._closed = False
        self._close_lock = threading.Lock()

    def close(self) -> None:
        """Wait for running work, then close the index (idempotent)."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            self.ready = False
            self.executor.shutdown(wait=True)
            self.searcher.close()

    # -- running work ------------------------------------------------------------------------
    async def read(self, cost: Estimate | None, func: Callable[..., dict[str, Any]],
                   *args: Any) -> dict[str, Any]:
        """``func(token, *args)`` in a worker: the gate if ``cost`` is heavy, the time
        limit, cancelled at its next check when the limit passes. After heavy work, freed
        memory is given back to the operating system (:data:`release_memory`)."""
        heavy = cost is not None and cost.total >= self.config.heavy_cost
        if heavy:
            self.gate.enter()
        token = WorkToken(self.hook)
        return await run_limited(self.executor, self.config.timeout_s,
                                 _then_release(func) if heavy else func, token, *args,
                                 token=token, sleep=self.sleep,
                                 on_done=(lambda _: self.gate.leave()) if heavy else None)

    async def write(self, route: str, key: str | None, body: str, work: WriteWork) -> Response:
        """Run a write once per ``Idempotency-Key`` (:mod:`credrank.serve.idempotency`)."""
        digest = fingerprint(body)
        while key is not None:
            entry = self.keys.get(route, key)
            if entry is None:
                break
            if entry.fingerprint != digest:
                raise LimitError(422, "invalid_request", f"Idempotency-Key: {key!r} was used "
                                 f"for a different {route} request on this server; send a "
                                 "new key for a new write", field="Idempotency-Key")
            if not entry.done.is_set():
                try:
                    await asyncio.wait_for(entry.done.wait(), self.config.timeout_s)
                except TimeoutError:
                    raise LimitError(504, "timeout", "the first request with this "
                                     f"Idempotency-Key is still running; it {MAY_BE_APPLIED}",
                                     extra={"outcome": MAY_BE_APPLIED}) from None
            if entry.body is not None:
                return Response(entry.body, media_type="application/json",
                                headers={REPLAYED_HEADER: "true"})
            # the first one ended without effect: run it now (unless another retry does)
        entry = self.keys.start(route, key, digest) if key is not None else None

        def done(future: asyncio.Future[tuple[dict[str, Any], bool]]) -> None:
            if entry is None or key is None:
                return
            if not future.cancelled() and future.exception() is None:
                self.keys.finish(route, key, entry, dumps(future.result()[0]))
            else:
                self.keys.forget(route, key, entry)

        token = WorkToken(self.hook)
        try:
            doc, applied = await run_limited(self.executor, self.config.timeout_s, work, token,
                                             token=token, write=True, sleep=self.sleep,
                                             grace_s=self.config.commit_grace_s, on_done=done)
        except LimitError as exc:
            if "result" in exc.extra:
                exc.extra["result"] = exc.extra["result"][0]
            raise
        return JSON(doc, headers=None if applied else {REPLAYED_HEADER: "true"})

    # -- settings and budget -----------------------------------------------------------------
    def settings(self, req: _Scoring, *, pool: int, pool_field: str, fetch_k: int | None = None,
                 lexical: bool = False) -> SearchSettings:
        store = None
        if req.priors == "feedback":
            if self.config.priors_store is None:
                raise LimitError(422, "invalid_request", "priors: 'feedback' needs a feedback "
                                 "store; start `credrank serve` with --priors-store DIR",
                                 field="priors")
            store = self.config.priors_store
        if req.params and req.select is None:
            raise LimitError(422, "invalid_request", "params: only with select (they are the "
                             "selector's parameters); got params without select",
                             field="params")
        if req.select is not None and pool > MAX_SELECT_POOL:
            raise LimitError(422, "invalid_request", f"{pool_field}: at most "
                             f"{MAX_SELECT_POOL:,} with select, got {pool:,}", field=pool_field)
        try:
            settings = self.searcher.settings(
                top_k=req.top_k, fetch_k=fetch_k, lexical=lexical,
                priors="current" if store is not None else req.priors, mode=req.mode,
                priors_store=store, select=req.select, select_params=dict(req.params),
                consensus=req.consensus, consensus_params=dict(req.consensus_params))
        except (ValueError, TypeError) as exc:
            raise LimitError(422, "invalid_request", str(exc)) from None
        if isinstance(settings.selector, CoverageSelect):  # the solver stops by the limit
            settings.selector.time_limit = min(settings.selector.time_limit,
                                               self.config.timeout_s)
        return settings

    def budget(self, req: _Scoring, *, pool: int, pool_field: str,
               embed_lengths: list[int] | None = None) -> Estimate:
        """The request's estimated cost; 422 naming ``pool_field`` when over the budget."""
        options = {"top_k": req.top_k, "select": req.select, "consensus": req.consensus,
                   "embedder": self.searcher.embedder.name}
        cost = estimate(pool=pool, embed_lengths=embed_lengths, **options)
        budget = self.config.max_request_cost
        if budget and cost.total > budget:
            fits = largest_pool(budget, pool=pool, embed_lengths=embed_lengths, **options)
            what = (f"at most {fits:,} candidates" if pool_field == "candidates"
                    else f"a fetch_k of at most {fits:,}")
            embedding = sum(v for k, v in cost.parts.items() if k.startswith("embedding"))
            raise LimitError(
                422, "invalid_request",
                f"{pool_field}: this request is estimated at {cost.total:,.0f} work units "
                f"({cost.describe()}), over the budget of {budget:,.0f} per request "
                f"(--max-request-cost; 1 unit ≈ 1 ms of CPU): send {what}"
                + ("" if req.select in (None, "mmr", "fair") else
                   ", or use select 'mmr' or 'fair'")
                + (", or send vectors" if embedding * 2 >= cost.total else ""),
                field=pool_field, extra={"cost": round(cost.total, 1), "budget": budget})
        return cost

    # -- the blocking work -------------------------------------------------------------------
    def _feedback_settings(self, doc: dict[str, Any], settings: SearchSettings) -> None:
        """Echo ``priors: "feedback"`` as the store version the search used."""
        stage = next((s for s in settings.extra_stages if isinstance(s, FeedbackPrior)), None)
        used = doc["info"].get("feedback_prior")
        if stage is None or not isinstance(used, dict):
            return
        version = int(used["version"])
        doc["settings"]["priors"] = {"name": "feedback", "version": version,
                                     "values": dict(stage.store.record(version)["types"])}

    def search(self, token: WorkToken, query: str, settings: SearchSettings) -> dict[str, Any]:
        start = time.perf_counter()
        embedder = _ChunkedEmbedder(self.searcher.embedder, token)
        pipeline = checked_pipeline(build_pipeline(self.searcher.store, embedder, settings),
                                    token)
        with self.store_lock:
            token.check("store")
            result = pipeline.search(query)
        doc = search_document(query, self.searcher.describe(settings), result)
        self._feedback_settings(doc, settings)
        doc["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return doc

    def rerank(self, token: WorkToken, query: str, records: list[dict[str, Any]],
               settings: SearchSettings, retrieval: str,
               query_vector: list[float] | None = None) -> dict[str, Any]:
        """The ``/rerank`` document (as :meth:`Searcher.rerank_json`, with checkpoints)."""
        start = time.perf_counter()
        embedder = _ChunkedEmbedder(self.searcher.embedder, token)
        pipeline = checked_pipeline(rerank_pipeline(
            records, embedder, settings, self.searcher.typer, retrieval=retrieval,
            query_vector=query_vector), token)
        result = pipeline.search(query)
        described = {**describe(settings), "retrieval": retrieval, "pushdown": False,
                     "fetch_k": len(records), "embedder": self.searcher.embedder.name,
                     "query_vector": "given" if query_vector is not None else "embedded"}
        doc = {"credrank_rerank": 1, "query": query, "settings": described,
               "hits": rerank_hits(result), "info": result.info}
        self._feedback_settings(doc, settings)
        doc["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return doc

    def index(self, token: WorkToken, documents: list[Any]) -> tuple[dict[str, Any], bool]:
        """Validate, type and embed ``documents`` without the store lock, then write them
        under it (committing through ``token``)."""
        searcher = self.searcher
        with tempfile.TemporaryDirectory(prefix="credrank-serve-") as tmp:
            path = Path(tmp) / "documents.jsonl"
            with path.open("w", encoding="utf-8", newline="\n") as out:
                for record in documents:  # ASCII JSON: one record per line, whatever it holds
                    out.write(json.dumps(record, ensure_ascii=True) + "\n")
            prepared = prepare_documents(
                iter_documents(path), searcher.store, _ChunkedEmbedder(searcher.embedder, token),
                searcher.typer, check=lambda: token.check("embed"), read_lock=self.store_lock)
        with self.store_lock:
            token.begin_commit()
            report = write_prepared(prepared, searcher.store, searcher.embedder)
            size = len(searcher.store)
        return {"credrank_index": 1, "indexed": report.indexed, "unchanged": report.unchanged,
                "rejected": report.rejected, "rejects": [_reject(r) for r in report.rejects],
                "conflicts": [{"doc_id": d, "conflict": c} for d, c in report.conflicts],
                "documents": size}, True

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
    if "request_id" in record:
        out["request_id"] = record["request_id"]
    return out
