"""``credrank bench realtimeqa --path P``: provenance and freshness on real dated news, with a
generator in the loop.

Data: RealTimeQA weeks (:func:`~credrank_bench.datasets.realtimeqa.read_realtimeqa`). Each
question's pool is **its own** search results: retrieval is restricted to them
(``InMemoryIndex.search(..., restrict=pool)``), ``fetch_k`` of them by cosine, and every system
reranks that pool and keeps ``top_k``. Source types come from the URL (the project's
:class:`~credrank.provenance.SourceTyper`, no label); document dates are ``publish_date``; the
evaluation time ``T`` of a question is its ``question_date``.

Systems: similarity only (baseline); the current priors (type from the URL); freshness systems
when :class:`credrank.stages.freshness.FreshnessDecay` is available (see
:func:`freshness_systems`, the hook; otherwise they are listed as absent).

Measures, over **all** questions (a question without search results is scored 0 on both
accuracies: no document can be right and the generator is not asked; the table of questions
with results only is beside it):

* ``top-doc accuracy``: the top-ranked document contains the right choice and no wrong choice
  (whole tokens after SQuAD normalisation, title and text:
  :func:`~credrank_bench.datasets.realtimeqa.document_verdict` = ``right``);
* ``generator accuracy``: the generator reads the top-k passages and the lettered choices
  (:func:`realtimeqa_prompt`; each passage cut to its first :data:`PASSAGE_WORDS` words,
  title first) and its answer is mapped to a choice by
  :func:`~credrank.evaluate.answers.choose_option`; correct when that is the right choice;
* ``generator EM``: CAG exact match of the generation against the right choice's text
  (:func:`~credrank.evaluate.answers.cag_exact_match`);
* ``nDCG@5`` and ``harmful@5`` over the reader's qrels (gain 1 = a ``right`` document; bad =
  a ``wrong`` one); nDCG leaves out questions without a right document.

The generator is the offline :class:`~credrank.generate.llm.ExtractiveReader` by default or
any :class:`~credrank.generate.llm.Generator` (e.g. SmolLM2). Generations are cached per
(question, top-k passages), so systems that pick the same passages share one call.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.core.pipeline import Pipeline
from credrank.evaluate.answers import (
    GENERATOR_ACCURACY,
    GENERATOR_EM,
    TOP_DOC_ACCURACY,
    cag_exact_match,
    choose_option,
    option_letter,
)
from credrank.evaluate.experiment import ExperimentResult, System, compare_systems, run_experiment
from credrank.evaluate.metrics import ranked_docs
from credrank.evaluate.result import AbsentSignal, BenchResult
from credrank.evaluate.tables import Column
from credrank.generate.llm import ExtractiveReader, Generator, build_prompt
from credrank.index.embed import Embedder
from credrank.provenance import SourceTyper
from credrank.select.topk import TopK
from credrank_bench.datasets import EvalSet, load_dataset
from credrank_bench.experiments.bench import (
    BASELINE,
    baseline_system,
    prepare,
    prior_system,
    require_usable,
)
from credrank_bench.experiments.defences import defence_systems

RETRIEVAL_MEASURES = ["nDCG@5", "harmful@5"]
PRIORS_SYSTEM = "current priors (type from URL)"
#: half-lives (days) of the freshness systems, when the stage is available
HALF_LIVES = (30.0, 365.0)
#: the line that asks for one choice, added to :data:`~credrank.generate.llm.INSTRUCTION`
CHOICE_LINE = "Reply with the letter and text of the one right choice."
#: words of each passage the generator reads (title first): the search results are whole
#: articles (median ≈ 1,000 words), far beyond a small model's budget on CPU
PASSAGE_WORDS = 150


def realtimeqa_prompt(question: str, choices: Sequence[str], passages: Sequence[str]) -> str:
    """:func:`~credrank.generate.llm.build_prompt` with the choices listed: the lines
    ``Choices:``, ``A) first``, ``B) second``, ... and :data:`CHOICE_LINE` come between the
    question and ``Answer:``. The question line itself holds only the question (so the
    extractive reader does not treat choice words as question words)."""
    base = build_prompt(question, passages)
    head, _, _ = base.rpartition("\nAnswer:")
    lines = [head, "Choices:"]
    lines += [f"{option_letter(i)}) {' '.join(c.split())}" for i, c in enumerate(choices)]
    lines += [CHOICE_LINE, "Answer:"]
    return "\n".join(lines)


def question_pools(evalset: EvalSet, prepared: Any, fetch_k: int) -> dict[str, Candidates]:
    """``qid -> batch``: the ``fetch_k`` nearest of the question's own search results (an
    empty batch for a question without results)."""
    assert evalset.pools is not None
    return {qid: prepared.index.search(text, prepared.query_vectors[qid], fetch_k,
                                       restrict=evalset.pools[qid])
            for qid, text in evalset.queries}


def freshness_systems(q_dates: Mapping[str, datetime | None], top_k: int
                      ) -> tuple[dict[str, System], list[str]]:
    """The hook for freshness systems: ``(systems, notes)``.

    When :class:`credrank.stages.freshness.FreshnessDecay` exists, one system per half-life in
    :data:`HALF_LIVES`: ``sim × 2^(−(T − t)/τ)`` with ``T`` = the question date (looked up by
    the batch's query text), ``t`` = the document's ``published_at`` (undated documents:
    the stage's default unknown-age policy), then top ``top_k``.
    When it does not (or its constructor does not take ``(half_life, now=)``), no
    system and a note saying so."""
    try:
        from credrank.stages.freshness import FreshnessDecay  # type: ignore[import-not-found]
    except ImportError:
        return {}, ["freshness systems not run: credrank.stages.freshness.FreshnessDecay is "
                    "not available in this build (hook: evaluate.realtimeqa.freshness_systems)"]

    def now(batch: Candidates) -> datetime | None:
        return q_dates.get(batch.query)

    systems: dict[str, System] = {}
    for tau in HALF_LIVES:
        try:
            stage = FreshnessDecay(tau, now=now)
        except TypeError as exc:
            return {}, [f"freshness systems not run: FreshnessDecay(half_life, now=) "
                        f"failed ({exc})"]
        systems[f"freshness τ={tau:g} d (T = question date)"] = System(
            Pipeline([stage, Combine("multiply"), TopK(top_k)]),
            reads_labels=False, params={"half_life": tau})
    return systems, [f"freshness systems: sim × 2^(−(T − t)/τ), τ in {list(HALF_LIVES)} days, "
                     "t = publish_date, T = question_date (FreshnessDecay's default "
                     "unknown-age policy)"]


class _Answerer:
    """Generator calls with a cache by (qid, passage ids); timing recorded."""

    def __init__(self, evalset: EvalSet, generator: Generator, top_k: int,
                 passage_words: int) -> None:
        self.evalset, self.generator, self.top_k = evalset, generator, top_k
        self.passage_words = passage_words
        self.docs = evalset.document_map()
        self.qtext = dict(evalset.queries)
        self.cache: dict[tuple[str, tuple[str, ...]], str] = {}
        self.seconds = 0.0
        self.samples: dict[str, list[dict[str, Any]]] = {}

    def answer(self, qid: str, doc_ids: Sequence[str]) -> str:
        key = (qid, tuple(doc_ids))
        if key not in self.cache:
            labels = self.evalset.query_labels[qid]
            passages = [" ".join((f"{self.docs[d].title}. {self.docs[d].text}"
                                  if self.docs[d].title else self.docs[d].text
                                  ).split()[: self.passage_words]) for d in doc_ids]
            prompt = realtimeqa_prompt(self.qtext[qid], labels["choices"], passages)
            t0 = time.perf_counter()
            self.cache[key] = self.generator.generate(prompt, max_tokens=32).text
            self.seconds += time.perf_counter() - t0
        return self.cache[key]

    def measures(self, name: str) -> dict[str, Callable[[dict[str, dict[str, float]]],
                                                         dict[str, float]]]:
        """``top-doc accuracy``, ``generator accuracy`` and ``generator EM`` of a run."""
        per_q: dict[str, dict[str, float]] = {}

        def compute(run: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
            if per_q:
                return per_q
            top_doc, gen_acc, gen_em = {}, {}, {}
            for qid, _ in self.evalset.queries:
                labels = self.evalset.query_labels[qid]
                top = ranked_docs(run.get(qid, {}))[: self.top_k]
                if not top:
                    top_doc[qid] = gen_acc[qid] = gen_em[qid] = 0.0
                    continue
                verdict = self.evalset.doc_labels[top[0]]["verdict"]
                top_doc[qid] = float(verdict == "right")
                text = self.answer(qid, top)
                choice = choose_option(text, labels["choices"])
                gen_acc[qid] = float(choice == labels["answer"])
                gen_em[qid] = float(cag_exact_match(text, [labels["choices"][labels["answer"]]]))
                rows = self.samples.setdefault(name, [])
                if len(rows) < 5:
                    rows.append({"qid": qid, "generation": text, "chosen": choice,
                                 "answer": labels["answer"]})
            per_q.update({TOP_DOC_ACCURACY: top_doc, GENERATOR_ACCURACY: gen_acc,
                          GENERATOR_EM: gen_em})
            return per_q

        return {m: (lambda run, m=m: compute(run)[m])
                for m in (TOP_DOC_ACCURACY, GENERATOR_ACCURACY, GENERATOR_EM)}


def bench_realtimeqa(path: str | Path, embedder: Embedder, *, top_k: int = 5,
                     fetch_k: int = 10, seed: int = 0, generator: Generator | None = None,
                     n_resamples: int = 10_000, passage_words: int = PASSAGE_WORDS
                     ) -> BenchResult:
    """RealTimeQA: similarity vs URL priors (vs freshness, when available) with top-document
    and generator accuracy (module docstring). ``fetch_k`` 10 = every search result (the data
    has at most 10 per question). ``generator``: default the offline extractive reader; it
    reads the first ``passage_words`` words (title, then text) of each top-k document."""
    evalset = require_usable(load_dataset("realtimeqa", path), path)
    generator = generator or ExtractiveReader()
    prepared = prepare(evalset, embedder, typer=SourceTyper())
    docs = evalset.documents
    prepared.index.meta["published_at"] = np.asarray([d.published_at for d in docs],
                                                     dtype=object)
    pools = question_pools(evalset, prepared, fetch_k)
    q_dates = {text: evalset.query_labels[qid]["q_date"] for qid, text in evalset.queries}
    systems: dict[str, System] = {
        BASELINE: baseline_system(top_k, fetch_k),
        PRIORS_SYSTEM: prior_system("current", top_k, fetch_k),
    }
    fresh, fresh_notes = freshness_systems(q_dates, top_k)
    systems.update(fresh)
    # the planted-evidence defence's cost where syndicated copies of one story are common
    systems.update(defence_systems(top_k, fetch_k, only=("planted", "outlier", "grada")))
    absent = [] if fresh else [AbsentSignal(
        "freshness stage", "freshness τ (T = question date)", len(docs), fresh_notes[0])]
    gen_name = getattr(generator, "name", type(generator).__name__)
    answerer = _Answerer(evalset, generator, top_k, passage_words)
    # each system gets its own measure closures (the run differs per system)
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    runs = {}
    for name, system in systems.items():
        one = run_experiment(pools, {name: system}, evalset.qrels, RETRIEVAL_MEASURES,
                             bad=evalset.bad, custom=answerer.measures(name),
                             n_resamples=10, seed=seed)
        per_query[name] = one.per_query[name]
        runs[name] = one.runs[name]
    columns = [Column.of(m) for m in (TOP_DOC_ACCURACY, GENERATOR_ACCURACY, GENERATOR_EM,
                                      *RETRIEVAL_MEASURES)]
    with_results = [qid for qid, _ in evalset.queries
                    if evalset.query_labels[qid]["has_results"]]
    n_all, n_with = len(evalset.queries), len(with_results)
    rule = (f"Each question's pool is its own search results (fetch_k={fetch_k}, top_k="
            f"{top_k}); generator: {gen_name}. Intervals: {n_resamples:,} bootstrap "
            "resamples over questions, seeded.")
    main = compare_systems(
        per_query, systems, columns, key="results", title="Results: all questions",
        runs=runs, n_resamples=n_resamples, seed=seed,
        notes=[rule, f"all {n_all} questions; the {n_all - n_with} without search results "
               "score 0 on the accuracies and harmful@5 (nothing retrieved)"])
    keep = set(with_results)
    sub = {s: {m: {q: v for q, v in vals.items() if q in keep} for m, vals in ms.items()}
           for s, ms in per_query.items()}
    subset = compare_systems(
        sub, systems, columns, key="with_results",
        title="Results: questions with search results", n_resamples=n_resamples, seed=seed,
        notes=[rule, f"the {n_with} questions with at least one search result"])
    notes = [*evalset.notes, *fresh_notes,
             "source types from the URL (SourceTyper, bundled rules); no evaluation label "
             "enters any system", f"T (freshness) = question_date; generator: {gen_name}",
             f"questions: {n_all} in all, {n_with} with search results, {n_all - n_with} "
             "without (scored as failures in 'results', left out of 'with_results')"]
    settings = {"embedder": embedder.name, "top_k": top_k, "fetch_k": fetch_k, "seed": seed,
                "retrieval": "exact cosine within each question's own search results",
                "combine": "max(cos,0) × Π factors", "generator": gen_name,
                "passage_words": passage_words}
    summary = {**evalset.summary(), "questions_with_results": n_with,
               "questions_without_results": n_all - n_with}
    result = BenchResult("realtimeqa", str(path), settings, summary, notes,
                         absent_signals=absent, qrels=evalset.qrels)
    result.add_experiment(main)
    result.add_experiment(ExperimentResult(subset.table, subset.per_query))
    types = list(prepared.index.meta.get("source_type", []))
    result.details["source_types"] = {t: types.count(t) for t in sorted(set(types))}
    result.details["questions"] = {
        "all": n_all, "with_results": n_with, "without_results": n_all - n_with,
        "without_results_ids": [q for q, _ in evalset.queries if q not in keep]}
    result.details["generator"] = {
        "name": gen_name, "calls": len(answerer.cache),
        "seconds": round(answerer.seconds, 3),
        "seconds_per_call": round(answerer.seconds / max(1, len(answerer.cache)), 4),
        "samples": answerer.samples}
    return result
