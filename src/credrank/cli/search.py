"""``credrank search``: credibility-aware search over an index."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.cli.common import (
    check_index_option,
    check_text_argument,
    console,
    err,
    fail,
    hit_cell,
    warn,
)
from credrank.cli.config import from_file
from credrank.cli.index import (
    ApiKeyEnvOption,
    EngineOption,
    QdrantPathOption,
    QdrantUrlOption,
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
    from rich.table import Table

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
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="under the hits, the details of each stage's footer (the competing "
                          "answers of consensus, the ids of freshness of unknown age or dated "
                          "after now)")
    ] = False,
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
    if query is not None and queries is not None and from_file("queries"):
        queries = None  # the QUERY written wins over the defaults file's queries
    if (query is None) == (queries is None):
        fail("give either a QUERY or --queries FILE (one of them)")
    if trec_run is not None and queries is None:
        fail("--trec-run: only with --queries FILE")
    if trec_run is not None and as_json:
        fail("--trec-run and --json exclude each other: the run file, or JSON lines on stdout")
    # options that would be accepted and do nothing in this combination
    if run_tag != "credrank" and trec_run is None:
        fail("--run-tag: only with --trec-run (the tag column of the run file)")
    if trec_run is not None and text != DEFAULT_TEXT:
        fail(f"--text {text}: not with --trec-run (a run file holds no text)")
    if verbose and (as_json or queries is not None):
        fail("--verbose: only with the text answer to one QUERY (the footers' details); "
             "--json and --queries write every detail as data")
    if query is not None:
        check_text_argument("query", query)
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
    from credrank.core.errors import StageError
    from credrank.documents import read_queries
    from credrank.index.embed import get_embedder
    from credrank.index.manifest import reindex_hint
    from credrank.index.opener import open_store
    from credrank.pipeline.compile import check_stages
    from credrank.pipeline.spec import SpecError
    from credrank.searcher import Searcher

    try:
        try:  # the files the stages name are read before the index is opened
            check_stages(spec)
        except SpecError as exc:
            raise ValueError(spec_words(exc, spec, pipeline, set_param)) from None
        batch = None
        if queries is not None:
            if (queries / "manifest.json").is_file():  # read as a BEIR folder's queries.jsonl
                raise ValueError(f"--queries {queries}: expected a queries file (or a BEIR "
                                 "folder holding queries.jsonl), got an index folder")
            try:
                batch = read_queries(queries)
            except OSError as exc:  # named by the option (it said only the file)
                raise ValueError(f"--queries {queries}: cannot read "
                                 f"{exc.filename or queries}: {exc.strerror or exc}") from None
        if queries is not None and not batch:
            raise ValueError(f"--queries {queries}: no queries: expected at least one (.txt: "
                             "one a line; .tsv: id<TAB>query; .jsonl: objects with id and "
                             "text), got none (an empty file, or blank lines only)")
        if trec_run is not None:
            _check_writable(trec_run)
        idx = open_store(index_dir, **options)
        with idx:
            hint = reindex_hint(index_dir, idx.manifest)
            if hint is not None:
                warn(hint, label="note:")
            searcher = Searcher(idx, get_embedder(idx.manifest.embedder))
            try:
                if batch is not None:
                    failed = _run_batch(searcher, batch, spec, trec_run, run_tag, text,
                                        words=lambda e: stage_words(e, spec, pipeline,
                                                                    set_param))
                    if failed:  # every query ran; those that failed were said
                        raise typer.Exit(1)
                    return
                assert query is not None  # one of QUERY and --queries, checked above
                doc = searcher.search_json(query, spec, text=text)
            except SpecError as exc:
                raise ValueError(spec_words(exc, spec, pipeline, set_param)) from None
            except StageError as exc:  # a stage's parameter that the data refuse
                raise ValueError(stage_words(exc, spec, pipeline, set_param)) from None
    except (ValueError, StoreError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))
    except OSError as exc:  # a file named by an option that cannot be read
        fail(f"{exc.filename or 'file'}: cannot read: {exc.strerror or exc}")
    cut = doc["info"].get("query")
    if isinstance(cut, dict) and cut.get("truncated"):  # what the ranking alone does not say
        warn(query_cut_note(cut), label="note:")
    if as_json:
        print(json.dumps(doc, indent=2, default=str))
        return
    print_answer(doc, spec.retrieval, text, verbose=verbose)


def query_cut_note(cut: dict[str, Any]) -> str:
    """The stderr note on a query longer than the embedder's window (``info.query``)."""
    return (f"the query is longer than the embedder's window of {cut.get('window_tokens')} "
            "tokens: only its beginning was embedded (its later words are not searched)")


