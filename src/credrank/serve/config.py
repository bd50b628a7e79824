"""What a ``credrank serve`` process is configured with, and the request limits it enforces."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: the most characters a query may have (every route that takes one)
MAX_QUERY_CHARS = 2_000
#: the bounds of ``top_k`` (both endpoints) and ``fetch_k`` (``/search``)
MAX_TOP_K = 1_000
MAX_FETCH_K = 10_000
#: the most candidates one ``/rerank`` or ``/rerank/context`` request may carry
MAX_CANDIDATES = 1_000
#: the largest pool a selector (``select``) may work on: ``fetch_k`` or the candidate count
MAX_SELECT_POOL = 1_000
#: the most records one ``/index`` request may carry
MAX_DOCUMENTS = 10_000
#: the most feedback items one ``/feedback`` request may carry
MAX_FEEDBACK_ITEMS = 10_000
#: nesting depth and key count of a candidate's ``metadata`` (as the corpus reader's payload bound)
MAX_METADATA_DEPTH = 32
#: default request body limit (bytes) and per-request time limit (seconds)
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024
DEFAULT_TIMEOUT_S = 30.0
#: default time a request body has to arrive in full (seconds; slower: 408, connection closed)
DEFAULT_READ_TIMEOUT_S = 20.0
#: default work budget of one /search or /rerank request, in work units (≈ ms of CPU; see
#: credrank.serve.cost): coverage over at most 283 candidates (≈ 2 s and 300 MB), 40
#: passages of 1,000 characters embedded by MiniLM; 0 turns the budget off
DEFAULT_MAX_REQUEST_COST = 2_000.0
#: default number of heavy requests run at once, and the cost (work units) from which a
#: request is heavy (as credrank.serve.cost.HEAVY_UNITS)
DEFAULT_MAX_HEAVY_REQUESTS = 2
DEFAULT_HEAVY_COST = 1_000.0
#: default seconds a timed-out write whose commit had begun is awaited before its 504
DEFAULT_COMMIT_GRACE_S = 5.0
#: default number of idempotency keys (with their answers) the server remembers
DEFAULT_IDEMPOTENCY_KEYS = 1_000

#: the write endpoints: they need the API key (checked before the body is read)
WRITE_PATHS = frozenset({"/index", "/feedback", "/priors/rollback"})
#: the POST endpoints whose body is JSON: anything else is 415 (``Content-Type``)
JSON_PATHS = WRITE_PATHS | {"/search", "/rerank", "/context", "/rerank/context"}


def route_path(scope: Mapping[str, Any]) -> str:
    """The path of an HTTP ``scope`` as the app's routes see it: ``path`` without the
    ``root_path`` in front of it (the prefix an enclosing app mounts this one under), as
    Starlette's router matches it. The guards match their paths on it (:func:`guarded_path`):
    on the raw ``path``, an app mounted under ``/api`` took ``/api/index``
    for no write path and let it through without the API key."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root):len(root) + 1] in ("/", ""):
        return path[len(root):] or "/"
    return path


def guard_path(path: str) -> str:
    """``path`` as the guards compare it: without a trailing slash (``/`` stays ``/``), so
    ``/index/`` is guarded as ``/index``."""
    return path.rstrip("/") or "/"


def guarded_path(scope: Mapping[str, Any]) -> str:
    """The :func:`route_path` of ``scope`` as the guards compare it (:func:`guard_path`)."""
    return guard_path(route_path(scope))


#: the registered name of the feedback store (``--priors-store``) in pipeline specs
FEEDBACK_NAME = "feedback"
#: names a ``--model`` may not take: the feedback store's, and the prior presets (a spec's
#: ``priors`` reads a preset before a registered name)
RESERVED_NAMES = frozenset({FEEDBACK_NAME, "compressed", "current", "aggressive", "none"})
#: what a registered name looks like (it travels in JSON and in error messages)
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def check_model_name(name: str) -> str | None:
    """Why ``name`` cannot be registered (``None``: it can)."""
    if not MODEL_NAME.fullmatch(name):
        return ("expected a name of 1 to 64 letters, digits, '_', '.' or '-' (starting with a "
                f"letter or digit), got {name!r}")
    if name in RESERVED_NAMES:
        return (f"the name {name!r} is reserved ({FEEDBACK_NAME!r} is the --priors-store; "
                "compressed, current, aggressive and none are prior presets); choose another")
    return None


