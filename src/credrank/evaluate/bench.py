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
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from credrank.combine import Combine
from credrank.core.candidates import Candidates
from credrank.core.pipeline import FunctionStage, Pipeline, Stage
from credrank.datasets import EvalSet, demo_dir, load_dataset, read_demo
from credrank.documents.schema import Document
from credrank.evaluate.experiment import ExperimentResult, run_experiment
from credrank.index.embed import Embedder
from credrank.index.memory import InMemoryIndex
from credrank.provenance import SourceTyper
from credrank.select.topk import TopK
from credrank.signals.prior import CURRENT, PriorTable, SourcePrior, disperse, preset

POOLED_MEASURES = ["harmful@5", "harmful@1", "nDCG@5", "RR"]
CORPUS_MEASURES = ["harmful@5", "nDCG@10", "P@5", "RR"]
NOISE_RATES = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
DISPERSIONS = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0)


@dataclass
class BenchResult:
    """Everything a bench run measured (JSON via :meth:`to_json`, see docs/json.md)."""

    name: str
    path: str
    settings: dict[str, Any]
    summary: dict[str, Any]
    notes: list[str]
    main: ExperimentResult | None = None
    sweeps: dict[str, dict[str, Any]] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    qrels: dict[str, dict[str, int]] | None = None  # written as runs/qrels.txt, not in JSON

    def to_json(self) -> dict[str, Any]:
        return {"credrank_bench": 1, "dataset": self.name, "path": self.path,
                "settings": self.settings, "data": self.summary, "notes": self.notes,
                "results": self.main.to_json() if self.main else None,
                "sweeps": self.sweeps, "extra": self.extra}


#: a further measurement over a corpus bench's pools (see :func:`bench_corpus`)
Section = Callable[["BenchResult", dict[str, Candidates], EvalSet, int, list[str]], None]


# -- embeddings ---------------------------------------------------------------------------------

def doc_text(doc: Document) -> str:
    return f"{doc.title}\n{doc.text}" if doc.title else doc.text


