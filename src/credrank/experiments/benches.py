"""The one registry of ``credrank bench NAME``: every bench, product and experiment alike.

Product benches (similarity vs credibility-aware systems on one set) come from
:mod:`credrank.evaluate.bench`; the research runs (TREC correctness signals, oracle feedback,
CoAID-fitted priors, Golden-Gaze hosts, the RA-RAG simulation) live here, in ``experiments``,
which product code never imports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from credrank.evaluate.bench import (
    BenchResult,
    bench_corpus,
    bench_pooled,
    bench_ramdocs,
    check_path,
)
from credrank.experiments.coaid_priors import evaluate_fitted_priors
from credrank.experiments.goldengaze import run_goldengaze
from credrank.experiments.oracle_feedback import oracle_feedback_table
from credrank.experiments.ra_rag_simulation import run_simulation
from credrank.experiments.trec_hm import run_trec_hm
from credrank.index.embed import get_embedder


@dataclass(frozen=True)
class BenchOptions:
    """What ``credrank bench`` passes to every bench."""

    path: Path | None = None
    embedder: str = "minilm"
    cache_dir: Path | None = None
    seed: int = 0
    tables: Sequence[Path] = ()


@dataclass(frozen=True)
class Bench:
    """One registered bench: its runner, whether it needs ``--path``, and a line of help."""

    name: str
    run: Callable[[BenchOptions], BenchResult]
    needs_path: bool
    help: str


def _oracle_section(result: BenchResult, pools: Any, evalset: Any, top_k: int,
                    measures: list[str]) -> None:
    result.extra["oracle_feedback"] = oracle_feedback_table(pools, evalset, top_k, measures)


def _corpus(name: str) -> Callable[[BenchOptions], BenchResult]:
    def run(o: BenchOptions) -> BenchResult:
        sections = [_oracle_section]
        embedder = get_embedder(o.embedder)
        if name == "trec2019-hm":
            def agreement(result: BenchResult, pools: Any, evalset: Any, top_k: int,
                          measures: list[str]) -> None:
                out = run_trec_hm(o.path, embedder=embedder, fetch_k=result.settings["fetch_k"],
                                  top_k=top_k, seed=o.seed)
                result.extra["correctness_signal"] = (
                    "Credibility-weighted agreement on the answer (RA-RAG's idea at document "
                    "level, chapter 35.3): a stance model (P(page says the treatment helps)) "
                    "trained leave-one-topic-out, never on the evaluated topic; the agreement "
                    "stage's hyper-parameters chosen by nested leave-one-topic-out. Stance "
                    f"model LOTO: n={out['stance']['n']}, accuracy "
                    f"{out['stance']['accuracy']:.3f}, AUC {out['stance']['auc']}.\n\n"
                    + out["table"])
                result.extra["agreement_details"] = {k: out[k] for k in (
                    "config", "choices", "notes", "seconds")}
            sections.append(agreement)
        return bench_corpus(name, o.path, embedder, seed=o.seed, cache_dir=o.cache_dir,
                            tables=o.tables, sections=sections)
    return run


def _pooled(name: str) -> Callable[[BenchOptions], BenchResult]:
    def run(o: BenchOptions) -> BenchResult:
        assert o.path is not None
        embedder = get_embedder(o.embedder)
        if name == "ramdocs":
            return bench_ramdocs(o.path, embedder, seed=o.seed, cache_dir=o.cache_dir)
        return bench_pooled(name, o.path, embedder, seed=o.seed, cache_dir=o.cache_dir)
    return run


def _coaid(o: BenchOptions) -> BenchResult:
    assert o.path is not None
    out = evaluate_fitted_priors(o.path)
    result = BenchResult("coaid-priors", str(o.path), {"strength": 10.0, "base": "current"},
                         {k: v for k, v in out.items() if isinstance(v, int | float | str)
                          and k != "markdown"}, [])
    result.extra["fitted_priors"] = out.get("markdown", "")
    result.extra["details"] = {k: v for k, v in out.items() if k != "markdown"}
    return result


def _goldengaze(o: BenchOptions) -> BenchResult:
    assert o.path is not None
    out = run_goldengaze(o.path, seed=o.seed)
    return BenchResult("goldengaze-hosts", str(o.path), {"seed": o.seed}, {}, [], extra=out)


def _simulation(o: BenchOptions) -> BenchResult:
    out = run_simulation(seed=o.seed)
    return BenchResult("ra-rag-simulation", "synthetic (simulated answers)", {"seed": o.seed},
                       {}, [], extra=out)


BENCHES: dict[str, Bench] = {b.name: b for b in (
    Bench("demo", _corpus("demo"), False, "the packaged synthetic health corpus"),
    Bench("trec2019-hm", _corpus("trec2019-hm"), True,
          "TREC 2019 Health Misinformation (URLs, NIST labels)"),
    Bench("newspolluted", _pooled("newspolluted"), True, "CAG NewsPolluted"),
    Bench("cram-nq", _pooled("cram-nq"), True, "CrAM NQ with injected fakes"),
    Bench("evotemp", _pooled("evotemp"), True, "CAG EvoTemp"),
    Bench("ramdocs", _pooled("ramdocs"), True, "RAMDocs (ambiguity, misinformation)"),
    Bench("coaid-priors", _coaid, True, "per-type priors fitted on CoAID releases"),
    Bench("goldengaze-hosts", _goldengaze, True, "reliability from agreement on real hosts"),
    Bench("ra-rag-simulation", _simulation, False, "the RA-RAG simulation protocol"),
)}


def run_bench(name: str, options: BenchOptions) -> BenchResult:
    """Run bench ``name`` (see :data:`BENCHES`)."""
    bench = BENCHES.get(name)
    if bench is None:
        raise ValueError(f"bench: unknown name {name!r}; expected one of "
                         f"{', '.join(BENCHES)}")
    path = check_path(name, options.path, required=bench.needs_path)
    return bench.run(BenchOptions(path, options.embedder, options.cache_dir, options.seed,
                                  options.tables))
