"""IWMV reliability estimation (chapter 35.3): hand-computed cases and properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credrank.reliability.answers import AnswerTable
from credrank.reliability.estimate import (
    UNKNOWN,
    ReliabilityEstimator,
    agreement_rates,
    encode_answers,
)
from credrank.reliability.vote import majority_matrix, paper_weights, vote_matrix
from credrank_bench.experiments.reference import dict_loop_iwmv

# Five sources, five questions. Plain majority answers Q5 with "x" (C, D, E);
# hand-computed IWMV (S = 5):
#   round 0 (strict majority): z = [1, 1, 1, 1, x]; r = A .8, B .8, C .6, D .6, E .4
#   v = 5r − 1 = [3, 3, 2, 2, 1] → Q5: y 6 vs x 5 → z(Q5) = y
#   round 1: r = [1, 1, .4, .4, .2]; round 2 reproduces z → converged after 2 rounds.
FIVE = {
    "A": {"Q1": "1", "Q2": "1", "Q3": "1", "Q4": "1", "Q5": "y"},
    "B": {"Q1": "1", "Q2": "1", "Q3": "1", "Q4": "1", "Q5": "y"},
    "C": {"Q1": "1", "Q2": "2", "Q3": "2", "Q4": "1", "Q5": "x"},
    "D": {"Q1": "2", "Q2": "1", "Q3": "3", "Q4": "1", "Q5": "x"},
    "E": {"Q1": "3", "Q2": "3", "Q3": "1", "Q4": "2", "Q5": "x"},
}


def test_hand_computed_iwmv():
    est = ReliabilityEstimator().fit(FIVE)
    assert est.reliability_ == pytest.approx([1.0, 1.0, 0.4, 0.4, 0.2])
    assert est.weights_ == pytest.approx([4.0, 4.0, 1.0, 1.0, 0.0])
    assert est.consensus_labels_ == ["1", "1", "1", "1", "y"]
    assert est.n_iter_ == 2 and est.converged_
    assert est.coverage_.tolist() == [5, 5, 5, 5, 5]
    # the plain majority on Q5 is the other answer
    plain = majority_matrix(est.encoded_.classes, rule="all")
    assert est.encoded_.label(4, int(plain[4])) == "x"


def test_max_iter_reports_non_convergence():
    est = ReliabilityEstimator(max_iter=1).fit(FIVE)
    assert est.n_iter_ == 1 and not est.converged_
    assert est.history_ == pytest.approx([0.2])


def test_abstentions_do_not_count_in_the_denominator():
    answers = {
        "good": {"q1": "a", "q2": "b", "q3": "I don't know", "q4": "IDK"},
        "s2": {"q1": "a", "q2": "b", "q3": "c", "q4": "d"},
        "s3": {"q1": "a", "q2": "b", "q3": "c", "q4": "d"},
    }
    est = ReliabilityEstimator().fit(answers)
    assert est.reliability_[0] == 1.0          # 2 of 2 usable answers, not 2 of 4
    assert est.coverage_[0] == 2 and est.answered_[0] == 2


def test_all_abstaining_question_has_no_answer_and_unknown_source():
    answers = {
        "s1": {"q1": "a", "q2": "IDK"},
        "s2": {"q1": "a", "q2": ""},
        "mute": {"q1": "I don't know", "q2": "IDK"},
    }
    est = ReliabilityEstimator().fit(answers)
    assert est.consensus_labels_ == ["a", None]
    assert est.known_.tolist() == [True, True, False]
    assert est.reliability_[2] == UNKNOWN and est.weights_[2] == 0.0
    assert np.all(np.isfinite(est.reliability_)) and np.all(np.isfinite(est.weights_))
    row = est.to_dict()["sources"][2]
    assert row["reliability"] is None and row["weight"] is None and not row["known"]
    assert "mute" not in est.reliability_table()


def test_source_answering_only_unresolved_questions_is_unknown():
    answers = {
        "s1": {"q1": "a", "q2": "p"},
        "s2": {"q1": "a", "q2": "q"},
        "late": {"q3": "z"},              # q3: nobody else answers
    }
    est = ReliabilityEstimator().fit(answers)
    # a single ballot is not a consensus: "late" has no resolved question, so it is unknown
    assert not est.known_[2] and est.reliability_[2] == UNKNOWN and est.coverage_[2] == 0
    assert est.consensus_labels_[2] == "z" and not est.resolved_[2]
    # q2 is a 1:1 tie between equal weights: the answer is the tie rule's ("p"), but the
    # question is unresolved, so s1 and s2 keep r = 1 from q1 alone
    assert est.consensus_labels_[1] == "p" and est.tied_[1] and not est.resolved_[1]
    assert est.reliability_[:2].tolist() == [1.0, 1.0] and est.coverage_[:2].tolist() == [1, 1]


def test_solo_questions_do_not_raise_a_source_reliability():
    # finding 3: X is wrong on every shared question and alone on 30 others
    answers = {s: {f"c{j}": f"right{j}" for j in range(10)} for s in ("A", "B", "C")}
    answers["X"] = {f"c{j}": f"wrong{j}" for j in range(10)}
    answers["X"].update({f"solo{j}": f"mine{j}" for j in range(30)})
    est = ReliabilityEstimator().fit(answers)
    x = est.source_ids_.index("X")
    assert est.reliability_[x] == 0.0 and est.coverage_[x] == 10
    assert est.weights_[x] == -1.0
    assert est.resolved_.sum() == 10


def test_a_symmetric_split_does_not_decide_the_reliabilities():
    # finding 2: 4 control questions all agree; on 4 more A, B say one answer, C, D another.
    # The evidence is symmetric, so the reliabilities must be too, whatever the answers' names
    for first, second in (("apple", "zebra"), ("zz", "apple")):
        answers = {s: {f"c{j}": f"ok{j}" for j in range(4)} for s in "ABCD"}
        for s in "AB":
            answers[s].update({f"t{j}": first for j in range(4)})
        for s in "CD":
            answers[s].update({f"t{j}": second for j in range(4)})
        est = ReliabilityEstimator().fit(answers)
        assert est.reliability_.tolist() == [1.0, 1.0, 1.0, 1.0]
        assert est.weights_.tolist() == [3.0, 3.0, 3.0, 3.0]
        assert est.tied_.sum() == 4 and est.resolved_.sum() == 4
        diag = est.diagnostics()
        assert diag.tie_share == 0.5 and diag.resolved_share == 0.5
        assert not diag.trustworthy and any("tie" in w for w in diag.warnings)


def test_no_strict_majority_anywhere_leaves_everyone_unknown():
    answers = {"s1": {"q1": "a", "q2": "c"}, "s2": {"q1": "b", "q2": "d"}}
    est = ReliabilityEstimator().fit(answers)
    assert not est.known_.any() and est.n_iter_ == 0 and not est.converged_
    assert est.consensus_labels_ == [None, None]


def test_tie_rule_is_order_independent():
    m1 = {"s1": {"q": "banana"}, "s2": {"q": "apple"}}
    m2 = {"s2": {"q": "apple"}, "s1": {"q": "banana"}}
    for answers in (m1, m2):
        table = AnswerTable.from_mapping(answers)
        enc = encode_answers(table)
        winner, tied = vote_matrix(enc.classes, np.ones(2))
        assert tied[0] and enc.label(0, int(winner[0])) == "apple"


def test_empty_vote_and_negative_weights():
    m = np.array([[0, -1], [1, -1], [1, -1]])
    winner, tied = vote_matrix(m, np.array([-1.0, 0.2, 0.3]))
    assert winner.tolist() == [1, -1] and not tied.any()
    winner, _ = vote_matrix(m, np.array([-1.0, -2.0, -2.0]))   # least negative present class
    assert winner.tolist() == [0, -1]


def test_near_equal_float_sums_count_as_ties():
    m = np.array([[0], [0], [1]])
    winner, tied = vote_matrix(m, np.array([0.1, 0.2, 0.3]))    # 0.1 + 0.2 != 0.3 in floats
    assert tied[0] and winner[0] == 0


def test_clip_option():
    # "bad" always gives the odd answer out: r = 0 → v = S·0 − 1 = −1 (paper), 0 (clipped)
    answers = {s: {f"q{i}": "a" for i in range(4)} for s in ("s1", "s2", "s3")}
    answers["bad"] = {f"q{i}": f"w{i}" for i in range(4)}
    paper = ReliabilityEstimator().fit(answers)
    clipped = ReliabilityEstimator(clip=True).fit(answers)
    assert paper.weights_ == pytest.approx([3.0, 3.0, 3.0, -1.0])
    assert clipped.weights_ == pytest.approx([3.0, 3.0, 3.0, 0.0])
    assert paper.reliability_ == pytest.approx(clipped.reliability_)


def test_max_scale_caps_the_factor():
    est = ReliabilityEstimator(max_scale=2).fit(FIVE)
    known = est.known_
    assert est.weights_[known] == pytest.approx(2 * est.reliability_[known] - 1)


def test_table_mapping_and_matrix_inputs_agree():
    table = AnswerTable.from_mapping(FIVE)
    enc = encode_answers(table)
    a = ReliabilityEstimator().fit(table)
    b = ReliabilityEstimator().fit(enc.classes)
    assert a.reliability_ == pytest.approx(b.reliability_)
    assert a.consensus_.tolist() == b.consensus_.tolist()


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"tol": 0}, "tol"), ({"tol": float("nan")}, "tol"), ({"max_iter": 0}, "max_iter"),
    ({"max_iter": 1.5}, "max_iter"), ({"max_scale": -1}, "max_scale")])
def test_parameters_are_validated(kwargs, field):
    with pytest.raises(ValueError, match=field):
        ReliabilityEstimator(**kwargs)


def test_bad_inputs():
    with pytest.raises(TypeError, match="answers"):
        ReliabilityEstimator().fit([1, 2, 3])
    with pytest.raises(ValueError, match="int matrix"):
        ReliabilityEstimator().fit(np.zeros((2, 2)))
    with pytest.raises(ValueError, match=">= -1"):
        ReliabilityEstimator().fit(np.array([[-2, 0]]))
    with pytest.raises(RuntimeError, match="not fitted"):
        ReliabilityEstimator().reliability_table()


def _reference(m: np.ndarray):
    """The dict-of-answers reference on the same matrix (same declared rules)."""
    answers = {s: {q: int(m[s, q]) for q in range(m.shape[1]) if m[s, q] >= 0}
               for s in range(m.shape[0])}
    r, z, _ = dict_loop_iwmv(answers, m.shape[1])
    return r, z


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 10), st.integers(1, 4), st.integers(0, 10_000))
def test_matches_dict_reference_and_stays_finite(n_s, n_q, n_c, seed):
    rng = np.random.default_rng(seed)
    m = rng.integers(-1, n_c, size=(n_s, n_q))
    est = ReliabilityEstimator().fit(m)
    ref_r, ref_z = _reference(m)
    assert {s for s in range(n_s) if est.known_[s]} == set(ref_r)
    for s, r in ref_r.items():
        assert est.reliability_[s] == pytest.approx(r)
    assert {q: int(c) for q, c in enumerate(est.consensus_) if c >= 0} == ref_z
    assert np.all(np.isfinite(est.reliability_)) and np.all(np.isfinite(est.weights_))
    k = est.known_
    assert np.all((est.reliability_[k] >= 0) & (est.reliability_[k] <= 1))
    assert np.all(est.reliability_[~k] == UNKNOWN)
    assert np.all(est.coverage_ <= est.answered_)


def test_agreement_rates_direct():
    m = np.array([[0, 1, -1], [0, 0, 0], [-1, -1, -1]])
    r, known, n = agreement_rates(m, np.array([0, 0, -1]))
    assert r.tolist() == [0.5, 1.0, UNKNOWN]
    assert known.tolist() == [True, True, False] and n.tolist() == [2, 2, 0]
    with pytest.raises(ValueError, match="consensus"):
        agreement_rates(m, np.array([0, 0]))


def test_diagnostics_flag_a_biased_binary_consensus():
    # 20 sources answer "helpful" on nearly everything: the consensus is one label
    rng = np.random.default_rng(0)
    answers = {f"s{i}": {f"q{j}": ("unhelpful" if rng.random() < 0.05 else "helpful")
                         for j in range(20)} for i in range(20)}
    diag = ReliabilityEstimator().fit(answers).diagnostics()
    assert not diag.trustworthy
    assert diag.shared_label_set and diag.top_label_share > 0.9
    assert any("response bias" in w for w in diag.warnings)


def test_diagnostics_quiet_on_a_clean_open_answer_set():
    answers = {f"s{i}": {f"q{j}": f"answer{j}" for j in range(10)} for i in range(5)}
    diag = ReliabilityEstimator().fit(answers).diagnostics()
    assert diag.trustworthy and diag.warnings == []
    assert diag.mean_agreement == 1.0 and diag.resolved_share == 1.0


def test_start_rules():
    # five classes split the vote: nothing has > half, but the top class is unique
    m = np.array([[0, 0], [0, 1], [1, 2], [2, 3], [3, 3]])
    assert majority_matrix(m, rule="majority").tolist() == [-1, -1]
    assert majority_matrix(m, rule="plurality").tolist() == [0, 3]
    assert majority_matrix(m, rule="all").tolist() == [0, 3]
    tie = np.array([[0], [1]])
    assert majority_matrix(tie, rule="plurality").tolist() == [-1]
    assert majority_matrix(tie, rule="all").tolist() == [0]
    est = ReliabilityEstimator().fit(m)
    assert not est.known_.any()
    est = ReliabilityEstimator(start="plurality").fit(m)
    assert est.known_.all() and est.n_iter_ >= 1
    with pytest.raises(ValueError, match="start"):
        ReliabilityEstimator(start="best")
    with pytest.raises(ValueError, match="rule"):
        majority_matrix(m, rule="best")


@pytest.mark.parametrize("n_sources", [1, 2])
def test_diagnostics_need_several_sources(n_sources):
    # issue 9: one source agrees with itself on everything, which read as trustworthy
    answers = {f"s{i}": {f"q{j}": f"answer{j}" for j in range(10)} for i in range(n_sources)}
    diag = ReliabilityEstimator().fit(answers).diagnostics()
    assert not diag.trustworthy and diag.too_few_sources and diag.n_sources == n_sources
    assert "need >= 3" in diag.warnings[0] and "several independent sources" in diag.warnings[0]
    assert diag.to_dict()["too_few_sources"] is True
    three = {f"s{i}": {f"q{j}": f"answer{j}" for j in range(10)} for i in range(3)}
    assert ReliabilityEstimator().fit(three).diagnostics().trustworthy


def test_no_source_is_named_as_the_answers():
    # finding 10: it said "n_sources: expected an integer >= 1, got 0"
    with pytest.raises(ValueError, match=r"^answers: expected at least one source, got none$"):
        ReliabilityEstimator().fit({})


def test_paper_weights_refuse_fewer_sources_than_reliabilities():
    with pytest.raises(ValueError, match=r"n_sources: expected at least the number of "
                                         r"reliabilities \(2\), got 1"):
        paper_weights([0.5, 0.5], n_sources=1)
    assert paper_weights([0.5], n_sources=4).tolist() == [1.0]    # a subset, the full S


@pytest.mark.parametrize("rows", [
    {"A": {"q1": "Paris"}, "B": {"q1": "Paris"}, "C": {"q1": "Paris"}},
    {"A": {"q1": "Paris", "q2": "4", "q3": "red"}, "B": {"q1": "Paris", "q2": "4", "q3": "red"},
     "C": {"q1": "Lyon", "q2": "5", "q3": "blue"}},
])
def test_a_few_open_questions_are_not_a_shared_label_set(rows):
    # finding 9: every label of a file with <= 3 questions counted as "common", so one
    # question answered "Paris" warned of a shared response bias
    diag = ReliabilityEstimator().fit(rows).diagnostics()
    assert not diag.shared_label_set
    assert not any("response bias" in w for w in diag.warnings)
    assert diag.trustworthy


def test_a_small_yes_no_file_is_still_a_shared_label_set():
    rows = {s: {"q1": "yes", "q2": "yes", "q3": "no"} for s in "ABC"}
    assert ReliabilityEstimator().fit(rows).diagnostics().shared_label_set
