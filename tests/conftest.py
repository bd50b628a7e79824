"""Shared test fixtures.

``shared_data``: the real data sets in ``../shared/data`` beside the checkout (never copied into
the repository); tests that use it are skipped with a clear message when it is absent.
``write``: writes a text or bytes file under ``tmp_path`` and returns its path.
``PausedIndexer``: an indexer child process stopped mid-run at a known batch (no race, no
sleep), for the interruption and lock tests.
``make_batch``: builds a :class:`~credrank.core.candidates.Candidates` batch from similarities
and metadata columns (the one factory tests use instead of building batches by hand).
"""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from credrank.core.candidates import Candidates
from credrank.index.diskspace import free_bytes

# Progress in a log (stderr not a terminal, as in every test) prints a line every
# $CREDRANK_PROGRESS_INTERVAL seconds: a day here, so that no test's stderr depends on how fast
# the machine is; the tests of those lines set it to 0 (a line at every report).
os.environ.setdefault("CREDRANK_PROGRESS_INTERVAL", "86400")
# One compute thread per process: `make test` runs one pytest-xdist worker per core, and torch's
# OpenMP pool and onnxruntime's (one thread per core in each worker, and in each `credrank`
# child) on top of that oversubscribe the cores, where their spin-waiting burns CPU time for
# nothing (measured on 2 cores: the model-loading test files took 18 % less CPU and 25 % less
# wall time with one thread, even run serially). Both read OMP_NUM_THREADS (onnxruntime through
# credrank.index.onnx_embed.threads_from_env); set before any test module imports torch; the
# children inherit it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
# The collector's first generation at 10,000 allocations instead of 700, in the test processes
# only: a worker holds every test module, torch and the session's fixtures, so each full
# collection walks millions of objects (≈ 0.35 s; 17–19 a worker). Measured over `make test`:
# 13.9 s of collections in the two workers at the default, 6.1 s at 10,000 (docs/results.md,
# the test suite's "Later still"). Nothing is left uncollected: the same objects are freed,
# less often.
gc.set_threshold(10_000, 10, 10)

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"

#: where the tests' files go when nothing else is said: a RAM-backed file system of at least
#: :data:`MEMORY_TMP_FREE` free bytes (``/dev/shm`` on Linux), else the system's temporary folder
MEMORY_TMP = Path("/dev/shm")
MEMORY_TMP_FREE = 2 << 30  # a full run held about 1 GB there at its peak (docs/development.md)
#: the environment variable that says where instead (``--basetemp`` does too)
TEST_TMP_ENV = "CREDRANK_TEST_TMP"


def memory_tmp(where: Path = MEMORY_TMP, need: int = MEMORY_TMP_FREE) -> Path | None:
    """``where`` if it is a writable tmpfs with ``need`` bytes free, else ``None``."""
    try:
        mounts = Path("/proc/self/mounts").read_text(encoding="utf-8").splitlines()
    except OSError:  # not Linux
        return None
    if not any(f.split()[1:3] == [str(where), "tmpfs"] for f in mounts if f.strip()):
        return None
    return where if free_bytes(where) >= need and os.access(where, os.W_OK) else None


@pytest.hookimpl(tryfirst=True)  # before pytest's tmpdir plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    """The session's temporary files in memory (:func:`memory_tmp`) unless ``--basetemp`` or
    ``$CREDRANK_TEST_TMP`` says where: the engine syncs every index it writes (``fsync``,
    ``msync``), and on a disk that was 13–15 s of the suite's 43–44 s of system time
    (docs/development.md, "Where the tests write"). A fresh folder per run (pytest-xdist's
    workers get theirs under it), removed at the end of a run that passed
    (:func:`pytest_sessionfinish`)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is not None or config.option.basetemp:
        return
    chosen = os.environ.get(TEST_TMP_ENV)
    parent = Path(chosen) if chosen else memory_tmp()
    if parent is None:
        return  # the system's temporary folder, as pytest chooses it
    parent.mkdir(parents=True, exist_ok=True)
    config.option.basetemp = tempfile.mkdtemp(prefix="credrank-tests-", dir=parent)
    config.stash[_MADE_BASETEMP] = Path(config.option.basetemp)


