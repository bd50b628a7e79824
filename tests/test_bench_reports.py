"""What a bench report says: its own limits, the label-free claim only where it holds, every
value its tests are computed from in ``per_query.csv`` (full precision, per query or per other
unit), and plain-text tables whose words stay whole. Tiny synthetic inputs."""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.core.maths import roc_auc
from credrank.evaluate.report import PER_QUERY_HEADER as HEADER
from credrank.evaluate.report import write_per_query
from credrank.evaluate.result import BenchResult
from credrank.evaluate.tables import Cell, Column, ResultTable, Row
from credrank_bench.experiments.benches import BENCHES, BenchOptions, run_bench
from credrank_bench.experiments.limits import DATA_LIMITS
from test_bench_json import coaid_folder

runner = CliRunner()


def cram_file(path: Path) -> Path:
    """A tiny CrAM-like file: 6 questions, 3 real passages and 1 fake each."""
    records = []
    for i, answer in enumerate(["Paris", "Rome", "Madrid", "Lisbon", "Berlin", "Vienna"]):
        docs = [{"text": f"CNN news: the capital city of country {i} is not {answer}.",
                 "is_misinformation": True, "gpt_truthfulness_0_10": 2}]
        docs += [{"text": f"{answer} is the capital city of country {i} (part {j}).",
                  "is_misinformation": False, "gpt_truthfulness_0_10": 8} for j in range(3)]
        records.append({"id": str(i), "question": f"what is the capital city of country {i}",
                        "answers": [answer], "wrong_answer": "Nowhere", "docs": docs})
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def per_query(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames or ()) == HEADER
        return list(reader)


def values(rows: list[dict[str, str]], table: str, system: str, measure: str
           ) -> dict[str, float]:
    return {r["qid"]: float(r["value"]) for r in rows
            if (r["table"], r["system"], r["measure"]) == (table, system, measure)}


# -- item 5: each bench's own limits ---------------------------------------------------------------

def test_every_bench_has_limits_of_its_own() -> None:
    for name in BENCHES:
        keys = ["stress", name] if name.startswith("stress-") else [name]
        assert all(DATA_LIMITS.get(k) for k in keys), name
    texts = {n: " ".join(DATA_LIMITS[n]) for n in DATA_LIMITS}
    assert "source type nearly encodes the label" in texts["coaid-priors"]
    assert len(set(texts.values())) == len(texts)  # no two benches share their list
    for name, text in texts.items():  # the TREC/demo boilerplate stays where it belongs
        assert "15 of TREC 2019 HM's 29 topics" not in text, name  # RUN_LIMITS: with the counts


