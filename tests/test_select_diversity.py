"""Chapter 35.8: ILAD, coverage, the combined objective, its exact optimum, MMR.

The twenty-candidate "Michael Jordan" toy is rebuilt from the chapter's stipulations: the
utilities, four intents of sizes 14/3/2/1, and pairwise dissimilarities 0.08 within an intent
and 0.75 across intents, realised as unit embeddings through an eigendecomposition of the
Gram matrix (so the embedding path is exercised as well as the precomputed one).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from credrank.select.diversity import (
    best_set_exhaustive,
    best_set_milp,
    cosine_dissimilarity,
    exhaustive_optimal_sets,
    ilad,
    ilad_from_dissimilarity,
    intent_coverage,
    mmr,
    set_objective,
)

UTIL = np.array([0.90, 0.89, 0.88, 0.87, 0.86] + [0.85] * 9
                + [0.75, 0.74, 0.73] + [0.70, 0.69] + [0.62])
INTENT = np.array([0] * 14 + [1] * 3 + [2] * 2 + [3])  # basketball, footballer, actor, researcher
MEMBERSHIP = INTENT[:, None] == np.arange(4)[None, :]
TOP5 = np.array([0, 1, 2, 3, 4])
FULL = np.array([0, 1, 14, 17, 19])  # top two basketball + best of each other intent
THREE = np.array([0, 1, 2, 14, 17])  # three basketball + footballer + actor


def toy_embeddings() -> np.ndarray:
    same = INTENT[:, None] == INTENT[None, :]
    gram = np.where(same, 1.0 - 0.08, 1.0 - 0.75)
    np.fill_diagonal(gram, 1.0)
    w, v = np.linalg.eigh(gram)
    assert w.min() > -1e-12  # "these similarities admit a valid Gram matrix"
    return v * np.sqrt(np.clip(w, 0.0, None))


EMB = toy_embeddings()
DISSIM = cosine_dissimilarity(EMB)


def stipulated_dissimilarity() -> np.ndarray:
    d = np.where(INTENT[:, None] == INTENT[None, :], 0.08, 0.75)
    np.fill_diagonal(d, 0.0)
    return d


def objective(idx: np.ndarray, lam1: float, lam2: float) -> float:
    return set_objective(UTIL, idx, dissimilarity=DISSIM, membership=MEMBERSHIP,
                         lambda_ilad=lam1, lambda_coverage=lam2)


# -- the geometry ----------------------------------------------------------------------------
def test_embeddings_realise_the_stipulated_cosines() -> None:
    assert np.allclose(np.linalg.norm(EMB, axis=1), 1.0, atol=1e-12)
    assert np.abs(DISSIM - stipulated_dissimilarity()).max() < 1e-12


# -- measures --------------------------------------------------------------------------------
def test_utility_only_list() -> None:
    assert UTIL[TOP5].sum() == pytest.approx(4.40, abs=1e-12)
    assert intent_coverage(MEMBERSHIP, TOP5) == pytest.approx(0.25)
    assert ilad(EMB[TOP5]) == pytest.approx(0.08, abs=1e-12)


def test_full_coverage_list() -> None:
    assert UTIL[FULL].sum() == pytest.approx(3.86, abs=1e-12)
    assert intent_coverage(MEMBERSHIP, FULL) == 1.0
    # one within-intent pair and nine cross-intent pairs: (0.08 + 9·0.75)/10
    assert ilad(EMB[FULL]) == pytest.approx(0.683, abs=1e-12)
    assert ilad(EMB[FULL]) / ilad(EMB[TOP5]) == pytest.approx(8.5375, abs=1e-9)
    loss = (UTIL[TOP5].sum() - UTIL[FULL].sum()) / UTIL[TOP5].sum()
    assert round(100 * loss, 6) == pytest.approx(12.272727, abs=1e-9)


def test_three_intent_list() -> None:
    assert UTIL[THREE].sum() == pytest.approx(4.12, abs=1e-12)
    assert ilad(EMB[THREE]) == pytest.approx(0.549, abs=1e-12)
    assert intent_coverage(MEMBERSHIP, THREE) == 0.75


def test_objective_values_at_the_drafts_weights() -> None:
    assert objective(FULL, 0.3, 0.5) == pytest.approx(4.5649, abs=1e-12)
    assert objective(THREE, 0.3, 0.5) == pytest.approx(4.6597, abs=1e-12)


def test_ilad_policies() -> None:
    assert ilad(EMB[:1]) == 0.0  # K < 2: term omitted
    assert ilad(np.zeros((0, 3))) == 0.0
    with pytest.raises(ValueError, match="zero vector at row 1"):
        ilad(np.array([[1.0, 0.0], [0.0, 0.0]]))
    # opposite vectors: dissimilarity 2, the upper end of [0, 2]
    assert ilad(np.array([[1.0, 0.0], [-3.0, 0.0]])) == pytest.approx(2.0)


def test_coverage_validation() -> None:
    with pytest.raises(ValueError, match="intent set is empty"):
        intent_coverage(np.zeros((3, 0), dtype=bool), [0])
    with pytest.raises(ValueError, match="boolean"):
        intent_coverage(np.array([[0.5, 1.0]]), [0])
    assert intent_coverage(MEMBERSHIP, []) == 0.0


def test_precomputed_dissimilarity_is_validated() -> None:
    bad = stipulated_dissimilarity()
    bad[0, 1] = 3.0
    with pytest.raises(ValueError, match=r"\[0, 2\]"):
        ilad_from_dissimilarity(bad)
    asym = stipulated_dissimilarity()
    asym[0, 1] = 0.5
    with pytest.raises(ValueError, match="symmetric"):
        ilad_from_dissimilarity(asym)


# -- exact optimum ---------------------------------------------------------------------------
def test_milp_optimum_at_lambda2_half_is_the_three_intent_list() -> None:
    sel = best_set_milp(UTIL, 5, dissimilarity=DISSIM, membership=MEMBERSHIP,
                        lambda_ilad=0.3, lambda_coverage=0.5)
    assert sel.optimal
    assert sorted(sel.indices) == sorted(THREE)
    assert sel.objective == pytest.approx(4.6597, abs=1e-9)
    assert list(sel.indices) == [0, 1, 2, 14, 17]  # ordered by utility


def test_milp_optimum_at_lambda2_one_is_full_coverage() -> None:
    sel = best_set_milp(UTIL, 5, dissimilarity=DISSIM, membership=MEMBERSHIP,
                        lambda_ilad=0.3, lambda_coverage=1.0)
    assert sorted(sel.indices) == sorted(FULL)
    assert sel.objective == pytest.approx(5.0649, abs=1e-9)
    assert sel.coverage == 1.0 and sel.ilad == pytest.approx(0.683, abs=1e-12)


def test_threshold_lambda2() -> None:
    # hand algebra: 4.0649 + λ2 = 4.2847 + 0.75 λ2  ⇔  λ2 = 0.2198 / 0.25 = 0.8792
    assert objective(FULL, 0.3, 0.8792) == pytest.approx(objective(THREE, 0.3, 0.8792), abs=1e-12)
    kw = {"dissimilarity": DISSIM, "membership": MEMBERSHIP, "lambda_ilad": 0.3}
    tied = exhaustive_optimal_sets(UTIL, 5, lambda_coverage=0.8792, **kw)
    assert {tuple(s) for s in tied} == {tuple(FULL), tuple(THREE)}
    at = best_set_milp(UTIL, 5, lambda_coverage=0.8792, **kw)
    assert at.objective == pytest.approx(4.9441, abs=1e-9)
    above = exhaustive_optimal_sets(UTIL, 5, lambda_coverage=0.8792 + 1e-6, **kw)
    assert [tuple(s) for s in above] == [tuple(FULL)]
    below = exhaustive_optimal_sets(UTIL, 5, lambda_coverage=0.8792 - 1e-6, **kw)
    assert [tuple(s) for s in below] == [tuple(THREE)]
    assert intent_coverage(MEMBERSHIP, best_set_milp(
        UTIL, 5, lambda_coverage=0.8792 + 1e-6, **kw).indices) == 1.0


@pytest.mark.parametrize("lam2", [0.0, 0.5, 0.8792, 1.0])
def test_exhaustive_over_all_15504_sets_agrees(lam2: float) -> None:
    assert math.comb(20, 5) == 15_504
    kw = {"membership": MEMBERSHIP, "lambda_ilad": 0.3, "lambda_coverage": lam2}
    ex = best_set_exhaustive(UTIL, 5, dissimilarity=stipulated_dissimilarity(), **kw)
    assert ex.status == "enumerated 15504 sets"
    exact = best_set_milp(UTIL, 5, dissimilarity=DISSIM, **kw)
    assert exact.objective == pytest.approx(ex.objective, abs=1e-9)


def test_no_weights_recover_top_k() -> None:
    sel = best_set_milp(UTIL, 5)
    assert list(sel.indices) == list(TOP5) and sel.utility == pytest.approx(4.40)


def test_time_limit_returns_a_flagged_fallback() -> None:
    rng = np.random.default_rng(0)
    u = rng.uniform(0.3, 0.9, 100)
    d = cosine_dissimilarity(rng.normal(size=(100, 32)))
    sel = best_set_milp(u, 10, dissimilarity=d, lambda_ilad=3.0, time_limit=1e-4)
    assert not sel.optimal and "best of" in sel.status
    assert len(set(sel.indices.tolist())) == 10
    top = np.argsort(-u)[:10]
    assert sel.objective >= set_objective(u, top, dissimilarity=d, lambda_ilad=3.0) - 1e-12


def test_parameter_errors() -> None:
    with pytest.raises(ValueError, match="lambda_ilad"):
        best_set_milp(UTIL, 5, dissimilarity=DISSIM, lambda_ilad=-0.1)
    with pytest.raises(ValueError, match="dissimilarity: required"):
        best_set_milp(UTIL, 5, lambda_ilad=0.3)
    with pytest.raises(ValueError, match="membership: required"):
        best_set_milp(UTIL, 5, lambda_coverage=0.3)
    with pytest.raises(ValueError, match="k: expected at most"):
        best_set_milp(UTIL, 21)
    with pytest.raises(ValueError, match="k: expected an integer"):
        best_set_milp(UTIL, 0)
    with pytest.raises(ValueError, match="utilities"):
        best_set_milp(np.array([0.1, np.nan]), 1)


@settings(max_examples=25, deadline=None)
@given(st.integers(2, 8).flatmap(lambda n: st.tuples(
    st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n),
    st.integers(1, n),
    st.lists(st.lists(st.floats(-1.0, 1.0), min_size=3, max_size=3), min_size=n, max_size=n),
    st.lists(st.integers(0, 3), min_size=n, max_size=n),
    st.floats(0.0, 2.0), st.floats(0.0, 2.0))))
def test_milp_equals_exhaustive(case: tuple) -> None:
    u, k, vecs, labels, lam1, lam2 = case
    x = np.asarray(vecs) + np.array([3.0, 0.0, 0.0])  # keep every vector nonzero
    d = cosine_dissimilarity(x)
    m = np.asarray(labels)[:, None] == np.arange(4)[None, :]
    kw = {"dissimilarity": d, "membership": m, "lambda_ilad": lam1, "lambda_coverage": lam2}
    exact = best_set_milp(np.asarray(u), k, **kw)
    oracle = best_set_exhaustive(np.asarray(u), k, **kw)
    assert exact.optimal
    assert exact.objective == pytest.approx(oracle.objective, abs=1e-7)


# -- MMR -------------------------------------------------------------------------------------
def test_mmr_hand_case() -> None:
    u = np.array([1.0, 0.9, 0.5])
    x = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])  # doc 1 duplicates doc 0's direction
    # step 2: doc1 0.5·0.9 − 0.5·1 = −0.05, doc2 0.5·0.5 − 0.5·0 = 0.25 → doc 2
    assert list(mmr(u, 2, 0.5, vectors=x)) == [0, 2]
    assert list(mmr(u, 2, 0.0, vectors=x)) == [0, 1]  # pure utility
    assert list(mmr(u, 5, 0.5, vectors=x)) == [0, 2, 1]  # k capped at N


def test_mmr_on_the_toy_spreads_over_intents() -> None:
    picks = mmr(UTIL, 4, 0.5, vectors=EMB)
    assert sorted(INTENT[picks]) == [0, 1, 2, 3]
    assert list(mmr(UTIL, 5, 0.0, vectors=EMB)) == list(TOP5)


def test_mmr_errors() -> None:
    with pytest.raises(ValueError, match="diversity"):
        mmr(UTIL, 3, 1.5, vectors=EMB)
    with pytest.raises(ValueError, match="vectors"):
        mmr(UTIL, 3, 0.5)
    with pytest.raises(ValueError, match="zero vector"):
        mmr(np.array([1.0, 0.5]), 2, 0.5, vectors=np.array([[1.0, 0.0], [0.0, 0.0]]))
