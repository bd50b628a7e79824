"""Adapter latency (issue 26): credrank's framework adapters with their DEFAULT settings
against each framework's own postprocessor, per query, measured in the same run.

Data: the demo corpus (120 documents) and its 10 queries, cycled to ``--queries`` timed
queries (default 240; nothing on the path caches a query or a passage). Per query, the pool is
the ``--pool`` documents (default 30) nearest by MiniLM cosine, as a dense retriever returns
them: every node/document carries its MiniLM embedding, made by credrank's own ONNX embedder
(LlamaIndex: of the node's ``MetadataMode.EMBED`` content, as LlamaIndex embeds it; Haystack:
of the content), and the retriever's score (that cosine), so the same-model check of
``retrieval="auto"`` passes. Embeddings and scores are computed once, before any timing.

Rows, per framework (median milliseconds per query after ``--warmup`` untimed queries; the
configurations run interleaved query by query so the shared machine's noise hits all alike):

* the framework's own postprocessor: LlamaIndex ``SimilarityPostprocessor``, Haystack
  ``MetaFieldRanker`` (on the score copied into a meta field) — they reuse the retriever's
  scores;
* credrank, defaults (``retrieval="auto"``, priors ``current``, top_k 10, MiniLM):
  embeddings + scores with the query embedding the retriever leaves (LlamaIndex's
  ``QueryBundle.embedding``, Haystack's ``query_embedding`` input) — nothing embedded;
  embeddings + scores, query text only — the query embedded by credrank; scores only —
  credrank takes the scores; neither (cold) — credrank embeds the pool (every
  ``--cold-every``-th query only: it costs about a third of a second);
* credrank with ``retrieval="given"``, the explicit fast path, for reference.

The LangChain compressor has no framework peer without a model (its documents carry no
embedding): its scores-only and cold rows are printed without a difference. A framework that is
not installed is skipped with the reason. Target: credrank's default ≤ 2 ms over the
framework's own postprocessor when the pool carries what the retriever made.

    python bench/scripts/bench_adapters.py [--queries 240] [--warmup 20] [--pool 30]
        [--cold-every 12]

A measurement, not a test: the machine is shared (compare the rows of one run).
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.demo_corpus import demo_dir
from credrank.documents import iter_documents, read_queries
from credrank.index.embed import get_embedder
from credrank.rerank import EmbeddingFallbackWarning

TARGET_MS = 2.0


@dataclass
class Row:
    """One configuration: its label, what credrank resolved to, and the per-query times."""

    framework: str
    label: str
    run: Callable[[int], Any]
    peer: bool = False
    cold: bool = False
    times: list[float] = field(default_factory=list)
    resolved: str = ""


@dataclass
class Pools:
    """Per query: the text, its MiniLM vector, the pool's document indices and scores."""

    queries: list[str]
    query_vectors: np.ndarray
    members: list[np.ndarray]
    scores: list[np.ndarray]


def build_pools(n_pool: int) -> tuple[list[Any], Pools, Any]:
    docs = list(iter_documents(demo_dir() / "corpus.jsonl"))
    queries = [q.text for q in read_queries(demo_dir() / "queries.jsonl")]
    emb = get_embedder("minilm")
    doc_vectors = np.asarray(emb.embed([d.text for d in docs]), dtype=np.float32)
    query_vectors = np.asarray(emb.embed(queries), dtype=np.float32)
    members, scores = [], []
    for q in query_vectors:
        sims = doc_vectors @ q
        top = np.argsort(-sims, kind="stable")[:n_pool]
        members.append(top)
        scores.append(sims[top].astype(float))
    return docs, Pools(queries, query_vectors, members, scores), emb


