"""Credibility-aware retrieval on TREC 2019 Health Misinformation (golden-gaze dev split).

Setting (fixed before any run): one corpus of all documents of the file, one query per topic
(its ``description``), MiniLM cosine over the whole corpus (in-memory numpy: the corpus has
156 pages), ``fetch_k`` candidates reranked, ``top_k`` kept. Each topic's candidate batch
carries the page vectors and the meta columns ``source_type`` and ``host`` from
:class:`~credrank.provenance.SourceTyper` on the URL (never from the text or a label).

Systems, side by side (:func:`run_trec_hm`):

* ``similarity`` — cosine only (the baseline);
* ``prior`` — seed 004's ``sim × λ(source_type)`` with the ``current`` preset;
* ``prior+agreement`` — ``sim × λ × agreement``: the answer-agreement factor
  (:class:`~credrank.signals.agreement.AnswerAgreement`, chapter 35.3) with a stance model
  fitted leave-one-topic-out (for topic ``t`` on the 14 other topics' labelled pages);
* ``agreement`` — ``sim × agreement`` with vote weights from similarity alone;
* ``learned credibility prior`` — ``sim × λ``, ``λ = floor + (1 − floor) · P(credible)`` from a
  page-credibility classifier on the page's text and URL
  (:mod:`credrank.credibility`) fitted on the NIST credibility labels of the
  pages judged for the *other* topics (every page judged for ``t`` is left out of ``t``'s
  training set); its feature groups and L2 strength are chosen per topic by nested LOTO on the
  held-out credibility AUC of the other topics, ``floor`` is fixed (0.3);
* ``learned credibility prior + agreement`` — ``sim × λ × agreement`` with vote weights
  ``w = λ · sim``; with nested-LOTO agreement settings they are chosen again for this system
  (inner topic ``u`` reranked with a credibility model that saw neither ``t`` nor ``u``);
* reference lines, **not results** (they read labels of the evaluated topic):
  ``oracle:nist-prior`` (NIST credibility as a prior, 1.0 vs 0.3), ``oracle:stance+prior``
  (the agreement stage fed the true stance labels; unjudged pages get ``p = 0.5``) and
  ``oracle:nist-prior+agreement`` (LOTO stance, NIST credibility as vote weight and prior).

The agreement hyper-parameters (consensus sharpness ``κ``, floor) are either fixed by the
caller or chosen per evaluated topic by **nested LOTO** (:func:`nested_loto_choice`): for
topic ``t`` every grid point is scored on the other 14 topics, each scored with a stance model
that saw neither ``t`` nor that topic, and the best point by ``mean nDCG@10 − mean harmful@5``
is applied to ``t``. The evaluated topic's labels are read only by the metrics and the
oracle lines.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.core.pipeline import FunctionStage, Stage
from credrank.core.validation import check_int
from credrank.credibility import (
    DEFAULT_CONFIGS,
    Config,
    CredibilityExample,
    CredibilityFeaturizer,
    CredibilityModel,
    credibility_report,
    examples_from_labels,
    loto_credibility_models,
    nested_config_choice,
)
from credrank.evaluate.experiment import System, compare_systems
from credrank.evaluate.metrics import Run, aggregate, evaluate, run_from_batches
from credrank.evaluate.tables import Column
from credrank.index.embed import Embedder, get_embedder
from credrank.provenance import SourceTyper
from credrank.select.topk import TopK
from credrank.signals.agreement import AnswerAgreement
from credrank.signals.stance_model import (
    StanceExample,
    StanceFeaturizer,
    StanceModel,
    loto_report,
    loto_splits,
)
from credrank.stages.credibility import LearnedCredibilityPrior
from credrank.stages.prior import SourcePrior
from credrank_bench.datasets import EvalSet, load_dataset

MEASURES = ("harmful@5", "nDCG@10", "P@5", "RR")
#: harmful@5 averaged over the topics whose correct stance is helpful or unhelpful only
DECIDED = "harmful@5 (decided topics)"
#: nested-LOTO grid of the agreement stage: (sharpness κ, floor, voters; 0 = every candidate)
DEFAULT_GRID: tuple[tuple[float, float, int], ...] = tuple(
    itertools.product((1.0, 2.0, 4.0, 8.0), (0.1, 0.5), (0, 10)))

Grid = Sequence[tuple[float, float, int]]
#: the NIST-credibility oracle prior (credible, not credible), as in the issue
NIST_PRIOR = (1.0, 0.3)
#: the learned credibility prior's floor (fixed a priori, the NIST reference's 0.3)
CREDIBILITY_FLOOR = 0.3
LEARNED = "learned credibility prior"
LEARNED_AGREEMENT = "learned credibility prior + agreement"


@dataclass(frozen=True)
class Corpus:
    """The embedded corpus and the per-topic facts the runs need."""

    evalset: EvalSet
    doc_ids: list[str]
    texts: list[str]
    urls: list[str | None]
    source_types: list[str]
    hosts: list[str | None]
    vectors: np.ndarray
    queries: dict[str, str]
    query_vectors: dict[str, np.ndarray]

    def examples(self) -> list[StanceExample]:
        """Every judged (topic, page, stance) pair, topic by topic in file order."""
        index = {d: i for i, d in enumerate(self.doc_ids)}
        out = []
        for qid, query in self.queries.items():
            for d, labels in self.evalset.doc_labels.items():
                j = labels["judgements"].get(qid)
                if j is not None:
                    out.append(StanceExample(qid, query, self.texts[index[d]],
                                             int(j["stance"]), d))
        return out


def build_corpus(evalset: EvalSet, embedder: Embedder,
                 typer: SourceTyper | None = None) -> Corpus:
    """Embed every page (MiniLM reads its first 256 word pieces) and every query; type every
    URL with ``typer`` (default :class:`SourceTyper`)."""
    typer = typer or SourceTyper()
    docs = evalset.documents
    provenance = [typer.classify(d.url) for d in docs]
    queries = dict(evalset.queries)
    qids = list(queries)
    qvec = embedder.embed([queries[q] for q in qids])
    return Corpus(
        evalset=evalset, doc_ids=[d.id for d in docs], texts=[d.text for d in docs],
        urls=[d.url for d in docs], source_types=[p.source_type for p in provenance],
        hosts=[p.host for p in provenance],
        vectors=np.asarray(embedder.embed([d.text for d in docs]), dtype=np.float32),
        queries=queries, query_vectors={q: qvec[i] for i, q in enumerate(qids)})


def retrieve(corpus: Corpus, qid: str, fetch_k: int) -> Candidates:
    """The ``fetch_k`` pages of highest cosine to the query (ties: corpus order), as a batch
    with vectors and the meta columns ``source_type``, ``host``, ``url``, ``text``."""
    qv = corpus.query_vectors[qid]
    sims = corpus.vectors.astype(np.float64) @ qv.astype(np.float64)
    order = np.argsort(-sims, kind="stable")[:fetch_k]
    meta = [{"source_type": corpus.source_types[i], "host": corpus.hosts[i],
             "url": corpus.urls[i], "text": corpus.texts[i]} for i in order]
    batch = Candidates.from_records(corpus.queries[qid], [corpus.doc_ids[i] for i in order],
                                    sims[order], meta, vectors=corpus.vectors[order])
    return Candidates(query=batch.query, doc_ids=batch.doc_ids,
                      retrieval_score=batch.retrieval_score, meta=batch.meta,
                      vectors=batch.vectors, query_vector=qv)


def model_stance(model: StanceModel) -> Callable[[str, Candidates], np.ndarray]:
    """A stance callable for :class:`AnswerAgreement` reading the ``text`` meta column."""

    def stance(query: str, batch: Candidates) -> np.ndarray:
        texts = batch.column("text")
        missing = [str(d) for d, t in zip(batch.doc_ids, texts, strict=True) if t is None]
        if missing:
            raise ValueError(f"stance model needs document text; {len(missing)} candidates have "
                             f"none (e.g. {missing[0]}): retrieve with with_text=True")
        return model.predict(query, [str(t) for t in texts])

    return stance


def label_stance(evalset: EvalSet, qid: str) -> Callable[[str, Candidates], np.ndarray]:
    """ORACLE stance: the page's stance label for topic ``qid``; 0.5 for unjudged pages."""

    def stance(query: str, batch: Candidates) -> np.ndarray:
        out = []
        for d in batch.doc_ids:
            j = evalset.doc_labels.get(str(d), {}).get("judgements", {}).get(qid)
            out.append(0.5 if j is None else float(j["stance"]))
        return np.array(out)

    return stance


