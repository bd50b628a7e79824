"""Worked numbers of chapter 35.3 (the COVID-19 vote and the κ-RRSS token budget)."""

from __future__ import annotations

import numpy as np
import pytest

from credrank.reliability.rrss import offline_answer_count, rrss_budget, token_reduction
from credrank.reliability.vote import paper_weights, weighted_vote

TRUE_RATES = [0.95, 0.93, 0.90]
FALSE_RATES = [0.20, 0.15, 0.15]
ANSWERS = ["SARS-CoV-2", "SARS-CoV-2", "SARS-CoV-2", "5G", "5G", "5G"]


def test_raw_rate_weighted_totals_break_the_tie():
    vote = weighted_vote(ANSWERS, TRUE_RATES + FALSE_RATES)
    assert vote.votes["sars cov 2"] == pytest.approx(2.78, abs=1e-12)
    assert vote.votes["5g"] == pytest.approx(0.50, abs=1e-12)
    assert vote.answer == "sars cov 2"
    assert vote.ballots == {"sars cov 2": 3, "5g": 3}          # a 3:3 unweighted tie


def test_transformed_weights_with_six_sources():
    v = paper_weights(np.array(TRUE_RATES + FALSE_RATES))      # S = 6 → v_s = 6 r_s − 1
    assert v == pytest.approx([4.70, 4.58, 4.40, 0.20, -0.10, -0.10])
    vote = weighted_vote(ANSWERS, v)
    assert vote.votes["sars cov 2"] == pytest.approx(13.68, abs=1e-12)
    assert vote.votes["5g"] == pytest.approx(0.0, abs=1e-12)
    assert vote.answer == "sars cov 2" and not vote.tie


def test_unweighted_tie_goes_to_the_declared_rule_not_to_the_truth():
    # 3:3 with equal weights: the lowest class id, i.e. the lexicographically smallest
    # normalised answer ("5g" < "sars cov 2") — an arbitrary but declared rule
    vote = weighted_vote(ANSWERS, [1.0] * 6)
    assert vote.tie and vote.answer == "5g"


def test_rrss_budget_of_the_chapter():
    b = rrss_budget(S=1000, k=5, K=4, tokens_per_doc=500)
    assert b.all_documents == 5000
    assert b.selected_documents == 20
    assert b.all_tokens == 2.5e6
    assert b.selected_tokens == 10_000
    assert b.ratio == 250.0
    assert b.reduction == pytest.approx(1 - 20 / 5000)
    assert round(b.reduction * 100, 1) == 99.6


def test_offline_answers_and_published_token_reduction():
    assert offline_answer_count(1000, 200) == 200_000
    assert token_reduction(627_115, 5_415) * 100 == pytest.approx(99.136522, abs=5e-7)


@pytest.mark.parametrize(("args", "field"), [
    ((0, 5, 4, 500), "S"), ((1000, 0, 4, 500), "k"), ((1000, 5, 0, 500), "K"),
    ((3, 5, 4, 500), "K"), ((1000, 5, 4, -1.0), "tokens_per_doc"),
    ((1000, 5, 4, float("nan")), "tokens_per_doc")])
def test_rrss_budget_rejects_bad_input(args, field):
    with pytest.raises(ValueError, match=field):
        rrss_budget(*args)


def test_token_reduction_rejects_zero_baseline():
    with pytest.raises(ValueError, match="without"):
        token_reduction(0, 10)
