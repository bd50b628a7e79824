"""``credrank audit --index --config --out`` end to end on the demo corpus (hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.datasets.demo import build_demo_index

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
CRAM = DATA / "cram" / "cram_nq_1000_reconstructed.jsonl"
runner = CliRunner()

CONFIG = """
name = "demo, current priors"
[system]
priors = "current"
top_k = 5
fetch_k = 15
[queries]
path = "demo:queries.jsonl"
qrels = "demo:qrels.tsv"
harmful = "demo:adversarial.tsv"
[dimensions.robustness]
{robustness}
[dimensions.privacy]
measure = "pii"
[dimensions.fairness]
measure = "exposure"
[dimensions.transparency]
measure = "explanations"
[dimensions.factuality]
measure = "harmful"
k = 5
[dimensions.accountability]
measure = "traceability"
[[gate]]
name = "no-pii"
dimension = "privacy"
op = "=="
threshold = 0
reason = "hard"
[[gate]]
name = "harm-budget"
dimension = "factuality"
op = "<="
threshold = {budget}
reason = "declared budget"
"""
NOT_MEASURED = 'measure = "not measured"\nreason = "no stress data in this test"'


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    return build_demo_index(tmp_path_factory.mktemp("audit") / "idx", "hashing")


def write(tmp_path: Path, budget: float = 0.05, robustness: str = NOT_MEASURED) -> Path:
    path = tmp_path / "audit.toml"
    path.write_text(CONFIG.format(budget=budget, robustness=robustness), encoding="utf-8")
    return path


def test_audit_writes_profile_radar_report_and_fails_on_a_gate(index, tmp_path):
    out = tmp_path / "out"
    res = runner.invoke(app, ["audit", "--index", str(index), "--config",
                              str(write(tmp_path, budget=0.0)), "--out", str(out), "--json"])
    doc = json.loads(res.stdout)
    gates = {g["name"]: g["outcome"] for g in doc["gates"]}
    harmful = doc["profile"]["entries"][4]
    assert harmful["dimension"] == "factuality" and harmful["value"] > 0  # hashing ranks some
    assert gates == {"no-pii": "pass", "harm-budget": "fail"}
    assert res.exit_code == 1 and doc["passed"] is False
    for name in ("profile.toml", "profile.json", "gates.json", "measurements.json",
                 "radar.png", "radar.svg", "report.md", "report.html"):
        assert (out / name).is_file(), name
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "data:image/png;base64," in html and "not measured" in html
    md = (out / "report.md").read_text(encoding="utf-8")
    assert "no stress data in this test" in md and "harm-budget" in md
    # robustness is a gap, not 0
    assert doc["profile"]["entries"][0]["value"] is None
    measurements = json.loads((out / "measurements.json").read_text(encoding="utf-8"))
    assert measurements["robustness"] is None
    assert measurements["factuality"]["reads_labels"] is True
    # the written profile is a profile a person can re-check: same verdict
    again = runner.invoke(app, ["audit", "check", str(out / "profile.toml")])
    assert again.exit_code == 1 and "harm-budget" in again.stdout


def test_audit_passes_when_every_gate_holds(index, tmp_path):
    res = runner.invoke(app, ["audit", "--index", str(index), "--config",
                              str(write(tmp_path, budget=1.0)), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "audit: PASS" in res.stdout


def test_audit_bad_input(index, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[queries]\npath = "q.jsonl"\n[dimensions.honesty]\nmeasure = "pii"\n')
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(bad), "--out",
                              str(tmp_path / "o")])
    assert res.exit_code == 2 and "bad.toml" in res.stderr and "honesty" in res.stderr
    res = runner.invoke(app, ["audit", "--index", str(index)])
    assert res.exit_code == 2 and "--config, --out" in res.stderr
    res = runner.invoke(app, ["audit", "--index", str(index), "check", "model_a"])
    assert res.exit_code == 2 and "without the 'check'" in res.stderr
    assert runner.invoke(app, ["audit"]).exit_code == 0  # help


@pytest.mark.slow
@pytest.mark.skipif(not CRAM.is_file(), reason=f"CrAM NQ data absent ({CRAM})")
def test_audit_robustness_from_the_stress_test(index, tmp_path):
    spec = (f'measure = "stress"\nsource = "cram"\npath = "{CRAM}"\nlimit = 8\n'
            'embedder = "hashing"')
    out = tmp_path / "out"
    res = runner.invoke(app, ["audit", "--index", str(index), "--config",
                              str(write(tmp_path, budget=1.0, robustness=spec)), "--out",
                              str(out), "--json"])
    assert res.exit_code == 0, res.output
    entry = json.loads(res.stdout)["profile"]["entries"][0]
    assert entry["dimension"] == "robustness" and 0.0 <= entry["value"] <= 1.0
    assert entry["denominator"] == "8 questions"
    assert "stress-cram" in entry["command"] and "--limit 8" in entry["command"]


def test_audit_of_a_pipeline_with_a_selector(index, tmp_path):
    config = write(tmp_path, budget=1.0).read_text(encoding="utf-8").replace(
        "fetch_k = 15\n", 'fetch_k = 15\nselect = "exposure"\n'
        'select_params = {group_column = "source_type", rule = "proportional"}\n', 1)
    path = tmp_path / "select.toml"
    path.write_text(config, encoding="utf-8")
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(path), "--out",
                              str(tmp_path / "o"), "--json"])
    assert res.exit_code == 0, res.output
    entry = json.loads(res.stdout)["profile"]["entries"][2]
    assert "select=exposure" in entry["settings"] and entry["value"] is not None
    path.write_text(config.replace('rule = "proportional"', 'rule = "lottery"'),
                    encoding="utf-8")
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(path), "--out",
                              str(tmp_path / "o2")])
    assert res.exit_code == 2 and "rule" in res.stderr


def test_robustness_options_are_declared_and_checked_when_read(tmp_path):
    from credrank.audit.profile import AuditInputError
    from credrank.audit.robustness import stress_robustness
    from credrank.audit.run import load_config

    for spec, expected in [
        ('measure = "stress"\npath = "x.jsonl"\ncount = [1]\n',
         "dimensions.robustness.count: expected an integer in [1, 100], got a list"),
        ('measure = "stress"\npath = "x.jsonl"\nsource = "news"\n',
         "dimensions.robustness.source: expected one of cram, newspolluted, poisonedrag"),
        ('measure = "stress"\npath = "x.jsonl"\nlimt = 8\n',
         "dimensions.robustness.limt: expected one of the known keys"),
        ('measure = "stress"\n', "dimensions.robustness.path: expected the stress-test data"),
    ]:
        path = write(tmp_path, robustness=spec)
        with pytest.raises(AuditInputError) as info:
            load_config(path)
        assert str(info.value).startswith(f"{path}: ") and expected in str(info.value)
    with pytest.raises(AuditInputError, match=r"^dimensions\.robustness\.count: expected"):
        stress_robustness({"measure": "stress", "path": "x.jsonl", "count": 0, "base": "."})