def print_answer(doc: dict[str, Any], retrieval: str = "dense", text: str = DEFAULT_TEXT, *,
                 verbose: bool = False, terminal: bool | None = None) -> None:
    """The answer ``doc`` for people: a table in a terminal (``terminal``, default: whether
    stdout is one) wide enough for it; elsewhere (a pipe, a log, a terminal narrower than the
    table's least width: ≈ 100 columns with the default text) a record per hit whose cells
    are never cropped (:func:`hit_records`, wrapped to the terminal) — rich crops the lines
    of a table wider than the terminal, and at 80 columns the titles and texts were cut
    after a dozen characters; then a footer line per stage that changed the ranking
    (:func:`stage_footers`). The documents' control characters are shown, never sent
    (:mod:`credrank.cli.visible`: a page's ``ESC [ 2 J`` cleared the terminal)."""
    from credrank.cli.visible import visible

    doc = visible(doc)
    terminal = console.is_terminal if terminal is None else terminal
    table = hit_table(doc, retrieval, text) if terminal else None
    # the table's least width, measured unconstrained (a measure at the terminal's width is
    # clamped to it)
    if table is not None and console.measure(
            table, options=console.options.update_width(10_000)).minimum <= console.width:
        console.print(table)
    else:
        # a terminal wraps the long lines (a title) at words; a pipe keeps each line whole
        console.print("\n".join(hit_records(doc, retrieval,
                                             width=console.width if terminal else None)),
                      soft_wrap=not terminal, highlight=False)
    for line in stage_footers(doc, verbose=verbose):
        console.print(line, highlight=False, soft_wrap=True)


def _factor_names(doc: dict[str, Any]) -> list[str]:
    """The factors the stages wrote besides the prior (credibility, planted, …)."""
    return [name for name in (doc["hits"][0]["score_breakdown"] if doc["hits"] else {})
            if name not in ("retrieval_score", "prior", "final")]


def host_text(hit: dict[str, Any]) -> str:
    """A hit's host as shown to people: ``—`` for a document without one (never ``None``)."""
    host = hit.get("host")
    return str(host) if host not in (None, "") else "—"


def hit_table(doc: dict[str, Any], retrieval: str = "dense", text: str = DEFAULT_TEXT
              ) -> Table:
    """The terminal's table of ``doc``'s hits (no cell is cut to an ellipsis: long ids and
    hosts fold)."""
    from rich.table import Table

    table = Table(title=f"{doc['query']}", show_lines=False)
    extra = _factor_names(doc)
    score = "bm25" if retrieval == "bm25" else "sim"  # --lexical: a BM25 score
    for col in ("#", "doc", "source type", "host", score, "prior", *extra, "final"):
        table.add_column(col, overflow="fold")
    table.add_column("title · text" if text != "none" else "title", ratio=1,
                     min_width=30, overflow="fold")
    for h in doc["hits"]:
        b = h["score_breakdown"]
        table.add_row(str(h["rank"]), h["doc_id"], str(h["source_type"]), host_text(h),
                      f"{b['retrieval_score']:.4f}", f"{b.get('prior', 1.0):.2f}",
                      *(f"{b.get(name, 1.0):.2f}" for name in extra), f"{b['final']:.4f}",
                      hit_cell(h, doc["query"]))
    return table


