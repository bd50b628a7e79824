"""The feasibility advisor (chapter 35.6) and the chapter's numbers (35.5, 35.6) as tests."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from fractions import Fraction
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from credrank.advise import (
    DEFER,
    METHODS,
    ProfileError,
    advice_document,
    advise_pool,
    advise_profile,
    bundled_profile_path,
    load_profile,
    parse_profile,
)
from credrank.advise.arithmetic import (
    conditional_share,
    cram_calibration_passes,
    cram_calibration_seconds,
    head_count,
    head_fraction,
    odds,
    ra_rag_calibration_answers,
    reweight_row,
    unselected_head_fraction,
)
from credrank.cli.advise import advise

PCT = 1e-6  # percentages exact to the chapter's six printed decimals

# ---------------------------------------------------------------- 35.5: attention arithmetic

ROW = [0.30, 0.20, 0.50]          # A, B, the rest
MULT = [0.8, 0.1, 1.0]


def test_full_row_shares_after_reweighting() -> None:
    row = reweight_row(ROW, MULT)
    assert row.denominator == pytest.approx(0.76)
    assert not row.fallback
    assert 100 * row.shares[0] == pytest.approx(31.578947, abs=PCT)
    assert 100 * row.shares[1] == pytest.approx(2.631579, abs=PCT)
    assert sum(row.shares) == pytest.approx(1.0)


def test_conditional_share_and_odds() -> None:
    assert 100 * conditional_share(ROW, [1.0, 1.0, 1.0], 0, [0, 1]) == pytest.approx(60.0)
    assert 100 * conditional_share(ROW, MULT, 0, [0, 1]) == pytest.approx(92.307692, abs=PCT)
    assert conditional_share(ROW, MULT, 0, [0, 1]) == pytest.approx(12 / 13)
    assert odds(0.30, 0.8, 0.20, 0.1) == Fraction(12, 1)


def test_reweighting_zero_denominator_keeps_row() -> None:
    row = reweight_row([0.6, 0.4], [0.0, 0.0])
    assert row.fallback and row.shares == (0.6, 0.4) and row.denominator == 0.0
    with pytest.raises(ValueError, match="zero"):
        conditional_share([0.6, 0.4], [0.0, 0.0], 0, [0, 1])
    with pytest.raises(ValueError, match="zero"):
        odds(0.3, 0.8, 0.2, 0.0)


@pytest.mark.parametrize(("masses", "mults", "match"), [
    ([0.3, 0.2], [0.8, 0.1], "sums to 1"),
    ([0.5, 0.5], [1.0], "equal lengths"),
    ([1.5, -0.5], [1.0, 1.0], "≥ 0"),
    ([0.5, 0.5], [1.0, -1.0], "≥ 0"),
])
def test_reweighting_rejects_bad_rows(masses: list[float], mults: list[float],
                                      match: str) -> None:
    with pytest.raises(ValueError, match=match):
        reweight_row(masses, mults)


def test_head_fractions() -> None:
    heads = head_count(32, 32)
    assert heads == 1024
    assert 100 * head_fraction(100, heads) == pytest.approx(9.765625, abs=PCT)
    assert 100 * head_fraction(300, heads) == pytest.approx(29.296875, abs=PCT)
    assert 100 * unselected_head_fraction(300, heads) == pytest.approx(70.703125, abs=PCT)
    assert 100 * unselected_head_fraction(100, heads) == pytest.approx(90.234375, abs=PCT)
    with pytest.raises(ValueError, match="at most"):
        head_fraction(1025, heads)


# ---------------------------------------------------------------- 35.6: cost arithmetic

def test_timed_cram_calibration_toy() -> None:
    passes = cram_calibration_passes(100, 1024)
    assert passes == 102_400
    assert cram_calibration_seconds(passes, 0.05) == pytest.approx(5_120)
    assert cram_calibration_seconds(passes, 0.05) / 60 == pytest.approx(85.333333, abs=PCT)
    with_baselines = cram_calibration_passes(100, 1024, baselines=True)
    assert with_baselines == 102_500
    assert cram_calibration_seconds(with_baselines, 0.05) == pytest.approx(5_125)
    assert cram_calibration_seconds(with_baselines, 0.05) / 60 == pytest.approx(85.416667,
                                                                                abs=PCT)
    assert cram_calibration_seconds(with_baselines, 0.05) < 1.5 * 3600


def test_ra_rag_calibration_answers() -> None:
    assert ra_rag_calibration_answers(1_000, 200) == 200_000
    with pytest.raises(ValueError, match="≥ 0"):
        ra_rag_calibration_answers(-1, 200)


# ---------------------------------------------------------------- the declared table

def test_table_is_declared_in_chapter_order_with_sections() -> None:
    assert [m.id for m in METHODS] == ["source_type_priors", "learned_page_credibility",
                                       "ra_rag", "cag", "cram", "freshness"]
    by_id = {m.id: m for m in METHODS}
    assert {p.key for p in by_id["ra_rag"].prerequisites} == {
        "stable_source_ids", "sources", "calibration_questions"}
    assert {p.key for p in by_id["cag"].prerequisites} == {
        "credible_annotations", "inference_annotations", "training_resources"}
    assert {p.key for p in by_id["cram"].prerequisites} == {
        "document_scorer", "misinformation_examples", "validation_examples", "attention_access"}
    assert all(m.section for m in METHODS)


# ---------------------------------------------------------------- the marketplace example

def _by_id(pool_advice):  # type: ignore[no-untyped-def]
    return {m.method.id: m for m in pool_advice.methods}


def test_marketplace_per_pool() -> None:
    profile = load_profile(bundled_profile_path("marketplace"))
    assert [p.name for p in profile.pools] == ["seller-listings", "reviews", "partner-launch"]
    listings, reviews, launch = advise_profile(profile)

    # Pool 1: identified sellers and regulators make RA-RAG a candidate (not "the best")
    assert "ra_rag" in listings.feasible and listings.branch == "candidates"
    assert "cag" not in listings.feasible and "cram" not in listings.feasible
    (cost,) = _by_id(listings)["ra_rag"].costs
    assert cost.value == 200_000 and "1,000 × 200" in cost.formula

    # Pool 2: anonymous reviews with usable annotated spam examples may support CAG
    assert reviews.feasible == ("cag",)
    missing = {x.key for x in _by_id(reviews)["ra_rag"].missing}
    assert "stable_source_ids" in missing

    # Pool 3: a same-week launch with neither resource and no CrAM inputs: defer
    assert launch.feasible == () and launch.branch == DEFER
    assert DEFER == "prerequisites missing: obtain evidence, restrict scope or defer"
    cram = _by_id(launch)["cram"]
    assert not cram.feasible and cram.costs == ()
    assert {x.key for x in cram.missing} == {
        "document_scorer", "misinformation_examples", "validation_examples", "attention_access"}
    # freshness is a separate requirement: feasible, yet it does not lift the defer branch
    assert _by_id(launch)["freshness"].feasible


def _marketplace_data() -> dict:
    return tomllib.loads(bundled_profile_path("marketplace").read_text(encoding="utf-8"))


def test_pool3_cram_only_if_its_inputs_exist() -> None:
    data = _marketplace_data()
    launch = data["pool"][2]
    launch.update(document_scorer=True, misinformation_examples=100, validation_examples=100,
                  attention_access=True)
    advice = advise_profile(parse_profile(data, "variant.toml"))[2]
    assert advice.feasible == ("cram",)
    costs = {c.name: c.value for c in _by_id(advice)["cram"].costs}
    assert costs["head-modified passes"] == 102_400
    assert costs["serial time (head-modified passes)"] == pytest.approx(5_120)
    assert costs["passes with baselines"] == 102_500
    assert costs["serial time (passes with baselines)"] == pytest.approx(5_125)
    assert 100 * costs["heads changed (100 selected)"] == pytest.approx(9.765625, abs=PCT)
    assert 100 * costs["heads changed (300 selected)"] == pytest.approx(29.296875, abs=PCT)


def test_missing_number_is_reported_not_guessed() -> None:
    profile = parse_profile({"pool": [{
        "name": "p", "document_scorer": True, "misinformation_examples": 10,
        "validation_examples": 10, "attention_access": True}]}, "x.toml")
    (advice,) = advise_profile(profile)
    (cost,) = _by_id(advice)["cram"].costs
    assert cost.value is None and "heads" in cost.note


def test_not_a_ranking_fixed_order() -> None:
    """Every resource present: every method is feasible, listed in the table's order."""
    pool = parse_profile({"pool": [{
        "name": "all", "provenance": True, "dates": True, "stable_source_ids": True,
        "sources": 3, "calibration_questions": 5, "labelled_pages": 40,
        "credible_annotations": True, "inference_annotations": True,
        "training_resources": True, "document_scorer": True, "misinformation_examples": 100,
        "validation_examples": 100, "attention_access": True}]}).pools[0]
    advice = advise_pool(pool)
    assert advice.feasible == ("source_type_priors", "learned_page_credibility", "ra_rag",
                               "cag", "cram")
    assert [m.method.id for m in advice.methods] == [m.id for m in METHODS]


