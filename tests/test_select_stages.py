"""Selection stages at the end of a pipeline, and the build_selector factory."""

from __future__ import annotations

import json

import numpy as np
import pytest

from credrank.core.candidates import Candidates, StageError
from credrank.core.errors import CandidateVectorError
from credrank.core.pipeline import FunctionStage, Stage
from credrank.pipeline.spec import PipelineSpec
from credrank.select import (
    CoverageSelect,
    ExposureSelect,
    FairSelect,
    MMRSelect,
    build_selector,
)
from credrank.select.stages import SelectionWarning

UTIL = np.array([0.90, 0.89, 0.88, 0.87, 0.86] + [0.85] * 9
                + [0.75, 0.74, 0.73] + [0.70, 0.69] + [0.62])
INTENT = np.array([0] * 14 + [1] * 3 + [2] * 2 + [3])
NAMES = np.array(["basketball", "footballer", "actor", "researcher"])


def toy_vectors() -> np.ndarray:
    gram = np.where(INTENT[:, None] == INTENT[None, :], 0.92, 0.25)
    np.fill_diagonal(gram, 1.0)
    w, v = np.linalg.eigh(gram)
    return v * np.sqrt(np.clip(w, 0.0, None))


def jordan_batch(with_labels: bool = True) -> Candidates:
    ids = [f"d{i:02d}" for i in range(20)]
    # without labels the column is present but holds None (a known column, no values)
    meta = [{"intent": str(NAMES[g]) if with_labels else None} for g in INTENT]
    # shuffle the rows so that nothing depends on input order
    order = np.random.default_rng(5).permutation(20)
    return Candidates.from_records(
        "michael jordan", [ids[i] for i in order], UTIL[order],
        metadata=[meta[i] for i in order], vectors=toy_vectors()[order])


def twelve_batch() -> Candidates:
    u = np.array([0.90] * 8 + [0.75] * 3 + [0.60])
    groups = ["A"] * 8 + ["B"] * 3 + ["C"]
    return Candidates.from_records("q", [f"x{i}" for i in range(12)], u,
                                   metadata=[{"source_type": g} for g in groups])


def test_coverage_labels_outside_the_intent_set_and_an_empty_column_are_said() -> None:
    """A declared intent_set limits coverage to the eligible intents (a label outside it
    failed the whole query, naming a pool row); a named column with no label falls back to
    clusters with a warning (only intent_source said so)."""
    batch = jordan_batch()
    intents = sorted({str(v) for v in batch.column("intent") if v is not None})
    keep = intents[:2]
    with pytest.warns(SelectionWarning, match=r"coverage: intent labels outside intent_set"):
        out = CoverageSelect(5, 0.3, 0.5, intent_column="intent", intent_set=keep)(batch)
    info = out.info["select"]
    assert info["intents"]["intents"] == keep and info["intents"]["outside_set"]
    assert sum(info["intents"]["outside_set"].values()) == sum(
        1 for v in batch.column("intent") if v is not None and str(v) not in keep)
    assert info["warnings"] and len(out) == 5
    with pytest.warns(SelectionWarning, match=r"intent_column 'intent' holds no label"):
        got = CoverageSelect(5, 0.3, 0.5, intent_column="intent")(jordan_batch(False))
    assert got.info["select"]["intent_source"].startswith("clusters")
    assert got.info["select"]["warnings"]


def test_coverage_select_reproduces_the_toy() -> None:
    out = CoverageSelect(5, 0.3, 0.5, intent_column="intent")(jordan_batch())
    assert list(out.doc_ids) == ["d00", "d01", "d02", "d14", "d17"]  # sorted by utility
    info = out.info["select"]
    assert info["objective"] == pytest.approx(4.6597, abs=1e-9)
    # batch vectors are stored as float32, hence the looser ILAD tolerance
    assert info["coverage"] == 0.75 and info["ilad"] == pytest.approx(0.549, abs=1e-6)
    assert info["intent_source"] == "labels:intent"
    json.dumps(out.info)
    full = CoverageSelect(5, 0.3, 1.0, intent_column="intent")(jordan_batch())
    assert list(full.doc_ids) == ["d00", "d01", "d14", "d17", "d19"]
    assert full.info["select"]["objective"] == pytest.approx(5.0649, abs=1e-9)
    assert full.info["select"]["utility_loss"] == pytest.approx(0.54 / 4.40, abs=1e-12)


