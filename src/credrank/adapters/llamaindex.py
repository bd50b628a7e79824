"""LlamaIndex node postprocessor: :class:`CredibilityPostprocessor`
(``pip install 'credrank[llamaindex]'``).

Put it after a retriever that returns ~3 × ``top_k`` nodes (the expanded pool)::

    from credrank.adapters.llamaindex import CredibilityPostprocessor

    engine = index.as_query_engine(similarity_top_k=30, node_postprocessors=[
        CredibilityPostprocessor(top_k=10, priors="current")])

Each returned :class:`~llama_index.core.schema.NodeWithScore` holds a *copy* of the input node
(``model_copy``: the input nodes and their metadata are never modified) with ``score`` =
credrank's final score and ``metadata["credrank"]`` = the breakdown (rank, score, source_type,
host, rule, url, retrieval, embedder, ``score_breakdown``); every other metadata key is kept.
The ``credrank`` key is added to the copy's ``excluded_embed_metadata_keys`` and
``excluded_llm_metadata_keys``: it never changes the text an embedding model or the LLM sees
(remove it from ``excluded_llm_metadata_keys`` to show the source type to the LLM). The URL is
read from ``metadata["url"]`` (else ``source``, ``link``; or ``url_key``); a node without one is
typed ``unknown``. ``node.embedding`` is used only with ``use_given_embeddings=True`` and the
embedder's dimension (see :mod:`credrank.adapters._common`).
"""

from __future__ import annotations

from typing import Any

try:
    from llama_index.core.bridge.pydantic import Field, PrivateAttr
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("credrank.adapters.llamaindex needs llama-index-core: "
                      "pip install 'credrank[llamaindex]'") from exc

from credrank.adapters._common import BREAKDOWN_KEY, CredrankScorer, Passage


class CredibilityPostprocessor(BaseNodePostprocessor):
    """Rerank nodes by similarity × source-reliability prior, as ``credrank search``.

    Fields as the options of ``credrank search`` (see
    :class:`credrank.adapters._common.CredrankScorer`); validated at construction (a bad
    ``priors`` raises the CLI's message, inside pydantic's ``ValidationError``, a
    ``ValueError``). ``retrieval="given"`` uses ``NodeWithScore.score``.
    """

    embedder: str = Field(default="minilm", description="'minilm' or 'hashing' (tests).")
    priors: str | None = Field(default="current",
                               description="Prior preset or file; None: similarity only.")
    mode: str = Field(default="multiply", description="How the factors combine.")
    top_k: int = Field(default=10, description="Nodes returned.")
    select: str | None = Field(default=None, description="mmr, coverage, exposure or fair.")
    select_params: dict[str, Any] | None = Field(default=None,
                                                 description="The selector's parameters.")
    tables: list[str] = Field(default_factory=list,
                              description="Domain-table CSV paths for the source typer.")
    url_key: str | None = Field(default=None,
                                description="Metadata key of the URL (default url/source/link).")
    title_key: str | None = Field(default="title", description="Metadata key of the title.")
    retrieval: str = Field(default="cosine",
                           description="'cosine' (credrank's embedder) or 'given' (node score).")
    use_given_embeddings: bool = Field(
        default=False, description="Use node.embedding when its dimension is the embedder's "
        "(only if the nodes were embedded by the same model).")
    domain_scores: bool = Field(default=False, description="Use the domain tables' scores.")
    priors_store: str | None = Field(default=None, description="A feedback store directory.")
    source_reliability: str | None = Field(default=None,
                                           description="A reliability estimate file.")
    _scorer: CredrankScorer = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._scorer = CredrankScorer(
            embedder=self.embedder, priors=self.priors, mode=self.mode, top_k=self.top_k,
            select=self.select, select_params=self.select_params, tables=list(self.tables),
            url_key=self.url_key, title_key=self.title_key, retrieval=self.retrieval,
            use_given_embeddings=self.use_given_embeddings, domain_scores=self.domain_scores,
            priors_store=self.priors_store, source_reliability=self.source_reliability)

    @classmethod
    def class_name(cls) -> str:
        return "CredibilityPostprocessor"

    def warm_up(self) -> None:
        """Load the embedder now rather than on the first query."""
        self._scorer.warm_up()

    def _postprocess_nodes(self, nodes: list[NodeWithScore],
                           query_bundle: QueryBundle | None = None) -> list[NodeWithScore]:
        if query_bundle is None:
            raise ValueError("query_bundle: expected the query (credrank ranks for a query), "
                             "got None")
        passages = [Passage(text=n.node.get_content(metadata_mode=MetadataMode.NONE),
                            metadata=n.node.metadata, score=n.score,
                            embedding=n.node.embedding) for n in nodes]
        out = []
        for r in self._scorer.rank(query_bundle.query_str, passages):
            node = nodes[r.index].node
            copy = node.model_copy(update={
                "metadata": {**node.metadata, BREAKDOWN_KEY: r.breakdown},
                "excluded_embed_metadata_keys": _with_key(node.excluded_embed_metadata_keys),
                "excluded_llm_metadata_keys": _with_key(node.excluded_llm_metadata_keys),
            })
            out.append(NodeWithScore(node=copy, score=r.score))
        return out


def _with_key(keys: list[str]) -> list[str]:
    return list(keys) if BREAKDOWN_KEY in keys else [*keys, BREAKDOWN_KEY]
