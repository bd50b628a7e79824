"""Machine-written text: Fast-DetectGPT's analytic criterion with SmolLM2-135M, measured.

Measurements (docs/results.md, "Machine-written text (Fast-DetectGPT with SmolLM2-135M)"):

``auc``: the statistic ``d`` (higher = more machine-like; no label is used to compute it) of
passages sampled from each set, and the AUC of ``d`` for telling the machine-written passages
from the real ones — labels are read only here, to evaluate:

* ``cram-nq``: CrAM NQ's GPT-written fakes vs its retrieved Wikipedia passages;
* ``newspolluted``: CAG NewsPolluted's LLM-written fakes vs its real news snippets (the leaked
  "Low credibility of text:" label removed by the reader first);
* ``poisonedrag``: PoisonedRAG's adversarial NQ texts vs the CrAM NQ Wikipedia passages of
  ``cram-nq`` (the same negatives: both sets are NQ);
* negative checks, human-written against human-written (AUC near 0.5 expected: the statistic
  must not read falsehood or low credibility as machine writing): ``coaid`` fake vs real
  COVID-19 news (2020, ``content`` texts), ``trec2019-hm`` pages judged not credible vs
  credible.

Each passage is scored once at the largest budget; the statistic at a shorter budget is the
same sum over a prefix of the positions (the model is causal), so one pass gives the AUC at
every budget. Per-passage terms are cached (``--cache``): an interrupted run resumes.

``speed``: passages per second of :class:`~credrank.machine_text.scorer.FastDetectScorer` at
several budgets and thread counts, wall time and CPU time, with the machine's load average
(the CPU is shared here: the wall rate is what this machine gave, the CPU seconds per passage
with one thread what two dedicated cores would approach).

    python bench/scripts/bench_machine_text.py auc --data ../shared/data --n 150 --json auc.json
    python bench/scripts/bench_machine_text.py speed --data ../shared/data --n 64
    python bench/scripts/bench_machine_text.py corpus-auc --data ../shared/data --score-cache DIR

``corpus-auc``: the same AUC over *every* passage of CrAM NQ and NewsPolluted (the corpora the
benches rank), scored through the benches' own cache (``credrank bench … --machine-text
--cache DIR`` shares it), with an interval from resampling questions.

``transforms``: how far the factor's transform moves the benches, on the pools the benches
rank (MiniLM, fetch_k 15 / top 5; TREC fetch_k 30 / top 10; scores from the same cache):
NewsPolluted and CrAM NQ harmful@1 and nDCG@5, CrAM NQ with every fake removed (nDCG@5) and
TREC 2019 HM dev (nDCG@10), for the product stage's fixed transform ``1 − (1 − floor)·Φ(d)``
at floors 0.5 (the default), 0.3 and 0.1, and — a measurement, not a product option — the
corpus percentile ``1 − (1 − floor)·F(d)`` (``F`` the empirical distribution of ``d`` over
the set's whole corpus, no label read) at floors 0.5 and 0.3, and the stage's transform made
sharper and shifted, ``1 − 0.5·Φ((d − center)/scale)`` with scale 0.5 and 0.25 and center
−0.5, 0 and 0.5 (the stage's ``center`` and ``scale`` options: would a factor that leaves human
text alone lower the clean cost?). No row reads a label; the rows look at the sets they are
reported on.

    python bench/scripts/bench_machine_text.py transforms --data ../shared/data --score-cache DIR
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _auc(pos: Sequence[float], neg: Sequence[float]) -> float:
    """P(d of a positive > d of a negative), ties half (Mann–Whitney)."""
    from scipy.stats import rankdata

    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    ranks = rankdata(np.concatenate([pos, neg]))
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2)
                 / (len(pos) * len(neg)))


def _auc_ci(pos: Sequence[float], neg: Sequence[float], seed: int = 0, reps: int = 1000
            ) -> tuple[float, float]:
    """95% bootstrap interval of the AUC (passages resampled within each class)."""
    rng = np.random.default_rng(seed)
    pos, neg = np.asarray(pos, float), np.asarray(neg, float)
    values = [_auc(rng.choice(pos, len(pos)), rng.choice(neg, len(neg))) for _ in range(reps)]
    return float(np.percentile(values, 2.5)), float(np.percentile(values, 97.5))


def _sample(items: list[str], n: int, seed: int) -> list[str]:
    items = sorted(set(t for t in items if t and t.strip()))
    return random.Random(seed).sample(items, min(n, len(items)))


def load_sets(data: Path, n: int, seed: int) -> dict[str, tuple[list[str], list[str], str]]:
    """``name -> (machine-written or 'positive' texts, real texts, what the pair is)``."""
    from credrank_bench.datasets.coaid import read_coaid
    from credrank_bench.datasets.cram_nq import read_cram_nq
    from credrank_bench.datasets.newspolluted import read_newspolluted
    from credrank_bench.datasets.poisonedrag import read_poisonedrag
    from credrank_bench.datasets.trec2019_hm import read_trec2019_hm

    out: dict[str, tuple[list[str], list[str], str]] = {}
    cram = read_cram_nq(data / "cram" / "cram_nq_1000_reconstructed.jsonl")
    fake = [d.text for d in cram.documents if cram.doc_labels[d.id]["is_misinformation"]]
    real = [d.text for d in cram.documents if not cram.doc_labels[d.id]["is_misinformation"]]
    cram_real = _sample(real, n, seed)
    out["cram-nq"] = (_sample(fake, n, seed), cram_real,
                      "GPT-written fakes vs retrieved Wikipedia passages")
    news = read_newspolluted(data / "cag" / "NewsPolluted.json")
    fake = [d.text for d in news.documents if news.doc_labels[d.id]["fake"]]
    real = [d.text for d in news.documents if not news.doc_labels[d.id]["fake"]]
    out["newspolluted"] = (_sample(fake, n, seed), _sample(real, n, seed),
                           "LLM-written fake news vs real news snippets")
    targets = read_poisonedrag(data / "poisonedrag" / "nq.json")
    adv = [t for target in targets.targets for t in target.adv_texts]
    out["poisonedrag"] = (_sample(adv, n, seed), cram_real,
                          "adversarial NQ texts vs the CrAM NQ Wikipedia passages")
    coaid = read_coaid(data / "coaid")
    content = [d for d in coaid.documents if coaid.doc_labels[d.id]["text_field"] == "content"]
    fake = [d.text for d in content if coaid.doc_labels[d.id]["fake"]]
    real = [d.text for d in content if not coaid.doc_labels[d.id]["fake"]]
    out["coaid (negative check)"] = (_sample(fake, n, seed), _sample(real, n, seed),
                                     "human-written fake vs real COVID-19 news (2020)")
    trec = read_trec2019_hm(data / "trec2019_hm" / "trec2019_hm_dev.csv")
    bad = [d.text for d in trec.documents if trec.doc_labels[d.id]["credibility"] == 0]
    good = [d.text for d in trec.documents if trec.doc_labels[d.id]["credibility"] == 1]
    out["trec2019-hm (negative check)"] = (_sample(bad, n, seed), _sample(good, n, seed),
                                           "web pages judged not credible vs credible")
    return out


class TermCache:
    """Per-passage terms ``(ℓ − μ, σ²)`` by text hash, kept in a pickle file."""

    def __init__(self, path: Path | None, key: str):
        self.path, self.key = path, key
        self.terms: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if path is not None and path.is_file():
            saved = pickle.loads(path.read_bytes())
            if saved.get("key") == key:
                self.terms = saved["terms"]

    @staticmethod
    def digest(text: str) -> str:
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def missing(self, texts: Sequence[str]) -> list[str]:
        return list(dict.fromkeys(t for t in texts if self.digest(t) not in self.terms))

    def add(self, texts: Sequence[str], terms: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
        for t, v in zip(texts, terms, strict=True):
            self.terms[self.digest(t)] = v
        if self.path is not None:
            tmp = self.path.with_suffix(".tmp")
            tmp.write_bytes(pickle.dumps({"key": self.key, "terms": self.terms}))
            os.replace(tmp, self.path)

    def get(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        return self.terms[self.digest(text)]


def run_auc(args: argparse.Namespace) -> dict[str, Any]:
    from credrank.machine_text.factor import machine_text_factor
    from credrank.machine_text.scorer import FastDetectScorer
    from credrank.machine_text.statistic import criterion_from_terms

    scorer = FastDetectScorer(max_tokens=max(args.budgets), batch_size=args.batch_size,
                              threads=args.threads, precision=args.precision)
    cache = TermCache(args.cache, scorer.key)
    sets = load_sets(args.data, args.n, args.seed)
    rows = []
    for name, (pos, neg, what) in sets.items():
        todo = cache.missing(pos + neg)
        for begin in range(0, len(todo), 64):
            chunk = todo[begin:begin + 64]
            cache.add(chunk, scorer.terms(chunk))
            print(f"{name}: {min(begin + 64, len(todo))}/{len(todo)} scored", file=sys.stderr,
                  flush=True)
        for budget in args.budgets:
            dp = [criterion_from_terms(*cache.get(t), budget - 1) for t in pos]
            dn = [criterion_from_terms(*cache.get(t), budget - 1) for t in neg]
            dp = [x for x in dp if np.isfinite(x)]
            dn = [x for x in dn if np.isfinite(x)]
            auc = _auc(dp, dn)
            lo, hi = _auc_ci(dp, dn, args.seed)
            fp, fn = machine_text_factor(np.array(dp)), machine_text_factor(np.array(dn))
            tokens = [min(len(cache.get(t)[0]) + 1, budget) for t in pos + neg]
            rows.append({"set": name, "pair": what, "budget": budget, "n_machine": len(dp),
                         "n_real": len(dn), "auc": round(auc, 3), "ci95": [round(lo, 3),
                                                                           round(hi, 3)],
                         "median_d_machine": round(float(np.median(dp)), 3),
                         "median_d_real": round(float(np.median(dn)), 3),
                         "mean_factor_machine": round(float(fp.mean()), 3),
                         "mean_factor_real": round(float(fn.mean()), 3),
                         "mean_tokens": round(float(np.mean(tokens)), 1)})
            print(json.dumps(rows[-1]), flush=True)
    return {"measure": "auc", "scorer": scorer.config(), "n_per_class": args.n,
            "seed": args.seed, "rows": rows}


def run_corpus_auc(args: argparse.Namespace) -> dict[str, Any]:
    """``d`` of **every** passage of CrAM NQ and NewsPolluted (the whole corpora the benches
    rank; scored through the benches' cache folder, ``--score-cache``:
    :mod:`credrank_bench.experiments.machine_text_rows`), the AUC of machine-written vs real, and
    a 95% interval from resampling questions (a question's passages stay together)."""
    from credrank.machine_text.scorer import FastDetectScorer
    from credrank_bench.datasets.cram_nq import read_cram_nq
    from credrank_bench.datasets.newspolluted import read_newspolluted
    from credrank_bench.experiments.machine_text_rows import score_texts

    scorer = FastDetectScorer(batch_size=args.batch_size, threads=args.threads,
                              precision=args.precision)
    cram = read_cram_nq(args.data / "cram" / "cram_nq_1000_reconstructed.jsonl")
    news = read_newspolluted(args.data / "cag" / "NewsPolluted.json")
    sets = {"cram-nq": (cram, "is_misinformation"), "newspolluted": (news, "fake")}
    rows = []
    for name, (ev, label) in sets.items():
        docs = ev.documents
        d = score_texts([doc.text for doc in docs], scorer, cache_dir=args.score_cache)
        machine = np.array([bool(ev.doc_labels[doc.id][label]) for doc in docs])
        question = [next(q for q, ids in (ev.pools or {}).items() if doc.id in ids)
                    if ev.pools else doc.id for doc in docs]
        ok = np.isfinite(d)
        auc = _auc(d[ok & machine], d[ok & ~machine])
        groups: dict[str, list[int]] = {}
        for i, q in enumerate(question):
            if ok[i]:
                groups.setdefault(q, []).append(i)
        keys = sorted(groups)
        rng = np.random.default_rng(args.seed)
        values = []
        for _ in range(1000):
            take = np.concatenate([groups[keys[k]] for k in rng.integers(0, len(keys),
                                                                          len(keys))])
            pos, neg = d[take][machine[take]], d[take][~machine[take]]
            if len(pos) and len(neg):
                values.append(_auc(pos, neg))
        rows.append({"set": name, "machine": int((ok & machine).sum()),
                     "real": int((ok & ~machine).sum()), "too_short": int((~ok).sum()),
                     "questions": len(keys), "auc": round(auc, 3),
                     "ci95": [round(float(np.percentile(values, 2.5)), 3),
                              round(float(np.percentile(values, 97.5)), 3)],
                     "median_d_machine": round(float(np.median(d[ok & machine])), 3),
                     "median_d_real": round(float(np.median(d[ok & ~machine])), 3)})
        print(json.dumps(rows[-1]), flush=True)
    return {"measure": "corpus-auc", "scorer": scorer.config(), "seed": args.seed,
            "rows": rows}


def run_transforms(args: argparse.Namespace) -> dict[str, Any]:
    """The ``transforms`` table (module docstring)."""
    from credrank.core.pipeline import FunctionStage
    from credrank.evaluate.experiment import System
    from credrank.evaluate.metrics import evaluate, harmful_at_k, mean, run_from_batches
    from credrank.index.embed import CachedEmbedder, get_embedder
    from credrank.machine_text.scorer import FastDetectScorer
    from credrank.pipeline.spec import PipelineSpec
    from credrank.provenance import SourceTyper
    from credrank.stages.machine_text import FIELD
    from credrank_bench.datasets import load_dataset
    from credrank_bench.experiments.bench import pools_for, prepare, without_bad
    from credrank_bench.experiments.machine_text_rows import add_machine_text

    scorer = FastDetectScorer(batch_size=args.batch_size, threads=args.threads,
                              precision=args.precision)
    emb = CachedEmbedder(get_embedder("minilm"), args.score_cache)
    sets: dict[str, tuple[Any, Any, int, np.ndarray]] = {}
    for name, path, fetch_k, top_k, typer in (
            ("newspolluted", args.data / "cag" / "NewsPolluted.json", 15, 5, None),
            ("cram-nq", args.data / "cram" / "cram_nq_1000_reconstructed.jsonl", 15, 5, None),
            ("trec2019-hm", args.data / "trec2019_hm" / "trec2019_hm_dev.csv", 30, 10,
             SourceTyper())):
        ev = load_dataset(name, path)
        prep = prepare(ev, emb, typer=typer)
        add_machine_text(prep.index, scorer, cache_dir=args.score_cache)
        d = np.array([np.nan if x is None else float(x) for x in prep.index.meta[FIELD]])
        corpus = np.sort(d[np.isfinite(d)])
        sets[name] = (ev, pools_for(prep, fetch_k), top_k, corpus)
        if name == "cram-nq":
            sets["cram-nq, fakes removed"] = (ev, pools_for(without_bad(prep), fetch_k), top_k,
                                              corpus)

    def percentile(floor: float, corpus: np.ndarray) -> Any:
        def apply(batch: Any) -> Any:
            d = np.array([np.nan if x is None else float(x) for x in batch.column(FIELD)])
            share = np.searchsorted(corpus, np.nan_to_num(d, nan=-np.inf), side="right")
            f = 1.0 - (1.0 - floor) * share / max(len(corpus), 1)
            return batch.with_factor("machine_text", f, 0.0, 1.0)
        return FunctionStage(apply, "machine_text")

    # each row: the machine_text stage's parameters in a spec, or (the corpus percentile, a
    # research transform no spec names) a stage of the bench before the similarity-only spec
    def machine_text(**params: Any) -> Any:
        return lambda _corpus, top_k: System.of_spec(
            PipelineSpec.of({"stage": "machine_text", **params}, top_k=top_k))

    def before(fl: float) -> Any:
        return lambda corpus, top_k: System.of_spec(PipelineSpec.of(top_k=top_k),
                                                    before=[percentile(fl, corpus)])

    systems: list[tuple[str, Any]] = [
        ("similarity only", lambda _corpus, top_k: System.of_spec(PipelineSpec.of(top_k=top_k)))]
    systems += [(f"fixed Φ, floor {fl}", machine_text(floor=fl)) for fl in (0.5, 0.3, 0.1)]
    systems += [(f"corpus percentile, floor {fl}", before(fl)) for fl in (0.5, 0.3)]
    systems += [(f"fixed Φ, floor 0.5, center {c}, scale {s}",
                 machine_text(floor=0.5, center=c, scale=s))
                for s in (0.5, 0.25) for c in (-0.5, 0.0, 0.5)]
    rows = []
    for system, make in systems:
        row: dict[str, Any] = {"system": system}
        for name, (ev, pools, top_k, corpus) in sets.items():
            pipe = make(corpus, top_k).stage
            run = run_from_batches({q: pipe(b) for q, b in pools.items()})
            if not name.endswith("removed") and name != "trec2019-hm":
                row[f"{name} harmful@1"] = round(mean(harmful_at_k(run, ev.bad, 1)), 3)
            measure = f"nDCG@{top_k}"
            row[f"{name} {measure}"] = round(mean(evaluate(ev.qrels, run, [measure])[measure]),
                                             3)
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    heads = list(rows[0])
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for row in rows:
        print("| " + " | ".join(str(row[h]) for h in heads) + " |")
    return {"measure": "transforms", "scorer": scorer.config(), "rows": rows}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_speed(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from credrank.machine_text.scorer import FastDetectScorer

    sets = load_sets(args.data, args.n, args.seed)
    pos, neg, _ = sets["cram-nq"]
    texts = (pos + neg)[:args.n]
    rows = []
    reference: dict[int, np.ndarray] = {}  # budget -> d in float32, for the rank agreement
    for precision in args.precisions:
        for threads in args.thread_counts:
            for budget in args.budgets:
                scorer = FastDetectScorer(max_tokens=budget, batch_size=args.batch_size,
                                          threads=threads, precision=precision)
                scorer.load()
                scorer.score(texts[:args.batch_size])  # warm-up
                load_before = _load()
                cpu, wall = time.process_time(), time.perf_counter()
                d = scorer.score(texts)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                tokens = sum(min(len(x), budget) for x in scorer.token_ids(texts))
                row = {"precision": scorer.precision, "threads": threads, "budget": budget,
                       "passages": len(texts), "tokens": tokens, "wall_s": round(wall, 2),
                       "passages_per_s": round(len(texts) / wall, 2),
                       "cpu_s_per_passage": round(cpu / len(texts), 4),
                       "finite": int(np.isfinite(d).sum()),
                       "loadavg_before": load_before, "loadavg_after": _load()}
                if scorer.precision == "float32":
                    reference.setdefault(budget, d)
                elif budget in reference:
                    from scipy.stats import spearmanr

                    ok = np.isfinite(d) & np.isfinite(reference[budget])
                    row["spearman_vs_float32"] = round(float(spearmanr(
                        d[ok], reference[budget][ok]).statistic), 4)
                    row["max_abs_diff_vs_float32"] = round(float(np.max(np.abs(
                        d[ok] - reference[budget][ok]))), 3)
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.store:
        rows.append(_store_row(texts, args))
        print(json.dumps(rows[-1]), flush=True)
    return {"measure": "speed", "torch": torch.__version__, "cpus": os.cpu_count(),
            "batch_size": args.batch_size, "rows": rows}


def _store_row(texts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """Index-time scoring end to end: ``texts`` indexed into a Qdrant Edge index (hashing
    embedder), then :func:`credrank.index.scoring.score_store` as ``credrank score
    machine-text`` runs it (read texts, score, write payloads), at the largest budget."""
    import tempfile

    from credrank.documents.schema import Document
    from credrank.index.embed import get_embedder
    from credrank.index.ingest import index_documents
    from credrank.index.opener import open_store
    from credrank.index.scoring import ScoreJob, score_store
    from credrank.machine_text.scorer import FastDetectScorer
    from credrank.provenance import SourceTyper

    budget = max(args.budgets)
    scorer = FastDetectScorer(max_tokens=budget, batch_size=args.batch_size,
                              threads=args.thread_counts[0], precision=args.precisions[-1])
    scorer.load()
    emb = get_embedder("hashing")
    with tempfile.TemporaryDirectory() as tmp:
        with open_store(Path(tmp) / "idx", embedder=emb.name, dim=emb.dim, create=True) as idx:
            index_documents([Document(id=f"p{i}", text=t) for i, t in enumerate(texts)], idx,
                            emb, SourceTyper([]))
            load_before = _load()
            report = score_store(idx, ScoreJob("machine_text", scorer.key, scorer.score),
                                 chunk=max(4 * args.batch_size, 64))
    return {"precision": scorer.precision, "threads": args.thread_counts[0], "budget": budget,
            "passages": report.scored,
            "what": "score_store on a Qdrant Edge index (read, score, write payloads)",
            "wall_s": round(report.seconds, 2), "documents_per_s": round(report.rate, 2),
            "loadavg_before": load_before, "loadavg_after": _load()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("measure", choices=("auc", "speed", "corpus-auc", "transforms"))
    parser.add_argument("--data", type=Path, default=Path("../shared/data"))
    parser.add_argument("--n", type=int, default=150, help="passages per class (auc) or in all")
    parser.add_argument("--budgets", type=lambda s: [int(x) for x in s.split(",")],
                        default=[32, 64, 128])
    parser.add_argument("--thread-counts", type=lambda s: [int(x) for x in s.split(",")],
                        default=[2, 1])
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--precision", default="auto",
                        help="auc: the scorer's precision (auto, float32, bfloat16)")
    parser.add_argument("--precisions", type=lambda s: s.split(","),
                        default=["float32", "bfloat16"],
                        help="speed: precisions to time (the first float32 one is the "
                             "reference of the rank agreement); --store uses the last")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache", type=Path, default=None,
                        help="auc: the per-passage terms file (pickle)")
    parser.add_argument("--score-cache", type=Path, default=None,
                        help="corpus-auc, transforms: the benches' score cache folder "
                             "(credrank bench --cache; also the embedding cache)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--store", action="store_true",
                        help="speed: also time score_store on a Qdrant Edge index")
    args = parser.parse_args(argv)
    run = {"auc": run_auc, "speed": run_speed, "corpus-auc": run_corpus_auc,
           "transforms": run_transforms}[args.measure]
    result = run(args)
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
