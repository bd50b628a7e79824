"""BEIR-style folders: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from credrank.documents.judgements import Query, qrels_file, read_qrels, read_queries
from credrank.documents.readers import CorpusError, LoadResult, read_corpus


@dataclass
class BeirDataset:
    """A BEIR-style folder: corpus, queries and the qrels of one split."""

    corpus: LoadResult
    queries: list[Query]
    qrels: dict[str, dict[str, int]]
    split: str


def load_beir(folder: str | Path, split: str | None = None, *,
              fields: Mapping[str, str] | None = None) -> BeirDataset:
    """Load a BEIR-style folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``."""
    p = Path(folder)
    if not p.is_dir():
        raise CorpusError(f"{p}: expected a BEIR folder (a directory), got "
                          f"{'a file' if p.exists() else 'nothing'}")
    qfile = qrels_file(p, split)
    return BeirDataset(corpus=read_corpus(p, format="beir", fields=fields),
                       queries=read_queries(p / "queries.jsonl"),
                       qrels=read_qrels(qfile), split=qfile.stem)
