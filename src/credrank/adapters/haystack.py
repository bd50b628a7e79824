"""Haystack component (2.x, 3.x): :class:`CredibilityRanker` (`pip install credrank[haystack]`).

A ranker to put after any retriever (ask it for ~3 × ``top_k`` documents: the expanded pool)::

    from haystack import Pipeline
    from credrank.adapters.haystack import CredibilityRanker

    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryEmbeddingRetriever(store, top_k=30))
    pipe.add_component("ranker", CredibilityRanker(top_k=10, priors="current"))
    pipe.connect("retriever.documents", "ranker.documents")

Any pipeline of ``credrank search`` runs here: ``CredibilityRanker(pipeline="spec.toml")`` (a
spec file, a spec dict or a :class:`~credrank.pipeline.spec.PipelineSpec`; the keyword options
``priors``, ``mode``, ``select`` … are shortcuts for the common stages, see
:mod:`credrank.adapters._common`).

``to_dict``/``from_dict`` carry the adapter options and the pipeline as a spec
(``init_parameters["pipeline"]``; ``Pipeline.dumps``/``loads``; Haystack 3 asks for
``allowed_modules=["credrank.adapters.haystack"]`` when loading).

Each returned document is a new :class:`~haystack.Document` (``dataclasses.replace`` of the
input: the inputs are never modified) with ``score`` = credrank's final score and
``meta["credrank"]`` = its breakdown (rank, score, source_type, host, rule, url, retrieval,
embedder, ``score_breakdown``); every other meta key is kept. The URL, the dates and
the other fields the stages read come from ``meta`` (default keys or ``fields=``,
:mod:`credrank.adapters._common`); a document without a URL is typed ``unknown``.

The default ``retrieval="auto"`` reuses what the retriever left (see
:mod:`credrank.adapters._common`): the documents' ``embedding`` when they are of the embedder's
model (checked once per component: the first such document is embedded and compared), with the
query's embedding when the pipeline connects it (``query_embedding``, e.g. from the text
embedder that fed the retriever) so nothing is embedded at all; else ``Document.score``; else
credrank embeds the documents (a one-time warning says what it costs).
``meta["credrank"]["retrieval"]`` says which.

The credibility-annotated context (chapter 35.4) of the same documents, for a generator's
prompt: ``ranker.context(documents, query, now=…, half_life=…)`` (a
:class:`~credrank.context.build.ContextDocument`: ``.render("cag")`` is the prompt,
``.to_json("cag")`` the ``POST /context`` document; :mod:`credrank.adapters._common`). The
passages' ``doc_id`` are the documents' positions in ``documents``.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Unpack

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("credrank.adapters.haystack needs Haystack (2.x or 3.x): "
                      "pip install 'credrank[haystack]'") from exc

from credrank.adapters._common import (
    BREAKDOWN_KEY,
    ContextOptions,
    CredrankScorer,
    Passage,
    options_doc,
    signature,
)
from credrank.context.build import ContextDocument
from credrank.pipeline.spec import PipelineSpec
from credrank.rerank import Names

#: how errors name the documents and their scores (``documents[0].score: expected …``)
NAMES = Names("documents", "{items}[{i}].score",
              "; Document.score is the retriever's: a finite number or None, or "
              "retrieval='cosine' not to read it")


@component
class CredibilityRanker:
    """Rerank documents with a credrank pipeline (by default similarity × source-reliability
    prior), as ``credrank search`` ranks them.

    ``pipeline`` is a spec, the other parameters are the options every adapter takes,
    declared once (:data:`credrank.adapters._common.OPTIONS`; this signature and the
    parameter list below are made from it).

    :raises ValueError: a bad option or spec, naming the parameter (``priors: …``,
        ``pipeline: stages[1].half_life: …``).
    """

    def __init__(self, pipeline: PipelineSpec | dict[str, Any] | str | Path | None = None,
                 **options: Any) -> None:
        self._scorer = CredrankScorer(pipeline, **options)

    __init__.__signature__ = signature()  # type: ignore[attr-defined]

    @property
    def spec(self) -> PipelineSpec:
        """The pipeline this ranker runs."""
        return self._scorer.spec

    @property
    def top_k(self) -> int:
        """The number of documents returned (the spec's ``top_k``; ``run(top_k=…)`` changes
        it for one call)."""
        return self._scorer.top_k

    def warm_up(self) -> None:
        """Load the embedder when a run may well embed (``retrieval="cosine"``, a stance
        stage or one that reads the vectors: :meth:`CredrankScorer.embeds
        <credrank.adapters._common.CredrankScorer.embeds>`). Haystack calls this before the
        first run; under ``auto`` and ``given`` the retrievers' scores need no model, which is
        then loaded by the first run that embeds (so ``credrank[haystack]`` alone serves the
        fast path)."""
        if self._scorer.embeds():
            self._scorer.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """The component and its init parameters (for ``Pipeline.dumps``): the adapter
        options and ``pipeline`` (the spec, every stage's parameters written out)."""
        return default_to_dict(self, **self._scorer.init_parameters())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CredibilityRanker:
        """The component from :meth:`to_dict`'s output."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], query: str, top_k: int | None = None,
            query_embedding: list[float] | None = None) -> dict[str, list[Document]]:
        """Rerank ``documents`` for ``query``; the best ``top_k`` as new documents.

        :param query_embedding: the query's embedding by the model that embedded the
            documents (optional): with ``retrieval="auto"`` and documents whose embeddings
            pass the same-model check, the query is then not embedded again.
        :returns: ``{"documents": [...]}``, best first, each with ``score`` and
            ``meta["credrank"]``.
        """
        ranked = self._scorer.rank(query, _passages(documents), top_k,
                                   query_vector=query_embedding, names=NAMES)
        out = []
        for r in ranked:
            doc = documents[r.index]
            out.append(dataclasses.replace(doc, score=r.score,
                                           meta={**doc.meta, BREAKDOWN_KEY: r.breakdown}))
        return {"documents": out}

    def context(self, documents: list[Document], query: str, top_k: int | None = None,
                query_embedding: list[float] | None = None,
                **options: Unpack[ContextOptions]) -> ContextDocument:
        """The credibility-annotated context (chapter 35.4) of ``documents`` for ``query``:
        ranked as :meth:`run` ranks them, the best ``top_k`` tiered as ``credrank context``
        tiers a search (:meth:`CredrankScorer.context
        <credrank.adapters._common.CredrankScorer.context>`; ``options``: ``now``,
        ``half_life``, ``undated``, ``granularity``, ``source_tier``, ``text``, the library's
        names and checks). Each passage's ``doc_id`` is the document's position in
        ``documents`` (``documents[int(p.doc_id)]``). ``Document.score`` is not read
        (relevance tiers bin cosines); the documents are embedded unless their ``embedding``
        is of the embedder's model (``query_embedding``: as in :meth:`run`).

        :returns: the :class:`~credrank.context.build.ContextDocument`: ``.render("cag")``
            the prompt, ``.to_json("cag")`` the ``POST /context`` document.
        :raises ValueError: ``retrieval="given"`` configured, a bad option naming it, a bad
            document (``documents[i]…``).
        """
        return self._scorer.context(query, _passages(documents), top_k,
                                    query_vector=query_embedding, names=NAMES, **options)


def _passages(documents: list[Document]) -> list[Passage]:
    """The documents as credrank sees them: text, meta, score and embedding."""
    return [Passage(text=doc.content, metadata=doc.meta, score=doc.score,
                    embedding=doc.embedding) for doc in documents]


CredibilityRanker.__doc__ = f"{CredibilityRanker.__doc__}\n{options_doc()}\n"
