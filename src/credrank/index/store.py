"""The engine protocol every credrank store implements, and what all backends share.

A *store* holds one point per document: a dense vector (cosine), optionally a BM25 sparse vector,
and a payload made of the document's fields, its provenance and a content hash. Three backends
implement :class:`VectorStore`:

* :class:`credrank.index.qdrant_edge.EdgeIndex` — Qdrant Edge in-process (the default);
* :class:`credrank.index.qdrant_server.QdrantServerIndex` — ``qdrant-client``: a Qdrant server
  or cluster, or the client's local mode (the stand-in for a server in tests);
* :class:`credrank.index.memory.InMemoryIndex` — exact numpy cosine, not persistent.

Scoring a formula inside the engine is an optional capability (:class:`FormulaScoring`, asked
with :func:`supports_formula`). The formula is defined once here, backend-neutrally
(:data:`FORMULA`, :func:`formula_priors`); each backend translates it into its engine's
expression language.

This module also holds the index-directory manifest (``DIR/manifest.json``), the payload a
document becomes (:func:`document_payload`), the one payload → :class:`Candidates` conversion
(:func:`to_candidates`) and the deterministic point id and content hash.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import math
import os
import shlex
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from credrank.core.candidates import META_COLUMNS, Candidates
from credrank.core.schema import Field, Flag, Integer, Nullable, Table, Text
from credrank.core.structured import read_structured
from credrank.documents.schema import DATE_FIELDS, SOURCE_TYPES, Document

FORMAT_VERSION = 1
MANIFEST = "manifest.json"
#: the lock file of an index directory (see :class:`IndexLock`)
LOCK_FILE = ".credrank.lock"
#: the largest ``top_k`` / ``fetch_k`` a search accepts (the engines take up to 2^64 - 1, but
#: a pool this size is already far beyond what fits in memory as candidates)
MAX_K = 10_000_000
#: persistent engines an index directory can name in its manifest (``memory`` is not one)
ENGINES = ("edge", "qdrant")
DENSE = "dense"
SPARSE = "bm25"
_NAMESPACE = uuid.UUID("6f1c2b7e-3a52-4c1e-9a57-8f0f4f2d9c11")

#: payload fields with a keyword index (and the fields a ``where`` filter may name)
KEYWORD_FIELDS = ("doc_id", "source_type", "host", "registered_domain", "source_id")
#: payload fields a search returns by default: what ranking, explanations and selection use.
#: The document text (and ``cites``, ``extra``) is left in the engine unless asked for — the
#: payload's conversion to Python is the largest cost of a search after the vector scan.
RANKING_FIELDS = ("doc_id", "title", "url", "source_id", "source_type", "host",
                  "registered_domain", "url_source_type", "declared_source_type",
                  "provenance_rule", "domain_score", *DATE_FIELDS)
#: payload fields returned with ``with_text=True`` besides :data:`RANKING_FIELDS`
TEXT_FIELDS = ("text", "cites")
#: the fields :meth:`VectorStore.read_payloads` returns by default
READ_FIELDS = ("doc_id", "url", "text")
#: documents per request when a store reads payloads in pages
READ_PAGE = 1000
#: provenance fields returned as meta columns besides ``META_COLUMNS``
EXTRA_COLUMNS = ("registered_domain", "url_source_type", "declared_source_type",
                 "provenance_rule", "domain_score", "cites")
#: the credibility-aware score every formula-capable backend computes in its engine
FORMULA = "max($score, 0) × Σ_t λ_t·[source_type = t]"
#: the freshness factor a formula may carry (:class:`FreshnessFormula`, chapter 35.7)
FRESHNESS_FORMULA = ("× ([o]·D(observed_at) + [¬o][v]·D(verified_at) + [¬o][¬v][p]·"
                     "D(published_at) + [¬o][¬v][¬p]·w_undated), D(f) = exp_decay(x = min(f, T), "
                     "target = T, midpoint = 0.5, scale = τ) = 2^(−(T − min(f, T))/τ)")
#: the payload dates that date a document's evidence, in order of preference (the rule of
#: :mod:`credrank.freshness.dates`, which the index layer cannot import; a test checks both
#: agree)
FRESHNESS_FIELDS = ("observed_at", "verified_at", "published_at")


class StoreError(RuntimeError):
    """The index directory or engine is missing, incompatible, damaged or unreachable."""


# -- identities and payloads ---------------------------------------------------------------------

def point_id(doc_id: str) -> str:
    """Deterministic point id of a document id (idempotent upserts, no duplicates)."""
    return str(uuid.uuid5(_NAMESPACE, doc_id))


def content_hash(doc: Document, provenance: Mapping[str, Any]) -> str:
    """Hash of everything stored for a document; unchanged hash → nothing to re-index."""
    h = hashlib.sha256()
    for part in (doc.id, doc.text, doc.title or "", doc.url or "",
                 json.dumps(provenance, sort_keys=True, default=str),
                 json.dumps({k: v.isoformat() if v else None for k, v in doc.dates().items()}),
                 json.dumps(list(doc.cites)), json.dumps(doc.extra, sort_keys=True, default=str)):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def document_payload(doc: Document, provenance: Mapping[str, Any], digest: str
                     ) -> dict[str, Any]:
    """The payload stored with a document's point: fields, provenance, content hash, ISO dates."""
    payload = {
        "doc_id": doc.id, "text": doc.text, "title": doc.title, "url": doc.url,
        "source_id": doc.source_id, **provenance, "cites": list(doc.cites),
        "content_hash": digest, "extra": doc.extra,
    }
    for name in DATE_FIELDS:
        value = getattr(doc, name)
        payload[name] = value.isoformat() if value is not None else None
    return payload


