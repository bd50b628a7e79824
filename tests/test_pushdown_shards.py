"""The Qdrant server backend's pushdown ranks like the Python path on one shard and on several
(issue 38, item 3).

A Qdrant cluster runs a query's prefetch and formula on each shard and k-merges the shards'
lists (``tests/qdrant_cluster.py`` emulates that with N Qdrant Edge shards), so one request
would rescore each shard's own ``fetch_k`` nearest. ``search_formula`` asks the global top
``fetch_k`` first, then the formula over exactly those ids: the pool the Python path reranks.
Shown on the demo corpus and on CrAM NQ (skipped when ``../shared/data`` lacks it), for N = 1,
2, 4 shards, and in ``qdrant-client``'s local mode (one shard, one request or two)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import qdrant_edge as qe

from credrank.core.ties import compare_rankings
from credrank.demo import demo_dir
from credrank.documents import iter_documents
from credrank.documents.schema import Document
from credrank.index import open_store
from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import index_documents
from credrank.pipeline.compile import compile_spec
from credrank.pipeline.pushdown import PushdownSearch
from credrank.pipeline.shortcuts import spec_from_options
from credrank.provenance import SourceTyper

pytest.importorskip("qdrant_client")
from credrank.index.qdrant_server import SHARD_SAMPLING_LIMIT, QdrantServerIndex
from qdrant_cluster import EmulatedCluster, cluster_index, sampled_limit

# `make test` runs the whole file on one xdist worker (--dist loadfile), so each index below
# is built once per run
pytestmark = [pytest.mark.filterwarnings("ignore:Failed to obtain server version")]


class MemoHashingEmbedder(HashingEmbedder):
    """:class:`HashingEmbedder` remembering each text's vector: the same 5,000 CrAM passages
    (and 120 demo documents) are indexed into a store per shard count and a local-mode one,
    and the hashing vector of a text depends on that text alone (each row hashed and
    normalised by itself), so embedding it once gives every store the very vectors it had."""

    def __init__(self, dim: int):
        super().__init__(dim)
        self._memo: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self._memo))
        if missing:
            self._memo.update(zip(missing, super().embed(missing), strict=True))
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._memo[t] for t in texts])


EMB = MemoHashingEmbedder(64)
DATA = demo_dir()
DEMO_QUERIES = ("vitamin c cold", "vaccine autism", "statin muscle pain", "sunscreen cancer",
                "fluoride water children", "melatonin sleep", "antibiotics virus",
                "sugar diabetes")
SHARDS = (1, 2, 4)
#: (top_k, fetch_k): the default pool, a small pool (most sensitive to pool membership), a
#: pool and a top_k of SHARD_SAMPLING_LIMIT or more (where a cluster samples shards)
DEMO_CASES = ((5, 8), (10, None), (1, 3), (5, 130), (120, 130))
#: a URL of each source type; CrAM passages carry none, so each gets one by a hash of its id
HOSTS = ("https://www.nejm.org/doi/", "https://www.cdc.gov/", "https://www.reuters.com/",
         "https://x.blogspot.com/", "https://www.reddit.com/r/", "https://foo.example/")
CRAM_QUERIES = 40
CRAM_CASES = ((10, 30), (5, 10), (10, 150))


def pipelines(store: Any, top_k: int, fetch_k: int | None, priors: str = "current"
              ) -> tuple[Any, Any]:
    """The compiled pushdown and Python-path pipelines of ``credrank search``'s options."""
    options: dict[str, Any] = {"top_k": top_k, "fetch_k": fetch_k, "priors": priors}
    pushed = compile_spec(spec_from_options(**options), store, EMB).pipeline
    python = compile_spec(spec_from_options(**options, pushdown=False), store, EMB).pipeline
    assert isinstance(pushed.stages[0], PushdownSearch)
    assert not isinstance(python.stages[0], PushdownSearch)
    return pushed, python


#: ``(top_k, fetch_k, priors, query) -> ranking``: what a pipeline gave on a store
Memo = dict[tuple[int, int | None, str, str], Any]


def memoised(pipeline: Any, query: str, memo: Memo | None, key: tuple[Any, ...]) -> Any:
    """``pipeline.search(query)``, kept in ``memo`` under ``key`` (``None``: not kept)."""
    if memo is None:
        return pipeline.search(query)
    if key not in memo:
        memo[key] = pipeline.search(query)
    return memo[key]


