"""RealTimeQA reader (a sliced real week) and the realtimeqa bench with the hashing embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credrank.evaluate.answers import GENERATOR_ACCURACY, TOP_DOC_ACCURACY
from credrank.generate.llm import parse_prompt
from credrank.index.embed import get_embedder
from credrank_bench.datasets import DatasetError, read_realtimeqa
from credrank_bench.datasets.realtimeqa import document_verdict
from credrank_bench.experiments.realtimeqa import bench_realtimeqa, realtimeqa_prompt

WEEK = "20231201"


def _slice(src: Path, dst: Path, n: int) -> None:
    with src.open(encoding="utf-8") as f:
        dst.write_text("".join(next(f) for _ in range(n)), encoding="utf-8")


@pytest.fixture
def week(shared_data: Path, tmp_path: Path) -> Path:
    """The first 12 questions of a real week (question 0 has no search result)."""
    folder = shared_data / "realtimeqa"
    if not (folder / f"{WEEK}_qa.jsonl").is_file():
        pytest.skip(f"RealTimeQA week not available: {folder / f'{WEEK}_qa.jsonl'}")
    for part in ("qa", "gcs"):
        _slice(folder / f"{WEEK}_{part}.jsonl", tmp_path / f"{WEEK}_{part}.jsonl", 12)
    return tmp_path / f"{WEEK}_qa.jsonl"


def test_reader_counts_questions_without_results(week: Path) -> None:
    es = read_realtimeqa(week)
    assert len(es.queries) == 12
    assert es.pools is not None
    empty = [q for q, _ in es.queries if not es.pools[q]]
    assert "20231201_0" in empty
    assert all(not es.query_labels[q]["has_results"] for q in empty)
    assert any(f"{len(empty)} of 12 questions have no search result" in n for n in es.notes)
    doc = es.documents[0]
    assert doc.url and doc.url.startswith("http") and doc.published_at is not None
    labels = es.query_labels[es.queries[0][0]]
    assert labels["q_date"].isoformat().startswith("2023-12-01")
    assert 0 <= labels["answer"] < len(labels["choices"])
    # the folder form reads the same week
    assert len(read_realtimeqa(week.parent).queries) == 12


def test_reader_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"no \*_qa\.jsonl"):
        read_realtimeqa(tmp_path)
    qa = tmp_path / "x_qa.jsonl"
    qa.write_text("{}\n")
    with pytest.raises(DatasetError, match=r"x_gcs\.jsonl is missing"):
        read_realtimeqa(qa)


def test_document_verdict() -> None:
    choices = ["B-15A", "C-19", "A23a"]
    assert document_verdict("The iceberg A23a moved.", choices, 2) == "right"
    assert document_verdict("A23a, once bigger than C-19", choices, 2) == "mixed"
    assert document_verdict("C-19 broke away", choices, 2) == "wrong"
    assert document_verdict("an iceberg", choices, 2) == "none"


def test_prompt_keeps_choices_out_of_the_question() -> None:
    prompt = realtimeqa_prompt("Which iceberg?", ["B-15A", "A23a"], ["first", "second"])
    question, passages = parse_prompt(prompt)
    assert question == "Which iceberg?" and passages == ["first", "second"]
    assert "A) B-15A" in prompt and "B) A23a" in prompt and prompt.endswith("Answer:")


def test_bench_json(week: Path) -> None:
    result = bench_realtimeqa(week.parent, get_embedder("hashing"), n_resamples=200)
    doc = result.to_json()
    json.dumps(doc, allow_nan=False)
    q = result.details["questions"]
    assert q["all"] == 12 and q["with_results"] + q["without_results"] == 12
    assert result.summary["questions_without_results"] == q["without_results"] > 0
    for key in ("results", "with_results"):
        table = doc["tables"][key]
        for row in table["rows"]:
            assert row["reads_labels"] is False
            for m in (TOP_DOC_ACCURACY, GENERATOR_ACCURACY):
                cell = row["metrics"][m]
                assert 0.0 <= cell["mean"] <= 1.0
        n = table["rows"][0]["metrics"][TOP_DOC_ACCURACY]["n"]
        assert n == (12 if key == "results" else q["with_results"])
    assert any("no search result" in n for n in result.notes)