def hit_records(doc: dict[str, Any], retrieval: str = "dense",
                width: int | None = None) -> list[str]:
    """``doc``'s hits for a pipe or a log: the query, then per hit a line of its cells
    (``#rank doc_id · source type · host · scores``), its title and its text wrapped at
    words to ``width`` (default ``$COLUMNS``, else 100): every word of every cell whole."""
    import shutil
    import textwrap

    width = width or shutil.get_terminal_size((100, 24)).columns
    extra = _factor_names(doc)
    score = "bm25" if retrieval == "bm25" else "sim"
    lines = [f"query: {doc['query']}"]
    if not doc["hits"]:
        lines.append("(no hits)")
    for h in doc["hits"]:
        b = h["score_breakdown"]
        cells = [f"source type {h['source_type'] if h['source_type'] is not None else '—'}",
                 f"host {host_text(h)}", f"{score} {b['retrieval_score']:.4f}",
                 f"prior {b.get('prior', 1.0):.2f}",
                 *(f"{name} {b.get(name, 1.0):.2f}" for name in extra),
                 f"final {b['final']:.4f}"]
        lines.append(f"#{h['rank']} {h['doc_id']} · " + " · ".join(cells))
        title = h.get("title")
        if title:
            lines.append(f"   title: {title}")
        body = h.get("text")
        if body:
            lines.extend(textwrap.wrap(f"text: {body}", width=max(width, 40),
                                       initial_indent="   ", subsequent_indent="      ",
                                       break_long_words=False, break_on_hyphens=False))
    return lines


def stage_footers(doc: dict[str, Any], verbose: bool = False) -> list[str]:
    """One line per stage that weighed the ranking (planted, machine-text, freshness,
    consensus), saying what it did; ``verbose`` adds the details (the ids, every answer)."""
    info = doc.get("info", {})
    shown = [h["doc_id"] for h in doc["hits"]]
    lines: list[str] = []
    if "planted" in info:
        lines.append(planted_summary(info["planted"], doc["hits"]))
    if "machine_text" in info:
        lines.append(machine_text_summary(info["machine_text"], doc["hits"]))
    if "freshness" in info:
        lines.extend(freshness_summary(info["freshness"], shown).split("\n")[:None if verbose
                                                                             else 1])
    if "consensus" in info:
        lines.extend(consensus_summary(info["consensus"], verbose).split("\n"))
    if isinstance(info.get("select"), dict) and info["select"].get("chosen"):
        lines.append(select_summary(info["select"]))
    return lines