def verdicts(store: Any, queries: tuple[str, ...] | list[str], top_k: int,
             fetch_k: int | None, priors: str = "current", python_memo: Memo | None = None,
             pushed_memo: Memo | None = None) -> dict[str, str]:
    """``query -> same | ties | real`` (:func:`credrank.core.ties.compare_rankings`).

    ``python_memo``: the Python path's rankings on ``store``, kept across calls (a
    module-scoped store's fixture): that path reads nothing of ``store.global_pool``, which
    only the pushdown's ``search_formula`` reads, so the tests that compare one request and two
    with it rank it once per case instead of once per request mode. ``pushed_memo``: the same
    for the pushdown's rankings, for one value of ``store.global_pool``."""
    pushed, python = pipelines(store, top_k, fetch_k, priors)
    out = {}
    for q in queries:
        a = memoised(pushed, q, pushed_memo, (top_k, fetch_k, priors, q))
        b = memoised(python, q, python_memo, (top_k, fetch_k, priors, q))
        assert len(a) == len(b)
        out[q] = compare_rankings(a, b)
    return out


def assert_unsampled(cluster: EmulatedCluster) -> None:
    """No request credrank sent was sampled across shards."""
    sampled = [r for r in cluster.log if r.sampled]
    assert not sampled, f"requests sampled across {cluster.n} shards: {sampled}"


def build_cluster(root: Path, shards: int, documents: list[Document], typer: SourceTyper
                  ) -> tuple[QdrantServerIndex, EmulatedCluster]:
    store, cluster = cluster_index(root, shards, EMB.name, EMB.dim)
    index_documents(documents, store, EMB, typer)
    assert len(store) == len(documents)
    assert sum(s.count(qe.CountRequest(exact=True))
               for s in cluster.shards) == len(documents)
    return store, cluster


# -- the demo corpus ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_docs() -> list[Document]:
    return list(iter_documents(DATA / "corpus.jsonl"))


@pytest.fixture(scope="module", params=SHARDS, ids=lambda n: f"{n}-shards")
def demo_cluster(request, tmp_path_factory, demo_docs):
    store, cluster = build_cluster(tmp_path_factory.mktemp(f"demo{request.param}"),
                                   request.param, demo_docs,
                                   SourceTyper([DATA / "domains.csv"]))
    if request.param > 1:  # every shard holds part of the corpus
        assert all(0 < s.count(qe.CountRequest(exact=True)) < 120
                   for s in cluster.shards)
    yield store, cluster
    cluster.close()


@pytest.mark.parametrize("top_k,fetch_k", DEMO_CASES)
@pytest.mark.parametrize("priors", ["current", "aggressive"])
def test_demo_same_ranking_on_every_shard_count(demo_cluster, top_k, fetch_k, priors):
    store, cluster = demo_cluster
    cluster.log.clear()
    got = verdicts(store, DEMO_QUERIES, top_k, fetch_k, priors)
    assert set(got.values()) <= {"same", "ties"}, got
    assert_unsampled(cluster)


@pytest.mark.parametrize("top_k,fetch_k", [(6, 10), (6, None)])
def test_demo_freshness_same_ranking_on_every_shard_count(demo_cluster, top_k, fetch_k):
    """The freshness factor (chapter 35.7) in the formula: dates, decay and the undated
    weight scored on each shard's part of the pool."""
    store, cluster = demo_cluster
    spec = "half_life=365,now=2025-06-01T00:00:00+00:00,undated=penalty:0.5"
    options: dict[str, Any] = {"top_k": top_k, "fetch_k": fetch_k, "freshness": spec}
    pushed = compile_spec(spec_from_options(**options), store, EMB).pipeline
    python = compile_spec(spec_from_options(**options, pushdown=False), store, EMB).pipeline
    assert isinstance(pushed.stages[0], PushdownSearch)
    assert pushed.stages[0].freshness is not None
    cluster.log.clear()
    got = {q: compare_rankings(pushed.search(q), python.search(q)) for q in DEMO_QUERIES}
    assert set(got.values()) <= {"same", "ties"}, got
    assert_unsampled(cluster)


