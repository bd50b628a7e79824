"""Selection and consensus at scale: what each costs as ``fetch_k`` grows (issue 26, item 4).

Indexes the real passages of CrAM NQ (``--data``; Wikipedia text and GPT fakes, 5,000
passages) into a Qdrant Edge index in a temporary folder, then runs the first ``--queries``
questions through the product pipeline (:func:`credrank.pipeline.compile.compile_spec`) at every
``--fetch-k`` (default 30, 100, 300, 1000), ``top_k`` 10, with these systems side by side in
one run (interleaved: per round, per query, the systems in a shuffled order):

  * ``search alone``   — what ``credrank search`` runs: the engine's formula over the fetch_k
                         prefetch (pushdown), top_k out;
  * ``python path``    — the same with ``--no-pushdown``: fetch_k candidates (their payload
                         converted) → priors → multiply → top_k in Python;
  * ``+ mmr``          — ``--select mmr -P diversity=0.3`` (vectors retrieved);
  * ``+ coverage``     — ``--select coverage -P lambda_ilad=0.3 -P lambda_coverage=0.5`` (the
                         default ``time_limit`` 10 s, ``exact_pool`` 50);
  * ``+ consensus``    — ``--consensus`` (the offline extractive reader on every candidate, the
                         3-gram Jaccard copy test, the weighted vote; text retrieved).

The table gives each system's p50 over queries (each query: the median of ``--rounds``
rounds) in wall time and in CPU time (the process's, engine threads included: on a shared,
loaded machine CPU time is the steadier of the two), the CPU ratio to the same system at the
first fetch_k (goal ≤ 5× at 1,000 for mmr, consensus and the Python path) and to ``search
alone`` at the same fetch_k, and the CPU time split into the retrieval stage (engine query,
payload conversion) and the stages after it. For coverage it also gives the slowest query
against the time limit and how often the result was proven optimal. Then the stages alone
on the retrieved pools, before and after this change, with a check that both give the same
result: the copy test all-pairs (the previous code: string shingles, the dense ``n × n``
Jaccard matrix) against prefix filtering, the reader called once per passage against the
batched reader, MMR with the ``N × N`` cosine matrix against its ``K`` rows; and, at fetch_k 100,
the anytime coverage set against the exact MILP over the whole pool. A measurement on a
shared machine, not a test.

    python bench/scripts/bench_select_scale.py [--data FILE] [--embedder hashing|minilm]
        [--queries 20] [--fetch-k 30,100,300,1000] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from credrank.consensus.duplicates import duplicate_groups, shingles
from credrank.consensus.readers import extractive_answers
from credrank.core.candidates import Candidates
from credrank.core.pipeline import Pipeline
from credrank.generate.llm import ExtractiveReader
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.opener import open_store
from credrank.pipeline.compile import compile_spec
from credrank.pipeline.shortcuts import spec_from_options
from credrank.provenance import SourceTyper
from credrank.select.diversity import cosine_similarity, mmr
from credrank.select.stages import CoverageSelect
from credrank_bench.scripting import CRAM_NQ, cram_nq_or_exit, ms

SYSTEMS: dict[str, dict[str, Any]] = {
    "search alone": {},
    "python path": {"pushdown": False},
    "+ mmr": {"select": "mmr", "select_params": {"diversity": 0.3}},
    "+ coverage": {"select": "coverage",
                   "select_params": {"lambda_ilad": 0.3, "lambda_coverage": 0.5}},
    "+ consensus": {"consensus": True},
}


def _sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=CRAM_NQ)
    ap.add_argument("--embedder", default="hashing")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--fetch-k", type=_sizes, default=[30, 100, 300, 1000])
    ap.add_argument("--top-k", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--columns", choices=("kept", "engine"), default="kept",
                    help="kept: the store keeps the ranking payload columnar, as `credrank "
                         "serve` does; engine: every search reads it from the engine")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    evalset = cram_nq_or_exit(args.data)
    emb = get_embedder(args.embedder)
    questions = [text for _qid, text in evalset.queries[: args.queries]]
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        with open_store(Path(tmp) / "index", "edge", embedder=emb.name, dim=emb.dim,
                        create=True) as store:
            index_documents(iter(evalset.documents), store, emb, SourceTyper([]),
                            batch_size=1000)
        with open_store(Path(tmp) / "index") as store:
            # as `credrank serve` keeps it (credrank.index.columns); --columns engine: not
            store.keep_columns(args.columns == "kept")
            pipes = {(name, k): compile_spec(spec_from_options(
                top_k=args.top_k, fetch_k=k, **opts), store, emb).pipeline
                for k in args.fetch_k for name, opts in SYSTEMS.items()}
            for pipe in pipes.values():  # warm-up: engine, caches, lazy imports
                pipe.search(questions[0])
            # per system: per query, per round, (wall, cpu, retrieval cpu) seconds
            times: dict[tuple[str, int], list[list[tuple[float, float, float]]]] = {
                key: [[] for _ in questions] for key in pipes}
            infos: dict[tuple[str, int], list[dict[str, Any]]] = {key: [] for key in pipes}
            for r in range(args.rounds):
                for k in args.fetch_k:
                    for qi, text in enumerate(questions):
                        order = list(SYSTEMS)
                        rng.shuffle(order)
                        for name in order:
                            out, sample = timed_search(pipes[(name, k)], text)
                            times[(name, k)][qi].append(sample)
                            if r == 0 and name == "+ coverage":
                                infos[(name, k)].append(out.info["select"])
            pools = {k: [pipes[("+ mmr", k)].stages[0].search(q) for q in questions]
                     for k in args.fetch_k}
            texts = {k: [[str(t) for t in pipes[("+ consensus", k)].stages[0].search(q)
                          .column("text")] for q in questions] for k in args.fetch_k}

    def p50(key: tuple[str, int], part: int) -> float:
        """p50 over queries of each query's median over rounds (0 wall, 1 cpu, 2 retrieval
        cpu, 3 stages cpu)."""
        per_query = [statistics.median(sample[part] if part < 3 else sample[1] - sample[2]
                                       for sample in rounds) for rounds in times[key]]
        return float(np.percentile(per_query, 50))

    first = args.fetch_k[0]
    rows = []
    for name in SYSTEMS:
        for k in args.fetch_k:
            key, base = (name, k), (name, first)
            row = {"system": name, "fetch_k": k,
                   "wall_ms": ms(p50(key, 0)), "cpu_ms": ms(p50(key, 1)),
                   "retrieval_cpu_ms": ms(p50(key, 2)), "stages_cpu_ms": ms(p50(key, 3)),
                   "x_first_cpu": p50(key, 1) / p50(base, 1),
                   "x_first_wall": p50(key, 0) / p50(base, 0),
                   "x_first_stages_cpu": p50(key, 3) / p50(base, 3),
                   "x_search_alone_cpu": p50(key, 1) / p50(("search alone", k), 1)}
            if name == "+ coverage":
                sel = infos[key]
                row.update({"max_wall_ms": ms(max(s[0] for q in times[key] for s in q)),
                            "time_limit_s": sel[0]["time_limit"],
                            "optimal": sum(bool(s["optimal"]) for s in sel),
                            "time_limit_hit": sum(bool(s["time_limit_hit"]) for s in sel),
                            "of": len(sel)})
            rows.append(row)
    stages = stage_rows(args.fetch_k, pools, texts, questions, args.top_k)
    quality = coverage_quality(pools.get(100, []), args.top_k)
    report = {"bench": "select_scale", "when": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
              "data": str(args.data), "embedder": emb.name,
              "documents": len(evalset.documents), "queries": len(questions),
              "rounds": args.rounds, "top_k": args.top_k, "fetch_k": args.fetch_k,
              "columns": args.columns, "systems": rows, "stages": stages,
              "coverage_quality": quality,
              "machine": {"python": platform.python_version(), "cpus": _cpus(),
                          "load_1min": os.getloadavg()[0], "platform": platform.platform()}}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print_report(report, first)


def timed_search(pipe: Pipeline, text: str) -> tuple[Candidates, tuple[float, float, float]]:
    """``pipe.search(text)`` stage by stage: the result and (wall, cpu, retrieval cpu)
    seconds, the first stage being the retrieval (the engine and the payload conversion).
    CPU time is the process's (engine threads included): less sensitive than wall time to
    other work on a shared machine."""
    batch = Candidates.empty(text)
    w0, c0 = time.perf_counter(), time.process_time()
    retrieval = 0.0
    for i, stage in enumerate(pipe.stages):
        batch = stage(batch)
        if i == 0:
            retrieval = time.process_time() - c0
    return batch, (time.perf_counter() - w0, time.process_time() - c0, retrieval)


def stage_rows(fetch_ks: list[int], pools: dict[int, list[Candidates]],
               texts: dict[int, list[list[str]]], questions: list[str],
               top_k: int) -> list[dict[str, Any]]:
    """The copy test, the reader and MMR alone on the retrieved pools: before (all pairs,
    one reader call per passage, the N × N matrix) and now, CPU medians over the queries,
    with a check that both give the same result."""
    reader = ExtractiveReader()

    def timed(fn: Any) -> tuple[Any, float]:
        t0 = time.process_time()
        result = fn()
        return result, time.process_time() - t0

    out = []
    for k in fetch_ks:
        t: dict[str, list[float]] = {name: [] for name in
                                     ("copy_before", "copy_now", "read_before", "read_now",
                                      "mmr_before", "mmr_now")}
        same = {"groups": True, "answers": True, "picks": True}
        for pool, tx, q in zip(pools[k], texts[k], questions, strict=True):
            before, t_before = timed(lambda tx=tx: dense_groups(tx))
            now, t_now = timed(lambda tx=tx: duplicate_groups(tx))
            same["groups"] &= before.tolist() == now.tolist()
            t["copy_before"].append(t_before)
            t["copy_now"].append(t_now)
            before, t_before = timed(lambda tx=tx, q=q: [reader.answer(q, [p]) for p in tx])
            now, t_now = timed(lambda tx=tx, q=q: extractive_answers(q, tx))
            same["answers"] &= before == now
            t["read_before"].append(t_before)
            t["read_now"].append(t_now)
            u = np.maximum(np.asarray(pool.score, dtype=np.float64), 0.0)
            x = np.asarray(pool.vectors, dtype=np.float64)
            before, t_before = timed(lambda u=u, x=x: mmr(u, top_k, 0.3,
                                                          similarity=cosine_similarity(x)))
            now, t_now = timed(lambda u=u, x=x: mmr(u, top_k, 0.3, vectors=x))
            same["picks"] &= before.tolist() == now.tolist()
            t["mmr_before"].append(t_before)
            t["mmr_now"].append(t_now)
        out.append({"fetch_k": k, **{f"{name}_ms": ms(statistics.median(v))
                                     for name, v in t.items()},
                    **{f"same_{name}": flag for name, flag in same.items()}})
    return out


def coverage_quality(pools: list[Candidates], top_k: int) -> dict[str, Any]:
    """At fetch_k 100 (above ``exact_pool``): the anytime set's objective against the exact
    MILP over the whole pool (``exact_pool=100``), on the retrieved pools."""
    if not pools:
        return {}
    params = SYSTEMS["+ coverage"]["select_params"]
    gaps, exact_s, anytime_s, proven = [], [], [], 0
    for pool in pools:
        t0 = time.perf_counter()
        exact = CoverageSelect(top_k, **params, exact_pool=len(pool), time_limit=60.0)(pool)
        t1 = time.perf_counter()
        anytime = CoverageSelect(top_k, **params)(pool)
        t2 = time.perf_counter()
        e, a = exact.info["select"], anytime.info["select"]
        proven += bool(e["optimal"])
        gaps.append((e["objective"] - a["objective"]) / e["objective"])
        exact_s.append(t1 - t0)
        anytime_s.append(t2 - t1)
    return {"fetch_k": 100, "queries": len(pools), "exact_proven": proven,
            "equal_objective": sum(g <= 1e-9 for g in gaps), "max_gap": max(gaps),
            "exact_p50_ms": ms(statistics.median(exact_s)),
            "anytime_p50_ms": ms(statistics.median(anytime_s))}


def dense_groups(texts: list[str], t: float = 0.5) -> np.ndarray:
    """The copy test before this change (its code, kept here to time it): string shingle
    sets, the dense ``n × n`` Jaccard matrix ``X Xᵀ``, thresholded, components."""
    from scipy import sparse
    from scipy.sparse import csgraph
    sets = [shingles(x) for x in texts]
    n = len(sets)
    vocab: dict[str, int] = {}
    cols = [vocab.setdefault(g, len(vocab)) for s in sets for g in s]
    rows = np.repeat(np.arange(n), [len(s) for s in sets])
    x = sparse.csr_matrix((np.ones(len(cols)), (rows, cols)), shape=(n, max(len(vocab), 1)))
    inter = (x @ x.T).toarray()
    sizes = np.array([len(s) for s in sets], dtype=np.float64)
    union = sizes[:, None] + sizes[None, :] - inter
    jac = np.divide(inter, union, out=np.zeros((n, n)), where=union > 0)
    np.fill_diagonal(jac, 1.0)
    _, labels = csgraph.connected_components(sparse.csr_matrix(np.triu(jac >= t, 1)),
                                             directed=False)
    return np.asarray(labels, dtype=np.int64)


def print_report(report: dict[str, Any], first: int) -> None:
    m = report["machine"]
    print(f"selection and consensus at scale — {report['when']}; CrAM NQ, "
          f"{report['documents']:,} passages ({report['embedder']}), {report['queries']} "
          f"queries × {report['rounds']} rounds (per-query median, p50 over queries), "
          f"top_k {report['top_k']}, ranking payload {report['columns']} (kept: columnar "
          f"in the store, as `credrank serve`); {m['cpus']} CPUs, load {m['load_1min']:.1f}")
    print(f"\n| system | fetch_k | wall p50 ms | CPU p50 ms | CPU × fetch_k {first} | wall × "
          f"fetch_k {first} | CPU × search alone | retrieval CPU ms | stages CPU ms | stages "
          f"× fetch_k {first} | notes |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for row in report["systems"]:
        note = ""
        if "max_wall_ms" in row:
            note = (f"slowest {row['max_wall_ms'] / 1000:.2f} s (limit "
                    f"{row['time_limit_s']:g} s); proven optimal {row['optimal']}/{row['of']}, "
                    f"limit hit {row['time_limit_hit']}/{row['of']}")
        print(f"| {row['system']} | {row['fetch_k']:,} | {row['wall_ms']:.1f} | "
              f"{row['cpu_ms']:.1f} | {row['x_first_cpu']:.2f} | {row['x_first_wall']:.2f} | "
              f"{row['x_search_alone_cpu']:.2f} | {row['retrieval_cpu_ms']:.1f} | "
              f"{row['stages_cpu_ms']:.1f} | {row['x_first_stages_cpu']:.2f} | {note} |")
    print("\nstages alone on the retrieved pools (median CPU ms per query; before → now, "
          "and whether both give the same result):\n")
    print("| fetch_k | copy test: all pairs → prefix filter | same groups | reader: per "
          "passage → batched | same answers | MMR: N×N matrix → K rows | same picks |")
    print("|---|---|---|---|---|---|---|")
    yes = {True: "yes", False: "NO"}
    for row in report["stages"]:
        print(f"| {row['fetch_k']:,} | {row['copy_before_ms']:.1f} → {row['copy_now_ms']:.1f} "
              f"| {yes[row['same_groups']]} | {row['read_before_ms']:.1f} → "
              f"{row['read_now_ms']:.1f} | {yes[row['same_answers']]} | "
              f"{row['mmr_before_ms']:.2f} → {row['mmr_now_ms']:.2f} | "
              f"{yes[row['same_picks']]} |")
    q = report["coverage_quality"]
    if q:
        print(f"\ncoverage at fetch_k 100, anytime (exact_pool 50) vs the exact MILP over all "
              f"100 (proven optimal on {q['exact_proven']}/{q['queries']}): same objective on "
              f"{q['equal_objective']}/{q['queries']}, largest relative gap {q['max_gap']:.2%}; "
              f"p50 {q['anytime_p50_ms']:.0f} ms vs {q['exact_p50_ms']:.0f} ms")


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()


if __name__ == "__main__":
    main()
