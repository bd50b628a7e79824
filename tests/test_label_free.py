"""Label-free systems on the pooled benches: the dev/test split, dev-only fitting, the
``label_free`` table in the bench JSON, the passage readers and the PoisonedRAG copy collapse."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import build_batch
from credrank.core.pipeline import Pipeline
from credrank.credibility import CredibilityFeaturizer
from credrank.index.embed import get_embedder
from credrank.stages.consensus import AnswerConsensus
from credrank_bench.datasets import read_cram_nq
from credrank_bench.experiments.benches import BenchOptions, run_bench
from credrank_bench.experiments.label_free import (
    KEY,
    READER_ACCURACY,
    READER_MISLED,
    choice_reader,
    credibility_examples,
    fit_credibility,
    pool_documents,
    split_questions,
    strip_spoofed_prefix,
    supported_choice,
)
from credrank_bench.experiments.poisoning import CONSENSUS_COLLAPSE, bench_poisonedrag
from test_bench_json import _slice_json_dict, _slice_json_list, cram_file


def numbers(value: Any) -> list[float]:
    """Every number in a JSON value."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int | float):
        return [float(value)]
    if isinstance(value, dict):
        return [x for v in value.values() for x in numbers(v)]
    if isinstance(value, list):
        return [x for v in value for x in numbers(v)]
    return []


# ---------------------------------------------------------------- split


def test_split_is_disjoint_complete_seeded_and_needs_two_questions() -> None:
    qids = [f"q{i}" for i in range(11)]
    split = split_questions(qids, seed=3)
    assert not set(split.dev) & set(split.test)
    assert sorted([*split.dev, *split.test]) == sorted(qids)
    assert (len(split.dev), len(split.test)) == (6, 5)  # round(0.5 · 11) = 6 (banker's: 6)
    assert split == split_questions(qids, seed=3)
    assert split.dev != split_questions(qids, seed=4).dev
    tiny = split_questions(["a", "b"], seed=0)
    assert len(tiny.dev) == len(tiny.test) == 1
    with pytest.raises(ValueError, match="at least 2"):
        split_questions(["a"], seed=0)
    with pytest.raises(ValueError, match="twice"):
        split_questions(["a", "a"], seed=0)


def test_the_credibility_model_never_trains_on_a_test_document(tmp_path: Path) -> None:
    evalset = read_cram_nq(cram_file(tmp_path / "c.jsonl", 7))
    split = split_questions([q for q, _ in evalset.queries], seed=0)
    test_docs = set(pool_documents(evalset, split.test))
    examples = credibility_examples(evalset, split.dev, set())
    assert {e.doc_id for e in examples} == set(pool_documents(evalset, split.dev))
    fitted = fit_credibility(examples, CredibilityFeaturizer(get_embedder("hashing")), seed=0)
    assert fitted is not None
    assert fitted.model.trained_on and not set(fitted.model.trained_on) & test_docs
    # one class only: no model (declared), not a crash
    real_only = [e for e in examples if e.label() == 1]
    assert fit_credibility(real_only, CredibilityFeaturizer(None), seed=0) is None


# ---------------------------------------------------------------- readers and prefixes


def test_spoofed_prefixes_are_stripped_and_plain_text_is_kept() -> None:
    assert strip_spoofed_prefix("CNN news: Paris is in Spain.") == "Paris is in Spain."
    assert strip_spoofed_prefix("CNN news has confirmed that the sky is green.") == \
        "the sky is green."
    assert strip_spoofed_prefix("According to official sources, X won.") == "X won."
    assert strip_spoofed_prefix('"Breaking News: CNN news: it rained."') == 'it rained."'
    plain = "is more complex and involves multiple origins of replication."
    assert strip_spoofed_prefix(plain) == plain


def test_choice_reader_maps_a_passage_to_the_one_choice_it_names() -> None:
    choices = ["Nikki Haley", "Ron DeSantis", "Mike Pence", "Tim Scott"]
    assert supported_choice("Nikki Haley has dropped out.", choices) == "Nikki Haley"
    assert supported_choice("Pence suspended his bid.", choices) == "Mike Pence"  # last word
    assert supported_choice("Haley and Pence both spoke.", choices) is None  # a tie
    assert supported_choice("The former vice president left.", choices) is None
    read = choice_reader({"who dropped out": choices})
    assert read("who dropped out", ["Tim Scott left", "nothing"]) == ["Tim Scott",
                                                                      "I don't know"]
    assert read("another question", ["Tim Scott left"]) == ["I don't know"]


def test_three_distinct_fakes_outvote_one_real_passage() -> None:
    """The measured explanation for NewsPolluted: fakes that are not copies are separate
    voices, so the consensus follows them unless their weight is already low."""
    choices = ["Mike Pence", "Nikki Haley"]
    texts = ["Nikki Haley announced her withdrawal in a shocking turn of events.",
             "Breaking: just heard Haley is out of the race! #Haley2024",
             "Former governor Nikki Haley said on Sunday she is leaving the campaign.",
             "Mike Pence suspended his bid at the coalition convention."]
    batch = build_batch([0.9, 0.8, 0.85, 0.7], query="who dropped out", text=texts)
    stage = AnswerConsensus(choice_reader({"who dropped out": choices}), threshold=0.5)
    out = stage(batch)
    assert out.info["consensus"]["status"] == "agreed"
    assert out.info["consensus"]["answer"] == "nikki haley"
    assert out.factors["consensus"][3] < 1.0
    # a credibility factor that already demotes the fakes turns the vote around
    weighted = build_batch([0.9, 0.8, 0.85, 0.7], query="who dropped out", text=texts,
                           factors={"credibility": [0.1, 0.1, 0.1, 1.0]})
    assert stage(weighted).info["consensus"]["answer"] == "mike pence"