def test_demo_one_request_ranks_another_pool_on_several_shards(demo_cluster):
    """The measured difference the two requests remove: one request (a prefetch of
    ``fetch_k`` per shard under the formula) rescores up to ``shards × fetch_k`` points, and
    5 of the 8 demo queries rank a document from outside the global pool on 2 and on 4 shards
    (top_k 5, fetch_k 8; measured); on one shard it is the same pool."""
    store, cluster = demo_cluster
    store.global_pool = False
    try:
        got = verdicts(store, DEMO_QUERIES, 5, 8)
    finally:
        store.global_pool = True
    real = sorted(q for q, v in got.items() if v == "real")
    if cluster.n == 1:
        assert real == []
    else:
        assert real == ["antibiotics virus", "fluoride water children", "statin muscle pain",
                        "sugar diabetes", "sunscreen cancer"], got


def test_requests_sent_to_a_cluster(demo_cluster):
    """Step 1: ids only, the global top ``fetch_k`` (through an exact pass-through root from
    ``SHARD_SAMPLING_LIMIT`` on); step 2: the formula over a ``has_id`` prefetch of exactly
    those ids, root exact; a plain search of that size would have been sampled."""
    store, cluster = demo_cluster
    pushed, python = pipelines(store, 5, 130)
    cluster.log.clear()
    pushed.search("vaccine autism")
    first, second = cluster.log
    assert (first.limit, first.exact, first.per_shard, first.prefetch_limits) == (
        130, True, 130, [130])
    # top_k + 1: the first hit cut tells whether a tie crosses the cut (PushdownSearch)
    assert (second.limit, second.exact, second.per_shard, second.prefetch_limits) == (
        6, True, 6, [120])  # the pool: the whole 120-document corpus
    cluster.log.clear()
    python.search("vaccine autism")
    (dense,) = cluster.log
    assert dense.exact and dense.per_shard == 130
    if cluster.n > 1:  # what the cluster would have done to a plain request
        assert sampled_limit(130, cluster.n) < 130
    cluster.log.clear()
    pipelines(store, 5, 20)[0].search("vaccine autism")
    first, second = cluster.log
    assert (first.limit, first.exact, first.prefetch_limits) == (20, False, [])
    assert (second.limit, second.exact, second.prefetch_limits) == (6, True, [20])
    assert SHARD_SAMPLING_LIMIT == 128


# -- qdrant-client local mode --------------------------------------------------------------------

@pytest.fixture(scope="module")
def demo_local(tmp_path_factory):
    root = tmp_path_factory.mktemp("local")
    with open_store(root / "idx", "qdrant", embedder=EMB.name, dim=EMB.dim, create=True,
                    qdrant_path=root / "data") as store:
        index_documents(iter_documents(DATA / "corpus.jsonl"), store, EMB,
                        SourceTyper([DATA / "domains.csv"]))
        yield store


@pytest.fixture(scope="module")
def demo_local_python() -> Memo:
    """The Python path's rankings on :func:`demo_local` (see :func:`verdicts`)."""
    return {}


@pytest.fixture(scope="module")
def demo_local_pushed() -> Memo:
    """The pushdown's rankings on :func:`demo_local` in its own mode (one request), the same
    for every emulated cluster it is compared with."""
    return {}


@pytest.mark.parametrize("global_pool", [False, True], ids=["one-request", "two-requests"])
@pytest.mark.parametrize("top_k,fetch_k", DEMO_CASES)
def test_demo_local_mode_one_or_two_requests(demo_local, demo_local_python, demo_local_pushed,
                                             global_pool, top_k, fetch_k):
    assert demo_local.global_pool is False  # local mode: one shard, one request
    demo_local.global_pool = global_pool
    try:
        got = verdicts(demo_local, DEMO_QUERIES, top_k, fetch_k, python_memo=demo_local_python,
                       pushed_memo=None if global_pool else demo_local_pushed)
    finally:
        demo_local.global_pool = False
    assert set(got.values()) <= {"same", "ties"}, got


# -- CrAM NQ passages ------------------------------------------------------------------------

