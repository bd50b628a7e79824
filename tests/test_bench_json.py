"""One result shape for every bench: tables as data in the JSON (never Markdown), directions
from the measure registry, ``reads_labels`` on every system row, absent signals."""

from __future__ import annotations

import csv
import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.evaluate.metrics import measure_direction
from credrank.evaluate.result import BenchResult
from credrank.evaluate.tables import Cell, Column, ResultTable, Row
from credrank.pipeline.spec import PipelineSpec
from credrank_bench.experiments.benches import BENCHES, BenchOptions, run_bench
from credrank_bench.experiments.trec_hm import DECIDED

CORRECTNESS_SYSTEMS = {
    "similarity": False, "prior": False, "prior+agreement": False, "agreement": False,
    "learned credibility prior": False, "learned credibility prior + agreement": False,
    "oracle:nist-prior": True, "oracle:stance+prior": True,
    "oracle:nist-prior+agreement": True,
}


def strings(value: Any) -> Iterator[str]:
    """Every string in a JSON document, keys included."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield k
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def assert_no_markdown(doc: dict[str, Any]) -> None:
    for text in strings(doc):
        for line in text.splitlines():
            assert not line.lstrip().startswith(("|", "## ")), f"Markdown in the JSON: {text!r}"


def assert_shape(doc: dict[str, Any]) -> None:
    """The bench JSON's invariants (docs/json.md)."""
    assert doc["credrank_bench"] == 2
    assert isinstance(doc["absent_signals"], list) and doc["tables"]
    assert "markdown" not in json.dumps(doc).lower()
    for key, table in doc["tables"].items():
        assert table["key"] == key
        names = [r["system"] for r in table["rows"]]
        assert table["baseline"] is None or table["baseline"] in names
        columns = {c["name"]: c for c in table["measures"]}
        for c in columns.values():
            assert c["direction"] == measure_direction(c["measure"])
        for row in table["rows"]:
            if table["kind"] == "descriptive":
                assert row["reads_labels"] is None
            else:
                assert isinstance(row["reads_labels"], bool), (key, row["system"])
            assert set(row["metrics"]) <= set(columns)
            for cell in row["metrics"].values():
                assert "mean" in cell
            if "pipeline" in row:  # a credrank search: its spec replays as it is
                assert PipelineSpec.from_dict(row["pipeline"]).to_dict() == row["pipeline"]
                # a spec reads no label: only the bench's stages before it can
                before = len(row["stages"]["stages"]) - len(row["pipeline"]["stages"])
                assert before >= 0 and (before or row["reads_labels"] is False), (
                    key, row["system"])


def json_of(result: BenchResult) -> dict[str, Any]:
    doc = result.to_json()
    json.dumps(doc, allow_nan=False)
    return doc


# ---------------------------------------------------------------- inputs for every bench


def _slice_json_list(src: Path, dst: Path, n: int) -> Path:
    dst.write_text(json.dumps(json.loads(src.read_text(encoding="utf-8"))[:n]),
                   encoding="utf-8")
    return dst


def _slice_json_dict(src: Path, dst: Path, n: int) -> Path:
    items = list(json.loads(src.read_text(encoding="utf-8")).items())[:n]
    dst.write_text(json.dumps(dict(items)), encoding="utf-8")
    return dst


def _slice_jsonl(src: Path, dst: Path, n: int) -> Path:
    with src.open(encoding="utf-8") as f:
        lines = [next(f) for _ in range(n)]
    dst.write_text("".join(lines), encoding="utf-8")
    return dst


def _slice_csv_topics(src: Path, dst: Path, n_topics: int) -> Path:
    """The rows of the first ``n_topics`` topics (``topic_id``, in file order) of a CSV file
    whose fields may span lines (the TREC 2019 HM file's page texts)."""
    with src.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        fields = reader.fieldnames
    assert fields is not None
    topics = list(dict.fromkeys(r["topic_id"] for r in rows))[:n_topics]
    with dst.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(r for r in rows if r["topic_id"] in topics)
    return dst