def test_unstated_keys_default_to_absent() -> None:
    (advice,) = advise_profile(parse_profile({"pool": [{"name": "bare"}]}, "bare.toml"))
    assert advice.branch == DEFER
    missing = _by_id(advice)["ra_rag"].missing
    assert missing and not any(x.stated for x in missing)


# ---------------------------------------------------------------- bad input

def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "profile.toml"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(("text", "parts"), [
    ('[[pool]]\nname = "a"\nsource_ids = true\n', ["pool[0].source_ids",
                                                   "expected one of the known keys"]),
    ('[[pool]]\nname = "a"\nsources = "many"\n', ["pool[0].sources",
                                                  "expected an integer", "got 'many'"]),
    ('[[pool]]\nname = "a"\nattention_access = 1\n', ["pool[0].attention_access",
                                                      "expected true or false", "got 1"]),
    ('[[pool]]\nname = "a"\nsources = 1.5\n', ["pool[0].sources", "expected an integer"]),
    ('[[pool]]\ndates = true\n', ["pool[0].name", "expected a non-empty string",
                                  "the key is missing"]),
    ('[[pool]]\nname = "a"\n[[pool]]\nname = "b"\ncalibration_questions = -200\n',
     ["pool[1].calibration_questions", ">= 0", "-200"]),
    ('[[pool]]\nname = "a"\nseconds_per_pass = -0.05\n', ["pool[0].seconds_per_pass",
                                                          "> 0"]),
    ('[[pool]]\nname = "a"\nselected_heads = [100, 300]\n', ["pool[0].selected_heads",
                                                             "needs 'heads'"]),
    ('[[pool]]\nname = "a"\nheads = 64\nselected_heads = [100, 300]\n',
     ["pool[0].selected_heads", "at most heads = 64"]),
    ('[[pool]]\nname = "a"\nheads = 64\nselected_heads = [30, 10]\n',
     ["pool[0].selected_heads", "low ≤ high"]),
    # the item is named (it said "expected an integer >= 0 or a list of 1 to 2 item(s), got a
    # list of 1 item(s)", hiding the -1)
    ('[[pool]]\nname = "a"\nheads = 4\nselected_heads = [-1]\n',
     ["pool[0].selected_heads[0]: expected an integer >= 0, got -1"]),
    ('[[pool]]\nname = "a"\n[[pool]]\nname = "a"\n', ["pool[1].name", "repeated",
                                                       "already pool[0]"]),
    ('name = "x"\n', ["pool: expected a list of at least 1 item(s)", "the key is missing"]),
    ('sources = 3\n[[pool]]\nname = "a"\n', ["sources: expected one of the known keys"]),
    ('[[pool\n', ["expected TOML"]),
])
def test_bad_profiles_name_file_pool_and_key(tmp_path: Path, text: str,
                                             parts: list[str]) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    message = str(info.value)
    assert message.startswith(str(path))
    for part in parts:
        assert part in message, message


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match=r"absent\.toml: the profile does not exist"):
        load_profile(tmp_path / "absent.toml")