def bm25_text(doc: Document) -> str:
    """The text a document's BM25 vector is computed from (title, then body)."""
    return f"{doc.title or ''}\n{doc.text}"


def returned_fields(with_text: bool) -> list[str]:
    """The payload fields a search returns: :data:`RANKING_FIELDS` (+ text and cites)."""
    return [*RANKING_FIELDS, *TEXT_FIELDS] if with_text else list(RANKING_FIELDS)


def check_where(where: Mapping[str, Any] | None) -> dict[str, Any]:
    """A payload filter ``{field: value}`` (all must match) on :data:`KEYWORD_FIELDS`."""
    if not where:
        return {}
    if not isinstance(where, Mapping):
        raise ValueError(f"where: expected a mapping of field to value, got {where!r}")
    for name, value in where.items():
        if name not in KEYWORD_FIELDS:
            raise ValueError(f"where: field {name!r} has no keyword index; expected one of "
                             f"{', '.join(KEYWORD_FIELDS)}")
        if not isinstance(value, str):
            raise ValueError(f"where[{name!r}]: expected a string, got {value!r}")
    return dict(where)


def to_candidates(query: str, payloads: Sequence[Mapping[str, Any] | None],
                  scores: Sequence[float], *, vectors: Sequence[Any] | None = None,
                  query_vector: np.ndarray | None = None, dim: int | None = None
                  ) -> Candidates:
    """One engine answer (payloads and scores in rank order) as a :class:`Candidates` batch.

    Meta columns: one object array per ``META_COLUMNS`` and :data:`EXTRA_COLUMNS` name (``None``
    where a payload lacks the field). ``vectors`` (one per row) become the batch's vectors;
    ``dim`` sizes the vectors of an empty answer. Every backend builds its batches here.
    """
    if len(payloads) != len(scores):
        raise StoreError(f"engine answer: {len(payloads)} payloads but {len(scores)} scores")
    if not payloads:
        return Candidates.empty(query, dim if vectors is not None else None)
    rows = [p or {} for p in payloads]
    for i, row in enumerate(rows):
        if "doc_id" not in row:
            raise StoreError(f"engine answer: point at rank {i + 1} has no doc_id in its "
                             "payload (not written by credrank?)")
    columns = (*META_COLUMNS, *EXTRA_COLUMNS)
    # one pass over the payloads, then one object array per column
    table = list(zip(*[[row.get(name) for name in columns] for row in rows], strict=True))
    meta = {name: np.array(col, dtype=object) for name, col in zip(columns, table, strict=True)}
    matrix = None
    if vectors is not None:
        matrix = np.array([np.asarray(v, dtype=np.float32) for v in vectors], dtype=np.float32)
    return Candidates(
        query=query,
        doc_ids=np.array([row["doc_id"] for row in rows], dtype=object),
        retrieval_score=np.array(scores, dtype=np.float64),
        meta=meta, vectors=matrix, query_vector=query_vector)


