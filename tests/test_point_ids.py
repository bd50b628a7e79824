"""Point ids of Qdrant Edge indexes (format 2): a 63-bit hash of the document id, returned by
the engine as a plain integer; a collision is refused, never merged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credrank.documents.schema import Document
from credrank.index.embed import get_embedder
from credrank.index.errors import StoreError
from credrank.index.ingest import index_documents
from credrank.index.manifest import FORMAT_VERSION
from credrank.index.opener import open_store
from credrank.index.payload import point_id, point_id_u64
from credrank.provenance import SourceTyper


def test_point_id_u64_is_a_stable_63_bit_integer() -> None:
    ids = [point_id_u64(f"doc-{i}") for i in range(2000)]
    assert len(set(ids)) == len(ids)
    assert all(isinstance(i, int) and 0 <= i < 2**63 for i in ids)
    assert point_id_u64("doc-1") == point_id_u64("doc-1")
    assert point_id_u64("é") != point_id_u64("e")


def test_a_new_edge_index_keys_points_by_u64(tmp_path: Path) -> None:
    emb = get_embedder("hashing")
    with open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim,
                    create=True) as store:
        index_documents(iter([Document(id="a", text="alpha"), Document(id="b", text="beta")]),
                        store, emb, SourceTyper([]))
        hits = store.search_dense("alpha", emb.embed(["alpha"])[0], 2)
        assert set(hits.doc_ids) == {"a", "b"}
        assert store.existing_hashes(["a", "b", "c"]).keys() == {"a", "b"}
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["point_ids"] == "u64" and manifest["format"] == FORMAT_VERSION == 3


def test_a_collision_is_refused_not_merged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                           ) -> None:
    emb = get_embedder("hashing")
    with open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim,
                    create=True) as store:
        index_documents(iter([Document(id="a", text="alpha")]), store, emb, SourceTyper([]))
        monkeypatch.setattr(store, "point_id", lambda doc_id: 7)  # every id collides
        with pytest.raises(StoreError, match=r"'x' and 'y' have the same point id"):
            store._check_ids([("x", "x"), ("y", "y")])
        monkeypatch.setattr(store, "point_id", lambda doc_id: point_id_u64("a"))
        with pytest.raises(StoreError, match=r"'z' has the point id of 'a', already in the "
                                             r"index"):
            store._check_ids([("z", "z")])
        store._check_ids([("a", "a")])  # the same document again: no collision


def test_a_newer_format_is_refused_by_name(tmp_path: Path) -> None:
    emb = get_embedder("hashing")
    with open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim, create=True):
        pass
    path = tmp_path / "idx" / "manifest.json"
    data = json.loads(path.read_text())
    data["format"] = FORMAT_VERSION + 1
    path.write_text(json.dumps(data))
    with pytest.raises(StoreError, match="newer than this credrank reads"):
        open_store(tmp_path / "idx")


def test_an_index_of_format_1_keeps_its_uuid5_points(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Indexes written before format 2 (uuid5 point ids) read, write, score and keep their
    columnar copy as before."""
    from credrank.index import qdrant_edge
    from credrank.index.manifest import Manifest
    from credrank.index.scoring import set_fields

    with monkeypatch.context() as m:  # create it as the previous version did
        m.setattr(qdrant_edge, "Manifest",
                  lambda **kw: Manifest(**{**kw, "point_ids": "uuid5", "format": 1}))
        emb = get_embedder("hashing")
        with open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim,
                        create=True) as store:
            index_documents(iter([Document(id="a", text="alpha")]), store, emb,
                            SourceTyper([]))
    manifest = json.loads((tmp_path / "idx" / "manifest.json").read_text())
    assert manifest["point_ids"] == "uuid5" and manifest["format"] == 1
    with open_store(tmp_path / "idx", create=True) as store:
        assert store.point_id("a") == point_id("a")  # the uuid5 string
        index_documents(iter([Document(id="b", text="beta"), Document(id="a", text="alpha")]),
                        store, emb, SourceTyper([]))
        assert len(store) == 2  # "a" overwritten in place, not duplicated
        set_fields(store, {"a": {"machine_text": 0.5, "machine_text_key": "k"}})
        assert store.keep_columns()
        hits = store.search_dense("alpha", emb.embed(["alpha"])[0], 2)
        assert dict(zip(hits.doc_ids, hits.column("machine_text"), strict=True))["a"] == 0.5
