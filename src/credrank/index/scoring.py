"""Index-time scores: a number computed once per document and kept in its payload.

Some signals cost too much to compute per query (a language model over each passage). They are
computed at index time — ``credrank index … --score NAME`` or later, for an existing index,
``credrank score NAME --index DIR`` — and stored in two payload fields of each point, read back
by every search at no extra cost (the fields are among the returned payload,
:data:`credrank.index.payload.RANKING_FIELDS`):

* ``NAME`` — the score (a number, or ``null`` when the document could not be scored, e.g. a
  passage too short);
* ``NAME_key`` — what computed it (:attr:`ScoreJob.key`: method, model, settings).

A job reads each document's ``text`` (:attr:`ScoreJob.score`), or the payload fields and the
stored dense vector it names (:attr:`ScoreJob.score_records`: the learned credibility model
reads the text, url and title, and takes the stored vector as its embedding feature, so a
refitted model rescores an index without embedding anything). Searches ask the engine whether
every document holds a score of one key (:func:`count_scored`; a keyword index on
``NAME_key``, :func:`index_key_field`, keeps that a lookup): that is what lets a stage score
in the engine's formula instead of in Python.

The payload is changed in place (:func:`set_fields`: Qdrant's *set payload*, which merges the
given fields into the stored payload): no vector is recomputed and no other field is touched.
Re-indexing a changed document overwrites its whole payload, so its score goes with it and
is recomputed by the next scoring run.

**Resumable.** :func:`score_store` lists the documents whose ``NAME_key`` is not the job's
key, in ``doc_id`` order, and scores them chunk by chunk; each chunk's scores are written
(through the engine's write-ahead log) before the next chunk is scored. A run stopped at any
point (an error, Ctrl-C, a killed process) loses at most the chunk in flight, never a written
score; re-running scores exactly the documents not yet written, so no document is scored twice
and none is left out. A run with another key (another token budget, model or precision)
rescores every document.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.validation import check_int
from credrank.index.errors import StoreError
from credrank.index.passages import passage_key
from credrank.index.payload import READ_PAGE, point_id
from credrank.index.store import bump_generation

#: documents per scoring chunk (one read, one score call, one write) by default
CHUNK = 64


def key_field(name: str) -> str:
    """The payload field that records what computed the score ``name``."""
    return f"{name}_key"


@dataclass(frozen=True)
class ScoreJob:
    """One index-time score: its payload field ``name``, the ``key`` of the method that
    computes it, and ``score(texts) -> values`` (one float per text, ``nan`` where the text
    cannot be scored).

    Or ``score_records(records) -> values``: each record holds the payload ``fields`` of one
    document (``doc_id`` and ``text`` always) and, with ``vectors``, its stored dense vector
    under ``"vector"`` (``None`` when the store has none for it); ``score`` is then unused."""

    name: str
    key: str
    score: Callable[[Sequence[str]], Sequence[float] | np.ndarray] | None = None
    score_records: Callable[[Sequence[Mapping[str, Any]]], Sequence[float] | np.ndarray] | None \
        = None
    fields: tuple[str, ...] = ("text",)
    vectors: bool = False

    def __post_init__(self) -> None:
        if (self.score is None) == (self.score_records is None):
            raise ValueError(f"score job {self.name!r}: expected exactly one of score and "
                             "score_records")

    def run(self, records: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """The job's values for ``records`` (one per record)."""
        if self.score_records is not None:
            return np.asarray(self.score_records(records), dtype=np.float64)
        assert self.score is not None
        return np.asarray(self.score([r.get("text") or "" for r in records]), dtype=np.float64)


@dataclass
class ScoreReport:
    """What a scoring run did: documents in the index, already scored with the job's key
    (skipped), scored now, of those unscorable (stored as ``null``), and the seconds spent."""

    name: str
    key: str
    total: int = 0
    already: int = 0
    scored: int = 0
    unscorable: int = 0
    seconds: float = 0.0
    doc_ids: list[str] = field(default_factory=list, repr=False)

    @property
    def rate(self) -> float:
        """Documents scored per second (0 when none)."""
        return self.scored / self.seconds if self.scored and self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"score": self.name, "key": self.key, "documents": self.total,
                "already_scored": self.already, "scored": self.scored,
                "unscorable": self.unscorable, "seconds": round(self.seconds, 3),
                "documents_per_s": round(self.rate, 2)}


def passage_keys(store: Any, doc_ids: Sequence[str]) -> dict[str, list[str]]:
    """``doc_id -> the point keys of its passages`` (:func:`~credrank.index.passages.
    passage_key`): the document id alone in an index without split documents, else one per
    passage its first point records (``passages``)."""
    manifest = getattr(store, "manifest", None)
    if not bool(getattr(manifest, "split", False)):
        return {d: [d] for d in doc_ids}
    counts = {str(p["doc_id"]): p.get("passages")
              for p in store.read_payloads(list(doc_ids), ("doc_id", "passages"))}
    out = {}
    for d in doc_ids:
        n = counts.get(d)
        out[d] = [passage_key(d, i) for i in range(n if isinstance(n, int) and n > 1 else 1)]
    return out


