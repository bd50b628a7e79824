"""The grid the default ``planted`` setting was chosen from, rerun in one place.

The default mode of the planted-evidence stage (:mod:`credrank.stages.planted`) flags
paraphrase groups: connected components of ≥ ``min_cluster`` passages with pairwise cosine ≥
``cluster_cosine`` (word copies excluded) whose median query-similarity z-score is ≥
``cluster_z``. This script measures every setting of a small grid on the attacked sets and the
clean ones, side by side with similarity alone, so the choice is visible:

* attacks: PoisonedRAG NQ (100 targets, CrAM NQ's real passages as the clean corpus; 5 and 1
  adversarial texts, prefix none and question): attack-success@1 and poisons@5;
* clean: CrAM NQ with every fake removed (nDCG@5), TREC 2019 HM dev (nDCG@10, source types
  from URLs), RealTimeQA (top-document accuracy, source types from URLs).

Every row reads no label; labels only score the rows. The choice looks at the same sets it is
reported on (no held-out poisoning set exists here): docs/results.md says so.

The grid also runs the stage's ``linkage = "complete"`` (a group: every pair a paraphrase,
not a chain) at cosine 0.7 / 0.75 and size 3 / 4.

``--variants`` adds rows for other ways of forming the groups, each tried to escape the
trade-off the grid shows (catching the five unprefixed PoisonedRAG texts costs CrAM's clean
pools, whose genuine passages are as alike): groups that stand apart from the rest of the
pool (mean cosine inside minus mean cosine to the others ≥ δ), cosine of the vectors with the
query direction removed (``v − (v·q)q``: what two passages share *besides* the query), and
pairs that must also share ≥ o of their non-query content words (overlap coefficient;
planted texts repeat their answer). Each flags a group of ≥ 3 with median query z ≥ 0.5,
factor ``0.1 + 0.9 (1 − p)``, the ``trusted`` exemption as in the stage. The same three
conditions are also added to complete linkage at cosine 0.7 (groups of ≥ 3), to see whether
they lower its cost on CrAM's clean pools. These are measurements, not product modes.

    python bench/scripts/planted_grid.py --data ../shared/data --cache DIR [--variants]
        [--attacked] [--json out.json]

``--attacked`` adds the pooled attack sets of the benches (CrAM NQ with its fakes,
NewsPolluted, EvoTemp: harmful@1 and nDCG@5), where a setting's cost on attacked pools shows.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


def _pools(args: argparse.Namespace) -> dict[str, Any]:
    """``set name -> (pools, scorer(run) -> {measure: mean}, top_k)``."""
    from credrank.evaluate.metrics import harmful_at_k, mean, ranked_docs
    from credrank.index.embed import CachedEmbedder, get_embedder
    from credrank.provenance import SourceTyper
    from credrank_bench.datasets import (
        load_dataset,
        poisoned_corpus,
        read_cram_nq,
        read_poisonedrag,
    )
    from credrank_bench.experiments.bench import pools_for, prepare, without_bad
    from credrank_bench.experiments.poisoning import _subset
    from credrank_bench.experiments.realtimeqa import question_pools

    emb = CachedEmbedder(get_embedder("minilm"), args.cache)
    data = args.data
    out: dict[str, Any] = {}
    cram = read_cram_nq(data / "cram" / "cram_nq_1000_reconstructed.jsonl")
    targets = read_poisonedrag(data / "poisonedrag" / "nq.json")
    for prefix in ("none", "question"):
        ev = poisoned_corpus(targets, cram, 5, prefix=prefix)
        prep = prepare(ev, emb)
        for n in (5, 1):
            pools = pools_for(_subset(prep, n) if n < 5 else prep, 15)

            def attack(run: Mapping[str, Mapping[str, float]], ev: Any = ev) -> dict[str, float]:
                # attack-success@1 = harmful@1; poisons@5 = 5 · harmful@5 (the bench's kernel)
                return {"attack@1": mean(harmful_at_k(run, ev.bad, 1)),
                        "poisons@5": 5 * mean(harmful_at_k(run, ev.bad, 5))}
            out[f"poisonedrag {n} text(s), prefix {prefix}"] = (pools, attack, 5)
    prep = prepare(cram, emb)
    out["cram-nq clean pools"] = (pools_for(without_bad(prep), 15), _ndcg(cram.qrels, 5), 5)
    if args.attacked:
        def attacked(ev: Any) -> Any:
            def measure(run: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
                return {"harmful@1": mean(harmful_at_k(run, ev.bad, 1)),
                        **_ndcg(ev.qrels, 5)(run)}
            return measure
        out["cram-nq"] = (pools_for(prep, 15), attacked(cram), 5)
        for name, path in (("newspolluted", data / "cag" / "NewsPolluted.json"),
                           ("evotemp", data / "cag" / "EvoTemp.json")):
            ev = load_dataset(name, path)
            out[name] = (pools_for(prepare(ev, emb), 15), attacked(ev), 5)
    trec = load_dataset("trec2019-hm", data / "trec2019_hm" / "trec2019_hm_dev.csv")
    tprep = prepare(trec, emb, typer=SourceTyper())
    out["trec2019-hm dev"] = (pools_for(tprep, 30), _ndcg(trec.qrels, 10), 10)
    rt = load_dataset("realtimeqa", data / "realtimeqa")
    rprep = prepare(rt, emb, typer=SourceTyper())

    def top_doc(run: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        acc = []
        for qid, _ in rt.queries:
            top = ranked_docs(run.get(qid, {}))[:1]
            acc.append(float(bool(top) and rt.doc_labels[top[0]]["verdict"] == "right"))
        return {"top-doc accuracy": float(np.mean(acc))}
    out["realtimeqa"] = ({q: b for q, b in question_pools(rt, rprep, 10).items() if len(b)},
                         top_doc, 5)
    return out


def _ndcg(qrels: Mapping[str, Mapping[str, int]], k: int) -> Any:
    """nDCG@k as the benches compute it (:func:`credrank.evaluate.metrics.evaluate`)."""
    from credrank.evaluate.metrics import evaluate, mean

    def measure(run: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
        name = f"nDCG@{k}"
        return {name: mean(evaluate(qrels, run, [name])[name])}
    return measure


# -- the --variants rows ----------------------------------------------------------------------

def _unit(batch: Any) -> tuple[np.ndarray, np.ndarray]:
    v = np.asarray(batch.vectors, dtype=np.float64)
    v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    q = np.asarray(batch.query_vector, dtype=np.float64).reshape(-1)
    return v, q / max(float(np.linalg.norm(q)), 1e-12)


def _flag_groups(labels: np.ndarray, z: np.ndarray, keep: Any = None, *, min_size: int = 3,
                 cluster_z: float = 0.5) -> np.ndarray:
    p = np.zeros(len(labels))
    for g in np.unique(labels):
        members = labels == g
        if members.sum() >= min_size and float(np.median(z[members])) >= cluster_z and \
                (keep is None or keep(members)):
            p[members] = 1.0
    return p


def _groups(sims: np.ndarray, words: list[str], threshold: float, pair_ok: Any = None,
            linkage: str = "single", link_sims: np.ndarray | None = None) -> np.ndarray:
    """Group labels over the stage's paraphrase pairs at ``threshold`` (word copies excluded)
    that also pass ``pair_ok``; single-link components or, with ``linkage="complete"``, the
    stage's complete-link groups (distances from ``link_sims``, default ``sims``)."""
    from credrank.defences.planted import paraphrase_graph
    from credrank.defences.planted_math import complete_link_groups, paraphrase_components
    from credrank.stages.planted import PlantedEvidence

    adj, _ = paraphrase_graph(sims, words, threshold, PlantedEvidence().copy_jaccard)
    if pair_ok is not None:
        for i, j in zip(*np.nonzero(adj), strict=True):
            adj[i, j] = pair_ok(int(i), int(j))
    if linkage == "complete":
        return complete_link_groups(sims if link_sims is None else link_sims, adj)
    return paraphrase_components(adj)