def llamaindex_rows(docs: list[Any], pools: Pools, emb: Any) -> list[Row]:
    from llama_index.core.postprocessor import SimilarityPostprocessor
    from llama_index.core.schema import MetadataMode, NodeWithScore, QueryBundle, TextNode

    from credrank.adapters.llamaindex import CredibilityPostprocessor

    base = [TextNode(id_=d.id, text=d.text, metadata={"url": d.url or "", "title": d.title or ""})
            for d in docs]
    vectors = np.asarray(emb.embed([n.get_content(metadata_mode=MetadataMode.EMBED)
                                    for n in base]), dtype=np.float32)
    full = [n.model_copy(update={"embedding": vectors[i].tolist()}) for i, n in enumerate(base)]

    def nodes(q: int, with_vectors: bool, with_scores: bool) -> list[Any]:
        src = full if with_vectors else base
        return [NodeWithScore(node=src[i], score=float(s) if with_scores else None)
                for i, s in zip(pools.members[q], pools.scores[q], strict=True)]

    n = len(pools.queries)
    both = [nodes(q, True, True) for q in range(n)]
    scored = [nodes(q, False, True) for q in range(n)]
    bare = [nodes(q, False, False) for q in range(n)]
    with_q = [QueryBundle(pools.queries[q], embedding=pools.query_vectors[q].tolist())
              for q in range(n)]
    text_q = [QueryBundle(pools.queries[q]) for q in range(n)]
    peer = SimilarityPostprocessor(similarity_cutoff=0.0)
    auto = CredibilityPostprocessor()   # the defaults
    given = CredibilityPostprocessor(retrieval="given")
    for post in (auto, given):
        post.warm_up()

    def ours(post: Any, batch: list[list[Any]], bundles: list[Any]) -> Callable[[int], Any]:
        return lambda q: post.postprocess_nodes(batch[q % n], query_bundle=bundles[q % n])

    def cold(q: int) -> Any:
        return auto.postprocess_nodes(bare[q % n], query_bundle=text_q[q % n])

    return [
        Row("llamaindex", "SimilarityPostprocessor (framework)",
            lambda q: peer.postprocess_nodes(both[q % n], query_bundle=with_q[q % n]), peer=True),
        Row("llamaindex", "credrank default: embeddings+scores, query embedding given",
            ours(auto, both, with_q)),
        Row("llamaindex", "credrank default: embeddings+scores, query text only",
            ours(auto, both, text_q)),
        Row("llamaindex", "credrank default: scores only", ours(auto, scored, text_q)),
        Row("llamaindex", "credrank default: neither (cold, embeds the pool)", cold, cold=True),
        Row("llamaindex", "credrank retrieval='given' (reference)", ours(given, scored, text_q)),
    ]


def haystack_rows(docs: list[Any], pools: Pools, emb: Any) -> list[Row]:
    from haystack import Document
    from haystack.components.rankers import MetaFieldRanker

    from credrank.adapters.haystack import CredibilityRanker

    vectors = np.asarray(emb.embed([d.text for d in docs]), dtype=np.float32)
    n = len(pools.queries)

    def documents(q: int, with_vectors: bool, with_scores: bool) -> list[Any]:
        out = []
        for i, s in zip(pools.members[q], pools.scores[q], strict=True):
            d = docs[i]
            out.append(Document(id=d.id, content=d.text,
                                meta={"url": d.url, "title": d.title, "retriever_score": s},
                                embedding=vectors[i].tolist() if with_vectors else None,
                                score=float(s) if with_scores else None))
        return out

    both = [documents(q, True, True) for q in range(n)]
    scored = [documents(q, False, True) for q in range(n)]
    bare = [documents(q, False, False) for q in range(n)]
    qvec = [pools.query_vectors[q].tolist() for q in range(n)]
    peer = MetaFieldRanker(meta_field="retriever_score", top_k=10)
    auto = CredibilityRanker()  # the defaults
    given = CredibilityRanker(retrieval="given")
    for ranker in (peer, auto, given):
        if hasattr(ranker, "warm_up"):
            ranker.warm_up()
    text = pools.queries
    return [
        Row("haystack", "MetaFieldRanker (framework)",
            lambda q: peer.run(documents=both[q % n]), peer=True),
        Row("haystack", "credrank default: embeddings+scores, query embedding given",
            lambda q: auto.run(documents=both[q % n], query=text[q % n],
                               query_embedding=qvec[q % n])),
        Row("haystack", "credrank default: embeddings+scores, query text only",
            lambda q: auto.run(documents=both[q % n], query=text[q % n])),
        Row("haystack", "credrank default: scores only",
            lambda q: auto.run(documents=scored[q % n], query=text[q % n])),
        Row("haystack", "credrank default: neither (cold, embeds the pool)",
            lambda q: auto.run(documents=bare[q % n], query=text[q % n]), cold=True),
        Row("haystack", "credrank retrieval='given' (reference)",
            lambda q: given.run(documents=scored[q % n], query=text[q % n])),
    ]


