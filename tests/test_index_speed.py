"""Faster indexing (issue 15, part 3) stores exactly what the old path stored.

Length-bucketed embedding (a chunk's texts sorted by length, embedded in batches, order
restored) and larger write batches must not change the stored vectors, payloads, report or
rejects. A fake embedder that writes *which call and which position in the call* a vector
came from into the vector itself catches any order bug in restoring the rows. No timings.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from credrank.documents import Reject, iter_documents
from credrank.documents.schema import SOURCE_TYPES, Document
from credrank.index.embed import CachedEmbedder, HashingEmbedder
from credrank.index.ingest import (
    embed_bucketed,
    embedding_text,
    index_documents,
    text_lengths,
)
from credrank.index.manifest import Manifest
from credrank.index.qdrant_edge import EdgeIndex
from credrank.index.store import DENSE
from credrank.provenance import SourceTyper

WORDS = ("vitamin vaccine dose trial fever cold antibiotic sleep heart risk sugar insulin "
         "statin muscle fluoride water sunscreen skin cancer melatonin child study").split()
HOSTS = ("https://www.nejm.org/doi/{i}", "https://www.cdc.gov/page{i}",
         "https://someone{i}.blogspot.com/post", "https://site{i}.example/x")


def corpus_lines(n: int, seed: int = 0) -> list[str]:
    """JSONL lines with texts of very different lengths (so sorting reorders a lot), titles on
    some, declared source types on some (conflicts), and a few invalid records (rejects)."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        if i % 97 == 13:
            lines.append(json.dumps({"id": f"bad{i}", "text": ""}))  # rejected: empty text
            continue
        record: dict[str, Any] = {
            "id": f"d{i:05d}", "text": " ".join(rng.choice(WORDS, size=int(rng.integers(1, 80)))),
            "url": HOSTS[i % len(HOSTS)].format(i=i)}
        if i % 3 == 0:
            record["title"] = f"title {i}"
        if i % 11 == 0:
            record["source_type"] = SOURCE_TYPES[i % len(SOURCE_TYPES)]
        lines.append(json.dumps(record))
    return lines


