"""The pipeline spec (issue 24): one declarative spec, one validator, one builder.

* every catalog stage in one spec runs the same through the library, ``credrank search
  --pipeline`` (the command, in process), ``POST /search`` (a real server) and each adapter over the
  same pool; the ``--json`` output's ``"pipeline"`` fed back reproduces the run;
* bad specs are errors naming the spec path, in the caller's vocabulary;
* pushdown is decided by the stages themselves (a spec the engine can score is pushed down,
  one it cannot is not, and ``pushdown: true`` on it names the stage).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest

from cli_inprocess import assert_clean_error, run_cli
from credrank.core.pipeline import FormulaTerm
from credrank.demo_corpus import demo_dir
from credrank.index.opener import open_store
from credrank.pipeline import CATALOG, PipelineSpec, SpecError, decide_pushdown
from credrank.pipeline.compile import build_stages, context
from credrank.searcher import Searcher
from sparse_copy import copy_index

QUERY = "does vitamin d help covid"
CREDIBLE_TLDS = ("gov", "org", "int", "uk")


@pytest.fixture(scope="module")
def workdir(demo_index_hashing: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the demo index (hashing) with a credibility and a stance model fitted on
    it through the CLI, and a spec file using every kind of stage."""
    where = tmp_path_factory.mktemp("spec")
    copy_index(demo_index_hashing, where / "idx")
    docs = {d["id"]: d for d in map(json.loads, (demo_dir() / "corpus.jsonl").read_text(
        encoding="utf-8").splitlines())}
    with (where / "labels.csv").open("w", newline="", encoding="utf-8") as out:
        w = csv.writer(out)
        w.writerow(["doc_id", "credible", "topic"])
        for line in (demo_dir() / "qrels.tsv").read_text(encoding="utf-8").splitlines():
            qid, _, doc, _ = line.split()
            tld = docs[doc]["url"].split("/")[2].rsplit(".", 1)[-1]
            w.writerow([doc, int(tld in CREDIBLE_TLDS), qid])
    with (where / "pairs.csv").open("w", newline="", encoding="utf-8") as out:
        w = csv.writer(out)
        w.writerow(["topic", "query", "doc_id", "stance", "text"])
        for k, (t, c) in enumerate([("zinc", "colds"), ("vitamin d", "covid"),
                                    ("garlic", "flu"), ("honey", "coughs")]):
            for i in range(3):
                w.writerow([f"T{k}", f"does {t} help {c}?", f"T{k}-y{i}", 1,
                            f"Trials show {t} helps {c}: patients recovered faster. {i}"])
                w.writerow([f"T{k}", f"does {t} help {c}?", f"T{k}-n{i}", 0,
                            f"Trials show {t} does not help {c}; no benefit was found. {i}"])
    for args in (("credibility", "fit", "labels.csv", "--index", "idx", "--out", "cred.json"),
                 ("stance", "fit", "pairs.csv", "--index", "idx", "--out", "stance.json")):
        proc = run_cli(*args, cwd=where, timeout=600)
        assert proc.returncode == 0, proc.stderr
    spec = {"top_k": 5, "fetch_k": 20, "stages": [
        {"stage": "prior", "priors": "current"},
        {"stage": "smoothing", "m": 3, "beta": 0.2},
        {"stage": "credibility", "model": str(where / "cred.json"), "floor": 0.4},
        {"stage": "freshness", "half_life": "3y", "now": "2026-01-01",
         "undated": "penalty:0.5"},
        {"stage": "stance", "model": str(where / "stance.json"), "floor": 0.2},
        {"stage": "consensus", "threshold": 0.4},
        {"stage": "combine", "mode": "multiply"},
        {"stage": "mmr", "diversity": 0.3}]}
    (where / "every.json").write_text(json.dumps(spec), encoding="utf-8")
    return where


def _hits(doc: dict[str, Any]) -> list[tuple[str, float]]:
    return [(h["doc_id"], round(h["score"], 9)) for h in doc["hits"]]


def test_every_stage_kind_is_in_the_catalog_spec(workdir: Path) -> None:
    spec = PipelineSpec.from_dict(json.loads((workdir / "every.json").read_text()))
    kinds = {CATALOG[s.name].kind for s in spec.stages}
    assert kinds == {"prior", "signal", "combine", "select"}
    assert [s.name for s in spec.stages][-2:] == ["combine", "mmr"]


