"""``credrank index`` when a step fails after records were read (a full disk at a write or at
the search graph, the engine, an index-time score, the rejects file itself): every record
read is still indexed or reported with its reason — the rejects file written, the rejects
and dropped fields listed on stderr, ``--json`` printed with an ``error`` — before the run
exits 2; and its errors in the command's own words (flags, not the library's keywords).

The failing step is simulated by patching it (as a tester did: the real checks are
``require_free`` and the engine's own errors); a real full tmpfs is tests/test_disk_full.py.
The CLI runs in process (``cli_inprocess``), so a patch applies to it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_inprocess import run_cli
from cli_process import assert_clean_error
from credrank.index.errors import StoreError

GOOD = [{"id": f"d{i}", "text": f"Document number {i} about the weather.",
         "url": f"https://s{i}.example.com/x"} for i in range(4)]
BAD = [{"id": "d0", "text": "a repeated id"},            # rejected: duplicate id
       {"text": "no id here"},                            # rejected: no id
       {"id": "late", "text": "dated", "published_at": "2020-02-30"}]  # dropped: the date


def _corpus(path: Path) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in [*GOOD, *BAD]), encoding="utf-8")
    return path


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _says_the_rejects(proc: Any) -> None:
    """The two rejects and the dropped date are on stderr, the run exits 2."""
    assert proc.returncode == 2, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "field 'id': expected a unique id, got 'd0' again" in said
    assert "expected a non-empty id" in said
    assert "field 'published_at' dropped" in said


def _full_at(monkeypatch: pytest.MonkeyPatch, step: str) -> None:
    """``require_free`` of Qdrant Edge says the disk is full for the step whose description
    holds ``step`` (``optimiz``: the search graph; ``writing``: a batch of points)."""
    import credrank.index.qdrant_edge as edge

    real = edge.require_free

    def require_free(path: Any, need: int, what: str) -> None:
        real(path, 10**15 if step in what else need, what)

    monkeypatch.setattr(edge, "require_free", require_free)


def test_a_full_disk_at_the_search_graph_still_reports_the_rejects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the rejects file was never written and stdout stayed empty: 2 rejects and a dropped
    # date reported nowhere, the advice (`credrank optimize`) never showing them either
    corpus = _corpus(tmp_path / "c.jsonl")
    _full_at(monkeypatch, "optimiz")
    proc = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                   "-q", "--json")
    _says_the_rejects(proc)
    assert "disk full" in proc.stderr and "credrank optimize --index" in proc.stderr
    doc = json.loads(proc.stdout)
    assert "disk full" in doc["error"] and "documents are indexed" in doc["error"]
    assert (doc["indexed"], doc["rejected"], doc["fields_dropped"]) == (5, 2, 1)
    assert doc["documents"] == 5
    rows = _rows(tmp_path / "idx" / "rejects.jsonl")
    assert sorted(r["kind"] for r in rows) == ["dropped", "rejected", "rejected"]


def test_a_full_disk_mid_load_reports_what_was_read(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = _corpus(tmp_path / "c.jsonl")
    _full_at(monkeypatch, "writing")
    proc = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                   "-q")
    _says_the_rejects(proc)
    assert "disk full" in proc.stderr and "re-run the same command" in proc.stderr
    assert len(_rows(tmp_path / "idx" / "rejects.jsonl")) == 3


def test_an_engine_error_and_a_failed_score_still_report_the_rejects(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import credrank.cli.score as score
    import credrank.index.ingest as ingest

    corpus = _corpus(tmp_path / "c.jsonl")
    real = ingest.write_documents

    def broken(index: Any, docs: Any, *args: Any) -> None:
        if any(d.id == "late" for d in docs):
            raise StoreError("the engine went away")
        real(index, docs, *args)

    monkeypatch.setattr(ingest, "write_documents", broken)
    proc = run_cli("index", corpus, "--index", tmp_path / "a", "--embedder", "hashing", "-q",
                   "--json", "--batch-size", "2")
    _says_the_rejects(proc)
    doc = json.loads(proc.stdout)
    assert doc["error"].startswith("the engine went away; re-run the same command")
    assert doc["indexed"] == 4 and doc["rejected"] == 2  # the batches before the failure
    assert (tmp_path / "a" / "rejects.jsonl").is_file()
    monkeypatch.setattr(ingest, "write_documents", real)

    # --score: a failure of the scorer after the load (the scorer is not run: it is patched)
    def failing(*_: Any, **__: Any) -> Any:
        raise RuntimeError("the model ran out of memory")

    monkeypatch.setattr(score, "check_scores", lambda names: list(names or []))
    monkeypatch.setattr(score, "score_machine_text", failing)
    proc = run_cli("index", corpus, "--index", tmp_path / "b", "--embedder", "hashing", "-q",
                   "--score", "machine-text")
    _says_the_rejects(proc)
    assert "the model ran out of memory; the documents are indexed" in proc.stderr
    assert "indexed 5, rejected 2" in " ".join(proc.stdout.split())
    assert len(_rows(tmp_path / "b" / "rejects.jsonl")) == 3


def test_an_unwritable_rejects_file_is_one_error_after_the_index_is_complete(
        tmp_path: Path) -> None:
    # --rejects /dev/full was a traceback (OSError from write_rejects), exit 1, no summary
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    corpus = _corpus(tmp_path / "c.jsonl")
    proc = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                   "--rejects", "/dev/full", "-q")
    assert_clean_error(proc, "--rejects /dev/full: writing failed: No space left on device; "
                             "the documents are indexed")
    _says_the_rejects(proc)
    said = " ".join(proc.stdout.split())
    assert "indexed 5, rejected 2" in said and "rejects listed above (not written)" in said
    again = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                    "-q", "--json")
    assert json.loads(again.stdout)["unchanged"] == 5  # the index was complete


def test_index_errors_name_the_flags(tmp_path: Path) -> None:
    # the CLI's errors carried the library's spellings: `in Python fields={…}`, `chunk_tokens
    # 64`, and a model file named without its option
    table = tmp_path / "t.csv"
    table.write_text("doc,body\nd1,hello\n", encoding="utf-8")
    proc = run_cli("index", table, "--index", tmp_path / "x", "--embedder", "hashing")
    assert_clean_error(proc, "map one with --field COLUMN=id); nothing was read")
    assert "fields=" not in proc.stderr
    proc = run_cli("index", table, "--index", tmp_path / "x", "--embedder", "hashing",
                   "--field", "doc=id", "--field", "body=text", "--field", "nope=url")
    assert_clean_error(proc, "the column 'nope' mapped by --field nope=url, got 2 columns")
    assert "fields=" not in proc.stderr
    corpus = _corpus(tmp_path / "c.jsonl")
    made = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing", "-q")
    assert made.returncode == 0, made.stderr
    proc = run_cli("index", corpus, "--index", tmp_path / "idx", "--chunk-tokens", "64",
                   "--chunk-overlap", "16")
    assert_clean_error(proc, "index was built with long texts not split (passage size 0), "
                             "not passages of at most 64 tokens overlapping by 16")
    assert "chunk_tokens" not in proc.stderr and "chunk_overlap" not in proc.stderr
    model = tmp_path / "none.json"
    proc = run_cli("index", corpus, "--index", tmp_path / "idx", "--credibility-model", model)
    assert_clean_error(proc, f"--credibility-model {model}: the credibility model does not "
                             "exist")
    proc = run_cli("score", "credibility", "--index", tmp_path / "idx", "--model", model)
    assert_clean_error(proc, f"--model {model}: the credibility model does not exist")
    proc = run_cli("score", "machine-text", "--index", corpus)
    assert_clean_error(proc, f"--index {corpus}: expected an index directory, got a file")


def test_ctrl_c_mid_load_reports_what_was_read_and_how_to_finish(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C exited 130 without a word: no summary, the rejects read so far unwritten (and
    the previous run's rejects.jsonl left as if it were this run's). It says what was read,
    what the index holds and that a re-run completes it, writes the rejects, exits 130."""
    import credrank.index.ingest as ingest

    corpus = _corpus(tmp_path / "c.jsonl")
    real = ingest.write_documents

    def interrupted(index: Any, docs: Any, *args: Any) -> None:
        if any(d.id == "late" for d in docs):
            raise KeyboardInterrupt
        real(index, docs, *args)

    monkeypatch.setattr(ingest, "write_documents", interrupted)
    proc = run_cli("index", corpus, "--index", tmp_path / "a", "--embedder", "hashing", "-q",
                   "--json", "--batch-size", "2")
    assert proc.returncode == 130, proc.stderr
    said = " ".join(proc.stderr.split())
    assert "interrupted:" in said and "re-run the same command to complete the index" in said
    doc = json.loads(proc.stdout)
    assert doc["error"].startswith("interrupted:") and doc["indexed"] == 4
    assert doc["rejected"] == 2 and (tmp_path / "a" / "rejects.jsonl").is_file()
