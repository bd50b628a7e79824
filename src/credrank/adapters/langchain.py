"""LangChain document compressor and retriever (``pip install 'credrank[langchain]'``).

:class:`CredibilityCompressor` reranks the documents any retriever found (use it in a
``ContextualCompressionRetriever`` or call ``compress_documents``); :class:`CredibilityRetriever`
fetches the expanded pool itself (``fetch_k``, default 3 × ``top_k``) from a vector store — or
from a ``VectorStoreRetriever``'s store, keeping its ``search_kwargs`` such as ``filter`` —
and compresses it to ``top_k``::

    from credrank.adapters.langchain import CredibilityCompressor, CredibilityRetriever

    retriever = CredibilityRetriever(vectorstore=store,
                                     compressor=CredibilityCompressor(top_k=5))
    docs = retriever.invoke("Does vitamin D prevent COVID-19?")

Any pipeline of ``credrank search`` runs here: ``CredibilityCompressor(pipeline="spec.toml")``
(a spec file, a spec dict or a :class:`~credrank.pipeline.spec.PipelineSpec`; ``priors``,
``mode``, ``select`` … are shortcuts for the common stages, see :mod:`credrank.adapters._common`);
the retriever's pool is the spec's ``fetch_k`` unless its own ``fetch_k`` is given.

Each returned document is a new :class:`~langchain_core.documents.Document` (``model_copy``:
inputs are never modified) with ``metadata["relevance_score"]`` = credrank's final score (the
key LangChain's rerankers use) and ``metadata["credrank"]`` = the breakdown (rank, score,
source_type, host, rule, url, retrieval, embedder, ``score_breakdown``); every other metadata
key is kept. The URL, the dates and the other fields the stages read come from
``metadata`` (default keys — the URL under ``url``, else ``source``, what web loaders set, else
``link`` — or ``fields=``, :mod:`credrank.adapters._common`); a document without a URL (a file
loader's ``source`` path) is typed ``unknown``. LangChain documents carry no embedding
(``use_given_embeddings`` is accepted, as by every adapter, and changes nothing here), so the
default ``retrieval="auto"``
(see :mod:`credrank.adapters._common`) takes the retriever's scores when every document has
one ≥ 0 (``metadata[score_key]``, or the scores :class:`CredibilityRetriever` fetches with the
pool), else credrank embeds the documents (a one-time warning says what it costs);
``metadata["credrank"]["retrieval"]`` says which.

The credibility-annotated context (chapter 35.4) of the same documents, for a prompt:
``compressor.context(documents, query, now=…, half_life=…)`` (a
:class:`~credrank.context.build.ContextDocument`: ``.render("cag")`` is the prompt,
``.to_json("cag")`` the ``POST /context`` document; :mod:`credrank.adapters._common`). The
passages' ``doc_id`` are the documents' positions in ``documents``; relevance tiers bin
cosines, so ``metadata[score_key]`` is not read and credrank embeds the documents.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Unpack

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
    from langchain_core.documents import BaseDocumentCompressor, Document
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.vectorstores import (
        InMemoryVectorStore,
        VectorStore,
        VectorStoreRetriever,
    )
    from pydantic import (
        ConfigDict,
        Field,
        PrivateAttr,
        SerializationInfo,
        SerializerFunctionWrapHandler,
        create_model,
        model_serializer,
        model_validator,
    )
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("credrank.adapters.langchain needs langchain-core: "
                      "pip install 'credrank[langchain]'") from exc

from credrank.adapters._common import (
    BREAKDOWN_KEY,
    ContextOptions,
    CredrankScorer,
    Passage,
    ScorerFields,
    pydantic_fields,
)
from credrank.context.build import ContextDocument
from credrank.documents.fields import got
from credrank.pipeline.shortcuts import with_top
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.rerank import CandidateError, Names

#: the metadata key of the final score (as LangChain's rerank compressors write it)
SCORE_KEY = "relevance_score"
#: the stores whose ``similarity_search_with_score`` is a similarity (higher is better; the
#: cosine for ``InMemoryVectorStore``) though they have no relevance function: under
#: ``retrieval="auto"`` :class:`CredibilityRetriever` takes their scores (nothing embedded)
SIMILARITY_STORES: tuple[type[VectorStore], ...] = (InMemoryVectorStore,)
#: ``VectorStoreRetriever.search_kwargs`` that size or shape its own search, not ours
_POOL_KWARGS = ("k", "fetch_k", "lambda_mult", "score_threshold")
#: the default ``score_key``: a default key, which may be on no document (as ``fields``')
DEFAULT_SCORE_KEY = "score"
#: how errors name the documents and the scores :class:`CredibilityRetriever` fetched
STORE_NAMES = Names("documents", "the store's score of {items}[{i}]")
#: … and the scores of documents read with ``score_key=None`` (none)
NO_SCORE_NAMES = Names("documents", "{items}[{i}]'s score (score_key=None: none read)")


def check_score_key(value: Any) -> str | None:
    """``score_key``: a metadata key (a non-empty string), or ``None`` (no score read: the
    documents are ranked as without one); else ``ValueError`` naming it."""
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    raise ValueError(f"score_key: expected a metadata key (a non-empty string) or None (no "
                     f"score read), got {got(value)}")


def score_names(key: str) -> Names:
    """How errors name a score read from ``metadata[key]``: ``documents[0].metadata['score']
    (score_key)``, with the ways out."""
    shown = repr(key).replace("{", "{{").replace("}", "}}")
    return Names("documents", f"{{items}}[{{i}}].metadata[{shown}] (score_key)",
                 "; convert it to a number, name the key of the retriever's similarity with "
                 "score_key=KEY, or score_key=None not to read one")


def missing_score_key(key: str, documents: Sequence[Document]) -> str | None:
    """The error when ``score_key`` (other than the default) is on none of ``documents``: a
    misspelt key would otherwise drop every score without a word (as ``fields=`` refuses)."""
    if key == DEFAULT_SCORE_KEY or not documents or any(
            d.metadata.get(key) not in (None, "") for d in documents):
        return None
    seen = sorted({str(k) for d in documents for k in d.metadata})
    shown = ", ".join(seen[:12]) + (", …" if len(seen) > 12 else "")
    return (f"score_key: expected metadata key {key!r} on the documents, got it on none of "
            f"{len(documents)} (keys seen: {shown or 'none'}); name the key the documents "
            f"carry, or score_key=None not to read a score (the default key "
            f"{DEFAULT_SCORE_KEY!r} may be absent)")


#: the fields of the compressor: the options every adapter takes, declared once
#: (:data:`credrank.adapters._common.OPTIONS`), and ``pipeline``
_Fields = create_model(  # type: ignore[call-overload]  # fields as a dict of (type, Field)
    "_CredibilityCompressorFields", __base__=BaseDocumentCompressor, __module__=__name__,
    **pydantic_fields(Field))


class CredibilityCompressor(ScorerFields, _Fields):  # type: ignore[misc,valid-type]
    """Rerank documents with a credrank pipeline (by default similarity × source-reliability
    prior), as ``credrank search`` ranks them.

    Fields: ``pipeline`` (a spec) and the options every adapter takes
    (:data:`credrank.adapters._common.OPTIONS`), validated at construction (a bad ``priors``
    or spec raises its message, naming the field, inside pydantic's ``ValidationError``, a
    ``ValueError``; an unknown option is a ``TypeError`` naming it; an option assigned later is
    validated and takes effect: :class:`~credrank.adapters._common.ScorerFields`);
    ``score_key``: the metadata key of the retrieval score for ``retrieval="given"`` and
    ``"auto"`` (default ``score``; ``None``: no score is read, for a ``score`` that is no
    similarity, such as a rating; a key other than the default must be on at least one
    document of each call; :class:`CredibilityRetriever` passes the store's
    relevance scores itself). ``model_dump()`` is the adapter options, ``score_key`` and
    ``pipeline`` as a spec (``CredibilityCompressor(**dump)`` reads it back).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    score_key: Any = DEFAULT_SCORE_KEY
    _scorer: CredrankScorer = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        super().model_post_init(context)
        check_score_key(self.score_key)
        self._scorer = self._scorer_with()

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "score_key":  # validated as at construction
            check_score_key(value)
        super().__setattr__(name, value)

    @model_serializer(mode="wrap")
    def _serialise(self, handler: SerializerFunctionWrapHandler,
                   info: SerializationInfo) -> dict[str, Any]:
        """The adapter options, ``score_key`` and ``pipeline`` = the spec."""
        return {**self._scorer.init_parameters(), "score_key": self.score_key}

    @property
    def spec(self) -> PipelineSpec:
        """The pipeline this compressor runs."""
        return self._scorer.spec

    def warm_up(self) -> None:
        """Load the embedder now rather than on the first query."""
        self._scorer.warm_up()

    def fetch_k(self) -> int:
        """The default pool size: the pipeline's ``fetch_k`` (default 3 × ``top_k``, as
        ``credrank search``)."""
        return self._scorer.spec.resolved_fetch_k

    def compress_documents(self, documents: Sequence[Document], query: str,
                           callbacks: Callbacks | None = None) -> Sequence[Document]:
        """The best ``top_k`` of ``documents`` for ``query``, as new documents, best first."""
        return self.rank(documents, query)

    def rank(self, documents: Sequence[Document], query: str,
             scores: Sequence[float] | None = None, *,
             similarities: bool = False) -> list[Document]:
        """As :meth:`compress_documents`; ``scores`` (one per document) are the retrieval
        scores for ``retrieval="given"`` and ``"auto"`` (default: ``metadata[score_key]``;
        none with ``score_key=None``).
        ``similarities``: the scores are known similarities (a store's cosine, negative ones
        included), used under ``auto`` as ``given`` uses them."""
        if scores is not None and len(scores) != len(documents):
            raise ValueError(f"scores: expected {len(documents)} scores (one per document), "
                             f"got {len(scores)}")
        retrieval = "given" if similarities and scores is not None and \
            self._scorer.retrieval == "auto" else None
        key = self.score_key
        read: Sequence[Any]
        if scores is not None:
            names, read = STORE_NAMES, scores
        elif key is None:
            names, read = NO_SCORE_NAMES, [None] * len(documents)
        else:
            missing = missing_score_key(key, documents)
            if missing is not None:
                raise CandidateError(missing)
            names, read = score_names(key), [d.metadata.get(key) for d in documents]
        passages = [Passage(text=doc.page_content, metadata=doc.metadata, score=read[i])
                    for i, doc in enumerate(documents)]
        out = []
        for r in self._scorer.rank(query, passages, retrieval=retrieval, names=names):
            doc = documents[r.index]
            out.append(doc.model_copy(update={"metadata": {
                **doc.metadata, SCORE_KEY: r.score, BREAKDOWN_KEY: r.breakdown}}))
        return out

    def context(self, documents: Sequence[Document], query: str, top_k: int | None = None,
                **options: Unpack[ContextOptions]) -> ContextDocument:
        """The credibility-annotated context (chapter 35.4) of ``documents`` for ``query``:
        ranked as :meth:`compress_documents` ranks them, the best ``top_k`` tiered as
        ``credrank context`` tiers a search (:meth:`CredrankScorer.context
        <credrank.adapters._common.CredrankScorer.context>`; ``options``: ``now``,
        ``half_life``, ``undated``, ``granularity``, ``source_tier``, ``text``, the library's
        names and checks). Each passage's ``doc_id`` is the document's position in
        ``documents`` (``documents[int(p.doc_id)]``). The documents carry no embedding, so
        credrank embeds them; ``metadata[score_key]`` is not read (relevance tiers bin
        cosines: ``info["retrieval"]["scores_unread"]`` counts the documents with one; a
        ``score_key`` no document carries is no error here).

        Returns the :class:`~credrank.context.build.ContextDocument` (``.render("cag")``:
        the prompt; ``.to_json("cag")``: the ``POST /context`` document). Raises
        ``ValueError``: ``retrieval="given"`` configured, a bad option naming it, a bad
        document (``documents[i]…``)."""
        key = self.score_key
        names = NO_SCORE_NAMES if key is None else score_names(key)
        passages = [Passage(text=doc.page_content, metadata=doc.metadata,
                            score=None if key is None else doc.metadata.get(key))
                    for doc in documents]
        return self._scorer.context(query, passages, top_k, names=names, **options)