def test_library_and_cli_run_the_same_pipeline_and_json_replays_it(workdir: Path) -> None:
    spec = PipelineSpec.from_dict(json.loads((workdir / "every.json").read_text()))
    with Searcher.open(workdir / "idx") as searcher:
        library = searcher.search_json(QUERY, spec)
    assert library["pipeline"] == spec.to_dict() and len(library["hits"]) == 5
    for factor in ("prior", "credibility", "freshness", "agreement", "consensus"):
        assert all(factor in h["score_breakdown"] for h in library["hits"]), factor
    proc = run_cli("search", QUERY, "--index", "idx", "--pipeline", "every.json", "--json",
                   cwd=workdir, timeout=600)
    assert proc.returncode == 0, proc.stderr
    cli = json.loads(proc.stdout)
    assert _hits(cli) == _hits(library) and cli["pipeline"] == library["pipeline"]
    (workdir / "out.json").write_text(proc.stdout, encoding="utf-8")
    again = run_cli("search", QUERY, "--index", "idx", "--pipeline", "out.json", "--json",
                    cwd=workdir, timeout=600)
    assert again.returncode == 0, again.stderr
    replay = json.loads(again.stdout)
    assert _hits(replay) == _hits(cli) and replay["settings"] == cli["settings"]


def test_flags_and_their_spec_run_the_same(workdir: Path) -> None:
    flags = run_cli("search", QUERY, "--index", "idx", "--consensus", "--consensus-param",
                    "threshold=0.4", "--select", "mmr", "-P", "diversity=0.3", "--freshness",
                    "half_life=3y,now=2026-01-01,undated=penalty:0.5", "--json", cwd=workdir,
                    timeout=600)
    assert flags.returncode == 0, flags.stderr
    doc = json.loads(flags.stdout)
    (workdir / "flags.json").write_text(json.dumps(doc["pipeline"]), encoding="utf-8")
    spec = run_cli("search", QUERY, "--index", "idx", "--pipeline", "flags.json", "--json",
                   cwd=workdir, timeout=600)
    assert _hits(json.loads(spec.stdout)) == _hits(doc)
    sets = run_cli("search", QUERY, "--index", "idx", "-S", "consensus.threshold=0.4",
                   "-S", "mmr.diversity=0.3", "-S", "freshness.half_life=3y",
                   "-S", "freshness.now=2026-01-01", "-S", "freshness.undated=penalty:0.5",
                   "--json", cwd=workdir, timeout=600)
    assert sets.returncode == 0, sets.stderr
    assert _hits(json.loads(sets.stdout)) == _hits(doc)


# -- bad specs: the spec path, in the caller's words ----------------------------------------

@pytest.mark.parametrize("data,path,detail", [
    ({"stages": [{"stage": "nosuch"}]}, "stages[0].stage", "expected one of prior"),
    # what the fields say together, checked by the spec as by the constructor
    ({"stages": [{"stage": "planted", "z": 3, "z_full": 2}]}, "stages[0].z_full",
     "expected a number > z (3), got 2.0"),
    ({"stages": [{"stage": "freshness", "now": "2026-01-01"}]}, "stages[0].half_life",
     "got neither"),
    # a stage name that is not text (once an uncaught TypeError: issue 37, N6)
    ({"stages": [{"stage": ["prior"]}]}, "stages[0].stage", "got list"),
    ({"stages": [{"stage": {"name": "prior"}}]}, "stages[0].stage", "got dict"),
    ({"stages": [{"stage": "consensus", "treshold": 0.5}]}, "stages[0].treshold",
     "unknown key 'treshold'"),
    ({"stages": [{"stage": "consensus", "threshold": 1.5}]}, "stages[0].threshold",
     "expected a finite number in [0, 1], got 1.5"),
    ({"stages": [{"stage": "mmr"}]}, "stages[0].diversity", "got nothing"),
    ({"stages": ["consensus", "prior"]}, "stages[1].stage", "expected 'prior' before"),
    ({"stages": ["prior", {"stage": "feedback_prior", "store": "s"}]}, "stages[1].stage",
     "expected one prior stage"),
    ({"stages": ["prior", "prior"]}, "stages[1].stage", "expected each stage once"),
    ({"stages": ["topk", {"stage": "mmr", "diversity": 0.1}]}, "stages[1].stage",
     "expected one select stage"),
    ({"top_k": 10, "fetch_k": 5}, "fetch_k", "expected an integer >= top_k"),
    ({"top_k": True}, "top_k", "got True"),
    ({"retrieval": "sparse"}, "retrieval", "expected one of dense, bm25"),
    ({"stages": "prior"}, "stages", "expected a list"),
    ({"colour": 1}, "colour", "unknown key 'colour'"),
])
def test_bad_specs_name_the_spec_path(data: dict, path: str, detail: str) -> None:
    with pytest.raises(SpecError) as info:
        PipelineSpec.from_dict(data, where="p.json")
    assert info.value.key_path == path and detail in info.value.detail
    assert str(info.value).startswith(f"p.json: {path}: ")


