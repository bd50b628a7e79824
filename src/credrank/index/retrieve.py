"""Retriever stages: fill an empty batch with ``fetch_k`` candidates from a store.

``unit``: ``document`` (default) returns ``fetch_k`` documents, each at its best passage
(MaxP, :func:`~credrank.index.store.fetch_documents`); ``passage`` the ``fetch_k`` best
passages, several of one document apart (an index without split documents: the same).

Any :class:`~credrank.index.store.VectorStore` serves (Qdrant Edge, a Qdrant server, memory).

``fetch_k`` is the expanded candidate pool of seed 004 (retrieve 3k, reweight, keep k): the
default in :func:`default_fetch_k` is three times ``top_k``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.pipeline import Stage
from credrank.core.validation import check_int
from credrank.index.store import MAX_K, VectorStore, check_unit


def default_fetch_k(top_k: int) -> int:
    """Seed 004's expanded pool: ``3 × top_k``, at most :data:`~credrank.index.store.MAX_K`
    (a ``top_k`` of 10,000,000 fetches 10,000,000, never a pool the user cannot give)."""
    return min(3 * top_k, MAX_K)


class DenseRetriever(Stage):
    """Cosine nearest neighbours of the query embedding."""

    name = "dense"

    def __init__(self, index: VectorStore, embedder: Embedder, fetch_k: int = 30, *,
                 with_vectors: bool = False, with_text: bool = False, unit: str = "document"):
        self.index, self.embedder = index, embedder
        self.fetch_k = check_int("fetch_k", fetch_k, 1)
        self.with_vectors, self.with_text = with_vectors, with_text
        self.unit = check_unit(unit)

    def transform(self, batch: Candidates) -> Candidates:
        """The ``fetch_k`` nearest; the query is embedded unless ``batch.query_vector`` holds
        its vector already (a caller that embeds outside a lock)."""
        qv = (batch.query_vector if batch.query_vector is not None
              else self.embedder.embed([batch.query])[0])
        return self.index.search_dense(batch.query, qv, self.fetch_k,
                                       with_vectors=self.with_vectors, with_text=self.with_text,
                                       unit=self.unit)

    def config(self) -> dict[str, Any]:
        return {"fetch_k": self.fetch_k, "embedder": self.embedder.name, "unit": self.unit}


class BM25Retriever(Stage):
    """Lexical retrieval with the engine's BM25 sparse vectors."""

    name = "bm25"

    def __init__(self, index: VectorStore, fetch_k: int = 30, *, with_vectors: bool = False,
                 with_text: bool = False, unit: str = "document"):
        self.index = index
        self.fetch_k = check_int("fetch_k", fetch_k, 1)
        self.with_vectors, self.with_text = with_vectors, with_text
        self.unit = check_unit(unit)

    def transform(self, batch: Candidates) -> Candidates:
        return self.index.search_bm25(batch.query, self.fetch_k, with_vectors=self.with_vectors,
                                      with_text=self.with_text, unit=self.unit)

    def config(self) -> dict[str, Any]:
        return {"fetch_k": self.fetch_k, "unit": self.unit}


def source_passages(index: VectorStore, embedder: Embedder
                    ) -> Callable[[str, str, int], list[str]]:
    """``retrieve(query, source_id, k) -> [passage text]`` over one source of ``index``: the
    per-source retrieval κ-RRSS needs (chapter 35.3), a ``source_id`` filter on the engine."""
    def retrieve(query: str, source_id: str, k: int) -> list[str]:
        batch = index.search_source(embedder.embed([query])[0], source_id, k)
        return [str(t) for t in batch.column("text") if t]
    return retrieve
