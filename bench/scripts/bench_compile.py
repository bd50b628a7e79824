"""Compile once, run one loop (issue 35, item 4): what a spec costs per query at each front door.

Since issue 35 a :class:`~credrank.searcher.Searcher` compiles each spec once (memoised per
spec and index state) and reads the settings document once per compiled pipeline; before, the
library rebuilt the pipeline on every call (a spec: compiled per call — the model file read, the
index's credibility count made) and the CLI and the library could take different paths. This
bench measures, side by side in one run, on CrAM NQ passages (``--questions`` questions × 5
passages, MiniLM, Qdrant Edge; the index, a credibility model fitted on its labels and the
index scored with it at index time are built once under ``--work`` by
``bench_credibility_search.py``'s functions):

**Library** (one process; each query's vector computed beforehand and served by the embedder,
so every row times the ranking, not MiniLM): median ms per query over ``--queries`` distinct
queries × ``--passes``, rows interleaved per pass:

* ``prebuilt pipeline`` — the compiled default pipeline run directly (the floor);
* ``Searcher.search(q)`` — the default spec (``None``), as a user calls it;
* ``Searcher.search(q, spec)`` — the same spec object;
* ``Searcher.search(q, dict)`` — the spec as plain data (validated per call, compiled once);
* ``compile per call`` — ``compile_spec`` + run on every call: what passing a spec cost before;
* ``credibility (stored), fetch_k F`` and ``default, fetch_k F`` for F = 30 and 1,000 — the
  stored credibility factor pushed down vs the default at the same pool.

**CLI** (``credrank search --json``, a process per query, ``--cli-runs`` each): default vs
``--credibility-model`` at fetch_k 30 and 1,000 (process start and model load included).

**HTTP** (a real ``credrank serve`` on loopback, one keep-alive connection): ``POST /search``
default vs the credibility pipeline (the model registered with ``--model``) at fetch_k 30 and
1,000, p50.

Targets: default ``Searcher.search`` ≤ 1.1× the prebuilt pipeline; credibility ≤ 1.2× the
default at both pools, at every door; ``pushdown`` true for every credibility row.

    python bench/scripts/bench_compile.py [--cram FILE] [--work DIR] [--questions 300]
                                          [--queries 30] [--passes 5] [--cli-runs 5]
                                          [--requests 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np


class Precomputed:
    """An embedder that answers the vectors of known texts (computed beforehand by the real
    one) and defers the rest to it: the timings are the pipeline's, not the model's."""

    def __init__(self, inner: Any, texts: list[str]) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.known = dict(zip(texts, inner.embed(texts), strict=True))

    def embed(self, texts: list[str]) -> np.ndarray:
        if all(t in self.known for t in texts):
            return np.stack([self.known[t] for t in texts])
        return self.inner.embed(texts)


def library(work: Path, model: Path, texts: list[str], passes: int) -> list[dict[str, Any]]:
    from credrank.core.candidates import Candidates
    from credrank.index.embed import get_embedder
    from credrank.index.opener import open_store
    from credrank.pipeline.compile import compile_spec
    from credrank.pipeline.spec import PipelineSpec
    from credrank.searcher import Searcher

    emb = Precomputed(get_embedder("minilm"), texts)
    default = PipelineSpec.of("prior")

    def cred(fetch_k: int) -> PipelineSpec:
        return PipelineSpec.of("prior", {"stage": "credibility", "model": str(model)},
                               fetch_k=fetch_k)

    with open_store(work / "idx-scored") as store:
        searcher = Searcher(store, emb)  # type: ignore[arg-type]
        prebuilt = searcher.pipeline(default, "none")

        def run_prebuilt(q: str) -> Any:
            return prebuilt(replace(Candidates.empty(q), query_vector=emb.known[q]))

        def compile_each(q: str) -> Any:
            compiled = compile_spec(cred(30), store, emb)  # type: ignore[arg-type]
            return searcher.run(compiled.pipeline.stages, q)

        systems: dict[str, Any] = {
            "prebuilt pipeline (default spec)": run_prebuilt,
            "Searcher.search(q) (default)": lambda q: searcher.search(q, text="none"),
            "Searcher.search(q, spec)": lambda q: searcher.search(q, default, text="none"),
            "Searcher.search(q, dict)": lambda q: searcher.search(
                q, {"stages": ["prior"]}, text="none"),
        }
        for k in (30, 1000):
            spec_k, cred_k = PipelineSpec.of("prior", fetch_k=k), cred(k)
            systems[f"default, fetch_k {k}"] = (
                lambda q, s=spec_k: searcher.search(q, s, text="none"))
            systems[f"credibility (stored), fetch_k {k}"] = (
                lambda q, s=cred_k: searcher.search(q, s, text="none"))
        systems["credibility, compile per call (before), fetch_k 30"] = compile_each
        times: dict[str, list[float]] = {name: [] for name in systems}
        for run in systems.values():  # warm: compile, caches
            for q in texts[:3]:
                run(q)
        for _ in range(passes):
            for name, run in systems.items():
                for q in texts:
                    t0 = time.perf_counter()
                    run(q)
                    times[name].append((time.perf_counter() - t0) * 1e3)
        pushdown = {k: searcher.compile(cred(k)).pushdown.fused for k in (30, 1000)}
    rows = [{"door": "library", "system": name, "p50_ms": round(statistics.median(v), 3),
             "n": len(v)} for name, v in times.items()]
    base = {r["system"]: r["p50_ms"] for r in rows}
    for r in rows:
        if r["system"].startswith("Searcher.search"):
            r["ratio"] = round(r["p50_ms"] / base["prebuilt pipeline (default spec)"], 3)
            r["vs"] = "prebuilt pipeline"
        for k in (30, 1000):
            if r["system"] == f"credibility (stored), fetch_k {k}":
                r["ratio"] = round(r["p50_ms"] / base[f"default, fetch_k {k}"], 3)
                r["vs"] = f"default, fetch_k {k}"
                r["pushdown"] = pushdown[k]
    return rows


def cli(work: Path, model: Path, texts: list[str], runs: int) -> list[dict[str, Any]]:
    times: dict[str, list[float]] = {}
    exe = str(Path(sys.executable).with_name("credrank"))
    for i in range(runs):
        for k in (30, 1000):
            for name, extra in (("default", []),
                                ("credibility (stored)", ["--credibility-model", str(model)])):
                cmd = [exe, "search", texts[i % len(texts)], "--index", str(work / "idx-scored"),
                       "--fetch-k", str(k), "--json", "--text", "none", *extra]
                t0 = time.perf_counter()
                out = subprocess.run(cmd, capture_output=True, text=True, check=True)
                times.setdefault(f"{name}, fetch_k {k}", []).append(
                    (time.perf_counter() - t0) * 1e3)
                doc = json.loads(out.stdout)
                times.setdefault(f"pushdown {name} {k}", []).append(
                    float(doc["settings"]["pushdown"]))
    rows = []
    for k in (30, 1000):
        d = statistics.median(times[f"default, fetch_k {k}"])
        c = statistics.median(times[f"credibility (stored), fetch_k {k}"])
        rows.append({"door": "CLI", "system": f"default, fetch_k {k}", "p50_ms": round(d, 1),
                     "n": runs})
        rows.append({"door": "CLI", "system": f"credibility (stored), fetch_k {k}",
                     "p50_ms": round(c, 1), "n": runs, "ratio": round(c / d, 3),
                     "vs": f"default, fetch_k {k}",
                     "pushdown": all(times[f"pushdown credibility (stored) {k}"])})
    return rows


def http(work: Path, model: Path, texts: list[str], requests: int) -> list[dict[str, Any]]:
    from bench_serve import HttpCall, Server

    server = Server(work / "idx-scored", extra=["--model", f"cred={model}"])
    rows = []
    try:
        for k in (30, 1000):
            bodies = {
                "default": {"pipeline": {"fetch_k": k, "stages": ["prior"]}, "text": "none"},
                "credibility (stored)": {"pipeline": {"fetch_k": k, "stages": [
                    "prior", {"stage": "credibility", "model": "cred"}]}, "text": "none"}}
            times: dict[str, list[float]] = {n: [] for n in bodies}
            pushdown = {}
            posts = {n: [HttpCall(server.url, "/search", json.dumps(
                {"query": q, **b}).encode()) for q in texts] for n, b in bodies.items()}
            for n, clients in posts.items():
                clients[0]()
                if clients[0].status != 200:
                    raise SystemExit(f"POST /search {n}: {clients[0].status} "
                                     f"{clients[0].answer[:300]!r}")
                pushdown[n] = json.loads(clients[0].answer)["settings"]["pushdown"]
            for i in range(requests):
                for n, clients in posts.items():
                    c = clients[i % len(clients)]
                    t0 = time.perf_counter()
                    c()
                    times[n].append((time.perf_counter() - t0) * 1e3)
            for clients in posts.values():
                for c in clients:
                    c.close()
            d, c = statistics.median(times["default"]), statistics.median(
                times["credibility (stored)"])
            rows.append({"door": "HTTP", "system": f"default, fetch_k {k}",
                         "p50_ms": round(d, 3), "n": requests})
            rows.append({"door": "HTTP", "system": f"credibility (stored), fetch_k {k}",
                         "p50_ms": round(c, 3), "n": requests, "ratio": round(c / d, 3),
                         "vs": f"default, fetch_k {k}",
                         "pushdown": pushdown["credibility (stored)"]})
    finally:
        server.stop()
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| door | system | p50 ms | n | ratio | vs | pushdown |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['door']} | {r['system']} | {r['p50_ms']} | {r['n']} | "
                   f"{r.get('ratio', '')} | {r.get('vs', '')} | {r.get('pushdown', '')} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cram", type=Path,
                    default=Path("../shared/data/cram/cram_nq_1000_reconstructed.jsonl"))
    ap.add_argument("--work", type=Path, default=Path("/tmp/credrank-compile"))
    ap.add_argument("--questions", type=int, default=300)
    ap.add_argument("--queries", type=int, default=30)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--cli-runs", type=int, default=5)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if not args.cram.is_file():
        sys.exit(f"--cram {args.cram}: not found (the CrAM NQ file of ../shared/data/cram)")
    from bench_credibility_search import build, prepare

    load0 = os.getloadavg()
    corpus, labels, texts = prepare(args.cram, args.work, args.questions)
    built = build(args.work, corpus, labels)
    texts = texts[:args.queries]
    model = args.work / "model.json"
    rows = library(args.work, model, texts, args.passes)
    rows += cli(args.work, model, texts, args.cli_runs)
    rows += http(args.work, model, texts, args.requests)
    from credrank.index.opener import open_store

    with open_store(args.work / "idx-scored") as store:  # what was indexed (built once)
        documents = len(store)
    result = {"data": str(args.cram), "documents": documents, "queries": len(texts),
              "build": built, "rows": rows,
              "load_average": {"before": [round(x, 2) for x in load0],
                               "after": [round(x, 2) for x in os.getloadavg()]}}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(rows))
        print(f"{result['documents']} CrAM NQ passages, {len(texts)} distinct queries; load "
              f"average before {result['load_average']['before']}, after "
              f"{result['load_average']['after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
