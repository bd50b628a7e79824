"""The product stance model: grouped nested CV, the model file, the stage and `stance fit`."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import build_batch
from credrank.cli.stance import app
from credrank.core.candidates import StageError
from credrank.index.embed import HashingEmbedder, get_embedder
from credrank.signals.stance import StanceModelError, fit_pairs, load_model, read_pairs, save_model
from credrank.signals.stance_model import (
    L2_GRID,
    StanceConfig,
    StanceExample,
    StanceFeaturizer,
    StanceModel,
    default_configs,
    group_folds,
    grouped_cross_validation,
    log_loss,
    out_of_fold,
)
from credrank.stages.stance import StanceAgreement, stance_stage

TREATMENTS = [("zinc", "colds"), ("cranberry", "infections"), ("traction", "back pain"),
              ("honey", "coughs"), ("garlic", "blood pressure"), ("yoga", "anxiety")]
YES = ("{t} is effective for {c} and is recommended. Studies show {t} helps and reduces "
       "symptoms of {c}.")
NO = ("There is no evidence that {t} works for {c}. {t} is not recommended and is no better "
      "than placebo for {c}.")
HEADER = ["topic", "query", "doc_id", "stance", "text", "url"]


def _rows(topics: int = 6, per_side: int = 3) -> list[dict[str, str]]:
    out = []
    for k in range(topics):
        t, c = TREATMENTS[k % len(TREATMENTS)]
        query = f"does {t} help {c}?"
        for i in range(per_side):
            filler = f" Page {i} of topic {k}."
            out.append({"topic": f"T{k}", "query": query, "doc_id": f"T{k}-y{i}", "stance": "1",
                        "text": YES.format(t=t, c=c) + filler, "url": f"https://a{i}.org/{k}"})
            out.append({"topic": f"T{k}", "query": query, "doc_id": f"T{k}-n{i}", "stance": "0",
                        "text": NO.format(t=t, c=c) + filler, "url": ""})
    return out


def _csv(rows: list[dict[str, str]], header: list[str] = HEADER) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def _examples(topics: int = 6) -> list[StanceExample]:
    return [StanceExample(r["topic"], r["query"], r["text"], int(r["stance"]), r["doc_id"])
            for r in _rows(topics)]


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(pairs CSV, model file) fitted once with the hashing embedder."""
    where = tmp_path_factory.mktemp("stance")
    pairs = where / "pairs.csv"
    pairs.write_text(_csv(_rows()), encoding="utf-8")
    result = fit_pairs(read_pairs(pairs), get_embedder("hashing"), n_boot=200)
    model = where / "model.json"
    save_model(model, result.document)
    return pairs, model


# ---------------------------------------------------------------- folds and CV


def test_group_folds_logo_then_k_fold_deterministic():
    assert group_folds(["b", "a", "b", "c"]) == [("b",), ("a",), ("c",)]
    topics = [f"t{i:02d}" for i in range(25)]
    folds = group_folds(topics, seed=3)
    assert len(folds) == 10
    assert sorted(t for f in folds for t in f) == topics  # every topic exactly once
    assert {len(f) for f in folds} == {2, 3}
    assert group_folds(topics, seed=3) == folds
    assert group_folds(topics, seed=4) != folds


def test_default_configs_offer_interaction_only_when_computed():
    emb = HashingEmbedder(32)
    with_block = default_configs(StanceFeaturizer(emb, use_embedding=False))
    assert [c.interaction for c in with_block] == [False] * len(L2_GRID) + [True] * len(L2_GRID)
    without = default_configs(StanceFeaturizer(emb, use_embedding=False,
                                               use_interaction=False))
    assert [c.to_dict() for c in without] == [{"l2": v, "interaction": False} for v in L2_GRID]


def test_log_loss_hand_computed_and_finite():
    assert log_loss(np.array([1, 0]), np.array([0.8, 0.4])) == pytest.approx(
        -(np.log(0.8) + np.log(0.6)) / 2)
    assert np.isfinite(log_loss(np.array([1]), np.array([0.0])))


