"""What ``credrank search --consensus`` adds per query: search alone vs search + consensus.

Indexes the real passages of CrAM NQ (``--data``; Wikipedia text and GPT fakes, 5,000
passages) into a Qdrant Edge index in a temporary folder, then runs the first ``--queries``
questions through the product pipeline (:func:`credrank.pipeline.compile.compile_spec`) twice per
round, in alternating order:

  * ``search``            — dense retrieval of ``--fetch-k`` candidates *with their text*,
                            current priors, multiply, top ``--top-k`` (the Python path, as
                            consensus needs; the text payload is in both rows);
  * ``search + consensus`` — the same with :class:`~credrank.stages.consensus.AnswerConsensus`
                            (the offline extractive reader on every candidate, 3-gram Jaccard
                            copy detection, the weighted vote).

It also times the consensus stage alone on the retrieved pools, split into its parts (reader,
near-duplicate test, the rest). Goal (issue 11): consensus over 30 candidates adds < 50 ms per
query. Per-query latencies are medians over ``--rounds`` rounds; the table shows p50 and p95
over queries. A measurement on a shared machine, not a test.

    python bench/scripts/bench_consensus.py [--data FILE] [--embedder hashing|minilm]
                                         [--queries 200] [--fetch-k 30] [--top-k 10]
                                         [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

from credrank.consensus.duplicates import duplicate_groups
from credrank.consensus.readers import extractive_answers
from credrank.core.candidates import Candidates
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.opener import open_store
from credrank.pipeline.compile import compile_spec
from credrank.pipeline.shortcuts import spec_from_options
from credrank.provenance import SourceTyper
from credrank.stages.consensus import AnswerConsensus
from credrank_bench.scripting import CRAM_NQ, cram_nq_or_exit, percentile_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=CRAM_NQ)
    ap.add_argument("--embedder", default="hashing")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--fetch-k", type=int, default=30)
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    evalset = cram_nq_or_exit(args.data)
    emb = get_embedder(args.embedder)
    questions = evalset.queries[: args.queries]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with open_store(Path(tmp) / "index", "edge", embedder=emb.name, dim=emb.dim,
                        create=True) as store:
            index_documents(iter(evalset.documents), store, emb, SourceTyper([]),
                            batch_size=1000)
        index_s = time.perf_counter() - start
        with open_store(Path(tmp) / "index") as store:
            common = {"top_k": args.top_k, "fetch_k": args.fetch_k}
            plain = spec_from_options(**common, pushdown=False)
            voted = spec_from_options(**common, consensus=True)
            # the plain search retrieves the pool's text too, as the consensus does
            pipes = {"search": compile_spec(plain, store, emb, with_text=True).pipeline,
                     "search + consensus": compile_spec(voted, store, emb).pipeline}
            for _qid, text in questions[:5]:  # warm-up: model, engine, caches
                for pipe in pipes.values():
                    pipe.search(text)
            times: dict[str, list[list[float]]] = {name: [] for name in pipes}
            statuses: dict[str, int] = {}
            for r in range(args.rounds):
                order = list(pipes) if r % 2 == 0 else list(reversed(pipes))
                for name in order:
                    row = []
                    for _qid, text in questions:
                        t0 = time.perf_counter()
                        out = pipes[name].search(text)
                        row.append(time.perf_counter() - t0)
                        if r == 0 and "consensus" in out.info:
                            s = out.info["consensus"]["status"]
                            statuses[s] = statuses.get(s, 0) + 1
                    times[name].append(row)
            retriever = pipes["search"].stages[0]
            pools: list[Candidates] = [retriever.search(text) for _q, text in questions]
    per_query = {name: [statistics.median(col) for col in zip(*rows, strict=True)]
                 for name, rows in times.items()}
    added = [b - a for a, b in zip(per_query["search"], per_query["search + consensus"],
                                   strict=True)]
    stage = AnswerConsensus()
    parts: dict[str, list[float]] = {"consensus stage": [], "reader": [],
                                     "near-duplicate test": []}
    for pool in pools:
        texts = [str(t) for t in pool.column("text")]
        t0 = time.perf_counter()
        stage.transform(pool)
        t1 = time.perf_counter()
        extractive_answers(pool.query, texts)
        t2 = time.perf_counter()
        duplicate_groups(texts)
        t3 = time.perf_counter()
        parts["consensus stage"].append(t1 - t0)
        parts["reader"].append(t2 - t1)
        parts["near-duplicate test"].append(t3 - t2)
    rows = [{"row": name, "p50_ms": percentile_ms(v, 50), "p95_ms": percentile_ms(v, 95)}
            for name, v in [*per_query.items(), ("added by consensus", added),
                            *parts.items()]]
    report = {
        "bench": "consensus", "data": str(args.data), "embedder": emb.name,
        "documents": len(evalset.documents), "queries": len(questions),
        "fetch_k": args.fetch_k, "top_k": args.top_k, "rounds": args.rounds,
        "index_seconds": index_s, "statuses": statuses, "rows": rows,
        "goal": "consensus over 30 candidates adds < 50 ms per query (p50)",
        "goal_met": percentile_ms(added, 50) < 50.0,
        "machine": {"python": platform.python_version(), "cpus": _cpus(),
                    "platform": platform.platform()},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"CrAM NQ passages: {len(evalset.documents)} indexed ({emb.name}) in {index_s:.1f} s; "
          f"{len(questions)} queries, fetch_k {args.fetch_k}, top_k {args.top_k}, "
          f"median of {args.rounds} rounds per query")
    print(f"{'':24} {'p50 ms':>9} {'p95 ms':>9}")
    for row in rows:
        print(f"{row['row']:24} {row['p50_ms']:9.2f} {row['p95_ms']:9.2f}")
    print(f"statuses (first round): {statuses}; goal < 50 ms added: "
          f"{'met' if report['goal_met'] else 'NOT met'}")


def _cpus() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


if __name__ == "__main__":
    main()