def apart(threshold: float, delta: float, linkage: str = "single") -> Any:
    """Groups at ``threshold`` whose mean inner cosine exceeds their mean cosine to the rest
    of the pool by ≥ ``delta``."""
    from credrank.defences.planted_math import robust_z

    def evidence(batch: Any) -> np.ndarray:
        v, q = _unit(batch)
        sims = v @ v.T

        def stands_apart(members: np.ndarray) -> bool:
            inside, outside = np.flatnonzero(members), np.flatnonzero(~members)
            if len(outside) == 0:
                return False
            block = sims[np.ix_(inside, inside)]
            mean_in = (block.sum() - len(inside)) / (len(inside) * (len(inside) - 1))
            return bool(mean_in - sims[np.ix_(inside, outside)].mean() >= delta)
        words = [str(t) for t in batch.column("text")]
        return _flag_groups(_groups(sims, words, threshold, linkage=linkage),
                            robust_z(v @ q), stands_apart)
    return evidence


def residual(threshold: float, linkage: str = "single", cosine: float | None = None) -> Any:
    """Groups over the cosine of ``v − (v·q)q`` (the query direction removed) ≥
    ``threshold``; with ``cosine``, pairs must also have raw cosine ≥ ``cosine`` (and the
    complete-link distances are the raw ones)."""
    from credrank.defences.planted_math import robust_z

    def evidence(batch: Any) -> np.ndarray:
        v, q = _unit(batch)
        qs = v @ q
        r = v - np.outer(qs, q)
        r = r / np.maximum(np.linalg.norm(r, axis=1, keepdims=True), 1e-12)
        words = [str(t) for t in batch.column("text")]
        rs, sims = r @ r.T, v @ v.T
        if cosine is None:
            return _flag_groups(_groups(rs, words, threshold, linkage=linkage), robust_z(qs))
        return _flag_groups(_groups(sims, words, cosine, lambda i, j: rs[i, j] >= threshold,
                                    linkage), robust_z(qs))
    return evidence


