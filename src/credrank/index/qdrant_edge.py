"""The persistent embedded index: Qdrant Edge (``qdrant-edge-py``), in-process.

Layout of an index directory::

    DIR/manifest.json   format version, embedder name and dimension, BM25 on/off
    DIR/shard/          the Qdrant Edge shard (write-ahead log enabled)

Each document is one point whose id is ``uuid5(doc_id)``, so re-adding a document overwrites
it instead of duplicating it. Vectors: ``dense`` (cosine, the embedder's) and ``bm25`` (sparse,
IDF modifier, Qdrant's own BM25 tokenizer) for the lexical option. Payload: the document's
fields, its provenance (host, registered domain, source type and the rule that decided it) and
a content hash; keyword indexes on ``doc_id``, ``source_type``, ``host``, ``registered_domain``
and ``source_id``, datetime indexes on the five date fields.

Interrupted indexing: documents are upserted in batches, each followed by ``flush()``. Every
upsert goes through the shard's write-ahead log, so a run killed at any point leaves a shard
that loads (replaying the log) and answers; re-running skips the documents already present with
the same content hash and adds the rest.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from credrank.core.candidates import META_COLUMNS, Candidates
from credrank.documents.schema import DATE_FIELDS, SOURCE_TYPES, Document

FORMAT_VERSION = 1
DENSE = "dense"
SPARSE = "bm25"
_NAMESPACE = uuid.UUID("6f1c2b7e-3a52-4c1e-9a57-8f0f4f2d9c11")

KEYWORD_FIELDS = ("doc_id", "source_type", "host", "registered_domain", "source_id")
#: payload fields a search returns by default: what ranking, explanations and selection use.
#: The document text (and ``cites``, ``extra``) is left in the engine unless asked for — the
#: payload's conversion to Python is the largest cost of a search after the vector scan.
RANKING_FIELDS = ("doc_id", "title", "url", "source_id", "source_type", "host",
                  "registered_domain", "url_source_type", "declared_source_type",
                  "provenance_rule", "domain_score", *DATE_FIELDS)
#: provenance fields returned as meta columns besides ``META_COLUMNS``
_EXTRA_COLUMNS = ("registered_domain", "url_source_type", "declared_source_type",
                  "provenance_rule", "domain_score", "cites")


class IndexError_(RuntimeError):
    """The index directory is missing, incompatible or damaged."""


def payload_selector(with_text: bool) -> Any:
    """The payload a search returns: :data:`RANKING_FIELDS`, plus text and cites on request."""
    fields = [*RANKING_FIELDS, "text", "cites"] if with_text else list(RANKING_FIELDS)
    return qe.PayloadSelector.Include(fields)


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


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


@dataclass(frozen=True)
class Manifest:
    embedder: str
    dim: int
    bm25: bool = True
    format: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(self.__dict__, indent=2)


class EdgeIndex:
    """A credrank index on a Qdrant Edge shard (see module docstring)."""

    def __init__(self, path: Path, shard: qe.EdgeShard, manifest: Manifest):
        self.path = path
        self.shard = shard
        self.manifest = manifest
        self._bm25 = qe.Bm25() if manifest.bm25 else None

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, embedder: str | None = None, dim: int | None = None,
             create: bool = False, bm25: bool = True) -> EdgeIndex:
        """Open the index at ``path``; with ``create=True`` make it when absent.

        Raises :class:`IndexError_` when the directory holds no index (and ``create`` is off) or
        an index built with another embedder or dimension.
        """
        path = Path(path)
        manifest_path = path / "manifest.json"
        shard_path = path / "shard"
        if manifest_path.is_file():
            try:
                manifest = Manifest(**json.loads(manifest_path.read_text()))
            except (ValueError, TypeError) as exc:
                raise IndexError_(f"{manifest_path}: unreadable index manifest: {exc}") from exc
            if embedder and embedder != manifest.embedder:
                raise IndexError_(f"{path}: index was built with embedder "
                                  f"{manifest.embedder!r}, not {embedder!r}")
            if dim and dim != manifest.dim:
                raise IndexError_(f"{path}: index dimension is {manifest.dim}, not {dim}")
            if not shard_path.is_dir():
                raise IndexError_(f"{path}: manifest present but shard folder missing")
            shard = qe.EdgeShard.load(str(shard_path))
            return cls(path, shard, manifest)
        if not create:
            raise IndexError_(f"{path}: no credrank index here (expected {manifest_path}); "
                              "build one with `credrank index CORPUS --index DIR`")
        if not embedder or not dim:
            raise IndexError_("creating an index needs the embedder name and dimension")
        manifest = Manifest(embedder=embedder, dim=int(dim), bm25=bm25)
        path.mkdir(parents=True, exist_ok=True)
        sparse = {SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if bm25 else None
        config = qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=int(dim), distance=qe.Distance.Cosine)},
            sparse_vectors=sparse, payload_memory=qe.Memory.Cached)
        if shard_path.exists() and any(shard_path.iterdir()):
            shard = qe.EdgeShard.load(str(shard_path))  # a creation interrupted before manifest
        else:
            shard = qe.EdgeShard.create(str(shard_path), config)
        for name in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        for name in DATE_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Datetime))
        shard.flush()
        tmp = manifest_path.with_suffix(".tmp")
        tmp.write_text(manifest.to_json())
        os.replace(tmp, manifest_path)
        return cls(path, shard, manifest)

    def optimize(self) -> bool:
        """Let the engine merge segments and build its HNSW graph (after bulk indexing)."""
        return bool(self.shard.optimize())

    def close(self) -> None:
        self.shard.flush()
        self.shard.close()

    def __enter__(self) -> EdgeIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return int(self.shard.info().points_count)

    # -- writing --------------------------------------------------------------------------
    def existing_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """``doc_id -> content_hash`` for the given ids already in the index."""
        if not doc_ids:
            return {}
        records = self.shard.retrieve([point_id(d) for d in doc_ids],
                                      qe.PayloadSelector.Include(["doc_id", "content_hash"]),
                                      False)
        return {r.payload["doc_id"]: r.payload.get("content_hash", "") for r in records}

    def upsert(self, documents: Sequence[Document], provenance: Sequence[Mapping[str, Any]],
               vectors: np.ndarray, hashes: Sequence[str]) -> None:
        """Write one batch (documents, their provenance dicts, dense vectors) and flush."""
        points = []
        for doc, prov, vec, digest in zip(documents, provenance, vectors, hashes, strict=True):
            payload = {
                "doc_id": doc.id, "text": doc.text, "title": doc.title, "url": doc.url,
                "source_id": doc.source_id, **prov, "cites": list(doc.cites),
                "content_hash": digest, "extra": doc.extra,
            }
            payload.update({name: _iso(getattr(doc, name)) for name in DATE_FIELDS})
            named: dict[str, Any] = {DENSE: np.asarray(vec, dtype=np.float32).tolist()}
            if self._bm25 is not None:
                named[SPARSE] = self._bm25.embed_document(
                    f"{doc.title or ''}\n{doc.text}")
            points.append(qe.Point(point_id(doc.id), named, payload))
        if points:
            self.shard.update(qe.UpdateOperation.upsert_points(points))
            self.shard.flush()

    # -- reading --------------------------------------------------------------------------
    def _to_candidates(self, query: str, points: Iterable[Any], with_vectors: bool,
                       query_vector: np.ndarray | None = None) -> Candidates:
        points = list(points)
        if not points:
            return Candidates.empty(query, self.manifest.dim if with_vectors else None)
        payloads = [p.payload or {} for p in points]
        columns = (*META_COLUMNS, *_EXTRA_COLUMNS)
        # one pass over the payloads, then one object array per column
        table = list(zip(*[[pl.get(name) for name in columns] for pl in payloads], strict=True))
        meta = {name: np.array(col, dtype=object) for name, col in zip(columns, table,
                                                                       strict=True)}
        vectors = None
        if with_vectors:
            vectors = np.array([p.vector[DENSE] for p in points], dtype=np.float32)
        return Candidates(
            query=query,
            doc_ids=np.array([pl["doc_id"] for pl in payloads], dtype=object),
            retrieval_score=np.array([p.score for p in points], dtype=np.float64),
            meta=meta, vectors=vectors,
            query_vector=query_vector,
        )

    def search_dense(self, query: str, query_vector: np.ndarray, fetch_k: int, *,
                     with_vectors: bool = False, exact: bool = False,
                     with_text: bool = False) -> Candidates:
        """The ``fetch_k`` nearest documents by cosine similarity."""
        request = qe.QueryRequest(
            limit=fetch_k, query=qe.Query.Nearest(np.asarray(query_vector).tolist(), using=DENSE),
            with_payload=payload_selector(with_text),
            with_vector=[DENSE] if with_vectors else False,
            params=qe.SearchParams(exact=exact))
        return self._to_candidates(query, self.shard.query(request), with_vectors, query_vector)

    def search_bm25(self, query: str, fetch_k: int, *, with_vectors: bool = False,
                    with_text: bool = False) -> Candidates:
        """The ``fetch_k`` best documents by BM25 (Qdrant's sparse vectors with IDF)."""
        if self._bm25 is None:
            raise IndexError_(f"{self.path}: this index was built without BM25 vectors")
        request = qe.QueryRequest(
            limit=fetch_k, query=qe.Query.Nearest(self._bm25.embed_query(query), using=SPARSE),
            with_payload=payload_selector(with_text),
            with_vector=[DENSE] if with_vectors else False)
        return self._to_candidates(query, self.shard.query(request), with_vectors)

    def search_formula(self, query: str, query_vector: np.ndarray, fetch_k: int, top_k: int,
                       priors: Mapping[str, float], *, with_vectors: bool = False,
                       exact: bool = False, with_text: bool = False) -> Candidates:
        """Credibility-aware search pushed down into the engine.

        A prefetch of ``fetch_k`` nearest neighbours is rescored by the formula
        ``max($score, 0) × Σ_t λ_t·[source_type = t]`` — the same ``multiply`` combination as
        :func:`credrank.combine.combine_multiply` with the prior of
        :class:`credrank.signals.prior.SourcePrior` — and the ``top_k`` best are returned.
        """
        prior_expr = qe.Expression.Sum([
            qe.Expression.Mult([
                qe.Expression.Constant(float(priors[t])),
                qe.Expression.Condition(qe.FieldCondition(
                    key="source_type", match=qe.MatchValue(t))),
            ]) for t in SOURCE_TYPES])
        formula = qe.Formula(qe.Expression.Mult([
            qe.Expression.Max([qe.Expression.Variable("$score"), qe.Expression.Constant(0.0)]),
            prior_expr]))
        prefetch = qe.Prefetch(limit=fetch_k, params=qe.SearchParams(exact=exact),
                               query=qe.Query.Nearest(np.asarray(query_vector).tolist(),
                                                      using=DENSE))
        request = qe.QueryRequest(limit=top_k, prefetches=[prefetch], query=formula,
                                  with_payload=payload_selector(with_text),
                                  with_vector=[DENSE] if with_vectors else False)
        return self._to_candidates(query, self.shard.query(request), with_vectors, query_vector)

    def search_source(self, query_vector: np.ndarray, source_id: str, k: int) -> Candidates:
        """The ``k`` nearest documents of one source (``source_id`` payload filter)."""
        flt = qe.Filter(must=[qe.FieldCondition(key="source_id",
                                                 match=qe.MatchValue(source_id))])
        request = qe.QueryRequest(
            limit=k, query=qe.Query.Nearest(np.asarray(query_vector).tolist(), using=DENSE),
            filter=flt, with_payload=payload_selector(True))
        return self._to_candidates("", self.shard.query(request), False, query_vector)