def test_coverage_select_clusters_when_no_labels() -> None:
    out = CoverageSelect(5, 0.3, 1.0, intent_column="intent", n_clusters=4)(
        jordan_batch(with_labels=False))
    info = out.info["select"]
    assert info["intent_source"].startswith("clusters")
    assert info["intents"]["source"] == "clusters"
    assert sorted(out.doc_ids) == ["d00", "d01", "d14", "d17", "d19"]


def test_coverage_select_needs_labels_or_vectors() -> None:
    b = jordan_batch(with_labels=False)
    b = Candidates(query=b.query, doc_ids=b.doc_ids, retrieval_score=b.retrieval_score,
                   meta=b.meta)
    with pytest.raises(StageError, match="cannot be clustered"):
        CoverageSelect(5, 0.0, 1.0)(b)
    with pytest.raises(StageError, match=r"batch\.vectors is None"):
        CoverageSelect(5, 0.3, 0.0)(b)
    # a weight the solver cannot hold was accepted and failed inside SciPy ("`c` must be a
    # one-dimensional array of finite numbers")
    with pytest.raises(ValueError, match=r"lambda_ilad: expected a finite number in \[0, "
                                         r"1000000000\], got 1e\+308"):
        CoverageSelect(5, 1e308, 0.3)


@pytest.mark.parametrize("stage", [
    ExposureSelect(5, "sourcetype"),
    FairSelect(5, "sourcetype", p=0.3, alpha=0.1, protected_value="blog"),
    CoverageSelect(5, 0.3, 0.5, intent_column="sourcetype"),
    MMRSelect(5, 0.5, intent_column="sourcetype"),
])
def test_a_misspelled_selector_column_is_an_error_not_missing_values(stage: Stage) -> None:
    # issue 9: a column name the batch does not have used to read as all-None (one group /
    # nothing protected / clusters) and the selection ran on silently
    param = {"exposure": "group_column", "fair": "protected_column"}.get(stage.name,
                                                                          "intent_column")
    with pytest.raises(ValueError, match=rf"{param}: expected one of the candidates' columns "
                       r"\(.*source_type.*\), got 'sourcetype'"):
        stage(jordan_batch())


def test_a_known_column_with_none_values_is_not_a_misspelling() -> None:
    b = Candidates.from_records("q", ["a", "b", "c"], [0.9, 0.8, 0.7],
                                metadata=[{"group": "x"}, {"group": None}, {}],
                                vectors=np.eye(3))
    out = ExposureSelect(2, "group", seed=1)(b)
    assert set(out.info["select"]["groups"]) == {"x", "(missing)"}
    assert len(FairSelect(2, "group", p=0.3, alpha=0.1, protected_value="x")(b)) == 2
    # source_type is a column every retriever fills, even when all rows are None
    assert len(ExposureSelect(2, "source_type", seed=1)(b)) == 2


def test_mmr_select() -> None:
    out = MMRSelect(4, 0.5, intent_column="intent")(jordan_batch())
    info = out.info["select"]
    assert info["coverage"] == 1.0
    assert len(info["pick_order"]) == 4 and info["pick_order"][0] == "d00"
    assert list(out.score) == sorted(out.score, reverse=True)  # ordered by utility
    json.dumps(out.info)
    top = MMRSelect(5, 0.0)(jordan_batch())
    assert list(top.doc_ids) == ["d00", "d01", "d02", "d03", "d04"]


def test_negative_scores_are_clipped_to_zero() -> None:
    b = Candidates.from_records("q", ["a", "b", "c"], [-0.5, 0.2, -0.1],
                                vectors=np.eye(3))
    out = MMRSelect(3, 0.0)(b)
    # both negatives become utility 0; the tie keeps row order
    assert list(out.doc_ids) == ["b", "a", "c"]
    assert out.info["select"]["utility"] == pytest.approx(0.2)


