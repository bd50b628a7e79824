"""FA*IR (Zehlike et al. 2017; chapter 35.9): tables, exact failure probability, adjustment,
greedy re-ranking and checks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binom

from credrank.select.fair import (
    adjust_alpha,
    check_ranking,
    failure_probability,
    fair_rerank,
    mtable,
)

EXPECTED_12 = [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4]


def brute_force_failure(table: np.ndarray, p: float) -> float:
    """Sum over all 2^k protected/non-protected sequences (independent oracle)."""
    k = len(table)
    total = 0.0
    for seq in itertools.product((0, 1), repeat=k):
        counts = np.cumsum(seq)
        if np.any(counts < table):
            n_prot = sum(seq)
            total += p ** n_prot * (1 - p) ** (k - n_prot)
    return total


def test_unadjusted_table() -> None:
    assert mtable(12, 0.5, 0.1).tolist() == EXPECTED_12


def test_table_has_binom_ppf_semantics() -> None:
    rng = np.random.default_rng(1)
    for _ in range(200):
        k, p, a = int(rng.integers(1, 40)), float(rng.uniform(0.05, 0.95)), float(
            rng.uniform(0.01, 0.99))
        expected = [int(binom.ppf(a, i, p)) for i in range(1, k + 1)]
        assert mtable(k, p, a).tolist() == expected


def test_exact_failure_probability_includes_position_k() -> None:
    table = mtable(12, 0.5, 0.1)
    exact = failure_probability(table, 0.5)
    assert exact == pytest.approx(0.145996, abs=5e-7)
    assert exact == pytest.approx(598 / 4096, abs=1e-15)
    assert exact == pytest.approx(brute_force_failure(table, 0.5), abs=1e-12)
    # fairsearchcore's 0.128906 is what one gets when position k is left out
    assert failure_probability(table[:11], 0.5) == pytest.approx(0.128906, abs=5e-7)


@pytest.mark.parametrize(("k", "p"), [(8, 0.3), (10, 0.6), (11, 0.5)])
def test_failure_probability_matches_brute_force(k: int, p: float) -> None:
    table = mtable(k, p, 0.2)
    assert failure_probability(table, p) == pytest.approx(brute_force_failure(table, p),
                                                          abs=1e-12)


def test_adjustment_rule() -> None:
    adj = adjust_alpha(12, 0.5, 0.1)
    assert adj.failure_probability <= 0.1
    assert adj.failure_probability == pytest.approx(
        failure_probability(mtable(12, 0.5, adj.alpha_c), 0.5))
    # largest: any α_c above the reported one changes the table and fails too often
    stricter = mtable(12, 0.5, adj.alpha_c * (1 + 1e-9))
    assert stricter.tolist() != adj.mtable.tolist()
    assert failure_probability(stricter, 0.5) > 0.1
    # and the table is constant on (alpha_c_low, alpha_c]
    mid = (adj.alpha_c_low + adj.alpha_c) / 2
    assert mtable(12, 0.5, mid).tolist() == adj.mtable.tolist()
    # grid check: no α' giving failure ≤ α exceeds α_c
    for a in np.linspace(0.001, 0.999, 999):
        if failure_probability(mtable(12, 0.5, a), 0.5) <= 0.1:
            assert a <= adj.alpha_c + 1e-15


def test_adjustment_when_every_table_qualifies() -> None:
    adj = adjust_alpha(1, 0.5, 0.1)
    assert adj.mtable.tolist() == [0] and adj.failure_probability == 0.0
    assert adj.alpha_c == pytest.approx(0.5)  # m(1) = 0 for every α_c ≤ 1 − p


def test_greedy_rerank_hand_case() -> None:
    scores = np.linspace(1.0, 0.0, 20)
    protected = np.arange(20) >= 12  # every protected item scores below every other
    res = fair_rerank(scores, protected, 12, 0.5, 0.1, adjust=False)
    # m = 0,0,0,1,1,1,2,2,3,3,3,4: protected items forced at positions 4, 7, 9, 12
    assert res.order.tolist() == [0, 1, 2, 12, 3, 4, 13, 5, 14, 6, 7, 15]
    assert res.satisfied and res.shortfall_at is None
    chk = check_ranking(protected[res.order], 0.5, 0.1, adjust=False)
    assert chk.fair


def test_greedy_keeps_score_order_when_already_fair() -> None:
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    protected = np.array([True, False, True, False])
    res = fair_rerank(scores, protected, 4, 0.5, 0.1)
    assert res.order.tolist() == [0, 1, 2, 3]


def test_shortfall_is_reported() -> None:
    scores = np.linspace(1.0, 0.0, 12)
    protected = np.zeros(12, dtype=bool)
    protected[11] = True
    res = fair_rerank(scores, protected, 12, 0.5, 0.1, adjust=False)
    assert not res.satisfied and res.shortfall_at == 7  # m(7) = 2, one protected exists
    assert len(res.order) == 12 and len(set(res.order.tolist())) == 12


def test_check_ranking_names_the_first_failing_prefix() -> None:
    flags = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1], dtype=bool)
    chk = check_ranking(flags, 0.5, 0.1, adjust=False)
    assert not chk.fair and chk.first_failure == 4
    assert chk.protected_counts[:5].tolist() == [0, 0, 0, 0, 1]


@pytest.mark.parametrize(("k", "p", "alpha", "field"), [
    (0, 0.5, 0.1, "k"), (True, 0.5, 0.1, "k"), (2.5, 0.5, 0.1, "k"),
    (5, 0.0, 0.1, "p"), (5, 1.0, 0.1, "p"), (5, 0.5, 0.0, "alpha"), (5, 0.5, 1.0, "alpha"),
    (5, float("nan"), 0.1, "p"),
])
def test_parameter_guards(k: object, p: object, alpha: object, field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}: expected"):
        mtable(k, p, alpha)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=f"^{field}: expected"):
        adjust_alpha(k, p, alpha)  # type: ignore[arg-type]


def test_other_input_errors() -> None:
    with pytest.raises(ValueError, match="table"):
        failure_probability(np.array([2]), 0.5)
    with pytest.raises(ValueError, match="protected"):
        fair_rerank(np.array([1.0, 0.5]), np.array([True]), 2, 0.5, 0.1)
    with pytest.raises(ValueError, match="protected_in_order"):
        check_ranking(np.array([], dtype=bool), 0.5, 0.1)


def test_the_adjusted_table_where_fairsearchcore_differs() -> None:
    """(k=20, p=0.25, α=0.1): fairsearchcore's adjusted table puts its first minimum of 1 at
    position 9, whose exact failure probability is 0.105 > α; the adjustment's table puts it
    at position 10 (failure 0.0897 <= α), as the rule asks (the largest α_c whose failure
    probability stays within α)."""
    adj = adjust_alpha(20, 0.25, 0.1)
    table = adj.mtable
    assert int(np.flatnonzero(table)[0]) + 1 == 10
    assert failure_probability(table, 0.25) == pytest.approx(0.0897221672, abs=1e-9)
    theirs = table.copy()
    theirs[8] = 1
    failure = failure_probability(theirs, 0.25)
    assert failure == pytest.approx(0.1051524736, abs=1e-9) and failure > 0.1
