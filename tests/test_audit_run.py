"""``credrank audit --index --config --out`` end to end on the demo corpus (hashing embedder)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.demo_corpus import build_demo_index

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
    # said before any measurement (they failed after all of it, as OS errors)
    a_file = tmp_path / "a_file"
    a_file.write_text("x", encoding="utf-8")
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(write(tmp_path)),
                              "--out", str(a_file)])
    assert res.exit_code == 2 and f"--out {a_file}: expected a folder" in res.stderr
    gone = write(tmp_path)
    gone.write_text(gone.read_text(encoding="utf-8").replace("demo:queries.jsonl", "nope.jsonl"),
                    encoding="utf-8")
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(gone), "--out",
                              str(tmp_path / "o2")])
    assert res.exit_code == 2 and "queries: expected an existing queries file" in res.stderr
    res = runner.invoke(app, ["audit", "--index", str(index), "check", "model_a"])
    assert res.exit_code == 2 and "without the 'check'" in res.stderr
    assert runner.invoke(app, ["audit"]).exit_code == 0  # help


@pytest.mark.slow
@pytest.mark.skipif(not CRAM.is_file(), reason=f"CrAM NQ data absent ({CRAM})")
def test_audit_robustness_from_the_stress_test(index, tmp_path):
    from test_bench_json import _slice_jsonl

    # the file's first 30 questions: --limit 8 still finds 8 it can evaluate
    cram = _slice_jsonl(CRAM, tmp_path / "cram_nq.jsonl", 30)
    # no embedder: the stress data is embedded by the audited index's (hashing here; it
    # was MiniLM whatever the index, minutes of a stress test by default)
    spec = f'measure = "stress"\nsource = "cram"\npath = "{cram}"\nlimit = 8\n'
    out = tmp_path / "out"
    res = runner.invoke(app, ["audit", "--index", str(index), "--config",
                              str(write(tmp_path, budget=1.0, robustness=spec)), "--out",
                              str(out), "--json"])
    assert res.exit_code == 0, res.output
    entry = json.loads(res.stdout)["profile"]["entries"][0]
    assert entry["dimension"] == "robustness" and 0.0 <= entry["value"] <= 1.0
    assert entry["denominator"] == "8 questions"
    # the audited pipeline's row is reproduced by the audit, not by the bench's command (which
    # cannot add that row: it gives the table the row joins, said in settings)
    assert entry["command"].startswith("credrank audit --index ")
    assert "stress-cram" in entry["settings"] and "--limit 8" in entry["settings"]
    assert "--embedder hashing" in entry["settings"]
    # the audited pipeline's row, run with the stress bench's settings on its own corpus
    assert entry["settings"].startswith(
        "the audited pipeline as the stress bench's row 'audited pipeline': ")
    assert "embedder=hashing" in entry["settings"] and "pipeline=" not in entry["settings"]
    assert entry["measured_on"].startswith("the audited pipeline's stages (prior → combine")


def test_audit_of_a_pipeline_with_a_selector(index, tmp_path):
    config = write(tmp_path, budget=1.0).read_text(encoding="utf-8").replace(
        "fetch_k = 15\n", 'fetch_k = 15\nselect = "exposure"\n'
        'select_params = {group_column = "source_type", rule = "proportional"}\n', 1)
    path = tmp_path / "select.toml"
    path.write_text(config, encoding="utf-8")
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(path), "--out",
                              str(tmp_path / "o"), "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    entry = doc["profile"]["entries"][2]
    assert "→ exposure" in entry["settings"] and entry["value"] is not None
    # the spec as data in the document, not JSON inside the settings text
    assert "{" not in entry["settings"] and "measurements.json's pipeline" in entry["settings"]
    exposure = next(s for s in doc["pipeline"]["stages"] if s["stage"] == "exposure")
    assert exposure["group_column"] == "source_type"
    path.write_text(config.replace('rule = "proportional"', 'rule = "lottery"'),
                    encoding="utf-8")
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(path), "--out",
                              str(tmp_path / "o2")])
    assert res.exit_code == 2 and "rule" in res.stderr


def test_robustness_options_are_declared_and_checked_when_read(tmp_path):
    from credrank.audit.profile import AuditInputError
    from credrank.audit.run import load_config
    from credrank_bench.experiments.robustness import stress_robustness

    for spec, expected in [
        ('measure = "stress"\npath = "x.jsonl"\ncount = [1]\n',
         "dimensions.robustness.count: expected an integer in [1, 100], got a list"),
        ('measure = "stress"\npath = "x.jsonl"\nsource = "news"\n',
         "dimensions.robustness.source: expected one of cram, newspolluted, poisonedrag"),
        ('measure = "stress"\npath = "x.jsonl"\nlimt = 8\n',
         "dimensions.robustness.limt: expected one of the known keys"),
        ('measure = "stress"\n', "dimensions.robustness.path: expected the stress-test data"),
        # it failed after the audited queries ran, naming neither the file nor the key
        ('measure = "stress"\npath = "x.jsonl"\nembedder = "bogus"\n',
         "dimensions.robustness.embedder: expected one of minilm, hashing, got 'bogus'"),
    ]:
        path = write(tmp_path, robustness=spec)
        with pytest.raises(AuditInputError) as info:
            load_config(path)
        assert str(info.value).startswith(f"{path}: ") and expected in str(info.value)
    with pytest.raises(AuditInputError, match=r"^dimensions\.robustness\.count: expected"):
        stress_robustness({"measure": "stress", "path": "x.jsonl", "count": 0, "base": "."})


# ---------------------------------------------------------------- [system] as a pipeline spec

SHORTCUTS = "[system]\npriors = \"current\"\ntop_k = 5\nfetch_k = 15\n"
FRESH = {"top_k": 5, "fetch_k": 15, "stages": [
    {"stage": "prior", "priors": "current"},
    {"stage": "freshness", "half_life": "365d", "now": "2026-01-01",
     "undated": "penalty:0.5"}]}


def with_system(tmp_path: Path, system: str, name: str = "audit.toml") -> Path:
    """The test config with its ``[system]`` table replaced by ``system``."""
    text = write(tmp_path, budget=1.0).read_text(encoding="utf-8")
    assert SHORTCUTS in text
    path = tmp_path / name
    path.write_text(text.replace(SHORTCUTS, system, 1), encoding="utf-8")
    return path


def audit_json(index: Path, config: Path, out: Path) -> tuple[dict, dict]:
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(config),
                              "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    return (json.loads(res.stdout),
            json.loads((out / "measurements.json").read_text(encoding="utf-8")))


def values(doc: dict) -> list:
    return [e["value"] for e in doc["profile"]["entries"]]


def test_system_shortcuts_and_the_same_spec_audit_the_same(index, tmp_path):
    from credrank.pipeline.spec import PipelineSpec

    spec = PipelineSpec.of({"stage": "prior", "priors": "current"}, top_k=5, fetch_k=15)
    short, short_m = audit_json(index, write(tmp_path, budget=1.0), tmp_path / "a")
    inline = with_system(tmp_path, "[system.pipeline]\ntop_k = 5\nfetch_k = 15\n"
                                   "stages = [{stage = \"prior\", priors = \"current\"}]\n")
    spec_file = tmp_path / "specs" / "deployment.json"
    spec_file.parent.mkdir()
    spec_file.write_text(json.dumps({"pipeline": spec.to_dict(), "hits": []}),
                         encoding="utf-8")  # a whole search --json output replays its spec
    by_file = with_system(tmp_path, "[system]\npipeline = \"specs/deployment.json\"\n",
                          "file.toml")
    for config, out in ((inline, tmp_path / "b"), (by_file, tmp_path / "c")):
        doc, measured = audit_json(index, config, out)
        assert values(doc) == values(short)
        assert measured["pipeline"] == short_m["pipeline"] == spec.to_dict()
        assert doc["pipeline"] == spec.to_dict()  # the --json document holds it as data


def test_audit_of_a_pipeline_with_freshness(index, tmp_path):
    from credrank.pipeline.spec import PipelineSpec

    stages = ", ".join("{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in s.items()) + "}"
                       for s in FRESH["stages"])
    config = with_system(tmp_path, f"[system.pipeline]\ntop_k = 5\nfetch_k = 15\n"
                                   f"stages = [{stages}]\n")
    doc, measured = audit_json(index, config, tmp_path / "o")
    expected = PipelineSpec.from_dict(FRESH).to_dict()
    assert measured["pipeline"] == expected
    assert [s["stage"] for s in expected["stages"]] == ["prior", "freshness", "combine", "topk"]
    entries = {e["dimension"]: e for e in doc["profile"]["entries"]}
    assert "stages=prior → freshness → combine → topk" in entries["privacy"]["settings"]
    # every hit's breakdown reproduces its final score with the freshness factor in it
    assert entries["transparency"]["value"] == 1.0
    _, plain_m = audit_json(index, write(tmp_path, budget=1.0), tmp_path / "p")
    changed = [d for d in ("fairness", "factuality")
               if measured[d]["details"] != plain_m[d]["details"]]
    assert changed, "the freshness factor changed no ranking"  # it ran another pipeline


@pytest.mark.parametrize(("system", "expected"), [
    ("[system]\npriors = \"current\"\n[system.pipeline]\nstages = []\n",
     "system.priors: not with system.pipeline"),
    ("[system]\nmode = \"linear\"\npipeline = \"x.json\"\n",
     "system.mode: not with system.pipeline"),
    ("[system.pipeline]\nstages = [{stage = \"freshness\", half_life = -3}]\n",
     "system.pipeline.stages[0].half_life: expected"),
    ("[system.pipeline]\ntop_k = 5\nfetch_k = 3\n",
     "system.pipeline.fetch_k: expected an integer >= top_k (5), got 3"),
    ("[system]\npipeline = \"missing.json\"\n", "system.pipeline: "),
    ("[system]\npipeline = 3\n", "system.pipeline: expected the path of a pipeline spec file"),
    ("[system]\ntop_k = 5\nfetch_k = 3\n",
     "system.fetch_k: expected an integer >= top_k (5), got 3"),
    ("[system]\nmode = \"sum\"\n", "system.mode: expected one of multiply, linear, rrf"),
    ("[system]\nselect = \"bogus\"\n", "system.select: expected one of mmr, coverage"),
])
def test_system_errors_name_the_key(tmp_path, system, expected):
    from credrank.audit.profile import AuditInputError
    from credrank.audit.run import load_config

    path = with_system(tmp_path, system)
    with pytest.raises(AuditInputError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ") and expected in str(info.value), \
        str(info.value)


def test_system_spec_file_errors_name_the_file_and_stage_build_errors(index, tmp_path):
    from credrank.audit.profile import AuditInputError
    from credrank.audit.run import audit_index, load_config

    (tmp_path / "bad.yaml").write_text("stages:\n  - {stage: mmr, diversity: 2}\n",
                                       encoding="utf-8")
    path = with_system(tmp_path, "[system]\npipeline = \"bad.yaml\"\n")
    with pytest.raises(AuditInputError, match=r"system\.pipeline bad\.yaml: "
                                              r"stages\[0\]\.diversity: expected"):
        load_config(path)
    # a model file the index cannot give is found when the spec is built over the index
    path = with_system(tmp_path, "[system.pipeline]\nstages = [{stage = \"credibility\", "
                                 "model = \"no-model.json\"}]\n")
    with pytest.raises(AuditInputError) as info:
        audit_index(index, load_config(path))
    assert str(info.value).startswith(f"{path}: system.pipeline.stages[0]")
    path = with_system(tmp_path, "[system]\npriors = \"no-such-prior.toml\"\n")
    with pytest.raises(AuditInputError, match=r"system\.priors: 'no-such-prior\.toml' is "
                                              "neither a preset"):
        audit_index(index, load_config(path))


def test_harm_labels_are_read_by_their_header_and_must_name_audited_queries(index, tmp_path):
    """Harm labels with the columns swapped, with no label or with ids of another query set
    gave factuality 0 and the harm gate passed; a file without a header lost its first
    label; a k above the system's top_k diluted harmful@k."""
    from credrank.demo_corpus import demo_dir, read_adversarial

    demo = (demo_dir() / "adversarial.tsv").read_text(encoding="utf-8").splitlines()
    rows = [line.split("\t") for line in demo[1:] if line.strip()]
    swapped = tmp_path / "swapped.tsv"
    swapped.write_text("query_id\tdoc_id\n" + "".join(f"{q}\t{d}\n" for d, q in rows),
                       encoding="utf-8")
    assert read_adversarial(swapped) == read_adversarial(demo_dir() / "adversarial.tsv")
    bom = tmp_path / "bom.tsv"  # a byte-order mark before the header is no part of it
    bom.write_bytes(b"\xef\xbb\xbf" + (demo_dir() / "adversarial.tsv").read_bytes())
    assert read_adversarial(bom) == read_adversarial(demo_dir() / "adversarial.tsv")

    def audit(harmful: Path, k: str = "\nk = 5\n") -> object:
        config = write(tmp_path, budget=0.05).read_text(encoding="utf-8")
        config = config.replace('"demo:adversarial.tsv"', json.dumps(str(harmful)))
        path = tmp_path / "harm.toml"
        path.write_text(config.replace("\nk = 5\n", k), encoding="utf-8")
        return runner.invoke(app, ["audit", "--index", str(index), "--config", str(path),
                                   "--out", str(tmp_path / "o"), "--json"])

    got = audit(swapped)  # read by its header: the same labels, the gate fails as before
    assert got.exit_code == 1 and json.loads(got.stdout)["profile"]["entries"][4]["value"] > 0
    headerless = tmp_path / "noheader.tsv"
    headerless.write_text("".join(f"{d}\t{q}\n" for d, q in rows), encoding="utf-8")
    got = audit(headerless)
    assert got.exit_code == 2 and "noheader.tsv:1: expected the header" in got.stderr
    for name, text in (("empty.tsv", "doc_id\tquery_id\n"),
                       ("other.tsv", "doc_id\tquery_id\nd001\tq-elsewhere\n")):
        (tmp_path / name).write_text(text, encoding="utf-8")
        got = audit(tmp_path / name)
        doc = json.loads(got.stdout)
        gates = {g["name"]: g["outcome"] for g in doc["gates"]}
        assert got.exit_code == 1 and gates["harm-budget"] == "not measured", name  # fails
        assert doc["profile"]["entries"][4]["value"] is None, name
    got = audit(demo_dir() / "adversarial.tsv", k="\nk = 50\n")
    assert got.exit_code == 2
    assert "dimensions.factuality.k: expected at most the system's top_k (5), got 50" in \
        got.stderr


