"""The trust audit (chapter 35.1–35.2): a six-dimension, three-stage trust profile with hard
gates, its radar view and a report.

* :mod:`~credrank.audit.profile` — the profile (TOML/JSON read, validate, write), the
  normalisation to radar values and the gate check;
* :mod:`~credrank.audit.radar` — radar area arithmetic (35.1) as pure functions and the
  PNG/SVG figure, with missing axes drawn as gaps;
* :mod:`~credrank.audit.report` — Markdown and self-contained HTML reports;
* :mod:`~credrank.audit.labels` — which rows of the harm labels and qrels match the audited
  index and queries (rows that match nothing are reported, labels that match nothing measure
  nothing).

``credrank audit check PROFILE`` validates a profile and checks its gates (exit 1 when one
fails); ``credrank audit radar PROFILE [--compare OTHER] --out DIR`` draws the radar. The
chapter's toy Model A and Model B ship as :func:`example_profile_path("model_a")
<credrank.audit.profile.example_profile_path>` and ``"model_b"``.
"""

from credrank.audit.profile import (
    DIMENSIONS,
    EXAMPLE_PROFILES,
    GATE_OPS,
    NOT_MEASURED,
    STAGE_DEFAULTS,
    STAGES,
    AuditInputError,
    Entry,
    Gate,
    GateResult,
    TrustProfile,
    audit_passed,
    check_gates,
    example_profile_path,
    gate_document,
    load_profile,
    normalise,
    parse_profile,
    profile_document,
    profile_to_dict,
    profile_to_json,
    profile_to_toml,
    write_profile,
)
from credrank.audit.radar import (
    CAVEATS,
    RadarFigure,
    RadarSeries,
    adjacent_product_sum,
    draw_radar,
    normalised_area,
    radar_area,
    radar_document,
    radar_runs,
    radar_segments,
    radar_series,
    relative_area_difference,
    scale_mismatches,
)
from credrank.audit.report import render_html, render_markdown, write_report

__all__ = [
    "CAVEATS",
    "DIMENSIONS",
    "EXAMPLE_PROFILES",
    "GATE_OPS",
    "NOT_MEASURED",
    "STAGES",
    "STAGE_DEFAULTS",
    "AuditInputError",
    "Entry",
    "Gate",
    "GateResult",
    "RadarFigure",
    "RadarSeries",
    "TrustProfile",
    "adjacent_product_sum",
    "audit_passed",
    "check_gates",
    "draw_radar",
    "example_profile_path",
    "gate_document",
    "load_profile",
    "normalise",
    "normalised_area",
    "parse_profile",
    "profile_document",
    "profile_to_dict",
    "profile_to_json",
    "profile_to_toml",
    "radar_area",
    "radar_document",
    "radar_runs",
    "radar_segments",
    "radar_series",
    "relative_area_difference",
    "render_html",
    "render_markdown",
    "scale_mismatches",
    "write_profile",
    "write_report",
]
