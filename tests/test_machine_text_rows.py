"""The machine-text rows of the benches (``credrank bench … --machine-text``) and the scorer's
precision: the score cache (resumable, one score per distinct text, a cut last line ignored,
a bad line named), the rows in the pooled and stress benches with a stand-in scorer, the
options refused where they do not apply (library and CLI), and the precision in the key."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_inprocess import assert_clean_error, run_cli
from cli_process import CREDRANK
from credrank.index.embed import get_embedder
from credrank.index.memory import InMemoryIndex
from credrank.machine_text.scorer import FastDetectScorer, check_precision, resolve_precision
from credrank_bench.experiments.bench import bench_pooled
from credrank_bench.experiments.benches import BenchOptions, run_bench
from credrank_bench.experiments.machine_text_rows import (
    CHUNK,
    MACHINE_TEXT_ROWS,
    MachineTextOption,
    add_machine_text,
    cache_file,
    read_cache,
    score_texts,
)
from credrank_bench.experiments.stress import bench_stress
from stand_in_scorer import Injected, StandInScorer


class StandIn(StandInScorer):
    """A scorer without a model: ``d`` = 4 for a text that starts "CNN news:" (the small
    files' fakes), else ``−len / 100``; ``nan`` for "short"; fails on call ``fail_at``."""

    key = "stand-in/t8"

    @staticmethod
    def value(text: str) -> float:
        return np.nan if text == "short" else 4.0 if text.startswith("CNN news:") \
            else -len(text) / 100


def test_cache_resumes_an_interrupted_run_without_scoring_twice(tmp_path: Path) -> None:
    distinct = [f"passage number {i} " * (1 + i % 3) for i in range(2 * CHUNK + 20)]
    texts = [*distinct, *distinct[:30], "short"]  # duplicates are scored once
    first = StandIn(fail_at=2)  # two chunks written, the third fails
    with pytest.raises(Injected):
        score_texts(texts, first, cache_dir=tmp_path)
    assert len(read_cache(cache_file(tmp_path, StandIn.key))) == 2 * CHUNK
    second = StandIn()
    d = score_texts(texts, second, cache_dir=tmp_path)
    assert set(first.scored).isdisjoint(second.scored)  # nothing scored twice
    assert sorted(first.scored + second.scored) == sorted(set(texts))  # nothing lost
    expected = [np.nan if t == "short" else -len(t) / 100 for t in texts]
    np.testing.assert_allclose(d, expected)
    third = StandIn()
    np.testing.assert_allclose(score_texts(texts, third, cache_dir=tmp_path), expected)
    assert third.scored == []  # a rerun pays nothing
    other = type("Other", (StandIn,), {"key": "stand-in/t16"})()
    score_texts(texts[:3], other, cache_dir=tmp_path)
    assert len(other.scored) == 3  # another key: scored again, never mixed
    path = cache_file(tmp_path, StandIn.key)
    path.write_bytes(path.read_bytes()[:-20])  # the last write cut short
    counts: list[tuple[int, int]] = []
    fourth = StandIn()
    np.testing.assert_allclose(score_texts(texts, fourth, cache_dir=tmp_path,
                                           on_count=lambda d, t: counts.append((d, t))),
                               expected)
    assert len(fourth.scored) == 1 and counts == [(1, 1)]  # only the cut passage again
    assert len(read_cache(path)) == len(set(texts))  # the file reads cleanly after it


def test_cache_ignores_a_cut_last_line_and_names_a_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    path.write_text('{"sha256": "a", "d": 1.5}\n{"sha256": "b", "d": null}\n{"sha2',
                    encoding="utf-8")
    assert read_cache(path) == {"a": 1.5, "b": None}
    path.write_text('{"sha256": "a", "d": 1.5}\n{"sha256": "b", "d": "high"}\n',
                    encoding="utf-8")
    with pytest.raises(ValueError, match=r"c\.jsonl, line 2: expected"):
        read_cache(path)
    assert read_cache(tmp_path / "absent.jsonl") == {}


def test_add_machine_text_scores_only_what_is_asked() -> None:
    index = InMemoryIndex(["a", "b", "c"], np.eye(3), {"text": ["one", "CNN news: two", "x"]})
    scorer = StandIn()
    info = add_machine_text(index, scorer, only={"a", "b"})
    assert scorer.scored == ["one", "CNN news: two"]
    assert list(index.meta["machine_text"]) == [-0.03, 4.0, None]
    assert list(index.meta["machine_text_key"]) == [StandIn.key, StandIn.key, None]
    assert info["documents"] == 2 and info["newly_scored"] == 2 and info["cache"] is None


def _cram_record(i: int) -> dict:
    answer, wrong = f"answer{i}", f"wrong{i}"
    real = [f"The city number {i} in the old valley was founded by {answer} long ago.",
            f"Historians say {answer} founded the city number {i} after a flood.",
            f"The valley city number {i} has a market and a river.",
            f"Old records of city number {i} mention many founders and wars."]
    fake = (f"CNN news: who founded the city number {i} in the old valley? {wrong} founded "
            f"the city number {i} in the old valley.")  # written for the question
    docs = [{"text": t, "is_misinformation": False, "gpt_truthfulness_0_10": 9} for t in real]
    docs.insert(0, {"text": fake, "is_misinformation": True, "gpt_truthfulness_0_10": 1})
    return {"id": f"q{i}", "question": f"who founded the city number {i} in the old valley",
            "answers": [answer], "wrong_answer": wrong, "docs": docs}


@pytest.fixture
def cram_file(tmp_path: Path) -> Path:
    path = tmp_path / "cram.jsonl"
    path.write_text("".join(json.dumps(_cram_record(i)) + "\n" for i in range(12)),
                    encoding="utf-8")
    return path


def test_pooled_bench_gains_the_rows_in_both_tables(cram_file: Path, tmp_path: Path) -> None:
    scorer = StandIn()
    result = bench_pooled("cram-nq", cram_file, get_embedder("hashing"),
                          machine_text=MachineTextOption(scorer, tmp_path / "cache"))
    for key in ("results", "clean_pools"):
        rows = {r.system: r for r in result.table(key).rows}
        for name in MACHINE_TEXT_ROWS:
            assert name in rows and rows[name].reads_labels is False
    main = {r.system: r for r in result.table("results").rows}
    alone = main[next(iter(MACHINE_TEXT_ROWS))]
    # the stand-in calls every fake machine-written: fewer fakes stay on top
    before = main["similarity only"].metrics["harmful@1"].mean
    assert before > 0.5 and alone.metrics["harmful@1"].mean < before
    assert result.details["machine_text"]["documents"] == 60
    assert any("machine-text rows: 60 passages" in n for n in result.notes)
    again = StandIn()  # the cache answers a rerun
    bench_pooled("cram-nq", cram_file, get_embedder("hashing"),
                 machine_text=MachineTextOption(again, tmp_path / "cache"))
    assert again.scored == []


def test_stress_bench_scores_only_the_passages_it_can_rank(cram_file: Path) -> None:
    scorer = StandIn()
    result = bench_stress("cram", cram_file, get_embedder("hashing"), positions="first",
                          machine_text=MachineTextOption(scorer))
    rows = {r.system: r for r in result.table("first_n1").rows}
    for name in MACHINE_TEXT_ROWS:
        assert rows[name].reads_labels is False
    evaluated = result.summary["evaluated_questions"]
    fakes = [t for t in scorer.scored if t.startswith("CNN news:")]
    assert 0 < evaluated < 12 and len(fakes) == evaluated  # no other question's contaminant
    assert len(scorer.scored) < 60  # the clean pools and the contaminants, not the corpus
    assert result.details["machine_text"]["documents"] == len(set(scorer.scored))


def test_option_refused_where_it_does_not_apply(cram_file: Path) -> None:
    with pytest.raises(ValueError, match="--machine-text is only used by newspolluted, cram-nq"):
        run_bench("ramdocs", BenchOptions(cram_file, "hashing", machine_text=True))
    with pytest.raises(ValueError, match="not to --model"):
        run_bench("cram-nq", BenchOptions(cram_file, "hashing", model="smollm2",
                                          machine_text=True))


def test_cli_refuses_the_option_on_another_bench(tmp_path: Path) -> None:
    if not CREDRANK.exists():
        pytest.skip("the credrank console script is not installed")
    done = run_cli("bench", "demo", "--machine-text", "--embedder", "hashing", "--json",
                   cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "--machine-text is only used by newspolluted, cram-nq, evotemp" in done.stderr
    assert done.stdout == ""
    assert_clean_error(done, "--machine-text")


def test_precision_is_validated_and_named_in_the_key() -> None:
    assert check_precision("bfloat16") == "bfloat16"
    with pytest.raises(ValueError, match="expected one of auto, float32, bfloat16, got 'fp8'"):
        check_precision("fp8")
    with pytest.raises(ValueError, match="precision: expected"):
        FastDetectScorer(precision="fp8")
    f32 = FastDetectScorer(precision="float32", max_tokens=64)
    assert f32.key == "fast-detectgpt-analytic/smollm2-135m-instruct-q4_1-f32/t64"
    bf16 = FastDetectScorer(precision="bfloat16")
    assert bf16.key.endswith("-bf16/t128") and bf16.config()["precision"] == "bfloat16"
    pytest.importorskip("torch")
    assert resolve_precision("auto") in ("float32", "bfloat16")


def test_cli_score_refuses_an_unknown_precision(tmp_path: Path) -> None:
    if not CREDRANK.exists():
        pytest.skip("the credrank console script is not installed")
    from credrank.generate.local import lm_available

    if (missing := lm_available()) is not None:
        pytest.skip(f"SmolLM2 is not available: {missing}")
    done = run_cli("score", "machine-text", "--index", str(tmp_path), "--precision", "fp8",
                   cwd=tmp_path)
    assert done.returncode == 2
    assert_clean_error(done, "--precision")
    assert "--precision: expected one of auto, float32, bfloat16, got 'fp8'" in done.stderr