def test_a_file_the_stage_names_is_checked_when_it_is_built(tmp_path: Path) -> None:
    spec = PipelineSpec.of({"stage": "credibility", "model": str(tmp_path / "none.json")})
    with pytest.raises(SpecError) as info:
        build_stages(spec, context())
    assert info.value.key_path == "stages[0].model" and "does not exist" in info.value.detail
    with pytest.raises(SpecError) as info:
        build_stages(spec, context(allow_paths=False, resources={"m": tmp_path / "m.json"}))
    assert info.value.key_path == "stages[0].model" and "registered: m" in info.value.detail


def test_cli_errors_speak_flags_and_spec_paths(workdir: Path) -> None:
    bad = run_cli("search", QUERY, "--index", "idx", "--consensus", "--consensus-param",
                  "treshold=0.5", cwd=workdir, timeout=600)
    assert bad.returncode == 2 and "--consensus-param treshold:" in bad.stderr
    (workdir / "bad.json").write_text(json.dumps(
        {"stages": [{"stage": "consensus", "threshold": 1.5}]}), encoding="utf-8")
    bad = run_cli("search", QUERY, "--index", "idx", "--pipeline", "bad.json", cwd=workdir,
                  timeout=600)
    assert bad.returncode == 2 and "bad.json: stages[0].threshold: expected" in bad.stderr


# -- pushdown: each stage answers for itself ------------------------------------------------

def test_pushdown_is_decided_by_the_stages(workdir: Path) -> None:
    with open_store(workdir / "idx") as store:
        fused = build_stages(PipelineSpec.of("prior", {"stage": "freshness", "half_life": 365,
                                                       "undated": "penalty:0.5"}), context())
        decision = decide_pushdown(fused, store=store)
        assert decision.fused and decision.cut and decision.freshness is not None
        python = build_stages(PipelineSpec.of("prior", "consensus"), context())
        decision = decide_pushdown(python, store=store)
        assert not decision.fused and decision.where == "stages[1]"
        assert "reads each candidate's answer" in str(decision.reason)
        with pytest.raises(ValueError, match=r"stages\[1\] needs the Python path"):
            decide_pushdown(python, store=store, requested=True)
        with Searcher(store) as searcher:
            doc = searcher.search_json(QUERY, PipelineSpec.of("prior", top_k=3))
            assert doc["settings"]["pushdown"] is True
            with pytest.raises(SpecError, match=r"stages\[1\]"):
                searcher.search(QUERY, PipelineSpec.of("prior", "consensus", pushdown=True))


def test_pipeline_commands_list_the_catalog_and_check_a_spec(workdir: Path) -> None:
    listed = run_cli("pipeline", "stages", "--json", cwd=workdir, timeout=600)
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    assert [s["stage"] for s in doc["stages"]] == list(CATALOG)
    consensus = next(s for s in doc["stages"] if s["stage"] == "consensus")
    threshold = next(p for p in consensus["params"] if p["name"] == "threshold")
    assert threshold == {"name": "threshold", "expected": "a finite number in [0, 1]",
                         "required": False, "default": 0.5}
    assert "`" not in listed.stdout  # data all the way down: no Markdown code spans
    checked = run_cli("pipeline", "check", "every.json", "--json", cwd=workdir, timeout=600)
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout) == PipelineSpec.from_dict(
        json.loads((workdir / "every.json").read_text())).to_dict()


