"""The bench's guards found by the measuring-commands review: a file of another set, a damaged
or unwritable ``--cache``, report paths that must not overwrite or leave stale files, limits
that state the data read, strict CSV rows and Golden-Gaze rows without a host. Tiny synthetic
inputs; no embedding model."""

from __future__ import annotations

import gzip
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from credrank.evaluate.report import MANIFEST, prepare_out_dir, write_report
from credrank.evaluate.result import BenchResult
from credrank.index.embed import CachedEmbedder, CacheWarning, HashingEmbedder
from credrank_bench.datasets import DatasetError, load_dataset
from credrank_bench.datasets.base import read_csv_rows
from credrank_bench.experiments import benches
from credrank_bench.experiments.benches import BenchOptions, run_bench
from credrank_bench.experiments.goldengaze import load_goldengaze
from credrank_bench.experiments.limits import bench_limits
from test_bench_inputs import _bench

# -- a file of another set ---------------------------------------------------------------------

def _news(path: Path) -> Path:
    """NewsPolluted's shape: choices and an answer, 1 real + 3 fakes, no dates."""
    records = [{"id": i, "question": f"what happened {i}?", "choices": ["a", "b"],
                "answer": "a", "docs": [{"id": j, "title": "", "text": f"story {i} {j}",
                                         "cred": "high" if j == 0 else "low"}
                                        for j in range(4)]} for i in range(3)]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


def _evo(path: Path) -> Path:
    """EvoTemp's shape: a question date, answers, dated documents."""
    records = [{"id": i, "question": f"who leads {i}?", "q_date": "2023/02/01",
                "answers": ["x"], "docs": [{"id": j, "title": "", "text": f"news {i} {j}",
                                            "date": "2023/01/0{j + 1}",
                                            "cred": "high" if j < 3 else "low"}
                                           for j in range(7)]} for i in range(3)]
    path.write_text(json.dumps(records), encoding="utf-8")
    return path


@pytest.mark.parametrize(("bench", "make", "expected", "other"), [
    ("newspolluted", _evo, "CAG NewsPolluted", "CAG EvoTemp, the data of bench evotemp"),
    ("evotemp", _news, "CAG EvoTemp", "CAG NewsPolluted, the data of bench newspolluted"),
])
def test_a_file_of_the_other_cag_set_is_refused(tmp_path: Path, bench: str, make: object,
                                                expected: str, other: str) -> None:
    # both exited 0 with a confident report on the other set's documents
    path = make(tmp_path / "data.json")  # type: ignore[operator]
    code, out = _bench(bench, "--path", str(path), "--embedder", "hashing", "--json", "-q")
    assert code == 2, out
    assert f"error: --path {path}: expected {expected} question records" in out
    assert "got 3 question records without them" in out and f"is this {other}?" in out


def test_the_right_file_still_reads_and_cram_ramdocs_are_told_apart(tmp_path: Path) -> None:
    assert len(load_dataset("newspolluted", _news(tmp_path / "n.json")).documents) == 12
    assert len(load_dataset("evotemp", _evo(tmp_path / "e.json")).documents) == 21
    cram = tmp_path / "c.jsonl"
    cram.write_text(json.dumps({"id": "1", "question": "q?", "answers": ["a"],
                                "docs": [{"text": "a", "is_misinformation": False}]}) + "\n")
    with pytest.raises(DatasetError, match=r"expected RAMDocs question records .*is this "
                                           r"CrAM NQ, the data of bench cram-nq\?"):
        load_dataset("ramdocs", cram)


# -- --cache -----------------------------------------------------------------------------------

def _damaged(folder: Path, content: bytes | None = None, **arrays: np.ndarray) -> Path:
    folder.mkdir()
    path = folder / "hashing-256.npz"
    if content is not None:
        path.write_bytes(content)
    else:
        np.savez(path, **arrays)  # type: ignore[arg-type]
    return path


