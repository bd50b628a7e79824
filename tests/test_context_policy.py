"""``credrank context``'s tier policy as the ranking applied it (chapter 35.4): the undated
weight over the ranking's pool, the prior the ranking used, one clock, future dates, the
library's validators, labels inside a text, excerpts and the small print."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from cli_inprocess import run_cli
from credrank.context.build import annotate, build_context
from credrank.context.render import AnnotatedPassage, citation
from credrank.context.tiers import (
    points,
    relative,
    source_tier_from_score,
    split_sentences,
    weight_downgrade,
)
from credrank.freshness.dates import parse_instant
from credrank.signals.prior import CURRENT

NOW = "2026-01-01"
YEAR = 365.0
MEASLES = "Is the measles vaccine safe?"


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def measles_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dated 2025-12-01, B undated, six dated 2020-01-01 (the tester's tk.jsonl)."""
    folder = tmp_path_factory.mktemp("measles")
    rows = [{"id": "A", "text": "Measles vaccine is safe and effective, the national agency "
             "says.", "url": "https://www.cdc.gov/measles/a", "published_at": "2025-12-01"},
            {"id": "B", "text": "Measles vaccine safety: the vaccine is safe and effective for "
             "children.", "url": "https://www.cdc.gov/measles/b"}]
    rows += [{"id": f"old{i}", "text": f"Measles vaccination schedule note {i}: vaccine "
              "safety reviewed.", "url": f"https://www.cdc.gov/measles/old{i}",
              "published_at": "2020-01-01"} for i in range(6)]
    out = run_cli("index", _write(folder / "tk.jsonl", rows), "--index", folder / "idx",
                  "--embedder", "hashing", "-q")
    assert out.returncode == 0, out.stderr
    return folder / "idx"


