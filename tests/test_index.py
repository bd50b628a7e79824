"""The embedded Qdrant Edge index: pushdown ≡ Python ranking, incremental and interrupted runs."""

from __future__ import annotations

import importlib.util
import json
import signal
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from conftest import PausedIndexer
from credrank.combine import Combine
from credrank.core.ties import tie_groups
from credrank.documents import iter_documents
from credrank.documents.schema import SOURCE_TYPES, Document
from credrank.index import open_store
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import index_documents
from credrank.index.qdrant_edge import EdgeIndex
from credrank.index.retrieve import DenseRetriever
from credrank.index.store import StoreError
from credrank.pipeline.compile import (
    build_stages,
    check_stages,
    compile_search,
    compile_spec,
    context,
    decide_pushdown,
)
from credrank.pipeline.pushdown import PushdownSearch
from credrank.pipeline.shortcuts import (
    AUDIT,
    CLI,
    HTTP_SEARCH,
    LIBRARY,
    in_words,
    spec_from_options,
)
from credrank.pipeline.spec import PipelineSpec, SpecError
from credrank.provenance import SourceTyper
from credrank.select.topk import TopK
from credrank.signals.prior import load_priors, preset
from credrank.stages.prior import SourcePrior

HOSTS = {
    "peer_reviewed": "https://www.nejm.org/doi/{i}",
    "government": "https://www.cdc.gov/page{i}",
    "established_news": "https://www.reuters.com/health/{i}",
    "blog": "https://someone{i}.blogspot.com/post",
    "user_generated": "https://www.reddit.com/r/health/{i}",
    "ai_generated": "https://farm{i}.example/x",
    "unknown": "https://site{i}.example/x",
}
WORDS = ("vitamin vaccine dose trial fever cold antibiotic sleep heart risk sugar insulin "
         "statin muscle fluoride water sunscreen skin cancer melatonin child study").split()


