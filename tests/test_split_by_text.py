"""The label-free split holds out by content: no credibility model trains on a development
document whose text (case-folded, whitespace collapsed) is a test document's, whatever its id
(NewsPolluted reuses one fake text under several ids; CrAM NQ repeats passages)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from credrank.credibility import CredibilityFeaturizer
from credrank.index.embed import get_embedder
from credrank_bench.datasets import EvalSet, read_cram_nq
from credrank_bench.experiments.bench import prepare
from credrank_bench.experiments.label_free import (
    credibility_examples,
    fit_credibility,
    label_free_experiment,
    leaked_documents,
    pool_documents,
    split_overlap,
    split_questions,
    text_key,
    text_keys,
)
from credrank_bench.experiments.stress import bench_stress

Write = Callable[[str, str | bytes], Path]
N = 12
#: one fake story reused (re-cased, re-spaced) by every odd question: copies across the split
COPIED_FAKE = "CNN news: the old valley city was founded by nobody at all."
#: one real passage reused by every third question
COPIED_REAL = "Old records of the valley mention many founders and wars."


def _variant(text: str, i: int) -> str:
    """``text`` with its case and spacing changed by ``i`` (the same normalised text)."""
    return ("  " + text.upper() + " ") if i % 2 else text.replace(" ", "   \t")


def _record(i: int) -> dict[str, Any]:
    answer, wrong = f"answer{i}", f"wrong{i}"
    real = [f"The city number {i} in the old valley was founded by {answer} long ago.",
            f"Historians say {answer} founded the city number {i} after a flood.",
            f"The valley city number {i} has a market and a river."]
    if i % 3 == 0:
        real.append(_variant(COPIED_REAL, i))
    fake = (_variant(COPIED_FAKE, i) if i % 2 else
            f"CNN news: the city number {i} was founded by {wrong} rather than {answer}.")
    docs = [{"text": t, "is_misinformation": False, "gpt_truthfulness_0_10": 9} for t in real]
    docs.append({"text": fake, "is_misinformation": True, "gpt_truthfulness_0_10": 1})
    return {"id": f"q{i}", "question": f"who founded the city number {i} in the old valley",
            "answers": [answer], "wrong_answer": wrong, "docs": docs}


def _cram(write: Write) -> Path:
    return write("cram.jsonl", "".join(json.dumps(_record(i)) + "\n" for i in range(N)))


def _normal(text: str) -> str:  # the rule, written independently of text_key
    return " ".join(text.lower().split())


def _copied_dev_documents(evalset: EvalSet, dev: list[str], test: list[str]) -> set[str]:
    texts = {d.id: d.text for d in evalset.documents}
    test_texts = {_normal(texts[d]) for d in test}
    return {d for d in dev if _normal(texts[d]) in test_texts}


def test_text_key_ignores_case_and_spacing_only() -> None:
    assert text_key("CNN news:  The Sky\tis green.\n") == text_key("cnn news: the sky is green.")
    assert text_key("The sky is green.") != text_key("The sky is green!")
    assert text_key("The sky is green.") != text_key("The sky is greener.")
    assert len(text_key("")) == 64


def test_the_fixture_copies_texts_across_the_split(write: Write) -> None:
    evalset = read_cram_nq(_cram(write))
    split = split_questions([q for q, _ in evalset.queries], seed=0)
    dev, test = pool_documents(evalset, split.dev), pool_documents(evalset, split.test)
    assert not set(dev) & set(test)  # disjoint by id ...
    assert _copied_dev_documents(evalset, dev, test)  # ... but not by text


def test_training_rows_leave_out_every_test_text_under_any_id(write: Write) -> None:
    evalset = read_cram_nq(_cram(write))
    texts = {d.id: d.text for d in evalset.documents}
    split = split_questions([q for q, _ in evalset.queries], seed=0)
    dev, test = pool_documents(evalset, split.dev), pool_documents(evalset, split.test)
    copied = _copied_dev_documents(evalset, dev, test)
    held_out = text_keys(texts[d] for d in test)
    examples = credibility_examples(evalset, split.dev, held_out)
    assert {e.doc_id for e in examples} == set(dev) - copied
    overlap = split_overlap(texts, dev, test)
    assert overlap["documents_in_both_splits"] == 0
    assert overlap["dev_documents_with_a_test_text"] == len(copied)
    assert overlap["held_out_of_training"] == len(copied)
    assert overlap["test_documents_with_a_dev_text"] == sum(
        1 for d in test if _normal(texts[d]) in {_normal(texts[x]) for x in dev})
    featurizer = CredibilityFeaturizer(get_embedder("hashing"))
    fitted = fit_credibility(examples, featurizer, seed=0)
    assert fitted is not None and not leaked_documents(fitted.model, texts, held_out)
    # the check bites: a model fitted without the hold-out trained on test texts
    naive = fit_credibility(credibility_examples(evalset, split.dev, frozenset()), featurizer,
                            seed=0)
    assert naive is not None
    assert set(leaked_documents(naive.model, texts, held_out)) == copied


def test_label_free_section_reports_and_applies_the_hold_out(write: Write) -> None:
    evalset = read_cram_nq(_cram(write))
    split = split_questions([q for q, _ in evalset.queries], seed=0)
    dev, test = pool_documents(evalset, split.dev), pool_documents(evalset, split.test)
    copied = _copied_dev_documents(evalset, dev, test)
    embedder = get_embedder("hashing")
    prepared = prepare(evalset, embedder)
    section, details = label_free_experiment(
        evalset, prepared.index, prepared.query_vectors, embedder, top_k=3, fetch_k=5, seed=0,
        measures=["harmful@1"])
    assert section is not None
    assert details["documents_in_both_splits"] == 0
    assert details["dev_documents_with_a_test_text"] == len(copied) > 0
    assert details["credibility"]["trained_on"] == len(dev) - len(copied)
    assert details["credibility_prefix_stripped"]["trained_on"] == \
        len(dev) - details["held_out_of_training_prefix_stripped"]
    assert details["held_out_of_training_prefix_stripped"] >= len(copied)
    notes = " ".join(section.table.notes)
    assert f"{len(copied)} development documents whose text" in notes


@pytest.mark.parametrize("limit", [None, 3])
def test_stress_model_never_trains_on_a_text_an_evaluated_question_is_shown(
        write: Write, limit: int | None) -> None:
    path = _cram(write)
    result = bench_stress("cram", path, get_embedder("hashing"), seed=0, limit=limit)
    held = result.details["learned_credibility_held_out"]
    evalset = read_cram_nq(path)
    texts = {d.id: d.text for d in evalset.documents}
    split = split_questions([q for q, _ in evalset.queries], seed=0)
    evaluated = list(split.test) if limit is None else list(split.test)[:limit]
    fit_q = list(split.dev) if limit is None else list(split.dev)[:limit]
    dev = pool_documents(evalset, fit_q)
    # every evaluated question is shown its contaminant: a dev copy of one is never trained on
    fakes = {_normal(texts[d]) for q in evaluated for d in evalset.bad[q]}
    copies_of_fakes = {d for d in dev if _normal(texts[d]) in fakes}
    assert copies_of_fakes
    assert held["development_documents"] == len(dev)
    assert held["held_out_of_training"] >= len(copies_of_fakes)
    assert result.details["learned_credibility"]["trained_on"] == \
        len(dev) - held["held_out_of_training"]
    assert any("left out of its training rows" in n for n in result.notes)
