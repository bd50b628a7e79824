"""``credrank stance fit``: fit the stance model (P(page says the treatment helps)) on labelled
pairs, for the answer-agreement stage of claim-style queries (chapter 35.3).

The lead mounts :data:`app` as ``credrank stance``; the model file it writes is applied by
``credrank search --stance-model MODEL`` (:func:`credrank.stages.stance.stance_stage`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli import fitting
from credrank.cli.common import Bars, QuietOption, console, fail, show_progress, warn
from credrank.cli.fitting import JobsOption
from credrank.index.embed import EMBEDDERS, get_embedder
from credrank.index.opener import open_store
from credrank.index.store import StoreError
from credrank.signals.stance import fit_pairs, read_pairs, save_model

app = typer.Typer(help="The stance model: P(a page says the treatment in the query helps).",
                  no_args_is_help=True, add_completion=False)


@app.callback()
def _stance() -> None:
    """Fit a stance model on labelled (topic, query, page, stance) pairs; apply it with
    `credrank search --stance-model`."""


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _ci(interval: list[float] | None) -> str:
    return f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "undefined"


def summary(report: dict[str, Any]) -> str:
    """The human-readable lines of ``stance fit``."""
    pairs = report["pairs"]
    rejected = ", ".join(f"{k}: {v}" for k, v in pairs["rejected_by_reason"].items()) or "none"
    cfg = report["chosen_config"]
    return "\n".join([
        f"grouped CV ({report['cv']}, nested choice of l2/interaction): "
        f"accuracy {_fmt(report['cv_accuracy'])} 95% CI {_ci(report['cv_accuracy_interval'])}, "
        f"AUC {_fmt(report['cv_auc'])} 95% CI {_ci(report['cv_auc_interval'])}",
        f"pairs {report['n_pairs']} (stance 0/1: {report['stance_counts'].get('0', 0)}/"
        f"{report['stance_counts'].get('1', 0)}), topics {report['n_topics']}; rows "
        f"{pairs['rows']}, used {pairs['used']}, rejected {pairs['rejected']} ({rejected})",
        f"query column {pairs['columns']['query']!r}; text read from the index: "
        f"{pairs['text_from_index']}; embedder "
        f"{report['embedder']['name']} ({report['embedder']['dim']})",
        f"final model: l2 {cfg['l2']:g}, e_q⊙e_s block {'on' if cfg['interaction'] else 'off'}"
        f", refitted on all {report['n_pairs']} pairs",
        f"model written to {report['model']}",
    ])


@app.command()
def fit(
    pairs: Annotated[Path, typer.Argument(
        help="CSV: topic (or topic_id), query (or description), doc_id, stance (0/1), "
             "optional text, url")],
    out: Annotated[Path | None, typer.Option("--out", help="the model file to write (JSON)")
                   ] = None,
    index_dir: Annotated[Path | None, typer.Option(
        "--index", help="index to read missing page texts from (and whose embedder to use)")
    ] = None,
    embedder: Annotated[str | None, typer.Option(
        "--embedder", help=f"embedder ({', '.join(EMBEDDERS)}); default: the index's, else "
                           "minilm")] = None,
    query_column: Annotated[str | None, typer.Option(
        "--query-column", help="column holding the query (default: query, else description)")
    ] = None,
    seed: Annotated[int, typer.Option(min=0,
        help="seed of the fold assignment (over 20 topics) and of the bootstrap")] = 0,
    jobs: JobsOption = 0,
    quiet: QuietOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
) -> None:
    """Fit P(stance = helps) with nested grouped CV by topic, then refit on every pair.

    Reports the pooled out-of-fold accuracy and AUC (no topic scored by a model, or a choice
    of settings, that saw it) with 95% bootstrap intervals over topics, and every rejected
    row by reason. The fits are counted on a progress bar on stderr when it is a terminal (never
    with --quiet or when stderr is a file or a pipe).
    """
    if out is None:
        fail("--out: required (the model file to write)")
    if not pairs.exists():  # a folder or an unreadable file: the reader's error names it
        fail(f"{pairs}: no such pairs file")
    if embedder is not None and embedder not in EMBEDDERS:
        fail(f"--embedder: expected one of {', '.join(EMBEDDERS)}, got {embedder!r}")
    try:
        if index_dir is not None:
            with open_store(index_dir) as idx:
                name = idx.manifest.embedder
                if embedder is not None and embedder != name:
                    fail(f"--embedder {embedder!r} differs from the embedder of the index "
                         f"{index_dir} ({name!r}); drop --embedder or use an index built "
                         f"with {embedder!r}")
                data = read_pairs(pairs, idx, query_column=query_column)
        else:
            name = embedder or "minilm"
            data = read_pairs(pairs, query_column=query_column)
        emb = get_embedder(name)
        with Bars(show_progress(quiet)) as bars:
            result = fit_pairs(data, emb, seed=seed, n_jobs=fitting.jobs(jobs),
                               on_progress=bars.counter("grouped CV fits"))
        save_model(out, result.document)
    except (ValueError, StoreError, RuntimeError, OSError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))
    report = {"credrank_stance_fit": 1, **result.report, "model": str(out)}
    if report["pairs"]["outvoted"]:  # on stderr with --json too, as credibility fit says it
        warn(f"{report['pairs']['outvoted']} rows disagree with the majority of their (topic, "
             "doc_id) pair's rows and were outvoted (conflicting duplicates; e.g. "
             f"{report['pairs']['outvoted_examples'][0]})")
    if as_json:
        print(json.dumps(report, indent=2, allow_nan=False))
        return
    if report["pairs"]["rejected"]:
        warn(f"{report['pairs']['rejected']} of {report['pairs']['rows']} rows rejected (see "
             "below)")
    console.print(summary(report), highlight=False, soft_wrap=True)


if __name__ == "__main__":
    app()