def test_coaid_report_states_coaids_limits(tmp_path: Path) -> None:
    """``report.md``'s Limits listed the TREC and demo limits for CoAID, never CoAID's own."""
    root = coaid_folder(tmp_path / "coaid")
    out = tmp_path / "out"
    report = tmp_path / "report.md"
    res = runner.invoke(app, ["bench", "coaid-priors", "--path", str(root), "--json", "--out",
                              str(out), "--report", str(report), "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    limits = doc["details"]["limits"]
    assert limits[:len(DATA_LIMITS["coaid-priors"])] == DATA_LIMITS["coaid-priors"]
    assert not any("TREC" in n or "demo" in n for n in limits)
    for md in (out / "report.md", report):
        section = md.read_text(encoding="utf-8").split("\n## Limits\n", 1)[1]
        assert section.strip().splitlines() == [f"- {n}" for n in limits], md
    assert (out / "report.md").read_text(encoding="utf-8").count("## Limits") == 1


def test_run_limits_follow_the_run(demo_result: BenchResult) -> None:
    limits = demo_result.details["limits"]
    assert "Embedder 'hashing': a test stand-in" in " ".join(limits)
    assert any(n.startswith("Rows marked [reads labels]") for n in limits)  # oracle feedback


@pytest.fixture(scope="module")
def demo_result() -> BenchResult:
    from credrank.index.embed import get_embedder

    get_embedder.cache_clear()
    return run_bench("demo", BenchOptions(embedder="hashing"))


# -- item 3: the demo's --seed reaches its draws ------------------------------------------------

def test_the_demo_seed_seeds_its_bootstrap(demo_result: BenchResult) -> None:
    """``--seed`` changed nothing in demo but ``settings.seed``: its resamples were always
    drawn with seed 0. Now the seed draws them (0 by default: the published numbers stay)."""
    other = run_bench("demo", BenchOptions(embedder="hashing", seed=1))
    assert other.settings["seed"] == 1
    for key in ("results", "dispersion", "oracle_feedback"):
        a, b = demo_result.table(key), other.table(key)
        cells = [(r.metrics[c.name], b.row(r.system).metrics[c.name]) for r in a.rows
                 for c in a.columns]
        assert all(x.mean == y.mean for x, y in cells), key
        assert any((x.ci_low, x.ci_high) != (y.ci_low, y.ci_high) for x, y in cells), key


# -- item 7: per_query.csv at full precision, per unit -----------------------------------------

def test_per_query_csv_reproduces_the_randomisation_tests(demo_result: BenchResult,
                                                          tmp_path: Path) -> None:
    """At 6 decimals the exact test on the demo's 10 queries could not be redone (p 0.375
    from the file against 0.38671875 in the table: ties were broken by rounding)."""
    from credrank.evaluate.stats import compare

    rows = per_query(write_per_query(demo_result, tmp_path / "per_query.csv"))
    checked = 0
    for key, exp in demo_result.experiments.items():
        base = exp.table.baseline
        for row in exp.table.rows:
            for col in exp.table.columns:
                cell = row.metrics[col.name]
                got = values(rows, key, row.system, col.name)
                assert got == exp.per_query[row.system][col.name]  # every digit
                if cell.p_value is None:
                    continue
                ref = values(rows, key, base, col.name)
                assert compare(ref, got, seed=0).p_value == cell.p_value
                checked += 1
    assert checked > 30
    compressed = demo_result.table("results").row("compressed priors").metrics["nDCG@5"]
    assert compressed.p_value == pytest.approx(0.38671875)


def test_coaid_per_query_csv_holds_each_held_out_item(tmp_path: Path) -> None:
    root = coaid_folder(tmp_path / "coaid")
    out = tmp_path / "out"
    res = runner.invoke(app, ["bench", "coaid-priors", "--path", str(root), "--json", "--out",
                              str(out), "-q"])
    assert res.exit_code == 0, res.output
    table = {r["system"]: r for r in json.loads(res.stdout)["tables"]["predictors"]["rows"]}
    rows = per_query(out / "per_query.csv")
    label = values(rows, "predictors", "label (CoAID real = 1)", "real")
    assert len(label) == 3 and sorted(label.values()) == [0.0, 1.0, 1.0]
    for name in ("fitted", "base", "constant"):
        p = values(rows, "predictors", name, "P(real)")
        assert set(p) == set(label)
        ids = sorted(p)
        auc = roc_auc([bool(label[i]) for i in ids], [p[i] for i in ids])
        assert auc == pytest.approx(table[name]["metrics"]["AUC"]["mean"])
        for measure in ("log-loss", "Brier"):
            terms = values(rows, "predictors", name, measure)
            assert np.mean(list(terms.values())) == pytest.approx(
                table[name]["metrics"][measure]["mean"], abs=1e-15)


def goldengaze_file(path: Path) -> Path:
    """6 topics (3 helpful, 3 unhelpful) answered by 6 hosts of different reliability."""
    rng = np.random.default_rng(0)
    lines = ["topic_id,correct_stance,host,helpful_probability"]
    for t in range(6):
        stance = "helpful" if t % 2 == 0 else "unhelpful"
        for h in range(6):
            right = rng.random() < 0.4 + 0.1 * h
            helpful = (stance == "helpful") == right
            for _ in range(1 + h % 2):
                lines.append(f"{101 + t},{stance},h{h}.com,{0.9 if helpful else 0.1}")
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode("utf-8")))
    return path