def select_summary(info: dict[str, Any]) -> str:
    """The selector's footer line: which selector with its main parameters, and its key
    outcome — MMR's ILAD, coverage's coverage, ILAD, utility loss and whether the optimum was
    proven; the exposure lottery's draw (to replay the list) and each group's exposure
    against its target; FA*IR's prefix minimums met or where they fell short."""
    name = info.get("selector")
    if name == "mmr":
        line = f"select: mmr, diversity {info['diversity']:g}"
        if info.get("ilad") is not None:
            line += f"; ILAD {info['ilad']:.3f}"
        if info.get("coverage") is not None:
            line += f"; coverage {info['coverage']:.2f} of the {info['intents']['column']} labels"
    elif name == "coverage":
        intents = info.get("intents") or {}
        line = f"select: coverage, λ1 {info['lambda_ilad']:g}, λ2 {info['lambda_coverage']:g}"
        if info.get("coverage") is not None and intents:
            line += (f"; coverage {info['coverage']:.2f} of {len(intents.get('intents', []))} "
                     f"intents ({info.get('intent_source')})")
        if info.get("ilad") is not None:
            line += f"; ILAD {info['ilad']:.3f}"
        if info.get("utility_loss") is not None:
            line += f"; utility {info['utility_loss']:.1%} below the top-k"
        line += ("; optimal" if info.get("optimal") else
                 "; best found, not proven optimal"
                 + (" (time limit hit)" if info.get("time_limit_hit") else ""))
    elif name == "exposure":
        groups = info.get("groups", {})
        shown = "; ".join(
            f"{g} {v['realised']:.3f} (target {v['target']:.3f})" if v.get("target") is not None
            else f"{g} {v['realised']:.3f}" for g, v in list(groups.items())[:6])
        more = f"; {len(groups) - 6} more groups" if len(groups) > 6 else ""
        line = (f"select: exposure, {info.get('rule')} on {info.get('group_column')}: one list "
                f"of the lottery, not sorted by score (draw={info['draw']} replays it); "
                "exposure per document of this list: "
                f"{shown}{more}")
    elif name == "fair":
        line = (f"select: fair, {info['protected_column']}, p {info['p']:g}, α "
                f"{info['alpha']:g}; {len(info.get('protected_positions', []))} protected in "
                f"the top {len(info['chosen'])}")
        line += ("; every prefix minimum met" if info.get("satisfied") else
                 f"; SHORTFALL from position {info.get('shortfall_at')}: "
                 f"{info.get('n_protected_candidates')} protected candidate(s) in the pool")
        if info.get("n_missing"):
            line += (f"; {info['n_missing']} with no {info['protected_column']} (counted as "
                     "not protected)")
    else:
        return f"select: {name}"
    elig = info.get("eligibility")
    if isinstance(elig, dict) and elig.get("min_ratio"):
        filled = elig["kept"] - elig["eligible"]
        line += (f"; {elig['eligible']} of {elig['pool']} candidates eligible (retrieval score "
                 f"≥ {elig['min_ratio']:g} × the best)"
                 + (f", {filled} more of the best kept to fill top_k" if filled > 0 else ""))
    return line


def _demoted(hits: list[dict[str, Any]], factor: str) -> int:
    """How many of ``hits`` the factor ``factor`` demoted (a factor below 1)."""
    return sum(1 for h in hits if h["score_breakdown"].get(factor, 1.0) < 1.0)


def planted_summary(info: dict[str, Any], hits: list[dict[str, Any]]) -> str:
    """The planted-evidence footer line: how many pool candidates were flagged, how many of
    the shown hits it demoted, and those it spared for their trusted source."""
    if not info.get("applied", True):
        return f"planted: not applied ({info.get('reason', 'no reason given')}); ranking unchanged"
    flagged = int(info.get("flagged", 0))
    floor = info.get("floor")
    line = (f"planted: {flagged} of {info.get('pool', '?')} candidates flagged as planted "
            f"for this query" + (f" (factor down to {floor:g})" if flagged and floor is not None
                                 else ""))
    line += f"; {_demoted(hits, 'planted')} of the {len(hits)} shown demoted"
    if info.get("spared_trusted"):
        line += f"; {info['spared_trusted']} spared (trusted source type)"
    if info.get("planted_estimate") is not None:
        line += f"; estimated planted: {info['planted_estimate']}"
    return line if flagged else line + "; ranking unchanged"


