"""Search benchmark: plain engine search vs credibility-aware search (pushdown and Python path).

Synthetic corpus (generated here, seeded): N documents with 384-dimensional vectors drawn around
200 random topic centres (so neighbourhoods are realistic, not uniform noise), 30-word texts
from a 5,000-word vocabulary (for the BM25 vectors the index also stores), and source types
drawn from the seven-type taxonomy. Vectors are precomputed: index throughput measures the
engine write path (payload, dense and BM25 vectors, write-ahead log, flush), and MiniLM
embedding throughput is measured separately on a small sample when the model is installed.

Printed side by side, from one run:
  * plain search           — engine nearest neighbours, limit = top_k
  * pushdown search        — prefetch fetch_k, formula max($score,0) × λ(type), limit = top_k
  * Python path            — engine fetch_k neighbours → SourcePrior → Combine → TopK
  * rerank only            — SourcePrior → Combine → TopK on an already fetched batch
with p50/p99 latency per query, index throughput (documents/s) and peak resident memory.
Goals (issue 2): credibility-aware within 1.2× of plain latency; rerank overhead < 1 ms at
fetch_k = 30. This is a measurement, not a test: the machine is shared and noisy.

Engines side by side (issue 8; ``--section engines``): Qdrant Edge against qdrant-client's
local mode (the in-process stand-in for a Qdrant server, which is what ``--engine qdrant
--qdrant-path`` runs) on N random unit vectors (seeded), both written through the same
``VectorStore.upsert`` and queried in the same run, interleaved: dense search (top_k) and the
pushed-down formula (fetch_k → top_k), p50/p99 and the ratio to Edge exact search.

    python benchmarks/bench_search.py [--n 100000] [--queries 300] [--exact]
                                      [--section all|systems|engines] [--quick]
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from credrank.combine import Combine
from credrank.documents.schema import SOURCE_TYPES, Document
from credrank.index import open_store
from credrank.index.qdrant_edge import EdgeIndex
from credrank.index.store import VectorStore
from credrank.select.topk import TopK
from credrank.signals.prior import SourcePrior, preset


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def synthetic(n: int, dim: int, rng: np.random.Generator):
    centres = rng.normal(size=(200, dim)).astype(np.float32)
    topic = rng.integers(0, len(centres), size=n)
    vectors = centres[topic] + 0.8 * rng.normal(size=(n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    vocab = np.array([f"w{i}" for i in range(5000)])
    words = rng.integers(0, len(vocab), size=(n, 30))
    types = rng.choice(np.array(SOURCE_TYPES), size=n)
    return centres, vectors, vocab, words, types


def percentile_ms(samples: list[float], q: float) -> float:
    return float(np.percentile(np.array(samples) * 1e3, q))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--fetch-k", type=int, default=30)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--exact", action="store_true", help="exact search instead of HNSW")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--section", choices=("all", "systems", "engines"), default="all",
                    help="systems: search paths on Edge; engines: Edge vs qdrant-client local")
    ap.add_argument("--qdrant-local", choices=("memory", "path"), default="memory",
                    help="qdrant-client local mode in memory (default) or in a folder, as "
                         "--qdrant-path runs it: same search code, the folder adds a disk "
                         "write per point (slow to fill at 100k)")
    ap.add_argument("--quick", action="store_true",
                    help="a small run: N=10,000 and 100 queries (overrides --n, --queries)")
    args = ap.parse_args()
    if args.quick:
        args.n, args.queries = 10_000, 100
    if args.section in ("all", "systems"):
        bench_systems(args)
    if args.section in ("all", "engines"):
        bench_engines(args)


def bench_systems(args: argparse.Namespace) -> None:
    """Plain, pushdown, Python path and rerank-only on one Qdrant Edge index."""
    rng = np.random.default_rng(args.seed)
    dim = 384
    centres, vectors, vocab, words, types = synthetic(args.n, dim, rng)
    priors = preset("current")
    now = datetime(2026, 1, 1, tzinfo=UTC)

    with tempfile.TemporaryDirectory(prefix="credrank-bench-") as tmp:
        index = EdgeIndex.open(Path(tmp) / "idx", embedder="synthetic", dim=dim, create=True)
        t0 = time.perf_counter()
        for start in range(0, args.n, args.batch):
            stop = min(start + args.batch, args.n)
            docs = [Document(id=f"d{i}", text=" ".join(vocab[words[i]]), retrieved_at=now)
                    for i in range(start, stop)]
            prov = [{"host": None, "registered_domain": None, "source_type": str(types[i]),
                     "url_source_type": str(types[i]), "declared_source_type": None,
                     "provenance_rule": "synthetic", "provenance_conflict": None,
                     "domain_score": None} for i in range(start, stop)]
            index.upsert(docs, prov, vectors[start:stop], [""] * (stop - start))
        write_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        optimised = False if args.exact else index.shard.optimize()
        optimise_s = time.perf_counter() - t0
        rss_after_index = peak_rss_mb()

        queries = centres[rng.integers(0, len(centres), size=args.queries)]
        queries = queries + 0.8 * rng.normal(size=queries.shape).astype(np.float32)
        queries /= np.linalg.norm(queries, axis=1, keepdims=True)
        exact = args.exact
        rerank = SourcePrior(priors) >> Combine("multiply") >> TopK(args.top_k)

        def plain(q):
            return index.search_dense("q", q, args.top_k, exact=exact)

        def pushdown(q):
            return index.search_formula("q", q, args.fetch_k, args.top_k, priors.values,
                                        exact=exact)

        def python_path(q):
            return rerank(index.search_dense("q", q, args.fetch_k, exact=exact))

        systems = {"plain search (top_k)": plain, "pushdown (formula)": pushdown,
                   "Python path (fetch_k → rerank)": python_path}
        for fn in systems.values():  # warm-up
            for q in queries[:20]:
                fn(q)
        timings: dict[str, list[float]] = {name: [] for name in systems}
        order = list(systems)
        for q in queries:
            # interleaved so drift hits every system alike, in a shuffled order per query so
            # that no system always runs on caches warmed by another one for the same query
            rng.shuffle(order)
            for name in order:
                t = time.perf_counter()
                systems[name](q)
                timings[name].append(time.perf_counter() - t)
        fetched = [index.search_dense("q", q, args.fetch_k, exact=exact) for q in queries]
        rerank_t = []
        for b in fetched:
            t = time.perf_counter()
            rerank(b)
            rerank_t.append(time.perf_counter() - t)
        timings["rerank only (fetch_k batch)"] = rerank_t

        # agreement of pushdown and Python path on the same candidates
        agree = sum(list(pushdown(q).doc_ids) == list(python_path(q).doc_ids)
                    for q in queries[:100])
        index.close()

    embed_rate = None
    try:
        from credrank.demo import demo_dir
        from credrank.documents import read_corpus
        from credrank.index.embed import MiniLMEmbedder

        emb = MiniLMEmbedder()
        demo = read_corpus(demo_dir() / "corpus.jsonl").documents
        texts = [d.text for d in demo] * 4  # 480 real-length texts (~40–120 words)
        emb.embed(texts[:32])
        t = time.perf_counter()
        emb.embed(texts)
        embed_rate = len(texts) / (time.perf_counter() - t)
    except RuntimeError as exc:
        print(f"MiniLM embedding throughput not measured: {exc}")

    plain_p50 = percentile_ms(timings["plain search (top_k)"], 50)
    print(f"\ncredrank search benchmark — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"synthetic corpus: N={args.n:,}, dim={dim}, {args.queries} queries, "
          f"top_k={args.top_k}, fetch_k={args.fetch_k}, "
          f"search={'exact' if exact else 'HNSW' if optimised else 'engine default'}")
    print(f"\n{'system':34s} {'p50 ms':>9s} {'p99 ms':>9s} {'× plain p50':>12s}")
    for name, samples in timings.items():
        p50, p99 = percentile_ms(samples, 50), percentile_ms(samples, 99)
        ratio = "—" if name.startswith("rerank only") else f"{p50 / plain_p50:.2f}"
        print(f"{name:34s} {p50:9.3f} {p99:9.3f} {ratio:>12s}")
    print(f"\nindex write: {args.n / write_s:,.0f} documents/s ({write_s:.1f} s, payload + "
          f"dense + BM25 + WAL + flush per {args.batch}); optimise (HNSW build): "
          f"{optimise_s:.1f} s")
    if embed_rate:
        print(f"MiniLM embedding: {embed_rate:,.0f} texts/s (CPU, 480 demo-corpus texts) — "
              f"end-to-end indexing of text is bounded by this")
    print(f"peak RSS: {rss_after_index:,.0f} MB after indexing, {peak_rss_mb():,.0f} MB at end")
    print(f"pushdown and Python path gave the same top-{args.top_k} on {agree}/100 queries")
    goal_cred = max(percentile_ms(timings["pushdown (formula)"], 50),
                    percentile_ms(timings["Python path (fetch_k → rerank)"], 50)) / plain_p50
    print(f"\ngoal: credibility-aware ≤ 1.2× plain p50 → worst path {goal_cred:.2f}× "
          f"({'met' if goal_cred <= 1.2 else 'NOT met'}); rerank < 1 ms at fetch_k=30 → "
          f"p50 {percentile_ms(rerank_t, 50):.3f} ms "
          f"({'met' if percentile_ms(rerank_t, 50) < 1 else 'NOT met'})")



def synthetic_provenance(types: np.ndarray, start: int, stop: int) -> list[dict[str, object]]:
    return [{"host": None, "registered_domain": None, "source_type": str(types[i]),
             "url_source_type": str(types[i]), "declared_source_type": None,
             "provenance_rule": "synthetic", "provenance_conflict": None,
             "domain_score": None} for i in range(start, stop)]


def fill_store(store: VectorStore, vectors: np.ndarray, types: np.ndarray, batch: int) -> float:
    """Write the synthetic documents through ``VectorStore.upsert``; seconds taken."""
    t0 = time.perf_counter()
    for start in range(0, len(vectors), batch):
        stop = min(start + batch, len(vectors))
        docs = [Document(id=f"d{i}", text=f"synthetic document {i}") for i in range(start, stop)]
        store.upsert(docs, synthetic_provenance(types, start, stop), vectors[start:stop],
                     [""] * (stop - start))
    return time.perf_counter() - t0


def bench_engines(args: argparse.Namespace) -> None:
    """Qdrant Edge vs qdrant-client local mode: dense and formula search, same vectors."""
    try:
        from credrank.index.qdrant_server import QdrantServerIndex  # optional: 'qdrant' extra
    except ImportError as exc:
        print(f"\nengines not compared: qdrant-client is not installed ({exc})")
        return
    rng = np.random.default_rng(args.seed + 1)
    dim = 384
    vectors = rng.normal(size=(args.n, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    types = rng.choice(np.array(SOURCE_TYPES), size=args.n)
    queries = rng.normal(size=(args.queries, dim)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    priors = preset("current").values
    k, fetch_k = args.top_k, args.fetch_k

    with tempfile.TemporaryDirectory(prefix="credrank-engines-") as tmp:
        edge = open_store(Path(tmp) / "edge", "edge", embedder="synthetic", dim=dim,
                          create=True, bm25=False)
        if args.qdrant_local == "path":
            local = open_store(Path(tmp) / "qdrant", "qdrant",
                               qdrant_path=Path(tmp) / "qdrant-data", embedder="synthetic",
                               dim=dim, create=True, bm25=False)
        else:
            local = QdrantServerIndex.in_memory("synthetic", dim, bm25=False)
        assert isinstance(edge, EdgeIndex) and isinstance(local, QdrantServerIndex)
        write = {"Qdrant Edge": fill_store(edge, vectors, types, args.batch),
                 "qdrant-client local": fill_store(local, vectors, types, args.batch)}
        t0 = time.perf_counter()
        optimised = edge.optimize()
        optimise_s = time.perf_counter() - t0
        systems = {
            "Qdrant Edge, exact — dense": lambda q: edge.search_dense("q", q, k, exact=True),
            "Qdrant Edge, HNSW — dense": lambda q: edge.search_dense("q", q, k),
            "qdrant-client local — dense": lambda q: local.search_dense("q", q, k),
            "Qdrant Edge, exact — formula": lambda q: edge.search_formula(
                "q", q, fetch_k, k, priors, exact=True),
            "qdrant-client local — formula": lambda q: local.search_formula(
                "q", q, fetch_k, k, priors),
        }
        for fn in systems.values():  # warm-up
            for q in queries[:5]:
                fn(q)
        timings: dict[str, list[float]] = {name: [] for name in systems}
        order = list(systems)
        for q in queries:
            rng.shuffle(order)  # interleaved, shuffled: drift and caches hit every system alike
            for name in order:
                t = time.perf_counter()
                systems[name](q)
                timings[name].append(time.perf_counter() - t)
        agree = sum(
            list(edge.search_dense("q", q, k, exact=True).doc_ids)
            == list(local.search_dense("q", q, k).doc_ids) for q in queries)
        edge.close()
        local.close()

    base = {"dense": percentile_ms(timings["Qdrant Edge, exact — dense"], 50),
            "formula": percentile_ms(timings["Qdrant Edge, exact — formula"], 50)}
    print(f"\nengines side by side — {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"N={args.n:,} random unit vectors, dim={dim}, {args.queries} queries, top_k={k}, "
          f"fetch_k={fetch_k} (formula); qdrant-client local mode "
          f"{'in a folder' if args.qdrant_local == 'path' else 'in memory'}; Edge HNSW "
          f"{'built' if optimised else 'not built (engine default)'} in {optimise_s:.1f} s")
    print(f"\n{'engine — search':34s} {'p50 ms':>9s} {'p99 ms':>9s} {'× Edge exact p50':>17s}")
    for name, samples in timings.items():
        p50, p99 = percentile_ms(samples, 50), percentile_ms(samples, 99)
        kind = name.rsplit("— ", 1)[1]
        print(f"{name:34s} {p50:9.3f} {p99:9.3f} {p50 / base[kind]:17.2f}")
    for name, seconds in write.items():
        print(f"write {name}: {args.n / seconds:,.0f} documents/s ({seconds:.1f} s, "
              f"batches of {args.batch})")
    print(f"exact dense top-{k}: Edge and qdrant-client local agree on {agree}/{len(queries)} "
          "queries")


if __name__ == "__main__":
    main()