def read_fields(payload: Mapping[str, Any] | None, fields: Sequence[str]) -> dict[str, Any]:
    """``{field: payload.get(field)}`` for ``fields`` (``None`` where missing)."""
    payload = payload or {}
    return {name: payload.get(name) for name in fields}


# -- the formula, backend-neutral ----------------------------------------------------------------

def formula_priors(priors: Mapping[str, float]) -> tuple[tuple[str, float], ...]:
    """``(source type, λ)`` for every type of the taxonomy, in taxonomy order, validated.

    The prior table of :data:`FORMULA`: each backend turns it into a sum of
    ``λ_t × [source_type = t]`` conditions. Raises ``ValueError`` naming a missing type or a
    weight that is not a finite number ``>= 0``.
    """
    out = []
    for t in SOURCE_TYPES:
        if t not in priors:
            raise ValueError(f"priors: no weight for source type {t!r}; expected one for each "
                             f"of {', '.join(SOURCE_TYPES)}")
        value = priors[t]
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer,
                                                             np.floating)):
            raise ValueError(f"priors[{t!r}]: expected a number, got {value!r}")
        if not math.isfinite(float(value)) or float(value) < 0:
            raise ValueError(f"priors[{t!r}]: expected a finite number >= 0, got {value!r}")
        out.append((t, float(value)))
    return tuple(out)


@dataclass(frozen=True)
class FreshnessFormula:
    """The freshness factor of :data:`FRESHNESS_FORMULA`, backend-neutral (chapter 35.7).

    ``w = 2^(−(T − t)/τ)`` with ``t`` the first non-empty of :data:`FRESHNESS_FIELDS` (a
    payload ISO date), clamped to ``T`` (``min(t, T)``: a date after ``T`` weighs 1), and
    ``undated_weight`` where all three are empty (null or missing). Each backend writes it as
    an exponential decay on the datetime key with ``midpoint = 0.5`` at ``scale = τ`` —
    ``exp(ln 0.5 · |x − T|/τ) = 2^(−|x − T|/τ)`` — with the key's formula default set to ``T``
    (decay 1, then multiplied by 0 through the emptiness conditions: an undated point weighs
    exactly ``undated_weight``).

    ``now``: ``T`` as an ISO 8601 string with offset; ``half_life_days``: ``τ`` (> 0);
    ``undated_weight`` in ``[0, 1]``.
    """

    now: str
    half_life_days: float
    undated_weight: float

    def __post_init__(self) -> None:
        try:
            when = datetime.fromisoformat(self.now.replace("Z", "+00:00"))
        except (AttributeError, ValueError):
            raise ValueError(f"freshness formula: now: expected an ISO 8601 date, "
                             f"got {self.now!r}") from None
        if when.tzinfo is None:
            raise ValueError(f"freshness formula: now: expected a date with a UTC offset, "
                             f"got {self.now!r}")
        tau = float(self.half_life_days)
        if not math.isfinite(tau) or tau <= 0:
            raise ValueError(f"freshness formula: half_life_days: expected a positive finite "
                             f"number, got {self.half_life_days!r}")
        w = float(self.undated_weight)
        if not (0.0 <= w <= 1.0):
            raise ValueError(f"freshness formula: undated_weight: expected a number in [0, 1], "
                             f"got {self.undated_weight!r}")

    @property
    def scale_seconds(self) -> float:
        """``τ`` in seconds (the engines measure datetimes in seconds)."""
        return float(self.half_life_days) * 86_400.0


