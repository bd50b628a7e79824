"""Indexing: validated documents → provenance → embeddings → store, in resumable batches.

:func:`index_documents` does it in one pass (``credrank index``). A writer that shares the
store with searchers (``credrank serve``'s ``POST /index``) splits it in two:
:func:`prepare_documents` validates, types, hashes and embeds without writing (the store is
only read, briefly, for its content hashes), then :func:`write_prepared`, under the writer's
lock, writes — so searches never wait for the embedding.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from credrank.core.embedder import Embedder
from credrank.core.validation import check_int
from credrank.documents import DocumentStream, DroppedField, Reject
from credrank.documents.records import dropped_summary
from credrank.documents.schema import Document
from credrank.index.passages import Chunking, Span, chunk_texts, cut_titles, title_share
from credrank.index.payload import content_hash
from credrank.index.store import VectorStore
from credrank.provenance import Provenance, SourceTyper

#: documents per ``VectorStore.upsert`` call (and per ``on_batch`` progress call); 1,000 by
#: measurement on Qdrant Edge (``bench/scripts/bench_index.py``: 64 / 256 / 1,000 compared)
WRITE_BATCH = 1000
#: texts of a chunk sorted by length together before embedding (0: no sorting, file order)
BUCKET = 1024
#: texts per embedder call inside a length-sorted chunk (MiniLM's own batch size)
EMBED_BATCH = 64


def provenance_payload(prov: Provenance) -> dict[str, Any]:
    """The provenance fields stored with each point (and returned as meta columns); with
    ``url_error`` only where a given URL names no host."""
    payload = {
        "host": prov.host,
        "registered_domain": prov.registered_domain,
        "source_type": prov.source_type,
        "url_source_type": prov.url_source_type,
        "declared_source_type": prov.declared_source_type,
        "provenance_rule": prov.rule,
        "provenance_conflict": prov.conflict,
        "domain_score": prov.domain_score,
    }
    if prov.url_error is not None:  # why a given URL names no host: the run reports it
        payload["url_error"] = prov.url_error
    return payload


def embedding_text(title: str | None, text: str) -> str:
    """What is embedded for a document: ``title\ntext``, or the text alone without a title.
    Indexing and reranking (:mod:`credrank.rerank`) embed the same string."""
    return f"{title}\n{text}" if title else text


@dataclass
class IndexReport:
    """What an indexing run did; ``indexed + unchanged + rejected`` = records read.

    ``dropped`` lists the optional fields left out of documents that were indexed (lenient
    reading, :class:`~credrank.documents.DroppedField`); ``zones_assumed`` counts the dates
    without a time zone read in ``assume_timezone`` (``None``: strict reading rejected them),
    ``dates_ordered`` the all-numeric day/month dates read in the declared ``date_order``
    (``None``: none declared, those that read two ways were dropped). All are the reading's
    (:meth:`take_reading`)."""

    indexed: int = 0
    unchanged: int = 0
    rejects: list[Reject] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    #: the documents written whose URL names no host (``javascript:…``, ``http://``): typed
    #: ``unknown``, their URL kept as given, and said here rather than only by a later
    #: ``credrank provenance hosts``
    url_errors: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[DroppedField] = field(default_factory=list)
    #: the ``fields`` mappings (``--field``) no record used: ``{"lnk": "url"}``
    unused_fields: dict[str, str] = field(default_factory=dict)
    zones_assumed: int = 0
    assume_timezone: str | None = None
    date_order: str | None = None
    dates_ordered: int = 0
    #: the documents written whose embedded text was longer than the embedder's ``window``
    #: (tokens; ``None``: the embedder has none, e.g. hashing): embedded from their beginning
    truncated: list[str] = field(default_factory=list)
    window: int | None = None
    #: the documents written whose title was longer than ``title_tokens`` tokens, half a
    #: passage (:func:`~credrank.index.passages.title_share`; ``None``: the index does not
    #: split): embedded with each passage cut to that (:func:`~credrank.index.passages.cut_titles`)
    titles_cut: list[str] = field(default_factory=list)
    title_tokens: int | None = None

    @property
    def rejected(self) -> int:
        return len(self.rejects)

    def take_reading(self, stream: DocumentStream) -> None:
        """Copy what the reading noted (dropped fields, assumed zones, ordered dates) from
        ``stream``."""
        self.dropped = list(stream.dropped)
        self.unused_fields = dict(stream.unused_fields)
        self.zones_assumed = stream.zones_assumed
        self.assume_timezone = stream.assume_timezone
        self.date_order = stream.date_order
        self.dates_ordered = stream.dates_ordered

    def counts(self, reject_row: Callable[[Reject], Any],
               dropped_row: Callable[[DroppedField], Any], *, strict: bool
               ) -> dict[str, Any]:
        """The run as data (``credrank index --json``, ``POST /index``), each reject and
        dropped field as the caller's ``reject_row`` / ``dropped_row`` writes it (a file
        line for the CLI, a record number for the service); ``strict``: the reading's mode."""
        return {"indexed": self.indexed, "unchanged": self.unchanged,
                "rejected": self.rejected, "rejects": [reject_row(r) for r in self.rejects],
                "fields_dropped": len(self.dropped),
                "dropped": [dropped_row(d) for d in self.dropped],
                "reading": {"strict": strict,
                            "assume_timezone": self.assume_timezone,
                            "zones_assumed": self.zones_assumed,
                            "date_order": self.date_order,
                            "dates_ordered": self.dates_ordered},
                "conflicts": [{"doc_id": d, "conflict": c} for d, c in self.conflicts],
                "url_errors": [{"doc_id": d, "url_error": e} for d, e in self.url_errors],
                "unused_fields": [{"column": k, "field": v}
                                  for k, v in self.unused_fields.items()],
                "truncated": {"window_tokens": self.window, "count": len(self.truncated),
                              "doc_ids": list(self.truncated)},
                "titles_cut": {"max_tokens": self.title_tokens, "count": len(self.titles_cut),
                               "doc_ids": list(self.titles_cut)}}

    def summary(self) -> str:
        extra = f" ({self.unchanged} already indexed, unchanged)" if self.unchanged else ""
        dropped = f"; {dropped_summary(self.dropped)}" if self.dropped else ""
        hostless = "".join(f"; --field {k}={v}: no record has the field {k!r} (not used)"
                           for k, v in self.unused_fields.items())
        if self.url_errors:
            doc_id, why = self.url_errors[0]
            hostless += (f"; {len(self.url_errors)} URL(s) name no host, typed unknown (e.g. "
                         f"{doc_id!r}: {why})")
        return f"indexed {self.indexed}, rejected {self.rejected}{extra}{dropped}{hostless}" + (
            f"; {truncated_summary(self.truncated, self.window)}" if self.truncated else "") + (
            f"; {titles_cut_summary(self.titles_cut, self.title_tokens)}" if self.titles_cut
            else "")

    def note_provenance(self, doc_id: str, payload: Mapping[str, Any]) -> None:
        """Record the written document's provenance conflict and URL error, if any."""
        if payload["provenance_conflict"]:
            self.conflicts.append((doc_id, payload["provenance_conflict"]))
        if payload.get("url_error"):
            self.url_errors.append((doc_id, payload["url_error"]))

    def note_truncated(self, embedder: Embedder, docs: Sequence[Document],
                       passages: Sequence[Sequence[Span]] | None = None,
                       chunking: Chunking | None = None) -> None:
        """Record which of the written ``docs`` the embedder reads only in part
        (:func:`overflowing`): a document one of whose passages (``passages[i]``, default
        its whole text; embedded with the titles of
        :func:`~credrank.index.passages.cut_titles` under ``chunking``) is longer than the
        window — with splitting on, none should — and, with splitting on, those whose title
        was cut to half a passage (``titles_cut``)."""
        self.window = window_of(embedder)
        titles: list[str | None] = [d.title for d in docs]
        if chunking is not None and chunking.on:
            self.title_tokens = title_share(chunking)
            shortened = cut_titles(embedder, chunking, titles)
            self.titles_cut.extend(d.id for d, was, now in zip(docs, titles, shortened,
                                                               strict=True) if now != was)
            titles = shortened
        over = overflowing(embedder)
        if over is None or not docs:
            return
        spans = passages if passages is not None else [[(0, len(d.text))] for d in docs]
        owners = [i for i, sp in enumerate(spans) for _ in sp]
        flags = over([embedding_text(t, d.text[a:b])
                      for d, t, sp in zip(docs, titles, spans, strict=True) for a, b in sp])
        cut = {owners[j] for j, flag in enumerate(flags) if flag}
        self.truncated.extend(docs[i].id for i in sorted(cut))


