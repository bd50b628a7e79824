"""``credrank search``: credibility-aware search over an index."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.cli.common import console, err, fail, hit_cell
from credrank.cli.index import (
    ApiKeyEnvOption,
    EngineOption,
    QdrantPathOption,
    QdrantUrlOption,
    check_index_option,
    store_options,
)
from credrank.cli.specs import (
    PipelineOption,
    SetOption,
    TextOption,
    shortcut_options,
    spec_of,
    spec_words,
)
from credrank.core.hittext import DEFAULT_TEXT, check_text
from credrank.index.store import StoreError, read_manifest

if TYPE_CHECKING:  # imported where used: a cold `credrank search` pays only for what it runs
    from credrank.core.candidates import Candidates
    from credrank.documents import Query
    from credrank.pipeline.spec import PipelineSpec
    from credrank.searcher import Searcher


@shortcut_options()
def search(
    query: Annotated[str | None, typer.Argument(
        help="the query text (or --queries FILE for a batch)")] = None,
    index_dir: Annotated[Path | None, typer.Option("--index", help="index directory")] = None,
    queries: Annotated[Path | None, typer.Option(
        "--queries", help="batch: a file of queries — .txt (one per line, id = line number), "
                          ".tsv (id<TAB>query) or .jsonl ({id, text|query}); the model loads "
                          "once; one JSON line per query on stdout")] = None,
    trec_run: Annotated[Path | None, typer.Option(
        "--trec-run", help="with --queries: write a TREC run (qid Q0 doc rank score tag) to "
                           "this file instead of JSON lines")] = None,
    run_tag: Annotated[str, typer.Option(help="the tag column of --trec-run")] = "credrank",
    shortcuts: dict[str, Any] | None = None,
    pipeline: PipelineOption = None,
    set_param: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
    text: TextOption = DEFAULT_TEXT,
    engine: EngineOption = None,
    qdrant_url: QdrantUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    qdrant_path: QdrantPathOption = None,
) -> None:
    """Credibility-aware search: score = sim × λ(source type) over an expanded pool.

    With --queries FILE, every query of the file runs through one pipeline (the model loads
    once): JSON lines on stdout, or a TREC run with --trec-run.

    While `credrank index` writes the index, search exits 2 (retry when it has finished).
    """

    if index_dir is None:
        fail("--index: required (the index directory to search)")
    if (query is None) == (queries is None):
        fail("give either a QUERY or --queries FILE (one of them)")
    if trec_run is not None and queries is None:
        fail("--trec-run: only with --queries FILE")
    if trec_run is not None and as_json:
        fail("--trec-run and --json exclude each other: the run file, or JSON lines on stdout")
    if query is not None and not query.strip():
        fail("query: expected non-empty text")
    try:
        check_text(text, "--text")
    except ValueError as exc:
        fail(str(exc))
    if not run_tag.strip() or any(c.isspace() for c in run_tag):
        fail(f"--run-tag: expected one word without spaces, got {run_tag!r}")
    options = store_options(engine, qdrant_url, api_key_env, qdrant_path)
    _prefetch_embedder(index_dir)  # the model loads while the search stack is imported
    try:  # the options' errors before the index's
        spec = spec_of(pipeline, set_param, shortcuts)
    except ValueError as exc:
        fail(str(exc))
    check_index_option(index_dir)
    from credrank.documents import read_queries
    from credrank.index.embed import get_embedder
    from credrank.index.opener import open_store
    from credrank.pipeline.compile import check_stages
    from credrank.pipeline.spec import SpecError
    from credrank.searcher import Searcher

    try:
        try:  # the files the stages name are read before the index is opened
            check_stages(spec)
        except SpecError as exc:
            raise ValueError(spec_words(exc, spec, pipeline, set_param)) from None
        batch = read_queries(queries) if queries is not None else None
        if trec_run is not None:
            _check_writable(trec_run)
        idx = open_store(index_dir, **options)
        with idx:
            searcher = Searcher(idx, get_embedder(idx.manifest.embedder))
            try:
                if batch is not None:
                    _run_batch(searcher, batch, spec, trec_run, run_tag, text)
                    return
                assert query is not None  # one of QUERY and --queries, checked above
                doc = searcher.search_json(query, spec, text=text)
            except SpecError as exc:
                raise ValueError(spec_words(exc, spec, pipeline, set_param)) from None
    except (ValueError, StoreError, RuntimeError) as exc:
        fail(str(exc))
    except OSError as exc:  # a file named by an option that cannot be read
        fail(f"{exc.filename or 'file'}: cannot read: {exc.strerror or exc}")
    if as_json:
        print(json.dumps(doc, indent=2, default=str))
        return
    from rich.table import Table

    stage_names = {s.name for s in spec.stages}
    table = Table(title=f"{query}", show_lines=False)
    # a column per factor the stages wrote besides the prior (credibility, planted, …)
    extra = [name for name in (doc["hits"][0]["score_breakdown"] if doc["hits"] else {})
             if name not in ("retrieval_score", "prior", "final")]
    score = "bm25" if spec.retrieval == "bm25" else "sim"  # --lexical: a BM25 score
    for col in ("#", "doc", "source type", "host", score, "prior", *extra, "final"):
        table.add_column(col)
    table.add_column("title · text" if text != "none" else "title", ratio=1,
                     min_width=30, overflow="fold")
    for h in doc["hits"]:
        b = h["score_breakdown"]
        table.add_row(str(h["rank"]), h["doc_id"], str(h["source_type"]), str(h["host"]),
                      f"{b['retrieval_score']:.4f}", f"{b.get('prior', 1.0):.2f}",
                      *(f"{b.get(name, 1.0):.2f}" for name in extra), f"{b['final']:.4f}",
                      hit_cell(h, doc["query"]))
    console.print(table)
    if "consensus" in stage_names:
        console.print(consensus_summary(doc["info"]["consensus"]), highlight=False,
                      soft_wrap=True)
    if "freshness" in doc["info"]:
        console.print(freshness_summary(doc["info"]["freshness"],
                                        [h["doc_id"] for h in doc["hits"]]),
                      highlight=False, soft_wrap=True)


def _prefetch_embedder(index_dir: Path) -> None:
    """Start loading the index's embedder in the background when it is the ONNX MiniLM
    (:func:`credrank.index.embed.prefetch_embedder`); the manifest is peeked at, not
    validated (open_store does that), and any problem here is left to the normal path."""
    try:
        manifest = read_manifest(index_dir)
    except StoreError:
        return
    name = manifest.embedder if manifest is not None else None
    if isinstance(name, str):
        from credrank.index.embed import prefetch_embedder

        prefetch_embedder(name)


def freshness_summary(info: dict[str, Any], shown: list[str] | None = None) -> str:
    """The freshness lines under the table: T, τ, the undated policy and the counts over the
    pool, then the shown hits (``shown``; all when ``None``) with ``age: unknown`` or a date
    after ``T`` (clamped)."""
    counts = info["counts"]
    undated = info["undated"]
    weight = "" if undated["weight"] is None else f" = {undated['weight']:.4g}"
    lines = [f"freshness: now {info['now']}, half-life {info['half_life']:g} d"
             f"{' (per config)' if 'half_lives' in info else ''}; undated: "
             f"{undated['policy']}{weight}; {counts['dated']} dated, {counts['undated']} "
             f"undated, {counts['excluded']} excluded, {counts['clamped']} clamped"]
    keep = set(shown) if shown is not None else None
    for key, label in (("unknown_age", "age: unknown"),
                       ("clamped", "dated after now (clamped to now)")):
        ids = [d for d in info.get(key, []) if keep is None or d in keep]
        if ids:
            lines.append(f"  {label} — {', '.join(ids)}")
    return "\n".join(lines)


def consensus_summary(info: dict[str, Any]) -> str:
    """The consensus lines under the table: status, the top answer or the competing ones."""
    status = info["status"]
    if status == "no answers":
        return "consensus: no answers (no candidate passage answers the query; ranking unchanged)"
    lines = [f"consensus: {status} (top share {info['share']:.2f}, threshold "
             f"{info['threshold']:.2f})" + (f": {info['answer']}" if info["answer"] else "")]
    shown = info["answers"] if status == "contested" else info["answers"][:1]
    for a in shown:
        lines.append(f"  {a['answer']!r}: share {a['share']:.2f}, {a['voices']} voice(s), "
                     f"passages {', '.join(a['doc_ids'])}")
    return "\n".join(lines)


def _run_batch(searcher: Searcher, batch: list[Query], spec: PipelineSpec,
               trec_run: Path | None, tag: str, text: str = DEFAULT_TEXT) -> None:
    """Every query of ``batch`` through one pipeline: JSON lines on stdout (the ``--json``
    document of each query, compact, with its ``query_id``, each hit with ``text`` as
    ``--text`` says) or a TREC run file (no text read)."""
    from credrank.pipeline.document import search_document

    described = searcher.compile(spec).settings
    results = searcher.search_many(((q.id, q.text) for q in batch), spec,
                                   text="none" if trec_run is not None else text)
    if trec_run is None:
        for (qid, result), q in zip(results, batch, strict=True):
            doc = search_document(q.text, described, result, text=text, query_id=qid)
            sys.stdout.write(json.dumps(doc, default=str, separators=(",", ":")) + "\n")
        return
    tmp = trec_run.with_name(trec_run.name + ".partial")
    try:
        _write_run(tmp, results, tag)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(trec_run)  # a complete run file or none
    err.print(f"{len(batch)} queries; TREC run in {trec_run}")


def _write_run(path: Path, results: Iterable[tuple[str, Candidates]], tag: str) -> None:
    with path.open("w", encoding="utf-8") as out:
        for qid, result in results:
            for rank, (doc_id, score) in enumerate(
                    zip(result.doc_ids, result.score, strict=True), 1):
                if any(c.isspace() for c in f"{qid}{doc_id}"):
                    raise ValueError(f"--trec-run: query {qid!r} / document {doc_id!r}: a TREC "
                                     "run cannot hold ids with whitespace; use JSON lines")
                out.write(f"{qid} Q0 {doc_id} {rank} {float(score):.6f} {tag}\n")


def _check_writable(path: Path) -> None:
    if path.is_dir():
        raise ValueError(f"--trec-run {path}: expected a file path, got a directory")
    if not path.parent.is_dir():
        raise ValueError(f"--trec-run {path}: the folder {path.parent} does not exist")