def shared_words(threshold: float, overlap: float, linkage: str = "single") -> Any:
    """Groups at ``threshold`` over pairs that also share ≥ ``overlap`` of their
    content words outside the query (overlap coefficient, scikit-learn's English stop
    words removed)."""
    import re

    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    from credrank.defences.planted_math import robust_z

    def content(text: str) -> set[str]:
        return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if w not in ENGLISH_STOP_WORDS}

    def evidence(batch: Any) -> np.ndarray:
        v, q = _unit(batch)
        words = [str(t) for t in batch.column("text")]
        asked = content(batch.query)
        bags = [content(t) - asked for t in words]

        def share(i: int, j: int) -> bool:
            return len(bags[i] & bags[j]) / max(1, min(len(bags[i]), len(bags[j]))) >= overlap
        return _flag_groups(_groups(v @ v.T, words, threshold, share, linkage),
                            robust_z(v @ q))
    return evidence


VARIANTS: dict[str, Any] = {
    **{f"apart cos≥{t} δ≥{d}": apart(t, d) for t, d in ((0.7, 0.3), (0.7, 0.4), (0.75, 0.3))},
    **{f"query removed cos≥{t}": residual(t) for t in (0.5, 0.6)},
    **{f"shared words cos≥{t} overlap≥{o}": shared_words(t, o)
       for t, o in ((0.7, 0.15), (0.7, 0.2), (0.75, 0.15))},
    # complete linkage at cosine 0.7 with groups of ≥ 3 meets the NewsPolluted target but costs
    # CrAM's clean pools 0.08 nDCG@5: do the other conditions, added to it, lower that cost?
    **{f"complete cos≥0.7 apart δ≥{d}": apart(0.7, d, "complete") for d in (0.2, 0.3)},
    **{f"complete cos≥0.7 query removed cos≥{t}": residual(t, "complete", 0.7)
       for t in (0.4, 0.5)},
    **{f"complete cos≥0.7 shared words overlap≥{o}": shared_words(0.7, o, "complete")
       for o in (0.15, 0.25)},
}


