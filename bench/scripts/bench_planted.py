"""What ``credrank search --planted`` adds per query: search alone vs search + planted.

Indexes the real passages of CrAM NQ (``--data``; Wikipedia text and GPT fakes, 5,000
passages) into a Qdrant Edge index in a temporary folder, then runs the first ``--queries``
questions through the product pipeline (:func:`credrank.pipeline.compile.compile_spec` of a
:class:`~credrank.pipeline.spec.PipelineSpec`) at each ``--fetch-k``, rows in alternating
order per round:

  * ``search``            — dense retrieval of ``fetch_k`` candidates with their vectors and
                            text (the Python path, as the stage needs), multiply, top ``--top-k``;
  * ``search + planted``  — the same with :class:`~credrank.stages.planted.PlantedEvidence`
                            in ``--mode`` (default: the combination).

It also times the stage alone on the retrieved pools (per query the fastest of ``--rounds``
runs: the least disturbed by other load), and with ``--compare`` the dense path it
had before issue 37 (:func:`credrank.defences.planted.dense_evidence`: the pool's full
cosine matrix, dense GRADA PageRank; its evidence only, without the meta columns) on the same
pools, counting the queries whose evidence differs. Goals: the stage adds ≤ 10 ms p50 at
fetch_k 30 (issue 25); at fetch_k 1,000 it costs ≤ 10× its cost at 100 (issue 37).
Per-query latencies are medians over ``--rounds`` rounds; the table shows p50 and p95 over
queries. A measurement on a shared machine, not a test.

    python bench/scripts/bench_planted.py [--data FILE] [--embedder hashing|minilm]
                                       [--queries 100] [--fetch-k 30,100,300,1000] [--top-k 10]
                                       [--mode planted] [--param KEY=VALUE ...]
                                       [--rounds 3] [--compare] [--json]

``--param`` sets another parameter of the stage (repeatable; the value read as JSON, else as
a string), e.g. ``--param linkage=complete --param cluster_cosine=0.7 --param min_cluster=4``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from credrank.cli.specs import spec_value
from credrank.defences.planted import dense_evidence
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.opener import open_store
from credrank.pipeline.compile import compile_spec
from credrank.pipeline.spec import PipelineSpec
from credrank.provenance import SourceTyper
from credrank.stages.planted import MODES, PlantedEvidence
from credrank_bench.scripting import CRAM_NQ, cram_nq_or_exit, percentile_ms


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=CRAM_NQ)
    ap.add_argument("--embedder", default="hashing")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--fetch-k", default="30,100,300,1000")
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--mode", default="planted", choices=MODES)
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="another parameter of the planted stage (repeatable)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--compare", action="store_true",
                    help="also time the dense path the stage had before issue 37 on the same "
                         "pools, and count the queries whose evidence differs")
    args = ap.parse_args()
    params: dict[str, object] = {}
    for item in args.param:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            ap.error(f"--param: expected KEY=VALUE, got {item!r}")
        params[key] = spec_value(raw)  # as -S reads a value
    try:
        PlantedEvidence(args.mode, **params)  # checked before minutes of indexing
    except (TypeError, ValueError) as exc:
        ap.error(f"--param: {exc}")
    evalset = cram_nq_or_exit(args.data)
    sizes = [int(x) for x in args.fetch_k.split(",")]
    emb = get_embedder(args.embedder)
    questions = [text for _q, text in evalset.queries[: args.queries]]
    rows = []
    mismatches: dict[int, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        with open_store(Path(tmp) / "index", "edge", embedder=emb.name, dim=emb.dim,
                        create=True) as store:
            index_documents(iter(evalset.documents), store, emb, SourceTyper([]),
                            batch_size=1000)
        index_s = time.perf_counter() - start
        with open_store(Path(tmp) / "index") as store:
            for fetch_k in sizes:
                specs = {"search": PipelineSpec.of("prior", top_k=args.top_k, fetch_k=fetch_k,
                                                   pushdown=False),
                         "search + planted": PipelineSpec.of(
                             "prior", {"stage": "planted", "mode": args.mode, **params},
                             top_k=args.top_k, fetch_k=fetch_k)}
                pipes = {name: compile_spec(spec, store, emb).pipeline
                         for name, spec in specs.items()}
                for text in questions[:5]:  # warm-up: model, engine, caches
                    for pipe in pipes.values():
                        pipe.search(text)
                times: dict[str, list[list[float]]] = {name: [] for name in pipes}
                for r in range(args.rounds):
                    order = list(pipes) if r % 2 == 0 else list(reversed(pipes))
                    for name in order:
                        row = []
                        for text in questions:
                            t0 = time.perf_counter()
                            pipes[name].search(text)
                            row.append(time.perf_counter() - t0)
                        times[name].append(row)
                per_query = {name: [statistics.median(c) for c in zip(*rs, strict=True)]
                             for name, rs in times.items()}
                added = [b - a for a, b in zip(per_query["search"],
                                               per_query["search + planted"], strict=True)]
                retriever = pipes["search + planted"].stages[0]
                stage = PlantedEvidence(args.mode, **params)
                alone, before, differ = [], [], 0
                for text in questions:
                    pool = retriever.search(text)
                    # the stage alone: the fastest of --rounds runs per query (the least
                    # disturbed by other load), alternating old and new
                    new_s, old_s = [], []
                    for _ in range(args.rounds):
                        t0 = time.perf_counter()
                        out = stage.transform(pool)
                        new_s.append(time.perf_counter() - t0)
                        if args.compare:  # the dense path this stage had before issue 37
                            t0 = time.perf_counter()
                            old = dense_evidence(stage, pool)
                            old_s.append(time.perf_counter() - t0)
                    alone.append(min(new_s))
                    if args.compare:
                        before.append(min(old_s))
                        new_p = np.array(out.column("planted_evidence"), dtype=float)
                        p_old = old["p"].copy()
                        p_old[stage.trusted_rows(pool) & (p_old > 0)] = 0.0
                        differ += int(not np.allclose(new_p, p_old, rtol=0, atol=1e-12))
                timed = [*per_query.items(), ("added by planted", added),
                         ("planted stage alone", alone)]
                if args.compare:
                    timed.append(("stage before (dense)", before))
                    mismatches[fetch_k] = differ
                for name, values in timed:
                    rows.append({"fetch_k": fetch_k, "row": name,
                                 "p50_ms": percentile_ms(values, 50),
                                 "p95_ms": percentile_ms(values, 95)})
    base = {r["row"]: r["p50_ms"] for r in rows if r["fetch_k"] == sizes[0]}
    for r in rows:
        r["x_first_fetch_k"] = r["p50_ms"] / base[r["row"]] if base.get(r["row"]) else None
    report = {
        "bench": "planted", "data": str(args.data), "embedder": emb.name, "mode": args.mode,
        "params": params,
        "documents": len(evalset.documents), "queries": len(questions),
        "fetch_k": sizes, "top_k": args.top_k, "rounds": args.rounds,
        "index_seconds": index_s, "rows": rows, "queries_whose_evidence_differs": mismatches,
        "goal": "planted adds <= 10 ms p50 at fetch_k 30; at 1,000 <= 10x its cost at 100",
        "machine": {"python": platform.python_version(), "cpus": _cpus(),
                    "platform": platform.platform(),
                    "load_average_1m": os.getloadavg()[0]},
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"CrAM NQ passages: {len(evalset.documents)} indexed ({emb.name}) in {index_s:.1f} s; "
          f"{len(questions)} queries, top_k {args.top_k}, mode {args.mode} {params or ''}, "
          "median of "
          f"{args.rounds} rounds per query; load average {os.getloadavg()[0]:.1f} on "
          f"{_cpus()} CPUs")
    print(f"{'fetch_k':>7} {'':22} {'p50 ms':>9} {'p95 ms':>9} {'× at ' + str(sizes[0]):>9}")
    for r in rows:
        ratio = "" if r["x_first_fetch_k"] is None else f"{r['x_first_fetch_k']:.2f}"
        print(f"{r['fetch_k']:>7} {r['row']:22} {r['p50_ms']:9.2f} {r['p95_ms']:9.2f} "
              f"{ratio:>9}")
    if args.compare:
        print("queries whose evidence differs from the dense path, by fetch_k: "
              + ", ".join(f"{k}: {v}" for k, v in mismatches.items()))


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


if __name__ == "__main__":
    main()