def test_exposure_select_twelve_documents() -> None:
    v = [1.000, 0.631, 0.500, 0.431, 0.387, 0.356]
    stage = ExposureSelect(6, "source_type", rule="proportional", discounts=v, seed=11)
    out = stage(twelve_batch())
    assert len(out) == 6 and len(set(out.doc_ids)) == 6
    info = out.info["select"]
    groups = info["groups"]
    assert groups["A"]["target"] == pytest.approx(0.295970149, abs=1e-9)
    assert groups["A"]["expected"] == pytest.approx(0.295970149, abs=1e-9)
    assert groups["A"]["hard_ranking"] == pytest.approx(0.413125)
    assert info["objective"] == pytest.approx(2.804317164, abs=1e-9)
    realised = sum(groups[g]["realised"] * groups[g]["size"] for g in "ABC")
    assert realised == pytest.approx(3.305)  # one list hands out exactly V
    json.dumps(out.info)
    batch = twelve_batch()
    for _ in range(1500):
        again = stage(batch)
    assert again.info["select"]["policy_reused"]
    mon = stage.monitor.summary()
    assert mon["requests"] == 1501
    assert abs(mon["groups"]["C"]["gap"]) < 0.03


def test_exposure_select_is_reproducible_by_seed() -> None:
    a = ExposureSelect(6, "source_type", seed=3)
    b = ExposureSelect(6, "source_type", seed=3)
    for _ in range(5):
        assert list(a(twelve_batch()).doc_ids) == list(b(twelve_batch()).doc_ids)


def test_each_exposure_list_is_replayed_by_its_draw() -> None:
    # the echoed spec said "seed": null: a replay drew another list of the lottery
    stage = ExposureSelect(6, "source_type", rule="proportional")
    lists = {}
    for _ in range(40):
        out = stage(twelve_batch())
        lists[out.info["select"]["draw"]] = list(out.doc_ids)
    assert len(set(map(tuple, lists.values()))) > 1  # the lottery varies across requests
    for draw, chosen in lists.items():
        again = ExposureSelect(6, "source_type", rule="proportional", draw=draw)
        assert list(again(twelve_batch()).doc_ids) == chosen
        # as a JSON reader that holds numbers as doubles (jq, JavaScript) reads it back: the
        # draws were up to 2**63, and a rounded one drew another list
        assert int(float(json.loads(json.dumps(draw)))) == draw


def test_exposure_seed_and_draw_are_exact_in_json() -> None:
    """seed and draw are refused above 2**53 - 1, where a JSON number read as a double is no
    longer exact (the replay would draw another list)."""
    for name in ("seed", "draw"):
        with pytest.raises(ValueError, match=rf"{name}: expected an integer in \[0, "
                                             rf"9007199254740991\]"):
            PipelineSpec.from_dict({"stages": [{"stage": "exposure",
                                                "group_column": "source_type",
                                                name: 2**53}]})
        PipelineSpec.from_dict({"stages": [{"stage": "exposure", "group_column": "source_type",
                                            name: 2**53 - 1}]})


def test_exposure_select_errors() -> None:
    zero = Candidates.from_records("q", ["a", "b"], [0.0, 0.5],
                                   metadata=[{"source_type": "x"}, {"source_type": "y"}])
    with pytest.raises(StageError, match=r"^rule: proportional exposure divides by each "
                       r"group's average utility, but group 'x' \(source_type of 'a'\) has "
                       r"average utility 0 .*use rule=parity"):
        ExposureSelect(1, "source_type", rule="proportional")(zero)
    with pytest.raises(ValueError, match="rule"):
        ExposureSelect(3, "source_type", rule="fair")
    with pytest.raises(ValueError, match=r"discounts: expected 3 values"):
        ExposureSelect(3, "source_type", discounts=[1.0, 0.5])
    with pytest.raises(StageError, match="group_column: expected one of"):
        ExposureSelect(1, "nope")(zero)  # no such column: a misspelling, not one group
    none = Candidates.from_records("q", ["a", "b"], [0.2, 0.5],
                                   metadata=[{"g": None}, {"g": None}])
    missing = ExposureSelect(1, "g")(none)  # a column of None values: one "(missing)" group
    assert list(missing.info["select"]["groups"]) == ["(missing)"]


