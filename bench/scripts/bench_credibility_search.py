"""`credrank search --credibility-model`: index-time credibility vs the query-time path (issue 26).

Built once under ``--work`` (kept between runs): a JSONL corpus of the first ``--questions``
CrAM NQ questions' passages (5 per question, ``id`` = ``<qid>/d<i>``, no URL, no title), its
labels (``credible`` = not ``is_misinformation``, ``topic`` = the question), the corpus indexed
with MiniLM (Qdrant Edge), and a credibility model fitted on it with ``credrank credibility
fit``'s library call (stored-vector embedding: ``embedding_source = document``). The same model
with ``embedding_source`` removed is an old-style model file (``head``: the embedding of each
page's first 200 words, computed at query time — for CrAM NQ passages, at most 149 words and no
title, the same string). A copy of the index is scored with the model
(:func:`credrank.credibility.indexed.score_index`: the documents/s it prints).

Then, in one process and one run, ``--queries`` CrAM NQ questions through each system (compiled
once, as a long-lived :class:`~credrank.searcher.Searcher` or a batch does): **first** — each
query once, its candidates never seen by the pipeline (the first query over new candidates); then
**warm** — the same queries ``--warm-passes`` times again (the featuriser's in-process cache
full). Each query is embedded once beforehand (its median printed apart): the table times the
ranking — retrieval, the factors, the cut — not MiniLM's query encoding, which every system pays
alike. Median wall and CPU (this process) milliseconds per query, and first / warm (the machine
is shared: the CPU time is the steadier of the two):

* ``plain`` — the type prior only (pushed down);
* ``query-time, head (old)`` — the old model on the unscored index: each candidate's head
  embedded with MiniLM at query time;
* ``query-time, stored vectors`` — the new model on the unscored index: features at query
  time, the embedding read from the retrieved vectors (no embedder call);
* ``index-time, Python path`` — the new model on the scored index, ``pushdown = false``;
* ``index-time, pushed down`` — the new model on the scored index: the engine's formula.

``--auc`` also fits the model both ways (``document`` and ``head``) with the embedding
configurations and prints both grouped-CV AUCs (the AUC consequence of the stored vector).

    python bench/scripts/bench_credibility_search.py \\
        --cram ../shared/data/cram/cram_nq_1000_reconstructed.jsonl --work /tmp/credsearch \\
        [--questions 200] [--queries 30] [--auc] [--out result.json]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any


def prepare(cram: Path, work: Path, questions: int) -> tuple[Path, Path, list[str]]:
    """``corpus.jsonl``, ``labels.csv`` (once) and the questions' texts."""
    from credrank_bench.datasets import read_cram_nq

    ev = read_cram_nq(cram)
    qids = list(ev.pools or {})[:questions]
    texts = dict(ev.queries)
    corpus, labels = work / "corpus.jsonl", work / "labels.csv"
    if not (corpus.is_file() and labels.is_file()):
        work.mkdir(parents=True, exist_ok=True)
        docs = {d.id: d for d in ev.documents}
        with open(corpus, "w", encoding="utf-8") as f, \
                open(labels, "w", encoding="utf-8", newline="") as g:
            w = csv.writer(g)
            w.writerow(["doc_id", "credible", "topic"])
            for qid in qids:
                for d in (ev.pools or {})[qid]:
                    f.write(json.dumps({"id": d, "text": docs[d].text}) + "\n")
                    w.writerow([d, int(d not in ev.bad.get(qid, set())), qid])
    return corpus, labels, [texts[q] for q in qids]


