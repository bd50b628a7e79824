"""The learned credibility computed at index time and kept in the payload.

``credrank score credibility --index DIR --model MODEL`` (or ``credrank index CORPUS --index
DIR --credibility-model MODEL``) stores, for every document, ``p = P(credible)`` of the model
in the payload field :data:`FIELD` (``credibility``) and the model's key
(:attr:`~credrank.credibility.modelfile.SavedCredibilityModel.key`) in :data:`KEY_FIELD`
(``credibility_key``), through the resumable, chunked index-time score mechanism of
:mod:`credrank.index.scoring` (a run stopped at any point keeps what it wrote; re-running
scores the rest, no document twice). A search with the same model reads ``p`` back (the
:class:`~credrank.stages.credibility.LearnedCredibilityPrior` stage) and, when every document
holds it, scores the factor in the engine's formula (pushdown).

**No embedder at scoring time** for a model whose embedding feature is the ``document`` source
(every ``credrank credibility fit`` since this source exists): the feature *is* the dense
vector the index stores, read with the payload, so a refit (a new model file, a new key)
rescores the index in the time the cue regexes take. A model with the ``head`` source (older
files) embeds each document's first words with the index's embedder, as its searches did.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from credrank.core.embedder import Embedder
from credrank.credibility.modelfile import SavedCredibilityModel
from credrank.index.scoring import (
    CHUNK,
    ScoreJob,
    ScoreReport,
    count_scored,
    index_key_field,
    index_score_field,
    score_store,
)

#: the payload field of ``P(credible)`` and of the key of the model that computed it
FIELD = "credibility"
KEY_FIELD = "credibility_key"
#: the command that adds the scores to an index (named by the missing-score errors)
COMMAND = "credrank score credibility --index DIR --model MODEL"


def command(index: str | None = None, model: str | None = None) -> str:
    """:data:`COMMAND` with the index directory and the model file filled in where known."""
    return (f"credrank score credibility --index {index or 'DIR'} "
            f"--model {model or 'MODEL'}")


def credibility_job(model: SavedCredibilityModel, embedder: Embedder | None = None
                    ) -> ScoreJob:
    """The :class:`~credrank.index.scoring.ScoreJob` of ``model``: it reads each document's
    text, url and title and — for the ``document`` embedding source — its stored vector;
    ``embedder`` is used only by a ``head`` model (default: the model's own embedder)."""
    uses_vectors = model.needs_embedder and model.embedding_source == "document"
    if embedder is not None and model.needs_embedder:
        model.bind(embedder)  # else the model's embedder, loaded at its first use (if any)

    def score(records: Sequence[Mapping[str, Any]]) -> np.ndarray:
        texts = [str(r.get("text") or "") for r in records]
        urls = [None if r.get("url") is None else str(r["url"]) for r in records]
        titles = [r.get("title") if isinstance(r.get("title"), str) else None
                  for r in records]
        vectors = [r.get("vector") for r in records] if uses_vectors else None
        return np.asarray(model(texts, urls, titles=titles, vectors=vectors),
                          dtype=np.float64)

    return ScoreJob(FIELD, model.key, score_records=score, fields=("url", "title"),
                    vectors=uses_vectors)


def score_index(store: Any, model: SavedCredibilityModel, *, embedder: Embedder | None = None,
                chunk: int = CHUNK, on_start: Callable[[int, int], None] | None = None,
                on_chunk: Callable[[int], None] | None = None) -> ScoreReport:
    """Store ``P(credible)`` of ``model`` for every document of the open (writable) ``store``
    not yet scored with its key (module docstring); the callbacks are those of
    :func:`~credrank.index.scoring.score_store`. Also indexes the key field, so a search's
    :func:`coverage` is one lookup, and the score field, which the engine's formula reads
    when the factor is pushed down."""
    model.check_store(store)
    index_key_field(store, FIELD)
    index_score_field(store, FIELD)
    return score_store(store, credibility_job(model, embedder), chunk=chunk,
                       on_start=on_start, on_chunk=on_chunk)


def coverage(store: Any, key: str) -> tuple[int, int]:
    """``(documents holding a score of key, documents)`` of ``store``: every document is
    scored with ``key`` when the two are equal (and not zero)."""
    return count_scored(store, FIELD, key), len(store)


__all__ = ["COMMAND", "FIELD", "KEY_FIELD", "command", "coverage", "credibility_job",
           "score_index"]