def langchain_rows(docs: list[Any], pools: Pools, emb: Any) -> list[Row]:
    from langchain_core.documents import Document

    from credrank.adapters.langchain import CredibilityCompressor

    n = len(pools.queries)

    def documents(q: int, with_scores: bool) -> list[Any]:
        return [Document(page_content=docs[i].text,
                         metadata={"url": docs[i].url, "title": docs[i].title,
                                   **({"score": float(s)} if with_scores else {})})
                for i, s in zip(pools.members[q], pools.scores[q], strict=True)]

    scored = [documents(q, True) for q in range(n)]
    bare = [documents(q, False) for q in range(n)]
    auto = CredibilityCompressor()  # the defaults
    auto.warm_up()
    text = pools.queries
    return [
        Row("langchain", "credrank default: scores in metadata",
            lambda q: auto.compress_documents(scored[q % n], text[q % n])),
        Row("langchain", "credrank default: neither (cold, embeds the pool)",
            lambda q: auto.compress_documents(bare[q % n], text[q % n]), cold=True),
    ]


def resolved_of(out: Any) -> str:
    """What credrank's answer says it used (``retrieval`` in the breakdown)."""
    items = out.get("documents", []) if isinstance(out, dict) else out
    for item in items:
        meta = getattr(getattr(item, "node", None), "metadata", None)
        if meta is None:
            meta = getattr(item, "meta", None) or getattr(item, "metadata", None) or {}
        if "credrank" in meta:
            return str(meta["credrank"]["retrieval"])
    return ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=240, help="timed queries (>= 200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed queries first")
    parser.add_argument("--pool", type=int, default=30, help="documents per query")
    parser.add_argument("--cold-every", type=int, default=12,
                        help="time the cold row (embeds the pool) on every Nth query only")
    args = parser.parse_args(argv)

    docs, pools, emb = build_pools(args.pool)
    rows: list[Row] = []
    makers = {"llamaindex": ("llama_index", llamaindex_rows),
              "haystack": ("haystack", haystack_rows),
              "langchain": ("langchain_core", langchain_rows)}
    for name, (module, make) in makers.items():
        if importlib.util.find_spec(module) is None:
            print(f"skipped {name}: {module} is not installed "
                  f"(pip install 'credrank[{name}]')")
            continue
        rows.extend(make(docs, pools, emb))

    warned: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", EmbeddingFallbackWarning)
        for q in range(args.warmup + args.queries):
            timed = q >= args.warmup
            for row in rows:
                if row.cold and q % args.cold_every:
                    continue
                start = time.perf_counter()
                out = row.run(q)
                elapsed = (time.perf_counter() - start) * 1e3
                if timed:
                    row.times.append(elapsed)
                if not row.peer and not row.resolved:
                    row.resolved = resolved_of(out)
        warned = [str(w.message) for w in caught
                  if issubclass(w.category, EmbeddingFallbackWarning)]

    print(f"\n{len(pools.queries)} demo queries cycled to {args.queries} timed queries "
          f"(after {args.warmup} untimed), pool {args.pool} documents with MiniLM "
          f"embeddings and retriever scores; median ms per query; Δ = credrank − the "
          f"framework's own postprocessor (target ≤ {TARGET_MS:g} ms); shared machine, "
          f"{sys.platform}")
    print("| framework | configuration | retrieval used | queries | median ms | p90 ms | Δ ms |")
    print("|---|---|---|---:|---:|---:|---:|")
    for framework in dict.fromkeys(r.framework for r in rows):
        group = [r for r in rows if r.framework == framework]
        peer = next((r for r in group if r.peer), None)
        base = statistics.median(peer.times) if peer else None
        for r in group:
            med = statistics.median(r.times)
            p90 = float(np.percentile(r.times, 90))
            delta = "" if r.peer or base is None else f"{med - base:+.2f}"
            print(f"| {framework} | {r.label} | {r.resolved or '—'} | {len(r.times)} | "
                  f"{med:.3f} | {p90:.3f} | {delta} |")
    print(f"\nfallback warnings (once per adapter instance and cause): {len(warned)}")
    for message in warned:
        print(f"  {message}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
