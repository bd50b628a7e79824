"""Indexing: validated documents → provenance → embeddings → store, in resumable batches."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from credrank.core.embedder import Embedder
from credrank.documents import Reject
from credrank.documents.schema import Document
from credrank.index.store import VectorStore, content_hash
from credrank.provenance import Provenance, SourceTyper


def provenance_payload(prov: Provenance) -> dict[str, Any]:
    """The provenance fields stored with each point (and returned as meta columns)."""
    return {
        "host": prov.host,
        "registered_domain": prov.registered_domain,
        "source_type": prov.source_type,
        "url_source_type": prov.url_source_type,
        "declared_source_type": prov.declared_source_type,
        "provenance_rule": prov.rule,
        "provenance_conflict": prov.conflict,
        "domain_score": prov.domain_score,
    }


def embedding_text(title: str | None, text: str) -> str:
    """What is embedded for a document: ``title\ntext``, or the text alone without a title.
    Indexing and reranking (:mod:`credrank.rerank`) embed the same string."""
    return f"{title}\n{text}" if title else text


@dataclass
class IndexReport:
    """What an indexing run did; ``indexed + unchanged + rejected`` = records read."""

    indexed: int = 0
    unchanged: int = 0
    rejects: list[Reject] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)

    @property
    def rejected(self) -> int:
        return len(self.rejects)

    def summary(self) -> str:
        extra = f" ({self.unchanged} already indexed, unchanged)" if self.unchanged else ""
        return f"indexed {self.indexed}, rejected {self.rejected}{extra}"


def index_documents(
    records: Iterable[Document | Reject],
    index: VectorStore,
    embedder: Embedder,
    typer: SourceTyper,
    *,
    batch_size: int = 64,
    on_batch: Callable[[int], None] | None = None,
) -> IndexReport:
    """Index ``records`` (documents and rejects, in file order) into ``index``.

    Works on any :class:`~credrank.index.store.VectorStore`. Rejects are collected, never
    dropped; documents already present with the same content hash
    are skipped, so a re-run after an interruption completes the index without duplicates.
    ``on_batch(n)`` is called after each batch with the number of records it consumed.
    """
    report = IndexReport()
    batch: list[Document] = []

    def flush() -> None:
        if not batch:
            return
        provs = [provenance_payload(typer.classify(d.url, d.source_type)) for d in batch]
        hashes = [content_hash(d, p) for d, p in zip(batch, provs, strict=True)]
        present = index.existing_hashes([d.id for d in batch])
        todo = [i for i, d in enumerate(batch) if present.get(d.id) != hashes[i]]
        for i in todo:
            if provs[i]["provenance_conflict"]:
                report.conflicts.append((batch[i].id, provs[i]["provenance_conflict"]))
        if todo:
            docs = [batch[i] for i in todo]
            vectors = embedder.embed([embedding_text(d.title, d.text) for d in docs])
            index.upsert(docs, [provs[i] for i in todo], vectors, [hashes[i] for i in todo])
        report.indexed += len(todo)
        report.unchanged += len(batch) - len(todo)
        if on_batch:
            on_batch(len(batch))
        batch.clear()

    for record in records:
        if isinstance(record, Reject):
            report.rejects.append(record)
            if on_batch:
                on_batch(1)
            continue
        batch.append(record)
        if len(batch) >= batch_size:
            flush()
    flush()
    return report