def truncated_summary(ids: Sequence[str], window: int | None) -> str:
    """The report's line on texts longer than the embedder's window."""
    shown = ", ".join(repr(d) for d in ids[:3]) + (", …" if len(ids) > 3 else "")
    return (f"{len(ids)} text(s) longer than the embedder's window of {window} tokens were "
            f"embedded from their beginning only: the rest of their text is not searched "
            f"({shown}; every id in --json under truncated; an index splits long texts into "
            "passages unless made with --chunk-tokens 0 or before passages existed)")


def titles_cut_summary(ids: Sequence[str], tokens: int | None) -> str:
    """The report's line on titles cut to half a passage for embedding."""
    shown = ", ".join(repr(d) for d in ids[:3]) + (", …" if len(ids) > 3 else "")
    return (f"{len(ids)} title(s) longer than half a passage ({tokens} tokens) were embedded "
            f"cut to it, so that each passage keeps the other half for its text ({shown}; "
            "every id in --json under titles_cut)")


def overflowing(embedder: Embedder) -> Callable[[Sequence[str]], list[bool]] | None:
    """Which texts ``embedder`` reads only in part (longer than its window), or ``None`` for
    an embedder without a window (hashing) or that cannot tell; a wrapper (``inner``) answers
    as its inner embedder."""
    found = getattr(embedder, "truncated", None)
    if callable(found):
        return lambda texts: [bool(x) for x in found(texts)]
    inner = getattr(embedder, "inner", None)
    return overflowing(inner) if inner is not None else None


