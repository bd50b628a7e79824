"""Haystack 2 component: :class:`CredibilityRanker` (``pip install 'credrank[haystack]'``).

A ranker to put after any retriever (ask it for ~3 × ``top_k`` documents: the expanded pool)::

    from haystack import Pipeline
    from credrank.adapters.haystack import CredibilityRanker

    pipe = Pipeline()
    pipe.add_component("retriever", InMemoryEmbeddingRetriever(store, top_k=30))
    pipe.add_component("ranker", CredibilityRanker(top_k=10, priors="current"))
    pipe.connect("retriever.documents", "ranker.documents")

``to_dict``/``from_dict`` carry every init parameter (``Pipeline.dumps``/``loads``; Haystack 3
asks for ``allowed_modules=["credrank.adapters.haystack"]`` when loading).

Each returned document is a new :class:`~haystack.Document` (``dataclasses.replace`` of the
input: the inputs are never modified) with ``score`` = credrank's final score and
``meta["credrank"]`` = its breakdown (rank, score, source_type, host, rule, url, retrieval,
embedder, ``score_breakdown``); every other meta key is kept. The URL is read from
``meta["url"]`` (else ``source``, ``link``; or ``url_key``); a document without one is typed
``unknown``. ``Document.embedding`` is used only with ``use_given_embeddings=True`` and the
embedder's dimension (see :mod:`credrank.adapters._common`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

try:
    from haystack import Document, component, default_from_dict, default_to_dict
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("credrank.adapters.haystack needs Haystack 2: "
                      "pip install 'credrank[haystack]'") from exc

from credrank.adapters._common import BREAKDOWN_KEY, CredrankScorer, Passage


@component
class CredibilityRanker:
    """Rerank documents by similarity × source-reliability prior, as ``credrank search``.

    :param embedder: ``"minilm"`` (default) or ``"hashing"`` (no model; tests).
    :param priors: a preset name (default ``"current"``), a prior file, or ``None`` for the
        similarity-only baseline.
    :param mode: how the factors combine (``credrank search --mode``).
    :param top_k: documents returned (``run(top_k=…)`` overrides it per call).
    :param select: a selector (``mmr``, ``coverage``, ``exposure``, ``fair``) and its
        ``select_params``.
    :param tables: domain-table CSV paths for the source typer.
    :param url_key: the meta key holding the URL (default: ``url``, ``source``, ``link``).
    :param title_key: the meta key holding the title (embedded as ``title\\ntext``).
    :param retrieval: ``"cosine"`` (embedding cosine) or ``"given"`` (``Document.score``).
    :param use_given_embeddings: use ``Document.embedding`` when its dimension is the
        embedder's (only if the documents were embedded by the same model).
    :param domain_scores: use the domain tables' scores (``--domain-scores``).
    :param priors_store: a feedback store directory (``--priors-store``).
    :param source_reliability: a reliability estimate file (``--source-reliability``).
    :raises ValueError: a bad option, with the message of ``credrank search``.
    """

    def __init__(self, embedder: str = "minilm", priors: str | None = "current",
                 mode: str = "multiply", top_k: int = 10, select: str | None = None,
                 select_params: dict[str, Any] | None = None, tables: list[str] | None = None,
                 url_key: str | None = None, title_key: str | None = "title",
                 retrieval: str = "cosine", use_given_embeddings: bool = False,
                 domain_scores: bool = False, priors_store: str | None = None,
                 source_reliability: str | None = None) -> None:
        self._scorer = CredrankScorer(
            embedder=embedder, priors=priors, mode=mode, top_k=top_k, select=select,
            select_params=select_params, tables=list(tables or []), url_key=url_key,
            title_key=title_key, retrieval=retrieval,
            use_given_embeddings=use_given_embeddings, domain_scores=domain_scores,
            priors_store=priors_store, source_reliability=source_reliability)

    def warm_up(self) -> None:
        """Load the embedder (Haystack calls this before the first run)."""
        self._scorer.warm_up()

    def to_dict(self) -> dict[str, Any]:
        """The component and its init parameters (for ``Pipeline.dumps``)."""
        return default_to_dict(self, **self._scorer.init_parameters())

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CredibilityRanker:
        """The component from :meth:`to_dict`'s output."""
        return default_from_dict(cls, data)

    @component.output_types(documents=list[Document])
    def run(self, documents: list[Document], query: str, top_k: int | None = None
            ) -> dict[str, list[Document]]:
        """Rerank ``documents`` for ``query``; the best ``top_k`` as new documents.

        :returns: ``{"documents": [...]}``, best first, each with ``score`` and
            ``meta["credrank"]``.
        """
        passages = [Passage(text=doc.content, metadata=doc.meta, score=doc.score,
                            embedding=doc.embedding) for doc in documents]
        ranked = self._scorer.rank(query, passages, top_k)
        out = []
        for r in ranked:
            doc = documents[r.index]
            out.append(dataclasses.replace(doc, score=r.score,
                                           meta={**doc.meta, BREAKDOWN_KEY: r.breakdown}))
        return {"documents": out}
