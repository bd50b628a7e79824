"""Selection at scale: MMR without the N × N matrix gives the previous picks; coverage is
bounded by its time limit (anytime, flagged not optimal) — made deterministic with an injected
clock, never a wall-clock race; pools past a stage's budget warn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from credrank.core.candidates import Candidates
from credrank.select import coverage as cov
from credrank.select.budget import PoolSizeWarning, pool_warnings
from credrank.select.coverage import best_set_bounded
from credrank.select.diversity import (
    best_set_exhaustive,
    best_set_milp,
    cosine_dissimilarity,
    cosine_similarity,
    dissimilarity_from_similarity,
    ilad_from_dissimilarity,
    mmr,
    mmr_picks,
    set_objective,
)
from credrank.select.stages import CoverageSelect, MMRSelect
from credrank.stages.consensus import AnswerConsensus


class Clock:
    """A fake clock: every reading advances it by ``step`` seconds."""

    def __init__(self, step: float = 0.0, start: float = 100.0):
        self.now, self.step, self.reads = start, step, 0

    def __call__(self) -> float:
        value = self.now
        self.now += self.step
        self.reads += 1
        return value


def previous_mmr(u: np.ndarray, k: int, div: float, x: np.ndarray) -> list[int]:
    """The implementation before this change: the full cosine matrix, then the greedy loop
    (ties to the higher utility, then the lower row)."""
    sim = cosine_similarity(x)
    picked: list[int] = []
    available = np.ones(len(u), dtype=bool)
    max_sim = np.zeros(len(u))
    for _ in range(min(k, len(u))):
        score = (1.0 - div) * u - div * max_sim
        score[~available] = -np.inf
        tied = np.flatnonzero(score == score.max())
        best = int(tied[np.argmax(u[tied])])
        picked.append(best)
        available[best] = False
        max_sim = sim[best] if len(picked) == 1 else np.maximum(max_sim, sim[best])
    return picked


def batch_of(u: np.ndarray, x: np.ndarray, labels: list | None = None) -> Candidates:
    meta = None if labels is None else [{"intent": g} for g in labels]
    return Candidates.from_records("q", [f"d{i}" for i in range(len(u))], u, metadata=meta,
                                   vectors=x)


# -- MMR -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_mmr_rows_give_the_previous_picks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    x = rng.normal(size=(n, int(rng.integers(2, 40))))
    x[rng.integers(n, size=n // 5)] = x[0]  # exact duplicates: tied cosines
    u = np.round(rng.random(n), 1)  # tied utilities
    for div in (0.0, 0.3, 0.5, 0.9, 1.0):
        k = int(rng.integers(1, n + 3))
        picks, rows = mmr_picks(u, k, div, vectors=x)
        assert picks.tolist() == previous_mmr(u, k, div, x)
        assert mmr(u, k, div, vectors=x).tolist() == picks.tolist()
        assert rows.shape == (min(k, n), n)
        np.testing.assert_allclose(rows, cosine_similarity(x)[picks], rtol=0, atol=1e-12)
        assert mmr(u, k, div, similarity=cosine_similarity(x)).tolist() == picks.tolist()


def test_mmr_select_reports_what_the_matrix_gave() -> None:
    rng = np.random.default_rng(5)
    u = rng.random(120)
    batch = batch_of(u, rng.normal(size=(120, 16)))
    x = np.asarray(batch.vectors, dtype=np.float64)  # as the batch holds them
    info = MMRSelect(8, 0.4)(batch).info["select"]
    sim = cosine_similarity(x)
    u = u / u.max()  # utility_scale=pool_max (the default): the pool's largest is 1
    picks = previous_mmr(u, 8, 0.4, x)
    gains, seen = [], np.zeros(120)
    for t, d in enumerate(picks):  # the previous report: gains at pick time, ILAD of the set
        gains.append(0.6 * u[d] - 0.4 * seen[d])
        seen = sim[d].copy() if t == 0 else np.maximum(seen, sim[d])
    chosen = [int(d[1:]) for d in info["chosen"]]
    assert info["pick_order"] == [f"d{i}" for i in picks]
    assert info["objective"] == pytest.approx(float(np.sum(gains)), abs=1e-12)
    assert info["ilad"] == pytest.approx(
        ilad_from_dissimilarity(dissimilarity_from_similarity(sim), np.array(chosen)),
        abs=1e-12)
    assert info["warnings"] == []


def test_mmr_zero_vector_still_raises() -> None:
    x = np.array([[1.0, 0.0], [0.0, 0.0]])
    with pytest.raises(ValueError, match="zero vector at row 1"):
        mmr(np.array([1.0, 0.5]), 2, 0.5, vectors=x)


# -- coverage: the anytime search -------------------------------------------------------------
def instance(n: int, seed: int = 0, dim: int = 12, intents: int = 5):
    rng = np.random.default_rng(seed)
    u = np.sort(rng.uniform(0.2, 0.9, n))[::-1]
    x = rng.normal(size=(n, dim))
    m = rng.integers(intents, size=n)[:, None] == np.arange(intents)[None, :]
    return u, x, m


KW = {"lambda_ilad": 0.6, "lambda_coverage": 0.8}


def test_time_limit_hit_after_greedy_is_flagged_not_optimal() -> None:
    u, x, m = instance(200)
    clock = Clock(step=50.0)  # every reading is past the 10 s limit
    sel = best_set_bounded(u, 6, vectors=x, membership=m, time_limit=10.0, exact_pool=20,
                           clock=clock, **KW)
    assert not sel.optimal and sel.method == "anytime"
    assert sel.details["time_limit_hit"] is True
    assert sel.details["steps"] == ["greedy", "swaps: 0 (time limit)"]
    assert sel.details["shortlist"] is None and sel.details["pool"] == 200
    assert "time limit reached" in sel.status and "not proven optimal" in sel.status
    assert len(set(sel.indices.tolist())) == 6
    top = np.argsort(-u, kind="stable")[:6]
    d = cosine_dissimilarity(x)
    assert sel.objective >= set_objective(u, top, dissimilarity=d, membership=m, **KW) - 1e-12
    assert sel.objective == pytest.approx(
        set_objective(u, sel.indices, dissimilarity=d, membership=m, **KW), abs=1e-12)


def test_time_limit_hit_during_swaps_keeps_the_best_so_far() -> None:
    u, x, m = instance(150, seed=3)
    free = best_set_bounded(u, 5, vectors=x, membership=m, exact_pool=20, clock=Clock(),
                            **KW)
    assert free.details["steps"][1] == "swaps: 3"  # the instance needs several exchanges
    # readings: start, then one before each swap round; the limit falls after round 1
    clock = Clock(step=1.0)
    sel = best_set_bounded(u, 5, vectors=x, membership=m, time_limit=2.5, exact_pool=20,
                           clock=clock, **KW)
    assert sel.details["steps"] == ["greedy", "swaps: 2 (time limit)"]
    assert sel.details["time_limit_hit"] is True and not sel.optimal
    assert sel.objective <= free.objective + 1e-12


def test_exact_pool_out_of_time_before_the_solve() -> None:
    u, x, m = instance(15)
    sel = best_set_bounded(u, 4, vectors=x, membership=m, time_limit=1.0, exact_pool=50,
                           clock=Clock(step=5.0), **KW)
    assert sel.method == "milp" and not sel.optimal
    assert sel.details["time_limit_hit"] is True and "before the exact solve" in sel.status


def test_exact_pool_is_the_exact_optimum() -> None:
    u, x, m = instance(14, seed=3)
    sel = best_set_bounded(u, 4, vectors=x, membership=m, exact_pool=14, clock=Clock(), **KW)
    oracle = best_set_exhaustive(u, 4, dissimilarity=cosine_dissimilarity(x), membership=m,
                                 **KW)
    assert sel.optimal and sel.method == "milp" and sel.details["steps"] == ["milp"]
    assert sel.details["time_limit_hit"] is False
    assert sel.objective == pytest.approx(oracle.objective, abs=1e-9)


@pytest.mark.parametrize("seed", range(4))
def test_anytime_without_the_limit_is_close_to_the_optimum(seed: int) -> None:
    u, x, m = instance(16, seed=seed, intents=4)
    sel = best_set_bounded(u, 4, vectors=x, membership=m, exact_pool=8, clock=Clock(), **KW)
    oracle = best_set_exhaustive(u, 4, dissimilarity=cosine_dissimilarity(x), membership=m,
                                 **KW)
    assert not sel.optimal and sel.details["time_limit_hit"] is False
    assert sel.details["steps"][0] == "greedy" and sel.details["shortlist"] == 8
    assert "shortlist milp: optimal" in sel.details["steps"]
    assert sel.objective <= oracle.objective + 1e-9
    assert sel.objective >= 0.97 * oracle.objective


def test_swap_gains_are_exact() -> None:
    u, x, m = instance(40, seed=4)
    unit = x / np.linalg.norm(x, axis=1)[:, None]
    problem = cov._Problem(u, 5, unit, m, 0.6, 0.8, best_set_milp)
    chosen = np.array([3, 9, 17, 22, 31])
    gain, pos, row = problem.best_swap(chosen)
    after = chosen.copy()
    after[pos] = row
    assert gain == pytest.approx(problem.objective(after) - problem.objective(chosen),
                                 abs=1e-12)
    for p in range(5):  # no exchange beats the one chosen
        for r in set(range(40)) - set(chosen.tolist()):
            other = chosen.copy()
            other[p] = r
            assert problem.objective(other) - problem.objective(chosen) <= gain + 1e-12


def test_coverage_select_reports_the_bound() -> None:
    u, x, _ = instance(120, seed=6)
    labels = [f"i{i % 7}" for i in range(120)]
    stage = CoverageSelect(6, 0.5, 0.5, intent_column="intent", exact_pool=30)
    stage.clock = Clock(step=4.0)  # the limit (10 s) ends the search after greedy
    info = stage(batch_of(u, x, labels)).info["select"]
    assert info["optimal"] is False and info["time_limit_hit"] is True
    assert info["method"] == "anytime" and info["pool"] == 120 and info["exact_pool"] == 30
    assert info["steps"][0] == "greedy" and len(info["chosen"]) == 6
    assert info["warnings"] == []
    assert stage.config()["exact_pool"] == 30
    stage.clock = Clock()
    free = stage(batch_of(u, x, labels)).info["select"]
    assert free["time_limit_hit"] is False and free["optimal"] is False
    assert free["objective"] >= info["objective"] - 1e-12


def test_small_pools_stay_exact_through_the_stage() -> None:
    u, x, _ = instance(20, seed=7)
    labels = [f"i{i % 4}" for i in range(20)]
    info = CoverageSelect(4, 0.3, 0.5, intent_column="intent")(batch_of(u, x, labels)
                                                               ).info["select"]
    assert info["optimal"] is True and info["method"] == "milp" and info["pool"] == 20


# -- the budget warning ----------------------------------------------------------------------
def test_pools_past_the_budget_warn() -> None:
    assert pool_warnings("mmr", 10, 10, "cost") == []
    assert pool_warnings("mmr", 10, None, "cost") == []
    u, x, _ = instance(40, seed=8)
    stage = MMRSelect(3, 0.5)
    stage.max_pool = 30
    with pytest.warns(PoolSizeWarning, match="mmr: 40 candidates exceed the 30"):
        info = stage(batch_of(u, x)).info["select"]
    assert len(info["warnings"]) == 1 and "lower fetch_k to 30" in info["warnings"][0]
    cover = CoverageSelect(3, 0.3, 0.0)
    cover.max_pool = 39
    with pytest.warns(PoolSizeWarning, match="coverage: 40 candidates"):
        assert len(cover(batch_of(u, x)).info["select"]["warnings"]) == 1
    texts = [f"passage {i} says the answer is {i % 3}" for i in range(40)]
    batch = Candidates.from_records("what is the answer", [f"d{i}" for i in range(40)], u,
                                    metadata=[{"text": t} for t in texts])
    voted = AnswerConsensus()
    voted.max_pool = 20
    with pytest.warns(PoolSizeWarning, match="consensus: 40 candidates"):
        assert len(voted(batch).info["consensus"]["warnings"]) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert AnswerConsensus()(batch).info["consensus"]["warnings"] == []


def test_exact_pool_below_k_skips_the_shortlist() -> None:
    u, x, m = instance(60, seed=9)
    sel = best_set_bounded(u, 12, vectors=x, membership=m, exact_pool=10, clock=Clock(), **KW)
    assert len(set(sel.indices.tolist())) == 12 and not sel.optimal
    assert "shortlist milp: skipped (exact_pool <= K: nothing to choose)" in sel.details["steps"]
    assert sel.details["time_limit_hit"] is False
