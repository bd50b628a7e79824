"""``credrank serve``: the HTTP service over one index (the ``serve`` extra: FastAPI, uvicorn)."""

from __future__ import annotations

import importlib.util
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.cli.common import check_index_option, err, fail, warn
from credrank.cli.index import (
    EngineOption,
    QdrantPathOption,
    QdrantUrlOption,
    store_options,
)
from credrank.index.manifest import reindex_hint

if TYPE_CHECKING:
    from credrank.searcher import Searcher

# as credrank.serve.config (not imported here: the serve extra is imported lazily)
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_READ_TIMEOUT_S = 20.0
DEFAULT_MAX_REQUEST_COST = 2_000.0
DEFAULT_MAX_HEAVY_REQUESTS = 2
DEFAULT_HEAVY_COST = 1_000.0
DEFAULT_COMMIT_GRACE_S = 5.0
DEFAULT_IDEMPOTENCY_KEYS = 1_000


def serve(
    index_dir: Annotated[Path, typer.Option("--index", help="index directory (must exist)")],
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="port to listen on")] = 8000,
    api_key_env: Annotated[str | None, typer.Option(
        "--api-key-env", metavar="VAR",
        help="enable the write endpoints (/index, /feedback, /priors/rollback) with the key "
             "in this environment variable; clients send it as X-API-Key or Authorization: "
             "Bearer. Without it, writes are disabled")] = None,
    priors_store: Annotated[Path | None, typer.Option(
        help="feedback store behind /feedback, GET /priors, /priors/rollback and searches "
             "with priors_store 'feedback' (created from the current preset when "
             "absent)")] = None,
    model: Annotated[list[str] | None, typer.Option(
        "--model", metavar="NAME=PATH",
        help="register a file a pipeline spec sent over HTTP may name by NAME (a credibility "
             "or stance model, a prior file, a freshness config, a reliability estimate); "
             "repeatable. Specs over HTTP name only registered files, never paths; "
             "--priors-store is registered as 'feedback'. GET /readyz lists the names")] = None,
    table: Annotated[list[Path] | None, typer.Option(
        "--table", help="domain table CSV typing hosts for /rerank and /index; repeatable")
    ] = None,
    trust_declared: Annotated[bool, typer.Option(
        help="/index: use a record's declared source_type instead of its URL")] = False,
    max_body_bytes: Annotated[int, typer.Option(
        min=1, help="largest request body in bytes (larger: 413)")] = DEFAULT_MAX_BODY_BYTES,
    timeout: Annotated[float, typer.Option(
        min=0.001, help="seconds a request may take (longer: 504 saying what it did; a "
                        "read is cancelled at its next stage)")] = 30.0,
    read_timeout: Annotated[float, typer.Option(
        min=0.001, help="seconds a request's headers, and then its body, may take to arrive "
                        "(slower: 408, connection closed)")] = DEFAULT_READ_TIMEOUT_S,
    max_request_cost: Annotated[float, typer.Option(
        min=0.0, help="work budget of one /search, /rerank, /context or /rerank/context, in "
                      "work units (≈ ms of CPU: "
                      "selection, consensus and embedding, priced before the work; over it: "
                      "422). 0: no budget")] = DEFAULT_MAX_REQUEST_COST,
    max_heavy_requests: Annotated[int, typer.Option(
        min=0, help="heavy requests (estimated at --heavy-cost units or more) run at once; "
                    "more: 503 with Retry-After. 0: no limit")] = DEFAULT_MAX_HEAVY_REQUESTS,
    heavy_cost: Annotated[float, typer.Option(
        min=0.0, help="estimated cost (work units) from which a request is heavy")
    ] = DEFAULT_HEAVY_COST,
    commit_grace: Annotated[float, typer.Option(
        min=0.0, help="seconds a timed-out write whose commit had begun is awaited before its "
                      "504 says it may still be applied")] = DEFAULT_COMMIT_GRACE_S,
    idempotency_keys: Annotated[int, typer.Option(
        min=0, help="write outcomes remembered by Idempotency-Key (least recently used "
                    "dropped first)")] = DEFAULT_IDEMPOTENCY_KEYS,
    graceful_timeout: Annotated[int, typer.Option(
        min=0, help="on SIGTERM, seconds (whole) to let in-flight requests finish; then each "
                    "still running answers 503 and its work is cancelled, and the process "
                    "exits once that work reaches its next check (a long stage's own time "
                    "limit at the latest)")] = 30,
    engine: EngineOption = None,
    qdrant_url: QdrantUrlOption = None,
    qdrant_api_key_env: Annotated[str | None, typer.Option(
        "--qdrant-api-key-env", metavar="VAR",
        help="read the Qdrant API key from this environment variable (--engine qdrant)")
    ] = None,
    qdrant_path: QdrantPathOption = None,
) -> None:
    """Serve the index over HTTP: POST /search, /rerank, /context, /rerank/context, /index,
    /feedback, /priors/rollback; GET /priors, /healthz, /readyz, /openapi.json and the web
    page at /.

    The model and the index are loaded once, before the server listens (/readyz answers 200
    from then on). Index lock: with --api-key-env (writes enabled) the server opens the index
    as its writer (exclusive lock, as `credrank index`); without it, as a reader. Either way
    the embedded engine lets one process use an index at a time: `credrank index` or
    `credrank search` on the same directory exits 2 while the server runs. SIGTERM (or
    Ctrl-C) stops accepting connections, lets in-flight requests finish (up to
    --graceful-timeout; a request still running then is cut short with a 503 saying what it
    did), closes the index and exits 0. A stop signal while the index loads: a message, exit
    128 + the signal.

    Pipelines: /search, /rerank, /context and /rerank/context take the stage fields or a
    whole pipeline spec ("pipeline", as `credrank search --json` writes it). Files are named
    by the names registered with --model NAME=PATH (checked here: exit 2 when one is
    missing, or when a credibility or stance model in it is damaged or for another
    embedder) and 'feedback' (the --priors-store), never by path; /readyz lists them.

    Hostile use: each /search, /rerank, /context and /rerank/context is priced before it
    runs (selection, consensus, embedding; over --max-request-cost: 422 naming the field and
    the budget); at most --max-heavy-requests heavy ones run at once (more: 503,
    Retry-After); a body slower than --read-timeout gets 408; work over --timeout is
    cancelled at its next stage and the 504 says whether a write was applied. Writes are
    idempotent per Idempotency-Key header.
    """
    missing = [m for m in ("fastapi", "uvicorn", "orjson") if importlib.util.find_spec(m) is None]
    if missing:
        fail(f"credrank serve needs the serve extra ({', '.join(missing)} missing): "
             "pip install 'credrank[serve]'")
    # the optional extra: imported only here, so the base CLI works without it
    import uvicorn

    from credrank.index.store import StoreError, no_index_error, read_manifest
    from credrank.searcher import Searcher
    from credrank.serve.app import create_app
    from credrank.serve.config import ServeConfig, check_learned_models
    from credrank.serve.logs import LOG_CONFIG, captured_warnings, lean_records
    from credrank.signals.feedback import FeedbackPriors

    api_key = _secret("--api-key-env", api_key_env, "the service's API key")
    options: dict[str, Any] = store_options(engine, qdrant_url, None, qdrant_path)
    if qdrant_api_key_env is not None:
        if qdrant_path is not None:
            fail("--qdrant-api-key-env applies to a server (--qdrant-url), not to "
                 "--qdrant-path")
        options["api_key"] = _secret("--qdrant-api-key-env", qdrant_api_key_env,
                                     "the Qdrant API key")
    models = _models(model or [])
    check_index_option(index_dir)
    searcher: Searcher | None = None
    try:
        with _stopped_by_signals():  # SIGTERM or Ctrl-C while loading: a message, not a trace
            try:
                if read_manifest(index_dir) is None:
                    raise no_index_error(index_dir)
                resources: dict[str, Path] = dict(models)
                if priors_store is not None:
                    resources["feedback"] = priors_store.resolve()
                searcher = Searcher.open(index_dir, tables=table or [],
                                         trust_declared=trust_declared,
                                         create=api_key is not None, resources=resources,
                                         allow_paths=False, **options)
                for message in searcher.typer.unmatchable_warnings():  # rows no URL matches
                    warn(f"--table {message}")
                try:  # a damaged or other-embedder model fails the start, not each request
                    check_learned_models(models, searcher.store)
                except ValueError as exc:
                    fail(f"--model {str(exc).removeprefix('models: ')}")
                searcher.keep_columns()  # a large pool reads no payload (credrank.index.columns)
                hint = reindex_hint(index_dir, searcher.store.manifest)
                if hint is not None:
                    warn(hint, label="note:")
            except (ValueError, StoreError, RuntimeError, OSError) as exc:
                if isinstance(exc, typer.Exit):  # a fail() inside: already said
                    raise
                fail(str(exc))
            if priors_store is not None:  # made once the index is open: a failed start
                try:  # leaves none
                    FeedbackPriors(priors_store, None if (priors_store / "priors.json").exists()
                                   else "current")
                except (ValueError, OSError) as exc:
                    fail(f"--priors-store {priors_store}: {exc}")
            config = ServeConfig(api_key=api_key, priors_store=priors_store,
                                 max_body_bytes=max_body_bytes, timeout_s=timeout,
                                 index_dir=index_dir, read_timeout_s=read_timeout,
                                 max_request_cost=max_request_cost,
                                 max_heavy_requests=max_heavy_requests, heavy_cost=heavy_cost,
                                 commit_grace_s=commit_grace,
                                 idempotency_keys=idempotency_keys, models=models)
            app = create_app(searcher, config)
    except BaseException as exc:
        if searcher is not None:
            searcher.close()
        if isinstance(exc, StoppedLoading):
            err.print(f"error: stopped by {exc.name} while loading the index; nothing was "
                      "served")
            raise typer.Exit(128 + exc.signum) from None
        raise
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    from credrank.serve.deadline import with_header_deadline

    lean_records()
    captured_warnings()
    server = uvicorn.Server(uvicorn.Config(
        app, host=host, port=port, log_config=LOG_CONFIG, access_log=False,
        timeout_graceful_shutdown=graceful_timeout, server_header=False, lifespan="on",
        # the request's headers get the body's deadline (uvicorn has no such setting)
        http=with_header_deadline(AutoHTTPProtocol, read_timeout)))
    # uvicorn re-raises the signal that stopped it once it has shut down; with these
    # handlers in place that ends the process normally (exit 0) instead of by the signal.
    # A signal before uvicorn takes the handlers over (between the load and its start) stops
    # the server as soon as it has started (it was recorded and nothing read it: it ran on).
    def stop(signum: int, frame: Any) -> None:
        server.should_exit = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        server.run()
    except SystemExit:  # uvicorn's start-up failure: sys.exit(3) (a port in use, a host that
        if server.started:  # does not resolve), which skipped the error line below
            raise
    finally:
        app.state.service.close()  # idempotent: the lifespan shutdown has normally done it
    if not server.started:
        err.print(f"error: --host {host} --port {port}: the server did not start (the log "
                  "above says why: a port in use, a host that does not resolve)")
        raise typer.Exit(1)


