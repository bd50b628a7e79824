"""Open (or create) the store an index directory describes: one function for every engine.

``DIR/manifest.json`` records the engine; :func:`open_store` reads it, checks it against what
the caller asked for and opens :class:`~credrank.index.qdrant_edge.EdgeIndex` (``edge``, the
default) or :class:`~credrank.index.qdrant_server.QdrantServerIndex` (``qdrant``). A manifest
without an engine (written before engines were recorded) means ``edge``.

Concurrency (engine ``edge``): the store holds the directory lock ``DIR/.credrank.lock``
(:class:`~credrank.index.lock.IndexLock`) until it is closed — exclusively with
``create=True`` (a writer), shared otherwise (a reader). A second writer, or a reader while a
writer runs, gets a :class:`StoreError` naming the writer's PID and start time, and the running
writer is not disturbed. Engine ``qdrant`` takes no directory lock: the server (or the client's
local mode, which locks its folder itself) arbitrates concurrent use, upserts are idempotent,
and the manifest is written atomically.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from credrank.index.errors import StoreError
from credrank.index.manifest import ENGINES, check_index_dir, check_manifest, read_manifest
from credrank.index.passages import Chunking
from credrank.index.qdrant_edge import EdgeIndex
from credrank.index.store import VectorStore


def open_store(index_dir: str | Path, engine: str | None = None, *,
               qdrant_url: str | None = None, api_key: str | None = None,
               qdrant_path: str | Path | None = None, collection: str | None = None,
               embedder: str | None = None, dim: int | None = None, create: bool = False,
               bm25: bool = True, chunking: Chunking | None = None) -> VectorStore:
    """The store of ``index_dir``.

    ``engine``: ``edge`` or ``qdrant``; ``None`` takes the manifest's (``edge`` for a new
    index). For ``qdrant``: ``qdrant_url`` (+ ``api_key``) for a server or cluster, or
    ``qdrant_path`` for the client's local mode, and optionally ``collection``; an existing
    index reuses the recorded location and collection. ``embedder``/``dim`` are checked against
    an existing index and needed to create one (``create=True``). ``chunking``: how a new
    index splits long texts into passages (default: the embedder's window,
    :func:`~credrank.index.passages.default_chunking`); checked against an existing index's.

    Raises ``ValueError`` for contradictory options and :class:`StoreError` for a missing
    index, an index of another engine (naming both), embedder or dimension, an engine that
    cannot be reached, an ``index_dir`` that is a file, and (engine ``edge``) an index another
    process is writing (see the module docstring).
    """
    if engine is not None and engine not in ENGINES:
        raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    check_index_dir(index_dir)
    manifest = read_manifest(index_dir)
    if manifest is not None and engine is not None:
        check_manifest(index_dir, manifest, engine)
    chosen = engine or (manifest.engine if manifest is not None else "edge")
    if chosen not in ENGINES:
        raise StoreError(f"{index_dir}: engine {chosen!r} cannot be opened from a directory; "
                         f"expected one of {', '.join(ENGINES)}")
    if chosen == "edge":
        given = [name for name, value in (("qdrant_url/--qdrant-url", qdrant_url),
                                          ("api_key/--api-key-env", api_key),
                                          ("qdrant_path/--qdrant-path", qdrant_path),
                                          ("collection/--collection", collection))
                 if value is not None]
        if given:
            whose = ("this index uses engine 'edge'" if manifest is not None else
                     "a new index uses engine 'edge' unless engine 'qdrant' is asked for")
            raise ValueError(f"{', '.join(given)}: only for engine 'qdrant' ({whose})")
        return EdgeIndex.open(index_dir, embedder=embedder, dim=dim, create=create, bm25=bm25,
                              lock=True, chunking=chunking)
    if qdrant_url is not None and qdrant_path is not None:
        raise ValueError("qdrant_url/--qdrant-url and qdrant_path/--qdrant-path exclude each "
                         "other: a server, or the client's local mode in a folder")
    if importlib.util.find_spec("qdrant_client") is None:
        raise StoreError("engine 'qdrant' needs the optional 'qdrant' extra: "
                         "pip install 'credrank[qdrant]'")
    # optional heavy dependency (qdrant-client, about 2 s to import): only for 'qdrant'. Found
    # above, so an ImportError raised here is a real error and is not swallowed.
    from credrank.index.qdrant_server import QdrantServerIndex

    return QdrantServerIndex.open(index_dir, url=qdrant_url, api_key=api_key, path=qdrant_path,
                                  collection=collection, embedder=embedder, dim=dim,
                                  create=create, bm25=bm25, chunking=chunking)
