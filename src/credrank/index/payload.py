"""What a document becomes in a store, and what comes back: the point id and the names of its
vectors, the payload (:func:`document_payload`) and its content hash, the payload field lists a
search returns, the ``where`` filter, and the one payload → :class:`Candidates` conversion
(:func:`to_candidates`) every backend builds its answers with."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from credrank.core.candidates import META_COLUMNS, Candidates
from credrank.documents.schema import DATE_FIELDS, Document
from credrank.index.errors import StoreError
from credrank.index.passages import Span, passage_fields, passage_key, split_span

__all__ = [
    "CLAIM_FIELDS",
    "COLUMN_FIELDS",
    "DENSE",
    "EXTRA_COLUMNS",
    "HIT_FIELDS",
    "KEYWORD_FIELDS",
    "PASSAGE_FIELDS",
    "RANKING_FIELDS",
    "READ_FIELDS",
    "READ_PAGE",
    "SCORE_FIELDS",
    "SPARSE",
    "TEXT_FIELDS",
    "best_passages",
    "bm25_text",
    "check_extra",
    "check_read_where",
    "check_where",
    "columns_to_candidates",
    "content_hash",
    "document_payload",
    "document_points",
    "passage_counts",
    "passage_text",
    "point_id",
    "point_id_u64",
    "read_fields",
    "returned_fields",
    "stale_passages",
    "to_candidates",
    "vector_matrix",
]

#: the name of a point's dense (cosine) vector
DENSE = "dense"
#: the name of a point's BM25 sparse vector
SPARSE = "bm25"
_NAMESPACE = uuid.UUID("6f1c2b7e-3a52-4c1e-9a57-8f0f4f2d9c11")

#: payload fields with a keyword index (and the fields a ``where`` filter may name)
KEYWORD_FIELDS = ("doc_id", "source_type", "host", "registered_domain", "source_id")
#: index-time scores (:mod:`credrank.index.scoring`): set on stored points after indexing,
#: read back by every search as meta columns (a stage pays a column read, not a model)
SCORE_FIELDS = ("machine_text", "machine_text_key", "credibility", "credibility_key")
#: the payload fields that place a passage in its document
#: (:func:`~credrank.index.passages.passage_fields`; absent on the points of an index made
#: before passages, read as one passage)
PASSAGE_FIELDS = ("passage", "passages", "span")
#: what a freshness config reads of a document's claim (chapter 35.7,
#: :mod:`credrank.freshness.config`): its claim class and its time-persistence flag, declared
#: document fields stored at the payload's top level (never in ``extra``)
CLAIM_FIELDS = ("claim_class", "persistent")
#: payload fields a search returns by default: what ranking, explanations and selection use.
#: The document text (and ``cites``, ``extra``) is left in the engine unless asked for — the
#: payload's conversion to Python is the largest cost of a search after the vector scan.
RANKING_FIELDS = ("doc_id", "title", "url", "source_id", "source_type", "host",
                  "registered_domain", "url_source_type", "declared_source_type",
                  "provenance_rule", "domain_score", *DATE_FIELDS, *CLAIM_FIELDS,
                  *SCORE_FIELDS, *PASSAGE_FIELDS)
#: payload fields returned with ``with_text=True`` besides :data:`RANKING_FIELDS`
TEXT_FIELDS = ("text", "cites")
#: the fields :meth:`~credrank.index.store.VectorStore.read_payloads` returns by default
READ_FIELDS = ("doc_id", "url", "text")
#: documents per request when a store reads payloads in pages
READ_PAGE = 1000
#: provenance fields returned as meta columns besides ``META_COLUMNS``
EXTRA_COLUMNS = ("registered_domain", "url_source_type", "declared_source_type",
                 "provenance_rule", "domain_score", "cites", *CLAIM_FIELDS, *SCORE_FIELDS,
                 *PASSAGE_FIELDS)
#: the payload fields a ranked hit needs (:meth:`Candidates.hits`: id, provenance, title, url,
#: the five dates — also what the pushed-down freshness factor reads back): what a pushdown
#: that is cut to ``top_k`` in the engine asks for (``fields=`` of
#: :meth:`~credrank.index.formula.FormulaScoring.search_formula`), a subset of
#: :data:`RANKING_FIELDS`
HIT_FIELDS = ("doc_id", "source_id", "source_type", "host", "url", "title", *DATE_FIELDS,
              *PASSAGE_FIELDS)


def point_id(doc_id: str) -> str:
    """Deterministic point id of a document id (idempotent upserts, no duplicates): its
    uuid5 (index format 1, and every Qdrant server collection)."""
    return str(uuid.uuid5(_NAMESPACE, doc_id))


def point_id_u64(doc_id: str) -> int:
    """The point id of a document id in a Qdrant Edge index of format 2: the first 63 bits
    of its BLAKE2b hash. Deterministic (idempotent upserts) and, unlike a uuid, returned by the
    engine as a plain integer — building 1,000 ``uuid.UUID`` objects costs ≈ 4–7 ms a search,
    the larger part of a payload-free answer (:mod:`credrank.index.columns`). Two document ids
    that hash alike (probability ≈ n²/2⁶⁴: 5·10⁻⁸ at a million documents) are detected when
    written (:meth:`~credrank.index.qdrant_edge.EdgeIndex.upsert`) and refused, never merged."""
    digest = hashlib.blake2b(doc_id.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def content_hash(doc: Document, provenance: Mapping[str, Any]) -> str:
    """Hash of everything stored for a document; unchanged hash → nothing to re-index."""
    h = hashlib.sha256()
    for part in (doc.id, doc.text, doc.title or "", doc.url or "",
                 json.dumps(provenance, sort_keys=True, default=str),
                 json.dumps({k: v.isoformat() if v else None for k, v in doc.dates().items()}),
                 json.dumps(list(doc.cites)), json.dumps(doc.extra, sort_keys=True, default=str),
                 *_claim_parts(doc)):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def _claim_parts(doc: Document) -> tuple[str, ...]:
    """What :func:`content_hash` adds for a document's ``claim_class`` / ``persistent``: the
    two as JSON, nothing when both are absent (the hash of a document without them is the
    one an index made before these fields stored: nothing to re-embed)."""
    if doc.claim_class is None and doc.persistent is None:
        return ()
    return (json.dumps({"claim_class": doc.claim_class, "persistent": doc.persistent}),)


def document_payload(doc: Document, provenance: Mapping[str, Any], digest: str,
                     passage: tuple[int, int, Span] | None = None) -> dict[str, Any]:
    """The payload stored with a document's point: fields, provenance, content hash, ISO dates.

    ``passage``: ``(number, count, span)`` of one passage of a document split in ``count``
    (:mod:`credrank.index.passages`): every passage carries the document's fields and
    :func:`~credrank.index.passages.passage_fields`; the first one keeps the whole ``text``
    (what :meth:`~credrank.index.store.VectorStore.read_payloads` returns for the document),
    the others their own slice of it (what a search returns as the hit's text).

    ``ValueError`` (:func:`check_extra`) when ``doc.extra`` is not JSON data."""
    if passage is None or passage[0] == 0:  # once a document, before any of its points
        check_extra(doc)
    text = doc.text
    if passage is not None and passage[0] > 0:
        text = doc.text[passage[2][0]:passage[2][1]]
    payload = {
        "doc_id": doc.id, "text": text, "title": doc.title, "url": doc.url,
        "source_id": doc.source_id, "claim_class": doc.claim_class,
        "persistent": doc.persistent, **provenance, "cites": list(doc.cites),
        "content_hash": digest, "extra": doc.extra,
    }
    for name in DATE_FIELDS:
        value = getattr(doc, name)
        payload[name] = value.isoformat() if value is not None else None
    if passage is not None:
        payload.update(passage_fields(*passage))
    return payload


def check_extra(doc: Document) -> None:
    """``ValueError`` naming the document, the field and the value when ``doc.extra`` is not
    JSON data (text, numbers, booleans, null, lists, objects with text keys), which the
    engines would refuse or store differently. The corpus readers only make JSON data
    (Parquet values are converted: :func:`credrank.documents.formats.parquet.json_value`);
    a :class:`Document` built by hand must be too: the value is reported, never
    stringified. Iterative: no recursion limit."""
    stack: list[tuple[str, Any]] = [(repr(k), v) for k, v in doc.extra.items()]
    while stack:
        at, value = stack.pop()
        if value is None or isinstance(value, str | bool | int | float):
            continue
        if isinstance(value, list | tuple):
            stack.extend((f"{at}[{i}]", x) for i, x in enumerate(value))
        elif isinstance(value, dict) and all(isinstance(k, str) for k in value):
            stack.extend((f"{at}[{k!r}]", x) for k, x in value.items())
        else:
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            what = ("an object with non-text keys" if isinstance(value, dict)
                    else f"{type(value).__name__} {shown}")
            raise ValueError(f"document {doc.id!r}: extra field {at}: expected JSON data "
                             f"(text, number, boolean, null, list, object with text keys), "
                             f"got {what}; convert it before indexing")


def bm25_text(doc: Document, span: Span | None = None) -> str:
    """The text a document's (or its passage's, ``span`` of its text) BM25 vector is computed
    from (title, then body)."""
    body = doc.text if span is None else doc.text[span[0]:span[1]]
    return f"{doc.title or ''}\n{body}"


#: one point of a batch (:func:`document_points`): document position, point key, passage
#: ``(number, count, span)`` or ``None``, vector
PlannedPoint = tuple[int, str, tuple[int, int, Span] | None, np.ndarray]


def document_points(documents: Sequence[Document], vectors: np.ndarray,
                    passages: Sequence[Sequence[Span]] | None) -> list[PlannedPoint]:
    """The points a batch of documents becomes: ``(document position, point key, passage,
    vector)`` in order, one per passage (``passages[i]``: the spans of document ``i``, its
    vectors consecutive rows of ``vectors``; ``None``: one point per document, passage
    ``None``, as is a document of one passage). ``ValueError`` when the rows do not match the
    passages."""
    if passages is None:
        if len(vectors) != len(documents):
            raise ValueError(f"vectors: expected {len(documents)} rows, got {len(vectors)}")
        return [(i, doc.id, None, vectors[i]) for i, doc in enumerate(documents)]
    if len(passages) != len(documents):
        raise ValueError(f"passages: expected {len(documents)} lists, got {len(passages)}")
    total = sum(len(p) for p in passages)
    if len(vectors) != total:
        raise ValueError(f"vectors: expected {total} rows (one per passage), got {len(vectors)}")
    out: list[PlannedPoint] = []
    row = 0
    for i, (doc, spans) in enumerate(zip(documents, passages, strict=True)):
        if not spans:
            raise ValueError(f"passages of {doc.id!r}: expected at least one span")
        if len(spans) == 1:  # a document that fits is one point, as in an unsplit index
            out.append((i, doc.id, None, vectors[row]))
            row += 1
            continue
        for number, span in enumerate(spans):
            out.append((i, passage_key(doc.id, number), (number, len(spans), span),
                        vectors[row]))
            row += 1
    return out


def passage_counts(documents: Sequence[Document],
                   passages: Sequence[Sequence[Span]] | None) -> dict[str, int]:
    """``doc_id -> how many passages`` a batch writes (one each without ``passages``): what
    :func:`stale_passages` compares with the stored counts, and whether a write splits."""
    return {d.id: (len(passages[i]) if passages is not None else 1)
            for i, d in enumerate(documents)}


def stale_passages(counts: Mapping[str, int], stored: Mapping[str, Any]) -> list[str]:
    """The point keys of passages a re-written document no longer has: for each ``doc_id``
    written with ``counts[doc_id]`` passages, those numbered from there up to the count
    ``stored`` for it before (a payload's ``passages``; one when absent)."""
    out = []
    for doc_id, count in counts.items():
        before = stored.get(doc_id)
        before = int(before) if isinstance(before, int) and before > 0 else 1
        out += [passage_key(doc_id, n) for n in range(count, before)]
    return out


def best_passages(batch: Candidates, k: int) -> Candidates:
    """MaxP (:mod:`credrank.index.passages`): the first ``k`` documents of a batch of passages
    in rank order, each at its best (first) passage, whose score it keeps; a hit's ``text``
    (when fetched) is that passage's (:func:`passage_text`). A batch of one passage per
    document comes back as it is (cut to ``k``)."""
    ids = batch.doc_ids
    if len(ids) == 0:
        return batch
    _, first = np.unique(ids.astype(str), return_index=True)
    if len(first) == len(ids):
        keep = np.arange(min(k, len(ids)))
    else:
        keep = np.sort(first)[:k]
    out = batch.take(keep) if len(keep) < len(ids) else batch
    return passage_text(out)


def passage_text(batch: Candidates) -> Candidates:
    """``batch`` with the ``text`` of each first passage of a split document cut to its span
    (that point stores the document's whole text; its hit shows the passage it scored)."""
    text = batch.meta.get("text")
    spans, numbers, counts = (batch.meta.get("span"), batch.meta.get("passage"),
                              batch.meta.get("passages"))
    if text is None or spans is None or numbers is None or counts is None:
        return batch
    cut = {i: span for i in range(len(batch))
           if numbers[i] == 0 and isinstance(text[i], str)
           and (span := split_span(counts[i], spans[i])) is not None}
    if not cut:
        return batch
    column = text.copy()
    for i, (start, end) in cut.items():
        column[i] = text[i][start:end]
    return batch.with_meta("text", column)


def returned_fields(with_text: bool) -> list[str]:
    """The payload fields a search returns: :data:`RANKING_FIELDS` (+ text and cites)."""
    return [*RANKING_FIELDS, *TEXT_FIELDS] if with_text else list(RANKING_FIELDS)


def check_where(where: Mapping[str, Any] | None) -> dict[str, Any]:
    """A payload filter ``{field: value}`` (all must match) on :data:`KEYWORD_FIELDS`; a value
    is a string, or a list of strings (any of them: ``MatchAny``, one read for many)."""
    if not where:
        return {}
    if not isinstance(where, Mapping):
        raise ValueError(f"where: expected a mapping of field to value, got {where!r}")
    for name, value in where.items():
        if name not in KEYWORD_FIELDS:
            raise ValueError(f"where: field {name!r} has no keyword index; expected one of "
                             f"{', '.join(KEYWORD_FIELDS)}")
        if isinstance(value, list | tuple):
            if not value or not all(isinstance(v, str) for v in value):
                raise ValueError(f"where[{name!r}]: expected a non-empty list of strings, "
                                 f"got {value!r}")
        elif not isinstance(value, str):
            raise ValueError(f"where[{name!r}]: expected a string or a list of strings, got "
                             f"{value!r}")
    return {k: list(v) if isinstance(v, list | tuple) else v for k, v in where.items()}


def check_read_where(doc_ids: Sequence[str] | None, where: Mapping[str, Any] | None) -> None:
    """``ValueError`` for a ``where`` given with ``doc_ids``: :meth:`read_payloads
    <credrank.index.store.VectorStore.read_payloads>` filters only a read of every document."""
    if where and doc_ids is not None:
        raise ValueError("where: only when reading every document (doc_ids None)")


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
    meta = {name: _objects(col) for name, col in zip(columns, table, strict=True)}
    return Candidates(
        query=query,
        doc_ids=np.array([row["doc_id"] for row in rows], dtype=object),
        retrieval_score=np.array(scores, dtype=np.float64),
        meta=meta, vectors=vector_matrix(vectors), query_vector=query_vector)


#: the payload fields a columnar copy keeps (:mod:`credrank.index.columns`): every meta column
#: of a batch but the text ones (read from the engine when asked for)
COLUMN_FIELDS = tuple(dict.fromkeys(
    n for n in ("doc_id", *META_COLUMNS, *EXTRA_COLUMNS) if n not in TEXT_FIELDS))


def columns_to_candidates(query: str, columns: Mapping[str, np.ndarray],
                          scores: Sequence[float], *,
                          text: Sequence[Mapping[str, Any] | None] | None = None,
                          vectors: Sequence[Any] | None = None,
                          query_vector: np.ndarray | None = None) -> Candidates:
    """The batch :func:`to_candidates` builds, from columns already taken out of a columnar
    copy (:data:`COLUMN_FIELDS`, one object array each, rows in rank order) and, when the
    text was asked for, the engine's ``text``/``cites`` payloads of the same rows."""
    n = len(scores)
    meta: dict[str, np.ndarray] = {}
    for name in (*META_COLUMNS, *EXTRA_COLUMNS):
        if name in columns:
            meta[name] = columns[name]
        elif text is not None:
            meta[name] = _objects([(p or {}).get(name) for p in text])
        else:
            meta[name] = np.full(n, None, dtype=object)
    return Candidates(query=query, doc_ids=columns["doc_id"],
                      retrieval_score=np.array(scores, dtype=np.float64), meta=meta,
                      vectors=vector_matrix(vectors), query_vector=query_vector)


def vector_matrix(vectors: Sequence[Any] | None) -> np.ndarray | None:
    """One float32 row per vector (``None`` stays ``None``)."""
    if vectors is None:
        return None
    return np.array(vectors, dtype=np.float32).reshape(len(vectors), -1)


def _objects(values: Sequence[Any]) -> np.ndarray:
    """An object array of ``values``, element-wise (a list value stays one element)."""
    out = np.empty(len(values), dtype=object)
    out[:] = list(values)
    return out


def read_fields(payload: Mapping[str, Any] | None, fields: Sequence[str]) -> dict[str, Any]:
    """``{field: payload.get(field)}`` for ``fields`` (``None`` where missing)."""
    payload = payload or {}
    return {name: payload.get(name) for name in fields}
