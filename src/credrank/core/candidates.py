"""The columnar batch that flows between pipeline stages (DESIGN.md §3).

A :class:`Candidates` holds one query's candidate documents as parallel numpy columns:
identifiers, the retrieval score, one array per named factor (the per-document ledger that
becomes ``score_breakdown``), the combined score, metadata columns and, optionally, the
embedding vectors. Stages never mutate a batch; they return a new one through the ``with_*``
and :meth:`Candidates.take` helpers, which also enforce the invariant that every number is
finite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from credrank.core.errors import StageError as StageError  # re-exported: a stage's error
from credrank.core.hittext import DEFAULT_TEXT, SNIPPET_CHARS, check_text, hit_text
from credrank.core.validation import check_bounds, check_finite

#: metadata columns every retriever fills (``None`` where unknown)
META_COLUMNS = (
    "source_id",
    "source_type",
    "host",
    "url",
    "title",
    "text",
    "observed_at",
    "verified_at",
    "published_at",
    "modified_at",
    "retrieved_at",
)

#: the five dates kept apart (chapter 35.7), reported under ``dates`` on every hit
DATE_COLUMNS = ("observed_at", "verified_at", "published_at", "modified_at", "retrieved_at")
#: meta columns a stage declares as per-hit evidence (:func:`declare_hit_columns`): each hit
#: of :meth:`Candidates.hits` carries those present, under their own names
HIT_COLUMNS: dict[str, None] = {}


def declare_hit_columns(*names: str) -> None:
    """Declare meta columns that :meth:`Candidates.hits` returns on each hit when a batch
    holds them (a stage's per-hit evidence: the planted stage's ``planted_z`` …), in the
    order declared. Values must be JSON data (``None``, numbers, strings, lists)."""
    for name in names:
        HIT_COLUMNS.setdefault(name, None)


#: the smallest normal float64: a value below it in magnitude (a denormal) is stored as 0
_TINY = float(np.finfo(np.float64).tiny)


def flush_denormal(arr: np.ndarray) -> np.ndarray:
    """``arr`` with denormal values (``0 < |x| < 2.2e-308``, e.g. ``2^-1060`` of a weight that
    all but underflowed) set to 0: no denormal score or factor leaves a stage (a copy only
    when one is there)."""
    small = (np.abs(arr) < _TINY) & (arr != 0)
    return np.where(small, 0.0, arr) if small.any() else arr


@dataclass(frozen=True)
class Candidates:
    """One query's candidates, columnar.

    Attributes:
        query: the query text.
        doc_ids: document ids, ``dtype=object`` (str).
        retrieval_score: the engine's score (cosine or BM25), float64.
        factors: ordered mapping ``name -> float64 array``; each signal stage adds one.
        score: the combined score (after a combine stage), else a copy of ``retrieval_score``.
        meta: metadata columns (``META_COLUMNS`` and any extra), each an object array.
        vectors: ``(n, dim)`` float32 embeddings, or ``None`` when not fetched.
        info: free-form, JSON-serialisable facts stages record (objective values, policies).
        query_vector: the query embedding when the retriever had one.
    """

    query: str
    doc_ids: np.ndarray
    retrieval_score: np.ndarray
    factors: Mapping[str, np.ndarray] = field(default_factory=dict)
    # None (the default) becomes a copy of retrieval_score in __post_init__, so the attribute
    # is always an array; a dataclass cannot type the argument apart from the attribute
    score: np.ndarray = None  # type: ignore[assignment]
    meta: Mapping[str, np.ndarray] = field(default_factory=dict)
    vectors: np.ndarray | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    query_vector: np.ndarray | None = None

    def __post_init__(self) -> None:
        ids = np.asarray(self.doc_ids, dtype=object)
        n = len(ids)
        rs = np.asarray(self.retrieval_score, dtype=np.float64).reshape(-1)
        if len(rs) != n:
            raise StageError(f"retrieval_score has {len(rs)} rows; expected {n} (one per doc_id)")
        check_finite("retrieval_score", rs, error=StageError)
        score = rs.copy() if self.score is None else np.asarray(self.score, dtype=np.float64)
        if len(score) != n:
            raise StageError(f"score has {len(score)} rows; expected {n}")
        check_finite("score", score, error=StageError)
        factors: dict[str, np.ndarray] = {}
        for name, values in self.factors.items():
            arr = np.asarray(values, dtype=np.float64).reshape(-1)
            if len(arr) != n:
                raise StageError(f"factor {name!r} has {len(arr)} rows; expected {n}")
            check_finite(f"factor {name!r}", arr, error=StageError)
            factors[name] = arr
        meta = {}
        for name, values in self.meta.items():
            arr = np.asarray(values, dtype=object)
            if len(arr) != n:
                raise StageError(f"meta column {name!r} has {len(arr)} rows; expected {n}")
            meta[name] = arr
        vectors = self.vectors
        if vectors is not None:
            vectors = np.asarray(vectors, dtype=np.float32)
            if vectors.ndim != 2 or vectors.shape[0] != n:
                raise StageError(f"vectors have shape {vectors.shape}; expected ({n}, dim)")
        object.__setattr__(self, "doc_ids", ids)
        object.__setattr__(self, "retrieval_score", rs)
        object.__setattr__(self, "score", score)
        object.__setattr__(self, "factors", factors)
        object.__setattr__(self, "meta", meta)
        object.__setattr__(self, "vectors", vectors)
        object.__setattr__(self, "info", dict(self.info))

    # -- construction -----------------------------------------------------------------
    @classmethod
    def empty(cls, query: str, dim: int | None = None,
              query_vector: np.ndarray | None = None) -> Candidates:
        """A batch with no candidates (every stage must accept it); ``query_vector``: the
        query's embedding when the caller has it."""
        vectors = None if dim is None else np.zeros((0, dim), dtype=np.float32)
        return cls(query=query, doc_ids=np.array([], dtype=object),
                   retrieval_score=np.zeros(0), vectors=vectors, query_vector=query_vector)

    @classmethod
    def from_records(
        cls,
        query: str,
        doc_ids: Sequence[str],
        scores: Sequence[float],
        metadata: Sequence[Mapping[str, Any]] | None = None,
        vectors: np.ndarray | None = None,
    ) -> Candidates:
        """Build a batch from row-wise records (what framework adapters hold)."""
        metadata = list(metadata) if metadata is not None else [{} for _ in doc_ids]
        keys = list(META_COLUMNS) + sorted(
            {k for m in metadata for k in m} - set(META_COLUMNS))
        meta = {k: np.array([m.get(k) for m in metadata], dtype=object) for k in keys}
        return cls(query=query, doc_ids=np.array(list(doc_ids), dtype=object),
                   retrieval_score=np.asarray(scores, dtype=np.float64), meta=meta,
                   vectors=vectors)

    # -- immutable updates --------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.doc_ids)

    def _derive(self, **changes: Any) -> Candidates:
        """A copy with ``changes``, which the caller has already validated (the hot path of
        every stage: unchanged columns are shared, not re-checked)."""
        new = object.__new__(Candidates)
        for f in fields(self):
            object.__setattr__(new, f.name, changes.get(f.name, getattr(self, f.name)))
        return new

    def with_factor(self, name: str, values: np.ndarray,
                    low: float = 0.0, high: float = float("inf")) -> Candidates:
        """Return a copy with factor ``name`` set; values must be finite and in [low, high]."""
        arr = np.asarray(values, dtype=np.float64).reshape(-1)
        check_finite(f"factor {name!r}", arr, error=StageError)
        check_bounds(f"factor {name!r}", arr, low, high, error=StageError)
        arr = flush_denormal(arr)
        if len(arr) != len(self):
            raise StageError(f"factor {name!r} has {len(arr)} rows; expected {len(self)}")
        factors = dict(self.factors)
        factors[name] = arr
        return self._derive(factors=factors)

    def with_score(self, score: np.ndarray) -> Candidates:
        arr = np.asarray(score, dtype=np.float64).reshape(-1)
        if len(arr) != len(self):
            raise StageError(f"score has {len(arr)} rows; expected {len(self)}")
        check_finite("score", arr, error=StageError)
        return self._derive(score=flush_denormal(arr))

    def with_info(self, **info: Any) -> Candidates:
        merged = dict(self.info)
        merged.update(info)
        return self._derive(info=merged)

    def with_meta(self, name: str, values: Sequence[Any] | np.ndarray) -> Candidates:
        arr = np.asarray(values, dtype=object)
        if len(arr) != len(self):
            raise StageError(f"meta column {name!r} has {len(arr)} rows; expected {len(self)}")
        meta = dict(self.meta)
        meta[name] = arr
        return self._derive(meta=meta)

    def take(self, indices: Sequence[int] | np.ndarray) -> Candidates:
        """Rows ``indices`` in that order (selection and sorting go through here)."""
        idx = np.asarray(indices, dtype=np.int64)
        return self._derive(
            doc_ids=self.doc_ids[idx],
            retrieval_score=self.retrieval_score[idx],
            factors={k: v[idx] for k, v in self.factors.items()},
            score=self.score[idx],
            meta={k: v[idx] for k, v in self.meta.items()},
            vectors=None if self.vectors is None else self.vectors[idx],
        )

    def sorted_by_score(self) -> Candidates:
        """Rows by descending ``score``; ties keep the earlier (higher-retrieval) row first."""
        return self.take(np.argsort(-self.score, kind="stable"))

    def column(self, name: str) -> np.ndarray:
        """A metadata column, or an all-``None`` column when the retriever had none."""
        if name in self.meta:
            return self.meta[name]
        return np.full(len(self), None, dtype=object)

    # -- output -----------------------------------------------------------------------------
    def hits(self, text: str = DEFAULT_TEXT, snippet_chars: int = SNIPPET_CHARS
             ) -> list[dict[str, Any]]:
        """Ordered hits, each with its provenance, title, ``text``, ``dates`` (ISO strings,
        ``None`` where unknown), ``passage`` (for a document split into passages, the one it
        scored by: ``{"number": 1-based, "of": count, "span": [start, end]}`` of its text;
        ``None`` for a document of one passage) and ``score_breakdown`` (retrieval score,
        each factor, final).

        ``text`` (:mod:`credrank.core.hittext`): ``snippet`` (default) — at most
        ``snippet_chars`` characters of the document around the query words, cut at word
        boundaries, ``…`` where cut; ``full`` — the stored text; ``none`` — no ``text`` key.
        The text comes from the batch's ``text`` column: ``None`` where the retriever did not
        return it (:class:`credrank.index.hittext.FetchText` reads it for the final hits;
        :class:`credrank.searcher.Searcher` does that itself)."""
        text = check_text(text)
        # one pass: every column read once, as Python lists (no numpy scalar per cell)
        out = []
        dates = [(name, self.column(name).tolist()) for name in DATE_COLUMNS]
        texts = self.column("text").tolist() if text != "none" else None
        numbers, counts, spans = (self.column("passage").tolist(),
                                  self.column("passages").tolist(),
                                  self.column("span").tolist())
        plain = {name: [_plain(v) for v in self.column(name).tolist()]
                 for name in ("source_id", "source_type", "host", "url", "title")}
        # why a given URL names no host (typed unknown): only on the hits that have one
        url_errors = self.meta["url_error"].tolist() if "url_error" in self.meta else None
        evidence = [(name, self.meta[name].tolist()) for name in HIT_COLUMNS
                    if name in self.meta]
        retrieval = self.retrieval_score.tolist()
        factors = [(k, np.asarray(v, dtype=np.float64).tolist())
                   for k, v in self.factors.items()]
        scores = np.asarray(self.score, dtype=np.float64).tolist()
        doc_ids = self.doc_ids.tolist()
        for i in range(len(self)):
            breakdown = {"retrieval_score": float(retrieval[i])}
            breakdown.update({k: float(v[i]) for k, v in factors})
            breakdown["final"] = float(scores[i])
            hit = {
                "rank": i + 1,
                "doc_id": str(doc_ids[i]),
                "score": float(scores[i]),
                "source_id": plain["source_id"][i],
                "source_type": plain["source_type"][i],
                "host": plain["host"][i],
                "url": plain["url"][i],
                "title": plain["title"][i],
            }
            if url_errors is not None and url_errors[i]:
                hit["url_error"] = str(url_errors[i])
            if texts is not None:
                hit["text"] = hit_text(texts[i], self.query, text, snippet_chars)
            hit["dates"] = {name: _plain(column[i]) for name, column in dates}
            hit["passage"] = _passage(numbers[i], counts[i], spans[i])
            hit["score_breakdown"] = breakdown
            for name, column in evidence:  # a stage's declared per-hit evidence
                value = column[i]
                hit[name] = ([_plain(v) for v in value] if isinstance(value, list | tuple)
                             else _plain(value))
            out.append(hit)
        return out


def _passage(number: Any, count: Any, span: Any) -> dict[str, Any] | None:
    """A hit's ``passage`` (:meth:`Candidates.hits`), ``None`` unless its document is split."""
    if not (isinstance(count, int | np.integer) and count > 1 and isinstance(span, list)
            and len(span) == 2):
        return None
    return {"number": int(number or 0) + 1, "of": int(count), "span": [int(span[0]),
                                                                      int(span[1])]}


def _plain(value: Any) -> Any:
    """JSON-friendly scalar (numpy scalars and datetimes to builtins / ISO strings)."""
    if value is None:
        return None
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if isinstance(value, np.generic):
        return value.item()
    return value
