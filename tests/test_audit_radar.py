"""Radar area arithmetic (chapter 35.1) and the radar figure: the chapter's numbers, axis order,
gaps for missing axes and byte-identical PNG/SVG reruns."""

from __future__ import annotations

import math
from itertools import permutations
from pathlib import Path

import pytest

from credrank.audit import (
    CAVEATS,
    DIMENSIONS,
    adjacent_product_sum,
    draw_radar,
    example_profile_path,
    load_profile,
    normalised_area,
    parse_profile,
    radar_area,
    radar_document,
    radar_runs,
    radar_segments,
    radar_series,
    relative_area_difference,
)

A = (0.80, 0.30, 0.75, 0.70, 0.85, 0.60)
B = (0.65,) * 6
TIGHT = 1e-9


def _reference_area(r: tuple[float, ...]) -> float:
    """Shoelace area of the polygon with vertices r_i at angles 2πi/n — an independent
    computation of the chapter's ½·sin(2π/6)·Σ r_i r_{i+1}."""
    n = len(r)
    pts = [(x * math.cos(2 * math.pi * i / n), x * math.sin(2 * math.pi * i / n))
           for i, x in enumerate(r)]
    return 0.5 * abs(sum(pts[i][0] * pts[(i + 1) % n][1] - pts[(i + 1) % n][0] * pts[i][1]
                         for i in range(n)))


def test_chapter_model_a_and_b_numbers() -> None:
    # the chapter's printed values, to their printed precision
    assert adjacent_product_sum(A) == pytest.approx(2.575, abs=1e-12)
    assert adjacent_product_sum(B) == pytest.approx(2.535, abs=1e-12)
    assert radar_area(A) == pytest.approx(1.115007707, abs=TIGHT)
    assert radar_area(B) == pytest.approx(1.097687199, abs=TIGHT)
    rel = relative_area_difference(radar_area(A), radar_area(B))
    assert 100 * rel == pytest.approx(1.577909, abs=1e-6)
    assert rel < 0.02  # "below 2%"
    assert normalised_area(A) == pytest.approx(0.429166667, abs=TIGHT)
    assert normalised_area(B) == pytest.approx(0.4225, abs=1e-12)
    # …and the same numbers from first principles, not from the functions under test
    products = 0.80 * 0.30 + 0.30 * 0.75 + 0.75 * 0.70 + 0.70 * 0.85 + 0.85 * 0.60 + 0.60 * 0.80
    assert adjacent_product_sum(A) == pytest.approx(products, rel=1e-15)
    assert radar_area(A) == pytest.approx(0.5 * (math.sqrt(3) / 2) * 2.575, rel=1e-14)
    assert radar_area(B) == pytest.approx(0.5 * (math.sqrt(3) / 2) * 6 * 0.65 ** 2, rel=1e-14)
    assert radar_area(A) == pytest.approx(_reference_area(A), rel=1e-12)
    assert normalised_area(A) == pytest.approx(radar_area(A) / radar_area([1.0] * 6), rel=1e-14)
    assert rel == pytest.approx(2.575 / 2.535 - 1, rel=1e-12)


