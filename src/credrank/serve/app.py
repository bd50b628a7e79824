"""The FastAPI application of ``credrank serve``: :func:`create_app` over an open
:class:`~credrank.searcher.Searcher`.

Endpoints (bodies in :mod:`credrank.serve.models`, documented in docs/json.md):

* ``POST /search``, ``POST /rerank`` — public; the ``credrank search --json`` document, with
  the top-level ``pipeline`` the run used. ``POST /context`` — public; the ``credrank context
  --json`` document (:func:`credrank.context.build.search_context`, the command's path), its
  own fields the command's flags. ``POST /rerank/context`` — public; the same document of
  candidates retrieved elsewhere: ``/rerank``'s body with ``/context``'s own fields
  (:meth:`credrank.searcher.Searcher.rerank_context`). The pipeline comes from the stage
  fields or from a whole spec (``pipeline``; files by registered name only:
  :mod:`credrank.serve.work`). Each is priced before it runs (:mod:`credrank.serve.cost`:
  over the budget → 422) and heavy ones are limited in number (:mod:`credrank.serve.gate`:
  503 with ``Retry-After``).
* ``POST /index``, ``POST /feedback``, ``POST /priors/rollback`` — writes: need the API key
  (:mod:`credrank.serve.auth`, checked before the body is read); idempotent by the
  ``Idempotency-Key`` header (:mod:`credrank.serve.idempotency`).
* ``GET /priors`` — public (it reads the feedback store).
* ``GET /healthz`` (the process answers), ``GET /readyz`` (the index and the model are loaded
  and the app's lifespan is running; it lists the registered names a spec may use and the
  stage catalog), ``GET /openapi.json``, ``GET /`` (the web page) and ``/static``.

The request path, outermost first (:class:`ServiceApp`): the access log (one JSON line per
request), the JSON 503 of a request the server cuts short as it stops, the API key of the
write paths, the JSON request (its content type; no query
string), the body size and read-time limits; then ``POST /search``, ``/rerank``,
``/context`` and ``/rerank/context`` go straight to their endpoint
(:mod:`credrank.serve.dispatch`), every other request through
FastAPI's own middleware and router. The endpoint then runs its blocking work in a worker
thread under the per-request time limit, cancelled when it passes
(:mod:`credrank.serve.work`, :mod:`credrank.serve.limits`), or — a search or rerank priced
under a millisecond, query embedding included, while the store is free — on the event loop
(:meth:`credrank.serve.work.ServiceState.read`).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import FastAPI, Header, Query, Request, Security
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from fastapi.staticfiles import StaticFiles
from pydantic import BaseModel, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Scope

from credrank import __version__
from credrank.context.build import TOP_K as CONTEXT_TOP_K
from credrank.context.build import check_context_options, check_context_spec
from credrank.core.errors import CandidateVectorError
from credrank.index.diskspace import DiskFullError, is_disk_full
from credrank.index.store import StoreError
from credrank.pipeline.catalog import CATALOG
from credrank.pipeline.spec import SpecError
from credrank.rerank import CANDIDATE_FIELDS, check_rerank_spec
from credrank.searcher import Searcher
from credrank.serve.auth import API_KEY_HEADER, BEARER, ApiKeyMiddleware
from credrank.serve.config import JSON_PATHS, WRITE_PATHS, ServeConfig
from credrank.serve.cost import Estimate
from credrank.serve.dispatch import DirectRoutes
from credrank.serve.idempotency import HEADER, PATTERN, canonical
from credrank.serve.limits import (
    BodyLimitMiddleware,
    CutShortMiddleware,
    JsonRequestMiddleware,
    LimitError,
)
from credrank.serve.logs import AccessLogMiddleware
from credrank.serve.models import (
    ContextRequest,
    ContextResponse,
    ErrorBody,
    FeedbackRequest,
    Health,
    IndexRequest,
    IndexResponse,
    PriorsResponse,
    RerankContextRequest,
    RerankRequest,
    RerankResponse,
    RollbackRequest,
    SearchRequest,
    SearchResponse,
)
from credrank.serve.responses import JSON, Rendered, error, field_errors
from credrank.serve.work import (
    MAX_PRIORS_PAGE,
    Plan,
    ServiceState,
    WriteWork,
    priors_document,
)
from credrank.signals.feedback import FeedbackStoreError, RequestIdReused, SourceTypeMismatch

STATIC_DIR = Path(__file__).resolve().parent / "static"

_KINDS = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
          405: "method_not_allowed", 408: "request_timeout", 409: "conflict",
          413: "too_large", 415: "unsupported_media_type", 422: "invalid_request",
          503: "unavailable", 504: "timeout", 507: "insufficient_storage"}

#: pydantic's type errors, said as "expected …, got <the JSON that came>"
_EXPECTED = {"int_type": "an integer", "int_parsing": "an integer", "float_type": "a number",
             "float_parsing": "a number", "bool_type": "true or false",
             "bool_parsing": "true or false", "string_type": "a string",
             "dict_type": "an object", "model_type": "an object", "list_type": "an array",
             "int_from_float": "an integer"}

#: pydantic's bound errors: the comparison and its context key ("Input should be less than or
#: equal to 1000" said without what came)
_BOUNDS = {"less_than_equal": ("<=", "le"), "less_than": ("<", "lt"),
           "greater_than_equal": (">=", "ge"), "greater_than": (">", "gt")}

IdempotencyKey = Annotated[str | None, Header(
    alias=HEADER, pattern=PATTERN,
    description="a key of 1 to 200 visible ASCII characters the client chooses per intended "
                "write: a retry with the same key and body answers the first outcome (header "
                "Idempotent-Replayed: true) and applies nothing twice; the same key with "
                "another body is refused (422)")]


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


#: the request path a ``/rerank`` candidate error opens with (``candidates[3].vector: …``)
_CANDIDATE_PATH = re.compile(r"(?:candidates(?:\[\d+\])?(?:\.[a-z_]+)?|query_vector)")


def candidate_field(detail: str) -> str | None:
    """The field a candidate error names at its head (:class:`~credrank.rerank.CandidateError`:
    ``candidates[1].id: 'a' repeats candidates[0]`` → ``candidates[1].id``), for the 422's
    ``errors``; ``None`` for a message that names no field of the request."""
    head = detail.split(":", 1)[0].split(" (", 1)[0]
    return head if _CANDIDATE_PATH.fullmatch(head) else None


#: the parts pydantic adds to an error's location for the member of a union it tried
_MEMBER_TAGS = frozenset({"bool", "int", "float", "str", "none", "dict", "list"})


def _is_member_tag(part: Any) -> bool:
    return isinstance(part, str) and (part in _MEMBER_TAGS or "[" in part
                                      or part.startswith("function-"))


def merged_unions(errors: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """pydantic's errors with those of one union-typed field merged into one at the field's
    own path: a value that fits no member was said once per member, each at a path with the
    member's type in it (``select_params.diversity.bool``, ``….int``, ``….float``, …). The
    merged error says the members' expectations, or, where one member refused a non-finite
    number, ``expected a finite number, got NaN``."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for e in errors:
        loc = tuple(e.get("loc", ()))
        cut = next((i for i, part in enumerate(loc) if _is_member_tag(part)), len(loc))
        groups.setdefault(loc[:cut], []).append(e)
    out: list[dict[str, Any]] = []
    for loc, group in groups.items():
        if len(group) == 1 and tuple(group[0].get("loc", ())) == loc:
            out.append(group[0])
            continue
        finite = next((e for e in group if e.get("type") == "finite_number"), None)
        if finite is not None:
            value = finite.get("input")
            shown = (("NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity")
                     if isinstance(value, float) and not math.isfinite(value) else repr(value))
            msg = f"expected a finite number, got {shown}"
        else:
            said = dict.fromkeys(_EXPECTED.get(str(e.get("type")), str(e.get("msg")))
                                 for e in group)
            msg = "expected " + " or ".join(said)
        out.append({"loc": loc, "type": "union", "msg": msg, "input": group[0].get("input")})
    return out


