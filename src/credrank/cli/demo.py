"""``credrank demo``: the main job on the embedded default, on the packaged demo set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from credrank.cli.common import QuietOption, console, fail, progress, show_progress, table_console
from credrank.demo import MEASURES, run_demo
from credrank.index.embed import get_embedder


def demo(
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    index_dir: Annotated[Path | None, typer.Option(
        "--index", help="keep the demo index here (default: a temporary folder)")] = None,
    embedder: Annotated[str, typer.Option(help="minilm (default) or hashing")] = "minilm",
    quiet: QuietOption = False,
) -> None:
    """Index the synthetic health corpus and compare similarity-only with source priors."""

    try:
        emb = get_embedder(embedder)
    except ValueError as exc:
        fail(str(exc).replace("embedder:", "--embedder:", 1))
    from credrank.index.store import StoreError

    try:
        with progress(show_progress(quiet)) as bar:
            task = bar.add_task("indexing demo corpus", total=None)
            result = run_demo(index_dir, embedder=emb,
                              on_progress=lambda n: bar.advance(task, n))
    except (ValueError, StoreError) as exc:  # the --index given: another embedder's, a
        # file, a read-only folder, a user's own index (it was a traceback, exit 1)
        message = str(exc)
        fail(message if index_dir is None or message.startswith(str(index_dir))
             else f"--index {index_dir}: {message}")
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
        return
    out = table_console()  # a log or a pipe: tables as wide as their cells, nothing cropped
    console.print(f"demo corpus (synthetic test material): {result.report.summary()}",
                  soft_wrap=True)
    console.print(f"embedder {emb.name}, top_k {result.settings['top_k']}, fetch_k "
                  f"{result.settings['fetch_k']}, combine = max(cos, 0) × λ(source type)",
                  soft_wrap=True)
    table = Table(title="similarity only vs credibility-aware (10 queries, means)")
    table.add_column("system")
    for m in MEASURES:
        table.add_column(m.replace("RR", "MRR").replace("harmful@5", "adv. hit rate@5"),
                         justify="right")
    for system, values in result.means.items():
        table.add_row(system, *(f"{values[m]:.3f}" for m in MEASURES))
    out.print(table)
    ex = result.example
    for label, key in (("similarity only", "similarity_only"), ("current priors",
                                                                 "current_priors")):
        t = Table(title=f"{ex['query_id']}: {ex['query']} — {label}")
        for col in ("#", "doc", "source type", "host", "sim", "prior", "final", "adv."):
            t.add_column(col, overflow="fold")  # a long host folds, never cut to "…"
        for h in ex[key]:
            b = h["score_breakdown"]
            t.add_row(str(h["rank"]), h["doc_id"], str(h["source_type"]),
                      h["host"] if h["host"] else "—",
                      f"{b['retrieval_score']:.4f}", f"{b.get('prior', 1.0):.2f}",
                      f"{b['final']:.4f}", "yes" if h["adversarial"] else "")
        out.print(t)