def variant_stage(evidence: Any) -> Any:
    """A ``--variants`` row as a pipeline stage: factor ``planted = 0.1 + 0.9 (1 − p)`` with
    the planted stage's ``trusted`` exemption (a pool under its ``min_pool``: factor 1)."""
    from credrank.core.pipeline import FunctionStage
    from credrank.stages.planted import PlantedEvidence

    default = PlantedEvidence()

    def apply(batch: Any) -> Any:
        n = len(batch)
        p = evidence(batch) if n >= default.min_pool else np.zeros(n)
        p[default.trusted_rows(batch)] = 0.0
        return batch.with_factor("planted", 0.1 + 0.9 * (1.0 - p), 0.0, 1.0)
    return FunctionStage(apply, "planted")


def main(argv: list[str] | None = None) -> None:
    from credrank.evaluate.experiment import System
    from credrank.evaluate.metrics import run_from_batches
    from credrank.pipeline.spec import PipelineSpec

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=Path("../shared/data"))
    ap.add_argument("--cache", type=Path, default=None, help="embedding cache folder")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--attacked", action="store_true",
                    help="also CrAM NQ with its fakes, NewsPolluted and EvoTemp (harmful@1, "
                         "nDCG@5; fetch_k 15, top 5)")
    ap.add_argument("--variants", action="store_true",
                    help="add the rows of other group definitions (module docstring)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    sets = _pools(args)
    print(f"pools ready in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    grid: list[tuple[str, dict[str, Any] | None]] = [("similarity only", None)]
    for cos, size, z in itertools.product((0.7, 0.75, 0.8, 0.85), (2, 3), (0.5, 1.0)):
        grid.append((f"planted cos≥{cos} size≥{size} z≥{z}",
                     {"cluster_cosine": cos, "min_cluster": size, "cluster_z": z}))
    for cos, size in itertools.product((0.7, 0.75), (3, 4)):
        grid.append((f"planted linkage=complete cos≥{cos} size≥{size} z≥0.5",
                     {"cluster_cosine": cos, "min_cluster": size, "cluster_z": 0.5,
                      "linkage": "complete"}))
    if args.variants:
        grid += [(name, {"variant": evidence}) for name, evidence in VARIANTS.items()]
    rows = []
    for name, params in grid:
        row: dict[str, Any] = {"system": name}
        for set_name, (pools, measure, top_k) in sets.items():
            # a grid row is the planted stage in a spec; a variant (a research group
            # definition no spec names) is a stage of the bench before the similarity-only spec
            if params is not None and "variant" in params:
                system = System.of_spec(PipelineSpec.of(top_k=top_k),
                                        before=[variant_stage(params["variant"])])
            else:
                planted = [] if params is None else [{"stage": "planted", **params}]
                system = System.of_spec(PipelineSpec.of(*planted, top_k=top_k))
            pipe = system.stage
            run = run_from_batches({q: pipe(b) for q, b in pools.items()})
            row.update({f"{set_name}: {k}": round(v, 3) for k, v in measure(run).items()})
        rows.append(row)
        print(json.dumps(row, ensure_ascii=False), flush=True)
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows}, indent=1, ensure_ascii=False),
                             encoding="utf-8")
    heads = list(rows[0])
    print("| " + " | ".join(heads) + " |")
    print("|" + "---|" * len(heads))
    for row in rows:
        print("| " + " | ".join(str(row[h]) for h in heads) + " |")


if __name__ == "__main__":
    main()
