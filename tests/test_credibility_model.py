"""The learned page-credibility prior: features, LOTO fitting without leakage, the stage."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from conftest import build_batch
from credrank.combine import Combine
from credrank.core.candidates import Candidates, StageError
from credrank.credibility import (
    CUE_NAMES,
    URL_NAMES,
    Config,
    CredibilityExample,
    CredibilityFeaturizer,
    CredibilityModel,
    credibility_report,
    cue_features,
    examples_from_labels,
    held_out,
    loto_credibility_models,
    nested_config_choice,
    training_set,
    url_features,
)
from credrank.index.embed import HashingEmbedder
from credrank.stages.credibility import LearnedCredibilityPrior

GOOD = ("A randomized clinical trial (Smith et al., Journal of Medicine, doi 10.1/x) and a "
        "systematic review found evidence. Reviewed by the National Institute of Health. "
        "References: see the university hospital study {i}.")
BAD = ("BUY NOW!!! Miracle cure, order now for only $19.99! Amazing secret detox, 100% "
       "guaranteed! Call now 1-800-555-0199. Testimonial: it changed my life! Item {i}.")


def _toy(topics: tuple[str, ...] = ("t1", "t2", "t3", "t4"), per_topic: int = 4
         ) -> list[CredibilityExample]:
    out = []
    for t in topics:
        for i in range(per_topic):
            good = i % 2 == 0
            text = (GOOD if good else BAD).format(i=f"{t}-{i}")
            url = (f"https://www.health{i}.gov/{t}/page" if good
                   else f"http://cheap-pills{i}.biz/shop/buy.php?id={i}")
            out.append(CredibilityExample(f"{t}-{i}", text, url, {t: int(good)}))
    return out


# ---------------------------------------------------------------- features


def test_cue_and_url_features_shapes_and_values():
    x = cue_features(BAD.format(i=0))
    assert x.shape == (len(CUE_NAMES),)
    assert np.all(np.isfinite(x))
    rates = dict(zip(CUE_NAMES, x, strict=True))
    assert rates["rate_commerce"] > 0 and rates["rate_phone"] > 0
    assert rates["rate_science"] == 0.0
    u = dict(zip(URL_NAMES, url_features("http://www.a-b.cdc.gov/x/y/z.php?q=1"), strict=True))
    assert u["tld_gov"] == 1.0 and u["path_depth"] == 3.0 and u["host_hyphen"] == 1.0
    assert u["dynamic"] == 1.0 and u["subdomains"] == 1.0 and u["no_url"] == 0.0
    none = url_features(None)
    assert none[-1] == 1.0 and none[:-1].sum() == 0.0
    assert url_features("example.xyz")[URL_NAMES.index("tld_other")] == 1.0
    assert cue_features("")[0] == 0.0


def test_featurizer_groups_and_errors():
    f = CredibilityFeaturizer(HashingEmbedder(32), head_words=5)
    x = f.features(["one two three", "four"], ["http://a.org", None])
    assert x.shape == (2, len(CUE_NAMES) + len(URL_NAMES) + 32)
    assert len(f.columns(["embedding"])) == 32
    assert len(f.columns(["cues", "url"])) == len(CUE_NAMES) + len(URL_NAMES)
    assert f.features([], []).shape == (0, f.width)
    with pytest.raises(ValueError, match="need an embedder"):
        CredibilityFeaturizer(None).columns(["embedding"])
    with pytest.raises(ValueError, match="subset"):
        f.columns(["nope"])
    with pytest.raises(ValueError, match="texts\\[0\\]"):
        f.features([None], [None])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="urls"):
        f.features(["a"], [])


# ---------------------------------------------------------------- classifier


def test_classifier_separates_toy_pages():
    examples = _toy()
    model = CredibilityModel(CredibilityFeaturizer(None), Config(("cues", "url"), 1.0))
    model.fit(examples, exclude=["t4"])
    test = [e for e in examples if "t4" in e.labels]
    p = model.predict([e.text for e in test], [e.url for e in test])
    y = np.array([e.labels["t4"] for e in test])
    assert np.all(p[y == 1] > 0.5) and np.all(p[y == 0] < 0.5)
    assert model.predict([], []).shape == (0,)
    with pytest.raises(ValueError, match="not fitted"):
        CredibilityModel(CredibilityFeaturizer(None), Config(("cues",), 1.0)).predict(["a"],
                                                                                       [None])


def test_majority_label_and_tie_policy():
    assert CredibilityExample("d", "t", None, {"a": 1, "b": 1, "c": 0}).label() == 1
    assert CredibilityExample("d", "t", None, {"a": 1, "b": 0}).label() is None
    assert CredibilityExample("d", "t", None, {}).label() is None


# ---------------------------------------------------------------- leave-one-topic-out


def test_page_judged_for_two_topics_is_never_in_either_topics_training_set():
    examples = [*_toy(("t1", "t2", "t3")),
                CredibilityExample("shared", GOOD.format(i="s"), "http://x.org/a",
                                   {"t1": 1, "t2": 1})]
    for held in ("t1", "t2"):
        train, _ = training_set(examples, [held])
        ids = {e.doc_id for e in train}
        assert "shared" not in ids
        assert not any(held in e.labels for e in train)
    train3, _ = training_set(examples, ["t3"])
    assert "shared" in {e.doc_id for e in train3}
    models = loto_credibility_models(examples, CredibilityFeaturizer(None),
                                     Config(("cues", "url"), 1.0))
    assert set(models) == {"t1", "t2", "t3"}
    for t, model in models.items():
        judged_for_t = {e.doc_id for e in examples if t in e.labels}
        assert judged_for_t.isdisjoint(model.trained_on), t
        assert model.excluded == (t,)
    assert "shared" in models["t3"].trained_on
    # nested: excluding an outer topic removes its pages from every inner model too
    inner = loto_credibility_models(examples, CredibilityFeaturizer(None),
                                    Config(("cues", "url"), 1.0), exclude=["t1"])
    assert set(inner) == {"t2", "t3"}
    t1_pages = {e.doc_id for e in examples if "t1" in e.labels}
    for model in inner.values():
        assert t1_pages.isdisjoint(model.trained_on)
    # the shared page is scored once per judging topic, each time by a model that never saw it
    report = credibility_report(examples, models)
    assert report["n"] == sum(len(e.labels) for e in examples)


def test_held_out_refuses_a_model_trained_on_its_topic():
    examples = _toy(("t1", "t2", "t3"))
    leaky = CredibilityModel(CredibilityFeaturizer(None), Config(("cues",), 1.0)).fit(examples)
    with pytest.raises(ValueError, match="leave-one-topic-out"):
        held_out(examples, {"t1": leaky})


def test_duplicate_doc_ids_and_empty_training_are_errors():
    e = _toy(("t1",), 2)
    with pytest.raises(ValueError, match="twice"):
        training_set([*e, e[0]], [])
    with pytest.raises(ValueError, match="no training page"):
        CredibilityModel(CredibilityFeaturizer(None), Config(("cues",), 1.0)).fit(e, ["t1"])


def test_nested_config_choice_picks_a_grid_point_per_topic():
    examples = _toy(("t1", "t2", "t3"))
    configs = (Config(("cues",), 1.0), Config(("url",), 10.0))
    choice = nested_config_choice(examples, CredibilityFeaturizer(None), configs)
    assert set(choice) == {"t1", "t2", "t3"}
    for c in choice.values():
        assert c["config"] in configs and 0.0 <= c["inner_auc"] <= 1.0
    with pytest.raises(ValueError, match="at least 3 topics"):
        nested_config_choice(_toy(("t1", "t2")), CredibilityFeaturizer(None), configs)


def test_undefined_auc_is_none_and_never_wins():
    # one topic keeps only credible pages: its AUC is undefined, not 0.5
    examples = [e for e in _toy(("t1", "t2", "t3")) if e.labels != {"t3": 0}]
    models = loto_credibility_models(examples, CredibilityFeaturizer(None),
                                     Config(("cues", "url"), 1.0))
    report = credibility_report(examples, models)
    assert report["per_topic"]["t3"]["auc"] is None
    assert report["auc"] is not None
    # pooled over the other topics, only credible pages remain when t1 and t2 lose theirs
    only_good = [e for e in examples if next(iter(e.labels.values())) == 1]
    configs = (Config(("cues",), 1.0), Config(("url",), 10.0))
    choice = nested_config_choice(only_good, CredibilityFeaturizer(None), configs)
    assert all(c["inner_auc"] is None and c["config"] == configs[0] for c in choice.values())


# ---------------------------------------------------------------- the stage


def _batch(texts: list[str | None], urls: list[str | None] | None = None) -> Candidates:
    n = len(texts)
    return build_batch(np.linspace(0.9, 0.5, n), text=texts, url=urls or [None] * n)


def test_stage_factor_formula_and_range():
    p = np.array([0.0, 0.5, 1.0])
    stage = LearnedCredibilityPrior(lambda texts, urls: p, floor=0.3)
    out = stage(_batch(["a", "b", "c"]))
    assert out.factors["prior"] == pytest.approx([0.3, 0.65, 1.0])
    assert list(out.column("p_credible")) == pytest.approx(list(p))
    assert out.info["credibility_prior"]["floor"] == 0.3
    combined = Combine()(out)
    assert np.all(np.isfinite(combined.score))


def test_stage_with_a_fitted_model_stays_in_floor_one():
    model = CredibilityModel(CredibilityFeaturizer(None), Config(("cues", "url"), 1.0))
    model.fit(_toy())
    stage = LearnedCredibilityPrior(model, name="cred", floor=0.2)
    out = stage(_batch([GOOD.format(i=1), BAD.format(i=2), "plain"],
                       ["http://nih.gov/a", None, "http://x.com"]))
    lam = out.factors["cred"]
    assert np.all((lam >= 0.2) & (lam <= 1.0))
    assert lam[0] > lam[1]
    assert stage.config()["model"] == {"groups": ["cues", "url"], "l2": 1.0}


def test_stage_empty_batch_and_errors():
    stage = LearnedCredibilityPrior(lambda texts, urls: np.zeros(len(texts)))
    empty = stage(Candidates.empty("q"))
    assert len(empty) == 0 and empty.factors["prior"].shape == (0,)
    with pytest.raises(StageError, match="needs document text"):
        stage(_batch(["a", None]))
    with pytest.raises(StageError, match="one per candidate"):
        LearnedCredibilityPrior(lambda t, u: np.zeros(5))(_batch(["a"]))
    with pytest.raises(StageError, match="probabilities"):
        LearnedCredibilityPrior(lambda t, u: np.array([1.5]))(_batch(["a"]))
    with pytest.raises(ValueError, match="floor"):
        LearnedCredibilityPrior(lambda t, u: t, floor=1.5)
    with pytest.raises(ValueError, match="callable"):
        LearnedCredibilityPrior(0.5)  # type: ignore[arg-type]


# ---------------------------------------------------------------- run_trec_hm


_COLUMNS = ["topic_id", "doc_id", "usefulness", "stance", "credibility", "query", "description",
            "correct_stance", "text", "timestamp", "url"]


def _tiny_csv() -> str:
    topics = {"1": ("cranberries uti", "Can cranberries prevent urinary tract infections?",
                    "unhelpful"),
              "2": ("traction back pain", "Is lumbar traction effective for back pain?",
                    "unhelpful"),
              "3": ("melatonin jet lag", "Can melatonin reduce jet lag?", "helpful")}
    rows = []
    for qid, (short, desc, correct) in topics.items():
        for i in range(4):
            good = i % 2 == 1
            rows.append({"topic_id": qid, "doc_id": f"c{qid}-{i}", "usefulness": 1,
                         "stance": i // 2, "credibility": int(good), "query": short,
                         "description": desc, "correct_stance": correct,
                         "text": f"{desc} " + (GOOD if good else BAD).format(i=short),
                         "timestamp": "2012-02-10T21:49:00",
                         "url": f"http://site{qid}{i}.com/p"})
    # one page judged for topics 1 and 2
    rows.append({**rows[1], "topic_id": "2", "query": topics["2"][0],
                 "description": topics["2"][1], "correct_stance": "unhelpful"})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def test_run_trec_hm_adds_the_learned_prior_systems(write):
    from credrank_bench.experiments.trec_hm import LEARNED, LEARNED_AGREEMENT, run_trec_hm

    path = write("tiny.csv", _tiny_csv())
    result = run_trec_hm(path, embedder=HashingEmbedder(32), fetch_k=6, top_k=5,
                         sharpness=2.0, floor=0.1,
                         credibility_configs=(Config(("cues", "url"), 10.0),
                                              Config(("embedding",), 10.0)))
    table = result.pop("experiment").table
    json.dumps(result)
    assert {LEARNED, LEARNED_AGREEMENT} <= {r.system for r in table.rows}
    for name in (LEARNED, LEARNED_AGREEMENT):
        row = table.row(name)
        assert row.reads_labels is False
        # label-free for the evaluated topic, not for the data set: the row says so
        assert any("not label-free for TREC 2019 HM" in n for n in row.notes), row.notes
        assert all(math.isfinite(c.mean) for c in row.metrics.values() if c.mean is not None)
    cred = result["credibility"]
    assert cred["n"] == 13  # 12 pages + the shared page judged twice
    assert cred["auc"] is None or 0.0 <= cred["auc"] <= 1.0
    assert cred["floor"] == 0.3
    # the shared page c1-1 is out of topic 1's and topic 2's training sets: topic 1 trains on
    # c2-* and c3-* (8 pages), topic 2 on c1-0, c1-2, c1-3 and c3-* (7), topic 3 on 8 pages
    assert cred["per_topic"]["1"]["trained_on_pages"] == 8
    assert cred["per_topic"]["2"]["trained_on_pages"] == 7
    assert cred["per_topic"]["3"]["trained_on_pages"] == 8


def test_real_trec_credibility_loto_smoke(shared_data: Path):
    from credrank_bench.datasets import load_dataset

    path = shared_data / "trec2019_hm" / "trec2019_hm_dev.csv"
    if not path.is_file():
        pytest.skip(f"TREC 2019 HM file not found at {path}")
    evalset = load_dataset("trec2019-hm", path)
    examples = examples_from_labels(evalset.documents, evalset.doc_labels)
    assert len(examples) == len({e.doc_id for e in examples})
    models = loto_credibility_models(examples, CredibilityFeaturizer(None),
                                     Config(("cues", "url"), 10.0))
    assert len(models) == 15
    for t, model in models.items():
        assert {e.doc_id for e in examples if t in e.labels}.isdisjoint(model.trained_on)
    report = credibility_report(examples, models)
    assert report["n"] == sum(len(e.labels) for e in examples)
    assert 0.0 <= report["auc"] <= 1.0
    assert 0.0 < report["credible_share"] < 1.0