#: the context options whose word heads a library error (:mod:`credrank.context.build`):
#: each is the ``/context`` field of the same name
_CONTEXT_FIELDS = frozenset({"now", "half_life", "undated", "source_tier", "granularity",
                             "text", "top_k", "format"})


def context_field(detail: str) -> str | None:
    """The ``/context`` field a context library error names by its head keyword
    (``source_tier: …``), ``None`` when it names none."""
    head, sep, _ = detail.partition(":")
    word = head.partition(" ")[0]
    return word if sep and word in _CONTEXT_FIELDS else None


def _check_context(req: Any) -> None:
    """The checks of ``credrank context`` between its options
    (:func:`~credrank.context.build.check_context_options`), as 422s naming the field."""
    try:
        check_context_options(req.format, req.text, req.granularity, req.half_life,
                              req.undated)
    except ValueError as exc:
        raise LimitError(422, "invalid_request", str(exc), field=context_field(str(exc))) from None


def stage_field(detail: str, plan: Plan) -> str | None:
    """The request field of a stage's parameter that a run-time error names at its head
    (``version: expected an integer in [0, 0], got 999`` of a feedback prior): in a sent
    spec, ``pipeline.stages[i].version``; of the selector the fields made,
    ``select_params.NAME``; ``None`` unless exactly one stage has that parameter."""
    if plan.where == "pipeline":
        path = plan.spec.param_path(detail)
        return None if path is None else f"pipeline.{path}"
    found = plan.spec.param_stage(detail)
    if found is None:  # none, or several stages with a parameter of that name: unsaid
        return None
    i, head = found
    return f"select_params.{head}" if plan.spec.stages[i].name == plan.select else None


