"""The bench harness: side-by-side experiments, sweeps, noisy priors, report files."""

from __future__ import annotations

import json

import numpy as np
import pytest

from credrank.datasets import EvalSet
from credrank.documents.schema import Document
from credrank.evaluate.bench import answer_coverage, noisy_types
from credrank.evaluate.report import write_report
from credrank.experiments.benches import BenchOptions, run_bench


@pytest.fixture(scope="module")
def demo_result():
    from credrank.index.embed import get_embedder

    get_embedder.cache_clear()
    return run_bench("demo", BenchOptions(embedder="hashing"))


def test_demo_bench_compares_systems_on_the_same_pools(demo_result):
    main = demo_result.main
    names = [r["system"] for r in main.rows]
    assert names[0] == "similarity only" and "current priors" in names
    for row in main.rows[1:]:
        for m in main.measures:
            c = row["metrics"][m]
            assert c["ci_low"] <= c["mean"] <= c["ci_high"]
            d = c["vs_baseline"]
            assert d["wins"] + d["losses"] + d["ties"] == len(main.per_query[row["system"]][m])
            assert d["diff"] == pytest.approx(c["mean"] - main.mean("similarity only", m))


def test_zero_dispersion_reproduces_the_baseline(demo_result):
    sweep = demo_result.sweeps["dispersion"]
    i = sweep["values"].index(0.0)
    for m, values in sweep["measures"].items():
        assert values[i] == pytest.approx(sweep["baseline"][m])


def test_report_folder(tmp_path, demo_result):
    path = write_report(demo_result, tmp_path / "out", demo_result.qrels, "credrank bench demo")
    text = path.read_text()
    assert "## Results" in text and "## Limits" in text and "oracle" in text.lower()
    for name in ("metrics.png", "wins.png", "dispersion.png", "per_query.csv", "result.json",
                 "runs/qrels.txt", "runs/similarity-only.run"):
        assert (tmp_path / "out" / name).is_file(), name
    run_line = (tmp_path / "out" / "runs" / "current-priors.run").read_text().splitlines()[0]
    assert len(run_line.split()) == 6  # qid Q0 docid rank score tag
    assert json.loads((tmp_path / "out" / "result.json").read_text())["credrank_bench"] == 1


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


def test_cli_bench_newspolluted_with_noisy_prior_curve(shared_data, tmp_path):
    from typer.testing import CliRunner

    from credrank.cli import app

    path = shared_data / "cag" / "NewsPolluted.json"
    res = CliRunner().invoke(app, ["bench", "newspolluted", "--path", str(path), "--embedder",
                                   "hashing", "--json", "--out", str(tmp_path / "out")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    assert out["credrank_bench"] == 1 and out["data"]["queries"] > 400
    curve = out["sweeps"]["noisy_priors"]
    h1 = curve["measures"]["harmful@1"]
    # a correct prior removes fakes from rank 1; a wrong one gives that back step by step
    assert h1[0] < curve["baseline"]["harmful@1"]
    assert h1[0] <= h1[2] <= h1[-1]
    assert (tmp_path / "out" / "noisy_priors.png").is_file()
