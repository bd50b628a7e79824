"""One-hop neighbour smoothing of the prior (seed 004): math by hand, policies, stage."""

import numpy as np
import pytest

from conftest import build_batch
from credrank.combine import Combine
from credrank.core.candidates import Candidates, StageError
from credrank.signals.smoothing import neighbour_mask, smooth_priors
from credrank.stages.smoothing import NeighbourSmoothing

# three candidates: e1, (e1 + e2)/√2, e2. Cosines: (0,1) = (1,2) = 1/√2 exactly, (0,2) = 0.
V3 = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
P3 = np.array([0.9, 0.5, 0.1])


def batch(priors, vectors, sims=None, ids=None):
    n = len(priors)
    sims = [0.9 - 0.1 * i for i in range(n)] if sims is None else sims
    return build_batch(sims, ids=ids, vectors=vectors, factors={"prior": priors})


def test_hand_computed_m1():
    # nearest of d0: d1 (0.707 > 0); of d1: d0 and d2 tie at 0.707 -> row order picks d0;
    # of d2: d1. β = 0.5: d0 = .45 + .25, d1 = .25 + .45, d2 = .05 + .25
    out = smooth_priors(P3, V3, m=1, beta=0.5)
    np.testing.assert_allclose(out, [0.7, 0.7, 0.3])


def test_hand_computed_m_all_others():
    # m = 2 = n - 1: every other candidate; d0 = .45 + .5*(.5+.1)/2, d1 = .25 + .5*(.9+.1)/2 ...
    out = smooth_priors(P3, V3, m=2, beta=0.5)
    np.testing.assert_allclose(out, [0.6, 0.5, 0.4])
    # m larger than n - 1 uses n - 1 neighbours
    np.testing.assert_allclose(smooth_priors(P3, V3, m=10, beta=0.5), out)


def test_four_candidates_beta_03_by_hand():
    vecs = np.array([[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.8, 0.6]])
    pri = np.array([0.95, 0.3, 0.8, 0.4])
    # cos(0,1)=.994, cos(2,3)=.8, cos(1,2)=.110, cos(1,3)=.088, others 0
    # m=1: 0->1, 1->0, 2->3, 3->2
    exp1 = 0.7 * pri + 0.3 * pri[[1, 0, 3, 2]]
    np.testing.assert_allclose(smooth_priors(pri, vecs, 1, 0.3), exp1)
    # m=2: 0 -> {1, then 2/3 tie at 0 -> 2}; 1 -> {0, 2}; 2 -> {3, 1}; 3 -> {2, 1}
    nb = [(1, 2), (0, 2), (3, 1), (2, 1)]
    exp2 = np.array([0.7 * pri[i] + 0.3 * pri[list(j)].mean() for i, j in enumerate(nb)])
    np.testing.assert_allclose(smooth_priors(pri, vecs, 2, 0.3), exp2)


def test_neighbour_mask_never_self_and_exactly_m():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(12, 5))
    mask = neighbour_mask(vecs, 4)
    assert not mask.diagonal().any()
    assert (mask.sum(axis=1) == 4).all()
    # same sets as a full stable sort
    sims = vecs @ vecs.T / np.outer(np.linalg.norm(vecs, axis=1), np.linalg.norm(vecs, axis=1))
    np.fill_diagonal(sims, -np.inf)
    for i in range(12):
        assert set(np.flatnonzero(mask[i])) == set(np.argsort(-sims[i], kind="stable")[:4])


def test_properties_beta_bounds_and_range():
    rng = np.random.default_rng(1)
    pri, vecs = rng.uniform(0.1, 1.0, 20), rng.normal(size=(20, 8))
    np.testing.assert_allclose(smooth_priors(pri, vecs, 3, 0.0), pri)
    full = smooth_priors(pri, vecs, 19, 1.0)
    np.testing.assert_allclose(full, (pri.sum() - pri) / 19)
    out = smooth_priors(pri, vecs, 5, 0.4)
    assert out.min() >= pri.min() - 1e-12 and out.max() <= pri.max() + 1e-12


def test_zero_vector_has_cosine_zero_and_ties_by_row_order():
    vecs = np.array([[0.0, 0.0], [1.0, 0.0], [-1.0, 0.0]])
    pri = np.array([0.2, 0.6, 1.0])
    # d0 (zero): cos 0 with both -> row order picks d1. d1: cos(d0)=0 > cos(d2)=-1 -> d0.
    # d2: cos(d0)=0 > cos(d1)=-1 -> d0.
    out = smooth_priors(pri, vecs, 1, 1.0)
    np.testing.assert_allclose(out, [0.6, 0.2, 0.2])
    assert np.isfinite(out).all()


@pytest.mark.parametrize("m", [0, -1, 1.5, True, "3", None])
def test_bad_m_rejected(m):
    with pytest.raises(ValueError, match="smoothing m"):
        smooth_priors(P3, V3, m, 0.5)
    with pytest.raises(ValueError, match=r"^m: expected an integer in \[1, 10000\], got "):
        NeighbourSmoothing(m=m)