def test_goldengaze_per_query_csv_holds_each_topic(tmp_path: Path) -> None:
    """The tables report Δ and wins/losses/ties per topic; per_query.csv held the header."""
    result = run_bench("goldengaze-hosts", BenchOptions(goldengaze_file(tmp_path / "g.csv.gz")))
    rows = per_query(write_per_query(result, tmp_path / "per_query.csv"))
    for key in ("unsupervised", "anchored_loto", "host_filters"):
        table = result.table(key)
        base = values(rows, key, "majority", "accuracy")
        assert len(base) == 6
        for row in table.rows:
            got = values(rows, key, row.system, "accuracy")
            cell = row.metrics["accuracy"]
            assert set(got) == set(base) and np.mean(list(got.values())) == cell.mean
            if row.system != "majority":
                assert cell.wins == sum(got[t] > base[t] for t in base)
                assert cell.losses == sum(got[t] < base[t] for t in base)
    few = result.table("anchored_few")
    for row in few.rows:
        for col in few.columns:
            reps = values(rows, "anchored_few", row.system, col.name)
            assert np.mean(list(reps.values())) == pytest.approx(row.metrics[col.name].mean)
    assert "per_unit" not in result.to_json()["details"]  # the units stay out of the JSON


def test_simulation_per_unit_values_are_the_repeats() -> None:
    from credrank_bench.experiments.ra_rag_simulation import run_simulation, simulation_tables

    res = run_simulation(seed=0, repeats=2, scenarios=(("honest", 0.7), ("copies", 0.6)))
    votes, _ = simulation_tables(res)
    units = res["per_unit"]["vote_accuracy"]
    for row in votes.rows:
        for col in votes.columns:
            reps = units[row.system][col.name]
            assert list(reps) == ["repeat 1", "repeat 2"]
            assert np.mean(list(reps.values())) == pytest.approx(row.metrics[col.name].mean)


# -- item 4: fitted on this set's labels is not label-free for it -------------------------------

def test_label_free_table_names_the_set_its_models_saw(tmp_path: Path) -> None:
    """The table titled "Label-free systems" had rows fitted on CrAM NQ's own dev labels."""
    from credrank.index.embed import get_embedder
    from credrank_bench.datasets import read_cram_nq
    from credrank_bench.experiments.bench import prepare
    from credrank_bench.experiments.label_free import label_free_experiment

    evalset = read_cram_nq(cram_file(tmp_path / "c.jsonl"))
    embedder = get_embedder("hashing")
    prepared = prepare(evalset, embedder)
    section, _ = label_free_experiment(evalset, prepared.index, prepared.query_vectors,
                                       embedder, top_k=5, fetch_k=15, seed=0,
                                       measures=["harmful@1", "nDCG@5"])
    assert section is not None
    table = section.table
    assert "label-free" not in table.title.lower()
    assert "development split's labels" in table.title
    notes = " ".join(table.notes)
    assert "not label-free for CrAM NQ" in notes
    assert "reads_labels is false for every row: thresholds" not in notes
    fitted = [r for r in table.rows if r.system != table.baseline]
    assert fitted and all(r.reads_labels is False for r in table.rows)
    for row in fitted:
        assert row.params["not_label_free_for"] == "CrAM NQ", row.system
        assert any(n.startswith("not label-free for CrAM NQ: fitted on its development "
                                "split's labels") for n in row.notes), row.system
    assert "not_label_free_for" not in table.row(table.baseline).params


# -- item 9: plain-text tables keep words whole -------------------------------------------------

def test_plain_tables_never_break_a_word() -> None:
    from rich.console import Console

    from credrank_bench.cli import print_tables

    cols = [Column(f"adversarial, q=0.{i}", "accuracy") for i in range(8)]
    names = ["majority", "IWMV after collapsing detected copies", "oracle weights (true r)"]
    rows = [Row(n, n.startswith("oracle"), {c.name: Cell(0.5 + i / 10) for c in cols})
            for i, n in enumerate(names)]
    result = BenchResult("x", "synthetic", {}, {}, [])
    result.add_table(ResultTable("votes", "Votes", cols, rows, baseline="majority"))
    buf = io.StringIO()
    console = Console(file=buf, width=80, markup=False, highlight=False, force_terminal=False)
    print_tables(result, console)
    words: Any = buf.getvalue().split()
    for word in ("collapsing", "adversarial,", "(baseline)", "labels]", "detected"):
        assert word in words, word
    assert not any(w in words for w in ("collapsin", "adversari", "(baseline", "g"))
    assert math.isfinite(len(buf.getvalue()))
