"""Label rows that match no indexed document or no audited query (harm labels, qrels) are
reported with their file and line, and labels that match nothing measure nothing: the
dimension is not measured and a gate on it fails (it passed on labels that matched nothing)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from credrank.audit.labels import EXAMPLES, LabelRow, check_labels, label_rows
from credrank.cli import app
from credrank.demo_corpus import build_demo_index, demo_dir

runner = CliRunner()

#: a similarity-only pipeline: the adversarial documents are returned, harmful@k > 0
CONFIG = """
name = "similarity only"
[system.pipeline]
top_k = 5
fetch_k = 15
stages = [{{stage = "combine"}}, {{stage = "topk"}}]
[queries]
path = "demo:queries.jsonl"
qrels = {qrels}
harmful = {harmful}
[dimensions.fairness]
measure = "exposure"
[dimensions.factuality]
measure = "harmful"
k = 5
[[gate]]
name = "harm-budget"
dimension = "factuality"
op = "<="
threshold = 0.05
reason = "declared budget"
"""


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_demo_index(tmp_path_factory.mktemp("labels") / "idx", "hashing")


def _config(tmp_path: Path, harmful: Path | None = None, qrels: Path | None = None) -> Path:
    path = tmp_path / "audit.toml"
    path.write_text(CONFIG.format(
        harmful=json.dumps(str(harmful)) if harmful else '"demo:adversarial.tsv"',
        qrels=json.dumps(str(qrels)) if qrels else '"demo:qrels.tsv"'), encoding="utf-8")
    return path


def _audit(index: Path, config: Path, out: Path):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["audit", "--index", str(index), "--config", str(config),
                               "--out", str(out), "--json", "-q"])


def _harm_rows() -> list[list[str]]:
    lines = (demo_dir() / "adversarial.tsv").read_text(encoding="utf-8").splitlines()
    return [line.split("\t") for line in lines[1:] if line.strip()]


def test_label_rows_keep_their_file_and_line(tmp_path: Path) -> None:
    harm = tmp_path / "h.tsv"
    harm.write_text("query_id\tdoc_id\nq1\td1\n\nq2\td2\n", encoding="utf-8")
    assert label_rows(harm, "harm", "h.tsv") == [LabelRow("h.tsv", 2, "q1", "d1"),
                                                LabelRow("h.tsv", 4, "q2", "d2")]
    beir = tmp_path / "b.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n", encoding="utf-8")
    trec = tmp_path / "t.txt"
    trec.write_text("\ufeffq1 0 d1 2\n\nq2 0 d9 0\n", encoding="utf-8")
    assert [(r.line, r.query_id, r.doc_id) for r in label_rows(beir, "qrels")] == \
        [(2, "q1", "d1")]
    assert [(r.line, r.query_id, r.doc_id) for r in label_rows(trec, "qrels")] == \
        [(1, "q1", "d1"), (3, "q2", "d9")]
    # whatever read_qrels reads: a gzipped file (its bytes were read as text, so no row
    # matched and fairness was "not measured") and a BEIR folder
    packed = tmp_path / "t.txt.gz"
    packed.write_bytes(gzip.compress(trec.read_bytes()))
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "qrels" / "test.tsv").write_bytes(beir.read_bytes())
    assert [(r.line, r.query_id, r.doc_id) for r in label_rows(packed, "qrels")] == \
        [(1, "q1", "d1"), (3, "q2", "d9")]
    assert [(r.line, r.query_id, r.doc_id) for r in label_rows(folder, "qrels")] == \
        [(2, "q1", "d1")]


def test_check_labels_sorts_rows_into_matched_unknown_and_unaudited() -> None:
    rows = [LabelRow("f", 2, "q1", "d1"), LabelRow("f", 3, "q1", "D1"),
            LabelRow("f", 4, "q9", "d1")]
    check = check_labels("f", rows, {"d1"}, {"q1"})
    assert (check.rows, check.matched) == (3, 1) and not check.nothing_matches
    assert [r.line for r in check.unknown_documents] == [3]
    assert [r.line for r in check.unaudited_queries] == [4]
    doc = check.to_dict()
    assert doc["unknown_documents"] == {"count": 1, "examples": [
        {"file": "f", "line": 3, "query_id": "q1", "doc_id": "D1"}]}
    assert check.warnings("harm label")[0].startswith("f: 1 of 3 harm label row(s) name a "
                                                      "document the index does not hold")
    many = [LabelRow("f", i, "q1", f"x{i}") for i in range(EXAMPLES + 3)]
    assert check_labels("f", many, {"d1"}, {"q1"}).nothing_matches
    assert len(check_labels("f", many, set(), {"q1"}).to_dict()["unknown_documents"]
               ["examples"]) == EXAMPLES


def test_harm_labels_matching_no_indexed_document_measure_nothing(index: Path,
                                                                  tmp_path: Path) -> None:
    """Labels naming D020 for d020 (another index version) made harmful@k 0 and the harm
    gate passed, exit 0; now factuality is not measured, naming the file, and the gate
    fails."""
    plain = _audit(index, _config(tmp_path), tmp_path / "plain")
    assert plain.exit_code == 1, plain.output  # similarity only returns harmful documents
    assert json.loads(plain.stdout)["profile"]["entries"][4]["value"] > 0
    upper = tmp_path / "upper.tsv"
    upper.write_text("doc_id\tquery_id\n" + "".join(f"{d.upper()}\t{q}\n"
                                                    for d, q in _harm_rows()),
                     encoding="utf-8")
    got = _audit(index, _config(tmp_path, harmful=upper), tmp_path / "upper")
    doc = json.loads(got.stdout)
    factuality = doc["profile"]["entries"][4]
    assert got.exit_code == 1 and factuality["value"] is None
    assert doc["gates"][0]["outcome"] == "not measured"
    assert f"{upper}:2 names (q01, D020)" in factuality["reason"]
    assert "the labels measure nothing" in factuality["reason"]
    assert doc["labels"]["factuality"]["unknown_documents"]["count"] == len(_harm_rows())
    assert f"warning: {upper}: {len(_harm_rows())} of {len(_harm_rows())} harm label row(s)" \
        in got.stderr


def test_partly_unmatched_labels_are_reported_with_file_and_line(index: Path,
                                                                 tmp_path: Path) -> None:
    rows = _harm_rows()
    mixed = tmp_path / "mixed.tsv"
    mixed.write_text("doc_id\tquery_id\n" + "".join(f"{d}\t{q}\n" for d, q in rows)
                     + "D020\tq01\nd020\tq-elsewhere\n", encoding="utf-8")
    qrels = tmp_path / "qrels.tsv"
    qrels.write_text((demo_dir() / "qrels.tsv").read_text(encoding="utf-8")
                     + "q01 0 gone-doc 2\n", encoding="utf-8")
    out = tmp_path / "o"
    got = _audit(index, _config(tmp_path, harmful=mixed, qrels=qrels), out)
    assert got.exit_code == 1, got.output
    doc = json.loads(got.stdout)
    fact = doc["labels"]["factuality"]
    unknown_line = len(rows) + 2
    assert fact["matched"] == len(rows) and fact["rows"] == len(rows) + 2
    assert fact["unknown_documents"]["examples"] == [
        {"file": str(mixed), "line": unknown_line, "query_id": "q01", "doc_id": "D020"}]
    assert fact["unaudited_queries"]["examples"][0]["line"] == unknown_line + 1
    qrels_lines = len((demo_dir() / "qrels.tsv").read_text(encoding="utf-8").splitlines())
    assert doc["labels"]["fairness"]["unknown_documents"]["examples"][0]["line"] == \
        qrels_lines + 1
    assert f"warning: {mixed}: 1 of {len(rows) + 2} harm label row(s) name a document" \
        in got.stderr and f"line {unknown_line} (q01, D020)" in got.stderr
    entries = {e["dimension"]: e for e in doc["profile"]["entries"]}
    assert entries["factuality"]["value"] > 0  # the matching rows still measure
    assert f"first line {unknown_line} (q01, D020)" in entries["factuality"]["data"]
    measured = json.loads((out / "measurements.json").read_text(encoding="utf-8"))
    assert measured["factuality"]["details"]["labels"] == fact
    assert measured["fairness"]["details"]["labels"]["unknown_documents"]["count"] == 1


def test_qrels_matching_no_indexed_document_leave_fairness_not_measured(
        index: Path, tmp_path: Path) -> None:
    qrels = tmp_path / "other.tsv"
    qrels.write_text("q01 0 X1 1\nq02 0 X2 2\n", encoding="utf-8")
    got = _audit(index, _config(tmp_path, qrels=qrels), tmp_path / "o")
    fairness = json.loads(got.stdout)["profile"]["entries"][2]
    assert fairness["value"] is None
    assert f"none of the 2 qrels row(s) of {qrels}" in fairness["reason"]