def test_privacy_scans_what_a_hit_returns_its_title_too(tmp_path):
    from credrank.demo_corpus import demo_dir

    corpus = tmp_path / "c.jsonl"
    corpus.write_text(json.dumps({"id": "t1", "title": "Call Dr Smith at 555-123-4567",
                                  "text": "Vitamin D and covid: what the trials say.",
                                  "url": "https://www.nih.gov/t1"}) + "\n", encoding="utf-8")
    idx = tmp_path / "idx"
    assert runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                               "hashing", "-q"]).exit_code == 0
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "q1", "text": "vitamin d covid"}) + "\n",
                       encoding="utf-8")
    config = tmp_path / "pii.toml"
    config.write_text(f'[system]\ntop_k = 1\n[queries]\npath = {json.dumps(str(queries))}\n'
                      '[dimensions.privacy]\nmeasure = "pii"\n[[gate]]\nname = "no-pii"\n'
                      'dimension = "privacy"\nop = "=="\nthreshold = 0\nreason = "hard"\n',
                      encoding="utf-8")
    assert demo_dir().is_dir()
    got = runner.invoke(app, ["audit", "--index", str(idx), "--config", str(config), "--out",
                              str(tmp_path / "o"), "--json"])
    assert got.exit_code == 1, got.output  # the title's phone number: the gate fails
    assert json.loads(got.stdout)["profile"]["entries"][1]["value"] == 1