def build(work: Path, corpus: Path, labels: Path) -> dict[str, Any]:
    """The index, the two model files and the scored copy (each once); their timings."""
    from credrank.credibility import Config, fit_from_labels, load_model, save_model
    from credrank.credibility.indexed import score_index
    from credrank.documents import iter_documents
    from credrank.index.embed import get_embedder
    from credrank.index.ingest import index_documents
    from credrank.index.opener import open_store
    from credrank.provenance import SourceTyper

    out: dict[str, Any] = {}
    index, scored = work / "idx", work / "idx-scored"
    emb = get_embedder("minilm")
    if not index.is_dir():
        t0 = time.perf_counter()
        with open_store(index, "edge", embedder=emb.name, dim=emb.dim, create=True) as store:
            report = index_documents(iter_documents(corpus), store, emb, SourceTyper())
        out["index_s"] = round(time.perf_counter() - t0, 1)
        out["indexed"] = report.indexed
    model, old = work / "model.json", work / "model-head.json"
    if not model.is_file():
        t0 = time.perf_counter()
        with open_store(index) as store:
            fit = fit_from_labels(labels, store, emb, n_boot=200, configs=(
                Config(("cues", "url", "embedding"), 100.0), Config(("embedding",), 100.0)))
        save_model(model, fit.document)
        out["fit_s"] = round(time.perf_counter() - t0, 1)
        out["fit_cv_auc"] = fit.report["cv_auc"]
        doc = json.loads(model.read_text(encoding="utf-8"))
        doc["features"].pop("embedding_source", None)  # a model file of before the source
        old.write_text(json.dumps(doc), encoding="utf-8")
    if not scored.is_dir():
        shutil.copytree(index, scored)
        (scored / ".credrank.lock").unlink(missing_ok=True)
        with open_store(scored, create=True) as store:
            report = score_index(store, load_model(model))
        out["score_documents"] = report.scored
        out["score_s"] = round(report.seconds, 2)
        out["score_documents_per_s"] = round(report.rate, 1)
    return out


def spec(model: Path | None, *, pushdown: bool | None = None) -> Any:
    from credrank.pipeline.spec import PipelineSpec

    stages: list[Any] = ["prior"]
    if model is not None:
        stages.append({"stage": "credibility", "model": str(model)})
    return PipelineSpec.from_dict({"top_k": 10, "fetch_k": 30, "pushdown": pushdown,
                                   "stages": stages})


def timed_passes(searcher: Any, pipeline_spec: Any, queries: list[tuple[str, Any]],
                 warm_passes: int) -> dict[str, Any]:
    """Compile once; run every query (the first pass: unseen candidates), then
    ``warm_passes`` times again (warm). Wall and CPU (this process) milliseconds per query,
    medians over the queries (warm: over every warm run); each query comes with its vector
    (embedded beforehand: the timings are the ranking's, not MiniLM's)."""
    from dataclasses import replace

    from credrank.core.candidates import Candidates

    compiled = searcher.compile(pipeline_spec)
    pipeline = compiled.pipeline
    passes: list[tuple[list[float], list[float]]] = []
    for _ in range(1 + warm_passes):
        wall, cpu = [], []
        for q, qv in queries:
            t0, c0 = time.perf_counter(), time.process_time()
            out = pipeline(replace(Candidates.empty(q), query_vector=qv))
            wall.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.process_time() - c0) * 1000)
            assert len(out) == 10
        passes.append((wall, cpu))
    first_wall, first_cpu = (statistics.median(x) for x in passes[0])
    warm_wall = statistics.median([x for w, _ in passes[1:] for x in w])
    warm_cpu = statistics.median([x for _, c in passes[1:] for x in c])
    return {"pushdown": compiled.pushdown.fused, "first_ms": round(first_wall, 2),
            "warm_ms": round(warm_wall, 2), "first_over_warm": round(first_wall / warm_wall, 2),
            "first_cpu_ms": round(first_cpu, 2), "warm_cpu_ms": round(warm_cpu, 2),
            "first_over_warm_cpu": round(first_cpu / warm_cpu, 2) if warm_cpu > 0 else None,
            "first_total_s": round(sum(passes[0][0]) / 1000, 2)}