def window_of(embedder: Embedder) -> int | None:
    """The embedder's window in tokens (``None``: none, or it cannot tell)."""
    found = getattr(embedder, "window", None)
    if isinstance(found, int):
        return found
    inner = getattr(embedder, "inner", None)
    return window_of(inner) if inner is not None else None


def query_truncation(embedder: Embedder, text: str) -> dict[str, Any] | None:
    """``{"truncated": True, "window_tokens": W}`` when ``text`` (a query) is longer than the
    embedder's window of ``W`` tokens, special ones included: the model embeds its beginning
    only (a query's words past it are not searched); ``None`` when it fits or the embedder
    cannot tell. Only a text of more characters than the window is tokenized (a word piece
    covers at least one character): an ordinary query costs nothing."""
    window = window_of(embedder)
    if window is None or len(text) <= window - 2:
        return None
    target: Any = embedder
    while getattr(target, "truncated", None) is None and getattr(target, "inner", None):
        target = target.inner
    check = getattr(target, "truncated", None)
    if check is None or not check([text])[0]:
        return None
    return {"truncated": True, "window_tokens": window}


def text_lengths(embedder: Embedder) -> Callable[[Sequence[str]], list[int]]:
    """How :func:`embed_bucketed` measures a text for ``embedder``: in the model's tokens when
    it can tell, else in characters.

    An embedder may offer ``token_lengths(texts) -> list[int]``; a sentence-transformers model
    (``embedder.model`` with a ``tokenizer``, as :class:`~credrank.index.embed.MiniLMEmbedder`)
    is measured with its tokenizer, capped at its ``max_seq_length``; a caching wrapper
    (``embedder.inner``) is measured as its inner embedder. Characters are a poor proxy for
    word pieces (on CrAM NQ passages, sorting by characters leaves 1.36× the real tokens after
    padding — no better than file order — and sorting by tokens 1.05×), hence the tokenizer.
    """
    inner = getattr(embedder, "inner", None)
    if inner is not None and getattr(embedder, "token_lengths", None) is None:
        return text_lengths(inner)
    counted = getattr(embedder, "token_lengths", None)
    if callable(counted):
        return lambda texts: [int(n) for n in counted(texts)]
    model = getattr(embedder, "model", None)
    tokenizer = getattr(model, "tokenizer", None)
    if tokenizer is not None and callable(tokenizer):
        cap = getattr(model, "max_seq_length", None) or 10**9

        def tokens(texts: Sequence[str]) -> list[int]:
            ids = tokenizer(list(texts), add_special_tokens=False)["input_ids"]
            return [min(len(i), cap) for i in ids]

        return tokens
    return lambda texts: [len(t) for t in texts]


