"""EvoTemp with freshness and a generator in the loop (chapter 35.7 and 35.4).

Two tables join the pooled bench's ``results`` for ``credrank bench evotemp``:

**``freshness``** — every question retrieves ``fetch_k`` candidates from the whole corpus (as
the main table), then each system reranks them by ``max(cos, 0) × w`` with the freshness
factor ``w(T, t) = 2^(−(T−t)/τ)`` (:class:`~credrank.stages.freshness.FreshnessDecay`, 35.7):
``T`` is the question's ``q_date``; the document date is its publication date (EvoTemp's
``date``; 38% undated). Rows: similarity only; ``τ`` swept over :data:`HALF_LIVES` with the
``neutral`` unknown-age policy (the median weight of the dated candidates); and at the
a-priori ``τ = 365`` days the two other policies, ``penalty:0.5`` and ``exclude``. A question
without ``q_date`` (3 of 499) takes ``T`` = the latest date among its own pool documents,
or, when none is dated, its freshness factor is 1 for every candidate (declared: no
evaluation time, no decay).

**``generator_in_the_loop``** — on each question's own pool (its 7 documents, ranked by cosine
within the pool), the generator answers from the top ``top_k`` passages given three ways:

1. ``plain context`` — similarity order, no labels (the matched control,
   :func:`~credrank.context.render.render` ``plain``);
2. ``CAG-annotated context`` — the same passages in the same order with credibility tiers
   (``cag``): ``tier = min(S, max(1, R − ⌊(T−t)/τ⌋))`` (35.4) with ``τ = 365`` days and the
   neutral unknown-age policy; EvoTemp has no provenance, so the source tier does not cap
   (``S = 3`` for every passage, declared: relevance and age only);
3. ``credibility-aware ranking + annotated context`` — the pool reranked by ``cos × w``
   (``τ = 365`` days, neutral), the top ``top_k`` annotated as in 2.

Exact match as CAG defines it: a gold answer is a substring of the generation after the
normalisation of :func:`~credrank.evaluate.answers.cag_exact_match`. Means with 95%
bootstrap intervals over questions (10,000 resamples, seeded), each condition paired with the
plain context. Questions without a gold answer are left out of EM and counted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.context.build import annotate
from credrank.core.candidates import Candidates
from credrank.core.pipeline import Pipeline, Stage
from credrank.evaluate.answers import cag_exact_match
from credrank.evaluate.experiment import (
    ExperimentResult,
    PerQuery,
    System,
    compare_systems,
    run_experiment,
)
from credrank.evaluate.metrics import register_measure
from credrank.evaluate.tables import Column
from credrank.freshness.dates import freshness_date
from credrank.freshness.policy import UnknownAge, parse_undated
from credrank.generate.llm import Generator
from credrank.index.memory import InMemoryIndex
from credrank.pipeline.spec import PipelineSpec
from credrank.select.topk import TopK
from credrank.stages.freshness import FreshnessDecay
from credrank_bench.datasets import EvalSet

#: the half-lives of the freshness sweep, in days
HALF_LIVES = (30.0, 90.0, 180.0, 365.0, 730.0)
#: the a-priori half-life of the policy rows and of the generator conditions, in days
POLICY_HALF_LIFE = 365.0
#: the unknown-age policies compared at ``POLICY_HALF_LIFE``
POLICIES = ("neutral", "penalty:0.5", "exclude")
#: the factor that stands for "no source information" (no cap on the tier)
NO_SOURCE = "no_source_information"
CAG_EM = "cag-em"
MAX_TOKENS = 32

register_measure(CAG_EM, CAG_EM, "higher",
                 "exact match as CAG defines it: a gold answer is a substring of the "
                 "generation after normalisation")

NowFn = Callable[[Candidates], datetime]


def evaluation_times(evalset: EvalSet) -> dict[str, datetime | None]:
    """``T`` per question: its ``q_date``; else the latest freshness date among its own pool
    documents; else ``None`` (no decay for that question)."""
    docs = {d.id: d for d in evalset.documents}
    out: dict[str, datetime | None] = {}
    for qid, _ in evalset.queries:
        q_date = evalset.query_labels.get(qid, {}).get("q_date")
        if q_date is None:
            dated = [f.date for d in (evalset.pools or {}).get(qid, [])
                     if (f := freshness_date(docs[d].dates())).date is not None]
            q_date = max(dated) if dated else None
        out[qid] = q_date
    return out


class PerQueryFreshness(Stage):
    """:class:`FreshnessDecay` with ``T`` of the batch's question (``info["query_id"]``); a
    question without ``T`` gets the factor 1 for every candidate (declared)."""

    def __init__(self, half_life: float, times: Mapping[str, datetime | None],
                 undated: UnknownAge, name: str = "freshness"):
        self.times, self.name = dict(times), name
        self.stage = FreshnessDecay(half_life, now=self._now, undated=undated, name=name)

    def _now(self, batch: Candidates) -> datetime:
        t = self.times.get(str(batch.info.get("query_id")))
        assert t is not None
        return t

    def transform(self, batch: Candidates) -> Candidates:
        if self.times.get(str(batch.info.get("query_id"))) is None:
            return batch.with_factor(self.name, np.ones(len(batch)), 0.0, 1.0)
        return self.stage(batch)

    def config(self) -> dict[str, Any]:
        return {"freshness": self.stage.describe(), "T": "the question's q_date"}


def with_query_ids(pools: Mapping[str, Candidates]) -> dict[str, Candidates]:
    """The pools with ``info["query_id"]`` set (the per-question ``T`` reads it)."""
    return {qid: batch.with_info(query_id=qid) for qid, batch in pools.items()}


def _ranked(*stages: Stage, top_k: int) -> Pipeline:
    return Pipeline([*stages, Combine("multiply"), TopK(top_k)])


def freshness_experiment(evalset: EvalSet, pools: Mapping[str, Candidates], top_k: int,
                         measures: Sequence[str], seed: int, fetch_k: int | None = None
                         ) -> ExperimentResult:
    """The ``freshness`` table (module docstring). Similarity only is a pipeline spec (of
    ``fetch_k`` passages, default 3 × ``top_k``); the freshness systems take ``T`` from each
    question's date, which no spec can name (a spec's ``now`` is one instant): they stay
    stages."""
    times = evaluation_times(evalset)
    systems = {"similarity only": System.of_spec(PipelineSpec.of(top_k=top_k,
                                                                 fetch_k=fetch_k))}
    for tau in HALF_LIVES:
        systems[f"freshness τ = {tau:g} d, undated neutral"] = System(
            _ranked(PerQueryFreshness(tau, times, parse_undated("neutral")), top_k=top_k),
            reads_labels=False, params={"half_life": tau, "undated": "neutral"})
    for policy in POLICIES[1:]:
        systems[f"freshness τ = {POLICY_HALF_LIFE:g} d, undated {policy}"] = System(
            _ranked(PerQueryFreshness(POLICY_HALF_LIFE, times, parse_undated(policy)),
                    top_k=top_k),
            reads_labels=False, params={"half_life": POLICY_HALF_LIFE, "undated": policy})
    no_t = sum(1 for t in times.values() if t is None)
    return run_experiment(
        with_query_ids(pools), systems, evalset.qrels, list(measures), bad=evalset.bad,
        seed=seed, key="freshness", title="Freshness: half-life sweep and unknown-age policies",
        notes=[
            "score = max(cos, 0) × 2^(−(T−t)/τ) (35.7); T = the question's q_date; t = the "
            "publication date (EvoTemp's 'date'); undated: neutral = the median weight of the "
            "dated candidates, penalty:0.5 = 0.5, exclude = dropped before the cut",
            f"{sum(1 for q, _ in evalset.queries if evalset.query_labels[q].get('q_date') is None)}"
            " questions lack q_date: T = the latest date of their own pool documents"
            f"; {no_t} have no date at all and get no decay",
            "no system reads a label: dates and q_date are data the question comes with",
        ])


def own_pools(evalset: EvalSet, index: InMemoryIndex,
              query_vectors: Mapping[str, np.ndarray]) -> dict[str, Candidates]:
    """Each question's own documents ranked by cosine (the 7-document pools)."""
    pools = evalset.pools or {}
    return {qid: index.search(text, query_vectors[qid], max(len(pools.get(qid, [])), 1),
                              restrict=list(pools.get(qid, []))).with_info(query_id=qid)
            for qid, text in evalset.queries if pools.get(qid)}