def nist_prior(evalset: EvalSet, values: tuple[float, float] = NIST_PRIOR) -> Stage:
    """ORACLE prior: factor ``prior`` = ``values[0]`` for NIST-credible pages, else
    ``values[1]`` (also for a page whose credibility label is missing or mixed)."""

    def attach(batch: Candidates) -> Candidates:
        lam = [values[0] if evalset.doc_labels.get(str(d), {}).get("credibility") == 1
               else values[1] for d in batch.doc_ids]
        return batch.with_factor("prior", np.array(lam), low=0.0, high=1.0)

    return FunctionStage(attach, name="prior")


def _rank(batches: Mapping[str, Candidates], stages: Callable[[str], Stage],
          top_k: int) -> dict[str, Candidates]:
    return {q: (stages(q) >> Combine() >> TopK(top_k))(b) for q, b in batches.items()}


def _evaluate_run(evalset: EvalSet, run: Run, qids: Sequence[str]
                  ) -> dict[str, dict[str, float]]:
    """:data:`MEASURES` per query of ``run`` on the topics ``qids``."""
    qrels = {q: evalset.qrels[q] for q in qids}
    bad = {q: evalset.bad[q] for q in qids}
    return evaluate(qrels, run, list(MEASURES), bad=bad)


def _scores(evalset: EvalSet, ranked: Mapping[str, Candidates], qids: Sequence[str]
            ) -> dict[str, dict[str, float]]:
    return _evaluate_run(evalset, run_from_batches({q: ranked[q] for q in qids}), qids)


