"""Chapter 35.7's worked numbers: half-life weights, distortion, telescoping, the bound; the
freshness-date rule and the unknown-age policy."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np
import pytest

from credrank.freshness.dates import elapsed_days, freshness_date, parse_instant
from credrank.freshness.decay import (
    chain_ratio,
    distortion_bound,
    distortion_ratio,
    half_life_weight,
)
from credrank.freshness.policy import UnknownAge, parse_undated


def test_chapter_weights_ratio_and_bound():
    # T = 2026, τ = 1 year: the 2023 wrapper 2^−3, its 2020 origin 2^−6, ratio 8
    assert half_life_weight(2026 - 2023, 1.0) == 0.125
    assert half_life_weight(2026 - 2020, 1.0) == 0.015625
    assert distortion_ratio(2023, 2020, 1.0) == 8.0
    # a 2025 wrapper: weight 1/2, ratio 32; the bound at T = 2026, t0 = 2020 is 64
    assert half_life_weight(1, 1.0) == 0.5 and distortion_ratio(2025, 2020, 1.0) == 32.0
    assert distortion_bound(2020, 2026, 1.0) == 64.0
    assert distortion_ratio(2026, 2020, 1.0) == distortion_bound(2020, 2026, 1.0)


def test_more_hops_with_the_same_final_date_leave_the_ratio_unchanged():
    direct = chain_ratio([2020, 2023], 2026, 1.0)
    assert direct == pytest.approx(8.0)
    for chain in ([2020, 2021, 2023], [2020, 2020.5, 2022, 2022.9, 2023]):
        assert chain_ratio(chain, 2026, 1.0) == pytest.approx(direct, rel=1e-12)
    assert chain_ratio([2020], 2026, 1.0) == 1.0


@pytest.mark.parametrize("tau", [0, -1, float("inf"), float("nan"), "x"])
def test_half_life_must_be_positive_and_finite(tau):
    with pytest.raises(ValueError, match="half_life"):
        half_life_weight(1.0, tau)


def test_weights_refuse_negative_or_unknown_ages():
    with pytest.raises(ValueError, match="elapsed"):
        half_life_weight([-1.0], 1.0)
    with pytest.raises(ValueError, match="unknown-age policy"):
        half_life_weight([np.nan], 1.0)


def test_freshness_date_prefers_observation_and_never_uses_modified_or_retrieved():
    d = {"observed_at": "2020-01-01", "verified_at": "2021-01-01", "published_at": "2023-01-01",
         "modified_at": "2025-01-01", "retrieved_at": "2026-01-01"}
    assert freshness_date(d).basis == "observed_at"
    d.pop("observed_at")
    assert freshness_date(d).basis == "verified_at"
    d.pop("verified_at")
    got = freshness_date(d)
    assert got.basis == "published_at" and got.date == datetime(2023, 1, 1, tzinfo=UTC)
    d.pop("published_at")
    only_late = freshness_date(d)  # modified and retrieved only: unknown, never "now"
    assert only_late.date is None and only_late.basis == "unknown"


def test_future_dates_are_clamped_and_flagged():
    now = datetime(2026, 1, 1, tzinfo=UTC)
    got = freshness_date({"published_at": "2027-06-01"}, now)
    assert got.after_now and got.date == now
    assert elapsed_days(now, [got.date, None]).tolist()[0] == 0.0
    assert np.isnan(elapsed_days(now, [None])[0])


def test_the_evidence_date_of_a_date_after_now_is_unknown():
    """What the ranking and the context read (35.7): a date after T is no usable age (the
    audit's freshness_date sets it to T); a wrapper's origin date where it is older
    evidence; an origin newer than the document is an anachronism: its own date stands."""
    from credrank.freshness.dates import evidence_date

    now = datetime(2026, 1, 1, tzinfo=UTC)
    late = evidence_date({"published_at": "2027-06-01"}, now)
    assert late.date is None and late.after_now and late.basis == "published_at"
    assert late.written == datetime(2027, 6, 1, tzinfo=UTC)
    wrapper = evidence_date({"published_at": "2027-06-01"}, now, "w", "2020-01-01",
                            "inherited:o")
    assert wrapper.date == datetime(2020, 1, 1, tzinfo=UTC) and not wrapper.after_now
    assert wrapper.basis == "inherited:o" and wrapper.written == late.written
    newer = evidence_date({"published_at": "2024-01-01"}, now, "w", "2025-01-01",
                          "inherited:o")
    assert newer.basis == "published_at" and newer.date == datetime(2024, 1, 1, tzinfo=UTC)
    remeasured = evidence_date({"observed_at": "2024-01-01"}, now, "w", "2020-01-01",
                               "inherited:o")
    assert remeasured.basis == "observed_at"


def test_unparseable_date_names_the_field():
    with pytest.raises(ValueError, match=r"field 'published_at'.*ISO 8601.*'last spring'"):
        freshness_date({"published_at": "last spring"}, where="corpus.jsonl:3")
    assert parse_instant("2024-05-01T12:00:00Z").tzinfo is not None


def test_unknown_age_policy():
    dated = np.array([1.0, 0.5, 0.25])
    assert parse_undated("neutral").weight(dated) == 0.5  # the median of the dated
    assert parse_undated("neutral").weight(np.zeros(0)) == 0.5  # none dated: declared 0.5
    assert parse_undated("penalty:0.3").weight(dated) == 0.3
    assert parse_undated("exclude").weight(dated) is None
    rng = np.random.default_rng(0)
    for _ in range(100):  # never above an otherwise identical document dated at T (w = 1)
        w = half_life_weight(rng.random(5) * 10, 1.0 + rng.random())
        assert parse_undated("neutral").weight(w) <= 1.0
    for bad in ("penalty", "exclude:0.2", "neutral:1.5", "sometimes", "penalty:x"):
        with pytest.raises(ValueError, match="undated"):
            parse_undated(bad)
    assert UnknownAge().describe().startswith("neutral")
