"""A store on ``qdrant-client``: a Qdrant server or cluster, or the client's local mode.

The same points as :mod:`credrank.index.qdrant_edge` — id ``uuid5(doc_id)``, named vectors
``dense`` (cosine) and ``bm25`` (sparse, IDF modifier), the payload of
:func:`credrank.index.payload.document_payload` — in one Qdrant *collection*. On a server, keyword
payload indexes on ``doc_id``, ``source_type``, ``host``, ``registered_domain`` and
``source_id`` and datetime indexes on the five date fields are created with the collection (the
client's local mode has no payload indexes and is not given any).

BM25 vectors are computed client-side by Qdrant Edge's BM25 model (``qdrant_edge.Bm25``: the
same tokenizer and weights as the Edge backend, no model download, no server-side inference);
the server applies the IDF modifier at query time.

The index directory holds only ``DIR/manifest.json`` (engine ``qdrant``, the collection name and
whether a server URL or a local-mode folder was used, never the API key); the data lives in the
collection. Reach a server with ``url`` (+ ``api_key``) or run in-process on a folder with
``path`` — slow (exact brute force in Python), the stand-in for a server in tests.

Formula pushdown uses ``FormulaQuery`` over a dense ``Prefetch`` (qdrant-client ≥ 1.14 and a
server ≥ 1.14; older clients fall back to the Python path): ``max($score, 0)`` is written
``0.5·($score + |$score|)``, which is exact and needs no ``max`` expression (absent from
qdrant-client 1.14 and 1.15). On a server it is two requests, so that a collection of any number
of shards ranks the same pool as the Python path (:meth:`QdrantServerIndex.search_formula`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import qdrant_edge as qe
from qdrant_client import QdrantClient, models

from credrank.core.candidates import Candidates
from credrank.core.validation import check_int
from credrank.documents.schema import DATE_FIELDS, Document
from credrank.index.errors import StoreError
from credrank.index.formula import (
    FRESHNESS_FIELDS,
    CredibilityFormula,
    FreshnessFormula,
    formula_defaults,
    formula_fields,
    formula_priors,
)
from credrank.index.manifest import (
    Manifest,
    check_manifest,
    no_index_error,
    read_manifest,
    write_manifest,
)
from credrank.index.passages import Chunking, Span, default_chunking
from credrank.index.payload import (
    DENSE,
    KEYWORD_FIELDS,
    READ_FIELDS,
    READ_PAGE,
    SPARSE,
    bm25_text,
    check_read_where,
    check_where,
    document_payload,
    document_points,
    passage_counts,
    point_id,
    read_fields,
    returned_fields,
    stale_passages,
    to_candidates,
)
from credrank.index.store import bump_generation, fetch_documents

_COLLECTION = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
#: points per upsert request (keeps requests far below a server's 32 MB default limit)
UPSERT_BATCH = 256
#: the root ``limit + offset`` from which a collection of several shards asks each shard for
#: fewer points (a Poisson estimate of its share) unless the request's own ``params`` are exact:
#: ``SHARD_QUERY_SUBSAMPLING_LIMIT`` of Qdrant's ``lib/collection/src/collection/query.rs``
#: (qdrant PRs #6019, #6056). The root ``params`` reach the shards whatever the root query
#: (``try_into_shard_request`` in ``universal_query/collection_query.rs``)
SHARD_SAMPLING_LIMIT = 128
#: the root query that passes a prefetch's points through unchanged (``$score``): a request
#: whose root is a rescoring of a prefetch can be marked exact, which turns the shard sampling
#: off, while the prefetch keeps its own (HNSW) search parameters
#: (``None`` with a qdrant-client older than 1.14, which has no formula queries: such a client
#: searches plainly, and a sharded collection may then sample a large answer)
_PASS_THROUGH = (models.FormulaQuery(formula="$score") if hasattr(models, "FormulaQuery")
                 else None)


def default_collection(index_dir: str | Path) -> str:
    """The collection name used when none is given: ``credrank-<index folder name>``."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", Path(index_dir).resolve().name) or "index"
    return f"credrank-{name}"[:255]