def test_closing_edge_is_r_n_times_r_1() -> None:
    # r_7 = r_1: the last product is r_6·r_1, not an r_0 term
    r = [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert adjacent_product_sum(r) == pytest.approx(1.0)


def test_general_n_axes() -> None:
    for r in ([0.5, 0.2, 0.9], [0.3, 0.6, 0.1, 0.8, 0.4], [0.1 * k for k in range(1, 9)]):
        assert radar_area(r) == pytest.approx(_reference_area(tuple(r)), rel=1e-12)
    assert radar_area([1.0] * 4) == pytest.approx(2.0)  # the unit square's diagonal-2 rhombus


def test_area_changes_with_axis_order() -> None:
    areas = {round(radar_area(p), 12) for p in permutations(A)}
    assert len(areas) > 1
    swapped = (A[0], A[2], A[1], A[3], A[4], A[5])  # privacy and fairness swapped
    assert radar_area(swapped) != pytest.approx(radar_area(A), rel=1e-6)
    # a rotation or reflection of the same cyclic order keeps it
    assert radar_area(A[1:] + A[:1]) == pytest.approx(radar_area(A), rel=1e-14)
    assert radar_area(A[::-1]) == pytest.approx(radar_area(A), rel=1e-14)


@pytest.mark.parametrize("bad", [[0.5, 0.5], [0.5, math.nan, 0.5], [0.5, -0.1, 0.5],
                                 [0.5, math.inf, 0.5]])
def test_area_rejects_bad_input(bad: list[float]) -> None:
    with pytest.raises(ValueError, match="radar"):
        radar_area(bad)


def test_normalised_area_needs_unit_scores() -> None:
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        normalised_area([0.5, 1.5, 0.5])
    with pytest.raises(ValueError, match="baseline > 0"):
        relative_area_difference(1.0, 0.0)


def test_segments_and_runs_leave_a_gap() -> None:
    full = list(A)
    assert radar_segments(full) == ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 0))
    assert radar_runs(full) == ((0, 1, 2, 3, 4, 5, 0),)
    gap: list[float | None] = [0.8, None, 0.75, 0.7, 0.85, 0.6]
    segments = radar_segments(gap)
    assert (0, 1) not in segments and (1, 2) not in segments
    assert segments == ((2, 3), (3, 4), (4, 5), (5, 0))
    assert radar_runs(gap) == ((2, 3, 4, 5, 0),)  # open: no edge back across the gap
    two: list[float | None] = [0.5, None, 0.5, None, 0.5, 0.5]
    assert radar_runs(two) == ((2,), (4, 5, 0))
    assert radar_segments(two) == ((4, 5), (5, 0))
    assert radar_runs([None] * 6) == ()


def _gap_profile():  # type: ignore[no-untyped-def]
    entries = []
    for d, v in zip(DIMENSIONS, A, strict=True):
        if d == "privacy":
            entries.append({"dimension": d, "status": "not measured", "reason": "no test"})
        else:
            entries.append({"dimension": d, "metric": "m", "unit": "u", "judge": "j",
                            "denominator": "n", "value": v, "scale": [0, 1],
                            "higher_is_better": True})
    return parse_profile({"name": "gappy", "entry": entries}, "gappy.toml")


def test_series_with_gap_has_no_area() -> None:
    s = radar_series(_gap_profile())
    assert s.values[1] is None  # not 0
    assert s.missing == ("privacy",) and not s.closed
    assert s.area is None and s.normalised_area is None and s.adjacent_product_sum is None
    assert (0, 1) not in s.segments and (1, 2) not in s.segments
    full = radar_series(load_profile(example_profile_path("model_a")))
    assert full.closed and full.area == pytest.approx(1.115007707, abs=TIGHT)


def test_figure_files_deterministic_and_gap(tmp_path: Path) -> None:
    a = load_profile(example_profile_path("model_a"))
    b = load_profile(example_profile_path("model_b"))
    first = draw_radar(a, tmp_path / "one", compare=b)
    second = draw_radar(a, tmp_path / "two", compare=b)
    for f1, f2 in ((first.png, second.png), (first.svg, second.svg)):
        assert f1.exists() and f1.stat().st_size > 1000
        assert f1.read_bytes() == f2.read_bytes()
    assert first.png.name == "radar.png" and first.svg.name == "radar.svg"
    assert first.png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = first.svg.read_text(encoding="utf-8")
    assert "<dc:date>" not in svg
    assert first.caveats[: len(CAVEATS)] == CAVEATS
    doc = radar_document(first)
    assert doc["series"][0]["area"] == pytest.approx(1.115007707, abs=TIGHT)
    assert doc["relative_area_difference"] == pytest.approx(0.01577909, abs=1e-8)

    gap = draw_radar(_gap_profile(), tmp_path / "gap", compare=b)
    s = gap.series[0]
    assert s.area is None and (0, 1) not in s.segments and (1, 2) not in s.segments
    assert s.runs == ((2, 3, 4, 5, 0),)
    assert gap.series[1].closed
    doc = radar_document(gap)
    assert doc["series"][0]["area"] is None and doc["relative_area_difference"] is None
    assert doc["series"][0]["values"][1] is None
    rerun = draw_radar(_gap_profile(), tmp_path / "gap2", compare=b)
    assert rerun.svg.read_bytes() == gap.svg.read_bytes()
    assert rerun.png.read_bytes() == gap.png.read_bytes()


def test_scale_mismatch_is_a_caveat(tmp_path: Path) -> None:
    a = load_profile(example_profile_path("model_a"))
    other = _gap_profile()
    fig = draw_radar(a, tmp_path, compare=other)
    assert any("not commensurate" in c for c in fig.caveats)  # metric/unit differ