def store_failure(exc: BaseException) -> FeedbackStoreError | None:
    """The feedback store failure behind ``exc``: itself, or the one a stage's build wrapped
    in a :class:`SpecError` (a damaged or missing store file: the server's fault, answered
    503, never the request's); ``None`` when there is none."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain is short; a cycle is not followed
        if seen is None or isinstance(seen, FeedbackStoreError):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _message(e: dict[str, Any]) -> str:
    kind = str(e.get("type", ""))
    given, ctx = e.get("input"), e.get("ctx") or {}
    loc = tuple(e.get("loc", ()))
    if kind == "value_error":  # a validator's own message, without pydantic's wrapping
        said = str(e.get("msg", "")).removeprefix("Value error, ")
        last = str(loc[-1]) if loc else ""
        return said[len(last) + 2:] if last and said.startswith(last + ": ") else said
    if kind == "string_pattern_mismatch" and loc and loc[-1] == HEADER:
        return (f"expected 1 to 200 visible ASCII characters, got "
                f"{json.dumps(given, ensure_ascii=False)[:60]}")
    if kind == "string_too_long" and isinstance(given, str) and "max_length" in ctx:
        return f"expected at most {ctx['max_length']:,} characters, got {len(given):,}"
    if kind == "string_too_short" and isinstance(given, str) and "min_length" in ctx:
        least = ctx["min_length"]
        return (f"expected at least {least:,} character{'s' if least != 1 else ''}, "
                f"got {json.dumps(given, ensure_ascii=False)}")
    if kind in _EXPECTED and "input" in e:
        return f"expected {_EXPECTED[kind]}, got {_shown(e['input'])}"
    if kind in ("literal_error", "enum") and "expected" in ctx and "input" in e:
        # pydantic's "Input should be 'a' or 'b'" said without what came
        return f"expected one of {ctx['expected']}, got {_shown(e['input'])}"
    bound = _BOUNDS.get(kind)
    if bound is not None and bound[1] in ctx and "input" in e:
        return f"expected a number {bound[0]} {ctx[bound[1]]}, got {_shown(e['input'])}"
    return str(e.get("msg", ""))


def _shown(value: Any) -> str:
    """``value`` as the JSON a client sent, at most 60 characters."""
    try:
        got = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError):
        got = type(value).__name__
    return got[:57] + "..." if len(got) > 60 else got


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

    app = ServiceApp(
        _guarded(config), title="credrank", version=__version__, lifespan=lifespan,
        default_response_class=JSON,
        description="Credibility-aware retrieval: score = similarity × source-reliability "
                    "prior. The JSON documents are those of docs/json.md.")
    app.state.service = state
    write = [Security(API_KEY_HEADER), Security(BEARER)]

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSON:
        errors = [{"field": field_path(e.get("loc", ())), "loc": list(e.get("loc", ())),
                   "msg": _message(e), "type": str(e.get("type", ""))}
                  for e in merged_unions(exc.errors())]
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
        errors = None if exc.field is None else field_errors(exc.field, exc.detail, exc.kind)
        return error(exc.status, exc.kind, exc.detail, errors=errors, headers=exc.headers,
                     extra=exc.extra)

    @app.exception_handler(StoreError)
    async def _store(_: Request, exc: StoreError) -> JSON:
        if isinstance(exc, DiskFullError):  # a server fault, not the client's; reads go on
            return error(507, "insufficient_storage", f"{exc}; the batches written before it "
                         "are kept; free disk space and send the same request again "
                         "(documents already stored unchanged are skipped)")
        return error(503, "unavailable", f"the index is not available: {exc}")

    # -- health ------------------------------------------------------------------------------
    @app.get("/healthz", response_model=Health, tags=["health"])
    async def healthz() -> JSON:
        """Liveness: the process answers."""
        return JSON({"status": "ok"})

    @app.get("/readyz", response_model=Health, responses=_errors(503), tags=["health"])
    async def readyz() -> JSON:
        """Readiness: the index and the embedder are loaded and the app's lifespan is running
        (503 before it starts and after it ends, where an application embeds the service;
        `credrank serve` listens only once loaded and stops listening before it stops, so a
        load balancer sees a refused connection then). Lists what a pipeline spec may name:
        the registered files (`models`: their names, never their paths) and the stages of the
        catalog (`stages`). `priors_store`: whether the feedback store (--priors-store) can be
        read now; one that cannot (a damaged or missing file: its routes answer 503) is
        `false` with `priors_store_error` saying why, by its name. The server stays ready:
        what does not read the store is served."""
        if not state.ready:
            return error(503, "unavailable", "not ready: starting or shutting down")
        health: dict[str, Any] = {
            "status": "ready", "engine": searcher.store.manifest.engine,
            "embedder": searcher.embedder.name, "writes": config.writable,
            "priors_store": config.priors_store is not None}
        if config.priors_store is not None:
            try:
                state.priors_store()
            except (FeedbackStoreError, OSError) as exc:
                health["priors_store"] = False
                health["priors_store_error"] = state.unpath(str(exc))
        return JSON({**health, "models": sorted(state.resources), "stages": list(CATALOG)})

    # -- search and rerank ---------------------------------------------------------------------
    @_self_parsed(app, "/search", SearchRequest, response_model=SearchResponse,
                  responses=_errors(408, 413, 415, 422, 503, 504), tags=["search"])
    async def search(request: Request) -> JSON:
        """Credibility-aware search over the served index (as `credrank search --json`),
        with the pipeline of the stage fields or of `pipeline` (a spec: not both). Priced
        before it runs (over --max-request-cost: 422 naming fetch_k); heavy requests beyond
        --max-heavy-requests: 503 with Retry-After; over --timeout: 504 (cancelled)."""
        req = await _parsed(request, SearchRequest)
        plan = state.plan(req)
        cost = state.budget(plan)
        return JSON(await run_read(request, plan, cost, state.search, req.query, plan.spec,
                                   req.text, embeds=len(req.query)))

    @_self_parsed(app, "/rerank", RerankRequest, response_model=RerankResponse,
                  responses=_errors(408, 413, 415, 422, 503, 504), tags=["search"])
    async def rerank(request: Request) -> JSON:
        """Rerank candidates retrieved elsewhere: provenance typed from their URLs, retrieval
        score per `retrieval` (default `auto`: their vectors if of the index's model, else
        their own scores, else the cosine of passages embedded here; `info.retrieval` says
        which; with `query_vector` the query is not embedded); each hit returns the
        candidate's metadata untouched. Priced before it runs, embedding included (over
        --max-request-cost: 422 naming candidates)."""
        req = await _parsed(request, RerankRequest)
        plan = state.plan(req, pool=len(req.candidates), pool_field="candidates")
        try:  # retrieval, unit and pushdown cannot apply to candidates retrieved elsewhere
            check_rerank_spec(plan.spec)
        except SpecError as exc:
            raise state.spec_error(exc, plan.spec, plan.where or "pipeline") from None
        cost = await priced_candidates(request, req, plan, state.budget)
        return JSON(await run_read(request, plan, cost, state.rerank, req.query, _records(req),
                                   plan.spec, req.retrieval, req.query_vector, req.text,
                                   embeds=0 if req.query_vector is not None else len(req.query),
                                   ids=[c.id for c in req.candidates]))

    @_self_parsed(app, "/context", ContextRequest, response_model=ContextResponse,
                  responses=_errors(408, 413, 415, 422, 503, 504), tags=["search"])
    async def context(request: Request) -> JSON:
        """What the generator would see (as `credrank context --json`): the query ranked as
        `/search` ranks it (the stage fields or `pipeline`; `top_k` 5 unless sent or in the
        spec), the top-k passages with credibility tiers (chapter 35.4), and the prompt
        (`format`). The context's own fields are `credrank context`'s flags with underscores,
        checked by the same validators. Priced before it runs, the pool's second ranking and
        sentence embedding included (over --max-request-cost: 422 naming fetch_k)."""
        req = await _parsed(request, ContextRequest)
        if req.pipeline is None and req.top_k is None:  # not sent, or sent as null
            req = req.model_copy(update={"top_k": CONTEXT_TOP_K})
        _check_context(req)
        plan = state.plan(req)
        _dense_context(plan)
        cost = state.context_budget(plan, pool_ranking=req.half_life is not None,
                                    sentences=req.granularity == "sentence")
        options = {"now": req.now, "half_life": req.half_life, "undated": req.undated,
                   "granularity": req.granularity, "source_tier": req.source_tier}
        try:
            return JSON(await state.read(cost, _rendering(state.context), req.query, plan.spec,
                                         req.text, options, req.format, req.cite,
                                         embeds=len(req.query), receive=request.receive))
        except SpecError as exc:
            failure = store_failure(exc)
            raise (state.spec_error(exc, plan.spec, plan.where) if failure is None
                   else store_unavailable(failure)) from None
        except FeedbackStoreError as exc:  # the store read at run time
            raise store_unavailable(exc) from None
        except ValueError as exc:
            detail = state.unpath(str(exc))
            raise LimitError(422, "invalid_request", detail,
                             field=context_field(detail) or stage_field(detail, plan)) from None

    @_self_parsed(app, "/rerank/context", RerankContextRequest, response_model=ContextResponse,
                  responses=_errors(408, 413, 415, 422, 503, 504), tags=["search"])
    async def rerank_context(request: Request) -> JSON:
        """What the generator would see of candidates retrieved elsewhere (chapter 35.4): the
        candidates ranked as `/rerank` ranks them (its fields, the stage fields or
        `pipeline`; `top_k` 5 unless sent or in the spec), then tiered and rendered as
        `/context` tiers a search (its own fields, the same validators), answering the
        `/context` document. Relevance tiers bin cosines: `retrieval` is `auto` or `cosine`,
        the candidates' scores are never read (`info.retrieval.scores_unread` counts those
        sent), and passages without a usable vector are embedded. Priced before it runs as
        `/rerank` (embedding included) plus the pool's second ranking and the sentences of
        `/context` (over --max-request-cost: 422 naming candidates or top_k)."""
        req = await _parsed(request, RerankContextRequest)
        if req.pipeline is None and req.top_k is None:  # not sent, or sent as null
            req = req.model_copy(update={"top_k": CONTEXT_TOP_K})
        _check_context(req)
        plan = state.plan(req, pool=len(req.candidates), pool_field="candidates")
        _dense_context(plan)  # the context's reason first (the rerank's offers 'given')
        try:  # retrieval (lexical), unit and pushdown cannot apply to candidates
            check_rerank_spec(plan.spec)
        except SpecError as exc:
            raise state.spec_error(exc, plan.spec, plan.where or "pipeline") from None
        passages = [len(c.text or "") for c in req.candidates]

        def price(planned: Plan, *, embed_lengths: list[int]) -> Estimate:
            return state.context_budget(planned, pool_ranking=req.half_life is not None,
                                        sentences=req.granularity == "sentence",
                                        embed_lengths=embed_lengths, passage_chars=passages)

        cost = await priced_candidates(request, req, plan, price, read_scores=False)
        options = {"now": req.now, "half_life": req.half_life, "undated": req.undated,
                   "granularity": req.granularity, "source_tier": req.source_tier}
        return JSON(await run_read(request, plan, cost, state.rerank_context, req.query,
                                   _records(req), plan.spec, req.retrieval, req.query_vector,
                                   req.text, options, req.format, req.cite,
                                   embeds=0 if req.query_vector is not None else len(req.query),
                                   ids=[c.id for c in req.candidates], context=True))

    async def priced_candidates(request: Request, req: RerankRequest, plan: Plan,
                                price: Callable[..., Estimate], *, read_scores: bool = True
                                ) -> Estimate:
        """The price of ranking ``req``'s candidates (``price(plan, embed_lengths=…)``:
        :meth:`ServiceState.budget`, or a context's), their embedding included
        (:meth:`ServiceState.rerank_embeds`; ``read_scores``: whether their scores may stand
        in for the cosine, not a context's). Passages are embedded for the cosine, or for
        stages that read vectors (selectors, neighbour smoothing; priced conservatively for
        every selector). Over the budget, priced as if the vectors fail the same-model
        check: they are checked first (one passage embedded, under the time limit), then
        what will really be embedded is priced."""
        vectors = plan.select is not None or plan.spec.stage("smoothing") is not None
        lengths = state.rerank_embeds(req.candidates, req.retrieval, vectors,
                                      read_scores=read_scores)
        try:
            return price(plan, embed_lengths=lengths)
        except LimitError:
            if not state.unchecked_vectors(req.candidates, req.retrieval):
                raise
            same = await state.read(None, state.same_model, req.candidates,
                                    receive=request.receive)
            return price(plan, embed_lengths=state.rerank_embeds(
                req.candidates, req.retrieval, vectors, same, read_scores=read_scores))

    async def run_read(request: Request, plan: Plan, cost: Any, work: Any, *args: Any,
                       embeds: int, ids: Sequence[str] = (), context: bool = False
                       ) -> Rendered:
        """``work`` through :meth:`ServiceState.read` (``embeds``: the characters of the query
        it embeds; cancelled if the client of ``request`` leaves while it runs in a worker),
        its document serialised by the same thread (:class:`Rendered`: built once, serialised
        once); a spec that cannot be built and a pipeline that cannot run on the request's
        data answer 422, a candidate's vector a stage cannot use at ``candidates[i].vector``
        (``ids``: the candidates' ids, in the request's order), and with ``context`` a
        context option the run refused at its field (:func:`context_field`)."""
        try:
            return await state.read(cost, _rendering(work), *args, embeds=embeds,
                                    receive=request.receive)
        except SpecError as exc:
            failure = store_failure(exc)
            raise (state.spec_error(exc, plan.spec, plan.where) if failure is None
                   else store_unavailable(failure)) from None
        except FeedbackStoreError as exc:  # the store read at run time (a damaged file)
            raise store_unavailable(exc) from None
        except ValueError as exc:  # CandidateError included
            detail = state.unpath(str(exc))
            field = (f"candidates[{list(ids).index(exc.doc_id)}].vector"
                     if isinstance(exc, CandidateVectorError) and exc.doc_id in ids
                     else candidate_field(detail)
                     or (context_field(detail) if context else None)
                     or stage_field(detail, plan))
            raise LimitError(422, "invalid_request", detail, field=field) from None

    def store_unavailable(exc: Exception) -> LimitError:
        """503 for a feedback store the server cannot read or write (a damaged or missing
        file, a folder it may not write): the server's fault, not the request's; said by the
        store's registered name, never its path."""
        return LimitError(503, "unavailable", "the feedback store is not available: "
                          + state.unpath(str(exc)))

    # -- writes --------------------------------------------------------------------------------
    async def run_write(route: str, key: str | None, req: BaseModel, work: WriteWork) -> Any:
        """``work`` once per ``Idempotency-Key``: the body is fingerprinted (canonical JSON,
        :func:`~credrank.serve.idempotency.canonical`) only when a key came. It was serialised
        for every write, and a lone surrogate in one record failed the whole request there."""
        body = "" if key is None else canonical(req.model_dump(mode="json"))
        try:
            return await state.write(route, key, body, work)
        except RequestIdReused as exc:
            raise LimitError(422, "invalid_request", f"Idempotency-Key: {exc}",
                             field="Idempotency-Key") from None
        except FeedbackStoreError as exc:
            raise store_unavailable(exc) from None
        except OSError as exc:
            if is_disk_full(exc):  # the server's disk, not the client's request
                raise LimitError(507, "insufficient_storage", f"disk full: "
                                 f"{state.unpath(str(exc))}; nothing was changed; free disk "
                                 "space and send it again") from None
            raise LimitError(503, "unavailable", "the server could not complete the write: "
                             + state.unpath(str(exc))) from None
        except ValueError as exc:
            detail = str(exc)
            head = detail.split(":", 1)[0]  # a field of the body the work refused (version)
            raise LimitError(422, "invalid_request", detail,
                             field=head if head in type(req).model_fields else None) from None

    @app.post("/index", response_model=IndexResponse, dependencies=write,
              responses=_errors(401, 403, 408, 413, 415, 422, 503, 504, 507), tags=["write"])
    async def index(req: IndexRequest, request: Request,
                    idempotency_key: IdempotencyKey = None) -> Any:
        """Index documents into the served index (validated and rejected as `credrank index`
        validates a JSONL file; record i is line i). Needs the API key. The documents are
        embedded before the index is locked: searches do not wait for it."""
        return await run_write("/index", _one_key(request, idempotency_key), req,
                               lambda token: state.index(token, req.documents,
                                                         strict=req.strict,
                                                         assume_timezone=req.assume_timezone,
                                                         date_order=req.date_order))

    @app.post("/feedback", response_model=PriorsResponse, dependencies=write,
              responses=_errors(401, 403, 404, 408, 413, 415, 422, 503, 504, 507), tags=["priors"])
    async def feedback(req: FeedbackRequest, request: Request,
                       idempotency_key: IdempotencyKey = None) -> Any:
        """One round of relevance feedback: a new version of the priors (bounded steps,
        logged, reversible). Needs the API key and --priors-store. An item's ``source_type``
        is checked against the type the served index gives its ``source_id`` by provenance
        (and the type the store recorded the source with): another is a 422 at
        ``items[i].source_type``, and nothing is applied."""
        items = [(i.source_type, i.source_id, i.relevant) for i in req.items]

        def work(token: Any) -> tuple[dict[str, Any], bool]:
            store = state.priors_store()
            try:
                version, applied = store.update_once(
                    items, req.step, author=req.author, reason=req.reason,
                    request_id=idempotency_key, on_commit=token.begin_commit,
                    known_types=state.source_types(sid for _, sid, _ in items if sid))
            except SourceTypeMismatch as exc:
                field = f"items[{exc.item}].source_type"
                also = [f"items[{i}].source_type" for i, _ in exc.problems[1:]]
                shown = ", ".join(also[:10]) + (f", … {len(also) - 10} more"
                                                if len(also) > 10 else "")
                detail = exc.problems[0][1] + (
                    f" (and {len(also)} more: {shown})" if also else "")
                raise LimitError(422, "invalid_request", f"{field}: {detail}",
                                 field=field) from None
            return priors_document(store, version), applied

        return await run_write("/feedback", _one_key(request, idempotency_key), req, work)

    @app.get("/priors", response_model=PriorsResponse, responses=_errors(404, 422, 503, 504),
             tags=["priors"])
    async def priors(request: Request,
                     version: int | None = Query(None, ge=0, description="default: current"),
                     offset: int = Query(0, ge=0, description="the first source of the page "
                                                              "(sources sorted by name)"),
                     limit: int = Query(MAX_PRIORS_PAGE, ge=1, le=MAX_PRIORS_PAGE,
                                        description="the most sources answered")) -> JSON:
        """The priors of a version of the feedback store: per type, and one page of the
        per-source table (``offset``, ``limit``; ``sources_total`` says how many). Another
        query parameter, or one given twice, is a 422 naming it."""
        _only_query(request, ("version", "offset", "limit"))

        def work(token: Any) -> Rendered:
            return Rendered.of(priors_document(state.priors_store(), version,
                                               page=(offset, limit)))

        try:
            return JSON(await state.read(None, work))
        except (FeedbackStoreError, OSError) as exc:
            raise store_unavailable(exc) from None
        except ValueError as exc:
            head = str(exc).split(":", 1)[0]  # a query parameter the store refused (version)
            raise LimitError(422, "invalid_request", str(exc),
                             field=head if head in ("version", "offset", "limit") else None
                             ) from None

    @app.post("/priors/rollback", response_model=PriorsResponse, dependencies=write,
              responses=_errors(401, 403, 404, 408, 413, 415, 422, 503, 504, 507), tags=["priors"])
    async def rollback(req: RollbackRequest, request: Request,
                       idempotency_key: IdempotencyKey = None) -> Any:
        """Restore an earlier version of the priors, recorded as a new version."""
        def work(token: Any) -> tuple[dict[str, Any], bool]:
            store = state.priors_store()
            new, applied = store.rollback_once(
                req.version, author=req.author, reason=req.reason,
                request_id=idempotency_key, on_commit=token.begin_commit)
            return priors_document(store, new), applied

        return await run_write("/priors/rollback", _one_key(request, idempotency_key), req, work)

    # -- the web page --------------------------------------------------------------------------
    files = PageFiles(directory=STATIC_DIR, check_dir=False)

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page(request: Request) -> Any:
        if not (STATIC_DIR / "index.html").is_file():
            return error(404, "not_found", "the web page is not installed "
                                           "(credrank/serve/static/index.html is missing)")
        return await files.get_response("index.html", request.scope)

    if STATIC_DIR.is_dir():
        app.mount("/static", files, name="static")

    _document_bodies(app, (SearchRequest, RerankRequest, ContextRequest, RerankContextRequest))
    return app


#: the headers of the web page and its files: revalidated at each load (after an upgrade no
#: page runs with the old ``app.js``), never sniffed as another type, and no script, style,
#: frame or form target from elsewhere (the page has no inline script or style)
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'none'",
}


