"""Payload indexes by size (:func:`credrank.index.qdrant_edge.index_payload`).

Every Edge index has the keyword index on ``source_type`` (the pushed-down priors read it); it
gets the others once it holds ``PAYLOAD_INDEX_POINTS`` points, at a flush of a write (every
``flush_every`` points of a load, before ``optimize``'s graph, when a written index closes); a
read never adds them. Each is kept mapped from its files (``Memory.Cached``), a stored score's
index too. The answers are the same with and without them, and with the engine's default
placement: pushed-down priors and freshness, the Python path, BM25, filters and ``doc_id``
reads.
"""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path
from typing import Any

import pytest
import qdrant_edge as qe

from credrank.demo_corpus import demo_dir
from credrank.documents import iter_documents, read_queries
from credrank.documents.schema import DATE_FIELDS
from credrank.index import open_store, qdrant_edge
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.payload import KEYWORD_FIELDS
from credrank.index.qdrant_edge import EdgeIndex, index_payload
from credrank.index.scoring import index_score_field
from credrank.pipeline.compile import compile_spec
from credrank.pipeline.shortcuts import spec_from_options
from credrank.provenance import SourceTyper

DATA = demo_dir()
EMB = get_embedder("hashing")
ALL = set(KEYWORD_FIELDS) | set(DATE_FIELDS)
RANKING = {"source_type"}
FRESH = "half_life=365,now=2025-06-01T00:00:00+00:00,undated=penalty:0.5"


def placements(path: Path) -> dict[str, Any]:
    """Each payload index's memory placement (``None``: the engine's default, in its own
    memory)."""
    with EdgeIndex.open(path) as index:
        return {name: None if info.params is None else info.params.memory
                for name, info in index.shard.info().payload_schema.items()}


def indexed_fields(path: Path) -> set[str]:
    return set(placements(path))


def add(path: Path, start: int, stop: int) -> None:
    """Index the demo documents ``start:stop`` into ``path`` (created when absent)."""
    docs = itertools.islice(iter_documents(DATA / "corpus.jsonl"), start, stop)
    with open_store(path, "edge", embedder=EMB.name, dim=EMB.dim, create=True) as store:
        report = index_documents(docs, store, EMB, SourceTyper([DATA / "domains.csv"]))
    assert report.indexed == stop - start


def test_the_manual_states_the_floor() -> None:
    root = Path(__file__).resolve().parents[1]
    floor = f"{qdrant_edge.PAYLOAD_INDEX_POINTS:,} points"
    for page in ("usage.md", "operations.md"):
        text = " ".join((root / "docs" / page).read_text(encoding="utf-8").split())
        assert floor in text, page


def test_a_small_index_has_one_and_a_write_past_the_floor_makes_all(tmp_path, monkeypatch):
    monkeypatch.setattr(qdrant_edge, "PAYLOAD_INDEX_POINTS", 60)
    path = tmp_path / "index"
    add(path, 0, 50)
    assert indexed_fields(path) == RANKING
    add(path, 50, 70)  # a second write crosses the floor: made when it closes
    assert indexed_fields(path) == ALL
    add(path, 70, 80)  # idempotent
    assert indexed_fields(path) == ALL


def test_a_load_makes_them_at_its_first_flush_past_the_floor(tmp_path, monkeypatch):
    """A large load keeps them up to date as it goes, not built over the corpus at the end."""
    monkeypatch.setattr(qdrant_edge, "PAYLOAD_INDEX_POINTS", 60)
    docs = itertools.islice(iter_documents(DATA / "corpus.jsonl"), 100)
    with EdgeIndex.open(tmp_path / "index", embedder=EMB.name, dim=EMB.dim, create=True,
                        flush_every=64) as index:
        index_documents(docs, index, EMB, SourceTyper([DATA / "domains.csv"]))
        assert len(index) == 100
        assert set(index.shard.info().payload_schema) == ALL  # before the close


