"""``credrank bench NAME --path P``: baseline vs credibility-aware systems on real data.

Every set is evaluated as one corpus: the documents of all its questions (per-question pools
included) are embedded once with MiniLM, each query retrieves its ``fetch_k`` nearest documents
from the whole corpus (exact cosine, :class:`~credrank.index.memory.InMemoryIndex`), and every
system reranks that same pool and keeps ``top_k``. The baseline is similarity only over the same
embedder and pool.

Where documents carry no provenance (NewsPolluted, CrAM NQ, EvoTemp, RAMDocs) a source type is
never derived from the label. Those sets are run with (a) estimated credibility where the data
ships a scorer (CrAM's GPT truthfulness score) and (b) priors *assigned with a stated error
rate* x — a document gets the low-credibility type when it is labelled bad, the high one
otherwise, and then x% of all documents get the other type — so the curves show how much a
prior helps as it becomes wrong. x = 0 is a label-derived upper bound, not a result.

newspolluted and cram-nq also get the table ``label_free``
(:mod:`credrank_bench.experiments.label_free`): a learned credibility model and answer consensus
fitted on a development half of the questions and their labels (so not label-free for that
set) and reported on the other half only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.core.pipeline import FunctionStage, Pipeline, Stage
from credrank.core.progress import OnProgress, counted, one_step, step
from credrank.demo_corpus import demo_dir
from credrank.documents.schema import DATE_FIELDS, Document
from credrank.evaluate.answers import squad_normalize
from credrank.evaluate.experiment import ExperimentResult, System, run_experiment
from credrank.evaluate.metrics import ranked_docs
from credrank.evaluate.result import AbsentSignal, BenchResult
from credrank.generate.llm import ExtractiveReader, Generator
from credrank.index.embed import Embedder
from credrank.index.memory import InMemoryIndex
from credrank.pipeline.spec import PipelineSpec
from credrank.provenance import SourceTyper
from credrank.select.topk import TopK
from credrank.signals.prior import CURRENT, PriorTable, disperse
from credrank.stages.prior import SourcePrior
from credrank_bench.datasets import EvalSet, load_dataset, read_demo
from credrank_bench.experiments.defences import defence_systems, ragdefender_note
from credrank_bench.experiments.evotemp import freshness_experiment, generator_experiment
from credrank_bench.experiments.label_free import label_free_experiment
from credrank_bench.experiments.machine_text_rows import MachineTextOption, machine_text_systems

POOLED_MEASURES = ["harmful@5", "harmful@1", "nDCG@5", "RR"]
CORPUS_MEASURES = ["harmful@5", "nDCG@10", "P@5", "RR"]
NOISE_RATES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
DISPERSIONS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)
BASELINE = "similarity only"
#: CrAM's per-passage GPT truthfulness score, and the system that uses it as a prior
GPT_TRUTH = "gpt_truthfulness_0_10"
GPT_SYSTEM = "GPT truthfulness as prior (CrAM's scorer)"


#: the progress label of a table's reranking step (``on_progress``)
_SYSTEMS_BY_QUERIES = "{}: systems × queries"

#: a further measurement over a corpus bench's pools (see :func:`bench_corpus`)
Section = Callable[[BenchResult, dict[str, Candidates], EvalSet, int, list[str]], None]


# -- embeddings ---------------------------------------------------------------------------------

def doc_text(doc: Document) -> str:
    """The text a document is embedded from: title and text."""
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


@dataclass
class Prepared:
    """An evaluation set with its embedded corpus and query vectors."""

    evalset: EvalSet
    index: InMemoryIndex
    query_vectors: dict[str, np.ndarray]  # by query id


def prepare(evalset: EvalSet, embedder: Embedder, *,
            typer: SourceTyper | None = None, on_progress: OnProgress | None = None
            ) -> Prepared:
    """Embed documents and queries (meta: url, title, text and the five dates); source types
    from the URL when ``typer`` is given. ``on_progress``: one step (the embedder is called
    once for the documents, once for the queries).

    Pass a :class:`~credrank.index.embed.CachedEmbedder` to reuse vectors across runs."""
    docs = evalset.documents
    qtexts = [text for _, text in evalset.queries]
    with one_step(on_progress, f"embedding {len(docs)} documents and {len(qtexts)} queries"):
        vectors = embedder.embed([doc_text(d) for d in docs])
        qvectors = embedder.embed(qtexts)
    meta: dict[str, list[Any]] = {"url": [d.url for d in docs], "title": [d.title for d in docs],
                                  "text": [d.text for d in docs]}
    meta.update({name: [getattr(d, name) for d in docs] for name in DATE_FIELDS})
    if typer is not None:
        provs = [typer.classify(d.url) for d in docs]
        meta.update(source_type=[p.source_type for p in provs], host=[p.host for p in provs],
                    domain_score=[p.domain_score for p in provs])
    index = InMemoryIndex([d.id for d in docs], vectors, meta)
    qv = {qid: qvectors[i] for i, (qid, _) in enumerate(evalset.queries)}
    return Prepared(evalset, index, qv)


def pools_for(prepared: Prepared, fetch_k: int, on_progress: OnProgress | None = None,
              label: str = "candidate pools (queries)") -> dict[str, Candidates]:
    """``qid -> batch`` of the ``fetch_k`` nearest documents, retrieved once per query
    (``on_progress``: the step ``label``, counted in queries)."""
    return {qid: prepared.index.search(text, prepared.query_vectors[qid], fetch_k)
            for qid, text in counted(prepared.evalset.queries, on_progress, label)}


# -- systems ------------------------------------------------------------------------------------

def search_spec(top_k: int, fetch_k: int, *stages: Mapping[str, Any] | str) -> PipelineSpec:
    """The ``credrank search`` pipeline of a bench system: dense retrieval of the bench's
    ``fetch_k`` pool, then ``stages`` (``combine`` multiply and the ``topk`` cut implied)."""
    return PipelineSpec.of(*stages, top_k=top_k, fetch_k=fetch_k)


def baseline_system(top_k: int, fetch_k: int) -> System:
    """The baseline as a spec: cosine only, top ``top_k``."""
    return System.of_spec(search_spec(top_k, fetch_k))


def prior_system(priors: str, top_k: int, fetch_k: int, *signals: Mapping[str, Any],
                 use_domain_scores: bool = False) -> System:
    """``sim × λ(source_type)`` with a prior preset (then ``signals``), top ``top_k``, as a
    spec (:func:`with_priors`)."""
    prior = {"stage": "prior", "priors": priors, "use_domain_scores": use_domain_scores}
    return System.of_spec(search_spec(top_k, fetch_k, prior, *signals))


def with_priors(priors: PriorTable, top_k: int, *extra: Stage,
                use_domain_scores: bool = False) -> Stage:
    """``sim × λ(source_type)`` (then ``extra`` stages), top ``top_k``."""
    return Pipeline([SourcePrior(priors, use_domain_scores=use_domain_scores), *extra,
                     Combine("multiply"), TopK(top_k)])


def assigned_type_stage(types: dict[str, str]) -> Stage:
    """Attach experimenter-assigned source types (by doc id) as the ``source_type`` column."""
    def attach(batch: Candidates) -> Candidates:
        return batch.with_meta("source_type", [types[d] for d in batch.doc_ids])
    return FunctionStage(attach, name="assigned_types")


def assigned_prior_system(types: dict[str, str], top_k: int, fetch_k: int,
                          *stages: Mapping[str, Any], before: Sequence[Stage] = (),
                          params: Mapping[str, Any] | None = None) -> System:
    """The spec ``prior`` (current preset) then ``stages`` over source types assigned by the
    experimenter (:func:`noisy_types`): the assignment is the bench's ``before`` stage (after
    the other ``before`` stages), made from the evaluation labels, so the system reads them."""
    prior = {"stage": "prior", "priors": "current"}
    return System.of_spec(search_spec(top_k, fetch_k, prior, *stages),
                          before=[*before, assigned_type_stage(types)], reads_labels=True,
                          params=params)


def noisy_types(evalset: EvalSet, rate: float, rng: np.random.Generator,
                high: str = "established_news", low: str = "ai_generated") -> dict[str, str]:
    """Type ``low`` for documents labelled bad for any question, ``high`` otherwise; then a
    random ``rate`` share of all documents (exactly round(rate·N)) gets the other type.

    The types are derived from the evaluation labels: a system using them reads labels."""
    bad = set().union(*evalset.bad.values()) if evalset.bad else set()
    ids = [d.id for d in evalset.documents]
    types = {d: (low if d in bad else high) for d in ids}
    flip = rng.choice(len(ids), size=round(rate * len(ids)), replace=False)
    for i in flip:
        types[ids[i]] = high if types[ids[i]] == low else low
    return types


def signal_count(evalset: EvalSet, label: str) -> int:
    """How many documents carry a non-null ``doc_labels[doc][label]``."""
    return sum(1 for d in evalset.documents
               if evalset.doc_labels.get(d.id, {}).get(label) is not None)


def gpt_prior_system(evalset: EvalSet, top_k: int, fetch_k: int) -> System:
    """CrAM's per-passage GPT truthfulness score as a prior (:func:`label_prior_stage`, the
    bench's ``before`` stage: a model's score shipped with the data, not the evaluation
    label), then the similarity-only spec."""
    return System.of_spec(
        search_spec(top_k, fetch_k),
        before=[label_prior_stage(evalset, GPT_TRUTH, 10.0, 0.05, "gpt_truth")],
        reads_labels=False,
        notes=("prior = GPT truthfulness / 10 (floor 0.05): a language model's score shipped "
               "with the data, not the is_misinformation label",))


def label_prior_stage(evalset: EvalSet, label: str, scale: float, floor: float,
                      name: str) -> Stage:
    """A prior from a per-document score in ``doc_labels`` (e.g. CrAM's GPT truthfulness):
    ``clip(value / scale, floor, 1)``, and 0.5 for a document without the score."""
    values = {}
    for d in evalset.documents:
        raw = evalset.doc_labels.get(d.id, {}).get(label)
        values[d.id] = min(1.0, max(floor, float(raw) / scale)) if raw is not None else 0.5

    def attach(batch: Candidates) -> Candidates:
        return batch.with_factor(name, np.array([values[d] for d in batch.doc_ids]), 0.0, 1.0)
    return FunctionStage(attach, name=name)


# -- runners ------------------------------------------------------------------------------------

def _sweep_dispersion(pools: dict[str, Candidates], evalset: EvalSet, top_k: int,
                      measures: list[str], fetch_k: int,
                      on_progress: OnProgress | None = None, seed: int = 0
                      ) -> ExperimentResult:
    """The seed's sensitivity to prior dispersion: ``disperse(current, γ)`` over a γ grid (the
    γ tables are made here, not presets: those systems are stages, not specs)."""
    systems = {BASELINE: baseline_system(top_k, fetch_k)}
    for gamma in DISPERSIONS:
        table = PriorTable(f"γ={gamma:g}", disperse(CURRENT, gamma))
        systems[f"γ={gamma:g}"] = System(with_priors(table, top_k), reads_labels=False,
                                         params={"gamma": gamma})
    return run_experiment(
        pools, systems, evalset.qrels, measures, bad=evalset.bad, n_resamples=2000, seed=seed,
        key="dispersion", title="Sweep: dispersion", kind="sweep", parameter="gamma",
        on_progress=step(on_progress, _SYSTEMS_BY_QUERIES.format("Sweep: dispersion")),
        notes=["Prior dispersion γ: the current preset's priors spread in logit space around "
               "their mean (γ = 0: all equal, no reweighting; γ = 1: the current preset; "
               "presets: compressed 0.5, current 1.0, aggressive 1.5); source types from the "
               "URL. Intervals: 2,000 bootstrap resamples."])


def _sweep_noise(pools: dict[str, Candidates], evalset: EvalSet, top_k: int,
                 measures: list[str], seed: int, fetch_k: int,
                 on_progress: OnProgress | None = None) -> ExperimentResult:
    """Priors assigned from the labels with a share x of documents given the wrong type."""
    rng = np.random.default_rng(seed)
    systems = {BASELINE: baseline_system(top_k, fetch_k)}
    for rate in NOISE_RATES:
        types = noisy_types(evalset, rate, rng)
        systems[f"x={rate:.0%}"] = assigned_prior_system(
            types, top_k, fetch_k, params={"wrong_type_share": rate})
    return run_experiment(
        pools, systems, evalset.qrels, measures, bad=evalset.bad, n_resamples=2000, seed=seed,
        key="noisy_priors", title="Sweep: noisy priors", kind="sweep",
        parameter="wrong_type_share",
        on_progress=step(on_progress, _SYSTEMS_BY_QUERIES.format("Sweep: noisy priors")),
        notes=["Priors: current preset; documents labelled bad → ai_generated (0.30), others "
               "→ established_news (0.80), then a share x of all documents swapped. The types "
               "come from the evaluation labels (x = 0 is a circular upper bound). Intervals: "
               "2,000 bootstrap resamples."])


def require_usable(evalset: EvalSet, path: Path | str) -> EvalSet:
    """``evalset``, or a :class:`ValueError` naming ``path`` and what the reader found when
    there is nothing to evaluate: no documents, no queries, or (pooled sets) no query with a
    non-empty pool. A wrong or empty file would otherwise give a full report on 0 documents."""
    n_docs, n_queries = len(evalset.documents), len(evalset.queries)
    pooled = (sum(1 for qid, _ in evalset.queries if evalset.pools.get(qid))
              if evalset.pools is not None else n_queries)
    if n_docs and n_queries and pooled:
        return evalset
    found = f"{n_docs} documents and {n_queries} queries"
    if evalset.pools is not None and n_queries:
        found += f" ({pooled} with a non-empty candidate pool)"
    # the reader's first note says what it read and skipped (its other notes are rules)
    said = evalset.notes[0].split(";")[0][:200] if evalset.notes else ""
    raise ValueError(f"{path}: the {evalset.name} reader found {found}"
                     + (f" ({said})" if said else "")
                     + "; expected an evaluation set with queries and documents: is this the "
                     f"right file for {evalset.name}?")


def bench_pooled(name: str, path: Path, embedder: Embedder, *, top_k: int = 5,
                 fetch_k: int = 15, seed: int = 0, generator: Generator | None = None,
                 generator_name: str = "extractive", on_progress: OnProgress | None = None,
                 machine_text: MachineTextOption | None = None) -> BenchResult:
    """newspolluted / cram-nq / evotemp: one corpus of all pooled documents.

    ``machine_text`` (``--machine-text``): every pooled passage is scored with the
    machine-text statistic first and the rows of
    :mod:`credrank_bench.experiments.machine_text_rows` join the main table and (cram-nq) the
    clean-pool table.

    EvoTemp adds the tables ``freshness`` and ``generator_in_the_loop``
    (:mod:`credrank_bench.experiments.evotemp`; ``generator`` defaults to the offline extractive
    reader).

    A system whose signal the data lacks for every document is not run: the result lists it
    in ``absent_signals`` and ``notes``. ``on_progress(done, total, label)``
    (:mod:`credrank.core.progress`): embedding, pools, then systems × queries per table."""
    evalset = require_usable(load_dataset(name, path), path)
    prepared = prepare(evalset, embedder, on_progress=on_progress)
    machine_details = (machine_text.apply(prepared.index, on_progress=on_progress)
                       if machine_text is not None else None)
    pools = pools_for(prepared, fetch_k, on_progress)
    measures = POOLED_MEASURES
    systems = {BASELINE: baseline_system(top_k, fetch_k)}
    rng = np.random.default_rng(seed)
    for rate in (0.0, 0.2):
        types = noisy_types(evalset, rate, rng)
        label = ("prior from labels, x=0% (upper bound, circular)" if rate == 0 else
                 f"prior with {rate:.0%} wrong types")
        systems[label] = assigned_prior_system(types, top_k, fetch_k,
                                               params={"wrong_type_share": rate})
    absent: list[AbsentSignal] = []
    notes = list(evalset.notes)
    if name in ("newspolluted", "cram-nq", "evotemp"):  # the label-free defences
        systems.update(defence_systems(top_k, fetch_k))
        if (why := ragdefender_note()) is not None:
            notes.append(why)
    if machine_text is not None and machine_details is not None:
        systems.update(machine_text_systems(top_k, fetch_k))
        notes.append(machine_text.note(machine_details))
    if name == "cram-nq":
        n_docs = len(evalset.documents)
        have = signal_count(evalset, GPT_TRUTH)
        if have == 0:
            absent.append(AbsentSignal(GPT_TRUTH, GPT_SYSTEM, n_docs,
                                       f"{GPT_TRUTH} is null for all {n_docs} documents"))
            notes.append(f"absent signal: {GPT_TRUTH} is null for every document, so the "
                         f"system '{GPT_SYSTEM}' was not run")
        else:
            if have < n_docs:
                notes.append(f"{GPT_TRUTH} is null for {n_docs - have} of {n_docs} documents; "
                             "they get the neutral prior 0.5")
            # a model's score shipped with the data, not the evaluation label: see docs/json.md
            systems[GPT_SYSTEM] = gpt_prior_system(evalset, top_k, fetch_k)
    main = run_experiment(pools, systems, evalset.qrels, measures, bad=evalset.bad,
                          notes=_results_notes(), seed=seed,
                          on_progress=step(on_progress, _SYSTEMS_BY_QUERIES.format("Results")))
    result = BenchResult(name, str(path), bench_settings(embedder, top_k, fetch_k, seed),
                         evalset.summary(), notes, absent_signals=absent, qrels=evalset.qrels)
    result.add_experiment(main)
    if machine_details is not None:
        result.details["machine_text"] = machine_details
    if name == "cram-nq":
        result.add_experiment(clean_pool_experiment(
            prepared, fetch_k, top_k, measures, seed, on_progress=on_progress,
            extra=machine_text_systems(top_k, fetch_k) if machine_text is not None else None))
    if name in ("newspolluted", "cram-nq"):
        result.add_experiment(_sweep_noise(pools, evalset, top_k, measures, seed, fetch_k,
                                           on_progress))
        with one_step(on_progress, "Label-free systems (fit and evaluate)"):
            section, details = label_free_experiment(
                evalset, prepared.index, prepared.query_vectors, embedder, top_k=top_k,
                fetch_k=fetch_k, seed=seed, measures=measures,
                whole_corpus=main.per_query[BASELINE]["harmful@1"])
        if section is not None:
            result.add_experiment(section)
        result.details["label_free"] = details
    if name == "evotemp":
        with one_step(on_progress, "Freshness"):
            result.add_experiment(freshness_experiment(evalset, pools, top_k, measures, seed,
                                                       fetch_k))
        with one_step(on_progress, "Generator in the loop"):
            section, details = generator_experiment(
                evalset, prepared.index, prepared.query_vectors,
                generator or ExtractiveReader(),
                generator_name if generator is not None else "extractive", top_k, seed)
        result.add_experiment(section)
        result.details["generator_in_the_loop"] = details
    return result


def without_bad(prepared: Prepared) -> Prepared:
    """``prepared`` with every document some question labels bad removed from its corpus
    (vectors and meta columns kept for the rest; the query vectors unchanged): the corpus of
    the clean-pool tables, where nothing was planted."""
    evalset = prepared.evalset
    bad = set().union(*evalset.bad.values()) if evalset.bad else set()
    index = prepared.index
    keep = np.array([str(d) not in bad for d in index.doc_ids], dtype=bool)
    clean = InMemoryIndex(list(index.doc_ids[keep]), index.vectors[keep],
                          {k: list(np.asarray(v, dtype=object)[keep])
                           for k, v in index.meta.items()})
    return Prepared(evalset, clean, prepared.query_vectors)


def clean_pool_experiment(prepared: Prepared, fetch_k: int, top_k: int,
                          measures: Sequence[str], seed: int, *,
                          on_progress: OnProgress | None = None,
                          extra: Mapping[str, System] | None = None) -> ExperimentResult:
    """The table ``clean_pools``: the planted-evidence defences (and the ``extra`` rows: the
    machine-text ones with ``--machine-text``) on the corpus with every bad document removed
    (CrAM: the fakes), each question retrieving its ``fetch_k`` nearest real passages: what
    the defence costs when nothing was planted."""
    evalset = prepared.evalset
    bad = set().union(*evalset.bad.values()) if evalset.bad else set()
    clean = without_bad(prepared)
    pools = pools_for(clean, fetch_k, on_progress, "clean pools (queries)")
    systems = {BASELINE: baseline_system(top_k, fetch_k),
               **defence_systems(top_k, fetch_k), **(extra or {})}
    title = "Cost on clean pools: every fake removed from the corpus"
    return run_experiment(pools, systems, evalset.qrels, list(measures), bad=evalset.bad,
                          on_progress=step(on_progress, _SYSTEMS_BY_QUERIES.format(title)),
                          key="clean_pools",
                          title=title, seed=seed,
                          notes=[f"{len(clean.index)} real passages ({len(bad)} fakes "
                                 "removed); "
                                 f"each question retrieves its {fetch_k} nearest; nothing is "
                                 "planted, so any loss of nDCG is the defence's cost"])


def answer_coverage(evalset: EvalSet, k: int
                    ) -> Callable[[dict[str, dict[str, float]]], dict[str, float]]:
    """Gold-answer coverage@k: the share of a question's gold answers supported by a
    ``correct`` document of that question in the top k (answers compared after SQuAD-style
    normalisation; questions without gold answers are left out)."""
    gold = {qid: {squad_normalize(a) for a in lab.get("gold_answers", [])}
            for qid, lab in evalset.query_labels.items()}

    def coverage(run: dict[str, dict[str, float]]) -> dict[str, float]:
        out = {}
        for qid, answers in gold.items():
            if not answers:
                continue
            top = ranked_docs(run.get(qid, {}))[:k]
            covered = {squad_normalize(evalset.doc_labels[d]["answer"]) for d in top
                       if evalset.doc_labels.get(d, {}).get("qid") == qid
                       and evalset.doc_labels[d].get("type") == "correct"}
            out[qid] = len(covered & answers) / len(answers)
        return out
    return coverage


def bench_ramdocs(path: Path, embedder: Embedder, *, top_k: int = 5, fetch_k: int = 15,
                  seed: int = 0, on_progress: OnProgress | None = None) -> BenchResult:
    """RAMDocs: misinformation@5 (= harmful@5, bad = misinfo documents) and gold-answer
    coverage@5 for similarity only, credibility-aware, MMR and the coverage optimum. Intents for
    the coverage optimum come from clustering the candidate embeddings (no labels are used).

    Every system is a spec; the bench's ``before`` stages are the types assigned with a 20%
    error rate (from the labels); eligibility (``cos ≥ 0.75·max``, no label) is the selectors'
    ``min_ratio``."""
    evalset = require_usable(load_dataset("ramdocs", path), path)
    prepared = prepare(evalset, embedder, on_progress=on_progress)
    pools = pools_for(prepared, fetch_k, on_progress)
    types = noisy_types(evalset, 0.2, np.random.default_rng(seed))
    mmr = {"stage": "mmr", "diversity": 0.5}
    eligible_mmr = {**mmr, "min_ratio": 0.75}
    coverage = {"stage": "coverage", "lambda_ilad": 0.3, "lambda_coverage": 0.5,
                "n_clusters": 3, "min_ratio": 0.75}
    systems = {
        BASELINE: baseline_system(top_k, fetch_k),
        "credibility-aware (prior, 20% wrong types)": assigned_prior_system(types, top_k,
                                                                            fetch_k),
        "MMR diversity=0.5 over the whole pool": System.of_spec(
            search_spec(top_k, fetch_k, mmr)),
        "eligible (cos ≥ 0.75·max) + MMR": System.of_spec(
            search_spec(top_k, fetch_k, eligible_mmr)),
        "credibility-aware + eligible + MMR": assigned_prior_system(
            types, top_k, fetch_k, eligible_mmr),
        "credibility-aware + eligible + coverage optimum (λ1=0.3, λ2=0.5, 3 clusters)":
            assigned_prior_system(types, top_k, fetch_k, coverage),
    }
    main = run_experiment(pools, systems, evalset.qrels, ["harmful@5", "nDCG@5", "RR"],
                          bad=evalset.bad,
                          custom={"coverage@5": answer_coverage(evalset, top_k)},
                          notes=_results_notes(), seed=seed,
                          on_progress=step(on_progress, _SYSTEMS_BY_QUERIES.format("Results")))
    result = BenchResult("ramdocs", str(path), bench_settings(embedder, top_k, fetch_k, seed),
                         evalset.summary(), list(evalset.notes), qrels=evalset.qrels)
    result.add_experiment(main)
    result.notes.append("harmful@5 here is misinformation@5 (bad = documents typed misinfo); "
                        "credibility-aware systems use priors assigned with a 20% error rate "
                        "(no provenance in RAMDocs)")
    return result


def bench_corpus(name: str, path: Path | None, embedder: Embedder, *, top_k: int = 10,
                 fetch_k: int = 30, seed: int = 0, tables: Sequence[Path] = (),
                 sections: Sequence[Section] = (), on_progress: OnProgress | None = None,
                 machine_text: MachineTextOption | None = None) -> BenchResult:
    """trec2019-hm (and the demo corpus): source types from the URL only.

    ``machine_text`` (``--machine-text``, trec2019-hm): the pooled pages are scored with the
    machine-text statistic first and its rows join the main table (its cost on human-written
    web pages).

    ``sections`` are further measurements over the same pools (``section(result, pools,
    evalset, top_k, measures)`` adds tables to ``result``): the experiments add theirs this
    way. ``on_progress(done, total, label)`` (:mod:`credrank.core.progress`): embedding,
    pools, systems × queries per table, then one step per section.
    """
    if name == "demo":
        evalset = read_demo()
        tables = [*tables, demo_dir() / "domains.csv"]
        measures = ["harmful@5", "nDCG@5", "P@5", "RR"]
        top_k, fetch_k = 5, 15
    else:
        evalset = require_usable(load_dataset(name, path), path or name)
        measures = CORPUS_MEASURES
    typer = SourceTyper(list(tables))
    prepared = prepare(evalset, embedder, typer=typer, on_progress=on_progress)
    machine_details = (machine_text.apply(prepared.index, on_progress=on_progress)
                       if machine_text is not None else None)
    pools = pools_for(prepared, fetch_k, on_progress)
    systems = {BASELINE: baseline_system(top_k, fetch_k)}
    for p in ("compressed", "current", "aggressive"):
        systems[f"{p} priors"] = prior_system(p, top_k, fetch_k)
    if tables and name != "demo":
        systems["current + domain table scores"] = prior_system(
            "current", top_k, fetch_k, use_domain_scores=True)
    for m, beta in ((3, 0.3), (5, 0.5)):
        systems[f"current + smoothing m={m} β={beta}"] = prior_system(
            "current", top_k, fetch_k, {"stage": "smoothing", "m": m, "beta": beta})
    if name == "trec2019-hm":  # the planted-evidence defence's cost on clean web pages
        systems.update(defence_systems(top_k, fetch_k, only=("planted", "outlier", "grada")))
    notes = list(evalset.notes)
    if machine_text is not None and machine_details is not None:
        systems.update(machine_text_systems(top_k, fetch_k))
        notes.append(machine_text.note(machine_details))
    main = run_experiment(pools, systems, evalset.qrels, measures, bad=evalset.bad,
                          notes=_results_notes(), seed=seed,
                          on_progress=step(on_progress, _SYSTEMS_BY_QUERIES.format("Results")))
    result = BenchResult(name, str(path or "credrank/data/demo"),
                         bench_settings(embedder, top_k, fetch_k, seed), evalset.summary(),
                         notes, qrels=evalset.qrels)
    result.add_experiment(main)
    if machine_details is not None:
        result.details["machine_text"] = machine_details
    types = list(prepared.index.meta.get("source_type", []))
    result.details["source_types"] = {t: types.count(t) for t in sorted(set(types))}
    result.add_experiment(_sweep_dispersion(pools, evalset, top_k, measures, fetch_k,
                                            on_progress, seed=seed))
    for i, section in enumerate(sections):
        with one_step(on_progress, f"further tables ({i + 1} of {len(sections)})"):
            section(result, pools, evalset, top_k, measures)
    return result


def _results_notes() -> list[str]:
    return [f"Every system reranks the same pools; the baseline is {BASELINE} (cosine over "
            "the same embedder). Intervals: 10,000 bootstrap resamples, seeded."]


def bench_settings(embedder: Embedder, top_k: int, fetch_k: int, seed: int) -> dict[str, Any]:
    return {"embedder": embedder.name, "top_k": top_k, "fetch_k": fetch_k, "seed": seed,
            "retrieval": "exact cosine over the whole corpus", "combine": "max(cos,0) × Π factors"}


#: what a bench's ``--path`` must be: a file, a folder, or either
PathKind = Literal["file", "folder", "file or folder"]


def check_path(name: str, path: Path | None, required: bool = True,
               kind: PathKind = "file", option: str = "--path"
               ) -> Path | None:
    """``option`` (``--path``, ``--corpus``) of bench ``name``: required unless ``required``
    is off, existing, and a file or a folder as ``kind`` says (a :class:`ValueError` saying
    what was expected and what came)."""
    if path is None:
        if required:
            raise ValueError(f"bench {name}: {option} is required (the data file or folder; "
                             "see docs/results.md)")
        return None
    p = Path(path)
    if not p.exists():
        raise ValueError(f"bench {name}: {option} {path} does not exist")
    if kind == "file" and p.is_dir():
        raise ValueError(f"bench {name}: {option} {path}: expected a file, got a folder")
    if kind == "folder" and not p.is_dir():
        raise ValueError(f"bench {name}: {option} {path}: expected a folder, got a file")
    return p
