"""An exact in-memory store over numpy vectors (experiments, adapters, tests).

:class:`InMemoryIndex` has two faces:

* the bench face: ``InMemoryIndex(doc_ids, vectors, meta)`` over precomputed vectors and
  :meth:`InMemoryIndex.search` (every meta column returned, optional ``restrict`` to a
  per-question pool) — the benchmarks evaluate many systems over one set of embeddings;
* the :class:`~credrank.index.store.VectorStore` face: :meth:`InMemoryIndex.create`, then
  ``upsert`` / ``existing_hashes`` / ``search_dense`` / ``search_source`` like the engine
  stores, with the same payload and the same :func:`~credrank.index.payload.to_candidates`
  batches.

Search is exact cosine (ties by row order); the results equal an engine's exact search on the
same vectors. BM25 and formula scoring are not offered: :meth:`InMemoryIndex.search_bm25` raises
a :class:`~credrank.index.errors.StoreError`, and pushdown falls back to the Python path.
Nothing is persisted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.maths import normalise_rows
from credrank.core.validation import check_int
from credrank.documents.schema import Document
from credrank.index.errors import StoreError
from credrank.index.manifest import Manifest
from credrank.index.passages import Span
from credrank.index.payload import (
    READ_FIELDS,
    check_read_where,
    check_where,
    document_payload,
    returned_fields,
    to_candidates,
)
from credrank.index.store import bump_generation


class InMemoryIndex:
    """Documents as rows: ids, L2-normalised vectors and metadata columns."""

    def __init__(self, doc_ids: Sequence[str], vectors: np.ndarray,
                 meta: Mapping[str, Sequence[Any]] | None = None, *,
                 embedder: str = "precomputed"):
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(doc_ids):
            raise ValueError(f"vectors: expected shape ({len(doc_ids)}, dim), got {vectors.shape}")
        if vectors.shape[1] < 1:
            raise ValueError(f"vectors: expected at least one dimension, got {vectors.shape}")
        if vectors.size and not np.all(np.isfinite(vectors)):
            raise ValueError("vectors: expected finite numbers, got NaN or inf")
        self.vectors = normalise_rows(vectors) if len(vectors) else vectors
        self.doc_ids = np.asarray(list(doc_ids), dtype=object)
        self.meta = {k: np.asarray(list(v), dtype=object) for k, v in (meta or {}).items()}
        for name, column in self.meta.items():
            if len(column) != len(self.doc_ids):
                raise ValueError(f"meta column {name!r}: expected {len(self.doc_ids)} rows, "
                                 f"got {len(column)}")
        self._row = {d: i for i, d in enumerate(self.doc_ids)}  # a repeated id: last row
        self._manifest = Manifest(embedder=embedder, dim=int(vectors.shape[1]), bm25=False,
                                  engine="memory", chunk_tokens=0)

    @classmethod
    def create(cls, embedder: str, dim: int) -> InMemoryIndex:
        """An empty store for vectors of ``dim`` dimensions from ``embedder``."""
        dim = check_int("dim", dim, 1)
        return cls([], np.zeros((0, dim), dtype=np.float32), embedder=embedder)

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    def __len__(self) -> int:
        return len(self.doc_ids)

    # -- lifecycle (nothing to do: not persistent) --------------------------------------------
    def optimize(self, on_progress: Callable[[int, int], None] | None = None) -> bool:
        """Nothing to reorganise; returns ``False`` (``on_progress`` is never called)."""
        return False

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> InMemoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing ------------------------------------------------------------------------------
    def existing_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """``doc_id -> content_hash`` for the given ids already stored."""
        hashes = self.meta.get("content_hash")
        return {d: (hashes[self._row[d]] if hashes is not None else None) or ""
                for d in doc_ids if d in self._row}

    def upsert(self, documents: Sequence[Document], provenance: Sequence[Mapping[str, Any]],
               vectors: np.ndarray, hashes: Sequence[str],
               passages: Sequence[Sequence[Span]] | None = None) -> None:
        """Add or overwrite one batch (rows keyed by document id; the stored payload becomes
        meta columns). One row per document: ``passages`` of more than one span are refused
        (its manifest asks for no splitting, ``chunk_tokens`` 0)."""
        if passages is not None:
            for doc, spans in zip(documents, passages, strict=True):
                if len(spans) != 1:
                    raise StoreError(f"{doc.id}: the in-memory store holds one row per "
                                     f"document, got {len(spans)} passages; use an engine "
                                     "store (edge, qdrant) for split documents")
        bump_generation(self)
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (len(documents), self.manifest.dim):
            raise ValueError(f"vectors: expected shape ({len(documents)}, "
                             f"{self.manifest.dim}), got {vectors.shape}")
        if vectors.size and not np.all(np.isfinite(vectors)):
            raise ValueError("vectors: expected finite numbers, got NaN or inf")
        payloads = [document_payload(d, p, h)
                    for d, p, h in zip(documents, provenance, hashes, strict=True)]
        if not payloads:
            return
        vectors = normalise_rows(vectors)
        new_ids = [d.id for d in documents if d.id not in self._row]
        new_ids = list(dict.fromkeys(new_ids))
        n_old, n_new = len(self.doc_ids), len(new_ids)
        if n_new:
            self.doc_ids = np.concatenate([self.doc_ids, np.array(new_ids, dtype=object)])
            self.vectors = np.vstack([self.vectors,
                                      np.zeros((n_new, self.manifest.dim), dtype=np.float32)])
            for name in self.meta:
                self.meta[name] = np.concatenate([self.meta[name],
                                                  np.full(n_new, None, dtype=object)])
            self._row.update({d: n_old + i for i, d in enumerate(new_ids)})
        for payload, vec in zip(payloads, vectors, strict=True):
            row = self._row[payload["doc_id"]]
            self.vectors[row] = vec
            for name, value in payload.items():
                if name == "doc_id":
                    continue
                if name not in self.meta:
                    self.meta[name] = np.full(len(self.doc_ids), None, dtype=object)
                self.meta[name][row] = value

    # -- reading ------------------------------------------------------------------------------
    def read_payloads(self, doc_ids: Sequence[str] | None = None,
                      fields: Sequence[str] = READ_FIELDS, *,
                      where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The ``fields`` of ``doc_ids`` (all rows when ``None``, those matching ``where``)
        from the id and the meta columns; see :class:`~credrank.index.store.VectorStore`."""
        check_read_where(doc_ids, where)
        rows: Any = (range(len(self.doc_ids)) if doc_ids is None else
                     [self._row[d] for d in dict.fromkeys(doc_ids) if d in self._row])
        if where:
            mask = self._matching(where)
            rows = [r for r in rows if mask[r]]
        out = []
        for row in rows:
            record = {}
            for name in fields:
                column = self.meta.get(name)
                record[name] = (self.doc_ids[row] if name == "doc_id" else
                                None if column is None else column[row])
            out.append(record)
        return out

    def _matching(self, where: Mapping[str, Any] | None) -> np.ndarray:
        """The rows whose fields match ``where`` (:func:`check_where`: a value, or any of a
        list), as the engines' payload filters match them."""
        mask = np.ones(len(self), dtype=bool)
        for name, value in check_where(where).items():
            column = self.doc_ids if name == "doc_id" else self.meta.get(name)
            wanted = set(value) if isinstance(value, list) else {value}
            mask &= (np.zeros(len(self), dtype=bool) if column is None else
                     np.array([v in wanted for v in column], dtype=bool))
        return mask

    def read_vectors(self, doc_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """``doc_id -> stored (L2-normalised) vector`` of ``doc_ids`` found in the store."""
        return {d: self.vectors[self._row[d]].copy() for d in dict.fromkeys(doc_ids)
                if d in self._row}

    def _top(self, query_vector: np.ndarray, fetch_k: int, rows: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(chosen rows, their cosines, normalised query)``: highest cosine, ties by row."""
        qv = np.asarray(query_vector, dtype=np.float32).reshape(-1)
        if qv.shape != (self.manifest.dim,):
            raise ValueError(f"query_vector: expected {self.manifest.dim} dimensions, "
                             f"got shape {np.asarray(query_vector).shape}")
        if not np.all(np.isfinite(qv)):
            raise ValueError("query_vector: expected finite numbers, got NaN or inf")
        if len(rows) == 0:
            return rows, np.zeros(0, dtype=np.float32), qv
        norm = float(np.linalg.norm(qv))
        sims = self.vectors[rows] @ (qv / norm if norm > 0 else qv)
        k = min(fetch_k, len(rows))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        top = top[np.lexsort((rows[top], -sims[top]))]
        return rows[top], sims[top], qv

    def search(self, query: str, query_vector: np.ndarray, fetch_k: int, *,
               restrict: Sequence[str] | None = None) -> Candidates:
        """The ``fetch_k`` rows of highest cosine (ties by row order) with every meta column;
        ``restrict`` limits the search to the given document ids (a per-question pool)."""
        rows = (np.arange(len(self)) if restrict is None
                else np.array([self._row[d] for d in restrict], dtype=np.int64))
        if len(rows) == 0:
            return Candidates.empty(query, self.manifest.dim)
        chosen, sims, qv = self._top(query_vector, check_int("fetch_k", fetch_k, 1), rows)
        return Candidates(query=query, doc_ids=self.doc_ids[chosen],
                          retrieval_score=sims.astype(np.float64),
                          meta={k_: v[chosen] for k_, v in self.meta.items()},
                          vectors=self.vectors[chosen], query_vector=qv)

    def search_dense(self, query: str, query_vector: np.ndarray, fetch_k: int, *,
                     with_vectors: bool = False, with_text: bool = False, exact: bool = False,
                     where: Mapping[str, Any] | None = None, unit: str = "document"
                     ) -> Candidates:
        """The ``fetch_k`` nearest documents by cosine (always exact; ``exact`` is accepted
        for the protocol), as the engine stores return them (one row per document: ``unit``
        changes nothing)."""
        fetch_k = check_int("fetch_k", fetch_k, 1)
        mask = self._matching(where)
        chosen, sims, _ = self._top(query_vector, fetch_k, np.flatnonzero(mask))
        fields = returned_fields(with_text)
        columns = {name: self.meta[name] for name in fields if name in self.meta}
        payloads = [{"doc_id": self.doc_ids[r],
                     **{name: col[r] for name, col in columns.items()}} for r in chosen]
        return to_candidates(query, payloads, sims.astype(np.float64).tolist(),
                             vectors=self.vectors[chosen] if with_vectors else None,
                             query_vector=query_vector, dim=self.manifest.dim)

    def search_bm25(self, query: str, fetch_k: int, *, with_vectors: bool = False,
                    with_text: bool = False, where: Mapping[str, Any] | None = None,
                    unit: str = "document") -> Candidates:
        """Not offered: the in-memory store holds no lexical index."""
        raise StoreError("BM25 is not supported by the in-memory store; use dense retrieval "
                         "or an engine store (edge, qdrant)")

    def search_source(self, query_vector: np.ndarray, source_id: str, k: int) -> Candidates:
        """The ``k`` nearest documents of one source, with their text."""
        return self.search_dense("", query_vector, k, with_text=True,
                                 where={"source_id": source_id})
