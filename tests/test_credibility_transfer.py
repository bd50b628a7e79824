"""The leave-one-dataset-out credibility experiment (issue 25, item 3) on tiny synthetic sets:
no held-out page (or a page of one of its questions in another set) ever trains the model
that scores it, the table and report, the machine-text hook."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from credrank.credibility.features import CredibilityFeaturizer
from credrank.credibility.model import Config
from credrank.index.embed import HashingEmbedder
from credrank_bench.experiments import credibility_transfer as ct
from stand_in_scorer import StandInScorer

FAST = (Config(("cues", "url"), 10.0), Config(("cues", "url", "embedding"), 100.0))


def _fake(rng: np.random.Generator, topic: str) -> str:
    return (f"SHOCKING!!! {topic.upper()} THEY DO NOT WANT YOU TO KNOW!!! share before it is "
            f"deleted {rng.integers(100)} times!!! WAKE UP")


def _real(rng: np.random.Generator, topic: str) -> str:
    return (f"A university study of {topic} reviewed the evidence; the national institute "
            f"cites {rng.integers(100)} references. Results were published in a journal.")


def _write_sets(root: Path, rng: np.random.Generator) -> None:
    """CrAM-format and EvoTemp-format files: 5 questions each (1 fake + 2 real per CrAM
    question, 1 low + 2 high per EvoTemp one). EvoTemp's question e0 is CrAM's q0 (a linked
    question) and shares one real text with it."""
    cram = []
    shared_text = _real(rng, "the shared river")
    for q in range(5):
        topic = f"river {q}"
        docs = [{"text": _fake(rng, topic), "is_misinformation": True},
                {"text": shared_text if q == 0 else _real(rng, topic),
                 "is_misinformation": False},
                {"text": _real(rng, topic + " bank"), "is_misinformation": False}]
        cram.append({"id": f"q{q}", "question": f"Where does the river {q} flow?",
                     "answers": ["sea"], "wrong_answer": "lake", "docs": docs})
    (root / "cram").mkdir(parents=True)
    (root / "cram" / "cram_nq_1000_reconstructed.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in cram), encoding="utf-8")
    evo = []
    for q in range(5):
        topic = f"mountain {q}"
        docs = [{"id": 0, "title": "", "text": _fake(rng, topic), "date": None, "cred": "low"},
                {"id": 1, "title": "", "text": shared_text if q == 0 else _real(rng, topic),
                 "date": "2023/01/02", "cred": "high"},
                {"id": 2, "title": "", "text": _real(rng, topic + " pass"), "date": None,
                 "cred": "high"}]
        question = "Where does the river 0 flow?" if q == 0 else f"How high is mountain {q}?"
        evo.append({"id": q, "question": question, "q_date": "2023/02/01", "docs": docs})
    (root / "cag").mkdir(parents=True)
    (root / "cag" / "EvoTemp.json").write_text(json.dumps(evo), encoding="utf-8")


def _third(rng: np.random.Generator) -> ct.LabelledSet:
    pages = []
    for g in range(5):
        pages.append(ct.Page(f"f{g}", _fake(rng, f"forest {g}"), f"http://x{g}.com/a", f"t{g}", 0))
        pages.append(ct.Page(f"r{g}", _real(rng, f"forest {g}"), f"https://u{g}.edu", f"t{g}", 1))
    return ct.LabelledSet("web", pages)


@pytest.fixture()
def sets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, ct.LabelledSet]:
    monkeypatch.setattr(ct, "DEFAULT_CONFIGS", FAST)
    rng = np.random.default_rng(0)
    _write_sets(tmp_path, rng)
    emb = HashingEmbedder(32)
    out = ct.load_sets(tmp_path, ["cram-nq", "evotemp"], emb, fetch_k=3)
    out["web"] = _third(rng)
    return out


def test_lodo_never_trains_on_the_held_out_set_or_its_questions(sets):
    featurizer = CredibilityFeaturizer(HashingEmbedder(32))
    items = ct.build_items(sets, featurizer)
    assert items.shared == 1  # the one text labelled in both CrAM and EvoTemp
    link = ct.question_link("Where does the river 0 flow?")
    assert link in items.links["cram-nq"] and link in items.links["evotemp"]
    result = ct.transfer(sets, featurizer, n_boot=50, machine_text={})
    assert list(result["sets"]) == ["cram-nq", "evotemp", "web"]
    for name, entry in result["sets"].items():
        assert entry["trained_on"], name
        assert all(not i.startswith(f"{name}/") for i in entry["trained_on"])
        assert name not in entry["trained_on_sets"]
        assert entry["lodo_auc"] is not None and 0.0 <= entry["lodo_auc"] <= 1.0
        assert entry["in_domain_auc"] is not None
        assert set(entry["single_source"]) == {"cram-nq", "evotemp", "web"} - {name}
        assert "machine_text_auc" not in entry  # no scores for it: no column, no number
    # holding out EvoTemp leaves out CrAM's pages of the linked question q0 (3 pages, one of
    # which is the shared text, already EvoTemp's), and the reverse
    evo = result["sets"]["evotemp"]
    assert evo["linked_questions"] == 5 and evo["left_out_by_links"] == 2
    assert not {"cram-nq/q0/d0", "cram-nq/q0/d2"} & set(evo["trained_on"])
    assert "cram-nq/q1/d0" in evo["trained_on"]
    cram = result["sets"]["cram-nq"]
    assert not any(i.startswith("evotemp/e0") or i.startswith("evotemp/0/")
                   for i in cram["trained_on"])
    assert cram["left_out_by_links"] == 2
    # harmful@1 where the set has question pools, none for the page-only set
    assert cram["harmful@1_similarity"] is not None and cram["harmful@1_lodo"] is not None
    assert result["sets"]["web"]["harmful@1_lodo"] is None
    text = ct.table(result)
    assert "machine-text AUC" not in text and text.count("\n") == 4
    assert "| web |" in ct.matrix(result)


def test_machine_text_hook_adds_a_column_only_where_scored(sets):
    featurizer = CredibilityFeaturizer(HashingEmbedder(32))
    items = ct.build_items(sets, featurizer)
    scores = {f"web/{p.doc_id}": (0.9 if p.label == 0 else 0.1) for p in sets["web"].pages}
    assert ct.machine_text_auc(items, "cram-nq", scores) is None
    mt = ct.machine_text_auc(items, "web", scores, n_boot=50)
    assert mt is not None and mt["auc"] == 1.0 and mt["pairs"] == mt["of_pairs"] == 10
    result = ct.transfer(sets, featurizer, n_boot=20, machine_text=scores,
                         with_in_domain=False)
    assert "machine_text_auc" in result["sets"]["web"]
    assert "machine_text_auc" not in result["sets"]["cram-nq"]
    text = ct.table(result)
    assert "machine-text AUC" in text and "1.000" in text.splitlines()[-1]


def test_machine_text_file_and_report(tmp_path: Path):
    path = tmp_path / "mt.csv"
    path.write_text("set,doc_id,score\nweb,f0,0.9\nweb,r0,0.2\n", encoding="utf-8")
    assert ct.read_machine_text(path) == {"web/f0": 0.9, "web/r0": 0.2}
    path.write_text("set,doc_id,score\nweb,f0,high\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"mt\.csv:2: score"):
        ct.read_machine_text(path)
    path.write_text("doc_id,score\n", encoding="utf-8")
    with pytest.raises(ValueError, match="header set,doc_id,score"):
        ct.read_machine_text(path)


def test_machine_text_feature_block_with_a_missing_indicator(sets):
    featurizer = CredibilityFeaturizer(HashingEmbedder(32))
    scores = {f"web/{p.doc_id}": (2.0 if p.label == 0 else -2.0) for p in sets["web"].pages}
    block = ct.score_features(scores)
    with pytest.raises(ValueError, match="extra: no feature vector for 'cram-nq/"):
        ct.build_items(sets, featurizer, block)  # CrAM's pages have no score
    items = ct.build_items(sets, featurizer, block, ct.SCORE_MISSING)
    x = items.data.x[:, items.slices["extra"]]
    assert x.shape[1] == 2
    web = {i for (s, _), i in items.item_of.items() if s == "web"}
    others = sorted(set(range(len(x))) - web)
    assert sorted(set(x[sorted(web), 0].tolist())) == [-2.0, 2.0]
    assert not x[sorted(web), 1].any()
    assert (x[others] == np.array(ct.SCORE_MISSING)).all()
    configs = ct.configs_for(items)
    assert len(configs) == 2 * len(FAST) and configs[-1].groups[-1] == "extra"


def test_machine_text_feature_needs_the_scores(tmp_path: Path):
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "credrank_bench.experiments.credibility_transfer",
                           "--data", str(tmp_path), "--machine-text-feature"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "error: --machine-text-feature: needs --machine-text FILE" in proc.stderr
    assert "Traceback" not in proc.stderr


class _StandIn(StandInScorer):
    """``d`` = words / 10, ``nan`` under 3 words."""

    key = "stand-in/t1"

    @staticmethod
    def value(text: str) -> float:
        return np.nan if len(text.split()) < 3 else len(text.split()) / 10


def test_machine_text_scores_cover_pages_and_pools_once(sets, tmp_path: Path):
    sets["web"].pages.append(ct.Page("tiny", "too short", None, "t0", 1))
    scorer = _StandIn()
    scores = ct.machine_text_scores(sets, scorer, cache_dir=tmp_path)
    refs = {f"{n}/{p.doc_id}" for n, s in sets.items() for p in s.pages}
    refs |= {f"{n}/{d}" for n, s in sets.items() for b in (s.batches or {}).values()
             for d in b.doc_ids}
    assert set(scores) == refs - {"web/tiny"}  # the short text has no score
    assert scores["web/f0"] == len(sets["web"].pages[0].text.split()) / 10
    assert len(scorer.scored) == len(set(scorer.scored))  # each distinct text scored once
    again = _StandIn()
    assert ct.machine_text_scores(sets, again, cache_dir=tmp_path) == scores
    assert again.scored == []  # the cache answered


def test_score_machine_text_and_a_file_conflict(tmp_path: Path):
    import subprocess
    import sys

    (tmp_path / "mt.csv").write_text("set,doc_id,score\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "credrank_bench.experiments.credibility_transfer",
                           "--data", str(tmp_path), "--score-machine-text",
                           "--machine-text", str(tmp_path / "mt.csv")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "error: --score-machine-text: give it or --machine-text FILE, not both" in proc.stderr