_MADE_BASETEMP = pytest.StashKey[Path]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """The folder :func:`pytest_configure` made: removed after a run that passed, else kept
    for a look at the failed tests' files, and said so."""
    made = session.config.stash.get(_MADE_BASETEMP, None)
    if made is None:
        return
    if exitstatus == 0:
        shutil.rmtree(made, ignore_errors=True)
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        memory = " (in memory: remove it when done)" if made.parent == MEMORY_TMP else ""
        reporter.write_line(f"the tests' files are kept in {made}{memory}")


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """Path to ``../shared/data``; skips the test when the folder is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not available: expected the folder {SHARED_DATA} "
                    "(../shared/data beside the checkout, see shared/data/SOURCES.md)")
    return SHARED_DATA


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """``write(name, content)``: create ``tmp_path/name`` (str as UTF-8, bytes as is)."""

    def _write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8", newline="")
        return path

    return _write


BatchFactory = Callable[..., Candidates]


def build_batch(sims: Sequence[float], *, ids: Sequence[str] | None = None, query: str = "q",
                vectors: Sequence[Sequence[float]] | np.ndarray | None = None,
                factors: Mapping[str, Sequence[float]] | None = None,
                **columns: Sequence[Any]) -> Candidates:
    """A batch of ``len(sims)`` candidates ``d0, d1, …`` (or ``ids``) with retrieval scores
    ``sims``; each keyword is a metadata column (``source_type=[…]``, ``text=[…]``, …), each
    ``factors`` entry a factor in [0, 1]. Nothing is defaulted but the ids and the query."""
    n = len(sims)
    ids = list(ids) if ids is not None else [f"d{i}" for i in range(n)]
    for name, values in columns.items():
        if len(values) != n:
            raise ValueError(f"column {name!r}: expected {n} values, got {len(values)}")
    meta = [{name: values[i] for name, values in columns.items()} for i in range(n)]
    batch = Candidates.from_records(query, ids, list(sims), meta,
                                    vectors=None if vectors is None else np.asarray(vectors))
    for name, values in (factors or {}).items():
        batch = batch.with_factor(name, np.asarray(values, dtype=float), low=0.0, high=1.0)
    return batch


@pytest.fixture
def make_batch() -> BatchFactory:
    """:func:`build_batch` as a fixture."""
    return build_batch


#: the indexer child: after each batch it says so on stdout and waits for a go-ahead line on
#: stdin, so the parent can act at a known point mid-run (no race, no sleep).
#: argv: corpus, index dir, engine (edge | qdrant), batch size.
INDEXER_SCRIPT = """
import signal
import sys
# Ctrl-C semantics whatever the disposition this process inherited: a shell that starts a job in
# the background (CI, nohup, make under &) sets SIGINT to "ignore", and Python then installs no
# KeyboardInterrupt handler, so the signal would never arrive.
signal.signal(signal.SIGINT, signal.default_int_handler)
from credrank.documents import iter_documents
from credrank.index import open_store
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.provenance import SourceTyper
corpus, where, engine, batch_size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
extra = {"qdrant_path": where + "-qdrant"} if engine == "qdrant" else {}
emb = get_embedder("hashing")
idx = open_store(where, engine, embedder=emb.name, dim=emb.dim, create=True, **extra)
batches = 0
def tick(n):
    global batches
    batches += 1
    print(f"batch {batches} done", flush=True)
    if not sys.stdin.readline():
        raise SystemExit("no go-ahead: stdin closed")
try:
    index_documents(iter_documents(corpus), idx, emb, SourceTyper(), batch_size=batch_size,
                    on_batch=tick)
finally:
    idx.close()
print("done", flush=True)
"""


class PausedIndexer:
    """``credrank`` indexing ``corpus`` into ``where`` in a child process, stopped after batch
    ``pause_at`` (flushed, waiting for a go-ahead). Index with ``get_embedder("hashing")``."""

    def __init__(self, corpus: Path, where: Path, *, engine: str = "edge",
                 batch_size: int = 10, pause_at: int = 1) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", INDEXER_SCRIPT, str(corpus), str(where), engine,
             str(batch_size)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env={**os.environ})
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout
        for k in range(1, pause_at + 1):
            line = self.stdout.readline()
            assert line == f"batch {k} done\n", f"indexer said {line!r}, expected batch {k}"
            if k < pause_at:
                self.go()

    def go(self) -> None:
        self.stdin.write("go\n")
        self.stdin.flush()

    def finish(self) -> int:
        """Let the child run to its end; its exit status."""
        self.go()
        for line in self.stdout:
            if line.startswith("batch "):
                self.go()
            elif line == "done\n":
                break
        return self.proc.wait(timeout=120)

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=120)
        self.stdin.close()
        self.stdout.close()


def built_once(tmp_path_factory: pytest.TempPathFactory, name: str,
               build: Callable[[Path], Any]) -> Path:
    """``build(folder)``'s index, built once per test run and shared by the pytest-xdist
    workers: the first worker to get here builds it into the run's common temporary folder
    under a file lock (a build that did not finish is built again), the others wait; each
    worker gets its own sparse copy (:func:`sparse_copy.copy_index`), since the engine opens an
    index in one process at a time. Without xdist: built in this session's folder."""
    from filelock import FileLock

    from sparse_copy import copy_index

    mine = tmp_path_factory.mktemp(name) / "index"
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        build(mine)
        return mine
    shared = tmp_path_factory.getbasetemp().parent / f"shared-{name}"
    with FileLock(f"{shared}.lock"):
        if not (shared / "built").is_file():
            shutil.rmtree(shared, ignore_errors=True)
            shared.mkdir()
            build(shared / "index")
            (shared / "built").touch()
    copy_index(shared / "index", mine)
    return mine


@pytest.fixture(scope="session")
def demo_index_hashing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo corpus indexed with the hashing embedder (no model), built once per run
    (:func:`built_once`). Tests open it read-only (a writer would lock out the others)."""
    from credrank.demo_corpus import build_demo_index

    return built_once(tmp_path_factory, "demo-hashing",
                      lambda where: build_demo_index(where, "hashing"))


@pytest.fixture(scope="session")
def demo_index_minilm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo corpus indexed with MiniLM (loads the model), built once per run
    (:func:`built_once`)."""
    from credrank.demo_corpus import build_demo_index

    return built_once(tmp_path_factory, "demo-minilm",
                      lambda where: build_demo_index(where, "minilm"))