def test_a_read_adds_none(tmp_path, monkeypatch):
    path = tmp_path / "index"
    add(path, 0, 80)
    monkeypatch.setattr(qdrant_edge, "PAYLOAD_INDEX_POINTS", 10)  # now past the floor
    with open_store(path) as store:
        assert len(compile_spec(spec_from_options(top_k=3), store, EMB).pipeline
                   .search("vitamin d")) == 3
    assert indexed_fields(path) == RANKING


def test_optimize_makes_them_before_the_graph(tmp_path, monkeypatch):
    path = tmp_path / "index"
    add(path, 0, 80)
    monkeypatch.setattr(qdrant_edge, "PAYLOAD_INDEX_POINTS", 60)
    with EdgeIndex.open(path, create=True) as index:
        assert set(index.shard.info().payload_schema) == RANKING
        index.optimize()
        assert set(index.shard.info().payload_schema) == ALL


def test_index_payload_checks_its_floor(tmp_path):
    path = tmp_path / "index"
    add(path, 0, 5)
    with EdgeIndex.open(path, create=True) as index:
        assert index_payload(index.shard) == []  # 5 points, under the default floor
        with pytest.raises(ValueError, match="min_points"):
            index_payload(index.shard, -1)
        assert set(index_payload(index.shard, 5)) == ALL - RANKING
        assert index_payload(index.shard, 0) == []  # made already


def test_they_are_kept_mapped_and_cached(tmp_path, monkeypatch):
    path = tmp_path / "index"
    add(path, 0, 5)
    with EdgeIndex.open(path, create=True) as index:
        index_payload(index.shard, 0)
        index_score_field(index, "cred_score")  # a stored score's, made the same way
    assert qdrant_edge.PAYLOAD_INDEX_MEMORY == qe.Memory.Cached
    assert placements(path) == dict.fromkeys([*ALL, "cred_score"], qe.Memory.Cached)
    monkeypatch.setattr(qdrant_edge, "PAYLOAD_INDEX_MEMORY", None)  # the engine's default
    other = tmp_path / "other"
    add(other, 0, 5)
    with EdgeIndex.open(other, create=True) as index:
        index_payload(index.shard, 0)
    assert placements(other) == dict.fromkeys(ALL, None)


@pytest.mark.parametrize("memory", ["cached", "engine default"])
def test_the_same_answers_with_and_without_them(tmp_path, demo_index_hashing, memory,
                                                 monkeypatch):
    assert indexed_fields(demo_index_hashing) == RANKING  # 120 points: under the floor
    if memory != "cached":
        monkeypatch.setattr(qdrant_edge, "PAYLOAD_INDEX_MEMORY", None)
    with_them = tmp_path / "indexed"
    shutil.copytree(demo_index_hashing, with_them)
    with EdgeIndex.open(with_them, create=True) as index:
        assert set(index_payload(index.shard, 0)) == ALL - RANKING
    queries = [q.text for q in read_queries(DATA / "queries.jsonl")]
    specs = [spec_from_options(top_k=10, priors="current"),
             spec_from_options(top_k=10, priors="current", freshness=FRESH),
             spec_from_options(top_k=10, priors="current", freshness=FRESH, pushdown=False),
             spec_from_options(top_k=10, lexical=True)]
    qv = EMB.embed(["vitamin d"])[0]
    with EdgeIndex.open(demo_index_hashing) as plain, EdgeIndex.open(with_them) as indexed:
        for spec in specs:
            a = compile_spec(spec, plain, EMB).pipeline
            b = compile_spec(spec, indexed, EMB).pipeline
            for query in queries:
                assert a.search(query).hits() == b.search(query).hits(), query
        for where in ({"source_type": "government"}, {"source_type": "blog"},
                      {"host": "www.cdc.gov"}):
            a = plain.search_dense("q", qv, 5, where=where).hits()
            assert a and a == indexed.search_dense("q", qv, 5, where=where).hits(), where
        ids = ["d001", "d031", "d120", "no-such-doc"]
        assert plain.read_payloads(ids) == indexed.read_payloads(ids)
        assert len(plain.read_payloads(ids)) == 3