def embed_bucketed(embedder: Embedder, texts: Sequence[str], embed_batch: int = EMBED_BATCH,
                   lengths: Sequence[int] | None = None) -> np.ndarray:
    """``embedder.embed(texts)`` computed in length-sorted batches, rows in the order of ``texts``.

    The texts are sorted by length (``lengths``, default :func:`text_lengths` of the embedder:
    tokens where it can tell; longest first, ties in input order) and embedded ``embed_batch``
    at a time, so a transformer pads each text to a batch of similar lengths instead of the
    longest text among its neighbours in the file; the rows are put back in the input order.
    For an embedder whose vector of a text does not depend on the other texts of its call
    (MiniLM up to padding noise, the hashing embedder exactly) the result equals one call.
    """
    check_int("embed_batch", embed_batch, 1)
    if len(texts) == 0:
        return np.asarray(embedder.embed([]))
    sizes = list(lengths) if lengths is not None else text_lengths(embedder)(texts)
    if len(sizes) != len(texts):
        raise ValueError(f"lengths: expected {len(texts)} values, got {len(sizes)}")
    order = sorted(range(len(texts)), key=lambda i: -sizes[i])
    out: np.ndarray | None = None
    for start in range(0, len(order), embed_batch):
        rows = order[start:start + embed_batch]
        vectors = np.asarray(embedder.embed([texts[i] for i in rows]))
        if vectors.ndim != 2 or vectors.shape[0] != len(rows):
            raise ValueError(f"embedder {embedder.name!r}: expected {len(rows)} vectors, got an "
                             f"array of shape {vectors.shape}")
        if out is None:
            out = np.empty((len(texts), vectors.shape[1]), dtype=vectors.dtype)
        out[rows] = vectors
    assert out is not None
    return out


def embed_documents(embedder: Embedder, docs: Sequence[Document], chunking: Chunking, *,
                    bucket: int = BUCKET, embed_batch: int = EMBED_BATCH
                    ) -> list[tuple[list[Span], np.ndarray]]:
    """Each document's passages (:func:`~credrank.index.passages.chunk_texts`: one span, its
    whole text, when it fits or ``chunking`` is off) and their vectors (one row per passage:
    ``title\npassage``, :func:`embedding_text`, the title cut to half a passage by
    :func:`~credrank.index.passages.cut_titles`), embedded length-sorted
    (:func:`embed_bucketed`) unless ``bucket`` is 0 (one call in order)."""
    if not docs:
        return []
    titles = cut_titles(embedder, chunking, [d.title for d in docs])
    spans = chunk_texts(embedder, chunking, titles, [d.text for d in docs])
    texts = [embedding_text(t, d.text[a:b])
             for d, t, sp in zip(docs, titles, spans, strict=True) for a, b in sp]
    vectors = (embed_bucketed(embedder, texts, embed_batch) if bucket
               else np.asarray(embedder.embed(texts)))
    if len(vectors) != len(texts):
        raise ValueError(f"embedder {embedder.name!r}: expected {len(texts)} vectors, got "
                         f"{len(vectors)}")
    out = []
    row = 0
    for sp in spans:
        out.append((sp, vectors[row:row + len(sp)]))
        row += len(sp)
    return out


def write_documents(index: VectorStore, docs: Sequence[Document],
                    provs: Sequence[dict[str, Any]], hashes: Sequence[str],
                    embedded: Sequence[tuple[list[Span], np.ndarray]]) -> None:
    """One ``upsert`` of ``docs`` with their passages and vectors (:func:`embed_documents`)."""
    if not docs:
        return
    index.upsert(list(docs), list(provs), np.vstack([v for _, v in embedded]), list(hashes),
                 passages=[sp for sp, _ in embedded])


