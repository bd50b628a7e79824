"""One index and its embedder, opened once: what the service, batch mode and adapters share.

``credrank search`` opens the index, loads the model and answers one query; a service, a batch
of 1,000 queries or a framework component must not pay that per query. :class:`Searcher` holds
the open store, the embedder the index was built with and the source typer, and runs the same
pipelines as the CLI (:func:`credrank.search.build_pipeline` for queries against the index,
:func:`credrank.rerank.rerank_pipeline` for candidates retrieved elsewhere).

Thread safety: searches against the store are serialised by a lock (the embedded engine is not
documented as safe for concurrent readers in one process); reranking touches no store and runs
concurrently.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.hittext import DEFAULT_TEXT, check_text
from credrank.core.pipeline import FunctionStage, Pipeline
from credrank.index.embed import get_embedder
from credrank.index.opener import open_store
from credrank.index.retrieve import DenseRetriever
from credrank.index.store import VectorStore
from credrank.pipeline.compile import Compiled, compile_rerank, compile_spec, reads
from credrank.pipeline.hittext import with_hit_text
from credrank.pipeline.pushdown import PushdownSearch
from credrank.pipeline.spec import PipelineSpec
from credrank.provenance import SourceTyper
from credrank.rerank import (
    DEFAULT_RETRIEVAL,
    AutoRetrieval,
    GivenCandidates,
    check_retrieval,
    rerank_hits,
    rerank_pipeline,
)
from credrank.search import (
    SearchSettings,
    build_pipeline,
    describe,
    describe_compiled,
    search_document,
    search_settings,
    text_settings,
)


class Searcher:
    """An open index, its embedder and a source typer; ``search`` and ``rerank`` on them.

    ``embedder`` defaults to the one named in the index manifest (loaded once, here);
    ``typer`` (used by :meth:`rerank` only: indexed documents were typed when indexed) to the
    built-in rules. ``resources`` (name → path) are the files a pipeline spec may name
    besides paths; with ``allow_paths=False`` (the service) it may name only those.

    Settings are a :class:`~credrank.pipeline.spec.PipelineSpec` or :class:`SearchSettings`.
    The store lock is held for retrieval and for stages that read the index (citation
    chains, the hits' text), not for the rest of the pipeline: concurrent searches score in
    parallel.

    ``text`` (:mod:`credrank.core.hittext`: ``full``, ``snippet`` — the default — or
    ``none``) is what each hit carries of its document's text. Unless ``none``, the text of
    the final hits is read from the store after the ranking
    (:func:`~credrank.pipeline.hittext.with_hit_text`: ``top_k`` documents, never the pool).
    """

    def __init__(self, store: VectorStore, embedder: Embedder | None = None,
                 typer: SourceTyper | None = None, *,
                 resources: Mapping[str, str | Path] | None = None,
                 allow_paths: bool = True):
        self.store = store
        self.embedder = embedder or get_embedder(store.manifest.embedder)
        if self.embedder.name != store.manifest.embedder:
            raise ValueError(f"embedder: the index was built with {store.manifest.embedder!r}, "
                             f"got {self.embedder.name!r}")
        self.typer = typer or SourceTyper()
        self.resources = {k: Path(v) for k, v in (resources or {}).items()}
        self.allow_paths = allow_paths
        #: the state of ``retrieval="auto"`` for :meth:`rerank` (positive same-model verdicts
        #: only: a searcher may serve many callers, :class:`~credrank.rerank.AutoRetrieval`)
        self.auto = AutoRetrieval(cache_negative=False)
        self._lock = threading.Lock()

    @classmethod
    def open(cls, index_dir: str | Path, *, tables: Sequence[str | Path] = (),
             trust_declared: bool = False,
             resources: Mapping[str, str | Path] | None = None, allow_paths: bool = True,
             **store_options: Any) -> Searcher:
        """Open ``index_dir`` for reading (``store_options``: see
        :func:`credrank.index.open_store`) with a typer over the domain ``tables``."""
        store = open_store(index_dir, **store_options)
        try:
            return cls(store, typer=SourceTyper(list(tables), trust_declared=trust_declared),
                       resources=resources, allow_paths=allow_paths)
        except BaseException:
            store.close()
            raise

    def keep_columns(self, keep: bool = True) -> bool:
        """Have the store keep a columnar copy of the ranking payload (Qdrant Edge:
        :meth:`~credrank.index.qdrant_edge.EdgeIndex.keep_columns`), so searches over large
        pools (``fetch_k`` in the hundreds, selectors, consensus) read no payload from the
        engine — what ``credrank serve`` does. Costs ≈ 1 s per 100,000 documents now and after
        each write, and ≈ 0.4 kB a document (plus the vectors, up to 256 MB). Returns whether
        the store keeps it (other stores: ``False``, nothing to do)."""
        keep_columns = getattr(self.store, "keep_columns", None)
        if not callable(keep_columns):
            return False
        with self._lock:
            return bool(keep_columns(keep))

    @property
    def lock(self) -> threading.Lock:
        """The lock searches hold on the store; a writer to the same store (``POST /index``)
        takes it too."""
        return self._lock

    # -- settings -------------------------------------------------------------------------
    @staticmethod
    def settings(**options: Any) -> SearchSettings:
        """Validated settings from the options of ``credrank search``
        (:func:`credrank.search.search_settings`)."""
        return search_settings(**options)

    def describe(self, settings: SearchSettings | PipelineSpec) -> dict[str, Any]:
        """The settings as JSON, with the engine that answers."""
        if isinstance(settings, PipelineSpec):
            return describe_compiled(self.compile(settings), self.store)
        return describe(settings, self.store)

    def compile(self, spec: PipelineSpec) -> Compiled:
        """``spec`` built over this index (:func:`credrank.pipeline.compile.compile_spec`)."""
        return compile_spec(spec, self.store, self.embedder, resources=self.resources,
                            allow_paths=self.allow_paths)

    # -- queries against the index ---------------------------------------------------------
    def _pipeline(self, settings: SearchSettings | PipelineSpec | None,
                  text: str = DEFAULT_TEXT) -> Pipeline:
        if isinstance(settings, PipelineSpec):
            return self.with_text(self.compile(settings).pipeline, text)
        return self.with_text(build_pipeline(self.store, self.embedder,
                                             settings or SearchSettings()), text)

    def with_text(self, pipeline: Pipeline, text: str = DEFAULT_TEXT) -> Pipeline:
        """``pipeline`` with the final hits' text read from this store, unless ``text`` is
        ``none`` (:func:`credrank.pipeline.hittext.with_hit_text`: with the engine's top-k
        cut, or by id after the selector; never for the whole pool)."""
        return Pipeline(with_hit_text(pipeline.stages, self.store, text))

    def _run(self, pipeline: Pipeline, query: str) -> Candidates:
        """``pipeline`` on ``query``, the store lock held for the stages that touch the
        store: retrieval (the first stage) and those that read the index."""
        batch = Candidates.empty(query)
        if pipeline.stages and isinstance(pipeline.stages[0], DenseRetriever | PushdownSearch):
            # the query is embedded before the lock: concurrent searches embed in parallel
            batch = replace(batch, query_vector=self.embedder.embed([query])[0])
        for i, stage in enumerate(pipeline.stages):
            if i == 0 or "index" in stage.reads:
                with self._lock:
                    batch = stage(batch)
            else:
                batch = stage(batch)
        return batch

    def search(self, query: str, settings: SearchSettings | PipelineSpec | None = None, *,
               text: str = DEFAULT_TEXT) -> Candidates:
        """One query through its pipeline (as ``credrank search``); the final hits hold
        their text unless ``text="none"`` (then ``hits()`` have ``text: null``)."""
        return self._run(self._pipeline(settings, text), query)

    def search_json(self, query: str, settings: SearchSettings | PipelineSpec | None = None,
                    *, text: str = DEFAULT_TEXT, **extra: Any) -> dict[str, Any]:
        """The ``credrank search --json`` document of one query (with ``pipeline``: the spec
        it ran, which feeds back as it is); each hit with ``text`` as ``text`` says."""
        if isinstance(settings, PipelineSpec):
            compiled = self.compile(settings)
            result = self._run(self.with_text(compiled.pipeline, text), query)
            return search_document(query, describe_compiled(compiled, self.store), result,
                                   text=text, **extra)
        settings = settings or SearchSettings()
        return search_document(query, self.describe(settings),
                               self.search(query, settings, text=text), text=text, **extra)

    def search_many(self, queries: Iterable[tuple[str, str]],
                    settings: SearchSettings | PipelineSpec | None = None, *,
                    text: str = DEFAULT_TEXT) -> Iterator[tuple[str, Candidates]]:
        """``(query id, result)`` for each ``(query id, text)``, in order, one pipeline
        (``text``: as :meth:`search`; ``none`` where no hit text is wanted, a TREC run)."""
        pipeline = self._pipeline(settings, text)
        for qid, text in queries:
            yield qid, self._run(pipeline, text)

    # -- candidates retrieved elsewhere ----------------------------------------------------
    def rerank(self, query: str, records: Sequence[Mapping[str, Any]],
               settings: SearchSettings | PipelineSpec | None = None, *,
               retrieval: str = DEFAULT_RETRIEVAL,
               query_vector: Sequence[float] | None = None) -> Candidates:
        """Rerank a client's candidates (:func:`credrank.rerank.rerank_pipeline`);
        ``retrieval`` ``auto`` (default), ``cosine`` or ``given`` (:mod:`credrank.rerank`),
        what it resolved to in the result's ``info["retrieval"]``."""
        settings = settings or SearchSettings()
        return rerank_pipeline(records, self.embedder, settings, self.typer,
                               retrieval=retrieval, query_vector=query_vector,
                               resources=self.resources, allow_paths=self.allow_paths,
                               auto=self.auto).search(query)

    def rerank_json(self, query: str, records: Sequence[Mapping[str, Any]],
                    settings: SearchSettings | PipelineSpec | None = None, *,
                    retrieval: str = DEFAULT_RETRIEVAL,
                    query_vector: Sequence[float] | None = None,
                    text: str = DEFAULT_TEXT) -> dict[str, Any]:
        """The ``/rerank`` document: as ``credrank search --json``, each hit with the
        client's ``metadata`` and ``client_score`` (and ``text`` of the client's passage as
        ``text`` says); ``settings.retrieval`` is the one asked for, ``info.retrieval`` what
        it resolved to (:class:`~credrank.rerank.Resolution`)."""
        text = check_text(text)
        check_retrieval(retrieval)
        settings = settings or SearchSettings()
        if isinstance(settings, PipelineSpec):
            compiled = compile_rerank(settings, _NO_RETRIEVER, self.embedder,
                                      resources=self.resources, allow_paths=self.allow_paths)
            given = GivenCandidates(records, self.embedder, self.typer, retrieval=retrieval,
                                    with_vectors="vectors" in reads(compiled.stages),
                                    query_vector=query_vector, auto=self.auto)
            result = Pipeline([given, *compiled.stages]).search(query)
            base = describe_compiled(compiled)
            pipeline = base.pop("pipeline")
        else:
            result = self.rerank(query, records, settings, retrieval=retrieval,
                                 query_vector=query_vector)
            base = describe(settings)
            pipeline = base.pop("pipeline", None)
        described = {**base, "retrieval": retrieval, "pushdown": False,
                     "fetch_k": len(records), "embedder": self.embedder.name,
                     "query_vector": _query_vector(result, query_vector),
                     **text_settings(text)}
        doc = {"credrank_rerank": 1, "query": query, "settings": described,
               "hits": rerank_hits(result, text), "info": result.info}
        if pipeline is not None:  # the spec it ran, as in the search document
            doc["pipeline"] = pipeline
        return doc

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self.store.close()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _query_vector(result: Candidates, query_vector: Sequence[float] | None) -> str:
    """``settings.query_vector`` of a rerank document: ``given`` when the client's query
    vector was used, else ``embedded`` (also when no query vector was needed)."""
    used = (result.info.get("retrieval") or {}).get("query")
    if used is None:  # scores only (or an empty pool): as before, what the client sent
        return "given" if query_vector is not None else "embedded"
    return str(used)


#: a stand-in retriever for describing a rerank spec (its stages are what is described)
_NO_RETRIEVER = FunctionStage(lambda batch: batch, name="given")
