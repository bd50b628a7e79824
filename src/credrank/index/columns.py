"""A columnar copy of the ranking payload, kept by a long-lived process (issue 26, item 4).

Reading a point's payload out of the engine costs about the same whatever fields are asked
for (≈ 7–8 µs per point on Qdrant Edge: the stored payload is decoded, then converted to a
Python dict), so a search that fetches ``fetch_k`` candidates without the formula pays it
``fetch_k`` times: at 1,000 candidates the payload is nine tenths of the retrieval stage, while
the vector search itself costs ≈ 1 ms. :class:`PayloadColumns` holds the ranking fields of
every point (:data:`credrank.index.payload.RANKING_FIELDS`, and the extra columns a
:class:`~credrank.core.candidates.Candidates` batch carries, never the text) as one object
table (a column per field), keyed by the point id the engine returns with no payload at all;
a batch's meta columns are then one fancy-indexing of that table. The dense vectors are kept
too, as one float32 matrix, up to :data:`MAX_VECTOR_BYTES` (converting 1,000 engine vectors
to numpy costs ≈ 10–15 ms; a row of the matrix costs nothing).

**Cost.** Building it reads every payload once: ``O(N)`` (≈ 1 s per 100,000 documents), and
memory ``O(N · fields)`` (pointers plus the distinct strings; low-cardinality fields such as
``source_type`` are interned). It pays off in a process that answers many queries (``credrank
serve``, a :class:`~credrank.searcher.Searcher` kept open), not in one ``credrank search``, so
a store builds it only when asked (``EdgeIndex.keep_columns``) and only up to
:data:`MAX_POINTS` documents.

**Consistency.** Any write through the store (an upsert, a payload change of an index-time
score) drops the copy; the next search rebuilds it. A point the copy does not know (written
by another handle) makes that search read the payload from the engine instead — the answer is
the same either way.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

#: the largest index a store keeps the columnar copy for (memory: ≈ 0.4 kB per document)
MAX_POINTS = 500_000
#: the largest copy of the dense vectors kept beside it (bytes; above: vectors come from the
#: engine)
MAX_VECTOR_BYTES = 256 * 1024 * 1024
#: fields whose values repeat a lot (kept once in memory)
_INTERNED = frozenset({"source_type", "url_source_type", "declared_source_type",
                       "provenance_rule", "host", "registered_domain", "source_id",
                       "machine_text_key"})


class PayloadColumns:
    """The payload ``fields`` of every point, columnar, looked up by point id.

    Args:
        fields: the payload fields kept (never ``text``).
        dim: the dense vectors' dimension when they are kept too (each row then carries its
            vector as a third element), else ``None``.
        rows: ``(point id, payload)`` pairs, one per point (the ids as the engine returns
            them, e.g. :class:`uuid.UUID`: looked up as they come, never converted).
    """

    def __init__(self, fields: Sequence[str], rows: Iterable[tuple[Any, ...]],
                 dim: int | None = None):
        self.fields = tuple(fields)
        ids: list[Any] = []
        values: list[list[Any]] = [[] for _ in self.fields]
        vectors: list[Any] = []
        for pid, payload, *vector in rows:
            ids.append(pid)
            if dim is not None:
                vectors.append(vector[0])
            for name, column in zip(self.fields, values, strict=True):
                value = payload.get(name)
                if isinstance(value, str) and name in _INTERNED:
                    value = sys.intern(value)
                column.append(value)
        self._row = {pid: i for i, pid in enumerate(ids)}
        # one row-major table: a batch's rows are then one fancy-indexing, not one per field
        self._table = np.empty((len(ids), len(self.fields)), dtype=object)
        for j, column in enumerate(values):
            self._table[:, j] = column  # element-wise: a list value (``cites``) stays one object
        #: the dense vectors, one float32 row per point (``None``: not kept)
        self.vectors = (None if dim is None else
                        np.array(vectors, dtype=np.float32).reshape(len(vectors), dim))

    def __len__(self) -> int:
        return len(self._row)

    def rows(self, point_ids: Sequence[Any]) -> np.ndarray | None:
        """The rows of ``point_ids`` in order, or ``None`` when one is unknown (the caller
        then reads the payload from the engine)."""
        get = self._row.get
        out = np.empty(len(point_ids), dtype=np.int64)
        for i, pid in enumerate(point_ids):
            row = get(pid)
            if row is None:
                return None
            out[i] = row
        return out

    def take(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """``field -> object array`` of ``rows`` (fresh arrays: callers may keep them)."""
        block = self._table[rows]
        return {name: block[:, j] for j, name in enumerate(self.fields)}


__all__ = ["MAX_POINTS", "MAX_VECTOR_BYTES", "PayloadColumns"]