class CredibilityRetriever(BaseRetriever):
    """Fetch ``fetch_k`` documents by similarity, rerank them with ``compressor``.

    The pool comes from ``vectorstore.similarity_search(query, k=fetch_k, **search_kwargs)``
    (with ``retrieval="given"`` or ``"auto"``, ``similarity_search_with_relevance_scores``,
    in ``[0, 1]``; for a store without a relevance function, ``similarity_search_with_score``
    when it is known to be a similarity — :data:`SIMILARITY_STORES`: ``InMemoryVectorStore``'s
    cosine, taken as ``given`` takes scores, negative ones included — or when ``given`` says
    it is one (make sure: higher is better); ``auto`` cannot know it of another store and takes
    its documents without scores, so credrank embeds them). Scores from the store: the fast
    path, nothing embedded by credrank. A
    ``VectorStoreRetriever`` given as ``retriever`` is searched through its store the same way
    (its ``search_kwargs`` kept, except the ones that size its own search: ``k``, ``fetch_k``,
    ``lambda_mult``, ``score_threshold``); any other retriever is invoked as it is and its
    documents are the pool (configure it to return ~3 × ``top_k``). ``fetch_k`` defaults to
    the compressor's pipeline's (3 × its ``top_k`` unless the spec says otherwise).
    """

    # validate_assignment: a fetch_k assigned later is checked as at construction
    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid",
                              validate_assignment=True)

    vectorstore: VectorStore | None = None
    retriever: BaseRetriever | None = None
    compressor: CredibilityCompressor = Field(default_factory=CredibilityCompressor)
    fetch_k: Any = None  # checked by the spec (pool_size), in the library's words
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> CredibilityRetriever:
        if (self.vectorstore is None) == (self.retriever is None):
            raise ValueError("CredibilityRetriever: expected exactly one of vectorstore or "
                             "retriever")
        self.pool_size()
        return self

    def pool_size(self) -> int:
        """``fetch_k``, or the compressor's pipeline's (default 3 × ``top_k``); ``fetch_k``
        checked by the spec, as ``Searcher.spec(fetch_k=…)`` and ``--fetch-k`` are (an
        integer in [top_k, MAX_K]), again here since the compressor's ``top_k`` may have
        changed since."""
        spec = self.compressor.spec
        if self.fetch_k is None:
            return spec.resolved_fetch_k
        try:
            return with_top(spec, {"fetch_k": self.fetch_k}).resolved_fetch_k
        except SpecError as exc:
            raise ValueError(f"fetch_k: {exc.detail}") from None

    def _store_and_kwargs(self) -> tuple[VectorStore | None, dict[str, Any]]:
        if self.vectorstore is not None:
            return self.vectorstore, dict(self.search_kwargs)
        if isinstance(self.retriever, VectorStoreRetriever):
            kwargs = {k: v for k, v in self.retriever.search_kwargs.items()
                      if k not in _POOL_KWARGS}
            return self.retriever.vectorstore, {**kwargs, **self.search_kwargs}
        return None, {}

    def _get_relevant_documents(self, query: str, *,
                                run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        store, kwargs = self._store_and_kwargs()
        if store is None:
            assert self.retriever is not None
            docs = self.retriever.invoke(query, config={"callbacks": run_manager.get_child()})
            return self.compressor.rank(docs, query)
        k = self.pool_size()
        retrieval = self.compressor.retrieval
        if retrieval != "cosine":
            similarities = False
            try:
                pairs = store.similarity_search_with_relevance_scores(query, k=k, **kwargs)
            except NotImplementedError:  # a store without a relevance function: its raw score
                similarities = isinstance(store, SIMILARITY_STORES)
                if retrieval == "given" or similarities:  # a similarity (known, or the user
                    pairs = store.similarity_search_with_score(query, k=k, **kwargs)  # said)
                else:
                    pairs = None
            if pairs is not None:
                return self.compressor.rank([d for d, _ in pairs], query,
                                            [s for _, s in pairs], similarities=similarities)
        return self.compressor.rank(store.similarity_search(query, k=k, **kwargs), query)
