"""LlamaIndex node postprocessor: :class:`CredibilityPostprocessor`
(``pip install 'credrank[llamaindex]'``).

Put it after a retriever that returns ~3 × ``top_k`` nodes (the expanded pool)::

    from credrank.adapters.llamaindex import CredibilityPostprocessor

    engine = index.as_query_engine(similarity_top_k=30, node_postprocessors=[
        CredibilityPostprocessor(top_k=10, priors="current")])

Any pipeline of ``credrank search`` runs here: ``CredibilityPostprocessor(pipeline="spec.toml")``
(a spec file, a spec dict or a :class:`~credrank.pipeline.spec.PipelineSpec`; ``priors``,
``mode``, ``select`` … are shortcuts for the common stages, see :mod:`credrank.adapters._common`).

Each returned :class:`~llama_index.core.schema.NodeWithScore` holds a *copy* of the input node
(``model_copy``: the input nodes and their metadata are never modified) with ``score`` =
credrank's final score and ``metadata["credrank"]`` = the breakdown (rank, score, source_type,
host, rule, url, retrieval, embedder, ``score_breakdown``); every other metadata key is kept.
The ``credrank`` key is added to the copy's ``excluded_embed_metadata_keys`` and
``excluded_llm_metadata_keys``: it never changes the text an embedding model or the LLM sees
(remove it from ``excluded_llm_metadata_keys`` to show the source type to the LLM). The URL, the
dates and the other fields the stages read come from ``node.metadata`` (default keys or
``fields=``, :mod:`credrank.adapters._common`); a node without a URL is typed ``unknown``.

The default ``retrieval="auto"`` reuses what the retriever left (see
:mod:`credrank.adapters._common`): the nodes' ``embedding`` when they are of the embedder's
model (checked once per postprocessor: the first such node is embedded and compared, its
``MetadataMode.EMBED`` content tried as LlamaIndex embedded it), with the query's
``QueryBundle.embedding`` (set by LlamaIndex's vector retrievers) so nothing is embedded at
all; else ``NodeWithScore.score``; else credrank embeds the nodes (a one-time warning says what
it costs). ``metadata["credrank"]["retrieval"]`` says which.

The credibility-annotated context (chapter 35.4) of the same nodes, for a prompt:
``post.context(nodes, "query" or QueryBundle, now=…, half_life=…)`` (a
:class:`~credrank.context.build.ContextDocument`: ``.render("cag")`` is the prompt,
``.to_json("cag")`` the ``POST /context`` document; :mod:`credrank.adapters._common`). The
passages' ``doc_id`` are the nodes' positions in ``nodes``.
"""

from __future__ import annotations

from typing import Any, Unpack

try:
    from llama_index.core.bridge.pydantic import (
        ConfigDict,
        Field,
        PrivateAttr,
        SerializationInfo,
        SerializerFunctionWrapHandler,
        create_model,
        model_serializer,
    )
    from llama_index.core.postprocessor.types import BaseNodePostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("credrank.adapters.llamaindex needs llama-index-core: "
                      "pip install 'credrank[llamaindex]'") from exc

from credrank.adapters._common import (
    BREAKDOWN_KEY,
    ContextOptions,
    CredrankScorer,
    Passage,
    ScorerFields,
    pydantic_fields,
)
from credrank.context.build import ContextDocument
from credrank.pipeline.spec import PipelineSpec
from credrank.rerank import Names

#: how errors name the nodes and their scores (``nodes[0].score: expected a finite number``)
NAMES = Names("nodes", "{items}[{i}].score",
              "; NodeWithScore.score is the retriever's: a finite number or None, or "
              "retrieval='cosine' not to read it")

#: the fields of the postprocessor: the options every adapter takes, declared once
#: (:data:`credrank.adapters._common.OPTIONS`), and ``pipeline``
_Fields = create_model(  # type: ignore[call-overload]  # fields as a dict of (type, Field)
    "_CredibilityPostprocessorFields", __base__=BaseNodePostprocessor, __module__=__name__,
    **pydantic_fields(Field))


