"""The engine protocol: three backends, one ranking.

Qdrant Edge (default), qdrant-client (its local mode stands in for a server) and the in-memory
store implement ``VectorStore``; on the packaged demo corpus the qdrant backend ranks and scores
exactly as Edge does, on the Python path and with the formula pushed down. The manifest records
the engine; old manifests without one open as Edge.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.core.ties import tie_groups
from credrank.demo_corpus import demo_dir
from credrank.documents import iter_documents, read_queries
from credrank.documents.schema import SOURCE_TYPES, Document
from credrank.index import (
    FormulaScoring,
    StoreError,
    VectorStore,
    open_store,
    supports_formula,
)
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import index_documents
from credrank.index.memory import InMemoryIndex
from credrank.index.qdrant_edge import EdgeIndex
from credrank.index.retrieve import source_passages
from credrank.index.store import Manifest, formula_priors, read_manifest, to_candidates
from credrank.pipeline.compile import (
    PushdownError,
    build_stages,
    compile_spec,
    context,
    decide_pushdown,
)
from credrank.pipeline.shortcuts import spec_from_options
from credrank.pipeline.spec import SpecError
from credrank.provenance import SourceTyper
from credrank.signals.prior import preset

EMB = HashingEmbedder(64)
#: the client checks a server's version in a background thread; against the closed port of
#: the unreachable-server test its warning lands in whichever test runs next
pytestmark = pytest.mark.filterwarnings("ignore:Failed to obtain server version")
DATA = demo_dir()
SYSTEMS = [("none", False), ("compressed", False), ("current", False), ("aggressive", False),
           ("compressed", True), ("current", True), ("aggressive", True)]


def needs_qdrant() -> None:
    pytest.importorskip("qdrant_client", reason="the qdrant engine needs the 'qdrant' extra "
                        "(pip install 'credrank[qdrant]')")


def fill(store: VectorStore) -> VectorStore:
    index_documents(iter_documents(DATA / "corpus.jsonl"), store, EMB,
                    SourceTyper([DATA / "domains.csv"]))
    return store


@pytest.fixture(scope="module")
def edge_store(tmp_path_factory):
    """The demo corpus in Qdrant Edge (built once)."""
    root = tmp_path_factory.mktemp("edge")
    with open_store(root / "edge", "edge", embedder=EMB.name, dim=EMB.dim,
                    create=True) as edge:
        yield fill(edge)


@pytest.fixture(scope="module")
def demo_stores(tmp_path_factory, edge_store):
    """The demo corpus in Qdrant Edge and in qdrant-client local mode (built once)."""
    needs_qdrant()
    root = tmp_path_factory.mktemp("qdrant")
    with open_store(root / "qdrant", "qdrant", qdrant_path=root / "qdrant-data",
                    embedder=EMB.name, dim=EMB.dim, create=True) as qdrant:
        yield {"edge": edge_store, "qdrant": fill(qdrant)}


def assert_same_ranking(a, b) -> None:
    """Same scores rank by rank, same order up to exact ties, same breakdown per document."""
    assert len(a) == len(b)
    assert np.allclose(a.score, b.score, atol=1e-5)
    # the last tie group may be cut differently at the top_k boundary
    assert tie_groups(a.doc_ids, a.score)[:-1] == tie_groups(b.doc_ids, b.score)[:-1]
    hits_b = {h["doc_id"]: h["score_breakdown"] for h in b.hits()}
    for hit in a.hits():
        if hit["doc_id"] not in hits_b:  # only possible inside the cut last tie group
            continue
        mine, theirs = hit["score_breakdown"], hits_b[hit["doc_id"]]
        assert mine.keys() == theirs.keys()
        for key in mine:
            assert mine[key] == pytest.approx(theirs[key], abs=1e-5), key


# -- the protocol -------------------------------------------------------------------------------

def test_edge_and_memory_satisfy_the_protocol(edge_store):
    memory = InMemoryIndex.create(EMB.name, EMB.dim)
    for store in (edge_store, memory):
        assert isinstance(store, VectorStore), type(store).__name__
    assert supports_formula(edge_store) and isinstance(edge_store, FormulaScoring)
    assert not supports_formula(memory) and not isinstance(memory, FormulaScoring)
    assert edge_store.manifest.engine == "edge" and memory.manifest.engine == "memory"
    assert not isinstance(object(), VectorStore)


def test_qdrant_satisfies_the_protocol(demo_stores):
    qdrant = demo_stores["qdrant"]
    assert isinstance(qdrant, VectorStore) and isinstance(qdrant, FormulaScoring)
    # formula queries need qdrant-client >= 1.14; an older client falls back to Python
    assert supports_formula(qdrant) == type(qdrant).formula_supported
    assert qdrant.manifest.engine == "qdrant" and len(qdrant) == 120


def test_missing_qdrant_client_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "qdrant_client", None)  # as if not installed
    monkeypatch.delitem(sys.modules, "credrank.index.qdrant_server", raising=False)
    with pytest.raises(StoreError, match=r"pip install 'credrank\[qdrant\]'"):
        open_store(tmp_path / "i", "qdrant", qdrant_path=tmp_path / "q", embedder=EMB.name,
                   dim=EMB.dim, create=True)


@pytest.mark.parametrize("priors,pushdown", SYSTEMS)
def test_qdrant_ranks_and_scores_like_edge(demo_stores, priors, pushdown):
    if pushdown and not supports_formula(demo_stores["qdrant"]):
        pytest.skip("this qdrant-client has no formula queries (needs >= 1.14)")
    queries = read_queries(DATA / "queries.jsonl")
    spec = spec_from_options(top_k=10, priors=priors, pushdown=pushdown)
    pipes = {name: compile_spec(spec, store, EMB).pipeline
             for name, store in demo_stores.items()}
    assert pipes["edge"].stages[0].name == pipes["qdrant"].stages[0].name == (
        "pushdown" if pushdown else "dense")
    for q in queries:
        edge, qdrant = pipes["edge"].search(q.text), pipes["qdrant"].search(q.text)
        assert len(edge) == 10
        assert_same_ranking(edge, qdrant)
        if priors != "none":
            assert np.all(qdrant.factors["prior"] > 0)


def test_qdrant_bm25_and_filters_match_edge(demo_stores):
    edge, qdrant = demo_stores["edge"], demo_stores["qdrant"]
    for q in read_queries(DATA / "queries.jsonl"):
        spec = spec_from_options(top_k=10, lexical=True)
        a = compile_spec(spec, edge, EMB).pipeline.search(q.text)
        b = compile_spec(spec, qdrant, EMB).pipeline.search(q.text)
        assert len(a) > 0
        assert_same_ranking(a, b)
    qv = EMB.embed(["vitamin d"])[0]
    for source_type in ("government", "blog"):
        a = edge.search_dense("q", qv, 5, where={"source_type": source_type})
        b = qdrant.search_dense("q", qv, 5, where={"source_type": source_type})
        assert set(a.column("source_type")) == {source_type}
        assert_same_ranking(a, b)
    with pytest.raises(ValueError, match="keyword index"):
        qdrant.search_dense("q", qv, 5, where={"text": "x"})


def test_search_returns_text_and_vectors_only_on_request(demo_stores):
    qv = EMB.embed(["vaccine"])[0]
    for store in demo_stores.values():
        plain = store.search_dense("vaccine", qv, 3)
        assert plain.vectors is None and all(t is None for t in plain.column("text"))
        full = store.search_dense("vaccine", qv, 3, with_text=True, with_vectors=True)
        assert full.vectors.shape == (3, EMB.dim)
        assert all(isinstance(t, str) and t for t in full.column("text"))
        assert np.allclose(full.vectors @ qv, full.retrieval_score, atol=1e-5)


# -- the in-memory store --------------------------------------------------------------------------

def test_in_memory_store_indexes_and_ranks_like_edge_exact(edge_store):
    memory = fill(InMemoryIndex.create(EMB.name, EMB.dim))
    assert len(memory) == len(edge_store) == 120
    again = fill(memory)
    assert len(again) == 120  # re-run: every document unchanged, nothing duplicated
    report = index_documents(iter_documents(DATA / "corpus.jsonl"), memory, EMB,
                             SourceTyper([DATA / "domains.csv"]))
    assert report.unchanged == 120 and report.indexed == 0
    for q in read_queries(DATA / "queries.jsonl"):
        qv = EMB.embed([q.text])[0]
        a = edge_store.search_dense(q.text, qv, 15, exact=True)
        assert_same_ranking(a, memory.search_dense(q.text, qv, 15))
        spec = spec_from_options(top_k=5, priors="current")
        assert_same_ranking(compile_spec(spec, edge_store, EMB).pipeline.search(q.text),
                            compile_spec(spec, memory, EMB).pipeline.search(q.text))


def test_in_memory_store_declines_bm25_and_pushdown():
    memory = InMemoryIndex.create(EMB.name, EMB.dim)
    with pytest.raises(StoreError, match="not supported by the in-memory store"):
        memory.search_bm25("q", 5)
    spec = spec_from_options()
    stages = build_stages(spec, context())
    assert decide_pushdown(stages, retrieval=spec.retrieval, requested=spec.pushdown).fused
    assert not compile_spec(spec, memory, EMB).pushdown.fused
    decision = decide_pushdown(stages, store=memory)
    assert not decision.fused and decision.where == "the memory store"
    assert decision.reason == "cannot score formulas in its engine"
    with pytest.raises(PushdownError, match="memory store cannot score formulas"):
        decide_pushdown(stages, store=memory, requested=True)
    with pytest.raises(SpecError, match="cannot score formulas in its engine; pushdown: true "
                                        "cannot be honoured"):
        compile_spec(spec_from_options(pushdown=True), memory, EMB)
    assert len(memory.search_dense("q", EMB.embed(["q"])[0], 5)) == 0


def test_a_pushdown_the_store_cannot_honour_names_the_store():
    memory = InMemoryIndex.create(EMB.name, EMB.dim)
    with pytest.raises(SpecError, match="memory store cannot score formulas"):
        compile_spec(spec_from_options(pushdown=True), memory, EMB)


def test_in_memory_bench_face_keeps_working():
    vectors = np.array([[1, 0], [0.6, 0.8], [0, 1]], dtype=np.float32)
    index = InMemoryIndex(["a", "b", "c"], vectors, {"source_type": ["blog", "government",
                                                                     "blog"]})
    out = index.search("q", np.array([1.0, 0.0]), 2)
    assert list(out.doc_ids) == ["a", "b"] and out.vectors.shape == (2, 2)
    assert list(out.column("source_type")) == ["blog", "government"]
    restricted = index.search("q", np.array([1.0, 0.0]), 5, restrict=["c", "b"])
    assert list(restricted.doc_ids) == ["b", "c"]
    with pytest.raises(ValueError, match="fetch_k"):
        index.search("q", np.array([1.0, 0.0]), 0)


def test_per_source_retrieval_on_every_backend(tmp_path):
    needs_qdrant()
    docs = [Document(id=f"{sid}-{i}", text=f"{sid} says the capital is {city}", source_id=sid,
                     url=f"https://{sid}.blogspot.com/{i}")
            for sid, city in (("s1", "Canberra"), ("s2", "Sydney")) for i in range(2)]
    stores = [open_store(tmp_path / "e", "edge", embedder=EMB.name, dim=EMB.dim, create=True),
              open_store(tmp_path / "q", "qdrant", qdrant_path=tmp_path / "qd",
                         embedder=EMB.name, dim=EMB.dim, create=True),
              InMemoryIndex.create(EMB.name, EMB.dim)]
    for store in stores:
        with store:
            index_documents(docs, store, EMB, SourceTyper())
            passages = source_passages(store, EMB)("capital", "s2", 5)
            assert sorted(passages) == ["s2 says the capital is Sydney"] * 2
            # the documents of one source, read by a filtered scroll (what /feedback checks
            # an item's type against: it read every document of the index)
            rows = store.read_payloads(None, ("doc_id", "source_type"),
                                       where={"source_id": "s1"})
            assert sorted(r["doc_id"] for r in rows) == ["s1-0", "s1-1"]
            assert {r["source_type"] for r in rows} == {"blog"}
            with pytest.raises(ValueError, match="where"):
                store.read_payloads(["s1-0"], where={"source_id": "s1"})
            both = store.read_payloads(None, ("doc_id",), where={"source_id": ["s1", "s2"]})
            assert len(both) == 4  # any of a list: one read for many sources


# -- manifests and opening ------------------------------------------------------------------------

def test_engine_mismatch_names_both_engines(tmp_path):
    needs_qdrant()
    edge_dir, qdrant_dir = tmp_path / "edge", tmp_path / "qdrant"
    open_store(edge_dir, embedder=EMB.name, dim=EMB.dim, create=True).close()
    with pytest.raises(StoreError, match="engine 'edge', not 'qdrant'"):
        open_store(edge_dir, "qdrant", qdrant_path=tmp_path / "x")
    open_store(qdrant_dir, "qdrant", qdrant_path=tmp_path / "qd", embedder=EMB.name,
               dim=EMB.dim, create=True).close()
    with pytest.raises(StoreError, match="engine 'qdrant', not 'edge'"):
        open_store(qdrant_dir, "edge")
    with pytest.raises(StoreError, match="engine 'qdrant', not 'edge'"):
        EdgeIndex.open(qdrant_dir)


def test_manifest_records_the_engine_and_never_the_key(tmp_path):
    needs_qdrant()
    with open_store(tmp_path / "i", "qdrant", qdrant_path=tmp_path / "qd", embedder=EMB.name,
                    dim=EMB.dim, create=True, collection="my_docs") as store:
        index_documents([Document(id="a", text="vitamin d")], store, EMB, SourceTyper())
    raw = json.loads((tmp_path / "i" / "manifest.json").read_text())
    assert raw["engine"] == "qdrant" and raw["collection"] == "my_docs"
    assert raw["qdrant_mode"] == "path"
    assert raw["qdrant_location"] == str((tmp_path / "qd").resolve())
    # reopening needs no location: the manifest's is used
    with open_store(tmp_path / "i") as store:
        assert len(store) == 1 and store.manifest.collection == "my_docs"
    with pytest.raises(StoreError, match="local mode"):
        open_store(tmp_path / "i", qdrant_url="http://127.0.0.1:9")
    with pytest.raises(StoreError, match="'my_docs', not 'other'"):
        open_store(tmp_path / "i", collection="other")
    with pytest.raises(StoreError, match="not found"):  # a folder without the collection
        open_store(tmp_path / "i", qdrant_path=tmp_path / "empty")


def test_unreachable_server_is_a_clear_error_and_writes_nothing(tmp_path):
    needs_qdrant()
    with pytest.raises(StoreError, match=r"Qdrant http://127\.0\.0\.1:9.*cannot"):
        open_store(tmp_path / "i", "qdrant", qdrant_url="http://user:pw@127.0.0.1:9",
                   embedder=EMB.name, dim=EMB.dim, create=True)
    assert read_manifest(tmp_path / "i") is None


def test_old_manifest_without_engine_opens_as_edge(tmp_path):
    open_store(tmp_path / "i", embedder=EMB.name, dim=EMB.dim, create=True).close()
    path = tmp_path / "i" / "manifest.json"
    old = {"embedder": EMB.name, "dim": EMB.dim, "bm25": True, "format": 1}
    path.write_text(json.dumps(old))
    with open_store(tmp_path / "i") as store:
        assert isinstance(store, EdgeIndex) and store.manifest.engine == "edge"
    with open_store(tmp_path / "i", "edge", embedder=EMB.name):
        pass
    with pytest.raises(StoreError, match="engine 'edge', not 'qdrant'"):
        open_store(tmp_path / "i", "qdrant")


@pytest.mark.parametrize("content,message", [
    ({"embedder": "hashing", "dim": "64"}, "dim: expected an integer in [1, 1000000], got '64'"),
    ({"embedder": "hashing"}, "dim: expected an integer in [1, 1000000], got nothing"),
    ({"embedder": "hashing", "dim": 64, "engine": "milvus"}, "engine: expected one of"),
    ({"embedder": "hashing", "dim": 64, "api_key": "x"}, "api_key: expected one of the known"),
    ({"embedder": "hashing", "dim": 64, "engine": "qdrant"}, "needs 'collection'"),
    ([1, 2], "expected a JSON object"),
])
def test_bad_manifest_names_file_and_field(tmp_path, content, message):
    (tmp_path / "manifest.json").write_text(json.dumps(content))
    with pytest.raises(StoreError, match=r"manifest\.json") as info:
        open_store(tmp_path)
    assert message in str(info.value)


@pytest.mark.parametrize("kwargs,message", [
    ({"engine": "edge", "qdrant_url": "http://x"}, "only for engine 'qdrant'"),
    ({"engine": "edge", "collection": "c"}, "only for engine 'qdrant'"),
    ({"engine": "qdrant", "qdrant_url": "http://x", "qdrant_path": "p"}, "exclude each other"),
    ({"engine": "qdrant"}, "exactly one"),
    ({"engine": "qdrant", "qdrant_path": "p", "api_key": "k"}, "not to local mode"),
    ({"engine": "qdrant", "qdrant_path": "p", "collection": "a/b"}, "collection"),
    ({"engine": "solr"}, "expected one of edge, qdrant"),
])
def test_contradictory_options_are_value_errors(tmp_path, kwargs, message):
    if kwargs["engine"] == "qdrant":
        needs_qdrant()
    if "qdrant_path" in kwargs:
        kwargs["qdrant_path"] = tmp_path / kwargs["qdrant_path"]
    with pytest.raises(ValueError, match=message):
        open_store(tmp_path / "i", embedder=EMB.name, dim=EMB.dim, create=True, **kwargs)


def test_missing_index_is_named(tmp_path):
    with pytest.raises(StoreError, match="no credrank index"):
        open_store(tmp_path / "nothing")


# -- shared helpers -------------------------------------------------------------------------------

def test_formula_priors_are_complete_and_finite():
    table = formula_priors(preset("current").values)
    assert [t for t, _ in table] == list(SOURCE_TYPES)
    values = dict(preset("current").values)
    for bad, message in ((math.nan, "finite"), (-0.1, ">= 0"), ("high", "a number")):
        with pytest.raises(ValueError, match=message):
            formula_priors({**values, "blog": bad})
    values.pop("blog")
    with pytest.raises(ValueError, match="'blog'"):
        formula_priors(values)


def test_to_candidates_shape_and_errors():
    out = to_candidates("q", [{"doc_id": "a", "source_type": "blog", "host": "h"}], [0.5])
    assert list(out.doc_ids) == ["a"] and out.column("source_type")[0] == "blog"
    assert "registered_domain" in out.meta and out.column("published_at")[0] is None
    assert len(to_candidates("q", [], [], vectors=[], dim=4).vectors) == 0
    with pytest.raises(StoreError, match="no doc_id"):
        to_candidates("q", [{"title": "x"}], [0.1])
    with pytest.raises(StoreError, match="1 payloads but 2 scores"):
        to_candidates("q", [{"doc_id": "a"}], [0.1, 0.2])


def test_manifest_round_trip():
    m = Manifest(embedder="hashing", dim=64, engine="qdrant", collection="c",
                 qdrant_mode="url", qdrant_location="https://q.example:6333")
    assert Manifest.from_dict(json.loads(m.to_json())) == m
    assert "collection" not in Manifest(embedder="e", dim=3).to_json()


# -- the command line -----------------------------------------------------------------------------

def test_cli_round_trip_on_qdrant_local_mode(tmp_path):
    needs_qdrant()
    runner = CliRunner()
    idx, data = tmp_path / "idx", tmp_path / "qdrant-data"
    res = runner.invoke(app, ["index", str(DATA / "corpus.jsonl"), "--index", str(idx),
                              "--embedder", "hashing", "--table", str(DATA / "domains.csv"),
                              "--engine", "qdrant", "--qdrant-path", str(data)])
    assert res.exit_code == 0, res.output
    assert "indexed 120, rejected 0" in res.output and "holds 120 documents" in res.output
    res = runner.invoke(app, ["optimize", "--index", str(idx)])  # the server's own job
    assert res.exit_code == 0 and "builds its graphs itself; nothing to do" in res.output
    edge_idx = tmp_path / "edge"
    res = runner.invoke(app, ["index", str(DATA / "corpus.jsonl"), "--index", str(edge_idx),
                              "--embedder", "hashing", "--table", str(DATA / "domains.csv")])
    assert res.exit_code == 0, res.output
    outs = {}
    for name, args in (("qdrant", ["--index", str(idx), "--engine", "qdrant",
                                   "--qdrant-path", str(data)]),
                       ("qdrant-recorded", ["--index", str(idx)]),
                       ("edge", ["--index", str(edge_idx)])):
        res = runner.invoke(app, ["search", "does vitamin d prevent covid", *args, "--json",
                                  "--top-k", "5"])
        assert res.exit_code == 0, res.output
        outs[name] = json.loads(res.output)
    assert outs["qdrant"]["settings"]["engine"] == "qdrant"
    with open_store(idx) as store:  # pushdown wherever this qdrant-client has formula queries
        assert outs["qdrant"]["settings"]["pushdown"] is supports_formula(store)
    assert outs["edge"]["settings"]["engine"] == "edge"
    for other in ("qdrant-recorded", "edge"):
        for a, b in zip(outs["qdrant"]["hits"], outs[other]["hits"], strict=True):
            assert a["doc_id"] == b["doc_id"]
            for key, value in a["score_breakdown"].items():
                assert value == pytest.approx(b["score_breakdown"][key], abs=1e-5)
    # incremental re-run on the recorded engine
    res = runner.invoke(app, ["index", str(DATA / "corpus.jsonl"), "--index", str(idx),
                              "--embedder", "hashing", "--table", str(DATA / "domains.csv")])
    assert res.exit_code == 0 and "indexed 0" in res.output, res.output


@pytest.mark.parametrize("args,message", [
    (["--engine", "edge", "--qdrant-url", "http://x"], "only with --engine qdrant"),
    (["--qdrant-url", "http://x", "--qdrant-path", "P"], "exclude each other"),
    (["--engine", "qdrant", "--qdrant-url", "http://x", "--api-key-env",
      "CREDRANK_TEST_UNSET_KEY"], "CREDRANK_TEST_UNSET_KEY is not set"),
    (["--engine", "qdrant", "--qdrant-path", "P", "--api-key-env", "HOME"], "not to"),
    (["--engine", "elastic"], "--engine: expected one of edge, qdrant"),
    (["--engine", "qdrant"], "engine 'edge', not 'qdrant'"),
])
def test_cli_engine_option_errors(tmp_path, monkeypatch, args, message):
    monkeypatch.delenv("CREDRANK_TEST_UNSET_KEY", raising=False)
    runner = CliRunner()
    idx = tmp_path / "idx"
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "vitamin d"}) + "\n")
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                              "hashing"])
    assert res.exit_code == 0, res.output
    args = [str(tmp_path / "p") if a == "P" else a for a in args]
    res = runner.invoke(app, ["search", "vitamin", "--index", str(idx), *args])
    assert res.exit_code == 2, res.output
    assert message in " ".join(res.output.split())


def test_cli_new_qdrant_index_needs_a_location(tmp_path):
    needs_qdrant()
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "a", "text": "vitamin d"}) + "\n")
    res = CliRunner().invoke(app, ["index", str(corpus), "--index", str(tmp_path / "i"),
                                   "--embedder", "hashing", "--engine", "qdrant"])
    assert res.exit_code == 2
    assert "--qdrant-url" in res.output and "--qdrant-path" in res.output
    assert not (Path(tmp_path) / "i" / "manifest.json").exists()
