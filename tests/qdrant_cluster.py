"""An N-shard Qdrant collection emulated with N Qdrant Edge shards, behind the few
``qdrant-client`` calls :class:`credrank.index.qdrant_server.QdrantServerIndex` makes.

No Qdrant server can be installed here, so this is how the server backend's ranking is tested on
several shards. What it reproduces of ``lib/collection/src/collection/query.rs`` (Qdrant 1.14+):

* points are spread over the shards by a hash of their id (auto-sharding);
* each shard runs the whole request — prefetches with their full limits, then the root query
  (a formula rescoring its own prefetched points) — and returns its ``limit + offset`` best;
* the coordinator k-merges the shards' lists by score (ties by id) and keeps ``limit``;
* with more than one shard, a root ``limit + offset >= 128`` whose root ``params`` are not exact
  asks each shard for fewer points (``modify_shard_query_for_undersampling_limits``): here the
  Poisson quantile of ``1 - 1e-6`` at ``λ = limit × 1.2 / shards``, close to Qdrant's lookup
  table (``λ = 120`` gives 171 there, 172 here). Each request is logged with its per-shard limit.

A fusion anywhere in a request is refused (credrank nests none under its formula: a fusion in a
prefetch runs per shard, qdrant issue #10640). Only what credrank sends is translated: dense
vectors, ``MatchValue`` / ``has_id`` / ``is_empty`` filters, datetime ranges (the freshness
factor's ``t > T``), and the formula expressions of
:func:`credrank.index.qdrant_server.formula_query`.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import qdrant_edge as qe
from qdrant_client import models
from scipy.stats import poisson

from credrank.index.manifest import Manifest
from credrank.index.passages import default_chunking
from credrank.index.payload import DENSE, KEYWORD_FIELDS
from credrank.index.qdrant_edge import SMALL_STORAGE_MEMORY, edge_config
from credrank.index.qdrant_server import QdrantServerIndex

SAMPLING_LIMIT = 128  # SHARD_QUERY_SUBSAMPLING_LIMIT
ENSURANCE = 1.2  # MORE_ENSURANCE_FACTOR


def sampled_limit(limit: int, shards: int) -> int:
    """The per-shard limit a sampled request gets (``min(quantile, limit)``)."""
    return min(int(poisson.ppf(1 - 1e-6, limit * ENSURANCE / shards)), limit)


@dataclass
class Logged:
    """One request as the coordinator saw it."""

    limit: int
    exact: bool
    per_shard: int
    prefetch_limits: list[int] = field(default_factory=list)

    @property
    def sampled(self) -> bool:
        return self.per_shard < self.limit


def _expr(e: Any) -> Any:
    """A ``qdrant-client`` formula expression as a Qdrant Edge expression."""
    if isinstance(e, bool):
        raise TypeError(f"unexpected boolean expression {e!r}")
    if isinstance(e, (int, float)):
        return qe.Expression.Constant(float(e))
    if isinstance(e, str):
        return qe.Expression.Variable(e)
    if isinstance(e, models.MultExpression):
        return qe.Expression.Mult([_expr(x) for x in e.mult])
    if isinstance(e, models.SumExpression):
        return qe.Expression.Sum([_expr(x) for x in e.sum])
    if isinstance(e, models.AbsExpression):
        return qe.Expression.Abs(_expr(e.abs))
    if isinstance(e, models.NegExpression):
        return qe.Expression.Neg(_expr(e.neg))
    if isinstance(e, models.MinExpression):
        return qe.Expression.Min([_expr(x) for x in e.min])
    if isinstance(e, models.DatetimeExpression):
        return qe.Expression.Datetime(e.datetime)
    if isinstance(e, models.DatetimeKeyExpression):
        return qe.Expression.DatetimeKey(e.datetime_key)
    if isinstance(e, models.ExpDecayExpression):
        p = e.exp_decay
        return qe.Expression.Decay(qe.DecayKind.Exp, _expr(p.x), _expr(p.target),
                                   float(p.midpoint), float(p.scale))
    if isinstance(e, (models.FieldCondition, models.IsEmptyCondition)):
        return qe.Expression.Condition(_condition(e))
    raise TypeError(f"expression not emulated: {type(e).__name__}")


def _iso(value: Any) -> str | None:
    return None if value is None else value.isoformat() if hasattr(value, "isoformat") \
        else str(value)


def _condition(c: Any) -> Any:
    if isinstance(c, models.FieldCondition) and isinstance(c.match, models.MatchValue):
        return qe.FieldCondition(key=c.key, match=qe.MatchValue(c.match.value))
    if isinstance(c, models.FieldCondition) and isinstance(c.range, models.DatetimeRange):
        r = c.range
        return qe.FieldCondition(key=c.key, range=qe.RangeDateTime(
            gte=_iso(r.gte), gt=_iso(r.gt), lte=_iso(r.lte), lt=_iso(r.lt)))
    if isinstance(c, models.IsEmptyCondition):
        return qe.IsEmptyCondition(c.is_empty.key)
    if isinstance(c, models.HasIdCondition):
        return qe.HasIdCondition({str(i) for i in c.has_id})
    raise TypeError(f"condition not emulated: {c!r}")


def _filter(f: models.Filter | None) -> Any:
    if f is None:
        return None
    if f.should or f.must_not or f.min_should:
        raise TypeError(f"filter not emulated: {f!r}")
    return qe.Filter(must=[_condition(c) for c in f.must or []])


def _query(q: Any, using: str | None) -> Any:
    if q is None:
        return None
    if isinstance(q, models.FusionQuery):
        raise AssertionError("a fusion would run on each shard (qdrant #10640)")
    if isinstance(q, models.FormulaQuery):
        return qe.Formula(_expr(q.formula), defaults=dict(q.defaults or {}) or None)
    if isinstance(q, list):
        return qe.Query.Nearest([float(x) for x in q], using=using or DENSE)
    raise TypeError(f"query not emulated: {type(q).__name__}")


def _exact(params: models.SearchParams | None) -> bool:
    return bool(params is not None and params.exact)


def _params(params: models.SearchParams | None) -> Any:
    return qe.SearchParams(exact=_exact(params))


def _prefetch(p: models.Prefetch) -> Any:
    inner = p.prefetch if isinstance(p.prefetch, list) else [p.prefetch] if p.prefetch else []
    return qe.Prefetch(limit=int(p.limit or 10), query=_query(p.query, p.using),
                       prefetches=[_prefetch(x) for x in inner] or None,
                       params=_params(p.params), filter=_filter(p.filter))


def _selector(with_payload: Any) -> Any:
    if isinstance(with_payload, bool):
        return with_payload
    return qe.PayloadSelector.Include(list(with_payload))


def _vector(v: Any) -> Any:
    if v is None:
        return None
    return {DENSE: list(v[DENSE])} if isinstance(v, dict) else {DENSE: list(v)}


class EmulatedCluster:
    """A fake ``QdrantClient`` over ``shards`` Qdrant Edge shards in ``root``."""

    def __init__(self, root: Path, shards: int, dim: int):
        self.root, self.n = Path(root), shards
        config = edge_config(dim, False, SMALL_STORAGE_MEMORY)  # as credrank creates an index
        self.shards = []
        for i in range(shards):
            shard = qe.EdgeShard.create(str(self.root / f"shard{i}"), config)
            for name in KEYWORD_FIELDS:  # a server has these indexes (local mode has none)
                shard.update(qe.UpdateOperation.create_field_index(
                    name, qe.PayloadSchemaType.Keyword))
            self.shards.append(shard)
        self.log: list[Logged] = []

    def shard_of(self, point_id: Any) -> int:
        return uuid.UUID(str(point_id)).int % self.n

    # -- the client calls credrank makes ---------------------------------------------------------
    def upsert(self, collection: str, points: Sequence[models.PointStruct], wait: bool = True
               ) -> None:
        by_shard: dict[int, list[Any]] = {}
        for p in points:
            assert isinstance(p.vector, dict) and set(p.vector) == {DENSE}, p.vector
            by_shard.setdefault(self.shard_of(p.id), []).append(
                qe.Point(str(p.id), {DENSE: list(p.vector[DENSE])}, p.payload))
        for i, batch in by_shard.items():
            self.shards[i].update(qe.UpdateOperation.upsert_points(batch))

    def retrieve(self, collection: str, ids: Sequence[Any], with_payload: Any = True,
                 with_vectors: Any = False) -> list[Any]:
        out = []
        for i, shard in enumerate(self.shards):
            mine = [str(x) for x in ids if self.shard_of(x) == i]
            if mine:
                out += [SimpleNamespace(id=r.id, payload=r.payload, vector=_vector(r.vector))
                        for r in shard.retrieve(mine, _selector(with_payload),
                                                [DENSE] if with_vectors else False)]
        return out

    def count(self, collection: str, count_filter: Any = None, exact: bool = True) -> Any:
        return SimpleNamespace(count=sum(s.count(qe.CountRequest(exact=True))
                                         for s in self.shards))

    def query_points(self, collection: str, query: Any = None, using: str | None = None,
                     prefetch: Any = None, query_filter: models.Filter | None = None,
                     search_params: models.SearchParams | None = None, limit: int = 10,
                     offset: int | None = None, with_payload: Any = True,
                     with_vectors: Any = False) -> Any:
        prefetches = (prefetch if isinstance(prefetch, list)
                      else [prefetch] if prefetch is not None else [])
        take = limit + (offset or 0)
        exact = _exact(search_params)
        per_shard = take if self.n == 1 or exact or take < SAMPLING_LIMIT \
            else sampled_limit(take, self.n)
        self.log.append(Logged(take, exact, per_shard, [int(p.limit) for p in prefetches]))
        request = qe.QueryRequest(
            limit=per_shard, query=_query(query, using),
            prefetches=[_prefetch(p) for p in prefetches] or None, filter=_filter(query_filter),
            params=_params(search_params), with_payload=_selector(with_payload),
            with_vector=[DENSE] if with_vectors else False)
        merged = [p for shard in self.shards for p in shard.query(request)]
        # the k-merge of lists each sorted by score: one sort by (score desc, id)
        merged.sort(key=lambda p: (-p.score, str(p.id)))
        points = [SimpleNamespace(id=p.id, score=p.score, payload=p.payload,
                                  vector=_vector(p.vector) if with_vectors else None)
                  for p in merged[offset or 0:take]]
        return SimpleNamespace(points=points)

    def close(self) -> None:
        for shard in self.shards:
            shard.close()
        self.shards = []


def cluster_index(root: Path, shards: int, embedder: str, dim: int
                  ) -> tuple[QdrantServerIndex, EmulatedCluster]:
    """A server-backend store (not local mode: the server's requests) on an emulated cluster of
    ``shards`` shards, empty, without BM25 vectors."""
    cluster = EmulatedCluster(root, shards, dim)
    chunks = default_chunking(embedder)
    manifest = Manifest(embedder=embedder, dim=dim, bm25=False, engine="qdrant",
                        collection="emulated", qdrant_mode="url",
                        qdrant_location=f"emulated cluster of {shards} shards",
                        chunk_tokens=chunks.tokens, chunk_overlap=chunks.overlap)
    store = QdrantServerIndex(cluster, "emulated", manifest,  # type: ignore[arg-type]
                              local=False, where=f"emulated {shards}-shard cluster")
    return store, cluster
