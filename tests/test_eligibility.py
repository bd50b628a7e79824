"""The eligibility rule of 35.8 (:func:`credrank.select.eligibility.eligible_rows`), which the
selectors ``mmr`` and ``coverage`` apply through ``min_ratio``."""

import pytest

from credrank.select.eligibility import eligible_rows


def test_keeps_candidates_close_to_the_best():
    # 0.8 × 0.9 = 0.72: rows 0, 2, 3 eligible, in batch order
    rows, eligible = eligible_rows([0.9, 0.5, 0.75, 0.72, -0.1], 0.8, 1)
    assert rows.tolist() == [0, 2, 3] and eligible == 3


def test_min_keep_fills_with_the_best_remaining():
    rows, eligible = eligible_rows([0.9, 0.5, 0.75, 0.2], 0.99, 3)
    assert rows.tolist() == [0, 1, 2] and eligible == 1


def test_empty_whole_pool_and_all_negative():
    assert eligible_rows([], 0.5, 3)[0].tolist() == []
    assert eligible_rows([0.3, -0.2, 0.1], 0.0, 0)[0].tolist() == [0, 1, 2]  # the whole pool
    # max(sim, 0) = 0 everywhere: all tie at the (zero) top
    assert eligible_rows([-0.2, -0.3], 0.5, 0)[0].tolist() == [0, 1]


@pytest.mark.parametrize(("ratio", "keep"), [(1.5, 1), (0.5, -1), (0.5, True),
                                             (float("nan"), 1)])
def test_bad_parameters(ratio, keep):
    with pytest.raises(ValueError):
        eligible_rows([0.9, 0.5], ratio, keep)
