"""Chapter 35.9: the rectangular exposure LP, group rules, feasibility, square completion."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credrank.select.exposure import (
    ExposureInfeasible,
    check_discounts,
    check_exposure_targets,
    check_ranking_policy,
    complete_square,
    exposure_lp,
    exposure_targets,
    group_means,
    hard_ranking,
    log_discounts,
)

# the twelve-document example: groups of 8/3/1 at utilities 0.90/0.75/0.60
U12 = np.array([0.90] * 8 + [0.75] * 3 + [0.60])
G12 = ["A"] * 8 + ["B"] * 3 + ["C"]
V6 = np.array([1.000, 0.631, 0.500, 0.431, 0.387, 0.356])
CODES = np.array([0] * 8 + [1] * 3 + [2])


def test_discounts() -> None:
    assert log_discounts(6).round(3).tolist() == V6.tolist()
    assert V6.sum() == pytest.approx(3.305, abs=1e-12)


def test_hard_ranking_exposure() -> None:
    e = hard_ranking(U12, 6) @ V6
    means = group_means(e, CODES, 3)
    assert means[0] == pytest.approx(3.305 / 8) == pytest.approx(0.413125)
    assert means[1] == 0.0 and means[2] == 0.0
    assert float(U12 @ e) == pytest.approx(2.9745, abs=1e-12)
    unconstrained = exposure_lp(U12, G12, V6, rule=None)
    assert unconstrained.expected_utility == pytest.approx(2.9745, abs=1e-9)
    assert unconstrained.group_exposure[0] == pytest.approx(0.413125, abs=1e-9)


def test_proportional_targets() -> None:
    t = exposure_targets(U12, G12, V6, "proportional")
    base = 3.305 / 10.05
    assert base == pytest.approx(0.328855721, abs=1e-9)
    assert t["A"] == pytest.approx(0.295970149, abs=1e-9)
    assert t["B"] == pytest.approx(0.246641791, abs=1e-9)
    assert t["C"] == pytest.approx(0.197313433, abs=1e-9)
    fall = 1.0 - t["A"] / 0.413125
    assert round(100 * fall, 6) == pytest.approx(28.358209, abs=1e-9)


def test_proportional_lp_meets_targets_and_utility() -> None:
    pol = exposure_lp(U12, G12, V6, rule="proportional")
    check_ranking_policy(pol.P)
    assert pol.group_exposure == pytest.approx([0.295970149, 0.246641791, 0.197313433],
                                               abs=1e-9)
    # every feasible policy meeting the targets has utility t·Σ|G|ū_G² = 8.5275·t
    assert pol.expected_utility == pytest.approx(2.804317164, abs=1e-9)
    assert pol.hard_utility == pytest.approx(2.9745, abs=1e-12)


def test_chapters_explicit_policy_is_feasible() -> None:
    p = np.repeat((U12 / 10.05)[:, None], 6, axis=1)  # P[d,k] = u(d)/10.05
    check_ranking_policy(p)
    assert np.all(p.sum(axis=1) <= 1.0)
    e = p @ V6
    assert group_means(e, CODES, 3) == pytest.approx(
        [0.295970149, 0.246641791, 0.197313433], abs=1e-9)
    assert float(U12 @ e) == pytest.approx(2.804317164, abs=1e-9)


def test_parity_lp() -> None:
    pol = exposure_lp(U12, G12, V6, rule="parity")
    assert pol.group_exposure == pytest.approx([3.305 / 12] * 3, abs=1e-9)
    assert list(pol.targets.values()) == pytest.approx([3.305 / 12] * 3, abs=1e-15)


def test_explicit_targets_rule() -> None:
    goal = {"A": 0.3, "B": (3.305 - 2.4 - 0.2) / 3, "C": 0.2}
    pol = exposure_lp(U12, G12, V6, rule="targets", targets=goal)
    assert pol.group_exposure == pytest.approx([goal["A"], goal["B"], goal["C"]], abs=1e-9)


def test_proportional_rejects_a_group_of_zero_utility_or_a_negative_one() -> None:
    with pytest.raises(ValueError, match=r"group 'b' has average utility 0 \(all of its 2 "):
        exposure_lp(np.array([0.5, 0.0, 0.0]), ["a", "b", "b"], V6[:2], rule="proportional")
    with pytest.raises(ValueError, match="row 0"):
        exposure_targets(np.array([-0.1, 0.4]), ["a", "b"], V6[:1], "proportional")


def test_proportional_needs_only_a_positive_group_average() -> None:
    # 35.9: "for nonempty groups with positive average utility"; one zero utility refused the
    # whole query ("every utility must be > 0"), though ū_a = ū_b = 0.45
    u = np.array([0.9, 0.0, 0.5, 0.4])
    groups = ["a", "a", "b", "b"]
    policy = exposure_lp(u, groups, log_discounts(2), rule="proportional")
    check_ranking_policy(policy.P)
    assert policy.targets["a"] == pytest.approx(policy.targets["b"])
    np.testing.assert_allclose(policy.group_exposure, [policy.targets["a"]] * 2, atol=1e-9)


def test_proportional_targets_of_tiny_utilities_are_finite() -> None:
    # utilities of 5e-324 summed to 0 in the ratio V / Σu: a target of inf the user never set
    targets = exposure_targets(np.full(4, 5e-324), ["a", "a", "b", "b"], V6[:2],
                               "proportional")
    assert targets == pytest.approx({"a": V6[:2].sum() / 4, "b": V6[:2].sum() / 4})


def test_a_discount_error_prints_plain_numbers() -> None:
    with pytest.raises(ValueError, match=r"v\(2\) = 2 > v\(1\) = 1$"):
        check_discounts([1.0, 2.0])


def test_infeasible_single_document_target() -> None:
    u = np.array([0.98, 0.01, 0.01])
    with pytest.raises(ExposureInfeasible, match=r"group 'a'.*exceeds v\(1\)"):
        exposure_lp(u, ["a", "b", "c"], np.array([1.0, 1.0]), rule="proportional")


def test_infeasible_prefix_target() -> None:
    # A's two documents need 2 × 0.947 = 1.895 but the best two positions give 1.5
    groups = ["A", "A", "B", "B"]
    targets = exposure_targets(np.array([0.9, 0.9, 0.05, 0.05]), groups,
                               np.array([1.0, 0.5, 0.5]), "proportional")
    rep = check_exposure_targets(groups, targets, np.array([1.0, 0.5, 0.5]))
    assert not rep.feasible
    assert "the 2 documents with the highest targets" in rep.problems[0]
    assert "supply at most 1.5" in rep.problems[0]


def test_mass_and_sign_problems_are_named() -> None:
    rep = check_exposure_targets(G12, {"A": 0.5, "B": 0.1, "C": 0.1}, V6)
    assert not rep.feasible
    assert any("hands out exactly V = Σv(k) = 3.305" in s for s in rep.problems)
    rep = check_exposure_targets(["a", "b"], {"a": 1.2, "b": -0.2}, np.array([1.0]))
    assert any("negative" in s for s in rep.problems)
    with pytest.raises(ValueError, match="no target for group"):
        check_exposure_targets(["a", "b"], {"a": 1.0}, np.array([1.0]))
    ok = check_exposure_targets(G12, exposure_targets(U12, G12, V6, "parity"), V6)
    assert ok.feasible and ok.total_target == pytest.approx(3.305)


def test_input_errors() -> None:
    with pytest.raises(ValueError, match="non-increasing"):
        exposure_lp(U12, G12, np.array([0.5, 1.0]))
    with pytest.raises(ValueError, match="K <= N"):
        exposure_lp(U12[:2], G12[:2], V6)
    with pytest.raises(ValueError, match="rule"):
        exposure_lp(U12, G12, V6, rule="equal")
    with pytest.raises(ValueError, match="row 0 has no group"):
        exposure_lp(U12[:2], [None, "a"], V6[:1])
    with pytest.raises(ValueError, match="do not occur"):
        exposure_lp(U12, G12, V6, rule="targets", targets={"Z": 1.0})


def test_complete_square_formula() -> None:
    p = np.repeat((U12 / 10.05)[:, None], 6, axis=1)
    s = complete_square(p)
    assert s.shape == (12, 12)
    expected_tail = (1.0 - p.sum(axis=1)) / 6
    assert np.allclose(s[:, 6:], expected_tail[:, None], atol=1e-15)
    assert np.allclose(s.sum(axis=0), 1.0) and np.allclose(s.sum(axis=1), 1.0)
    square = np.full((3, 3), 1 / 3)
    assert np.array_equal(complete_square(square), square)  # K = N: unchanged
    with pytest.raises(ValueError, match="column 0 sums"):
        complete_square(np.full((3, 1), 0.5))
    with pytest.raises(ValueError, match="row 0 sums"):
        complete_square(np.array([[1.0, 1.0], [0.0, 0.0], [0.0, 0.0]]))


@st.composite
def instances(draw: st.DrawFn) -> tuple:
    n = draw(st.integers(2, 12))
    k = draw(st.integers(1, n))
    u = np.array(draw(st.lists(st.floats(0.05, 1.0), min_size=n, max_size=n)))
    g = draw(st.lists(st.sampled_from("xyz"), min_size=n, max_size=n))
    raw = np.array(draw(st.lists(st.floats(0.0, 1.0), min_size=k, max_size=k)))
    v = np.sort(raw)[::-1]
    rule = draw(st.sampled_from(["parity", "proportional", None]))
    return u, g, v, rule


@settings(max_examples=40, deadline=None)
@given(instances())
def test_lp_solutions_satisfy_the_constraints(case: tuple) -> None:
    u, g, v, rule = case
    try:
        pol = exposure_lp(u, g, v, rule=rule)
    except ExposureInfeasible:
        assert rule == "proportional"
        targets = exposure_targets(u, g, v, "proportional")
        assert not check_exposure_targets(g, targets, v).feasible
        return
    p = pol.P
    assert p.min() >= 0.0
    assert np.allclose(p.sum(axis=0), 1.0, atol=1e-7)
    assert np.all(p.sum(axis=1) <= 1.0 + 1e-7)
    if rule is not None:
        for j, name in enumerate(pol.group_names):
            assert pol.group_exposure[j] == pytest.approx(pol.targets[name], abs=1e-7)
    # the exact size reduction (each group's K best rows) loses nothing
    full = exposure_lp(u, g, v, rule=rule, reduce=False)
    assert pol.expected_utility == pytest.approx(full.expected_utility, abs=1e-7)
    # optimality sanity: no better than the unconstrained top-K, no worse than uniform
    # (uniform P = 1/N meets parity and is feasible for every rule-free problem)
    assert pol.expected_utility <= pol.hard_utility + 1e-7
    if rule in ("parity", None):
        assert pol.expected_utility >= float(u.sum() * v.sum() / len(u)) - 1e-7


@pytest.mark.parametrize("rule", ["parity", "proportional"])
def test_the_exposure_lp_answers_the_same_policy_at_any_scale_of_utility(rule: str) -> None:
    """Utilities of 1e100 (candidates' scores near the largest float the validator took) left
    HiGHS without an optimum ("model_status is Unknown"): the program is solved on utilities
    scaled to at most 1, the same policy, its expected utility in the utilities' own scale."""
    rng = np.random.default_rng(1)
    u = rng.random(12)
    groups = ["a", "b"] * 6
    v = log_discounts(5)
    base = exposure_lp(u, groups, v, rule=rule)
    for scale in (1e100, 1e-100):
        got = exposure_lp(u * scale, groups, v, rule=rule)
        assert np.allclose(got.P, base.P, atol=1e-7)
        assert got.expected_utility == pytest.approx(base.expected_utility * scale, rel=1e-9)


def test_the_lp_meets_its_groups_whatever_the_discounts_scale() -> None:
    """Discounts of 1e-9 fell under HiGHS's feasibility tolerance: "Optimal" with the parity
    groups 21 % apart. The program is solved on discounts scaled to 1 (the same policy), and a
    solved policy that misses a target is refused, never returned. Discounts that overflow are
    refused naming discounts (the error named targets, which nobody sent)."""
    rng = np.random.default_rng(0)
    u, g = rng.random(30), rng.integers(0, 3, 30).astype(str)
    base = exposure_lp(u, g, log_discounts(5), rule="parity")
    for factor in (1e-9, 1e9):
        tiny = exposure_lp(u, g, log_discounts(5) * factor, rule="parity")
        spread = np.ptp(tiny.group_exposure) / (factor * log_discounts(5)[0])
        assert spread < 1e-6
        assert tiny.expected_utility / factor == pytest.approx(base.expected_utility,
                                                                rel=1e-6)
    with pytest.raises(ValueError, match=r"^discounts: expected values with a finite sum"):
        exposure_lp(u, g, [1e308, 1e308], rule="parity")
