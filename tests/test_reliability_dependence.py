"""Copies and Sybils: dependence clusters and collapsing them (chapter 35.3)."""

from __future__ import annotations

import numpy as np
import pytest

from credrank.reliability.answers import AnswerTable
from credrank.reliability.dependence import (
    collapse,
    detect_dependence,
    document_overlap,
    pairwise_agreement,
)
from credrank.reliability.estimate import EncodedAnswers, ReliabilityEstimator, encode_answers

N_Q = 60
WRONG = ["w1", "w2", "w3", "w4"]


def _attack(seed: int = 0, n_honest: int = 5, n_sybils: int = 8, target_share: float = 0.3):
    """Honest sources (r = 0.85, wrong answers spread over 4 classes) and many identities that
    replay one sheet: the truth, except one shared false answer ("fake") on the targets."""
    rng = np.random.default_rng(seed)
    truth = {f"q{j}": f"true{j}" for j in range(N_Q)}
    answers: dict[str, dict[str, str]] = {}
    for i in range(n_honest):
        answers[f"honest{i}"] = {
            q: (t if rng.random() < 0.85 else rng.choice(WRONG)) for q, t in truth.items()}
    targets = set(rng.choice(list(truth), int(target_share * N_Q), replace=False).tolist())
    sheet = {q: ("fake" if q in targets else t) for q, t in truth.items()}
    for i in range(n_sybils):
        answers[f"sybil{i}"] = dict(sheet)
    return answers, truth, targets


def _accuracy(est: ReliabilityEstimator, truth: dict[str, str]) -> float:
    labels = dict(zip(est.question_ids_, est.consensus_labels_, strict=True))
    return float(np.mean([labels[q] == t for q, t in truth.items()]))


def test_sybils_win_without_collapse_and_lose_after():
    answers, truth, targets = _attack()
    enc = encode_answers(AnswerTable.from_mapping(answers))
    plain = ReliabilityEstimator().fit(enc)
    labels = dict(zip(plain.question_ids_, plain.consensus_labels_, strict=True))
    # the attack works: every target question ends on the false answer, and the Sybils look
    # perfectly reliable while the honest sources look worse
    assert all(labels[q] == "fake" for q in targets)
    sybil_r = plain.reliability_[[s.startswith("sybil") for s in enc.source_ids]]
    honest_r = plain.reliability_[[s.startswith("honest") for s in enc.source_ids]]
    assert sybil_r.min() == 1.0 and honest_r.max() < 0.8

    report = detect_dependence(enc)
    assert report.clusters == [[f"sybil{i}" for i in range(8)]]
    assert all(p.source_a.startswith("sybil") and p.source_b.startswith("sybil")
               for p in report.pairs)
    assert all(p.observed == 1.0 and p.expected < 0.7 for p in report.pairs)

    fixed = ReliabilityEstimator().fit(collapse(enc, report.groups()))
    assert _accuracy(fixed, truth) >= 0.95 > _accuracy(plain, truth)
    ballot = fixed.source_ids_.index("sybil0+7")
    assert fixed.reliability_[ballot] == pytest.approx(1 - len(targets) / N_Q, abs=0.05)


def test_independent_sources_form_no_cluster():
    rng = np.random.default_rng(1)
    answers = {f"s{i}": {f"q{j}": (f"t{j}" if rng.random() < 0.8 else rng.choice(WRONG))
                         for j in range(N_Q)} for i in range(8)}
    report = detect_dependence(encode_answers(AnswerTable.from_mapping(answers)))
    assert report.clusters == [] and report.pairs == []


def test_highly_reliable_independent_twins_are_not_copies():
    # two near-perfect sources agree almost always, but because both are right
    rng = np.random.default_rng(2)
    answers = {f"s{i}": {f"q{j}": (f"t{j}" if rng.random() < (0.98 if i < 2 else 0.8)
                                   else rng.choice(WRONG)) for j in range(N_Q)}
               for i in range(6)}
    report = detect_dependence(encode_answers(AnswerTable.from_mapping(answers)))
    assert report.clusters == []


def test_document_near_duplicates_make_a_cluster():
    rng = np.random.default_rng(3)
    answers = {f"s{i}": {f"q{j}": (f"t{j}" if rng.random() < 0.8 else rng.choice(WRONG))
                         for j in range(20)} for i in range(4)}
    text = "the quick brown fox jumps over the lazy dog near the river bank today"
    docs = {"s0": [text, "an unrelated page about gardening tools and seeds in spring"],
            "s2": [text + " again"], "s3": ["something else entirely different here ok"]}
    enc = encode_answers(AnswerTable.from_mapping(answers))
    overlap = document_overlap(enc.source_ids, docs)
    assert overlap[0, 2] == overlap[2, 0] == 1.0      # all of s2's documents copy s0
    assert overlap[0, 3] == 0.0
    report = detect_dependence(enc, documents=docs)
    assert report.clusters == [["s0", "s2"]]


