"""The engine's search threads (:data:`credrank.index.qdrant_edge.SEARCH_THREADS`).

Qdrant Edge starts a pool of search threads per shard (8 on a 2-core machine) unless its
configuration says otherwise, and persists that setting in the shard. credrank sets one at
every open (with one, the engine runs a search on the calling thread: measured in
docs/results.md), whatever the last opener (or an older credrank) wrote, and the answers are
the same as with a pool.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import qdrant_edge as qe

from credrank.index import qdrant_edge
from credrank.index.embed import get_embedder
from credrank.index.errors import StoreError
from credrank.index.qdrant_edge import EdgeIndex
from demo_answers import demo_answers
from sparse_copy import copy_index

EMB = get_embedder("hashing")

needs_proc = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="counts the process's threads in /proc/self/task")


def threads_an_open_starts(opening: str, path: Path) -> int:
    """The threads a fresh process gains when it opens ``path`` with the expression
    ``opening`` (the engine's search pool is the only thread pool a load starts). Counted as
    tasks in ``/proc/self/task``, which the pool's threads are once the load returns (they
    are created before it returns; their names come later, from each thread itself), and in a
    fresh process since the threads of a closed shard end asynchronously."""
    code = f"""
import os, sys
from contextlib import closing
import qdrant_edge as qe
from credrank.index.qdrant_edge import EdgeIndex
before = len(os.listdir("/proc/self/task"))
with {opening} as opened:
    print(len(os.listdir("/proc/self/task")) - before)
"""
    done = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


def persisted_threads(index: Path) -> int | None:
    return json.loads((index / "shard" / "edge_config.json").read_text())\
        .get("max_search_threads")


@pytest.fixture
def pooled_index(demo_index_hashing: Path, tmp_path: Path) -> Path:
    """A copy of the demo index whose shard persists a pool of 4 search threads, as one
    written by another opener would."""
    path = tmp_path / "index"
    copy_index(demo_index_hashing, path)
    qe.EdgeShard.load(str(path / "shard"), qe.EdgeConfig(
        vectors={"dense": qe.EdgeVectorParams(size=EMB.dim, distance=qe.Distance.Cosine)},
        sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        max_search_threads=4)).close()
    assert persisted_threads(path) == 4
    return path


@needs_proc
def test_the_engine_alone_starts_the_persisted_pool(pooled_index: Path) -> None:
    # the control: what the check below would count if credrank did not set the threads
    assert threads_an_open_starts("closing(qe.EdgeShard.load(sys.argv[1] + '/shard'))",
                                  pooled_index) == 4


@needs_proc
def test_an_open_index_has_the_search_threads_it_sets(pooled_index: Path) -> None:
    assert threads_an_open_starts("EdgeIndex.open(sys.argv[1])", pooled_index) \
        == qdrant_edge.SEARCH_THREADS == 1
    assert persisted_threads(pooled_index) == 1


def test_a_new_index_is_created_with_the_search_threads(tmp_path: Path) -> None:
    with EdgeIndex.open(tmp_path / "new", embedder=EMB.name, dim=EMB.dim, create=True):
        pass
    assert persisted_threads(tmp_path / "new") == 1


def test_same_answers_with_the_engine_pool(demo_index_hashing: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    answers = []
    for threads in (1, 4):
        monkeypatch.setattr(qdrant_edge, "SEARCH_THREADS", threads)
        path = tmp_path / f"t{threads}"
        copy_index(demo_index_hashing, path)
        with EdgeIndex.open(path) as index:
            answers.append(demo_answers(index))
        assert persisted_threads(path) == threads
    assert answers[0] == answers[1]


def test_an_empty_shard_the_manifest_does_not_describe_is_refused(tmp_path: Path) -> None:
    # every open states the vectors the manifest declares (the engine checks them): with no
    # point to compare (what names the manifest for a shard with points, test_passages.py),
    # the engine's reason is the error
    path = tmp_path / "index"
    with EdgeIndex.open(path, embedder=EMB.name, dim=EMB.dim, create=True):
        pass
    manifest = path / "manifest.json"
    manifest.write_text(manifest.read_text().replace(f'"dim": {EMB.dim}', '"dim": 128'))
    with pytest.raises(StoreError, match=r"does not load: .*vector size 128, but got 256"):
        EdgeIndex.open(path)
