"""Contamination stress tests (chapter 35.2): arithmetic, injection, paired flips, the bench."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from credrank.core.candidates import Candidates
from credrank.evaluate.render import sections
from credrank.evaluate.result import dump_json
from credrank.index.embed import get_embedder
from credrank_bench.experiments.benches import BenchOptions, run_bench
from credrank_bench.experiments.stress import (
    FLIP_C2I,
    FLIP_I2C,
    ORACLE,
    bench_stress,
    contaminated_batch,
    contamination_loss,
    inject,
    paired_flips,
    parse_counts,
    parse_positions,
)

Write = Callable[[str, str | bytes], Path]

# ---------------------------------------------------------------- the chapter's arithmetic


@pytest.mark.parametrize(("after", "fewer", "share"), [(0.62, 200, 0.24390244),
                                                        (0.52, 300, 0.36585366)])
def test_contamination_loss_reproduces_35_2(after: float, fewer: int, share: float) -> None:
    out = contamination_loss(1000, 0.82, after)
    assert out["correct_before"] == 820 and out["correct_after"] == 1000 * after
    assert out["fewer_correct"] == fewer
    assert out["share_of_questions"] == pytest.approx(fewer / 1000)
    assert round(out["share_of_initially_correct"] * 100, 6) == round(share * 100, 6)


def test_contamination_loss_docstring_cites_the_chapter() -> None:
    assert "35.2" in (contamination_loss.__doc__ or "")


@pytest.mark.parametrize(("args", "match"), [((0, 0.8, 0.6), "n"),
                                             ((10, 1.2, 0.6), "acc_before"),
                                             ((10, 0.5, 0.6), "exceeds"),
                                             ((10, 0.0, 0.0), "no answer was correct")])
def test_contamination_loss_rejects_bad_input(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        contamination_loss(*args)


# ---------------------------------------------------------------- injection

POOL = ["a", "b", "c", "d", "e", "f", "g"]


@pytest.mark.parametrize(("position", "count", "expected"), [
    ("first", 1, ["X", "a", "b", "c", "d", "e", "f", "g"]),
    ("middle", 1, ["a", "b", "X", "c", "d", "e", "f", "g"]),
    ("last", 1, ["a", "b", "c", "d", "X", "e", "f", "g"]),
    ("first", 2, ["X", "Y", "a", "b", "c", "d", "e", "f", "g"]),
    ("middle", 3, ["a", "X", "Y", "Z", "b", "c", "d", "e", "f", "g"]),
    ("last", 2, ["a", "b", "c", "X", "Y", "d", "e", "f", "g"]),
])
def test_inject_at_each_position_of_a_top5_context(position: str, count: int,
                                                   expected: list[str]) -> None:
    out = inject(POOL, ["X", "Y", "Z"], position, count, context=5)
    assert out == expected
    assert POOL == ["a", "b", "c", "d", "e", "f", "g"]  # not modified


def test_inject_without_context_counts_slots_in_the_whole_list() -> None:
    assert inject(["a", "b"], ["X"], "last", 1) == ["a", "b", "X"]
    assert inject(["a", "b", "c", "d"], ["X"], "middle", 1) == ["a", "b", "X", "c", "d"]


@pytest.mark.parametrize(("position", "count", "context", "match"), [
    ("top", 1, None, "unknown position 'top'"),
    ("first", 0, None, "count"),
    ("first", 4, None, "larger than the 3 contaminants available"),
    ("last", 3, 2, "does not fit a context of 2"),
])
def test_inject_rejects_bad_input(position: str, count: int, context: int | None,
                                  match: str) -> None:
    with pytest.raises(ValueError, match=match):
        inject(POOL, ["X", "Y", "Z"], position, count, context=context)


def test_contaminated_batch_puts_the_contaminant_at_the_slot_for_similarity() -> None:
    ids = ["c0", "c1", "c2", "c3", "bad"]
    cos = {"c0": 0.9, "c1": 0.8, "c2": 0.7, "c3": 0.6, "bad": 0.95}

    def search(wanted: list[str], k: int) -> Candidates:
        order = sorted(wanted, key=lambda d: -cos[d])[:k]
        return Candidates("q", np.array(order, dtype=object),
                          np.array([cos[d] for d in order]))
    clean = search(ids[:4], 4)
    for position, slot in (("first", 0), ("middle", 1), ("last", 2)):
        batch = contaminated_batch(search, clean, ["bad"], position, 1, top_k=3)
        ranked = list(batch.sorted_by_score().doc_ids)
        assert ranked.index("bad") == slot, position
        assert sorted(batch.doc_ids) == sorted(ids)  # added, nothing removed
    natural = contaminated_batch(search, clean, ["bad"], "natural", 1, top_k=3)
    assert natural.doc_ids[0] == "bad" and natural.retrieval_score[0] == 0.95


# ---------------------------------------------------------------- flips


def test_paired_flips_counts_both_directions_separately() -> None:
    clean = [True, True, True, False, False, True, False]
    dirty = [False, True, False, True, False, True, False]
    f = paired_flips(clean, dirty)
    assert (f.n, f.correct_before, f.correct_after) == (7, 4, 3)
    assert (f.correct_to_incorrect, f.incorrect_to_correct, f.net) == (2, 1, -1)
    d = f.to_dict()
    assert d["correct_to_incorrect_share"] == pytest.approx(2 / 7)
    assert d["correct_to_incorrect_of_initially_correct"] == pytest.approx(0.5)
    assert d["incorrect_to_correct_of_initially_incorrect"] == pytest.approx(1 / 3)
    low, high = d["correct_to_incorrect_wilson_95"]
    assert 0 < low < 2 / 7 < high < 1
    # the net change alone (−1) hides 3 flips
    assert f.correct_to_incorrect + f.incorrect_to_correct == 3


def test_paired_flips_accepts_mappings_by_question() -> None:
    f = paired_flips({"q1": 1, "q2": 0}, {"q2": 1, "q1": 1})
    assert (f.correct_to_incorrect, f.incorrect_to_correct) == (0, 1)


@pytest.mark.parametrize(("a", "b", "match"), [([True], [True, False], "one pair"),
                                               ([2], [1], "0/1"),
                                               ({"q1": 1}, {"q2": 1}, "different questions"),
                                               ({"q1": 1}, [1], "two sequences or two")])
def test_paired_flips_rejects_unpaired_input(a: object, b: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        paired_flips(a, b)  # type: ignore[arg-type]


def test_option_parsers() -> None:
    assert parse_positions("first, last", "cram") == ("first", "last")
    assert parse_positions(None, "poisonedrag")[0] == "natural"
    assert parse_counts("1,3,3") == (1, 3)
    for bad, match in (("0", "≥ 1"), ("x", "integers"), ("1,-2", "≥ 1")):
        with pytest.raises(ValueError, match=match):
            parse_counts(bad)
    with pytest.raises(ValueError, match="unknown position 'top'"):
        parse_positions("first,top", "cram")


# ---------------------------------------------------------------- the bench on a small file


def _cram_record(i: int) -> dict:
    answer, wrong = f"answer{i}", f"wrong{i}"
    question = f"who founded the city number {i} in the old valley"
    real = [f"The city number {i} in the old valley was founded by {answer} long ago.",
            f"Historians say {answer} founded the city number {i} after a flood.",
            f"The valley city number {i} has a market and a river.",
            f"Old records of city number {i} mention many founders and wars."]
    fake = (f"CNN news: the city number {i} in the old valley was founded by {wrong} rather "
            f"than {answer}.")
    docs = [{"text": t, "is_misinformation": False, "gpt_truthfulness_0_10": 9} for t in real]
    docs.insert(i % 5, {"text": fake, "is_misinformation": True, "gpt_truthfulness_0_10": 1})
    return {"id": f"q{i}", "question": question, "answers": [answer], "wrong_answer": wrong,
            "docs": docs}


def _cram_file(write: Write, n: int = 12) -> Path:
    return write("cram.jsonl", "\n".join(json.dumps(_cram_record(i)) for i in range(n)) + "\n")


def test_bench_stress_on_a_small_cram_file(write: Write) -> None:
    path = _cram_file(write)
    result = bench_stress("cram", path, get_embedder("hashing"), seed=0)
    assert result.name == "stress-cram"
    assert [t.key for t in result.tables] == ["first_n1", "middle_n1", "last_n1", "flips"]
    first = result.table("first_n1")
    sim = first.rows[0]
    assert sim.system == "similarity only" and sim.reads_labels is False
    assert sim.metrics["adversarial-hit@1"].mean == 1.0  # by construction
    assert result.table("last_n1").rows[0].metrics["adversarial-hit@1"].mean == 0.0
    assert result.table("last_n1").rows[0].metrics["adversarial-hit@5"].mean == 1.0
    oracle = next(r for r in first.rows if r.system == ORACLE)
    assert oracle.reads_labels is True and oracle.metrics["adversarial-hit@5"].mean == 0.0
    assert oracle.metrics[FLIP_C2I].mean == 0.0 and oracle.metrics[FLIP_I2C].mean == 0.0
    flips = result.details["flips"]
    for row in flips.values():
        assert row["correct_to_incorrect"] + row["correct_after"] - row["incorrect_to_correct"] \
            == row["correct_before"]
    doc = json.loads(dump_json(result))
    assert set(doc["tables"]) == {"first_n1", "middle_n1", "last_n1", "flips"}
    assert doc["details"]["chapter_arithmetic_35_2"][0]["fewer_correct"] == 200
    titles = [title for title, _, _ in sections(result)]
    assert "Paired flips per system, position and count" in titles
    again = bench_stress("cram", path, get_embedder("hashing"), seed=0)
    assert dump_json(again) == dump_json(result)  # deterministic


@pytest.mark.parametrize(("kw", "match"), [
    ({"positions": "top"}, "unknown position 'top'"),
    ({"counts": "2"}, "larger than the 1 distinct contaminants"),
    ({"counts": "0"}, "≥ 1"),
    ({"limit": 0}, "--limit"),
])
def test_bench_stress_rejects_bad_options(write: Write, kw: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        bench_stress("cram", _cram_file(write), get_embedder("hashing"), **kw)


def test_run_bench_registers_the_stress_benches_and_their_options(write: Write) -> None:
    path = _cram_file(write)
    with pytest.raises(ValueError, match="--positions and --counts are only used by"):
        run_bench("cram-nq", BenchOptions(path, "hashing", positions="first"))
    with pytest.raises(ValueError, match="--model and --heads are only used by cram-nq"):
        run_bench("stress-cram", BenchOptions(path, "hashing", model="smollm2"))
    with pytest.raises(ValueError, match="--generator 'nope' is unknown"):
        run_bench("stress-cram", BenchOptions(path, "hashing", generator="nope"))
    result = run_bench("stress-cram", BenchOptions(path, "hashing", positions="last", limit=3))
    assert result.summary["evaluated_questions"] == 3
    # the notes said the whole split's sizes as if this run's ("the 500 test questions")
    assert result.notes[0].startswith("--limit 3: this run evaluates 3 question(s)")
    assert [t.key for t in result.tables] == ["last_n1", "flips"]


# ---------------------------------------------------------------- real data


def _real(shared_data: Path, *parts: str) -> Path:
    p = shared_data.joinpath(*parts)
    if not p.is_file():
        pytest.skip(f"real data not available: expected {p} (see shared/data/SOURCES.md)")
    return p


def test_real_stress_cram_with_hashing(shared_data: Path, tmp_path: Path) -> None:
    from test_bench_json import _slice_jsonl

    # 30 of the file's 1000 questions: enough that --limit 10 finds 10 it can evaluate
    path = _slice_jsonl(_real(shared_data, "cram", "cram_nq_1000_reconstructed.jsonl"),
                        tmp_path / "cram_nq.jsonl", 30)
    result = run_bench("stress-cram", BenchOptions(path, "hashing", limit=10))
    assert result.summary["evaluated_questions"] == 10
    assert result.settings["counts"] == [1]
    assert "GPT truthfulness as prior (CrAM's scorer)" in [
        r.system for r in result.table("first_n1").rows]


def test_real_stress_news_correlated_fakes(shared_data: Path, tmp_path: Path) -> None:
    from test_bench_json import _slice_json_list

    # the first 40 of the 480 questions (8 evaluated): the whole file was read and embedded
    # for nothing the test checks; every question has its 3 contaminants either way
    path = _slice_json_list(_real(shared_data, "cag", "NewsPolluted.json"),
                            tmp_path / "NewsPolluted.json", 40)
    result = run_bench("stress-news", BenchOptions(path, "hashing", limit=8,
                                                   positions="first", counts="1,3"))
    assert [t.key for t in result.tables] == ["first_n1", "first_n3", "flips"]
    assert result.summary["contaminants_per_question_min"] == 3
    with pytest.raises(ValueError, match="larger than the 3 distinct"):
        run_bench("stress-news", BenchOptions(path, "hashing", limit=2, counts="4"))


def test_real_stress_poisonedrag(shared_data: Path, tmp_path: Path) -> None:
    from test_bench_json import _slice_json_dict, _slice_jsonl

    # 12 of the 100 targets (the test evaluates 5) and the passages of the first 100 of CrAM
    # NQ's 1000 questions, laid out as in shared/data so that the bench finds the corpus
    # beside the targets itself (poisoning.default_corpus): the same tables, a quarter of
    # the cost
    (tmp_path / "poisonedrag").mkdir()
    (tmp_path / "cram").mkdir()
    path = _slice_json_dict(_real(shared_data, "poisonedrag", "nq.json"),
                            tmp_path / "poisonedrag" / "nq.json", 12)
    _slice_jsonl(_real(shared_data, "cram", "cram_nq_1000_reconstructed.jsonl"),
                 tmp_path / "cram" / "cram_nq_1000_reconstructed.jsonl", 100)
    result = run_bench("stress-poisonedrag", BenchOptions(path, "hashing", limit=5,
                                                          positions="natural,first",
                                                          counts="1,5"))
    assert [t.key for t in result.tables] == ["natural_n1", "natural_n5", "first_n1",
                                              "first_n5", "flips"]
    assert result.details["poison_copies"]["texts_per_target"] == 5
    assert result.summary["evaluated_questions"] == 5  # the slice holds the 5 it evaluates
    assert result.table("first_n5").rows[0].metrics["adversarial-hit@5"].mean == 1.0


def test_stress_with_an_openai_compatible_server(write: Write, monkeypatch) -> None:
    """`--generator openai` talks to a real HTTP server (loopback, chat completions)."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    prompts: list[str] = []

    class Chat(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            prompts.append(body["messages"][-1]["content"])
            reply = json.dumps({"choices": [{"message": {"content": "Nowhere"}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Chat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        monkeypatch.setenv("CREDRANK_LLM_BASE_URL", f"http://127.0.0.1:{server.server_port}")
        monkeypatch.setenv("CREDRANK_LLM_MODEL", "echo")
        result = run_bench("stress-cram", BenchOptions(_cram_file(write), "hashing",
                                                       generator="openai", positions="first",
                                                       limit=2))
    finally:
        server.shutdown()
        server.server_close()
    assert prompts and result.settings["generator"] == "openai"
    monkeypatch.delenv("CREDRANK_LLM_BASE_URL")
    with pytest.raises(ValueError, match=r"--generator openai: .*CREDRANK_LLM_BASE_URL"):
        run_bench("stress-cram", BenchOptions(_cram_file(write), "hashing", generator="openai"))


def test_bench_stress_runs_only_the_rows_asked_for_and_a_pipeline_row(write: Write) -> None:
    """The audit asked for one row and the bench fitted and ran every system; a pipeline
    spec (the audited pipeline) can now join the table as a row of its own."""
    from credrank.pipeline.spec import PipelineSpec

    path = _cram_file(write)
    full = bench_stress("cram", path, get_embedder("hashing"), positions="first", seed=0)
    spec = PipelineSpec.of({"stage": "prior", "priors": "current"}, top_k=10)
    one = bench_stress("cram", path, get_embedder("hashing"), positions="first", seed=0,
                       pipelines={"audited pipeline": spec}, rows=["audited pipeline"])
    rows = {r.system: r for r in one.table("first_n1").rows}
    assert list(rows) == ["similarity only", "audited pipeline"]  # the baseline: Δ's pair
    assert "learned_credibility" in full.details and "learned_credibility" not in one.details
    baseline = full.table("first_n1").rows[0]
    assert rows["similarity only"].metrics["misled-contaminated"].mean == \
        baseline.metrics["misled-contaminated"].mean
    # the passages carry no URL: the prior gives every one the same λ, so the spec's row
    # ranks as similarity only does, at the bench's top 5 (not the spec's 10)
    audited = rows["audited pipeline"]
    assert audited.reads_labels is False
    for measure in ("adversarial-hit@1", "adversarial-hit@5", "misled-contaminated"):
        assert audited.metrics[measure].mean == baseline.metrics[measure].mean
    assert any(n.startswith("rows: only similarity only, audited pipeline") for n in one.notes)
    with pytest.raises(ValueError, match=r"^rows: 'nope' is not a row of the stress bench; "
                                         r"rows: similarity only, "):
        bench_stress("cram", path, get_embedder("hashing"), rows=["nope"])
    with pytest.raises(ValueError, match="'similarity only' is already a row"):
        bench_stress("cram", path, get_embedder("hashing"),
                     pipelines={"similarity only": spec})