def test_a_lineage_spec_runs_as_its_stages_built_by_hand(workdir: Path) -> None:
    from credrank.combine import Combine
    from credrank.pipeline.compile import check_stages, compile_search
    from credrank.select.topk import TopK
    from credrank.signals.prior import load_priors
    from credrank.stages.freshness import FreshnessDecay, InheritedDates
    from credrank.stages.prior import SourcePrior

    spec = PipelineSpec.of("prior", {"stage": "freshness", "half_life": 365,
                                     "lineage": "cites"}, top_k=3)
    check_stages(spec)  # the chains need an index: checked when there is one, not refused
    with pytest.raises(SpecError, match=r"stages\[1\]\.lineage: 'cites' reads citation chains"):
        build_stages(spec, context())
    with open_store(workdir / "idx") as store, Searcher(store) as searcher:
        freshness = FreshnessDecay(365, lineage="cites")
        assert freshness.lineage and not isinstance(freshness.formula_term(), FormulaTerm)
        stages = [SourcePrior(load_priors("current")), InheritedDates(store), freshness,
                  Combine("multiply"), TopK(3)]
        by_hand = compile_search(stages, store, searcher.embedder,
                                 fetch_k=spec.resolved_fetch_k, top_k=3).search(QUERY)
        via_spec = searcher.search(QUERY, spec)
        assert searcher.compile(spec).pushdown.fused is False
    assert list(by_hand.doc_ids) == list(via_spec.doc_ids)
    assert by_hand.score.tolist() == pytest.approx(via_spec.score.tolist(), rel=1e-6)  # T: now
    assert "lineage" in via_spec.info and "lineage" in by_hand.info


def test_native_toml_and_yaml_dates_are_instants(workdir: Path) -> None:
    # issue 37 N13: `now = 2026-01-01` unquoted in TOML / YAML (a date or datetime value) was
    # refused with a Python repr, or broke `pipeline check --json` with a traceback
    files = {"dt.toml": 'top_k = 3\n[[stages]]\nstage = "freshness"\nhalf_life = "1y"\n'
                        "now = 2026-01-01T00:00:00Z\n",
             "d.toml": 'top_k = 3\n[[stages]]\nstage = "freshness"\nhalf_life = "1y"\n'
                       "now = 2026-01-01\n",
             "d.yaml": "top_k: 3\nstages:\n  - stage: freshness\n    half_life: 1y\n"
                       "    now: 2026-01-01\n",
             "t.toml": 'top_k = 3\n[[stages]]\nstage = "freshness"\nhalf_life = "1y"\n'
                       "now = 07:00:00\n"}
    for name, text in files.items():
        (workdir / name).write_text(text, encoding="utf-8")
    echoed = {}
    for name in ("dt.toml", "d.toml", "d.yaml"):
        checked = run_cli("pipeline", "check", name, "--json", cwd=workdir, timeout=600)
        assert checked.returncode == 0, checked.stderr
        echoed[name] = json.loads(checked.stdout)["stages"][0]["now"]
    assert echoed == {"dt.toml": "2026-01-01T00:00:00+00:00", "d.toml": "2026-01-01",
                      "d.yaml": "2026-01-01"}
    searched = run_cli("search", QUERY, "--index", "idx", "--pipeline", "d.toml", "--json",
                       cwd=workdir, timeout=600)
    assert searched.returncode == 0, searched.stderr
    doc = json.loads(searched.stdout)
    assert doc["info"]["freshness"]["now"] == "2026-01-01T00:00:00+00:00"
    # a time of day is no date: refused naming the key, what came in ISO text (no repr)
    assert_clean_error(run_cli("pipeline", "check", "t.toml", cwd=workdir, timeout=600),
                       "t.toml: stages[0].now: expected an ISO 8601 date",
                       "got a time value 07:00:00")