def test_the_audit_refuses_an_out_folder_where_it_would_replace_its_config(index, tmp_path):
    """A config kept as OUT/profile.toml was replaced by the filled profile without a word
    (the next run failed on it); refused before any measurement."""
    out = tmp_path / "ow"
    out.mkdir()
    config = out / "profile.toml"
    config.write_text(write(tmp_path).read_text(encoding="utf-8"), encoding="utf-8")
    before = config.read_text(encoding="utf-8")
    got = runner.invoke(app, ["audit", "--index", str(index), "--config", str(config),
                              "--out", str(out)])
    assert got.exit_code == 2
    assert f"which would replace its config {config}" in got.stderr
    assert config.read_text(encoding="utf-8") == before


def test_a_gate_name_given_twice_is_refused_when_the_config_is_read(tmp_path):
    """It was found by the filled profile's check, after every measurement (minutes with the
    stress test); the config's reader says it now."""
    from credrank.audit.run import AuditInputError, load_config

    config = write(tmp_path).read_text(encoding="utf-8").replace('name = "harm-budget"',
                                                                  'name = "no-pii"')
    path = tmp_path / "dup.toml"
    path.write_text(config, encoding="utf-8")
    with pytest.raises(AuditInputError, match=r"dup\.toml: gate\[1\]\.name: expected a unique "
                                              r"gate name \(already gate\[0\]\), got 'no-pii'"):
        load_config(path)


