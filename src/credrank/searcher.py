"""One index and its embedder, opened once: what the CLI, the service, batch mode and the
adapters share.

``credrank search`` opens the index, loads the model and answers one query; a service, a batch
of 1,000 queries or a framework component must not pay that per query. :class:`Searcher` holds
the open store, the embedder the index was built with and the source typer, compiles each
:class:`~credrank.pipeline.spec.PipelineSpec` once (:meth:`Searcher.compile`, memoised until
the index changes) and runs it with the one run loop (:meth:`Searcher.run`) that the service
uses too.

Thread safety: searches against the store are serialised by a lock (the embedded engine is not
documented as safe for concurrent readers in one process); reranking touches no store and runs
concurrently.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from credrank.core.candidates import Candidates
from credrank.core.checkpoint import checking
from credrank.core.embedder import Embedder
from credrank.core.hittext import DEFAULT_TEXT, check_text
from credrank.core.pipeline import Pipeline, Stage
from credrank.core.validation import check_bool, check_str
from credrank.index.embed import get_embedder
from credrank.index.ingest import query_truncation
from credrank.index.opener import open_store
from credrank.index.retrieve import DenseRetriever
from credrank.index.store import VectorStore, generation
from credrank.pipeline.compile import Compiled, check_stages, compile_rerank, compile_spec, reads
from credrank.pipeline.document import SEARCH_FORMAT, answered, search_document
from credrank.pipeline.hittext import with_hit_text
from credrank.pipeline.pushdown import PushdownSearch
from credrank.pipeline.shortcuts import LIBRARY, in_words, spec_from_options
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.provenance import SourceTyper
from credrank.rerank import (
    DEFAULT_RETRIEVAL,
    AutoRetrieval,
    GivenCandidates,
    as_spec,
    check_rerank_spec,
    check_retrieval,
    default_spec,
    rerank_hits,
)

if TYPE_CHECKING:
    import numpy as np

    from credrank.context.build import ContextDocument
    from credrank.freshness.policy import UnknownAge

#: a pipeline as the methods take it: a spec, its plain data, or ``None`` (the default spec,
#: :func:`credrank.rerank.as_spec`: ``credrank search`` without options)
SpecLike = PipelineSpec | Mapping[str, Any] | None
#: called at every checkpoint of :meth:`Searcher.run` with its name (``stage:NAME``,
#: ``store``, ``done``): the service's cancellation check
Check = Callable[[str], None]
T = TypeVar("T")
#: compiled pipelines kept per searcher (least recently used dropped beyond it)
MAX_COMPILED = 64
#: what a search of a closed :class:`Searcher` raises
CLOSED = ("this Searcher is closed (close() or the end of its with block): open the index "
          "again with Searcher.open")


class Searcher:
    """An open index, its embedder and a source typer; ``search`` and ``rerank`` on them.

    ``embedder`` defaults to the one named in the index manifest (loaded once, here);
    ``typer`` (used by :meth:`rerank` only: indexed documents were typed when indexed) to the
    built-in rules. ``resources`` (name → path) are the files a pipeline spec may name
    besides paths; with ``allow_paths=False`` (the service) it may name only those.

    A pipeline is a :class:`~credrank.pipeline.spec.PipelineSpec`, its plain-data form (a
    dict, as ``credrank search --json`` echoes it under ``pipeline``) or ``None`` (the
    default: ``credrank search`` without options); :meth:`spec` makes one from the options of
    ``credrank search``. Each spec is compiled once per searcher and index state
    (:meth:`compile`; a write through the store starts afresh): the files its stages name are
    read then, and :meth:`forget_compiled` rebuilds them on next use. The store lock is held
    for retrieval and for stages that read the index (citation chains, the hits' text), not
    for the rest of the pipeline: concurrent searches score in parallel.

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
        self._lock = threading.RLock()  # re-entrant: the service may hold it around a search
        self._closed = False
        self._compiled: dict[tuple[str, str], Any] = {}
        self._generation = generation(store)
        self._compiled_lock = threading.Lock()

    @classmethod
    def open(cls, index_dir: str | Path, *, tables: Sequence[str | Path] = (),
             trust_declared: bool = False,
             resources: Mapping[str, str | Path] | None = None, allow_paths: bool = True,
             **store_options: Any) -> Searcher:
        """Open ``index_dir`` for reading (``store_options``: see
        :func:`credrank.index.open_store`) with a typer over the domain ``tables``."""
        store = open_store(index_dir, **store_options)
        try:  # a single path is refused by the typer (list() read a string's characters)
            given = tables if isinstance(tables, str | Path) else list(tables)
            return cls(store, typer=SourceTyper(given, trust_declared=trust_declared),
                       resources=resources, allow_paths=allow_paths)
        except BaseException:
            store.close()
            raise

    def keep_columns(self, keep: bool = True) -> bool:
        """Have the store keep a columnar copy of the ranking payload (Qdrant Edge:
        :meth:`~credrank.index.qdrant_edge.EdgeIndex.keep_columns`), so searches over large
        pools (``fetch_k`` in the hundreds, selectors, consensus) read no payload from the
        engine — what ``credrank serve`` does. Costs ≈ 1 s per 100,000 documents now and after
        each write, and ≈ 0.15 kB a document of typed columns (:mod:`credrank.index.columns`;
        measured in docs/results.md), plus ``4 · dim`` bytes a document for the vectors, read
        only when a search first asks for them (up to 256 MB). Returns whether the store keeps
        it (other stores: ``False``, nothing to do)."""
        check_bool("keep", keep)  # "yes" was taken as true
        keep_columns = getattr(self.store, "keep_columns", None)
        with self._lock:
            if self._closed:  # the engine's own error said "Shard is not initialized"
                raise ValueError(CLOSED)
            return bool(keep_columns(keep)) if callable(keep_columns) else False

    @property
    def lock(self) -> threading.RLock:
        """The lock searches hold on the store; a writer to the same store (``POST /index``)
        takes it too. Re-entrant: the service holds it around a cheap search it runs on its
        event loop (:meth:`credrank.serve.work.ServiceState.read`), which takes it again."""
        return self._lock

    # -- pipelines ---------------------------------------------------------------------------
    @staticmethod
    def spec(**options: Any) -> PipelineSpec:
        """The spec of the options of ``credrank search`` (``top_k=5, freshness="half_life=
        30d"``, …: :func:`credrank.pipeline.shortcuts.spec_from_options`), its stages built as
        a search builds them before it opens an index (the files the options name are read:
        :func:`~credrank.pipeline.compile.check_stages`), every error in the options' words
        (``priors: 'nope' is neither a preset …``; it was accepted, and the search said
        ``stages[0].priors``)."""
        if "door" in options:  # spec_from_options's own parameter, not an option
            raise TypeError("Searcher.spec() got an unexpected keyword argument 'door'")
        spec = spec_from_options(**options)
        try:
            check_stages(spec)
        except SpecError as exc:
            raise ValueError(in_words(exc, spec, LIBRARY)) from None
        return spec

    def compile(self, spec: SpecLike = None) -> Compiled:
        """``spec`` built over this index (:func:`credrank.pipeline.compile.compile_spec`),
        once: later calls with an equal spec return the same :class:`Compiled` until
        :meth:`forget_compiled`. A :class:`~credrank.pipeline.spec.SpecError` names the
        stage that cannot be built."""
        spec = as_spec(spec)
        return self._memo(("search", spec.key), lambda: compile_spec(
            spec, self.store, self.embedder, resources=self.resources,
            allow_paths=self.allow_paths))

    def compile_rerank(self, spec: SpecLike = None) -> Compiled:
        """``spec``'s stages for candidates retrieved elsewhere
        (:func:`credrank.pipeline.compile.compile_rerank`), memoised as :meth:`compile`; a
        spec whose retrieval-side keys cannot apply to given candidates is a
        :class:`~credrank.pipeline.spec.SpecError` (:func:`credrank.rerank.check_rerank_spec`)."""
        spec = check_rerank_spec(as_spec(spec), "spec")
        return self._memo(("rerank", spec.key), lambda: compile_rerank(
            spec, self.embedder, resources=self.resources,
            allow_paths=self.allow_paths))

    def _memo(self, key: tuple[str, str], build: Callable[[], T]) -> T:
        """``build()`` once per ``key`` until :meth:`forget_compiled` or a write to the store
        (:func:`credrank.index.store.generation`); at most :data:`MAX_COMPILED` kept, the
        least recently used dropped."""
        written = generation(self.store)
        with self._compiled_lock:
            if written != self._generation:  # the index changed under what was built
                self._compiled.clear()
                self._generation = written
            found = self._compiled.pop(key, None)
            if found is not None:
                self._compiled[key] = found  # most recently used last
                return found
        built = build()  # outside the lock: a slow build blocks no other search
        with self._compiled_lock:
            built = self._compiled.setdefault(key, built)
            while len(self._compiled) > MAX_COMPILED:
                del self._compiled[next(iter(self._compiled))]
        return built

    def forget_compiled(self) -> None:
        """Drop the compiled pipelines: a file a spec names has changed, or the index was
        written by another process or another store object (writes through ``store`` are
        noticed by themselves: a stage may read what the index holds when it is built, such
        as its stored credibility scores). The next search compiles its spec again."""
        with self._compiled_lock:
            self._compiled.clear()

    def pipeline(self, spec: SpecLike = None, text: str = DEFAULT_TEXT) -> Pipeline:
        """The compiled pipeline of ``spec`` with the final hits' text read from this store,
        unless ``text`` is ``none`` (:func:`credrank.pipeline.hittext.with_hit_text`: with the
        engine's top-k cut, or by id after the selector; never for the whole pool)."""
        spec = as_spec(spec)
        return self._memo((f"text:{check_text(text)}", spec.key), lambda: Pipeline(
            with_hit_text(self.compile(spec).pipeline.stages, self.store, text)))

    # -- the run loop --------------------------------------------------------------------------
    def run(self, stages: Sequence[Stage], query: str, *, store: bool = True,
            check: Check | None = None) -> Candidates:
        """``stages`` on ``query``: the one run loop of the library, the CLI and the service.
        With ``store``, the store lock is held for retrieval (the first stage) and for the
        stages that read the index, not for the rest; a first stage that embeds the query
        (dense retrieval, the engine's formula search) has it embedded before the lock is
        taken, so concurrent searches embed in parallel. ``check`` is called before each
        stage (``stage:NAME``), under the lock (``store``), at the end (``done``) and inside
        the loops of long stages (``within:NAME``, :mod:`credrank.core.checkpoint`). A blank
        ``query`` is a ``ValueError``, as on the command line and over HTTP: its similarities
        would mean nothing."""
        check_str("query", query, what="non-empty text")
        if check is not None and not callable(check):  # it failed at the first stage
            raise TypeError(f"check: expected a callable of the checkpoint name (or None), "
                            f"got {type(check).__name__}")
        with checking(check):  # long stages check inside their loops too (within:NAME)
            return self._run(stages, query, store=store, check=check)

    def _run(self, stages: Sequence[Stage], query: str, *, store: bool,
             check: Check | None) -> Candidates:
        embeds = bool(stages) and isinstance(stages[0], DenseRetriever | PushdownSearch)
        if not store:  # nothing to lock: the loop of every store-less run
            return run_stages(stages, query, check, query_vector=self.embedder.embed(
                [query])[0] if embeds else None)
        if check is not None and embeds:
            check(f"stage:{stages[0].name}")
        batch = Candidates.empty(query, query_vector=self.embedder.embed([query])[0]
                                 if embeds else None)
        for i, stage in enumerate(stages):
            if check is not None and not (i == 0 and embeds):
                check(f"stage:{stage.name}")
            if i == 0 or "index" in stage.reads:
                with self._lock:
                    if self._closed:
                        raise ValueError(CLOSED)
                    if check is not None:
                        check("store")
                    batch = stage(batch)
            else:
                batch = stage(batch)
        if check is not None:
            check("done")
        cut = query_truncation(self.embedder, query) if embeds else None
        return batch if cut is None else batch.with_info(query=cut)

    # -- queries against the index ---------------------------------------------------------
    def search(self, query: str, spec: SpecLike = None, *, text: str = DEFAULT_TEXT,
               check: Check | None = None) -> Candidates:
        """One query through its pipeline (as ``credrank search``); the final hits hold
        their text unless ``text="none"`` (then ``hits()`` have ``text: null``)."""
        return self.run(self.pipeline(spec, text).stages, query, check=check)

    def search_json(self, query: str, spec: SpecLike = None, *, text: str = DEFAULT_TEXT,
                    check: Check | None = None) -> dict[str, Any]:
        """The ``credrank search --json`` document of one query (with ``pipeline``: the spec
        it ran, which feeds back as it is); each hit with ``text`` as ``text`` says. Options
        go in ``spec`` (``Searcher.spec(top_k=3)``): a keyword such as ``top_k=3`` is a
        ``TypeError`` (it was taken as a key of the document, and the search ran as before)."""
        spec = as_spec(spec)
        result = self.run(self.pipeline(spec, text).stages, query, check=check)
        return search_document(query, self.compile(spec).settings, result, text=text)

    def search_many(self, queries: Iterable[tuple[str, str]], spec: SpecLike = None, *,
                    text: str = DEFAULT_TEXT) -> Iterator[tuple[str, Candidates]]:
        """``(query id, result)`` for each ``(query id, text)``, in order, one pipeline
        (``text``: as :meth:`search`; ``none`` where no hit text is wanted, a TREC run). A
        mapping or a string is a ``TypeError`` (iterating one yields keys or characters, not
        pairs), and so is an item that is not a pair."""
        if isinstance(queries, str | bytes | Mapping):
            hint = " (pass its .items())" if isinstance(queries, Mapping) else ""
            raise TypeError(f"queries: expected an iterable of (query id, text) pairs, got "
                            f"{type(queries).__name__}{hint}")
        pinned, _ = self.pin_feedback(spec)  # one batch, one version of the priors
        return self._search_many(self.pipeline(pinned, text).stages, queries)

    def pin_feedback(self, spec: SpecLike = None) -> tuple[PipelineSpec, int | None]:
        """``(spec, version)``: ``spec`` with a ``feedback_prior`` stage that reads its store's
        latest version (``version: null``) pinned to the version that is the latest now, and
        that version; ``(spec, None)`` when there is nothing to pin. A batch
        (:meth:`search_many`, ``credrank search --queries``) ranks every query with one
        version of the priors, whatever feedback arrives meanwhile, and a run can be replayed
        (``feedback_prior.version``)."""
        from credrank.pipeline.document import flat
        from credrank.stages.feedback_prior import FeedbackPrior

        spec = as_spec(spec)
        stage = spec.stage("feedback_prior")
        if stage is None or stage.params.get("version") is not None:
            return spec, None
        built = next(s for s in flat(self.compile(spec).stages) if isinstance(s, FeedbackPrior))
        built.store.refresh()
        version = built.store.current
        return spec.with_params("feedback_prior", {"version": version}), version

    def _search_many(self, stages: Sequence[Stage], queries: Iterable[Any]
                     ) -> Iterator[tuple[str, Candidates]]:
        for i, item in enumerate(queries):
            if not isinstance(item, tuple | list) or len(item) != 2:
                shown = repr(item)
                raise TypeError(f"queries[{i}]: expected a (query id, text) pair, got "
                                f"{shown if len(shown) <= 60 else shown[:57] + '...'}")
            qid, query = item
            yield qid, self.run(stages, query)

    # -- candidates retrieved elsewhere ----------------------------------------------------
    def rerank(self, query: str, records: Sequence[Mapping[str, Any]], spec: SpecLike = None,
               *, retrieval: str = DEFAULT_RETRIEVAL,
               query_vector: Sequence[float] | np.ndarray | None = None,
               check: Check | None = None) -> Candidates:
        """Rerank a client's candidates: :class:`~credrank.rerank.GivenCandidates` then the
        stages of ``spec``; ``retrieval`` ``auto`` (default), ``cosine`` or ``given``
        (:mod:`credrank.rerank`), what it resolved to in the result's
        ``info["retrieval"]``."""
        return self._rerank(self.compile_rerank(spec), query, records, retrieval,
                            query_vector, check)

    def _rerank(self, compiled: Compiled, query: str, records: Sequence[Mapping[str, Any]],
                retrieval: str, query_vector: Sequence[float] | np.ndarray | None,
                check: Check | None) -> Candidates:
        check_retrieval(retrieval)
        given = GivenCandidates(records, self.embedder, self.typer, retrieval=retrieval,
                                with_vectors="vectors" in reads(compiled.stages),
                                query_vector=query_vector, auto=self.auto)
        return self.run([given, *compiled.stages], query, store=False, check=check)

    def rerank_json(self, query: str, records: Sequence[Mapping[str, Any]],
                    spec: SpecLike = None, *, retrieval: str = DEFAULT_RETRIEVAL,
                    query_vector: Sequence[float] | np.ndarray | None = None,
                    text: str = DEFAULT_TEXT, check: Check | None = None) -> dict[str, Any]:
        """The ``/rerank`` document: as ``credrank search --json``, each hit with the
        client's ``metadata`` and ``client_score`` (and ``text`` of the client's passage as
        ``text`` says); ``settings.retrieval`` is the one asked for, ``info.retrieval`` what
        it resolved to (:class:`~credrank.rerank.Resolution`)."""
        text = check_text(text)
        check_retrieval(retrieval)
        compiled = self.compile_rerank(spec)
        result = self._rerank(compiled, query, records, retrieval, query_vector, check)
        settings, pipeline = answered(
            rerank_settings(compiled, retrieval, len(records), self.embedder, result,
                            query_vector), result.info, text)
        return {"credrank_rerank": SEARCH_FORMAT, "query": query, "settings": settings,
                "hits": rerank_hits(result, text), "info": result.info, "pipeline": pipeline}

    def rerank_context(self, query: str, records: Sequence[Mapping[str, Any]],
                       spec: SpecLike = None, *, retrieval: str = DEFAULT_RETRIEVAL,
                       query_vector: Sequence[float] | np.ndarray | None = None,
                       now: str | None = None, half_life: float | str | None = None,
                       undated: UnknownAge | str = "neutral", granularity: str = "document",
                       source_tier: str = "auto", text: str = "full",
                       check: Check | None = None) -> ContextDocument:
        """The credibility-annotated context (chapter 35.4) of a client's candidates: ranked
        as :meth:`rerank` ranks them (``spec``: its ``top_k`` is the passages kept; without a
        spec, the default pipeline with the context's ``top_k`` of 5, as ``credrank context``
        and ``POST /rerank/context``), then tiered as ``credrank context`` tiers a search
        (``now``, ``half_life``, ``undated``, ``granularity``, ``source_tier``, ``text``: the
        options of :func:`~credrank.context.build.search_context`, its checks and words). The
        retrieval score comes from vectors (:mod:`credrank.context.given`: ``retrieval``
        ``auto`` or ``cosine``; ``given`` is a ``ValueError``); the candidates are embedded
        once, whatever rankings the context asks for. ``.to_json(fmt, cite)`` /
        ``.render(fmt, cite)`` give the document and the prompt."""
        from credrank.context.build import check_context_spec  # not on a search's path
        from credrank.context.given import check_context_retrieval

        check_context_retrieval(retrieval)
        spec = context_spec(spec)
        compiled = self.compile_rerank(check_context_spec(spec))
        given = GivenCandidates(records, self.embedder, self.typer, retrieval=retrieval,
                                with_vectors="vectors" in reads(compiled.stages),
                                query_vector=query_vector, auto=self.auto, read_scores=False)
        return given_context(given, self.compile_rerank, query, spec, retrieval=retrieval,
                             query_vector=query_vector,
                             run=lambda stages, q, c: self.run(stages, q, store=False,
                                                               check=c),
                             check=check, now=now, half_life=half_life, undated=undated,
                             granularity=granularity, source_tier=source_tier, text=text)

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        """Close the index (idempotent); a search after it is a ``ValueError``
        (:data:`CLOSED`), as a closed file's read is."""
        with self._lock:
            self._closed = True
            self.store.close()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rerank_settings(compiled: Compiled, retrieval: str, candidates: int, embedder: Embedder,
                    result: Candidates,
                    query_vector: Sequence[float] | np.ndarray | None) -> dict[str, Any]:
    """The settings of a ranking of ``candidates`` retrieved elsewhere (``/rerank`` and a
    context over candidates): the compiled spec's, the ``retrieval`` asked for, never pushed
    down, ``fetch_k`` = the candidates, the embedder, whether the query vector was given."""
    return {**compiled.settings, "retrieval": retrieval, "pushdown": False,
            "fetch_k": candidates, "embedder": embedder.name,
            "query_vector": _query_vector(result, query_vector)}


def context_spec(spec: SpecLike) -> PipelineSpec:
    """The spec of a context over candidates: ``spec`` as given, else the default pipeline
    with the context's ``top_k`` (:data:`credrank.context.build.TOP_K`, 5: ``credrank
    context``'s and ``POST /rerank/context``'s default)."""
    if spec is not None:
        return as_spec(spec)
    from credrank.context.build import TOP_K

    return default_spec().replace_top(top_k=TOP_K)


def given_context(given: GivenCandidates, compile: Callable[[PipelineSpec], Compiled],
                  query: str, spec: PipelineSpec, *, retrieval: str,
                  query_vector: Sequence[float] | np.ndarray | None,
                  run: Callable[[Sequence[Stage], str, Check | None], Candidates],
                  check: Check | None = None, now: str | None = None,
                  half_life: float | str | None = None, undated: UnknownAge | str = "neutral",
                  granularity: str = "document", source_tier: str = "auto",
                  text: str = "full") -> ContextDocument:
    """:func:`~credrank.context.build.search_context` over the pool of ``given`` (a
    :class:`~credrank.context.given.GivenRanking`: ``given`` run once, each spec's stages by
    ``compile``, the settings as ``/rerank`` records them): the one path of a context over
    candidates retrieved elsewhere (:meth:`Searcher.rerank_context`, :func:`rerank_context`,
    the adapters). ``run``: the door's run loop (:meth:`Searcher.run` without the store, or
    :func:`run_stages`), called with ``check``."""
    from credrank.context.build import search_context  # not on a search's path
    from credrank.context.given import GivenRanking

    n = len(given.records)
    ranking = GivenRanking(
        given, given.embedder, lambda s: compile(s).stages,
        lambda s, result: rerank_settings(compile(s), retrieval, n, given.embedder, result,
                                          query_vector),
        run, pool=max(n, 1))
    return search_context(ranking, query, spec, pool=ranking.pool, check=check, now=now,
                          half_life=half_life, undated=undated, granularity=granularity,
                          source_tier=source_tier, text=text)


def run_stages(stages: Sequence[Stage], query: str, check: Check | None = None, *,
               query_vector: np.ndarray | None = None) -> Candidates:
    """``stages`` on ``query`` with no store to lock (candidates retrieved elsewhere, the
    first stage turning them into a batch; ``query_vector``: the query's, when the first
    stage wants it embedded): the loop of :meth:`Searcher.run` without a store, ``check``
    called before each stage (``stage:NAME``), inside long stages (``within:NAME``) and at
    the end (``done``)."""
    check_str("query", query, what="non-empty text")
    with checking(check):
        batch = Candidates.empty(query, query_vector=query_vector)
        for stage in stages:
            if check is not None:
                check(f"stage:{stage.name}")
            batch = stage(batch)
        if check is not None:
            check("done")
        return batch


def rerank_context(query: str, records: Sequence[Mapping[str, Any]],
                   embedder: Embedder | str | None = "minilm", spec: SpecLike = None,
                   typer: SourceTyper | None = None, *, retrieval: str = DEFAULT_RETRIEVAL,
                   query_vector: Sequence[float] | np.ndarray | None = None,
                   auto: AutoRetrieval | None = None,
                   resources: Mapping[str, str | Path] | None = None,
                   allow_paths: bool = True, now: str | None = None,
                   half_life: float | str | None = None, undated: UnknownAge | str = "neutral",
                   granularity: str = "document", source_tier: str = "auto",
                   text: str = "full", check: Check | None = None) -> ContextDocument:
    """The credibility-annotated context of ``records`` for ``query`` without an index: as
    :meth:`Searcher.rerank_context` (the same options, ``check`` included), with the
    embedder, typer, ``auto``, ``resources`` and ``allow_paths`` of
    :func:`credrank.rerank.rerank` (``embedder``: a name or an
    :class:`~credrank.core.embedder.Embedder`). ``from credrank import rerank_context``."""
    if typer is not None and not isinstance(typer, SourceTyper):
        raise TypeError(f"typer: expected a SourceTyper or None, got {type(typer).__name__}")
    if embedder is None or isinstance(embedder, str):
        embedder = get_embedder(embedder or "minilm")
    elif not isinstance(embedder, Embedder):
        raise TypeError(f"embedder: expected an embedder name ('minilm', 'hashing', …) or an "
                        f"Embedder, got {type(embedder).__name__}")
    from credrank.context.build import check_context_spec
    from credrank.context.given import check_context_retrieval

    check_context_retrieval(retrieval)
    spec = check_rerank_spec(check_context_spec(context_spec(spec)), "spec")
    built: dict[str, Compiled] = {}
    model = embedder

    def compile(s: PipelineSpec) -> Compiled:
        if s.key not in built:
            built[s.key] = compile_rerank(check_rerank_spec(s, "spec"), model,
                                          resources=resources, allow_paths=allow_paths)
        return built[s.key]

    given = GivenCandidates(records, embedder, typer, retrieval=retrieval,
                            with_vectors="vectors" in reads(compile(spec).stages),
                            query_vector=query_vector, auto=auto, read_scores=False)
    return given_context(given, compile, query, spec, retrieval=retrieval,
                         query_vector=query_vector, run=run_stages, check=check, now=now,
                         half_life=half_life, undated=undated, granularity=granularity,
                         source_tier=source_tier, text=text)


def _query_vector(result: Candidates,
                  query_vector: Sequence[float] | np.ndarray | None) -> str:
    """``settings.query_vector`` of a rerank document: ``given`` when the client's query
    vector was used, else ``embedded`` (also when no query vector was needed)."""
    used = (result.info.get("retrieval") or {}).get("query")
    if used is None:  # scores only (or an empty pool): as before, what the client sent
        return "given" if query_vector is not None else "embedded"
    return str(used)

