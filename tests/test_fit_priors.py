"""Priors fitted from labelled URLs with shrinkage toward the preset; CoAID held-out check."""

import json
import math

import pytest

from credrank.core.maths import shrink
from credrank.documents.schema import SOURCE_TYPES
from credrank.provenance import SourceTyper
from credrank.signals.prior import preset
from credrank_bench.experiments.coaid_priors import (
    brier,
    coaid_tables,
    evaluate_fitted_priors,
    fit_type_priors,
    log_loss,
    shrink_priors,
    type_counts,
)

BASE = preset("current")


def test_toy_fit_by_hand():
    # URLs the bundled rules type as government (cdc.gov) and user_generated (facebook.com)
    urls = ["https://www.cdc.gov/a", "https://www.cdc.gov/b", "https://www.cdc.gov/c",
            "https://www.facebook.com/x", "https://www.facebook.com/y"]
    typer = SourceTyper()
    assert [typer.classify(u).source_type for u in urls] == ["government"] * 3 + [
        "user_generated"] * 2
    labels = [True, True, False, False, False]
    fitted, counts = fit_type_priors(urls, labels, typer, BASE, strength=2.0)
    assert counts["government"] == {"n": 3, "real": 2, "fake": 1}
    assert counts["user_generated"] == {"n": 2, "real": 0, "fake": 2}
    # (2 + 2·.9)/(3 + 2) = .76 ; (0 + 2·.4)/(2 + 2) = .2
    assert fitted["government"] == pytest.approx(0.76)
    assert fitted["user_generated"] == pytest.approx(0.2)
    assert fitted["blog"] == BASE["blog"]  # no data: the preset


def test_no_data_equals_base_for_any_strength():
    counts = type_counts([], [])
    for m in (0.0, 1.0, 50.0):
        assert dict(shrink_priors(counts, BASE, m).values) == pytest.approx(dict(BASE.values))


def test_large_n_tends_to_empirical_rate():
    counts = {t: {"n": 0, "real": 0, "fake": 0} for t in SOURCE_TYPES}
    counts["blog"] = {"n": 100_000, "real": 20_000, "fake": 80_000}
    fitted = shrink_priors(counts, BASE, 10.0)
    assert fitted["blog"] == pytest.approx(0.2, abs=1e-4)
    assert abs(fitted["blog"] - 0.2) < abs(shrink_priors(counts, BASE, 1000.0)["blog"] - 0.2)


def test_strength_interpolates_monotonically():
    counts = type_counts(["blog"] * 10, [True] * 9 + [False])
    values = [shrink_priors(counts, BASE, m)["blog"] for m in (0, 1, 10, 100, 10_000)]
    assert values[0] == pytest.approx(0.9)
    assert values == sorted(values, reverse=True)  # from .9 down toward the preset .5
    assert values[-1] == pytest.approx(0.5, abs=1e-3)


def test_zero_rate_with_zero_strength_is_floored():
    counts = type_counts(["ai_generated"] * 4, [False] * 4)
    assert shrink_priors(counts, BASE, 0.0, floor=0.02)["ai_generated"] == 0.02


@pytest.mark.parametrize("strength", [-1, float("inf"), float("nan"), "10", True])
def test_bad_strength(strength):
    with pytest.raises(ValueError, match="strength"):
        shrink_priors(type_counts([], []), BASE, strength)


def test_bad_labels_and_types():
    with pytest.raises(ValueError, match=r"labels\[1\]"):
        type_counts(["blog", "blog"], [True, "real"])
    with pytest.raises(ValueError, match="expected 2 entries"):
        type_counts(["blog", "blog"], [True])
    with pytest.raises(ValueError, match=r"types\[0\]"):
        type_counts(["website"], [True])


def test_shrink_priors_is_core_shrinkage_clipped():
    counts = type_counts(["blog"] * 10 + ["government"] * 3, [True] * 9 + [False] * 4)
    fitted = shrink_priors(counts, BASE, 4.0)
    n = [counts[t]["n"] for t in SOURCE_TYPES]
    k = [counts[t]["real"] for t in SOURCE_TYPES]
    expected = shrink(k, n, [BASE[t] for t in SOURCE_TYPES], 4.0)
    assert [fitted[t] for t in SOURCE_TYPES] == pytest.approx(list(expected))


def test_one_class_test_set_gives_an_undefined_auc(tmp_path):
    for date, real in (("05-01-2020", ["https://www.cdc.gov/1", "https://www.facebook.com/a"]),
                       ("07-01-2020", ["https://www.cdc.gov/2"])):
        d = tmp_path / date
        d.mkdir()
        (d / "NewsRealCOVID-19.csv").write_text(
            "news_url,title,content\n" + "".join(f"{u},t,c\n" for u in real))
    res = evaluate_fitted_priors(tmp_path)
    assert res["metrics"]["fitted"]["auc"] is None  # never a stand-in 0.5
    predictors = coaid_tables(res)[1]
    assert predictors.mean("fitted", "AUC") is None