# ---------------------------------------------------------------- the bench section


def _section(doc: dict[str, Any]) -> dict[str, Any]:
    json.dumps(doc, allow_nan=False)
    assert KEY in doc["tables"], list(doc["tables"])
    return doc["tables"][KEY]


def test_cram_bench_has_the_label_free_section_on_test_questions_only(tmp_path: Path) -> None:
    result = run_bench("cram-nq", BenchOptions(path=cram_file(tmp_path / "c.jsonl", 7),
                                               embedder="hashing"))
    doc = result.to_json()
    table = _section(doc)
    details = doc["details"]["label_free"]
    n_test = details["split"]["test_questions"]
    assert details["split"]["dev_questions"] + n_test == 4
    assert details["credibility"]["trained_on"] == details["dev_documents"] == 8
    systems = {row["system"]: row for row in table["rows"]}
    assert {"learned credibility", "ablation: learned credibility, spoofed prefixes stripped",
            "similarity × consensus (extractive reader)",
            "learned credibility × consensus (extractive reader)"} <= set(systems)
    for row in table["rows"]:
        assert row["reads_labels"] is False
        assert row["metrics"]["harmful@1"]["n"] == n_test
        assert READER_ACCURACY in row["metrics"] and READER_MISLED in row["metrics"]
    assert all(math.isfinite(x) for x in numbers(table) + numbers(details))
    statuses = details["consensus_status_test"]
    assert all(s["agreed"] + s["contested"] + s["no answers"] == n_test
               for s in statuses.values())
    # the other tables are unchanged by the new section
    assert [t for t in doc["tables"]][:4] == ["results", "clean_pools", "noisy_priors", KEY]


def test_newspolluted_section_uses_the_choice_reader(shared_data: Path, tmp_path: Path) -> None:
    source = shared_data / "cag" / "NewsPolluted.json"
    if not source.is_file():
        pytest.skip(f"real data not available: expected {source}")
    path = _slice_json_list(source, tmp_path / "np.json", 30)
    doc = run_bench("newspolluted", BenchOptions(path=path, embedder="hashing")).to_json()
    table = _section(doc)
    names = [row["system"] for row in table["rows"]]
    assert "similarity × consensus (choice reader)" in names
    assert "learned credibility × consensus (choice reader)" in names
    dup = doc["details"]["label_free"]["fake_pair_duplicates_test"]
    assert dup["bad_pairs"] == 3 * doc["details"]["label_free"]["split"]["test_questions"]
    assert 0 <= dup["joined_by_text_jaccard_0.5"] <= dup["joined_by_text_or_cosine_0.9"]


# ---------------------------------------------------------------- PoisonedRAG copy collapse


#: the PoisonedRAG targets (of nq.json's 100) the copy-collapse test runs: each target is one
#: question with its own 10 poisoned passages, so a slice has every case of the whole file
POISON_TARGETS = 20


def test_poisonedrag_consensus_systems_and_copy_counts(shared_data: Path,
                                                       tmp_path: Path) -> None:
    path = shared_data / "poisonedrag" / "nq.json"
    corpus = shared_data / "cram" / "cram_nq_1000_reconstructed.jsonl"
    for p in (path, corpus):
        if not p.is_file():
            pytest.skip(f"real data not available: expected {p}")
    path = _slice_json_dict(path, tmp_path / "nq.json", POISON_TARGETS)
    result = bench_poisonedrag(path, corpus, get_embedder("hashing"), sweep=())
    main = result.main
    assert main is not None
    for name in CONSENSUS_COLLAPSE:
        row = main.table.row(name)
        assert row.reads_labels is False
        assert 0.0 <= main.table.mean(name, "attack-success@1") <= 1.0  # type: ignore
    copies = result.details["poison_copies"]
    assert copies["targets"] == POISON_TARGETS  # the whole file: 100
    text, both = copies["text"], copies["text_or_cosine_0.9"]
    assert text["pairs"] == both["pairs"] == POISON_TARGETS * 10
    assert 1.0 <= both["mean_groups_per_target"] <= text["mean_groups_per_target"] <= 5.0
    json.dumps(result.to_json(), allow_nan=False)


def test_identical_texts_are_one_voice_even_without_text_collapse() -> None:
    texts = ["Raphael painted it.", "Raphael painted it.", "Leonardo painted it in 1503."]
    batch = build_batch([0.9, 0.9, 0.8], query="who painted the mona lisa", text=texts,
                        vectors=np.eye(3))
    out = Pipeline([AnswerConsensus(jaccard=1.0)])(batch)
    assert out.info["consensus"]["duplicate_groups"] == [["d0", "d1"]]
