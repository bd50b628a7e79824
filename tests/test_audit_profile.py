"""The trust profile of chapter 35.1: validation, normalisation, gates, TOML/JSON round trips."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from credrank.audit import (
    DIMENSIONS,
    STAGE_DEFAULTS,
    AuditInputError,
    TrustProfile,
    audit_passed,
    check_gates,
    example_profile_path,
    load_profile,
    normalise,
    parse_profile,
    profile_document,
    profile_to_json,
    profile_to_toml,
    render_html,
    render_markdown,
    write_profile,
    write_report,
)

TOY_A = (0.80, 0.30, 0.75, 0.70, 0.85, 0.60)


def _measured(dim: str, value: float = 0.5, **extra: object) -> dict[str, object]:
    row: dict[str, object] = {"dimension": dim, "metric": "m", "unit": "fraction",
                              "judge": "exact match", "denominator": "300 questions",
                              "value": value, "scale": [0.0, 1.0], "higher_is_better": True}
    row.update(extra)
    return row


def _data(**overrides: dict[str, object]) -> dict[str, object]:
    """A valid profile dict; ``overrides[dim]`` replaces that dimension's entry."""
    entries = [overrides.get(d, _measured(d)) for d in DIMENSIONS]
    return {"name": "t", "entry": entries}


