"""Chapter 35.9: Birkhoff–von Neumann decomposition, sampling and exposure monitoring."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credrank.select.bvn import (
    ExposureMonitor,
    birkhoff_von_neumann,
    decompose_ranking,
    empirical_marginals,
    realised_exposure,
    sample_ranking,
    staircase_completion,
)
from credrank.select.exposure import complete_square, exposure_lp, log_discounts

U12 = np.array([0.90] * 8 + [0.75] * 3 + [0.60])
G12 = ["A"] * 8 + ["B"] * 3 + ["C"]
V6 = np.array([1.000, 0.631, 0.500, 0.431, 0.387, 0.356])
P12 = np.repeat((U12 / 10.05)[:, None], 6, axis=1)  # the chapter's explicit feasible policy


def test_bvn_of_the_chapters_completion() -> None:
    s = complete_square(P12)
    dec = birkhoff_von_neumann(s)
    assert np.abs(dec.matrix() - s).max() < 1e-9
    assert dec.residual < 1e-9
    assert dec.n_terms <= 11 ** 2 + 1
    assert dec.weights.min() > 0 and dec.weights.sum() == pytest.approx(1.0, abs=1e-9)
    for perm in dec.permutations:  # every term is a permutation
        assert sorted(perm) == list(range(12))


def test_bvn_identity_and_rejections() -> None:
    dec = birkhoff_von_neumann(np.eye(4))
    assert dec.n_terms == 1 and list(dec.permutations[0]) == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="square"):
        birkhoff_von_neumann(P12)
    with pytest.raises(ValueError, match="row 0 sums"):
        birkhoff_von_neumann(np.array([[0.5, 0.6], [0.5, 0.4]]))


def test_sampled_lists_reproduce_the_marginals() -> None:
    dec = birkhoff_von_neumann(complete_square(P12))
    rng = np.random.default_rng(20240601)
    n = 20_000
    lists = [sample_ranking(dec, rng, k=6) for _ in range(n)]
    emp = empirical_marginals(lists, 12)
    sigma = np.sqrt(P12 * (1 - P12) / n)
    assert np.all(np.abs(emp - P12) <= 5 * sigma + 1e-12)
    # expected exposure of each group hits its target within sampling error
    e = np.mean([realised_exposure(r, 12, V6) for r in lists], axis=0)
    assert e[:8].mean() == pytest.approx(0.295970149, abs=0.01)


def test_sampling_is_seedable() -> None:
    dec = decompose_ranking(exposure_lp(U12, G12, V6, rule="proportional").P)
    a = [sample_ranking(dec, np.random.default_rng(7)) for _ in range(3)]
    b = [sample_ranking(dec, np.random.default_rng(7)) for _ in range(3)]
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    with pytest.raises(ValueError, match="Generator"):
        sample_ranking(dec, 7)  # type: ignore[arg-type]


def test_decompose_ranking_reproduces_lp_marginals() -> None:
    pol = exposure_lp(U12, G12, V6, rule="proportional")
    dec = decompose_ranking(pol.P)
    assert dec.residual < 1e-9
    assert np.abs(dec.marginals() - pol.P).max() < 1e-9
    assert dec.weights.sum() == pytest.approx(1.0, abs=1e-12)
    for ranking in dec.rankings:
        assert len(set(ranking)) == 6  # six distinct documents per list


def test_monitor_tracks_realised_against_target() -> None:
    pol = exposure_lp(U12, G12, V6, rule="proportional")
    dec = decompose_ranking(pol.P)
    rng = np.random.default_rng(3)
    mon = ExposureMonitor()
    for _ in range(4000):
        mon.record(sample_ranking(dec, rng), G12, V6, pol.targets)
    rep = mon.summary()
    assert rep["requests"] == 4000
    for name in "ABC":
        g = rep["groups"][name]
        assert g["target"] == pytest.approx(pol.targets[name])
        assert abs(g["gap"]) < 0.02
    # one request alone need not meet the target (expectation is not a per-query floor)
    one = ExposureMonitor()
    one.record(dec.rankings[0], G12, V6, pol.targets)
    assert one.summary()["groups"]["A"]["realised"] != pytest.approx(pol.targets["A"], abs=1e-6)


def random_doubly_stochastic(draw: st.DrawFn) -> np.ndarray:
    n = draw(st.integers(1, 7))
    terms = draw(st.integers(1, 6))
    w = np.array(draw(st.lists(st.floats(0.01, 1.0), min_size=terms, max_size=terms)))
    w = w / w.sum()
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    s = np.zeros((n, n))
    for wi in w:
        s[np.arange(n), rng.permutation(n)] += wi
    return s


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_bvn_reconstructs_and_respects_the_term_bound(data: st.DataObject) -> None:
    s = random_doubly_stochastic(data.draw)
    n = len(s)
    dec = birkhoff_von_neumann(s)
    assert np.abs(dec.matrix() - s).max() < 1e-9
    assert dec.n_terms <= (n - 1) ** 2 + 1
    assert np.all(dec.weights >= 0) and dec.weights.sum() == pytest.approx(1.0, abs=1e-9)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 14), st.integers(0, 10_000), st.sampled_from(["parity", "proportional"]))
def test_lp_policies_decompose_exactly(n: int, seed: int, rule: str) -> None:
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, n + 1))
    u = rng.uniform(0.2, 1.0, n)
    g = list(rng.choice(["a", "b", "c"], n))
    try:
        pol = exposure_lp(u, g, log_discounts(k), rule=rule)
    except ValueError:
        return  # infeasible proportional targets are covered in test_select_exposure
    square = complete_square(pol.P)
    full = birkhoff_von_neumann(square)
    assert np.abs(full.matrix() - square).max() < 1e-9
    assert full.n_terms <= (n - 1) ** 2 + 1
    serving = decompose_ranking(pol.P)
    assert np.abs(serving.marginals() - pol.P).max() < 1e-9
    stair = staircase_completion(pol.P)
    assert np.allclose(stair.sum(axis=0), 1.0) and np.allclose(stair.sum(axis=1), 1.0)
    assert np.array_equal(stair[:, :k], pol.P)