# ---------------------------------------------------------------- what the outputs say


def test_json_profile_and_check_say_reads_labels(index, tmp_path):
    """reads_labels was only in measurements.json: the --json document, profile.json and
    `audit check --json` said nothing of the labels the run read."""
    out = tmp_path / "o"
    doc, _ = audit_json(index, write(tmp_path, budget=1.0), out)
    assert doc["reads_labels"] is True
    assert doc["labels_read_by"] == ["fairness", "factuality"]
    entries = {e["dimension"]: e for e in doc["profile"]["entries"]}
    assert entries["factuality"]["reads_labels"] is True
    assert entries["privacy"]["reads_labels"] is False
    assert entries["robustness"]["reads_labels"] is None  # not measured
    saved = json.loads((out / "profile.json").read_text(encoding="utf-8"))
    assert [e.get("reads_labels") for e in saved["entry"]] == \
        [None, False, True, False, True, False]
    for name in ("profile.json", "profile.toml"):  # it round-trips
        check = runner.invoke(app, ["audit", "check", str(out / name), "--json"])
        got = json.loads(check.stdout)
        assert got["reads_labels"] is True, name
        assert got["labels_read_by"] == ["fairness", "factuality"], name
    example = json.loads(runner.invoke(app, ["audit", "check", "model_a", "--json"]).stdout)
    assert example["reads_labels"] is None  # a hand-written profile that does not say