def read_cram(path: Path) -> tuple[list[Document], list[str]]:
    """CrAM NQ's 5,000 passages, each with a URL of a source type chosen by a hash of its id
    (the set has no provenance), and its first :data:`CRAM_QUERIES` questions."""
    from credrank_bench.datasets.cram_nq import read_cram_nq

    data = read_cram_nq(path)

    def url(doc_id: str) -> str:
        h = hashlib.blake2b(doc_id.encode(), digest_size=4).digest()
        return HOSTS[h[0] % len(HOSTS)] + doc_id
    docs = [replace(d, url=url(d.id)) for d in data.documents]
    return docs, [text for _, text in data.queries[:CRAM_QUERIES]]


@pytest.fixture(scope="module")
def cram(shared_data: Path) -> tuple[list[Document], list[str]]:
    path = shared_data / "cram" / "cram_nq_1000_reconstructed.jsonl"
    if not path.is_file():
        pytest.skip(f"CrAM NQ not available: expected {path} (see shared/data/SOURCES.md)")
    return read_cram(path)


@pytest.fixture(scope="module", params=SHARDS, ids=lambda n: f"{n}-shards")
def cram_cluster(request, tmp_path_factory, cram):
    docs, _ = cram
    store, cluster = build_cluster(tmp_path_factory.mktemp(f"cram{request.param}"),
                                   request.param, docs, SourceTyper())
    yield store, cluster
    cluster.close()


@pytest.mark.parametrize("top_k,fetch_k", CRAM_CASES)
def test_cram_same_ranking_on_every_shard_count(cram_cluster, cram, top_k, fetch_k):
    store, cluster = cram_cluster
    cluster.log.clear()
    got = verdicts(store, cram[1], top_k, fetch_k)
    assert set(got.values()) <= {"same", "ties"}, got
    assert_unsampled(cluster)


def test_cram_one_request_ranks_another_pool_on_several_shards(cram_cluster, cram):
    """The difference on CrAM NQ (5,000 passages, top_k 5, fetch_k 10, 40 questions): none on
    one shard; on 2 and on 4 shards 28 of the 40 rank a passage from outside the pool
    (measured)."""
    store, cluster = cram_cluster
    store.global_pool = False
    try:
        got = verdicts(store, cram[1], 5, 10)
    finally:
        store.global_pool = True
    real = sum(v == "real" for v in got.values())
    if cluster.n == 1:
        assert real == 0
    else:
        assert real == 28, got


@pytest.fixture(scope="module")
def cram_local(cram):
    # in memory and without BM25 vectors: 5,000 passages in a local-mode folder take 2 min
    with QdrantServerIndex.in_memory(EMB.name, EMB.dim, bm25=False) as store:
        index_documents(cram[0], store, EMB, SourceTyper())
        yield store


@pytest.fixture(scope="module")
def cram_local_python() -> Memo:
    """The Python path's rankings on :func:`cram_local` (see :func:`verdicts`)."""
    return {}


@pytest.mark.parametrize("global_pool", [False, True], ids=["one-request", "two-requests"])
def test_cram_local_mode_one_or_two_requests(cram_local, cram, cram_local_python, global_pool):
    cram_local.global_pool = global_pool
    try:
        for top_k, fetch_k in CRAM_CASES:
            got = verdicts(cram_local, cram[1][:10], top_k, fetch_k,
                           python_memo=cram_local_python)
            assert set(got.values()) <= {"same", "ties"}, (top_k, fetch_k, got)
    finally:
        cram_local.global_pool = False


@pytest.mark.parametrize("top_k,fetch_k", [(5, 8), (10, None), (5, 130)])
def test_emulated_cluster_ranks_like_local_mode(demo_cluster, demo_local, demo_local_pushed,
                                                top_k, fetch_k):
    """The emulation's translation of the server's requests (formula, filters, merge) gives
    what qdrant-client's own local mode gives, on every shard count (local mode's rankings
    ranked once, not once per shard count)."""
    store, _ = demo_cluster
    on_cluster = pipelines(store, top_k, fetch_k)[0]
    local = pipelines(demo_local, top_k, fetch_k)[0]
    assert demo_local.global_pool is False  # its own mode: one request
    for q in DEMO_QUERIES:
        ranked = memoised(local, q, demo_local_pushed, (top_k, fetch_k, "current", q))
        assert compare_rankings(on_cluster.search(q), ranked) in {"same", "ties"}, q
