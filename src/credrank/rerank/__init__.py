"""Rerank candidates retrieved elsewhere: the store-agnostic post-processor.

A client (a framework adapter, ``POST /rerank``) hands over the passages its own retriever found,
each ``{id, text, url?, title?, source_id?, source_type?, observed_at?, verified_at?,
published_at?, modified_at?, retrieved_at?, cites?, score?, vector?, metadata?}``.
:class:`GivenCandidates` — the one place records become candidates, for every door (library,
``POST /rerank``, the adapters) — turns them into the columnar batch a retriever would have
produced: provenance typed from the URL by the same :class:`~credrank.provenance.SourceTyper`
that indexing uses (a declared ``source_type`` is a claim, recorded as a conflict when it
differs, never the type), the dates and the other fields checked as ``credrank index`` checks a
record's (:mod:`credrank.rerank.fields`) so freshness reads them as it reads an index's, the
retrieval score chosen by ``retrieval`` (below). :func:`rerank_pipeline` runs the same scoring
stages as ``credrank search`` after it. So a pool reranked here ranks exactly as the same pool
does inside ``credrank search``.

Where the retrieval score comes from (``retrieval``, one option and one validator,
:func:`check_retrieval`, in the library, the adapters and ``POST /rerank``):

* ``auto`` (the default) reuses what the caller already has, per call, in this order
  (:class:`AutoRetrieval`): (a) the passages' own embeddings, when every passage carries one
  of the embedder's dimension *and* they are of the embedder's model — checked, not assumed
  (:meth:`AutoRetrieval.check`: once per instance and dimension, credrank embeds the first
  passage that carries a vector and compares; cosine ≥ :data:`SAME_MODEL_COSINE` is the same
  model) — with the query's given vector, or, when no passage has a usable score or a stage
  reads the vectors, with the query embedded by credrank; (b) else, when every passage
  carries a non-negative score, the scores, as ``given`` (so scores beat embeddings that would
  need the query embedded: ≈ 9 ms with MiniLM, the fast path); (c) else the cosine of
  passages embedded here, as ``cosine``, with a one-time notice of what that costs
  (:class:`EmbeddingFallbackWarning` in the library and adapters, a log line in the service).
  Mixed inputs (some passages with a score, some without) fall through to (c): a partial score
  column cannot rank the passages without one on the same scale, and ``auto`` must accept every
  input the explicit ``cosine`` accepts (it was the default before ``auto``); the notice names
  the first passage without a score. Negative scores fall through to (c) too (a raw dot
  product, a log-probability: not a similarity ``max(score, 0) × Π factors`` can use);
  ``retrieval="given"`` takes them as they are.
* ``cosine``: ``cos(q, e_i)``, each passage's ``vector`` used as given (the embedder's, by this
  API's contract), the others embedded (``title\\ntext``, as indexing embeds them); a text
  longer than the embedder's window is split into chunks as ``credrank index`` splits it and
  scored by its best chunk (MaxP), which becomes the hit's text (``passage`` on the hit).
* ``given``: the client's ``score`` (required on every passage, any finite number).

Scores (``given``, and ``auto`` (b)) are used as they come, never normalised here: a finite
number is required; the combination makes the scale harmless (``multiply``: ``max(s, 0) ×
Π factors`` is invariant to a positive rescaling, so BM25's unbounded scores work; ``linear``
divides by the pool's maximum; ``rrf`` uses ranks). A score must be a *similarity* (higher is
better); a distance must be converted by the caller. What a call used is in the result's
``info["retrieval"]`` (:class:`Resolution`: ``resolved`` is ``embeddings``, ``given`` or
``cosine``, ``embedded`` the passages embedded).

The client's ``metadata`` travels untouched in the meta column ``metadata`` and comes back on
every hit. It is read only where the caller says so: the adapters read the fields from their
framework documents' metadata (``fields=``, :class:`~credrank.rerank.fields.MetadataFields`);
``POST /rerank`` and :func:`rerank` take them as the candidates' own fields. A declared
``source_type``, wherever it comes from, is a claim: passed to the source typer as
``credrank index`` passes a record's, it never becomes the type; one that differs from the URL's
is listed in the result's ``info["provenance"]["conflicts"]``.
"""

from __future__ import annotations

import base64
import binascii
import math
import numbers as _numbers
import sys
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.hittext import DEFAULT_TEXT
from credrank.core.pipeline import Pipeline, Stage
from credrank.core.validation import check_choice
from credrank.index.ingest import (
    embedding_text,
    overflowing,
    provenance_payload,
    query_truncation,
    window_of,
)
from credrank.index.passages import Span, check_chunking, chunk_texts, cut_titles
from credrank.pipeline.compile import build_stages, context, reads
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.provenance import SourceTyper
from credrank.rerank.fields import EVIDENCE_FIELDS, MetadataFields, field_value

#: the keys a candidate record may carry: its id and text, what stages read of it
#: (:data:`~credrank.rerank.fields.EVIDENCE_FIELDS`: provenance, the five dates, cites), the
#: client's score and vector, and metadata returned untouched
CANDIDATE_FIELDS = ("id", "text", *EVIDENCE_FIELDS, "score", "vector", "metadata")
#: where the retrieval score comes from (module docstring; :func:`check_retrieval`)
RETRIEVAL_SOURCES = ("auto", "cosine", "given")
#: the default of ``retrieval`` everywhere (library, adapters, ``POST /rerank``)
DEFAULT_RETRIEVAL = "auto"
#: what a call resolved to (``info["retrieval"]["resolved"]``): ``embeddings`` — the cosine
#: with the passages' own vectors, none embedded here; ``given`` — the client's scores;
#: ``cosine`` — the cosine with at least one passage embedded here
RESOLVED_SOURCES = ("embeddings", "given", "cosine", "none")
#: the same-model check of ``auto``: the cosine between credrank's embedding of a passage and
#: the vector it came with is at least this for vectors of the embedder's model (the ONNX and
#: torch MiniLM agree within 1e-5; two different 384-dimension models land far below)
SAME_MODEL_COSINE = 0.99


