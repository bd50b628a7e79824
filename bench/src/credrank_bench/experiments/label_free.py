"""Label-free systems on a pooled bench, fitted on development questions, reported on the rest.

:func:`label_free_experiment` adds the table ``label_free`` to a ``cram-nq`` or
``newspolluted`` bench. Nothing at query time reads an evaluation label of
the test questions (``reads_labels`` false); but thresholds and models are fitted on a
development split of the *same set's* questions with their labels, so every row but the
baseline is **not label-free for that set**: each says so in its notes and in its
``params["not_label_free_for"]`` (the set's name). They are reported on the disjoint test
questions only.

**Split** (:func:`split_questions`). The question ids in file order are permuted by
``numpy.random.default_rng(seed)``; the first ``round(dev_share · n)`` (clamped to
``[1, n − 1]``) are development questions, the rest test questions. Fewer than two questions:
no split, and the section is left out with a note (declared).

**Corpora.** Each split is its own corpus: a development question retrieves its ``fetch_k``
nearest documents among the documents of development pools only, a test question among those
of test pools only (exact cosine over the bench's embeddings). A document that sits in pools
of both splits is dropped from the development corpus and kept in the test corpus (declared;
none on CrAM and NewsPolluted).

**Hold-out by content** (:func:`text_key`). The credibility models never train on a text a test
question can see: every development document whose *normalised text* (case-folded, every
whitespace run one space, ends stripped) equals that of a test-pool document is left out of the
training rows, whatever its id (NewsPolluted reuses one fake text under several ids across
questions; CrAM NQ repeats Wikipedia passages). Only case and spacing are ignored: the uncased
MiniLM embedding reads two such texts as the same input, while any other difference (a word,
a digit, punctuation) is a different text; near-duplicates are not held out. The counts are
in the details (``documents_in_both_splits``: by id; ``dev_documents_with_a_test_text``: the
further ones by text) and the fit asserts that no training text's key is a test text's key.

**Learned credibility** (:mod:`credrank.credibility`). Every development document is one
:class:`~credrank.credibility.model.CredibilityExample` with the label ``credible = not bad``
for its question (the group). The configuration (feature groups × L2 of
:data:`~credrank.credibility.model.DEFAULT_CONFIGS`; no URL on these sets, so the URL block is
constant) is chosen by grouped cross-validation over development questions
(:func:`~credrank.credibility.cv.group_folds`: 10 folds of questions, seeded), the highest
pooled out-of-fold AUC winning; the model is then refitted on all development documents and
applied as :class:`~credrank.stages.credibility.LearnedCredibilityPrior`
``λ = 0.3 + 0.7 · P(credible)`` (factor ``credibility``). Development documents of one class
only: no model, the credibility systems are left out with a note (declared).

**Prefix ablation.** The same fit and application with :func:`strip_spoofed_prefix` applied to
every text (training and test alike), to show whether the model only learns a spoofed source
prefix such as ``CNN news:``.

**Consensus** (:class:`~credrank.stages.consensus.AnswerConsensus`). Its threshold ``τ`` is
chosen on the development questions by :func:`~credrank.consensus.calibrate.choose_threshold`
from the top answer's share and whether that answer matches a gold answer
(:func:`~credrank.consensus.calibrate.answer_matches`; gold: CrAM's ``answers``, the correct
choice of NewsPolluted); then its ``floor`` from :data:`FLOORS` by the development harmful@1
(ties: the larger floor, the milder demotion). Readers: the offline extractive reader on each
passage alone; on NewsPolluted also :func:`choice_reader`, which maps each passage to the
multiple-choice option it names (the options are part of the question, not a label).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.consensus.calibrate import answer_matches, choose_threshold
from credrank.consensus.duplicates import duplicate_groups
from credrank.consensus.readers import PassageReader, extractive_answers
from credrank.core.candidates import Candidates
from credrank.core.embedder import Embedder
from credrank.core.pipeline import Pipeline, Stage
from credrank.credibility import (
    DEFAULT_CONFIGS,
    CredibilityExample,
    CredibilityFeaturizer,
    CredibilityModel,
    choose_config,
    group_folds,
)
from credrank.evaluate.experiment import ExperimentResult, System, run_experiment
from credrank.evaluate.metrics import evaluate, ranked_docs, register_measure, run_from_batches
from credrank.generate.llm import ExtractiveReader
from credrank.index.memory import InMemoryIndex
from credrank.pipeline.spec import PipelineSpec
from credrank.reliability.equivalence import equivalence_normalize
from credrank.select.topk import TopK
from credrank.stages.consensus import AnswerConsensus
from credrank.stages.credibility import LearnedCredibilityPrior
from credrank_bench.datasets import EvalSet, contains_answer

KEY = "label_free"
#: the table's title: its rows read no label at query time, but every row except the baseline
#: was fitted on labels of this same set (its development questions), so they are not
#: label-free for it (the key ``label_free`` is kept: JSON readers find the table by it)
TITLE = "Fitted on the development split's labels, measured on the test split"
#: how a report names each set whose development split a row was fitted on
SET_NAMES = {"cram-nq": "CrAM NQ", "newspolluted": "NewsPolluted"}
BASELINE = "similarity only (test questions)"
READER_ACCURACY = "reader-accuracy"
READER_MISLED = "reader-misled"
#: share of questions in the development split
DEV_SHARE = 0.5
#: the consensus floors tried on the development split
FLOORS = (0.1, 0.3, 0.5)
#: the learned credibility prior's floor (fixed, the stage's default)
CREDIBILITY_FLOOR = 0.3
#: the embedding near-duplicate threshold whose effect on fake pairs is measured
COSINE = 0.9
#: spoofed source prefixes found in CrAM's fakes (and news-genre openers of NewsPolluted's)
SPOOF_PREFIX = re.compile(
    r"^\s*[\"'“]?\s*(?:"
    r"CNN news\s*(?:has\s+(?:\w+\s+){0,3}?(?:confirmed|reported|uncovered|revealed|learned)"
    r"(?:\s+new\s+evidence)?\s+that|:)"
    r"|According to [^,.:]{1,80},"
    r"|Breaking news\s*[:!-]"
    r")\s*", re.IGNORECASE)

register_measure(READER_ACCURACY, READER_ACCURACY, "higher",
                 "share of questions whose offline extractive reader answer over the top-k "
                 "passages contains a gold answer")
register_measure(READER_MISLED, READER_MISLED, "lower",
                 "share of questions whose offline extractive reader answer over the top-k "
                 "passages contains a wrong answer (CrAM: the fake's; NewsPolluted: a wrong "
                 "choice)")


# -- split ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class QuestionSplit:
    """Development and test question ids (disjoint, together all questions)."""

    dev: tuple[str, ...]
    test: tuple[str, ...]
    seed: int

    def to_dict(self) -> dict[str, Any]:
        return {"dev_questions": len(self.dev), "test_questions": len(self.test),
                "seed": self.seed, "rule": f"numpy default_rng(seed).permutation of the "
                f"questions in file order; first round({DEV_SHARE}·n) dev, rest test"}


def split_questions(qids: Sequence[str], seed: int, dev_share: float = DEV_SHARE
                    ) -> QuestionSplit:
    """The seeded split of the module docstring; ``ValueError`` below two questions or with
    a repeated id."""
    qids = [str(q) for q in qids]
    if len(set(qids)) != len(qids):
        raise ValueError("split_questions: a question id appears twice")
    n = len(qids)
    if n < 2:
        raise ValueError(f"split_questions: expected at least 2 questions, got {n}")
    n_dev = min(max(round(dev_share * n), 1), n - 1)
    order = np.random.default_rng(seed).permutation(n)
    return QuestionSplit(tuple(qids[i] for i in order[:n_dev]),
                         tuple(qids[i] for i in order[n_dev:]), seed)


def pool_documents(evalset: EvalSet, qids: Sequence[str]) -> list[str]:
    """The documents of the pools of ``qids`` (first-seen order, each once)."""
    pools = evalset.pools or {}
    return list(dict.fromkeys(str(d) for q in qids for d in pools.get(q, [])))


def split_pools(index: InMemoryIndex, queries: Sequence[tuple[str, str]],
                query_vectors: Mapping[str, np.ndarray], docs: Sequence[str], fetch_k: int
                ) -> dict[str, Candidates]:
    """``qid -> batch``: the ``fetch_k`` nearest among ``docs`` only (the split's corpus)."""
    return {qid: index.search(text, query_vectors[qid], fetch_k, restrict=list(docs))
            for qid, text in queries}


# -- gold answers and readers ----------------------------------------------------------------

def gold_answers(evalset: EvalSet, qid: str) -> list[str]:
    """CrAM: the question's ``answers``; NewsPolluted: its correct choice; else none."""
    labels = evalset.query_labels.get(qid, {})
    if isinstance(labels.get("answers"), list):
        return [str(a) for a in labels["answers"] if isinstance(a, str)]
    answer = labels.get("answer")
    return [answer] if isinstance(answer, str) and answer.strip() else []


def memoized(reader: PassageReader) -> PassageReader:
    """``reader`` answering each ``(query, passage)`` once (asked one passage at a time, so
    only for per-passage readers such as :func:`extractive_answers`)."""
    cache: dict[tuple[str, str], str] = {}

    def read(query: str, passages: Sequence[str]) -> list[str]:
        out = []
        for p in passages:
            key = (query, p)
            if key not in cache:
                cache[key] = reader(query, [p])[0]
            out.append(cache[key])
        return out
    read.__name__ = getattr(reader, "__name__", type(reader).__name__)
    return read


def reading_with(reader: PassageReader, system: System) -> System:
    """``system`` with its consensus stage reading through ``reader``: the spec's extractive
    reader memoized across systems and conditions (a per-passage reader: the same answers,
    each passage read once per question)."""
    assert isinstance(system.stage, Pipeline)
    for stage in system.stage.stages:
        if isinstance(stage, AnswerConsensus):
            stage.reader = reader
    return system


def _occurrences(padded_text: str, phrase: str) -> int:
    return padded_text.count(f" {phrase} ") if phrase else 0


def supported_choice(text: str, choices: Sequence[str]) -> str | None:
    """The choice a passage names: the choice whose normalised form occurs most often in the
    normalised passage as whole tokens (:func:`~credrank.reliability.equivalence.
    equivalence_normalize`); if no choice occurs, the same count over each choice's last word
    where that word is at least 3 characters and the last word of no other choice; a tie at
    the top or no occurrence at all: ``None`` (no answer)."""
    padded = f" {equivalence_normalize(text)} "
    keys = [equivalence_normalize(c) for c in choices]
    for phrases in (keys, _last_words(keys)):
        counts = [_occurrences(padded, p) for p in phrases]
        best = max(counts, default=0)
        if best > 0:
            return choices[counts.index(best)] if counts.count(best) == 1 else None
    return None


def _last_words(keys: Sequence[str]) -> list[str]:
    last = [k.split()[-1] if k.split() else "" for k in keys]
    return [w if len(w) >= 3 and last.count(w) == 1 else "" for w in last]


def choice_reader(choices_by_question: Mapping[str, Sequence[str]]) -> PassageReader:
    """A passage reader for multiple-choice questions: each passage's answer is
    :func:`supported_choice` among the question's choices (looked up by question text),
    ``I don't know`` when it names none, or when the question is unknown."""
    def read(query: str, passages: Sequence[str]) -> list[str]:
        choices = list(choices_by_question.get(query, []))
        return [supported_choice(p, choices) or "I don't know" for p in passages]
    read.__name__ = "choice_reader"
    return read


def strip_spoofed_prefix(text: str) -> str:
    """``text`` without a leading spoofed-source or news-genre opener (:data:`SPOOF_PREFIX`:
    ``CNN news:``, ``CNN news has confirmed that``, ``According to <source>,``,
    ``Breaking news:``); repeated until none is left; the rest unchanged."""
    out = text
    while (m := SPOOF_PREFIX.match(out)) and m.end() > 0:
        out = out[m.end():]
    return out


# -- hold-out by content ---------------------------------------------------------------------

def _same(text: str) -> str:
    return text


def text_key(text: str) -> str:
    """The hold-out key of a text (module docstring, "Hold-out by content"): the SHA-256 hex
    digest of the text case-folded, each whitespace run replaced by one space, ends
    stripped. Two texts share a key exactly when they differ in case and spacing only."""
    return hashlib.sha256(" ".join(text.casefold().split()).encode("utf-8")).hexdigest()


def text_keys(texts: Iterable[str], transform: Callable[[str], str] = _same) -> frozenset[str]:
    """The :func:`text_key` of each ``transform(text)``."""
    return frozenset(text_key(transform(t)) for t in texts)


def split_overlap(texts: Mapping[str, str], dev_docs: Sequence[str],
                  test_docs: Sequence[str]) -> dict[str, int]:
    """How the development documents meet the test documents: ``documents_in_both_splits``
    (the same id), ``dev_documents_with_a_test_text`` (another id, a test document's
    :func:`text_key`), ``test_documents_with_a_dev_text`` (test documents of an id not in the
    development pools whose key is a development document's) and ``held_out_of_training``
    (the first two together: the development documents no model trains on)."""
    test_ids, dev_ids = set(test_docs), set(dev_docs)
    test_keys = text_keys(texts[d] for d in test_docs)
    dev_keys = text_keys(texts[d] for d in dev_docs)
    same_id = sum(1 for d in dev_docs if d in test_ids)
    same_text = sum(1 for d in dev_docs if d not in test_ids and text_key(texts[d]) in test_keys)
    return {"documents_in_both_splits": same_id, "dev_documents_with_a_test_text": same_text,
            "test_documents_with_a_dev_text": sum(1 for d in test_docs if d not in dev_ids
                                                  and text_key(texts[d]) in dev_keys),
            "held_out_of_training": same_id + same_text}


def leaked_documents(model: CredibilityModel, texts: Mapping[str, str],
                     held_out: Collection[str], transform: Callable[[str], str] = _same
                     ) -> list[str]:
    """The documents ``model`` was trained on whose :func:`text_key` (of ``transform(text)``,
    the text it was trained on) is in ``held_out``: empty unless the hold-out failed."""
    return [d for d in model.trained_on if text_key(transform(texts[d])) in held_out]


# -- credibility model -----------------------------------------------------------------------

def credibility_examples(evalset: EvalSet, qids: Sequence[str], held_out: Collection[str],
                         transform: Callable[[str], str] = _same
                         ) -> list[CredibilityExample]:
    """One example per document of the pools of ``qids`` whose :func:`text_key` of
    ``transform(text)`` is not in ``held_out`` (the keys of the texts an evaluated question
    can see, :func:`text_keys` with the same ``transform``): label ``credible = 1`` unless the
    document is in the question's ``bad``, group = the question, text ``transform(text)``, no
    URL."""
    texts = {d.id: d.text for d in evalset.documents}
    out: dict[str, CredibilityExample] = {}
    for q in qids:
        bad = evalset.bad.get(q, set())
        for d in (evalset.pools or {}).get(q, []):
            d = str(d)
            if d in out:
                continue
            text = transform(texts[d])
            if text_key(text) in held_out:
                continue
            out[d] = CredibilityExample(d, text, None, {q: int(d not in bad)})
    return list(out.values())


@dataclass
class FittedCredibility:
    """A credibility model fitted on development documents and how its config was chosen."""

    model: CredibilityModel
    choice: dict[str, Any]


def fit_credibility(examples: Sequence[CredibilityExample], featurizer: CredibilityFeaturizer,
                    seed: int) -> FittedCredibility | None:
    """Grouped-CV config choice over the examples' questions, then the refit on all of them;
    ``None`` when the examples hold one class only (declared: no model)."""
    labels = {e.label() for e in examples}
    if labels != {0, 1}:
        return None
    folds = group_folds([q for e in examples for q in e.labels], seed=seed)
    choice = choose_config(examples, featurizer, DEFAULT_CONFIGS, folds)
    model = CredibilityModel(featurizer, choice.config).fit(examples)
    return FittedCredibility(model, {"config": choice.config.to_dict(), "cv_auc": choice.auc,
                                     "folds": len(folds), "scores": choice.scores,
                                     "trained_on": len(model.trained_on)})


def _stripped_model(model: CredibilityModel) -> Callable[..., np.ndarray]:
    def p_credible(texts: Sequence[str], urls: Sequence[str | None]) -> np.ndarray:
        return model.predict([strip_spoofed_prefix(t) for t in texts], urls)
    return p_credible


# -- systems ---------------------------------------------------------------------------------

def ranked(*stages: Stage, top_k: int) -> Pipeline:
    """``stages`` then ``max(cos, 0) × Π factors``, top ``top_k``."""
    return Pipeline([*stages, Combine("multiply"), TopK(top_k)])


def _apply(pools: Mapping[str, Candidates], stage: Stage) -> dict[str, Candidates]:
    return {q: stage(b) for q, b in pools.items()}


def consensus_readout(pools: Mapping[str, Candidates], before: Sequence[Stage],
                      consensus: AnswerConsensus, evalset: EvalSet
                      ) -> list[dict[str, Any]]:
    """Per question: the consensus ``status``, top ``share``, top ``answer`` (``None`` unless
    agreed) and whether it matches a gold answer."""
    out = []
    for q, batch in _apply(pools, Pipeline([*before, consensus])).items():
        info = batch.info["consensus"]
        answers = info["answers"]
        top = answers[0]["answer"] if answers and info["status"] != "no answers" else None
        out.append({"qid": q, "status": info["status"], "share": info["share"],
                    "answer": info["answer"], "top": top,
                    "top_correct": answer_matches(top, gold_answers(evalset, q))})
    return out


def harmful_at_1(pools: Mapping[str, Candidates], stage: Stage, evalset: EvalSet) -> float:
    """Mean harmful@1 of ``stage`` over ``pools`` (0 for no question)."""
    run = run_from_batches(_apply(pools, stage))
    qrels = {q: evalset.qrels.get(q, {}) for q in pools}
    values = evaluate(qrels, run, ["harmful@1"], bad=evalset.bad)["harmful@1"]
    return float(np.mean(list(values.values()))) if values else 0.0


@dataclass
class CalibratedConsensus:
    """A consensus stage with ``τ`` and floor chosen on the development questions."""

    threshold: float
    floor: float
    choice: dict[str, Any]

    def stage(self, reader: PassageReader, **kw: Any) -> AnswerConsensus:
        return AnswerConsensus(reader, threshold=self.threshold, floor=self.floor, **kw)


def calibrate_consensus(dev_pools: Mapping[str, Candidates], before: Sequence[Stage],
                        reader: PassageReader, evalset: EvalSet, top_k: int
                        ) -> CalibratedConsensus:
    """``τ`` by :func:`choose_threshold` on the development readout (shares do not depend on
    the floor), then the floor of :data:`FLOORS` with the lowest development harmful@1 (ties:
    the larger floor)."""
    readout = consensus_readout(dev_pools, before, AnswerConsensus(reader, threshold=0.0),
                                evalset)
    tau = choose_threshold([r["share"] for r in readout],
                           [r["top_correct"] if r["share"] is not None else None
                            for r in readout])
    by_floor = {f: harmful_at_1(dev_pools, ranked(*before, AnswerConsensus(
        reader, threshold=tau.threshold, floor=f), top_k=top_k), evalset) for f in FLOORS}
    floor = min(sorted(FLOORS, reverse=True), key=lambda f: by_floor[f])
    choice = {**tau.to_dict(), "dev_harmful@1_by_floor": {str(f): v
                                                          for f, v in by_floor.items()},
              "floor": floor}
    choice.pop("curve")
    return CalibratedConsensus(tau.threshold, floor, choice)


def wrong_answers(evalset: EvalSet, qid: str) -> list[str]:
    """CrAM: the fake's ``wrong_answer``; NewsPolluted: every choice but the correct one;
    else none (evaluation only: no system reads them)."""
    labels = evalset.query_labels.get(qid, {})
    if isinstance(labels.get("wrong_answer"), str):
        return [labels["wrong_answer"]]
    choices = labels.get("choices")
    if isinstance(choices, list):
        return [str(c) for c in choices if c != labels.get("answer")]
    return []


def reader_measures(evalset: EvalSet, top_k: int
                    ) -> dict[str, Callable[[dict[str, dict[str, float]]], dict[str, float]]]:
    """``reader-accuracy`` and ``reader-misled`` per question from the offline
    :class:`~credrank.generate.llm.ExtractiveReader`'s answer over the run's top ``top_k``
    passages (rank order): 1 when it contains a gold answer, resp. a wrong answer
    (:func:`wrong_answers`) (:func:`~credrank_bench.datasets.contains_answer`, whole tokens after
    SQuAD normalisation; a long span can contain both); questions without gold (resp. wrong)
    answers are left out."""
    reader = ExtractiveReader()
    texts = {d.id: d.text for d in evalset.documents}
    questions = dict(evalset.queries)
    answers: dict[tuple[str, tuple[str, ...]], str] = {}

    def answer(q: str, scores: Mapping[str, float]) -> str:
        top = tuple(ranked_docs(dict(scores))[:top_k])
        if (q, top) not in answers:
            answers[(q, top)] = reader.answer(questions[q], [texts[d] for d in top])
        return answers[(q, top)]

    def measure(targets: Callable[[EvalSet, str], list[str]]
                ) -> Callable[[dict[str, dict[str, float]]], dict[str, float]]:
        def values(run: dict[str, dict[str, float]]) -> dict[str, float]:
            return {q: float(contains_answer(answer(q, scores), targets(evalset, q)))
                    for q, scores in run.items() if targets(evalset, q)}
        return values
    return {READER_ACCURACY: measure(gold_answers), READER_MISLED: measure(wrong_answers)}


def status_counts(readout: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts of ``agreed`` / ``contested`` / ``no answers`` and, among agreed questions, how
    many consensus answers match a gold answer."""
    counts = {s: sum(1 for r in readout if r["status"] == s)
              for s in ("agreed", "contested", "no answers")}
    agreed_correct = sum(1 for r in readout if r["status"] == "agreed" and r["top_correct"])
    return {**counts, "agreed_correct": agreed_correct,
            "agreed_correct_share": agreed_correct / counts["agreed"] if counts["agreed"]
            else None, "questions": len(readout)}


def fake_pair_duplicates(evalset: EvalSet, index: InMemoryIndex, qids: Sequence[str], *,
                         cosine: float = COSINE) -> dict[str, Any]:
    """Over the pools of ``qids``: how many pairs of a question's *bad* documents the
    near-duplicate test joins (word 3-gram Jaccard ≥ 0.5; and Jaccard or cosine ≥ ``cosine``),
    with the mean cosine of bad–bad and bad–good pairs (the bench's embeddings)."""
    texts = {d.id: d.text for d in evalset.documents}
    row = {str(d): i for i, d in enumerate(index.doc_ids)}
    pairs = text_joined = any_joined = 0
    bad_bad: list[float] = []
    bad_good: list[float] = []
    for q in qids:
        docs = [str(d) for d in (evalset.pools or {}).get(q, [])]
        bad = [d for d in docs if d in evalset.bad.get(q, set())]
        good = [d for d in docs if d not in evalset.bad.get(q, set())]
        if len(bad) < 2:
            continue
        v = index.vectors[[row[d] for d in bad]].astype(np.float64)
        unit = v / np.maximum(np.linalg.norm(v, axis=1), 1e-12)[:, None]
        by_text = duplicate_groups([texts[d] for d in bad])
        by_both = duplicate_groups([texts[d] for d in bad], v, cosine=cosine)
        for i in range(len(bad)):
            for j in range(i + 1, len(bad)):
                pairs += 1
                text_joined += int(by_text[i] == by_text[j])
                any_joined += int(by_both[i] == by_both[j])
                bad_bad.append(float(unit[i] @ unit[j]))
        if good:
            g = index.vectors[[row[d] for d in good]].astype(np.float64)
            g = g / np.maximum(np.linalg.norm(g, axis=1), 1e-12)[:, None]
            bad_good.extend((unit @ g.T).reshape(-1).tolist())
    return {"bad_pairs": pairs, "joined_by_text_jaccard_0.5": text_joined,
            f"joined_by_text_or_cosine_{cosine:g}": any_joined,
            "mean_cosine_bad_bad": float(np.mean(bad_bad)) if bad_bad else None,
            "mean_cosine_bad_good": float(np.mean(bad_good)) if bad_good else None}


# -- the section -----------------------------------------------------------------------------

def label_free_experiment(evalset: EvalSet, index: InMemoryIndex,
                          query_vectors: Mapping[str, np.ndarray], embedder: Embedder, *,
                          top_k: int, fetch_k: int, seed: int, measures: Sequence[str],
                          whole_corpus: Mapping[str, float] | None = None
                          ) -> tuple[ExperimentResult | None, dict[str, Any]]:
    """The table ``label_free`` (module docstring) and its details; ``(None, details)`` with
    a ``skipped`` reason when the set has fewer than two questions.

    ``whole_corpus``: the main table's per-question similarity harmful@1, to state the test
    questions' baseline over the whole corpus beside the split corpus's."""
    qids = [q for q, _ in evalset.queries]
    set_name = SET_NAMES.get(evalset.name, evalset.name)
    fitted_here = (f"not label-free for {set_name}: fitted on its development split's "
                   "labels")
    try:
        split = split_questions(qids, seed)
    except ValueError as exc:
        return None, {"skipped": str(exc)}
    dev_docs, test_docs = pool_documents(evalset, split.dev), pool_documents(evalset, split.test)
    shared = set(dev_docs) & set(test_docs)
    dev_q = [(q, t) for q, t in evalset.queries if q in set(split.dev)]
    test_q = [(q, t) for q, t in evalset.queries if q in set(split.test)]
    dev_pools = split_pools(index, dev_q, query_vectors, [d for d in dev_docs
                                                          if d not in shared], fetch_k)
    test_pools = split_pools(index, test_q, query_vectors, test_docs, fetch_k)
    texts = {d.id: d.text for d in evalset.documents}
    overlap = split_overlap(texts, dev_docs, test_docs)
    details: dict[str, Any] = {"split": split.to_dict(), "dev_documents": len(dev_docs),
                               "test_documents": len(test_docs), **overlap}
    notes = [
        f"Split: {len(split.dev)} development / {len(split.test)} test questions "
        f"(default_rng({seed}) permutation, {DEV_SHARE:.0%} dev). Every row is measured on "
        "the test questions only; each split is its own corpus (a test question retrieves "
        f"its {fetch_k} nearest among the {len(test_docs)} documents of test pools). The "
        "credibility models are held out by content: "
        f"{overlap['held_out_of_training']} development documents whose text (case-folded, "
        "whitespace collapsed) is a test document's were left out of their training rows "
        f"({overlap['documents_in_both_splits']} by the same id, "
        f"{overlap['dev_documents_with_a_test_text']} under another id; "
        f"{overlap['test_documents_with_a_dev_text']} test documents have such a copy), so no "
        "test question sees a text a model was fitted on. The baseline here is therefore "
        "similarity over the test corpus, not the main table's whole corpus.",
        f"reads_labels is false for every row: nothing at query time reads a label of the "
        f"test questions. But every row except {BASELINE} was fitted on labels of this same "
        f"set, {set_name}: the credibility models on its development documents' fake/real "
        "labels, the consensus τ and floor on its development questions' gold answers and "
        f"harmful@1. So those rows are not label-free for {set_name} (params."
        "not_label_free_for names the set); a label-free result on this set needs a model "
        "fitted on other sets only (the leave-one-dataset-out transfer).",
        "No document carries provenance (no URL, no source type), so 'prior × consensus' is "
        "similarity × consensus here (prior = 1 for every document); it is not a separate row.",
    ]
    if whole_corpus:
        base = [whole_corpus[q] for q in split.test if q in whole_corpus]
        if base:
            notes.append(f"For reference, similarity only over the whole corpus (main table) "
                         f"has harmful@1 {np.mean(base):.3f} on these {len(base)} test "
                         "questions.")
    extractive = memoized(extractive_answers)
    readers: dict[str, PassageReader] = {"extractive reader": extractive}
    if any(isinstance(evalset.query_labels.get(q, {}).get("choices"), list) for q in qids):
        readers["choice reader"] = memoized(choice_reader(
            {t: evalset.query_labels[q]["choices"] for q, t in evalset.queries
             if isinstance(evalset.query_labels.get(q, {}).get("choices"), list)}))
    # similarity only and the extractive consensus are pipeline specs (τ and floor calibrated
    # on the dev questions); the choice reader (no spec names it) and the credibility models
    # fitted in memory stay stages
    systems = {BASELINE: System.of_spec(PipelineSpec.of(top_k=top_k, fetch_k=fetch_k))}
    consensus_rows: dict[str, tuple[list[Stage], AnswerConsensus]] = {}

    def add_consensus(label: str, before: list[Stage], reader_name: str, fitted: str) -> None:
        reader = readers[reader_name]
        cal = calibrate_consensus(dev_pools, before, reader, evalset, top_k)
        stage = cal.stage(reader)
        consensus_rows[label] = (before, stage)
        params = {"threshold": cal.threshold, "floor": cal.floor, "reader": reader_name,
                  "fitted_on": fitted, "not_label_free_for": set_name}
        notes = (f"consensus over the {fetch_k} fetched passages; τ = {cal.threshold:.3g} "
                 f"by choose_threshold on the dev questions (dev utility "
                 f"{cal.choice['utility']:.3f}), floor {cal.floor:g} of {list(FLOORS)} by "
                 "dev harmful@1; on_contested = neutral", fitted_here)
        if before or reader is not extractive:
            systems[label] = System(ranked(*before, stage, top_k=top_k), reads_labels=False,
                                    params=params, notes=notes)
        else:
            spec = PipelineSpec.of({"stage": "consensus", "threshold": cal.threshold,
                                    "floor": cal.floor}, top_k=top_k, fetch_k=fetch_k)
            systems[label] = reading_with(reader, System.of_spec(spec, params=params,
                                                                 notes=notes))
        details.setdefault("consensus_choices", {})[label] = cal.choice

    for reader_name in readers:
        add_consensus(f"similarity × consensus ({reader_name})", [], reader_name,
                      "dev: consensus τ and floor")
    featurizer = CredibilityFeaturizer(embedder)
    held_out = text_keys(texts[d] for d in test_docs)
    held_out_stripped = text_keys((texts[d] for d in test_docs), strip_spoofed_prefix)
    examples = credibility_examples(evalset, split.dev, held_out)
    stripped = credibility_examples(evalset, split.dev, held_out_stripped, strip_spoofed_prefix)
    details["held_out_of_training_prefix_stripped"] = len(dev_docs) - len(stripped)
    fitted = fit_credibility(examples, featurizer, seed)
    ablated = fit_credibility(stripped, featurizer, seed)
    leaked = [*(leaked_documents(fitted.model, texts, held_out) if fitted else []),
              *(leaked_documents(ablated.model, texts, held_out_stripped, strip_spoofed_prefix)
                if ablated else [])]
    if leaked:
        raise AssertionError(f"label-free: a credibility model trained on {len(leaked)} "
                             "documents whose text is a test document's")
    if fitted is None or ablated is None:
        notes.append("absent: the development documents hold one class only, so no "
                     "credibility model was fitted and its systems were not run")
    else:
        cred = LearnedCredibilityPrior(fitted.model, name="credibility",
                                       floor=CREDIBILITY_FLOOR)
        cfg = fitted.choice["config"]
        systems["learned credibility"] = System(
            ranked(cred, top_k=top_k), reads_labels=False,
            params={"config": cfg, "cv_auc": fitted.choice["cv_auc"], "floor": CREDIBILITY_FLOOR,
                    "fitted_on": f"dev: {fitted.choice['trained_on']} documents",
                    "not_label_free_for": set_name},
            notes=(f"P(credible) from page text (config {cfg} by grouped CV over dev "
                   f"questions, pooled out-of-fold AUC {_fmt(fitted.choice['cv_auc'])}); "
                   f"λ = {CREDIBILITY_FLOOR} + {1 - CREDIBILITY_FLOOR:g}·p", fitted_here))
        for reader_name in readers:
            add_consensus(f"learned credibility × consensus ({reader_name})", [cred],
                          reader_name, "dev: credibility model, consensus τ and floor")
        stripped_prior = LearnedCredibilityPrior(_stripped_model(ablated.model),
                                                 name="credibility", floor=CREDIBILITY_FLOOR)
        acfg = ablated.choice["config"]
        systems["ablation: learned credibility, spoofed prefixes stripped"] = System(
            ranked(stripped_prior, top_k=top_k), reads_labels=False,
            params={"config": acfg, "cv_auc": ablated.choice["cv_auc"],
                    "floor": CREDIBILITY_FLOOR, "fitted_on": "dev, prefixes stripped",
                    "not_label_free_for": set_name},
            notes=("fitted and applied with strip_spoofed_prefix on every text ('CNN news:', "
                   "'CNN news has confirmed that', 'According to <source>,', 'Breaking news:'); "
                   f"config {acfg}, dev CV AUC {_fmt(ablated.choice['cv_auc'])}",
                   fitted_here))
        details["credibility"] = fitted.choice
        details["credibility_prefix_stripped"] = ablated.choice
    details["prefix_stripped_texts"] = _stripped_counts(evalset)
    test_qids = set(split.test)
    result = run_experiment(
        test_pools, systems, {q: dict(evalset.qrels.get(q, {})) for q in split.test},
        list(measures), bad={q: set(evalset.bad.get(q, set())) for q in test_qids},
        custom=reader_measures(evalset, top_k), key=KEY, title=TITLE, seed=seed,
        notes=[*notes, f"{READER_ACCURACY} / {READER_MISLED}: the offline ExtractiveReader's "
               f"answer over each system's top {top_k} passages contains a gold answer (CrAM: "
               "answers; NewsPolluted: the correct choice) / a wrong answer (CrAM: the fake's "
               "wrong_answer; NewsPolluted: another choice). Lenient containment: here "
               f"{_fake_gold(evalset)} fakes themselves contain a gold answer"
               + (" (CrAM's fakes assert the wrong answer 'rather than' the right one)"
                  if evalset.name == "cram-nq" else "")
               + ", so reading a fake can count as correct; read both columns together. "
               "Intervals: 10,000 bootstrap resamples over test questions, seeded."])
    statuses = {}
    for label, (before, stage) in consensus_rows.items():
        statuses[label] = status_counts(consensus_readout(test_pools, before, stage, evalset))
    details["consensus_status_test"] = statuses
    for label, s in statuses.items():
        result.table.notes.append(
            f"{label}, test: {s['agreed']} agreed ({s['agreed_correct']} of them correct), "
            f"{s['contested']} contested, {s['no answers']} without answers")
    dup = fake_pair_duplicates(evalset, index, split.test)
    details["fake_pair_duplicates_test"] = dup
    if dup["bad_pairs"]:
        result.table.notes.append(
            f"Copies: of {dup['bad_pairs']} pairs of fakes of one test question, "
            f"{dup['joined_by_text_jaccard_0.5']} are joined by the text test (3-gram "
            f"Jaccard ≥ 0.5) and {dup[f'joined_by_text_or_cosine_{COSINE:g}']} by text or "
            f"cosine ≥ {COSINE:g} (mean cosine fake–fake {_fmt(dup['mean_cosine_bad_bad'])}, "
            f"fake–real {_fmt(dup['mean_cosine_bad_good'])}): fakes that are not copies vote "
            "separately, so several fakes naming one wrong answer outvote one real article "
            "unless their weight is already low.")
    else:
        result.table.notes.append("Copies: no question has two fakes, so copy collapse has "
                                  "nothing to merge among fakes here.")
    return result, details


def _stripped_counts(evalset: EvalSet) -> dict[str, int]:
    bad = set().union(*evalset.bad.values()) if evalset.bad else set()
    out = {"bad": 0, "not_bad": 0}
    for d in evalset.documents:
        if strip_spoofed_prefix(d.text) != d.text:
            out["bad" if d.id in bad else "not_bad"] += 1
    return out


def _fake_gold(evalset: EvalSet) -> str:
    texts = {d.id: d.text for d in evalset.documents}
    pairs = [(d, q) for q, bad in evalset.bad.items() for d in bad]
    hits = sum(1 for d, q in pairs if contains_answer(texts[d], gold_answers(evalset, q)))
    return f"{hits} of {len(pairs)}"


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"
