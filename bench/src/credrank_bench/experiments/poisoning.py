"""``credrank bench poisonedrag``: corpus poisoning (PoisonedRAG) against reranking systems.

The clean corpus is the real Wikipedia text of CrAM NQ with its GPT fakes removed (exact
duplicate passages dropped); the first ``n_inject`` adversarial texts of each of PoisonedRAG's
100 NQ target questions are injected into it (:func:`~credrank_bench.datasets.poisonedrag.
poisoned_corpus`). The combined corpus is embedded once; each target question retrieves its
``fetch_k`` nearest documents (exact cosine over the whole corpus, as
:func:`~credrank_bench.experiments.bench.prepare` does) and every system reranks that same pool.

Measures, per target question (means over questions, each with a 95% percentile-bootstrap
interval over questions, 10,000 resamples, seeded; every system is paired with the baseline):

* ``attack-success@1`` / ``attack-success@k``: 1 when at least one of the target's own
  injected texts is in the system's top 1 / top k;
* ``poisons@k``: the number of the target's injected texts in the top k;
* ``reader-attack-success``: 1 when the offline
  :class:`~credrank.generate.llm.ExtractiveReader`'s answer over the system's top-k passages
  contains the target's incorrect answer (SQuAD normalisation, whole tokens);
* ``reader-correct``: the same for the correct answer.

Systems: :func:`poisoning_systems` (similarity only, and answer consensus with three copy
collapse rules) plus any the caller passes; adding one is one line there or one entry in
``systems=``. ``details.poison_copies`` says how many of each target's injected texts the
near-duplicate test joins.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from credrank.consensus.duplicates import JACCARD, duplicate_groups
from credrank.core.candidates import Candidates
from credrank.core.validation import check_int
from credrank.evaluate.experiment import ExperimentResult, PerQuery, System, compare_systems
from credrank.evaluate.metrics import ranked_docs, register_measure, run_from_batches
from credrank.evaluate.result import BenchResult
from credrank.evaluate.stats import wilson
from credrank.evaluate.tables import Column
from credrank.generate.llm import ExtractiveReader
from credrank.index.embed import Embedder
from credrank.index.memory import InMemoryIndex
from credrank_bench.datasets import EvalSet, contains_answer, read_cram_nq
from credrank_bench.datasets.poisonedrag import (
    PoisonTargets,
    poisoned_corpus,
    read_poisonedrag,
    same_questions,
)
from credrank_bench.experiments.bench import (
    BASELINE,
    Prepared,
    baseline_system,
    bench_settings,
    pools_for,
    prepare,
    search_spec,
)
from credrank_bench.experiments.defences import defence_systems, ragdefender_note

#: the injection counts of the sweep table (0: the clean corpus, a control for the reader)
SWEEP_INJECT = (0, 1, 3, 5)
READER_ATTACK = "reader-attack-success"
READER_CORRECT = "reader-correct"
N_RESAMPLES = 10_000

for _family, _pattern, _direction, _text in (
    ("attack-success@k", r"attack-success@\d+", "lower",
     "share of target questions with at least one of their injected texts in the top k"),
    ("poisons@k", r"poisons@\d+", "lower",
     "number of a target question's injected texts in the top k"),
    (READER_ATTACK, READER_ATTACK, "lower",
     "share of target questions whose reader answer contains the attacker's incorrect answer"),
    (READER_CORRECT, READER_CORRECT, "higher",
     "share of target questions whose reader answer contains the correct answer"),
):
    register_measure(_family, _pattern, _direction, _text)  # type: ignore[arg-type]


#: the embedding near-duplicate threshold of the text + embedding collapse system
COPY_COSINE = 0.9
#: consensus systems: name -> (Jaccard threshold, cosine threshold or None)
CONSENSUS_COLLAPSE = {
    "similarity × consensus, no copy collapse (Jaccard = 1: identical texts only)": (1.0, None),
    "similarity × consensus, text copy collapse (3-gram Jaccard ≥ 0.5)": (JACCARD, None),
    f"similarity × consensus, text + embedding copy collapse (Jaccard ≥ 0.5 or cos ≥ "
    f"{COPY_COSINE:g})": (JACCARD, COPY_COSINE),
}


def poisoning_systems(top_k: int, fetch_k: int | None = None) -> dict[str, System]:
    """The systems every poisoning run compares; the first is the baseline. Add a system here
    (one line) or pass it in ``bench_poisonedrag(systems=...)``. Each is a pipeline spec of
    ``fetch_k`` (default 3 × ``top_k``) retrieved passages; the planted-evidence defences are
    :func:`defence_systems`.

    Consensus systems: :class:`~credrank.stages.consensus.AnswerConsensus` over the fetched
    pool with its a-priori defaults (extractive reader per passage, ``τ = 0.5``, floor 0.1,
    neutral when contested; no development split exists for 100 targets, so nothing is
    tuned), differing only in how copies are collapsed (:data:`CONSENSUS_COLLAPSE`)."""
    fetch_k = 3 * top_k if fetch_k is None else fetch_k
    systems = {BASELINE: baseline_system(top_k, fetch_k)}
    for name, (jaccard, cosine) in CONSENSUS_COLLAPSE.items():
        systems[name] = System.of_spec(
            search_spec(top_k, fetch_k, {"stage": "consensus", "jaccard": jaccard,
                                         "cosine": cosine}),
            params={"jaccard": jaccard, "cosine": cosine, "threshold": 0.5, "floor": 0.1},
            notes=("answer consensus over the fetched passages (offline extractive reader on "
                   "each passage), a-priori defaults τ = 0.5, floor 0.1, neutral when "
                   "contested; no provenance, so no prior weighs the votes",))
    systems.update(defence_systems(top_k, fetch_k))
    return systems


def poison_copies(evalset: EvalSet, index: InMemoryIndex, n_inject: int,
                  cosine: float = COPY_COSINE) -> dict[str, Any]:
    """How the near-duplicate test groups each target's first ``n_inject`` injected texts:
    the mean number of groups per target (``n_inject`` = no copies found, 1 = all one voice)
    and the number of joined pairs, by text (3-gram Jaccard ≥ 0.5) and by text or cosine ≥
    ``cosine`` (the bench's embeddings)."""
    labels = evalset.doc_labels
    texts = {d.id: d.text for d in evalset.documents}
    row = {str(d): i for i, d in enumerate(index.doc_ids)}
    targets: dict[str, list[str]] = {}
    for d, lab in labels.items():
        if lab.get("poison") and lab["index"] < n_inject and d in row:
            targets.setdefault(str(lab["target"]), []).append(d)
    out: dict[str, Any] = {"targets": len(targets), "texts_per_target": n_inject}
    for label, kw in (("text", {}), (f"text_or_cosine_{cosine:g}", {"cosine": cosine})):
        groups, pairs, joined = [], 0, 0
        for docs in targets.values():
            docs = sorted(docs, key=lambda d: labels[d]["index"])
            g = duplicate_groups([texts[d] for d in docs], index.vectors[[row[d] for d in docs]],
                                 **kw)
            groups.append(len(set(g.tolist())))
            n = len(docs)
            pairs += n * (n - 1) // 2
            joined += sum(int(g[i] == g[j]) for i in range(n) for j in range(i + 1, n))
        out[label] = {"mean_groups_per_target": float(np.mean(groups)) if groups else None,
                      "targets_all_one_group": sum(1 for x in groups if x == 1),
                      "pairs": pairs, "pairs_joined": joined}
    return out


def attack_measures(top_k: int) -> list[str]:
    """The measure columns for a top-``top_k`` run."""
    names = ["attack-success@1", f"attack-success@{top_k}", f"poisons@{top_k}",
             READER_ATTACK, READER_CORRECT]
    return list(dict.fromkeys(names))


def default_corpus(path: Path) -> Path:
    """The CrAM NQ file beside the PoisonedRAG folder: ``<path>/../../cram/...jsonl``."""
    return Path(path).parent.parent / "cram" / "cram_nq_1000_reconstructed.jsonl"


def _subset(prepared: Prepared, n: int) -> Prepared:
    """The prepared corpus with only the first ``n`` injected texts of each target."""
    labels = prepared.evalset.doc_labels
    index = prepared.index
    keep = np.array([not labels[d]["poison"] or labels[d]["index"] < n for d in index.doc_ids])
    sub = InMemoryIndex(list(index.doc_ids[keep]), index.vectors[keep],
                        {k: list(v[keep]) for k, v in index.meta.items()})
    return Prepared(prepared.evalset, sub, prepared.query_vectors)


def measure_systems(pools: Mapping[str, Candidates], systems: Mapping[str, System],
                    evalset: EvalSet, top_k: int
                    ) -> tuple[PerQuery, dict[str, dict[str, dict[str, float]]],
                               dict[str, dict[str, str]]]:
    """``(per_query, runs, reader answers)``: every system applied to every pool and scored
    with :func:`attack_measures` (see the module docstring)."""
    reader = ExtractiveReader()
    texts = {d.id: d.text for d in evalset.documents}
    questions = dict(evalset.queries)
    per_query: PerQuery = {}
    runs: dict[str, dict[str, dict[str, float]]] = {}
    answers: dict[str, dict[str, str]] = {}
    for name, system in systems.items():
        if not isinstance(system, System) or system.stage is None:
            raise ValueError(f"systems[{name!r}]: expected a System with a stage; got "
                             f"{system!r}")
        batches = {qid: system.stage(batch) for qid, batch in pools.items()}
        run = runs[name] = run_from_batches(batches)
        values: dict[str, dict[str, float]] = {m: {} for m in attack_measures(top_k)}
        answers[name] = {}
        for qid in pools:
            top = ranked_docs(run.get(qid, {}))[:top_k]
            bad = evalset.bad[qid]
            labels = evalset.query_labels[qid]
            hits = [d in bad for d in top]
            answer = reader.answer(questions[qid], [texts[d] for d in top])
            answers[name][qid] = answer
            values["attack-success@1"][qid] = float(any(hits[:1]))
            values[f"attack-success@{top_k}"][qid] = float(any(hits))
            values[f"poisons@{top_k}"][qid] = float(sum(hits))
            values[READER_ATTACK][qid] = float(contains_answer(answer, [labels["incorrect"]]))
            values[READER_CORRECT][qid] = float(contains_answer(answer, [labels["correct"]]))
        per_query[name] = values
    return per_query, runs, answers


def _experiment(pools: Mapping[str, Candidates], systems: Mapping[str, System],
                evalset: EvalSet, top_k: int, seed: int, **table: Any
                ) -> tuple[ExperimentResult, dict[str, dict[str, str]]]:
    per_query, runs, answers = measure_systems(pools, systems, evalset, top_k)
    columns = [Column.of(m) for m in attack_measures(top_k)]
    result = compare_systems(per_query, systems, columns, runs=runs, seed=seed,
                             n_resamples=N_RESAMPLES, **table)
    return result, answers


def wilson_table(per_query: PerQuery) -> dict[str, dict[str, list[float]]]:
    """``{system: {measure: [low, high]}}``: Wilson intervals of every 0/1 measure."""
    out: dict[str, dict[str, list[float]]] = {}
    for name, measures in per_query.items():
        out[name] = {}
        for measure, values in measures.items():
            if values and set(values.values()) <= {0.0, 1.0}:
                out[name][measure] = list(wilson(int(sum(values.values())), len(values)))
    return out


def _in_pool(pools: Mapping[str, Candidates], evalset: EvalSet) -> float:
    """Share of target questions with at least one own poison among the fetched pool."""
    hits = [any(str(d) in evalset.bad[q] for d in batch.doc_ids) for q, batch in pools.items()]
    return sum(hits) / len(hits) if hits else 0.0


def bench_poisonedrag(path: Path | str, corpus_path: Path | str, embedder: Embedder, *,
                      top_k: int = 5, fetch_k: int = 15, n_inject: int = 5, seed: int = 0,
                      prefix: str = "none", systems: Mapping[str, System] | None = None,
                      sweep: Sequence[int] = SWEEP_INJECT) -> BenchResult:
    """PoisonedRAG targets (``path``, e.g. ``poisonedrag/nq.json``) injected into the clean
    passages of a CrAM NQ file (``corpus_path``).

    ``systems`` are added after :func:`poisoning_systems` (whose first, similarity only, is
    the baseline of every table); a name clash raises. Tables: ``results`` (the systems at
    ``n_inject``) and ``inject_sweep`` (every system at each ``n_inject`` of ``sweep``; Δ
    there is against similarity only at the first sweep value). ``details`` hold the reader
    answers of the main table and the share of targets with a poison in the fetched pool.
    """
    top_k = check_int("top_k", top_k, 1)
    fetch_k = check_int("fetch_k", fetch_k, top_k)
    n_inject = check_int("n_inject", n_inject, 0)
    sweep = [check_int("sweep value", n, 0) for n in sweep]
    chosen = poisoning_systems(top_k, fetch_k)
    for name, system in (systems or {}).items():
        if name in chosen:
            raise ValueError(f"systems: {name!r} is already a default system; expected a new "
                             f"name (defaults: {list(chosen)})")
        chosen[name] = system
    targets: PoisonTargets = read_poisonedrag(path)
    if not targets.targets:
        raise ValueError(f"{path}: the PoisonedRAG reader found 0 usable target records "
                         f"({'; '.join(targets.notes)}); expected a JSON object of records "
                         "with question, correct answer, incorrect answer and adv_texts")
    cram = read_cram_nq(corpus_path)
    n_max = max([n_inject, *sweep])
    evalset = poisoned_corpus(targets, cram, n_max, prefix=prefix)
    n_clean = sum(1 for lab in evalset.doc_labels.values() if not lab["poison"])
    if n_clean == 0:
        raise ValueError(f"{corpus_path}: the cram-nq reader found no clean passage "
                         f"({cram.notes[0] if cram.notes else 'no notes'}); expected a CrAM "
                         "NQ JSONL file (--corpus)")
    prepared = prepare(evalset, embedder)

    def pools_at(n: int) -> dict[str, Candidates]:
        return pools_for(_subset(prepared, n) if n < n_max else prepared, fetch_k)

    main_pools = pools_at(n_inject)
    main, answers = _experiment(
        main_pools, chosen, evalset, top_k, seed, key="results",
        title=f"Results (n_inject = {n_inject})",
        notes=[f"Every system reranks the same {fetch_k} retrieved documents per target "
               f"question; the baseline is {BASELINE}. Intervals: 95% percentile bootstrap "
               f"over the {len(targets)} target questions, {N_RESAMPLES:,} resamples, "
               f"seed {seed}; Δ paired with the baseline. A share of 0 or 1 has a zero-width "
               "bootstrap interval; details.wilson_95 holds the Wilson 95% interval of every "
               "0/1 measure."])
    sweep_systems: dict[str, System] = {}
    sweep_per_query: PerQuery = {}
    sweep_runs: dict[str, dict[str, dict[str, float]]] = {}
    in_pool: dict[str, float] = {}
    for n in sweep:
        pools = main_pools if n == n_inject else pools_at(n)
        in_pool[str(n)] = _in_pool(pools, evalset)
        per_query, runs, _ = measure_systems(pools, chosen, evalset, top_k)
        for name, system in chosen.items():
            row = f"{name} · n_inject={n}"
            sweep_systems[row] = replace(system, params={**system.params, "n_inject": n})
            sweep_per_query[row], sweep_runs[row] = per_query[name], runs[name]
    result = BenchResult("poisonedrag", str(path),
                         {**bench_settings(embedder, top_k, fetch_k, seed), "n_inject": n_inject,
                          "prefix": prefix,
                          "sweep_n_inject": list(sweep), "corpus": str(corpus_path),
                          "reader": "ExtractiveReader (offline, extractive)",
                          "intervals": f"percentile bootstrap over questions, "
                                       f"{N_RESAMPLES} resamples"},
                         {**evalset.summary(), "clean_passages": n_clean,
                          "targets_also_cram_questions": same_questions(targets, cram)},
                         [*_notes(evalset, targets, cram, corpus_path, n_clean, n_inject, top_k),
                          *filter(None, [ragdefender_note()])],
                         qrels=evalset.qrels)
    result.add_experiment(main)
    if sweep:
        result.add_experiment(compare_systems(
            sweep_per_query, sweep_systems, [Column.of(m) for m in attack_measures(top_k)],
            key="inject_sweep", title="Sweep: injected texts per target", kind="sweep",
            parameter="n_inject", runs=sweep_runs, seed=seed, n_resamples=N_RESAMPLES,
            notes=[f"Each system with the first n_inject ∈ {list(sweep)} adversarial texts of "
                   "each target injected (the same embeddings, the other texts left out of "
                   f"the index). Δ is against {BASELINE} · n_inject={sweep[0]}. Intervals as "
                   "in the results table."]))
    result.details["poison_in_fetched_pool"] = in_pool
    copies = result.details["poison_copies"] = poison_copies(evalset, prepared.index, n_inject)
    result.notes.append(
        f"copies: the near-duplicate test groups each target's {n_inject} injected texts into "
        f"{_fmt_mean(copies['text']['mean_groups_per_target'])} groups on average by text "
        f"(3-gram Jaccard ≥ {JACCARD}; {copies['text']['pairs_joined']} of "
        f"{copies['text']['pairs']} pairs joined) and "
        f"{_fmt_mean(copies[f'text_or_cosine_{COPY_COSINE:g}']['mean_groups_per_target'])} by "
        f"text or cosine ≥ {COPY_COSINE:g} "
        f"({copies[f'text_or_cosine_{COPY_COSINE:g}']['pairs_joined']} pairs joined)")
    result.details["wilson_95"] = wilson_table(main.per_query)
    result.details["reader_answers"] = answers
    return result


def _fmt_mean(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _notes(evalset: EvalSet, targets: PoisonTargets, cram: EvalSet, corpus_path: Path | str,
           n_clean: int, n_inject: int, top_k: int) -> list[str]:
    with_answer = sum(1 for q in evalset.query_labels.values() if q["clean_answer_passages"])
    n = len(targets)
    return [
        f"corpus: {n_clean} clean passages of real Wikipedia text from CrAM NQ "
        f"({Path(corpus_path).name}: {len(cram.documents)} passages, its "
        f"{sum(len(b) for b in cram.bad.values())} GPT fakes removed, exact duplicate texts "
        "dropped) plus the injected adversarial texts",
        f"injection: the first {n_inject} adversarial texts (file order) of each of the {n} "
        "PoisonedRAG NQ target questions, as documents 'poison:<qid>:<i>'; a poison is bad "
        "only for its own target (another target's poison in the top k counts as neither "
        "attack nor relevant)",
        f"reader: credrank's offline ExtractiveReader over the system's top {top_k} passages "
        "(rank order); attack success = its answer contains the incorrect answer, correct = "
        "it contains the correct answer (SQuAD normalisation, whole tokens; a long extracted "
        "span can contain both). It is not an LLM: PoisonedRAG's own numbers use LLM readers",
        f"limits: {n} target questions only (intervals are wide); the clean corpus was not "
        f"built for these questions: {with_answer} of {n} target questions have at least one "
        "clean passage containing the correct answer (token match: short or numeric answers "
        f"can match unrelated passages), and {same_questions(targets, cram)} of {n} are also "
        "CrAM NQ questions (their own retrieved passages are in the corpus)",
        "the poisons are written to be retrieved, so similarity-only retrieval is the "
        "attacker's target; no document carries provenance, so credibility priors from source "
        "types do not apply here without assigning types",
        *evalset.notes,
    ]
