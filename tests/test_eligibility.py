import pytest

from conftest import build_batch
from credrank.core.candidates import Candidates
from credrank.select.eligibility import EligibilityFilter


def batch(sims):
    return build_batch(sims)


def test_keeps_candidates_close_to_the_best():
    out = EligibilityFilter(min_ratio=0.8, min_keep=1)(batch([0.9, 0.5, 0.75, 0.72, -0.1]))
    # 0.8 × 0.9 = 0.72: d0, d2, d3 eligible, in batch order
    assert list(out.doc_ids) == ["d0", "d2", "d3"]
    assert out.info["eligibility"] == {"min_ratio": 0.8, "kept": 3, "eligible": 3}


def test_min_keep_fills_with_the_best_remaining():
    out = EligibilityFilter(min_ratio=0.99, min_keep=3)(batch([0.9, 0.5, 0.75, 0.2]))
    assert list(out.doc_ids) == ["d0", "d1", "d2"]


def test_empty_and_all_negative():
    assert len(EligibilityFilter()(Candidates.empty("q"))) == 0
    out = EligibilityFilter(min_ratio=0.5, min_keep=0)(batch([-0.2, -0.3]))
    assert len(out) == 2  # max(sim, 0) = 0 everywhere: all tie at the (zero) top


@pytest.mark.parametrize("kw", [{"min_ratio": 1.5}, {"min_keep": -1}, {"min_keep": True},
                                {"min_ratio": float("nan")}])
def test_bad_parameters(kw):
    with pytest.raises(ValueError):
        EligibilityFilter(**kw)


def test_eligible_rows_is_the_one_rule():
    # the selectors' min_ratio and the library stage share it
    from credrank.select.eligibility import eligible_rows

    rows, eligible = eligible_rows([0.9, 0.5, 0.75, 0.72, -0.1], 0.8, 1)
    assert rows.tolist() == [0, 2, 3] and eligible == 3
    rows, eligible = eligible_rows([0.9, 0.5, 0.75, 0.2], 0.99, 3)
    assert rows.tolist() == [0, 1, 2] and eligible == 1
    assert eligible_rows([0.3, -0.2, 0.1], 0.0, 0)[0].tolist() == [0, 1, 2]  # the whole pool
