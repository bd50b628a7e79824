"""The default store: Qdrant Edge (``qdrant-edge-py``), in-process and persistent.

Layout of an index directory::

    DIR/manifest.json   format version, engine ``edge``, embedder name and dimension, BM25 on/off
    DIR/shard/          the Qdrant Edge shard (write-ahead log enabled)
    DIR/.credrank.lock  the directory lock (``flock``; :class:`~credrank.index.lock.IndexLock`)

Concurrency: a shard is open in one process at a time (the engine locks its write-ahead log).
Opened with ``lock=True`` (what :func:`credrank.index.open_store` does), a writer
(``create=True``) holds the directory lock exclusively and a reader holds it shared, so a
second writer, or a reader while a writer runs, gets a clear :class:`StoreError` before the
shard is touched; any lock error the engine still raises on open becomes one too.

Each document is one point whose id is ``uuid5(doc_id)``, so re-adding a document overwrites
it instead of duplicating it. Vectors: ``dense`` (cosine, the embedder's) and ``bm25`` (sparse,
IDF modifier, Qdrant's own BM25 tokenizer) for the lexical option. Payload: the document's
fields, its provenance (host, registered domain, source type and the rule that decided it) and
a content hash (:func:`credrank.index.payload.document_payload`).

Payload indexes: every index has a keyword index on ``source_type`` (the pushed-down priors
read each candidate's source type through it: without it the default search took 1.8 ms
instead of 0.8–1.0 at 120 and at 1,000 documents). The others (keyword on ``doc_id``, ``host``,
``registered_domain`` and ``source_id``, datetime on the five date fields) are made once the
index holds :data:`PAYLOAD_INDEX_POINTS` points, at a flush of a write (:meth:`EdgeIndex.flush`:
every ``flush_every`` points of a load, before :meth:`EdgeIndex.optimize` builds the graph, and
when a written index closes), so a large load makes them early and keeps them up to date
as it goes instead of building them over the whole corpus at the end. Each index costs
every open of the shard ≈ 4.5 ms of CPU (the engine maps and reads its pages again at every
load) and its creation ≈ 8 ms; without them a filter on those fields reads the stored payload
of every point (≈ 4 µs a point), and pushed-down freshness reads each candidate's dates from
it (+1.1–1.3 ms a search below the floor). The answers are the same either way
(``bench/scripts/bench_payload_indexes.py``; docs/results.md "Payload indexes by size"). Every
payload index credrank makes is kept mapped from its files (:data:`PAYLOAD_INDEX_MEMORY`,
:func:`create_field_index`), which the engine does not rebuild in its own memory at each open:
at 100,000 documents an open took 45 % less CPU (305 → 167 ms) at the same search times.

Search threads: every open sets the engine's search pool to :data:`SEARCH_THREADS` (one),
with which the engine runs a search on the calling thread. Left unset, a shard starts the
pool the engine derives from the machine (8 threads on 2 cores), hands every search to it and
persists the setting in the shard, so one opener's choice would bind the next; credrank passes
it at every load (:func:`edge_config`; the engine writes it into the shard's configuration
with a rename). Measured (``bench/scripts/bench_search_threads.py``, docs/results.md "The
engine's search threads"): the same answers, a search 12–24 % faster at the median and
43–50 % less CPU a query at 120, 20,000 and 100,000 documents (2 segments), where the pool's
threads cost more to wake than the segments' work they share.

Storage placement: where the engine keeps an index's dense vectors and stored payload
(:func:`storage_memory`). A new index maps them from its files and reads a page when a search
first needs it (``Memory.Cold``): the engine preallocates a segment's vector chunk and payload
page at 32 MiB each, and with ``Memory.Cached`` every open read both whole, holes included
(≈ 15 ms of CPU and 64 MiB of mapped memory an open of the 120-document demo index, most of
its open). :meth:`EdgeIndex.optimize` states the placement the index's size calls for:
``Cached`` (read into memory at every open) from :data:`CACHED_STORAGE_POINTS` points, where
a served search over ``Cold`` storage stays slower (it reads the pages through the engine's
on-disk path), else ``Cold``. The engine applies a stated placement to the segments it writes
from then on and its optimiser rebuilds those stored otherwise, so an index that grows past
the threshold, or one made before, is placed at its next optimisation (rewriting a segment:
0.5–1.0 s more at 1,000 to 5,000 documents); a load that states none leaves the segments as
they are (an index loaded with ``--no-optimize`` keeps ``Cold`` storage until ``credrank
optimize``). Measured in ``bench/scripts/bench_storage_memory.py``
(docs/results.md "Storage placement by size").

Interrupted indexing: documents are upserted in batches. Every upsert goes through the shard's
write-ahead log before :meth:`EdgeIndex.upsert` returns, so a run killed at any point (SIGKILL
included) leaves a shard that loads (replaying the log) and answers; re-running skips the
documents already present with the same content hash and adds the rest. The segments are
flushed every ``flush_every`` points (:data:`FLUSH_EVERY`), before :meth:`EdgeIndex.optimize`
and on :meth:`EdgeIndex.close`, not after every batch: a flush costs about as much as writing
a few thousand points, and the log already makes each batch durable against a killed process
(only the time to replay the log on the next open grows with ``flush_every``).

Large collections (the build-after-load procedure, measured in ``bench/scripts/bench_index.py``):
Qdrant Edge never optimises in the background, so while documents are written they sit in
plain (appendable) segments, searched exactly — the index answers from the first batch on.
The HNSW graph is built once, by :meth:`EdgeIndex.optimize` after the load (``credrank index``
does this at the end), with the parameters fixed when the index is created
(:data:`HNSW_M`, :data:`HNSW_EF_CONSTRUCT`, all cores) and an optional progress callback.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from credrank.core.candidates import Candidates
from credrank.core.validation import check_int
from credrank.documents.schema import DATE_FIELDS, Document
from credrank.index.columns import MAX_POINTS, MAX_VECTOR_BYTES, PayloadColumns
from credrank.index.diskspace import (
    OPEN_RESERVE,
    WRITER_RESERVE,
    folder_bytes,
    require_free,
    write_bytes,
)
from credrank.index.errors import StoreError
from credrank.index.formula import (
    FRESHNESS_FIELDS,
    CredibilityFormula,
    FreshnessFormula,
    formula_defaults,
    formula_fields,
    formula_priors,
)
from credrank.index.lock import IndexLock, is_lock_error
from credrank.index.manifest import (
    Manifest,
    check_index_dir,
    check_manifest,
    no_index_error,
    read_manifest,
    write_manifest,
)
from credrank.index.passages import Chunking, Span, default_chunking, passage_key
from credrank.index.payload import (
    COLUMN_FIELDS,
    DENSE,
    KEYWORD_FIELDS,
    READ_FIELDS,
    READ_PAGE,
    SPARSE,
    TEXT_FIELDS,
    bm25_text,
    check_read_where,
    check_where,
    columns_to_candidates,
    document_payload,
    document_points,
    passage_counts,
    point_id,
    point_id_u64,
    read_fields,
    returned_fields,
    stale_passages,
    to_candidates,
)
from credrank.index.store import MAX_K, bump_generation, fetch_documents

#: points written between two flushes of the segments (see the module docstring); by
#: measurement a flush costs ~0.3–0.5 s, so flushing every 64-document batch spent most of the
#: write time in flushes
FLUSH_EVERY = 20_000
#: HNSW graph parameters of a new index (edges per node, candidates while building), and the
#: threads building it (0: all cores); chosen by measurement in ``bench/scripts/bench_index.py``
HNSW_M = 16
HNSW_EF_CONSTRUCT = 100
HNSW_THREADS = 0
#: vectors below which a segment is searched exactly (KB, as Qdrant counts it)
HNSW_FULL_SCAN_THRESHOLD = 10_000
#: threads of the engine's search pool, set at every open (module docstring, "Search
#: threads"): 1 runs each search on the calling thread, without the engine's pool
SEARCH_THREADS = 1
#: points from which an index gets all its payload indexes (module docstring): below it a
#: filter on an unindexed field reads at most ≈ 4 ms of payload, and the nine cost ≈ 40 ms
#: at every open
PAYLOAD_INDEX_POINTS = 1_000
#: the payload indexes of every index, and those made from :data:`PAYLOAD_INDEX_POINTS`
RANKING_INDEXES: tuple[tuple[str, Any], ...] = (("source_type", qe.PayloadSchemaType.Keyword),)
SIZED_INDEXES: tuple[tuple[str, Any], ...] = (
    *((name, qe.PayloadSchemaType.Keyword) for name in KEYWORD_FIELDS if name != "source_type"),
    *((name, qe.PayloadSchemaType.Datetime) for name in DATE_FIELDS))
#: where the engine keeps a payload index it makes (module docstring, "Payload indexes"):
#: ``Cached``, mapped from its files and read into the page cache at an open, instead of the
#: engine's default of rebuilding it in its own memory at every open; ``None``: the default
PAYLOAD_INDEX_MEMORY: Any = qe.Memory.Cached
#: where an index keeps its dense vectors and its stored payload (module docstring, "Storage
#: placement"): ``Cold`` when it is made (mapped from the files, a page read when a search
#: first needs it), ``Cached`` from :meth:`EdgeIndex.optimize` of an index of
#: :data:`CACHED_STORAGE_POINTS` points or more (read into memory at every open)
SMALL_STORAGE_MEMORY: Any = qe.Memory.Cold
LARGE_STORAGE_MEMORY: Any = qe.Memory.Cached
#: points from which :meth:`EdgeIndex.optimize` places the storage ``Cached``: by measurement
#: (``bench/scripts/bench_storage_memory.py``) a served search over ``Cold`` storage stayed
#: 2 % slower at 500 documents, 2–5 % at 1,000 and 30 % at 5,000, while an open of a ``Cold``
#: index took 12–20 ms less CPU at every size; the same size as :data:`PAYLOAD_INDEX_POINTS`,
#: from which an index is taken to serve many searches per open
CACHED_STORAGE_POINTS = 1_000
_INDEX_PARAMS = {qe.PayloadSchemaType.Keyword: qe.KeywordIndexParams,
                 qe.PayloadSchemaType.Datetime: qe.DatetimeIndexParams,
                 qe.PayloadSchemaType.Float: qe.FloatIndexParams}


def hnsw_config(m: int = HNSW_M, ef_construct: int = HNSW_EF_CONSTRUCT,
                threads: int = HNSW_THREADS) -> Any:
    """The engine's HNSW configuration for a new index (checked: ``m`` ≥ 4, ``ef_construct``
    ≥ 4, ``threads`` ≥ 0 with 0 meaning all cores)."""
    return qe.HnswIndexConfig(m=check_int("hnsw m", m, 4),
                              ef_construct=check_int("hnsw ef_construct", ef_construct, 4),
                              full_scan_threshold=HNSW_FULL_SCAN_THRESHOLD,
                              max_indexing_threads=check_int("hnsw threads", threads, 0))


def storage_memory(points: int) -> Any:
    """The placement of the dense vectors and the stored payload of an index of ``points``
    points (module docstring, "Storage placement"): :data:`LARGE_STORAGE_MEMORY` from
    :data:`CACHED_STORAGE_POINTS`, else :data:`SMALL_STORAGE_MEMORY`."""
    return (LARGE_STORAGE_MEMORY if check_int("points", points, 0) >= CACHED_STORAGE_POINTS
            else SMALL_STORAGE_MEMORY)


def payload_selector(with_text: bool) -> Any:
    """The payload a search returns: ``RANKING_FIELDS``, plus text and cites on request."""
    return qe.PayloadSelector.Include(returned_fields(with_text))


def _filter(where: Mapping[str, Any] | None) -> Any:
    conditions: list[qe.ConditionType] = [
        qe.FieldCondition(key=k, match=qe.MatchAny(v) if isinstance(v, list)
                          else qe.MatchValue(v))
        for k, v in check_where(where).items()]
    return qe.Filter(must=conditions) if conditions else None


def _check_shard(path: Path, shard: qe.EdgeShard, manifest: Manifest) -> None:
    """``StoreError`` when the shard's points disagree with ``manifest`` (a manifest copied
    from another index, or edited): one stored point's id must be the one ``point_ids``
    derives from its ``doc_id`` (else a re-index would add every document again beside the
    old points) and its vector must have ``dim`` dimensions (else the first write or search
    fails inside the engine)."""
    points, _ = shard.scroll(qe.ScrollRequest(
        limit=1, with_payload=qe.PayloadSelector.Include(["doc_id", "passage"]),
        with_vector=[DENSE]))
    if not points:
        return
    point = points[0]
    payload = point.payload or {}
    doc_id = payload.get("doc_id")
    where = path / "manifest.json"
    if not isinstance(doc_id, str):
        raise StoreError(f"{where}: the shard's point {point.id} has no doc_id in its payload "
                         "(not written by credrank?)")
    derive = point_id_u64 if manifest.point_ids == "u64" else point_id
    number = payload.get("passage")
    expected = derive(passage_key(doc_id, number if isinstance(number, int) else 0))
    if str(point.id) != str(expected):
        kind = "64-bit integers" if isinstance(point.id, int) else "uuids"
        raise StoreError(f"{where}: declares point_ids {manifest.point_ids!r}, but the shard's "
                         f"points are keyed otherwise (ids are {kind}; document {doc_id!r} is "
                         f"point {point.id}, expected {expected}): this manifest does not "
                         "belong to this shard, and writing would add every document a second "
                         "time; restore the index's own manifest or index into a new "
                         "directory")
    dim = int(np.asarray(_dense(point.vector)).size)
    if dim != manifest.dim:
        raise StoreError(f"{where}: declares dim {manifest.dim}, but the shard's vectors have "
                         f"{dim} dimensions: this manifest does not belong to this shard; "
                         "restore the index's own manifest or index into a new directory")


def _dense(vector: qe.Vector | None) -> qe.NamedVector:
    """The dense vector of a point read with its vectors (every point is written with the
    one named vector :data:`DENSE`)."""
    if not isinstance(vector, dict):
        raise StoreError(f"expected a point with its named vector {DENSE!r}, got "
                         f"{type(vector).__name__}")
    return vector[DENSE]


def index_payload(shard: qe.EdgeShard, min_points: int | None = None) -> list[str]:
    """Make the payload indexes the shard lacks: :data:`RANKING_INDEXES` always, and
    :data:`SIZED_INDEXES` when it holds at least ``min_points`` points (default
    :data:`PAYLOAD_INDEX_POINTS`). Returns the fields indexed now. Idempotent."""
    floor = PAYLOAD_INDEX_POINTS if min_points is None else check_int("min_points", min_points, 0)
    info = shard.info()
    wanted = [*RANKING_INDEXES, *(SIZED_INDEXES if int(info.points_count) >= floor else ())]
    have = set(info.payload_schema)
    made = []
    for name, schema in wanted:
        if name not in have:
            create_field_index(shard, name, schema)
            made.append(name)
    return made


def create_field_index(shard: qe.EdgeShard, name: str, schema: Any) -> None:
    """A payload index of type ``schema`` (keyword, datetime, float) on the field ``name``,
    kept where :data:`PAYLOAD_INDEX_MEMORY` says."""
    params = (schema if PAYLOAD_INDEX_MEMORY is None
              else _INDEX_PARAMS[schema](memory=PAYLOAD_INDEX_MEMORY))
    shard.update(qe.UpdateOperation.create_field_index(name, params))


def _in_use(shard_path: Path, exc: BaseException) -> StoreError:
    return StoreError(f"index {shard_path.parent} is in use, by another process or by a store "
                      f"this process opened and has not closed (its Qdrant Edge shard is "
                      f"locked: {exc}); retry when it has finished, or close the other")


def edge_config(dim: int, bm25: bool, memory: Any = None, **settings: Any) -> qe.EdgeConfig:
    """The engine's configuration of a credrank shard: the dense vectors (cosine, ``dim``), the
    BM25 sparse vectors when ``bm25``, :data:`SEARCH_THREADS`, ``memory`` (the placement of
    the dense vectors and the stored payload, :func:`storage_memory`) and ``settings`` (the
    creation's HNSW). At a load the engine checks the vectors against the shard's and keeps
    its persisted value of the other settings left out; the segments already written keep
    their placement whatever a load states, a placement it is given applies to the segments
    written from then on, and its optimizer rebuilds the segments stored otherwise (the
    vectors' placement left out would be the engine's default for the segments it writes
    later: a load states the shard's own, :func:`stored_memory`)."""
    sparse = {SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)} if bm25 else None
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine,
                                            memory=memory)},
        sparse_vectors=sparse, payload_memory=memory, max_search_threads=SEARCH_THREADS,
        **settings)