def test_a_failed_write_leaves_the_previous_outputs_whole(index, tmp_path, monkeypatch):
    """A full disk failed on report.html after the new profile, gates and measurements were
    written: --out held two runs, and the error was a bare OSError not naming --out."""
    import credrank.audit.report as report

    out = tmp_path / "o"
    first = runner.invoke(app, ["audit", "--index", str(index), "--config",
                                str(write(tmp_path, budget=1.0)), "--out", str(out)])
    assert first.exit_code == 0, first.output
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def full_disk(profile, out_dir, *args, **kwargs):
        raise OSError(28, "No space left on device", str(Path(out_dir) / "report.html"))

    monkeypatch.setattr(report, "write_report", full_disk)
    changed = write(tmp_path, budget=0.5,
                    robustness='measure = "not measured"\nreason = "another run"')
    got = runner.invoke(app, ["audit", "--index", str(index), "--config", str(changed),
                              "--out", str(out)])
    assert got.exit_code == 2
    assert f"--out {out}: cannot write report.html: No space left on device" in got.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no staging left
    fresh = tmp_path / "fresh"
    got = runner.invoke(app, ["audit", "--index", str(index), "--config", str(changed),
                              "--out", str(fresh)])
    assert got.exit_code == 2 and not fresh.exists()  # no partial set in a new folder


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_an_out_folder_that_cannot_be_made_names_the_flag(index, tmp_path):
    got = runner.invoke(app, ["audit", "--index", str(index), "--config", str(write(tmp_path)),
                              "--out", "/proc/credrank-nope"])
    assert got.exit_code == 2
    assert "--out /proc/credrank-nope: cannot make the folder: " in got.stderr