def _slice_gz_csv_per_topic(src: Path, dst: Path, n: int) -> Path:
    """The first ``n`` rows of each ``topic_id`` of a gzipped CSV file (every topic kept)."""
    with gzip.open(src, "rt", encoding="utf-8", newline="") as f:
        header, *lines = f.read().splitlines(keepends=True)
    kept: dict[str, int] = {}
    out = [header]
    for line in lines:
        topic = line.split(",", 1)[0]
        kept[topic] = kept.get(topic, 0) + 1
        if kept[topic] <= n:
            out.append(line)
    with gzip.open(dst, "wt", encoding="utf-8", newline="") as f:
        f.write("".join(out))
    return dst


def cram_file(path: Path, truth: int | None) -> Path:
    """A tiny CrAM-like file: per question 3 real passages and 1 fake, each with
    ``gpt_truthfulness_0_10 = truth`` (``None``: the score is absent everywhere)."""
    records = []
    for i, (topic, answer) in enumerate([("paris", "Paris"), ("rome", "Rome"),
                                         ("madrid", "Madrid"), ("lisbon", "Lisbon")]):
        docs = [{"text": f"CNN news: the capital city of country {i} is not {answer}.",
                 "is_misinformation": True, "gpt_truthfulness_0_10": truth}]
        docs += [{"text": f"{answer} is the capital city of country {i} ({topic}, part {j}).",
                  "is_misinformation": False, "gpt_truthfulness_0_10": truth}
                 for j in range(3)]
        records.append({"id": str(i), "question": f"what is the capital city of country {i}",
                        "answers": [answer], "wrong_answer": "Nowhere", "docs": docs})
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def coaid_folder(root: Path) -> Path:
    header = "news_url,title,content\n"
    for date, real, fake in [
        ("05-01-2020", ["https://www.cdc.gov/1", "https://www.cdc.gov/2"],
         ["https://www.facebook.com/1"]),
        ("07-01-2020", ["https://www.cdc.gov/3", "https://www.facebook.com/ok"],
         ["https://www.facebook.com/2"]),
    ]:
        d = root / date
        d.mkdir(parents=True)
        (d / "NewsRealCOVID-19.csv").write_text(header + "".join(f"{u},t,c\n" for u in real))
        (d / "NewsFakeCOVID-19.csv").write_text(header + "".join(f"{u},t,c\n" for u in fake))
    return root


def _needs(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"real data not available: expected {path} (see shared/data/SOURCES.md)")
    return path


#: the CrAM NQ questions (of 1,000) whose passages make the PoisonedRAG benches' clean corpus
CRAM_QUESTIONS = 100