def _doc(index: Path, *args: str | Path, query: str = MEASLES) -> dict:
    out = run_cli("context", query, "--index", index, "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _passage(doc: dict, doc_id: str) -> dict:
    return next(p for p in doc["passages"] if p["doc_id"] == doc_id)


# -- 1. the undated weight is the pool's, not the shown top-k's ---------------------------------

def test_an_undated_tier_does_not_depend_on_the_context_length(measles_index: Path) -> None:
    """B (undated) was High at --top-k 2 and Low at --top-k 8: the neutral median was taken
    over the shown passages. It is the pool's now (the same pool: --fetch-k 8)."""
    base = ["--half-life", "1y", "--now", NOW, "--fetch-k", "8"]
    short, long = _doc(measles_index, *base, "--top-k", "2"), _doc(measles_index, *base,
                                                                   "--top-k", "8")
    assert [p["doc_id"] for p in short["passages"]][:2] == [p["doc_id"] for p in
                                                            long["passages"]][:2]
    b_short, b_long = _passage(short, "B"), _passage(long, "B")
    assert (b_short["tier"], b_short["inputs"]["freshness"]["downgrade"]) == (
        b_long["tier"], b_long["inputs"]["freshness"]["downgrade"])
    said = short["policy"]["undated_weight"]
    assert said["from"] == "pool" and said == long["policy"]["undated_weight"]
    # the median of the pool's dated weights: A (one month) and six of six years
    ages = [(np.datetime64("2026-01-01") - np.datetime64(d)).astype(int) for d in
            ["2025-12-01"] + ["2020-01-01"] * 6]
    assert said["value"] == pytest.approx(float(np.median(np.exp2(-np.array(ages) / 365.25))))


def test_the_undated_weight_is_the_freshness_stages_when_it_ran(measles_index: Path) -> None:
    """With the ranking's freshness stage at the same half-life, the undated passage gets the
    weight that stage gave it (its factor)."""
    doc = _doc(measles_index, "--half-life", "1y", "--freshness", "half_life=1y", "--now",
               NOW, "--top-k", "2")
    said = doc["policy"]["undated_weight"]
    assert said["from"] == "freshness stage"
    assert said["value"] == doc["info"]["freshness"]["undated"]["weight"]
    b = _passage(doc, "B")
    assert said["value"] == b["inputs"]["ranking"]["freshness"]


def test_annotate_takes_the_median_over_the_pool_it_is_given(make_batch) -> None:
    """The library: the median over ``pool`` (the ranking's), not over the passages shown."""
    ranked = make_batch([0.9, 0.8], ids=["fresh", "undated"], query="q",
                        source_type=["government"] * 2, text=["a.", "b."],
                        published_at=["2025-12-01", None])
    pool = make_batch([0.9, 0.8, 0.5, 0.4, 0.3], ids=["fresh", "undated", "o1", "o2", "o3"],
                      query="q", source_type=["government"] * 5, text=["x."] * 5,
                      published_at=["2025-12-01", None, "2020-01-01", "2020-01-01",
                                    "2020-01-01"])
    alone = annotate(ranked, now=NOW, half_life=YEAR)
    pooled = annotate(ranked, now=NOW, half_life=YEAR, pool=pool)
    assert alone.used["undated_weight"]["from"] == "ranked"
    assert pooled.used["undated_weight"]["from"] == "pool"
    assert alone.passages[1].downgrade == 0           # median of one fresh weight
    assert pooled.passages[1].downgrade == 6          # median of the pool: six years
    assert build_context(ranked, now=NOW, half_life=YEAR, pool=pool
                         ).passages[1].downgrade == 6
    # the whole pool ranked with top_k gives the same as pool=
    assert annotate(pool, now=NOW, half_life=YEAR, top_k=2).passages[1].downgrade == 6


# -- 3. auto bins the prior the ranking applied --------------------------------------------------

def test_auto_bins_the_prior_the_ranking_applied(make_batch) -> None:
    """A domain score of 0.97 for a blog made it rank first while the tier said Low (the
    ``current`` type table); a prior other than the current preset is binned itself now."""
    types = ["blog", "government"]
    scored = make_batch([0.8, 0.7], source_type=types, text=["a.", "b."],
                        factors={"prior": [0.97, 0.2]})
    doc = annotate(scored, now=NOW)
    assert [p.source_tier for p in doc.passages] == [3, 1]
    assert doc.used["source_used"]["basis"] == "factor:prior"
    assert doc.passages[0].source_basis == "factor:prior=0.97"
    plain = make_batch([0.8, 0.7], source_type=types, text=["a.", "b."],
                       factors={"prior": [CURRENT[t] for t in types]})
    same = annotate(plain, now=NOW)
    assert same.used["source_used"]["basis"] == "source_type"
    assert [p.source_tier for p in same.passages] == [1, 3]
    typed = annotate(scored, now=NOW, source_tier="type")
    assert typed.used["source_used"]["basis"] == "source_type"
    assert "source_used" in doc.to_json()["policy"]


def test_cli_auto_uses_the_aggressive_preset(demo_index_hashing: Path) -> None:
    doc = _doc(demo_index_hashing, "--priors", "aggressive", "--top-k", "5",
               query="does melatonin help children sleep")
    assert doc["policy"]["source_used"]["basis"] == "factor:prior"
    priors = [p["inputs"]["ranking"]["prior"] for p in doc["passages"]]
    assert [p["inputs"]["source"]["tier"] for p in doc["passages"]] == \
        source_tier_from_score(priors).tolist()


# -- 4. one clock on replay -----------------------------------------------------------------------

def test_a_replay_without_now_tiers_at_the_specs_now(measles_index: Path,
                                                      tmp_path: Path) -> None:
    """``--pipeline out.json`` without ``--now`` ranked at the spec's now and tiered at the
    wall clock."""
    first = _doc(measles_index, "--freshness", "half_life=1y", "--half-life", "1y", "--now",
                 "2021-06-01", "--top-k", "4")
    saved = tmp_path / "first.json"
    saved.write_text(json.dumps(first), encoding="utf-8")
    again = _doc(measles_index, "--pipeline", saved, "--half-life", "1y")
    assert again["now"] == first["now"] == "2021-06-01T00:00:00+00:00"
    assert again["passages"] == first["passages"] and again["prompt"] == first["prompt"]


def test_without_now_the_tiers_take_the_rankings_clock(make_batch) -> None:
    batch = make_batch([0.8], source_type=["government"], text=["a."],
                       published_at=["2020-01-01"]).with_info(
        freshness={"now": "2021-01-01T00:00:00+00:00"})
    assert annotate(batch, half_life=YEAR).now.isoformat() == "2021-01-01T00:00:00+00:00"


# -- 5. / 11. the library refuses what the CLI refuses ---------------------------------------------

@pytest.mark.parametrize("top_k", [0, -1, 2.7, True, "2"])
def test_library_top_k_is_validated(make_batch, top_k) -> None:
    batch = make_batch([0.8, 0.7, 0.6], text=["a.", "b.", "c."])
    with pytest.raises(ValueError, match="top_k: expected an integer in"):
        build_context(batch, top_k=top_k)
    with pytest.raises(ValueError, match="top_k"):
        annotate(batch, top_k=top_k)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"undated": "exclude"}, "undated exclude: only with half_life"),
    ({"undated": "penalty:0.5"}, "undated penalty:0.5: only with half_life"),
    ({"source_cuts": (-5, 7)}, r"source_cuts: expected cut points in \[0, 1\]"),
    ({"relevance_cuts": (0.3, 1.5)}, r"relevance_cuts: expected cut points in \[-1, 1\]"),
])
def test_library_policy_is_validated(make_batch, kwargs: dict, message: str) -> None:
    batch = make_batch([0.8], text=["a."], source_type=["blog"])
    with pytest.raises(ValueError, match=message):
        build_context(batch, **kwargs)


