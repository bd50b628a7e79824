"""Rerank candidates retrieved elsewhere: the store-agnostic post-processor.

A client (a framework adapter, ``POST /rerank``) hands over the passages its own retriever found,
each ``{id, text, url?, title?, score?, vector?, metadata?}``. :class:`GivenCandidates` turns them
into the columnar batch a retriever would have produced — provenance typed from the URL by the
same :class:`~credrank.provenance.SourceTyper` that indexing uses, the retrieval score the cosine
of the query and passage embeddings (passages that carry a ``vector`` are not embedded again) —
and :func:`rerank_pipeline` runs the same scoring stages as ``credrank search`` after it. So a
pool reranked here ranks exactly as the same pool does inside ``credrank search``.

The client's ``metadata`` travels untouched in the meta column ``metadata`` and comes back on
every hit; it is never read as evidence of source type (a ``source_type`` inside it is a claim,
not provenance).
"""

from __future__ import annotations

import base64
import binascii
import math
import sys
import types
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.hittext import DEFAULT_TEXT
from credrank.core.pipeline import Pipeline, Stage
from credrank.index.ingest import embedding_text, provenance_payload
from credrank.pipeline.compile import build_stages, context, reads
from credrank.pipeline.spec import PipelineSpec
from credrank.provenance import SourceTyper
from credrank.search import SearchSettings, scoring_stages

#: the keys a candidate record may carry
CANDIDATE_FIELDS = ("id", "text", "url", "title", "score", "vector", "metadata")
#: where the retrieval score comes from: the embedding cosine (as in ``credrank search``) or
#: the ``score`` the client's own retriever gave
RETRIEVAL_SOURCES = ("cosine", "given")


class CandidateError(ValueError):
    """A candidate record is malformed; the message names ``candidates[i].field``."""


def check_candidates(records: Sequence[Mapping[str, Any]], *, dim: int | None = None,
                     retrieval: str = "cosine") -> list[dict[str, Any]]:
    """Validate candidate records; return them as plain dicts (inputs are not modified).

    Each record needs a unique non-empty string ``id``; ``text`` (a string) is needed unless a
    ``vector`` is given; ``url`` and ``title`` are strings or absent; ``score`` a finite number
    (required for every record when ``retrieval="given"``); ``vector`` ``dim`` finite numbers,
    as a list or as base64 of little-endian float32 (:func:`decode_vector`); ``metadata`` a
    JSON object. Unknown keys are refused (naming the known ones) so a misspelled ``vectors``
    never silently triggers re-embedding. Raises :class:`CandidateError`.
    """
    if retrieval not in RETRIEVAL_SOURCES:
        raise CandidateError(f"retrieval: expected one of {', '.join(RETRIEVAL_SOURCES)}, "
                             f"got {retrieval!r}")
    if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Sequence):
        raise CandidateError(f"candidates: expected a list of objects, got "
                             f"{type(records).__name__}")
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(records):
        where = f"candidates[{i}]"
        if not isinstance(record, Mapping):
            raise CandidateError(f"{where}: expected an object, got {type(record).__name__}")
        unknown = sorted(set(record) - set(CANDIDATE_FIELDS))
        if unknown:
            raise CandidateError(f"{where}: unknown field(s) {', '.join(map(repr, unknown))}; "
                                 f"expected only {', '.join(CANDIDATE_FIELDS)}")
        doc_id = record.get("id")
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise CandidateError(f"{where}.id: expected a non-empty string, got {doc_id!r}")
        if doc_id in seen:
            raise CandidateError(f"{where}.id: {doc_id!r} repeats candidates[{seen[doc_id]}]; "
                                 "ids must be unique")
        seen[doc_id] = i
        for name in ("text", "url", "title"):
            value = record.get(name)
            if value is not None and not isinstance(value, str):
                raise CandidateError(f"{where}.{name}: expected a string, got "
                                     f"{type(value).__name__}")
        vector = record.get("vector")
        if vector is not None:
            vector = _check_vector(f"{where}.vector", vector, dim)
        elif retrieval == "cosine" and not (record.get("text") or "").strip():
            raise CandidateError(f"{where}: expected a non-empty text or a vector to embed, "
                                 "got neither")
        score = record.get("score")
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, (int, float)) \
                    or not math.isfinite(float(score)):
                raise CandidateError(f"{where}.score: expected a finite number, got {score!r}")
            score = float(score)
        elif retrieval == "given":
            raise CandidateError(f"{where}.score: required with retrieval='given' (the "
                                 "client's retrieval score), got none")
        metadata = record.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise CandidateError(f"{where}.metadata: expected an object, got "
                                 f"{type(metadata).__name__}")
        out.append({"id": doc_id, "text": record.get("text"), "url": record.get("url"),
                    "title": record.get("title"), "score": score, "vector": vector,
                    "metadata": metadata})
    return out