def context_prompts(evalset: EvalSet, pools: Mapping[str, Candidates], top_k: int
                    ) -> dict[str, dict[str, str]]:
    """``condition -> qid -> prompt`` for the three conditions of the module docstring."""
    times = evaluation_times(evalset)
    rerank = _ranked(PerQueryFreshness(POLICY_HALF_LIFE, times, parse_undated("neutral")),
                     top_k=top_k)
    by_sim = System.of_spec(PipelineSpec.of(top_k=top_k)).stage
    assert by_sim is not None
    out: dict[str, dict[str, str]] = {"plain context": {}, "CAG-annotated context": {},
                                      "credibility-aware ranking + annotated context": {}}
    for qid, pool in pools.items():
        sim_top = by_sim(pool)
        fresh_top = rerank(pool)
        for name, batch, fmt in (("plain context", sim_top, "plain"),
                                 ("CAG-annotated context", sim_top, "cag"),
                                 ("credibility-aware ranking + annotated context", fresh_top,
                                  "cag")):
            doc = annotate(batch.with_factor(NO_SOURCE, np.ones(len(batch)), 0.0, 1.0),
                           now=times.get(qid), half_life=POLICY_HALF_LIFE,
                           undated="neutral", source_tier=NO_SOURCE, pool=pool)
            out[name][qid] = doc.render(fmt, cite=False)  # the measured prompts: no citations
    return out