# -- the manifest --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Manifest:
    """What ``DIR/manifest.json`` records about an index (never a credential).

    ``engine``: ``edge`` (data in ``DIR/shard``) or ``qdrant`` (data in a Qdrant collection:
    ``collection`` on a server at ``qdrant_location`` when ``qdrant_mode`` is ``url``, or in the
    client's local mode at the folder ``qdrant_location`` when it is ``path``). Manifests written
    before the engine was recorded mean ``edge``. ``memory`` marks the non-persistent store.
    """

    embedder: str
    dim: int
    bm25: bool = True
    format: int = FORMAT_VERSION
    engine: str = "edge"
    collection: str | None = None
    qdrant_mode: str | None = None
    qdrant_location: str | None = None

    def to_json(self) -> str:
        data = {k: v for k, v in asdict(self).items() if v is not None}
        return json.dumps(data, indent=2)

    @classmethod
    def from_dict(cls, data: Any, where: str = "manifest") -> Manifest:
        """A manifest from its JSON object (:data:`MANIFEST_SCHEMA`); ``StoreError`` naming
        ``where`` and the field."""
        data = MANIFEST_SCHEMA.check(data, where, error=StoreError)
        manifest = cls(**data)
        if manifest.format > FORMAT_VERSION:
            raise StoreError(f"{where}: index format {manifest.format} is newer than this "
                             f"credrank reads ({FORMAT_VERSION})")
        if manifest.engine == "qdrant" and (not manifest.collection
                                            or manifest.qdrant_mode not in ("url", "path")):
            raise StoreError(f"{where}: a qdrant index needs 'collection' and 'qdrant_mode' "
                             f"(url or path), got {manifest.collection!r} and "
                             f"{manifest.qdrant_mode!r}")
        return manifest


#: what a manifest may hold; an unknown field (written by a newer credrank?) is refused
MANIFEST_SCHEMA = Table({
    "embedder": Field(Text()),
    "dim": Field(Integer(1, 1_000_000)),
    "bm25": Field(Flag(), default=True),
    "format": Field(Integer(0), default=FORMAT_VERSION),
    "engine": Field(Text(choices=(*ENGINES, "memory")), default="edge"),
    "collection": Field(Nullable(Text()), default=None),
    "qdrant_mode": Field(Nullable(Text()), default=None),
    "qdrant_location": Field(Nullable(Text()), default=None),
}, what="a JSON object")


def read_manifest(index_dir: str | Path) -> Manifest | None:
    """The manifest of ``index_dir``, or ``None`` when the directory holds none; a manifest
    that is not UTF-8 JSON within the bounds of :mod:`credrank.core.structured` is a
    ``StoreError`` naming the file."""
    path = Path(index_dir) / MANIFEST
    if not path.is_file():
        return None
    data = read_structured(path, what="index manifest", fmt="json", error=StoreError)
    return Manifest.from_dict(data, str(path))


def write_manifest(index_dir: str | Path, manifest: Manifest) -> None:
    """Write ``DIR/manifest.json`` atomically (a crash leaves the old one or none)."""
    path = Path(index_dir) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(manifest.to_json(), encoding="utf-8")
    os.replace(tmp, path)


def check_manifest(index_dir: str | Path, manifest: Manifest, engine: str, *,
                   embedder: str | None = None, dim: int | None = None) -> None:
    """Raise ``StoreError`` when an existing index is of another engine, embedder or dimension."""
    if manifest.engine != engine:
        raise StoreError(f"{index_dir}: index was built with engine {manifest.engine!r}, not "
                         f"{engine!r}; open it with --engine {manifest.engine}")
    if embedder and embedder != manifest.embedder:
        raise StoreError(f"{index_dir}: index was built with embedder "
                         f"{manifest.embedder!r}, not {embedder!r}")
    if dim and dim != manifest.dim:
        raise StoreError(f"{index_dir}: index dimension is {manifest.dim}, not {dim}")


def no_index_error(index_dir: str | Path) -> StoreError:
    """The error for a directory that holds no index (and creation was not asked for)."""
    return StoreError(f"{index_dir}: no credrank index here (expected "
                      f"{Path(index_dir) / MANIFEST}); build one with "
                      "`credrank index CORPUS --index DIR`")


def check_index_dir(index_dir: str | Path) -> None:
    """``StoreError`` when ``index_dir`` exists but is not a directory (a regular file)."""
    path = Path(index_dir)
    if path.exists() and not path.is_dir():
        raise StoreError(f"{index_dir}: expected an index directory, got a file")


# -- the directory lock --------------------------------------------------------------------------