def index_documents(
    records: Iterable[Document | Reject],
    index: VectorStore,
    embedder: Embedder,
    typer: SourceTyper,
    *,
    batch_size: int = WRITE_BATCH,
    bucket: int = BUCKET,
    embed_batch: int = EMBED_BATCH,
    on_batch: Callable[[int], None] | None = None,
    report: IndexReport | None = None,
) -> IndexReport:
    """Index ``records`` (documents and rejects, in file order) into ``index``.

    Works on any :class:`~credrank.index.store.VectorStore`. Rejects are collected, never
    dropped; documents already present with the same content hash
    are skipped, so a re-run after an interruption completes the index without duplicates.

    Documents are written ``batch_size`` at a time (one ``upsert`` each, in file order) and
    ``on_batch(n)`` is called after each write with the number of records it consumed (and
    with 1 for each reject). Embedding is done per *chunk* of about ``bucket`` documents (a
    whole number of write batches): the chunk's new texts are sorted by length (in the
    model's tokens where it can tell, :func:`text_lengths`) and embedded
    ``embed_batch`` at a time (:func:`embed_bucketed`), and the vectors are put back in file
    order before writing, so what is stored — vectors, payloads, report, rejects — is what
    batch-by-batch embedding in file order stores (MiniLM: equal up to float noise from
    padding). Memory is bounded by one chunk. ``bucket=0`` turns sorting off: each write batch
    is embedded in one call in file order (the behaviour before length bucketing).

    A text longer than the index's passage size is split into passages
    (``index.manifest.chunking``, :mod:`credrank.index.passages`), each embedded and stored
    as its own point; a document and its passages are always written in one ``upsert``.

    ``report`` (default: a new one) is filled as the run goes, so a caller that passes its own
    still holds what was written and rejected when a write raises mid-run.
    """
    check_int("batch_size", batch_size, 1)
    chunking = index.manifest.chunking
    check_int("bucket", bucket, 0)
    check_int("embed_batch", embed_batch, 1)
    chunk_size = batch_size * max(1, round(bucket / batch_size)) if bucket else batch_size
    report = report if report is not None else IndexReport()
    chunk: list[Document] = []

    def write(docs: list[Document], provs: list[dict[str, Any]], hashes: list[str],
              todo: list[int], vectors: Sequence[tuple[list[Span], np.ndarray]]) -> None:
        """Write one batch: ``todo`` its positions to (re)index, ``vectors`` their passages
        and vectors (:func:`embed_documents`)."""
        for i in todo:
            report.note_provenance(docs[i].id, provs[i])
        if todo:
            written = [docs[i] for i in todo]
            write_documents(index, written, [provs[i] for i in todo],
                            [hashes[i] for i in todo], vectors)
            report.note_truncated(embedder, written, [sp for sp, _ in vectors], chunking)
        report.indexed += len(todo)
        report.unchanged += len(docs) - len(todo)
        if on_batch:
            on_batch(len(docs))

    def embed(docs: Sequence[Document]) -> list[tuple[list[Span], np.ndarray]]:
        return embed_documents(embedder, docs, chunking, bucket=bucket,
                               embed_batch=embed_batch)

    def flush() -> None:
        if not chunk:
            return
        provs = [provenance_payload(typer.classify(d.url, d.source_type)) for d in chunk]
        hashes = [content_hash(d, p) for d, p in zip(chunk, provs, strict=True)]
        starts = range(0, len(chunk), batch_size)
        if len({d.id for d in chunk}) < len(chunk):
            # an id repeats inside the chunk: whether its second copy is new depends on the
            # first one being written, so decide (and embed) batch by batch, as before
            for s in starts:
                docs, stop = chunk[s:s + batch_size], s + batch_size
                present = index.existing_hashes([d.id for d in docs])
                todo = [i for i, d in enumerate(docs) if present.get(d.id) != hashes[s + i]]
                write(docs, provs[s:stop], hashes[s:stop], todo,
                      embed([docs[i] for i in todo]))
        else:  # every id once: the stored hashes cannot change while the chunk is written
            present = index.existing_hashes([d.id for d in chunk])
            todo = [i for i, d in enumerate(chunk) if present.get(d.id) != hashes[i]]
            vectors = embed([chunk[i] for i in todo])
            row = 0
            for s in starts:
                mine = [i - s for i in todo[row:] if i < s + batch_size]
                rows = vectors[row:row + len(mine)]
                row += len(mine)
                write(chunk[s:s + batch_size], provs[s:s + batch_size],
                      hashes[s:s + batch_size], mine, rows)
        chunk.clear()

    for record in records:
        if isinstance(record, Reject):
            report.rejects.append(record)
            if on_batch:
                on_batch(1)
            continue
        chunk.append(record)
        if len(chunk) >= chunk_size:
            flush()
    flush()
    if isinstance(records, DocumentStream):
        report.take_reading(records)
    return report


@dataclass
class PreparedDocuments:
    """Documents validated, typed and hashed, with the passages and vectors of those that
    were new or changed when :func:`prepare_documents` read the store (``vectors``: position
    → (spans, one row per passage), :func:`embed_documents`)."""

    documents: list[Document]
    payloads: list[dict[str, Any]]
    hashes: list[str]
    rejects: list[Reject]
    vectors: dict[int, tuple[list[Span], np.ndarray]]
    reading: DocumentStream | None = None


def _to_write(docs: Sequence[Document], hashes: Sequence[str],
              present: dict[str, str]) -> list[int]:
    """Positions to (re)write, in order: a document whose hash differs from the stored one,
    or from an earlier copy of its id among ``docs`` (records are applied in order)."""
    state = dict(present)
    todo = []
    for i, doc in enumerate(docs):
        if state.get(doc.id) != hashes[i]:
            todo.append(i)
            state[doc.id] = hashes[i]
    return todo