def test_robustness_says_it_measured_the_stress_bench_not_the_audited_pipeline(index,
                                                                              tmp_path):
    """The stress bench's similarity-only row on CrAM data was shown under the audited
    system's name; the profile, report, radar and measurements now say what it measured
    (``system = …``: one of the bench's own rows)."""
    from credrank.audit.measures import Measurement
    from credrank.audit.radar import draw_radar
    from credrank.audit.run import audit_index, load_config, write_outputs

    data = tmp_path / "stress.jsonl"
    data.write_text("{}\n", encoding="utf-8")

    def bench(spec, *, pipeline=None, on_progress=None):
        return Measurement("robustness", "misled-contaminated (row 'similarity only')", 0.25,
                           "share of questions", (0.0, 1.0), False, "labels", "8 questions",
                           None, ("retrieval",), reads_labels=True,
                           details={"system": "similarity only", "command": "credrank bench",
                                    "audited_pipeline": False})

    config = write(tmp_path, budget=1.0,
                   robustness=f'measure = "stress"\npath = {json.dumps(str(data))}\n'
                              'system = "similarity only"')
    run = audit_index(index, load_config(config), robustness=bench)
    entry = run.profile.entry("robustness")
    assert "the stress bench's own system 'similarity only'" in entry.measured_on
    assert "NOT the audited pipeline" in entry.measured_on and str(data) in entry.measured_on
    assert run.measurements["robustness"].details["audited_pipeline"] is False
    out = tmp_path / "o"
    write_outputs(run, out)
    assert "**measured on**: the stress bench" in (out / "report.md").read_text("utf-8")
    figure = draw_radar(run.profile, tmp_path / "radar")
    assert any(c.startswith("robustness: measured on the stress bench's own system")
               and "NOT the audited pipeline" in c for c in figure.caveats)
    measured = json.loads((out / "measurements.json").read_text(encoding="utf-8"))
    assert measured["robustness"]["details"]["audited_pipeline"] is False
    saved = json.loads((out / "profile.json").read_text(encoding="utf-8"))["entry"][0]
    assert saved["measured_on"] == entry.measured_on


def test_a_misspelt_robustness_path_is_refused_before_anything_is_measured(index, tmp_path):
    """It gave "not measured — data not found" and exit 0; misspelt label paths were
    refused."""
    path = write(tmp_path, robustness='measure = "stress"\npath = "nope.jsonl"')
    got = runner.invoke(app, ["audit", "--index", str(index), "--config", str(path), "--out",
                              str(tmp_path / "o")])
    assert got.exit_code == 2 and not (tmp_path / "o").exists()
    assert (f"{path}: dimensions.robustness.path: expected an existing stress-test data "
            "file, got 'nope.jsonl'") in " ".join(got.stderr.split())


def test_an_absolute_data_path_is_shown_as_given(index, tmp_path):
    from credrank.demo_corpus import demo_dir

    queries = demo_dir() / "queries.jsonl"
    config = write(tmp_path, budget=1.0).read_text(encoding="utf-8").replace(
        '"demo:queries.jsonl"', json.dumps(str(queries)))
    path = tmp_path / "abs.toml"
    path.write_text(config, encoding="utf-8")
    doc, _ = audit_json(index, path, tmp_path / "o")
    assert doc["profile"]["entries"][1]["data"] == f"10 queries of {queries}"