def _objective(values: Mapping[str, Mapping[str, float]]) -> float:
    means = aggregate(values)
    return means["nDCG@10"] - means["harmful@5"]


def fit_loto_models(examples: Sequence[StanceExample], featurizer: StanceFeaturizer,
                    l2: float, exclude: Sequence[str] = ()) -> dict[str, StanceModel]:
    """``{t: model fitted on every topic except t and those in exclude}``."""
    excluded = set(exclude)
    qids = [e.qid for e in examples if e.qid not in excluded]
    out = {}
    for held, train in loto_splits(qids):
        keep = set(train)
        out[held] = StanceModel(featurizer, l2=l2).fit([e for e in examples if e.qid in keep])
    return out


def nested_loto_choice(corpus: Corpus, batches: Mapping[str, Candidates],
                       examples: Sequence[StanceExample], featurizer: StanceFeaturizer,
                       l2: float, grid: Grid, top_k: int,
                       prior: str = "current",
                       prior_stage: Callable[[str, str], Stage] | None = None
                       ) -> dict[str, dict[str, Any]]:
    """Per outer topic ``t``: the grid point ``(κ, floor, voters)`` maximising
    ``mean nDCG@10 − mean harmful@5`` over the other topics, each inner topic ``u`` reranked
    with a stance model fitted on the topics other than ``t`` and ``u``. Ties: first grid
    point. Returns ``{t: {"sharpness", "floor", "voters", "inner_objective"}}``.

    The stage before the agreement is ``SourcePrior(prior)``, or ``prior_stage(t, u)`` when
    given (it must not read labels of ``t`` or ``u``)."""
    qids = list(corpus.queries)
    out: dict[str, dict[str, Any]] = {}
    for outer in qids:
        inner_models = fit_loto_models(examples, featurizer, l2, exclude=[outer])
        inner = [q for q in qids if q != outer]
        best: tuple[float, int] | None = None
        for gi, point in enumerate(grid):
            def stages(q: str, point: tuple[float, float, int] = point,
                       models: dict[str, StanceModel] = inner_models,
                       outer: str = outer) -> Stage:
                first = SourcePrior(prior) if prior_stage is None else prior_stage(outer, q)
                return first >> _agreement(model_stance(models[q]), "prior", point)
            ranked = _rank({q: batches[q] for q in inner}, stages, top_k)
            value = _objective(_scores(corpus.evalset, ranked, inner))
            if best is None or value > best[0] + 1e-12:
                best = (value, gi)
        assert best is not None
        kappa, floor, voters = grid[best[1]]
        out[outer] = {"sharpness": kappa, "floor": floor, "voters": voters,
                      "inner_objective": best[0]}
    return out


