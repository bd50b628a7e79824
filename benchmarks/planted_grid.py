"""The grid the default ``planted`` setting was chosen from, rerun in one place.

The default mode of the planted-evidence stage (:mod:`credrank.defences.planted`) flags
paraphrase groups: connected components of ≥ ``min_cluster`` passages with pairwise cosine ≥
``cluster_cosine`` (word copies excluded) whose median query-similarity z-score is ≥
``cluster_z``. This script measures every setting of a small grid on the attacked sets and the
clean ones, side by side with similarity alone, so the choice is visible:

* attacks: PoisonedRAG NQ (100 targets, CrAM NQ's real passages as the clean corpus; 5 and 1
  adversarial texts, prefix none and question): attack-success@1 and poisons@5;
* clean: CrAM NQ with every fake removed (nDCG@5), TREC 2019 HM dev (nDCG@10, source types
  from URLs), RealTimeQA (top-document accuracy, source types from URLs).

Every row reads no label; labels only score the rows. The choice looks at the same sets it is
reported on (no held-out poisoning set exists here): docs/results.md says so.

    python benchmarks/planted_grid.py --data ../shared/data --cache DIR [--json out.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def _pools(args: argparse.Namespace) -> dict[str, Any]:
    """``set name -> (pools, scorer(run) -> {measure: mean}, top_k)``."""
    from credrank.datasets import load_dataset, poisoned_corpus, read_cram_nq, read_poisonedrag
    from credrank.evaluate.metrics import harmful_at_k, mean, ranked_docs
    from credrank.experiments.bench import Prepared, pools_for, prepare
    from credrank.experiments.poisoning import _subset
    from credrank.experiments.realtimeqa import question_pools
    from credrank.index.embed import CachedEmbedder, get_embedder
    from credrank.index.memory import InMemoryIndex
    from credrank.provenance import SourceTyper

    emb = CachedEmbedder(get_embedder("minilm"), args.cache)
    data = args.data
    out: dict[str, Any] = {}
    cram = read_cram_nq(data / "cram" / "cram_nq_1000_reconstructed.jsonl")
    targets = read_poisonedrag(data / "poisonedrag" / "nq.json")
    for prefix in ("none", "question"):
        ev = poisoned_corpus(targets, cram, 5, prefix=prefix)
        prep = prepare(ev, emb)
        for n in (5, 1):
            pools = pools_for(_subset(prep, n) if n < 5 else prep, 15)

            def attack(run: Mapping[str, Mapping[str, float]], ev: Any = ev) -> dict[str, float]:
                # attack-success@1 = harmful@1; poisons@5 = 5 · harmful@5 (the bench's kernel)
                return {"attack@1": mean(harmful_at_k(run, ev.bad, 1)),
                        "poisons@5": 5 * mean(harmful_at_k(run, ev.bad, 5))}
            out[f"poisonedrag {n} text(s), prefix {prefix}"] = (pools, attack, 5)
    bad = set().union(*cram.bad.values())
    prep = prepare(cram, emb)
    keep = np.array([str(d) not in bad for d in prep.index.doc_ids])
    clean = InMemoryIndex(list(prep.index.doc_ids[keep]), prep.index.vectors[keep],
                          {k: list(np.asarray(v, dtype=object)[keep])
                           for k, v in prep.index.meta.items()})
    out["cram-nq clean pools"] = (pools_for(Prepared(cram, clean, prep.query_vectors), 15),
                                  _ndcg(cram.qrels, 5), 5)
    trec = load_dataset("trec2019-hm", data / "trec2019_hm" / "trec2019_hm_dev.csv")
    tprep = prepare(trec, emb, typer=SourceTyper())
    out["trec2019-hm dev"] = (pools_for(tprep, 30), _ndcg(trec.qrels, 10), 10)
    rt = load_dataset("realtimeqa", data / "realtimeqa")
    rprep = prepare(rt, emb, typer=SourceTyper())

    def top_doc(run: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        acc = []
        for qid, _ in rt.queries:
            top = ranked_docs(run.get(qid, {}))[:1]
            acc.append(float(bool(top) and rt.doc_labels[top[0]]["verdict"] == "right"))
        return {"top-doc accuracy": float(np.mean(acc))}
    out["realtimeqa"] = ({q: b for q, b in question_pools(rt, rprep, 10).items() if len(b)},
                         top_doc, 5)
    return out


def _ndcg(qrels: Mapping[str, Mapping[str, int]], k: int) -> Any:
    """nDCG@k as the benches compute it (:func:`credrank.evaluate.metrics.evaluate`)."""
    from credrank.evaluate.metrics import evaluate, mean

    def measure(run: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        name = f"nDCG@{k}"
        return {name: mean(evaluate(qrels, run, [name])[name])}
    return measure


def main(argv: list[str] | None = None) -> None:
    from credrank.combine import Combine
    from credrank.core.pipeline import Pipeline
    from credrank.defences.planted import PlantedEvidence
    from credrank.evaluate.metrics import run_from_batches
    from credrank.select.topk import TopK

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=None, help="embedding cache folder")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    sets = _pools(args)
    print(f"pools ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    grid: list[tuple[str, dict[str, Any] | None]] = [("similarity only", None)]
    for cos, size, z in itertools.product((0.7, 0.75, 0.8, 0.85), (2, 3), (0.5, 1.0)):
        grid.append((f"planted cos≥{cos} size≥{size} z≥{z}",
                     {"cluster_cosine": cos, "min_cluster": size, "cluster_z": z}))
    rows = []
    for name, params in grid:
        row: dict[str, Any] = {"system": name}
        for set_name, (pools, measure, top_k) in sets.items():
            stages = [] if params is None else [PlantedEvidence(**params)]
            pipe = Pipeline([*stages, Combine("multiply"), TopK(top_k)])
            run = run_from_batches({q: pipe(b) for q, b in pools.items()})
            row.update({f"{set_name}: {k}": round(v, 3) for k, v in measure(run).items()})
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows}, indent=1, ensure_ascii=False),
                             encoding="utf-8")
    heads = list(rows[0])
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for row in rows:
        print("| " + " | ".join(str(row[h]) for h in heads) + " |")


if __name__ == "__main__":
    main()
