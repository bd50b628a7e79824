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
from pathlib import Path
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.index.embed import get_embedder
from credrank.index.opener import open_store
from credrank.index.store import VectorStore
from credrank.provenance import SourceTyper
from credrank.rerank import rerank_hits, rerank_pipeline
from credrank.search import (
    SearchSettings,
    build_pipeline,
    describe,
    search_document,
    search_settings,
)


class Searcher:
    """An open index, its embedder and a source typer; ``search`` and ``rerank`` on them.

    ``embedder`` defaults to the one named in the index manifest (loaded once, here);
    ``typer`` (used by :meth:`rerank` only: indexed documents were typed when indexed) to the
    built-in rules.
    """

    def __init__(self, store: VectorStore, embedder: Embedder | None = None,
                 typer: SourceTyper | None = None):
        self.store = store
        self.embedder = embedder or get_embedder(store.manifest.embedder)
        if self.embedder.name != store.manifest.embedder:
            raise ValueError(f"embedder: the index was built with {store.manifest.embedder!r}, "
                             f"got {self.embedder.name!r}")
        self.typer = typer or SourceTyper()
        self._lock = threading.Lock()

    @classmethod
    def open(cls, index_dir: str | Path, *, tables: Sequence[str | Path] = (),
             trust_declared: bool = False, **store_options: Any) -> Searcher:
        """Open ``index_dir`` for reading (``store_options``: see
        :func:`credrank.index.open_store`) with a typer over the domain ``tables``."""
        store = open_store(index_dir, **store_options)
        try:
            return cls(store, typer=SourceTyper(list(tables), trust_declared=trust_declared))
        except BaseException:
            store.close()
            raise

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

    def describe(self, settings: SearchSettings) -> dict[str, Any]:
        """The settings as JSON, with the engine that answers."""
        return describe(settings, self.store)

    # -- queries against the index ---------------------------------------------------------
    def search(self, query: str, settings: SearchSettings | None = None) -> Candidates:
        """One query through :func:`credrank.search.build_pipeline` (as ``credrank search``)."""
        settings = settings or SearchSettings()
        pipeline = build_pipeline(self.store, self.embedder, settings)
        with self._lock:
            return pipeline.search(query)

    def search_json(self, query: str, settings: SearchSettings | None = None,
                    **extra: Any) -> dict[str, Any]:
        """The ``credrank search --json`` document of one query."""
        settings = settings or SearchSettings()
        return search_document(query, self.describe(settings), self.search(query, settings),
                               **extra)

    def search_many(self, queries: Iterable[tuple[str, str]],
                    settings: SearchSettings | None = None
                    ) -> Iterator[tuple[str, Candidates]]:
        """``(query id, result)`` for each ``(query id, text)``, in order, one pipeline."""
        settings = settings or SearchSettings()
        pipeline = build_pipeline(self.store, self.embedder, settings)
        for qid, text in queries:
            with self._lock:
                result = pipeline.search(text)
            yield qid, result

    # -- candidates retrieved elsewhere ----------------------------------------------------
    def rerank(self, query: str, records: Sequence[Mapping[str, Any]],
               settings: SearchSettings | None = None, *, retrieval: str = "cosine",
               query_vector: Sequence[float] | None = None) -> Candidates:
        """Rerank a client's candidates (:func:`credrank.rerank.rerank_pipeline`)."""
        settings = settings or SearchSettings()
        return rerank_pipeline(records, self.embedder, settings, self.typer,
                               retrieval=retrieval, query_vector=query_vector).search(query)

    def rerank_json(self, query: str, records: Sequence[Mapping[str, Any]],
                    settings: SearchSettings | None = None, *, retrieval: str = "cosine",
                    query_vector: Sequence[float] | None = None) -> dict[str, Any]:
        """The ``/rerank`` document: as ``credrank search --json``, each hit with the
        client's ``metadata`` and ``client_score``."""
        settings = settings or SearchSettings()
        result = self.rerank(query, records, settings, retrieval=retrieval,
                             query_vector=query_vector)
        described = {**describe(settings), "retrieval": retrieval, "pushdown": False,
                     "fetch_k": len(records), "embedder": self.embedder.name,
                     "query_vector": "given" if query_vector is not None else "embedded"}
        return {"credrank_rerank": 1, "query": query, "settings": described,
                "hits": rerank_hits(result), "info": result.info}

    # -- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            self.store.close()

    def __enter__(self) -> Searcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