def test_every_door_reports_the_same_capped_fetch_k(workdir: Path) -> None:
    # issue 37 N12: {"top_k": 10000000} passed `pipeline check` as "fetch_k 30000000" and
    # `search` then refused a fetch_k the user never wrote
    from credrank.index.store import MAX_K

    (workdir / "big.json").write_text(json.dumps({"top_k": MAX_K}), encoding="utf-8")
    assert PipelineSpec.from_dict({"top_k": MAX_K}).resolved_fetch_k == MAX_K
    assert PipelineSpec.from_dict({"top_k": MAX_K}).to_dict()["fetch_k"] == MAX_K
    said = run_cli("pipeline", "check", "big.json", cwd=workdir, timeout=600)
    assert said.returncode == 0, said.stderr
    assert f"top_k {MAX_K}, fetch_k {MAX_K}," in " ".join(said.stdout.split())
    checked = run_cli("pipeline", "check", "big.json", "--json", cwd=workdir, timeout=600)
    assert json.loads(checked.stdout)["fetch_k"] == MAX_K
    for args in (("--pipeline", "big.json"), ("--top-k", str(MAX_K))):
        searched = run_cli("search", QUERY, "--index", "idx", "--json", *args, cwd=workdir,
                           timeout=600)
        assert searched.returncode == 0, searched.stderr
        doc = json.loads(searched.stdout)
        assert doc["settings"]["fetch_k"] == doc["pipeline"]["fetch_k"] == MAX_K


def test_a_deeply_nested_set_value_names_the_flag(workdir: Path) -> None:
    # issue 37 N17: -S 'mmr.diversity=[[[…' (3,000 deep) failed without naming -S
    for raw in ("[" * 3000, "[" * 3000 + "]" * 3000):
        assert_clean_error(run_cli("search", QUERY, "--index", "idx", "-S",
                                   f"mmr.diversity={raw}", cwd=workdir, timeout=600),
                           "error: -S mmr.diversity=[[[", "nested at most 32 levels deep",
                           starts=True)


def test_a_default_pool_follows_a_new_top_k() -> None:
    # a spec that states no fetch_k has the default pool, 3 × top_k, at any top_k: a new
    # top_k (replace_top, -S top_k=, the shortcuts over a spec) resizes it; it was frozen at
    # the old top_k's (a larger top_k was refused: "fetch_k: expected an integer >= top_k
    # (20), got 15"; a smaller one kept the old pool)
    spec = PipelineSpec.from_dict({"top_k": 5, "stages": ["prior"]})
    assert spec.replace_top(top_k=20).resolved_fetch_k == 60
    assert spec.replace_top(top_k=8).to_dict()["fetch_k"] == 24
    assert spec.with_params("mmr", {"diversity": 0.5}).replace_top(top_k=20).fetch_k is None
    # a stated pool stays stated, and a top_k over it is refused as before
    stated = PipelineSpec.from_dict({"top_k": 5, "fetch_k": 15, "stages": ["prior"]})
    assert stated.replace_top(top_k=8).resolved_fetch_k == 15
    with pytest.raises(SpecError, match=r"fetch_k: expected an integer >= top_k \(20\), got 15"):
        stated.replace_top(top_k=20)


def test_top_k_over_a_spec_without_fetch_k_resizes_the_pool(workdir: Path) -> None:
    (workdir / "s5.json").write_text(json.dumps({"top_k": 5, "stages": ["prior"]}),
                                     encoding="utf-8")
    for args, pool in ((("--top-k", "20"), 60), (("--top-k", "8"), 24),
                       (("-S", "top_k=20"), 60)):
        searched = run_cli("search", QUERY, "--index", "idx", "--json", "--pipeline", "s5.json",
                           *args, cwd=workdir, timeout=600)
        assert searched.returncode == 0, searched.stderr
        doc = json.loads(searched.stdout)
        assert doc["settings"]["fetch_k"] == doc["pipeline"]["fetch_k"] == pool, args


def test_an_exposure_answer_replays_by_its_pinned_draw(workdir: Path) -> None:
    # the echoed exposure stage said "seed": null and the replay drew another list
    first = run_cli("search", QUERY, "--index", "idx", "--json", "--select", "exposure",
                    "-P", "group_column=source_type", cwd=workdir, timeout=600)
    assert first.returncode == 0, first.stderr
    doc = json.loads(first.stdout)
    stage = next(s for s in doc["pipeline"]["stages"] if s["stage"] == "exposure")
    assert stage["draw"] == doc["info"]["select"]["draw"] is not None
    (workdir / "ex.json").write_text(first.stdout, encoding="utf-8")
    again = run_cli("search", QUERY, "--index", "idx", "--json", "--pipeline", "ex.json",
                    cwd=workdir, timeout=600)
    assert again.returncode == 0, again.stderr
    assert [h["doc_id"] for h in json.loads(again.stdout)["hits"]] == [
        h["doc_id"] for h in doc["hits"]]