class IndexLock:
    """The lock of an index directory: ``DIR/.credrank.lock`` and ``flock`` on it.

    A writer (:meth:`writer`, what ``open_store(..., create=True)`` and ``credrank index`` take)
    holds it exclusively for its whole run and records ``{"pid", "since", "command"}`` in the
    file; readers (:meth:`reader`) hold it shared. Neither ever waits: when the lock is taken
    the other way, :class:`StoreError` says by whom and since when, and nothing in the
    directory is touched. The kernel drops a ``flock`` when its process dies, so a lock file
    left by a killed run blocks no one; its content is only information.
    """

    def __init__(self, path: Path, fd: int | None) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def writer(cls, index_dir: str | Path, command: str | None = None) -> IndexLock:
        """Take the exclusive lock of ``index_dir`` (created, with its parents, if missing)."""
        check_index_dir(index_dir)
        directory = Path(index_dir)
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"{index_dir}: cannot create the index lock file: "
                             f"{exc.strerror or exc}") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                os.close(fd)
                raise StoreError(f"{index_dir}: cannot lock the index: {exc}") from exc
            try:
                readers_only = _try_shared(fd)
                holder = None if readers_only else _holder(fd)
            finally:
                os.close(fd)
            if readers_only:
                raise StoreError(f"index {index_dir} is being read by another process (a "
                                 "search); retry when it has finished") from None
            raise StoreError(f"{_written_by(index_dir, holder)}; wait for that run to finish "
                             "(or stop it) and re-run") from None
        info = {"pid": os.getpid(), "since": datetime.now(UTC).isoformat(timespec="seconds"),
                "command": command if command is not None else _command()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode("utf-8") + b"\n", 0)
        return cls(directory / LOCK_FILE, fd)

    @classmethod
    def reader(cls, index_dir: str | Path) -> IndexLock:
        """Take the shared lock of ``index_dir``; ``StoreError`` while a writer holds it.

        A directory without a lock file that cannot be written (read-only media) is read
        without a lock; a missing directory takes none (opening it then says there is no index).
        """
        check_index_dir(index_dir)
        directory = Path(index_dir)
        path = directory / LOCK_FILE
        if not directory.is_dir():
            return cls(path, None)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                return cls(path, None)
        if _try_shared(fd):
            return cls(path, fd)
        try:
            holder = _holder(fd)
        finally:
            os.close(fd)
        raise StoreError(f"{_written_by(index_dir, holder)}; retry when it has finished")

    def release(self) -> None:
        """Drop the lock (idempotent); the file stays, as information only."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the last descriptor releases the flock

    def __enter__(self) -> IndexLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _try_shared(fd: int) -> bool:
    """Whether a shared lock could be taken on ``fd`` without waiting (it is then held)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            return False
        raise StoreError(f"cannot lock the index: {exc}") from exc
    return True


