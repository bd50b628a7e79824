"""``credrank audit check`` and ``credrank audit radar`` (chapter 35.1)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from credrank.audit import example_profile_path, load_profile, profile_to_toml
from credrank.cli.audit import app as audit_app


def _app() -> typer.Typer:
    root = typer.Typer()
    root.add_typer(audit_app, name="audit")
    return root


def _invoke(*args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(_app(), ["audit", *args])


def _broken(tmp_path: Path, old: str, new: str) -> Path:
    text = profile_to_toml(load_profile(example_profile_path("model_b")))
    assert old in text
    path = tmp_path / "bad.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


def test_check_fails_on_gate_exit_1() -> None:
    result = _invoke("check", "model_a")
    assert result.exit_code == 1, result.output
    assert "audit: FAIL" in result.output
    assert "FAIL" in result.output and "privacy-floor" in result.output
    assert "privacy = 0.3" in result.output


def test_check_passes_exit_0() -> None:
    result = _invoke("check", str(example_profile_path("model_b")))
    assert result.exit_code == 0, result.output
    assert "audit: PASS" in result.output


def test_check_json_is_pure_data() -> None:
    result = _invoke("check", "model_a", "--json")
    assert result.exit_code == 1
    doc = json.loads(result.stdout)
    assert doc["credrank_audit_check"] == 1 and doc["passed"] is False
    [gate] = doc["gates"]
    assert gate["outcome"] == "fail" and gate["value"] == pytest.approx(0.3)
    assert [e["dimension"] for e in doc["profile"]["entries"]][:2] == ["robustness", "privacy"]


def test_check_gate_on_unmeasured_dimension(tmp_path: Path) -> None:
    text = profile_to_toml(load_profile(example_profile_path("model_b")))
    head, _, rest = text.partition('dimension = "privacy"')
    _, sep, tail = rest.partition("\n\n")
    path = tmp_path / "p.toml"
    path.write_text(head + 'dimension = "privacy"\nstatus = "not measured"\n'
                    'reason = "no leakage set"' + sep + tail, encoding="utf-8")
    result = _invoke("check", str(path))
    assert result.exit_code == 1, result.output
    assert "FAIL (not measured)" in result.output
    assert "privacy: not measured — no leakage set" in result.output


@pytest.mark.parametrize(("old", "new", "match"), [
    ("value = 0.65", "value = 1.65", "entry[0].value: expected a number in the declared scale"),
    ("value = 0.65", "value = nan", "entry[0].value: expected a finite number, got nan"),
    ('dimension = "fairness"', 'dimension = "speed"', "entry[2].dimension: expected one of"),
    ('op = ">="', 'op = "=>"', "gate[0].op: expected one of"),
])
def test_check_bad_input_exit_2(tmp_path: Path, old: str, new: str, match: str) -> None:
    path = _broken(tmp_path, old, new)
    result = _invoke("check", str(path))
    assert result.exit_code == 2, result.output
    message = " ".join(result.stderr.split())
    assert "error:" in message and "bad.toml" in message and match in message
    assert result.stdout == ""


def test_check_missing_file_exit_2(tmp_path: Path) -> None:
    result = _invoke("check", str(tmp_path / "none.toml"))
    assert result.exit_code == 2
    assert "none.toml: the trust profile does not exist" in " ".join(result.stderr.split())


def test_a_missing_profile_lists_the_shipped_examples(tmp_path: Path) -> None:
    result = _invoke("check", "model_c")
    assert result.exit_code == 2
    assert "or a shipped example: model_a, model_b" in " ".join(result.stderr.split())


def test_radar_out_a_file_names_the_flag(tmp_path: Path) -> None:
    """It said "afile: cannot write the radar: [Errno 17] File exists"; the run says
    "--out …: expected a folder"."""
    afile = tmp_path / "afile"
    afile.write_text("", encoding="utf-8")
    result = _invoke("radar", "model_a", "--out", str(afile))
    assert result.exit_code == 2
    assert f"--out {afile}: expected a folder (for radar.png and radar.svg), got a file" in \
        " ".join(result.stderr.split())


def test_audit_help_says_what_runs_and_the_exit_status() -> None:
    """It was only in the callback's docstring, which `credrank audit --help` does not
    show."""
    from credrank.cli import app

    result = CliRunner().invoke(app, ["audit", "--help"])
    text = " ".join(result.stdout.split())
    assert "credrank audit --index DIR --config AUDIT.toml --out DIR runs the audit" in text
    assert "1 when a hard gate fails" in text


def test_radar_writes_files_and_prints_areas(tmp_path: Path) -> None:
    result = _invoke("radar", "model_a", "--compare", "model_b", "--out", str(tmp_path))
    assert result.exit_code == 0, result.output
    assert (tmp_path / "radar.png").exists() and (tmp_path / "radar.svg").exists()
    out = result.output
    assert "Model A: area 1.115007707" in out and "normalised 0.429166667" in out
    assert "Model B: area 1.097687199" in out and "normalised 0.422500000" in out
    assert "1.577909%" in out
    assert "not a probability" in out and "gap" in out


def test_radar_json_and_gap(tmp_path: Path) -> None:
    text = profile_to_toml(load_profile(example_profile_path("model_a")))
    head, _, rest = text.partition('dimension = "privacy"')
    _, sep, tail = rest.partition("\n\n")
    path = tmp_path / "gap.toml"
    path.write_text(head + 'dimension = "privacy"\nstatus = "not measured"\nreason = "later"'
                    + sep + tail, encoding="utf-8")
    human = _invoke("radar", str(path), "--out", str(tmp_path / "h"))
    assert human.exit_code == 0, human.output
    assert "area not defined (gap: privacy not measured)" in human.output
    result = _invoke("radar", str(path), "--compare", "model_b", "--out", str(tmp_path / "j"),
                     "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["credrank_audit_radar"] == 1
    assert doc["series"][0]["area"] is None and doc["series"][0]["values"][1] is None
    assert doc["series"][1]["area"] == pytest.approx(1.097687199, abs=1e-9)
    assert doc["relative_area_difference"] is None
    assert doc["files"]["png"].endswith("radar.png")


def test_radar_compare_with_a_zero_area_baseline(tmp_path: Path) -> None:
    # a valid profile whose area is 0 (every value at the worse end) was a traceback:
    # "relative area difference: expected finite areas with a baseline > 0"
    text = profile_to_toml(load_profile(example_profile_path("model_a")))
    zero = tmp_path / "zero.toml"
    zero.write_text(re.sub(r"(?m)^value = .*$", "value = 0.0", text), encoding="utf-8")
    doc = _invoke("radar", "model_a", "--compare", str(zero), "--out", str(tmp_path / "z"),
                  "--json")
    assert doc.exit_code == 0, doc.output
    parsed = json.loads(doc.stdout)
    assert parsed["series"][1]["area"] == 0.0  # every other axis at r = 0
    assert parsed["relative_area_difference"] is None
    human = _invoke("radar", "model_a", "--compare", str(zero), "--out", str(tmp_path / "h"))
    assert human.exit_code == 0 and "relative area difference" in human.output
    assert "not defined" in human.output


def test_radar_bad_compare_exit_2(tmp_path: Path) -> None:
    bad = _broken(tmp_path, "value = 0.65", "value = -1")
    result = _invoke("radar", "model_a", "--compare", str(bad), "--out", str(tmp_path / "o"))
    assert result.exit_code == 2
    assert "bad.toml" in result.stderr
    assert not (tmp_path / "o" / "radar.png").exists()


def test_cli_audit_imports_nothing_heavy() -> None:
    code = ("import sys, credrank.audit, credrank.cli.audit; "
            "print(sorted(m for m in ('torch', 'transformers', 'matplotlib.pyplot') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_run_options_before_a_command_or_alone_are_refused(tmp_path: Path) -> None:
    """``audit --json check P`` printed text (--json did nothing) and ``audit --json`` alone
    printed the help with exit 0; an --out under a file failed after every measurement."""
    res = _invoke("--json", "check", "model_a")
    assert res.exit_code == 2 and "--json: options of the audit run itself" in res.output
    res = _invoke("--json")
    assert res.exit_code == 2 and "--json: an option of the audit run" in res.output
    a_file = tmp_path / "a_file"
    a_file.write_text("x", encoding="utf-8")
    config = tmp_path / "a.toml"
    config.write_text('[queries]\npath = "demo:queries.jsonl"\n', encoding="utf-8")
    res = _invoke("--index", str(tmp_path), "--config", str(config), "--out",
                  str(a_file / "sub"))
    assert res.exit_code == 2
    assert f"expected a folder that can be made, but {a_file} is a file" in res.output


def test_small_errors_say_what_came_and_which_flag(tmp_path: Path) -> None:
    """A reversed scale showed 'a list of 2 item(s)'; a --compare that does not exist was not
    named as --compare."""
    bad = _broken(tmp_path, "scale = [0.0, 1.0]", "scale = [1.0, 0.0]")
    result = _invoke("check", str(bad))
    assert result.exit_code == 2 and "scale: expected [min, max] with min < max, got [1, 0]" \
        in result.output
    missing = _invoke("radar", "model_a", "--compare", str(tmp_path / "nosuch.toml"), "--out",
                      str(tmp_path))
    assert missing.exit_code == 2 and "--compare " in missing.output