def set_fields(store: Any, updates: Mapping[str, Mapping[str, Any]]) -> None:
    """Merge ``updates[doc_id]`` (field → value) into the stored payload of each document
    (every passage of a split one: :func:`passage_keys`), leaving its vectors and other fields
    as they are. Documents not in the store are an error. Backends: Qdrant Edge, a Qdrant
    server (or local mode), the in-memory store."""
    if not updates:
        return
    keys = passage_keys(store, list(updates))
    bump_generation(store)
    invalidate = getattr(store, "invalidate_columns", None)  # a kept copy of the payload
    if callable(invalidate):
        invalidate()
    from credrank.index.memory import InMemoryIndex  # no import cycle: memory is a leaf
    from credrank.index.qdrant_edge import EdgeIndex

    if isinstance(store, EdgeIndex):
        import qdrant_edge as qe

        from credrank.index.diskspace import OPEN_RESERVE, require_free

        require_free(store.path, OPEN_RESERVE + 4096 * len(updates),
                     f"writing the scores of {len(updates)} documents")

        for doc_id, values in updates.items():
            store.shard.update(qe.UpdateOperation.set_payload(
                [store.point_id(k) for k in keys[doc_id]], dict(values)))
        store.invalidate_columns()  # the columnar copy of the payload (if kept) is stale
        return
    if isinstance(store, InMemoryIndex):
        for doc_id, values in updates.items():
            if doc_id not in store._row:
                raise StoreError(f"set payload: document {doc_id!r} is not in the index")
            row = store._row[doc_id]
            for name, value in values.items():
                if name not in store.meta:
                    store.meta[name] = np.full(len(store.doc_ids), None, dtype=object)
                store.meta[name][row] = value
        return
    client = getattr(store, "client", None)
    collection = getattr(store, "collection", None)
    if client is not None and collection is not None:  # QdrantServerIndex (qdrant-client)
        from qdrant_client import models  # optional: the qdrant extra, present with the store

        ops = [models.SetPayloadOperation(set_payload=models.SetPayload(
            payload=dict(values), points=[point_id(k) for k in keys[doc_id]]))
            for doc_id, values in updates.items()]
        store._call("set payload", client.batch_update_points, collection, ops, wait=True)
        return
    raise StoreError(f"set payload: the {type(store).__name__} store cannot change payloads "
                     "in place")


def flush(store: Any) -> None:
    """Make what :func:`set_fields` wrote durable in the segments (Qdrant Edge; the write-
    ahead log already holds it) and mark the store written, so closing it flushes again."""
    flusher = getattr(store, "flush", None)
    if callable(flusher):
        flusher()
    if hasattr(store, "_dirty"):
        store._dirty = True


def pending(store: Any, name: str, key: str) -> tuple[list[str], int]:
    """``(doc_ids to score, number already scored with key)``: the documents whose
    ``NAME_key`` payload is not ``key``, in ``doc_id`` order."""
    rows = store.read_payloads(None, fields=("doc_id", key_field(name)))
    todo = sorted(str(r["doc_id"]) for r in rows if r.get(key_field(name)) != key)
    return todo, len(rows) - len(todo)


def score_store(store: Any, job: ScoreJob, *, chunk: int = CHUNK,
                on_start: Callable[[int, int], None] | None = None,
                on_chunk: Callable[[int], None] | None = None) -> ScoreReport:
    """Score every document of ``store`` not yet scored with ``job.key`` (module docstring).

    ``on_start(todo, total)`` is called once the work is known; ``on_chunk(n)`` after each
    chunk of ``n`` documents is written. Returns a :class:`ScoreReport` (its ``doc_ids``: the
    documents scored by this run, in order).
    """
    chunk = check_int("chunk", chunk, 1)
    start = time.perf_counter()
    todo, already = pending(store, job.name, job.key)
    report = ScoreReport(job.name, job.key, total=len(todo) + already, already=already)
    if on_start is not None:
        on_start(len(todo), report.total)
    try:
        for begin in range(0, len(todo), chunk):
            ids = todo[begin:begin + chunk]
            records = _records(store, ids, job.fields, job.vectors)
            values = job.run([records[d] for d in ids])
            if values.shape != (len(ids),):
                raise ValueError(f"{job.name}: the scorer returned {values.size} values for "
                                 f"{len(ids)} passages")
            updates = {}
            for doc_id, value in zip(ids, values.tolist(), strict=True):
                ok = math.isfinite(value)
                report.unscorable += not ok
                updates[doc_id] = {job.name: value if ok else None,
                                   key_field(job.name): job.key}
            set_fields(store, updates)
            report.scored += len(ids)
            report.doc_ids += ids
            if on_chunk is not None:
                on_chunk(len(ids))
    finally:
        if report.scored:
            flush(store)
        report.seconds = time.perf_counter() - start
    return report