def make_corpus(path: Path, n: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with path.open("w") as f:
        for i in range(n):
            t = SOURCE_TYPES[i % len(SOURCE_TYPES)]
            text = " ".join(rng.choice(WORDS, size=25))
            f.write(json.dumps({"id": f"d{i:04d}", "text": text,
                                "url": HOSTS[t].format(i=i),
                                "published_at": "2024-01-02T00:00:00Z"}) + "\n")


@pytest.fixture
def small_index(tmp_path):
    corpus = tmp_path / "c.jsonl"
    make_corpus(corpus, 300)
    emb = HashingEmbedder(64)
    idx = EdgeIndex.open(tmp_path / "idx", embedder=emb.name, dim=emb.dim, create=True)
    report = index_documents(iter_documents(corpus), idx, emb, SourceTyper(), batch_size=50)
    assert report.indexed == 300 and report.rejected == 0
    yield idx, emb
    idx.close()


def test_payload_carries_provenance_derived_type(small_index):
    idx, emb = small_index
    hits = DenseRetriever(idx, emb, 300).search("vaccine trial")
    by_id = dict(zip(hits.doc_ids, hits.column("source_type"), strict=True))
    assert by_id["d0000"] == "peer_reviewed" and by_id["d0003"] == "blog"
    assert hits.column("host")[0] is not None


@pytest.mark.parametrize("priors", ["compressed", "current", "aggressive"])
def test_pushdown_equals_python_path(small_index, priors):
    idx, emb = small_index
    table = preset(priors)
    for query in ("vitamin fever", "statin muscle risk", "sunscreen skin cancer child"):
        fetch_k, top_k = 45, 15
        qv = emb.embed([query])[0]
        pool = idx.search_dense(query, qv, fetch_k, exact=True)
        python = TopK(top_k)(Combine("multiply")(SourcePrior(table)(pool)))
        pushed = idx.search_formula(query, qv, fetch_k, top_k, table.values, exact=True)
        # same scores to float precision, same order wherever scores are not tied
        assert np.allclose(pushed.retrieval_score, python.score, atol=1e-6)
        assert python.score[-1] > 0, "test needs a cutoff above the clipped zeros"
        # identical sequence of tie groups (the last group may be cut at the boundary)
        pushed_groups = tie_groups(pushed.doc_ids, pushed.score)
        python_groups = tie_groups(python.doc_ids, python.score)
        assert pushed_groups[:-1] == python_groups[:-1]


def test_pushdown_stage_breakdown(small_index):
    idx, emb = small_index
    out = PushdownSearch(idx, emb, preset("current"), 30, 10).search("vaccine dose")
    b = out.hits()[0]["score_breakdown"]
    assert b["final"] == pytest.approx(b["retrieval_score"] * b["prior"], rel=1e-5)


def test_pipeline_builder_rejects_unsupported_pushdown(small_index):
    idx, emb = small_index
    # before an index is opened (the stages checked), said with the option
    insisted = spec_from_options(pushdown=True, mode="rrf")
    with pytest.raises(SpecError, match=r"stages\[1\]: mode 'rrf' needs the Python path.*"
                                        r"pushdown: true cannot be honoured") as caught:
        check_stages(insisted)
    assert in_words(caught.value, insisted.to_dict(), CLI).startswith("--mode: mode 'rrf'")
    # the option that insisted is said in the door's words, not the spec's
    said = {door.name: in_words(caught.value, insisted.to_dict(), door)
            for door in (CLI, LIBRARY, HTTP_SEARCH, AUDIT)}
    assert said["cli"].endswith("; --pushdown cannot be honoured")
    assert said["library"].endswith("; pushdown=True cannot be honoured")
    assert said["http"].endswith("; pushdown: true cannot be honoured")
    assert said["audit"].endswith("; system.pushdown: true cannot be honoured")
    # a spec that insists, at its stage, when it is compiled
    spec = PipelineSpec.of("prior", {"stage": "combine", "mode": "rrf"}, pushdown=True)
    with pytest.raises(SpecError, match=r"stages\[1\]: mode 'rrf' needs the Python path.*"
                                        r"pushdown: true cannot be honoured"):
        compile_spec(spec, idx, emb)


def test_bm25_option(small_index):
    idx, emb = small_index
    compiled = compile_spec(spec_from_options(top_k=5, lexical=True), idx, emb)
    assert compiled.pushdown.fused is False and compiled.spec.retrieval == "bm25"
    out = compiled.pipeline.search("fluoride water")
    assert len(out) == 5 and out.retrieval_score.min() > 0


def test_reindex_is_incremental_without_duplicates(tmp_path, small_index):
    idx, emb = small_index
    corpus = tmp_path / "c.jsonl"
    report = index_documents(iter_documents(corpus), idx, emb, SourceTyper(), batch_size=50)
    assert report.indexed == 0 and report.unchanged == 300 and len(idx) == 300
    with corpus.open("a") as f:
        f.write(json.dumps({"id": "new1", "text": "fresh document on sleep"}) + "\n")
    report = index_documents(iter_documents(corpus), idx, emb, SourceTyper(), batch_size=50)
    assert report.indexed == 1 and len(idx) == 301


def test_open_missing_or_mismatched_index(tmp_path, small_index):
    with pytest.raises(StoreError, match="no credrank index"):
        EdgeIndex.open(tmp_path / "nothing")
    with pytest.raises(StoreError, match="embedder"):
        EdgeIndex.open(tmp_path / "idx", embedder="minilm")


def engines() -> list[str]:
    """The engines an interruption test runs on (qdrant when qdrant-client is installed)."""
    return ["edge", "qdrant"] if importlib.util.find_spec("qdrant_client") else ["edge"]


@pytest.mark.parametrize("engine", engines())
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT], ids=["SIGKILL", "SIGINT"])
def test_interrupted_indexing_leaves_a_usable_index(tmp_path, sig, engine):
    corpus, where = tmp_path / "c.jsonl", tmp_path / "idx"
    n, stop_after = 200, 5
    make_corpus(corpus, n)
    child = PausedIndexer(corpus, where, engine=engine, batch_size=10, pause_at=stop_after)
    try:
        # the child has flushed batch `stop_after` and waits for a go-ahead that never comes
        child.proc.send_signal(sig)
        assert child.proc.wait(timeout=120) != 0
    finally:
        child.close()
    emb = HashingEmbedder()  # the child's embedder: get_embedder("hashing")
    with open_store(where) as idx:  # opens (the recorded engine) and answers
        partial = len(idx)
        assert partial == 10 * stop_after
        assert len(DenseRetriever(idx, emb, 5).search("vitamin")) == 5
        report = index_documents(iter_documents(corpus), idx, emb, SourceTyper(), batch_size=200)
        assert len(idx) == n  # completed, no duplicates
        assert report.unchanged == partial and report.indexed == n - partial


def test_dates_round_trip_as_iso(tmp_path):
    emb = HashingEmbedder(64)
    when = datetime(2020, 3, 1, 12, tzinfo=UTC)
    with EdgeIndex.open(tmp_path / "i", embedder=emb.name, dim=emb.dim, create=True) as idx:
        index_documents([Document(id="a", text="vitamin d", observed_at=when)], idx, emb,
                        SourceTyper())
        out = DenseRetriever(idx, emb, 1).search("vitamin")
        assert out.column("observed_at")[0] == when.isoformat()
        assert out.column("published_at")[0] is None


