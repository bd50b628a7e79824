"""The limits each bench's report states: of its own data (``../shared/data/SOURCES.md``, the
sections of docs/results.md) and of the settings it ran with.

:func:`bench_limits` is what :func:`credrank_bench.experiments.benches.run_bench` stores as
``details["limits"]`` (JSON data: a list of sentences) and what ``credrank bench`` writes as
the section "Limits" of the Markdown report (``--report``) and of ``report.md`` (``--out``).
A limit that holds for several benches (assigned priors, rows that read labels, one embedder)
is stated only where it applies; the sentences that depend on the run (the embedder, the
number of queries, rows marked ``[reads labels]``, ``--limit``) are made from the result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from credrank.evaluate.result import BenchResult

#: below this many queries (topics, questions) a report warns that intervals are wide
FEW_QUERIES = 50
#: the benches whose data limits already say that the set is small
SMALL_SETS = frozenset({"demo", "trec2019-hm", "realtimeqa", "poisonedrag", "goldengaze-hosts"})

ASSIGNED_PRIORS = (
    "No provenance: the documents of this set carry no URL or publisher, so every source type "
    "here is assigned by the experimenter from the evaluation labels with a stated error rate "
    "(x% of documents get the wrong type); such rows read labels, and x = 0 is a circular "
    "upper bound, not a result. Use this set for estimated credibility and for robustness "
    "curves under wrong priors (SOURCES.md).")
LLM_FAKES = ("The bad documents are LLM-written fakes; real misinformation is written "
             "differently, so what separates them here (style, genre, length) may not "
             "separate real misinformation.")
PLANTED_DEFAULTS = (
    "The planted-evidence defaults were chosen by looking at these same sets (no held-out set "
    "of poisoning attacks exists here): their numbers are optimistic by that choice.")

#: the limits of each bench's own data (docs/results.md, SOURCES.md)
DATA_LIMITS: dict[str, list[str]] = {
    "demo": [
        "Synthetic data: the demo corpus was written for this project (10 queries, 120 "
        "documents), its URLs and its domain table with it; it shows the mechanics, not an "
        "effect on real data.",
        "10 queries: intervals are wide and the randomisation tests rest on 2^10 sign "
        "patterns at most.",
    ],
    "trec2019-hm": [
        "Labels: harmful = the page's stance contradicts the Cochrane-based correct_stance "
        "(none on inconclusive topics); gain needs usefulness, NIST credibility and a correct "
        "stance. The dev split is balanced by construction (half of each topic's judged pages "
        "harmful).",
        "timestamp is the ClueWeb12 crawl time (retrieved_at), not a publication date.",
        "The correctness-signal models (stance, page credibility) are fitted "
        "leave-one-topic-out on labels of this set's other topics: never on the evaluated "
        "topic, but not label-free for TREC 2019 HM.",
    ],
    "newspolluted": [
        "Per question 1 real news snippet against 3 LLM-written fakes (news of Jul–Dec 2023); "
        "the fakes outnumber the truth in every pool.",
        "Fake texts carry the leaked label 'Low credibility of text:' (453 in the shared "
        "file; the reader's notes count this file's); it is stripped before any method sees "
        "a text, but other traces of the generator remain.",
        LLM_FAKES,
        ASSIGNED_PRIORS,
        "The table 'Fitted on the development split's labels' (key label_free): its credibility "
        "model and consensus settings are fitted on this set's development questions and their "
        "labels: not label-free for NewsPolluted.",
    ],
    "cram-nq": [
        "Reconstructed file: NQ questions with 4 retrieved Wikipedia passages and 1 GPT-written "
        "fake each, rebuilt from CrAM's published prompts; most fakes begin 'CNN news:' (a "
        "spoofed source, never a prior; the reader's note counts them).",
        LLM_FAKES,
        "Relevance is lenient: a real passage containing a gold answer string; most fakes "
        "contain the gold answer too (934 of the full file's 1,000).",
        ASSIGNED_PRIORS,
        "gpt_truthfulness_0_10 is GPT's judgement of each passage, shipped with the data: how "
        "well GPT knew these fakes is a limit of that signal.",
        "The table 'Fitted on the development split's labels' (key label_free): its credibility "
        "model and consensus settings are fitted on this set's development questions and their "
        "labels: not label-free for CrAM NQ.",
    ],
    "cram-nq --model": [
        "A white-box run on a small local model (SmolLM2-135M class): its exact-match levels are "
        "low and the matched comparison with the naive run is the point, not the level.",
        "Each question's pool is CrAM NQ's own 4 Wikipedia passages and 1 GPT-written fake "
        "(reconstructed file); the fakes are LLM-written.",
        "The heads were searched, and the learned credibility scorer fitted, on labelled "
        "CrAM NQ questions of the heads file (calibration and validation), disjoint from the "
        "evaluated ones: never on an evaluated question, but not label-free for CrAM NQ.",
    ],
    "evotemp": [
        "Labels: EvoTemp's low credibility mixes outdated and false documents; answers do not "
        "always agree with the high-credibility documents.",
        "Many documents are undated (about 37% in the shared file; the reader's notes count "
        "this file's): published_at None, never 'now', so the unknown-age policy decides "
        "their weight as much as the half-life does.",
        ASSIGNED_PRIORS,
        "The generator in the loop defaults to the offline extractive reader, which ignores "
        "what the credibility annotations mean.",
    ],
    "ramdocs": [
        ASSIGNED_PRIORS + " The three 'credibility-aware …' rows use priors assigned from the "
        "labels with 20% of types wrong: they read labels (references, not results).",
        "Misinformation documents are written to support a wrong answer; noise documents have "
        "the answer 'unknown'; some correct documents support an answer also listed as wrong.",
        "Coverage intents come from clustering the candidates' embeddings (no labels); "
        "diversification over the whole pool rewards other questions' documents.",
    ],
    "poisonedrag": [
        "The adversarial texts were LLM-crafted by PoisonedRAG's authors to be retrieved; the "
        "clean corpus is CrAM NQ's real Wikipedia passages (fakes removed), not the corpus "
        "PoisonedRAG attacked, so few targets have a clean passage with their answer and short "
        "answers can match passages about something else.",
        "The consensus rows use a-priori defaults (τ = 0.5, floor 0.1): with 100 targets there "
        "is no development split.",
        PLANTED_DEFAULTS,
    ],
    "stress": [
        "Contaminants are placed at controlled slots (first, middle, last: each takes the "
        "score of the clean document it displaces) — a controlled test, not natural retrieval "
        "(natural keeps the contaminant's own cosine).",
        "The offline extractive reader's clean accuracy is low (in the published runs about "
        "10% on CrAM NQ, 6% on PoisonedRAG), so flip counts are small and their intervals "
        "wide.",
        LLM_FAKES,
    ],
    "stress-cram": [
        "The learned credibility model is fitted on this set's development questions and "
        "their labels: not label-free for CrAM NQ (the test questions are never fitted on).",
    ],
    "stress-news": [
        "The learned credibility model is fitted on this set's development questions and "
        "their labels: not label-free for NewsPolluted (the test questions are never fitted "
        "on). The 3 fakes per question are correlated (one false story in different styles).",
    ],
    "stress-poisonedrag": [
        "The learned credibility model is fitted on CrAM NQ's questions that are not "
        "PoisonedRAG targets (a transfer test: label-free for PoisonedRAG, not for CrAM NQ); "
        "the clean corpus is CrAM NQ's Wikipedia passages, which the targets were not built "
        "for.",
    ],
    "realtimeqa": [
        "The offline extractive reader is a poor multiple-choice answerer.",
    ],
    "coaid-priors": [
        "CoAID's fakes were collected mostly from social media, so the source type nearly "
        "encodes the label: a high AUC here says little about priors on other data.",
        "'Real' stands in for 'reliable'; CoAID's base rate (about 83% real) is a property of "
        "how it was collected.",
        "Fitted on the earlier releases, scored on the later ones; test URLs already seen in "
        "training are dropped. The priors are scored as predictors of P(real), not in a "
        "ranking.",
    ],
    "goldengaze-hosts": [
        "A host's answer is the mean helpful_probability of its pages — a stance model's "
        "prediction, not a human label: that model's errors are in every answer.",
        "The anchored rows read the known stances of the other topics (never of the scored "
        "topic); the post-hoc ridge variant was picked on the 50 topics of the shared file "
        "(optimistic there).",
    ],
    "ra-rag-simulation": [
        "Synthetic: simulated answers following the RA-RAG protocol (Beta reliabilities, "
        "independent errors but for the copies variant); no real source is measured.",
        "Means over a few simulated sets per scenario (settings.repeats).",
    ],
}


def _count(result: BenchResult, key: str) -> int | None:
    value = result.summary.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _types(result: BenchResult) -> dict[str, int]:
    types = result.details.get("source_types")
    return ({k: v for k, v in types.items() if isinstance(v, int)}
            if isinstance(types, dict) else {})


def _trec_limits(result: BenchResult) -> list[str]:
    topics, pages = _count(result, "queries"), _count(result, "documents")
    out = [f"Small collection: this run read {topics} topics and {pages} judged pages (the "
           "shared dev split holds 15 of TREC 2019 HM's 29 topics and 156 pages; the other 14 "
           "topics are kept back); intervals are wide and p-values rest on few topics."]
    unknown = _types(result).get("unknown")
    if unknown is not None and pages:
        out.append(f"{unknown} of the {pages} pages come from sites that no rule or table "
                   "types (unknown; long-tail 2012 sites in the shared split): URL priors can "
                   "act on the others only.")
    return out


def _realtimeqa_limits(result: BenchResult) -> list[str]:
    n = _count(result, "queries")
    without = _count(result, "questions_without_results")
    relevant = _count(result, "queries_with_relevant")
    out = [f"Few questions: this run read {n} multiple-choice questions, {without} of them "
           "without a search result (scored as failures in 'results', left out of "
           "'with_results'): intervals are wide. (docs/results.md's runs: four weeks of "
           "December 2023, 119 questions, 20 without a result.)",
           "Relevance is a proxy: a document is right when it contains the right choice and "
           f"no wrong one as whole tokens; {relevant} of the {n} questions read have such a "
           "document."]
    types = _types(result)
    total = sum(types.values())
    if total:
        share = types.get("established_news", 0) / total
        out.append(f"{share:.0%} of the {total} search results' URLs type as established_news, "
                   "so URL priors have little to tell apart." if share >= 0.5 else
                   f"{share:.0%} of the {total} search results' URLs type as established_news.")
    return out


def _queries_limit(what: str) -> Callable[[BenchResult], list[str]]:
    def limit(result: BenchResult) -> list[str]:
        n = _count(result, "queries") if what != "topics" else _count(result, "topics")
        return [f"{n} {what}: intervals are wide"
                + (" (details.wilson_95 holds Wilson intervals)." if what == "target questions"
                   else " (Wilson intervals).")] if n is not None else []
    return limit


#: the limits that state counts of the data this run read (from ``result.summary`` and
#: ``result.details``), before :data:`DATA_LIMITS`' sentences of the same bench
RUN_LIMITS: dict[str, Callable[[BenchResult], list[str]]] = {
    "trec2019-hm": _trec_limits,
    "realtimeqa": _realtimeqa_limits,
    "poisonedrag": _queries_limit("target questions"),
    "goldengaze-hosts": _queries_limit("topics"),
}


def _key(result: BenchResult) -> list[str]:
    name = result.name
    if name == "cram-nq" and "model" in result.settings:
        return ["cram-nq --model"]
    if name.startswith("stress-"):
        return ["stress", name]
    return [name]


def _reads_labels(result: BenchResult) -> bool:
    return any(r.reads_labels for t in result.tables for r in t.rows)


def _queries(result: BenchResult) -> int | None:
    for key in ("queries", "questions", "topics"):
        value = result.summary.get(key)
        if isinstance(value, int):
            return value
    return None


def bench_limits(result: BenchResult) -> list[str]:
    """The limits of ``result``'s bench: its data's (:data:`DATA_LIMITS`), then those of the
    run (embedder, size, label-reading rows, ``--limit``)."""
    out = [line for key in _key(result) for line in
           [*(RUN_LIMITS[key](result) if key in RUN_LIMITS else []), *DATA_LIMITS.get(key, [])]]
    settings: dict[str, Any] = result.settings
    embedder = settings.get("embedder")
    if embedder == "hashing":
        out.append("Embedder 'hashing': a test stand-in without semantics; the published "
                   "numbers use MiniLM.")
    elif isinstance(embedder, str):
        out.append(f"One embedder ({embedder}) and exact cosine search: another embedder "
                   "retrieves other pools.")
    n = _queries(result)
    if n is not None and 0 < n < FEW_QUERIES and result.name not in SMALL_SETS:
        out.append(f"This run evaluated {n} queries only: intervals are wide and p-values "
                   "rest on few queries.")
    if isinstance(settings.get("limit"), int):
        out.append(f"--limit {settings['limit']}: only the first {settings['limit']} "
                   "questions (and, in stress benches, development questions) were used.")
    if _reads_labels(result):
        out.append("Rows marked [reads labels] (in JSON: reads_labels true) read evaluation "
                   "labels of the items they are scored on (priors assigned from labels, even "
                   "with noise; oracles): references, not results.")
    return out


__all__ = ["DATA_LIMITS", "RUN_LIMITS", "bench_limits"]