def test_fair_select() -> None:
    scores = np.linspace(1.0, 0.05, 20)
    meta = [{"protected": i >= 12} for i in range(20)]
    b = Candidates.from_records("q", [f"r{i}" for i in range(20)], scores, metadata=meta)
    out = FairSelect(12, "protected", p=0.5, alpha=0.1, adjust=False)(b)
    assert list(out.doc_ids[:4]) == ["r0", "r1", "r2", "r12"]
    info = out.info["select"]
    assert info["mtable"] == [0, 0, 0, 1, 1, 1, 2, 2, 3, 3, 3, 4]
    assert info["failure_probability"] == pytest.approx(0.145996, abs=5e-7)
    assert info["protected_positions"] == [4, 7, 9, 12] and info["satisfied"]
    json.dumps(out.info)
    adjusted = FairSelect(12, "protected", p=0.5, alpha=0.1)(b).info["select"]
    assert adjusted["failure_probability"] <= 0.1


def test_fair_select_protected_value_and_bad_flags() -> None:
    meta = [{"source_type": t} for t in ["blog", "government", "blog", "government"]]
    b = Candidates.from_records("q", list("abcd"), [0.9, 0.8, 0.7, 0.6], metadata=meta)
    out = FairSelect(4, "source_type", p=0.5, alpha=0.1, protected_value="government")(b)
    assert out.info["select"]["n_protected_candidates"] == 2
    with pytest.raises(StageError, match="expected a boolean flag"):
        FairSelect(4, "source_type", p=0.5, alpha=0.1)(b)


def test_empty_batch_passes_through() -> None:
    empty = Candidates.empty("q", dim=3)
    for stage in (MMRSelect(3, 0.5), CoverageSelect(3, 0.1, 0.1),
                  ExposureSelect(3, "source_type"), FairSelect(3, "x", 0.5, 0.1)):
        out = stage(empty)
        assert len(out) == 0 and out.info["select"]["chosen"] == []


def test_stages_compose_in_a_pipeline() -> None:
    identity = FunctionStage(lambda b: b, name="id")
    pipe = identity >> CoverageSelect(5, 0.3, 0.5, intent_column="intent")
    out = pipe(jordan_batch())
    assert len(out) == 5 and isinstance(pipe, Stage)


def test_build_selector() -> None:
    assert isinstance(build_selector("mmr", 5, diversity=0.3), MMRSelect)
    cov = build_selector("coverage", 5, lambda_ilad=0.3, lambda_coverage=0.5)
    assert isinstance(cov, CoverageSelect)
    assert cov.config()["lambda_coverage"] == 0.5
    assert isinstance(build_selector("exposure", 5, group_column="g", seed=1), ExposureSelect)
    assert isinstance(build_selector("fair", 5, protected_column="p", p=0.3, alpha=0.1),
                      FairSelect)
    with pytest.raises(ValueError, match="expected one of mmr, coverage, exposure, fair"):
        build_selector("topk", 5)
    with pytest.raises(ValueError, match=r"unknown parameter\(s\) \['lambda'\]"):
        build_selector("mmr", 5, diversity=0.3, **{"lambda": 1})
    with pytest.raises(ValueError, match=r"missing required parameter\(s\) \['diversity'\]"):
        build_selector("mmr", 5)
    with pytest.raises(ValueError, match=r"diversity: expected a finite number in \[0, 1\], got 2"):
        build_selector("mmr", 5, diversity=2)
    with pytest.raises(ValueError, match="top_k"):
        build_selector("mmr", 0, diversity=0.5)
    with pytest.raises(ValueError, match="alpha"):
        build_selector("fair", 5, protected_column="p", p=0.3, alpha=1.5)
    for stage in (build_selector("mmr", 5, diversity=0.3), cov):
        json.dumps(stage.describe())


def test_a_zero_vector_is_an_error_naming_the_candidate() -> None:
    """A candidate sent with a vector of zeros (retrieval accepts it: its cosine is 0) made
    the selectors fail naming a row of the pool ("vectors: expected nonzero rows … at row
    0"); the error names the candidate."""
    vectors = np.eye(3)
    vectors[1] = 0.0
    batch = Candidates.from_records("q", ["a", "b", "c"], [0.9, 0.8, 0.7], vectors=vectors)
    for name, stage in (("mmr", MMRSelect(2, 0.5)),
                        ("coverage", CoverageSelect(2, lambda_ilad=0.5, lambda_coverage=0.5))):
        with pytest.raises(CandidateVectorError,
                           match=rf"^{name}: the candidate 'b' has a vector of zeros") as got:
            stage(batch)
        assert got.value.doc_id == "b"  # a door names the candidate's vector field by it


