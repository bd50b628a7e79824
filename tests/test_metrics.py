"""Metrics against hand-computed cases; TREC export round trip."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credrank.documents import read_qrels
from credrank.evaluate.metrics import (
    aggregate,
    evaluate,
    harmful_at_k,
    mean,
    measure_direction,
    measure_spec,
    ranked_docs,
    read_run,
    register_measure,
    registered_measures,
    run_from_rankings,
    validate_qrels,
    validate_run,
    write_qrels,
    write_run,
)


def test_precision_at_5_hand_case() -> None:
    qrels = {"q": {"a": 1, "b": 1, "c": 1, "x": 0}}
    run = run_from_rankings({"q": ["a", "x", "b", "y", "c", "z"]})
    out = evaluate(qrels, run, ["P@5", "P@1", "P@2"])
    assert out["P@5"]["q"] == pytest.approx(3 / 5)  # a, b, c among the top 5
    assert out["P@1"]["q"] == pytest.approx(1.0)
    assert out["P@2"]["q"] == pytest.approx(1 / 2)


def test_ndcg_graded_gains_hand_case() -> None:
    qrels = {"q": {"a": 2, "b": 1, "c": 3}}
    run = run_from_rankings({"q": ["x", "a", "b", "y", "c"]})
    out = evaluate(qrels, run, ["nDCG@5", "nDCG@3"])
    # linear gains, discount log2(rank + 1)
    dcg5 = 0 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4) + 0 + 3 / math.log2(6)
    idcg5 = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    dcg3 = 2 / math.log2(3) + 1 / math.log2(4)
    assert out["nDCG@5"]["q"] == pytest.approx(dcg5 / idcg5)
    assert out["nDCG@3"]["q"] == pytest.approx(dcg3 / idcg5)  # the ideal top 3 is the same


def test_reciprocal_rank_hand_cases() -> None:
    qrels = {"q1": {"c": 1}, "q2": {"z": 1}}
    run = run_from_rankings({"q1": ["a", "b", "c", "d"], "q2": ["a", "b"]})
    out = evaluate(qrels, run, ["RR"])
    assert out["RR"]["q1"] == pytest.approx(1 / 3)
    assert out["RR"]["q2"] == 0.0  # relevant doc never retrieved
    assert aggregate(out)["RR"] == pytest.approx((1 / 3 + 0) / 2)


def test_missing_query_scores_zero_and_run_extras_are_ignored() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = run_from_rankings({"q1": ["a"], "other": ["b"]})
    out = evaluate(qrels, run, ["P@5", "RR", "nDCG@10"])
    for m in ("P@5", "RR", "nDCG@10"):
        assert set(out[m]) == {"q1", "q2"}
        assert out[m]["q2"] == 0.0
    assert out["RR"]["q1"] == 1.0


def test_queries_without_relevant_docs_policy() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 0}}
    run = run_from_rankings({"q1": ["a"], "q2": ["b", "c"]})
    excluded = evaluate(qrels, run, ["P@5", "harmful@2"], bad={"q2": {"c"}})
    assert set(excluded["P@5"]) == {"q1"}
    assert excluded["harmful@2"] == {"q1": 0.0, "q2": 0.5}  # harmful@k keeps every topic
    zero = evaluate(qrels, run, ["P@5"], no_relevant="zero")
    assert zero["P@5"] == {"q1": pytest.approx(0.2), "q2": 0.0}
    with pytest.raises(ValueError, match="no_relevant"):
        evaluate(qrels, run, ["P@5"], no_relevant="drop")  # type: ignore[arg-type]


def test_harmful_at_k_hand_cases() -> None:
    bad = {"q": {"x", "y", "z"}}
    full = run_from_rankings({"q": ["x", "a", "b", "y", "c", "z"]})
    assert harmful_at_k(full, bad, 5)["q"] == pytest.approx(2 / 5)
    assert harmful_at_k(full, bad, 6)["q"] == pytest.approx(3 / 6)
    assert harmful_at_k(full, bad, 1)["q"] == 1.0
    # fewer than k retrieved: the denominator stays k
    short = run_from_rankings({"q": ["x", "a", "y"]})
    assert harmful_at_k(short, bad, 5)["q"] == pytest.approx(2 / 5)
    # missing query: nothing retrieved, nothing harmful
    assert harmful_at_k({}, bad, 5) == {"q": 0.0}
    with pytest.raises(ValueError, match="k"):
        harmful_at_k(full, bad, 0)


def test_harmful_measure_string_in_evaluate() -> None:
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    run = run_from_rankings({"q1": ["x", "a"], "q2": ["b"]})
    out = evaluate(qrels, run, ["P@5", "harmful@5", "harmful@1"], bad={"q1": {"x"}})
    assert out["harmful@5"] == {"q1": pytest.approx(0.2), "q2": 0.0}
    assert out["harmful@1"] == {"q1": 1.0, "q2": 0.0}
    assert aggregate(out)["harmful@1"] == pytest.approx(0.5)
    with pytest.raises(ValueError, match="bad"):
        evaluate(qrels, run, ["harmful@5"])


def test_ties_follow_trec_eval_order_in_every_measure() -> None:
    # equal scores: trec_eval ranks by docid descending, so "b" comes before "a"
    run = {"q": {"a": 1.0, "b": 1.0}}
    assert ranked_docs(run["q"]) == ["b", "a"]
    out = evaluate({"q": {"a": 1}}, run, ["RR", "harmful@1"], bad={"q": {"b"}})
    assert out["RR"]["q"] == pytest.approx(0.5)
    assert out["harmful@1"]["q"] == 1.0


def test_run_from_rankings_scores_and_duplicates() -> None:
    run = run_from_rankings({"q": ["c", "a", "b"]})
    assert run == {"q": {"c": 3.0, "a": 2.0, "b": 1.0}}
    assert ranked_docs(run["q"]) == ["c", "a", "b"]
    with pytest.raises(ValueError, match="twice"):
        run_from_rankings({"q": ["a", "b", "a"]})


def test_bad_input_is_rejected_with_names() -> None:
    with pytest.raises(ValueError, match="P@five"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["P@five"])
    with pytest.raises(ValueError, match="pytrec_eval"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["ERR@5"])  # gdeval only
    with pytest.raises(ValueError, match="finite"):
        evaluate({"q": {"a": 1}}, {"q": {"a": float("nan")}}, ["P@5"])
    with pytest.raises(ValueError, match="gain"):
        evaluate({"q": {"a": 2**31}}, {"q": {"a": 1.0}}, ["P@5"])  # trec_eval's C int
    with pytest.raises(ValueError, match="measures"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, "P@5")  # type: ignore[arg-type]


def test_mean_of_nothing_is_declared_zero() -> None:
    assert mean({}) == 0.0
    assert mean({"a": 1.0, "b": 0.0}) == 0.5


def test_trec_run_and_qrels_round_trip(tmp_path: Path) -> None:
    run = {"q1": {"d1": 0.1 + 0.2, "d2": -1.5e-300, "d3": 7.0}, "q_2": {"d/9": 1.0}}
    write_run(run, tmp_path / "run.txt", tag="sys")
    lines = (tmp_path / "run.txt").read_text().splitlines()
    assert lines[0].split() == ["q1", "Q0", "d3", "1", "7.0", "sys"]  # best first, rank 1
    assert read_run(tmp_path / "run.txt") == run  # exact floats
    qrels = {"q1": {"d1": 2, "d2": 0}, "q_2": {"d/9": 1}}
    write_qrels(qrels, tmp_path / "qrels.txt")
    assert (tmp_path / "qrels.txt").read_text().splitlines()[0] == "q1 0 d1 2"
    assert read_qrels(tmp_path / "qrels.txt") == qrels


def test_trec_files_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="whitespace"):
        write_run({"q": {"a b": 1.0}}, tmp_path / "r.txt")
    bad = tmp_path / "bad_run.txt"
    bad.write_text("q Q0 d 1 0.5 tag\nq Q0 e 2\n")
    with pytest.raises(ValueError, match=r":2: expected 6 fields"):
        read_run(bad)
    two = tmp_path / "two_runs.txt"
    two.write_text("q Q0 d 1 0.5 a\nq Q0 e 2 0.4 a\nq2 Q0 d 1 0.9 b\n")
    with pytest.raises(ValueError, match=r":3: expected one run per file, the tag 'a' of line "
                                         r"1; got the tag 'b'"):
        read_run(two)  # was merged into one run
    dup = tmp_path / "dup_qrels.txt"
    dup.write_text("q 0 d 1\nq 0 d 0\n")
    with pytest.raises(ValueError, match="expected the relevance 1 given at line 1"):
        read_qrels(dup)  # the one qrels reader, credrank.documents.read_qrels


rankings = st.lists(st.sampled_from("abcdefghij"), unique=True, max_size=10)
judgements = st.dictionaries(st.sampled_from("abcdefghij"), st.integers(0, 3), min_size=1)


@settings(max_examples=60, deadline=None)
@given(ranking=rankings, judged=judgements, k=st.integers(1, 8))
def test_precision_and_rr_match_definitions(ranking: list[str], judged: dict[str, int],
                                            k: int) -> None:
    if not any(g > 0 for g in judged.values()):
        judged = {**judged, "z": 1}
    out = evaluate({"q": judged}, run_from_rankings({"q": ranking}), [f"P@{k}", "RR"])
    relevant = {d for d, g in judged.items() if g > 0}
    assert out[f"P@{k}"]["q"] == pytest.approx(sum(d in relevant for d in ranking[:k]) / k)
    first = next((i for i, d in enumerate(ranking, 1) if d in relevant), None)
    assert out["RR"]["q"] == pytest.approx(0.0 if first is None else 1 / first)


def test_measure_registry_directions() -> None:
    for name in ("harmful@1", "harmful@5", "harmful@10", "log-loss", "Brier"):
        assert measure_direction(name) == "lower", name
    for name in ("P@5", "nDCG@10", "nDCG", "RR", "AP", "R@100", "coverage@5", "accuracy",
                 "AUC", "Pearson", "Spearman"):
        assert measure_direction(name) == "higher", name
    assert measure_spec("harmful@3").family == "harmful@k"
    assert {s.family for s in registered_measures()} >= {"harmful@k", "nDCG@k", "RR"}
    with pytest.raises(ValueError, match="no registered direction"):
        measure_direction("harmfulness")
    with pytest.raises(ValueError, match="no registered direction"):
        measure_direction("RR@10")  # evaluate refuses it too: one vocabulary
    with pytest.raises(ValueError, match="direction"):
        register_measure("odd", r"odd", "sideways", "")  # type: ignore[arg-type]


def test_qrels_and_run_share_one_validator() -> None:
    assert validate_qrels({"q": {"d": 2}}) == {"q": {"d": 2}}
    assert validate_run({"q": {"d": 1}}) == {"q": {"d": 1.0}}
    for bad, match in (({"q": {"d": True}}, "gain"), ({"q": {"d": 2**31}}, "gain"),
                       ({"q": {"d": -(2**31) - 1}}, "gain"),
                       ({"": {"d": 1}}, "qid"), ({"q": {"": 1}}, "docid"),
                       ({"q": [1]}, "mapping"), ([("q", {})], "mapping")):
        with pytest.raises(ValueError, match=match):
            validate_qrels(bad)  # type: ignore[arg-type]
    for bad, match in (({"q": {"d": True}}, "finite"), ({"q": {"d": float("nan")}}, "finite"),
                       ({"q": {"d": "x"}}, "finite"), ({"q": 3}, "mapping")):
        with pytest.raises(ValueError, match=match):
            validate_run(bad, name="myrun")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"myrun\['q'\]\['d'\]"):
        validate_run({"q": {"d": float("inf")}}, name="myrun")
    with pytest.raises(ValueError, match="k"):
        harmful_at_k({"q": {"d": 1.0}}, {}, True)  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["P@0", "nDCG@0", "R@0", "AP@0", "RR@0", "harmful@0",
                                  "P@5.0", "nDCG@2.5"])
def test_cutoff_must_be_a_positive_integer_before_any_evaluator(text: str) -> None:
    # P@0 used to abort the interpreter inside pytrec_eval (a C assertion); P@5.0 gave a bare
    # AssertionError from ir_measures
    with pytest.raises(ValueError, match=rf"measures: '{re.escape(text)}' needs an integer "
                                         "cutoff k >= 1"):
        evaluate({"q": {"a": 1}}, {"q": {"a": 1.0}}, ["P@1", text], bad={"q": set()})


def test_negative_grades_are_non_relevant_in_reading_and_evaluating(tmp_path: Path) -> None:
    # TREC qrels carry negative grades (Web track -2 = spam): read_qrels keeps them and
    # evaluate scores them as gain 0, the trec_eval convention
    path = tmp_path / "neg.txt"
    path.write_text("q1 0 a 2\nq1 0 b 1\nq1 0 c -2\nq2 0 x -1\n")
    qrels = read_qrels(path)
    assert qrels == {"q1": {"a": 2, "b": 1, "c": -2}, "q2": {"x": -1}}
    run = {"q1": {"c": 3.0, "a": 2.0, "b": 1.0}, "q2": {"x": 1.0}}
    measures = ["nDCG@3", "P@3", "RR"]
    zeroed = {q: {d: max(g, 0) for d, g in row.items()} for q, row in qrels.items()}
    assert evaluate(qrels, run, measures) == evaluate(zeroed, run, measures)
    out = evaluate(qrels, run, measures, no_relevant="zero")
    assert out["RR"] == {"q1": 0.5, "q2": 0.0}  # c (-2) is not relevant; q2 has none


def test_a_selectors_list_is_measured_in_the_order_it_was_returned() -> None:
    """A selector's list (exposure, MMR, FA*IR) is not sorted by score; run_from_batches
    sorted every batch by score, so harmful@k below the selector's top_k (the audit's
    factuality) measured a list no user saw. A batch without a selector is still ranked by
    score."""
    from credrank.audit.measures import harmful_share
    from credrank.core.candidates import Candidates
    from credrank.evaluate.metrics import harmful_at_k, run_from_batches

    shown = Candidates.from_records("q", ["a", "b", "c"], [0.2, 0.9, 0.5]).with_info(
        select={"selector": "exposure"})
    plain = Candidates.from_records("q", ["a", "b", "c"], [0.2, 0.9, 0.5])
    assert sorted(run_from_batches({"q": shown})["q"].items(), key=lambda kv: -kv[1]) == \
        [("a", 3.0), ("b", 2.0), ("c", 1.0)]
    assert max(run_from_batches({"q": plain})["q"].items(), key=lambda kv: kv[1])[0] == "b"
    bad = {"q": ["b"]}
    assert harmful_at_k(run_from_batches({"q": shown}), bad, 1) == {"q": 0.0}
    assert harmful_share({"q": shown}, bad, 1).value == 0.0  # "a" was shown first
    assert harmful_share({"q": plain}, bad, 1).value == 1.0