# ---------------------------------------------------------------- CLI

def _app() -> typer.Typer:
    app = typer.Typer()
    app.command()(advise)

    @app.command()
    def noop() -> None:  # a second command keeps "advise" a subcommand
        """Nothing."""

    return app


def test_cli_human() -> None:
    result = CliRunner().invoke(_app(), ["advise", str(bundled_profile_path("marketplace"))])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "pool seller-listings" in out and "pool partner-launch" in out
    assert "sources × questions = 1,000 × 200 = 200,000 source-query answers" in out
    assert DEFER in out
    assert "not a ranking" in out
    # fixed order inside the pool: priors listed before RA-RAG
    listings = out.split("pool seller-listings")[1].split("pool reviews")[0]
    assert listings.index("source-type priors") < listings.index("RA-RAG")


def test_cli_bundled_name_and_json() -> None:
    result = CliRunner().invoke(_app(), ["advise", "marketplace", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["credrank_advise"] == 1
    branches = {p["name"]: p["branch"] for p in doc["pools"]}
    assert branches == {"seller-listings": "candidates", "reviews": "candidates",
                        "partner-launch": DEFER}
    feasible = {p["name"]: p["feasible"] for p in doc["pools"]}
    assert feasible["seller-listings"] == ["source_type_priors", "ra_rag"]
    assert feasible["reviews"] == ["cag"]
    ra_rag = next(m for m in doc["pools"][0]["methods"] if m["id"] == "ra_rag")
    assert ra_rag["costs"][0]["value"] == 200_000
    # data all the way down: round-trips through json without custom types
    profile = load_profile(bundled_profile_path("marketplace"))
    assert json.loads(json.dumps(advice_document(profile, advise_profile(profile)))) == doc


def test_cli_cram_costs_printed(tmp_path: Path) -> None:
    path = _write(tmp_path, '[[pool]]\nname = "toy"\ndocument_scorer = true\n'
                            'misinformation_examples = 100\nvalidation_examples = 100\n'
                            'attention_access = true\nheads = 1024\nseconds_per_pass = 0.05\n'
                            'selected_heads = [100, 300]\n')
    result = CliRunner().invoke(_app(), ["advise", str(path)])
    assert result.exit_code == 0, result.output
    out = result.output
    assert "examples × heads = 100 × 1,024 = 102,400 passes" in out
    assert "102,400 × 0.05 s = 5,120 s" in out
    assert "examples × heads + examples = 100 × 1,024 + 100 = 102,500 passes" in out
    assert "102,500 × 0.05 s = 5,125 s" in out
    assert "85.333333 min" in out and "85.416667 min" in out
    assert "9.765625%" in out and "90.234375% unselected" in out
    assert "29.296875%" in out and "70.703125% unselected" in out


def test_cli_bad_profile_exits_2(tmp_path: Path) -> None:
    path = _write(tmp_path, '[[pool]]\nname = "a"\nsources = -3\n')
    result = CliRunner().invoke(_app(), ["advise", str(path)])
    assert result.exit_code == 2
    assert "pool[0].sources" in result.output and "got -3" in result.output


def test_advise_imports_nothing_heavy() -> None:
    code = ("import sys, credrank.advise, credrank.cli.advise; "
            "print(sorted(m for m in ('torch', 'numpy', 'transformers') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert "torch" not in done.stdout and "transformers" not in done.stdout


def test_cli_overflowing_cost_is_null_in_json_and_said_plainly_in_text(tmp_path: Path) -> None:
    """``seconds_per_pass = 1e308`` (accepted: finite, > 0) times 3,072 passes overflows: the
    JSON said ``"value": Infinity`` (not JSON) and the text ``= inf s (inf min …)``."""
    path = _write(tmp_path, '[[pool]]\nname = "p"\ndocument_scorer = true\n'
                            'misinformation_examples = 3\nvalidation_examples = 2\n'
                            'attention_access = true\nheads = 1024\nselected_heads = [1, 2]\n'
                            'seconds_per_pass = 1e308\n')

    def no_constant(name: str) -> None:
        raise AssertionError(f"not JSON: {name}")

    result = CliRunner().invoke(_app(), ["advise", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert "Infinity" not in result.output and "NaN" not in result.output
    doc = json.loads(result.output, parse_constant=no_constant)
    cram = next(m for m in doc["pools"][0]["methods"] if m["id"] == "cram")
    serial = [c for c in cram["costs"] if c["name"].startswith("serial time")]
    assert len(serial) == 2
    for cost in serial:
        assert cost["value"] is None and cost["unit"] == "s"
        assert cost["note"].startswith("more than 1.798e+308 s: the product exceeds")
    passes = next(c for c in cram["costs"] if c["unit"] == "passes")
    assert passes["value"] == 3 * 1024  # the finite costs are as they were
    text = CliRunner().invoke(_app(), ["advise", str(path)])
    assert text.exit_code == 0, text.output
    assert "inf s" not in text.output and "inf min" not in text.output
    assert "3,072 × 1e+308 s  (more than 1.798e+308 s: the product exceeds" in text.output
    # the library's advice too: no front door is handed an infinity to clean up
    from credrank.advise.methods import advise_profile
    from credrank.advise.pools import load_profile

    costs = [c for pa in advise_profile(load_profile(path)) for m in pa.methods
             for c in m.costs if c.name.startswith("serial time")]
    assert costs and all(c.value is None for c in costs)


def _cram_profile(tmp_path: Path, examples: int, heads: int, seconds: str) -> Path:
    return _write(tmp_path, '[[pool]]\nname = "p"\ndocument_scorer = true\n'
                            f'misinformation_examples = {examples}\nvalidation_examples = 2\n'
                            f'attention_access = true\nheads = {heads}\nselected_heads = [1]\n'
                            f'seconds_per_pass = {seconds}\n')


def test_cli_a_tiny_positive_cost_keeps_its_digits(tmp_path: Path) -> None:
    """``seconds_per_pass = 1e-9``: 21 passes printed ``= 0 s (0.000000 min …)``."""
    path = _cram_profile(tmp_path, 3, 7, "1e-9")
    result = CliRunner().invoke(_app(), ["advise", str(path)])
    assert result.exit_code == 0, result.output
    assert "21 × 1e-09 s = 2.1e-08 s  (3.5e-10 min of serial" in result.output
    assert "= 0 s" not in result.output and "0.000000 min" not in result.output
    # a head fraction too small for six decimals keeps its digits as well
    heads = 2 ** 62
    path = _cram_profile(tmp_path, 1, heads, "0.05")
    result = CliRunner().invoke(_app(), ["advise", str(path)])
    assert result.exit_code == 0, result.output
    assert f"1 / {heads:,} = 2.1684e-17% of heads  (2.1684e-17% changed" in result.output
    assert " 0.000000%" not in result.output and "(0.000000%" not in result.output


def test_cram_entry_names_cram_calibrate() -> None:
    """The CrAM entry said the head selection on calibration examples is not in credrank;
    ``credrank cram calibrate`` does it."""
    cram = next(m for m in METHODS if m.id == "cram")
    assert "credrank cram calibrate" in cram.credrank and "not in credrank" not in cram.credrank


def test_cli_counts_beyond_64_bits_are_null_with_the_exact_number(tmp_path: Path) -> None:
    """Products of two counts below 2**63 reach 38 digits: the JSON carried them as integers
    that most readers cannot hold. Now ``null``, the exact number in the note (the overflow
    policy of the float costs)."""
    big = 2 ** 63 - 1
    path = _write(tmp_path, '[[pool]]\nname = "p"\nstable_source_ids = true\n'
                            f'sources = {big}\ncalibration_questions = {big}\n'
                            f'document_scorer = true\nmisinformation_examples = {big}\n'
                            'validation_examples = 2\nattention_access = true\n'
                            f'heads = 2\nseconds_per_pass = 0.5\n')
    result = CliRunner().invoke(_app(), ["advise", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    costs = {c["name"]: c for m in doc["pools"][0]["methods"] for c in m["costs"]}
    answers = costs["calibration answers"]
    assert answers["value"] is None
    assert answers["note"].startswith(f"{big * big:,} source-query answers: 2**63 or more")
    passes = costs["head-modified passes"]
    assert passes["value"] is None and passes["note"].startswith(f"{big * 2:,} passes:")
    # the float costs derived from them are floats, and nothing above 2**63 is an integer
    assert costs["serial time (head-modified passes)"]["value"] == pytest.approx(big * 2 * 0.5)

    def ints(value: object) -> list[int]:
        if isinstance(value, dict):
            return [i for v in value.values() for i in ints(v)]
        if isinstance(value, list):
            return [i for v in value for i in ints(v)]
        return [value] if isinstance(value, int) and not isinstance(value, bool) else []
    assert max(ints(doc)) < 2 ** 63
    text = CliRunner().invoke(_app(), ["advise", str(path)])
    assert text.exit_code == 0, text.output
    assert (f"cost: calibration answers: sources × questions = {big:,} × {big:,}  "
            f"({big * big:,} source-query answers: 2**63 or more") in text.output


@pytest.mark.parametrize(("value", "ok"), [(2 ** 63 - 1, True), (2 ** 63, False),
                                           (-(2 ** 63), True), (-(2 ** 63) - 1, False)])
def test_profile_counts_are_below_2_to_the_63(value: int, ok: bool) -> None:
    """The documentation says counts below 2**63; 2**63 itself was accepted."""
    from credrank.core.schema import Integer, SchemaError

    if ok:
        assert Integer().check(value, "n") == value
    else:
        with pytest.raises(SchemaError, match=r"within ±2\*\*63"):
            Integer().check(value, "n")
    data = {"pool": [{"name": "p", "sources": value}]}
    if value >= 0:
        if ok:
            assert parse_profile(data, "p.toml").pools[0].sources == value
        else:
            with pytest.raises(ProfileError, match=r"pool\[0\]\.sources"):
                parse_profile(data, "p.toml")