class CandidateError(ValueError):
    """A candidate record is malformed; the message names ``candidates[i].field`` (an
    adapter's: ``documents[i]``, ``nodes[i]``)."""


class EmbeddingFallbackWarning(UserWarning):
    """``retrieval='auto'`` embedded the passages (no usable embeddings or scores came with
    them): the message says why, what it cost and how to skip it. Emitted once per
    :class:`AutoRetrieval` (per adapter instance) and cause; the message starts with
    :data:`FALLBACK_PREFIX`."""


#: the stable beginning of the :class:`EmbeddingFallbackWarning` message (and of the service's
#: log line), for ``warnings.filterwarnings``
FALLBACK_PREFIX = "retrieval='auto' embedded the passages"


def check_retrieval(value: Any) -> str:
    """``value`` if it is one of :data:`RETRIEVAL_SOURCES`, else :class:`CandidateError`
    ``retrieval: expected one of auto, cosine, given, got …`` (the one validator of the
    option: library, adapters, service)."""
    return check_choice("retrieval", value, RETRIEVAL_SOURCES, error=CandidateError)


@dataclass(frozen=True)
class ModelCheck:
    """The verdict of the same-model check: ``same_model`` and the ``cosine`` it rests on (the
    best over the texts tried), ``candidate`` the passage it was made on (in the call that
    made it)."""

    same_model: bool
    cosine: float
    candidate: int


@dataclass(frozen=True)
class Fallback:
    """Why and at what cost ``auto`` embedded the passages: ``cause`` (a stable key, e.g.
    ``no_embeddings+no_scores``), ``detail`` (in words), ``embedded`` passages with
    ``embedder`` in ``ms`` milliseconds."""

    cause: str
    detail: str
    embedded: int
    embedder: str
    ms: float
    #: whether the call could have used the passages' scores instead (not a context's)
    scores: bool = True

    @property
    def message(self) -> str:
        skip = (f"pass the retriever's scores, or embeddings of the {self.embedder!r} model, "
                "with the passages to skip it (retrieval='given' takes the scores as they "
                "are)" if self.scores else
                f"pass embeddings of the {self.embedder!r} model with the passages to skip it")
        return (f"{FALLBACK_PREFIX}: {self.detail}; embedding {self.embedded} passage(s) with "
                f"the {self.embedder!r} embedder took {self.ms:.0f} ms on this call (about "
                f"that on every such call); {skip}")


