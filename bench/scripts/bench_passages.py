"""Long texts as passages, before and after: the same corpus indexed whole (each text embedded
from its beginning, ``--chunk-tokens 0``) and split into passages (the default: the
embedder's window of 256 tokens, overlap 32), searched with the same queries, side by side.

Data (``--data``, default ``../shared/data``):

* **RealTimeQA** (4 weeks of news questions, each with its own search results as its pool;
  median article ≈ 6,000 characters): each question searches its own pool (a ``source_id``
  filter on the engine: the pool's documents are indexed with the question's id as their
  ``source_id`` — a bench convention, no stage here reads it). Measures: **top-document
  accuracy** (the first hit contains the right choice and no wrong one; a question without
  results scores 0) and **nDCG@5** over the reader's qrels (questions without a right
  document left out);
* **TREC 2019 Health Misinformation, dev** (156 whole web pages, 15 topics, one corpus):
  **nDCG@10** and **harmful@5** over NIST's labels.

Systems: ``similarity`` (the engine's dense ranking: each document at its best passage when
split) and ``prior`` (``sim × λ(source type from the URL)``, the ``current`` priors). Every
index is a real Qdrant Edge index built by ``credrank.index_documents`` with the ONNX MiniLM
embedder (the default install); searches go through the store's own search (MaxP) and the
product's stages. Indexing cost: seconds and milliseconds per document, points stored.

Intervals: 95 % percentile bootstrap over questions (10,000 resamples, seed 0) for each mean,
and paired for the difference split − whole. Prints a table, or ``--json``.

    python bench/scripts/bench_passages.py [--data ../shared/data] [--json]

A measurement on one shared machine (timings) over fixed data (the ranking measures are
deterministic up to float noise).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.core.pipeline import Pipeline
from credrank.documents import Document
from credrank.evaluate.metrics import evaluate
from credrank.evaluate.stats import bootstrap_ci, bootstrap_ci_diff
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.opener import open_store
from credrank.index.passages import Chunking, default_chunking
from credrank.provenance import SourceTyper
from credrank.select.topk import TopK
from credrank.stages.prior import SourcePrior
from credrank_bench.datasets import EvalSet, load_dataset

VARIANTS = {"whole": Chunking(0, 0), "split": default_chunking("minilm")}
SYSTEMS = ("similarity", "prior")


def rank(batch: Candidates, system: str, top_k: int) -> list[str]:
    """The ``top_k`` document ids of ``system`` on a retrieved batch."""
    if system == "similarity":
        return [str(d) for d in batch.doc_ids[:top_k]]
    out = Pipeline([SourcePrior(), Combine("multiply"), TopK(top_k)])(batch)
    return [str(d) for d in out.doc_ids]


def build(docs: Sequence[Document], path: Path, chunking: Chunking) -> dict[str, Any]:
    """Index ``docs`` into a new Qdrant Edge index at ``path``; its cost."""
    emb = get_embedder("minilm")
    store = open_store(path, "edge", embedder=emb.name, dim=emb.dim, create=True,
                       chunking=chunking)
    start = time.perf_counter()
    report = index_documents(iter(docs), store, emb, SourceTyper())
    seconds = time.perf_counter() - start
    return {"store": store, "seconds": seconds, "ms_per_doc": 1e3 * seconds / len(docs),
            "documents": report.indexed, "points": len(store),
            "truncated": len(report.truncated)}


def run_set(data: EvalSet, pooled: bool, top_k: int, fetch_k: int,
            measures: Sequence[str], work: Path) -> dict[str, Any]:
    """Both variants of one data set: per variant its cost and per system the per-query
    values of each measure (``top-doc accuracy`` where pooled)."""
    docs = data.documents
    if pooled:  # the question's id as source_id: its pool is one engine filter
        owner = {d: q for q, pool in (data.pools or {}).items() for d in pool}
        docs = [replace(d, source_id=owner[d.id]) for d in docs]
    ids = [d.id for d in docs]
    if len(set(ids)) != len(ids):
        raise SystemExit(f"{data.name}: document ids repeat; this bench needs them unique")
    emb = get_embedder("minilm")
    vectors = emb.embed([q for _, q in data.queries])
    out: dict[str, Any] = {"queries": len(data.queries), "documents": len(docs)}
    for variant, chunking in VARIANTS.items():
        built = build(docs, work / f"{data.name}-{variant}", chunking)
        store = built.pop("store")
        rankings: dict[str, dict[str, list[str]]] = {s: {} for s in SYSTEMS}
        with store:
            for (qid, text), qv in zip(data.queries, vectors, strict=True):
                if pooled and not (data.pools or {}).get(qid):
                    for s in SYSTEMS:
                        rankings[s][qid] = []
                    continue
                where = {"source_id": qid} if pooled else None
                batch = store.search_dense(text, qv, fetch_k, where=where)
                for s in SYSTEMS:
                    rankings[s][qid] = rank(batch, s, top_k)
        values: dict[str, dict[str, dict[str, float]]] = {}
        for s in SYSTEMS:
            run = {q: {d: float(top_k - i) for i, d in enumerate(r)}
                   for q, r in rankings[s].items() if r}
            per = evaluate(data.qrels, run, list(measures), bad=data.bad)
            if pooled:
                per["top-doc accuracy"] = {
                    q: float(bool(r) and data.qrels.get(q, {}).get(r[0], 0) > 0)
                    for q, r in rankings[s].items()}
            values[s] = per
        out[variant] = {"cost": built, "values": values}
    return out


def summarise(result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (system, measure): both variants' means with intervals, the paired
    difference split − whole with its interval."""
    rows = []
    for s in SYSTEMS:
        for m in result["whole"]["values"][s]:
            whole, split = result["whole"]["values"][s][m], result["split"]["values"][s][m]
            a, b = bootstrap_ci(list(whole.values())), bootstrap_ci(list(split.values()))
            d = bootstrap_ci_diff(whole, split)
            rows.append({"system": s, "measure": m, "n": a.n,
                         "whole": [a.point, a.low, a.high], "split": [b.point, b.low, b.high],
                         "difference": [d.point, d.low, d.high],
                         "helps": d.low > 0, "hurts": d.high < 0})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    sets = {"realtimeqa": (args.data / "realtimeqa", True, 5, 15, ("nDCG@5",)),
            "trec2019-hm": (args.data / "trec2019_hm" / "trec2019_hm_dev.csv", False, 10, 30,
                            ("nDCG@10", "harmful@5"))}
    report: dict[str, Any] = {"settings": {
        "embedder": "minilm (ONNX)", "engine": "edge",
        "variants": {k: {"chunk_tokens": v.tokens, "chunk_overlap": v.overlap}
                     for k, v in VARIANTS.items()},
        "intervals": "95% percentile bootstrap over questions, 10,000 resamples, seed 0"},
        "sets": {}}
    with tempfile.TemporaryDirectory(prefix="credrank-passages-") as tmp:
        for name, (path, pooled, top_k, fetch_k, measures) in sets.items():
            if not path.exists():
                report["sets"][name] = {"skipped": f"{path} not found"}
                continue
            data = load_dataset(name, path)
            result = run_set(data, pooled, top_k, fetch_k, measures, Path(tmp))
            report["sets"][name] = {
                "top_k": top_k, "fetch_k": fetch_k, "queries": result["queries"],
                "documents": result["documents"],
                "cost": {v: result[v]["cost"] for v in VARIANTS},
                "rows": summarise(result)}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print_table(report)
    return 0