def test_auto_pushdown_only_where_the_engine_can_score(small_index):
    from credrank.stages.smoothing import NeighbourSmoothing

    def fused(spec: PipelineSpec) -> bool:
        return decide_pushdown(build_stages(spec, context()), retrieval=spec.retrieval,
                               requested=spec.pushdown).fused

    assert fused(spec_from_options())
    assert not fused(spec_from_options(pushdown=False))
    for spec in (spec_from_options(mode="rrf"), spec_from_options(lexical=True),
                 spec_from_options(priors="none"), spec_from_options(domain_scores=True),
                 PipelineSpec.of("prior", "smoothing")):
        assert not fused(spec), spec
    # stages built in code: a smoothing stage object after the prior
    stages = [SourcePrior(load_priors("current")), NeighbourSmoothing(), Combine("multiply"),
              TopK(10)]
    assert not decide_pushdown(stages).fused
    assert decide_pushdown([stages[0], *stages[2:]]).fused
    idx, emb = small_index
    assert compile_search(stages, idx, emb, fetch_k=30, top_k=10).stages[0].name != "pushdown"
    auto = compile_spec(spec_from_options(top_k=5), idx, emb)
    assert auto.pushdown.fused and isinstance(auto.pipeline.stages[0], PushdownSearch)
    python = compile_spec(spec_from_options(top_k=5, pushdown=False), idx, emb)
    assert not python.pushdown.fused and python.pushdown.reason == "pushdown turned off"
    a, b = auto.pipeline.search("vitamin fever"), python.pipeline.search("vitamin fever")
    assert np.allclose(a.score, b.score, atol=1e-6)


def test_rejects_never_replaces_the_corpus_or_an_index_file(tmp_path: Path) -> None:
    """``--rejects idx/manifest.json`` renamed the manifest aside and wrote the rejects in its
    place (the index could no longer be opened); ``--rejects CORPUS`` replaced the corpus.
    A file that holds no reject records is refused too; nothing is indexed."""
    from cli_inprocess import run_cli

    corpus = tmp_path / "dup.jsonl"
    corpus.write_text('{"id": "a", "text": "x"}\n{"id": "a", "text": "y"}\n', encoding="utf-8")
    idx = tmp_path / "idx"
    assert run_cli("index", corpus, "--index", idx, "--embedder", "hashing", "-q"
                   ).returncode == 0
    manifest = (idx / "manifest.json").read_bytes()
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n", encoding="utf-8")
    for target, said in ((idx / "manifest.json", "is inside the index folder"),
                         (corpus, "it is the corpus being indexed"),
                         (notes, "an existing file that holds no reject records")):
        got = run_cli("index", corpus, "--index", idx, "--embedder", "hashing", "-q",
                      "--rejects", target)
        assert got.returncode == 2 and said in got.stderr, got.stderr
    assert (idx / "manifest.json").read_bytes() == manifest
    assert notes.read_text(encoding="utf-8") == "my notes\n"
    mine = tmp_path / "mine.jsonl"  # a rejects file of one's own, kept between runs
    for _ in range(2):
        assert run_cli("index", corpus, "--index", idx, "--embedder", "hashing", "-q",
                       "--rejects", mine).returncode == 0
    assert len(list(tmp_path.glob("mine.*.jsonl"))) == 1


def test_an_id_holding_nul_is_rejected_with_its_line(tmp_path: Path) -> None:
    """A NUL in an id made its passages' keys clash with another document's ('a 63-bit hash
    collision'), and the whole batch failed; it is one rejected record now."""
    from cli_inprocess import run_cli

    corpus = tmp_path / "nul.jsonl"
    corpus.write_text(json.dumps({"id": "p", "text": " ".join(f"w{i}." for i in range(100))})
                      + "\n" + json.dumps({"id": "p\u00001", "text": "collider"}) + "\n"
                      + json.dumps({"id": "q", "text": "innocent"}) + "\n", encoding="utf-8")
    got = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                  "--chunk-tokens", "16", "--json")
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert (doc["indexed"], doc["rejected"]) == (2, 1)
    assert "expected an id without a NUL character" in doc["rejects"][0]["reason"]
    assert doc["rejects"][0]["line"] == 2


def test_a_rerun_takes_the_index_s_own_embedder(tmp_path: Path) -> None:
    """Re-indexing into a hashing index without --embedder was refused ("built with
    'hashing', not 'minilm'"): --embedder defaulted to minilm, not to the index's own."""
    from cli_inprocess import run_cli

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "vitamin d"}\n', encoding="utf-8")
    idx = tmp_path / "idx"
    assert run_cli("index", corpus, "--index", idx, "--embedder", "hashing", "-q"
                   ).returncode == 0
    corpus.write_text('{"id": "a", "text": "vitamin d"}\n{"id": "b", "text": "zinc"}\n',
                      encoding="utf-8")
    got = run_cli("index", corpus, "--index", idx, "--json")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout)["indexed"] == 1
    got = run_cli("index", corpus, "--index", idx, "--embedder", "minilm", "-q")
    assert got.returncode == 2 and "'hashing'" in got.stderr  # another one: still an error


def test_declared_types_on_records_without_a_url_are_not_called_url_conflicts(
        tmp_path: Path) -> None:
    from cli_inprocess import run_cli

    corpus = tmp_path / "dec.jsonl"
    corpus.write_text('{"id": "a", "text": "x", "source_type": "blog"}\n'
                      '{"id": "b", "text": "y", "url": "https://www.nih.gov/a", '
                      '"source_type": "blog"}\n', encoding="utf-8")
    got = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing")
    assert got.returncode == 0, got.stderr
    assert ("1 declared source types conflict with the URL (URL used); 1 declared on records "
            "without a URL (not used)") in got.stderr
