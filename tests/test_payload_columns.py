"""The columnar copy of the ranking payload (credrank.index.columns; issue 26, item 4): a kept
copy gives the very batches the engine's payload gives, and no write leaves it stale."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from credrank.core.candidates import Candidates
from credrank.documents.schema import SOURCE_TYPES
from credrank.index.columns import PayloadColumns
from credrank.index.embed import get_embedder
from credrank.index.opener import open_store
from credrank.index.payload import EXTRA_COLUMNS, META_COLUMNS
from credrank.index.scoring import set_fields
from sparse_copy import copy_index

QUERIES = ("does vitamin d prevent covid", "masks and flu", "what causes measles outbreaks")


def same(a: Candidates, b: Candidates) -> None:
    """The same candidates with the same scores, meta columns and vectors; the order the same
    up to documents of exactly equal score (the engine may order ties either way)."""
    ranked_a = sorted(zip(-a.retrieval_score, a.doc_ids, strict=True))
    assert ranked_a == sorted(zip(-b.retrieval_score, b.doc_ids, strict=True))
    np.testing.assert_array_equal(a.retrieval_score, b.retrieval_score)  # ranked the same
    row_a = {d: i for i, d in enumerate(a.doc_ids)}
    row_b = {d: i for i, d in enumerate(b.doc_ids)}
    for name in (*META_COLUMNS, *EXTRA_COLUMNS):
        ca, cb = a.column(name), b.column(name)
        assert {d: ca[i] for d, i in row_a.items()} == {d: cb[i] for d, i in row_b.items()}, name
    if a.vectors is None:
        assert b.vectors is None
    else:
        assert b.vectors is not None
        for d, i in row_a.items():
            np.testing.assert_array_equal(a.vectors[i], b.vectors[row_b[d]])


@pytest.fixture()
def index_copy(demo_index_hashing: Path, tmp_path: Path) -> Path:
    target = tmp_path / "index"
    copy_index(demo_index_hashing, target)
    return target


def test_kept_copy_gives_the_engines_batches(demo_index_hashing: Path) -> None:
    emb = get_embedder("hashing")
    with open_store(demo_index_hashing) as store:
        for text in QUERIES:
            qv = emb.embed([text])[0]
            for fetch_k in (1, 7, 30, 200):
                for vectors in (False, True):
                    for with_text in (False, True):
                        store.keep_columns(False)
                        plain = store.search_dense(text, qv, fetch_k, with_vectors=vectors,
                                                   with_text=with_text)
                        assert store.keep_columns(True)
                        kept = store.search_dense(text, qv, fetch_k, with_vectors=vectors,
                                                  with_text=with_text)
                        assert store._columns is not None  # the copy answered
                        same(plain, kept)
            priors = {t: 0.4 + 0.05 * i for i, t in enumerate(SOURCE_TYPES)}
            for vectors in (False, True):
                store.keep_columns(False)
                plain = store.search_formula(text, qv, 60, 40, priors, with_vectors=vectors)
                store.keep_columns(True)
                same(plain, store.search_formula(text, qv, 60, 40, priors,
                                                 with_vectors=vectors))
            store.keep_columns(False)
            plain = store.search_bm25(text, 20, with_text=True)
            store.keep_columns(True)
            same(plain, store.search_bm25(text, 20, with_text=True))


def test_writes_drop_the_copy_and_the_next_search_sees_them(index_copy: Path) -> None:
    from credrank.documents.schema import Document
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    emb = get_embedder("hashing")
    text = QUERIES[0]
    qv = emb.embed([text])[0]
    with open_store(index_copy, create=True) as store:
        assert store.keep_columns()
        first = store.search_dense(text, qv, 5)
        assert store._columns is not None
        top = str(first.doc_ids[0])
        set_fields(store, {top: {"machine_text": 1.5, "machine_text_key": "k"}})
        assert store._columns is None
        again = store.search_dense(text, qv, 5)
        assert again.column("machine_text")[0] == 1.5
        assert again.column("machine_text_key")[0] == "k"
        doc = Document(id="new-doc", text=text + " " + text, url="https://www.cdc.gov/x")
        index_documents(iter([doc]), store, emb, SourceTyper([]))
        assert store._columns is None
        after = store.search_dense(text, qv, 50)
        assert "new-doc" in list(after.doc_ids)
        store.keep_columns(False)
        same(store.search_dense(text, qv, 50), after)


def test_a_point_the_copy_does_not_know_is_read_from_the_engine(demo_index_hashing: Path
                                                                ) -> None:
    emb = get_embedder("hashing")
    text = QUERIES[1]
    qv = emb.embed([text])[0]
    with open_store(demo_index_hashing) as store:
        plain = store.search_dense(text, qv, 10)
        store.keep_columns(True)
        store._columns = PayloadColumns(("doc_id",), [(uuid.uuid4(), {"doc_id": "x"})])
        same(plain, store.search_dense(text, qv, 10))
        assert store._columns is None  # dropped as stale


def test_columns_keep_list_values_whole() -> None:
    ids = [uuid.uuid4() for _ in range(3)]
    copy = PayloadColumns(("doc_id", "cites"), [
        (ids[0], {"doc_id": "a", "cites": ["x", "y"]}),
        (ids[1], {"doc_id": "b", "cites": ["z", "w"]}),
        (ids[2], {"doc_id": "c"})])
    rows = copy.rows([ids[2], ids[0]])
    assert rows is not None
    taken = copy.take(rows)
    assert list(taken["doc_id"]) == ["c", "a"]
    assert taken["cites"][0] is None and taken["cites"][1] == ["x", "y"]
    assert copy.rows([uuid.uuid4()]) is None


def test_the_searcher_keeps_the_copy_for_the_library(demo_index_hashing: Path) -> None:
    from credrank.searcher import Searcher

    spec = Searcher.spec(fetch_k=60, pushdown=False, select="mmr",
                         select_params={"diversity": 0.3})
    searcher = Searcher.open(demo_index_hashing)
    try:
        before = searcher.search_json("masks and flu", spec)
        assert searcher.keep_columns() is True
        assert searcher.store._columns is not None
        after = searcher.search_json("masks and flu", spec)
        assert [h["doc_id"] for h in before["hits"]] == [h["doc_id"] for h in after["hits"]]
    finally:
        searcher.close()


def test_compact_columns_give_the_payload_values_back_exactly() -> None:
    """Every kind (strings, floats, ints, [start, end] pairs, missing, mixed) comes back as
    the same Python values, with the same types, ``None`` where a payload lacks the field;
    integer point ids are searched, an unknown one answers ``None``."""
    payloads = [
        {"doc_id": "a", "source_type": "blog", "domain_score": 0.5, "passage": 0,
         "passages": 3, "span": [0, 10], "mixed": 1, "odd": ["x"]},
        {"doc_id": "b", "source_type": "blog", "passage": 2, "span": None, "mixed": 1.5},
        {"doc_id": "c", "domain_score": 1.0, "passages": 1, "span": [5, 2 ** 40],
         "mixed": "s"},
        {"doc_id": "d"},
    ]
    fields = ("doc_id", "source_type", "domain_score", "passage", "passages", "span",
              "mixed", "odd", "absent")
    ids = [17, 3, 2 ** 62, 99]
    copy = PayloadColumns(fields, list(zip(ids, payloads, strict=True)))
    kinds = copy.kinds()
    assert kinds["doc_id"] == "str" and kinds["domain_score"] == "float"
    assert kinds["passage"] == "int" and kinds["span"] == "pair"
    assert kinds["mixed"] == "object" and kinds["absent"] == "none"
    order = [2 ** 62, 99, 17, 3]
    rows = copy.rows(order)
    assert rows is not None
    taken = copy.take(rows)
    for i, pid in enumerate(order):
        payload = payloads[ids.index(pid)]
        for name in fields:
            got, want = taken[name][i], payload.get(name)
            assert got == want and type(got) is type(want), (name, got, want)
    assert copy.rows([5]) is None and copy.rows(["17"]) is None
    assert copy.nbytes() > 0
    assert copy.attach_vectors([(pid, [float(pid % 7), 1.0]) for pid in ids], 2)
    assert copy.vectors is not None
    np.testing.assert_array_equal(copy.vectors[rows][:, 0], [2 ** 62 % 7, 99 % 7, 3, 3])
    assert not copy.attach_vectors([(17, [1.0, 1.0])], 2) and copy.no_vectors


def test_the_copy_keeps_the_passage_fields_of_a_split_index(tmp_path: Path) -> None:
    """On an index of split documents the copy's passage, passages and span columns (an int
    pair stored as two int64 columns) come out as the engine's payload gives them, per
    passage and per document, with the passage text cut the same way."""
    from credrank.documents.schema import Document
    from credrank.index.ingest import index_documents
    from credrank.index.passages import Chunking
    from credrank.provenance import SourceTyper

    emb = get_embedder("hashing")
    filler = " ".join(f"Sentence {i} says nothing about the question at all." for i in range(60))
    docs = [Document(id="long", text=filler + " Zorbula is the capital of Freedonia.",
                     url="https://www.nih.gov/a", title="Annual report")]
    docs += [Document(id=f"d{i}", text=f"Weather news number {i} of the week.",
                      url=f"https://site{i}.example.org/x") for i in range(8)]
    with open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim, create=True,
                    chunking=Chunking(40, 8)) as store:
        index_documents(iter(docs), store, emb, SourceTyper([]))
        qv = emb.embed(["capital of Freedonia"])[0]
        for unit in ("passage", "document"):
            for with_text in (False, True):
                store.keep_columns(False)
                plain = store.search_dense("capital of Freedonia", qv, 30, unit=unit,
                                           with_text=with_text)
                assert store.keep_columns(True)
                assert store._columns is not None
                assert store._columns.kinds()["span"] == "pair"
                kept = store.search_dense("capital of Freedonia", qv, 30, unit=unit,
                                          with_text=with_text)
                same(plain, kept)
                if with_text:
                    assert list(plain.column("text")) == list(kept.column("text"))
        assert any(isinstance(c, int) and c > 1 for c in kept.column("passages"))