def test_a_protected_column_of_no_flags_is_said_at_the_parameter() -> None:
    """A column of texts given as the protected column was said as ``FairSelect: column
    'text' row 0 is <the whole text>``: no door could place it at its field, and the value
    was printed whole. It opens with the parameter, the value cut short."""
    batch = Candidates.from_records("q", ["a", "b", "c"], [0.9, 0.8, 0.7],
                                    metadata=[{"note": "x" * 200}, {"note": "y"}, {"note": "z"}])
    with pytest.raises(ValueError, match=r"^protected_column: the column 'note' holds "
                                         r"'x{56}\.\.\. \(of 'a'\)") as info:
        FairSelect(2, "note", p=0.5, alpha=0.1)(batch)
    assert "x" * 100 not in str(info.value)


# -- the scale of the utility, eligibility (35.8) --------------------------------------------
def rrf_like(batch: Candidates, factor: float) -> Candidates:
    """``batch`` with every score multiplied by ``factor`` (a rank-fusion score is ≈ 0.03)."""
    return batch.with_score(np.asarray(batch.score) * factor)


def test_mmr_diversity_means_the_same_trade_off_at_any_score_scale() -> None:
    # under --mode rrf (scores ≈ 0.02) diversity=0.1 was almost pure novelty: the utility
    # term (0.9 × 0.02) lost to the cosine term (0.1 × cos) and off-topic rows filled the list
    base = MMRSelect(5, 0.1)(jordan_batch())
    for factor in (0.02, 50.0):
        out = MMRSelect(5, 0.1)(rrf_like(jordan_batch(), factor))
        assert list(out.doc_ids) == list(base.doc_ids)
        assert out.info["select"]["utility_divisor"] == pytest.approx(0.9 * factor)
        assert out.info["select"]["warnings"] == []
    raw = MMRSelect(5, 0.1, utility_scale="score")
    with pytest.warns(SelectionWarning, match=r"^utility_scale: mmr weighs utilities up to "
                                              r"0\.018 .*about 56x more"):
        out = raw(rrf_like(jordan_batch(), 0.02))
    assert list(out.doc_ids) != list(base.doc_ids)  # what the scale did before
    assert out.info["select"]["warnings"][0].startswith("utility_scale:")
    assert "utility_scale=score" in out.info["select"]["utility_definition"]


def test_coverage_keeps_the_chapter_units_and_warns_off_scale() -> None:
    # the toy's objective is in score units (4.6597, test above); at a score scale of 0.02 the
    # same weights buy coverage at any cost: said, and utility_scale=pool_max undoes it
    small = rrf_like(jordan_batch(), 0.02)
    with pytest.warns(SelectionWarning, match="utility_scale: coverage weighs utilities"):
        raw = CoverageSelect(5, 0.3, 0.5, intent_column="intent")(small)
    assert raw.info["select"]["coverage"] == 1.0
    scaled = CoverageSelect(5, 0.3, 0.5, intent_column="intent",
                            utility_scale="pool_max")(small)
    toy = CoverageSelect(5, 0.3, 0.5, intent_column="intent",
                         utility_scale="pool_max")(jordan_batch())
    assert list(scaled.doc_ids) == list(toy.doc_ids)
    info = scaled.info["select"]
    assert info["warnings"] == [] and info["utility_divisor"] == pytest.approx(0.018)
    assert info["utility"] == pytest.approx(0.02 * toy.info["select"]["utility"])  # score units
    assert info["objective"] == pytest.approx(toy.info["select"]["objective"])