def embed_cached(texts: Sequence[str], embedder: Embedder, cache_dir: Path | None) -> np.ndarray:
    """Embed ``texts``; with ``cache_dir``, reuse vectors stored under a hash of the texts."""
    if cache_dir is None:
        return embedder.embed(list(texts))
    digest = hashlib.sha256(embedder.name.encode())
    for t in texts:
        digest.update(t.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    path = Path(cache_dir) / f"{embedder.name}-{digest.hexdigest()[:24]}.npy"
    if path.is_file():
        vectors = np.load(path)
        if vectors.shape == (len(texts), embedder.dim):
            return vectors
    vectors = embedder.embed(list(texts))
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


@dataclass
class Prepared:
    evalset: EvalSet
    index: InMemoryIndex
    query_vectors: dict[str, np.ndarray]  # by query id


def prepare(evalset: EvalSet, embedder: Embedder, *, typer: SourceTyper | None = None,
            cache_dir: Path | None = None) -> Prepared:
    """Embed documents and queries; source types from the URL when ``typer`` is given."""
    docs = evalset.documents
    vectors = embed_cached([doc_text(d) for d in docs], embedder, cache_dir)
    qtexts = [text for _, text in evalset.queries]
    qvectors = embed_cached(qtexts, embedder, cache_dir)
    meta: dict[str, list[Any]] = {"url": [d.url for d in docs], "title": [d.title for d in docs],
                                  "text": [d.text for d in docs]}
    if typer is not None:
        provs = [typer.classify(d.url) for d in docs]
        meta.update(source_type=[p.source_type for p in provs], host=[p.host for p in provs],
                    domain_score=[p.domain_score for p in provs])
    index = InMemoryIndex([d.id for d in docs], vectors, meta)
    qv = {qid: qvectors[i] for i, (qid, _) in enumerate(evalset.queries)}
    return Prepared(evalset, index, qv)


def pools_for(prepared: Prepared, fetch_k: int) -> dict[str, Candidates]:
    """``qid -> batch`` of the ``fetch_k`` nearest documents, retrieved once per query."""
    return {qid: prepared.index.search(text, prepared.query_vectors[qid], fetch_k)
            for qid, text in prepared.evalset.queries}


# -- systems ------------------------------------------------------------------------------------

def similarity_only(top_k: int) -> Stage:
    return Pipeline([Combine("multiply"), TopK(top_k)])


def with_priors(priors: PriorTable, top_k: int, *extra: Stage,
                use_domain_scores: bool = False) -> Stage:
    return Pipeline([SourcePrior(priors, use_domain_scores=use_domain_scores), *extra,
                     Combine("multiply"), TopK(top_k)])


def assigned_type_stage(types: dict[str, str]) -> Stage:
    """Attach experimenter-assigned source types (by doc id) as the ``source_type`` column."""
    def attach(batch: Candidates) -> Candidates:
        return batch.with_meta("source_type", [types[d] for d in batch.doc_ids])
    return FunctionStage(attach, name="assigned_types")


def noisy_types(evalset: EvalSet, rate: float, rng: np.random.Generator,
                high: str = "established_news", low: str = "ai_generated") -> dict[str, str]:
    """Type ``low`` for documents labelled bad for any question, ``high`` otherwise; then a
    random ``rate`` share of all documents (exactly round(rate·N)) gets the other type."""
    bad = set().union(*evalset.bad.values()) if evalset.bad else set()
    ids = [d.id for d in evalset.documents]
    types = {d: (low if d in bad else high) for d in ids}
    flip = rng.choice(len(ids), size=round(rate * len(ids)), replace=False)
    for i in flip:
        types[ids[i]] = high if types[ids[i]] == low else low
    return types


def label_prior_stage(evalset: EvalSet, label: str, scale: float, floor: float,
                      name: str) -> Stage:
    """A prior from a per-document score in ``doc_labels`` (e.g. CrAM's GPT truthfulness)."""
    values = {}
    for d in evalset.documents:
        raw = evalset.doc_labels.get(d.id, {}).get(label)
        values[d.id] = min(1.0, max(floor, float(raw) / scale)) if raw is not None else 0.5

    def attach(batch: Candidates) -> Candidates:
        return batch.with_factor(name, np.array([values[d] for d in batch.doc_ids]), 0.0, 1.0)
    return FunctionStage(attach, name=name)


# -- runners ------------------------------------------------------------------------------------

def _sweep_dispersion(pools, evalset, top_k, measures) -> dict[str, Any]:
    """The seed's sensitivity to prior dispersion: ``disperse(current, γ)`` over a γ grid."""
    systems: dict[str, Stage] = {"similarity only": similarity_only(top_k)}
    for gamma in DISPERSIONS:
        table = PriorTable(f"γ={gamma:g}", disperse(CURRENT, gamma))
        systems[f"γ={gamma:g}"] = with_priors(table, top_k)
    res = run_experiment(pools, systems, evalset.qrels, measures, bad=evalset.bad,
                         n_resamples=2000)
    return {"parameter": "dispersion γ", "values": list(DISPERSIONS),
            "measures": {m: [res.mean(f"γ={g:g}", m) for g in DISPERSIONS] for m in measures},
            "baseline": {m: res.mean("similarity only", m) for m in measures},
            "presets": {name: g for name, g in (("compressed", 0.5), ("current", 1.0),
                                                ("aggressive", 1.5))}}


def _sweep_noise(pools, evalset, top_k, measures, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng(seed)
    systems: dict[str, Stage] = {"similarity only": similarity_only(top_k)}
    for rate in NOISE_RATES:
        types = noisy_types(evalset, rate, rng)
        systems[f"x={rate:.0%}"] = Pipeline([assigned_type_stage(types),
                                             with_priors(preset("current"), top_k)])
    res = run_experiment(pools, systems, evalset.qrels, measures, bad=evalset.bad,
                         n_resamples=2000)
    return {"parameter": "share of documents with a wrong source type",
            "values": list(NOISE_RATES),
            "measures": {m: [res.mean(f"x={r:.0%}", m) for r in NOISE_RATES] for m in measures},
            "ci": {m: [[row["metrics"][m]["ci_low"], row["metrics"][m]["ci_high"]]
                       for row in res.rows if row["system"].startswith("x=")]
                   for m in measures},
            "baseline": {m: res.mean("similarity only", m) for m in measures},
            "priors": "current preset; bad → ai_generated (0.30), others → established_news "
                      "(0.80), then x% swapped"}


def bench_pooled(name: str, path: Path, embedder: Embedder, *, top_k: int = 5,
                 fetch_k: int = 15, seed: int = 0, cache_dir: Path | None = None) -> BenchResult:
    """newspolluted / cram-nq / evotemp / ramdocs: one corpus of all pooled documents."""
    evalset = load_dataset(name, path)
    prepared = prepare(evalset, embedder, cache_dir=cache_dir)
    pools = pools_for(prepared, fetch_k)
    measures = POOLED_MEASURES
    systems: dict[str, Stage] = {"similarity only": similarity_only(top_k)}
    rng = np.random.default_rng(seed)
    for rate in (0.0, 0.2):
        types = noisy_types(evalset, rate, rng)
        label = ("prior from labels, x=0% (upper bound, circular)" if rate == 0 else
                 f"prior with {rate:.0%} wrong types")
        systems[label] = Pipeline([assigned_type_stage(types),
                                   with_priors(preset("current"), top_k)])
    if name == "cram-nq":
        systems["GPT truthfulness as prior (CrAM's scorer)"] = Pipeline([
            label_prior_stage(evalset, "gpt_truthfulness_0_10", 10.0, 0.05, "gpt_truth"),
            Combine("multiply"), TopK(top_k)])
    main = run_experiment(pools, systems, evalset.qrels, measures, bad=evalset.bad)
    result = BenchResult(name, str(path), _settings(embedder, top_k, fetch_k, seed),
                         evalset.summary(), list(evalset.notes), main, qrels=evalset.qrels)
    if name in ("newspolluted", "cram-nq"):
        result.sweeps["noisy_priors"] = _sweep_noise(pools, evalset, top_k, measures, seed)
    return result


def answer_coverage(evalset: EvalSet, k: int
                    ) -> Callable[[dict[str, dict[str, float]]], dict[str, float]]:
    """Gold-answer coverage@k: the share of a question's gold answers supported by a
    ``correct`` document of that question in the top k (answers compared after SQuAD-style
    normalisation; questions without gold answers are left out)."""
    from credrank.datasets import normalize_answer
    from credrank.evaluate.metrics import ranked_docs

    gold = {qid: {normalize_answer(a) for a in lab.get("gold_answers", [])}
            for qid, lab in evalset.query_labels.items()}

    def coverage(run: dict[str, dict[str, float]]) -> dict[str, float]:
        out = {}
        for qid, answers in gold.items():
            if not answers:
                continue
            top = ranked_docs(run.get(qid, {}))[:k]
            covered = {normalize_answer(evalset.doc_labels[d]["answer"]) for d in top
                       if evalset.doc_labels.get(d, {}).get("qid") == qid
                       and evalset.doc_labels[d].get("type") == "correct"}
            out[qid] = len(covered & answers) / len(answers)
        return out
    return coverage


def bench_ramdocs(path: Path, embedder: Embedder, *, top_k: int = 5, fetch_k: int = 15,
                  seed: int = 0, cache_dir: Path | None = None) -> BenchResult:
    """RAMDocs: misinformation@5 (= harmful@5, bad = misinfo documents) and gold-answer
    coverage@5 for similarity only, credibility-aware, MMR and the coverage optimum. Intents for
    the coverage optimum come from clustering the candidate embeddings (no labels are used)."""
    from credrank.select.eligibility import EligibilityFilter
    from credrank.select.stages import CoverageSelect, MMRSelect

    evalset = load_dataset("ramdocs", path)
    prepared = prepare(evalset, embedder, cache_dir=cache_dir)
    pools = pools_for(prepared, fetch_k)
    types = noisy_types(evalset, 0.2, np.random.default_rng(seed))
    prior = [assigned_type_stage(types), SourcePrior(preset("current"))]
    eligible = EligibilityFilter(min_ratio=0.75, min_keep=top_k)
    mmr = MMRSelect(top_k, diversity=0.5)
    coverage = CoverageSelect(top_k, lambda_ilad=0.3, lambda_coverage=0.5, n_clusters=3)
    systems: dict[str, Stage] = {
        "similarity only": similarity_only(top_k),
        "credibility-aware (prior, 20% wrong types)": Pipeline([*prior, Combine(), TopK(top_k)]),
        "MMR diversity=0.5 over the whole pool": Pipeline([Combine(), mmr]),
        "eligible (cos ≥ 0.75·max) + MMR": Pipeline([eligible, Combine(), mmr]),
        "credibility-aware + eligible + MMR": Pipeline([eligible, *prior, Combine(), mmr]),
        "credibility-aware + eligible + coverage optimum (λ1=0.3, λ2=0.5, 3 clusters)":
            Pipeline([eligible, *prior, Combine(), coverage]),
    }
    main = run_experiment(pools, systems, evalset.qrels, ["harmful@5", "nDCG@5", "RR"],
                          bad=evalset.bad,
                          custom={"coverage@5": answer_coverage(evalset, top_k)})
    result = BenchResult("ramdocs", str(path), _settings(embedder, top_k, fetch_k, seed),
                         evalset.summary(), list(evalset.notes), main, qrels=evalset.qrels)
    result.notes.append("harmful@5 here is misinformation@5 (bad = documents typed misinfo); "
                        "credibility-aware systems use priors assigned with a 20% error rate "
                        "(no provenance in RAMDocs)")
    return result


def bench_corpus(name: str, path: Path | None, embedder: Embedder, *, top_k: int = 10,
                 fetch_k: int = 30, seed: int = 0, cache_dir: Path | None = None,
                 tables: Sequence[Path] = (),
                 sections: Sequence[Section] = ()) -> BenchResult:
    """trec2019-hm (and the demo corpus): source types from the URL only.

    ``sections`` are further measurements over the same pools (``section(result, pools,
    evalset, top_k, measures)`` adds to ``result``): the experiments add theirs this way.
    """
    if name == "demo":
        evalset = read_demo()
        tables = [*tables, demo_dir() / "domains.csv"]
        measures = ["harmful@5", "nDCG@5", "P@5", "RR"]
        top_k, fetch_k = 5, 15
    else:
        evalset = load_dataset(name, path)
        measures = CORPUS_MEASURES
    typer = SourceTyper(list(tables))
    prepared = prepare(evalset, embedder, typer=typer, cache_dir=cache_dir)
    pools = pools_for(prepared, fetch_k)
    systems: dict[str, Stage] = {"similarity only": similarity_only(top_k)}
    for p in ("compressed", "current", "aggressive"):
        systems[f"{p} priors"] = with_priors(preset(p), top_k)
    if tables and name != "demo":
        systems["current + domain table scores"] = with_priors(preset("current"), top_k,
                                                               use_domain_scores=True)
    for label, stage in _optional_systems(evalset, top_k).items():
        systems[label] = stage
    main = run_experiment(pools, systems, evalset.qrels, measures, bad=evalset.bad)
    result = BenchResult(name, str(path or "credrank/data/demo"),
                         _settings(embedder, top_k, fetch_k, seed), evalset.summary(),
                         list(evalset.notes), main, qrels=evalset.qrels)
    types = [t for t in prepared.index.meta.get("source_type", [])]
    result.extra["source_types"] = {t: types.count(t) for t in sorted(set(types))}
    result.sweeps["dispersion"] = _sweep_dispersion(pools, evalset, top_k, measures)
    for section in sections:
        section(result, pools, evalset, top_k, measures)
    return result


def _optional_systems(evalset: EvalSet, top_k: int) -> dict[str, Stage]:
    """Systems that need optional stages (neighbour smoothing) when they are available."""
    out: dict[str, Stage] = {}
    try:
        from credrank.signals.smoothing import NeighbourSmoothing
    except ImportError:
        return out
    for m, beta in ((3, 0.3), (5, 0.5)):
        out[f"current + smoothing m={m} β={beta}"] = with_priors(
            preset("current"), top_k, NeighbourSmoothing(m=m, beta=beta))
    return out


def _settings(embedder: Embedder, top_k: int, fetch_k: int, seed: int) -> dict[str, Any]:
    return {"embedder": embedder.name, "top_k": top_k, "fetch_k": fetch_k, "seed": seed,
            "retrieval": "exact cosine over the whole corpus", "combine": "max(cos,0) × Π factors"}


def check_path(name: str, path: Path | None, required: bool = True) -> Path | None:
    """``--path`` of bench ``name``: required unless ``required`` is off, and existing."""
    if path is None:
        if required:
            raise ValueError(f"bench {name}: --path is required (e.g. ../shared/data/...)")
        return None
    if not Path(path).exists():
        raise ValueError(f"bench {name}: --path {path} does not exist")
    return Path(path)


def dump_json(result: BenchResult) -> str:
    return json.dumps(result.to_json(), indent=2, default=str)
