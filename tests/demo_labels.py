"""Credibility labels of the demo corpus for the learned-credibility tests: a judged page is
credible iff its URL's TLD is one of :data:`CREDIBLE_TLDS` (synthetic, learnable from the
URL), one group per query; and a labels CSV writer."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from credrank.demo_corpus import demo_dir

CREDIBLE_TLDS = ("gov", "org", "int", "uk")


def demo_docs() -> dict[str, dict[str, Any]]:
    """The demo corpus's records by id."""
    lines = (demo_dir() / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    return {d["id"]: d for d in map(json.loads, lines)}


def labels_rows() -> list[tuple[str, int, str]]:
    """``(doc_id, credible, topic)`` for every judged page of the demo (its qrels)."""
    docs = demo_docs()
    out = []
    for line in (demo_dir() / "qrels.tsv").read_text(encoding="utf-8").splitlines():
        qid, _, doc, _ = line.split()
        tld = docs[doc]["url"].split("/")[2].rsplit(".", 1)[-1]
        out.append((doc, int(tld in CREDIBLE_TLDS), qid))
    return out


def write_labels(path: Path, rows: Iterable[Sequence[Any]],
                 header: Sequence[str] = ("doc_id", "credible", "topic")) -> Path:
    """``rows`` under ``header`` as a CSV file at ``path``."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path