class PageFiles(StaticFiles):
    """The web page's files (:data:`STATIC_DIR`) with :data:`PAGE_HEADERS`; ``GET`` and
    ``HEAD``, ranges and conditional requests (``If-None-Match``: 304) as Starlette serves
    static files."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(PAGE_HEADERS)
        return response


def _guarded(config: ServeConfig) -> Callable[[ASGIApp], ASGIApp]:
    """The request guards of ``config`` around an app, the access log outermost."""
    def guard(app: ASGIApp) -> ASGIApp:
        app = BodyLimitMiddleware(app, max_bytes=config.max_body_bytes,
                                  read_timeout_s=config.read_timeout_s)
        app = JsonRequestMiddleware(app, paths=JSON_PATHS)
        app = ApiKeyMiddleware(app, api_key=config.api_key, paths=WRITE_PATHS)
        app = CutShortMiddleware(app, write_paths=WRITE_PATHS)
        return AccessLogMiddleware(app, guarded=JSON_PATHS)

    return guard


class ServiceApp(FastAPI):
    """FastAPI with the service's request path (module docstring): ``guard`` (the request
    guards) outermost, then the middleware added with ``add_middleware`` (none by credrank;
    an application embedding the service may add its own, CORS for one, and it applies to
    every route), then :class:`~credrank.serve.dispatch.DirectRoutes` sending ``POST`` to a
    :class:`SelfParsedRoute` straight to its endpoint, then FastAPI's own stack (its
    middleware, the router) for every other request."""

    def __init__(self, guard: Callable[[ASGIApp], ASGIApp], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.guard = guard

    def build_middleware_stack(self) -> ASGIApp:
        direct = {route.path: route for route in self.router.routes
                  if isinstance(route, SelfParsedRoute)}
        added, self.user_middleware = self.user_middleware, []
        try:
            app: ASGIApp = DirectRoutes(direct, self.exception_handlers,
                                        super().build_middleware_stack())
        finally:
            self.user_middleware = added
        for cls, args, kwargs in reversed(added):
            app = cls(app, *args, **kwargs)
        return self.guard(app)


def _dense_context(plan: Plan) -> None:
    """A 422 for a context whose ranking is lexical (:func:`check_context_spec`: its tiers
    bin cosines), said at the field that asked for it: the ``pipeline``'s ``retrieval``, else
    ``lexical`` (a door without that field only gets it from a pipeline)."""
    try:
        check_context_spec(plan.spec)
    except ValueError as exc:
        field = "pipeline.retrieval" if plan.where else "lexical"
        rest = str(exc).partition(":")[2].replace("expected dense",
                                                  "context needs dense retrieval", 1)
        raise LimitError(422, "invalid_request", f"{field}:{rest}", field=field) from None


def _records(req: RerankRequest) -> list[dict[str, Any]]:
    """The candidates of ``req`` as the library's records (:data:`CANDIDATE_FIELDS`)."""
    return [{name: getattr(c, name) for name in CANDIDATE_FIELDS} for c in req.candidates]