def decode_vector(text: str) -> np.ndarray:
    """A vector sent as base64 of little-endian float32 (the ``encoding_format="base64"`` of
    OpenAI-style embedding APIs): 4 bytes a number, a quarter of the JSON size and no float
    parsing. Raises ``ValueError`` for text that is not such base64."""
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"expected base64 of float32 numbers ({exc})") from None
    if len(raw) % 4:
        raise ValueError(f"expected base64 of float32 numbers (4 bytes each), got {len(raw)} "
                         "bytes")
    return np.frombuffer(raw, dtype="<f4")


def _check_vector(where: str, vector: Any, dim: int | None) -> np.ndarray:
    """A list of numbers, or a base64 string of float32 (:func:`decode_vector`), as a finite
    float32 vector of ``dim`` numbers."""
    if isinstance(vector, str):
        try:
            vector = decode_vector(vector)
        except ValueError as exc:
            raise CandidateError(f"{where}: {exc}") from None
    elif isinstance(vector, (bytes, Mapping)):
        raise CandidateError(f"{where}: expected a list of numbers or a base64 string, got "
                             f"{type(vector).__name__}")
    try:
        arr = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise CandidateError(f"{where}: expected a list of numbers ({exc})") from None
    if arr.ndim != 1 or (dim is not None and len(arr) != dim):
        got = f"shape {arr.shape}" if arr.ndim != 1 else f"{len(arr)} numbers"
        raise CandidateError(f"{where}: expected {dim if dim else 'a list of'} numbers (the "
                             f"embedder's dimension), got {got}")
    if not np.all(np.isfinite(arr)):
        raise CandidateError(f"{where}: expected finite numbers, got NaN or infinity")
    return arr.astype(np.float32)


class GivenCandidates(Stage):
    """A retriever stage over a fixed pool: the client's candidates, typed and scored.

    ``retrieval="cosine"``: the retrieval score is ``cos(q, e_i)`` with the query embedded by
    ``embedder`` and each passage's ``vector`` used as given, else ``embedder`` applied to the
    same text indexing embeds (``title\\ntext``). Zero-norm policy: a zero vector has cosine 0.
    ``retrieval="given"``: the client's ``score`` is the retrieval score (BM25 or another
    engine's similarity; it enters ``max(score, 0) × Π factors`` as it is). ``with_vectors``
    keeps the vectors on the batch (selectors such as MMR read them). ``query_vector``: the
    query's embedding by the same model, when the client has it (then nothing at all is
    embedded for candidates that carry vectors).
    """

    name = "given"

    def __init__(self, records: Sequence[Mapping[str, Any]], embedder: Embedder,
                 typer: SourceTyper | None = None, *, retrieval: str = "cosine",
                 with_vectors: bool = False, query_vector: Sequence[float] | None = None):
        self.records = check_candidates(records, dim=embedder.dim, retrieval=retrieval)
        self.embedder, self.retrieval = embedder, retrieval
        self.query_vector = (None if query_vector is None else
                             _check_vector("query_vector", query_vector, embedder.dim))
        self.typer = typer or SourceTyper()
        self.with_vectors = with_vectors

    def transform(self, batch: Candidates) -> Candidates:
        records = self.records
        if not records:
            return Candidates.empty(batch.query, self.embedder.dim)
        vectors = self._vectors(records)
        query_vector = None
        if self.retrieval == "cosine":
            query_vector = self.query_vector
            if query_vector is None:
                query_vector = np.asarray(self.embedder.embed([batch.query])[0],
                                          dtype=np.float32)
            scores = _cosines(vectors, query_vector)
        else:
            scores = np.array([r["score"] for r in records], dtype=np.float64)
        provs = [provenance_payload(p) for p in
                 self.typer.classify_many([r["url"] for r in records])]
        meta: dict[str, list[Any]] = {
            "url": [r["url"] for r in records], "title": [r["title"] for r in records],
            "text": [r["text"] for r in records], "client_score": [r["score"] for r in records],
            "metadata": [r["metadata"] for r in records],
        }
        for key in provs[0]:
            meta[key] = [p[key] for p in provs]
        return Candidates(
            query=batch.query, doc_ids=np.array([r["id"] for r in records], dtype=object),
            retrieval_score=scores,
            meta={k: _objects(v) for k, v in meta.items()},
            vectors=vectors if self.with_vectors else None, query_vector=query_vector)

    def _vectors(self, records: list[dict[str, Any]]) -> np.ndarray | None:
        missing = [i for i, r in enumerate(records) if r["vector"] is None]
        if self.retrieval == "given" and missing and not self.with_vectors:
            return None  # nothing downstream reads vectors: embed nothing
        out = np.zeros((len(records), self.embedder.dim), dtype=np.float32)
        for i, r in enumerate(records):
            if r["vector"] is not None:
                out[i] = r["vector"]
        if missing:
            texts = [embedding_text(records[i]["title"], records[i]["text"] or "")
                     for i in missing]
            out[missing] = np.asarray(self.embedder.embed(texts), dtype=np.float32)
        return out

    def config(self) -> dict[str, Any]:
        return {"candidates": len(self.records), "retrieval": self.retrieval,
                "embedder": self.embedder.name}