class StoppedLoading(BaseException):
    """A stop signal came while ``credrank serve`` loaded the index (a ``BaseException``, as
    ``KeyboardInterrupt`` is: no ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum, self.name = signum, signal.Signals(signum).name


@contextmanager
def _stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGINT raise :class:`StoppedLoading` inside the block (the process said so
    and exits 128 + the signal's number, as a process ended by it; SIGTERM ended it with no
    word, Ctrl-C with a traceback); the handlers before it are restored after."""
    def stop(signum: int, frame: Any) -> None:
        raise StoppedLoading(signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _models(items: list[str]) -> dict[str, Path]:
    """``--model NAME=PATH`` values as name → absolute path; exit 2 naming the option when
    one is malformed, reserved, given twice, or names no file."""
    from credrank.serve.config import check_model_name

    out: dict[str, Path] = {}
    for item in items:
        name, sep, raw = item.partition("=")
        name = name.strip()
        if not sep or not name or not raw.strip():
            fail(f"--model {item}: expected NAME=PATH (a name for a file pipeline specs may "
                 "use, e.g. --model cred=models/credibility.json)")
        why = check_model_name(name)
        if why is not None:
            fail(f"--model {item}: {why}")
        if name in out:
            fail(f"--model {item}: the name {name!r} is registered twice "
                 f"(--model {name}={out[name]})")
        path = Path(raw.strip()).expanduser()
        if not path.exists():
            fail(f"--model {item}: {path}: no such file or directory")
        try:
            if path.is_file():
                with path.open("rb"):
                    pass
        except OSError as exc:
            fail(f"--model {item}: {path}: cannot read: {exc.strerror or exc}")
        out[name] = path.resolve()
    return out


def _secret(option: str, variable: str | None, what: str) -> str | None:
    if variable is None:
        return None
    value = os.environ.get(variable)
    if not value:
        fail(f"{option} {variable}: the environment variable {variable} is not set (or "
             f"empty); export {what} in it")
    if value != value.strip():
        fail(f"{option} {variable}: the value of the environment variable {variable} has "
             "leading or trailing whitespace, which no client could send (HTTP strips it); "
             f"export {what} without it")
    return value
