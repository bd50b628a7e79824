"""``credrank credibility fit``: learn a page-credibility model from labelled pages of an index.

The model file it writes is applied by ``credrank search --credibility-model MODEL``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import console, fail, progress, warn
from credrank.credibility.labels import GROUP_BY, read_labels
from credrank.credibility.modelfile import save_model
from credrank.credibility.train import fit_from_labels
from credrank.index.embed import get_embedder
from credrank.index.opener import open_store
from credrank.index.store import StoreError

app = typer.Typer(help="A learned page-credibility prior (P(credible) from text and URL).",
                  no_args_is_help=True, add_completion=False)


@app.callback()
def _credibility() -> None:
    """Fit a page-credibility model on labelled pages; apply it with `credrank search
    --credibility-model`."""


def _fmt(value: float | None) -> str:
    return "undefined" if value is None else f"{value:.3f}"


def _summary(report: dict[str, Any], out: Path) -> str:
    interval = report["cv_auc_interval"]
    ci = f"[{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "undefined"
    cfg = report["chosen_config"]
    skipped = ", ".join(f"{k} {v}" for k, v in report["matching"]["skipped"].items()) or "none"
    lines = [
        f"grouped CV AUC ({report['cv']}, by {report['group_by']}, nested config choice): "
        f"{_fmt(report['cv_auc'])}, 95% CI {ci}",
        f"pages {report['n_pages']} ({report['n_train_pages']} with a majority label), "
        f"groups {report['n_groups']}, label rows {report['matching']['rows']} "
        f"(used {report['matching']['used_rows']}; skipped: {skipped})",
        f"unknown ids: {report['unknown']}"
        + (f" (e.g. {', '.join(report['matching']['unknown_examples'])})"
           if report["unknown"] else ""),
        f"chosen config: groups {'+'.join(cfg['groups'])}, l2 {cfg['l2']:g}",
        f"model written to {out}",
    ]
    return "\n".join(lines)


@app.command()
def fit(
    labels: Annotated[Path, typer.Argument(
        help="CSV with header: doc_id or url, credible (0/1, true/false), optional topic")],
    index_dir: Annotated[Path | None, typer.Option("--index", help="index directory")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="the model file to write (JSON)")
                   ] = None,
    group_by: Annotated[str, typer.Option(
        "--group-by", help="cross-validation groups: topic (the topic column) or host (the "
                           "site of each page's URL)")] = "topic",
    seed: Annotated[int, typer.Option(
        help="seed of the fold assignment (over 20 groups) and of the bootstrap")] = 0,
    jobs: Annotated[int, typer.Option(
        "--jobs", min=1, help="processes for the cross-validation fits (the same numbers for "
                              "any value)")] = 1,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
) -> None:
    """Fit P(credible) on the labelled pages of an index, with nested grouped CV.

    Reports the pooled out-of-fold AUC (no group scored by a model or a configuration choice
    that saw it) with a 95% bootstrap interval over groups, then refits on every labelled page.
    The fits are counted on a progress bar (stderr).
    """
    if index_dir is None:
        fail("--index: required (the index holding the labelled pages)")
    if out is None:
        fail("--out: required (the model file to write)")
    if group_by not in GROUP_BY:
        fail(f"--group-by: expected one of {', '.join(GROUP_BY)}, got {group_by!r}")
    try:
        rows = read_labels(labels)  # a bad labels file is refused before the index opens
        with open_store(index_dir) as idx:
            emb = get_embedder(idx.manifest.embedder)
            with progress() as bar:
                task = bar.add_task("grouped CV fits", total=None)
                result = fit_from_labels(
                    rows, idx, emb, group_by=group_by, seed=seed, n_jobs=jobs,
                    on_progress=lambda done, total: bar.update(task, completed=done,
                                                               total=total))
        save_model(out, result.document)
    except (ValueError, StoreError, RuntimeError) as exc:
        fail(str(exc))
    report = {**result.report, "model": str(out)}
    if as_json:
        print(json.dumps(report, indent=2))
        return
    if report["unknown"]:
        warn(f"{report['unknown']} label rows name pages that are not in the index (skipped)")
    console.print(_summary(report, out), highlight=False)
