"""What a ``credrank serve`` process is configured with, and the request limits it enforces."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

#: the most characters a query may have (``/search``, ``/rerank``)
MAX_QUERY_CHARS = 2_000
#: the bounds of ``top_k`` (both endpoints) and ``fetch_k`` (``/search``)
MAX_TOP_K = 1_000
MAX_FETCH_K = 10_000
#: the most candidates one ``/rerank`` request may carry
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

#: the write endpoints: they need the API key (checked before the body is read)
WRITE_PATHS = frozenset({"/index", "/feedback", "/priors/rollback"})


@dataclass(frozen=True)
class ServeConfig:
    """The service's settings.

    ``api_key``: the key write endpoints require (``None``: writes are disabled and every
    write answers 401/403 saying so). ``priors_store``: the feedback store behind
    ``/feedback``, ``GET /priors`` and ``/priors/rollback`` (``None``: those answer 404).
    ``max_body_bytes``: larger request bodies get 413. ``timeout_s``: a request whose work
    takes longer gets 504 (the work itself cannot be interrupted and finishes in the
    background). ``index_dir`` is shown by ``/readyz``.
    """

    api_key: str | None = field(default=None, repr=False)
    priors_store: Path | None = None
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S
    index_dir: Path | None = None

    def __post_init__(self) -> None:
        if self.api_key is not None and not self.api_key:
            raise ValueError("api_key: expected a non-empty key or None (writes disabled)")
        if self.max_body_bytes < 1:
            raise ValueError(f"max_body_bytes: expected an integer >= 1, got "
                             f"{self.max_body_bytes}")
        if not self.timeout_s > 0:
            raise ValueError(f"timeout_s: expected a number > 0, got {self.timeout_s}")

    @property
    def writable(self) -> bool:
        """Whether the write endpoints are enabled (an API key is configured)."""
        return self.api_key is not None