def bench_options(name: str, tmp: Path, request: pytest.FixtureRequest) -> BenchOptions:
    """Small inputs for every registered bench (sliced real files where the set is real; the
    ``shared_data`` fixture skips those when the data is absent)."""
    hashing = {"embedder": "hashing"}
    if name == "demo":
        return BenchOptions(**hashing)
    if name == "ra-rag-simulation":
        return BenchOptions()
    if name == "cram-nq":
        return BenchOptions(path=cram_file(tmp / "cram.jsonl", 7), **hashing)
    if name == "stress-cram":
        return BenchOptions(path=cram_file(tmp / "cram.jsonl", 7), **hashing)
    if name == "coaid-priors":
        return BenchOptions(path=coaid_folder(tmp / "coaid"))
    data: Path = request.getfixturevalue("shared_data")
    if name == "trec2019-hm":
        return BenchOptions(path=_needs(data / "trec2019_hm" / "trec2019_hm_dev.csv"),
                            **hashing)
    if name == "goldengaze-hosts":
        # all 50 topics, their 300 best BM25 pages of 3000 (the hosts, the cost, fall with them)
        return BenchOptions(path=_slice_gz_csv_per_topic(
            _needs(data / "goldengaze" / "goldengaze_trec2021_host_stances.csv.gz"),
            tmp / "goldengaze.csv.gz", 300))
    if name in ("poisonedrag", "stress-poisonedrag"):
        # 12 targets and the first 100 CrAM NQ questions' passages (of 1,000) as the clean
        # corpus: the JSON has the same tables, systems, measures and empty cells as with the
        # whole corpus (compared when this was cut), for a quarter of the cost; the test
        # checks that some target still has a clean passage with its answer (gain 1)
        return BenchOptions(path=_slice_json_dict(_needs(data / "poisonedrag" / "nq.json"),
                                                  tmp / "nq.json", 12),
                            corpus=_slice_jsonl(_needs(data / "cram" /
                                                       "cram_nq_1000_reconstructed.jsonl"),
                                                tmp / "cram_nq.jsonl", CRAM_QUESTIONS),
                            **({"limit": 4, "counts": "1", "positions": "natural"}
                               if name == "stress-poisonedrag" else {}),
                            **hashing)
    if name == "realtimeqa":
        week = tmp / "realtimeqa"
        week.mkdir()
        for part in ("qa", "gcs"):
            _slice_jsonl(_needs(data / "realtimeqa" / f"20231201_{part}.jsonl"),
                         week / f"20231201_{part}.jsonl", 12)
        return BenchOptions(path=week, **hashing)
    if name == "stress-news":
        return BenchOptions(path=_slice_json_list(_needs(data / "cag" / "NewsPolluted.json"),
                                                  tmp / "NewsPolluted.json", 40), limit=4,
                            **hashing)
    if name == "ramdocs":
        return BenchOptions(path=_slice_jsonl(_needs(data / "ramdocs" / "RAMDocs_test.jsonl"),
                                              tmp / "ramdocs.jsonl", 40), **hashing)
    # 8 questions (the tests once took 16: the JSON's tables, systems, measures and empty
    # cells are the same with 8, compared when this was cut, for half the cost)
    source = {"newspolluted": "NewsPolluted.json", "evotemp": "EvoTemp.json"}[name]
    return BenchOptions(path=_slice_json_list(_needs(data / "cag" / source),
                                              tmp / source, 8), **hashing)


#: the TREC 2019 HM topics the JSON tests run: the first ones of the dev file (1, 8, 13, 15;
#: 28 judged pages). They hold every kind of topic the bench tells apart (helpful, unhelpful
#: and inconclusive correct stances; pages of both stances, credible and not; 2 to 16 judged
#: pages a topic), so the JSON has every table, system and cell kind of the full run (15
#: topics) for a sixth of its cost: the nested leave-one-topic-out choice grows with the
#: square of the topics. The full file's numbers are the bench's (scripts), not the tests'.
TREC_TOPICS = 4