def fit_credibility(corpus: Corpus, featurizer: CredibilityFeaturizer,
                    configs: Sequence[Config] = DEFAULT_CONFIGS
                    ) -> tuple[list[CredibilityExample], dict[str, CredibilityModel],
                               dict[str, dict[str, Any]], str]:
    """The LOTO credibility models of every topic: ``(examples, models, choices, how)``.

    With several ``configs`` and at least 3 topics, each topic's configuration is chosen by
    :func:`~credrank.credibility.cv.nested_config_choice` (held-out credibility AUC
    on the other topics); otherwise the first configuration is used (fixed a priori). The
    model of topic ``t`` is then fitted on every page judged for no topic but others."""
    examples = examples_from_labels(corpus.evalset.documents, corpus.evalset.doc_labels)
    qids = list(corpus.queries)
    if not configs:
        raise ValueError("credibility_configs: expected at least one configuration")
    if len(configs) > 1 and len(qids) >= 3:
        nested = nested_config_choice(examples, featurizer, configs)
        how = "nested LOTO over the configurations (held-out credibility AUC)"
    else:
        nested = {q: {"config": configs[0], "inner_auc": None} for q in qids}
        how = "fixed a priori"
    by_topic = {q: nested[q]["config"] for q in qids if q in nested}
    models = loto_credibility_models(examples, featurizer, by_topic)
    choices = {q: {"config": c["config"].to_dict(), "inner_auc": c["inner_auc"]}
               for q, c in nested.items()}
    return examples, models, choices, how