# -- 6. a date after T has no usable age -------------------------------------------------------

def test_a_future_date_counts_as_unknown(make_batch) -> None:
    """A page dated after T got the best possible age (downgrade 0); it is unknown now: the
    undated policy, flagged in the citation and under info.context."""
    batch = make_batch([0.8, 0.7, 0.6], ids=["future", "old", "undated"],
                       source_type=["government"] * 3, text=["a.", "b.", "c."],
                       published_at=["2030-01-01", "2023-01-01", None])
    doc = annotate(batch, now=NOW, half_life=YEAR, undated="penalty:0.25")
    future, undated = doc.passages[0], doc.passages[2]
    assert future.downgrade == undated.downgrade == 2 and future.elapsed_days is None
    assert future.tier == 1
    assert "date: 2030-01-01, after T" in citation(future)
    assert doc.info["context"]["dated_after_now"] == ["future"]
    out = annotate(batch, now=NOW, half_life=YEAR, undated="exclude")
    assert [p.doc_id for p in out.passages] == ["old"]
    assert "dated after the evaluation time" in out.excluded[0].reason
    # neutral: the median is over the dated of the pool as the ranking's freshness stage
    # counts them, the future one of unknown age: the same weight whether it ran or not
    neutral = annotate(batch, now=NOW, half_life=YEAR)
    old_weight = 2 ** -((parse_instant(NOW) - parse_instant("2023-01-01")).days / YEAR)
    expected = weight_downgrade(old_weight)
    assert neutral.passages[0].downgrade == neutral.passages[2].downgrade == expected
    assert neutral.used["undated_weight"]["from"] == "ranked"


def test_the_neutral_weight_is_the_freshness_stages_with_dates_after_now(make_batch) -> None:
    """The context's neutral median over a pool with a page dated after T equals the ranking's
    freshness stage's undated weight: both count that page as of unknown age (the stage gave
    it weight 1, the best of the pool, before)."""
    from credrank.stages.freshness import FreshnessDecay

    pool = make_batch([0.9, 0.8, 0.7, 0.6], ids=["future", "a", "b", "undated"],
                      source_type=["government"] * 4, text=["w.", "x.", "y.", "z."],
                      published_at=["2030-01-01", "2024-01-01", "2020-01-01", None])
    ranked = FreshnessDecay(YEAR, now=NOW)(pool)
    stage_weight = ranked.info["freshness"]["undated"]["weight"]
    assert ranked.factors["freshness"][0] == pytest.approx(stage_weight)
    assert ranked.info["freshness"]["counts"]["dated"] == 2
    doc = annotate(pool, now=NOW, half_life=YEAR)
    assert doc.used["undated_weight"]["value"] == pytest.approx(stage_weight)


# -- LOW: excerpts, arithmetic, cite default, wording, sentences, empty context ----------------

def test_a_citation_after_t_on_ts_own_day_gives_the_time() -> None:
    """T = 2026-01-01 and a page of 2026-01-01T04:00Z: "date: 2026-01-01, after T" read as a
    contradiction; the time is given when the date after T has one."""
    p = AnnotatedPassage(rank=1, doc_id="x", text="t", tier=2, relevance_tier=2, source_tier=2,
                         source_basis="source_type", downgrade=0, similarity=0.5,
                         after_now=True, document_date="2026-01-01T04:00:00+00:00")
    assert "date: 2026-01-01T04:00Z, after T" in citation(p)
    undated_wrapper = AnnotatedPassage(
        rank=1, doc_id="w", text="t", tier=2, relevance_tier=2, source_tier=2,
        source_basis="source_type", downgrade=0, similarity=0.5,
        freshness_date="2020-01-01T00:00:00+00:00", freshness_basis="inherited:o")
    assert "date:" not in citation(undated_wrapper)  # the origin's date is not its own
    midnight = AnnotatedPassage(rank=1, doc_id="x", text="t", tier=2, relevance_tier=2,
                                source_tier=2, source_basis="source_type", downgrade=0,
                                similarity=0.5, after_now=True,
                                document_date="2027-03-01T00:00:00+00:00")
    assert "date: 2027-03-01, after T" in citation(midnight)