def _embed_positions(docs: Sequence[Document], positions: Sequence[int], embedder: Embedder,
                     chunking: Chunking, bucket: int, embed_batch: int,
                     check: Callable[[], None] | None
                     ) -> dict[int, tuple[list[Span], np.ndarray]]:
    out: dict[int, tuple[list[Span], np.ndarray]] = {}
    step = bucket or WRITE_BATCH
    for start in range(0, len(positions), step):
        if check is not None:
            check()
        part = positions[start:start + step]
        out.update(zip(part, embed_documents(embedder, [docs[i] for i in part], chunking,
                                             bucket=bucket, embed_batch=embed_batch),
                       strict=True))
    return out


def prepare_documents(
    records: Iterable[Document | Reject],
    index: VectorStore,
    embedder: Embedder,
    typer: SourceTyper,
    *,
    bucket: int = BUCKET,
    embed_batch: int = EMBED_BATCH,
    check: Callable[[], None] | None = None,
    read_lock: contextlib.AbstractContextManager[Any] | None = None,
) -> PreparedDocuments:
    """Everything :func:`index_documents` does before writing, for :func:`write_prepared`.

    The store is read once, for the content hashes of the documents' ids (under
    ``read_lock`` when given); the documents that are new or changed are embedded in chunks
    of about ``bucket`` (length-sorted, :func:`embed_bucketed`), ``check()`` being called
    before each chunk (it may raise to abandon the work: nothing has been written).
    """
    check_int("bucket", bucket, 0)
    check_int("embed_batch", embed_batch, 1)
    docs: list[Document] = []
    rejects: list[Reject] = []
    for record in records:
        if isinstance(record, Reject):
            rejects.append(record)
        else:
            docs.append(record)
    payloads = [provenance_payload(typer.classify(d.url, d.source_type)) for d in docs]
    hashes = [content_hash(d, p) for d, p in zip(docs, payloads, strict=True)]
    with read_lock if read_lock is not None else contextlib.nullcontext():
        present = index.existing_hashes([d.id for d in docs]) if docs else {}
    todo = _to_write(docs, hashes, present)
    vectors = _embed_positions(docs, todo, embedder, index.manifest.chunking, bucket,
                               embed_batch, check)
    return PreparedDocuments(docs, payloads, hashes, rejects, vectors,
                             records if isinstance(records, DocumentStream) else None)


def write_prepared(prepared: PreparedDocuments, index: VectorStore, embedder: Embedder, *,
                   batch_size: int = WRITE_BATCH, embed_batch: int = EMBED_BATCH
                   ) -> IndexReport:
    """Write what :func:`prepare_documents` prepared (call it holding the writer's lock).

    The stored hashes are read again: a document written meanwhile with the same content is
    ``unchanged``, one whose stored content changed since is embedded now. Documents are
    upserted ``batch_size`` at a time in record order, so an interrupted write is completed by
    sending the same records again (content hashes skip what is already there), as with
    :func:`index_documents`. The report is that of :func:`index_documents`, except that a
    record repeating an earlier record of the same request (same id, same content) counts as
    ``unchanged``.
    """
    check_int("batch_size", batch_size, 1)
    docs, payloads, hashes = prepared.documents, prepared.payloads, prepared.hashes
    present = index.existing_hashes([d.id for d in docs]) if docs else {}
    todo = _to_write(docs, hashes, present)
    vectors = dict(prepared.vectors)
    missing = [i for i in todo if i not in vectors]
    if missing:
        vectors.update(_embed_positions(docs, missing, embedder, index.manifest.chunking,
                                        BUCKET, embed_batch, None))
    report = IndexReport(rejects=list(prepared.rejects))
    if prepared.reading is not None:
        report.take_reading(prepared.reading)
    batches: list[list[int]] = []
    ids: set[str] = set()
    for i in todo:  # an id at most once per upsert: a later copy goes in a later call
        if not batches or len(batches[-1]) >= batch_size or docs[i].id in ids:
            batches.append([])
            ids = set()
        batches[-1].append(i)
        ids.add(docs[i].id)
    for batch in batches:
        for i in batch:
            report.note_provenance(docs[i].id, payloads[i])
        written = [docs[i] for i in batch]
        write_documents(index, written, [payloads[i] for i in batch],
                        [hashes[i] for i in batch], [vectors[i] for i in batch])
        report.note_truncated(embedder, written, [vectors[i][0] for i in batch],
                              index.manifest.chunking)
    report.indexed = len(todo)
    report.unchanged = len(docs) - len(todo)
    return report