@pytest.mark.parametrize("kind", ["garbage", "truncated", "no vectors", "wrong width"])
def test_a_damaged_cache_is_named_and_rebuilt(tmp_path: Path, kind: str) -> None:
    # a truncated file was a BadZipFile traceback; garbage told the user to unpickle it
    good = tmp_path / "good"
    CachedEmbedder(HashingEmbedder(), good).embed(["one text", "another"])
    whole = (good / "hashing-256.npz").read_bytes()
    keys = np.array(["k"], dtype=str)
    path = {
        "garbage": lambda: _damaged(tmp_path / "c", b"garbage\n"),
        "truncated": lambda: _damaged(tmp_path / "c", whole[:1000]),
        "no vectors": lambda: _damaged(tmp_path / "c", keys=keys),
        "wrong width": lambda: _damaged(tmp_path / "c", keys=keys,
                                        vectors=np.zeros((1, 3), dtype=np.float32)),
    }[kind]()
    with pytest.warns(CacheWarning, match=rf"--cache {tmp_path / 'c'}: ignoring the damaged "
                                          rf"embedding cache {path} \(expected an \.npz"):
        cache = CachedEmbedder(HashingEmbedder(), tmp_path / "c", option="--cache")
    vectors = cache.embed(["one text"])
    assert np.array_equal(vectors, HashingEmbedder().embed(["one text"]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rewritten: read back without a warning
        again = CachedEmbedder(HashingEmbedder(), tmp_path / "c")
    assert set(again._vectors) == {CachedEmbedder.key("one text")}


def test_cache_path_errors_name_the_flag_before_any_work(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")

    def no_model(name: str) -> None:
        raise AssertionError("the embedder loaded before --cache was checked")

    monkeypatch.setattr(benches, "get_embedder", no_model)
    for cache, got in ((afile, "a file"), (afile / "x", f"a path under the file {afile}")):
        with pytest.raises(ValueError, match=rf"^--cache {cache}: expected a folder we can "
                                             rf"write \(the embedding cache\), got {got}$"):
            run_bench("demo", BenchOptions(embedder="hashing", cache_dir=cache))
    with pytest.raises(ValueError, match=rf"^directory {afile}: expected a folder"):
        CachedEmbedder(HashingEmbedder(), afile)


# -- report paths ------------------------------------------------------------------------------

def test_the_default_report_never_overwrites_without_force(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "report.md").write_text("MY NOTES", encoding="utf-8")
    code, out = _bench("ra-rag-simulation", "-q")
    assert code == 2
    assert ("error: report.md already exists in this folder and is no bench report (the "
            "default --report); pass --force to overwrite it, or --report PATH") in out
    assert (tmp_path / "report.md").read_text(encoding="utf-8") == "MY NOTES"
    code, out = _bench("ra-rag-simulation", "-q", "--force")
    assert code == 0, out
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert text.startswith("# credrank bench ra-rag-simulation")
    assert "\nVersion: credrank " in text and "\nDate: " in text
    # an earlier bench's report is replaced by the next run, without --force
    code, out = _bench("ra-rag-simulation", "-q")
    assert code == 0, out


def _result(name: str) -> BenchResult:
    return BenchResult(name, "synthetic", {"combine": "max(cos,0) × Π factors"}, {"n": 1},
                       ["a note"])


def test_force_replaces_the_listed_files_of_an_earlier_report_only(tmp_path: Path) -> None:
    # --force kept the earlier bench's runs and plots, unmarked, beside the new report
    out = tmp_path / "out"
    write_report(_result("first"), out)
    (out / "runs" / "old.run").write_text("q Q0 d 1 1.0 old\n")
    (out / "metrics.png").write_bytes(b"png")
    listed = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    assert listed["bench"] == "first"
    (out / MANIFEST).write_text(json.dumps({"bench": "first", "files": [
        *listed["files"], "runs/old.run", "metrics.png"]}), encoding="utf-8")
    (out / "notes.txt").write_text("mine")  # files the user put there stay
    (out / "runs" / "mine.txt").write_text("mine")
    assert prepare_out_dir(out, force=True) == []
    write_report(_result("second"), out)
    assert not (out / "runs" / "old.run").exists() and not (out / "metrics.png").exists()
    assert (out / "notes.txt").exists() and (out / "runs" / "mine.txt").exists()
    manifest = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["bench"] == "second"
    assert all((out / f).is_file() for f in manifest["files"])
    assert {"report.md", "result.json", "per_query.csv"} <= set(manifest["files"])
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "max(cos,0) × Π factors" in report  # not \u-escaped


def test_force_refuses_a_report_without_its_file_list(tmp_path: Path) -> None:
    (tmp_path / "report.md").write_text("earlier")
    (tmp_path / "wins.png").write_bytes(b"png")
    with pytest.raises(ValueError, match=rf"--out {tmp_path} holds a report without its file "
                                         r"list \(manifest.json"):
        prepare_out_dir(tmp_path, force=True)
    (tmp_path / MANIFEST).write_text('{"files": ["../outside"]}')
    with pytest.raises(ValueError, match="outside the folder"):
        prepare_out_dir(tmp_path, force=True)


def test_report_under_a_file_is_named_so(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    code, out = _bench("ra-rag-simulation", "--report", str(afile / "r.md"))
    assert code == 2
    assert f"--report {afile / 'r.md'}: expected a file in a folder, got a path under the " \
           f"file {afile}" in out


# -- limits state the data read ----------------------------------------------------------------

def test_limits_state_the_counts_of_the_data_read() -> None:
    rtqa = BenchResult("realtimeqa", "one week", {}, {
        "queries": 30, "questions_without_results": 4, "queries_with_relevant": 6}, [],
        details={"source_types": {"established_news": 240, "unknown": 6}})
    text = " ".join(bench_limits(rtqa))
    assert "this run read 30 multiple-choice questions, 4 of them without a search result" \
        in text
    assert "6 of the 30 questions read have such a document" in text
    assert "98% of the 246 search results' URLs type as established_news" in text
    gg = " ".join(bench_limits(BenchResult("goldengaze-hosts", "12 topics", {},
                                           {"topics": 12}, [])))
    assert gg.startswith("12 topics: intervals are wide") and "50 topics:" not in gg
    trec = " ".join(bench_limits(BenchResult("trec2019-hm", "x", {}, {
        "queries": 4, "documents": 40}, [], details={"source_types": {"unknown": 38}})))
    assert "this run read 4 topics and 40 judged pages" in trec
    assert "38 of the 40 pages" in trec


# -- strict CSV rows ---------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "message"), [
    ('https://a,"T,body\n', r"c\.csv:4: expected well-formed CSV.*never closed"),  # cut
    ("https://a,T\n", r"c\.csv:4: expected 3 columns, got 2"),  # line 4: row 2 spans 2 lines
    ("https://a,T,b,extra\n", r"c\.csv:4: expected 3 columns, got 4"),
])
def test_csv_rows_are_whole_or_refused(tmp_path: Path, body: str, message: str) -> None:
    # a file cut inside a quoted field read as rows; short rows were padded, long ones cut
    path = tmp_path / "c.csv"
    path.write_text("news_url,title,content\nhttps://ok,T,\"a\nb\"\n" + body, encoding="utf-8")
    with pytest.raises(DatasetError, match=message):
        read_csv_rows(path, ("news_url",))


def test_coaid_with_one_release_names_the_flag(tmp_path: Path) -> None:
    folder = tmp_path / "05-01-2020"
    folder.mkdir()
    (folder / "NewsRealCOVID-19.csv").write_text("news_url,title,content\nhttps://a,t,c\n")
    code, out = _bench("coaid-priors", "--path", str(folder), "--json", "-q")
    assert code == 2
    assert (f"error: --path {folder}: expected the CoAID root with at least 2 release folders"
            in out)


# -- Golden-Gaze rows without a host -----------------------------------------------------------

def test_goldengaze_skips_and_counts_rows_without_host_or_topic(tmp_path: Path) -> None:
    rows = ["topic_id,correct_stance,host,helpful_probability",
            "101,helpful,a.com,0.9", "101,helpful,,0.1", "102,unhelpful, ,0.8",
            ",unhelpful,b.com,0.2", "102,unhelpful,a.com,0.2"]
    path = tmp_path / "g.csv.gz"
    path.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode("utf-8")))
    data = load_goldengaze(path)
    assert data.hosts == ("a.com",) and data.rows == 5
    assert data.notes == ("read 5 rows (pages) → 2 host × topic answers of 1 hosts on 2 "
                          "topics", "skipped 2: row without host",
                          "skipped 1: row without topic_id")


def test_goldengaze_intervals_use_the_one_wilson_z(tmp_path: Path) -> None:
    # goldengaze used z = 1.96, stats.wilson's default is 1.959964: two z values in one report
    from credrank.evaluate.stats import wilson
    from credrank_bench.experiments.goldengaze import run_goldengaze

    rows = ["topic_id,correct_stance,host,helpful_probability"]
    for t in range(6):
        stance = "helpful" if t % 2 == 0 else "unhelpful"
        rows += [f"{101 + t},{stance},h{h}.com,{0.9 if (h + t) % 3 else 0.1}" for h in range(5)]
    path = tmp_path / "g.csv.gz"
    path.write_bytes(gzip.compress(("\n".join(rows) + "\n").encode("utf-8")))
    entry = run_goldengaze(path, anchor_sizes=(2,), repeats=2)["unsupervised"]["majority"]
    assert entry["ci95"] == list(wilson(entry["correct"], entry["n"]))
