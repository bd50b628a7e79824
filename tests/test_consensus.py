"""Label-free answer consensus: the vote, copy collapse, the stage, calibration and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.combine import Combine
from credrank.consensus.calibrate import answer_matches, choose_threshold
from credrank.consensus.duplicates import duplicate_groups, jaccard_matrix, shingles
from credrank.consensus.readers import extractive_answers, generator_answers
from credrank.consensus.vote import (
    AGREED,
    CONTESTED,
    NO_ANSWERS,
    consensus_factor,
    weighted_vote,
)
from credrank.core.candidates import Candidates, StageError
from credrank.core.pipeline import Pipeline
from credrank.generate.llm import Generation, parse_prompt
from credrank.pipeline.compile import build_stages, check_stages, context, decide_pushdown
from credrank.pipeline.shortcuts import CLI, in_words, spec_from_options
from credrank.pipeline.spec import SpecError
from credrank.select.topk import TopK
from credrank.stages.consensus import AnswerConsensus

runner = CliRunner()


# ---------------------------------------------------------------- the vote (pure math)

def test_vote_hand_computed():
    # classes 0, 0, 1, none; weights 0.5, 0.3, 0.4, 0.9; every passage its own group
    vote = weighted_vote([0, 0, 1, -1], [0, 1, 2, 3], [0.5, 0.3, 0.4, 0.9], threshold=0.5)
    assert vote.status == AGREED and vote.top == 0
    np.testing.assert_allclose(vote.shares, [0.8 / 1.2, 0.4 / 1.2])
    assert vote.total_weight == pytest.approx(1.2)
    f = consensus_factor([0, 0, 1, -1], vote, floor=0.1, unanswered=1.0)
    # f = floor + (1 − floor) · s_c / s*: 1, 1, 0.1 + 0.9 · 0.5, unanswered
    np.testing.assert_allclose(f, [1.0, 1.0, 0.55, 1.0])


def test_copies_vote_once():
    # three copies of a fake (one group) outweigh two independent true passages unless
    # collapsed: 2.7 vs 1.0 as separate voices, 0.9 vs 1.0 as one voice
    classes, w = [1, 1, 1, 0, 0], [0.9, 0.9, 0.9, 0.5, 0.5]
    separate = weighted_vote(classes, [0, 1, 2, 3, 4], w)
    collapsed = weighted_vote(classes, [0, 0, 0, 1, 2], w)
    assert separate.top == 1 and collapsed.top == 0
    np.testing.assert_allclose(collapsed.weights, [1.0, 0.9])
    assert collapsed.voices.tolist() == [True, False, False, True, True]


def test_group_voice_is_its_heaviest_answering_member():
    vote = weighted_vote([-1, 2, 1, 1], [0, 0, 0, 0], [5.0, 0.2, 0.7, 0.7])
    # the unanswered member never votes; ties between equal weights go to the earlier row
    assert vote.voices.tolist() == [False, False, True, False]
    assert vote.top == 1 and vote.shares[1] == 1.0


def test_no_answers_and_zero_weight_leave_factors_at_one():
    for classes, w in (([-1, -1], [0.5, 0.5]), ([0, 1], [0.0, 0.0])):
        vote = weighted_vote(classes, [0, 1], w)
        assert vote.status == NO_ANSWERS and vote.top is None and vote.top_share == 0.0
        np.testing.assert_array_equal(consensus_factor(classes, vote), [1.0, 1.0])


def test_contested_threshold_boundary_and_ties():
    vote = weighted_vote([0, 1, 2], [0, 1, 2], [0.4, 0.35, 0.25], threshold=0.5)
    assert vote.status == CONTESTED and vote.top == 0
    assert weighted_vote([0, 1], [0, 1], [0.5, 0.5], threshold=0.5).status == CONTESTED
    assert weighted_vote([0, 1], [0, 1], [0.6, 0.4], threshold=0.5).status == AGREED
    assert weighted_vote([0], [0], [1.0], threshold=1.0).status == CONTESTED  # never commits
    assert weighted_vote([0, 1], [0, 1], [0.9, 0.1], threshold=0.0).status == AGREED
    tie = weighted_vote([1, 0], [0, 1], [0.5, 0.5])
    assert tie.top == 0  # equal mass: the lower class index


def test_vote_rejects_bad_input():
    with pytest.raises(ValueError, match="weights"):
        weighted_vote([0], [0], [-0.1])
    with pytest.raises(ValueError, match="groups"):
        weighted_vote([0, 0], [0], [1.0, 1.0])
    with pytest.raises(ValueError, match="threshold"):
        weighted_vote([0], [0], [1.0], threshold=1.5)
    with pytest.raises(ValueError, match="weights"):
        weighted_vote([0], [0], [float("nan")])


def test_factor_bounds_on_random_votes():
    rng = np.random.default_rng(3)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        classes = rng.integers(-1, 4, n)
        vote = weighted_vote(classes, rng.integers(0, n, n), rng.random(n) * (rng.random() > 0.1),
                             n_classes=4, threshold=float(rng.random()))
        floor, unanswered = float(rng.random()), float(rng.random())
        f = consensus_factor(classes, vote, floor=floor, unanswered=unanswered)
        assert np.all(np.isfinite(f))
        assert np.all(f <= 1.0) and np.all(f >= min(floor, unanswered) - 1e-12)
        if vote.top is not None:
            assert np.all(f[classes == vote.top] == 1.0)
            assert vote.shares.sum() == pytest.approx(1.0)


# ---------------------------------------------------------------- near-duplicates

def test_jaccard_hand_value_and_empty_texts():
    # 3-grams {a b c, b c d} and {a b c, b c e}: 1 shared of 3
    assert jaccard_matrix(["a b c d", "A B C e"])[0, 1] == pytest.approx(1 / 3)
    assert jaccard_matrix(["", ""])[0, 1] == 0.0
    assert len(shingles("two words")) == 1 and shingles("") == frozenset()


def test_duplicate_groups_single_link_and_cosine():
    base = "the quick brown fox jumps over the lazy dog near the river bank"
    texts = [base, base + " today", "an entirely different passage about tax law and courts",
             base.upper()]
    assert duplicate_groups(texts).tolist() == [0, 0, 1, 0]
    assert duplicate_groups(texts, jaccard=1.0).tolist() == [0, 1, 2, 0]
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.01], [0.0, 0.0]])
    groups = duplicate_groups(["a", "b", "c", "d"], vectors, cosine=0.99)
    assert groups.tolist() == [0, 1, 0, 2]  # a zero vector joins nothing
    with pytest.raises(ValueError, match="no vectors"):
        duplicate_groups(["a", "b"], cosine=0.9)


# ---------------------------------------------------------------- the stage

FAKE = "Hamlet was written by Christopher Marlowe in 1601, scholars now agree."
TRUE_1 = "Hamlet is a tragedy by William Shakespeare, first performed around 1600."
TRUE_2 = "William Shakespeare wrote Hamlet, his longest play, in about 1599."


def batch(texts, sims, prior=None, ids=None):
    ids = ids or [f"d{i}" for i in range(len(texts))]
    out = Candidates(query="Who wrote Hamlet?", doc_ids=np.array(ids, dtype=object),
                     retrieval_score=np.asarray(sims, dtype=float),
                     meta={"text": np.array(texts, dtype=object)})
    return out if prior is None else out.with_factor("prior", np.asarray(prior), 0.0, 1.0)


def table_reader(table):
    """Answers by passage: the answer of the first table passage that the passage starts
    with (copies with a suffix answer as their original)."""
    def read(query, passages):
        return [next((a for t, a in table.items() if p.startswith(t)), "I don't know")
                for p in passages]
    return read


ANSWERS = {FAKE: "Christopher Marlowe", TRUE_1: "William Shakespeare",
           TRUE_2: "Shakespeare, William"}


def test_stage_collapses_copies_of_a_fake():
    texts = [FAKE, FAKE, FAKE, TRUE_1, TRUE_2]
    reader = table_reader({**ANSWERS, TRUE_2: "William Shakespeare"})
    out = AnswerConsensus(reader).transform(batch(texts, [0.9, 0.9, 0.9, 0.6, 0.5]))
    info = out.info["consensus"]
    assert info["status"] == AGREED and info["answer"] == "william shakespeare"
    assert info["duplicate_groups"] == [["d0", "d1", "d2"]]
    assert info["answers"][1]["doc_ids"] == ["d0", "d1", "d2"]
    assert info["answers"][1]["voices"] == 1
    f = out.factors["consensus"]
    assert f[3] == f[4] == 1.0 and f[0] == f[1] == f[2] < 1.0
    assert list(out.meta["answer"]) == ["christopher marlowe"] * 3 + ["william shakespeare"] * 2
    # the same passages as independent voices: the fake wins
    lone = AnswerConsensus(reader, jaccard=1.0).transform(batch(
        [FAKE, FAKE + " Really.", FAKE + " Truly so.", TRUE_1, TRUE_2],
        [0.9, 0.9, 0.9, 0.6, 0.5]))
    assert lone.info["consensus"]["answer"] == "christopher marlowe"


def test_prior_weights_the_votes():
    texts = [FAKE, TRUE_1]
    reader = table_reader(ANSWERS)
    stage = AnswerConsensus(reader, threshold=0.0)
    assert stage(batch(texts, [0.9, 0.6])).info["consensus"]["answer"] == "christopher marlowe"
    out = stage(batch(texts, [0.9, 0.6], prior=[0.2, 0.9]))
    assert out.info["consensus"]["answer"] == "william shakespeare"
    assert "prior" in out.info["consensus"]["weights"]
    assert "absent, taken as 1: credibility, reliability" in out.info["consensus"]["weights"]


def test_contested_lists_competitors_and_keeps_the_ranking():
    texts = [FAKE, TRUE_1, "Hamlet was written by Thomas Kyd."]
    reader = table_reader({**ANSWERS, texts[2]: "Thomas Kyd"})
    b = batch(texts, [0.7, 0.65, 0.6])
    out = AnswerConsensus(reader, threshold=0.5).transform(b)
    info = out.info["consensus"]
    assert info["status"] == CONTESTED and info["answer"] is None
    assert info["factor_applied"] is False
    assert {a["answer"] for a in info["answers"]} == {"christopher marlowe",
                                                      "william shakespeare", "thomas kyd"}
    assert [a["doc_ids"] for a in info["answers"]] == [["d0"], ["d1"], ["d2"]]
    np.testing.assert_array_equal(out.factors["consensus"], [1.0, 1.0, 1.0])
    applied = AnswerConsensus(reader, threshold=0.5, on_contested="apply").transform(b)
    assert applied.info["consensus"]["factor_applied"] is True
    assert applied.factors["consensus"][1] < 1.0


def test_no_extractable_answers_leave_the_ranking_unchanged():
    texts = ["Completely unrelated text about gardening.", "More about tomatoes."]
    b = batch(texts, [0.4, 0.3])
    plain = Pipeline([Combine("multiply"), TopK(2)]).transform(b)
    voted = Pipeline([AnswerConsensus(), Combine("multiply"), TopK(2)]).transform(b)
    info = voted.info["consensus"]
    assert info["status"] == NO_ANSWERS and info["answers"] == [] and info["unanswered"] == 2
    assert list(voted.doc_ids) == list(plain.doc_ids)
    np.testing.assert_array_equal(voted.score, plain.score)


def test_default_extractive_reader_reads_each_passage_alone():
    answers = extractive_answers("Who wrote Hamlet?", [TRUE_1, "Nothing relevant here."])
    assert "Shakespeare" in answers[0] and answers[1] == "I don't know"


def test_generator_answers_uses_one_prompt_per_passage():
    prompts = []

    class Echo:
        def generate(self, prompt, *, max_tokens=64):
            prompts.append(prompt)
            _q, passages = parse_prompt(prompt)
            return Generation(passages[0].split()[0], 1, 1)

    read = generator_answers(Echo(), max_tokens=8)
    assert read("q?", ["alpha beta", "gamma"]) == ["alpha", "gamma"]
    assert len(prompts) == 2


def test_stage_errors_name_the_problem():
    no_text = Candidates(query="q", doc_ids=np.array(["x1"], dtype=object),
                         retrieval_score=np.array([0.5]))
    with pytest.raises(StageError, match=r"x1.*retrieve with text"):
        AnswerConsensus().transform(no_text)
    with pytest.raises(StageError, match="returned 1 answers; expected 2"):
        AnswerConsensus(lambda q, ps: ["a"]).transform(batch(["a b", "c d"], [0.1, 0.2]))
    with pytest.raises(StageError, match="vectors"):
        AnswerConsensus(cosine=0.9).transform(batch(["a b", "c d"], [0.1, 0.2]))
    with pytest.raises(ValueError, match="on_contested"):
        AnswerConsensus(on_contested="pick")
    empty = AnswerConsensus().transform(Candidates.empty("q"))
    assert empty.info["consensus"]["status"] == NO_ANSWERS


# ---------------------------------------------------------------- calibration

def test_choose_threshold_hand_example():
    # s* 0.9 ✓, 0.8 ✗, 0.6 ✓, 0.4 ✗, no answers; commit when s* > τ:
    # U(0.4) = U(0.8) = (2 − 1)/5 → the smallest τ
    choice = choose_threshold([0.9, 0.8, 0.6, 0.4, None], [True, False, True, False, None])
    assert choice.threshold == 0.4 and choice.utility == pytest.approx(0.2)
    assert choice.committed == 3 and choice.committed_correct == 2
    curve = {row["threshold"]: row["utility"] for row in choice.curve}
    assert curve[0.0] == pytest.approx(0.0) and curve[1.0] == pytest.approx(0.0)
    always_right = choose_threshold([0.3, 0.7], [True, True])
    assert always_right.threshold == 0.0 and always_right.utility == 1.0
    always_wrong = choose_threshold([0.3, 1.0], [False, False])  # even unanimity errs
    assert always_wrong.threshold == 1.0 and always_wrong.utility == 0.0
    assert always_wrong.committed == 0
    with pytest.raises(ValueError, match="no development queries"):
        choose_threshold([], [])


def test_answer_matches_is_whole_token_containment():
    assert answer_matches("written by William Shakespeare", ["Shakespeare"])
    assert not answer_matches("Shakespeareana", ["Shakespeare"])
    assert not answer_matches(None, ["x"])


# ---------------------------------------------------------------- search options and CLI

def test_spec_from_options_validates_consensus_options():
    # a pushdown the stage cannot honour: refused when the stages are checked (before an
    # index is opened), said with the option
    insisted = spec_from_options(consensus=True, pushdown=True)
    with pytest.raises(SpecError, match=r"stages\[1\]: needs the Python path \(it reads each "
                                        r"candidate's answer\); pushdown: true cannot be "
                                        r"honoured") as caught:
        check_stages(insisted)
    assert in_words(caught.value, insisted.to_dict(), CLI).startswith("--consensus: ")
    with pytest.raises(ValueError, match=r"unknown key.*colour"):
        spec_from_options(consensus=True, consensus_params={"colour": 1})
    with pytest.raises(ValueError, match=r"^consensus_params: only with consensus$"):
        spec_from_options(consensus_params={"threshold": 0.3})
    spec = spec_from_options(consensus=True, consensus_params={"threshold": 0.3})
    stages = build_stages(spec, context())
    assert decide_pushdown(stages, retrieval=spec.retrieval,
                           requested=spec.pushdown).fused is False
    consensus = next(s for s in stages if isinstance(s, AnswerConsensus))
    # the text comes as the stage reads it: from the retriever here (no store), from the
    # index for the candidates it reads when built over one (tests/test_consensus_scale.py)
    assert "text" in consensus.reads
    assert consensus.threshold == 0.3


def test_cli_search_with_consensus(demo_index_hashing: Path):
    res = runner.invoke(app, ["search", "Does vitamin D prevent COVID-19?", "--index",
                              str(demo_index_hashing), "--consensus", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    info = doc["info"]["consensus"]
    assert info["status"] in (AGREED, CONTESTED, NO_ANSWERS)
    assert doc["settings"]["consensus"]["threshold"] == 0.5
    assert doc["settings"]["pushdown"] is False
    assert all("consensus" in h["score_breakdown"] for h in doc["hits"])
    table = runner.invoke(app, ["search", "Does vitamin D prevent COVID-19?", "--index",
                                str(demo_index_hashing), "--consensus"])
    assert table.exit_code == 0 and "consensus:" in table.stdout
    bad = runner.invoke(app, ["search", "q", "--index", str(demo_index_hashing),
                              "--consensus-param", "threshold"])
    assert bad.exit_code != 0 and "--consensus-param: expected KEY=VALUE" in bad.output


def test_cli_calibrate(demo_index_hashing: Path, tmp_path: Path):
    queries = tmp_path / "dev.jsonl"
    queries.write_text("\n".join(json.dumps(r) for r in (
        {"id": "a", "query": "Does vitamin D prevent COVID-19?", "answers": ["vitamin D"]},
        {"id": "b", "query": "Should I take antibiotics for a cold?",
         "answers": ["no", "antibiotics do not help"]},
    )) + "\n", encoding="utf-8")
    res = runner.invoke(app, ["consensus", "calibrate", str(queries), "--index",
                              str(demo_index_hashing), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["queries"] == 2 and 0.0 <= doc["threshold"] <= 1.0
    # the threshold is fitted on the gold answers: the document says it read labels
    assert doc["reads_labels"] is True
    assert [r["id"] for r in doc["per_query"]] == ["a", "b"]
    assert -1.0 <= doc["utility"] <= 1.0
    # the suggested command carries the exact threshold (0.333 for 1/3 committed on queries
    # the calibration had left uncommitted)
    text = runner.invoke(app, ["consensus", "calibrate", str(queries), "--index",
                               str(demo_index_hashing)])
    suggested = text.stdout.split("threshold=")[-1].split()[0]
    assert float(suggested) == doc["threshold"]
    missing = tmp_path / "nogold.jsonl"
    missing.write_text(json.dumps({"id": "z", "query": "q?"}) + "\n", encoding="utf-8")
    res = runner.invoke(app, ["consensus", "calibrate", str(missing), "--index",
                              str(demo_index_hashing)])
    said = " ".join(res.output.split())
    assert res.exit_code != 0 and "field 'answers'" in said
    assert "got nothing (the field is missing)" in said and "None" not in said
    # an empty file said "choose_threshold: no development queries" (a function's name);
    # a folder "no such queries file"
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    for path, said in ((empty, "empty.jsonl: expected at least one query with its answers, "
                               "got none"),
                       (tmp_path, "expected a queries file, got a directory")):
        res = runner.invoke(app, ["consensus", "calibrate", str(path), "--index",
                                  str(demo_index_hashing)])
        assert res.exit_code == 2 and said in " ".join(res.output.split()), res.output


def test_calibration_queries_are_named_by_line_and_the_field_as_written(tmp_path):
    """A development query without answers was named without its line, and an empty
    ``query`` as the field ``text``."""
    from cli_inprocess import run_cli
    from credrank.demo_corpus import build_demo_index

    idx = build_demo_index(tmp_path / "idx", "hashing")
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "vitamin d"}\n', encoding="utf-8")
    got = run_cli("consensus", "calibrate", queries, "--index", idx)
    assert got.returncode == 2 and f"{queries}:1: query 'a': field 'answers'" in got.stderr
    queries.write_text('{"id": "a", "query": "", "answers": ["x"]}\n', encoding="utf-8")
    got = run_cli("consensus", "calibrate", queries, "--index", idx)
    assert got.returncode == 2 and f"{queries}:1: field 'query': expected non-empty" in \
        got.stderr


@pytest.mark.parametrize("threshold", [0.0, 0.4, 0.5])
def test_a_tie_for_the_top_answer_is_contested_whatever_the_threshold(threshold):
    """Two voices for each of two answers, equal weights: below a threshold of 0.5 the vote
    said 'agreed' on the answer first by name (marlowe over shakespeare), nothing saying a
    tie decided it. A tie for the top is contested, and said."""
    from credrank.consensus.vote import CONTESTED, weighted_vote

    vote = weighted_vote(np.array([0, 0, 1, 1]), np.arange(4), np.ones(4),
                         threshold=threshold)
    assert vote.status == CONTESTED and vote.tied
    lead = weighted_vote(np.array([0, 0, 1]), np.arange(3), np.ones(3), threshold=threshold)
    assert not lead.tied and (lead.status == "agreed") == (2 / 3 > threshold)
