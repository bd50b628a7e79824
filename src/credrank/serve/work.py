"""What the endpoints of ``credrank serve`` share and the work they run: :class:`ServiceState`.

Every read (``/search``, ``/rerank``, ``/context``, ``/rerank/context``) is validated, then
priced (:mod:`credrank.serve.cost`) and refused over the budget, then — if heavy — admitted
by the concurrency gate (:mod:`credrank.serve.gate`), and only then run in a worker thread
under the time limit with a :class:`~credrank.serve.cancel.WorkToken` its pipeline checks
between stages — or, priced under :data:`INLINE_UNITS` with its query's embedding, on the
event loop while the store is free (no thread hop; :meth:`ServiceState._inline`). Writes run
with the same token and commit through it (:mod:`credrank.serve.limits` says what a 504
reports), remembered by ``Idempotency-Key`` (:mod:`credrank.serve.idempotency`).

Pipelines: a request sends its ``pipeline`` (a :class:`~credrank.pipeline.spec.PipelineSpec`)
or the shortcut fields that make one (the one table of every front door,
:mod:`credrank.pipeline.shortcuts`, errors in the fields' words), never both (``top_k`` and
``fetch_k`` aside: they replace the spec's). The spec is built in the worker
with the registered files only (``resources``: ``--model NAME=PATH`` and ``feedback``;
``allow_paths=False``); a stage that cannot be built is a 422 naming
``pipeline.stages[i].param``. The budget (every stage's price) and the pool caps are read
off the spec.

Store access: a search holds the searcher's lock for retrieval and for the stages that read
the index (citation chains), not for embedding the query (done before it is taken) nor for
scoring and selection: concurrent searches do those in parallel. The *write* of ``/index``
holds it too; ``/index`` validates, types and embeds its documents before taking it (reading
the stored content hashes under it briefly), so searches never wait for its embedding.
Reranking touches no store and runs concurrently.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import json
import logging
import re
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from fastapi import Response

from credrank.context.build import one_clock, search_context
from credrank.core.hittext import DEFAULT_TEXT
from credrank.core.validation import is_integer
from credrank.documents import DroppedField, Reject, iter_documents
from credrank.index.ingest import embedding_text, prepare_documents, write_prepared
from credrank.index.retrieve import default_fetch_k
from credrank.index.store import document_count, generation
from credrank.pipeline.catalog import entry
from credrank.pipeline.compile import Compiled
from credrank.pipeline.document import flat
from credrank.pipeline.shortcuts import (
    HTTP_RERANK,
    HTTP_SEARCH,
    Door,
    check_not_with_pipeline,
    in_words,
    spec_from_options,
    with_top,
)
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.rerank import AutoRetrieval, Fallback
from credrank.searcher import Searcher
from credrank.select.stages import CoverageSelect
from credrank.serve.cancel import Hook, RequestEmbedder, WorkToken
from credrank.serve.config import (
    FEEDBACK_NAME,
    MAX_FETCH_K,
    MAX_SELECT_POOL,
    MAX_TOP_K,
    ServeConfig,
)
from credrank.serve.cost import Estimate, embed_units, estimate, largest_pool, pool_caps
from credrank.serve.gate import HeavyGate
from credrank.serve.idempotency import (
    REPLAYED_HEADER,
    IdempotencyKeys,
    fingerprint,
)
from credrank.serve.limits import MAY_BE_APPLIED, LimitError, run_limited, unknown_outcome

if TYPE_CHECKING:
    from starlette.types import Receive
from credrank.serve.models import ScoringRequest
from credrank.serve.responses import JSON, dumps
from credrank.signals.feedback import FeedbackPriors, source_types_of
from credrank.stages.feedback_prior import FeedbackPrior

T = TypeVar("T")
#: a request field behind a spec path, as :func:`in_words` says it (a JSON field, not a flag)
_FIELD_NAME = re.compile(r"[a-z_]+(\.[A-Za-z0-9_]+)?")
#: a write's work: ``token → (answer, applied)``
WriteWork = Callable[[WorkToken], tuple[dict[str, Any], bool]]


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


#: request shapes whose plan :class:`ServiceState` keeps (:meth:`ServiceState.plan`)
MAX_CACHED_PLANS = 256
#: the source ids whose provenance types ``/feedback`` keeps between index writes (the cache
#: starts again past it)
MAX_KNOWN_SOURCES = 100_000
#: the characters of one passage a ``/context`` at sentence granularity is priced to embed
#: (the passages' text is not known before the ranking; MiniLM's window is ≈ 1,000)
CONTEXT_SENTENCE_CHARS = 2_000
#: a search or rerank priced under this many work units (≈ 1 ms of CPU, :mod:`.cost`), its
#: query's embedding included, runs on the event loop (:meth:`ServiceState._inline`): with
#: the hashing embedder, the default pipeline at a fetch_k of a few hundred; never a model's
#: query embedding (MiniLM: 50 units per 1,000 characters)
INLINE_UNITS = 1.0


#: how a message says the served index's folder (never its path: :meth:`ServiceState.unpath`)
SERVED_INDEX = "<the served index>"


class ServiceState:
    """The searcher, the configuration, the worker threads and the request policies."""

    def __init__(self, searcher: Searcher, config: ServeConfig) -> None:
        self.searcher, self.config = searcher, config
        #: every embedding of a request's work checks its token (:class:`RequestEmbedder`)
        self.embedder = RequestEmbedder(searcher.embedder)
        searcher.embedder = self.embedder  # the same name and dim, its calls checked
        # a client names files by the names the server registered, never by path
        searcher.resources, searcher.allow_paths = dict(config.resources), False
        #: each registered path (as given and resolved) with its name, longest first
        #: (:meth:`unpath`; resolved once: a resolve reads the file system)
        self._path_names = _said_by_name(config.resources)
        #: the same with the index's folder, for messages (an error's hint may name it, and
        #: the credibility stage's warnings; an answer's settings never do, and the rest of
        #: its info is spared the look)
        index_dir = getattr(searcher.store, "path", None)
        self._message_names = (self._path_names if not isinstance(index_dir, Path) else
                               _said_by_name({**config.resources, SERVED_INDEX: index_dir}))
        searcher.forget_compiled()  # built with the plain embedder or other files, if any
        self.executor = ThreadPoolExecutor(thread_name_prefix="credrank-serve")
        # index writes take the lock searches take (Searcher serialises store access on it)
        self.store_lock: threading.RLock = searcher.lock
        self.gate = HeavyGate(config.max_heavy_requests)
        self.keys = IdempotencyKeys(config.idempotency_keys)
        #: the plans of recent request shapes (:meth:`plan`), each with its estimate once
        #: priced (:meth:`budget`), by the shape (:attr:`Plan.shape`)
        self._kept: dict[str, _Kept] = {}
        #: tests only: observes (and may hold) the work at its checkpoints
        self.hook: Hook | None = None
        #: measures the time limits (tests replace it by one they control)
        self.sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
        self.ready = False
        self._closed = False
        self._close_lock = threading.Lock()
        #: ``/rerank``'s ``retrieval: "auto"`` state: no same-model verdict kept (each
        #: request's vectors are checked: a verdict kept from one client's vectors made another
        #: client's vectors of another model of the same size trusted unchecked, the answer
        #: saying a cosine never measured for them), each fallback to embedding logged once
        #: (:func:`_log_fallback`); the searcher's, which runs it
        self.auto = searcher.auto = AutoRetrieval(keep=False, report=_log_fallback)
        #: ``/feedback``'s check of declared source types: (index generation, source id →
        #: the provenance types of its documents), read again after an index write
        #: the index generation and the provenance types found per source id at it
        self._source_types: tuple[int, dict[str, frozenset[str]]] = (-1, {})

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
    async def read(self, cost: Estimate | None, func: Callable[..., T], *args: Any,
                   embeds: int | None = None, receive: Receive | None = None) -> T:
        """``func(token, *args)`` in a worker: the gate if ``cost`` is heavy, the time
        limit, cancelled at its next check when the limit passes, or when the client leaves
        (``receive``: the request's, its body read; :func:`~credrank.serve.limits.run_limited`
        raises :class:`~credrank.serve.limits.ClientGone`). After heavy work, freed memory is
        given back to the operating system (:data:`release_memory`).

        A read priced under :data:`INLINE_UNITS` with its query embedding (``embeds``: the
        characters of the query it embeds; ``None`` for work that may never run inline) runs
        on the event loop instead, when the store is free (:meth:`_inline`)."""
        if embeds is not None and self._cheap(cost, embeds):
            ran, result = self._inline(func, *args)
            if ran:
                return result  # type: ignore[return-value]
        heavy = cost is not None and cost.total >= self.config.heavy_cost
        if heavy:
            self.gate.enter()
        token = WorkToken(self.hook)
        return await run_limited(self.executor, self.config.timeout_s,
                                 _then_release(func) if heavy else func, token, *args,
                                 token=token, sleep=self.sleep, receive=receive,
                                 on_done=(lambda _: self.gate.leave()) if heavy else None)

    def _cheap(self, cost: Estimate | None, embeds: int) -> bool:
        """Whether work priced ``cost``, embedding a query of ``embeds`` characters, is under
        :data:`INLINE_UNITS` (never with a test's hook: it may hold the work)."""
        return (self.hook is None and cost is not None
                and cost.total + embed_units(self.searcher.embedder.name, [embeds])
                < INLINE_UNITS)

    def _inline(self, func: Callable[..., T], *args: Any) -> tuple[bool, T | None]:
        """``(True, func(None, *args))`` run here, on the event loop, holding the store lock
        (re-entrant: the search takes it again for retrieval) so that no write can make the
        loop wait; ``(False, None)`` without running when the lock is taken (a write, or
        another search's retrieval): the work then goes to a worker thread.

        Why: the hop to a worker thread and back costs ≈ 0.1 ms, a seventh of a cheap search
        (``bench_serve.py --section overhead``). The time limit cannot interrupt inline work;
        its price (under a millisecond of CPU) makes that moot, and the engine's retrieval,
        which the price does not count, is what the store lock guards. Nothing can cancel
        inline work before it ends (the timer that would runs on this same loop), so it gets
        no :class:`WorkToken` and checks none."""
        if not self.store_lock.acquire(blocking=False):
            return False, None
        try:
            return True, func(None, *args)
        finally:
            self.store_lock.release()

    async def write(self, route: str, key: str | None, body: str, work: WriteWork) -> Response:
        """Run a write once per ``Idempotency-Key`` (:mod:`credrank.serve.idempotency`;
        ``body``: the request's canonical JSON, read only with a key)."""
        digest = fingerprint(body) if key is not None else ""
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
                                     f"Idempotency-Key is still running; it {MAY_BE_APPLIED}; "
                                     f"{unknown_outcome(True)}",
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
                                             grace_s=self.config.commit_grace_s,
                                             keyed=key is not None, on_done=done)
        except LimitError as exc:
            if "result" in exc.extra:
                exc.extra["result"] = exc.extra["result"][0]
            raise
        return JSON(doc, headers=None if applied else {REPLAYED_HEADER: "true"})

    # -- the pipeline of a request, and its budget -------------------------------------------
    @property
    def resources(self) -> dict[str, Path]:
        """The registered names a spec may use (``--model``, ``feedback``); never paths."""
        return self.config.resources

    def plan(self, req: ScoringRequest, *, pool: int | None = None, pool_field: str = "fetch_k"
             ) -> Plan:
        """The pipeline of ``req``: its ``pipeline`` spec, else the spec its shortcut fields
        make (:func:`~credrank.pipeline.shortcuts.spec_from_options`, errors in the fields'
        words); ``top_k`` / ``fetch_k`` replace a spec's. ``pool``: the candidates of a
        ``/rerank`` (default: the spec's ``fetch_k``). Over the service's limits, or over
        :data:`MAX_SELECT_POOL` with a selector: 422 naming the field.

        The plan of a request without ``pipeline`` is kept per request shape (its fields but
        ``query`` and ``text``; :data:`MAX_CACHED_PLANS` shapes; a plan is immutable), so a
        repeated shape skips building and validating its spec (≈ 0.1–0.2 ms of a cheap
        search)."""
        door = HTTP_SEARCH if "fetch_k" in type(req).model_fields else HTTP_RERANK
        sent = req.model_fields_set
        values = {name: getattr(req, name) for name in _door_fields(door) if name in sent}
        if req.pipeline is not None:
            return self._plan(req, values, door, pool, pool_field)
        shape = f"{door.name}\0{pool}\0{pool_field}\0{sorted(values.items())!r}"
        kept = self._kept.get(shape)
        if kept is None:
            plan = self._plan(req, values, door, pool, pool_field)  # raises: not kept
            if len(self._kept) >= MAX_CACHED_PLANS:  # the oldest shape goes
                self._kept.pop(next(iter(self._kept)))
            kept = self._kept[shape] = _Kept(replace(plan, shape=shape))
        return kept.plan

    def _plan(self, req: ScoringRequest, values: dict[str, Any], door: Door, pool: int | None,
              pool_field: str) -> Plan:
        where = None if req.pipeline is None else "pipeline"
        for key in _LIMITS:  # the fields as sent, in this service's bounds (the spec below
            value = values.get(key)  # would say the library's wider ones first)
            if value is not None and is_integer(value):
                _check_limit(key, int(value))
        if req.pipeline is not None:
            spec = self._sent_spec(req.pipeline, values, door)
        else:
            if values.get("select") is not None:  # the pool before the selector's parameters
                top_k, fetch_k = values.get("top_k") or 10, values.get("fetch_k")
                if pool is None and fetch_k is None:  # the default pool: top_k set it
                    _check_default_pool(values["select"], top_k)
                _check_pool(values["select"], pool if pool is not None else
                            fetch_k if fetch_k is not None else default_fetch_k(top_k),
                            pool_field)
            spec = self._fields_spec(values, door)
        for key, value in (("top_k", spec.top_k), ("fetch_k", spec.resolved_fetch_k)):
            # what the spec sets (a pipeline's, the default pool of a top_k)
            _check_limit(key, value, key if key in values or where is None
                         else f"pipeline.{key}")
        selector = next(s for s in spec.stages if entry(s.name).kind == "select")
        select = None if selector.name == "topk" else selector.name
        if pool is None:
            pool = spec.resolved_fetch_k
            if where is not None and "fetch_k" not in values:
                pool_field = "pipeline.fetch_k"
                if spec.fetch_k is None and select is not None:  # the default pool: its
                    # top_k set it (the request's field, else the spec's)
                    _check_default_pool(select, spec.top_k, "top_k" if "top_k" in values
                                        else "pipeline.top_k")
        _check_pool(select, pool, pool_field)
        return Plan(spec, where, select, spec.stage("consensus") is not None, pool, pool_field)

    def _sent_spec(self, data: Mapping[str, Any], values: Mapping[str, Any], door: Door
                   ) -> PipelineSpec:
        try:
            check_not_with_pipeline(values, door, "pipeline", present=True)
        except ValueError as exc:
            head = str(exc).split(":", 1)[0].split(",")[0]
            raise LimitError(422, "invalid_request", str(exc), field=head) from None
        try:
            return with_top(PipelineSpec.from_dict(data), values)
        except SpecError as exc:
            raise self.spec_error(exc, None, "pipeline") from None

    def _fields_spec(self, values: Mapping[str, Any], door: Door) -> PipelineSpec:
        try:
            return spec_from_options(door=door, **values)
        except ValueError as exc:
            detail = self.unpath(str(exc))
            head = detail.split(":", 1)[0]
            raise LimitError(422, "invalid_request", detail,
                             field=head if _FIELD_NAME.fullmatch(head) else None) from None

    def spec_error(self, exc: SpecError, spec: PipelineSpec | None, where: str | None
                   ) -> LimitError:
        """A spec error as a 422: at ``pipeline.<key path>`` for a spec the request sent
        (``where="pipeline"``), else said with the request field behind it. Registered paths
        in the message are said by their names."""
        hint = ""
        if FEEDBACK_NAME not in self.resources and f"got {FEEDBACK_NAME!r}" in exc.detail:
            hint = (f"; {FEEDBACK_NAME!r} is the feedback store of --priors-store, which this "
                    "server was started without")
        if where is not None:
            path = _file_param(exc, spec, self.resources)
            field = f"{where}.{path}" if path else where
            detail = f"{field}: {self.unpath(exc.detail + hint)}"
            return LimitError(422, "invalid_request", detail, field=field)
        detail = self.unpath(in_words(exc, spec if spec else {"stages": []},
                                      HTTP_SEARCH)) + hint
        head = detail.split(":", 1)[0]
        return LimitError(422, "invalid_request", detail,
                          field=head if _FIELD_NAME.fullmatch(head) else None)

    def unpath(self, value: Any, *, answer: bool = False) -> Any:
        """``value`` (text, or JSON data) with every registered path said by its name, and,
        in a message (not an ``answer``'s settings or info), the index's folder as
        :data:`SERVED_INDEX`: a client names files by the names the server registered and
        never learns its paths."""
        pairs = self._path_names if answer else self._message_names
        if not pairs:
            return value

        def walk(item: Any) -> Any:
            if isinstance(item, str):
                for path, name in pairs:
                    if item == path:
                        return name
                    item = item.replace(path, repr(name))
                return item
            if isinstance(item, dict):
                return {k: walk(v) for k, v in item.items()}
            if isinstance(item, list):
                return [walk(v) for v in item]
            return item

        return walk(value)

    def budget(self, plan: Plan, *, embed_lengths: list[int] | None = None,
               limit: bool = True) -> Estimate:
        """The request's estimated cost; 422 naming the plan's pool field when over the
        budget (``limit=False``: the caller adds to the estimate and compares it itself; a
        stage's pool cap is checked either way)."""
        pool, pool_field = plan.pool, plan.pool_field
        kept = (self._kept.get(plan.shape)
                if plan.shape is not None and embed_lengths is None else None)
        if kept is not None and kept.estimate is not None:
            return kept.estimate
        options: dict[str, Any] = {"top_k": plan.spec.top_k, "stages": _priced(plan.spec),
                                   "embedder": self.searcher.embedder.name}
        cost = estimate(pool=pool, embed_lengths=embed_lengths, **options)
        budget = self.config.max_request_cost
        for name, cap in pool_caps(options["stages"]):
            if pool > cap:
                fits = min(cap, largest_pool(budget, pool=pool, embed_lengths=embed_lengths,
                                             **options)) if budget else cap
                what = (f"at most {fits:,} candidates" if pool_field == "candidates"
                        else f"a fetch_k of at most {fits:,}")
                raise LimitError(
                    422, "invalid_request",
                    f"{pool_field}: expected at most {cap:,} with the stage {name} (its "
                    f"declared pool cap: its work grows faster than the pool), got {pool:,}; "
                    f"send {what}", field=pool_field,
                    extra={"cost": round(cost.total, 1), "budget": budget, "stage": name,
                           "largest_pool": fits})
        if limit and budget and cost.total > budget:
            fits = largest_pool(budget, pool=pool, embed_lengths=embed_lengths, **options)
            what = (f"at most {fits:,} candidates" if pool_field == "candidates"
                    else f"a fetch_k of at most {fits:,}")
            embedding = sum(v for k, v in cost.parts.items() if k.startswith("embedding"))
            costliest = ("embedding" if cost.costliest is None
                         else f"the stage {cost.costliest}")
            raise LimitError(
                422, "invalid_request",
                f"{pool_field}: this request is estimated at {cost.total:,.0f} work units "
                f"({cost.describe()}; most: {costliest}), over the budget of {budget:,.0f} "
                f"per request (--max-request-cost; 1 unit ≈ 1 ms of CPU): send {what}"
                + ("" if plan.select in (None, "mmr", "fair") else
                   ", or use select 'mmr' or 'fair'")
                + (", or send vectors" if embedding * 2 >= cost.total else ""),
                field=pool_field, extra={"cost": round(cost.total, 1), "budget": budget,
                                         "stage": cost.costliest, "largest_pool": fits})
        if kept is not None:
            kept.estimate = cost
        return cost

    # -- the blocking work -------------------------------------------------------------------
    def _prepared(self, compiled: Compiled) -> None:
        """The coverage solver stops by the request's time limit at the latest."""
        for stage in flat(compiled.stages):
            if isinstance(stage, CoverageSelect):
                stage.time_limit = min(stage.time_limit, self.config.timeout_s)

    def _echo(self, doc: dict[str, Any], compiled: Compiled) -> dict[str, Any]:
        """The document as answered: ``priors: "feedback"`` said as the store version the
        run used (pinned in ``pipeline`` by :func:`~credrank.pipeline.document.search_document`,
        so it replays exactly), registered paths said by their names."""
        stage = next((s for s in flat(compiled.stages) if isinstance(s, FeedbackPrior)), None)
        used = doc["info"].get("feedback_prior")
        if stage is not None and isinstance(used, dict):
            version = int(used["version"])
            doc["settings"]["priors"] = {"name": FEEDBACK_NAME, "version": version,
                                         "values": dict(stage.store.record(version)["types"])}
        said = doc["settings"].get("priors")
        prior = compiled.spec.stage("prior")
        if (prior is not None and isinstance(said, dict)
                and prior.params.get("priors") in self.resources):  # a registered prior file
            # by its registered name, as the request and the echoed pipeline say it: the
            # file's own name (its stem) is part of its path
            doc["settings"]["priors"] = {**said, "name": prior.params["priors"]}
        doc["settings"] = self.unpath(doc["settings"], answer=True)
        doc["info"] = self.unpath(doc["info"], answer=True)
        if "credibility_prior" in doc["info"]:  # its warnings say the command that scores
            # the index, with the index's folder: said as the served index, never its path
            doc["info"]["credibility_prior"] = self.unpath(doc["info"]["credibility_prior"])
        return doc

    def search(self, token: WorkToken | None, query: str, spec: PipelineSpec,
               text: str = DEFAULT_TEXT) -> dict[str, Any]:
        """The ``/search`` document of ``spec`` (:meth:`Searcher.search_json
        <credrank.searcher.Searcher.search_json>`: compiled once over the served index — a
        stage that cannot be built raises :class:`SpecError` — and run by the searcher's run
        loop with ``token`` checked at every stage and embedding; ``None``: work run inline,
        which nothing can cancel, :meth:`_inline`); the final hits' text read from the store
        unless ``text`` is ``none``."""
        start = time.perf_counter()
        with self.embedder.working(token):
            compiled = self.searcher.compile(spec)
            self._prepared(compiled)
            doc = self.searcher.search_json(query, spec, text=text,
                                            check=None if token is None else token.check)
        self._echo(doc, compiled)
        doc["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return doc

    def context(self, token: WorkToken | None, query: str, spec: PipelineSpec, text: str,
                options: dict[str, Any], fmt: str, cite: bool) -> dict[str, Any]:
        """The ``/context`` document: :func:`credrank.context.build.search_context` over the
        served index (``options``: its tier options) with ``token`` checked as in
        :meth:`search`, rendered as ``credrank context --json`` renders it."""
        start = time.perf_counter()
        spec = one_clock(spec, options.get("now"))
        with self.embedder.working(token):
            compiled = self.searcher.compile(spec)
            self._prepared(compiled)
            if options.get("half_life") is not None:  # the pool's ranking, if it is needed
                whole = spec.resolved_fetch_k
                self._prepared(self.searcher.compile(spec.replace_top(top_k=whole,
                                                                      fetch_k=whole)))
            doc = search_context(self.searcher, query, spec, text=text,
                                 check=None if token is None else token.check, **options)
        out = doc.to_json(fmt, cite)
        self._echo(out, compiled)
        out["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return out

    def context_budget(self, plan: Plan, *, pool_ranking: bool, sentences: bool,
                       embed_lengths: list[int] | None = None,
                       passage_chars: Sequence[int] | None = None) -> Estimate:
        """The price of a ``/context`` or ``/rerank/context`` (:meth:`budget` of its ranking,
        422 over the budget): with ``pool_ranking`` (a time downgrade: the ``neutral`` median
        or the refills of ``exclude`` may rank the whole pool once more) the same pipeline
        with ``top_k = fetch_k`` too; with ``sentences``, embedding the sentences of ``top_k``
        passages of :data:`CONTEXT_SENTENCE_CHARS` characters each (declared: their length is
        not known before the ranking; the time limit bounds the rest), or, where the
        passages are known (``passage_chars``: the candidates' text lengths), of the
        ``top_k`` longest. ``embed_lengths``: the passages the ranking embeds (candidates,
        :meth:`rerank_embeds`), once: the pool's second ranking reruns the stages over the
        same scored pool (:class:`~credrank.context.given.GivenRanking`)."""
        # priced whole before it is compared: /search's own check would suggest a fetch_k
        # that this context's other parts then put over the budget again
        cost = self.budget(plan, embed_lengths=embed_lengths,
                           limit=not (pool_ranking or sentences))
        parts = dict(cost.parts)
        if pool_ranking:
            whole = max(plan.pool, 1)
            again = self.budget(replace(plan, spec=plan.spec.replace_top(
                top_k=whole, fetch_k=whole), shape=None), limit=False)
            parts.update({f"the pool ranked again: {k}": v for k, v in again.parts.items()})
        sentence_units = 0.0
        if sentences:
            k = min(plan.spec.top_k, plan.pool)
            lengths = ([CONTEXT_SENTENCE_CHARS] * k if passage_chars is None
                       else sorted(passage_chars, reverse=True)[:k])
            sentence_units = embed_units(self.searcher.embedder.name, lengths)
            parts[f"embedding the sentences of {k:,} passages"] = sentence_units
        total = Estimate(parts, cost.costliest)
        budget = self.config.max_request_cost
        if budget and total.total > budget:
            # named by the field whose part costs most: the sentences grow with top_k
            field = "top_k" if sentence_units * 2 >= total.total else plan.pool_field
            raise LimitError(
                422, "invalid_request",
                f"{field}: this context is estimated at {total.total:,.0f} work units "
                f"({total.describe()}), over the budget of {budget:,.0f} per request "
                f"(--max-request-cost; 1 unit ≈ 1 ms of CPU): "
                + _context_advice(field, sentences, embedding=sum(
                    v for k, v in parts.items() if k.startswith("embedding ")
                    and not k.startswith("embedding the sentences")) * 2 >= total.total),
                field=field, extra={"cost": round(total.total, 1), "budget": budget,
                                    "stage": total.costliest})
        return total

    def rerank_context(self, token: WorkToken | None, query: str,
                       records: list[dict[str, Any]], spec: PipelineSpec, retrieval: str,
                       query_vector: list[float] | None, text: str,
                       options: dict[str, Any], fmt: str, cite: bool) -> dict[str, Any]:
        """The ``/rerank/context`` document: :meth:`Searcher.rerank_context
        <credrank.searcher.Searcher.rerank_context>` (the candidates ranked as
        :meth:`rerank` ranks them, then tiered as :meth:`context` tiers a search; chapter
        35.4) with ``token`` checked as in :meth:`search`, rendered as ``/context`` renders
        it (``options``: its tier options)."""
        start = time.perf_counter()
        clocked = one_clock(spec, options.get("now"))  # the spec the context ranks with
        with self.embedder.working(token):
            compiled = self.searcher.compile_rerank(clocked)
            self._prepared(compiled)
            if options.get("half_life") is not None:  # the pool's ranking, if it is needed
                whole = max(len(records), 1)
                self._prepared(self.searcher.compile_rerank(
                    clocked.replace_top(top_k=whole, fetch_k=whole)))
            doc = self.searcher.rerank_context(
                query, records, spec, retrieval=retrieval, query_vector=query_vector,
                check=None if token is None else token.check, text=text, **options)
        out = doc.to_json(fmt, cite)
        self._echo(out, compiled)
        out["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return out

    def rerank(self, token: WorkToken | None, query: str, records: list[dict[str, Any]],
               spec: PipelineSpec, retrieval: str,
               query_vector: list[float] | None = None,
               text: str = DEFAULT_TEXT) -> dict[str, Any]:
        """The ``/rerank`` document (:meth:`Searcher.rerank_json
        <credrank.searcher.Searcher.rerank_json>`, with ``token`` checked as in
        :meth:`search`); ``info.retrieval`` says what ``retrieval`` resolved to and how many
        passages were embedded."""
        start = time.perf_counter()
        with self.embedder.working(token):
            compiled = self.searcher.compile_rerank(spec)
            self._prepared(compiled)
            doc = self.searcher.rerank_json(query, records, spec, retrieval=retrieval,
                                            query_vector=query_vector, text=text,
                                            check=None if token is None else token.check)
        self._echo(doc, compiled)
        doc["elapsed_ms"] = round((time.perf_counter() - start) * 1e3, 3)
        return doc

    def rerank_embeds(self, candidates: Sequence[Any], retrieval: str,
                      reads_vectors: bool, same_model: bool | None = None, *,
                      read_scores: bool = True) -> list[int]:
        """The lengths (``title\ntext``) of the passages a ``/rerank`` may embed, for its price:
        none with ``given`` (unless a stage reads vectors); else those without a vector, and
        with ``auto`` none when every candidate has a non-negative score (and no stage reads
        vectors) — unless ``read_scores`` is false (``/rerank/context``: its relevance tiers
        bin cosines, and the candidates' scores are never read, so under ``auto`` every
        passage without a usable vector is embedded). With ``auto``, vectors are trusted only
        on a positive same-model verdict —
        a kept one (none in the server: each request is checked), or ``same_model`` (a check
        made for this request, :meth:`same_model`): otherwise their texts are priced as
        embedded too (vectors that fail the check are dropped and their texts embedded), plus
        the passage the check embeds. (Before, vectors were priced as declared, so 1,000 texts
        with random vectors were priced as cheap and embedded anyway.)"""
        def length(c: Any) -> int:
            return len(c.title or "") + 1 + len(c.text or "")

        if retrieval == "given" and not reads_vectors:
            return []
        missing = [length(c) for c in candidates if c.vector is None]
        if retrieval != "auto":
            return missing
        vectors = [c for c in candidates if c.vector is not None]
        kept = self.auto.verdict(self.searcher.embedder.dim)
        trusted = (kept is not None and kept.same_model) or bool(same_model)
        check = [length(vectors[0])] if vectors and kept is None and same_model is None else []
        if (read_scores and not reads_vectors
                and all(c.score is not None and c.score >= 0 for c in candidates)):
            return check if len(vectors) == len(candidates) else []
        if trusted:
            return check + missing
        return check + [length(c) for c in candidates]

    def unchecked_vectors(self, candidates: Sequence[Any], retrieval: str) -> bool:
        """Whether an ``auto`` request's vectors have no kept verdict (in the server, never
        one: so its price assumes they fail the check, :meth:`rerank_embeds`)."""
        return (retrieval == "auto" and self.auto.verdict(self.searcher.embedder.dim) is None
                and any(c.vector is not None and (c.text or "").strip() for c in candidates))

    def same_model(self, token: WorkToken, candidates: Sequence[Any]) -> bool | None:
        """The same-model check of ``auto`` on the first candidate with a vector and a text
        (:meth:`AutoRetrieval.check <credrank.rerank.AutoRetrieval.check>`: one passage
        embedded), run before pricing so the price knows whether the texts will be embedded;
        ``None`` when no candidate has both."""
        with self.embedder.working(token):
            token.check("same_model")
            for i, c in enumerate(candidates):
                if c.vector is not None and (c.text or "").strip():
                    texts = [embedding_text(c.title, c.text), c.text]
                    return self.auto.check(self.embedder, np.asarray(c.vector, dtype=np.float32),
                                           texts, i).same_model
        return None

    def index(self, token: WorkToken, documents: list[Any], *, strict: bool = False,
              assume_timezone: str | None = None, date_order: str | None = None
              ) -> tuple[dict[str, Any], bool]:
        """Validate, type and embed ``documents`` without the store lock, then write them
        under it (committing through ``token``); ``strict``, ``assume_timezone`` and
        ``date_order`` choose the reading, as in ``credrank index``."""
        searcher = self.searcher
        with tempfile.TemporaryDirectory(prefix="credrank-serve-") as tmp:
            path = Path(tmp) / "documents.jsonl"
            with path.open("w", encoding="utf-8", newline="\n") as out:
                for record in documents:  # ASCII JSON: one record per line, whatever it holds
                    out.write(json.dumps(record, ensure_ascii=True) + "\n")
            with self.embedder.working(token):
                prepared = prepare_documents(
                    iter_documents(path, strict=strict, assume_timezone=assume_timezone,
                                   date_order=date_order, unit="record"),
                    searcher.store, self.embedder, searcher.typer,
                    check=lambda: token.check("embed"), read_lock=self.store_lock)
        with self.store_lock:
            token.begin_commit()
            report = write_prepared(prepared, searcher.store, searcher.embedder)
            size, points = document_count(searcher.store), len(searcher.store)
            chunking = searcher.store.manifest.chunking
        return {"credrank_index": 1, **report.counts(_reject, _dropped, strict=strict),
                "documents": size,
                "passages": {"points": points, "chunk_tokens": chunking.tokens,
                             "chunk_overlap": chunking.overlap}}, True

    def priors_store(self) -> FeedbackPriors:
        if self.config.priors_store is None:
            raise LimitError(404, "not_found", "no feedback store: start `credrank serve` with "
                                               "--priors-store DIR to enable /feedback and "
                                               "/priors")
        return FeedbackPriors(self.config.priors_store)

    def source_types(self, source_ids: Iterable[str]) -> dict[str, frozenset[str]]:
        """``source_id → the provenance types of its documents`` in the served index for
        ``source_ids`` (a round's), what ``/feedback`` checks an item's declared
        ``source_type`` against: one filtered read for the sources not yet looked up (any of
        them; the engine answers it from its ``source_id`` payload index: the documents of
        those sources, not the index), kept until the next index write or
        :data:`MAX_KNOWN_SOURCES` sources. It read every document of the index, under the
        lock searches take: 0.4 s at 40,000 documents."""
        wanted = sorted({s for s in source_ids if isinstance(s, str)})
        with self.store_lock:
            store = self.searcher.store
            at, known = self._source_types
            if at != generation(store) or len(known) > MAX_KNOWN_SOURCES:
                at, known = generation(store), {}
            new = [sid for sid in wanted if sid not in known]
            if new:  # one filtered read for the round's new sources (any of them)
                found = source_types_of(store.read_payloads(
                    None, ("source_id", "source_type"), where={"source_id": new}))
                known.update({sid: found.get(sid, frozenset()) for sid in new})
            self._source_types = (at, known)
            return {sid: known[sid] for sid in wanted if known[sid]}


def _said_by_name(named: Mapping[str, Path]) -> list[tuple[str, str]]:
    """Each path of ``named`` (as given and resolved: a resolve reads the file system, done
    once) with its name, longest first (:meth:`ServiceState.unpath`)."""
    return sorted({(str(form), n) for n, p in named.items() for form in (p, p.resolve())},
                  key=lambda pair: -len(pair[0]))


@dataclass(frozen=True)
class Plan:
    """A request's pipeline and what it costs: the ``spec``; ``where`` (``"pipeline"`` when the
    request sent the spec, so its errors name ``pipeline.…``; ``None`` when its stage fields
    made it); the selector ``select`` (``None``: top-k) and whether it has ``consensus``; the
    budget prices every stage of ``spec`` over a ``pool`` of candidates set by
    ``pool_field``; ``shape``: the request shape it is kept under (:meth:`ServiceState.plan`),
    ``None`` for a plan not kept (a request that sent its ``pipeline``)."""

    spec: PipelineSpec
    where: str | None
    select: str | None
    consensus: bool
    pool: int
    pool_field: str
    shape: str | None = None


@dataclass
class _Kept:
    """A kept :class:`Plan` and, once :meth:`ServiceState.budget` priced it without embedding
    lengths, its :class:`~credrank.serve.cost.Estimate` (the same for every request of the
    shape)."""

    plan: Plan
    estimate: Estimate | None = None


_DOOR_FIELDS: dict[tuple[str, bool], tuple[str, ...]] = {}


def _door_fields(door: Door) -> tuple[str, ...]:
    """The names of ``door``'s shortcut fields in table order (computed once per door)."""
    key = (door.name, door.retrieves)
    names = _DOOR_FIELDS.get(key)
    if names is None:
        names = _DOOR_FIELDS[key] = tuple(s.name for s in door.shortcuts())
    return names


def _log_fallback(fallback: Fallback) -> None:
    """The one log line of a ``/rerank`` fallback to embedding (once per cause per server)."""
    logging.getLogger("credrank.serve.rerank").warning(
        fallback.message, extra={"fields": {
            "event": "rerank_embeds", "cause": fallback.cause, "embedded": fallback.embedded,
            "embedder": fallback.embedder, "embed_ms": round(fallback.ms, 1),
            "message": fallback.message}})




def _context_advice(field: str, sentences: bool, *, embedding: bool) -> str:
    """What an over-budget context may send instead (:meth:`ServiceState.context_budget`):
    by ``field``, the one named; ``embedding``: the candidates' embedding costs most."""
    if field == "top_k":
        return "send a smaller top_k, or granularity document"
    document = ", or granularity document" if sentences else ""
    if field == "candidates":
        return ("send fewer candidates"
                + (", or vectors of the index's embedding model" if embedding else "")
                + document)
    return "send a smaller fetch_k or top_k" + document


def _priced(spec: PipelineSpec) -> list[tuple[str, dict[str, Any]]]:
    """The ``(name, params)`` of each stage of ``spec``, as the budget prices them."""
    return [(s.name, dict(s.params)) for s in spec.stages]


#: this service's bounds of the pool fields (the library takes up to 10,000,000)
_LIMITS = {"top_k": MAX_TOP_K, "fetch_k": MAX_FETCH_K}


def _check_limit(key: str, value: int, field: str | None = None) -> None:
    """422 naming ``field`` (default ``key``) when ``value`` of ``top_k`` or ``fetch_k`` is
    outside ``[1, this service's limit]``."""
    most = _LIMITS[key]
    if not 1 <= value <= most:
        field = field or key
        bound = f"at most {most:,}" if value > most else f"an integer in [1, {most:,}]"
        raise LimitError(422, "invalid_request", f"{field}: expected {bound} (this service's "
                         f"limit), got {value:,}", field=field)


def _check_default_pool(select: str, top_k: int, field: str = "top_k") -> None:
    """:func:`_check_pool` of a request that sent no ``fetch_k``: its pool is the default,
    ``3 × top_k``, so the 422 names ``field``, the ``top_k`` that set it (it named
    ``fetch_k``, a field never sent)."""
    pool = default_fetch_k(top_k)
    if pool > MAX_SELECT_POOL:
        most = max(k for k in range(1, MAX_SELECT_POOL + 1)
                   if default_fetch_k(k) <= MAX_SELECT_POOL)
        raise LimitError(422, "invalid_request", f"{field}: with select ({select}) the pool "
                         f"is at most {MAX_SELECT_POOL:,} candidates, and the default fetch_k "
                         f"(3 × top_k) of this top_k is {pool:,}: send a top_k of at most "
                         f"{most:,}, or a fetch_k of at most {MAX_SELECT_POOL:,}", field=field)


def _check_pool(select: str | None, pool: int, pool_field: str) -> None:
    """A selector works on at most :data:`MAX_SELECT_POOL` candidates (422 naming the field
    that sets the pool)."""
    if select is not None and pool > MAX_SELECT_POOL:
        raise LimitError(422, "invalid_request", f"{pool_field}: at most {MAX_SELECT_POOL:,} "
                         f"with select ({select}), got {pool:,}", field=pool_field)


def _file_param(exc: SpecError, spec: PipelineSpec | None, resources: dict[str, Path]) -> str:
    """``exc.key_path``, narrowed to ``stages[i].param`` when the error is about the file a
    parameter of stage ``i`` names (a registered file of the wrong kind, or one that does not
    fit the index): the message then names the file, not the parameter."""
    path = exc.key_path
    match = re.fullmatch(r"stages\[(\d+)\]", path)
    # the index as the spec was written (PipelineSpec.written)
    stage = None if spec is None or match is None else next(
        (s for s in spec.stages if s.given == int(match[1])), None)
    if stage is None:
        return path
    for key, value in stage.params.items():
        if isinstance(value, str) and value in resources:
            file = resources[value]
            if str(file) in exc.detail or str(file.resolve()) in exc.detail:
                return f"{path}.{key}"
    return path


def _reject(r: Reject) -> dict[str, Any]:
    where = f"record {r.line}"
    message = f"{where}: {r.reason}" if r.field is None else \
        f"{where}: field '{r.field}': {r.reason}"
    return {"record": r.line, "field": r.field, "reason": r.reason, "message": message}


def _dropped(d: DroppedField) -> dict[str, Any]:
    message = f"record {d.line}: field '{d.field}' dropped: {d.reason}"
    return {"record": d.line, "id": d.doc_id, "field": d.field, "reason": d.reason,
            "message": message}


#: the most sources one ``GET /priors`` answers (a page; ``offset`` pages on): the table grows
#: with every feedback round, and a public read must not answer megabytes
MAX_PRIORS_PAGE = 1000


def priors_document(store: FeedbackPriors, version: int | None = None, *,
                    page: tuple[int, int] | None = None) -> dict[str, Any]:
    """The priors of ``version`` (default: current); with ``page = (offset, limit)`` only
    that page of the per-source table, sorted by source, and ``sources_total``;
    ``source_types``: the type each source of the answer was recorded with."""
    record = store.record(version)
    sources = dict(record["sources"])
    paging: dict[str, Any] = {}
    if page is not None:
        offset, limit = page
        names = sorted(sources)
        paging = {"sources_total": len(names), "offset": offset, "limit": limit}
        sources = {k: sources[k] for k in names[offset:offset + limit]}
    typed = record["source_types"]
    out = {"version": record["version"], "current": store.current, "base": store.base_name,
           "epsilon": store.epsilon, "max_change": store.max_change,
           "types": dict(record["types"]), "sources": sources,
           "source_types": {k: typed[k] for k in sources}, **paging,
           "event": record["event"], "timestamp": record["timestamp"]}
    if "restored_from" in record:
        out["restored_from"] = record["restored_from"]
    if "request_id" in record:
        out["request_id"] = record["request_id"]
    return out