def print_table(report: dict[str, Any]) -> None:
    def ci(v: list[float]) -> str:
        return f"{v[0]:.3f} [{v[1]:.3f}, {v[2]:.3f}]"

    for name, body in report["sets"].items():
        if "skipped" in body:
            print(f"{name}: skipped ({body['skipped']})\n")
            continue
        print(f"{name}: {body['queries']} queries, {body['documents']} documents, "
              f"top_k {body['top_k']}, fetch_k {body['fetch_k']}")
        print(f"  {'indexing':<12}{'points':>8}{'seconds':>10}{'ms/doc':>9}{'truncated':>11}")
        for v, c in body["cost"].items():
            print(f"  {v:<12}{c['points']:>8}{c['seconds']:>10.1f}{c['ms_per_doc']:>9.1f}"
                  f"{c['truncated']:>11}")
        print(f"  {'system':<12}{'measure':<18}{'n':>4}  {'whole':<24}{'split':<24}"
              f"{'split − whole':<26}verdict")
        for r in body["rows"]:
            verdict = "helps" if r["helps"] else "hurts" if r["hurts"] else "no clear change"
            if r["measure"].startswith("harmful"):  # lower is better
                verdict = ("helps" if r["hurts"] else "hurts" if r["helps"]
                           else "no clear change")
            print(f"  {r['system']:<12}{r['measure']:<18}{r['n']:>4}  {ci(r['whole']):<24}"
                  f"{ci(r['split']):<24}{ci(r['difference']):<26}{verdict}")
        print()


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