def public_url(url: str) -> str:
    """``url`` without user info, query or fragment (what a manifest may record)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _filter(where: Mapping[str, Any] | None) -> models.Filter | None:
    conditions: list[models.Condition] = [
        models.FieldCondition(key=k, match=models.MatchAny(any=v) if isinstance(v, list)
                              else models.MatchValue(value=v))
        for k, v in check_where(where).items()]
    return models.Filter(must=conditions) if conditions else None


def _sparse(vector: Any) -> models.SparseVector:
    return models.SparseVector(indices=list(vector.indices), values=list(vector.values))


def formula_query(priors: Mapping[str, float], freshness: FreshnessFormula | None = None,
                  credibility: CredibilityFormula | None = None) -> Any:
    """:data:`credrank.index.formula.FORMULA` as a ``FormulaQuery``:
    ``0.5·($score + |$score|) × Σ_t λ_t·[source_type = t]`` (× :func:`freshness_expression`
    with ``freshness``, whose date keys default to ``T``; × :func:`credibility_expression`
    with ``credibility``, whose score field defaults to its neutral ``p₀``)."""
    positive = models.MultExpression(mult=[
        0.5, models.SumExpression(sum=["$score", models.AbsExpression(abs="$score")])])
    prior = models.SumExpression(sum=[
        models.MultExpression(mult=[weight, models.FieldCondition(
            key="source_type", match=models.MatchValue(value=t))])
        for t, weight in formula_priors(priors)])
    parts: list[Any] = [positive, prior]
    if freshness is not None:
        parts.append(freshness_expression(freshness))
    if credibility is not None:
        parts.append(credibility_expression(credibility))
    defaults = formula_defaults(freshness, credibility)
    if not defaults:
        return models.FormulaQuery(formula=models.MultExpression(mult=parts))
    return models.FormulaQuery(formula=models.MultExpression(mult=parts), defaults=defaults)


@functools.lru_cache(maxsize=64)
def _formula_query(priors: tuple[tuple[str, float], ...],
                   freshness: FreshnessFormula | None,
                   credibility: CredibilityFormula | None = None) -> Any:
    """:func:`formula_query`, built once per prior table, freshness and credibility spec."""
    return formula_query(dict(priors), freshness, credibility)


def credibility_expression(spec: CredibilityFormula) -> Any:
    """:data:`credrank.index.formula.CREDIBILITY_FORMULA` as a Qdrant expression:
    ``floor + (1 − floor)·([key_field = K]·field + (1 − [key_field = K])·p₀)`` (the same
    numbers as :func:`credrank.index.qdrant_edge.credibility_expression`)."""
    ok = models.FieldCondition(key=spec.key_field, match=models.MatchValue(value=spec.key))
    stale = models.SumExpression(sum=[1.0, models.NegExpression(neg=ok)])
    p = models.SumExpression(sum=[models.MultExpression(mult=[ok, spec.field]),
                                  models.MultExpression(mult=[stale, spec.neutral])])
    return models.SumExpression(sum=[spec.floor, models.MultExpression(
        mult=[1.0 - spec.floor, p])])


def freshness_expression(spec: FreshnessFormula) -> Any:
    """:data:`credrank.index.formula.FRESHNESS_FORMULA` as a Qdrant expression: for the first
    non-empty of ``observed_at``, ``verified_at``, ``published_at``, ``[f ≤ T]·exp_decay(x =
    f, target = T, midpoint = 0.5, scale = τ) + [f > T]·undated_weight`` (a date after ``T``
    is an unknown age); all empty: ``undated_weight`` (the same numbers as
    :func:`credrank.index.qdrant_edge.freshness_expression`)."""
    now = models.DatetimeExpression(datetime=spec.now)

    def empty(name: str) -> Any:
        return models.IsEmptyCondition(is_empty=models.PayloadField(key=name))

    def one_minus(condition: Any) -> Any:
        return models.SumExpression(sum=[1.0, models.NegExpression(neg=condition)])

    def after(name: str) -> Any:  # [f > T]
        return models.FieldCondition(key=name, range=models.DatetimeRange(gt=spec.instant))

    def decay(name: str) -> Any:
        return models.SumExpression(sum=[
            models.MultExpression(mult=[one_minus(after(name)), models.ExpDecayExpression(
                exp_decay=models.DecayParamsExpression(
                    x=models.DatetimeKeyExpression(datetime_key=name), target=now,
                    midpoint=0.5, scale=spec.scale_seconds))]),
            models.MultExpression(mult=[after(name), spec.undated_weight])])

    terms: list[Any] = []
    before: list[Any] = []  # the [empty] conditions of the preferred fields
    for name in FRESHNESS_FIELDS:
        terms.append(models.MultExpression(mult=[*before, one_minus(empty(name)),
                                                 decay(name)]))
        before.append(empty(name))
    terms.append(models.MultExpression(mult=[*before, spec.undated_weight]))
    return models.SumExpression(sum=terms)


class QdrantServerIndex:
    """A credrank store in one collection of a Qdrant server, cluster or local-mode folder."""

    #: formula queries exist in this client (≥ 1.14); else pushdown falls back to Python
    formula_supported = hasattr(models, "FormulaQuery") and hasattr(models, "AbsExpression")

    def __init__(self, client: QdrantClient, collection: str, manifest: Manifest, *,
                 local: bool, where: str, index_dir: Path | None = None):
        self.client, self.collection = client, collection
        self._manifest = manifest
        self.local, self.where, self.path = local, where, index_dir
        self._bm25 = qe.Bm25() if manifest.bm25 else None
        #: the formula search ranks the collection's global top ``fetch_k`` (two requests,
        #: :meth:`search_formula`); ``False`` (local mode: always one shard) asks one request
        self.global_pool = not local

    @property
    def manifest(self) -> Manifest:
        return self._manifest

    # -- lifecycle ----------------------------------------------------------------------------
    @staticmethod
    def connect(*, url: str | None = None, api_key: str | None = None,
                path: str | Path | None = None, timeout: int | None = None) -> QdrantClient:
        """A client for a server (``url``, optional ``api_key``) or local mode (``path``)."""
        if (url is None) == (path is None):
            raise ValueError("qdrant: expected exactly one of a server URL or a local-mode "
                             f"path, got url={url!r} and path={path!r}")
        if api_key is not None and url is None:
            raise ValueError("qdrant: an API key applies to a server URL, not to local mode")
        try:
            if url is not None:
                return QdrantClient(url=url, api_key=api_key, timeout=timeout)
            assert path is not None  # exactly one of url and path (checked above)
            Path(path).mkdir(parents=True, exist_ok=True)
            return QdrantClient(path=str(path))
        except Exception as exc:  # the client raises many types (lock held, bad URL, …)
            where = public_url(url) if url else f"local mode at {path}"
            raise StoreError(f"qdrant ({where}): cannot open the client: {exc}") from exc

    @classmethod
    def open(cls, index_dir: str | Path, *, url: str | None = None,
             api_key: str | None = None, path: str | Path | None = None,
             collection: str | None = None, embedder: str | None = None,
             dim: int | None = None, create: bool = False, bm25: bool = True,
             shard_number: int | None = None, replication_factor: int | None = None,
             chunking: Chunking | None = None) -> QdrantServerIndex:
        """Open the index described by ``index_dir/manifest.json``; with ``create=True`` make
        the manifest and the collection when absent.

        An existing index reuses its recorded collection and location unless ``url`` / ``path``
        override the location (same mode only). ``shard_number`` and ``replication_factor``
        apply when the collection is created on a cluster; ``chunking`` (default
        :func:`~credrank.index.passages.default_chunking`) when the index is created, checked
        against an existing one's. Raises :class:`StoreError` naming the directory, the
        collection and the location.
        """
        index_dir = Path(index_dir)
        manifest = read_manifest(index_dir)
        existing = manifest is not None
        if collection is not None and not _COLLECTION.match(collection):
            raise ValueError(f"collection: expected 1-255 letters, digits, '_' or '-', "
                             f"got {collection!r}")
        if manifest is not None:
            check_manifest(index_dir, manifest, "qdrant", embedder=embedder, dim=dim,
                           chunking=chunking)
            mode = "url" if url is not None else "path" if path is not None else None
            if mode is not None and mode != manifest.qdrant_mode:
                built = ("on a Qdrant server" if manifest.qdrant_mode == "url"
                         else "in qdrant-client local mode")
                raise StoreError(f"{index_dir}: index was built {built} at "
                                 f"{manifest.qdrant_location}, but a "
                                 f"{'server URL' if mode == 'url' else 'local-mode path'} "
                                 "was given")
            if collection is not None and collection != manifest.collection:
                raise StoreError(f"{index_dir}: index lives in collection "
                                 f"{manifest.collection!r}, not {collection!r}")
            if mode is None:
                if manifest.qdrant_mode == "url":
                    url = manifest.qdrant_location
                else:
                    path = manifest.qdrant_location
            collection = manifest.collection
        else:
            if not create:
                raise no_index_error(index_dir)
            if not embedder or not dim:
                raise StoreError("creating an index needs the embedder name and dimension")
            if (url is None) == (path is None):
                raise ValueError("creating a qdrant index needs a server URL (--qdrant-url) or "
                                 "a local-mode folder (--qdrant-path), exactly one")
            if url is not None:
                location = public_url(url)
            else:
                assert path is not None  # exactly one of url and path (checked above)
                location = str(Path(path).resolve())
            chunks = chunking if chunking is not None else default_chunking(embedder)
            manifest = Manifest(
                embedder=embedder, dim=check_int("dim", dim, 1), bm25=bm25, engine="qdrant",
                collection=collection or default_collection(index_dir),
                qdrant_mode="url" if url is not None else "path", qdrant_location=location,
                chunk_tokens=chunks.tokens, chunk_overlap=chunks.overlap)
            collection = manifest.collection
        assert collection is not None
        where = public_url(url) if url is not None else f"local mode at {path}"
        client = cls.connect(url=url, api_key=api_key, path=path)
        store = cls(client, collection, manifest, local=url is None,
                    where=f"Qdrant {where}", index_dir=index_dir)
        try:
            exists = store._call("check the collection", client.collection_exists, collection)
            if not exists:
                if existing:
                    raise StoreError(f"{index_dir}: collection {collection!r} not found "
                                     f"({store.where}); was it deleted?")
                store._create(shard_number, replication_factor)
            # a collection found at creation is reused (a creation interrupted before the
            # manifest was written, or one made beforehand with the cluster's own settings)
            store._check_collection()
            if not existing:
                index_dir.mkdir(parents=True, exist_ok=True)
                write_manifest(index_dir, manifest)
        except BaseException:
            client.close()
            raise
        return store

    @classmethod
    def in_memory(cls, embedder: str, dim: int, *, bm25: bool = True,
                  collection: str = "credrank") -> QdrantServerIndex:
        """A new collection in qdrant-client's local mode held in memory (nothing persisted,
        no manifest): the same search code as a folder, without its per-point disk writes —
        for benchmarks and tests."""
        chunks = default_chunking(embedder)
        manifest = Manifest(embedder=embedder, dim=check_int("dim", dim, 1), bm25=bm25,
                            engine="qdrant", collection=collection, qdrant_mode="path",
                            qdrant_location=":memory:", chunk_tokens=chunks.tokens,
                            chunk_overlap=chunks.overlap)
        store = cls(QdrantClient(location=":memory:"), collection, manifest, local=True,
                    where="Qdrant local mode in memory")
        store._create(None, None)
        store._check_collection()
        return store

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """Call the client, turning its transport and response errors into ``StoreError``."""
        try:
            return fn(*args, **kwargs)
        except (StoreError, ValueError):
            raise
        except Exception as exc:  # httpx / grpc / UnexpectedResponse: all one clear message
            raise StoreError(f"{self.where}, collection {self.collection!r}: cannot {what}: "
                             f"{type(exc).__name__}: {exc}") from exc

    def _create(self, shard_number: int | None, replication_factor: int | None) -> None:
        sparse = ({SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)}
                  if self.manifest.bm25 else None)
        self._call("create the collection", self.client.create_collection, self.collection,
                   vectors_config={DENSE: models.VectorParams(size=self.manifest.dim,
                                                              distance=models.Distance.COSINE)},
                   sparse_vectors_config=sparse, shard_number=shard_number,
                   replication_factor=replication_factor)
        if self.local:  # local mode has no payload indexes (and warns when asked for one)
            return
        for name in KEYWORD_FIELDS:
            self._call(f"index payload field {name!r}", self.client.create_payload_index,
                       self.collection, field_name=name,
                       field_schema=models.PayloadSchemaType.KEYWORD, wait=True)
        for name in DATE_FIELDS:
            self._call(f"index payload field {name!r}", self.client.create_payload_index,
                       self.collection, field_name=name,
                       field_schema=models.PayloadSchemaType.DATETIME, wait=True)

    def _check_collection(self) -> None:
        """The collection has the ``dense`` vector of the manifest's size (and ``bm25``)."""
        info = self._call("read the collection", self.client.get_collection, self.collection)
        vectors = info.config.params.vectors
        dense = vectors.get(DENSE) if isinstance(vectors, dict) else None
        if dense is None or dense.size != self.manifest.dim:
            got = ({k: v.size for k, v in vectors.items()} if isinstance(vectors, dict)
                   else getattr(vectors, "size", vectors))
            raise StoreError(f"{self.where}, collection {self.collection!r}: expected a "
                             f"named vector {DENSE!r} of size {self.manifest.dim}, got {got}")
        sparse = info.config.params.sparse_vectors or {}
        if self.manifest.bm25 and SPARSE not in sparse:
            raise StoreError(f"{self.where}, collection {self.collection!r}: expected a sparse "
                             f"vector {SPARSE!r}, got {sorted(sparse) or 'none'}")

    def optimize(self, on_progress: Callable[[int, int], None] | None = None) -> bool:
        """Nothing to do: the server optimises collections itself; returns ``False``
        (``on_progress`` is never called)."""
        return False

    def close(self) -> None:
        """Close the client (local mode releases its folder lock)."""
        self.client.close()

    def __enter__(self) -> QdrantServerIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return int(self._call("count points", self.client.count, self.collection,
                              exact=True).count)

    def documents(self) -> int:
        """Documents: the points that are no document's second or later passage."""
        if not self.manifest.split:
            return len(self)
        later = models.FieldCondition(key="passage", range=models.Range(gt=0))
        return int(self._call("count points", self.client.count, self.collection,
                              count_filter=models.Filter(must_not=[later]), exact=True).count)

    # -- writing ------------------------------------------------------------------------------
    def existing_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """``doc_id -> content_hash`` for the given ids already in the collection."""
        if not doc_ids:
            return {}
        records = self._call("retrieve points", self.client.retrieve, self.collection,
                             ids=[point_id(d) for d in doc_ids],
                             with_payload=["doc_id", "content_hash"], with_vectors=False)
        return {r.payload["doc_id"]: r.payload.get("content_hash", "") for r in records}

    def upsert(self, documents: Sequence[Document], provenance: Sequence[Mapping[str, Any]],
               vectors: np.ndarray, hashes: Sequence[str],
               passages: Sequence[Sequence[Span]] | None = None) -> None:
        """Write one batch, in requests of :data:`UPSERT_BATCH` points, each acknowledged;
        ``passages`` as :meth:`credrank.index.qdrant_edge.EdgeIndex.upsert` (the passages a
        re-written document no longer has are deleted first)."""
        bump_generation(self)
        planned = document_points(documents, np.asarray(vectors), passages)
        points = []
        for i, key, passage, vec in planned:
            doc = documents[i]
            named: dict[str, Any] = {DENSE: np.asarray(vec, dtype=np.float32).tolist()}
            if self._bm25 is not None:
                named[SPARSE] = _sparse(self._bm25.embed_document(
                    bm25_text(doc, None if passage is None else passage[2])))
            points.append(models.PointStruct(
                id=point_id(key), vector=named,
                payload=document_payload(doc, provenance[i], hashes[i], passage)))
        if not points:
            return
        counts = passage_counts(documents, passages)
        if self.manifest.split:
            records = self._call("retrieve points", self.client.retrieve, self.collection,
                                 ids=[point_id(d) for d in counts],
                                 with_payload=["doc_id", "passages"], with_vectors=False)
            stale = stale_passages(counts, {str((r.payload or {}).get("doc_id")):
                                            (r.payload or {}).get("passages") for r in records})
            if stale:
                self._call("delete points", self.client.delete, self.collection,
                           points_selector=models.PointIdsList(
                               points=[point_id(k) for k in stale]), wait=True)
        for start in range(0, len(points), UPSERT_BATCH):
            self._call("upsert points", self.client.upsert, self.collection,
                       points=points[start:start + UPSERT_BATCH], wait=True)
        if not self.manifest.split and max(counts.values()) > 1:
            self._manifest = replace(self._manifest, split=True)
            if self.path is not None:
                write_manifest(self.path, self._manifest)

    # -- reading ------------------------------------------------------------------------------
    def read_payloads(self, doc_ids: Sequence[str] | None = None,
                      fields: Sequence[str] = READ_FIELDS, *,
                      where: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        """The stored ``fields`` of ``doc_ids`` (all documents when ``None``; by id, then
        scrolled in pages of ``READ_PAGE``); see :class:`~credrank.index.store.VectorStore`."""
        wanted = list(dict.fromkeys(["doc_id", *fields]))
        check_read_where(doc_ids, where)
        if doc_ids is not None:
            ids = list(dict.fromkeys(doc_ids))
            out = []
            for start in range(0, len(ids), READ_PAGE):
                records = self._call("retrieve points", self.client.retrieve, self.collection,
                                     ids=[point_id(d) for d in ids[start:start + READ_PAGE]],
                                     with_payload=wanted, with_vectors=False)
                out += [read_fields(r.payload, fields) for r in records]
            return out
        out, offset = [], None
        if self.manifest.split:  # one row per document: its first passage
            wanted = list(dict.fromkeys([*wanted, "passage"]))
        while True:
            points, offset = self._call("scroll points", self.client.scroll, self.collection,
                                        limit=READ_PAGE, offset=offset, with_payload=wanted,
                                        with_vectors=False, scroll_filter=_filter(where))
            out += [read_fields(p.payload, fields) for p in points
                    if not (p.payload or {}).get("passage")]
            if offset is None or not points:
                return out

    def read_vectors(self, doc_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """``doc_id -> stored dense vector`` of ``doc_ids`` found in the collection (by id,
        in pages of ``READ_PAGE``)."""
        ids = list(dict.fromkeys(doc_ids))
        out: dict[str, np.ndarray] = {}
        for start in range(0, len(ids), READ_PAGE):
            records = self._call("retrieve points", self.client.retrieve, self.collection,
                                 ids=[point_id(d) for d in ids[start:start + READ_PAGE]],
                                 with_payload=["doc_id"], with_vectors=[DENSE])
            for r in records:
                out[str(r.payload["doc_id"])] = np.asarray(r.vector[DENSE], dtype=np.float32)
        return out

    def _query(self, text: str, with_vectors: bool, query_vector: np.ndarray | None,
               **request: Any) -> Candidates:
        """Run one ``query_points`` request; ``text`` is the query the batch carries."""
        response = self._call("query points", self.client.query_points, self.collection,
                              with_vectors=[DENSE] if with_vectors else False, **request)
        points = response.points
        return to_candidates(
            text, [p.payload for p in points], [p.score for p in points],
            vectors=[p.vector[DENSE] for p in points] if with_vectors else None,
            query_vector=query_vector, dim=self.manifest.dim)

    def _params(self, exact: bool) -> models.SearchParams | None:
        # local mode is always exact, and warns when given search parameters
        return None if self.local else models.SearchParams(exact=exact)

    def _nearest(self, query: Any, using: str, limit: int, query_filter: models.Filter | None,
                 exact: bool) -> dict[str, Any]:
        """The ``query_points`` arguments of the collection's ``limit`` nearest points.

        From :data:`SHARD_SAMPLING_LIMIT` points on, a collection of several shards would ask
        each shard for fewer than ``limit`` (sampling) and could drop some of the global
        nearest: the search is then a prefetch of ``limit`` (searched with ``exact`` as asked)
        under a pass-through root marked exact, so every shard answers ``limit`` points and
        the merge keeps the global ``limit`` best. Local mode (one shard) asks plainly."""
        if self.local or limit < SHARD_SAMPLING_LIMIT or _PASS_THROUGH is None:
            return {"query": query, "using": using, "limit": limit, "query_filter": query_filter,
                    "search_params": self._params(exact)}
        return {"prefetch": [models.Prefetch(query=query, using=using, limit=limit,
                                             filter=query_filter, params=self._params(exact))],
                "query": _PASS_THROUGH, "limit": limit, "search_params": self._params(True)}

    def search_dense(self, query: str, query_vector: np.ndarray, fetch_k: int, *,
                     with_vectors: bool = False, with_text: bool = False, exact: bool = False,
                     where: Mapping[str, Any] | None = None, unit: str = "document"
                     ) -> Candidates:
        """The ``fetch_k`` nearest documents by cosine similarity, each at its best passage
        (or the nearest passages, ``unit="passage"``; :func:`fetch_documents`)."""
        vector = np.asarray(query_vector, dtype=np.float32).tolist()
        return fetch_documents(
            lambda limit: self._query(query, with_vectors, query_vector,
                                      **self._nearest(vector, DENSE, limit, _filter(where),
                                                      exact),
                                      with_payload=returned_fields(with_text)),
            check_int("fetch_k", fetch_k, 1), split=self.manifest.split, unit=unit)

    def search_bm25(self, query: str, fetch_k: int, *, with_vectors: bool = False,
                    with_text: bool = False, where: Mapping[str, Any] | None = None,
                    unit: str = "document") -> Candidates:
        """The ``fetch_k`` best documents by BM25 (sparse vectors, IDF applied by Qdrant),
        each at its best passage (or the best passages, ``unit="passage"``)."""
        fetch_k = check_int("fetch_k", fetch_k, 1)
        if self._bm25 is None:
            raise StoreError(f"{self.path}: this index was built without BM25 vectors")
        sparse = self._bm25.embed_query(query)
        if not list(sparse.indices):  # no token: nothing can match
            return Candidates.empty(query, self.manifest.dim if with_vectors else None)
        return fetch_documents(
            lambda limit: self._query(query, with_vectors, None,
                                      **self._nearest(_sparse(sparse), SPARSE, limit,
                                                      _filter(where), False),
                                      with_payload=returned_fields(with_text)),
            fetch_k, split=self.manifest.split, unit=unit)

    def search_formula(self, query: str, query_vector: np.ndarray, fetch_k: int, top_k: int,
                       priors: Mapping[str, float], *, with_vectors: bool = False,
                       exact: bool = False, with_text: bool = False,
                       freshness: FreshnessFormula | None = None,
                       fields: Sequence[str] | None = None,
                       credibility: CredibilityFormula | None = None) -> Candidates:
        """Credibility-aware search in the engine: the pool of the collection's ``fetch_k``
        nearest neighbours rescored by :func:`formula_query` (with the freshness factor when
        ``freshness`` is given, chapter 35.7; the learned-credibility factor with
        ``credibility``), the ``top_k`` best returned with the payload ``fields``
        (:func:`credrank.index.formula.formula_fields`; the same numbers as
        :meth:`credrank.index.qdrant_edge.EdgeIndex.search_formula`).

        The pool is the **global** top ``fetch_k`` by cosine on any number of shards — the
        pool the Python path reranks (``DenseRetriever`` → prior → ``TopK``), so both rank
        alike. A cluster runs a query's prefetch and its formula on each shard and k-merges
        the shards' lists: one request would rescore each shard's own ``fetch_k`` nearest, up
        to ``shards × fetch_k`` points, and could rank a document outside the global pool. On
        a server (:attr:`global_pool`) it is therefore two requests:

        1. the ids of the ``fetch_k`` nearest (:meth:`_nearest`: no payload; from
           :data:`SHARD_SAMPLING_LIMIT` points on, through an exact pass-through root so that
           no shard is sampled; the dense search itself is exact only with ``exact``);
        2. the formula over a prefetch of exactly those ids (a ``has_id`` filter, searched
           exactly: a brute force over at most ``fetch_k`` points), under a root marked exact
           (so a ``top_k`` ≥ 128 is not sampled either). Each shard scores its part of the
           pool; the merge of the shards' ``top_k`` best holds the pool's ``top_k`` best.

        No fusion is nested under the formula. Local mode (always one shard) sends one
        request, a prefetch of ``fetch_k`` under the formula. The second request costs a round
        trip: measured in qdrant-client's local mode in ``docs/operations.md``."""
        if not self.formula_supported:
            raise StoreError("formula queries need qdrant-client >= 1.14; upgrade it or search "
                             "without --pushdown")
        fetch_k = check_int("fetch_k", fetch_k, 1)
        top_k = check_int("top_k", top_k, 1)
        vector = np.asarray(query_vector, dtype=np.float32).tolist()
        formula = _formula_query(formula_priors(priors), freshness, credibility)
        payload = formula_fields(fields, with_text)
        if not self.global_pool:
            prefetch = models.Prefetch(query=vector, using=DENSE, limit=fetch_k,
                                       params=self._params(exact))
            return self._query(query, with_vectors, query_vector, prefetch=[prefetch],
                               query=formula, limit=top_k, with_payload=payload)
        pool = self._call("query points", self.client.query_points, self.collection,
                          **self._nearest(vector, DENSE, fetch_k, None, exact),
                          with_payload=False, with_vectors=False).points
        if not pool:
            return Candidates.empty(query, self.manifest.dim if with_vectors else None)
        ids = [p.id for p in pool]
        prefetch = models.Prefetch(
            query=vector, using=DENSE, limit=len(ids), params=self._params(True),
            filter=models.Filter(must=[models.HasIdCondition(has_id=ids)]))
        return self._query(query, with_vectors, query_vector, prefetch=[prefetch],
                           query=formula, limit=top_k, search_params=self._params(True),
                           with_payload=payload)

    def search_source(self, query_vector: np.ndarray, source_id: str, k: int) -> Candidates:
        """The ``k`` nearest documents of one source (``source_id`` payload filter)."""
        return self.search_dense("", query_vector, k, with_text=True,
                                 where={"source_id": source_id})