def test_log_loss_and_brier_by_hand():
    assert log_loss([0.8, 0.4], [True, False]) == pytest.approx(
        -(math.log(0.8) + math.log(0.6)) / 2)
    assert brier([0.8, 0.4], [True, False]) == pytest.approx((0.04 + 0.16) / 2)
    assert log_loss([1.0], [False]) == pytest.approx(-math.log(1e-6))  # clipped, finite
    assert log_loss([], []) is None


def test_evaluate_on_toy_folders(tmp_path):
    header = "news_url,title,content\n"
    for date, real, fake in [
        ("05-01-2020", ["https://www.cdc.gov/1", "https://www.cdc.gov/2"],
         ["https://www.facebook.com/1"]),
        ("07-01-2020", ["https://www.cdc.gov/3", "https://www.facebook.com/ok"],
         ["https://www.facebook.com/2", ""]),
    ]:
        d = tmp_path / date
        d.mkdir()
        (d / "NewsRealCOVID-19.csv").write_text(
            "\ufeff" + header + "".join(f"{u},t,c\n" for u in real), encoding="utf-8")
        (d / "NewsFakeCOVID-19.csv").write_text(
            header + "".join(f"{u},t,c\n" for u in fake), encoding="utf-8")
    res = evaluate_fitted_priors(tmp_path, strength=1.0)
    assert res["train_folders"] == ["05-01-2020"] and res["test_folders"] == ["07-01-2020"]
    # fit: government 2/2, user_generated 0/1 → (2+.9)/3, (0+.4)/2
    assert res["fitted"]["values"]["government"] == pytest.approx(2.9 / 3)
    assert res["fitted"]["values"]["user_generated"] == pytest.approx(0.2)
    assert res["n_test"] == 3  # the row without a URL is skipped by the reader, and said so
    assert any("row without news_url" in note for note in res["notes"])
    # test: cdc real (λ .967), facebook real and fake (λ .2) → AUC (1 + ½)/2 = .75
    assert res["metrics"]["fitted"]["auc"] == pytest.approx(0.75)
    assert res["metrics"]["constant"]["auc"] == pytest.approx(0.5)
    json.dumps(res)
    types, predictors = coaid_tables(res)
    assert types.kind == "descriptive" and types.row("government").params["fitted_prior"] == \
        pytest.approx(2.9 / 3)
    assert predictors.mean("fitted", "AUC") == pytest.approx(0.75)
    assert [c.direction for c in predictors.columns] == ["higher", "lower", "lower"]
    assert not any(r.reads_labels for r in predictors.rows)


def test_evaluate_rejects_bad_split(tmp_path):
    d = tmp_path / "05-01-2020"
    d.mkdir()
    (d / "NewsRealCOVID-19.csv").write_text("news_url,title,content\nhttps://a.gov/,t,c\n")
    with pytest.raises(ValueError, match="at least 2 release folders"):
        evaluate_fitted_priors(tmp_path)
    with pytest.raises(ValueError, match="not found"):
        evaluate_fitted_priors(tmp_path, train_folders=["01-01-2019"])


# -- real data ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def coaid_result(shared_data):
    folder = shared_data / "coaid"
    if not folder.is_dir():
        pytest.skip(f"CoAID not found at {folder}")
    return evaluate_fitted_priors(folder, strength=10.0)


def test_coaid_heldout_is_sane(coaid_result):
    r = coaid_result
    assert set(r["train_folders"]).isdisjoint(r["test_folders"])
    assert r["n_train"] > 1000 and r["n_test"] > 500
    fitted = r["fitted"]["values"]
    assert all(0 < v <= 1 for v in fitted.values())
    # each fitted prior lies between the preset and the training rate of its type
    for t, c in r["counts"]["train"].items():
        lo, hi = sorted((r["base"]["values"][t], c["real"] / c["n"] if c["n"] else
                         r["base"]["values"][t]))
        assert lo - 1e-9 <= fitted[t] <= hi + 1e-9
    m = r["metrics"]
    # URL type separates real from fake better than chance on later releases
    assert m["fitted"]["auc"] > 0.6
    # fitting does not make the held-out log-loss worse than the hand-set preset
    assert m["fitted"]["log_loss"] < m["base"]["log_loss"]
    assert m["constant"]["auc"] == pytest.approx(0.5)
    assert "markdown" not in r
    json.dumps(r)
