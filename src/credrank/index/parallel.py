"""Indexing on a Dask cluster: provenance, content hashes and embeddings on the workers.

:func:`index_documents_parallel` does what :func:`~credrank.index.ingest.index_documents`
does, with the costly per-document work shipped to Dask workers in *partitions* of
``batches_per_partition × batch_size`` documents. The result is **identical** to the
single-process path — the same rejects in the same order, the same conflicts, the same
:class:`~credrank.index.ingest.IndexReport` counts and the same stored points — because:

* **one reader, in file order**: the records are read and validated in this process, as a
  stream (the reader is stateful: duplicate ids are found across the whole file, CSV records
  may span lines, a ``.gz`` file is one stream), so every reject and line number is the one
  the single-process run gives;
* **one writer, in file order**: the workers never open the index; the store and its
  :class:`~credrank.index.lock.IndexLock` stay here, and the partitions' results are written
  in submission order, batch by batch, with the batch boundaries of the single-process run
  (a partition is a whole number of batches);
* **the same decisions**: a document is written when its content hash differs from the one
  stored *at the time its batch is written* (checked here, just before ``upsert``, as
  :func:`index_documents` does), so an unchanged re-run writes nothing and reports every
  document ``unchanged``. The workers get the hashes stored when their partition was sent and
  embed only the documents that differ, so an unchanged re-run embeds nothing either; a
  document whose stored hash changed in between (only possible when the records repeat an id)
  is embedded here, with the same texts in the same call as the single-process run;
* **the same vectors**: a worker embeds each batch's new documents in one call, with the
  embedder it gets by *name* (``get_embedder(name)``, loaded once per worker process) and a
  :class:`~credrank.provenance.SourceTyper` it builds from :class:`TyperSettings` (table paths,
  ``trust_declared``; cached per worker process). Nothing heavy is pickled. The single-process
  run embeds length-sorted chunks instead (:func:`~credrank.index.ingest.embed_bucketed`); a
  text's vector does not depend on its batch (exactly for the hashing embedder, up to float
  padding noise for MiniLM), so the stored vectors are the same.

Works with a local cluster (``--workers N``) and with a real one (``--scheduler ADDRESS``): the
table paths must then be readable on the workers too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from credrank.core.cluster import dask_client
from credrank.documents import DocumentStream, Reject
from credrank.documents.schema import Document
from credrank.index.embed import get_embedder
from credrank.index.ingest import (
    WRITE_BATCH,
    IndexReport,
    embed_documents,
    provenance_payload,
    write_documents,
)
from credrank.index.passages import Chunking, Span
from credrank.index.payload import content_hash
from credrank.index.store import VectorStore
from credrank.provenance import SourceTyper

__all__ = ["TyperSettings", "index_documents_parallel"]


@dataclass(frozen=True)
class TyperSettings:
    """What a worker needs to build the :class:`SourceTyper` of the run (not the typer itself):
    the domain tables (absolute paths), ``trust_declared``, the score column and a rules file."""

    tables: tuple[str, ...] = ()
    trust_declared: bool = False
    score_column: str | None = None
    rules: str | None = None

    @classmethod
    def of(cls, tables: Sequence[str | Path] = (), *, trust_declared: bool = False,
           score_column: str | None = None, rules: str | Path | None = None) -> TyperSettings:
        """Settings with the paths made absolute (a worker's working folder may differ)."""
        return cls(tuple(str(Path(t).resolve()) for t in tables), trust_declared, score_column,
                   None if rules is None else str(Path(rules).resolve()))

    def build(self) -> SourceTyper:
        return SourceTyper(list(self.tables), trust_declared=self.trust_declared,
                           score_column=self.score_column, rules=self.rules)


@lru_cache(maxsize=4)
def _worker_typer(settings: TyperSettings) -> SourceTyper:
    """The run's typer, built once per worker process (per thread pool with threads)."""
    return settings.build()


@dataclass
class _Partition:
    """A worker's answer: per document its provenance payload and content hash, and per batch
    the vectors of the documents that differed from the hashes sent (``embedded`` their
    positions in the partition)."""

    provs: list[dict[str, Any]]
    hashes: list[str]
    embedded: list[int]
    vectors: list[tuple[list[Span], np.ndarray]]


def _process_partition(docs: list[Document], present: dict[str, str], embedder: str,
                       settings: TyperSettings, batch_size: int,
                       chunking: Chunking) -> _Partition:
    """On a worker: provenance, content hashes, and passages and embeddings batch by batch
    (for the documents whose hash differs from ``present``), each batch sorted by length as
    the single-process path sorts its chunks (:func:`~credrank.index.ingest.embed_documents`)."""
    typer = _worker_typer(settings)
    emb = get_embedder(embedder)
    provs = [provenance_payload(typer.classify(d.url, d.source_type)) for d in docs]
    hashes = [content_hash(d, p) for d, p in zip(docs, provs, strict=True)]
    embedded: list[int] = []
    vectors: list[tuple[list[Span], np.ndarray]] = []
    for start in range(0, len(docs), batch_size):
        todo = [i for i in range(start, min(start + batch_size, len(docs)))
                if present.get(docs[i].id) != hashes[i]]
        if todo:
            vectors.extend(embed_documents(emb, [docs[i] for i in todo], chunking))
            embedded.extend(todo)
    return _Partition(provs, hashes, embedded, vectors)


def index_documents_parallel(
    records: Iterable[Document | Reject],
    index: VectorStore,
    embedder: str,
    settings: TyperSettings,
    *,
    client: Any = None,
    workers: int = 0,
    batch_size: int = WRITE_BATCH,
    batches_per_partition: int = 4,
    max_in_flight: int | None = None,
    on_batch: Callable[[int], None] | None = None,
    report: IndexReport | None = None,
) -> IndexReport:
    """Index ``records`` into ``index`` like :func:`~credrank.index.ingest.index_documents`,
    with provenance and embeddings computed on Dask workers; the result is identical (see the
    module docstring: one reader and one writer, in file order).

    ``embedder`` is the embedder's *name* (:func:`~credrank.index.embed.get_embedder`);
    ``settings`` describe the source typer. ``client`` is a ``distributed.Client`` or a
    scheduler address; without one, a local cluster of ``workers`` processes is started and
    closed. A partition holds ``batches_per_partition`` batches of ``batch_size`` documents;
    at most ``max_in_flight`` partitions (default: twice the workers, at least 2) are out at
    once, so memory stays bounded on any corpus size. ``on_batch(n)`` is called after each
    batch is written (and once per reject), as in the single-process path; ``report``: as
    for :func:`~credrank.index.ingest.index_documents`.
    """
    if batch_size < 1 or batches_per_partition < 1:
        raise ValueError(f"batch_size and batches_per_partition: expected integers >= 1, got "
                         f"{batch_size} and {batches_per_partition}")
    with dask_client(workers, client) as dc:
        limit = max_in_flight or max(2, 2 * len(dc.nthreads()))
        return _run(records, index, embedder, settings, dc, batch_size,
                    batch_size * batches_per_partition, limit, on_batch,
                    report if report is not None else IndexReport())


def _run(records: Iterable[Document | Reject], index: VectorStore, embedder: str,
         settings: TyperSettings, client: Any, batch_size: int, partition_size: int,
         limit: int, on_batch: Callable[[int], None] | None, report: IndexReport
         ) -> IndexReport:
    pending: deque[tuple[Any, list[Document]]] = deque()
    part: list[Document] = []

    def submit() -> None:
        docs = list(part)
        part.clear()
        present = index.existing_hashes([d.id for d in docs])
        future = client.submit(_process_partition, docs, present, embedder, settings,
                               batch_size, index.manifest.chunking, pure=False)
        pending.append((future, docs))

    def write_oldest() -> None:
        future, docs = pending[0]
        result: _Partition = future.result()
        pending.popleft()
        _write(docs, result, index, embedder, batch_size, report, on_batch)

    try:
        for record in records:
            if isinstance(record, Reject):
                report.rejects.append(record)
                if on_batch:
                    on_batch(1)
                continue
            part.append(record)
            if len(part) >= partition_size:
                submit()
                while len(pending) >= limit:
                    write_oldest()
        if part:
            submit()
        while pending:
            write_oldest()
    finally:
        if pending:  # an error: nothing more is written; drop what is still out
            client.cancel([f for f, _ in pending])
    if isinstance(records, DocumentStream):  # dropped fields, assumed zones: as index_documents
        report.take_reading(records)
    return report


def _write(docs: list[Document], result: _Partition, index: VectorStore, embedder: str,
           batch_size: int, report: IndexReport,
           on_batch: Callable[[int], None] | None) -> None:
    """Write one partition batch by batch, deciding as :func:`index_documents` does."""
    vectors = dict(zip(result.embedded, result.vectors, strict=True))
    for start in range(0, len(docs), batch_size):
        rows = range(start, min(start + batch_size, len(docs)))
        batch = [docs[i] for i in rows]
        present = index.existing_hashes([d.id for d in batch])
        todo = [i for i in rows if present.get(docs[i].id) != result.hashes[i]]
        for i in todo:
            report.note_provenance(docs[i].id, result.provs[i])
        if todo:
            sent = [i for i in rows if i in vectors]
            if sent != todo:  # a stored hash changed since sending (the records repeat an id):
                # embed here, the texts the single-process run embeds, in one call
                fresh = embed_documents(get_embedder(embedder), [docs[i] for i in todo],
                                        index.manifest.chunking, bucket=0)
                vectors.update(zip(todo, fresh, strict=True))
            write_documents(index, [docs[i] for i in todo], [result.provs[i] for i in todo],
                            [result.hashes[i] for i in todo], [vectors[i] for i in todo])
            report.note_truncated(get_embedder(embedder), [docs[i] for i in todo],
                                  [vectors[i][0] for i in todo], index.manifest.chunking)
        report.indexed += len(todo)
        report.unchanged += len(batch) - len(todo)
        if on_batch:
            on_batch(len(batch))
