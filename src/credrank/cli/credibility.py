"""``credrank credibility fit``: learn a page-credibility model from labelled pages of an index.

The model file it writes is applied by ``credrank search --credibility-model MODEL``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli import fitting
from credrank.cli.common import Bars, QuietOption, console, fail, show_progress, warn
from credrank.cli.fitting import JobsOption
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
    ]
    for name, entry in report.get("per_set", {}).items():
        lines.append(f"set {name}: out-of-fold AUC {_fmt(entry['auc'])} "
                     f"({entry['n_pairs']} pairs)")
    for name, entry in report.get("leave_one_set_out", {}).items():
        ci = entry["auc_interval"]
        lines.append(f"set {name} left out (fitted on the other sets): AUC "
                     f"{_fmt(entry['auc'])}"
                     + (f", 95% CI [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "")
                     + (f" ({entry['reason']})" if entry.get("reason") else ""))
    lines.append(f"model written to {out}")
    return "\n".join(lines)


@app.command()
def fit(
    labels: Annotated[list[Path], typer.Argument(
        help="CSV with header: doc_id or url, credible (0/1, true/false), and topic (needed "
             "by the default --group-by topic; not with --group-by host). "
             "Several files: several labelled sets, each its own group namespace "
             "(<file stem>:<group>)")],
    index_dir: Annotated[Path | None, typer.Option(
        "--index", help="index directory (required: the pages' texts and URLs)")] = None,
    out: Annotated[Path | None, typer.Option(
        "--out", help="the model file to write (JSON; required)")] = None,
    group_by: Annotated[str, typer.Option(
        "--group-by", help="cross-validation groups: topic (the topic column) or host (the "
                           "site of each page's URL)")] = "topic",
    seed: Annotated[int, typer.Option(min=0,
        help="seed of the fold assignment (over 20 groups) and of the bootstrap")] = 0,
    jobs: JobsOption = 0,
    cache: Annotated[Path | None, typer.Option(
        "--cache", help="folder of cached feature rows (embeddings included): a refit on the "
                        "same pages embeds nothing")] = None,
    leave_one_set_out: Annotated[bool, typer.Option(
        "--leave-one-set-out", help="with several labels files: also fit on all sets but "
                                    "one and score the one left out, for each set (the "
                                    "transfer estimate)")] = False,
    quiet: QuietOption = False,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
) -> None:
    """Fit P(credible) on the labelled pages of an index, with nested grouped CV.

    Reports the pooled out-of-fold AUC (no group scored by a model or a configuration choice
    that saw it) with a 95% bootstrap interval over groups, then refits on every labelled page.
    Progress (features, then fits) is shown on stderr when it is a terminal (never with
    --quiet or when stderr is a file or a pipe).

    Cost, for n pages in F folds (F = G groups up to 20, else 10) and C = 9 configurations:
    n embedder calls (none for pages already in --cache), then C·(F² + F)/2 + 1 logistic fits
    of O(T·n·d) each (T ≤ 500 L-BFGS iterations, d ≈ 400 columns), warm-started along L2 and
    spread over --jobs processes; with several labels files, --leave-one-set-out adds
    C·S(S − 1)/2 + S fits for S sets.
    """
    if index_dir is None:
        fail("--index: required (the index holding the labelled pages)")
    if out is None:
        fail("--out: required (the model file to write)")
    if group_by not in GROUP_BY:
        fail(f"--group-by: expected one of {', '.join(GROUP_BY)}, got {group_by!r}")
    if leave_one_set_out and len(labels) < 2:
        fail("--leave-one-set-out: needs at least 2 labels files (one per set)")
    try:
        rows = [read_labels(p) for p in labels]  # a bad labels file is refused before the index
        with open_store(index_dir) as idx:
            emb = get_embedder(idx.manifest.embedder)
            with Bars(show_progress(quiet)) as bars:
                result = fit_from_labels(
                    rows if len(rows) > 1 else rows[0], idx, emb, group_by=group_by,
                    seed=seed, n_jobs=fitting.jobs(jobs), cache_dir=cache,
                    leave_one_set_out=leave_one_set_out,
                    on_features=bars.counter("features (pages)"),
                    on_progress=bars.counter("grouped CV fits"),
                    on_transfer=bars.counter("leave-one-set-out fits"))
        save_model(out, result.document)
    except (ValueError, StoreError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))
    report = {**result.report, "model": str(out)}
    if report["self_labelled"]:  # on stderr with --json too: a model may have learnt the label
        warn(f"{report['self_labelled']} of {report['n_pages']} labelled pages carry a "
             "credibility label in their own text ('Low credibility of text:' and the like): "
             "a model can learn the label instead of the page; strip it before indexing "
             "(the NewsPolluted trap of the CAG data)")
    if report["matching"]["outvoted"]:
        warn(f"{report['matching']['outvoted']} label rows disagree with the majority of their "
             "page's rows and were outvoted (conflicting duplicates; e.g. "
             f"{report['matching']['outvoted_examples'][0]})")
    if as_json:
        print(json.dumps(report, indent=2))
        return
    if report["unknown"]:
        warn(f"{report['unknown']} label rows name pages that are not in the index (skipped)")
    console.print(_summary(report, out), highlight=False)