def _records(store: Any, doc_ids: Sequence[str], fields: Sequence[str], vectors: bool
             ) -> dict[str, dict[str, Any]]:
    """``doc_id -> {field: value}`` of ``doc_ids`` (read in pages): ``doc_id``, ``text`` (a
    document without text: ``""``) and ``fields``, with ``vectors`` the stored dense vector
    under ``"vector"``."""
    wanted = tuple(dict.fromkeys(("doc_id", "text", *fields)))
    out: dict[str, dict[str, Any]] = {}
    for begin in range(0, len(doc_ids), READ_PAGE):
        page = doc_ids[begin:begin + READ_PAGE]
        for row in store.read_payloads(page, fields=wanted):
            row["text"] = row.get("text") or ""
            out[str(row["doc_id"])] = row
        if vectors:
            found = read_vectors(store, page)
            for doc_id in page:
                if doc_id in out:
                    out[doc_id]["vector"] = found.get(doc_id)
    missing = [d for d in doc_ids if d not in out]
    if missing:
        raise StoreError(f"score: document {missing[0]!r} left the index while it was scored")
    return out


def read_vectors(store: Any, doc_ids: Sequence[str]) -> dict[str, np.ndarray]:
    """``doc_id -> stored dense vector`` of the ``doc_ids`` the store holds (Qdrant Edge, a
    Qdrant server, the in-memory store); a store that cannot return vectors is an error."""
    reader = getattr(store, "read_vectors", None)
    if not callable(reader):
        raise StoreError(f"read vectors: the {type(store).__name__} store cannot return its "
                         "stored vectors")
    return dict(reader(list(doc_ids)))


def count_scored(store: Any, name: str, key: str) -> int:
    """How many documents of ``store`` hold the score ``name`` computed with ``key`` (their
    ``NAME_key`` payload is ``key``): one engine count (Qdrant Edge, a Qdrant server), a
    column scan in memory."""
    from credrank.index.memory import InMemoryIndex
    from credrank.index.qdrant_edge import EdgeIndex

    field = key_field(name)
    if isinstance(store, EdgeIndex):
        import qdrant_edge as qe

        match = qe.Filter(must=[qe.FieldCondition(key=field, match=qe.MatchValue(key))])
        return int(store.shard.count(qe.CountRequest(exact=True, filter=match)))
    if isinstance(store, InMemoryIndex):
        column = store.meta.get(field)
        return 0 if column is None else int(sum(1 for v in column if v == key))
    client = getattr(store, "client", None)
    collection = getattr(store, "collection", None)
    if client is not None and collection is not None:
        from qdrant_client import models

        server_match = models.Filter(must=[models.FieldCondition(
            key=field, match=models.MatchValue(value=key))])
        result = store._call("count points", client.count, collection,
                             count_filter=server_match, exact=True)
        return int(result.count)
    return sum(1 for r in store.read_payloads(None, fields=("doc_id", field))
               if r.get(field) == key)


def index_key_field(store: Any, name: str) -> None:
    """A keyword payload index on ``NAME_key`` (Qdrant Edge, a Qdrant server; nothing in
    memory or in qdrant-client's local mode), so that :func:`count_scored` is a lookup.
    Idempotent."""
    _index_field(store, key_field(name), "keyword")


def index_score_field(store: Any, name: str) -> None:
    """A float payload index on the score field ``name`` (where :func:`index_key_field`
    makes one): the engine's formula reads a pushed-down factor's stored score from it,
    faster than from the stored payload (``bench/scripts/bench_compile.py``). Idempotent."""
    _index_field(store, name, "float")


def _index_field(store: Any, field: str, kind: str) -> None:
    from credrank.index.qdrant_edge import EdgeIndex

    if isinstance(store, EdgeIndex):
        import qdrant_edge as qe

        from credrank.index.qdrant_edge import create_field_index

        create_field_index(store.shard, field, {"keyword": qe.PayloadSchemaType.Keyword,
                                                "float": qe.PayloadSchemaType.Float}[kind])
        return
    client = getattr(store, "client", None)
    collection = getattr(store, "collection", None)
    if client is not None and collection is not None and not getattr(store, "local", False):
        from qdrant_client import models

        server_schema = {"keyword": models.PayloadSchemaType.KEYWORD,
                         "float": models.PayloadSchemaType.FLOAT}[kind]
        store._call("create payload index", client.create_payload_index, collection,
                    field_name=field, field_schema=server_schema, wait=True)


__all__ = ["CHUNK", "ScoreJob", "ScoreReport", "count_scored", "flush", "index_key_field",
           "index_score_field", "key_field", "passage_keys", "pending", "read_vectors",
           "score_store", "set_fields"]
