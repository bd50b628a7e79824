"""``credrank bench NAME``: one bench from the registry, as tables, JSON or a report folder."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import err, fail
from credrank.evaluate.bench import dump_json
from credrank.evaluate.report import markdown_sections, write_report
from credrank.experiments.benches import BENCHES, BenchOptions, run_bench


def bench(
    name: Annotated[str, typer.Argument(
        help=" | ".join(BENCHES))],
    path: Annotated[Path | None, typer.Option(help="the data file (see docs/bench.md)")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    out: Annotated[Path | None, typer.Option(
        help="write report.md, plots, TREC runs and per-query tables here")] = None,
    embedder: Annotated[str, typer.Option(help="minilm (default) or hashing")] = "minilm",
    cache: Annotated[Path | None, typer.Option(
        help="embedding cache folder (reused across runs)")] = None,
    table: Annotated[list[Path] | None, typer.Option(
        "--table", help="domain table CSV for URL sets; repeatable")] = None,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Baseline vs credibility-aware systems on one data set, with intervals and tests."""
    command = "credrank bench " + " ".join(sys.argv[2:])
    try:
        result = run_bench(name, BenchOptions(path, embedder, cache, seed, tuple(table or ())))
    except (ValueError, OSError) as exc:
        fail(str(exc))
    if out is not None:
        report = write_report(result, out, result.qrels, command)
        err.print(f"report written to {report}")
    if as_json:
        print(dump_json(result))
        return
    _print_bench(result)


def _print_bench(result: Any) -> None:
    """The bench tables as Markdown (the same tables report.md holds)."""
    print(f"credrank bench {result.name} — {result.path}")
    print(f"data: {json.dumps(result.summary)}")
    print(f"settings: {json.dumps(result.settings)}\n")
    for title, body in markdown_sections(result):
        print(f"## {title}\n\n{body}\n")
