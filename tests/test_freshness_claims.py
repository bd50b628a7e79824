"""A freshness config's ``[claim_class]`` half-lives and ``[no_decay]`` opt-outs (chapter 35.7:
"a historical fact need not decay") reach the stage through every door: ``claim_class`` and
``persistent`` are declared document fields, stored by ``credrank index``, returned by every
index search (engine payload and columnar copy), taken by ``credrank.rerank``, ``POST /rerank``
and the adapters' metadata. Before, nothing filled those columns: a ``historical`` document
decayed to about 0 while ``info.freshness.half_lives`` echoed the table."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from credrank.adapters._common import CredrankScorer, Passage
from credrank.cli import app
from credrank.documents import read_corpus
from credrank.freshness.config import FreshnessConfig, config_from_dict
from credrank.rerank import rerank
from credrank.searcher import Searcher
from serving import asgi_client, in_process

runner = CliRunner()
NOW = "2026-01-01"
#: h1 a historical claim (2000), h2 a statistic a week old, h3 a persistent document (2000),
#: h4 a dated document of neither (2016: the default τ), h5 undated and historical
RECORDS: list[dict[str, Any]] = [
    {"id": "h1", "text": "Vitamin D history of discovery.", "url": "https://www.nih.gov/h1",
     "published_at": "2000-01-01", "claim_class": "historical"},
    {"id": "h2", "text": "Vitamin D statistic this week.", "url": "https://www.nih.gov/h2",
     "published_at": "2025-12-25", "claim_class": "statistic"},
    {"id": "h3", "text": "Vitamin D persistent definition.", "url": "https://www.nih.gov/h3",
     "published_at": "2000-01-01", "persistent": True},
    {"id": "h4", "text": "Vitamin D page.", "url": "https://www.nih.gov/h4",
     "published_at": "2016-01-01"},
    {"id": "h5", "text": "Vitamin D undated historical.", "url": "https://www.nih.gov/h5",
     "claim_class": "historical"},
]
CONFIG = """half_life = "365d"
[claim_class]
statistic = "7d"
[no_decay]
claim_class = ["historical"]
field = "persistent"
"""
#: what the config gives each document (h4: the default τ of 365 d over 3653 days)
EXPECTED = {"h1": 1.0, "h2": 0.5, "h3": 1.0, "h4": 2 ** (-3653 / 365), "h5": 1.0}


def freshness_of(hits: list[dict[str, Any]]) -> dict[str, float]:
    return {h["doc_id"]: h["score_breakdown"]["freshness"] for h in hits}


def check(got: dict[str, float], info: dict[str, Any]) -> None:
    assert got.keys() == EXPECTED.keys()
    for doc_id, w in EXPECTED.items():
        assert got[doc_id] == pytest.approx(w, rel=1e-9), doc_id
    assert info["counts"]["no_decay"] == 3
    assert sorted(info["no_decay"]) == ["h1", "h3", "h5"]
    assert "warnings" not in info or not info["warnings"]


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "fresh.toml"
    path.write_text(CONFIG)
    return path


@pytest.fixture
def index(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    where = tmp_path / "idx"
    res = runner.invoke(app, ["index", str(corpus), "--index", str(where),
                              "--embedder", "hashing"])
    assert res.exit_code == 0, res.output
    return where


def spec(config: Path, **options: Any) -> Any:
    return Searcher.spec(top_k=5, freshness=f"half_life=365d,now={NOW},config={config}",
                         **options)


def test_the_index_search_path_reads_claim_class_and_persistent(index: Path,
                                                                config: Path) -> None:
    """A config always scores in Python (its document opt-out reads a column), so the
    default (auto) pushdown and ``--no-pushdown`` are one path; the engine's payload and
    the columnar copy a long-lived searcher keeps give the same columns."""
    with Searcher.open(index) as searcher:
        for keep in (False, True):
            searcher.keep_columns(keep)
            out = searcher.search_json("vitamin D", spec(config))
            assert out["settings"]["pushdown"] is False
            check(freshness_of(out["hits"]), out["info"]["freshness"])
    for flag in ([], ["--no-pushdown"]):
        res = runner.invoke(app, ["search", "vitamin D", "--index", str(index), "--top-k", "5",
                                  "--freshness", f"half_life=365d,now={NOW},config={config}",
                                  "--json", *flag])
        assert res.exit_code == 0, res.output
        doc = json.loads(res.stdout)
        check(freshness_of(doc["hits"]), doc["info"]["freshness"])
    res = runner.invoke(app, ["search", "vitamin D", "--index", str(index), "--freshness",
                              f"half_life=365d,now={NOW},config={config}", "--pushdown"])
    assert res.exit_code != 0 and "config=FILE" in res.output  # never a silent difference


def test_the_library_rerank_takes_them_as_candidate_fields(config: Path) -> None:
    records = [{**r, "score": 0.5} for r in RECORDS]
    out = rerank("vitamin D", records, "hashing",
                 {"top_k": 5, "stages": [{"stage": "freshness", "half_life": "365d",
                                          "now": NOW, "config": str(config)}]})
    check(freshness_of(out.hits()), out.info["freshness"])
    with pytest.raises(ValueError, match=r"candidates\[0\]\.persistent: expected true or "
                                         r"false, got 'yes'"):
        rerank("vitamin D", [{**records[0], "persistent": "yes"}], "hashing")


def test_post_rerank_takes_them_as_candidate_fields(index: Path, config: Path) -> None:
    body = {"query": "vitamin D", "top_k": 5, "freshness": f"half_life=365d,now={NOW},config=fc",
            "candidates": [{**r, "score": 0.5} for r in RECORDS]}

    async def scenario(app_: Any) -> list[Any]:
        async with asgi_client(app_) as c:
            bad = {**body, "candidates": [{**RECORDS[0], "persistent": "often"}]}
            return [await c.post("/rerank", json=body), await c.post("/rerank", json=bad)]

    with in_process(index, models={"fc": config}) as app_:
        good, bad = asyncio.run(scenario(app_))
    assert good.status_code == 200, good.text
    check(freshness_of(good.json()["hits"]), good.json()["info"]["freshness"])
    assert bad.status_code == 422 and "expected true or false" in bad.text


def test_the_adapters_read_them_from_metadata_or_the_fields_mapping(config: Path) -> None:
    freshness = f"half_life=365d,now={NOW},config={config}"
    for mapping, key in ((None, "persistent"), ({"persistent": "evergreen"}, "evergreen")):
        scorer = CredrankScorer(embedder="hashing", top_k=5, freshness=freshness,
                                fields=mapping)
        passages = [Passage(r["text"], {(key if k == "persistent" else k): v
                                        for k, v in r.items() if k not in ("id", "text")},
                            score=0.5) for r in RECORDS]
        ranked = scorer.rank("vitamin D", passages)
        got = {RECORDS[r.index]["id"]: r.breakdown["score_breakdown"]["freshness"]
               for r in ranked}
        for doc_id, w in EXPECTED.items():
            assert got[doc_id] == pytest.approx(w, rel=1e-9), (mapping, doc_id)


def test_the_readers_check_the_fields_and_drop_what_cannot_be_read(tmp_path: Path) -> None:
    corpus = tmp_path / "c.csv"
    corpus.write_text("id,text,claim_class,persistent\n"
                      "a,alpha,historical,TRUE\nb,beta,,false\nc,gamma,statistic,yes\n")
    result = read_corpus(corpus)
    docs = {d.id: d for d in result.documents}
    assert (docs["a"].claim_class, docs["a"].persistent) == ("historical", True)
    assert (docs["b"].claim_class, docs["b"].persistent) == (None, False)
    assert docs["c"].persistent is None and "persistent" not in docs["c"].extra
    [dropped] = result.dropped
    assert (dropped.field, dropped.line) == ("persistent", 4)
    assert "expected true or false, got 'yes'" in dropped.reason
    strict = read_corpus(corpus, strict=True)
    assert [r.field for r in strict.rejects] == ["persistent"]


def test_a_config_that_reaches_no_candidate_says_so() -> None:
    cfg = config_from_dict({"half_life": "1y", "claim_class": {"statistic": "7d"},
                            "no_decay": {"claim_class": ["historical"], "field": "timeless"}})
    notes = cfg.unreached([None, ""], [None, None])
    assert len(notes) == 2
    assert "[claim_class] and no_decay.claim_class name claim classes (historical, " \
           "statistic), but none of the candidates carries a claim_class" in notes[0]
    assert "no_decay.field 'timeless': none of the candidates carries it" in notes[1]
    assert "--field timeless=persistent" in notes[1]
    assert cfg.unreached(["statistic", None], [None, True]) == []
    assert cfg.unreached([], []) == []
    # the default field absent everywhere: no document opted out, nothing to say
    plain = FreshnessConfig(half_life=365.0, host={"www.cdc.gov": 30.0})
    assert plain.unreached([None], [None]) == []
    assert math.isinf(plain.half_lives([None], [None], [None], [True])[0])


def test_the_stage_says_a_config_that_reaches_no_candidate() -> None:
    """The freshness stage puts the notes in ``info.freshness.warnings`` and warns on stderr
    (a FreshnessConfigWarning): claim classes named where no candidate carries one were
    silently ignored."""
    from conftest import build_batch
    from credrank.freshness.config import FreshnessConfigWarning
    from credrank.stages.freshness import FreshnessDecay

    cfg = config_from_dict({"half_life": "1y", "claim_class": {"statistic": "7d"}})
    batch = build_batch([0.5, 0.4], published_at=["2025-01-01", "2024-01-01"])
    with pytest.warns(FreshnessConfigWarning, match="none of the candidates carries"):
        out = FreshnessDecay(config=cfg, now="2026-01-01")(batch)
    [note] = out.info["freshness"]["warnings"]
    assert "[claim_class] name claim classes (statistic)" in note
    quiet = FreshnessDecay(config=cfg, now="2026-01-01")(
        build_batch([0.5], published_at=["2025-01-01"], claim_class=["statistic"]))
    assert "warnings" not in quiet.info["freshness"]


def test_the_context_tiers_a_claim_the_ranking_does_not_decay() -> None:
    """A time-persistent claim (the config's no-decay opt-out) weighed 1 in the ranking but
    lost a tier per half-life in the context (tier 1 instead of 3)."""
    from conftest import build_batch
    from credrank.context.build import annotate
    from credrank.stages.freshness import FreshnessDecay

    cfg = config_from_dict({"half_life": "1y", "no_decay": {"claim_class": ["historical"]}})
    batch = build_batch([0.9, 0.9], ids=["old-fact", "old-news"], source_type=["government"] * 2,
                        text=["a.", "b."], published_at=["2016-01-01", "2016-01-01"],
                        claim_class=["historical", None])
    ranked = FreshnessDecay(config=cfg, now="2026-01-01")(batch)
    assert ranked.factors["freshness"][0] == 1.0
    doc = annotate(ranked, now="2026-01-01", half_life="1y")
    fact, news = doc.passages[0], doc.passages[1]
    assert fact.doc_id == "old-fact" and fact.downgrade == 0 and fact.tier == 3
    assert news.downgrade == 10 and news.tier == 1
    assert fact.elapsed_days == news.elapsed_days  # its age is still shown
