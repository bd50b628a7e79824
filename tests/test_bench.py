"""The bench harness: side-by-side experiments, sweeps, noisy priors, report files."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.documents.schema import Document
from credrank.evaluate.report import write_report
from credrank.evaluate.result import dump_json
from credrank.index.embed import get_embedder
from credrank_bench.datasets import EvalSet
from credrank_bench.experiments.bench import answer_coverage, noisy_types
from credrank_bench.experiments.benches import BenchOptions, run_bench


@pytest.fixture(scope="module")
def demo_result():
    get_embedder.cache_clear()
    return run_bench("demo", BenchOptions(embedder="hashing"))


def test_demo_bench_compares_systems_on_the_same_pools(demo_result):
    main = demo_result.main
    table = main.table
    names = [r.system for r in table.rows]
    assert names[0] == "similarity only" == table.baseline and "current priors" in names
    for row in table.rows[1:]:
        for m in main.measures:
            c = row.metrics[m]
            assert c.ci_low <= c.mean <= c.ci_high
            assert c.wins + c.losses + c.ties == len(main.per_query[row.system][m])
            assert c.delta == pytest.approx(c.mean - main.mean("similarity only", m))
    assert "delta" not in table.row("similarity only").metrics["RR"].to_json()


def test_harmful_wins_are_decreases(demo_result):
    main = demo_result.main
    base = main.per_query["similarity only"]["harmful@5"]
    for row in main.table.rows[1:]:
        values = main.per_query[row.system]["harmful@5"]
        cell = row.metrics["harmful@5"]
        assert cell.wins == sum(values[q] < base[q] - 1e-9 for q in base)
        assert cell.losses == sum(values[q] > base[q] + 1e-9 for q in base)


def test_zero_dispersion_reproduces_the_baseline(demo_result):
    sweep = demo_result.table("dispersion")
    assert sweep.kind == "sweep" and sweep.parameter == "gamma"
    zero = next(r for r in sweep.rows if r.params.get("gamma") == 0.0)
    for col in sweep.columns:
        assert zero.metrics[col.name].mean == pytest.approx(sweep.mean(sweep.baseline, col.name))


def test_every_demo_system_says_whether_it_reads_labels(demo_result):
    for table in demo_result.tables:
        for row in table.rows:
            assert isinstance(row.reads_labels, bool), (table.key, row.system)
    # URL-derived priors and similarity read no labels; oracle feedback does
    assert not any(r.reads_labels for r in demo_result.table("results").rows)
    feedback = demo_result.table("oracle_feedback")
    assert [r.reads_labels for r in feedback.rows] == [False, True, True]


def test_report_folder(tmp_path, demo_result):
    path = write_report(demo_result, tmp_path / "out", "credrank bench demo")
    text = path.read_text()
    assert "## Results" in text and "## Limits" in text and "## Oracle feedback" in text
    assert "[reads labels]" in text and "harmful@5 ↓" in text
    for name in ("metrics.png", "wins.png", "dispersion.png", "per_query.csv", "result.json",
                 "runs/qrels.txt", "runs/similarity-only.run",
                 "runs/oracle-feedback/current-priors-static.run"):
        assert (tmp_path / "out" / name).is_file(), name
    run_line = (tmp_path / "out" / "runs" / "current-priors.run").read_text().splitlines()[0]
    assert len(run_line.split()) == 6  # qid Q0 docid rank score tag
    doc = json.loads((tmp_path / "out" / "result.json").read_text())
    assert doc == json.loads(dump_json(demo_result))
    assert doc["credrank_bench"] == 2
    with (tmp_path / "out" / "per_query.csv").open() as f:
        header = f.readline().strip()
    assert header == "table,system,measure,qid,value"


def toy_evalset():
    docs = [Document(id=f"q1/d{i}", text=f"doc {i}") for i in range(4)]
    labels = {"q1/d0": {"qid": "q1", "type": "correct", "answer": "Paris"},
              "q1/d1": {"qid": "q1", "type": "misinfo", "answer": "Lyon"},
              "q1/d2": {"qid": "q1", "type": "correct", "answer": "the Paris"},
              "q1/d3": {"qid": "q1", "type": "correct", "answer": "Nice"}}
    return EvalSet(name="toy", documents=docs, queries=[("q1", "capital")],
                   qrels={"q1": {"q1/d0": 1, "q1/d2": 1, "q1/d3": 1}},
                   bad={"q1": {"q1/d1"}}, pools=None, doc_labels=labels, notes=[],
                   query_labels={"q1": {"gold_answers": ["Paris", "Nice"]}})


def test_answer_coverage_by_hand():
    cov = answer_coverage(toy_evalset(), 2)
    # top 2: d1 (misinfo) and d2 ("the Paris" normalises to "paris"): 1 of 2 gold answers
    assert cov({"q1": {"q1/d1": 4.0, "q1/d2": 3.0, "q1/d3": 2.0, "q1/d0": 1.0}}) == {"q1": 0.5}
    assert cov({"q1": {"q1/d0": 4.0, "q1/d3": 3.0}}) == {"q1": 1.0}
    assert cov({}) == {"q1": 0.0}


@pytest.mark.parametrize("rate", [0.0, 0.25, 0.5])
def test_noisy_types_flip_exactly_the_stated_share(rate):
    ev = toy_evalset()
    types = noisy_types(ev, rate, np.random.default_rng(0))
    clean = noisy_types(ev, 0.0, np.random.default_rng(0))
    assert clean["q1/d1"] == "ai_generated" and clean["q1/d0"] == "established_news"
    flipped = sum(types[d] != clean[d] for d in types)
    assert flipped == round(rate * len(types))


def test_unknown_bench_name_lists_choices():
    with pytest.raises(ValueError, match="trec2019-hm"):
        run_bench("msmarco", BenchOptions())
    with pytest.raises(ValueError, match="--path is required"):
        run_bench("newspolluted", BenchOptions())


#: the questions of NewsPolluted (480) that the bench smoke check runs (40: the curve's six
#: points and its order below hold on them as on 120, for a third of the cost); the whole file
#: is `credrank bench newspolluted` (bench/)
NEWS_QUESTIONS = 40


def test_cli_bench_newspolluted_with_noisy_prior_curve(shared_data, tmp_path):
    whole = json.loads((shared_data / "cag" / "NewsPolluted.json").read_text(encoding="utf-8"))
    assert len(whole) > 400
    path = tmp_path / "NewsPolluted.json"
    path.write_text(json.dumps(whole[:NEWS_QUESTIONS]), encoding="utf-8")
    res = CliRunner().invoke(app, ["bench", "newspolluted", "--path", str(path), "--embedder",
                                   "hashing", "--json", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    assert out["credrank_bench"] == 2 and out["data"]["queries"] == NEWS_QUESTIONS
    curve = out["tables"]["noisy_priors"]
    assert curve["kind"] == "sweep" and curve["parameter"] == "wrong_type_share"
    base = next(r for r in curve["rows"] if r["system"] == curve["baseline"])
    points = [r for r in curve["rows"] if "wrong_type_share" in r["params"]]
    assert [r["params"]["wrong_type_share"] for r in points] == [0.0, 0.1, 0.2, 0.3, 0.4, 0.5]
    assert all(r["reads_labels"] for r in points) and base["reads_labels"] is False
    h1 = [r["metrics"]["harmful@1"]["mean"] for r in points]
    # a correct prior removes fakes from rank 1; a wrong one gives that back step by step
    assert h1[0] < base["metrics"]["harmful@1"]["mean"]
    assert h1[0] <= h1[2] <= h1[-1]
    assert (tmp_path / "out" / "noisy_priors.png").is_file()


# ---------------------------------------------------------------- systems described as specs


def test_bench_systems_that_are_searches_carry_their_spec(demo_result):
    from credrank.pipeline.spec import PipelineSpec

    doc = demo_result.to_json()
    rows = {r["system"]: r for r in doc["tables"]["results"]["rows"]}
    assert rows["similarity only"]["pipeline"] == PipelineSpec.of(top_k=5,
                                                                  fetch_k=15).to_dict()
    assert rows["aggressive priors"]["pipeline"] == PipelineSpec.of(
        {"stage": "prior", "priors": "aggressive"}, top_k=5, fetch_k=15).to_dict()
    smoothing = rows["current + smoothing m=3 β=0.3"]["pipeline"]
    assert [s["stage"] for s in smoothing["stages"]] == ["prior", "smoothing", "combine",
                                                         "topk"]
    assert smoothing["stages"][1] == {"stage": "smoothing", "m": 3, "beta": 0.3}
    # systems that are no search pipeline have none (the γ tables, the oracles)
    sweep = {r["system"]: r for r in doc["tables"]["dispersion"]["rows"]}
    assert "pipeline" in sweep["similarity only"] and "pipeline" not in sweep["γ=0.5"]
    oracle = {r["system"]: r for r in doc["tables"]["oracle_feedback"]["rows"]}
    assert "pipeline" in oracle["current priors (static)"]
    assert all("pipeline" not in r for n, r in oracle.items() if "oracle" in n)


def test_a_bench_spec_ranks_as_credrank_search_does(demo_result, demo_index_hashing):
    """A row's ``pipeline`` fed to ``credrank search`` over the demo index gives the bench's
    run for every query (the same documents in the same order; a run keeps ranks only)."""
    from credrank.pipeline.spec import PipelineSpec
    from credrank.searcher import Searcher
    from credrank_bench.datasets import read_demo

    rows = {r.system: r for r in demo_result.main.table.rows}
    queries = dict(read_demo().queries)
    with Searcher.open(demo_index_hashing) as searcher:
        for system in ("similarity only", "current priors", "current + smoothing m=5 β=0.5"):
            spec = PipelineSpec.from_dict(rows[system].pipeline)
            run = demo_result.main.runs[system]
            for qid, text in queries.items():
                hits = searcher.search(text, spec).hits()
                bench = sorted(run[qid].items(), key=lambda kv: -kv[1])
                assert [h["doc_id"] for h in hits] == [d for d, _ in bench], (system, qid)


def test_system_of_spec_is_the_hand_built_pipeline():
    from credrank.core.candidates import Candidates
    from credrank.signals.prior import preset
    from credrank_bench.experiments.bench import prior_system, with_priors

    rng = np.random.default_rng(0)
    n = 12
    batch = Candidates(
        query="q", doc_ids=np.array([f"d{i}" for i in range(n)], dtype=object),
        retrieval_score=rng.random(n),
        meta={"source_type": np.array(["government", "blog", "unknown", "news"] * 3,
                                      dtype=object)})
    system = prior_system("compressed", 4, 12)
    assert system.spec is not None and system.reads_labels is False
    assert system.stage.describe() == with_priors(preset("compressed"), 4).describe()
    a, b = system.stage(batch), with_priors(preset("compressed"), 4)(batch)
    assert list(a.doc_ids) == list(b.doc_ids)
    np.testing.assert_array_equal(a.score, b.score)


def test_system_of_spec_runs_its_before_stages_first():
    """``before`` stages (the bench's own: here types assigned by doc id) run on the pool
    before the spec's stages; the system keeps its spec and says it reads labels."""
    from credrank.core.candidates import Candidates
    from credrank.core.pipeline import FunctionStage, Pipeline
    from credrank.evaluate.experiment import System
    from credrank.pipeline.spec import PipelineSpec
    from credrank_bench.experiments.bench import assigned_type_stage

    n = 6
    batch = Candidates(query="q", doc_ids=np.array([f"d{i}" for i in range(n)], dtype=object),
                       retrieval_score=np.linspace(0.9, 0.4, n))
    types = {f"d{i}": ("ai_generated" if i < 3 else "established_news") for i in range(n)}
    spec = PipelineSpec.of({"stage": "prior", "priors": "current"}, top_k=3, fetch_k=6)
    seen: list[list[str]] = []

    def spy(b: Candidates) -> Candidates:
        seen.append(list(b.factors))
        return b

    system = System.of_spec(spec, before=[FunctionStage(spy, name="spy"),
                                          assigned_type_stage(types)], reads_labels=True)
    assert system.spec == spec and system.reads_labels is True
    assert isinstance(system.stage, Pipeline)
    assert [s.name for s in system.stage.stages[:2]] == ["spy", "assigned_types"]
    out = system.stage(batch)
    assert seen == [[]]  # the before stage saw the pool before any factor of the spec
    # the prior reads the assigned types: the three established_news documents come first
    assert list(out.doc_ids) == ["d3", "d4", "d5"]
    plain = System.of_spec(spec)
    assert plain.spec == spec and plain.reads_labels is False
    assert [s.name for s in plain.stage.stages] == [s.name for s in system.stage.stages[2:]]