@pytest.fixture(scope="session")  # built once even when xdist interleaves modules
def trec_doc(shared_data: Path, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[dict[str, Any], Path]:
    """``credrank bench trec2019-hm --embedder hashing --json`` on the first
    :data:`TREC_TOPICS` topics of the real dev file; with the sliced file."""
    path = shared_data / "trec2019_hm" / "trec2019_hm_dev.csv"
    if not path.is_file():
        pytest.skip(f"TREC 2019 HM file not available: {path}")
    sliced = _slice_csv_topics(path, tmp_path_factory.mktemp("trec") / "trec2019_hm.csv",
                               TREC_TOPICS)
    res = CliRunner().invoke(app, ["bench", "trec2019-hm", "--path", str(sliced), "--embedder",
                                   "hashing", "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output[res.output.index("{"):]), sliced


# ---------------------------------------------------------------- every bench


@pytest.mark.parametrize("name", [n for n in BENCHES if n != "trec2019-hm"])
def test_every_bench_json_holds_tables_as_data(name: str, tmp_path: Path,
                                               request: pytest.FixtureRequest) -> None:
    doc = json_of(run_bench(name, bench_options(name, tmp_path, request)))
    assert doc["bench"] == name
    if name in ("poisonedrag", "stress-poisonedrag"):  # the sliced corpus has gains of 1
        answered = [re.search(r"^(\d+) of (\d+) target questions have at least one clean "
                              r"passage containing the correct answer$", n) for n in doc["notes"]]
        assert [int(m[1]) > 0 for m in answered if m] == [True], doc["notes"]
    assert_shape(doc)
    assert_no_markdown(doc)


@pytest.mark.slow  # runs the TREC bench with its experiments on TREC_TOPICS topics
def test_trec_json_has_no_markdown_and_the_common_shape(
        trec_doc: tuple[dict[str, Any], Path]) -> None:
    trec_doc, _ = trec_doc
    assert_shape(trec_doc)
    assert_no_markdown(trec_doc)
    assert list(trec_doc["tables"]) == ["results", "dispersion", "oracle_feedback",
                                        "correctness_signal"]


@pytest.mark.slow  # runs the TREC bench with its experiments on TREC_TOPICS topics
def test_trec_json_exposes_every_correctness_signal_system(
        trec_doc: tuple[dict[str, Any], Path]) -> None:
    trec_doc, sliced = trec_doc
    table = trec_doc["tables"]["correctness_signal"]
    assert table["baseline"] == "similarity"
    assert [c["name"] for c in table["measures"]] == ["harmful@5", "nDCG@10", "P@5", "RR",
                                                      DECIDED]
    rows = {r["system"]: r for r in table["rows"]}
    assert {s: r["reads_labels"] for s, r in rows.items()} == CORRECTNESS_SYSTEMS
    for name, row in rows.items():
        for measure in ("harmful@5", "nDCG@10", "P@5", "RR"):
            cell = row["metrics"][measure]
            assert isinstance(cell["mean"], float) and 0.0 <= cell["mean"] <= 1.0
            assert cell["ci_low"] <= cell["mean"] <= cell["ci_high"]
            if name != "similarity":
                assert {"delta", "p_value", "wins", "losses", "ties"} <= set(cell)
    # a program can pick the best non-oracle system by harmful@5 from JSON keys alone
    direction = next(c["direction"] for c in table["measures"] if c["name"] == "harmful@5")
    assert direction == "lower"
    best = min((r for r in table["rows"] if not r["reads_labels"]),
               key=lambda r: r["metrics"]["harmful@5"]["mean"])
    assert best["metrics"]["harmful@5"]["mean"] <= rows["similarity"]["metrics"][
        "harmful@5"]["mean"]
    details = trec_doc["details"]["correctness_signal"]
    # one stance example per judged page, one choice per topic (the full file: 156 and 15)
    with sliced.open(encoding="utf-8", newline="") as f:
        judged = list(csv.DictReader(f))
    assert len({r["topic_id"] for r in judged}) == TREC_TOPICS
    assert details["stance"]["n"] == len(judged) and len(details["choices"]) == TREC_TOPICS


# ---------------------------------------------------------------- absent signals


def test_cram_without_gpt_truthfulness_runs_no_gpt_system(tmp_path: Path) -> None:
    result = run_bench("cram-nq", BenchOptions(path=cram_file(tmp_path / "c.jsonl", None),
                                              embedder="hashing"))
    names = [r.system for r in result.table("results").rows]
    assert not any("GPT" in n for n in names)
    doc = json_of(result)
    assert doc["absent_signals"] == [{
        "signal": "gpt_truthfulness_0_10", "system": "GPT truthfulness as prior (CrAM's scorer)",
        "documents": 16, "reason": "gpt_truthfulness_0_10 is null for all 16 documents"}]
    assert any("absent signal: gpt_truthfulness_0_10" in n for n in doc["notes"])
    assert_shape(doc)


def test_cram_with_gpt_truthfulness_runs_it_without_reading_labels(tmp_path: Path) -> None:
    result = run_bench("cram-nq", BenchOptions(path=cram_file(tmp_path / "c.jsonl", 7),
                                              embedder="hashing"))
    assert result.absent_signals == []
    rows = {r.system: r for r in result.table("results").rows}
    assert rows["GPT truthfulness as prior (CrAM's scorer)"].reads_labels is False
    assert rows["prior from labels, x=0% (upper bound, circular)"].reads_labels is True
    assert rows["prior with 20% wrong types"].reads_labels is True
    assert rows["similarity only"].reads_labels is False


# ---------------------------------------------------------------- table types


def test_cells_leave_out_what_a_table_does_not_have() -> None:
    assert Cell(0.5).to_json() == {"mean": 0.5}
    assert Cell(None, n=0).to_json() == {"mean": None, "n": 0}
    with pytest.raises(ValueError, match="finite"):
        Cell(float("nan"))
    with pytest.raises(ValueError, match="wins"):
        Cell(0.5, wins=1.5)


def test_columns_take_their_direction_from_the_registry() -> None:
    assert Column.of("harmful@10").direction == "lower"
    assert Column("5 anchors", "accuracy").to_json() == {
        "name": "5 anchors", "measure": "accuracy", "direction": "higher"}
    with pytest.raises(ValueError, match="no registered direction"):
        Column.of("mystery@5")


def test_tables_check_their_rows() -> None:
    col = Column.of("RR")
    with pytest.raises(ValueError, match="reads labels"):
        ResultTable("t", "T", [col], [Row("a", None, {"RR": Cell(1.0)})])
    with pytest.raises(ValueError, match="unique"):
        ResultTable("t", "T", [col], [Row("a", False, {}), Row("a", True, {})])
    with pytest.raises(ValueError, match="baseline"):
        ResultTable("t", "T", [col], [Row("a", False, {})], baseline="b")
    with pytest.raises(ValueError, match="not columns"):
        ResultTable("t", "T", [col], [Row("a", False, {"P@5": Cell(1.0)})])


def test_out_folder_for_a_bench_without_queries(tmp_path: Path) -> None:
    root = coaid_folder(tmp_path / "coaid")
    res = CliRunner().invoke(app, ["bench", "coaid-priors", "--path", str(root), "--json",
                                   "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    printed = json.loads(res.output[res.output.index("{"):])
    out = tmp_path / "out"
    assert json.loads((out / "result.json").read_text(encoding="utf-8")) == printed
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "## Per-type priors (CoAID)" in report
    assert "## Held-out predictors of P(real) (CoAID)" in report
    assert "| fitted | 0.750 (n=3) | " in report  # rendered from the same cells as the JSON
    assert "AUC ↑" in report and "log-loss ↓" in report
    # no query, but the held-out items the table's cells are computed from, one per row
    lines = (out / "per_query.csv").read_text(encoding="utf-8").splitlines()
    assert lines[0] == "table,system,measure,qid,value"
    assert "predictors,fitted,P(real),coaid/07-01-2020/fake/0,0.36363636363636365" in lines
    assert len(lines) == 1 + 3 * 3 * 3 + 3  # 3 items × 3 predictors × 3 terms, 3 labels


def test_markdown_report_renders_the_tables(tmp_path: Path) -> None:
    report = tmp_path / "report.md"
    res = CliRunner().invoke(app, ["bench", "cram-nq", "--path",
                                   str(cram_file(tmp_path / "c.jsonl", None)),
                                   "--embedder", "hashing", "--report", str(report)])
    assert res.exit_code == 0, res.output
    text = report.read_text(encoding="utf-8")  # the Markdown goes to --report ...
    assert "## Absent signals" in text
    assert "- gpt_truthfulness_0_10: gpt_truthfulness_0_10 is null for all 16" in text
    assert "| prior with 20% wrong types [reads labels] |" in text
    results = text.split("## Absent signals")[1].split("## Results")[1].split("\n## ")[0]
    assert "GPT truthfulness as prior" not in results
    # ... stdout holds the same tables as plain text (tests/test_progress.py checks more)
    assert "absent signal: gpt_truthfulness_0_10" in res.stdout
    assert "<br>" not in res.stdout and "## " not in res.stdout and "|---" not in res.stdout


def test_cache_folder_holds_the_embeddings_and_changes_nothing(tmp_path: Path) -> None:
    plain = run_bench("demo", BenchOptions(embedder="hashing")).to_json()
    first = run_bench("demo", BenchOptions(embedder="hashing", cache_dir=tmp_path)).to_json()
    assert list(tmp_path.glob("hashing-*.npz"))  # CachedEmbedder's one file per embedder
    again = run_bench("demo", BenchOptions(embedder="hashing", cache_dir=tmp_path)).to_json()
    assert plain["tables"] == first["tables"] == again["tables"]