def test_collapse_takes_the_plurality_and_keeps_abstentions():
    m = np.array([[0, 1, -1], [0, 2, -1], [1, 2, -1], [3, 3, 3]])
    enc = EncodedAnswers(("a1", "b1", "c1", "d1"), ("q1", "q2", "q3"), m,
                         tuple(tuple(str(c) for c in range(4)) for _ in range(3)))
    out = collapse(enc, [[0, 1, 2], [3]])
    assert out.source_ids == ("a1+2", "d1")
    assert out.classes.tolist() == [[0, 2, -1], [3, 3, 3]]


def test_pairwise_agreement_counts():
    m = np.array([[0, 1, -1], [0, 2, 1], [-1, 2, 1]])
    agree, overlap = pairwise_agreement(m)
    assert overlap.tolist() == [[2, 2, 1], [2, 3, 2], [1, 2, 2]]
    assert agree.tolist() == [[2, 1, 0], [1, 3, 2], [0, 2, 2]]


def test_parameters_are_validated():
    enc = encode_answers(AnswerTable.from_mapping({"s": {"q": "x"}}))
    with pytest.raises(ValueError, match="near_duplicate"):
        detect_dependence(enc, near_duplicate=2)
    with pytest.raises(ValueError, match="min_overlap"):
        detect_dependence(enc, min_overlap=0)
    with pytest.raises(ValueError, match="max_sources"):
        detect_dependence(enc, max_sources=0)


def _farm(honest_errors: list[int], n_farm: int = 8):
    """Accurate honest sources (source i wrong on ``honest_errors[i]`` questions of its own,
    disjoint from the others', wrong answers spread over 4 classes) and ``n_farm`` identities
    that all answer "fake" to every question (a content farm that is always wrong)."""
    truth = {f"q{j}": f"true{j}" for j in range(N_Q)}
    answers: dict[str, dict[str, str]] = {}
    start = 0
    for i, k in enumerate(honest_errors):
        wrong = set(range(start, start + k))
        start += k
        answers[f"honest{i}"] = {q: (WRONG[j % 4] if j in wrong else t)
                                 for j, (q, t) in enumerate(truth.items())}
    for i in range(n_farm):
        answers[f"farm{i}"] = dict.fromkeys(truth, "fake")
    return answers, truth


def test_an_always_wrong_farm_is_found_when_honest_sources_are_accurate():
    # finding 1: with honest sources this accurate, almost no question had two wrong ballots,
    # π_q = 1 made the farm's expected agreement 1 = observed, and it was never flagged
    answers, truth = _farm([2, 2, 2, 2, 6])      # 95.3% accurate on average
    enc = encode_answers(AnswerTable.from_mapping(answers))
    report = detect_dependence(enc)
    farm = [f"farm{i}" for i in range(8)]
    assert report.clusters == [farm]
    assert report == detect_dependence(enc, method="pairs")
    pair = next(p for p in report.pairs if p.source_a == "farm0" and p.source_b == "farm1")
    assert pair.shared_wrong == pair.overlap >= 50 and pair.observed == 1.0
    assert pair.expected <= 0.5
    plain = ReliabilityEstimator().fit(enc)
    assert _accuracy(plain, truth) == 0.0         # 8 identities outvote 5 honest sources
    fixed = ReliabilityEstimator().fit(collapse(enc, report.groups()))
    assert _accuracy(fixed, truth) == 1.0
    assert fixed.reliability_[fixed.source_ids_.index("farm0+7")] == 0.0


def test_a_farm_facing_perfect_sources_is_undecidable_but_flagged():
    # the declared limit: perfect honest sources are near-duplicates too, both groups collapse
    # to one voice each and agreement cannot say which is the farm; the diagnostics still see
    # that most sources give one answer to every question
    answers, _ = _farm([0] * 5)
    enc = encode_answers(AnswerTable.from_mapping(answers))
    assert detect_dependence(enc).clusters == []
    diag = ReliabilityEstimator().fit(enc).diagnostics()
    assert not diag.trustworthy and not diag.shared_label_set
    assert diag.biased_source_share == 8 / 13
    assert any("same label" in w for w in diag.warnings)