def _write(tmp_path: Path, text: str, name: str = "p.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- examples and defaults


def test_examples_load_in_fixed_order_with_figure_35_1_stages() -> None:
    a = load_profile(example_profile_path("model_a"))
    b = load_profile(example_profile_path("model_b"))
    assert tuple(e.dimension for e in a.entries) == DIMENSIONS
    assert a.normalised == pytest.approx(TOY_A)
    assert b.normalised == pytest.approx((0.65,) * 6)
    assert {e.dimension: e.stages for e in a.entries} == STAGE_DEFAULTS
    assert STAGE_DEFAULTS["robustness"] == ("retrieval",)
    assert STAGE_DEFAULTS["transparency"] == ("generation",)
    assert STAGE_DEFAULTS["accountability"] == ("checking",)


def test_entries_any_order_held_in_fixed_order_and_stage_override() -> None:
    data = _data(privacy=_measured("privacy", stages=["generation", "retrieval"]))
    data["entry"] = list(reversed(data["entry"]))  # type: ignore[arg-type]
    profile = parse_profile(data, "x.toml")
    assert tuple(e.dimension for e in profile.entries) == DIMENSIONS
    assert profile.entry("privacy").stages == ("retrieval", "generation")
    assert profile.entry("fairness").stages == ("generation",)


# ---------------------------------------------------------------- normalisation


def test_normalise_linear_and_flipped_when_lower_is_better() -> None:
    assert normalise(12.0, (0.0, 20.0), True) == pytest.approx(0.6)
    assert normalise(12.0, (0.0, 20.0), False) == pytest.approx(0.4)
    assert normalise(0.0, (0.0, 20.0), False) == 1.0
    # a scale whose span overflows: r was 0 (hi − lo = inf)
    assert normalise(0.8, (-1.7e308, 1.7e308), False) == pytest.approx(0.5)
    assert normalise(1.7e308, (-1.7e308, 1.7e308), True) == 1.0
    profile = parse_profile(_data(robustness=_measured(
        "robustness", 0.02, scale=[0.0, 0.1], higher_is_better=False,
        interval=[0.01, 0.05])))
    entry = profile.entry("robustness")
    assert entry.normalised == pytest.approx(0.8)
    assert entry.normalised_interval == pytest.approx((0.5, 0.9))
    with pytest.raises(ValueError, match="scale"):
        normalise(0.5, (1.0, 1.0), True)
    with pytest.raises(ValueError, match="value"):
        normalise(math.nan, (0.0, 1.0), True)


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize(("entry", "match"), [
    (_measured("robustness", 1.5), r"entry\[0\]\.value: expected a number in the declared "
                                   r"scale \[0, 1\], got 1\.5"),
    (_measured("robustness", math.nan), r"entry\[0\]\.value: expected a finite number, got nan"),
    (_measured("robustness", math.inf), "expected a finite number, got inf"),
    (_measured("robustness", interval=[0.6, 0.9]), r"entry\[0\]\.interval: expected an "
                                                    r"interval containing the value 0\.5, "
                                                    r"got \[0\.6, 0\.9\]$"),
    (_measured("robustness", interval=[0.6, 0.4]), r"entry\[0\]\.interval: expected \[lo, hi\] "
                                                    r"with lo ≤ hi"),
    (_measured("robustness", interval=[-0.5, 0.9]), "inside the declared scale"),
    (_measured("robustness", scale=[1.0, 0.0]), r"entry\[0\]\.scale: expected \[min, max\] with "
                                                r"min < max"),
    (_measured("robustness", stages=["ranking"]),
     r"entry\[0\]\.stages\[0\]: expected one of retrieval, generation, checking, got 'ranking'"),
    (_measured("robustness", stages=["retrieval", "retrieval"]),
     r"entry\[0\]\.stages\[1\]: expected distinct items"),
    (_measured("robustness", value=True), r"entry\[0\]\.value: expected a finite number, got "
                                          r"True"),
    (_measured("robustness", higher_is_better=1), r"entry\[0\]\.higher_is_better: expected true "
                                                  r"or false, got 1"),
    (_measured("robustness", colour="red"), r"entry\[0\]\.colour: expected one of the known "
                                            r"keys \(dimension, stages"),
    ({k: v for k, v in _measured("robustness").items() if k != "judge"},
     r"entry\[0\]\.judge: expected a judge .*got nothing \(the key is missing\)"),
    ({"dimension": "robustness", "status": "not measured"},
     r"entry\[0\]\.reason: expected a non-empty string .*got nothing \(the key is missing\)"),
    ({"dimension": "robustness", "status": "not measured", "reason": "later", "value": 0},
     r"entry\[0\]\.value: expected no value in a 'not measured' entry"),
    ({"dimension": "robustness", "status": "maybe"},
     r"entry\[0\]\.status: expected one of measured, not measured, got 'maybe'"),
])
def test_bad_entries_name_file_entry_and_key(entry: dict[str, object], match: str) -> None:
    with pytest.raises(AuditInputError, match=match) as info:
        parse_profile(_data(robustness=entry), "bad.toml")
    assert str(info.value).startswith("bad.toml: ")


def test_unknown_duplicate_and_missing_dimensions() -> None:
    data = _data()
    data["entry"].append(_measured("helpfulness"))  # type: ignore[attr-defined]
    with pytest.raises(AuditInputError, match=r"entry\[6\]\.dimension: expected one of "
                                              r"robustness, .*, got 'helpfulness'"):
        parse_profile(data, "bad.toml")
    data = _data()
    data["entry"].append(_measured("privacy"))  # type: ignore[attr-defined]
    with pytest.raises(AuditInputError, match=r"entry\[6\]\.dimension: expected each "
                                              r"dimension once \(already in entry\[1\]\), "
                                              r"got 'privacy'"):
        parse_profile(data, "bad.toml")
    data = _data()
    data["entry"] = data["entry"][:5]  # type: ignore[index]
    with pytest.raises(AuditInputError, match=r"missing dimension.*accountability"):
        parse_profile(data, "bad.toml")
    with pytest.raises(AuditInputError, match=r"^bad\.toml: value: expected one of the known "
                                              r"keys \(name, description, entry, gate\)"):
        parse_profile({**_data(), "value": 1}, "bad.toml")


@pytest.mark.parametrize(("gate", "match"), [
    ({"name": "g", "dimension": "speed", "op": ">=", "threshold": 1, "reason": "r"},
     r"gate\[0\]\.dimension: expected one of robustness, .*, got 'speed'"),
    ({"name": "g", "dimension": "privacy", "op": "=>", "threshold": 1, "reason": "r"},
     r"gate\[0\]\.op: expected one of <=, >=, ==, <, >, got '=>'"),
    ({"name": "g", "dimension": "privacy", "op": ">=", "threshold": math.nan, "reason": "r"},
     r"gate\[0\]\.threshold: expected a finite number, got nan"),
    ({"name": "g", "dimension": "privacy", "op": ">=", "threshold": 1},
     r"gate\[0\]\.reason: expected a non-empty string, got nothing \(the key is missing\)"),
])
def test_bad_gates(gate: dict[str, object], match: str) -> None:
    with pytest.raises(AuditInputError, match=match):
        parse_profile({**_data(), "gate": [gate]}, "bad.toml")


def test_repeated_gate_name() -> None:
    gate = {"name": "g", "dimension": "privacy", "op": ">=", "threshold": 0.1, "reason": "r"}
    with pytest.raises(AuditInputError, match=r"gate\[1\]\.name: expected a unique gate name "
                                              r"\(already gate\[0\]\), got 'g'"):
        parse_profile({**_data(), "gate": [gate, gate]}, "bad.toml")


def test_file_errors(tmp_path: Path) -> None:
    with pytest.raises(AuditInputError, match=r"nope.toml: the trust profile does not exist"):
        load_profile(tmp_path / "nope.toml")
    with pytest.raises(AuditInputError, match=r"p.toml: expected TOML"):
        load_profile(_write(tmp_path, "name = \n"))
    with pytest.raises(AuditInputError, match=r"p.json: column 2: expected JSON"):
        load_profile(_write(tmp_path, "{", "p.json"))
    doc = json.dumps(_data()).replace('"value": 0.5', '"value": NaN', 1)
    with pytest.raises(AuditInputError,
                       match=r"p\.json: column \d+: expected a finite number, got NaN"):
        load_profile(_write(tmp_path, doc, "p.json"))
    toml = profile_to_toml(parse_profile(_data())).replace("value = 0.5", "value = nan", 1)
    with pytest.raises(AuditInputError, match=r"p.toml: entry\[0\]\.value: "
                                              r"expected a finite number, got nan"):
        load_profile(_write(tmp_path, toml))


def test_profile_constructed_in_code_must_hold_fixed_order() -> None:
    good = parse_profile(_data())
    with pytest.raises(AuditInputError, match="expected the six dimensions"):
        TrustProfile(name="x", description="", entries=tuple(reversed(good.entries)))


# ---------------------------------------------------------------- gates


def _gate(dim: str, op: str, threshold: float, name: str = "g") -> dict[str, object]:
    return {"name": name, "dimension": dim, "op": op, "threshold": threshold, "reason": "r"}


@pytest.mark.parametrize(("op", "threshold", "passed"), [
    (">=", 0.5, True), (">", 0.5, False), ("<=", 0.5, True), ("<", 0.5, False),
    ("==", 0.5, True), ("==", 0.51, False), (">=", 0.9, False),
])
def test_gate_ops_on_raw_value(op: str, threshold: float, passed: bool) -> None:
    profile = parse_profile({**_data(), "gate": [_gate("privacy", op, threshold)]})
    [result] = check_gates(profile)
    assert result.passed is passed
    assert result.outcome == ("pass" if passed else "fail")
    assert result.value == 0.5
    assert audit_passed([result]) is passed


@pytest.mark.parametrize(("value", "passed"), [(0.3000000001, True), (0.29999999, False)])
def test_a_gate_explanation_never_rounds_its_value_onto_the_threshold(value: float,
                                                                      passed: bool) -> None:
    """``:g`` printed "privacy = 0.3; required > 0.3" beside PASS (and beside FAIL)."""
    from credrank.audit.report import render_markdown

    profile = parse_profile({**_data(privacy=_measured("privacy", value)),
                             "gate": [_gate("privacy", ">", 0.3)]})
    [result] = check_gates(profile)
    assert result.passed is passed
    assert result.detail == f"privacy = {value!r} fraction; required > 0.3"  # not 0.3 > 0.3
    assert f"| {value!r} |" in render_markdown(profile)


def test_gate_uses_raw_value_not_normalised() -> None:
    entry = _measured("privacy", 2.0, scale=[0.0, 10.0], higher_is_better=False)
    profile = parse_profile({**_data(privacy=entry), "gate": [_gate("privacy", "<=", 2.0)]})
    [result] = check_gates(profile)
    assert result.passed and result.value == 2.0
    assert profile.entry("privacy").normalised == pytest.approx(0.8)


def test_gate_on_unmeasured_dimension_fails_as_not_measured() -> None:
    missing = {"dimension": "privacy", "status": "not measured", "reason": "no leakage set"}
    profile = parse_profile({**_data(privacy=missing),
                             "gate": [_gate("privacy", ">=", 0.0, "floor"),
                                      _gate("factuality", ">=", 0.1, "fact")]})
    results = check_gates(profile)
    assert [r.outcome for r in results] == ["not measured", "pass"]
    assert not results[0].passed and results[0].value is None
    assert results[0].label == "FAIL (not measured)"
    assert "no leakage set" in results[0].detail
    assert not audit_passed(results)
    assert profile.entry("privacy").value is None
    assert profile.entry("privacy").normalised is None


def test_one_failed_gate_fails_whatever_the_other_scores() -> None:
    data = _data(**{d: _measured(d, 1.0) for d in DIMENSIONS if d != "privacy"},
                 privacy=_measured("privacy", 0.3))
    profile = parse_profile({**data, "gate": [_gate("privacy", ">=", 0.5)]})
    assert not audit_passed(check_gates(profile))
    assert audit_passed([])


def test_example_gates() -> None:
    a = load_profile(example_profile_path("model_a"))
    b = load_profile(example_profile_path("model_b"))
    assert not audit_passed(check_gates(a))
    assert audit_passed(check_gates(b))
    with pytest.raises(AuditInputError, match="expected one of model_a, model_b"):
        example_profile_path("model_c")


# ---------------------------------------------------------------- round trips


def _rich_profile() -> TrustProfile:
    data = _data(
        robustness=_measured("robustness", 12.0, scale=[0, 20], higher_is_better=False,
                             interval=[10, 14.5], command='credrank bench "x"\\y',
                             data="tests/data/\u00e9\u7f16.jsonl", settings="k=5\nseed=1",
                             stages=["retrieval", "generation"]),
        privacy={"dimension": "privacy", "status": "not measured",
                 "reason": 'no leakage set "yet" \t\x7f', "metric": "refusal rate",
                 "scale": [0.0, 1.0], "higher_is_better": True})
    return parse_profile({**data, "description": "a \"quoted\" <b>profile</b>",
                          "gate": [_gate("privacy", ">=", 0.9, "floor"),
                                   _gate("robustness", "<", 15, "errors")]}, "rich")


def test_toml_round_trip(tmp_path: Path) -> None:
    first = _rich_profile()
    path = write_profile(first, tmp_path / "p.toml")
    second = load_profile(path)
    assert second == first
    third = load_profile(write_profile(second, tmp_path / "q.toml"))
    assert third == first
    assert path.read_text(encoding="utf-8") == (tmp_path / "q.toml").read_text(encoding="utf-8")
    for name in ("model_a", "model_b"):
        example = load_profile(example_profile_path(name))
        assert load_profile(write_profile(example, tmp_path / f"{name}.toml")) == example


def test_json_round_trip_and_document(tmp_path: Path) -> None:
    first = _rich_profile()
    assert load_profile(write_profile(first, tmp_path / "p.json")) == first
    assert json.loads(profile_to_json(first))["entry"][1]["status"] == "not measured"
    doc = profile_document(first)
    assert json.loads(json.dumps(doc, allow_nan=False)) == doc
    assert doc["entries"][1]["value"] is None and doc["entries"][1]["normalised"] is None
    assert doc["entries"][0]["normalised"] == pytest.approx(0.4)


# ---------------------------------------------------------------- report


def test_report_markdown_and_html(tmp_path: Path) -> None:
    from credrank.audit import draw_radar

    profile = _rich_profile()
    fig = draw_radar(profile, tmp_path)
    md_path, html_path = write_report(profile, tmp_path, images=[fig.png])
    md = md_path.read_text(encoding="utf-8")
    page = html_path.read_text(encoding="utf-8")
    # gates first, above the radar and the dimensions
    assert md.index("## Hard gates") < md.index("## Radar") < md.index("## Dimensions")
    assert "**FAIL (not measured)** | floor" in md and "**PASS** | errors" in md
    assert "Audit: FAIL" in md
    assert "not measured — no leakage set" in md
    assert "area not defined" in md
    assert "![radar](radar.png)" in md
    for fact in ("300 questions", "exact match", "[10, 14.5]", "[0, 20], lower is better",
                 "retrieval, generation", 'credrank bench "x"', "seed=1"):
        assert fact in md
    # HTML: self-contained, escaped, gates before everything else
    assert 'src="data:image/png;base64,' in page
    assert "<b>profile</b>" not in page and "&lt;b&gt;profile&lt;/b&gt;" in page
    assert "&quot;quoted&quot;" in page
    assert page.index('id="gates"') < page.index('id="radar"') < page.index('id="dimensions"')
    assert "FAIL (not measured)" in page
    assert render_markdown(profile) == render_markdown(profile)
    assert "<img" not in render_html(profile)


def test_report_markdown_escapes_what_markdown_would_read_as_markup() -> None:
    """A description opening with ``#`` became a heading of report.md, and a config file
    named with a backtick broke the ``Profile:`` code span (the HTML report escaped both)."""
    from credrank.audit.report import _code, _md

    assert _md("# not a heading") == "\\# not a heading"
    assert _md("1. not a list") == "\\1. not a list" and _md("0.48 share") == "0.48 share"
    assert _md("a *b* _c_ top_k [x](y) | <b>") == "a \\*b\\* \\_c_ top_k [x]\\(y) \\| &lt;b>"
    assert _code("inj`x.toml") == "``inj`x.toml``" and _code("a.toml") == "`a.toml`"


def test_a_value_without_a_gate_near_it_reads_short_in_the_report() -> None:
    """Only a gate's explanation needs the digits that decide it: a report's values and
    intervals read at six significant digits (they printed 0.48333333333333334)."""
    from credrank.audit.report import render_markdown

    profile = parse_profile({**_data(privacy=_measured("privacy", 29 / 60)),
                             "gate": [_gate("privacy", "<", 0.9)]})
    text = render_markdown(profile)
    assert "0.483333" in text and "0.48333333" not in text