def test_an_option_written_at_its_default_is_refused_beside_a_pipeline(workdir: Path) -> None:
    # "--priors current" (the default) beside --pipeline was silently ignored; a value other
    # than the default was refused
    (workdir / "compressed.json").write_text(json.dumps(
        {"top_k": 3, "stages": [{"stage": "prior", "priors": "compressed"}]}), encoding="utf-8")
    got = run_cli("search", QUERY, "--index", "idx", "--pipeline", "compressed.json",
                  "--priors", "current", "--mode", "multiply", cwd=workdir, timeout=600,
                  env={"CREDRANK_NO_CONFIG": "1"})
    assert_clean_error(got, "--priors, --mode: not with --pipeline compressed.json")
    fine = run_cli("search", QUERY, "--index", "idx", "--pipeline", "compressed.json",
                   "--top-k", "2", "--json", cwd=workdir, timeout=600,
                   env={"CREDRANK_NO_CONFIG": "1"})
    assert fine.returncode == 0, fine.stderr
    assert len(json.loads(fine.stdout)["hits"]) == 2


def test_set_adds_a_stage_with_two_required_parameters(workdir: Path) -> None:
    # "-S coverage.lambda_ilad=0.1 -S coverage.lambda_coverage=0.1" was refused after the
    # first: "stages[2].lambda_coverage: … got nothing (the key is missing)"
    for order in ((0, 1), (1, 0)):
        items = ["coverage.lambda_ilad=0.1", "coverage.lambda_coverage=0.2"]
        args = [a for i in order for a in ("-S", items[i])]
        got = run_cli("search", QUERY, "--index", "idx", "--json", *args, cwd=workdir,
                      timeout=600)
        assert got.returncode == 0, got.stderr
        stage = json.loads(got.stdout)["pipeline"]["stages"][-1]
        assert (stage["stage"], stage["lambda_ilad"], stage["lambda_coverage"]) == (
            "coverage", 0.1, 0.2)
    bad = run_cli("search", QUERY, "--index", "idx", "-S", "coverage.lambda_ilad=0.1",
                  cwd=workdir, timeout=600)
    assert_clean_error(bad, "-S coverage.lambda_ilad=0.1: stages[2].lambda_coverage:")


def test_a_stage_build_error_names_the_set_item(workdir: Path) -> None:
    # it said "stages[0].priors: …", a path the user never wrote
    assert_clean_error(run_cli("search", QUERY, "--index", "idx", "-S", "prior.priors=bogus",
                               cwd=workdir, timeout=600),
                       "error: -S prior.priors=bogus: 'bogus' is neither a preset", starts=True)
    assert_clean_error(run_cli("search", QUERY, "--index", "idx", "-S",
                               "credibility.model=no.json", cwd=workdir, timeout=600),
                       "error: -S credibility.model=no.json: no.json:", starts=True)