def write_corpus(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


class RecordingStore:
    """A :class:`~credrank.index.store.VectorStore` for the write path only: remembers every
    ``upsert`` (ids, provenance, vectors, hashes) in order, answers ``existing_hashes``."""

    def __init__(self) -> None:
        self.writes: list[tuple[list[str], list[dict[str, Any]], np.ndarray, list[str]]] = []
        self.hashes: dict[str, str] = {}
        #: a store that keeps texts whole (what the hashing embedder's indexes do)
        self.manifest = Manifest(embedder="hashing", dim=256, engine="memory", chunk_tokens=0)

    def existing_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        return {d: self.hashes[d] for d in doc_ids if d in self.hashes}

    def upsert(self, documents: Sequence[Document], provenance: Sequence[Mapping[str, Any]],
               vectors: np.ndarray, hashes: Sequence[str],
               passages: Sequence[Sequence[tuple[int, int]]] | None = None) -> None:
        assert passages is None or all(len(p) == 1 for p in passages)
        assert len(documents) == len(provenance) == len(vectors) == len(hashes)
        self.writes.append(([d.id for d in documents], [dict(p) for p in provenance],
                            np.asarray(vectors).copy(), list(hashes)))
        self.hashes.update({d.id: h for d, h in zip(documents, hashes, strict=True)})

    def stored(self) -> tuple[list[str], list[dict[str, Any]], np.ndarray, list[str]]:
        """All writes concatenated, in write order."""
        ids = [d for w in self.writes for d in w[0]]
        provs = [p for w in self.writes for p in w[1]]
        vectors = np.vstack([w[2] for w in self.writes]) if self.writes else np.zeros((0, 0))
        return ids, provs, vectors, [h for w in self.writes for h in w[3]]


class PositionEmbedder:
    """Fake embedder whose vector says where it was computed: ``[call, position, text hash]``.

    Its output depends on the batch composition (the same text in another call or position
    gets another vector), so a row put back in the wrong place, or a vector written for the
    wrong document, is detected by comparing ``calls[call][position]`` with the document."""

    name = "position"
    dim = 3

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        k = len(self.calls) - 1
        return np.array([[k, p, text_code(t)] for p, t in enumerate(texts)],
                        dtype=np.float64).reshape(len(texts), 3)


def text_code(text: str) -> float:
    return float(int.from_bytes(hashlib.blake2b(text.encode(), digest_size=4).digest(), "little"))


def run(records: Sequence[Document | Reject], embedder: Any, **options: Any):
    store = RecordingStore()
    progress: list[int] = []
    report = index_documents(records, store, embedder, SourceTyper(),  # type: ignore[arg-type]
                             on_batch=progress.append, **options)
    return store, report, progress


def assert_same_result(a, b, *, atol: float = 0.0) -> None:
    (store_a, report_a, progress_a), (store_b, report_b, progress_b) = a, b
    ids_a, provs_a, vec_a, hashes_a = store_a.stored()
    ids_b, provs_b, vec_b, hashes_b = store_b.stored()
    assert ids_a == ids_b  # same documents, written in the same (file) order
    assert provs_a == provs_b and hashes_a == hashes_b
    assert vec_a.shape == vec_b.shape
    np.testing.assert_allclose(vec_a, vec_b, rtol=0, atol=atol)
    assert (report_a.indexed, report_a.unchanged) == (report_b.indexed, report_b.unchanged)
    assert [(r.line, r.message) for r in report_a.rejects] == \
        [(r.line, r.message) for r in report_b.rejects]
    assert report_a.conflicts == report_b.conflicts
    assert sum(progress_a) == sum(progress_b)


@pytest.fixture(scope="session")  # read-only: once per xdist worker
def records(tmp_path_factory) -> list[Document | Reject]:
    path = write_corpus(tmp_path_factory.mktemp("speed") / "c.jsonl", corpus_lines(2500))
    return list(iter_documents(path))


def test_corpus_has_what_the_tests_need(records):
    docs = [r for r in records if isinstance(r, Document)]
    assert any(isinstance(r, Reject) for r in records) and len(docs) > 2000
    lengths = [len(embedding_text(d.title, d.text)) for d in docs[:64]]
    assert lengths != sorted(lengths, reverse=True)  # file order is not length order


@pytest.fixture(scope="session")  # read-only: once per xdist worker
def old_path(records):
    """The old path's result over ``records`` (HashingEmbedder(64)), computed once for every
    option set compared with it: it depends on neither, and the comparisons only read it."""
    return run(records, HashingEmbedder(64), batch_size=64, bucket=0)


@pytest.mark.parametrize("options", [
    {}, {"batch_size": 64}, {"batch_size": 256}, {"batch_size": 1000, "bucket": 4096},
    {"batch_size": 7, "bucket": 50, "embed_batch": 5}, {"batch_size": 3000},
])
def test_bucketed_hashing_equals_the_old_path(records, old_path, options):
    """Old path: write batches of 64 in file order, one embedder call per batch (bucket=0)."""
    assert_same_result(run(records, HashingEmbedder(64), **options), old_path)


def test_every_vector_is_the_one_computed_for_its_document(records):
    emb = PositionEmbedder()
    store, report, _ = run(records, emb, batch_size=100, bucket=1000, embed_batch=16)
    ids, _, vectors, _ = store.stored()
    docs = {r.id: r for r in records if isinstance(r, Document)}
    assert len(ids) == len(docs) == report.indexed
    for doc_id, (call, position, code) in zip(ids, vectors, strict=True):
        text = emb.calls[int(call)][int(position)]
        assert text == embedding_text(docs[doc_id].title, docs[doc_id].text), doc_id
        assert code == text_code(text)
    # the calls really were length-sorted batches of at most embed_batch texts
    assert all(len(c) <= 16 for c in emb.calls)
    assert all([len(t) for t in c] == sorted((len(t) for t in c), reverse=True)
               for c in emb.calls)
    assert len(emb.calls) > len(docs) // 16


def test_embed_bucketed_restores_order():
    texts = ["a" * n for n in (5, 1, 9, 3, 9, 0, 7)]
    emb = PositionEmbedder()
    out = embed_bucketed(emb, texts, 3)
    for text, (call, position, _) in zip(texts, out, strict=True):
        assert emb.calls[int(call)][int(position)] == text
    assert [len(c) for c in emb.calls] == [3, 3, 1]
    assert emb.calls[0] == ["a" * 9, "a" * 9, "a" * 7]  # longest first, ties in input order
    assert embed_bucketed(HashingEmbedder(16), []).shape == (0, 16)


class FakeTokenizer:
    """Counts 'tokens' as the number of 'x' in a text (nothing like its characters)."""

    def __call__(self, texts, add_special_tokens=True):
        return {"input_ids": [[0] * t.count("x") for t in texts]}


class FakeModel:
    tokenizer = FakeTokenizer()
    max_seq_length = 5


def test_texts_are_sorted_by_the_model_tokens_when_known():
    texts = ["xxx", "aaaaaaaaax", "xx", "xxxxxxxx"]
    assert text_lengths(HashingEmbedder(16))(texts) == [3, 10, 2, 8]  # characters
    emb = PositionEmbedder()
    emb.model = FakeModel()  # type: ignore[attr-defined]
    assert text_lengths(emb)(texts) == [3, 1, 2, 5]  # tokens, capped at max_seq_length
    out = embed_bucketed(emb, texts, 2)
    assert emb.calls == [["xxxxxxxx", "xxx"], ["xx", "aaaaaaaaax"]]
    for text, (call, position, _) in zip(texts, out, strict=True):
        assert emb.calls[int(call)][int(position)] == text
    hooked = PositionEmbedder()
    hooked.token_lengths = lambda ts: [len(t.split()) for t in ts]  # type: ignore[attr-defined]
    assert text_lengths(hooked)(["a b c", "a"]) == [3, 1]
    assert text_lengths(CachedEmbedder(emb))(texts) == [3, 1, 2, 5]  # measured as the inner one
    with pytest.raises(ValueError, match="lengths"):
        embed_bucketed(emb, texts, 2, lengths=[1, 2])


def test_reindex_and_repeated_ids_decide_as_before(records):
    """A second run over the same records is all 'unchanged'; a corpus that repeats ids inside
    one chunk is decided batch by batch, with the same counts as the old path."""
    emb = HashingEmbedder(32)
    store, report, _ = run(records, emb)
    again = index_documents(records, store, emb, SourceTyper())  # type: ignore[arg-type]
    assert again.indexed == 0 and again.unchanged == report.indexed
    docs = [r for r in records if isinstance(r, Document)][:300]
    changed = [Document(id=d.id, text=d.text + " changed") for d in docs[:40]]
    repeated = [*docs, *changed, *docs[:10]]
    assert_same_result(run(repeated, emb), run(repeated, emb, batch_size=64, bucket=0))
    assert_same_result(run(repeated, emb, batch_size=25),
                       run(repeated, emb, batch_size=25, bucket=0))


def test_progress_counts_every_record(records):
    _, report, progress = run(records, HashingEmbedder(16), batch_size=300)
    assert sum(progress) == len(records) == report.indexed + report.rejected
    assert max(progress) == 300


@pytest.mark.parametrize("field,value", [
    ("batch_size", 0), ("batch_size", -5), ("batch_size", 2.5), ("batch_size", True),
    ("bucket", -1), ("bucket", "64"), ("embed_batch", 0),
])
def test_batch_parameters_are_validated(field, value):
    with pytest.raises(ValueError, match=field):
        index_documents([Document(id="a", text="x")], RecordingStore(),  # type: ignore[arg-type]
                        HashingEmbedder(16), SourceTyper(), **{field: value})


def edge_contents(idx: EdgeIndex, ids: list[str]) -> tuple[list[dict[str, Any]], np.ndarray]:
    records = idx.shard.retrieve([idx.point_id(d) for d in ids], None, [DENSE])
    by_id = {r.payload["doc_id"]: r for r in records}
    return ([by_id[d].payload for d in ids],
            np.array([by_id[d].vector[DENSE] for d in ids], dtype=np.float32))


def test_edge_index_stores_the_same_points(tmp_path):
    path = write_corpus(tmp_path / "c.jsonl", corpus_lines(1500, seed=3))
    emb = HashingEmbedder(64)
    old_idx = EdgeIndex.open(tmp_path / "old", embedder=emb.name, dim=emb.dim, create=True)
    new_idx = EdgeIndex.open(tmp_path / "new", embedder=emb.name, dim=emb.dim, create=True)
    with old_idx, new_idx:
        old = index_documents(iter_documents(path), old_idx, emb, SourceTyper(), batch_size=64,
                              bucket=0)
        new = index_documents(iter_documents(path), new_idx, emb, SourceTyper())
        assert (old.indexed, old.rejected, old.conflicts) == \
            (new.indexed, new.rejected, new.conflicts)
        assert len(old_idx) == len(new_idx) == new.indexed
        ids = [p["doc_id"] for p in old_idx.read_payloads()]
        assert ids == [p["doc_id"] for p in new_idx.read_payloads()]
        payloads_old, vectors_old = edge_contents(old_idx, ids)
        payloads_new, vectors_new = edge_contents(new_idx, ids)
        assert payloads_old == payloads_new
        np.testing.assert_allclose(vectors_old, vectors_new, rtol=0, atol=1e-6)


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_edge_flush_every_is_validated(tmp_path, value):
    with pytest.raises(ValueError, match="flush_every"):
        EdgeIndex.open(tmp_path / "i", embedder="hashing", dim=16, create=True,
                       flush_every=value)


def test_optimize_reports_progress_and_keeps_the_points(tmp_path):
    emb = HashingEmbedder(32)
    docs = [Document(id=f"d{i}", text=f"vitamin w{i % 97} w{i % 13} trial {i}")
            for i in range(3000)]
    calls: list[tuple[int, int]] = []
    with EdgeIndex.open(tmp_path / "i", embedder=emb.name, dim=emb.dim, create=True,
                        flush_every=500) as idx:
        index_documents(docs, idx, emb, SourceTyper(), batch_size=256)
        before = idx.search_dense("", emb.embed(["vitamin w5 w5"])[0], 5, exact=True).doc_ids
        idx.optimize(on_progress=lambda done, total: calls.append((done, total)), poll_s=0.001)
        assert len(idx) == len(docs)
        after = idx.search_dense("", emb.embed(["vitamin w5 w5"])[0], 5, exact=True).doc_ids
        assert list(after) == list(before)
    assert calls and calls[-1][1] == 2 * len(docs)  # dense + BM25 vectors of every point