def _one_key(request: Request, key: str | None) -> str | None:
    """``key``, the request's ``Idempotency-Key``, when it came once; two of them (the first
    was used, and a retry with the second applied the write again) are a 422 naming the
    header."""
    given = 0 if key is None else len(request.headers.getlist(HEADER))
    if given > 1:
        raise LimitError(422, "invalid_request", f"{HEADER}: given {given} times; give it once",
                         field=HEADER)
    return key


def _only_query(request: Request, names: Sequence[str]) -> None:
    """422 naming a query parameter of ``request`` that is none of ``names`` (it would be
    ignored: ``?verison=2`` answered the current version), or one given twice (``?version=1
    &version=2`` answered the last)."""
    sent = request.query_params
    for name in sent:
        if name not in names:
            raise LimitError(422, "invalid_request",
                             f"{name[:80]}: no such query parameter of {request.method} "
                             f"{request.url.path} (expected {', '.join(names)})",
                             field=name[:80])
        if len(sent.getlist(name)) > 1:
            raise LimitError(422, "invalid_request",
                             f"{name}: given {len(sent.getlist(name))} times; give it once",
                             field=name)


Body = TypeVar("Body", bound=BaseModel)
Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


async def _parsed(request: Request, model: type[Body]) -> Body:
    """The request's body as ``model``, parsed and validated in one pass by pydantic-core
    from the bytes (FastAPI's own path, ``json.loads`` then validation of the Python objects
    and its dependency machinery, costs ≈ 4× more on a ``/rerank`` of 30 candidates with
    384-float vectors, and ≈ 0.1 ms of a cheap ``/search``); its errors are FastAPI's 422,
    located under ``body`` (:func:`field_path`)."""
    try:
        return model.model_validate_json(await request.body())
    except ValidationError as exc:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        ) from None


