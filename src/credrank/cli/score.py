"""``credrank score``: index-time scores for an existing index (kept in each point's payload).

``credrank score machine-text --index DIR`` computes Fast-DetectGPT's analytic criterion with
SmolLM2-135M (the ``lm`` extra) for every document not yet scored with the same settings (its
first ``--max-tokens`` tokens; each passage of a split document carries its document's value)
and
stores it in the payload field ``machine_text`` (:mod:`credrank.index.scoring`), so that
``credrank search … --machine-text`` pays nothing for it. ``credrank score credibility --index
DIR --model MODEL`` stores ``P(credible)`` of a ``credrank credibility fit`` model in the
payload field ``credibility`` (:mod:`credrank.credibility.indexed`), so that ``credrank search
… --credibility-model MODEL`` reads it (and scores it in the engine) instead of running the
model on each query's candidates. Resumable: an interrupted run keeps what it wrote;
re-running scores the rest, no document twice. ``credrank index … --score machine-text`` and
``credrank index … --credibility-model MODEL`` do the same at the end of an indexing run. The
run holds the index's writer lock, like ``credrank index``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.cli.common import ProgressLike, QuietOption, console, fail, progress, show_progress
from credrank.index.store import StoreError, no_index_error, read_manifest

if TYPE_CHECKING:
    from collections.abc import Callable

    from credrank.index.manifest import Manifest
    from credrank.index.scoring import ScoreReport

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Index-time scores, stored in the payload: machine-written text, learned "
                       "credibility.")

#: the scores ``credrank index --score`` and ``credrank score`` know
SCORES = ("machine-text",)

MaxTokensOption = Annotated[int, typer.Option(
    "--max-tokens", min=2, max=4096,
    help="token budget: the first N tokens of each document are scored (speed and accuracy "
         "per budget: docs/results.md)")]
BatchOption = Annotated[int, typer.Option(
    "--batch-size", min=1, max=4096, help="passages per forward pass")]
ThreadsOption = Annotated[int | None, typer.Option(
    "--threads", min=1, help="torch threads (default: one per core)")]
PrecisionOption = Annotated[str, typer.Option(
    "--precision", help="auto (bfloat16 where the CPU has it natively, else float32), float32 "
                        "or bfloat16; part of the stored key (docs/results.md)")]


@dataclass
class Tally:
    """What a scoring run has done so far (for the message of an interrupted run): the
    documents, those scored before it, and those it has written."""

    total: int = 0
    already: int = 0
    written: int = 0
    started: bool = False

    def start(self, todo: int, total: int) -> None:
        self.total, self.already, self.started = total, total - todo, True

    def advance(self, n: int) -> None:
        self.written += n


def interrupted(tally: Tally, index_dir: Path, what: str) -> typer.Exit:
    """Say on stderr what an interrupted (Ctrl-C) scoring run wrote and how to resume it; the
    exit (130, as for SIGINT) to raise."""
    if not tally.started:
        done = "before any score was written"
    else:
        rest = tally.total - tally.already - tally.written
        done = (f"{tally.written} {what} scores written and kept ({tally.already} were already "
                f"there, {tally.total} documents); {rest} left")
    print(f"interrupted: {index_dir}: {done}; re-run the same command to score the rest "
          "(documents already scored are skipped)", file=sys.stderr)
    return typer.Exit(130)


def check_scores(names: list[str] | None) -> list[str]:
    """The ``--score`` names, checked (exit 2 for an unknown one or a missing lm extra)."""
    out = list(dict.fromkeys(names or []))
    for name in out:
        if name not in SCORES:
            fail(f"--score: expected one of {', '.join(SCORES)}, got {name!r}")
    if out:
        from credrank.generate.local import lm_available

        missing = lm_available()
        if missing is not None:
            fail(f"--score machine-text needs SmolLM2: {missing}")
    return out


def score_machine_text(idx: Any, *, bar: ProgressLike | None, label: str,
                       max_tokens: int | None = None, batch_size: int | None = None,
                       threads: int | None = None, precision: str = "auto",
                       tally: Tally | None = None) -> ScoreReport:
    """Score the passages of the open store ``idx`` not yet scored with these settings,
    advancing a task of ``bar`` (``None``: no progress shown) and ``tally``."""
    from credrank.index.scoring import ScoreJob, score_store
    from credrank.machine_text.scorer import BATCH_SIZE, MAX_TOKENS, FastDetectScorer

    scorer = FastDetectScorer(max_tokens=max_tokens or MAX_TOKENS,
                              batch_size=batch_size or BATCH_SIZE, threads=threads,
                              precision=precision)
    task: list[Any] = []

    def start(todo: int, total: int) -> None:
        if tally is not None:
            tally.start(todo, total)
        if bar is not None:
            task.append(bar.add_task(f"{label}: machine-text scores ({total - todo} of {total} "
                                     "already)", total=todo))
        if todo:
            scorer.load()

    def advance(n: int) -> None:
        if tally is not None:
            tally.advance(n)
        if bar is not None and task:
            bar.advance(task[0], n)

    job = ScoreJob("machine_text", scorer.key, scorer.score)
    return score_store(idx, job, chunk=max(scorer.batch_size * 4, 64), on_start=start,
                       on_chunk=advance)


def check_index_dir_option(index_dir: Path) -> None:
    """``--index`` must name an existing index directory: exit 2 for a regular file (as
    ``credrank index`` says it) or nothing there."""
    from credrank.cli.common import check_index_option

    check_index_option(index_dir)
    if not index_dir.is_dir():
        fail(f"--index {index_dir}: no such index directory; build one with "
             "`credrank index CORPUS --index DIR`")


def open_writer(index_dir: Path, check: Callable[[Manifest], None] | None = None) -> Any:
    """The index ``index_dir`` opened as a writer (the lock is exclusive, as for ``credrank
    index``), after ``check(manifest)``; no index there, or one that fails the check, exits 2
    with the error."""
    from credrank.index.opener import open_store

    try:
        manifest = read_manifest(index_dir)
        if manifest is None:
            raise no_index_error(index_dir)
        if check is not None:
            check(manifest)
        return open_store(index_dir, create=True)
    except (ValueError, StoreError) as exc:
        fail(str(exc))


def summary(report: ScoreReport, index_dir: Path) -> str:
    """The one-line account of a scoring run."""
    short = f", {report.unscorable} too short to score (factor 1)" if report.unscorable else ""
    rate = f" ({report.rate:.1f} passages/s)" if report.scored else ""
    return (f"{index_dir}: machine-text scores: scored {report.scored}{short}, "
            f"{report.already} already scored, {report.total} documents, in "
            f"{report.seconds:.1f} s{rate}; key {report.key}")


@app.command("machine-text")
def machine_text(
    index_dir: Annotated[Path, typer.Option("--index", help="index directory")],
    max_tokens: MaxTokensOption = 128,
    batch_size: BatchOption = 16,
    threads: ThreadsOption = None,
    precision: PrecisionOption = "auto",
    quiet: QuietOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the run as JSON")] = False,
) -> None:
    """Store the machine-text statistic of every document of DIR (Fast-DetectGPT, SmolLM2):
    its first --max-tokens tokens are scored, and every passage of a split document carries
    its document's value.

    Resumable: documents already scored with the same settings are skipped, so an interrupted
    run is completed by re-running it. Afterwards `credrank search … --machine-text` demotes
    machine-like documents by the factor machine_text (docs/results.md)."""
    check_index_dir_option(index_dir)
    check_scores(["machine-text"])
    from credrank.machine_text.scorer import check_precision

    try:
        check_precision(precision)
    except ValueError as exc:
        fail(f"--precision: {exc}")
    idx = open_writer(index_dir)
    show = show_progress(quiet)
    tally = Tally()
    try:
        with idx, progress(show) as bar:
            report = score_machine_text(idx, bar=bar if show else None, label=index_dir.name,
                                        max_tokens=max_tokens, batch_size=batch_size,
                                        threads=threads, precision=precision, tally=tally)
    except KeyboardInterrupt:
        raise interrupted(tally, index_dir, "machine-text") from None
    except (ValueError, StoreError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(f"{exc}; the scores written so far are kept: re-run the same command to "
             "complete them")
    if as_json:
        typer.echo(json.dumps({"credrank_score": 1, "index": str(index_dir),
                               **report.to_dict()}))
    else:
        console.print(summary(report, index_dir), soft_wrap=True, highlight=False)


def check_credibility_model(model: Path, embedder: str | None = None, *,
                            option: str = "--model") -> Any:
    """The model file ``model`` read and checked (exit 2 naming the ``option`` that gave it,
    the file and what is wrong), and, with ``embedder``, refused when fitted on another
    embedder."""
    from credrank.credibility.modelfile import load_model

    try:
        saved = load_model(model)
    except (ValueError, OSError) as exc:
        fail(f"{option} {exc}")
    if embedder is not None and saved.embedder_name != embedder:
        fail(f"{option} {model}: the credibility model was fitted on an index embedded with "
             f"{saved.embedder_name!r}; this index uses {embedder!r} (refit it on this index "
             "with `credrank credibility fit`)")
    return saved


def score_credibility(idx: Any, model: Any, *, bar: ProgressLike | None, label: str,
                      tally: Tally | None = None) -> ScoreReport:
    """Store ``P(credible)`` of ``model`` (a loaded model file) for the documents of the open
    store ``idx`` not yet scored with its key, advancing a task of ``bar`` (``None``: no
    progress shown) and ``tally``."""
    from credrank.credibility.indexed import score_index

    task: list[Any] = []

    def start(todo: int, total: int) -> None:
        if tally is not None:
            tally.start(todo, total)
        if bar is not None:
            task.append(bar.add_task(f"{label}: credibility scores ({total - todo} of {total} "
                                     "already)", total=todo))

    def advance(n: int) -> None:
        if tally is not None:
            tally.advance(n)
        if bar is not None and task:
            bar.advance(task[0], n)

    return score_index(idx, model, chunk=256, on_start=start, on_chunk=advance)


def credibility_summary(report: ScoreReport, index_dir: Path, model: Any) -> str:
    """The one-line account of a credibility scoring run."""
    rate = f" ({report.rate:.0f} documents/s)" if report.scored else ""
    return (f"{index_dir}: credibility scores of {model.path} ({model.embedding_source} "
            f"embedding): scored {report.scored}, {report.already} already scored, "
            f"{report.total} documents, in {report.seconds:.1f} s{rate}; key {report.key}")


def credibility_document(report: ScoreReport, index_dir: Path, model: Any) -> dict[str, Any]:
    """The ``--json`` document of a credibility scoring run."""
    out = {"credrank_score": 1, "index": str(index_dir), **report.to_dict(),
           "model": str(model.path), "embedding_source": model.embedding_source,
           "documents_per_s": round(report.rate, 2)}
    return out


@app.command("credibility")
def credibility(
    index_dir: Annotated[Path, typer.Option("--index", help="index directory")],
    model: Annotated[Path, typer.Option(
        "--model", help="a model file of `credrank credibility fit`")],
    quiet: QuietOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the run as JSON")] = False,
) -> None:
    """Store P(credible) of a credibility model for every document of DIR.

    Resumable: documents already scored with the same model (its key: a refit is a new key)
    are skipped, so an interrupted run is completed by re-running it. A model fitted since the
    embedding feature is the index's stored vector scores without the embedder. Afterwards
    `credrank search … --credibility-model MODEL` reads the scores, and scores the factor in
    the engine when every document holds one."""
    check_index_dir_option(index_dir)
    saved = check_credibility_model(model)

    def same_embedder(manifest: Manifest) -> None:
        if manifest.embedder != saved.embedder_name:
            check_credibility_model(model, manifest.embedder)

    idx = open_writer(index_dir, same_embedder)
    show = show_progress(quiet)
    tally = Tally()
    try:
        with idx, progress(show) as bar:
            report = score_credibility(idx, saved, bar=bar if show else None,
                                       label=index_dir.name, tally=tally)
    except KeyboardInterrupt:
        raise interrupted(tally, index_dir, "credibility") from None
    except (ValueError, StoreError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(f"{exc}; the scores written so far are kept: re-run the same command to "
             "complete them")
    if as_json:
        typer.echo(json.dumps(credibility_document(report, index_dir, saved)))
    else:
        console.print(credibility_summary(report, index_dir, saved), soft_wrap=True,
                      highlight=False)
