"""Index-time scores: a number computed once per document and kept in its payload.

Some signals cost too much to compute per query (a language model over each passage). They are
computed at index time — ``credrank index … --score NAME`` or later, for an existing index,
``credrank score NAME --index DIR`` — and stored in two payload fields of each point, read back
by every search at no extra cost (the fields are among the returned payload,
:data:`credrank.index.payload.RANKING_FIELDS`):

* ``NAME`` — the score (a number, or ``null`` when the document could not be scored, e.g. a
  passage too short);
* ``NAME_key`` — what computed it (:attr:`ScoreJob.key`: method, model, settings).

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
from credrank.index.payload import READ_PAGE, point_id

#: documents per scoring chunk (one read, one score call, one write) by default
CHUNK = 64


def key_field(name: str) -> str:
    """The payload field that records what computed the score ``name``."""
    return f"{name}_key"


@dataclass(frozen=True)
class ScoreJob:
    """One index-time score: its payload field ``name``, the ``key`` of the method that
    computes it, and ``score(texts) -> values`` (one float per text, ``nan`` where the text
    cannot be scored)."""

    name: str
    key: str
    score: Callable[[Sequence[str]], Sequence[float] | np.ndarray]


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
                "passages_per_s": round(self.rate, 2)}


def set_fields(store: Any, updates: Mapping[str, Mapping[str, Any]]) -> None:
    """Merge ``updates[doc_id]`` (field → value) into the stored payload of each document,
    leaving its vectors and other fields as they are. Documents not in the store are an
    error. Backends: Qdrant Edge, a Qdrant server (or local mode), the in-memory store."""
    if not updates:
        return
    from credrank.index.memory import InMemoryIndex  # no import cycle: memory is a leaf
    from credrank.index.qdrant_edge import EdgeIndex

    if isinstance(store, EdgeIndex):
        import qdrant_edge as qe

        for doc_id, values in updates.items():
            store.shard.update(qe.UpdateOperation.set_payload([point_id(doc_id)],
                                                              dict(values)))
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
            payload=dict(values), points=[point_id(doc_id)]))
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
            texts = _texts(store, ids)
            values = np.asarray(job.score([texts[d] for d in ids]), dtype=np.float64)
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


def _texts(store: Any, doc_ids: Sequence[str]) -> dict[str, str]:
    """``doc_id -> text`` of ``doc_ids`` (read in pages); a document without text is ``""``."""
    out: dict[str, str] = {}
    for begin in range(0, len(doc_ids), READ_PAGE):
        page = doc_ids[begin:begin + READ_PAGE]
        for row in store.read_payloads(page, fields=("doc_id", "text")):
            out[str(row["doc_id"])] = row.get("text") or ""
    missing = [d for d in doc_ids if d not in out]
    if missing:
        raise StoreError(f"score: document {missing[0]!r} left the index while it was scored")
    return out


__all__ = ["CHUNK", "ScoreJob", "ScoreReport", "flush", "key_field", "pending", "score_store",
           "set_fields"]
