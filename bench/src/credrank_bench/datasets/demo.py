"""The packaged demo set as an evaluation set. The corpus and its helpers (``demo_dir``,
``index_demo``, ``build_demo_index``, ``read_adversarial``) are the product's
(:mod:`credrank.demo_corpus`); this reader only shapes it as an :class:`EvalSet`."""

from __future__ import annotations

from pathlib import Path

from credrank.demo_corpus import demo_dir, read_adversarial
from credrank.documents import read_corpus, read_qrels, read_queries
from credrank_bench.datasets.base import EvalSet


def read_demo(path: str | Path | None = None) -> EvalSet:
    """The demo set as an :class:`EvalSet` (``path`` defaults to the packaged folder)."""
    data = Path(path) if path is not None else demo_dir()
    loaded = read_corpus(data / "corpus.jsonl")
    loaded.raise_if_rejected()
    queries = [(q.id, q.text) for q in read_queries(data / "queries.jsonl")]
    return EvalSet(name="demo", documents=loaded.documents, queries=queries,
                   qrels=read_qrels(data / "qrels.tsv"),
                   bad=read_adversarial(data / "adversarial.tsv"), pools=None, doc_labels={},
                   notes=["synthetic test material written for credrank (seed-004 style)"])