def test_the_citation_says_a_passage_is_an_excerpt() -> None:
    p = AnnotatedPassage(rank=1, doc_id="x", text="t", tier=2, relevance_tier=2, source_tier=2,
                         source_basis="source_type", downgrade=0, similarity=0.5,
                         passage={"number": 14, "of": 14, "span": [0, 1]})
    assert citation(p).endswith("; passage 14 of 14)")
    whole = AnnotatedPassage(rank=1, doc_id="x", text="t", tier=2, relevance_tier=2,
                             source_tier=2, source_basis="source_type", downgrade=0,
                             similarity=0.5, passage={"number": 1, "of": 1, "span": [0, 1]})
    assert "passage" not in citation(whole)


def test_the_other_worked_numbers_of_35_4() -> None:
    """ChatGPT's HotpotQA EM with prompted labels, 0.334 → 0.422: 8.8 points. (The
    back-solved 50.9/1.82 ≈ 27.967033 is not computed by credrank.)"""
    assert points(0.422, 0.334) == pytest.approx(8.8)
    assert relative(0.422, 0.334) == pytest.approx(0.088 / 0.334)


def test_one_cite_default(make_batch) -> None:
    """The library cites by default, as ``credrank context`` does."""
    doc = annotate(make_batch([0.8], text=["a."], source_type=["blog"], host=["b.com"]),
                   now=NOW)
    assert "(source: blog; host: b.com)" in doc.render("cag")
    assert doc.to_json("plain")["cite"] is True
    assert "(source:" not in doc.render("cag", cite=False)


def test_cli_error_wording(measles_index: Path, tmp_path: Path) -> None:
    lexical = run_cli("context", MEASLES, "--index", measles_index, "--lexical")
    assert lexical.returncode == 2 and "--lexical: context needs dense retrieval" in \
        lexical.stderr and "drop --lexical" in lexical.stderr
    spec = tmp_path / "bm25.json"
    spec.write_text(json.dumps({"credrank_pipeline": 1, "top_k": 3, "retrieval": "bm25"}),
                    encoding="utf-8")
    named = run_cli("context", MEASLES, "--index", measles_index, "--pipeline", spec)
    assert named.returncode == 2 and f"--pipeline {spec}: retrieval:" in " ".join(
        named.stderr.split())
    said = [run_cli("context", MEASLES, "--index", measles_index, "--now", v).stderr
            for v in ("", "yesterday")]
    assert all("--now: expected an ISO 8601 date such as 2024-05-01 or 2024-05-01T12:00:00Z"
               in " ".join(s.split()) for s in said)


@pytest.mark.parametrize(("text", "expected"), [
    ("阿司匹林有效。它降低风险。", ["阿司匹林有效。", "它降低风险。"]),
    ("Dr. Smith said e.g. aspirin works. U.S. data agree.",
     ["Dr. Smith said e.g. aspirin works.", "U.S. data agree."]),
    ("Take vitamin D. It helps.", ["Take vitamin D.", "It helps."]),
    ("是吗？是的！", ["是吗？", "是的！"]),
])
def test_sentences_of_cjk_and_abbreviations(text: str, expected: list[str]) -> None:
    assert split_sentences(text) == expected


def test_an_empty_context_is_said(tmp_path: Path) -> None:
    rows = [{"id": "u1", "text": "Undated note about tea and sleep.",
             "url": "https://a.blogspot.com/x"},
            {"id": "u2", "text": "Another undated note about tea.",
             "url": "https://b.blogspot.com/y"}]
    idx = tmp_path / "idx"
    assert run_cli("index", _write(tmp_path / "u.jsonl", rows), "--index", idx, "--embedder",
                   "hashing", "-q").returncode == 0
    out = run_cli("context", "tea", "--index", idx, "--undated", "exclude", "--half-life",
                  "1y", "--now", NOW)
    assert out.returncode == 0
    assert "note: the context is empty: 0 passages (2 excluded)" in out.stderr



def test_the_library_reads_half_life_as_every_door_writes_it(make_batch) -> None:
    """``--half-life 1y`` and ``"half_life": "1y"`` were accepted at the CLI and over HTTP;
    the library took days only."""
    batch = make_batch([0.8, 0.7], ids=["a", "b"], source_type=["government"] * 2,
                       text=["a.", "b."], published_at=["2024-01-01", "2020-01-01"])
    words = annotate(batch, now=NOW, half_life="1y")
    days = annotate(batch, now=NOW, half_life=365.25)
    assert [p.downgrade for p in words.passages] == [p.downgrade for p in days.passages]
    assert words.policy.interval_days == 365.25
    with pytest.raises(ValueError, match="half_life"):
        annotate(batch, now=NOW, half_life="soon")
