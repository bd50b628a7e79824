"""``credrank demo``: the main job on the embedded default, on the packaged synthetic corpus.

Builds a Qdrant Edge index of the demo health corpus (``credrank/data/demo``, synthetic test
material in the style of seed 004: ~120 documents of six source types, 10 adversarial), runs its
10 queries with the similarity-only baseline and with source priors over the same expanded pool
(``fetch_k = 3 × top_k``), and reports P@5, nDCG@5, MRR and the adversarial hit rate@5.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from credrank.core.embedder import Embedder
from credrank.demo_corpus import demo_dir, index_demo, read_adversarial
from credrank.documents import read_corpus, read_qrels, read_queries
from credrank.evaluate.metrics import evaluate, mean, run_from_batches
from credrank.index.embed import get_embedder
from credrank.index.ingest import IndexReport
from credrank.index.opener import open_store
from credrank.pipeline.shortcuts import spec_from_options
from credrank.pipeline.spec import PipelineSpec
from credrank.searcher import Searcher

MEASURES = ("P@5", "nDCG@5", "RR", "harmful@5")
#: the systems compared, in table order: name → priors (None = similarity only)
SYSTEMS: dict[str, str | None] = {
    "similarity only": None,
    "compressed priors": "compressed",
    "current priors": "current",
    "aggressive priors": "aggressive",
}


@dataclass
class DemoResult:
    report: IndexReport
    settings: dict[str, Any]
    means: dict[str, dict[str, float]]  # system -> measure -> mean
    per_query: dict[str, dict[str, dict[str, float]]]  # system -> measure -> qid -> value
    example: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        """Stable JSON (documented in docs/json.md)."""
        return {
            "credrank_demo": 1,
            "data": "credrank/data/demo (synthetic test material)",
            "index": {"indexed": self.report.indexed, "rejected": self.report.rejected,
                      "unchanged": self.report.unchanged},
            "settings": self.settings,
            "metrics": self.means,
            "per_query": self.per_query,
            "example": self.example,
        }


def _only_the_demos(index: Any, path: Path) -> None:
    """Refuse (``ValueError`` naming the folder) an index that holds documents other than the
    demo corpus's: the demo writes its corpus there and measures the whole index, so a user's
    index given as ``--index`` got the demo's 120 documents added and its metrics mixed."""
    count = getattr(index, "documents", None)
    held = count() if callable(count) else len(index)
    if held == 0:
        return
    ids = [d.id for d in read_corpus(demo_dir() / "corpus.jsonl").documents]
    present = len(index.existing_hashes(ids))
    if held > present:
        raise ValueError(f"{path}: holds an index of which {held - present:,} of {held:,} "
                         "documents are not the demo corpus's; the demo writes its corpus "
                         "into this folder and measures the whole index: give an empty or new "
                         "folder, or the demo's own index")


def run_demo(index_dir: Path | None = None, *, embedder: Embedder | None = None,
             top_k: int = 5, on_progress: Callable[[int], None] | None = None) -> DemoResult:
    """Index the demo corpus (into ``index_dir`` or a temporary folder) and evaluate."""
    data = demo_dir()
    embedder = embedder or get_embedder("minilm")
    queries = read_queries(data / "queries.jsonl")
    qrels = read_qrels(data / "qrels.tsv")
    bad = read_adversarial(data / "adversarial.tsv")

    with tempfile.TemporaryDirectory(prefix="credrank-demo-") as tmp:
        path = Path(index_dir) if index_dir else Path(tmp) / "index"
        with open_store(path, "edge", embedder=embedder.name, dim=embedder.dim,
                        create=True) as index:
            _only_the_demos(index, path)
            report = index_demo(index, embedder, on_batch=on_progress)
            searcher = Searcher(index, embedder)  # closed with the index
            means: dict[str, dict[str, float]] = {}
            per_query: dict[str, dict[str, dict[str, float]]] = {}
            for system, priors in SYSTEMS.items():
                spec = system_spec(priors, top_k)
                run = run_from_batches(dict(searcher.search_many(
                    ((q.id, q.text) for q in queries), spec, text="none")))
                values = evaluate(qrels, run, list(MEASURES), bad=bad)
                per_query[system] = values
                means[system] = {m: mean(values[m]) for m in MEASURES}
            example = _example(searcher, queries, bad, top_k)
    return DemoResult(report=report,
                      settings={"top_k": top_k, "fetch_k": 3 * top_k, "mode": "multiply",
                                "embedder": embedder.name, "systems": SYSTEMS},
                      means=means, per_query=per_query, example=example)


def system_spec(priors: str | None, top_k: int) -> PipelineSpec:
    """The pipeline of one demo system: ``priors`` (``None``: similarity only) over a pool of
    ``3 × top_k``, ``multiply``, top-k."""
    return spec_from_options(top_k=top_k, priors=priors or "none")


def _example(searcher: Searcher, queries: list[Any], bad: dict[str, set[str]],
             top_k: int) -> dict[str, Any]:
    """The first query whose baseline top-k holds an adversarial document, both rankings."""
    base_spec, cred_spec = system_spec(None, top_k), system_spec("current", top_k)
    chosen = queries[0]
    for q in queries:
        if set(searcher.search(q.text, base_spec, text="none").doc_ids) & bad.get(q.id, set()):
            chosen = q
            break
    adversarial = bad.get(chosen.id, set())

    def rows(batch: Any) -> list[dict[str, Any]]:
        out = []
        for hit in batch.hits():
            hit = {k: hit[k] for k in ("rank", "doc_id", "source_type", "host", "score",
                                       "score_breakdown")}
            hit["adversarial"] = hit["doc_id"] in adversarial
            out.append(hit)
        return out

    return {"query_id": chosen.id, "query": chosen.text,
            "similarity_only": rows(searcher.search(chosen.text, base_spec, text="none")),
            "current_priors": rows(searcher.search(chosen.text, cred_spec, text="none"))}