def check_learned_models(models: Mapping[str, Path], store: Any) -> None:
    """Read each registered file that holds a learned model once, at start-up, so that a
    damaged one fails the start instead of every request that names it (a 422 each).

    Declared policy: a registered ``.json`` file must parse (every kind a ``.json`` file can be
    — a credibility or stance model, a reliability estimate — is JSON); one whose object
    carries a model marker (``credrank_credibility_model``, ``credrank_stance_model``) is
    loaded with its kind's reader (every field checked: format, weights, hashes) and checked
    against the embedder of ``store`` (the index served). Other files (prior files, freshness
    configs: TOML or YAML) are read when a request names them. ``ValueError`` naming the
    registered name and the file."""
    from credrank.core.structured import read_structured
    from credrank.credibility import modelfile as credibility
    from credrank.signals import stance

    manifest = getattr(store, "manifest", None)
    for name, path in models.items():
        if Path(path).suffix.lower() != ".json" or not Path(path).is_file():
            continue
        try:
            doc = read_structured(path, what=f"registered file {name!r}", fmt="json")
            if isinstance(doc, dict) and credibility.KEY in doc:
                credibility.load_model(path).check_store(store)
            elif isinstance(doc, dict) and stance.KEY in doc:
                loaded = stance.load_model(path)
                if manifest is not None:
                    loaded.check_embedder(manifest.embedder, manifest.dim)
        except ValueError as exc:
            raise ValueError(f"models: {name}: {exc}") from exc


@dataclass(frozen=True)
class ServeConfig:
    """The service's settings.

    ``api_key``: the key write endpoints require (``None``: writes are disabled and every
    write answers 401/403 saying so); a key with leading or trailing whitespace is refused
    (no client could send it: HTTP strips header values). ``priors_store``: the feedback
    store behind ``/feedback``, ``GET /priors`` and ``/priors/rollback`` (``None``: those
    answer 404). ``max_body_bytes``: larger request bodies get 413. ``read_timeout_s``: a
    body not fully arrived after this long gets 408 and the connection is closed.
    ``timeout_s``: a request whose work takes longer gets 504, saying what it did (reads
    are cancelled; see :mod:`credrank.serve.limits` for writes). ``commit_grace_s``: how long
    a timed-out write whose commit had begun is awaited before the 504 says it may still be
    applied. ``max_request_cost``: the work budget of one ``/search`` or ``/rerank`` request
    in work units (:mod:`credrank.serve.cost`; 0: no budget). ``max_heavy_requests``: heavy
    requests (estimated at ``heavy_cost`` units or more) run at once (more: 503 with
    ``Retry-After``; 0: no limit).
    ``idempotency_keys``: write outcomes remembered by ``Idempotency-Key``
    (:mod:`credrank.serve.idempotency`). ``index_dir`` is shown by ``/readyz``.
    ``models``: the files a pipeline spec sent over HTTP may name (``credrank serve --model
    NAME=PATH``: a credibility or stance model, a prior file, a freshness config, a
    reliability estimate), by name; a spec never names a path. With ``priors_store`` the
    feedback store is registered too, as ``feedback`` (:attr:`resources`).
    """

    api_key: str | None = field(default=None, repr=False)
    priors_store: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    index_dir: Path | None = None
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S
    commit_grace_s: float = DEFAULT_COMMIT_GRACE_S
    max_request_cost: float = DEFAULT_MAX_REQUEST_COST
    max_heavy_requests: int = DEFAULT_MAX_HEAVY_REQUESTS
    heavy_cost: float = DEFAULT_HEAVY_COST
    idempotency_keys: int = DEFAULT_IDEMPOTENCY_KEYS
    models: Mapping[str, Path] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, path in self.models.items():
            why = check_model_name(name)
            if why is not None:
                raise ValueError(f"models: {why}")
            if not Path(path).exists():
                raise ValueError(f"models: {name}={path}: no such file or directory")
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key: expected a non-empty key or None (writes disabled)")
        if self.api_key is not None and self.api_key != self.api_key.strip():
            raise ValueError("api_key: expected a key without leading or trailing "
                             "whitespace, got one with it (no client could send it)")
        if self.max_body_bytes < 1:
            raise ValueError(f"max_body_bytes: expected an integer >= 1, got "
                             f"{self.max_body_bytes}")
        for name in ("timeout_s", "read_timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: expected a number > 0, got {getattr(self, name)}")
        for name in ("commit_grace_s", "max_request_cost", "heavy_cost"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}: expected a number >= 0, got {getattr(self, name)}")
        for name in ("max_heavy_requests", "idempotency_keys"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name}: expected an integer >= 0, got "
                                 f"{getattr(self, name)}")

    @property
    def resources(self) -> dict[str, Path]:
        """The registered names a pipeline spec may use instead of a path: the ``models`` and,
        with a ``priors_store``, ``feedback``."""
        out = {name: Path(path) for name, path in self.models.items()}
        if self.priors_store is not None:
            out[FEEDBACK_NAME] = Path(self.priors_store)
        return out

    @property
    def writable(self) -> bool:
        """Whether the write endpoints are enabled (an API key is configured)."""
        return self.api_key is not None
