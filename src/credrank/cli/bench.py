"""``credrank bench NAME``: one bench from the registry, as Markdown, JSON or a report folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.cli.common import err, fail

if TYPE_CHECKING:  # the benches are imported when one runs (scipy, every stage), not for --help
    from credrank.evaluate.result import BenchResult

#: the names of :data:`credrank.experiments.benches.BENCHES`, in its order, for --help without
#: importing the benches (tests/test_cli_startup.py checks that they agree)
BENCH_NAMES = ("demo", "trec2019-hm", "newspolluted", "cram-nq", "evotemp", "ramdocs",
               "poisonedrag", "stress-cram", "stress-news", "stress-poisonedrag", "realtimeqa",
               "coaid-priors", "goldengaze-hosts", "ra-rag-simulation")


def bench(
    name: Annotated[str, typer.Argument(
        help=" | ".join(BENCH_NAMES))],
    path: Annotated[Path | None, typer.Option(
        help="the data file or folder (see docs/results.md)")] = None,
    corpus: Annotated[Path | None, typer.Option(
        help="a second data file for benches that combine two (poisonedrag: the CrAM NQ "
             "JSONL whose real passages are the clean corpus; default: "
             "<path>/../../cram/cram_nq_1000_reconstructed.jsonl)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    out: Annotated[Path | None, typer.Option(
        help="write report.md, result.json, plots, TREC runs and per-query values here")
    ] = None,
    embedder: Annotated[str, typer.Option(help="minilm (default) or hashing")] = "minilm",
    cache: Annotated[Path | None, typer.Option(
        help="embedding cache folder (reused across runs)")] = None,
    table: Annotated[list[Path] | None, typer.Option(
        "--table", help="domain table CSV for URL sets; repeatable")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    generator: Annotated[str, typer.Option(
        help="generator of benches with one in the loop (evotemp, realtimeqa, stress-*): "
             "extractive (offline reader, default), smollm2 (needs the lm extra: make "
             "install-lm) or openai (any OpenAI-compatible server: $CREDRANK_LLM_BASE_URL, "
             "$CREDRANK_LLM_MODEL, $CREDRANK_LLM_API_KEY)")
    ] = "extractive",
    model: Annotated[str | None, typer.Option(
        help="cram-nq only: a white-box LM (smollm2) — generation EM with and without CrAM "
             "instead of the retrieval bench")] = None,
    heads: Annotated[Path | None, typer.Option(
        help="cram-nq --model: the heads file from `credrank cram calibrate`")] = None,
    limit: Annotated[int | None, typer.Option(
        help="cram-nq --model and stress-*: evaluate the first N questions (stress: and fit "
             "the learned credibility model on N development questions)", min=1)] = None,
    checkpoint: Annotated[Path | None, typer.Option(
        help="cram-nq --model only: a JSONL file that receives each question's generations "
             "as they finish; rerunning with it resumes an interrupted run (and a larger "
             "--limit extends one)")] = None,
    positions: Annotated[str | None, typer.Option(
        help="stress-* only: comma-separated contaminant positions first, middle, last, "
             "natural (default first,middle,last; stress-poisonedrag also natural)")] = None,
    counts: Annotated[str | None, typer.Option(
        help="stress-* only: comma-separated numbers of correlated contaminants injected "
             "(default every count available: cram 1, news 1,2,3; poisonedrag 1,3,5)")] = None,
    prefix: Annotated[str, typer.Option(
        help="poisonedrag only: none (the adversarial texts as the data gives them, default) "
             "or question (PoisonedRAG's black-box attack: the target question prepended to "
             "each text)")] = "none",
    force: Annotated[bool, typer.Option(
        "--force", help="overwrite a report already in --out")] = False,
) -> None:
    """Baseline vs credibility-aware systems on one data set, with intervals and tests."""
    from credrank.cram.models import WhiteBoxError
    from credrank.evaluate.report import prepare_out_dir, remove_created, write_report
    from credrank.evaluate.result import dump_json
    from credrank.experiments.benches import BenchOptions

    command = "credrank bench " + " ".join(sys.argv[2:])
    created: list[Path] = []
    if out is not None:
        # checked before the bench runs: benches can take minutes
        try:
            created = prepare_out_dir(out, force=force)
        except ValueError as exc:
            fail(str(exc))
    try:
        result = run_bench(name, BenchOptions(path, embedder, cache, seed, tuple(table or ()),
                                               corpus, generator=generator, model=model,
                                               heads=heads, limit=limit, positions=positions,
                                               counts=counts, checkpoint=checkpoint,
                                               prefix=prefix))
    except (ValueError, OSError, WhiteBoxError, RuntimeError) as exc:
        remove_created(created)
        fail(str(exc))
    if out is not None:
        try:
            report = write_report(result, out, command)
        except OSError as exc:
            fail(f"--out {out}: writing the report failed: {exc}")
        err.print(f"report written to {report}")
    if as_json:
        print(dump_json(result))
        return
    print_markdown(result)


def run_bench(name: str, options: Any) -> BenchResult:
    """:func:`credrank.experiments.benches.run_bench`, imported when a bench runs."""
    from credrank.experiments.benches import run_bench as run

    return run(name, options)


def print_markdown(result: BenchResult) -> None:
    """The bench's tables as Markdown (the same rendering report.md holds)."""
    from credrank.evaluate.render import sections

    print(f"credrank bench {result.name} — {result.path}")
    print(f"data: {json.dumps(result.summary)}")
    print(f"settings: {json.dumps(result.settings)}\n")
    for title, body, _ in sections(result):
        print(f"## {title}\n\n{body}\n")