def irrelevant_pool() -> Candidates:
    """Three relevant rows near one direction and four off-topic ones in pairs along two
    others: the off-topic rows win on novelty and make two more clusters."""
    ids = ["r0", "r1", "r2", "o0", "o1", "o2", "o3"]
    sims = [0.90, 0.88, 0.86, 0.20, 0.18, 0.16, 0.15]
    x = np.zeros((7, 4))
    x[:3, 0] = 1.0
    x[:3, 1] = [0.0, 0.1, 0.2]
    x[3:5, 2] = 1.0
    x[5:7, 3] = 1.0
    x[[4, 6], 1] = 0.1
    return Candidates.from_records("q", ids, sims, vectors=x,
                                   metadata=[{"intent": None} for _ in ids])


@pytest.mark.parametrize("stage", [
    MMRSelect(3, 0.5, min_ratio=0.5),
    CoverageSelect(3, 0.5, 3.0, min_ratio=0.5, n_clusters=3),
])
def test_min_ratio_diversifies_over_eligible_candidates_only(stage: Stage) -> None:
    # 35.8: "diversify only over eligible, sufficiently relevant evidence"; the filter existed
    # but no stage parameter reached it, so off-topic rows were rewarded for being different
    unfiltered = type(stage)(**{**stage.config(), "min_ratio": 0.0})(irrelevant_pool())
    assert any(d.startswith("o") for d in unfiltered.doc_ids)
    out = stage(irrelevant_pool())
    assert sorted(out.doc_ids) == ["r0", "r1", "r2"]
    assert out.info["select"]["eligibility"] == {
        "min_ratio": 0.5, "relevance": "max(retrieval_score, 0)", "pool": 7, "eligible": 3,
        "kept": 3}


def test_min_ratio_keeps_top_k_candidates() -> None:
    out = MMRSelect(5, 0.5, min_ratio=0.99)(irrelevant_pool())
    assert len(out) == 5  # the two best ineligible ones fill the list
    assert out.info["select"]["eligibility"]["eligible"] == 1
    assert out.info["select"]["eligibility"]["kept"] == 5


def test_mmr_first_pick_is_the_best_even_at_full_diversity() -> None:
    b = Candidates.from_records("q", ["a", "b", "c"], [0.1, 0.9, 0.5], vectors=np.eye(3))
    assert MMRSelect(1, 1.0)(b).info["select"]["pick_order"] == ["b"]


def test_fair_warns_when_the_protected_value_matches_no_candidate() -> None:
    meta = [{"source_type": t} for t in ["blog", "government", "blog", "government"]]
    b = Candidates.from_records("q", list("abcd"), [0.9, 0.8, 0.7, 0.6], metadata=meta)
    with pytest.warns(SelectionWarning, match=r"^protected_value: no candidate has "
                      r"source_type = 'blogs' \(values in the pool: 'blog', 'government'\)"):
        out = FairSelect(4, "source_type", p=0.5, alpha=0.1, protected_value="blogs")(b)
    assert out.info["select"]["warnings"][0].startswith("protected_value:")
    ok = FairSelect(4, "source_type", p=0.5, alpha=0.1, protected_value="blog")(b)
    assert ok.info["select"]["warnings"] == []


def test_proportional_exposure_takes_a_zero_score_in_a_positive_group() -> None:
    b = Candidates.from_records("q", list("abcd"), [0.9, 0.0, 0.5, 0.4],
                                metadata=[{"source_type": g} for g in "xxyy"])
    out = ExposureSelect(2, "source_type", rule="proportional", seed=0)(b)
    groups = out.info["select"]["groups"]
    assert groups["x"]["target"] == pytest.approx(groups["y"]["target"])


def test_a_real_missing_named_group_never_merges_with_the_candidates_without_one() -> None:
    # finding: a value "(missing)" and a None were one group "(missing)" of size 2 in the
    # exposure LP, its targets, the monitor and the report
    b = Candidates.from_records("q", ["a", "b", "c", "d"], [0.9, 0.8, 0.7, 0.6],
                                metadata=[{"g": "(missing)"}, {"g": None}, {"g": "x"},
                                          {"g": "x"}])
    for rule in ("parity", "proportional"):
        with pytest.raises(StageError, match=r"^group_column: the column 'g' holds the value "
                           r"'\(missing\)' \(of 'a'\), the name exposure gives the group of "
                           r"candidates with no g"):
            ExposureSelect(2, "g", rule=rule, seed=1)(b)
    # without the real value: the none-group is its own group, counted in the report
    ok = Candidates.from_records("q", ["a", "b", "c"], [0.9, 0.8, 0.7],
                                 metadata=[{"g": "y"}, {"g": None}, {"g": "x"}])
    info = ExposureSelect(2, "g", seed=1)(ok).info["select"]
    assert info["n_missing"] == 1 and info["missing_group"] == "(missing)"
    assert info["groups"]["(missing)"]["size"] == 1 and set(info["groups"]) == {
        "(missing)", "x", "y"}
    # FA*IR counts the missing apart: protected_value "(missing)" finds the real value only
    fair = FairSelect(4, "g", p=0.3, alpha=0.1, protected_value="(missing)")(b).info["select"]
    assert fair["n_protected_candidates"] == 1 and fair["n_missing"] == 1


