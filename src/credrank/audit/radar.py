"""The radar view of a trust profile (chapter 35.1, "Survey-style evaluation and radar area").

The math is pure: for n ≥ 3 nonnegative scores on equally spaced axes in a fixed order the
closed polygon (r_{n+1} = r_1) has area ``½·sin(2π/n)·Σ_{i=1..n} r_i r_{i+1}``; the chapter's
six-axis case is ``½·sin(2π/6)·Σ_{i=1..6} r_i r_{i+1}`` with r_7 = r_1.

Declared policies:

* **Axis order** is :data:`~credrank.audit.profile.DIMENSIONS` (robustness, privacy, fairness,
  transparency, factuality, accountability), starting at the top and running clockwise. The
  area depends on that order and on each axis's declared scale.
* **Normalisation** is the profile's (:func:`credrank.audit.profile.normalise`): r ∈ [0, 1]
  with 1 at the declared better end of the scale.
* **Gaps**: a dimension not measured is drawn as a gap — no vertex, the two edges touching its
  axis are left out and the axis is labelled "not measured" — never as r = 0. The area of a
  polygon with a gap is **not defined** (``None``): not the area of the remaining vertices,
  not a zero-filled area.
* The area is not a probability or a trustworthy-model certificate; gates are checked
  separately on raw values (:func:`credrank.audit.profile.check_gates`).

:func:`draw_radar` writes ``radar.png`` and ``radar.svg`` (matplotlib, Agg) byte-identically on
rerun: no dates or software stamps in the metadata and a fixed SVG hash salt.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from credrank.audit.profile import DIMENSIONS, TrustProfile
from credrank.core.extras import missing_extra
from credrank.core.files import atomic_write_bytes

__all__ = [
    "CAVEATS",
    "RadarFigure",
    "RadarSeries",
    "adjacent_product_sum",
    "draw_radar",
    "normalised_area",
    "radar_area",
    "radar_document",
    "radar_runs",
    "radar_segments",
    "radar_series",
    "relative_area_difference",
    "scale_mismatches",
]

#: printed under every radar figure and by ``credrank audit radar``
CAVEATS: tuple[str, ...] = (
    "Axes in a fixed order (robustness, privacy, fairness, transparency, factuality, "
    "accountability); r is each value linearly rescaled from its declared scale, 1 = the "
    "better end. r is not a probability.",
    "Area = ½·sin(2π/6)·Σ r_i·r_(i+1) with r_7 = r_1. It changes with axis "
    "order and with the declared scales; it is not a probability or a certificate of a "
    "trustworthy model, and similar areas can hide different component risks.",
    "A dimension not measured is a gap in the polygon, not 0; the area of a polygon with a "
    "gap is reported as not defined.",
    "Hard gates are checked separately on the raw values; no area or average compensates "
    "for a failed gate.",
)

_NOT_DEFINED = "not defined"


def _check(r: Sequence[float], *, unit: bool = False) -> list[float]:
    values = [float(x) for x in r]
    if len(values) < 3:
        raise ValueError(f"radar: expected at least 3 axes, got {len(values)}")
    for i, x in enumerate(values):
        if not math.isfinite(x) or x < 0 or (unit and x > 1):
            want = "a finite number in [0, 1]" if unit else "a finite number ≥ 0"
            raise ValueError(f"radar: axis {i + 1}: expected {want}, got {x}")
    return values


def adjacent_product_sum(r: Sequence[float]) -> float:
    """Σ_{i=1..n} r_i·r_{i+1} with r_{n+1} = r_1 (chapter 35.1: the closed polygon; using
    r_{(i+1) mod n} with one-based labels would wrongly bring in an r_0)."""
    values = _check(r)
    n = len(values)
    return math.fsum(values[i] * values[(i + 1) % n] for i in range(n))


def radar_area(r: Sequence[float]) -> float:
    """Area of the closed radar polygon, chapter 35.1: ``½·sin(2π/n)·Σ_{i=1..n} r_i r_{i+1}``,
    r_{n+1} = r_1 (n = 6: ``½·sin(2π/6)·Σ_{i=1..6} r_i r_{i+1}``, r_7 = r_1). Axes are equally
    spaced in the given order; the area changes when the order changes."""
    values = _check(r)
    return 0.5 * math.sin(2 * math.pi / len(values)) * adjacent_product_sum(values)


def normalised_area(r: Sequence[float]) -> float:
    """The radar area divided by the area of the all-ones polygon on the same n axes (chapter
    35.1: Model A 0.429166667, Model B 0.4225) = Σ r_i r_{i+1} / n. Scores must be in [0, 1]."""
    values = _check(r, unit=True)
    return adjacent_product_sum(values) / len(values)


def relative_area_difference(area: float, baseline: float) -> float:
    """``area / baseline − 1`` (chapter 35.1: relative to B, 2.575/2.535 − 1 ≈ 1.577909%),
    the baseline as denominator."""
    if not (math.isfinite(area) and math.isfinite(baseline)) or baseline <= 0:
        raise ValueError(f"relative area difference: expected finite areas with a baseline > 0, "
                         f"got {area} and {baseline}")
    return area / baseline - 1


def radar_segments(r: Sequence[float | None]) -> tuple[tuple[int, int], ...]:
    """The polygon's edges as axis-index pairs ``(i, (i + 1) mod n)``, in axis order: an edge
    is drawn only when both its axes are measured, so a ``None`` axis leaves a gap of two
    missing edges. All measured: the n edges of the closed polygon."""
    n = len(r)
    return tuple((i, (i + 1) % n) for i in range(n)
                 if r[i] is not None and r[(i + 1) % n] is not None)


def radar_runs(r: Sequence[float | None]) -> tuple[tuple[int, ...], ...]:
    """The polygon as polylines of axis indices, broken at every ``None``: one closed run
    ``(0, 1, …, n−1, 0)`` when nothing is missing, else maximal runs of consecutive measured
    axes (wrapping round the last axis), each an open polyline; an isolated measured axis is a
    run of one."""
    n = len(r)
    measured = [x is not None for x in r]
    if all(measured):
        return (*range(n), 0),
    if not any(measured):
        return ()
    start = next(i for i in range(n) if not measured[i])  # rotate to begin after a gap
    runs: list[tuple[int, ...]] = []
    current: list[int] = []
    for k in range(1, n + 1):
        i = (start + k) % n
        if measured[i]:
            current.append(i)
        elif current:
            runs.append(tuple(current))
            current = []
    if current:
        runs.append(tuple(current))
    return tuple(runs)


@dataclass(frozen=True)
class RadarSeries:
    """One profile on the radar: its r values (``None``: not measured), the drawn edges and
    polylines, and the area figures (``None``: not defined because of a gap)."""

    label: str
    dimensions: tuple[str, ...]
    values: tuple[float | None, ...]
    segments: tuple[tuple[int, int], ...]
    runs: tuple[tuple[int, ...], ...]
    adjacent_product_sum: float | None
    area: float | None
    normalised_area: float | None

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(d for d, v in zip(self.dimensions, self.values, strict=True) if v is None)

    @property
    def closed(self) -> bool:
        return not self.missing


def radar_series(profile: TrustProfile, label: str | None = None) -> RadarSeries:
    """The radar data of a profile in :data:`DIMENSIONS` order; areas only for a complete
    polygon (gap policy: not defined)."""
    values = profile.normalised
    complete = all(v is not None for v in values)
    full = [float(v) for v in values if v is not None]
    return RadarSeries(
        label=label or profile.title, dimensions=DIMENSIONS, values=values,
        segments=radar_segments(values), runs=radar_runs(values),
        adjacent_product_sum=adjacent_product_sum(full) if complete else None,
        area=radar_area(full) if complete else None,
        normalised_area=normalised_area(full) if complete else None)


def scale_mismatches(profile: TrustProfile, other: TrustProfile) -> list[str]:
    """Axes on which two profiles declare different scales, directions, metrics or units —
    their r values are then not commensurate and the comparison needs a caveat."""
    out = []
    for a, b in zip(profile.entries, other.entries, strict=True):
        if not (a.measured and b.measured):
            continue
        diffs = [k for k in ("scale", "higher_is_better", "metric", "unit")
                 if getattr(a, k) != getattr(b, k)]
        if diffs:
            out.append(f"{a.dimension}: the profiles declare different {', '.join(diffs)}; "
                       "their r values are not commensurate")
    return out


@dataclass(frozen=True)
class RadarFigure:
    """What :func:`draw_radar` wrote and drew."""

    png: Path
    svg: Path
    series: tuple[RadarSeries, ...]
    caveats: tuple[str, ...]


def _fmt(x: float | None, digits: int = 6) -> str:
    return _NOT_DEFINED if x is None else f"{x:.{digits}f}"


def _area_line(s: RadarSeries) -> str:
    if s.area is None:
        return (f"{s.label}: area not defined (gap: {', '.join(s.missing)} not measured)")
    return (f"{s.label}: area {_fmt(s.area)} (normalised {_fmt(s.normalised_area)}, "
            f"Σ r_i·r_(i+1) = {_fmt(s.adjacent_product_sum)})")


def _axis_label(profile: TrustProfile, compare: TrustProfile | None, i: int,
                series: Sequence[RadarSeries]) -> str:
    entry = profile.entries[i]
    lines = [entry.dimension, f"[{', '.join(entry.stages)}]"]
    profiles = [profile] if compare is None else [profile, compare]
    shown_scales: list[tuple[Any, Any]] = []
    for p, s in zip(profiles, series, strict=True):
        e = p.entries[i]
        if e.scale is None or e.higher_is_better is None:
            continue
        if (e.scale, e.higher_is_better) in shown_scales:
            continue
        lo, hi = e.scale
        better = "higher" if e.higher_is_better else "lower"
        owner = f" ({s.label})" if shown_scales else ""
        lines.append(f"scale{owner} [{lo:g}, {hi:g}], {better} is better")
        shown_scales.append((e.scale, e.higher_is_better))
    for p, s in zip(profiles, series, strict=True):
        e = p.entries[i]
        shown = "not measured" if e.value is None else f"{e.value:g}"
        if e.value is not None and e.measured_on:
            shown += " (another system: see note)"
        lines.append(shown if compare is None else f"{s.label}: {shown}")
    return "\n".join(lines)


def measured_elsewhere(profiles: Sequence[TrustProfile], labels: Sequence[str]
                       ) -> list[str]:
    """A note per measured axis measured on something else than the profile's index (the
    entry's ``measured_on``, which says what: the audit's robustness, the audited pipeline or
    a stress bench's own row, on the bench's data)."""
    return [f"{e.dimension}{f' ({label})' if len(profiles) > 1 else ''}: measured on "
            f"{e.measured_on}"
            for p, label in zip(profiles, labels, strict=True) for e in p.entries
            if e.value is not None and e.measured_on]


def draw_radar(profile: TrustProfile, out_dir: Path | str, compare: TrustProfile | None = None,
               stem: str = "radar") -> RadarFigure:
    """Draw the profile (and optionally a comparison profile, dashed, with a legend) on six
    fixed axes and write ``STEM.png`` and ``STEM.svg`` into ``out_dir``. Declared scales are
    labelled on each axis, a missing axis is a gap labelled "not measured", and the caveats and
    areas are printed under the figure."""
    # matplotlib is imported here, not at module level: it is heavy and the optional `plots`
    # extra, needed by the figure only
    try:
        import matplotlib
    except ImportError as exc:
        raise missing_extra("the audit's radar figure", "plots", exc) from exc

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    profiles = [profile] if compare is None else [profile, compare]
    labels = [p.title for p in profiles]
    if compare is not None and labels[0] == labels[1]:
        labels = [f"{labels[0]} (1)", f"{labels[1]} (2)"]
    series = tuple(radar_series(p, lab) for p, lab in zip(profiles, labels, strict=True))
    caveats = list(CAVEATS) + measured_elsewhere(profiles, labels)
    if compare is not None:
        caveats += scale_mismatches(profile, compare)

    n = len(DIMENSIONS)
    angles = [math.pi / 2 - 2 * math.pi * i / n for i in range(n)]  # top, clockwise
    unit = [(math.cos(a), math.sin(a)) for a in angles]
    styles: list[dict[str, Any]] = [dict(color="#2a6fbb", linestyle="-", marker="o"),
                                     dict(color="#d35400", linestyle="--", marker="s")]

    with matplotlib.rc_context({"svg.hashsalt": "credrank-audit-radar", "svg.fonttype": "path",
                                "font.family": "DejaVu Sans"}):
        fig = Figure(figsize=(8.4, 8.4), dpi=100)
        ax = fig.add_axes((0.03, 0.3, 0.94, 0.63))
        ax.set_aspect("equal")
        ax.set_axis_off()
        ax.set_xlim(-1.9, 1.9)
        ax.set_ylim(-1.45, 1.45)
        for ring in (0.25, 0.5, 0.75, 1.0):  # grid in r, straight edges like the polygon
            xs = [ring * u[0] for u in unit] + [ring * unit[0][0]]
            ys = [ring * u[1] for u in unit] + [ring * unit[0][1]]
            ax.plot(xs, ys, color="#bbbbbb", linewidth=0.6, linestyle=":")
            ax.text(0.03, ring, f"r={ring:g}", fontsize=7, color="#777777", va="bottom")
        for i, (ux, uy) in enumerate(unit):
            gap = any(s.values[i] is None for s in series)
            ax.plot([0, ux], [0, uy], color="#999999", linewidth=0.7,
                    linestyle=(0, (2, 3)) if gap else "-")
            label = _axis_label(profile, compare, i, series)
            ha = "center" if abs(ux) < 0.1 else ("left" if ux > 0 else "right")
            va = "bottom" if uy > 0.9 else ("top" if uy < -0.9 else "center")
            ax.text(1.07 * ux, 1.07 * uy, label, fontsize=7.5, ha=ha, va=va,
                    color="#b03a2e" if gap else "black", linespacing=1.15)
        for s, style in zip(series, styles, strict=False):
            pts = [None if v is None else (v * unit[i][0], v * unit[i][1])
                   for i, v in enumerate(s.values)]
            first = True
            for run in s.runs:
                xy = [pts[i] for i in run]
                ax.plot([p[0] for p in xy if p], [p[1] for p in xy if p], linewidth=1.8,
                        markersize=5, label=s.label if first else None, **style)
                first = False
            if s.closed:
                ax.fill([p[0] for p in pts if p], [p[1] for p in pts if p],
                        color=style["color"], alpha=0.12, linewidth=0)
        if compare is not None:
            ax.legend(loc="upper left", bbox_to_anchor=(0.0, 1.0), fontsize=8, frameon=False)
        fig.suptitle("Trust profile: six dimensions, fixed axis order",
                     fontsize=11, y=0.985)
        text = [_area_line(s) for s in series]
        if compare is not None and all(s.area is not None for s in series):
            a, b = series[0].area, series[1].area
            assert a is not None and b is not None
            shown = (f"{100 * relative_area_difference(a, b):.6f}%" if b > 0
                     else f"not defined ({series[1].label}'s area is 0)")
            text.append(f"relative area difference {series[0].label} vs {series[1].label}: "
                        f"{shown}")
        text += [f"• {c}" for c in caveats]
        wrapped = "\n".join(textwrap.fill(t, 110, subsequent_indent="  ") for t in text)
        fig.text(0.04, 0.285, wrapped, fontsize=7.5, va="top", ha="left", linespacing=1.3)
        png, svg = out / f"{stem}.png", out / f"{stem}.svg"
        for path, fmt, meta in ((png, "png", {"Software": None}), (svg, "svg", {"Date": None})):
            drawn = io.BytesIO()  # drawn whole, then written in place of the old one: a full
            fig.savefig(drawn, format=fmt, metadata=meta)  # disk left a truncated svg
            atomic_write_bytes(path, drawn.getvalue())
    return RadarFigure(png=png, svg=svg, series=series, caveats=tuple(caveats))


def radar_document(figure: RadarFigure) -> dict[str, Any]:
    """The radar as plain data for ``--json`` (areas ``None`` = not defined; the relative
    area difference ``None`` too where an area is not defined or the baseline's is 0)."""
    doc: dict[str, Any] = {
        "axes": list(DIMENSIONS),
        "series": [{"label": s.label, "values": list(s.values),
                    "missing": list(s.missing), "closed": s.closed,
                    "segments": [list(e) for e in s.segments],
                    "adjacent_product_sum": s.adjacent_product_sum, "area": s.area,
                    "normalised_area": s.normalised_area} for s in figure.series],
        "relative_area_difference": None,
        "files": {"png": str(figure.png), "svg": str(figure.svg)},
        "caveats": list(figure.caveats),
    }
    if len(figure.series) == 2:
        a, b = figure.series[0].area, figure.series[1].area
        if a is not None and b is not None and b > 0:  # a baseline of area 0: not defined
            doc["relative_area_difference"] = relative_area_difference(a, b)
    return doc