def machine_text_summary(info: dict[str, Any], hits: list[dict[str, Any]]) -> str:
    """The machine-text footer line: how many candidates were weighed, the factors among the
    shown hits, and the candidates without a score."""
    factors = [h["score_breakdown"].get("machine_text", 1.0) for h in hits]
    low = f"; factors of the shown {min(factors):.2f}–{max(factors):.2f}" if factors else ""
    line = (f"machine-text: {info.get('n', len(hits))} candidates weighed by how machine-like "
            f"their text reads{low}; {_demoted(hits, 'machine_text')} of the {len(hits)} shown "
            "demoted")
    for key, words in (("missing", "without a score (factor 1)"),
                       ("unscorable", "too short to score (factor 1)"),
                       ("scored_now", "scored now")):
        if info.get(key):
            line += f"; {info[key]} {words}"
    return line


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
    pool, then the shown hits (``shown``; all when ``None``) with ``age: unknown`` (undated,
    or dated after ``T``: no usable age) and those dated after ``T``."""
    counts = info["counts"]
    undated = info["undated"]
    weight = "" if undated["weight"] is None else f" = {undated['weight']:.4g}"
    lines = [f"freshness: now {info['now']}, half-life {info['half_life']:g} d"
             f"{' (per config)' if 'half_lives' in info else ''}; undated: "
             f"{undated['policy']}{weight}; {counts['dated']} dated, {counts['undated']} "
             f"of unknown age ({counts['after_now']} of them dated after now), "
             f"{counts['excluded']} excluded"]
    keep = set(shown) if shown is not None else None
    for key, label in (("unknown_age", "age: unknown"),
                       ("after_now", "dated after now (an unknown age)")):
        ids = [d for d in info.get(key, []) if keep is None or d in keep]
        if ids:
            lines.append(f"  {label} — {', '.join(ids)}")
    return "\n".join(lines)


def consensus_summary(info: dict[str, Any], verbose: bool = False) -> str:
    """The consensus verdict under the table, one line: the status, the top share against the
    threshold, the answer (agreed) or how many compete (contested); ``verbose`` adds a line
    per answer (its share, voices and passages)."""
    status = info["status"]
    if status == "no answers":
        return "consensus: no answers (no candidate passage answers the query; ranking unchanged)"
    answers = info.get("answers", [])
    line = (f"consensus: {status} (top share {info['share']:.2f}, threshold "
            f"{info['threshold']:.2f})")
    if status == "contested":
        line += f"; {len(answers)} competing answer(s), none reaches the threshold"
    elif info.get("answer"):
        line += f": {_short(str(info['answer']))}"
    if not verbose:
        return line + ("; --verbose lists the answers" if len(answers) > 1 else "")
    lines = [line]
    for a in answers:
        lines.append(f"  {a['answer']!r}: share {a['share']:.2f}, {a['voices']} voice(s), "
                     f"passages {', '.join(a['doc_ids'])}")
    return "\n".join(lines)


def _short(text: str, limit: int = 80) -> str:
    """``text`` cut at a word before ``limit`` characters (``…`` where cut)."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def stage_words(exc: Exception, spec: PipelineSpec, pipeline: Path | None,
                sets: list[str] | None) -> str:
    """A stage's run-time error that opens with one of its parameters (``rule: …``,
    ``protected_column: …``) said as the user wrote the spec: ``--pipeline FILE:
    stages[i].rule: …``, the ``-S`` item that set it, else the option
    (``--select-param rule: …``); any other error as it is."""
    from credrank.core.errors import StageError
    from credrank.pipeline.shortcuts import CLI, word_of

    message = str(exc)
    found = spec.param_stage(message) if isinstance(exc, StageError) else None
    if found is None:
        return message
    i, param = found
    detail = message.split(":", 1)[1].strip()
    if pipeline is not None:
        where = spec.param_path(message)
        return message if where is None else f"--pipeline {pipeline}: {where}: {detail}"
    key = f"{spec.stages[i].name}.{param}"
    item = next((s for s in reversed(sets or []) if s.partition("=")[0].strip() == key), None)
    if item is not None:
        return f"-S {item}: {detail}"
    return f"{word_of(spec.stages[i].name, param, CLI)}: {detail}"


