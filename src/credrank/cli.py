"""The ``credrank`` command line (typer + rich). JSON outputs are documented in docs/json.md."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Source credibility in the retrieval step of RAG.")
console = Console()
err = Console(stderr=True)


def _fail(message: str, code: int = 2) -> None:
    err.print(f"[red]error:[/red] {message}")
    raise typer.Exit(code)


def _progress() -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err, transient=False)


@app.command()
def index(
    corpus: Annotated[Path, typer.Argument(help="JSONL, CSV, Parquet file or BEIR folder")],
    index_dir: Annotated[Path, typer.Option("--index", help="index directory")],
    table: Annotated[list[Path] | None, typer.Option(
        "--table",
        help="domain table CSV (domain,source_type or domain,score); repeatable")] = None,
    trust_declared: Annotated[bool, typer.Option(
        help="use a record's declared source_type instead of its URL")] = False,
    embedder: Annotated[str, typer.Option(help="minilm (default) or hashing (tests)")] = "minilm",
    rejects: Annotated[Path | None, typer.Option(help="rejects file (JSONL)")] = None,
    strict: Annotated[bool, typer.Option(help="exit non-zero when any record is rejected")] = False,
    batch_size: Annotated[int, typer.Option(min=1)] = 64,
    field: Annotated[list[str] | None, typer.Option(
        "--field", help="rename a column: FILE_NAME=SCHEMA_NAME, e.g. body=text; repeatable")
    ] = None,
) -> None:
    """Index CORPUS into DIR (incremental; an interrupted run is completed by re-running)."""
    from credrank.corpus import iter_documents, write_rejects
    from credrank.index.build import index_documents
    from credrank.index.edge import EdgeIndex, IndexError_
    from credrank.index.embed import get_embedder
    from credrank.provenance import SourceTyper

    if not corpus.exists():
        _fail(f"{corpus}: no such file or folder")
    fields = {}
    for item in field or []:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            _fail(f"--field: expected FILE_NAME=SCHEMA_NAME, got {item!r}")
        fields[old] = new
    try:
        typer_ = SourceTyper(table or [], trust_declared=trust_declared)
        emb = get_embedder(embedder)
        idx = EdgeIndex.open(index_dir, embedder=emb.name, dim=emb.dim, create=True)
    except (ValueError, IndexError_, RuntimeError) as exc:
        _fail(str(exc))
    total = _count_lines(corpus)
    with idx, _progress() as progress:
        task = progress.add_task(f"indexing {corpus.name}", total=total)
        try:
            report = index_documents(iter_documents(corpus, fields=fields or None), idx, emb,
                                     typer_,
                                     batch_size=batch_size,
                                     on_batch=lambda n: progress.advance(task, n))
        except ValueError as exc:  # a file-level problem (header, format): nothing to index
            _fail(str(exc))
        idx.optimize()  # merge segments, build the HNSW graph where the corpus is large
        size = len(idx)
    rejects_path = rejects or index_dir / "rejects.jsonl"
    write_rejects(report.rejects, rejects_path)
    for r in report.rejects[:10]:
        err.print(f"[yellow]rejected[/yellow] {r.message}")
    if report.rejected > 10:
        err.print(f"… {report.rejected - 10} more in {rejects_path}")
    if report.conflicts:
        used = "declared type used (--trust-declared)" if trust_declared else "URL used"
        err.print(f"{len(report.conflicts)} declared source types conflict with the URL "
                  f"({used}), e.g. {report.conflicts[0][0]}: {report.conflicts[0][1]}")
    console.print(f"{report.summary()}; index holds {size} documents; rejects in {rejects_path}")
    if strict and report.rejected:
        raise typer.Exit(1)


def _count_lines(path: Path) -> int | None:
    """Records in a JSONL file (its non-blank lines), for the progress bar; else unknown."""
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return None
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip())


def _parse_params(items: list[str] | None) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; values become int, float or bool where they parse as such."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--select-param: expected KEY=VALUE, got {item!r}")
        value: Any = raw
        if raw.lower() in ("true", "false"):
            value = raw.lower() == "true"
        else:
            for cast in (int, float):
                try:
                    value = cast(raw)
                    break
                except ValueError:
                    continue
        out[key.strip().replace("-", "_")] = value
    return out


def _settings(top_k: int, fetch_k: int | None, priors: str, mode: str, lexical: bool,
              pushdown: bool | None, domain_scores: bool) -> Any:
    from credrank.search import SearchSettings

    return SearchSettings(top_k=top_k, fetch_k=fetch_k,
                          priors=None if priors == "none" else priors, mode=mode,
                          lexical=lexical, pushdown=pushdown, use_domain_scores=domain_scores)


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="the query text")],
    index_dir: Annotated[Path, typer.Option("--index", help="index directory")],
    top_k: Annotated[int, typer.Option("--top-k", min=1)] = 10,
    fetch_k: Annotated[int | None, typer.Option(
        "--fetch-k", min=1, help="candidate pool (default 3 × top-k)")] = None,
    priors: Annotated[str, typer.Option(
        help="compressed | current | aggressive | none | a TOML/YAML file")] = "current",
    mode: Annotated[str, typer.Option(help="multiply | linear | rrf")] = "multiply",
    lexical: Annotated[bool, typer.Option(help="BM25 instead of dense retrieval")] = False,
    pushdown: Annotated[bool | None, typer.Option(
        "--pushdown/--no-pushdown",
        help="score inside the engine (formula query); default: whenever the options allow")
    ] = None,
    domain_scores: Annotated[bool, typer.Option(
        help="use domain,score table scores as priors where matched")] = False,
    priors_store: Annotated[Path | None, typer.Option(
        help="use the current version of a feedback store (credrank priors) as priors")] = None,
    source_reliability: Annotated[Path | None, typer.Option(
        help="--json output of `credrank reliability estimate`: per-source reliability as the "
             "prior, shrunk toward the type prior (m = 5)")] = None,
    select: Annotated[str | None, typer.Option(
        help="selection after scoring: mmr | coverage | exposure | fair (default top-k)")] = None,
    select_param: Annotated[list[str] | None, typer.Option(
        "--select-param", "-P",
        help="selector parameter KEY=VALUE, repeatable: mmr diversity=0.5; coverage "
             "lambda_ilad=0.3 lambda_coverage=0.5 [n_clusters=4 intent_column=…]; exposure "
             "group_column=source_type rule=parity|proportional [seed=0]; fair "
             "protected_column=source_type protected_value=blog p=0.5 alpha=0.1")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
) -> None:
    """Credibility-aware search: score = sim × λ(source type) over an expanded pool."""
    from credrank.index.edge import EdgeIndex, IndexError_
    from credrank.index.embed import get_embedder
    from credrank.search import build_pipeline, describe

    try:
        settings = _settings(top_k, fetch_k, priors, mode, lexical, pushdown, domain_scores)
        if priors_store is not None:
            from credrank.signals.feedback import FeedbackPrior, FeedbackPriors

            if not (priors_store / "priors.json").is_file():
                raise ValueError(f"{priors_store}: no feedback store here "
                                 "(create one with `credrank priors init DIR`)")
            if pushdown:
                raise ValueError("--priors-store needs the Python path; drop --pushdown")
            settings.priors = None
            settings.pushdown = False
            settings.extra_stages = [FeedbackPrior(FeedbackPriors(priors_store))]
        if source_reliability is not None:
            from credrank.reliability.prior import ShrunkReliabilityPrior

            if pushdown or priors_store is not None:
                raise ValueError("--source-reliability needs the Python path and replaces "
                                 "--priors-store; drop --pushdown / --priors-store")
            table = settings.prior_table()
            settings.extra_stages = [ShrunkReliabilityPrior.from_estimate_json(
                str(source_reliability), table.values if table else {})]
            settings.priors, settings.pushdown = None, False
        if select:
            from credrank.select.stages import build_selector

            settings.selector = build_selector(select, top_k, **_parse_params(select_param))
            settings.with_vectors = True
        settings.resolved_fetch_k()
        settings.prior_table()
        idx = EdgeIndex.open(index_dir)
        emb = get_embedder(idx.manifest.embedder)
        with idx:
            result = build_pipeline(idx, emb, settings).search(query)
    except (ValueError, IndexError_, RuntimeError) as exc:
        _fail(str(exc))
    hits = result.hits()
    if as_json:
        print(json.dumps({"credrank_search": 1, "query": query, "settings": describe(settings),
                          "hits": hits, "info": result.info}, indent=2, default=str))
        return
    table = Table(title=f"{query}", show_lines=False)
    for col in ("#", "doc", "source type", "host", "sim", "prior", "final"):
        table.add_column(col)
    for h in hits:
        b = h["score_breakdown"]
        table.add_row(str(h["rank"]), h["doc_id"], str(h["source_type"]), str(h["host"]),
                      f"{b['retrieval_score']:.4f}", f"{b.get('prior', 1.0):.2f}",
                      f"{b['final']:.4f}")
    console.print(table)


@app.command()
def demo(
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    index_dir: Annotated[Path | None, typer.Option(
        "--index", help="keep the demo index here (default: a temporary folder)")] = None,
    embedder: Annotated[str, typer.Option(help="minilm (default) or hashing")] = "minilm",
) -> None:
    """Index the synthetic health corpus and compare similarity-only with source priors."""
    from credrank.demo import MEASURES, run_demo
    from credrank.index.embed import get_embedder

    emb = get_embedder(embedder)
    with _progress() as progress:
        task = progress.add_task("indexing demo corpus", total=None)
        result = run_demo(index_dir, embedder=emb, on_progress=lambda n: progress.advance(task, n))
    if as_json:
        print(json.dumps(result.to_json(), indent=2))
        return
    console.print(f"demo corpus (synthetic test material): {result.report.summary()}")
    console.print(f"embedder {emb.name}, top_k {result.settings['top_k']}, fetch_k "
                  f"{result.settings['fetch_k']}, combine = max(cos, 0) × λ(source type)")
    table = Table(title="similarity only vs credibility-aware (10 queries, means)")
    table.add_column("system")
    for m in MEASURES:
        table.add_column(m.replace("RR", "MRR").replace("harmful@5", "adv. hit rate@5"),
                         justify="right")
    for system, values in result.means.items():
        table.add_row(system, *(f"{values[m]:.3f}" for m in MEASURES))
    console.print(table)
    ex = result.example
    for label, key in (("similarity only", "similarity_only"), ("current priors",
                                                                 "current_priors")):
        t = Table(title=f"{ex['query_id']}: {ex['query']} — {label}")
        for col in ("#", "doc", "source type", "host", "sim", "prior", "final", "adv."):
            t.add_column(col)
        for h in ex[key]:
            b = h["score_breakdown"]
            t.add_row(str(h["rank"]), h["doc_id"], str(h["source_type"]), str(h["host"]),
                      f"{b['retrieval_score']:.4f}", f"{b.get('prior', 1.0):.2f}",
                      f"{b['final']:.4f}", "yes" if h["adversarial"] else "")
        console.print(t)


@app.command()
def bench(
    name: Annotated[str, typer.Argument(
        help="demo | trec2019-hm | newspolluted | cram-nq | evotemp | ramdocs | coaid-priors | "
             "goldengaze-hosts | ra-rag-simulation")],
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
    from credrank.evaluate.bench import dump_json, run_bench
    from credrank.evaluate.report import write_report

    command = "credrank bench " + " ".join(sys.argv[2:])
    if name == "goldengaze-hosts":
        _bench_goldengaze(path, as_json, out, command)
        return
    if name == "ra-rag-simulation":
        from credrank.reliability.simulate import run_simulation

        _emit_dict(run_simulation(seed=seed), "RA-RAG simulation (Beta(2q/(1-q), 2) sources)",
                   "synthetic (simulated answers)", as_json, out, command)
        return
    try:
        result = run_bench(name, path, embedder_name=embedder, cache_dir=cache, seed=seed,
                           tables=table or [])
    except (ValueError, OSError) as exc:
        _fail(str(exc))
    if out is not None:
        report = write_report(result, out, result.qrels, command)
        err.print(f"report written to {report}")
    if as_json:
        print(dump_json(result))
        return
    _print_bench(result)


def _print_bench(result: Any) -> None:
    """The bench tables as Markdown (the same tables report.md holds)."""
    from credrank.evaluate.report import markdown_sections

    print(f"credrank bench {result.name} — {result.path}")
    print(f"data: {json.dumps(result.summary)}")
    print(f"settings: {json.dumps(result.settings)}\n")
    for title, body in markdown_sections(result):
        print(f"## {title}\n\n{body}\n")


def _bench_goldengaze(path: Path | None, as_json: bool, out: Path | None, command: str) -> None:
    from credrank.reliability.goldengaze import run_goldengaze

    if path is None or not path.exists():
        _fail("bench goldengaze-hosts: --path must name goldengaze_trec2021_host_stances.csv.gz")
    _emit_dict(run_goldengaze(path), "goldengaze-hosts", str(path), as_json, out, command)


def _emit_dict(result: dict[str, Any], title: str, data: str, as_json: bool, out: Path | None,
               command: str) -> None:
    """Print (and with ``--out`` write) a bench that returns a dict with a ``markdown`` table."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "result.json").write_text(json.dumps(result, indent=2, default=str))
        (out / "report.md").write_text(f"# credrank bench {title}\n\nData: `{data}`  \n"
                                       f"Command: `{command}`\n\n{result.get('markdown', '')}\n")
        err.print(f"report written to {out / 'report.md'}")
    if as_json:
        print(json.dumps(result, indent=2, default=str))
    else:
        print(result.get("markdown", result))


def _mount_optional() -> None:
    """Sub-commands that live in their own modules."""
    try:
        from credrank.reliability.cli import app as reliability_app
    except ImportError:  # pragma: no cover
        return
    app.add_typer(reliability_app, name="reliability",
                  help="Source reliability from cross-source agreement (RA-RAG).")
    from credrank.feedback_cli import app as priors_app

    app.add_typer(priors_app, name="priors",
                  help="Versioned, reversible prior updates from relevance feedback.")


_mount_optional()


def main() -> None:
    app()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