def _warn(fallback: Fallback) -> None:
    warnings.warn(fallback.message, EmbeddingFallbackWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside credrank (the caller's code, or the
    framework that called the adapter), counted from :func:`_warn`'s caller."""
    package = str(Path(__file__).resolve().parent.parent)  # credrank, not credrank.rerank
    frame: types.FrameType | None = sys._getframe(2)
    level = 2
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level


class AutoRetrieval:
    """The state of ``retrieval="auto"`` for one user of it — an adapter instance, a
    :class:`~credrank.searcher.Searcher`, a server: the same-model verdicts, keyed by the
    vectors' dimension, and the fallbacks already reported.

    Same-model check (:meth:`check`): a framework's stored embedding may come from any model,
    and a cosine between a query embedded by credrank and a passage embedded by another model
    of the same size is meaningless. So the first time passages come with vectors of a
    dimension, credrank embeds the first passage that carries one (its ``title\\ntext``, its
    text, and the text the framework embedded when the adapter knows it) and compares:
    cosine ≥ :data:`SAME_MODEL_COSINE` → the vectors are the embedder's model's. The verdict is
    kept for that dimension (``cache_negative=False`` keeps only a positive one: one caller's
    vectors of another model must not demote the next's — a negative verdict is then made
    again on each call that needs it; ``keep=False`` keeps none: each call is checked, what a
    server of many clients needs, where one client's vectors passing the check made another
    client's vectors of another model of the same size trusted unchecked). An instance that
    keeps verdicts is assumed to see one retriever's vectors; a later switch of model at the
    same dimension is not noticed.

    ``report`` receives each :class:`Fallback` once per cause (default: an
    :class:`EmbeddingFallbackWarning`). Thread-safe.
    """

    def __init__(self, *, cache_negative: bool = True, keep: bool = True,
                 report: Callable[[Fallback], None] | None = None) -> None:
        self.cache_negative, self.keep = cache_negative, keep
        self._report = report or _warn
        self._verdicts: dict[int, ModelCheck] = {}
        self._reported: set[str] = set()
        self._lock = threading.Lock()

    def verdict(self, dim: int) -> ModelCheck | None:
        """The kept verdict for vectors of ``dim`` numbers, if any."""
        with self._lock:
            return self._verdicts.get(dim)

    def check(self, embedder: Embedder, vector: np.ndarray, texts: Sequence[str],
              candidate: int = 0) -> ModelCheck:
        """The kept verdict for ``len(vector)``, else: embed ``texts`` (the passage that came
        with ``vector``, as it may have been embedded) and compare (class docstring)."""
        kept = self.verdict(len(vector))
        if kept is not None:
            return kept
        probes = list(dict.fromkeys(t for t in texts if t and t.strip()))
        got = np.asarray(embedder.embed(probes), dtype=np.float32)
        best = float(np.max(_cosines(got, np.asarray(vector, dtype=np.float32))))
        result = ModelCheck(best >= SAME_MODEL_COSINE, round(best, 6), candidate)
        if self.keep and (result.same_model or self.cache_negative):
            with self._lock:
                result = self._verdicts.setdefault(len(vector), result)
        return result

    def fell_back(self, fallback: Fallback) -> None:
        """Report ``fallback`` unless its cause was reported before by this instance."""
        with self._lock:
            if fallback.cause in self._reported:
                return
            self._reported.add(fallback.cause)
        self._report(fallback)


_SHARED: dict[str, AutoRetrieval] = {}
_SHARED_LOCK = threading.Lock()


def shared_auto(embedder: Embedder) -> AutoRetrieval:
    """The process's :class:`AutoRetrieval` for ``embedder`` (by name): what
    :func:`rerank` and :func:`rerank_pipeline` use unless given one (embedders are loaded
    once per process too). It keeps positive verdicts only (``cache_negative=False``): its
    callers are many, and one call's vectors of another model must not demote the next's."""
    with _SHARED_LOCK:
        if embedder.name not in _SHARED:
            _SHARED[embedder.name] = AutoRetrieval(cache_negative=False)
        return _SHARED[embedder.name]


@dataclass(frozen=True)
class Resolution:
    """What a call's retrieval was (``info["retrieval"]``): ``requested`` (``auto``,
    ``cosine``, ``given``), ``resolved`` (:data:`RESOLVED_SOURCES`), ``embedded`` (passages
    embedded here for this call; the same-model check aside), ``query`` (``embedded``,
    ``given`` or ``None`` when no query vector was needed), ``same_model`` (the check's verdict
    and ``same_model_cosine``; ``None``: not needed or not possible), ``fallback`` (why
    ``auto`` embedded, in words; ``None`` otherwise) and ``truncated`` (the ids of the passages
    embedded here whose text is longer than the embedder's window of ``window_tokens``: embedded
    from their beginning only; ``window_tokens`` is ``None`` when nothing was embedded here, so
    a call on given scores or vectors asks nothing of the model, not even to load)."""

    requested: str
    resolved: str
    embedded: int
    query: str | None
    same_model: bool | None = None
    same_model_cosine: float | None = None
    fallback: str | None = None
    truncated: tuple[str, ...] = ()
    window_tokens: int | None = None
    #: the candidates whose score was not read (``read_scores=False``: a context's relevance
    #: tiers bin cosines); ``None``: scores are read, and the key is not in :meth:`info`
    scores_unread: int | None = None

    def info(self) -> dict[str, Any]:
        out = {"requested": self.requested, "resolved": self.resolved,
               "embedded": self.embedded, "query": self.query, "same_model": self.same_model,
               "same_model_cosine": self.same_model_cosine, "fallback": self.fallback,
               "truncated": list(self.truncated), "window_tokens": self.window_tokens}
        if self.scores_unread is not None:
            out["scores_unread"] = self.scores_unread
        return out


@dataclass(frozen=True)
class Names:
    """How a door's caller calls the candidates, for errors and notices in its words:
    ``items`` (``candidates``; an adapter's ``documents`` or ``nodes``), ``score`` where a
    candidate's retrieval score was read (a format of ``items`` and ``i``:
    ``{items}[{i}].score``; LangChain's ``documents[{i}].metadata['score'] (score_key)``) and
    ``score_hint``, the way out a bad score's error ends with (``; score_key=None …``)."""

    items: str = "candidates"
    score: str = "{items}[{i}].score"
    score_hint: str = ""

    @property
    def noun(self) -> str:
        """One of :attr:`items` (``candidate``)."""
        return self.items.removesuffix("s")

    def score_at(self, i: int) -> str:
        """Where candidate ``i``'s score was read."""
        return self.score.format(items=self.items, i=i)

    def checked_score(self, i: int, score: Any) -> float:
        """:func:`_check_score` of candidate ``i``'s ``score``, its error in these words."""
        try:
            return _check_score(self.score_at(i), score)
        except CandidateError as exc:
            raise CandidateError(f"{exc}{self.score_hint}") from None


#: the words of the library and ``POST /rerank``: ``candidates[i]``, ``candidates[i].score``
CANDIDATES = Names()


def check_candidates(records: Sequence[Mapping[str, Any]], *, dim: int | None = None,
                     retrieval: str = DEFAULT_RETRIEVAL,
                     fields: MetadataFields | None = None,
                     names: Names | None = None) -> list[dict[str, Any]]:
    """Validate candidate records; return them as plain dicts (inputs are not modified).

    Each record needs a unique non-empty string ``id``; ``text`` (a string) is needed with
    ``retrieval="cosine"`` unless a ``vector`` is given (under ``auto``, only when ``auto``
    embeds: checked by :class:`GivenCandidates`, so a pool whose every passage has a score
    needs no text, as under ``given``); the fields stages read
    (:data:`~credrank.rerank.fields.EVIDENCE_FIELDS`: ``url``, ``title``, ``source_id``, the
    declared ``source_type``, the five dates, ``cites``) are checked as ``credrank index``
    checks a record's (:func:`~credrank.rerank.fields.field_value`; dates stored as ISO 8601 in
    UTC); ``score`` a finite number (required for every record when ``retrieval="given"``);
    ``vector`` ``dim`` finite numbers, as a list or as base64 of little-endian float32
    (:func:`decode_vector`); ``metadata`` a JSON object. With ``fields`` (the adapters), a field
    the record does not carry is read from its ``metadata``
    (:class:`~credrank.rerank.fields.MetadataFields`; errors name the key too). Unknown keys are
    refused (naming the known ones) so a misspelled ``vectors`` never silently triggers
    re-embedding. Raises :class:`CandidateError` naming ``candidates[i]`` in ``names``' words
    (:class:`Names`: an adapter's ``documents[i]``, ``nodes[i]``, and where it read a score).
    """
    names = names or CANDIDATES
    label = names.items
    check_retrieval(retrieval)
    if isinstance(records, (str, bytes, Mapping)) or not isinstance(records, Sequence):
        raise CandidateError(f"candidates: expected a list of objects, got "
                             f"{type(records).__name__}")
    out: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    numbers: list[int] = []  # vectors given as lists of numbers: converted together below
    for i, record in enumerate(records):
        where = f"{label}[{i}]"
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
            raise CandidateError(f"{where}.id: {doc_id!r} repeats {label}[{seen[doc_id]}]; "
                                 "ids must be unique")
        seen[doc_id] = i
        text = record.get("text")
        if text is not None and not isinstance(text, str):
            raise CandidateError(f"{where}.text: expected a string, got "
                                 f"{type(text).__name__}")
        metadata = record.get("metadata")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise CandidateError(f"{where}.metadata: expected an object, got "
                                 f"{type(metadata).__name__}")
        evidence = _evidence(record, where, fields)
        vector = record.get("vector")
        if isinstance(vector, list | tuple):
            numbers.append(i)
        elif vector is not None:
            vector = _check_vector(f"{where}.vector", vector, dim)
        elif retrieval == "cosine" and not (record.get("text") or "").strip():
            raise CandidateError(f"{where}: expected a non-empty text or a vector to embed, "
                                 "got neither (retrieval='cosine' embeds every passage "
                                 "without a vector)")
        score = record.get("score")
        if score is not None:
            score = names.checked_score(i, score)
        elif retrieval == "given":
            raise CandidateError(f"{names.score_at(i)}: required with retrieval='given' (the "
                                 f"client's retrieval score), got none{names.score_hint}")
        out.append({"id": doc_id, "text": text, **evidence, "score": score,
                    "vector": vector, "metadata": metadata})
    if fields is not None:
        missing = fields.missing([r["metadata"] for r in out])
        if missing is not None:
            raise CandidateError(missing)
    if numbers:
        for i, row in zip(numbers, _check_vectors(out, numbers, dim, label), strict=True):
            out[i]["vector"] = row
    return out


#: the largest magnitude of a candidate's ``score``: the stages add, square and weigh
#: scores, and scores near the largest float made their sums infinite (a coverage
#: objective of inf, a utility loss of NaN, the exposure solver's failure)
MAX_SCORE = 1e100


def _check_score(where: str, score: Any) -> float:
    """A retrieval score as a float: any real number (a numpy one too) that is finite as a
    float and at most :data:`MAX_SCORE` in magnitude; ``bool`` is no score."""
    if isinstance(score, bool) or not isinstance(score, _numbers.Real):
        raise CandidateError(f"{where}: expected a finite number, got {score!r}")
    try:
        value = float(score)
    except OverflowError:
        value = math.inf
    if not math.isfinite(value):
        shown = (f"an integer of about {int(score.bit_length() * math.log10(2)) + 1:,} "
                 "digits" if isinstance(score, int) else repr(score))
        raise CandidateError(f"{where}: expected a finite number, got {shown}")
    if abs(value) > MAX_SCORE:
        raise CandidateError(f"{where}: expected a number of magnitude at most {MAX_SCORE:g} "
                             f"(the stages add and square scores), got {value:g}")
    return value


def _evidence(record: Mapping[str, Any], where: str, fields: MetadataFields | None
              ) -> dict[str, Any]:
    """The record's :data:`~credrank.rerank.fields.EVIDENCE_FIELDS`, checked: its own, else
    (with ``fields``) read from its ``metadata``."""
    metadata = record.get("metadata")
    found = fields.read(metadata) if fields is not None and metadata is not None else {}
    out: dict[str, Any] = {}
    for name in EVIDENCE_FIELDS:
        raw, key = record.get(name), None
        if raw is None and name in found:
            key, raw = found[name]
        value, reason = field_value(name, raw)
        if reason is not None:
            if key is None:
                raise CandidateError(f"{where}.{name}: {reason}")
            assert fields is not None
            raise CandidateError(
                f"{where}.{name} (metadata key {key!r}): {reason}; name the key that holds it "
                f"with {fields.option}={{{name!r}: KEY}}, or {fields.option}={{{name!r}: None}} "
                "not to read it")
        out[name] = value
    return out


def _check_vectors(out: list[dict[str, Any]], rows: list[int], dim: int | None,
                   label: str = "candidates") -> list[np.ndarray]:
    """The number-list vectors of records ``rows``, converted in one call (a framework's 30
    vectors of 384 floats: one array, not 30); any that is not ``dim`` finite numbers is
    named by :func:`_check_vector`, record by record."""
    try:
        stack = np.asarray([out[i]["vector"] for i in rows], dtype=np.float64)
    except (TypeError, ValueError):
        stack = None
    if stack is None or stack.ndim != 2 or (dim is not None and stack.shape[1] != dim) \
            or not np.isfinite(stack).all() or (stack.size and np.abs(stack).max() > _F32_MAX):
        return [_check_vector(f"{label}[{i}].vector", out[i]["vector"], dim) for i in rows]
    return list(stack.astype(np.float32))


#: the largest float32: a vector is kept in float32, where a larger number is infinite
_F32_MAX = float(np.finfo(np.float32).max)


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
    over = np.flatnonzero(np.abs(arr) > _F32_MAX)
    if over.size:  # finite as float64, infinite as the float32 the vectors are kept in
        raise CandidateError(f"{where}: expected finite float32 numbers (magnitude at most "
                             f"{_F32_MAX:.4g}), got {arr[over[0]]:.4g} at [{over[0]}]")
    return arr.astype(np.float32)


class GivenCandidates(Stage):
    """A retriever stage over a fixed pool: the client's candidates, typed and scored.

    ``retrieval`` (module docstring): ``auto`` (default), ``cosine`` or ``given``. Cosine:
    ``cos(q, e_i)`` with the query embedded by ``embedder`` (or ``query_vector``) and each
    passage's ``vector`` used as given, else ``embedder`` applied to the same text indexing
    embeds (``title\\ntext``); zero-norm policy: a zero vector has cosine 0. Given: the client's
    ``score`` as it is (it enters ``max(score, 0) × Π factors``). ``with_vectors`` keeps the
    vectors on the batch (selectors such as MMR read them; passages without a usable vector are
    then embedded whatever the source). ``query_vector``: the query's embedding by the same
    model, when the client has it.

    ``auto`` keeps its state (the same-model verdicts, the fallbacks reported) in ``auto``
    (default: the process's for the embedder, :func:`shared_auto`). ``declared``: whether the
    records' vectors and ``query_vector`` are declared to be the embedder's (``POST /rerank``
    and :func:`rerank`, whose API says so: vectors that cannot be checked — no passage has both
    a vector and a text — are used, and so is ``query_vector`` unless the check failed) or
    incidental (a framework's stored embeddings, ``declared=False``: used only when the check
    passed). ``embedded_texts``: per record, the text the framework embedded (LlamaIndex embeds
    metadata with the text), tried by the check besides ``title\\ntext`` and the text.
    ``names``: the caller's words for its candidates in errors and notices (:class:`Names`).
    ``read_scores=False``: the candidates' scores play no part, and ``retrieval`` must be
    ``auto`` or ``cosine`` (a credibility-annotated context, whose relevance tiers bin cosine
    similarities: :mod:`credrank.context.given`); ``info["retrieval"]["scores_unread"]``
    counts the candidates that came with one.
    The batch's ``info["retrieval"]`` is the call's :class:`Resolution`.
    """

    name = "given"

    def __init__(self, records: Sequence[Mapping[str, Any]], embedder: Embedder,
                 typer: SourceTyper | None = None, *, retrieval: str = DEFAULT_RETRIEVAL,
                 with_vectors: bool = False,
                 query_vector: Sequence[float] | np.ndarray | None = None,
                 auto: AutoRetrieval | None = None, declared: bool = True,
                 embedded_texts: Sequence[str | None] | None = None,
                 fields: MetadataFields | None = None, names: Names | None = None,
                 read_scores: bool = True):
        self.names = names or CANDIDATES
        if not read_scores and retrieval == "given":
            raise ValueError("retrieval: expected auto or cosine when the scores are not read, "
                             "got 'given'")
        self.read_scores = read_scores
        self.scores_unread: int | None = None
        if not read_scores:  # never read, so never checked (a framework's NaN is no error)
            listed = isinstance(records, list | tuple)  # anything else: check_candidates says
            self.scores_unread = sum(isinstance(r, Mapping) and r.get("score") is not None
                                     for r in records) if listed else 0
            if listed:
                records = [{k: v for k, v in r.items() if k != "score"}
                           if isinstance(r, Mapping) else r for r in records]
        self.records = check_candidates(records, dim=embedder.dim, retrieval=retrieval,
                                        fields=fields, names=self.names)
        self.embedder, self.retrieval = embedder, retrieval
        self.query_vector = (None if query_vector is None else
                             _check_vector("query_vector", query_vector, embedder.dim))
        self.typer = typer or SourceTyper()
        self.with_vectors = with_vectors
        self.auto = auto if auto is not None else shared_auto(embedder)
        self.declared = declared
        self.embedded_texts = embedded_texts

    def transform(self, batch: Candidates) -> Candidates:
        records = self.records
        if not records:  # nothing to retrieve from: said, as every call's retrieval is
            empty = Candidates.empty(batch.query, self.embedder.dim)
            return replace(empty, info={**empty.info, "retrieval": Resolution(
                self.retrieval, "none", 0, None, scores_unread=self.scores_unread).info()})
        plan = self._plan(records)
        records = plan.records
        query_vector, query = None, None
        # the retrieval scores need the query's vector unless they are the candidates' own;
        # a stage that reads vectors (planted compares each passage with the query) needs it
        # whatever scores the candidates came with
        if plan.resolved != "given" or self.with_vectors:
            query_vector, query = (plan.query_vector, "given") if plan.query_vector is not None \
                else (np.asarray(self.embedder.embed([batch.query])[0], dtype=np.float32),
                      "embedded")
        vectors, embedded, ms, truncated, best = self._vectors(
            records, plan.resolved, query_vector if plan.resolved != "given" else None)
        if plan.fallback is not None and embedded:
            self.auto.fell_back(Fallback(*plan.fallback, embedded, self.embedder.name, ms,
                                         self.read_scores))
        if plan.resolved != "given":
            assert vectors is not None and query_vector is not None
            scores = _cosines(vectors, query_vector)
        else:
            scores = np.array([r["score"] for r in records], dtype=np.float64)
        resolution = Resolution(
            self.retrieval, plan.resolved, embedded, query,
            None if plan.check is None else plan.check.same_model,
            None if plan.check is None else plan.check.cosine,
            None if plan.fallback is None else plan.fallback[1], tuple(truncated),
            window_of(self.embedder) if embedded else None, self.scores_unread)
        provs = _payloads(self.typer, [(r["url"], r["source_type"]) for r in records])
        meta: dict[str, list[Any]] = {
            "text": [r["text"] for r in records], "client_score": [r["score"] for r in records],
            "metadata": [r["metadata"] for r in records],
        }
        if best:  # a long text scored by its best passage: that passage is the hit's text
            meta["passage"] = [None] * len(records)
            meta["passages"] = [None] * len(records)
            meta["span"] = [None] * len(records)
            for i, (number, count, (a, b)) in best.items():
                meta["text"][i] = records[i]["text"][a:b]
                meta["passage"][i], meta["passages"][i], meta["span"][i] = number, count, [a, b]
        for name in EVIDENCE_FIELDS:  # the declared source_type is in the provenance below
            if name != "source_type":
                meta[name] = [r[name] for r in records]
        # a payload has ``url_error`` only where its URL names no host: the columns are the
        # union of the keys, ``None`` where a payload lacks one
        for key in dict.fromkeys(k for p in provs for k in p):
            meta[key] = [p.get(key) for p in provs]
        info: dict[str, Any] = {"retrieval": resolution.info()}
        cut = query_truncation(self.embedder, batch.query) if query == "embedded" else None
        if cut is not None:  # the query's words past the model's window were not embedded
            info["query"] = cut
        conflicts = [{"id": r["id"], "conflict": p["provenance_conflict"]}
                     for r, p in zip(records, provs, strict=True) if p["provenance_conflict"]]
        if conflicts:  # as `credrank index` reports them: the declared type is not used
            info["provenance"] = {"conflicts": conflicts}
        return Candidates(
            query=batch.query, doc_ids=np.array([r["id"] for r in records], dtype=object),
            retrieval_score=scores,
            meta={k: _objects(v) for k, v in meta.items()},
            vectors=vectors if self.with_vectors else None, query_vector=query_vector,
            info=info)

    # -- where the retrieval score comes from --------------------------------------------------
    def _plan(self, records: list[dict[str, Any]]) -> _Plan:
        """The source of this call (module docstring) and the records as used (vectors that
        failed the same-model check removed)."""
        if self.retrieval == "given":
            return _Plan("given", records, None, None, None)
        if self.retrieval == "cosine":
            resolved = "embeddings" if all(r["vector"] is not None for r in records) \
                else "cosine"
            return _Plan(resolved, records, None, self.query_vector, None)
        n = len(records)
        with_vector = [i for i, r in enumerate(records) if r["vector"] is not None]
        without_score = [i for i, r in enumerate(records)
                         if r["score"] is None or not self.read_scores]
        negative = [i for i, r in enumerate(records)
                    if r["score"] is not None and r["score"] < 0]
        usable_scores = not without_score and not negative
        # scores when they are there and the query would have to be embedded for the vectors
        # (≈ 9 ms with MiniLM): the fast path, no check, nothing embedded
        prefer_scores = usable_scores and self.query_vector is None and not self.with_vectors
        check = None
        if with_vector and not prefer_scores and (len(with_vector) == n or not usable_scores
                                                  or self.with_vectors):
            check = self._check(records, with_vector)
        # vectors that cannot be checked are used only as declared (this API's records)
        trusted = check.same_model if check is not None else self.declared
        query_vector = self.query_vector if trusted else None
        if with_vector and not trusted:
            records = [{**r, "vector": None} if r["vector"] is not None else r
                       for r in records]
        if with_vector and trusted and len(with_vector) == n and not prefer_scores:
            return _Plan("embeddings", records, check, query_vector, None)
        if usable_scores:
            plan = _Plan("given", records, check, None, None)
        else:
            cause = self._cause(n, with_vector, trusted, check, without_score, negative)
            plan = _Plan("cosine", records, check, query_vector, cause)
        if plan.resolved == "cosine" or self.with_vectors:
            self._check_texts(plan, set(with_vector))
        return plan

    def _check_texts(self, plan: _Plan, had_vector: set[int]) -> None:
        """:class:`CandidateError` for the first passage ``auto`` must embed that has no text
        (``had_vector``: the passages that came with a vector, since removed or not)."""
        label, noun = self.names.items, self.names.noun
        need = ("the pipeline reads vectors" if plan.resolved == "given" else
                "a context's relevance tiers bin cosines" if not self.read_scores else
                f"not every {noun} has a non-negative score")
        fix = (f"or a score >= 0 with every {noun}" if self.read_scores else "or a vector of "
               "the embedder's model (a context reads no scores)")
        other = f"or every {noun}'s score, " if self.read_scores else ""
        for i, r in enumerate(plan.records):
            if r["vector"] is not None or (r["text"] or "").strip():
                continue
            if i not in had_vector:
                raise CandidateError(
                    f"{label}[{i}]: expected a non-empty text or a vector to embed, got "
                    f"neither (retrieval='auto' embeds the passages: {need}); send its text, "
                    f"{fix}")
            check = plan.check
            why = (f"could not be checked (no {noun} has both a vector and a text)"
                   if check is None else
                   f"failed the same-model check (cosine {check.cosine:.3f} < "
                   f"{SAME_MODEL_COSINE} on {label}[{check.candidate}])")
            raise CandidateError(
                f"{label}[{i}]: expected a non-empty text to embed, got none "
                f"(retrieval='auto' embeds it: its vector {why}, and {need}); send its text "
                f"{other}or retrieval='cosine' to use the vectors as they are")

    def _check(self, records: list[dict[str, Any]], with_vector: list[int]) -> ModelCheck | None:
        """The same-model verdict (:meth:`AutoRetrieval.check`) on the first passage with a
        vector and a text; ``None`` when no passage has both (and no verdict is kept)."""
        dim = self.embedder.dim
        kept = self.auto.verdict(dim)
        if kept is not None:
            return kept
        for i in with_vector:
            r = records[i]
            text = r["text"] or ""
            if text.strip():
                extra = self.embedded_texts[i] if self.embedded_texts is not None else None
                texts = [embedding_text(r["title"], text), text, *([extra] if extra else [])]
                return self.auto.check(self.embedder, r["vector"], texts, i)
        return None

    def _cause(self, n: int, with_vector: list[int], trusted: bool, check: ModelCheck | None,
               without_score: list[int], negative: list[int]) -> tuple[str, str]:
        """``(cause, detail)`` of a fallback to embedding (:class:`Fallback`)."""
        name = self.embedder.name
        if not with_vector:
            key, words = "no_embeddings", (f"no passage carries an embedding of the {name!r} "
                                           f"embedder's dimension ({self.embedder.dim})")
        elif not trusted:
            key = "other_model"
            words = (f"the passages' embeddings are not of the {name!r} model (cosine "
                     f"{check.cosine:.3f} < {SAME_MODEL_COSINE} between its embedding of "
                     f"{self.names.items}[{check.candidate}] and the vector given)"
                     if check is not None else
                     "the passages' embeddings cannot be checked (no passage has a text)")
        else:
            key, words = "some_embeddings", f"{len(with_vector)} of {n} passages carry one"
        if not self.read_scores:  # a context: scores play no part
            return key, words
        if len(without_score) == n:
            key, words = f"{key}+no_scores", f"{words}, and none a score"
        elif without_score:
            key = f"{key}+some_scores"
            words = (f"{words}, and {n - len(without_score)} of {n} a score ({self.names.items}"
                     f"[{without_score[0]}] is the first without one; a partial score column "
                     "cannot rank the others, so it is not used)")
        else:
            key = f"{key}+negative_scores"
            words = (f"{words}, and {self.names.score_at(negative[0])} is negative (auto uses "
                     "scores only as non-negative similarities)")
        return key, words

    def _vectors(self, records: list[dict[str, Any]], resolved: str,
                 query_vector: np.ndarray | None
                 ) -> tuple[np.ndarray | None, int, float, list[str],
                            dict[int, tuple[int, int, Span]]]:
        """The passages' vectors (given, else embedded here; ``None`` when only the scores
        are read), how many texts were embedded, in how many milliseconds, the ids of those
        embedded whose text is longer than the embedder's window, and the long texts scored
        by their best chunk.

        A text longer than the embedder's window is split as ``credrank index`` splits it
        (:func:`~credrank.index.passages.chunk_texts` at the embedder's window), each chunk
        embedded, and the record takes the vector of the chunk nearest ``query_vector``
        (MaxP; ``best[i]``: that chunk's ``(number, count, span)``). Without a query vector
        (scores given, vectors wanted by a selector) a text is embedded whole."""
        missing = [i for i, r in enumerate(records) if r["vector"] is None]
        if resolved == "given" and not self.with_vectors:
            return None, 0, 0.0, [], {}  # nothing downstream reads vectors: embed nothing
        out = np.zeros((len(records), self.embedder.dim), dtype=np.float32)
        for i, r in enumerate(records):
            if r["vector"] is not None:
                out[i] = r["vector"]
        ms = 0.0
        truncated: list[str] = []
        best: dict[int, tuple[int, int, Span]] = {}
        if missing:
            window = window_of(self.embedder)
            chunking = check_chunking(None, None, window if query_vector is not None else None)
            bodies = [records[i]["text"] or "" for i in missing]
            start = time.perf_counter()
            # a title over half a passage is cut to that, as `credrank index` embeds it
            titles = cut_titles(self.embedder, chunking, [records[i]["title"] for i in missing])
            spans = chunk_texts(self.embedder, chunking, titles, bodies)
            texts = [embedding_text(t, b[x:y])
                     for t, b, sp in zip(titles, bodies, spans, strict=True) for x, y in sp]
            vectors = np.asarray(self.embedder.embed(texts), dtype=np.float32)
            ms = (time.perf_counter() - start) * 1e3
            row = 0
            for i, sp in zip(missing, spans, strict=True):
                rows = vectors[row:row + len(sp)]
                pick = 0
                if len(sp) > 1:
                    assert query_vector is not None
                    pick = int(np.argmax(_cosines(rows, query_vector)))
                    best[i] = (pick, len(sp), sp[pick])
                out[i] = rows[pick]
                row += len(sp)
            over = overflowing(self.embedder)
            if over is not None:
                owners = [i for i, sp in zip(missing, spans, strict=True) for _ in sp]
                cut = {owners[j] for j, flag in enumerate(over(texts)) if flag}
                truncated = [str(records[i]["id"]) for i in missing if i in cut]
        return out, len(missing), ms, truncated, best

    def config(self) -> dict[str, Any]:
        return {"candidates": len(self.records), "retrieval": self.retrieval,
                "embedder": self.embedder.name}


@dataclass(frozen=True)
class _Plan:
    """:meth:`GivenCandidates._plan`'s answer: the ``resolved`` source, the ``records`` as used,
    the same-model ``check``, the ``query_vector`` usable (``None``: embed the query) and the
    ``fallback`` ``(cause, detail)`` when ``auto`` embeds."""

    resolved: str
    records: list[dict[str, Any]]
    check: ModelCheck | None
    query_vector: np.ndarray | None
    fallback: tuple[str, str] | None



#: per source typer, the provenance payload of each URL it typed (a typer's rules and tables
#: are fixed at construction; it caches its host lookups the same way)
_PAYLOADS: weakref.WeakKeyDictionary[
    SourceTyper, dict[tuple[str | None, str | None], dict[str, Any]]] = \
    weakref.WeakKeyDictionary()
_PAYLOADS_MAX = 65_536
_PAYLOADS_LOCK = threading.Lock()


def _payloads(typer: SourceTyper, sources: list[tuple[str | None, str | None]]
              ) -> list[dict[str, Any]]:
    """``provenance_payload(typer.classify(url, declared))`` for each ``(url, declared
    source_type)``, each pair typed once per typer (a framework adapter sees the same corpus's
    URLs query after query; typing a URL is most of a 30-passage rerank's time otherwise).
    Read-only dicts, shared between calls."""
    with _PAYLOADS_LOCK:
        cache = _PAYLOADS.get(typer)
        if cache is None or len(cache) > _PAYLOADS_MAX:
            cache = _PAYLOADS[typer] = {}
    new = [s for s in dict.fromkeys(sources) if s not in cache]
    if new:
        typed = typer.classify_many([u for u, _ in new], [d for _, d in new])
        cache.update(zip(new, (provenance_payload(p) for p in typed), strict=True))
    return [cache[s] for s in sources]


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


@cache
def default_spec() -> PipelineSpec:
    """What runs when no pipeline is given: ``credrank search`` without options — the source
    prior (``current``), ``multiply``, top-10 of a pool of 30."""
    return PipelineSpec.of("prior")


def as_spec(spec: PipelineSpec | Mapping[str, Any] | None) -> PipelineSpec:
    """``spec`` as a validated :class:`~credrank.pipeline.spec.PipelineSpec`: its plain data
    checked (:meth:`PipelineSpec.from_dict`), a spec as it is when validated, else checked
    (:attr:`PipelineSpec.checked`), ``None`` the :func:`default_spec`."""
    if spec is None:
        return default_spec()
    if isinstance(spec, PipelineSpec):
        return spec.checked  # one its constructor made is validated now (once)
    if isinstance(spec, Mapping):
        return PipelineSpec.from_dict(dict(spec))
    raise TypeError(f"pipeline: expected a PipelineSpec, a dict or None, got "
                    f"{type(spec).__name__}")


#: the spec's retrieval-side keys: what a door that reranks candidates retrieved elsewhere
#: requires of each (its default), that in words, and why another value cannot apply there
RERANK_KEYS: dict[str, tuple[Any, str, str]] = {
    "retrieval": ("dense", "'dense' (the default)",
                  "candidates retrieved elsewhere are not retrieved again; the retrieval option "
                  "(auto, cosine or given) says where their retrieval score comes from (given: "
                  "their own scores, a BM25 run's included)"),
    "unit": ("document", "'document' (the default)",
             "each candidate retrieved elsewhere is one unit (a text longer than the "
             "embedder's window is scored by its best chunk)"),
    "pushdown": (None, "null or false",
                 "candidates retrieved elsewhere are scored in Python, never in an engine"),
}


def check_rerank_spec(spec: PipelineSpec, where: str = "pipeline") -> PipelineSpec:
    """``spec`` if its retrieval-side keys can apply where candidates come retrieved
    elsewhere (:data:`RERANK_KEYS`: ``retrieval`` dense, ``unit`` document, ``pushdown`` not
    true), else :class:`~credrank.pipeline.spec.SpecError` at that key (``where``: how the
    door names the spec): a ``credrank search --lexical`` spec reranked here ran as a dense
    one, without a word. The check of the doors that rerank (:func:`rerank_pipeline`, the
    adapters)."""
    for key, (default, expected, why) in RERANK_KEYS.items():
        value = getattr(spec, key)
        if value != default and not (key == "pushdown" and value is False):
            shown = "true" if value is True else repr(value)
            detail = f"expected {expected}, got {shown}: {why}; drop {key!r} from the spec"
            raise SpecError(f"{where}: {key}: {detail}", key, detail)
    return spec


def rerank_pipeline(records: Sequence[Mapping[str, Any]], embedder: Embedder,
                    spec: PipelineSpec | Mapping[str, Any] | None = None,
                    typer: SourceTyper | None = None, *,
                    retrieval: str = DEFAULT_RETRIEVAL,
                    query_vector: Sequence[float] | np.ndarray | None = None,
                    resources: Mapping[str, str | Path] | None = None,
                    allow_paths: bool = True, auto: AutoRetrieval | None = None) -> Pipeline:
    """``GivenCandidates(records) >> the stages of spec`` (prior, signals, combine, selector),
    the Python path of ``credrank search`` over the given pool (stages built by
    :func:`credrank.pipeline.compile.build_stages`; ``resources`` and ``allow_paths`` say
    which files the spec may name). ``fetch_k`` plays no part (the pool is the records);
    ``top_k`` cuts as usual; ``retrieval``, ``unit`` and ``pushdown`` cannot apply and must be
    their defaults (:func:`check_rerank_spec`). ``retrieval`` and ``auto``:
    :class:`GivenCandidates`. A :class:`~credrank.searcher.Searcher` (and the adapters)
    compile a spec once instead.
    """
    ctx = context(embedder=embedder, resources=resources, allow_paths=allow_paths)
    stages = build_stages(check_rerank_spec(as_spec(spec), "spec"), ctx)
    given = GivenCandidates(records, embedder, typer, retrieval=retrieval,
                            with_vectors="vectors" in reads(stages),
                            query_vector=query_vector, auto=auto)
    return Pipeline([given, *stages])


def rerank(query: str, records: Sequence[Mapping[str, Any]],
           embedder: Embedder | str | None = "minilm",
           spec: PipelineSpec | Mapping[str, Any] | None = None,
           typer: SourceTyper | None = None, *, retrieval: str = DEFAULT_RETRIEVAL,
           query_vector: Sequence[float] | np.ndarray | None = None,
           auto: AutoRetrieval | None = None,
           resources: Mapping[str, str | Path] | None = None,
           allow_paths: bool = True) -> Candidates:
    """Rerank ``records`` for ``query`` (see :func:`rerank_pipeline`). ``embedder`` may be
    a name (:func:`credrank.index.embed.get_embedder`), ``spec`` a pipeline spec or its
    plain data (default: :func:`default_spec`). ``retrieval``: ``auto`` (default),
    ``cosine`` or ``given`` (module docstring); ``auto`` keeps its state in ``auto``
    (default: the process's for the embedder, :func:`shared_auto`). What was used is in the
    result's ``info["retrieval"]``. ``from credrank import rerank`` is this module, and
    calling it calls this function. ``embedder=None`` is the default (``minilm``); anything
    else that is neither a name nor an :class:`~credrank.core.embedder.Embedder` is a
    ``TypeError`` naming it (a spec passed third, for one); so is a ``typer`` that is no
    :class:`~credrank.provenance.SourceTyper`. Options such as ``top_k`` go in ``spec``
    (``{"top_k": 3}``); ``resources`` and ``allow_paths``: :func:`rerank_pipeline`."""
    if typer is not None and not isinstance(typer, SourceTyper):
        raise TypeError(f"typer: expected a SourceTyper or None, got {type(typer).__name__}")
    if embedder is None:
        embedder = "minilm"
    if isinstance(embedder, str):
        from credrank.index.embed import get_embedder

        embedder = get_embedder(embedder)
    elif not isinstance(embedder, Embedder):
        raise TypeError(f"embedder: expected an embedder name ('minilm', 'hashing', …) or an "
                        f"Embedder, got {type(embedder).__name__}"
                        + ("; the spec is the fourth argument (or spec=)"
                           if isinstance(embedder, Mapping | PipelineSpec) else ""))
    return rerank_pipeline(records, embedder, spec, typer, retrieval=retrieval,
                           query_vector=query_vector, auto=auto, resources=resources,
                           allow_paths=allow_paths).search(query)


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