def test_pipeline_check_refuses_what_a_search_would(tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``pipeline check`` builds the stages as a search does before opening an index: a file a
    stage names that does not exist, and a ``pushdown: true`` the stages cannot honour, were
    "a valid pipeline" there and refused by every search."""
    from credrank.cli import run

    cases = {
        "pushdown.json": ({"pushdown": True, "stages": [
            "prior", {"stage": "freshness", "half_life": 30, "undated": "neutral"}]},
            "stages[1]: undated=neutral (median of the dated candidates) needs the Python "
            "path; give neutral:W or penalty:W to score in the engine; pushdown: true cannot "
            "be honoured"),
        "file.json": ({"stages": [{"stage": "prior", "priors": str(tmp_path / "none.toml")}]},
                      "stages[0].priors: "),
    }
    for name, (spec, said) in cases.items():
        (tmp_path / name).write_text(json.dumps(spec), encoding="utf-8")
        assert run(["pipeline", "check", str(tmp_path / name)]) == 2
        assert f"error: {tmp_path / name}: {said}" in capsys.readouterr().err
    # a stage that reads the index is checked when there is one, not refused here
    (tmp_path / "lineage.json").write_text(json.dumps({"stages": [
        "prior", {"stage": "freshness", "half_life": 30, "lineage": "cites"}]}),
        encoding="utf-8")
    assert run(["pipeline", "check", str(tmp_path / "lineage.json")]) == 0
    assert "a valid pipeline" in capsys.readouterr().out


def test_a_build_error_is_placed_at_the_parameter_that_named_the_file() -> None:
    """A file's error is placed at the parameter naming the file, not at one whose value
    merely occurs in the message (the stance stage's ``mode: "expected"`` took a wrong-kind
    model file's "expected a stance model file" for its own)."""
    from credrank.pipeline.compile import build_error

    params = {"mode": "expected", "model": "/x/m.json"}
    for text, at in (("/x/m.json: expected a stance model file, got a credibility model",
                      "stages[2].model"),
                     ("cannot read '/x/m.json': no such file", "stages[2].model"),
                     ("the embedder was expected to be bound", "stages[2]"),
                     ("mode: expected one of expected, absolute", "stages[2].mode")):
        assert build_error("stages[2]", params, ValueError(text)).key_path == at, text


def test_pipeline_check_names_the_file_once(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    from credrank.cli import run

    spec = tmp_path / "bad.json"
    spec.write_text(json.dumps({"stages": [{"stage": "consensus", "threshold": 1.5}]}),
                    encoding="utf-8")
    assert run(["pipeline", "check", str(spec)]) == 2
    err = capsys.readouterr().err
    assert f"error: {spec}: stages[0].threshold: expected" in err and err.count(str(spec)) == 1


def test_a_spec_file_names_its_files_from_its_own_folder(workdir: Path, tmp_path: Path
                                                         ) -> None:
    """A spec's ``priors = "mine.toml"`` beside it was looked for in the current folder
    ("neither a preset nor an existing file"); it is found beside the spec, and the answer
    echoes the absolute path, so the echo replays from any folder."""
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "mine.toml").write_text('name = "mine"\nbase = "current"\nblog = 0.7\n',
                                     encoding="utf-8")
    (specs / "spec.toml").write_text('[[stages]]\nstage = "prior"\npriors = "mine.toml"\n',
                                     encoding="utf-8")
    got = run_cli("pipeline", "check", specs / "spec.toml", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    got = run_cli("search", "vitamin d", "--index", workdir / "idx", "--pipeline",
                  specs / "spec.toml", "--json", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    doc = json.loads(got.stdout)
    assert doc["pipeline"]["stages"][0]["priors"] == str((specs / "mine.toml").resolve())
    echo = tmp_path / "elsewhere" / "echo.json"
    echo.parent.mkdir()
    echo.write_text(json.dumps(doc), encoding="utf-8")
    again = run_cli("search", "vitamin d", "--index", workdir / "idx", "--pipeline", echo,
                    "--json", cwd=echo.parent)
    assert again.returncode == 0, again.stderr
    assert [h["doc_id"] for h in json.loads(again.stdout)["hits"]] == \
        [h["doc_id"] for h in doc["hits"]]


def test_only_file_parameters_are_read_beside_the_spec(workdir: Path, tmp_path: Path) -> None:
    """Beside a spec, a folder ``current/`` or a file ``linear`` made ``priors = "current"``
    and ``mode = "linear"`` paths (a regression of reading files beside the spec): only the
    parameters that name files are read there."""
    specs = tmp_path / "specs"
    (specs / "current").mkdir(parents=True)
    (specs / "linear").write_text("x", encoding="utf-8")
    (specs / "b.toml").write_text('top_k = 3\n[[stages]]\nstage = "prior"\npriors = "current"'
                                  '\n[[stages]]\nstage = "combine"\nmode = "linear"\n',
                                  encoding="utf-8")
    got = run_cli("search", "vitamin d", "--index", workdir / "idx", "--pipeline",
                  specs / "b.toml", "--json", cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    stages = {s["stage"]: s for s in json.loads(got.stdout)["pipeline"]["stages"]}
    assert stages["prior"]["priors"] == "current" and stages["combine"]["mode"] == "linear"
