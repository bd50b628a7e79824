"""What the global pool costs (issue 38, item 3): the Qdrant server backend's formula search
in one request vs two, in ``qdrant-client``'s local mode.

On a server, :meth:`credrank.index.qdrant_server.QdrantServerIndex.search_formula` asks first
the ids of the collection's ``fetch_k`` nearest, then the formula over a ``has_id`` prefetch of
exactly those ids, so that a collection of several shards ranks the pool the Python path ranks;
local mode (one shard) asks one request. This bench times both forms on the same local-mode
collection (in memory, no BM25 vectors, hashing embedder of 64 dimensions: the engine's cost,
not a model's): CrAM NQ's 5,000 passages, each given a URL of a source type by a hash of its
id (as ``tests/test_pushdown_shards.py`` does), ``--queries`` questions × ``--passes``, the two
forms interleaved in a shuffled order per pass; median and p90 ms per search at each
``fetch_k``. On a server the second request adds one round trip plus a filtered exact search
over at most ``fetch_k`` points; local mode has no network, so this measures the engine's side.

    python bench/scripts/bench_global_pool.py [--cram FILE] [--queries 50] [--passes 5]
                                              [--fetch-k 30,150] [--top-k 10] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from credrank.index.embed import HashingEmbedder
from credrank.index.ingest import index_documents
from credrank.index.qdrant_server import QdrantServerIndex
from credrank.provenance import SourceTyper
from credrank.signals.prior import load_priors
from credrank_bench.datasets.cram_nq import read_cram_nq

HOSTS = ("https://www.nejm.org/doi/", "https://www.cdc.gov/", "https://www.reuters.com/",
         "https://x.blogspot.com/", "https://www.reddit.com/r/", "https://foo.example/")
DEFAULT_CRAM = (Path(__file__).resolve().parents[3] / "shared" / "data" / "cram"
                / "cram_nq_1000_reconstructed.jsonl")


def url(doc_id: str) -> str:
    h = hashlib.blake2b(doc_id.encode(), digest_size=4).digest()
    return HOSTS[h[0] % len(HOSTS)] + doc_id


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cram", type=Path, default=DEFAULT_CRAM)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--fetch-k", default="30,150")
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    data = read_cram_nq(args.cram)
    docs = [replace(d, url=url(d.id)) for d in data.documents]
    emb = HashingEmbedder(64)
    priors = load_priors("current").values
    questions = [text for _, text in data.queries[:args.queries]]
    vectors = emb.embed(questions)
    rows: list[dict[str, Any]] = []
    with QdrantServerIndex.in_memory(emb.name, emb.dim, bm25=False) as store:
        index_documents(docs, store, emb, SourceTyper())
        rng = random.Random(0)
        for fetch_k in (int(x) for x in args.fetch_k.split(",")):
            times: dict[bool, list[float]] = {False: [], True: []}
            same = 0
            for _ in range(args.passes):
                order = [(i, g) for i in range(len(questions)) for g in (False, True)]
                rng.shuffle(order)
                got: dict[tuple[int, bool], list[str]] = {}
                for i, global_pool in order:
                    store.global_pool = global_pool
                    start = time.perf_counter()
                    out = store.search_formula(questions[i], vectors[i], fetch_k, args.top_k,
                                               priors)
                    times[global_pool].append((time.perf_counter() - start) * 1000)
                    got[(i, global_pool)] = [str(d) for d in out.doc_ids]
                same = sum(got[(i, False)] == got[(i, True)] for i in range(len(questions)))
            store.global_pool = False
            for global_pool in (False, True):
                t = sorted(times[global_pool])
                rows.append({"fetch_k": fetch_k, "top_k": args.top_k,
                             "form": "two requests" if global_pool else "one request",
                             "median_ms": round(statistics.median(t), 3),
                             "p90_ms": round(t[int(0.9 * (len(t) - 1))], 3),
                             "searches": len(t), "identical_top_k": same,
                             "queries": len(questions)})
    if args.json:
        print(json.dumps({"documents": len(docs), "rows": rows}, indent=2))
        return
    print(f"CrAM NQ, {len(docs)} passages, qdrant-client local mode (in memory), hashing-64")
    print("| fetch_k | form | median ms | p90 ms | identical top-k |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['fetch_k']} | {r['form']} | {r['median_ms']:.2f} | {r['p90_ms']:.2f} | "
              f"{r['identical_top_k']}/{r['queries']} |")
    for one, two in zip(rows[::2], rows[1::2], strict=True):
        print(f"fetch_k {one['fetch_k']}: two requests = "
              f"{two['median_ms'] / one['median_ms']:.2f}× one request (median), "
              f"+{two['median_ms'] - one['median_ms']:.2f} ms")


if __name__ == "__main__":
    main()
