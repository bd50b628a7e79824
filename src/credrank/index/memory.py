"""An exact in-memory retriever over precomputed vectors (experiments and adapters).

Same contract as :class:`credrank.index.retrieve.DenseRetriever` — fill a batch with the
``fetch_k`` nearest documents by cosine — over a numpy matrix instead of the engine. The
benchmarks use it to evaluate many systems over one set of embeddings; the results equal the
engine's exact search on the same vectors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.pipeline import Stage


class InMemoryIndex:
    """Documents as rows: ids, L2-normalised vectors and metadata columns."""

    def __init__(self, doc_ids: Sequence[str], vectors: np.ndarray,
                 meta: Mapping[str, Sequence[Any]] | None = None):
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(doc_ids):
            raise ValueError(f"vectors: expected shape ({len(doc_ids)}, dim), got {vectors.shape}")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self.vectors = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
        self.doc_ids = np.asarray(list(doc_ids), dtype=object)
        self.meta = {k: np.asarray(list(v), dtype=object) for k, v in (meta or {}).items()}
        for name, column in self.meta.items():
            if len(column) != len(self.doc_ids):
                raise ValueError(f"meta column {name!r}: expected {len(self.doc_ids)} rows, "
                                 f"got {len(column)}")
        self._row = {d: i for i, d in enumerate(self.doc_ids)}

    def __len__(self) -> int:
        return len(self.doc_ids)

    def search(self, query: str, query_vector: np.ndarray, fetch_k: int, *,
               restrict: Sequence[str] | None = None) -> Candidates:
        """The ``fetch_k`` rows of highest cosine (ties by row order); ``restrict`` limits the
        search to the given document ids (a per-question pool)."""
        rows = (np.arange(len(self)) if restrict is None
                else np.array([self._row[d] for d in restrict], dtype=np.int64))
        if len(rows) == 0:
            return Candidates.empty(query, self.vectors.shape[1])
        qv = np.asarray(query_vector, dtype=np.float32)
        norm = float(np.linalg.norm(qv))
        sims = self.vectors[rows] @ (qv / norm if norm > 0 else qv)
        k = min(fetch_k, len(rows))
        top = np.argpartition(-sims, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        top = top[np.lexsort((rows[top], -sims[top]))]
        chosen = rows[top]
        return Candidates(query=query, doc_ids=self.doc_ids[chosen],
                          retrieval_score=sims[top].astype(np.float64),
                          meta={k_: v[chosen] for k_, v in self.meta.items()},
                          vectors=self.vectors[chosen], query_vector=qv)


class InMemoryRetriever(Stage):
    """Retriever stage over an :class:`InMemoryIndex` with a fixed query-vector table."""

    name = "memory"

    def __init__(self, index: InMemoryIndex, query_vectors: Mapping[str, np.ndarray],
                 fetch_k: int = 30):
        if not isinstance(fetch_k, int) or fetch_k < 1:
            raise ValueError(f"fetch_k: expected an integer >= 1, got {fetch_k!r}")
        self.index, self.query_vectors, self.fetch_k = index, query_vectors, fetch_k

    def transform(self, batch: Candidates) -> Candidates:
        try:
            qv = self.query_vectors[batch.query]
        except KeyError:
            raise ValueError(f"no query vector for {batch.query!r}") from None
        return self.index.search(batch.query, qv, self.fetch_k)

    def config(self) -> dict[str, Any]:
        return {"fetch_k": self.fetch_k}