def test_grouped_cv_scores_every_pair_out_of_fold():
    examples = _examples()
    featurizer = StanceFeaturizer(HashingEmbedder(64), use_embedding=False)
    cv = grouped_cross_validation(examples, featurizer, seed=0, n_boot=200)
    assert len(cv.oof.y) == len(examples)
    assert sorted(cv.oof.doc_ids) == sorted(e.doc_id for e in examples)
    # every pair was scored by the model of the fold holding its topic ...
    for topic, fold in zip(cv.oof.topics, cv.oof.folds, strict=True):
        assert topic in cv.folds[fold]
        assert cv.fold_configs[fold]["topics"] == list(cv.folds[fold])
    assert cv.folds == [(f"T{k}",) for k in range(6)]  # <= 20 topics: leave-one-topic-out
    # ... and the separable toy is learnt out of fold
    assert cv.oof.accuracy() == 1.0 and cv.oof.auc() == 1.0
    m = cv.metrics()
    assert m["cv"] == "leave-one-topic-out" and m["n_topics"] == 6 and m["n_pairs"] == 36
    lo, hi = m["cv_auc_interval"]
    assert 0.0 <= lo <= hi <= 1.0
    assert cv.model.trained_on == tuple(f"T{k}" for k in range(6))  # final: every topic


def test_out_of_fold_refuses_a_model_that_saw_the_fold():
    examples = _examples(4)
    featurizer = StanceFeaturizer(None, use_embedding=False, use_interaction=False,
                                  use_anchors=False)
    folds = group_folds([e.qid for e in examples])
    honest = [StanceModel(featurizer, 1.0).fit([e for e in examples if e.qid not in f])
              for f in folds]
    assert len(out_of_fold(examples, folds, honest).y) == len(examples)
    leaky = [*honest[:-1], StanceModel(featurizer, 1.0).fit(examples)]
    with pytest.raises(ValueError, match=r"fold 3 \(\['T3'\]\) was trained on topic"):
        out_of_fold(examples, folds, leaky)


def test_grouped_cv_needs_both_stances_and_three_topics():
    featurizer = StanceFeaturizer(None, use_embedding=False, use_interaction=False,
                                  use_anchors=False)
    ones = [e for e in _examples() if e.stance == 1]
    with pytest.raises(ValueError, match="both stances"):
        grouped_cross_validation(ones, featurizer)
    two = [e for e in _examples() if e.qid in ("T0", "T1")]
    with pytest.raises(ValueError, match="at least 3 topics; got 2"):
        grouped_cross_validation(two, featurizer)


def test_config_rejects_bad_l2():
    with pytest.raises(ValueError, match="l2"):
        StanceConfig(0.0)


# ---------------------------------------------------------------- pairs file


def test_read_pairs_reports_every_rejected_row(write):
    rows = _rows(3)
    rows[0]["stance"] = ""       # line 2
    rows[1]["stance"] = "2"      # line 3
    rows[2]["stance"] = "yes"    # line 4
    rows[3]["stance"] = "-1"     # line 5
    rows[4]["text"] = ""         # line 6
    rows[5]["topic"] = " "       # line 7
    rows.append(dict(rows[6]))   # duplicate of line 8
    path = write("pairs.csv", _csv(rows))
    pairs = read_pairs(path)
    assert pairs.rows == len(rows)
    assert pairs.rejected == {"topic empty": 1, "stance empty": 1, "stance not a number": 1,
                              "stance not 0 or 1": 2, "duplicate (topic, doc_id)": 1,
                              "no text (none in the file, no index given)": 1}
    assert pairs.rejected_lines["stance not 0 or 1"] == [3, 5]
    assert pairs.rejected_stances == {"2": 1, "yes": 1, "-1": 1}
    assert len(pairs.examples) + sum(pairs.rejected.values()) == pairs.rows
    assert pairs.report()["used"] == len(rows) - 7


def test_read_pairs_alternative_columns_and_float_stances(write):
    rows = [{"topic_id": "1", "description": "does zinc help colds?", "doc_id": "a",
             "stance": "1.0", "text": "zinc works"},
            {"topic_id": "1", "description": "does zinc help colds?", "doc_id": "b",
             "stance": "0", "text": "zinc does not work"}]
    path = write("p.csv", _csv(rows, ["topic_id", "description", "doc_id", "stance", "text"]))
    pairs = read_pairs(path)
    assert [e.stance for e in pairs.examples] == [1, 0]
    assert pairs.columns["topic"] == "topic_id" and pairs.columns["query"] == "description"
    assert pairs.columns["url"] is None


@pytest.mark.parametrize("drop", ["stance", "doc_id", "topic", "query"])
def test_missing_column_is_named(write, drop):
    header = [h for h in HEADER if h != drop]
    path = write("p.csv", _csv(_rows(3), header))
    with pytest.raises(StanceModelError, match=rf"p\.csv: missing column '{drop}'"):
        read_pairs(path)


