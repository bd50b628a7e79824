"""The packaged demo corpus (``credrank/data/demo``): synthetic health documents of six source
types written for credrank in the style of seed 004, with queries, qrels and the list of
adversarial documents. It shows the mechanism, not a result.

``credrank demo``, the audit (``demo:`` paths, harm labels) and the tests use it; the bench
distribution reads it as an evaluation set (``credrank_bench.datasets.demo.read_demo``)."""

from __future__ import annotations

from collections.abc import Callable
from importlib import resources
from pathlib import Path

from credrank.core.embedder import Embedder
from credrank.documents import iter_documents
from credrank.index.embed import get_embedder
from credrank.index.ingest import IndexReport, index_documents
from credrank.index.opener import open_store
from credrank.index.store import VectorStore
from credrank.provenance import SourceTyper


def demo_dir() -> Path:
    """The folder of the packaged demo set."""
    return Path(str(resources.files("credrank") / "data" / "demo"))


def index_demo(store: VectorStore, embedder: Embedder,
               on_batch: Callable[[int], None] | None = None) -> IndexReport:
    """Index the demo corpus into ``store``, its domain table (``domains.csv``) typing the
    hosts, as ``credrank demo`` does."""
    data = demo_dir()
    return index_documents(iter_documents(data / "corpus.jsonl"), store, embedder,
                           SourceTyper([data / "domains.csv"]), on_batch=on_batch)


def build_demo_index(path: str | Path, embedder: str = "minilm") -> Path:
    """A Qdrant Edge index of the demo corpus in ``path`` (created), closed; returns
    ``path``. For tests, benchmarks and trying ``credrank serve``."""
    emb = get_embedder(embedder)
    with open_store(path, "edge", embedder=emb.name, dim=emb.dim, create=True) as store:
        index_demo(store, emb)
    return Path(path)


#: the header of a harm-labels file, in either column order
_HARM_COLUMNS = ("doc_id", "query_id")


def read_adversarial(path: Path) -> dict[str, set[str]]:
    """``query_id -> {doc_id}`` of the adversarial documents: a TSV whose header names its two
    columns, ``doc_id<TAB>query_id`` or ``query_id<TAB>doc_id`` (the header is read, not
    assumed: a file with the columns swapped was read as query ids of documents, and one
    without a header lost its first label). Errors name ``path`` and the line."""
    bad: dict[str, set[str]] = {}
    for _, query_id, doc_id in harm_label_rows(path):
        bad.setdefault(query_id, set()).add(doc_id)
    return bad


def harm_label_rows(path: Path) -> list[tuple[int, str, str]]:
    """The labels of :func:`read_adversarial`'s file as ``(line, query_id, doc_id)``, in file
    order, read and checked as it reads them: where a report names each label by its line
    (the audit's label check)."""
    from credrank.core.structured import read_text

    # UTF-8 (a byte-order mark dropped), each problem naming the file and where
    lines = read_text(path, what="harm-labels file").splitlines()
    header = [c.strip().lower() for c in lines[0].split("\t")] if lines else []
    if sorted(header) != sorted(_HARM_COLUMNS):
        got = repr(lines[0][:80]) if lines else "an empty file"
        raise ValueError(f"{path}:1: expected the header 'doc_id<TAB>query_id' (or "
                         f"'query_id<TAB>doc_id'), got {got}")
    doc_col = header.index("doc_id")
    rows: list[tuple[int, str, str]] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise ValueError(f"{path}:{number}: expected '{lines[0].strip()}' (two non-empty "
                             f"columns), got {line!r}")
        rows.append((number, parts[1 - doc_col].strip(), parts[doc_col].strip()))
    return rows


__all__ = ["build_demo_index", "demo_dir", "harm_label_rows", "index_demo", "read_adversarial"]