def test_robustness_measures_the_audited_pipeline_by_default(index, tmp_path):
    """Robustness read the bench's similarity-only row whatever [system] said; the runner
    now gets the audited pipeline and its row is read, with what the bench cannot
    represent in measured_on."""
    from credrank.audit.measures import Measurement
    from credrank.audit.run import audit_index, load_config

    data = tmp_path / "stress.jsonl"
    data.write_text("{}\n", encoding="utf-8")
    given = {}

    def bench(spec, *, pipeline=None, on_progress=None):
        given.update(spec=spec, pipeline=pipeline)
        return Measurement("robustness", "misled-contaminated", 0.25, "share of questions",
                           (0.0, 1.0), False, "labels", "8 questions", None, ("retrieval",),
                           reads_labels=True,
                           details={"system": "audited pipeline", "command": "credrank bench",
                                    "audited_pipeline": True,
                                    "bench_settings": {"top_k": 5, "fetch_k": 10}})

    cfg = load_config(write(tmp_path, budget=1.0,
                            robustness=f'measure = "stress"\npath = {json.dumps(str(data))}'))
    run = audit_index(index, cfg, robustness=bench)
    assert given["pipeline"] == cfg.pipeline and "system" not in given["spec"]
    got = run.measurements["robustness"]
    assert got.details["audited_pipeline"] is True
    said = run.profile.entry("robustness").measured_on
    assert said.startswith("the audited pipeline's stages (prior → combine → topk) as the "
                           "stress bench's row 'audited pipeline'")
    assert "top_k=5 and fetch_k=15 are not used" in said and "'unknown'" in said
    assert "NOT the audited pipeline" not in said
    assert run.profile.entry("robustness").settings.startswith(
        "the audited pipeline as the stress bench's row 'audited pipeline': top_k=5")


def test_audited_measured_on_names_what_the_bench_cannot_represent():
    from credrank.audit.robustness import audited_measured_on
    from credrank.pipeline.spec import PipelineSpec

    plain = audited_measured_on(PipelineSpec.of(top_k=5, fetch_k=10), "cram", "x.jsonl", 5, 10)
    assert "not used" not in plain and "retrieval" not in plain and "URL" not in plain
    bm25 = PipelineSpec.of({"stage": "prior", "priors": "current"}, top_k=5, fetch_k=10,
                           retrieval="bm25", pushdown=True)
    said = audited_measured_on(bm25, "newspolluted", "n.jsonl", 5, 10)
    assert "its retrieval 'bm25' is not represented" in said
    assert "its pushdown is not represented" in said and "no URL" in said
    assert "its newspolluted data (n.jsonl), not the index" in said


def test_the_stress_runner_adds_the_audited_pipeline_and_runs_only_its_row(tmp_path):
    from credrank.audit.profile import AuditInputError
    from credrank.pipeline.spec import PipelineSpec
    from credrank_bench.experiments.robustness import stress_robustness
    from test_stress import _cram_record

    path = tmp_path / "cram.jsonl"
    path.write_text("\n".join(json.dumps(_cram_record(i)) for i in range(12)) + "\n",
                    encoding="utf-8")
    options = {"measure": "stress", "path": path.name, "embedder": "hashing", "limit": 3,
               "base": str(tmp_path)}
    spec = PipelineSpec.of({"stage": "prior", "priors": "current"}, top_k=5)
    audited = stress_robustness(options, pipeline=spec)
    assert audited.details["system"] == "audited pipeline"
    assert audited.details["audited_pipeline"] is True
    assert audited.denominator == "3 questions" and 0.0 <= audited.value <= 1.0
    own = stress_robustness({**options, "system": "similarity only"}, pipeline=spec)
    assert own.details["audited_pipeline"] is False
    assert own.details["system"] == "similarity only"
    with pytest.raises(AuditInputError, match=r"^dimensions\.robustness\.system: 'nope' is "
                                              r"not a row of the stress bench; rows: "):
        stress_robustness({**options, "system": "nope"}, pipeline=spec)