@pytest.mark.parametrize("beta", [-0.1, 1.01, float("nan"), "0.3", None])
def test_bad_beta_rejected(beta):
    with pytest.raises(ValueError, match="smoothing beta"):
        smooth_priors(P3, V3, 1, beta)
    with pytest.raises(ValueError, match=r"^beta: expected a finite number in \[0, 1\]"):
        NeighbourSmoothing(beta=beta)


def test_bad_shapes_and_nan_rejected():
    with pytest.raises(ValueError, match="shape"):
        smooth_priors(P3, V3[:2], 1, 0.5)
    bad = V3.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="vectors"):
        smooth_priors(P3, bad, 1, 0.5)


def test_stage_replaces_prior_and_records_info():
    b = batch(P3, V3)
    out = NeighbourSmoothing(m=1, beta=0.5)(b)
    assert list(out.factors) == ["prior"]
    np.testing.assert_allclose(out.factors["prior"], [0.7, 0.7, 0.3])
    info = out.info["smoothing"]
    assert info["beta"] == 0.5 and info["m"] == 1 and info["m_effective"] == 1
    assert info["moved"] == 3 and info["applied"] is True
    np.testing.assert_allclose(b.factors["prior"], P3)  # input not mutated
    # multiply is sim × λ'
    scored = Combine()(out)
    np.testing.assert_allclose(scored.score, np.array([0.9, 0.8, 0.7]) * [0.7, 0.7, 0.3])


def test_stage_under_other_name_removes_source_factor():
    b = batch(P3, V3).with_factor("fresh", np.ones(3))
    out = NeighbourSmoothing(m=1, beta=0.5, name="prior_smoothed")(b)
    assert list(out.factors) == ["prior_smoothed", "fresh"]
    assert out.hits()[0]["score_breakdown"]["prior_smoothed"] == pytest.approx(0.7)


def test_moved_counts_only_changed_candidates():
    # d0 and d1 have equal priors and are each other's neighbour: they do not move
    vecs = np.array([[1.0, 0.0], [1.0, 0.1], [0.0, 1.0]])
    out = NeighbourSmoothing(m=1, beta=0.5)(batch([0.5, 0.5, 0.9], vecs))
    assert out.info["smoothing"]["moved"] == 1


def test_noop_below_two_candidates_even_without_vectors():
    one = batch([0.4], None)
    out = NeighbourSmoothing()(one)
    np.testing.assert_allclose(out.factors["prior"], [0.4])
    assert out.info["smoothing"]["applied"] is False
    empty = Candidates.empty("q").with_factor("prior", np.zeros(0))
    assert len(NeighbourSmoothing()(empty)) == 0


def test_missing_vectors_raise_with_fix():
    with pytest.raises(StageError, match="with_vectors=True"):
        NeighbourSmoothing()(batch(P3, None))


def test_missing_prior_factor_raises():
    b = Candidates.from_records("q", ["a", "b"], [0.5, 0.4], vectors=V3[:2])
    with pytest.raises(StageError, match="SourcePrior"):
        NeighbourSmoothing()(b)


# -- the seed's q006/q010 failure mode, and the case where smoothing helps ---------------------

def _top(b):
    return list(Combine()(b).sorted_by_score().doc_ids)


def test_smoothing_can_hurt_a_clean_low_prior_document():
    # c: clean relevant blog post (λ .5), its nearest neighbour a: an AI-written fake (λ .3)
    # built to resemble it; n: a non-relevant forum post (λ .4) whose neighbour is a
    # government page g (λ .9). Cosines: c-a .995, n-g .707, all others 0.
    vecs = [[1, 0, 0, 0], [1, 0.1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 1]]
    b = batch([0.5, 0.3, 0.4, 0.9], vecs, sims=[0.80, 0.85, 0.90, 0.50], ids=list("cang"))
    # without smoothing: g .45 > c .40 > n .36 > a .255
    assert _top(b) == ["g", "c", "n", "a"]
    smoothed = NeighbourSmoothing(m=1, beta=0.5)(b)
    # c' = .4 -> .32; n' = .65 -> .585; a' = .4 -> .34; g' = .65 -> .325
    np.testing.assert_allclose(smoothed.factors["prior"], [0.4, 0.4, 0.65, 0.65])
    ranking = _top(smoothed)
    assert ranking.index("c") > ranking.index("n")  # the clean document lost its place
    assert ranking == ["n", "a", "g", "c"]  # and the fake now outranks it


def test_smoothing_can_help_against_a_spoofed_high_prior():
    # s: a fake whose metadata claims established_news (λ .8), nearest to an AI fake f (λ .3);
    # g: a government page (λ .9) nearest to a peer-reviewed paper p (λ .95).
    vecs = [[1, 0, 0, 0], [1, 0.2, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0.3]]
    b = batch([0.8, 0.3, 0.9, 0.95], vecs, sims=[0.95, 0.6, 0.80, 0.4], ids=list("sfgp"))
    assert _top(b)[0] == "s"  # .76 > .72
    smoothed = NeighbourSmoothing(m=1, beta=0.5)(b)
    np.testing.assert_allclose(smoothed.factors["prior"], [0.55, 0.55, 0.925, 0.925])
    assert _top(smoothed)[0] == "g"  # .74 > .5225