class CredibilityPostprocessor(ScorerFields, _Fields):  # type: ignore[misc,valid-type]
    """Rerank nodes with a credrank pipeline (by default similarity × source-reliability
    prior), as ``credrank search`` ranks them.

    Fields: ``pipeline`` (a spec) and the options every adapter takes
    (:data:`credrank.adapters._common.OPTIONS`), validated at construction (a bad ``priors``
    or spec raises its message, naming the field, inside pydantic's ``ValidationError``, a
    ``ValueError``; an unknown option is a ``TypeError`` naming it; an option assigned later is
    validated and takes effect: :class:`~credrank.adapters._common.ScorerFields`).
    ``retrieval``: ``auto`` (default; module docstring), ``cosine`` or ``given``
    (``NodeWithScore.score``). ``to_dict`` / ``from_dict`` carry the adapter options and
    ``pipeline`` as a spec.
    """

    model_config = ConfigDict(extra="forbid")

    _scorer: CredrankScorer = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        self._scorer = self._scorer_with()

    @model_serializer(mode="wrap")
    def _serialise(self, handler: SerializerFunctionWrapHandler,
                   info: SerializationInfo) -> dict[str, Any]:
        """The adapter options and ``pipeline`` = the spec (what ``from_dict`` reads back)."""
        return {**self._scorer.init_parameters(), "class_name": self.class_name()}

    @property
    def spec(self) -> PipelineSpec:
        """The pipeline this postprocessor runs."""
        return self._scorer.spec

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
        out = []
        for r in self._scorer.rank(query_bundle.query_str, _passages(self._scorer, nodes),
                                   query_vector=query_bundle.embedding, names=NAMES):
            node = nodes[r.index].node
            copy = node.model_copy(update={
                "metadata": {**node.metadata, BREAKDOWN_KEY: r.breakdown},
                "excluded_embed_metadata_keys": _with_key(node.excluded_embed_metadata_keys),
                "excluded_llm_metadata_keys": _with_key(node.excluded_llm_metadata_keys),
            })
            out.append(NodeWithScore(node=copy, score=r.score))
        return out

    def context(self, nodes: list[NodeWithScore], query: str | QueryBundle,
                top_k: int | None = None,
                **options: Unpack[ContextOptions]) -> ContextDocument:
        """The credibility-annotated context (chapter 35.4) of ``nodes`` for ``query`` (the
        query string or its ``QueryBundle``, whose ``embedding`` is used as
        :meth:`postprocess_nodes` uses it): ranked as :meth:`postprocess_nodes` ranks them,
        the best ``top_k`` tiered as ``credrank context`` tiers a search
        (:meth:`CredrankScorer.context <credrank.adapters._common.CredrankScorer.context>`;
        ``options``: ``now``, ``half_life``, ``undated``, ``granularity``, ``source_tier``,
        ``text``, the library's names and checks). Each passage's ``doc_id`` is the node's
        position in ``nodes`` (``nodes[int(p.doc_id)]``). ``NodeWithScore.score`` is not read
        (relevance tiers bin cosines); the nodes are embedded unless their ``embedding`` is
        of the embedder's model.

        Returns the :class:`~credrank.context.build.ContextDocument` (``.render("cag")``:
        the prompt; ``.to_json("cag")``: the ``POST /context`` document). Raises
        ``ValueError``: ``retrieval="given"`` configured, a bad option naming it, a bad node
        (``nodes[i]…``)."""
        bundle = QueryBundle(query) if isinstance(query, str) else query
        if not isinstance(bundle, QueryBundle):
            raise TypeError(f"query: expected a string or a QueryBundle, got "
                            f"{type(query).__name__}")
        return self._scorer.context(bundle.query_str, _passages(self._scorer, nodes), top_k,
                                    query_vector=bundle.embedding, names=NAMES, **options)


def _passages(scorer: CredrankScorer, nodes: list[NodeWithScore]) -> list[Passage]:
    """The nodes as credrank sees them: the text without metadata, the metadata, score,
    embedding and the text LlamaIndex embedded (:func:`_embedded_text`)."""
    return [Passage(text=n.node.get_content(metadata_mode=MetadataMode.NONE),
                    metadata=n.node.metadata, score=n.score, embedding=n.node.embedding,
                    embedded_text=_embedded_text(scorer, n.node)) for n in nodes]


def _embedded_text(scorer: CredrankScorer, node: Any) -> str | None:
    """The text LlamaIndex embedded for ``node`` (its content with the embed metadata), for
    the same-model check: only while ``auto`` has no verdict for its embedding's dimension."""
    embedding = node.embedding
    if scorer.retrieval != "auto" or embedding is None or \
            scorer.auto.verdict(len(embedding)) is not None:
        return None
    return str(node.get_content(metadata_mode=MetadataMode.EMBED))


def _with_key(keys: list[str]) -> list[str]:
    return list(keys) if BREAKDOWN_KEY in keys else [*keys, BREAKDOWN_KEY]
