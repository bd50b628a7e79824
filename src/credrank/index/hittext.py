"""The text of the final hits, read from the store after the ranking (:class:`FetchText`).

A search returns only the payload ranking needs: the default path (the engine's formula
search cut to ``top_k``, :class:`~credrank.pipeline.pushdown.PushdownSearch`) and the Python
path without a text-reading stage leave each document's text in the engine, because moving
payload costs about as much as the search itself (issue 15). What a hit shows of its text
(:mod:`credrank.core.hittext`) is therefore read here, by id, for the hits that survived the
cut — ``top_k`` documents, never the ``fetch_k`` pool — in one request to the store.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from credrank.core.candidates import Candidates
from credrank.core.pipeline import Stage
from credrank.index.passages import split_span
from credrank.index.store import VectorStore

#: the payload fields :class:`FetchText` reads
FETCHED_FIELDS = ("doc_id", "text", "title")


class FetchText(Stage):
    """Fill the ``text`` (and a missing ``title``) of the batch's documents from ``store``:
    of a document split into passages, the passage it scored by (its ``span``).

    Put it after the selector: it reads the documents of the final batch only, and none at
    all when every one already has its text (a pipeline whose stages read text retrieved it
    with the pool). It reads the index (``reads = {"index"}``), so
    :class:`~credrank.searcher.Searcher` runs it under the store lock.
    """

    name = "fetch_text"
    reads = frozenset({"index"})

    def __init__(self, store: VectorStore):
        self.store = store

    def transform(self, batch: Candidates) -> Candidates:
        texts = batch.column("text")
        titles = batch.column("title")
        missing = [str(d) for d, t in zip(batch.doc_ids, texts, strict=True) if t is None]
        if not missing:
            return batch
        stored = {str(p["doc_id"]): p for p in self.store.read_payloads(missing, FETCHED_FIELDS)}
        new_texts = np.array(texts, dtype=object)
        new_titles = np.array(titles, dtype=object)
        spans, counts = batch.column("span"), batch.column("passages")
        for i, doc_id in enumerate(batch.doc_ids):
            payload = stored.get(str(doc_id))
            if payload is None:
                continue
            if new_texts[i] is None:
                text = payload.get("text")
                span = split_span(counts[i], spans[i])
                if isinstance(text, str) and span is not None:
                    text = text[span[0]:span[1]]  # the passage the hit scored by
                new_texts[i] = text
            if new_titles[i] is None:
                new_titles[i] = payload.get("title")
        return batch.with_meta("text", new_texts).with_meta("title", new_titles)

    def config(self) -> dict[str, Any]:
        return {"fields": list(FETCHED_FIELDS)}


__all__ = ["FETCHED_FIELDS", "FetchText"]
