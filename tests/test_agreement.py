"""Answer agreement (chapter 35.3 at document level), the stance model and the TREC HM run."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import build_batch
from credrank.combine import Combine
from credrank.core.candidates import Candidates, StageError
from credrank.core.maths import roc_auc
from credrank.index.embed import HashingEmbedder
from credrank.signals.agreement import AnswerAgreement, agreement_factor, consensus, sharpen
from credrank.stages.prior import SourcePrior
from credrank_bench.experiments.stance import (
    StanceExample,
    StanceFeaturizer,
    StanceModel,
    cue_counts,
    fit_logistic,
    loto_models,
    loto_report,
    loto_splits,
    query_terms,
    relevant_sentences,
)

# ---------------------------------------------------------------- agreement_factor


def test_consensus_is_weighted_share_of_yes():
    assert consensus(np.array([1.0, 0.0]), np.array([3.0, 1.0])) == pytest.approx(0.75)
    assert consensus(np.array([1.0, 0.0]), np.array([0.0, 0.0])) is None


def test_factor_hand_computed_expected_mode():
    # z = (3*1 + 1*0) / 4 = 0.75; a = [0.75, 0.25]; f = 0.1 + 0.9 a
    f = agreement_factor(np.array([1.0, 0.0]), np.array([3.0, 1.0]), floor=0.1)
    assert f == pytest.approx([0.775, 0.325])


def test_factor_undecided_consensus_changes_nothing_in_expected_mode():
    # z = (0.8 + 0.2 + 2*0.5) / 4 = 0.5 -> every a = 0.5
    p, w = np.array([0.8, 0.2, 0.5]), np.array([1.0, 1.0, 2.0])
    assert agreement_factor(p, w, floor=0.1) == pytest.approx([0.55, 0.55, 0.55])
    # absolute mode: a = 1 - |p - 0.5| = [0.7, 0.7, 1.0]; floor 0 keeps a
    assert agreement_factor(p, w, floor=0.0, mode="absolute") == pytest.approx([0.7, 0.7, 1.0])


def test_sharpness_hand_computed():
    # z = 0.75, kappa = 2: z_hat = 0.75^2 / (0.75^2 + 0.25^2) = 0.9
    assert float(sharpen(0.75, 2.0)) == pytest.approx(0.9)
    f = agreement_factor(np.array([1.0, 0.0]), np.array([3.0, 1.0]), floor=0.0, sharpness=2.0)
    assert f == pytest.approx([0.9, 0.1])
    # kappa = 0 switches the signal off
    f0 = agreement_factor(np.array([1.0, 0.0]), np.array([3.0, 1.0]), floor=0.0, sharpness=0.0)
    assert f0 == pytest.approx([0.5, 0.5])


def test_exclude_self_hand_computed():
    # doc0 vs others: (0*1 + 1*2)/3 = 2/3; doc1: (1*1 + 1*2)/3 = 1; doc2: (1*1 + 0*1)/2 = 0.5
    p, w = np.array([1.0, 0.0, 1.0]), np.array([1.0, 1.0, 2.0])
    f = agreement_factor(p, w, floor=0.0, exclude_self=True)
    assert f == pytest.approx([2 / 3, 0.0, 0.5], abs=1e-5)


def test_zero_weight_policy():
    p = np.array([1.0, 0.0])
    assert agreement_factor(p, np.zeros(2), floor=0.2) == pytest.approx([1.0, 1.0])
    # with exclude_self, doc0's "others" weigh 0 -> 1; doc1 is compared with doc0 (z = 1)
    f = agreement_factor(p, np.array([1.0, 0.0]), floor=0.2, exclude_self=True)
    assert f[0] == 1.0
    assert f[1] == pytest.approx(0.2, abs=1e-5)


def test_empty_input_gives_empty_factor():
    assert agreement_factor(np.zeros(0), np.zeros(0)).shape == (0,)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"p": [1.5, 0.0]}, "p"),
    ({"w": [-1.0, 1.0]}, "w"),
    ({"w": [1.0]}, "w"),
    ({"p": [float("nan"), 0.0]}, "p"),
    ({"floor": 1.5}, "floor"),
    ({"sharpness": -1.0}, "sharpness"),
    ({"mode": "median"}, "mode"),
])
def test_bad_input_names_the_parameter(kwargs, field):
    args = {"p": [1.0, 0.0], "w": [1.0, 1.0]}
    args.update(kwargs)
    p, w = np.array(args.pop("p")), np.array(args.pop("w"))
    with pytest.raises(ValueError, match=field):
        agreement_factor(p, w, **args)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1e6)), min_size=1, max_size=20),
       st.floats(0, 1), st.floats(0, 50), st.sampled_from(["expected", "absolute"]),
       st.booleans())
def test_factor_is_finite_and_bounded(rows, floor, sharpness, mode, exclude_self):
    p = np.array([r[0] for r in rows])
    w = np.array([r[1] for r in rows])
    f = agreement_factor(p, w, floor=floor, sharpness=sharpness, mode=mode,
                         exclude_self=exclude_self)
    assert np.all(np.isfinite(f))
    assert np.all(f >= floor - 1e-12)
    assert np.all(f <= 1 + 1e-12)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=2, max_size=12), st.floats(1.0, 10.0))
def test_more_agreeing_document_never_gets_a_lower_factor(ps, sharpness):
    # expected mode with a fixed consensus > 0.5: f is increasing in p
    p = np.array(ps)
    w = np.ones(len(p))
    f = agreement_factor(p, w, floor=0.1, sharpness=sharpness)
    z = p.mean()
    order = np.argsort(p)
    diffs = np.diff(f[order])
    if z > 0.5:
        assert np.all(diffs >= -1e-12)
    elif z < 0.5:
        assert np.all(diffs <= 1e-12)


# ---------------------------------------------------------------- the stage


def _batch(sims, types=None, texts=None):
    n = len(sims)
    return build_batch(sims, query="does it help?", source_type=types or ["unknown"] * n,
                       text=texts or [f"page {i}" for i in range(n)])


def _fixed(p):
    return lambda query, batch: np.asarray(p, dtype=float)


def test_stage_on_empty_batch():
    out = AnswerAgreement(_fixed([]))(Candidates.empty("q"))
    assert len(out) == 0
    assert out.factors["agreement"].shape == (0,)
    assert out.info["agreement"]["consensus"] is None


def test_stage_zero_weights_leave_factor_one():
    batch = _batch([-0.2, 0.0])
    out = AnswerAgreement(_fixed([1.0, 0.0]), None)(batch)
    assert out.factors["agreement"] == pytest.approx([1.0, 1.0])
    assert out.info["agreement"]["consensus"] is None


def test_stage_uses_prior_factor_as_credibility_weight():
    # w = prior * sim = [1*1, 0.1*1]; z = 1/1.1; a = [z, 1-z]; floor 0
    batch = _batch([1.0, 1.0]).with_factor("prior", np.array([1.0, 0.1]), 0, 1)
    out = AnswerAgreement(_fixed([1.0, 0.0]), "prior", floor=0.0)(batch)
    z = 1 / 1.1
    assert out.factors["agreement"] == pytest.approx([z, 1 - z])
    assert out.info["agreement"]["consensus"] == pytest.approx(z)
    assert list(out.column("p_yes")) == [1.0, 0.0]


def test_stage_absent_weight_factor_means_uniform_credibility():
    out = AnswerAgreement(_fixed([1.0, 0.0]), "prior", floor=0.0)(_batch([3.0, 1.0]))
    assert out.factors["agreement"] == pytest.approx([0.75, 0.25])
    assert "absent" in out.info["agreement"]["weights"]


def test_stage_voters_limit_who_votes():
    # only the top retrieval row votes: z = 1 -> p=0 row gets ~floor
    out = AnswerAgreement(_fixed([1.0, 0.0, 0.0]), None, floor=0.0, voters=1)(
        _batch([0.9, 0.8, 0.7]))
    assert out.factors["agreement"] == pytest.approx([1.0, 0.0, 0.0], abs=1e-5)


def test_stage_reorders_after_combine():
    # the top page disagrees with the credible consensus and drops below the agreeing ones
    batch = _batch([0.9, 0.8, 0.7], types=["blog", "government", "government"])
    pipe = SourcePrior("current") >> AnswerAgreement(_fixed([0.0, 1.0, 1.0]), floor=0.1) \
        >> Combine()
    ranked = pipe(batch).sorted_by_score()
    assert list(ranked.doc_ids) == ["d1", "d2", "d0"]
    assert np.all(np.isfinite(ranked.score))


@pytest.mark.parametrize("p", [[0.5], [0.5, float("nan")], [0.5, 1.2]])
def test_stage_rejects_bad_stance_output(p):
    with pytest.raises(StageError, match="stance"):
        AnswerAgreement(_fixed(p))(_batch([0.5, 0.4]))


def test_stage_rejects_bad_parameters():
    with pytest.raises(ValueError, match="stance"):
        AnswerAgreement("not callable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="voters"):
        AnswerAgreement(_fixed([]), voters=0)
    with pytest.raises(ValueError, match="floor"):
        AnswerAgreement(_fixed([]), floor=-0.1)


# ---------------------------------------------------------------- stance model


def test_logistic_regression_separates_a_separable_toy():
    x = np.array([[-2.0, 0.3], [-1.0, -0.2], [1.0, 0.1], [2.0, -0.4]])
    y = np.array([0, 0, 1, 1])
    model = fit_logistic(x, y, l2=0.01)
    p = model.predict_proba(x)
    assert np.all(p[:2] < 0.5) and np.all(p[2:] > 0.5)
    assert model.predict_proba(np.array([[5.0, 0.0]]))[0] > 0.9
    # stronger regularisation shrinks the weights; the fit is deterministic
    strong = fit_logistic(x, y, l2=100.0)
    assert np.linalg.norm(strong.weights) < np.linalg.norm(model.weights)
    again = fit_logistic(x, y, l2=0.01)
    assert np.array_equal(again.weights, model.weights) and again.bias == model.bias


def test_logistic_regression_single_class_and_bad_input():
    model = fit_logistic(np.array([[1.0], [2.0]]), np.array([1, 1]), l2=1.0)
    assert np.all(model.predict_proba(np.array([[0.0], [9.0]])) > 0.5)
    with pytest.raises(ValueError, match="y"):
        fit_logistic(np.array([[1.0], [2.0]]), np.array([0, 2]))
    with pytest.raises(ValueError, match="x"):
        fit_logistic(np.array([[np.nan], [2.0]]), np.array([0, 1]))
    with pytest.raises(ValueError, match="l2"):
        fit_logistic(np.array([[1.0], [2.0]]), np.array([0, 1]), l2=0.0)
    with pytest.raises(ValueError, match="y"):
        fit_logistic(np.array([[1.0], [2.0]]), np.array([0, 1, 1]))


def test_auc_hand_computed():
    # pairs (pos, neg): (.9,.1) win, (.9,.4) win, (.4,.1) win, (.4,.4) tie -> 3.5 / 4
    assert roc_auc([1, 0, 1, 0], [0.9, 0.1, 0.4, 0.4]) == pytest.approx(0.875)
    assert roc_auc([1, 1], [0.2, 0.3]) is None  # one class: undefined, not 0.5


def test_loto_report_says_undefined_auc_for_a_one_stance_topic():
    featurizer = StanceFeaturizer(None, use_embedding=False, use_interaction=False,
                                  use_anchors=False)
    examples = [e for e in _toy_examples() if not (e.qid == "t1" and e.stance == 0)]
    models = loto_models(examples, lambda: StanceModel(featurizer, l2=1.0))
    report = loto_report(examples, models)
    assert report["per_topic"]["t1"]["auc"] is None
    assert report["auc"] is not None


def test_query_terms_and_relevant_sentences():
    assert query_terms("Can cranberries prevent urinary tract infections?") == \
        ["cranb", "urina", "tract", "infec"]
    text = ("Welcome to our shop. Cranberry juice is popular. "
            "Cranberries do not prevent urinary tract infections in trials. Contact us.")
    got = relevant_sentences("Can cranberries prevent urinary tract infections?", text, k=2)
    assert got == ["Cranberry juice is popular.",
                   "Cranberries do not prevent urinary tract infections in trials."]


def test_cue_counts():
    assert cue_counts("Traction is not effective.") == (0, 1)
    pos, neg = cue_counts("It is effective and reduces pain.")
    assert pos == 2 and neg == 0


def test_loto_split_never_contains_the_held_out_topic():
    qids = ["a", "b", "a", "c", "b"]
    folds = list(loto_splits(qids))
    assert [h for h, _ in folds] == ["a", "b", "c"]
    for held, train in folds:
        assert held not in train
        assert set(train) | {held} == {"a", "b", "c"}


def _toy_examples():
    yes = "The treatment is effective, it reduces symptoms and is recommended."
    no = "There is no evidence it works; it is not effective and may be harmful."
    out = []
    for q in ("t1", "t2", "t3"):
        out += [StanceExample(q, f"does {q} help?", f"{q} {yes}", 1, f"{q}y"),
                StanceExample(q, f"does {q} help?", f"{q} {no}", 0, f"{q}n")]
    return out


def test_loto_models_never_see_their_topic_and_learn_the_cues():
    featurizer = StanceFeaturizer(None, use_embedding=False, use_interaction=False,
                                  use_anchors=False)
    examples = _toy_examples()
    models = loto_models(examples, lambda: StanceModel(featurizer, l2=1.0))
    for held, model in models.items():
        assert held not in model.trained_on
        assert len(model.trained_on) == 2
    report = loto_report(examples, models)
    assert report["accuracy"] == 1.0 and report["auc"] == 1.0
    leaky = dict(models)
    leaky["t1"] = StanceModel(featurizer, l2=1.0).fit(examples)
    with pytest.raises(ValueError, match="LOTO"):
        loto_report(examples, leaky)


def test_featurizer_with_hashing_embedder_is_finite():
    featurizer = StanceFeaturizer(HashingEmbedder(64))
    x = featurizer.features("does it help?", ["It helps a lot.", "", "No evidence at all."])
    assert x.shape == (3, 64 + 64 + 1 + 6)
    assert np.all(np.isfinite(x))
    with pytest.raises(ValueError, match="embedder"):
        StanceFeaturizer(None)


# ---------------------------------------------------------------- TREC HM run


_COLUMNS = ["topic_id", "doc_id", "usefulness", "stance", "credibility", "query", "description",
            "correct_stance", "text", "timestamp", "url"]


def _tiny_csv() -> str:
    rows = []
    topics = {"1": ("cranberries uti", "Can cranberries prevent urinary tract infections?",
                    "unhelpful"),
              "2": ("traction back pain", "Is lumbar traction effective for back pain?",
                    "unhelpful"),
              "3": ("melatonin jet lag", "Can melatonin reduce jet lag?", "helpful")}
    yes = "{t} is effective, reduces symptoms and is recommended by doctors."
    no = "There is no evidence that {t} works; {t} is not effective and may be harmful."
    for qid, (short, desc, correct) in topics.items():
        for i, (stance, template) in enumerate([(1, yes), (0, no), (1, yes), (0, no)]):
            rows.append({"topic_id": qid, "doc_id": f"c{qid}-{i}", "usefulness": 1,
                         "stance": stance, "credibility": i % 2, "query": short,
                         "description": desc, "correct_stance": correct,
                         "text": f"{desc} " + template.format(t=short),
                         "timestamp": "2012-02-10T21:49:00", "url": f"http://site{qid}{i}.com/p"})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=_COLUMNS)
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def test_run_trec_hm_on_a_tiny_file(write):
    from credrank_bench.experiments.trec_hm import run_trec_hm

    path = write("tiny.csv", _tiny_csv())
    result = run_trec_hm(path, embedder=HashingEmbedder(64), fetch_k=6, top_k=5,
                         sharpness=2.0, floor=0.1)
    experiment = result.pop("experiment")
    json.dumps(result)  # the rest is JSON data
    table = experiment.table
    rows = {r.system: r for r in table.rows}
    oracles = {"oracle:nist-prior", "oracle:stance+prior", "oracle:nist-prior+agreement"}
    assert {"similarity", "prior", "prior+agreement", "agreement", *oracles} <= set(rows)
    for name, row in rows.items():
        assert row.reads_labels == (name in oracles)
        for cell in row.metrics.values():
            assert cell.mean is None or math.isfinite(cell.mean)
    assert table.baseline == "similarity" and rows["similarity"].metrics["harmful@5"].delta is None
    assert rows["prior"].metrics["harmful@5"].delta == pytest.approx(
        experiment.mean("prior", "harmful@5") - experiment.mean("similarity", "harmful@5"))
    assert set(experiment.runs) == set(rows)
    for qid, stats in result["stance"]["per_topic"].items():
        assert 0.0 <= stats["accuracy"] <= 1.0, qid
    # every topic's stance model was fitted on the other topics only
    assert result["stance"]["n"] == 12


def test_nested_choice_uses_a_grid_point_per_topic(write):
    from credrank_bench.experiments.trec_hm import run_trec_hm

    path = write("tiny.csv", _tiny_csv())
    grid = ((1.0, 0.1, 0), (4.0, 0.5, 2))
    result = run_trec_hm(path, embedder=HashingEmbedder(64), fetch_k=6, top_k=5, grid=grid)
    assert set(result["choices"]) == {"1", "2", "3"}
    for choice in result["choices"].values():
        assert (choice["sharpness"], choice["floor"], choice["voters"]) in grid


def test_fit_loto_models_excludes_held_out_and_outer_topic():
    from credrank_bench.experiments.trec_hm import fit_loto_models

    featurizer = StanceFeaturizer(None, use_embedding=False, use_interaction=False,
                                  use_anchors=False)
    models = fit_loto_models(_toy_examples(), featurizer, 1.0, exclude=["t3"])
    assert set(models) == {"t1", "t2"}
    assert models["t1"].trained_on == ("t2",)
    assert models["t2"].trained_on == ("t1",)


@pytest.mark.slow  # the TREC stance experiment on the real file
def test_real_trec_file_with_hashing_embedder(shared_data: Path, tmp_path: Path):
    """On the first topics of the real file (every topic kind: see ``TREC_TOPICS``)."""
    from credrank_bench.experiments.trec_hm import run_trec_hm
    from test_bench_json import TREC_TOPICS, _slice_csv_topics

    path = shared_data / "trec2019_hm" / "trec2019_hm_dev.csv"
    if not path.is_file():
        pytest.skip(f"TREC 2019 HM file not found at {path}")
    path = _slice_csv_topics(path, tmp_path / "trec2019_hm.csv", TREC_TOPICS)
    with path.open(encoding="utf-8", newline="") as f:
        judged = list(csv.DictReader(f))
    result = run_trec_hm(path, embedder=HashingEmbedder(128), sharpness=2.0, floor=0.1)
    # one choice per topic, one stance example per judged page (the whole file: 15 and 156)
    assert len(result["choices"]) == len({r["topic_id"] for r in judged}) == TREC_TOPICS
    assert result["stance"]["n"] == len(judged)
    assert 0.0 < result["experiment"].mean("similarity", "harmful@5") < 1.0