def test_two_values_of_one_text_are_not_one_exposure_group() -> None:
    # True and "True" were both the group "True"
    b = Candidates.from_records("q", ["a", "b", "c"], [0.9, 0.8, 0.7],
                                metadata=[{"g": True}, {"g": "x"}, {"g": "True"}])
    with pytest.raises(StageError, match=r"^group_column: the column 'g' holds True \(of 'a'\) "
                       r"and 'True' \(of 'c'\), which would be one group 'True'"):
        ExposureSelect(2, "g", seed=1)(b)
    # numpy's and Python's integers are one kind: 1 and numpy.int64(1) are one group
    import numpy as np

    same = Candidates.from_records("q", ["a", "b", "c"], [0.9, 0.8, 0.7],
                                   metadata=[{"g": 1}, {"g": np.int64(1)}, {"g": 2}])
    assert ExposureSelect(2, "g", seed=1)(same).info["select"]["n_missing"] == 0


def test_a_boolean_protected_value_reads_the_column_as_flags() -> None:
    # protected_value=true (what -P protected_value=true gives) matched "True" only: "true"
    # and 1 were silently not protected
    meta = [{"f": "True"}, {"f": "true"}, {"f": 1}, {"f": "False"}, {"f": None}]
    b = Candidates.from_records("q", list("abcde"), [0.9, 0.8, 0.7, 0.6, 0.5], metadata=meta)
    info = FairSelect(5, "f", p=0.5, alpha=0.1, protected_value=True)(b).info["select"]
    assert info["n_protected_candidates"] == 3 and info["n_missing"] == 1
    assert info["warnings"] == []
    info = FairSelect(5, "f", p=0.5, alpha=0.1, protected_value=False)(b).info["select"]
    assert info["n_protected_candidates"] == 1
    words = Candidates.from_records("q", list("ab"), [0.9, 0.8],
                                    metadata=[{"f": "blog"}, {"f": "news"}])
    with pytest.raises(StageError, match=r"^protected_column: the column 'f' holds 'blog' "
                       r"\(of 'a'\); protected_value=True reads the column as flags"):
        FairSelect(2, "f", p=0.5, alpha=0.1, protected_value=True)(words)


def test_a_protected_value_that_differs_only_in_case_is_a_warning() -> None:
    # "Blog" beside "blog" was silently not protected once any candidate matched
    meta = [{"s": "blog"}, {"s": "Blog "}, {"s": "news"}]
    b = Candidates.from_records("q", list("abc"), [0.9, 0.8, 0.7], metadata=meta)
    with pytest.warns(SelectionWarning, match=r"^protected_value: 1 candidate\(s\) hold s = "
                      r"'Blog ', which differs from 'blog' only in case or spacing"):
        out = FairSelect(3, "s", p=0.5, alpha=0.1, protected_value="blog")(b)
    assert out.info["select"]["n_protected_candidates"] == 1
    assert out.info["select"]["warnings"][0].startswith("protected_value: 1 candidate(s)")
    # a number given for a text column still finds it (-P protected_value=2024 is a number)
    years = Candidates.from_records("q", list("ab"), [0.9, 0.8],
                                    metadata=[{"y": "2024"}, {"y": "2023"}])
    info = FairSelect(2, "y", p=0.5, alpha=0.1, protected_value=2024)(years).info["select"]
    assert info["n_protected_candidates"] == 1 and info["warnings"] == []
