"""Combination modes, top-k, and the empty / zero-similarity cases."""

import numpy as np
import pytest

from conftest import build_batch
from credrank.combine import Combine, combine_rrf
from credrank.core.candidates import Candidates, StageError
from credrank.select.topk import TopK
from credrank.stages.prior import SourcePrior


def batch(sims, types):
    return build_batch(sims, source_type=types)


def test_multiply_is_seed_formula_with_negative_cosine_clipped():
    b = SourcePrior("current")(batch([0.8, 0.7, -0.2, -0.5], ["ai_generated", "peer_reviewed",
                                                              "blog", "peer_reviewed"]))
    out = Combine("multiply")(b)
    # 0.8 × 0.30, 0.7 × 0.95, and the negative cosines clipped to 0 before multiplying
    assert out.score == pytest.approx([0.24, 0.665, 0.0, 0.0])
    ranked = TopK(2)(out)
    assert list(ranked.doc_ids) == ["d1", "d0"]
    assert ranked.hits()[0]["score_breakdown"] == {
        "retrieval_score": 0.7, "prior": 0.95, "final": pytest.approx(0.665)}


def test_linear_normalises_similarity_by_batch_max():
    b = SourcePrior("current")(batch([0.5, 0.25], ["blog", "government"]))
    out = Combine("linear", alpha=0.6)(b)
    # ŝ = (1.0, 0.5); 0.6·ŝ + 0.4·λ
    assert out.score == pytest.approx([0.6 * 1.0 + 0.4 * 0.5, 0.6 * 0.5 + 0.4 * 0.9])


def test_rrf_fuses_similarity_rank_and_credibility_rank():
    b = SourcePrior("current")(batch([0.9, 0.8, 0.7], ["blog", "peer_reviewed", "government"]))
    out = Combine("rrf", rrf_k=60)(b)
    # sim ranks 1,2,3; prior ranks: peer 1, gov 2, blog 3
    expected = [1 / 61 + 1 / 63, 1 / 62 + 1 / 61, 1 / 63 + 1 / 62]
    assert out.score == pytest.approx(expected)
    assert list(TopK(3)(out).doc_ids) == ["d1", "d0", "d2"]


def test_rrf_ties_in_credibility_follow_similarity():
    scores = combine_rrf(np.array([0.1, 0.9]), np.array([0.5, 0.5]), 60.0)
    assert scores[1] > scores[0]


@pytest.mark.parametrize("mode", ["multiply", "linear", "rrf"])
def test_empty_candidates_flow_through_every_mode(mode):
    out = TopK(5)(Combine(mode)(SourcePrior("current")(Candidates.empty("q"))))
    assert len(out) == 0 and out.hits() == []


@pytest.mark.parametrize("mode", ["multiply", "linear", "rrf"])
def test_zero_similarity_gives_finite_scores(mode):
    out = Combine(mode)(SourcePrior("current")(batch([0.0, 0.0, -0.3], ["blog", "unknown",
                                                                         "government"])))
    assert np.all(np.isfinite(out.score))
    if mode != "rrf":
        assert out.score.min() >= 0.0


def test_bad_parameters_are_named():
    with pytest.raises(ValueError, match=r"^mode: expected one of multiply, linear, rrf"):
        Combine("add")
    with pytest.raises(ValueError, match="alpha"):
        Combine("linear", alpha=1.5)
    with pytest.raises(ValueError, match=r"^k: expected an integer >= 1, got 0"):  # its name
        TopK(0)
    with pytest.raises(ValueError, match=r"^alpha: "):
        Combine("linear", alpha=True)  # a bool is not a number
    with pytest.raises(ValueError, match=r"^rrf_k: "):
        Combine("rrf", rrf_k=float("inf"))
    with pytest.raises(ValueError, match=r"^rrf_k: expected a finite number in \(0, 1000000\]"):
        Combine("rrf", rrf_k=1e308)  # issue 37 N14: scores of 2e-308
    assert Combine("rrf", rrf_k=1e6).rrf_k == 1e6
    with pytest.raises(ValueError, match=r"^k: expected an integer >= 1, got True"):
        TopK(True)


def test_nan_similarity_is_rejected_with_row():
    with pytest.raises(StageError, match="row 1"):
        batch([0.3, float("nan")], ["blog", "blog"])


def test_stages_do_not_mutate_their_input():
    b = batch([0.5, 0.4], ["blog", "government"])
    before = b.score.copy()
    Combine()(SourcePrior("current")(b))
    assert b.factors == {} and np.array_equal(b.score, before)


def test_a_selector_after_factors_never_combined_is_an_error() -> None:
    """``DenseRetriever >> SourcePrior >> TopK`` ranked by the retrieval score, its prior
    listed in every breakdown and counting for nothing."""
    import numpy as np

    from credrank.core.candidates import Candidates, StageError
    from credrank.core.pipeline import FunctionStage, Pipeline

    batch = Candidates.from_records("q", ["a", "b"], [0.9, 0.8])

    def prior(b: Candidates) -> Candidates:
        return b.with_factor("prior", np.array([0.1, 1.0]), 0.0, 1.0)

    with pytest.raises(StageError, match=r"^TopK: the factor\(s\) prior were never combined"):
        Pipeline([FunctionStage(prior), TopK(1)])(batch)
    out = Pipeline([FunctionStage(prior), Combine("multiply"), TopK(1)])(batch)
    assert list(out.doc_ids) == ["b"]  # 0.8 × 1.0 above 0.9 × 0.1
    assert list(Pipeline([TopK(1)])(batch).doc_ids) == ["a"]  # no factor: nothing to combine
    # a cut by similarity before a later Combine is meant (a pool cut, then the reranking)
    cut = Pipeline([FunctionStage(prior), TopK(2), Combine("multiply"), TopK(1)])(batch)
    assert list(cut.doc_ids) == ["b"]
