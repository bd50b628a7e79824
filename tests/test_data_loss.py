"""The data-loss reproductions of issue 23: every valid record is indexed and the bad one is
rejected with its reason — through ``credrank index`` (in process) and ``POST /index``.

Before, a date pushed out of range by its zone made ``credrank index`` exit 1 with an
``OverflowError`` (none of the chunk's valid records indexed, no rejects file) and ``POST
/index`` answer a plain-text 500; a ``cites`` cell nested deeper than the parser's recursion in
a CSV corpus made the run stop at a ``RecursionError`` (1,000 of 3,000 valid records).
"""

from __future__ import annotations

import asyncio
import csv
import json
import subprocess
from pathlib import Path

import pytest

from cli_inprocess import run_cli
from credrank.documents import Reject, iter_documents
from serving import asgi_client, in_process
from sparse_copy import copy_index

OUT_OF_RANGE = ("0001-01-01T00:00:00+14:00", "9999-12-31T23:00:00-05:00")


def _index(corpus: Path, where: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return run_cli("index", corpus, "--index", where, "--embedder", "hashing", "--no-optimize",
                   *options, timeout=600)


def _rejects(where: Path) -> list[dict]:
    lines = (where / "rejects.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def test_a_date_out_of_range_after_its_zone_is_that_records_reject(tmp_path: Path) -> None:
    corpus = tmp_path / "c.jsonl"
    with corpus.open("w", encoding="utf-8") as out:
        for i in range(50):
            rec = {"id": f"d{i}", "text": f"fever text {i}", "url": "https://www.cdc.gov/x"}
            if i in (20, 21):
                rec["published_at"] = OUT_OF_RANGE[i - 20]
            out.write(json.dumps(rec) + "\n")
    # lenient reading (the default): the records are indexed without the date (issue 27)
    proc = _index(corpus, tmp_path / "idx")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and "indexed 50, rejected 0" in proc.stdout
    assert "2 fields dropped in 2 records" in proc.stdout
    dropped = _rejects(tmp_path / "idx")
    assert [(r["kind"], r["line"]) for r in dropped] == [("dropped", 21), ("dropped", 22)]
    assert all(r["field"] == "published_at" and "years 1–9999 in UTC" in r["reason"]
               for r in dropped)
    # strict reading: the records are rejected (exit 1 for the rejects)
    proc = _index(corpus, tmp_path / "strict", "--strict")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "indexed 48, rejected 2" in proc.stdout
    rejects = _rejects(tmp_path / "strict")
    assert [r["line"] for r in rejects] == [21, 22]
    assert all(r["field"] == "published_at" and "years 1–9999 in UTC" in r["reason"]
               for r in rejects)


@pytest.mark.slow
def test_a_deeply_nested_cites_cell_is_that_records_reject(tmp_path: Path) -> None:
    corpus = tmp_path / "c.csv"
    with corpus.open("w", encoding="utf-8", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["id", "text", "cites"])
        for i in range(3000):
            writer.writerow([f"d{i}", f"text {i}", "[" * 5000 + "]" * 5000 if i == 1000 else ""])
    proc = _index(corpus, tmp_path / "idx", "--strict")  # lenient: the cell is dropped
    assert proc.returncode == 1, proc.stderr
    assert "indexed 2999, rejected 1" in proc.stdout, proc.stdout
    (reject,) = _rejects(tmp_path / "idx")
    assert reject["line"] == 1002 and reject["field"] == "cites"
    assert "nesting" in reject["reason"]


def test_any_exception_while_converting_a_record_is_its_reject(tmp_path: Path,
                                                               monkeypatch) -> None:
    """The declared policy for the unforeseen: the record's reject, never the run's end."""
    import credrank.documents.readers as readers

    real = readers._to_document

    def fragile(raw, ctx):
        if raw.line == 2:
            raise OverflowError("something nobody foresaw")
        return real(raw, ctx)

    monkeypatch.setattr(readers, "_to_document", fragile)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": "t"}) + "\n"
                              for i in range(3)), encoding="utf-8")
    out = list(iter_documents(corpus))
    assert [isinstance(x, Reject) for x in out] == [False, True, False]
    assert "OverflowError: something nobody foresaw" in out[1].reason


def test_post_index_answers_the_per_record_rejects(demo_index_hashing: Path,
                                                   tmp_path: Path) -> None:
    where = tmp_path / "index"
    copy_index(demo_index_hashing, where)
    docs = [{"id": "ok-1", "text": "zinc and colds", "url": "https://www.nih.gov/z"},
            {"id": "bad", "text": "old", "published_at": OUT_OF_RANGE[0]},
            {"id": "ok-2", "text": "zinc again", "published_at": "2024-01-02"}]
    body = {"documents": docs, "strict": True}  # lenient: 'bad' is indexed without its date

    async def scenario() -> dict:
        with in_process(where, api_key="k") as app:
            async with asgi_client(app) as client:
                got = await client.post("/index", json=body, headers={"X-API-Key": "k"})
                assert got.status_code == 200, got.text
                return got.json()

    doc = asyncio.run(scenario())
    assert (doc["indexed"], doc["rejected"]) == (2, 1)
    (reject,) = doc["rejects"]
    assert reject["record"] == 2 and reject["field"] == "published_at"
    assert "years 1–9999 in UTC" in reject["reason"]
