"""``credrank index``: validated documents → provenance → embeddings → engine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from credrank.cli.common import console, err, fail, progress
from credrank.documents import iter_documents, write_rejects
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.qdrant_edge import EdgeIndex, IndexError_
from credrank.provenance import SourceTyper


def index(
    corpus: Annotated[Path, typer.Argument(help="JSONL, CSV, Parquet file or BEIR folder")],
    index_dir: Annotated[Path, typer.Option("--index", help="index directory")],
    table: Annotated[list[Path] | None, typer.Option(
        "--table",
        help="domain table CSV (domain,source_type or domain,score); repeatable")] = None,
    trust_declared: Annotated[bool, typer.Option(
        help="use a record's declared source_type instead of its URL")] = False,
    embedder: Annotated[str, typer.Option(help="minilm (default) or hashing (tests)")] = "minilm",
    rejects: Annotated[Path | None, typer.Option(help="rejects file (JSONL)")] = None,
    strict: Annotated[bool, typer.Option(help="exit non-zero when any record is rejected")] = False,
    batch_size: Annotated[int, typer.Option(min=1)] = 64,
    field: Annotated[list[str] | None, typer.Option(
        "--field", help="rename a column: FILE_NAME=SCHEMA_NAME, e.g. body=text; repeatable")
    ] = None,
) -> None:
    """Index CORPUS into DIR (incremental; an interrupted run is completed by re-running)."""

    if not corpus.exists():
        fail(f"{corpus}: no such file or folder")
    fields = {}
    for item in field or []:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            fail(f"--field: expected FILE_NAME=SCHEMA_NAME, got {item!r}")
        fields[old] = new
    try:
        typer_ = SourceTyper(table or [], trust_declared=trust_declared)
        emb = get_embedder(embedder)
        idx = EdgeIndex.open(index_dir, embedder=emb.name, dim=emb.dim, create=True)
    except (ValueError, IndexError_, RuntimeError) as exc:
        fail(str(exc))
    total = _count_lines(corpus)
    with idx, progress() as bar:
        task = bar.add_task(f"indexing {corpus.name}", total=total)
        try:
            report = index_documents(iter_documents(corpus, fields=fields or None), idx, emb,
                                     typer_,
                                     batch_size=batch_size,
                                     on_batch=lambda n: bar.advance(task, n))
        except ValueError as exc:  # a file-level problem (header, format): nothing to index
            fail(str(exc))
        idx.optimize()  # merge segments, build the HNSW graph where the corpus is large
        size = len(idx)
    rejects_path = rejects or index_dir / "rejects.jsonl"
    write_rejects(report.rejects, rejects_path)
    for r in report.rejects[:10]:
        err.print(f"[yellow]rejected[/yellow] {r.message}")
    if report.rejected > 10:
        err.print(f"… {report.rejected - 10} more in {rejects_path}")
    if report.conflicts:
        used = "declared type used (--trust-declared)" if trust_declared else "URL used"
        err.print(f"{len(report.conflicts)} declared source types conflict with the URL "
                  f"({used}), e.g. {report.conflicts[0][0]}: {report.conflicts[0][1]}")
    console.print(f"{report.summary()}; index holds {size} documents; rejects in {rejects_path}")
    if strict and report.rejected:
        raise typer.Exit(1)


def _count_lines(path: Path) -> int | None:
    """Records in a JSONL file (its non-blank lines), for the progress bar; else unknown."""
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return None
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip())
