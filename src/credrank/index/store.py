"""The engine protocol every credrank store implements, and where its shared parts are found.

A *store* holds one point per document: a dense vector (cosine), optionally a BM25 sparse vector,
and a payload made of the document's fields, its provenance and a content hash. Three backends
implement :class:`VectorStore`:

* :class:`credrank.index.qdrant_edge.EdgeIndex` — Qdrant Edge in-process (the default);
* :class:`credrank.index.qdrant_server.QdrantServerIndex` — ``qdrant-client``: a Qdrant server
  or cluster, or the client's local mode (the stand-in for a server in tests);
* :class:`credrank.index.memory.InMemoryIndex` — exact numpy cosine, not persistent.

What all backends share lives in modules of one job each, and is re-exported here (callers
import it from :mod:`credrank.index.store`):

* :mod:`credrank.index.errors` — :class:`StoreError`;
* :mod:`credrank.index.manifest` — the index-directory manifest (``DIR/manifest.json``);
* :mod:`credrank.index.lock` — the directory writer lock (:class:`IndexLock`);
* :mod:`credrank.index.payload` — the payload a document becomes (:func:`document_payload`),
  the one payload → :class:`Candidates` conversion (:func:`to_candidates`), the payload field
  lists, and the deterministic point id and content hash;
* :mod:`credrank.index.formula` — scoring a formula inside the engine, an optional capability
  (:class:`FormulaScoring`, asked with :func:`supports_formula`). The formula is defined once
  there, backend-neutrally (:data:`FORMULA`, :func:`formula_priors`); each backend translates
  it into its engine's expression language.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from credrank.core.candidates import Candidates
from credrank.documents.schema import Document
from credrank.index.errors import StoreError
from credrank.index.formula import (
    FORMULA,
    FRESHNESS_FIELDS,
    FRESHNESS_FORMULA,
    FormulaScoring,
    FreshnessFormula,
    formula_fields,
    formula_priors,
    formula_unavailable,
    supports_formula,
)
from credrank.index.lock import LOCK_FILE, IndexLock, is_lock_error
from credrank.index.manifest import (
    ENGINES,
    FORMAT_VERSION,
    MANIFEST,
    MANIFEST_SCHEMA,
    Manifest,
    check_index_dir,
    check_manifest,
    no_index_error,
    read_manifest,
    write_manifest,
)
from credrank.index.passages import Span
from credrank.index.payload import (
    DENSE,
    EXTRA_COLUMNS,
    HIT_FIELDS,
    KEYWORD_FIELDS,
    RANKING_FIELDS,
    READ_FIELDS,
    READ_PAGE,
    SPARSE,
    TEXT_FIELDS,
    best_passages,
    bm25_text,
    check_where,
    content_hash,
    document_payload,
    passage_text,
    point_id,
    read_fields,
    returned_fields,
    to_candidates,
)

__all__ = [
    "DENSE",
    "ENGINES",
    "EXTRA_COLUMNS",
    "FORMAT_VERSION",
    "FORMULA",
    "FRESHNESS_FIELDS",
    "FRESHNESS_FORMULA",
    "HIT_FIELDS",
    "KEYWORD_FIELDS",
    "LOCK_FILE",
    "MANIFEST",
    "MANIFEST_SCHEMA",
    "MAX_K",
    "RANKING_FIELDS",
    "READ_FIELDS",
    "READ_PAGE",
    "SPARSE",
    "TEXT_FIELDS",
    "UNITS",
    "FormulaScoring",
    "FreshnessFormula",
    "IndexLock",
    "Manifest",
    "StoreError",
    "VectorStore",
    "bm25_text",
    "bump_generation",
    "check_index_dir",
    "check_manifest",
    "check_unit",
    "check_where",
    "content_hash",
    "document_payload",
    "fetch_documents",
    "formula_fields",
    "formula_priors",
    "formula_unavailable",
    "generation",
    "is_lock_error",
    "no_index_error",
    "point_id",
    "read_fields",
    "read_manifest",
    "returned_fields",
    "supports_formula",
    "to_candidates",
    "write_manifest",
]

#: the largest ``top_k`` / ``fetch_k`` a search accepts (the engines take up to 2^64 - 1, but
#: a pool this size is already far beyond what fits in memory as candidates)
MAX_K = 10_000_000


#: the units a search can return: ``document`` (each document once, at its best passage:
#: MaxP, the default) or ``passage`` (every passage that ranks, a document's several passages
#: apart)
UNITS = ("document", "passage")


def check_unit(unit: str) -> str:
    """``unit`` when it is one of :data:`UNITS`, else ``ValueError`` naming it."""
    if unit not in UNITS:
        raise ValueError(f"unit: expected one of {', '.join(UNITS)}, got {unit!r}")
    return unit


def fetch_documents(fetch: Callable[[int], Candidates], k: int, *, split: bool,
                    unit: str = "document") -> Candidates:
    """The ``k`` best documents (or passages, ``unit="passage"``) of an engine answer,
    ``fetch(limit)`` returning ``limit`` points in rank order.

    An index whose documents are each one point (``split`` false) is asked for ``k`` points.
    Otherwise the ``k`` best documents are those of the best points until ``k`` distinct
    documents are seen (MaxP, :func:`~credrank.index.payload.best_passages`): the engine is
    asked for ``2k`` points, and for twice as many again while an answer came back full with
    fewer than ``k`` documents (a document with more passages than the pool has rows costs a
    few rounds; each round is one engine query). Where documents are split, a first passage's
    whole-text payload is cut to its span (:func:`~credrank.index.payload.passage_text`)."""
    check_unit(unit)
    if not split:  # every document one point: nothing to collapse, no passage to cut
        return fetch(k)
    if unit == "passage":
        return passage_text(fetch(k))
    limit = min(2 * k, MAX_K)
    while True:
        batch = fetch(limit)
        out = best_passages(batch, k)
        if len(out) >= k or len(batch) < limit or limit >= MAX_K:
            return out
        limit = min(2 * limit, MAX_K)


def document_count(store: VectorStore) -> int:
    """How many documents ``store`` holds (its points, less the second and later passages of
    split documents: a store's ``documents()`` where it has one)."""
    counted = getattr(store, "documents", None)
    return int(counted()) if callable(counted) else len(store)


def generation(store: object) -> int:
    """How many writes this process made to ``store`` through its object (upserts, payload
    updates): what a long-lived reader of the same object compares to know that what it
    built from the index may be stale (:meth:`credrank.searcher.Searcher.compile`). Writes
    by other processes are not counted (an index is written by one process at a time, under
    its lock)."""
    return int(getattr(store, "_credrank_generation", 0))


def bump_generation(store: object) -> None:
    """Count one write to ``store`` (:func:`generation`); every backend's ``upsert`` and
    :func:`credrank.index.scoring.set_fields` call it before writing."""
    store._credrank_generation = generation(store) + 1  # type: ignore[attr-defined]


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
               vectors: np.ndarray, hashes: Sequence[str],
               passages: Sequence[Sequence[Span]] | None = None) -> None:
        """Write one batch: documents, their provenance dicts, dense vectors, content hashes;
        with ``passages``, each document's passages (character spans of its text), one point
        and one vector row each (:func:`~credrank.index.payload.document_points`)."""
        ...

    def existing_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """``doc_id -> content_hash`` for the given ids already stored."""
        ...

    def read_payloads(self, doc_ids: Sequence[str] | None = None,
                      fields: Sequence[str] = READ_FIELDS, *,
                      where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The stored ``fields`` of the documents ``doc_ids`` (ids not stored are absent from
        the answer), or of every document when ``doc_ids`` is ``None`` — of those whose
        payload matches ``where`` (keyword fields of :data:`KEYWORD_FIELDS` equal to the
        values, or to any of a list; only with ``doc_ids`` ``None``: a filtered scroll the
        engine answers from its payload index); one dict per document, a field the payload
        lacks as ``None``. Order: unspecified."""
        ...

    def search_dense(self, query: str, query_vector: np.ndarray, fetch_k: int, *,
                     with_vectors: bool = False, with_text: bool = False,
                     exact: bool = False, where: Mapping[str, Any] | None = None,
                     unit: str = "document") -> Candidates:
        """The ``fetch_k`` nearest documents by cosine similarity, each at its best passage
        (``unit="passage"``: the nearest passages; :func:`fetch_documents`)."""
        ...

    def search_bm25(self, query: str, fetch_k: int, *, with_vectors: bool = False,
                    with_text: bool = False, where: Mapping[str, Any] | None = None,
                    unit: str = "document") -> Candidates:
        """The ``fetch_k`` best documents by BM25 (``StoreError`` where unsupported), each at
        its best passage (``unit="passage"``: the best passages)."""
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