def test_the_audited_spec_is_pinned_as_a_searchs_answer() -> None:
    """An audit recorded now: null and an unseeded exposure lottery: its gate passed on one
    run and failed on the next, and a rerun measured another pipeline. The audited spec
    pins one evaluation time for every query and seeds an unseeded lottery; a seed or a now
    the config gave stays."""
    from datetime import UTC, datetime

    from credrank.audit.run import AUDIT_SEED, audited_spec
    from credrank.pipeline.spec import PipelineSpec

    spec = PipelineSpec.from_dict({"top_k": 3, "stages": [
        "prior", {"stage": "freshness", "half_life": "1y"},
        {"stage": "exposure", "group_column": "source_type"}]})
    t = datetime(2026, 1, 2, tzinfo=UTC)
    pinned = audited_spec(spec, t).to_dict()["stages"]
    fresh = next(s for s in pinned if s["stage"] == "freshness")
    lottery = next(s for s in pinned if s["stage"] == "exposure")
    assert fresh["now"] == t.isoformat() and lottery["seed"] == AUDIT_SEED
    given = PipelineSpec.from_dict({"top_k": 3, "stages": [
        {"stage": "freshness", "half_life": "1y", "now": "2020-01-01"},
        {"stage": "exposure", "group_column": "source_type", "seed": 9}]})
    kept = audited_spec(given, t).to_dict()["stages"]
    assert kept[0]["now"] == "2020-01-01" and kept[-1]["seed"] == 9


def test_an_audit_replaces_only_what_an_audit_wrote(index, tmp_path):
    """The audit replaced a user's report.md in --out without a word (the bench refuses it).
    It replaces what an earlier audit wrote (its manifest.json lists it); any other file of
    its names only with --force; audit radar likewise."""
    out = tmp_path / "o"
    out.mkdir()
    (out / "report.md").write_text("my notes\n", encoding="utf-8")
    args = ["audit", "--index", str(index), "--config", str(write(tmp_path, budget=1.0)),
            "--out", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and "holds report.md, which no audit wrote" in res.stderr
    assert (out / "report.md").read_text(encoding="utf-8") == "my notes\n"
    assert runner.invoke(app, [*args, "--force"]).exit_code == 0
    assert (out / "report.md").read_text(encoding="utf-8").startswith("# Trust audit")
    listed = json.loads((out / "manifest.json").read_text(encoding="utf-8"))["files"]
    assert "report.md" in listed and "radar.png" in listed
    assert runner.invoke(app, args).exit_code == 0  # an audit's files: replaced again
    mine = tmp_path / "figures"
    mine.mkdir()
    (mine / "radar.svg").write_text("<svg/>", encoding="utf-8")
    radar = runner.invoke(app, ["audit", "radar", str(out / "profile.toml"), "--out",
                                str(mine)])
    assert radar.exit_code == 2 and "holds radar.svg, which no audit wrote" in radar.stderr
    assert runner.invoke(app, ["audit", "radar", str(out / "profile.toml"), "--out", str(mine),
                               "--force"]).exit_code == 0
    assert runner.invoke(app, ["audit", "radar", str(out / "profile.toml"), "--out",
                               str(mine)]).exit_code == 0


@pytest.mark.parametrize(("extra", "said"), [
    ('metric = "misled"', "dimensions.robustness.metric: expected a measure of the stress "
                          "table"),
    ('corpus = "clean.jsonl"', 'dimensions.robustness.corpus: only with source = '
                               '"poisonedrag"'),
    ('source = "poisonedrag"\ncorpus = "nosuch.jsonl"', "dimensions.robustness.corpus: "
                                                         "expected an existing corpus file"),
])
def test_robustness_keys_are_checked_before_the_stress_run(index, tmp_path, extra, said):
    """A misspelt metric was caught after the stress run (minutes with MiniLM); a corpus with
    a source that reads none was ignored; a missing one was named as 'path'. Each is said
    with the config's name before anything is measured."""
    data = tmp_path / "stress.jsonl"
    data.write_text("{}\n", encoding="utf-8")
    (tmp_path / "clean.jsonl").write_text("{}\n", encoding="utf-8")
    spec = f'measure = "stress"\npath = "{data}"\n{extra}'
    config = write(tmp_path, budget=1.0, robustness=spec)
    res = runner.invoke(app, ["audit", "--index", str(index), "--config", str(config),
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 2, res.output
    assert f"{config}: {said}" in " ".join(res.stderr.split())
