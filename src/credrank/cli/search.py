"""``credrank search``: credibility-aware search over an index."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.cli.common import console, err, fail, hit_cell, parse_params
from credrank.cli.index import (
    ApiKeyEnvOption,
    EngineOption,
    QdrantPathOption,
    QdrantUrlOption,
    check_index_option,
    store_options,
)
from credrank.cli.specs import PipelineOption, SetOption, TextOption, spec_of, spec_words
from credrank.core.hittext import DEFAULT_TEXT, check_text
from credrank.index.store import MAX_K, StoreError, read_manifest

if TYPE_CHECKING:  # imported where used: a cold `credrank search` pays only for what it runs
    from credrank.core.candidates import Candidates
    from credrank.documents import Query
    from credrank.pipeline.spec import PipelineSpec
    from credrank.searcher import Searcher


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
    top_k: Annotated[int | None, typer.Option(
        "--top-k", min=1, help=f"results to return (default 10; at most {MAX_K:,})")] = None,
    fetch_k: Annotated[int | None, typer.Option(
        "--fetch-k", min=1, help=f"candidate pool (default 3 × top-k; at most {MAX_K:,})")
    ] = None,
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
        help="selector parameter KEY=VALUE, repeatable; required (no default): mmr "
             "diversity; coverage lambda_ilad, lambda_coverage; exposure group_column; fair "
             "protected_column, p, alpha. E.g. mmr diversity=0.5; coverage lambda_ilad=0.3 "
             "lambda_coverage=0.5 [n_clusters=4 intent_column=…]; exposure "
             "group_column=source_type [rule=parity|proportional seed=0]; fair "
             "protected_column=source_type p=0.5 alpha=0.1 [protected_value=blog]")] = None,
    credibility_model: Annotated[Path | None, typer.Option(
        "--credibility-model",
        help="a model file of `credrank credibility fit`: adds the factor credibility = "
             "floor + (1 − floor) · P(credible) from each candidate's text and URL")] = None,
    credibility_floor: Annotated[float | None, typer.Option(
        "--credibility-floor", min=0.0, max=1.0,
        help="the floor of the credibility factor (default: the model file's, 0.3)")] = None,
    stance_model: Annotated[Path | None, typer.Option(
        "--stance-model",
        help="a model file of `credrank stance fit`: adds the factor agreement (claim-style "
             "queries: does X help Y?) from each candidate's stance and the weighted "
             "consensus")] = None,
    stance_param: Annotated[list[str] | None, typer.Option(
        "--stance-param",
        help="stance agreement parameter KEY=VALUE, repeatable: floor=0.1 sharpness=1 "
             "mode=expected|absolute exclude_self=false voters=N weight_factor=prior")] = None,
    consensus: Annotated[bool, typer.Option(
        "--consensus",
        help="label-free answer consensus (question-style queries): each candidate's answer "
             "read offline, copies counted once, weighted vote; adds the factor consensus and "
             "reports agreed | contested | no answers")] = False,
    consensus_param: Annotated[list[str] | None, typer.Option(
        "--consensus-param",
        help="consensus parameter KEY=VALUE, repeatable: threshold=0.5 floor=0.1 "
             "unanswered=1 on_contested=neutral|apply jaccard=0.5 shingle=3")] = None,
    planted: Annotated[bool, typer.Option(
        "--planted",
        help="label-free planted-evidence defence over the fetched pool (passages written "
             "for the query: abnormal query similarity, paraphrase clusters); adds the "
             "factor planted; modes and parameters with -S planted.mode=outlier|grada|"
             "ragdefender|trustrag (docs/results.md, Planted evidence)")] = False,
    machine_text: Annotated[bool, typer.Option(
        "--machine-text",
        help="demote machine-written passages: the Fast-DetectGPT statistic stored at index "
             "time (credrank score machine-text --index DIR) as the floored factor "
             "machine_text; parameters with -S machine_text.floor=0.5 (center, scale, "
             "missing=error|neutral|score)")] = False,
    freshness: Annotated[str | None, typer.Option(
        "--freshness",
        help="half-life decay w = 2^(−(T−t)/τ) (chapter 35.7) on each candidate's evidence "
             "date (observed > verified > published; never modified/retrieved): "
             "half_life=365d[,now=2026-01-01][,undated=neutral|neutral:W|penalty:W|exclude]"
             "[,config=FILE]; durations Nd, Nw, Ny (365.25 d), Nh")] = None,
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
    for name, value in (("--top-k", top_k), ("--fetch-k", fetch_k)):
        if value is not None and value > MAX_K:
            fail(f"{name}: expected an integer in [1, {MAX_K}], got {value}")
    if fetch_k is None and top_k is not None and 3 * top_k > MAX_K:
        fail(f"--top-k {top_k}: the default --fetch-k (3 × top-k) would exceed {MAX_K}; give "
             f"--fetch-k (at most {MAX_K})")
    if pipeline is not None:
        shortcuts = [flag for flag, given in (
            ("--priors", priors != "current"), ("--mode", mode != "multiply"),
            ("--lexical", lexical), ("--pushdown/--no-pushdown", pushdown is not None),
            ("--domain-scores", domain_scores), ("--priors-store", priors_store is not None),
            ("--source-reliability", source_reliability is not None),
            ("--select", select is not None), ("--select-param", bool(select_param)),
            ("--credibility-model", credibility_model is not None),
            ("--credibility-floor", credibility_floor is not None),
            ("--stance-model", stance_model is not None),
            ("--stance-param", bool(stance_param)), ("--consensus", consensus),
            ("--consensus-param", bool(consensus_param)), ("--freshness", freshness is not None),
            ("--planted", planted), ("--machine-text", machine_text))
            if given]
        if shortcuts:
            fail(f"{', '.join(shortcuts)}: the pipeline comes from --pipeline {pipeline}; set "
                 "its values there or with -S STAGE.PARAM=VALUE")
    options = store_options(engine, qdrant_url, api_key_env, qdrant_path)
    check_index_option(index_dir)
    _prefetch_embedder(index_dir)  # the model loads while the search stack is imported
    from credrank.documents import read_queries
    from credrank.index.embed import get_embedder
    from credrank.index.opener import open_store
    from credrank.pipeline.compile import check_stages
    from credrank.pipeline.spec import SpecError
    from credrank.searcher import Searcher

    try:
        spec = spec_of(pipeline, set_param, top_k=top_k, fetch_k=fetch_k, priors=priors,
                     mode=mode, lexical=lexical, pushdown=pushdown,
                     domain_scores=domain_scores, priors_store=priors_store,
                     source_reliability=source_reliability, select=select,
                     select_params=parse_params(select_param),
                     credibility_model=credibility_model,
                     credibility_floor=credibility_floor, stance_model=stance_model,
                     stance_params=parse_params(stance_param, "--stance-param"),
                     consensus=consensus,
                     consensus_params=parse_params(consensus_param, "--consensus-param"),
                     freshness=freshness, planted=planted, machine_text=machine_text)
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
    extra = [name for name, stage in (("credibility", "credibility"),
                                      ("agreement", "stance"), ("consensus", "consensus"),
                                      ("freshness", "freshness"),
                                      ("machine_text", "machine_text")) if stage in stage_names]
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