def _agreement(stance: Callable[[str, Candidates], np.ndarray], weight: str | None,
               point: tuple[float, float, int]) -> AnswerAgreement:
    kappa, floor, voters = point
    return AnswerAgreement(stance, weight, floor=floor, sharpness=kappa,
                           voters=int(voters) if voters else None)


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def run_trec_hm(path: str | Path, *, embedder: Embedder | None = None, fetch_k: int = 30,
                top_k: int = 10, seed: int = 0, l2: float = 10.0,
                sharpness: float | None = None, floor: float | None = None,
                voters: int = 0, grid: Grid = DEFAULT_GRID,
                featurizer: StanceFeaturizer | None = None,
                sensitivity: bool = False,
                credibility_configs: Sequence[Config] = DEFAULT_CONFIGS,
                credibility_floor: float = CREDIBILITY_FLOOR,
                tables: Sequence[str | Path] = ()) -> dict[str, Any]:
    """Run the systems of the module docstring on the TREC 2019 HM file at ``path``.

    ``tables``: domain tables typing the URLs besides the built-in rules
    (:class:`~credrank.provenance.SourceTyper`; ``credrank bench --table``).

    ``sharpness``, ``floor`` and ``voters`` (0 = every candidate votes) fix the agreement
    stage a priori; when ``sharpness`` or ``floor`` is ``None`` all three are chosen per topic
    by :func:`nested_loto_choice` over ``grid``. ``seed`` seeds the
    bootstrap / randomisation statistics (the stance fit itself is deterministic).

    Returns a dict: ``experiment`` (an :class:`~credrank.evaluate.experiment.ExperimentResult`:
    the table of systems with means, intervals and comparisons with ``similarity``, each row
    saying whether the system reads labels of the evaluated topic, plus per-query values and
    runs) and JSON data: ``config``, ``stance`` (LOTO accuracy/AUC), ``choices`` (per-topic
    hyper-parameters), ``sensitivity`` (with ``sensitivity=True``: every grid point applied
    to all topics, a post-hoc view that is *not* a result), ``credibility`` (the learned
    credibility prior: LOTO accuracy/AUC of ``P(credible)`` on each topic's judged pages,
    per-topic configurations chosen by nested LOTO over ``credibility_configs`` (or the single
    one given), the floor of ``λ = floor + (1 − floor) · p`` and the agreement settings of
    ``learned credibility prior + agreement``), ``notes`` and ``seconds``.
    """
    check_int("fetch_k", fetch_k, 1)
    check_int("top_k", top_k, 1)
    if top_k > fetch_k:
        raise ValueError(f"top_k: expected <= fetch_k ({fetch_k}), got {top_k}")
    t0 = time.perf_counter()
    evalset = load_dataset("trec2019-hm", path)
    embedder = embedder or get_embedder("minilm")
    corpus = build_corpus(evalset, embedder, SourceTyper(list(tables)))
    qids = list(corpus.queries)
    batches = {q: retrieve(corpus, q, fetch_k) for q in qids}
    featurizer = featurizer or StanceFeaturizer(embedder, use_embedding=False,
                                                use_interaction=False)
    examples = corpus.examples()
    models = fit_loto_models(examples, featurizer, l2)
    stance_report = loto_report(examples, models)

    if sharpness is None or floor is None:
        choices = nested_loto_choice(corpus, batches, examples, featurizer, l2, grid, top_k)
        how = "nested LOTO over grid"
    else:
        choices = {q: {"sharpness": float(sharpness), "floor": float(floor),
                       "voters": int(voters)} for q in qids}
        how = "fixed a priori"

    cred_featurizer = CredibilityFeaturizer(embedder)
    cred_examples, cred_models, cred_choices, cred_how = fit_credibility(
        corpus, cred_featurizer, credibility_configs)
    cred_report = credibility_report(cred_examples, cred_models)

    def learned_prior(q: str) -> LearnedCredibilityPrior:
        return LearnedCredibilityPrior(cred_models[q], name="prior", floor=credibility_floor)

    if how == "fixed a priori":
        learned_choices = choices
    else:
        # inner topic u under outer t: the credibility model saw neither t nor u; it uses the
        # configuration chosen for t (by inner AUC on topics other than t)
        inner_cred: dict[str, dict[str, CredibilityModel]] = {}
        for outer in qids:
            config = Config(tuple(cred_choices[outer]["config"]["groups"]),
                            float(cred_choices[outer]["config"]["l2"]))
            inner_cred[outer] = loto_credibility_models(cred_examples, cred_featurizer,
                                                        config, exclude=[outer])

        def inner_prior(outer: str, q: str) -> Stage:
            return LearnedCredibilityPrior(inner_cred[outer][q], name="prior",
                                           floor=credibility_floor)

        learned_choices = nested_loto_choice(corpus, batches, examples, featurizer, l2, grid,
                                             top_k, prior_stage=inner_prior)

    def point(q: str) -> tuple[float, float, int]:
        c = choices[q]
        return c["sharpness"], c["floor"], c["voters"]

    def learned_point(q: str) -> tuple[float, float, int]:
        c = learned_choices[q]
        return c["sharpness"], c["floor"], c["voters"]

    def agree(q: str, weight: str | None) -> AnswerAgreement:
        return _agreement(model_stance(models[q]), weight, point(q))

    def oracle_agree(q: str) -> AnswerAgreement:
        return _agreement(label_stance(evalset, q), "prior", point(q))

    identity = FunctionStage(lambda b: b, name="identity")
    # name: (the stages applied to topic q's pool, whether they read labels of topic q)
    system_stages: dict[str, tuple[Callable[[str], Stage], bool]] = {
        "similarity": (lambda q: identity, False),
        "prior": (lambda q: SourcePrior("current"), False),
        "prior+agreement": (lambda q: SourcePrior("current") >> agree(q, "prior"), False),
        "agreement": (lambda q: agree(q, None), False),
        LEARNED: (learned_prior, False),
        LEARNED_AGREEMENT: (lambda q: learned_prior(q) >> _agreement(
            model_stance(models[q]), "prior", learned_point(q)), False),
        "oracle:nist-prior": (lambda q: nist_prior(evalset), True),
        "oracle:stance+prior": (lambda q: SourcePrior("current") >> oracle_agree(q), True),
        "oracle:nist-prior+agreement": (lambda q: nist_prior(evalset) >> agree(q, "prior"),
                                        True),
    }
    decided = [q for q in qids if evalset.query_labels[q]["correct_stance"] != "inconclusive"]
    per_query: dict[str, dict[str, dict[str, float]]] = {}
    runs: dict[str, Run] = {}
    for name, (stages, _) in system_stages.items():
        ranked = _rank(batches, stages, top_k)
        runs[name] = run_from_batches({q: ranked[q] for q in qids})
        per_query[name] = _evaluate_run(evalset, runs[name], qids)
        per_query[name][DECIDED] = {q: per_query[name]["harmful@5"][q] for q in decided}
    fitted = {  # rows whose models saw labels of this data set (other topics only)
        LEARNED: "its credibility model is fitted on the NIST credibility labels of this data "
                 "set's other topics (leave-one-topic-out): never on the evaluated topic, but "
                 "not label-free for TREC 2019 HM",
        LEARNED_AGREEMENT: "its credibility and stance models are fitted on labels of this "
                           "data set's other topics (leave-one-topic-out): never on the "
                           "evaluated topic, but not label-free for TREC 2019 HM",
        "agreement": "its stance model is fitted on stance labels of this data set's other "
                     "topics (leave-one-topic-out): not label-free for TREC 2019 HM",
        "prior+agreement": "its stance model is fitted on stance labels of this data set's "
                           "other topics (leave-one-topic-out): not label-free for TREC 2019 HM",
    }
    systems = {name: System(None, reads, notes=(
        ("reads labels of the evaluated topic: a reference line, not a result",) if reads
        else (fitted[name],) if name in fitted else ()))
        for name, (_, reads) in system_stages.items()}
    experiment = compare_systems(
        per_query, systems, [*(Column.of(m) for m in MEASURES), Column(DECIDED, "harmful@5")],
        key="correctness_signal", title="Correctness signals (TREC 2019 HM)",
        baseline="similarity", runs=runs, seed=seed, notes=[
            "Credibility-weighted agreement on the answer (RA-RAG's idea at document level, "
            "chapter 35.3): a stance model (P(page says the treatment helps)) trained "
            "leave-one-topic-out, never on the evaluated topic; the agreement stage's "
            f"hyper-parameters: {how}. Stance model LOTO: n={stance_report['n']}, accuracy "
            f"{stance_report['accuracy']:.3f}, AUC {_fmt(stance_report['auc'])}. "
            f"'{DECIDED}' averages only the topics whose correct stance is helpful or "
            "unhelpful."])
    sensitivity_rows: list[dict[str, Any]] = []
    if sensitivity:
        for point in grid:
            row: dict[str, Any] = {"sharpness": point[0], "floor": point[1],
                                   "voters": point[2]}
            for name, weight, with_prior in (("prior+agreement", "prior", True),
                                             ("agreement", None, False)):
                def stages(q: str, point: tuple[float, float, int] = point,
                           weight: str | None = weight, with_prior: bool = with_prior
                           ) -> Stage:
                    stage = _agreement(model_stance(models[q]), weight, point)
                    return SourcePrior("current") >> stage if with_prior else stage
                means = aggregate(_scores(evalset, _rank(batches, stages, top_k), qids))
                row[name] = {"harmful@5": means["harmful@5"], "nDCG@10": means["nDCG@10"]}
            sensitivity_rows.append(row)
    return {
        "config": {"path": str(path), "fetch_k": fetch_k, "top_k": top_k, "seed": seed,
                   "l2": l2, "embedder": getattr(embedder, "name", type(embedder).__name__),
                   "featurizer": featurizer.config(), "hyperparameters": how,
                   "grid": [list(g) for g in grid], "measures": list(MEASURES),
                   "prior_preset": "current", "nist_prior": list(NIST_PRIOR),
                   "tables": [str(t) for t in tables]},
        "stance": stance_report,
        "choices": choices,
        "experiment": experiment,
        "sensitivity": sensitivity_rows,
        "credibility": {
            **cred_report, "floor": credibility_floor, "hyperparameters": cred_how,
            "featurizer": cred_featurizer.config(),
            "configs": [c.to_dict() for c in credibility_configs],
            "choices": cred_choices,
            "agreement_choices": learned_choices,
            "agreement_hyperparameters": how if how == "fixed a priori" else
            "nested LOTO over grid, re-chosen with the learned credibility prior",
            "labels": "NIST credibility of the pages judged for the other topics only"},
        "notes": [
            *evalset.notes,
            "nDCG@10/P@5/RR exclude topics without a relevant document (metrics policy); "
            "harmful@5 averages all topics (inconclusive topics have no harmful page); "
            f"'{DECIDED}' averages only helpful/unhelpful topics",
            "oracle:* lines read labels of the evaluated topic; they are references, "
            "not results",
            "learned credibility prior: P(credible) from page text and URL, fitted on the "
            "NIST credibility labels of pages judged for other topics only; the candidates "
            "of topic t that were judged for other topics are scored by a model trained on "
            "them (in-sample), which can only help or hurt pages that gain nothing for t",
            "sensitivity rows (if any) apply one grid point to every topic and are read on "
            "the same topics: post-hoc, not a result"],
        "seconds": time.perf_counter() - t0,
    }