def generator_experiment(evalset: EvalSet, index: InMemoryIndex,
                         query_vectors: Mapping[str, np.ndarray], generator: Generator,
                         generator_name: str, top_k: int, seed: int
                         ) -> tuple[ExperimentResult, dict[str, Any]]:
    """The ``generator_in_the_loop`` table and its details (prompt sizes, answers kept)."""
    pools = own_pools(evalset, index, query_vectors)
    prompts = context_prompts(evalset, pools, top_k)
    gold = {q: evalset.query_labels.get(q, {}).get("answers") or [] for q, _ in evalset.queries}
    scored = [q for q in pools if gold.get(q)]
    per_query: PerQuery = {}
    answers: dict[str, dict[str, str]] = {}
    for name, by_q in prompts.items():
        answers[name] = {}
        values: dict[str, float] = {}
        for q in scored:
            text = generator.generate(by_q[q], max_tokens=MAX_TOKENS).text
            answers[name][q] = text
            values[q] = float(cag_exact_match(text, gold[q]))
        per_query[name] = {CAG_EM: values}
    systems = {name: System(None, reads_labels=False,
                            params={"top_k": top_k, "generator": generator_name})
               for name in prompts}
    result = compare_systems(
        per_query, systems, [Column.of(CAG_EM)], key="generator_in_the_loop",
        title=f"Generator in the loop ({generator_name}): EM by context", seed=seed,
        notes=[
            f"each question's own pool (its {max(len(p) for p in pools.values())} documents "
            f"at most), ranked by cosine; the generator reads the top {top_k}",
            "CAG tiers: tier = min(S, max(1, R − ⌊(T−t)/τ⌋)), τ = 365 d, T = q_date, undated "
            "neutral; no provenance, so S = 3 (no source cap): tiers from relevance and age",
            "credibility-aware ranking: cos × 2^(−(T−t)/τ), τ = 365 d, undated neutral",
            f"EM as CAG: a gold answer is a substring of the normalised generation; "
            f"{len(pools) - len(scored)} questions without a gold answer are left out",
            f"generator: {generator_name}, greedy, at most {MAX_TOKENS} new tokens",
        ])
    details = {"questions_scored": len(scored), "questions_without_gold": len(pools) - len(scored),
               "examples": {name: dict(list(a.items())[:5]) for name, a in answers.items()}}
    return result, details