def stored_memory(shard_path: Path) -> Any:
    """The storage placement the shard's configuration holds (its ``payload_memory``, which
    :func:`edge_config` states with the vectors'), ``None`` when it holds none or cannot be
    read. A load that stated none rewrote the configuration without the vectors' placement,
    so the segments written after it went to the engine's default until the next
    :meth:`EdgeIndex.optimize`."""
    try:
        stated = json.loads((shard_path / "edge_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    name = stated.get("payload_memory") if isinstance(stated, dict) else None
    return getattr(qe.Memory, name.capitalize(), None) if isinstance(name, str) else None


def _load(shard_path: Path, dim: int, bm25: bool,
          explain: Callable[[qe.EdgeShard], None] | None = None,
          memory: Any = None) -> qe.EdgeShard:
    """Load a shard with :func:`edge_config` (the engine writes the search threads into the
    shard's configuration, so every open sets its own and none is inherited from the last;
    ``memory``: the storage placement to state, ``None`` to keep the shard's: stated again
    from its configuration, :func:`stored_memory`); the engine's
    errors as :class:`StoreError` (a lock error says so). When the engine refuses the
    configuration, ``explain`` gets the shard loaded as it is, to raise a clearer error (a
    manifest that does not describe the shard) before the engine's."""
    if memory is None:  # keep the placement it has (the engine rewrites its configuration)
        memory = stored_memory(shard_path)
    try:
        return qe.EdgeShard.load(str(shard_path), edge_config(dim, bm25, memory))
    except Exception as exc:  # the engine raises its own types
        if is_lock_error(exc):
            raise _in_use(shard_path, exc) from exc
        cause = exc
    refused = StoreError(f"{shard_path}: the Qdrant Edge shard does not load: {cause}")
    if explain is not None:
        try:
            shard = qe.EdgeShard.load(str(shard_path))
        except Exception:  # the engine raises its own types
            raise refused from cause
        try:
            explain(shard)
        finally:
            shard.close()
    raise refused from cause


class EdgeIndex:
    """A credrank store on a Qdrant Edge shard (see module docstring)."""

    #: the engine scores the credibility formula (``FormulaScoring``)
    formula_supported = True

    def __init__(self, path: Path, shard: qe.EdgeShard, manifest: Manifest,
                 lock: IndexLock | None = None, flush_every: int = FLUSH_EVERY):
        self.path = path
        self.shard = shard
        self._manifest = manifest
        self._bm25 = qe.Bm25() if manifest.bm25 else None
        self._lock = lock
        self.flush_every = check_int("flush_every", flush_every, 1)
        self._unflushed = 0
        self._dirty = False  # written (upsert, optimize) since opening: close() flushes
        self._keep_columns = False  # keep a columnar copy of the ranking payload (keep_columns)
        self._columns: PayloadColumns | None = None
        #: ``doc_id -> point id`` of this index (``manifest.point_ids``)
        self.point_id: Callable[[str], Any] = (point_id_u64 if manifest.point_ids == "u64"
                                               else point_id)

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    # -- lifecycle ------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, *, embedder: str | None = None, dim: int | None = None,
             create: bool = False, bm25: bool = True, lock: bool = False,
             flush_every: int = FLUSH_EVERY, hnsw: Any = None,
             chunking: Chunking | None = None) -> EdgeIndex:
        """Open the index at ``path``; with ``create=True`` make it when absent.

        ``lock``: take the directory lock (exclusive with ``create=True``, else shared) and hold
        it until :meth:`close` (see the module docstring). ``flush_every``: points written
        between flushes of the segments (:data:`FLUSH_EVERY`). ``hnsw``: the HNSW build
        parameters of a *new* index (:func:`hnsw_config`; default the measured
        :data:`HNSW_M` / :data:`HNSW_EF_CONSTRUCT`); an existing index keeps its own.
        ``chunking``: how a *new* index splits long texts (default
        :func:`~credrank.index.passages.default_chunking` of ``embedder``); an existing index
        keeps its own, and one that differs is refused (:func:`check_manifest`).

        Raises :class:`StoreError` when the directory holds no index (and ``create`` is off) or
        an index of another engine, embedder or dimension, when ``path`` is a file, and when
        another process writes the index (or holds its shard).
        """
        path = Path(path)
        check_int("flush_every", flush_every, 1)
        if not lock:
            check_index_dir(path)
            index = cls._open(path, embedder=embedder, dim=dim, create=create, bm25=bm25,
                              hnsw=hnsw, chunking=chunking)
            index.flush_every = flush_every
            return index
        held = IndexLock.writer(path) if create else IndexLock.reader(path)
        try:
            index = cls._open(path, embedder=embedder, dim=dim, create=create, bm25=bm25,
                              hnsw=hnsw, chunking=chunking)
        except BaseException:
            held.release()
            raise
        index._lock = held
        index.flush_every = flush_every
        return index

    @classmethod
    def _open(cls, path: Path, *, embedder: str | None, dim: int | None, create: bool,
              bm25: bool, hnsw: Any = None, chunking: Chunking | None = None) -> EdgeIndex:
        shard_path = path / "shard"
        manifest = read_manifest(path)
        if manifest is not None:
            check_manifest(path, manifest, "edge", embedder=embedder, dim=dim,
                           chunking=chunking)
            if not shard_path.is_dir():
                raise StoreError(f"{path}: manifest present but shard folder missing")
            if create:
                require_free(path, WRITER_RESERVE, "opening the index for writing (Qdrant "
                                                   "Edge's write-ahead log reserves 64 MiB)")
            else:
                require_free(path, OPEN_RESERVE, "opening the index (Qdrant Edge's "
                                                 "write-ahead log reserves 32 MiB)")
            shard = _load(shard_path, manifest.dim, manifest.bm25,
                          explain=functools.partial(_check_shard, path, manifest=manifest))
            try:
                _check_shard(path, shard, manifest)
            except BaseException:
                shard.close()
                raise
            return cls(path, shard, manifest)
        if not create:
            raise no_index_error(path)
        if not embedder or not dim:
            raise StoreError("creating an index needs the embedder name and dimension")
        require_free(path, WRITER_RESERVE, "creating the index")
        chunks = chunking if chunking is not None else default_chunking(embedder)
        manifest = Manifest(embedder=embedder, dim=check_int("dim", dim, 1), bm25=bm25,
                            engine="edge", point_ids="u64", chunk_tokens=chunks.tokens,
                            chunk_overlap=chunks.overlap)
        path.mkdir(parents=True, exist_ok=True)
        config = edge_config(manifest.dim, bm25, SMALL_STORAGE_MEMORY,
                             hnsw_config=hnsw if hnsw is not None else hnsw_config())
        if shard_path.exists() and any(shard_path.iterdir()):
            # a creation interrupted before the manifest
            shard = _load(shard_path, manifest.dim, bm25)
        else:
            try:
                shard = qe.EdgeShard.create(str(shard_path), config)
            except Exception as exc:  # the engine raises its own types
                if is_lock_error(exc):
                    raise _in_use(shard_path, exc) from exc
                raise
        index_payload(shard)  # the ranking's own (the rest: none yet, unless the floor is 0)
        shard.flush()
        write_manifest(path, manifest)
        return cls(path, shard, manifest)

    def flush(self) -> None:
        """Make the payload indexes the index lacks (:func:`index_payload`: all of them from
        :data:`PAYLOAD_INDEX_POINTS` points), then write the segments to disk (the write-ahead
        log already holds every upsert; they are written even when making an index fails)."""
        try:
            index_payload(self.shard)
        finally:
            self.shard.flush()
        self._unflushed = 0

    def optimize(self, on_progress: Callable[[int, int], None] | None = None,
                 poll_s: float = 1.0) -> bool:
        """Let the engine merge segments and build its HNSW graph (once, after bulk indexing),
        after a :meth:`flush` (which makes the payload indexes the index lacks: the engine
        links the graph per indexed value), with the storage placement the index's size calls
        for (:func:`storage_memory`: the shard is re-opened stating it, and the engine rebuilds
        the segments stored otherwise).

        Blocking, like the engine's ``optimize``. ``on_progress(indexed, total)``, when given,
        is called about every ``poll_s`` seconds while it runs (and once at the end) with the
        engine's count of indexed vectors (dense and BM25 together) and that count's total
        (points × vector kinds). Qdrant Edge 0.9 may report the full count while the graph is
        still being built (measured at 100k points), so treat the calls as a heartbeat, not a
        fraction done. Searches are exact until the build has finished. True when anything
        was optimised."""
        require_free(self.path, OPEN_RESERVE + folder_bytes(self.path / "shard" / "segments"),
                     "optimizing the index (a merge writes the merged segment first)")
        self.flush()
        self._dirty = True
        # the placement its size calls for, stated to the engine (the loads before stated
        # none, which leaves the vectors' to the engine's default): the optimizer below
        # writes its segments so and rebuilds the ones stored otherwise
        self._reload(storage_memory(int(self.shard.info().points_count)))
        if on_progress is None:
            return bool(self.shard.optimize())
        kinds = 2 if self._bm25 is not None else 1
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["done"] = bool(self.shard.optimize())
            except BaseException as exc:  # re-raised in the caller's thread
                outcome["error"] = exc

        worker = threading.Thread(target=work, name="credrank-optimize", daemon=True)
        worker.start()
        while worker.is_alive():
            worker.join(poll_s)
            if worker.is_alive():
                info = self.shard.info()
                on_progress(int(info.indexed_vectors_count), kinds * int(info.points_count))
        if "error" in outcome:
            raise outcome["error"]
        info = self.shard.info()
        on_progress(int(info.indexed_vectors_count), kinds * int(info.points_count))
        return bool(outcome["done"])

    def _reload(self, memory: Any) -> None:
        """Close the shard and load it again stating ``memory`` as its storage placement
        (:func:`edge_config`; the directory lock stays held)."""
        self.shard.close()
        self.shard = _load(self.path / "shard", self._manifest.dim, self._manifest.bm25,
                           memory=memory)

    def close(self) -> None:
        """:meth:`flush` when anything was written since opening (a read-only search pays no
        flush and makes no payload index), then close the shard and release the directory
        lock (if held)."""
        try:
            if self._dirty:
                self.flush()
            self.shard.close()
        finally:
            if self._lock is not None:
                self._lock.release()

    def __enter__(self) -> EdgeIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        """Points: one per document, one per passage of a split one (:meth:`documents`)."""
        return int(self.shard.info().points_count)

    def documents(self) -> int:
        """Documents: the points that are no document's second or later passage."""
        if not self._manifest.split:
            return len(self)
        later = qe.FieldCondition(key="passage", range=qe.RangeFloat(gt=0))
        return int(self.shard.count(qe.CountRequest(filter=qe.Filter(must_not=[later]),
                                                    exact=True)))

    # -- the columnar copy of the ranking payload ------------------------------------------
    def keep_columns(self, keep: bool = True) -> bool:
        """Keep (``True``) or drop a columnar copy of every point's ranking payload
        (:mod:`credrank.index.columns`), so a search that returns many candidates without the
        formula reads no payload from the engine. For a long-lived process (``credrank
        serve``); built now, ≈ 1 s per 100,000 documents, and again at the first search after
        a write. Returns whether it applies: not above
        :data:`~credrank.index.columns.MAX_POINTS` documents."""
        self._keep_columns = bool(keep) and len(self) <= MAX_POINTS
        if not self._keep_columns:
            self._columns = None
        return self._copy() is not None

    def invalidate_columns(self) -> None:
        """Drop the columnar copy after a write (rebuilt at the next search when kept)."""
        self._columns = None

    def _copy(self) -> PayloadColumns | None:
        if not self._keep_columns:
            return None
        if self._columns is None:
            if len(self) > MAX_POINTS:
                self._keep_columns = False
                return None
            self._columns = PayloadColumns(COLUMN_FIELDS, self._scroll(COLUMN_FIELDS, False))
        return self._columns

    def _copy_vectors(self, copy: PayloadColumns) -> bool:
        """Whether ``copy`` holds the dense vectors: read once, at the first search that
        asks for vectors, up to :data:`~credrank.index.columns.MAX_VECTOR_BYTES` (a
        service that never asks never holds them)."""
        if copy.vectors is not None:
            return True
        dim = self.manifest.dim
        if len(copy) * dim * 4 > MAX_VECTOR_BYTES or copy.no_vectors:
            return False
        return copy.attach_vectors(((pid, vector) for pid, _, vector
                                    in self._scroll((), True)), dim)

    def _scroll(self, fields: Sequence[str], vectors: bool
                ) -> Iterable[tuple[Any, dict[str, Any], Any]]:
        selector = qe.PayloadSelector.Include(list(fields)) if fields else False
        offset = None
        while True:
            points, offset = self.shard.scroll(qe.ScrollRequest(
                offset=offset, limit=READ_PAGE, with_payload=selector,
                with_vector=[DENSE] if vectors else False))
            for p in points:
                yield p.id, p.payload or {}, _dense(p.vector) if vectors else None
            if offset is None or not points:
                return

    # -- writing --------------------------------------------------------------------------
    def existing_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """``doc_id -> content_hash`` for the given ids already in the index."""
        if not doc_ids:
            return {}
        records = self.shard.retrieve([self.point_id(d) for d in doc_ids],
                                      qe.PayloadSelector.Include(["doc_id", "content_hash"]),
                                      False)
        payloads = [r.payload or {} for r in records]
        return {pl["doc_id"]: pl.get("content_hash", "") for pl in payloads}

    def upsert(self, documents: Sequence[Document], provenance: Sequence[Mapping[str, Any]],
               vectors: np.ndarray, hashes: Sequence[str],
               passages: Sequence[Sequence[Span]] | None = None) -> None:
        """Write one batch (documents, their provenance dicts, dense vectors) through the
        write-ahead log; the segments are flushed every ``flush_every`` points. ``passages``:
        each document's passages (:func:`~credrank.index.payload.document_points`, one point
        each, its vectors consecutive rows); the passages a re-written document no longer has
        are deleted in the same write."""
        bump_generation(self)
        planned = document_points(documents, np.asarray(vectors), passages)
        points = []
        for i, key, passage, vec in planned:
            doc = documents[i]
            named: dict[str, Any] = {DENSE: np.asarray(vec, dtype=np.float32).tolist()}
            if self._bm25 is not None:
                named[SPARSE] = self._bm25.embed_document(
                    bm25_text(doc, None if passage is None else passage[2]))
            points.append(qe.Point(self.point_id(key), named,
                                   document_payload(doc, provenance[i], hashes[i], passage)))
        if points and self._manifest.point_ids == "u64":
            self._check_ids([(key, documents[i].id) for i, key, _, _ in planned])
        if not points:
            return
        payload = sum(len(documents[i].text if passage is None else
                          documents[i].text[passage[2][0]:passage[2][1]])
                      + len(documents[i].title or "") + len(documents[i].url or "") + 512
                      for i, _, passage, _ in planned)
        require_free(self.path, OPEN_RESERVE + write_bytes(len(points), self.manifest.dim,
                                                           payload),
                     f"writing {len(points)} points")
        counts = passage_counts(documents, passages)
        stale = self._stale(counts)
        if stale:
            self.shard.update(qe.UpdateOperation.delete_points(
                [self.point_id(k) for k in stale]))
        self.shard.update(qe.UpdateOperation.upsert_points(points))
        if not self._manifest.split and max(counts.values()) > 1:
            self._manifest = replace(self._manifest, split=True)
            write_manifest(self.path, self._manifest)
        self._columns = None
        self._dirty = True
        self._unflushed += len(points)
        if self._unflushed >= self.flush_every:
            self.flush()

    def _stale(self, counts: dict[str, int]) -> list[str]:
        """The keys of stored passages the batch's documents (``doc_id -> passages written``,
        :func:`~credrank.index.payload.passage_counts`) no longer have
        (:func:`~credrank.index.payload.stale_passages`); only an index with split documents
        can have any."""
        if not self._manifest.split:
            return []
        stored = {str((r.payload or {}).get("doc_id")): (r.payload or {}).get("passages")
                  for r in self.shard.retrieve([self.point_id(d) for d in counts],
                                               qe.PayloadSelector.Include(["doc_id",
                                                                           "passages"]),
                                               False)}
        return stale_passages(counts, stored)

    def _check_ids(self, keys: Sequence[tuple[str, str]]) -> None:
        """Refuse two documents with one 63-bit point id (:func:`point_id_u64` of a passage's
        key, :func:`~credrank.index.passages.passage_key`; ``keys``: ``(key, doc_id)``), in
        the batch or against the index: a collision would silently merge two documents."""
        owner: dict[qe.PointId, tuple[str, str]] = {}
        for key, d in keys:
            other = owner.setdefault(self.point_id(key), (key, d))
            if other != (key, d):
                raise StoreError(f"document ids {other[1]!r} and {d!r} have the same point id "
                                 "(a 63-bit hash collision); rename one of them")
        for r in self.shard.retrieve(list(owner), qe.PayloadSelector.Include(["doc_id"]),
                                     False):
            stored = (r.payload or {}).get("doc_id")
            if stored is not None and stored != owner[r.id][1]:
                raise StoreError(f"document id {owner[r.id][1]!r} has the point id of "
                                 f"{stored!r}, already in the index (a 63-bit hash "
                                 "collision); rename it")

    # -- reading --------------------------------------------------------------------------
    def read_payloads(self, doc_ids: Sequence[str] | None = None,
                      fields: Sequence[str] = READ_FIELDS, *,
                      where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The stored ``fields`` of ``doc_ids`` (all documents when ``None``; by id, then
        scrolled in pages of ``READ_PAGE``), each document's from its first passage (its whole
        text); see :class:`~credrank.index.store.VectorStore`."""
        selector = qe.PayloadSelector.Include(list(dict.fromkeys(["doc_id", *fields])))
        check_read_where(doc_ids, where)
        if doc_ids is not None:
            ids = list(dict.fromkeys(doc_ids))
            out = []
            for start in range(0, len(ids), READ_PAGE):
                page = [self.point_id(d) for d in ids[start:start + READ_PAGE]]
                records = self.shard.retrieve(page, selector, False)
                out += [read_fields(r.payload, fields) for r in records]
            return out
        out, offset = [], None
        if self._manifest.split:  # one row per document: its first passage
            selector = qe.PayloadSelector.Include(list(dict.fromkeys(["doc_id", "passage",
                                                                      *fields])))
        while True:
            points, offset = self.shard.scroll(qe.ScrollRequest(
                offset=offset, limit=READ_PAGE, filter=_filter(where), with_payload=selector,
                with_vector=False))
            out += [read_fields(p.payload, fields) for p in points
                    if not (p.payload or {}).get("passage")]
            if offset is None or not points:
                return out

    def read_vectors(self, doc_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """``doc_id -> stored dense vector`` of ``doc_ids`` found in the index (by id, in
        pages of ``READ_PAGE``); what an index-time score reads instead of embedding again."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, np.ndarray] = {}
        selector = qe.PayloadSelector.Include(["doc_id"])
        for start in range(0, len(ids), READ_PAGE):
            for r in self.shard.retrieve([self.point_id(d) for d in ids[start:start + READ_PAGE]],
                                         selector, [DENSE]):
                out[str((r.payload or {})["doc_id"])] = np.asarray(_dense(r.vector),
                                                                   dtype=np.float32)
        return out

    def _to_candidates(self, query: str, points: Iterable[Any], with_vectors: bool,
                       query_vector: np.ndarray | None = None) -> Candidates:
        points = list(points)
        return to_candidates(
            query, [p.payload for p in points], [p.score for p in points],
            vectors=[p.vector[DENSE] for p in points] if with_vectors else None,
            query_vector=query_vector, dim=self.manifest.dim)

    def search_dense(self, query: str, query_vector: np.ndarray, fetch_k: int, *,
                     with_vectors: bool = False, with_text: bool = False, exact: bool = False,
                     where: Mapping[str, Any] | None = None, unit: str = "document"
                     ) -> Candidates:
        """The ``fetch_k`` nearest documents by cosine similarity, each at its best passage
        (or the nearest passages, ``unit="passage"``; :func:`fetch_documents`)."""
        k = check_int("fetch_k", fetch_k, 1, MAX_K)
        vector = np.asarray(query_vector).tolist()

        def fetch(limit: int) -> Candidates:
            def request(payload: Any, vectors: bool) -> Any:
                return qe.QueryRequest(
                    limit=limit, query=qe.Query.Nearest(vector, using=DENSE),
                    filter=_filter(where), with_payload=payload,
                    with_vector=[DENSE] if vectors else False,
                    params=qe.SearchParams(exact=exact))
            return self._answer(query, request, with_vectors, with_text, query_vector)
        return fetch_documents(fetch, k, split=self._manifest.split, unit=unit)

    def search_bm25(self, query: str, fetch_k: int, *, with_vectors: bool = False,
                    with_text: bool = False, where: Mapping[str, Any] | None = None,
                    unit: str = "document") -> Candidates:
        """The ``fetch_k`` best documents by BM25 (Qdrant's sparse vectors with IDF), each at
        its best passage (or the best passages, ``unit="passage"``)."""
        if self._bm25 is None:
            raise StoreError(f"{self.path}: this index was built without BM25 vectors")
        k = check_int("fetch_k", fetch_k, 1, MAX_K)
        sparse = self._bm25.embed_query(query)

        def fetch(limit: int) -> Candidates:
            def request(payload: Any, vectors: bool) -> Any:
                return qe.QueryRequest(
                    limit=limit, query=qe.Query.Nearest(sparse, using=SPARSE),
                    filter=_filter(where), with_payload=payload,
                    with_vector=[DENSE] if vectors else False)
            return self._answer(query, request, with_vectors, with_text)
        return fetch_documents(fetch, k, split=self._manifest.split, unit=unit)

    def _answer(self, query: str, request: Callable[[Any, bool], Any], with_vectors: bool,
                with_text: bool, query_vector: np.ndarray | None = None) -> Candidates:
        """The engine's answer to ``request(payload selector)`` as a batch: with the
        columnar copy kept (:meth:`keep_columns`), the points come without payload (the text
        alone when asked for) and their meta columns (and vectors, when kept) from the copy;
        else with the payload."""
        copy = self._copy()
        if copy is not None:
            from_engine = with_vectors and not self._copy_vectors(copy)
            points = self.shard.query(request(_selector(TEXT_FIELDS) if with_text else False,
                                              from_engine))
            if not points:
                return Candidates.empty(query, self.manifest.dim if with_vectors else None)
            rows = copy.rows([p.id for p in points])
            if rows is not None:
                vectors: Any = None
                if from_engine:
                    vectors = [_dense(p.vector) for p in points]
                elif with_vectors:
                    assert copy.vectors is not None
                    vectors = copy.vectors[rows]
                return columns_to_candidates(
                    query, copy.take(rows), [p.score for p in points],
                    text=[p.payload for p in points] if with_text else None,
                    vectors=vectors, query_vector=query_vector)
            self._columns = None  # a point the copy does not know: stale, rebuilt next time
        return self._to_candidates(
            query, self.shard.query(request(payload_selector(with_text), with_vectors)),
            with_vectors, query_vector)

    def search_formula(self, query: str, query_vector: np.ndarray, fetch_k: int, top_k: int,
                       priors: Mapping[str, float], *, with_vectors: bool = False,
                       exact: bool = False, with_text: bool = False,
                       freshness: FreshnessFormula | None = None,
                       fields: Sequence[str] | None = None,
                       credibility: CredibilityFormula | None = None) -> Candidates:
        """Credibility-aware search pushed down into the engine.

        A prefetch of ``fetch_k`` nearest neighbours is rescored by the formula
        ``max($score, 0) × Σ_t λ_t·[source_type = t]`` (:data:`credrank.index.formula.FORMULA`)
        — the same ``multiply`` combination as :func:`credrank.combine.combine_multiply` with
        the prior of :class:`credrank.stages.prior.SourcePrior` — times, with ``freshness``,
        the half-life factor of :func:`freshness_expression` (chapter 35.7), with
        ``credibility`` the learned-credibility factor of :func:`credibility_expression`, and
        the ``top_k`` best are returned, with the payload ``fields`` (default:
        ``RANKING_FIELDS``, + text and cites with ``with_text``;
        :func:`credrank.index.formula.formula_fields`).
        """
        selector = _selector(tuple(formula_fields(fields, with_text)))
        formula = _formula(formula_priors(priors), freshness, credibility)
        prefetch = qe.Prefetch(limit=check_int("fetch_k", fetch_k, 1, MAX_K),
                               params=qe.SearchParams(exact=exact),
                               query=qe.Query.Nearest(np.asarray(query_vector).tolist(),
                                                      using=DENSE))
        limit = check_int("top_k", top_k, 1, MAX_K)

        def request(payload: Any, vectors: bool) -> Any:
            return qe.QueryRequest(limit=limit, prefetches=[prefetch], query=formula,
                                   with_payload=payload,
                                   with_vector=[DENSE] if vectors else False)
        if fields is None:  # the whole pool's ranking payload: the columnar copy, when kept
            return self._answer(query, request, with_vectors, with_text, query_vector)
        return self._to_candidates(query, self.shard.query(request(selector, with_vectors)),
                                   with_vectors, query_vector)

    def search_source(self, query_vector: np.ndarray, source_id: str, k: int) -> Candidates:
        """The ``k`` nearest documents of one source (``source_id`` payload filter)."""
        return self.search_dense("", query_vector, k, with_text=True,
                                 where={"source_id": source_id})


@functools.lru_cache(maxsize=64)
def _selector(fields: tuple[str, ...]) -> Any:
    """The payload selector of ``fields`` (built once per field list)."""
    return qe.PayloadSelector.Include(list(fields))


@functools.lru_cache(maxsize=64)
def _formula(priors: tuple[tuple[str, float], ...], freshness: FreshnessFormula | None,
             credibility: CredibilityFormula | None = None) -> Any:
    """:data:`credrank.index.formula.FORMULA` (× the freshness factor, × the credibility
    factor) as a Qdrant Edge formula, built once per prior table, freshness and credibility
    spec (not per query)."""
    prior_expr = qe.Expression.Sum([
        qe.Expression.Mult([
            qe.Expression.Constant(weight),
            qe.Expression.Condition(qe.FieldCondition(
                key="source_type", match=qe.MatchValue(t))),
        ]) for t, weight in priors])
    parts = [qe.Expression.Max([qe.Expression.Variable("$score"),
                                qe.Expression.Constant(0.0)]), prior_expr]
    if freshness is not None:
        parts.append(freshness_expression(freshness))
    if credibility is not None:
        parts.append(credibility_expression(credibility))
    return qe.Formula(qe.Expression.Mult(parts),
                      defaults=formula_defaults(freshness, credibility) or None)


def credibility_expression(spec: CredibilityFormula) -> Any:
    """:data:`credrank.index.formula.CREDIBILITY_FORMULA` as a Qdrant Edge expression:
    ``floor + (1 − floor)·([key_field = K]·$payload.field + (1 − [key_field = K])·p₀)``
    (the caller sets the field's formula default to ``p₀``)."""
    ok = qe.Expression.Condition(qe.FieldCondition(key=spec.key_field,
                                                   match=qe.MatchValue(spec.key)))
    stale = qe.Expression.Sum([qe.Expression.Constant(1.0), qe.Expression.Neg(ok)])
    p = qe.Expression.Sum([qe.Expression.Mult([ok, qe.Expression.Variable(spec.field)]),
                           qe.Expression.Mult([stale, qe.Expression.Constant(spec.neutral)])])
    return qe.Expression.Sum([qe.Expression.Constant(spec.floor),
                              qe.Expression.Mult([qe.Expression.Constant(1.0 - spec.floor), p])])


def freshness_expression(spec: FreshnessFormula) -> Any:
    """:data:`credrank.index.formula.FRESHNESS_FORMULA` as a Qdrant Edge expression.

    ``D(f) = [f ≤ T]·exp_decay(f; target T, midpoint 0.5, scale τ) + [f > T]·w_undated =
    [f ≤ T]·2^(−(T − f)/τ) + [f > T]·w_undated`` (Qdrant's exponential decay is
    ``exp(ln(midpoint)·|x − target|/scale)``; datetimes are seconds; a date after ``T`` is an
    unknown age); the first non-empty field of ``observed_at``, ``verified_at``,
    ``published_at`` picks its ``D``; all empty gives ``undated_weight``. An empty field's
    formula default is ``T`` (set by the caller), so its ``D`` is 1 and is multiplied by 0."""
    now = qe.Expression.Datetime(spec.now)

    def empty(name: str) -> Any:
        return qe.Expression.Condition(qe.IsEmptyCondition(name))

    def one_minus(condition: Any) -> Any:
        return qe.Expression.Sum([qe.Expression.Constant(1.0), qe.Expression.Neg(condition)])

    def after(name: str) -> Any:  # [f > T]
        return qe.Expression.Condition(
            qe.FieldCondition(name, range=qe.RangeDateTime(gt=spec.now)))

    def decay(name: str) -> Any:
        return qe.Expression.Sum([
            qe.Expression.Mult([one_minus(after(name)), qe.Expression.Decay(
                qe.DecayKind.Exp, qe.Expression.DatetimeKey(name), now, 0.5,
                spec.scale_seconds)]),
            qe.Expression.Mult([after(name), qe.Expression.Constant(spec.undated_weight)])])

    terms: list[Any] = []
    before: list[Any] = []  # the [empty] conditions of the preferred fields
    for name in FRESHNESS_FIELDS:
        terms.append(qe.Expression.Mult([*before, one_minus(empty(name)), decay(name)]))
        before.append(empty(name))
    terms.append(qe.Expression.Mult([*before, qe.Expression.Constant(spec.undated_weight)]))
    return qe.Expression.Sum(terms)
