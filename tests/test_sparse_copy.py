"""The tests' index copies keep the engine's sparse files sparse (tests/sparse_copy.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

import sparse_copy as sc
from credrank.searcher import Searcher

MIB = 1 << 20


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(MIB), b""):
            h.update(chunk)
    return h.hexdigest()


def _on_disk(path: Path) -> int:
    """Bytes allocated to ``path`` (a file, or every file under a folder)."""
    files = [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file()]
    return sum(p.stat().st_blocks * 512 for p in files)


@pytest.fixture
def holey(tmp_path: Path) -> Path:
    """A 64 MiB file with three small data regions, the rest holes (where the file system
    keeps holes; else the test that needs them skips)."""
    path = tmp_path / "holey.dat"
    with path.open("wb") as f:
        f.truncate(64 * MIB)
        for offset, data in ((0, b"head"), (10 * MIB + 7, b"middle" * 1000),
                             (64 * MIB - 4, b"tail")):
            f.seek(offset)
            f.write(data)
    return path


def test_a_copy_has_the_same_bytes_and_keeps_the_holes(holey: Path, tmp_path: Path) -> None:
    if _on_disk(holey) > 8 * MIB:
        pytest.skip("this file system does not keep holes in a file")
    copy = Path(sc.sparse_copy(holey, tmp_path / "copy.dat"))
    assert copy.stat().st_size == holey.stat().st_size
    assert _digest(copy) == _digest(holey)
    assert _on_disk(copy) <= _on_disk(holey) + MIB  # shutil.copy2 writes all 64 MiB
    assert copy.stat().st_mtime_ns == holey.stat().st_mtime_ns  # copystat


def test_without_hole_reporting_it_copies_the_whole_file(holey: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sc, "_data_regions", lambda fd, size: None)
    copy = Path(sc.sparse_copy(holey, tmp_path / "copy.dat"))
    assert _digest(copy) == _digest(holey) and copy.stat().st_size == holey.stat().st_size


def test_empty_and_all_hole_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert Path(sc.sparse_copy(empty, tmp_path / "e2")).read_bytes() == b""
    hole = tmp_path / "hole"
    with hole.open("wb") as f:
        f.truncate(3 * MIB)
    copy = Path(sc.sparse_copy(hole, tmp_path / "h2"))
    assert copy.stat().st_size == 3 * MIB and _digest(copy) == _digest(hole)


def test_a_copied_index_is_small_and_answers_as_the_original(demo_index_hashing: Path,
                                                            tmp_path: Path) -> None:
    copy = sc.copy_index(demo_index_hashing, tmp_path / "idx")
    length = sum(p.stat().st_size for p in copy.rglob("*") if p.is_file())
    if _on_disk(demo_index_hashing) > length // 2:
        pytest.skip("the index's files are not sparse on this file system")
    assert _on_disk(copy) <= 2 * _on_disk(demo_index_hashing) + MIB
    assert sorted(p.name for p in copy.iterdir()) == sorted(
        p.name for p in demo_index_hashing.iterdir() if p.name != ".credrank.lock")
    query = "does vitamin d prevent covid"
    with Searcher.open(copy) as searcher:
        got = [h["doc_id"] for h in searcher.search_json(query, text="none")["hits"]]
    with Searcher.open(demo_index_hashing) as searcher:
        want = [h["doc_id"] for h in searcher.search_json(query, text="none")["hits"]]
    assert got == want and got