def _cosines(vectors: np.ndarray, query_vector: np.ndarray) -> np.ndarray:
    """``cos(q, e_i)`` for every row, float64; a zero row (or query) has cosine 0."""
    v = vectors.astype(np.float64)
    q = query_vector.astype(np.float64)
    norms = np.linalg.norm(v, axis=1) * np.linalg.norm(q)
    dots = v @ q
    return np.clip(np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0), -1.0, 1.0)


def _objects(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def rerank_pipeline(records: Sequence[Mapping[str, Any]], embedder: Embedder,
                    settings: SearchSettings | PipelineSpec, typer: SourceTyper | None = None,
                    *, retrieval: str = "cosine", query_vector: Sequence[float] | None = None,
                    resources: Mapping[str, str | Path] | None = None,
                    allow_paths: bool = True) -> Pipeline:
    """``GivenCandidates(records) >> the stages of settings`` (prior, signals, combine,
    selector), the Python path of :func:`credrank.search.build_pipeline` over the given pool.

    ``settings``: :class:`SearchSettings` or a :class:`~credrank.pipeline.spec.PipelineSpec`
    (built by :func:`credrank.pipeline.compile.compile_rerank`; ``resources`` and
    ``allow_paths`` say which files it may name). ``fetch_k`` plays no part (the pool is the
    records); ``top_k`` cuts as usual.
    """
    if isinstance(settings, PipelineSpec):
        ctx = context(embedder=embedder, resources=resources, allow_paths=allow_paths)
        stages = build_stages(settings, ctx)
        given = GivenCandidates(records, embedder, typer, retrieval=retrieval,
                                with_vectors="vectors" in reads(stages),
                                query_vector=query_vector)
        return Pipeline([given, *stages])
    given = GivenCandidates(records, embedder, typer, retrieval=retrieval,
                            with_vectors=settings.with_vectors, query_vector=query_vector)
    return Pipeline([given, *scoring_stages(settings, embedder)])


def rerank(query: str, records: Sequence[Mapping[str, Any]],
           embedder: Embedder | str = "minilm",
           settings: SearchSettings | PipelineSpec | Mapping[str, Any] | None = None,
           typer: SourceTyper | None = None, *, retrieval: str = "cosine",
           query_vector: Sequence[float] | None = None, **spec_files: Any) -> Candidates:
    """Rerank ``records`` for ``query`` (see :func:`rerank_pipeline`). ``embedder`` may be
    a name (:func:`credrank.index.embed.get_embedder`), ``settings`` a spec as plain data
    (:meth:`PipelineSpec.from_dict`). ``from credrank import rerank`` is this module, and
    calling it calls this function."""
    if isinstance(embedder, str):
        from credrank.index.embed import get_embedder

        embedder = get_embedder(embedder)
    if isinstance(settings, Mapping):
        settings = PipelineSpec.from_dict(dict(settings))
    settings = settings or SearchSettings()
    return rerank_pipeline(records, embedder, settings, typer, retrieval=retrieval,
                           query_vector=query_vector, **spec_files).search(query)


def rerank_hits(result: Candidates, text: str = DEFAULT_TEXT) -> list[dict[str, Any]]:
    """:meth:`Candidates.hits` (with ``text`` of the client's passage as ``text`` says) plus
    what the client sent: its ``metadata`` (untouched, the same object) and its ``score`` as
    ``client_score``."""
    hits = result.hits(text)
    metadata, client = result.column("metadata"), result.column("client_score")
    for i, hit in enumerate(hits):
        hit["client_score"] = client[i]
        hit["metadata"] = metadata[i]
    return hits


class _CallableModule(types.ModuleType):
    """This module, callable as :func:`rerank`: ``from credrank import rerank`` names the
    module (Python sets a package attribute to the submodule of that name once it is
    imported), so ``rerank(query, records)`` works whichever was imported first."""

    def __call__(self, *args: Any, **kwargs: Any) -> Candidates:
        return rerank(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
