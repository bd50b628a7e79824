"""Paired statistics on known cases."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from credrank.evaluate.stats import (
    bootstrap_ci,
    bootstrap_ci_diff,
    compare,
    randomization_test,
    wilcoxon_test,
    win_loss_tie,
)


def _brute_force_p(d: list[float]) -> float:
    observed = abs(sum(d))
    hits = sum(abs(sum(s * x for s, x in zip(signs, d, strict=True))) >= observed - 1e-12
               for signs in itertools.product((1, -1), repeat=len(d)))
    return hits / 2 ** len(d)


def test_exact_randomization_hand_cases() -> None:
    # d = (1, 2, 3): signed sums ±1±2±3 = {6, 4, 2, 0, 0, -2, -4, -6}; |s| >= 6 in 2 of 8
    assert randomization_test([1.0, 2.0, 3.0]).p_value == pytest.approx(2 / 8)
    # d = (1, -1, 2): sums {2, -2, 4, 0, 0, -4, 2, -2}; |s| >= 2 in 6 of 8
    assert randomization_test([1.0, -1.0, 2.0]).p_value == pytest.approx(6 / 8)
    # four equal wins: only all-plus and all-minus reach |4|
    res = randomization_test([0.2, 0.2, 0.2, 0.2])
    assert res.p_value == pytest.approx(2 / 16)
    assert res.method == "randomization-exact" and res.defined
    assert randomization_test([0.0, 0.0, 0.0]).p_value == 1.0


def test_exact_randomization_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    for n in (2, 5, 9):
        d = list(np.round(rng.normal(size=n), 2))
        assert randomization_test(d).p_value == pytest.approx(_brute_force_p(d))


def test_monte_carlo_randomization_approximates_exact_and_is_seeded() -> None:
    rng = np.random.default_rng(11)
    d = rng.normal(0.15, 1.0, size=17)
    exact = randomization_test(d, exact_max_n=17)
    mc = randomization_test(d, exact_max_n=16, n_resamples=20_000, seed=5)
    assert exact.method == "randomization-exact"
    assert mc.method == "randomization-montecarlo"
    assert abs(mc.p_value - exact.p_value) < 0.02
    assert randomization_test(d, exact_max_n=16, seed=5, n_resamples=20_000).p_value \
        == mc.p_value
    # 20 identical wins: the true p is 2 / 2**20; Monte Carlo never reports 0
    strong = randomization_test(np.full(20, 0.1), n_resamples=1000, seed=1)
    assert 0.0 < strong.p_value <= 3 / 1001


def test_wilcoxon_hand_case() -> None:
    # six positive differences without ties: exact two-sided p = 2 / 2**6
    res = wilcoxon_test([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    assert res.p_value == pytest.approx(2 / 64)
    assert res.defined
    zeros = wilcoxon_test([0.0, 0.0, 0.0])
    assert zeros.p_value == 1.0 and zeros.note


def test_bootstrap_two_point_hand_case() -> None:
    # values (0, 1): resampled means are 0, 0.5, 1 with probabilities 1/4, 1/2, 1/4,
    # so the 2.5% and 97.5% quantiles are 0 and 1
    ci = bootstrap_ci([0.0, 1.0], seed=0)
    assert (ci.point, ci.low, ci.high) == (0.5, 0.0, 1.0)


def test_bootstrap_contains_mean_is_seeded_and_nested() -> None:
    values = np.random.default_rng(7).uniform(0, 1, size=40)
    ci = bootstrap_ci(values, seed=42)
    assert ci.low <= values.mean() <= ci.high
    assert ci.point == pytest.approx(values.mean())
    assert bootstrap_ci(values, seed=42) == ci
    wide = bootstrap_ci(values, seed=42, confidence=0.99)
    assert wide.low <= ci.low and ci.high <= wide.high
    constant = bootstrap_ci([0.4] * 10)
    assert constant.low == pytest.approx(0.4) and constant.high == pytest.approx(0.4)
    generator = np.random.default_rng(1)
    assert bootstrap_ci(values, seed=generator).defined


def test_bootstrap_diff_is_paired() -> None:
    base = {f"q{i}": float(i) for i in range(30)}
    system = {q: v + 0.1 for q, v in base.items()}  # constant paired shift
    ci = bootstrap_ci_diff(base, system)
    assert ci.point == pytest.approx(0.1)
    assert ci.low == pytest.approx(0.1) and ci.high == pytest.approx(0.1)


def test_small_n_policies() -> None:
    empty = bootstrap_ci([])
    assert (empty.point, empty.low, empty.high, empty.defined) == (0.0, 0.0, 0.0, False)
    one = bootstrap_ci([0.3])
    assert (one.low, one.high, one.defined) == (0.3, 0.3, False)
    assert randomization_test([0.5]).p_value == 1.0
    assert not randomization_test([]).defined
    assert wilcoxon_test([0.5]).p_value == 1.0

    c0 = compare({}, {})
    assert (c0.n, c0.p_value, c0.defined, c0.ci_low, c0.ci_high) == (0, 1.0, False, 0.0, 0.0)
    c1 = compare({"q": 0.2}, {"q": 0.6})
    assert c1.diff == pytest.approx(0.4)
    assert c1.ci_low == c1.ci_high == c1.diff
    assert c1.p_value == 1.0 and not c1.defined and c1.notes
    for value in (c1.mean_base, c1.mean_sys, c1.diff, c1.ci_low, c1.p_value):
        assert np.isfinite(value)


def test_win_loss_tie_with_tolerance() -> None:
    base = {"a": 0.2, "b": 0.4, "c": 0.6, "d": 0.5}
    system = {"a": 0.4, "b": 0.4 + 1e-12, "c": 0.2, "d": 0.5}
    wlt = win_loss_tie(base, system)
    assert (wlt.wins, wlt.losses, wlt.ties) == (1, 1, 2)
    assert wlt.per_query == {"a": 1, "b": 0, "c": -1, "d": 0}
    loose = win_loss_tie(base, system, tie_tol=0.3)
    assert (loose.wins, loose.losses, loose.ties) == (0, 1, 3)


def test_compare_hand_case_and_fields() -> None:
    base = {"q1": 0.0, "q2": 0.0, "q3": 0.0}
    system = {"q1": 1.0, "q2": 2.0, "q3": 3.0}
    c = compare(base, system)
    assert (c.mean_base, c.mean_sys, c.diff) == (0.0, 2.0, 2.0)
    assert c.p_value == pytest.approx(0.25)  # the exact case above
    assert (c.wins, c.losses, c.ties, c.n) == (3, 0, 0, 3)
    assert c.ci_low <= c.diff <= c.ci_high
    assert c.defined and c.test == "randomization-exact"
    w = compare(base, system, test="wilcoxon")
    assert w.test == "wilcoxon" and 0.0 < w.p_value <= 1.0
    assert set(c.to_dict()) >= {"mean_base", "mean_sys", "diff", "ci_low", "ci_high",
                                "p_value", "wins", "losses", "ties", "n"}


def test_bad_input_is_rejected_with_names() -> None:
    with pytest.raises(ValueError, match="only in system"):
        compare({"a": 1.0}, {"a": 1.0, "b": 0.0})
    with pytest.raises(ValueError, match="not finite"):
        compare({"a": float("nan")}, {"a": 1.0})
    with pytest.raises(ValueError, match="test"):
        compare({"a": 1.0}, {"a": 1.0}, test="t-test")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci([1.0, 2.0], confidence=95)
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci([1.0, 2.0], n_resamples=0)
    with pytest.raises(ValueError, match="finite"):
        randomization_test([1.0, float("inf")])
    with pytest.raises(ValueError, match="n_resamples"):
        bootstrap_ci([1.0, 2.0], n_resamples=True)  # a bool is not a count
    with pytest.raises(ValueError, match="tie_tol"):
        win_loss_tie({"a": 1.0}, {"a": 1.0}, tie_tol=-1.0)
    with pytest.raises(ValueError, match="direction"):
        win_loss_tie({"a": 1.0}, {"a": 1.0}, direction="up")  # type: ignore[arg-type]


def test_lower_is_better_counts_decreases_as_wins() -> None:
    base = {"a": 0.4, "b": 0.4, "c": 0.2, "d": 0.2}
    system = {"a": 0.2, "b": 0.0, "c": 0.4, "d": 0.2}  # two decreases, one increase
    wlt = win_loss_tie(base, system, direction="lower")
    assert (wlt.wins, wlt.losses, wlt.ties) == (2, 1, 1)
    assert wlt.per_query == {"a": 1, "b": 1, "c": -1, "d": 0}
    c = compare(base, system, direction="lower")
    assert (c.wins, c.losses, c.ties) == (2, 1, 1)
    assert c.diff == pytest.approx(-0.1)  # the raw difference, whatever the direction
    higher = compare(base, system)
    assert (higher.wins, higher.losses) == (1, 2)
    assert higher.p_value == c.p_value and higher.ci_low == c.ci_low