def _run_batch(searcher: Searcher, batch: list[Query], spec: PipelineSpec,
               trec_run: Path | None, tag: str, text: str = DEFAULT_TEXT, *,
               words: Callable[[ValueError], str] = str) -> int:
    """Every query of ``batch`` through one pipeline: JSON lines on stdout (the ``--json``
    document of each query, compact, with its ``query_id``, each hit with ``text`` as
    ``--text`` says) or a TREC run file (no text read). A query whose run fails (a
    ``ValueError``: a selection its pool cannot meet, …) does not stop the batch: it is said
    on stderr as ``error: query ID: …`` (``words``: the error in the options' words) and, in
    JSON lines, as its line ``{"credrank_search": 2, "query_id", "query", "error"}``; a TREC
    run is then not written (a run file missing a query would score it 0). Returns how many
    queries failed.

    A feedback prior that ranks with its store's latest version is pinned, for the whole
    batch, to the version that is the latest when the batch starts (said on stderr): every
    query ranks with the same priors, each line's ``settings.priors`` is the version that
    ranked it, and a TREC run can be reproduced (``feedback_prior.version``), whatever
    feedback arrives meanwhile.

    Ctrl-C stops the batch saying how many queries ran (the JSON lines written are whole; a
    TREC run is not written: it would miss the others), exit 130."""
    ran = [0]
    try:
        return _batch_lines(searcher, batch, spec, trec_run, tag, text, words, ran)
    except KeyboardInterrupt:
        written = "" if trec_run is None else f"; no TREC run written to {trec_run}"
        warn(f"interrupted after {ran[0]} of {len(batch)} queries{written}", label="error:")
        raise typer.Exit(130) from None


def _batch_lines(searcher: Searcher, batch: list[Query], spec: PipelineSpec,
                 trec_run: Path | None, tag: str, text: str,
                 words: Callable[[ValueError], str], ran: list[int]) -> int:
    """:func:`_run_batch`'s work (``ran[0]``: the queries done so far)."""
    from credrank.pipeline.document import SEARCH_FORMAT, search_document

    spec = _pinned_feedback(searcher, spec)
    described = searcher.compile(spec).settings
    mode = "none" if trec_run is not None else text
    failed: list[str] = []

    def answers() -> Iterator[tuple[Query, Candidates]]:
        for q in batch:
            try:
                [(_, result)] = list(searcher.search_many([(q.id, q.text)], spec, text=mode))
            except ValueError as exc:
                ran[0] += 1
                failed.append(q.id)
                message = f"query {q.id}: {words(exc)}"
                warn(message, label="error:")
                if trec_run is None:
                    line = {"credrank_search": SEARCH_FORMAT, "query_id": q.id, "query": q.text,
                            "error": message}
                    sys.stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
                continue
            ran[0] += 1
            yield q, result

    if trec_run is None:
        for q, result in answers():
            doc = search_document(q.text, described, result, text=text, query_id=q.id)
            sys.stdout.write(json.dumps(doc, default=str, separators=(",", ":")) + "\n")
        return len(failed)
    from credrank.core.files import replacing

    with contextlib.suppress(_Incomplete), replacing(trec_run) as tmp:  # complete or none
        _write_run(tmp, ((q.id, result) for q, result in answers()), tag)
        if failed:
            raise _Incomplete
    if failed:
        err.print(f"{len(failed)} of {len(batch)} queries failed; no TREC run written to "
                  f"{trec_run} (it would miss them)")
    else:
        err.print(f"{len(batch)} queries; TREC run in {trec_run}")
    return len(failed)


def _pinned_feedback(searcher: Searcher, spec: PipelineSpec) -> PipelineSpec:
    """``spec`` pinned to its feedback store's current version
    (:meth:`Searcher.pin_feedback`, as ``search_many`` pins it), said on stderr."""
    pinned, version = searcher.pin_feedback(spec)
    if version is not None:
        warn(f"feedback store: every query of the batch ranks with its version {version}, "
             f"the latest at the start (feedback_prior.version={version} replays it)",
             label="note:")
    return pinned


class _Incomplete(Exception):
    """A TREC run that misses a failed query: its temporary file is discarded."""


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
