"""A full disk is an error, not a signal (issue 37, N2 and N8): on a small tmpfs, ``credrank
index`` and ``credrank search`` exit 2 saying so (never SIGBUS, exit 135), an interrupted
index is completed exactly once space is freed, and ``credrank serve`` answers 507 to
``/index`` and ``/feedback`` while it goes on answering searches.

Mounting a tmpfs needs root (or ``CAP_SYS_ADMIN``); without it these tests skip saying so.
They run real processes: only a process shows a signal, an exit code and its stderr.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cli_process import FORBIDDEN, assert_clean_error, run_cli
from serving import running_server

MIB = 1 << 20


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A 400 MiB tmpfs at a fresh folder (unmounted afterwards)."""
    where = tmp_path / f"tmpfs-{uuid.uuid4().hex[:8]}"
    where.mkdir()
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400m", "tmpfs", str(where)],
                          capture_output=True, text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {made.stderr.strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(where: Path, leave_mib: int) -> Path:
    """Take the free space of ``where``'s file system but ``leave_mib`` MiB (a file)."""
    stat = os.statvfs(where)
    free = stat.f_bavail * stat.f_frsize
    path = where / "filler"
    with path.open("wb") as f:
        os.posix_fallocate(f.fileno(), 0, max(free - leave_mib * MIB, 1))
    return path


def corpus(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"d{i}", "text": "word " * 200 + str(i),
                                        "url": f"https://s{i}.example.com/x"}) + "\n"
                            for i in range(n)))
    return path


def no_signal(proc: subprocess.CompletedProcess[str]) -> None:
    assert proc.returncode >= 0 and proc.returncode != 135, proc.stderr
    for bad in FORBIDDEN:
        assert bad not in proc.stderr, proc.stderr


def test_index_and_search_on_a_full_disk_exit_2_and_complete_once_freed(
        tmpfs: Path, tmp_path: Path) -> None:
    small = corpus(tmp_path / "small.jsonl", 200)
    big = corpus(tmp_path / "big.jsonl", 3000)
    idx = tmpfs / "idx"
    made = run_cli("index", small, "--index", idx, "--embedder", "hashing", "--no-optimize")
    assert made.returncode == 0, made.stderr
    filler = fill(tmpfs, 20)
    searched = run_cli("search", "word", "--index", idx)
    assert_clean_error(searched, "disk full", "opening the index")
    indexed = run_cli("index", big, "--index", idx, "--embedder", "hashing", "--no-optimize")
    assert_clean_error(indexed, "disk full", "nothing of it was written")
    filler.unlink()
    filler = fill(tmpfs, 130)  # room for a batch or so, not for the whole file
    partly = run_cli("index", big, "--index", idx, "--embedder", "hashing", "--no-optimize")
    no_signal(partly)
    if partly.returncode == 2:
        assert "disk full" in partly.stderr and "re-run the same command" in " ".join(
            partly.stderr.split())
    filler.unlink()
    done = run_cli("index", big, "--index", idx, "--embedder", "hashing", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["documents"] == 3000 and report["indexed"] + report["unchanged"] == 3000
    found = run_cli("search", "word 2999", "--index", idx, "--json", "--top-k", "3000",
                    "--priors", "none")
    assert found.returncode == 0, found.stderr
    ids = [h["doc_id"] for h in json.loads(found.stdout)["hits"]]
    assert len(ids) == len(set(ids)) == 3000  # every document once: nothing lost or doubled


def test_a_new_index_on_a_full_disk_is_refused_before_anything_is_written(
        tmpfs: Path, tmp_path: Path) -> None:
    fill(tmpfs, 2)
    proc = run_cli("index", corpus(tmp_path / "c.jsonl", 10), "--index", tmpfs / "idx",
                   "--embedder", "hashing")
    assert_clean_error(proc, "disk full", "creating the index")


def test_the_service_answers_507_to_writes_and_keeps_serving_reads(tmpfs: Path,
                                                                     tmp_path: Path) -> None:
    idx = tmpfs / "idx"
    made = run_cli("index", corpus(tmp_path / "small.jsonl", 50), "--index", idx,
                   "--embedder", "hashing")
    assert made.returncode == 0, made.stderr
    key = "k" * 20
    headers = {"X-API-Key": key}
    docs = [{"id": f"new{i}", "text": "fresh words " * 100, "url": f"https://n{i}.org/x"}
            for i in range(500)]
    with running_server(idx, "--api-key-env", "CREDRANK_DISK_KEY", "--priors-store",
                        str(tmpfs / "priors"), env={"CREDRANK_DISK_KEY": key}) as server:
        filler = fill(tmpfs, 0)  # not a byte left
        wrote = httpx.post(f"{server.url}/index", json={"documents": docs}, headers=headers,
                           timeout=120)
        assert wrote.status_code == 507, wrote.text
        assert wrote.json()["error"] == "insufficient_storage" and "disk full" in wrote.text
        feedback = httpx.post(f"{server.url}/feedback", headers=headers, timeout=60, json={
            "items": [{"source_type": "blog", "relevant": True}]})
        assert feedback.status_code == 507, feedback.text
        read = httpx.post(f"{server.url}/search", json={"query": "word"}, timeout=60)
        assert read.status_code == 200, read.text  # reads go on
        filler.unlink()
        again = httpx.post(f"{server.url}/index", json={"documents": docs}, headers=headers,
                           timeout=120)
        assert again.status_code == 200, again.text
        assert again.json()["indexed"] == 500
        assert httpx.post(f"{server.url}/feedback", headers=headers, timeout=60, json={
            "items": [{"source_type": "blog", "relevant": True}]}).status_code == 200
    assert server.proc.returncode is not None
