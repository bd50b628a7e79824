"""``POST /index``'s two phases (credrank.index.ingest): ``prepare_documents`` (typed, hashed,
embedded, nothing written) then ``write_prepared`` under the writer's lock — the same index as
``index_documents``, completed exactly once when an interrupted write is sent again."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from credrank.documents import iter_documents
from credrank.documents.schema import Document
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents, prepare_documents, write_prepared
from credrank.index.memory import InMemoryIndex
from credrank.provenance import SourceTyper

DEMO = Path(__file__).resolve().parents[1] / "src" / "credrank" / "data" / "demo"
CORPUS = DEMO / "corpus.jsonl"


def fresh() -> InMemoryIndex:
    return InMemoryIndex.create("hashing", get_embedder("hashing").dim)


def stored(index: InMemoryIndex) -> dict[str, tuple[Any, ...]]:
    return {str(d): (index.meta["content_hash"][i], tuple(np.round(index.vectors[i], 6)))
            for i, d in enumerate(index.doc_ids)}


def test_two_phases_store_what_one_pass_stores() -> None:
    embedder, typer = get_embedder("hashing"), SourceTyper([DEMO / "domains.csv"])
    one = fresh()
    expected = index_documents(iter_documents(CORPUS), one, embedder, typer)
    two = fresh()
    calls: list[str] = []
    prepared = prepare_documents(iter_documents(CORPUS), two, embedder, typer,
                                 check=lambda: calls.append("check"))
    assert len(two) == 0 and calls  # nothing written yet; checked before each chunk
    report = write_prepared(prepared, two, embedder)
    assert (report.indexed, report.unchanged, report.rejected) == (
        expected.indexed, expected.unchanged, expected.rejected)
    assert report.conflicts == expected.conflicts
    assert stored(two) == stored(one)
    again = write_prepared(prepare_documents(iter_documents(CORPUS), two, embedder, typer),
                           two, embedder)
    assert (again.indexed, again.unchanged) == (0, expected.indexed)


def test_a_check_that_raises_abandons_the_work_before_any_write() -> None:
    embedder, typer = get_embedder("hashing"), SourceTyper()
    index = fresh()

    def cancelled() -> None:
        raise RuntimeError("cancelled")

    with pytest.raises(RuntimeError, match="cancelled"):
        prepare_documents(iter_documents(CORPUS), index, embedder, typer, check=cancelled)
    assert len(index) == 0


class FailingIndex(InMemoryIndex):
    """Fails its ``fail_at``-th upsert call (a crash in the middle of a write)."""

    fail_at = 0
    calls = 0

    def upsert(self, *args: Any, **kwargs: Any) -> None:
        self.calls += 1
        if self.calls == self.fail_at:
            raise OSError("disk gone")
        super().upsert(*args, **kwargs)


def test_an_interrupted_write_sent_again_completes_the_index_exactly_once() -> None:
    embedder, typer = get_embedder("hashing"), SourceTyper()
    reference = fresh()
    total = index_documents(iter_documents(CORPUS), reference, embedder, typer).indexed
    index = FailingIndex.create("hashing", embedder.dim)
    assert isinstance(index, FailingIndex)
    index.fail_at = 3
    prepared = prepare_documents(iter_documents(CORPUS), index, embedder, typer)
    with pytest.raises(OSError, match="disk gone"):
        write_prepared(prepared, index, embedder, batch_size=25)
    written = len(index)
    assert written == 50  # two batches of 25 made it, in record order
    retry = write_prepared(prepare_documents(iter_documents(CORPUS), index, embedder, typer),
                           index, embedder, batch_size=25)
    assert (retry.indexed, retry.unchanged) == (total - written, written)
    assert stored(index) == stored(reference)


def test_documents_changed_between_the_phases_are_embedded_at_write() -> None:
    embedder, typer = get_embedder("hashing"), SourceTyper()
    index = fresh()
    prepared = prepare_documents(iter_documents(CORPUS), index, embedder, typer)
    # another writer indexes the first ten documents meanwhile
    index_documents(list(iter_documents(CORPUS))[:10], index, embedder, typer)
    report = write_prepared(prepared, index, embedder)
    assert report.unchanged == 10 and report.indexed == len(prepared.documents) - 10
    # a document unchanged when prepared (no vector) but overwritten since: embedded now
    first = next(d for d in iter_documents(CORPUS) if isinstance(d, Document))
    unchanged = prepare_documents(iter_documents(CORPUS), index, embedder, typer)
    assert unchanged.vectors == {}
    index_documents([replace(first, text="rewritten elsewhere")], index, embedder, typer)
    restored = write_prepared(unchanged, index, embedder)
    assert restored.indexed == 1
    reference = fresh()
    index_documents(iter_documents(CORPUS), reference, embedder, typer)
    assert stored(index) == stored(reference)
    with_repeats = [*list(iter_documents(CORPUS))[:3], *list(iter_documents(CORPUS))[:3]]
    repeated = write_prepared(prepare_documents(with_repeats, fresh_index := fresh(), embedder,
                                                typer), fresh_index, embedder)
    assert (repeated.indexed, repeated.unchanged) == (3, 3)  # the same records again
