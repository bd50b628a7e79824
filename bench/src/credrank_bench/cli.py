"""``credrank bench NAME``: one bench from the registry, as tables, JSON or a report folder.

A command of the bench distribution: the product's ``credrank`` finds it through the entry
point ``bench`` of the group ``credrank.commands`` (:data:`credrank_bench.commands.BENCH`).

On stdout: the tables drawn by rich (in a terminal at its width; to a file or a pipe as plain
text, :data:`PLAIN_WIDTH` columns unless ``$COLUMNS`` says otherwise, wider where a table's
longest words need it: plain text never breaks a word), or with ``--json`` the data only. The
Markdown report goes to ``--report PATH`` (default ``report.md`` in the current folder: an
earlier bench's report there is replaced, any other file only with ``--force``; none by
default with ``--json`` or ``--out``, whose folder holds its own ``report.md``, with this
bench's limits, a full-precision ``per_query.csv`` and ``manifest.json``, the list of the
files written, which ``--force`` replaces). Progress goes to stderr when it is a terminal,
never with ``--quiet``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.cli.common import Bars, QuietOption, err, fail, show_progress

if TYPE_CHECKING:  # the benches are imported when one runs (scipy, every stage), not for --help
    from rich.console import Console, RenderableType

    from credrank.evaluate.result import BenchResult
    from credrank.evaluate.tables import ResultTable

#: the width of the plain-text tables written to a file or a pipe (``$COLUMNS`` wins)
PLAIN_WIDTH = 160
#: ``--report``'s default when neither ``--json`` nor ``--out`` is given
DEFAULT_REPORT = Path("report.md")

#: the names of :data:`credrank_bench.experiments.benches.BENCHES`, in its order, for --help
#: without importing the benches (tests/test_cli_startup.py checks that they agree)
BENCH_NAMES = ("demo", "trec2019-hm", "newspolluted", "cram-nq", "evotemp", "ramdocs",
               "poisonedrag", "stress-cram", "stress-news", "stress-poisonedrag", "realtimeqa",
               "coaid-priors", "goldengaze-hosts", "ra-rag-simulation")


def bench(
    name: Annotated[str, typer.Argument(
        help=" | ".join(BENCH_NAMES))],
    path: Annotated[Path | None, typer.Option(
        help="the data file (a folder for coaid-priors; a week file or a folder of weeks for "
             "realtimeqa; see docs/results.md)")] = None,
    corpus: Annotated[Path | None, typer.Option(
        help="a second data file for benches that combine two (poisonedrag: the CrAM NQ "
             "JSONL whose real passages are the clean corpus; default: "
             "<path>/../../cram/cram_nq_1000_reconstructed.jsonl)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    out: Annotated[Path | None, typer.Option(
        help="write report.md, result.json, plots, TREC runs and per-query values here")
    ] = None,
    embedder: Annotated[str, typer.Option(
        help="minilm (default) or hashing; refused by the benches that embed no text "
             "(coaid-priors, goldengaze-hosts, ra-rag-simulation)")] = "minilm",
    cache: Annotated[Path | None, typer.Option(
        help="embedding cache folder (reused across runs; benches that embed text)")] = None,
    table: Annotated[list[Path] | None, typer.Option(
        "--table", help="domain table CSV typing the URLs of demo and trec2019-hm; "
                        "repeatable (other benches refuse it)")] = None,
    seed: Annotated[int, typer.Option(
        min=0, help="seed of the benches' random draws (bootstrap resamples, splits, noisy "
                    "types, simulations, anchor sets); refused by coaid-priors, which draws "
                    "nothing")] = 0,
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
    machine_text: Annotated[bool, typer.Option(
        "--machine-text", help="newspolluted, cram-nq, evotemp, trec2019-hm and stress-*: add "
             "the machine-text rows (similarity × machine_text, and with planted); every passage "
             "is first scored with SmolLM2 (the lm extra; ≈ 0.2 s per passage on 2 free "
             "cores: CrAM NQ's 5,000 take 15–30 min), kept under --cache so that a rerun "
             "pays nothing")] = False,
    force: Annotated[bool, typer.Option(
        "--force", help="overwrite a report already in --out (the files its manifest.json "
                        "lists), or a report.md no bench wrote when --report is not "
                        "given")] = False,
    report: Annotated[Path | None, typer.Option(
        "--report", help="write the Markdown report here (default: report.md in the current "
                         "folder, unless --json or --out is given; an existing one that no "
                         "bench wrote only with --force)")] = None,
    quiet: QuietOption = False,
) -> None:
    """Baseline vs credibility-aware systems on one data set, with intervals and tests.

    Prints the tables (rich; plain text when stdout is a file or a pipe) and writes the
    Markdown report to --report; --json prints the data only. Progress (embedding, pools,
    systems × queries per table) is shown on stderr when it is a terminal (never with --quiet
    or when stderr is a file or a pipe)."""
    from credrank.cram.models import WhiteBoxError
    from credrank.evaluate.report import prepare_out_dir, remove_created, write_report
    from credrank.evaluate.result import dump_json
    from credrank_bench.experiments.benches import BenchOptions

    command = "credrank bench " + " ".join(sys.argv[2:])
    given = written_options()
    default_report = report is None and not as_json and out is None
    if force and out is None and not default_report and (given is None or "force" in given):
        fail("--force is only used with --out or the default report.md (it overwrites a "
             "report already there); got --force with "
             + ("--json" if report is None else f"--report {report}"))
    if default_report:
        report = DEFAULT_REPORT
        if report.exists() and not force and not _bench_report(report):
            # the user never named it: a file no bench wrote is never overwritten
            fail(f"{report} already exists in this folder and is no bench report (the "
                 "default --report); pass --force to overwrite it, or --report PATH to write "
                 "the report elsewhere")
    if report is not None:
        check_report_path(report)  # before the bench runs: benches can take minutes
    created: list[Path] = []
    if out is not None:
        # checked before the bench runs: benches can take minutes
        try:
            created = prepare_out_dir(out, force=force)
        except ValueError as exc:
            fail(str(exc))
    try:
        with Bars(show_progress(quiet)) as bars:
            result = run_bench(name, BenchOptions(
                path, embedder, cache, seed, tuple(table or ()), corpus, generator=generator,
                model=model, heads=heads, limit=limit, positions=positions, counts=counts,
                checkpoint=checkpoint, prefix=prefix, machine_text=machine_text,
                on_progress=bars.steps(), given=given))
    except (ValueError, OSError, WhiteBoxError, RuntimeError) as exc:
        remove_created(created)
        fail(str(exc))
    if out is not None:
        try:
            written = write_report(result, out, command)
        except OSError as exc:
            fail(f"--out {out}: writing the report failed: {exc}")
        err.print(f"report written to {written}", soft_wrap=True, highlight=False)
    if report is not None:
        try:
            report.write_text(markdown(result, command), encoding="utf-8")
        except OSError as exc:
            fail(f"--report {report}: writing the Markdown report failed: {exc}")
        err.print(f"Markdown report written to {report}", soft_wrap=True, highlight=False)
    if as_json:
        print(dump_json(result))
        return
    print_tables(result, stdout_console())


def written_options() -> frozenset[str] | None:
    """The parameters of the running ``credrank bench`` written on the command line (or in
    the environment), from click's parameter sources; a default, or a value from a
    ``credrank.toml`` (click's ``default_map``), is not written. ``None`` outside a click
    command (a direct call): then the benches compare values with the defaults."""
    import importlib

    # click's context stack, or the copy typer vendors: whichever typer.Context derives from
    base = next(c for c in typer.Context.__mro__
                if c.__name__ == "Context" and c.__module__.endswith(".core"))
    core = sys.modules[base.__module__]
    ctx = importlib.import_module(f"{core.__package__}.globals").get_current_context(
        silent=True)
    if ctx is None:
        return None
    written = ("COMMANDLINE", "ENVIRONMENT", "PROMPT")
    return frozenset(name for name in ctx.params
                     if getattr(ctx.get_parameter_source(name), "name", None) in written)


def run_bench(name: str, options: Any) -> BenchResult:
    """:func:`credrank_bench.experiments.benches.run_bench`, imported when a bench runs."""
    from credrank_bench.experiments.benches import run_bench as run

    return run(name, options)


def _bench_report(path: Path) -> bool:
    """Whether ``path`` is a report a bench wrote (its first line ``# credrank bench …``):
    the default ``report.md`` of an earlier run, replaced by the next one."""
    try:
        with path.open(encoding="utf-8", errors="replace") as fh:
            return fh.readline().startswith("# credrank bench ")
    except OSError:
        return False


def check_report_path(report: Path) -> None:
    """``--report``: a file we can write (its folder exists, it is not a folder); exit 2
    otherwise."""
    if report.is_dir():
        fail(f"--report {report}: expected a file to write, got a folder")
    parent = report.parent
    if parent.exists() and not parent.is_dir():
        fail(f"--report {report}: expected a file in a folder, got a path under the file "
             f"{parent}")
    if not parent.is_dir():
        fail(f"--report {report}: the folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (report.exists() and not os.access(report, os.W_OK)):
        fail(f"--report {report}: not writable")


def markdown(result: BenchResult, command: str = "") -> str:
    """The bench's Markdown report: what ran, the data, the settings, then every table (the
    rendering of report.md, :mod:`credrank.evaluate.render`)."""
    from credrank.evaluate.render import sections
    from credrank.evaluate.report import report_head

    lines = [*report_head(result, command),
             "## Settings", "", "```json", _json(result.settings, 2), "```", "",
             "## Data", "", "```json", _json(result.summary, 2), "```", ""]
    for title, body, _ in sections(result):
        lines += [f"## {title}", "", body, ""]
    if result.notes:
        lines += ["## Notes from the data reader", "", *(f"- {n}" for n in result.notes), ""]
    limits = result.details.get("limits")
    if isinstance(limits, list) and limits:
        lines += ["## Limits", "", *(f"- {n}" for n in limits), ""]
    return "\n".join(lines)


def _json(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


def stdout_console() -> Console:
    """The console of the tables: a terminal's own width; a file or a pipe gets plain text
    (no colour) :data:`PLAIN_WIDTH` columns wide unless ``$COLUMNS`` is set."""
    from rich.console import Console

    probe = Console(markup=False)
    wide = probe.is_terminal or os.environ.get("COLUMNS")
    return Console(markup=False, highlight=False, width=None if wide else PLAIN_WIDTH)


def print_tables(result: BenchResult, console: Console) -> None:
    """The bench's tables as rich tables (no Markdown): a heading with the data and the
    settings, then each table with its notes, then the legend."""
    from rich.text import Text

    from credrank.evaluate.render import LEGEND

    console.print(Text(f"credrank bench {result.name} — {result.path}", style="bold"),
                  soft_wrap=True)
    console.print(f"data: {_json(result.summary)}", soft_wrap=True)
    console.print(f"settings: {_json(result.settings)}", soft_wrap=True)
    for a in result.absent_signals:
        console.print(Text.assemble(("absent signal: ", "yellow"),
                                    f"{a.signal}: {a.reason}; system not run: {a.system}"))
    for table in result.tables:
        console.print()
        for width in (24, 16, 12, 0):  # the systems' reserved width gives way first
            parts = table_renderables(table, label_width=width,
                                      whole_words=not console.is_terminal)
            if _fits(console, parts):
                break
        for part in parts:
            # too wide still: a terminal wraps the lines, nothing cut; plain text (a file, a
            # pipe) is as wide as its columns' longest words need (no word broken in two)
            console.print(part, crop=False)
    if any(t.columns for t in result.tables):
        console.print()
        console.print(Text(LEGEND, style="dim"))


def _fits(console: Console, parts: list[RenderableType]) -> bool:
    """Whether every line of ``parts`` fits the console's width."""
    from rich.segment import Segment

    for part in parts:
        lines = Segment.split_lines(console.render(part, console.options))  # uncropped
        if any(Segment.get_line_length(line) > console.width for line in lines):
            return False
    return True


def table_renderables(table: ResultTable, label_width: int = 24, whole_words: bool = False
                      ) -> list[RenderableType]:
    """One result table for the terminal: its title, its notes, the grid (each cell's Δ line
    below its mean; the systems' column at least ``label_width`` wide where its labels are)
    and the notes of single rows. ``whole_words`` (plain text: a file or a pipe): every column
    at least as wide as its longest word, so that a name or a header is wrapped at spaces
    only, never broken inside a word (the table may then be wider than the console)."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from credrank.evaluate import render

    out: list[RenderableType] = [Text(table.title, style="bold underline")]
    if table.notes:
        out.append(Text(render.notes_paragraph(table.notes), style="dim"))
    params = render.param_names(table)
    two_lines = any(c.delta is not None for r in table.rows for c in r.metrics.values())
    grid = Table(box=box.SIMPLE_HEAD, show_lines=two_lines)  # a rule between two-line rows
    labels = [render.row_label(table, row) for row in table.rows]
    params_text = [[render.param(row.params[k]) if k in row.params else "" for k in params]
                   for row in table.rows]
    cells = [[render.cell(row.metrics.get(c.name), br="\n") for c in table.columns]
             for row in table.rows]
    heads = [table.row_header, *params,
             *(f"{c.name} {render.ARROWS[c.direction]}" for c in table.columns)]
    texts = [[label, *p, *c] for label, p, c in zip(labels, params_text, cells, strict=True)]

    def longest_word(i: int) -> int:
        return max((len(w) for t in [heads[i], *(r[i] for r in texts)] for w in t.split()),
                   default=0)

    floors = [longest_word(i) if whole_words else 0 for i in range(len(heads))]
    # the systems keep a readable width; nothing is cut to an ellipsis
    grid.add_column(table.row_header, overflow="fold",
                    min_width=max(min(label_width, max(map(len, labels), default=0)),
                                  floors[0]) or None)
    for i, k in enumerate(params, 1):
        grid.add_column(k, overflow="fold", min_width=floors[i] or None)
    for i in range(1 + len(params), len(heads)):
        grid.add_column(heads[i], justify="right", overflow="fold",
                        min_width=floors[i] or None)
    for row in texts:
        grid.add_row(*(Text(t) for t in row))
    out.append(grid)
    out += [Text(f"- {r.system}: {n}") for r in table.rows for n in r.notes]
    return out