class SelfParsedRoute(APIRoute):
    """The route of an endpoint that takes the request and answers the response itself
    (``async def endpoint(request) -> Response``, its body parsed by :func:`_parsed`):
    documented as any route (its ``requestBody`` by :func:`_self_parsed`), and served by
    :class:`ServiceApp` straight from the request guards
    (:class:`~credrank.serve.dispatch.DirectRoutes`), without FastAPI's per-request machinery,
    which such an endpoint does not use."""


def _self_parsed(app: FastAPI, path: str, body: type[BaseModel], **kwargs: Any
                 ) -> Callable[[Endpoint], Endpoint]:
    """``POST path`` to the decorated endpoint as a :class:`SelfParsedRoute` whose OpenAPI
    ``requestBody`` is ``body`` (:func:`_document_bodies` puts its schema into the
    components)."""
    def register(endpoint: Endpoint) -> Endpoint:
        app.router.add_api_route(
            path, endpoint, methods=["POST"], route_class_override=SelfParsedRoute,
            openapi_extra={"requestBody": {"required": True, "content": {
                "application/json": {"schema": {"$ref": f"#/components/schemas/"
                                                        f"{body.__name__}"}}}}},
            **kwargs)
        return endpoint

    return register


def _rendering(work: Callable[..., dict[str, Any]]) -> Callable[..., Rendered]:
    """``work`` returning its document serialised (:meth:`Rendered.of`), in the same thread."""
    def run(token: Any, *args: Any) -> Rendered:
        return Rendered.of(work(token, *args))

    return run


def _document_bodies(app: FastAPI, models: Sequence[type[BaseModel]]) -> None:
    """Put ``models`` (bodies endpoints parse themselves, :func:`_parsed`) into the OpenAPI
    components, where the endpoints' ``openapi_extra`` points."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            components = schema.setdefault("components", {}).setdefault("schemas", {})
            for model in models:
                body = model.model_json_schema(ref_template="#/components/schemas/{model}")
                for name, sub in body.pop("$defs", {}).items():
                    components.setdefault(name, sub)
                components[model.__name__] = body
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
