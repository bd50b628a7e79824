"""The product credibility model: labels, grouped CV without leakage, the model file, search."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.credibility import (
    Config,
    CredibilityExample,
    CredibilityFeaturizer,
    fit_from_labels,
    group_folds,
    grouped_cross_validation,
    load_model,
    match_labels,
    read_labels,
    save_model,
)
from credrank.credibility.cv import bootstrap_auc
from credrank.documents import iter_documents
from credrank.index.embed import HashingEmbedder, get_embedder
from credrank.index.ingest import index_documents
from credrank.index.memory import InMemoryIndex
from credrank.index.opener import open_store
from credrank.pipeline.compile import (
    build_stages,
    check_stages,
    compile_rerank,
    compile_spec,
    context,
    decide_pushdown,
    reads,
)
from credrank.pipeline.shortcuts import CLI, in_words, spec_from_options
from credrank.pipeline.spec import SpecError
from credrank.provenance import SourceTyper
from demo_labels import demo_docs, labels_rows, write_labels

FAST = (Config(("cues", "url"), 10.0), Config(("url",), 100.0))




@pytest.fixture()
def labels_csv(tmp_path: Path) -> Path:
    return write_labels(tmp_path / "labels.csv",
                         [*labels_rows(), ("no-such-doc", 1, "q01"), ("missing-2", 0, "q02")])


# ---------------------------------------------------------------- labels


def test_labels_file_parsing_and_errors(write):
    ok = read_labels(write("a.csv", "url,credible\nhttp://a.gov/x,TRUE\nhttp://b.com,false\n"))
    assert ok.by == "url" and not ok.has_topic
    assert [r.credible for r in ok.rows] == [1, 0]
    with pytest.raises(ValueError, match=r"bad\.csv:3: credible: expected 0, 1, true or false"):
        read_labels(write("bad.csv", "doc_id,credible\nd1,1\nd2,maybe\n"))
    with pytest.raises(ValueError, match=r"nocol\.csv: header: expected a 'doc_id' or 'url'"):
        read_labels(write("nocol.csv", "id,credible\nd1,1\n"))
    with pytest.raises(ValueError, match=r"empty\.csv:2: doc_id: expected a non-empty"):
        read_labels(write("empty.csv", "doc_id,credible\n,1\n"))
    with pytest.raises(ValueError, match="no data rows"):
        read_labels(write("none.csv", "doc_id,credible\n"))


def test_unknown_ids_are_reported_and_counted(demo_index_hashing: Path, labels_csv: Path):
    labels = read_labels(labels_csv)
    with open_store(demo_index_hashing) as idx:
        examples, report = match_labels(labels, idx, "topic")
    assert report.unknown == 2
    assert report.examples["unknown"][0].endswith("no-such-doc")
    assert report.rows == report.used_rows + sum(report.skipped.values())
    assert report.used_rows == len(labels_rows())
    assert len(examples) == len({r[0] for r in labels_rows()})


def test_conflicting_duplicate_rows_are_counted_as_outvoted(demo_index_hashing: Path,
                                                            tmp_path: Path):
    # a page labelled 1 once and 0 twice took 0 by majority without a word
    rows = labels_rows()
    doc, credible, topic = rows[0]
    flipped = [(doc, 1 - credible, topic)] * 2
    labels = read_labels(write_labels(tmp_path / "dup.csv", [*rows, *flipped]))
    with open_store(demo_index_hashing) as idx:
        examples, report = match_labels(labels, idx, "topic")
    assert report.outvoted == 1 and report.to_dict()["outvoted"] == 1
    assert f"{doc} in {topic}: 1 of 3 rows outvoted" in report.outvoted_examples[0]
    [page] = [e for e in examples if e.doc_id == doc]
    assert page.labels[topic] == 1 - credible  # the majority


def test_a_credibility_label_in_the_pages_own_text_is_counted(tmp_path: Path):
    # the CAG data's leaked "Low credibility of text:" (SOURCES.md) was learnt without a word
    emb = HashingEmbedder(16)
    corpus, rows = [], []
    for i in range(24):
        label = i % 2
        said = "High" if label else "Low"
        corpus.append({"id": f"p{i}", "text": f"{said} credibility of text: report {i} on "
                       "vitamin d", "url": f"https://site{i}.example/x"})
        rows.append((f"p{i}", label, f"t{i // 4}"))
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in corpus), encoding="utf-8")
    with open_store(tmp_path / "idx", "edge", embedder=emb.name, dim=emb.dim,
                    create=True) as idx:
        index_documents(iter_documents(path), idx, emb, SourceTyper())
        result = fit_from_labels(write_labels(tmp_path / "l.csv", rows), idx, emb,
                                 configs=FAST, n_boot=50)
    assert result.report["self_labelled"] == 24


def test_match_by_url_and_host_groups_and_ties(tmp_path: Path):
    docs = demo_docs()
    ids = ["d001", "d002", "d003"]
    emb = HashingEmbedder(16)
    from credrank.demo_corpus import index_demo

    store = InMemoryIndex.create(emb.name, emb.dim)
    index_demo(store, emb)
    rows = [(docs[d]["url"], 1, "t") for d in ids] + [(docs["d001"]["url"], 0, "t")]
    labels = read_labels(write_labels(tmp_path / "u.csv", rows, ("url", "credible", "topic")))
    examples, report = match_labels(labels, store, "host")
    # d001 has one 1 and one 0 in its group: a tie, reported with its two rows
    assert report.skipped["tie"] == 2 and report.used_rows == 2
    assert {e.doc_id for e in examples} == {"d002", "d003"}
    for e in examples:
        (group,) = e.labels
        assert group in docs[e.doc_id]["url"]


def test_group_by_topic_without_topic_column_is_an_error(demo_index_hashing, tmp_path):
    labels = read_labels(write_labels(tmp_path / "n.csv", [("d001", 1)],
                                       ("doc_id", "credible")))
    with open_store(demo_index_hashing) as idx, pytest.raises(ValueError,
                                                              match="needs a 'topic' column"):
        match_labels(labels, idx, "topic")


def test_one_class_only_and_too_few_groups_are_errors(demo_index_hashing, tmp_path):
    rows = [(d, 1, t) for d, _, t in labels_rows()]
    one = write_labels(tmp_path / "one.csv", rows)
    two = write_labels(tmp_path / "two.csv",
                        [r for r in labels_rows() if r[2] in ("q01", "q02")])
    with open_store(demo_index_hashing) as idx:
        emb = get_embedder(idx.manifest.embedder)
        with pytest.raises(ValueError, match="one class only") as info:
            fit_from_labels(one, idx, emb, configs=FAST, n_boot=50)
        assert "{" not in str(info.value)  # counts in words, not a Python dict
        assert "label rows; skipped: " in str(info.value)
        with pytest.raises(ValueError, match="at least 3 groups"):
            fit_from_labels(two, idx, emb, configs=FAST, n_boot=50)
        # no row matched: said as such (it said "one class only (none)")
        unknown = write_labels(tmp_path / "unknown.csv", [("x1", 1, "q01"), ("x2", 0, "q02")])
        with pytest.raises(ValueError, match=r"unknown\.csv: none of the 2 label rows matched "
                                             r"a usable page of the index \(skipped: unknown 2"):
            fit_from_labels(unknown, idx, emb, configs=FAST, n_boot=50)


# ---------------------------------------------------------------- grouped CV


def _toy(n_groups: int, per_group: int = 4) -> list[CredibilityExample]:
    out = []
    for g in range(n_groups):
        for i in range(per_group):
            good = i % 2 == 0
            url = (f"https://www.h{g}-{i}.gov/a" if good else f"http://x{g}-{i}.biz/p.php?i=1")
            text = ("A randomized clinical trial, journal study." if good
                    else "BUY NOW!!! miracle cure $19.99 call 1-800-555-0199")
            out.append(CredibilityExample(f"g{g}-{i}", text, url, {f"g{g}": int(good)}))
    # a page judged in two groups
    out.append(CredibilityExample("shared", "A journal study.", "https://nih.gov/s",
                                  {"g0": 1, "g1": 1}))
    return out


def test_group_folds_logo_and_deterministic_kfold():
    assert group_folds(["b", "a", "c"]) == [("b",), ("a",), ("c",)]
    many = [f"h{i}" for i in range(25)]
    folds = group_folds(many, seed=3)
    assert len(folds) == 10 and sorted(g for f in folds for g in f) == sorted(many)
    assert {len(f) for f in folds} == {2, 3}
    assert folds == group_folds(list(reversed(many)), seed=3)
    assert folds != group_folds(many, seed=4)


@pytest.mark.parametrize("n_groups", [4, 23])
def test_cv_never_scores_a_group_with_a_model_that_saw_it(n_groups):
    examples = _toy(n_groups)
    featurizer = CredibilityFeaturizer(None)
    cv = grouped_cross_validation(examples, featurizer, FAST, seed=0, n_boot=200)
    by_id = {e.doc_id: e for e in examples}
    assert len(cv.oof.y) == sum(len(e.labels) for e in examples)  # every pair scored once
    pairs = set(zip(cv.oof.groups, cv.oof.doc_ids, strict=True))
    assert len(pairs) == len(cv.oof.y)
    for g, fold in zip(cv.oof.groups, cv.oof.folds, strict=True):
        assert g in cv.folds[fold]
        # the fold's configuration was chosen without the fold's groups
        assert cv.fold_configs[fold]["groups"] == list(cv.folds[fold])
    # rebuild each fold's model: it never trained on a page judged in one of its groups
    from credrank.credibility.cv import fit_folds

    for fold, conf in zip(cv.folds, cv.fold_configs, strict=True):
        config = Config(tuple(conf["config"]["groups"]), conf["config"]["l2"])
        (model,) = fit_folds(examples, featurizer, config, [fold])
        seen = set(model.trained_on)
        assert not any(set(fold) & set(by_id[d].labels) for d in seen)
    assert cv.auc is not None and cv.auc > 0.9
    lo, hi = cv.interval
    assert 0.0 <= lo <= hi <= 1.0
    assert cv.model.trained_on and len(cv.model.trained_on) == len(examples)
    assert cv.metrics()["cv"] == ("leave-one-group-out" if n_groups <= 20
                                  else "10-fold by groups")


def test_bootstrap_is_seeded_and_undefined_without_both_classes():
    groups = ["a", "a", "b", "b", "c", "c"]
    y = np.array([1, 0, 1, 0, 1, 0], dtype=float)
    p = np.array([0.9, 0.2, 0.6, 0.4, 0.3, 0.7])
    assert bootstrap_auc(groups, y, p, n_boot=100, seed=1) == bootstrap_auc(groups, y, p,
                                                                         n_boot=100, seed=1)
    assert bootstrap_auc(groups, np.ones(6), p, n_boot=50) == (None, 0)


# ---------------------------------------------------------------- model file


def test_model_file_round_trip_and_validation(demo_index_hashing, labels_csv, tmp_path):
    with open_store(demo_index_hashing) as idx:
        emb = get_embedder(idx.manifest.embedder)
        result = fit_from_labels(labels_csv, idx, emb, configs=(
            Config(("cues", "url", "embedding"), 10.0), Config(("url",), 10.0)), n_boot=100)
        pages = idx.read_payloads(["d001", "d050", "d100"])
    assert result.report["unknown"] == 2
    path = tmp_path / "model.json"
    save_model(path, result.document)
    saved = load_model(path)
    texts, urls = [p["text"] for p in pages], [p["url"] for p in pages]
    np.testing.assert_allclose(saved(texts, urls), result.cv.model.predict(texts, urls),
                               rtol=0, atol=1e-12)
    doc = json.loads(path.read_text())
    assert doc["credrank_credibility_model"] == 2
    assert doc["provenance"]["group_by"] == "topic" and doc["provenance"]["n_folds"] == 10
    assert doc["training"]["n_groups"] == 10 and doc["embedder"]["name"] == "hashing"
    assert len(doc["training"]["sha256"]) == 64
    # what data it saw: the labels file and the index (a model fitted on labels of a data
    # set is not label-free for it; the file did not say which)
    assert doc["training"]["labels"] == [str(labels_csv)]
    assert doc["training"]["index"] == str(demo_index_hashing)
    older = json.loads(path.read_text())
    del older["training"]["labels"], older["training"]["index"]  # a file made before them
    (tmp_path / "older.json").write_text(json.dumps(older), encoding="utf-8")
    load_model(tmp_path / "older.json")

    def broken(name: str, change) -> Path:
        data = json.loads(path.read_text())
        change(data)
        out = tmp_path / name
        out.write_text(json.dumps(data))
        return out

    with pytest.raises(ValueError, match=r"w\.json: logistic\.weights: expected \d+ numbers"):
        load_model(broken("w.json", lambda d: d["logistic"]["weights"].pop()))
    with pytest.raises(ValueError, match=r"logistic\.scale\[0\]: expected a finite number > 0"):
        load_model(broken("s.json", lambda d: d["logistic"]["scale"].__setitem__(0, 0)))
    with pytest.raises(ValueError, match=r"f\.json: floor: expected a finite number in "
                                         r"\[0, 1\], got 2"):
        load_model(broken("f.json", lambda d: d.__setitem__("floor", 2)))
    with pytest.raises(ValueError, match=r"expected 1 or 2 \(the formats this credrank reads\), "
                                         r"got 3 \(written by a newer credrank\?\)"):
        load_model(broken("v.json", lambda d: d.__setitem__("credrank_credibility_model", 3)))
    with pytest.raises(ValueError, match=r"p\.json: provenance: expected the training "
                                         r"provenance \(a table\), got nothing"):
        load_model(broken("p.json", lambda d: d.pop("provenance")))
    with pytest.raises(ValueError, match=r"training\.sha256: expected 64 hex digits, got 'x'"):
        load_model(broken("h.json", lambda d: d["training"].__setitem__("sha256", "x")))
    with pytest.raises(ValueError, match="not a credibility model"):
        load_model(broken("o.json", lambda d: d.pop("credrank_credibility_model")))
    # a format-1 file (credrank before the training provenance) loads and predicts alike
    old = load_model(broken("old.json", lambda d: (d.pop("provenance"), d.__setitem__(
        "credrank_credibility_model", 1))))
    assert old.version == 1 and np.array_equal(old(texts, urls), saved(texts, urls))

    # another embedder's index: refused, naming both
    other = broken("other.json", lambda d: d["embedder"].__setitem__("name", "minilm"))
    spec = spec_from_options(credibility_model=other)
    with open_store(demo_index_hashing) as idx, pytest.raises(
            SpecError, match="'minilm'; this index uses 'hashing'"):
        compile_spec(spec, idx, emb)


def test_credibility_options_and_errors(tmp_path):
    with pytest.raises(ValueError, match="credibility_floor: only with credibility_model"):
        spec_from_options(credibility_floor=0.5)
    # the file is read when the stages are checked (before an index is opened), and the
    # error said in the options' words as credrank search says it
    spec = spec_from_options(credibility_model=tmp_path / "missing.json")
    with pytest.raises(SpecError, match=r"missing\.json: the credibility model does not "
                                        r"exist") as caught:
        check_stages(spec)
    assert in_words(caught.value, spec.to_dict(), CLI).startswith("--credibility-model: ")


# ---------------------------------------------------------------- CLI end to end


def test_cli_fit_then_search_applies_the_credibility_factor(demo_index_hashing, labels_csv,
                                                            tmp_path):
    runner = CliRunner()
    model = tmp_path / "cred.json"
    res = runner.invoke(app, ["credibility", "fit", str(labels_csv), "--index",
                              str(demo_index_hashing), "--out", str(model), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["unknown"] == 2 and report["n_groups"] == 10 and report["n_pages"] == 117
    assert 0.5 < report["cv_auc"] <= 1.0
    assert report["cv_auc_interval"][0] <= report["cv_auc"] <= report["cv_auc_interval"][1]
    assert report["cv"] == "leave-one-group-out"
    res = runner.invoke(app, ["search", "Does vitamin D prevent COVID-19?", "--index",
                              str(demo_index_hashing), "--credibility-model", str(model),
                              "--credibility-floor", "0.4", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    cred = doc["settings"]["credibility"]
    assert cred["floor"] == 0.4 and cred["model"] == str(model) and cred["version"] == 2
    assert doc["settings"]["pushdown"] is False
    assert doc["hits"]
    factors = [h["score_breakdown"]["credibility"] for h in doc["hits"]]
    assert all(0.4 <= f <= 1.0 for f in factors)
    assert len(set(factors)) > 1
    for h in doc["hits"]:
        b = h["score_breakdown"]
        assert b["final"] == pytest.approx(max(b["retrieval_score"], 0) * b["prior"]
                                           * b["credibility"], abs=1e-9)
    # human output names the model's numbers; a bad labels row is an error naming the line
    res = runner.invoke(app, ["credibility", "fit", str(labels_csv), "--index",
                              str(demo_index_hashing), "--out", str(tmp_path / "m2.json")])
    text = " ".join(res.stdout.split())
    assert res.exit_code == 0 and "grouped CV AUC" in text and "unknown ids: 2" in text
    bad = write_labels(tmp_path / "bad.csv", [("d001", "yes", "q01")])
    res = runner.invoke(app, ["credibility", "fit", str(bad), "--index",
                              str(demo_index_hashing), "--out", str(tmp_path / "m3.json")])
    assert res.exit_code == 2 and "bad.csv:2: credible" in " ".join(res.output.split())


def test_settings_document_names_the_model(demo_index_hashing, labels_csv, tmp_path):
    emb = get_embedder("hashing")
    with open_store(demo_index_hashing) as idx:
        result = fit_from_labels(labels_csv, idx, emb, configs=FAST, n_boot=50)
    save_model(tmp_path / "m.json", result.document)
    spec = spec_from_options(credibility_model=tmp_path / "m.json")
    # without a store: the stages read the text, and the engine cannot score them
    stages = build_stages(spec, context())
    assert "text" in reads(stages)
    assert decide_pushdown(stages, retrieval=spec.retrieval,
                           requested=spec.pushdown).fused is False
    out = compile_rerank(spec, emb).settings
    # the floor applied, the model file's (it said null, the spec's "not given")
    floor = result.document["floor"]
    assert out["credibility"]["floor"] == floor and out["pushdown"] is False
    assert out["pipeline"]["stages"][1]["floor"] is None  # the spec keeps "the file's"
    assert "engine" not in out
    # over the index (which holds no index-time scores of this model): the same
    with open_store(demo_index_hashing) as idx:
        compiled = compile_spec(spec, idx, emb)
        out = compiled.settings
    assert out["credibility"]["floor"] == floor and out["pushdown"] is False  # the file's
    assert out["engine"] and "text" in reads(compiled.stages)


# ---------------------------------------------------------------- real data


def test_real_trec_labels_through_the_product_path(shared_data: Path, tmp_path: Path):
    path = shared_data / "trec2019_hm" / "trec2019_hm_dev.csv"
    if not path.is_file():
        pytest.skip(f"TREC 2019 HM file not found at {path}")
    from credrank_bench.datasets import load_dataset

    evalset = load_dataset("trec2019-hm", path)
    emb = get_embedder("hashing")
    store = InMemoryIndex.create(emb.name, emb.dim)
    from credrank.index.ingest import index_documents
    from credrank.provenance import SourceTyper

    index_documents(evalset.documents, store, emb, SourceTyper())
    rows = [(d, int(j["credibility"]), t) for d, lab in evalset.doc_labels.items()
            for t, j in lab["judgements"].items() if j.get("credibility") in (0, 1)]
    labels = write_labels(tmp_path / "trec.csv", rows)
    result = fit_from_labels(labels, store, emb, configs=(Config(("cues", "url"), 10.0),),
                             n_boot=200)
    rep = result.report
    assert rep["unknown"] == 0 and rep["n_groups"] == 15
    assert rep["matching"]["used_rows"] == len(rows)
    assert 0.5 < rep["cv_auc"] < 1.0


def test_read_payloads_on_every_backend(demo_index_hashing):
    from credrank.demo_corpus import index_demo
    from credrank.index.qdrant_server import QdrantServerIndex

    emb = get_embedder("hashing")
    memory = InMemoryIndex.create(emb.name, emb.dim)
    index_demo(memory, emb)
    server = QdrantServerIndex.in_memory(emb.name, emb.dim)
    index_demo(server, emb)
    with open_store(demo_index_hashing) as edge:
        for store in (edge, memory, server):
            every = store.read_payloads(fields=("doc_id", "url"))
            assert len(every) == len(store) == 120, type(store).__name__
            assert set(every[0]) == {"doc_id", "url"}
            some = store.read_payloads(["d002", "nope", "d001", "d002"])
            assert sorted(p["doc_id"] for p in some) == ["d001", "d002"]
            assert all(isinstance(p["text"], str) and p["url"] for p in some)
    server.close()