def _holder(fd: int) -> dict[str, Any] | None:
    """What the lock file says about its writer (``None`` when unreadable or not yet written)."""
    try:
        data = json.loads(os.pread(fd, 65536, 0).decode("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _written_by(index_dir: str | Path, holder: Mapping[str, Any] | None) -> str:
    if not holder or "pid" not in holder:
        return f"index {index_dir} is being written by another process"
    text = f"index {index_dir} is being written by PID {holder['pid']}"
    if holder.get("since"):
        text += f" since {holder['since']}"
    if holder.get("command"):
        text += f" ({holder['command']})"
    return text


def _command() -> str:
    """This process's command line, for the lock file (shortened)."""
    argv = [Path(sys.argv[0]).name, *sys.argv[1:]] if sys.argv and sys.argv[0] else ["python"]
    text = shlex.join(argv)
    return text if len(text) <= 200 else text[:199] + "…"


def is_lock_error(exc: BaseException) -> bool:
    """Whether an engine's exception on open says another process holds the data."""
    text = str(exc)
    return "WouldBlock" in text or "already accessed" in text or "Resource temporarily" in text


# -- the protocols -------------------------------------------------------------------------------

@runtime_checkable
class VectorStore(Protocol):
    """What every credrank store offers (see the module docstring for the backends).

    Searches return :class:`Candidates` in rank order with ``META_COLUMNS`` and
    :data:`EXTRA_COLUMNS` as meta columns (``text``/``cites`` filled only with
    ``with_text=True``). ``where`` is a payload filter ``{field: value}`` on
    :data:`KEYWORD_FIELDS`, all of which must match.
    """

    @property
    def manifest(self) -> Manifest: ...

    def __len__(self) -> int: ...

    def upsert(self, documents: Sequence[Document], provenance: Sequence[Mapping[str, Any]],
               vectors: np.ndarray, hashes: Sequence[str]) -> None:
        """Write one batch: documents, their provenance dicts, dense vectors, content hashes."""
        ...

    def existing_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """``doc_id -> content_hash`` for the given ids already stored."""
        ...

    def read_payloads(self, doc_ids: Sequence[str] | None = None,
                      fields: Sequence[str] = READ_FIELDS) -> list[dict[str, Any]]:
        """The stored ``fields`` of the documents ``doc_ids`` (ids not stored are absent from
        the answer), or of every document when ``doc_ids`` is ``None``; one dict per
        document, a field the payload lacks as ``None``. Order: unspecified."""
        ...

    def search_dense(self, query: str, query_vector: np.ndarray, fetch_k: int, *,
                     with_vectors: bool = False, with_text: bool = False,
                     exact: bool = False, where: Mapping[str, Any] | None = None
                     ) -> Candidates:
        """The ``fetch_k`` nearest documents by cosine similarity."""
        ...

    def search_bm25(self, query: str, fetch_k: int, *, with_vectors: bool = False,
                    with_text: bool = False, where: Mapping[str, Any] | None = None
                    ) -> Candidates:
        """The ``fetch_k`` best documents by BM25 (``StoreError`` where unsupported)."""
        ...

    def search_source(self, query_vector: np.ndarray, source_id: str, k: int) -> Candidates:
        """The ``k`` nearest documents of one source, with their text."""
        ...

    def optimize(self, on_progress: Callable[[int, int], None] | None = None) -> bool:
        """Let the engine reorganise itself after bulk writes (merge segments, build the HNSW
        graph); ``True`` if it did anything. Blocking; ``on_progress(indexed, total)`` is a
        heartbeat where the engine reports its progress (stores that have nothing to build
        never call it)."""
        ...

    def close(self) -> None: ...

    def __enter__(self) -> VectorStore: ...

    def __exit__(self, *exc: object) -> None: ...


#: the payload fields a ranked hit needs (:meth:`Candidates.hits`: id, provenance, title, url,
#: the five dates — also what the pushed-down freshness factor reads back): what a pushdown
#: that is cut to ``top_k`` in the engine asks for (``fields=`` of
#: :meth:`FormulaScoring.search_formula`), a subset of :data:`RANKING_FIELDS`
HIT_FIELDS = ("doc_id", "source_id", "source_type", "host", "url", "title", *DATE_FIELDS)


@runtime_checkable
class FormulaScoring(Protocol):
    """The optional capability: score :data:`FORMULA` inside the engine.

    ``formula_supported`` may be ``False`` where the class has the method but this installation
    cannot run it (e.g. a ``qdrant-client`` older than formula queries).
    """

    formula_supported: bool

    def search_formula(self, query: str, query_vector: np.ndarray, fetch_k: int, top_k: int,
                       priors: Mapping[str, float], *, with_vectors: bool = False,
                       exact: bool = False, with_text: bool = False,
                       freshness: FreshnessFormula | None = None,
                       fields: Sequence[str] | None = None) -> Candidates:
        """Prefetch ``fetch_k`` nearest, rescore by :data:`FORMULA` (× the freshness factor
        :data:`FRESHNESS_FORMULA` with ``freshness``), return the ``top_k``.

        ``fields``: the payload fields returned (``doc_id`` always; e.g. :data:`HIT_FIELDS`);
        ``None`` returns :func:`returned_fields` of ``with_text``, which ``fields`` replaces."""
        ...


def formula_fields(fields: Sequence[str] | None, with_text: bool) -> list[str]:
    """The payload fields a formula search returns: ``fields`` (with ``doc_id`` first, each
    once), or :func:`returned_fields` of ``with_text`` when ``fields`` is ``None``."""
    if fields is None:
        return returned_fields(with_text)
    if isinstance(fields, str) or not all(isinstance(f, str) and f for f in fields):
        raise ValueError(f"fields: expected a sequence of payload field names, got {fields!r}")
    return list(dict.fromkeys(["doc_id", *fields]))


def supports_formula(store: object) -> bool:
    """Whether ``store`` can score :data:`FORMULA` in its engine (pushdown)."""
    return isinstance(store, FormulaScoring) and bool(store.formula_supported)
