"""The index-directory lock: one writer at a time, readers refused (never harmed) meanwhile.

The writer is a child process paused mid-run at a known point (it prints ``batch k done`` after
each batch and waits for a go-ahead line on stdin): no race, no sleep.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import PausedIndexer
from credrank.cli import app
from credrank.index import open_store
from credrank.index.qdrant_edge import EdgeIndex
from credrank.index.store import LOCK_FILE, IndexLock, StoreError

runner = CliRunner()
N, BATCH, PAUSE_AT = 60, 10, 2

def make_corpus(path: Path, n: int = N) -> None:
    with path.open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"d{i:03d}", "text": f"vitamin fever trial number {i}",
                                "url": f"https://www.cdc.gov/page{i}"}) + "\n")


@pytest.fixture
def paused(tmp_path):
    corpus, where = tmp_path / "c.jsonl", tmp_path / "idx"
    make_corpus(corpus)
    child = PausedIndexer(corpus, where, batch_size=BATCH, pause_at=PAUSE_AT)
    yield child, corpus, where
    child.close()


def said(res) -> str:
    """The command's output with rich's line wrapping undone."""
    return " ".join(res.output.split())


def search_cli(where: Path, query: str = "vitamin"):
    return runner.invoke(app, ["search", query, "--index", str(where), "--top-k", "3",
                               "--json"])


def test_search_while_indexing_is_refused_and_the_writer_finishes(paused):
    child, _, where = paused
    res = search_cli(where)
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit)  # typer.Exit: no traceback
    assert f"is being written by PID {child.proc.pid} since" in said(res)
    assert "retry when it has finished" in said(res)
    with pytest.raises(StoreError, match=f"being written by PID {child.proc.pid}"):
        open_store(where)  # the library refuses the same way
    assert child.finish() == 0  # the writer was not harmed
    res = search_cli(where)
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["hits"]) == 3
    with open_store(where) as idx:
        assert len(idx) == N


def test_second_indexer_is_refused_and_the_index_stays_intact(paused):
    child, corpus, where = paused
    manifest = (where / "manifest.json").read_text()
    res = runner.invoke(app, ["index", str(corpus), "--index", str(where),
                              "--embedder", "hashing"])
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit)
    assert f"is being written by PID {child.proc.pid} since" in said(res)
    assert not (where / "rejects.jsonl").exists()  # touched nothing
    assert (where / "manifest.json").read_text() == manifest
    assert child.finish() == 0
    with open_store(where) as idx:
        assert len(idx) == N


def test_a_killed_writer_leaves_a_stale_lock_that_blocks_no_one(paused):
    child, corpus, where = paused
    child.proc.send_signal(signal.SIGKILL)
    assert child.proc.wait(timeout=120) != 0
    stale = json.loads((where / LOCK_FILE).read_text())
    assert stale["pid"] == child.proc.pid and stale["since"]
    res = runner.invoke(app, ["index", str(corpus), "--index", str(where),
                              "--embedder", "hashing"])
    assert res.exit_code == 0, res.output
    assert f"index holds {N} documents" in said(res)
    assert json.loads((where / LOCK_FILE).read_text())["pid"] == os.getpid()
    assert search_cli(where).exit_code == 0


def test_lock_modes(tmp_path):
    where = tmp_path / "idx"
    with IndexLock.reader(where):  # no directory yet: nothing to lock
        pass
    with IndexLock.writer(where, command="test"):
        with pytest.raises(StoreError, match=r"being written by PID \d+ since .*\(test\)"):
            IndexLock.writer(where)
        with pytest.raises(StoreError, match="retry when it has finished"):
            IndexLock.reader(where)
    with IndexLock.reader(where), IndexLock.reader(where):  # readers share
        with pytest.raises(StoreError, match="being read by another process"):
            IndexLock.writer(where)
    IndexLock.writer(where).release()  # everything released


def test_engine_lock_error_becomes_a_store_error(tmp_path):
    with EdgeIndex.open(tmp_path / "i", embedder="hashing", dim=8, create=True):
        with pytest.raises(StoreError, match="in use, by another process or by a store"):
            EdgeIndex.open(tmp_path / "i")  # no directory lock: the engine's own refuses


def test_index_dir_that_is_a_file(tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    with pytest.raises(StoreError, match="expected an index directory, got a file"):
        open_store(path)
    with pytest.raises(StoreError, match="expected an index directory, got a file"):
        open_store(path, embedder="hashing", dim=8, create=True)
    corpus = tmp_path / "c.jsonl"
    make_corpus(corpus, 3)
    for args in (["search", "q", "--index", str(path)],
                 ["index", str(corpus), "--index", str(path), "--embedder", "hashing"]):
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and "expected an index directory, got a file" in said(res)


@pytest.mark.parametrize("args,message", [
    (["--top-k", str(2 ** 64)], "--top-k: expected an integer in [1, 10000000]"),
    (["--fetch-k", str(2 ** 64)], "--fetch-k: expected an integer in [1, 10000000]"),
    (["--top-k", "0"], "--top-k: expected an integer in [1, 10000000], got 0"),
])
def test_k_upper_bound(tmp_path, args, message):
    res = runner.invoke(app, ["search", "q", "--index", str(tmp_path), *args])
    assert res.exit_code == 2 and message in said(res)


@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_empty_query(tmp_path, query):
    res = runner.invoke(app, ["search", query, "--index", str(tmp_path)])
    assert res.exit_code == 2 and "error: query: expected non-empty text" in said(res)


def test_a_full_disk_at_the_lock_is_an_error_and_leaves_no_folder(tmp_path, monkeypatch):
    """On a disk with no byte free the lock's info could not be written: a traceback (exit
    1), and the new folder left holding a lock file."""
    import errno
    import os

    from credrank.index.diskspace import DiskFullError
    from credrank.index.lock import IndexLock

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", full)
    with pytest.raises(DiskFullError, match=r"cannot write the index lock file: No space left "
                                            r"on device \(disk full\); nothing was written"):
        IndexLock.writer(tmp_path / "new")
    assert not (tmp_path / "new").exists()
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "keep.txt").write_text("x", encoding="utf-8")
    with pytest.raises(DiskFullError):
        IndexLock.writer(tmp_path / "mine")
    assert (tmp_path / "mine" / "keep.txt").exists()  # a folder that was there stays