def test_no_text_column_needs_an_index(write):
    path = write("p.csv", _csv(_rows(3), ["topic", "query", "doc_id", "stance"]))
    with pytest.raises(StanceModelError, match="no 'text' column and no index"):
        read_pairs(path)


def test_one_stance_only_is_a_clear_error(write):
    path = write("p.csv", _csv([r for r in _rows() if r["stance"] == "1"]))
    with pytest.raises(StanceModelError, match=r"all 18 usable pairs have stance 1"):
        fit_pairs(read_pairs(path), HashingEmbedder(32), n_boot=10)


def test_short_row_names_the_line(write):
    path = write("p.csv", _csv(_rows(3)) + "T9,q,d\n")
    with pytest.raises(StanceModelError,
                       match=r"p\.csv:20: expected 6 fields \(the header's\), got 3"):
        read_pairs(path)


# ---------------------------------------------------------------- model file


def test_model_file_round_trip_gives_identical_predictions(fitted):
    pairs_path, model_path = fitted
    loaded = load_model(model_path)
    doc = loaded.document
    assert doc["credrank_stance_model"] == 2
    assert doc["provenance"]["selection"] == ("nested grouped CV, lowest pooled out-of-fold "
                                              "log loss")
    assert doc["embedder"] == {"name": "hashing", "dim": 256}
    assert doc["training"]["n_pairs"] == 36 and doc["training"]["n_topics"] == 6
    assert len(doc["training"]["sha256"]) == 64
    model = loaded.model()
    again = fit_pairs(read_pairs(pairs_path), get_embedder("hashing"), n_boot=200).model
    texts = ["Zinc is effective and recommended.", "No evidence zinc works; not recommended.",
             ""]
    p1 = model.predict("does zinc help colds?", texts)
    p2 = again.predict("does zinc help colds?", texts)
    assert np.array_equal(p1, p2)
    assert p1[0] > 0.5 > p1[1]
    assert doc["training"]["sha256"] == load_model(model_path).document["training"]["sha256"]
    # a format-1 file (credrank before the training provenance) loads and predicts alike
    old = {k: v for k, v in json.loads(model_path.read_text(encoding="utf-8")).items()
           if k != "provenance"} | {"credrank_stance_model": 1}
    old_path = model_path.with_name("old.json")
    old_path.write_text(json.dumps(old), encoding="utf-8")
    assert np.array_equal(load_model(old_path).model().predict("does zinc help colds?", texts),
                          p1)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda d: d.pop("credrank_stance_model"), "not a stance model file"),
    (lambda d: d.update(credrank_stance_model=3),
     r"bad\.json: credrank_stance_model: expected 1 or 2 \(the formats this credrank reads\), "
     r"got 3"),
    (lambda d: d.pop("provenance"), r"bad\.json: provenance: expected the training provenance"),
    (lambda d: d["logistic"]["weights"].pop(), r"logistic\.weights: expected \d+ numbers"),
    (lambda d: d["logistic"]["scale"].__setitem__(0, 0.0), r"logistic.scale\[0\]"),
    (lambda d: d["settings"].pop("l2"),
     r"settings\.l2: expected a finite number > 0, got nothing \(the key is missing\)"),
    (lambda d: d["embedder"].update(dim="x"), r"embedder\.dim: expected an integer >= 1, got 'x'"),
    (lambda d: d["features"].update(lexicon_sha256="0" * 64), "another lexicon"),
])
def test_bad_model_file_names_the_field(fitted, tmp_path, edit, message):
    doc = json.loads(fitted[1].read_text(encoding="utf-8"))
    edit(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(StanceModelError, match=message) as info:
        load_model(bad)
    assert str(bad) in str(info.value)


def test_model_file_with_nan_is_refused(fitted, tmp_path):
    text = fitted[1].read_text(encoding="utf-8")
    doc = json.loads(text)
    doc["logistic"]["bias"] = 0.123456789
    bad = tmp_path / "nan.json"
    bad.write_text(json.dumps(doc).replace("0.123456789", "NaN"), encoding="utf-8")
    with pytest.raises(StanceModelError, match="NaN"):
        load_model(bad)


def test_embedder_mismatch_names_both(fitted):
    with pytest.raises(StanceModelError, match=r"fitted with embedder 'hashing'.*'minilm'"):
        stance_stage(fitted[1], "minilm")
    with pytest.raises(StanceModelError, match="dimension 64"):
        load_model(fitted[1]).model(HashingEmbedder(64))


# ---------------------------------------------------------------- the stage


def test_stage_adds_a_bounded_agreement_factor(fitted):
    stage = stance_stage(fitted[1], "hashing", floor=0.2, sharpness=2.0, weight_factor=None)
    assert isinstance(stage, StanceAgreement) and stage.name == "agreement"
    texts = ["Zinc is effective and is recommended; it helps.",
             "Studies show zinc helps and reduces symptoms.",
             "There is no evidence zinc works; it is not recommended."]
    batch = build_batch([0.9, 0.8, 0.7], query="does zinc help colds?", text=texts)
    out = stage(batch)
    f = out.factors["agreement"]
    assert np.all((f >= 0.2) & (f <= 1.0)) and np.all(np.isfinite(f))
    assert f[2] < min(f[0], f[1])  # the dissenting page agrees least with the consensus
    assert out.info["agreement"]["consensus"] > 0.5
    assert list(out.column("p_yes")) == pytest.approx(
        list(stage.model.predict("does zinc help colds?", texts)))
    assert stage.describe()["stance_model"]["embedder"] == "hashing"


def test_stage_without_text_is_a_stage_error(fitted):
    stage = stance_stage(fitted[1], "hashing")
    with pytest.raises(StageError, match=r"meta column 'text'.*1 of 2 candidates.*'d1'"):
        stage(build_batch([0.9, 0.5], text=["zinc helps", None]))
    with pytest.raises(StageError, match="2 of 2"):
        stage(build_batch([0.9, 0.5]))
    assert len(stage(build_batch([])).factors["agreement"]) == 0  # empty: nothing to read


def test_stage_settings_are_checked(fitted):
    with pytest.raises(ValueError, match=r"unknown setting.*florr"):
        stance_stage(fitted[1], "hashing", florr=0.2)
    with pytest.raises(ValueError, match="floor"):
        stance_stage(fitted[1], "hashing", floor=1.5)


def test_stage_refuses_an_unfitted_model():
    with pytest.raises(ValueError, match="fitted StanceModel"):
        StanceAgreement(StanceModel(StanceFeaturizer(HashingEmbedder(32))))


# ---------------------------------------------------------------- CLI


def test_cli_fit_end_to_end(write, tmp_path):
    pairs = write("pairs.csv", _csv(_rows()))
    out = tmp_path / "m" / "stance.json"
    result = CliRunner().invoke(app, ["fit", str(pairs), "--out", str(out), "--embedder",
                                      "hashing", "--seed", "1", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["n_pairs"] == 36 and report["n_topics"] == 6
    assert report["cv_accuracy"] == 1.0 and report["cv_auc"] == 1.0
    assert report["pairs"]["rejected"] == 0 and report["model"] == str(out)
    assert load_model(out).document["metrics"]["cv_auc"] == 1.0
    # the model file names the pairs file it saw (a model fitted on a data set's labels is
    # not label-free for it; the file did not say which)
    assert load_model(out).document["training"]["rows"]["file"] == str(pairs)
    parallel = CliRunner().invoke(app, ["fit", str(pairs), "--out", str(out), "--embedder",
                                        "hashing", "--seed", "1", "--json", "--jobs", "2"])
    assert parallel.exit_code == 0, parallel.output
    assert json.loads(parallel.stdout) == report  # the same numbers in two processes
    human = CliRunner().invoke(app, ["fit", str(pairs), "--out", str(out), "--embedder",
                                     "hashing"])
    assert human.exit_code == 0, human.output
    assert "accuracy 1.000" in human.stdout and "topics 6" in human.stdout


def test_cli_reports_rejected_rows_and_errors(write, tmp_path):
    rows = _rows()
    rows[0]["stance"] = "2"
    pairs = write("pairs.csv", _csv(rows))
    out = tmp_path / "m.json"
    ok = CliRunner().invoke(app, ["fit", str(pairs), "--out", str(out), "--embedder",
                                  "hashing", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout)["pairs"]["rejected_by_reason"] == {"stance not 0 or 1": 1}
    missing = write("bad.csv", _csv(rows, ["topic", "query", "doc_id", "text"]))
    bad = CliRunner().invoke(app, ["fit", str(missing), "--out", str(out), "--embedder",
                                   "hashing"])
    assert bad.exit_code == 2 and "missing column 'stance'" in bad.output
    no_out = CliRunner().invoke(app, ["fit", str(pairs)])
    assert no_out.exit_code == 2 and "--out" in no_out.output


def test_cli_reads_texts_from_an_index(write, tmp_path):
    from credrank.documents import iter_documents
    from credrank.index import open_store
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    rows = _rows(4)
    corpus = write("corpus.jsonl", "".join(
        json.dumps({"id": r["doc_id"], "text": r["text"], "url": "https://x.org/" + r["doc_id"]})
        + "\n" for r in rows[:-1]))  # the last page is not indexed
    emb = get_embedder("hashing")
    where = tmp_path / "index"
    with open_store(where, "edge", embedder=emb.name, dim=emb.dim, create=True) as idx:
        index_documents(iter_documents(corpus), idx, emb, SourceTyper())
    pairs = write("pairs.csv", _csv(rows, ["topic", "query", "doc_id", "stance"]))
    out = tmp_path / "m.json"
    result = CliRunner().invoke(app, ["fit", str(pairs), "--out", str(out), "--index",
                                      str(where), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["pairs"]["text_from_index"] == len(rows) - 1
    assert report["pairs"]["rejected_by_reason"] == {"doc_id not in the index": 1}
    # the model file says which index its page texts came from (it had no index key)
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert saved["training"]["rows"]["index"] == report["pairs"]["index"] == str(where)
    assert report["embedder"]["name"] == "hashing"
    clash = CliRunner().invoke(app, ["fit", str(pairs), "--out", str(out), "--index",
                                     str(where), "--embedder", "minilm"])
    assert clash.exit_code == 2 and "'minilm'" in clash.output and "'hashing'" in clash.output
    # the error was followed by a second one, "error: 2" (the exit caught as a RuntimeError)
    assert clash.output.count("error:") == 1, clash.output


# ---------------------------------------------------------------- real data


def test_trec_pairs_grouped_cv_with_hashing(shared_data):
    path = shared_data / "trec2019_hm" / "trec2019_hm_dev.csv"
    if not path.is_file():
        pytest.skip(f"real data not available: expected {path}")
    pairs = read_pairs(path)
    assert pairs.rows == 156 and pairs.rejected == {}  # the dev file's stances are all 0/1
    result = fit_pairs(pairs, get_embedder("hashing"), n_boot=500)
    report = result.report
    assert report["n_pairs"] == 156 and report["n_topics"] == 15
    assert report["cv"] == "leave-one-topic-out"
    assert report["cv_auc"] is not None and 0.5 < report["cv_auc"] < 1.0
    lo, hi = report["cv_auc_interval"]
    assert lo <= report["cv_auc"] <= hi
    assert len(report["fold_configs"]) == 15


def test_search_applies_a_stance_model(fitted, demo_index_hashing):
    """`credrank search --stance-model`: the factor agreement on every hit, the model named
    in the settings; a model for another embedder is refused, naming both."""
    from credrank.cli import app as main_app

    _pairs, model = fitted
    res = CliRunner().invoke(main_app, ["search", "Does vitamin D help COVID-19?", "--index",
                                        str(demo_index_hashing), "--stance-model", str(model),
                                        "--stance-param", "floor=0.2", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert {"model": str(model), "embedder": "hashing", "floor": 0.2}.items() <= \
        doc["settings"]["stance"].items()
    factors = [h["score_breakdown"]["agreement"] for h in doc["hits"]]
    assert factors and all(0.2 <= f <= 1.0 for f in factors)
    assert doc["info"]["agreement"]["consensus"] is not None
    other = json.loads(model.read_text(encoding="utf-8"))
    other["embedder"]["name"] = "minilm"
    wrong = model.with_name("other.json")
    wrong.write_text(json.dumps(other), encoding="utf-8")
    clash = CliRunner().invoke(main_app, ["search", "q", "--index", str(demo_index_hashing),
                                          "--stance-model", str(wrong)])
    assert clash.exit_code == 2
    assert "'minilm'" in clash.output and "'hashing'" in clash.output
    bad = CliRunner().invoke(main_app, ["search", "q", "--index", str(demo_index_hashing),
                                        "--stance-model", str(model), "--stance-param",
                                        "colour=1"])
    assert bad.exit_code == 2 and "unknown key" in bad.output