def searches(work: Path, texts: list[str], warm_passes: int
             ) -> tuple[list[dict[str, Any]], float]:
    """Every system's timings, and the median milliseconds of embedding one query."""
    import warnings

    from credrank.index.embed import get_embedder
    from credrank.index.opener import open_store
    from credrank.searcher import Searcher
    from credrank.stages.credibility import UnscoredCredibilityWarning

    warnings.simplefilter("ignore", UnscoredCredibilityWarning)
    emb = get_embedder("minilm")
    emb.embed(["warm the query embedder up"])
    queries, embed_ms = [], []
    for q in texts:
        t0 = time.perf_counter()
        queries.append((q, emb.embed([q])[0]))
        embed_ms.append((time.perf_counter() - t0) * 1000)
    model, old = work / "model.json", work / "model-head.json"
    rows = []
    with open_store(work / "idx") as plain_idx, open_store(work / "idx-scored") as scored_idx:
        unscored, scored = Searcher(plain_idx, emb), Searcher(scored_idx, emb)
        systems = [("plain (type prior only)", scored, spec(None)),
                   ("query-time, head embedding (old)", unscored, spec(old)),
                   ("query-time, stored vectors", unscored, spec(model)),
                   ("index-time, Python path", scored, spec(model, pushdown=False)),
                   ("index-time, pushed down", scored, spec(model))]
        for name, searcher, pipeline_spec in systems:
            row = {"system": name, **timed_passes(searcher, pipeline_spec, queries,
                                                  warm_passes)}
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows, statistics.median(embed_ms)


def auc(work: Path, labels: Path) -> dict[str, Any]:
    """Grouped-CV AUC of the embedding configurations, embedding from the stored vector
    (``document``) and from each page's head (``head``; embeds every page)."""
    from credrank.credibility import Config, fit_from_labels
    from credrank.index.embed import get_embedder
    from credrank.index.opener import open_store

    configs = (Config(("embedding",), 10.0), Config(("embedding",), 100.0),
               Config(("cues", "url", "embedding"), 100.0))
    out = {}
    emb = get_embedder("minilm")
    with open_store(work / "idx") as store:
        for source in ("document", "head"):
            t0 = time.perf_counter()
            fit = fit_from_labels(labels, store, emb, configs=configs, n_boot=500,
                                  embedding_source=source)
            out[source] = {"cv_auc": round(fit.report["cv_auc"], 4),
                           "cv_auc_interval": [round(x, 4) for x in
                                               fit.report["cv_auc_interval"]],
                           "chosen": fit.report["chosen_config"],
                           "seconds": round(time.perf_counter() - t0, 1)}
            print(json.dumps({source: out[source]}), flush=True)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| system | pushdown | first query, ms | warm, ms | first / warm | first, CPU ms | "
             "warm, CPU ms | first / warm (CPU) |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['system']} | {'yes' if r['pushdown'] else 'no'} | "
                     f"{r['first_ms']:.1f} | {r['warm_ms']:.1f} | {r['first_over_warm']:.2f} | "
                     f"{r['first_cpu_ms']:.1f} | {r['warm_cpu_ms']:.1f} | "
                     f"{r['first_over_warm_cpu']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cram", type=Path,
                    default=Path("../shared/data/cram/cram_nq_1000_reconstructed.jsonl"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/credrank-credsearch"))
    ap.add_argument("--questions", type=int, default=200,
                    help="CrAM NQ questions whose passages are indexed (5 each)")
    ap.add_argument("--queries", type=int, default=30, help="questions searched per pass")
    ap.add_argument("--warm-passes", type=int, default=3, help="warm passes after the first")
    ap.add_argument("--auc", action="store_true", help="also the AUC of document vs head")
    ap.add_argument("--out", type=Path, default=None, help="write the result (JSON)")
    args = ap.parse_args(argv)
    if not args.cram.is_file():
        sys.exit(f"--cram {args.cram}: not found (the CrAM NQ file of ../shared/data/cram)")
    load0 = os.getloadavg()
    corpus, labels, texts = prepare(args.cram, args.work, args.questions)
    result: dict[str, Any] = {"questions": args.questions, "queries": args.queries,
                              "build": build(args.work, corpus, labels)}
    print(json.dumps({"build": result["build"]}), flush=True)
    result["search"], result["query_embedding_ms"] = searches(
        args.work, texts[:args.queries], args.warm_passes)
    if args.auc:
        result["auc"] = auc(args.work, labels)
    result["load_average"] = {"before": [round(x, 2) for x in load0],
                              "after": [round(x, 2) for x in os.getloadavg()]}
    print(table(result["search"]))
    print(f"embedding a query (MiniLM, not in the table): {result['query_embedding_ms']:.1f} ms "
          "median")
    print(f"load average before {result['load_average']['before']}, after "
          f"{result['load_average']['after']}")
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
