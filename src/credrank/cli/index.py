"""``credrank index``: validated documents → provenance → embeddings → engine."""

from __future__ import annotations

import dataclasses
import difflib
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.cli.common import (
    QuietOption,
    check_index_option,
    console,
    err,
    fail,
    progress,
    show_progress,
    warn,
)
from credrank.core.cluster import ClusterError, check_cluster_options, require_dask, wants_cluster
from credrank.documents import Document, Reject, iter_documents, write_rejects
from credrank.documents.fields import DEFAULT_TIMEZONE, date_order_value, timezone_value
from credrank.documents.readers import FORMATS
from credrank.documents.records import dropped_row, ordered_summary, reject_row, zones_summary
from credrank.documents.schema import KNOWN_FIELDS
from credrank.index.diskspace import DiskFullError
from credrank.index.embed import get_embedder
from credrank.index.manifest import read_manifest, reindex_hint
from credrank.index.opener import open_store
from credrank.index.passages import DEFAULT_OVERLAP, MIN_TOKENS, check_chunking
from credrank.index.store import ENGINES, StoreError, document_count

#: the names ``--field`` renames a column to: the record schema's fields
#: (:data:`~credrank.documents.schema.KNOWN_FIELDS`), in the record's order
SCHEMA_NAMES = tuple(f.name for f in dataclasses.fields(Document) if f.name in KNOWN_FIELDS)

if TYPE_CHECKING:
    from credrank.index.ingest import IndexReport

# the engine options ``credrank index`` and ``credrank search`` share
EngineOption = Annotated[str | None, typer.Option(
    "--engine", help="edge (embedded Qdrant Edge, the default for a new index) or qdrant "
                     "(qdrant-client: a server or cluster, or local mode); default: the "
                     "index's own")]
QdrantUrlOption = Annotated[str | None, typer.Option(
    "--qdrant-url", help="Qdrant server or cluster URL (--engine qdrant), e.g. "
                         "https://xyz.cloud.qdrant.io:6333")]
ApiKeyEnvOption = Annotated[str | None, typer.Option(
    "--api-key-env", metavar="VAR",
    help="read the Qdrant API key from this environment variable (never from the command "
         "line or the manifest)")]
QdrantPathOption = Annotated[Path | None, typer.Option(
    "--qdrant-path", help="folder for qdrant-client's local mode (--engine qdrant; tests, "
                          "small corpora)")]


def store_options(engine: str | None, qdrant_url: str | None, api_key_env: str | None,
                  qdrant_path: Path | None) -> dict[str, Any]:
    """The engine options as :func:`credrank.index.open_store` arguments (exit 2 when bad)."""
    if engine is not None and engine not in ENGINES:
        fail(f"--engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
    if engine == "edge":
        extra = [name for name, value in (("--qdrant-url", qdrant_url),
                                          ("--api-key-env", api_key_env),
                                          ("--qdrant-path", qdrant_path)) if value is not None]
        if extra:
            fail(f"{', '.join(extra)}: only with --engine qdrant")
    if qdrant_url is not None and qdrant_path is not None:
        fail("--qdrant-url and --qdrant-path exclude each other: a server, or local mode in "
             "a folder")
    if api_key_env is not None and qdrant_path is not None:
        fail("--api-key-env applies to a server (--qdrant-url), not to --qdrant-path")
    api_key = None
    if api_key_env is not None:
        api_key = os.environ.get(api_key_env)
        if not api_key:
            fail(f"--api-key-env {api_key_env}: the environment variable {api_key_env} is "
                 "not set (or empty); export the Qdrant API key in it")
    return {"engine": engine, "qdrant_url": qdrant_url, "api_key": api_key,
            "qdrant_path": qdrant_path}


def option_words(name: str) -> str:
    """This command's flag for the library's keyword ``name`` (``fields`` → ``--field``,
    ``chunk_tokens`` → ``--chunk-tokens``): the ``words`` the library's checks name an option
    with."""
    return {"fields": "--field"}.get(name, "--" + name.replace("_", "-"))


def index(
    corpus: Annotated[Path, typer.Argument(help="JSONL, CSV, Parquet file or BEIR folder")],
    index_dir: Annotated[Path, typer.Option("--index", help="index directory")],
    table: Annotated[list[Path] | None, typer.Option(
        "--table",
        help="domain table CSV (domain,source_type or domain,score); repeatable")] = None,
    trust_declared: Annotated[bool, typer.Option(
        help="use a record's declared source_type instead of its URL")] = False,
    embedder: Annotated[str | None, typer.Option(
        help="minilm (a new index's default) or hashing (tests); an existing index keeps its "
             "own (another is an error)")] = None,
    rejects: Annotated[Path | None, typer.Option(help="rejects file (JSONL)")] = None,
    strict: Annotated[bool, typer.Option(
        help="strict reading: a record with any unreadable field is rejected (dates only ISO "
             "8601 with a zone), and the run exits 1 when any record is rejected; default: "
             "an unreadable optional field is dropped and reported, the record indexed")
    ] = False,
    assume_timezone: Annotated[str | None, typer.Option(
        "--assume-timezone", metavar="ZONE",
        help="the zone of dates written with a time but no zone: an IANA name "
             "(Europe/Berlin) or an offset (+02:00); default UTC (with --strict: such dates "
             "are rejected unless this is given)")] = None,
    date_order: Annotated[str | None, typer.Option(
        "--date-order", metavar="mdy|dmy",
        help="the order of all-numeric day/month dates in this corpus: mdy (2/11/20 is 11 "
             "February) or dmy (2 November); every such date is read that way and one that "
             "cannot be (13/2/20 under mdy) is dropped and reported; ISO and written dates "
             "read as without it; default: none, a date that reads two ways is dropped "
             "(not with --strict)")] = None,
    chunk_tokens: Annotated[int | None, typer.Option(
        "--chunk-tokens", metavar="N",
        help="a new index splits a text longer than N tokens of the embedder (title "
             "included) into passages of at most N tokens, on sentence boundaries where "
             "possible; a search ranks passages and returns each document at its best one. "
             f"Default: the embedder's window (MiniLM: 256); 0: no splitting (longer texts are "
             f"embedded from their beginning and reported); at least {MIN_TOKENS}. An existing "
             "index keeps its own (a different value is an error)")] = None,
    chunk_overlap: Annotated[int | None, typer.Option(
        "--chunk-overlap", metavar="N",
        help=f"tokens shared by consecutive passages of a new index (default "
             f"{DEFAULT_OVERLAP} or a quarter of a passage, whichever is less; at most half a "
             "passage)")] = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="print the run as JSON (docs/json.md): counts, rejects, dropped fields")
    ] = False,
    batch_size: Annotated[int, typer.Option(
        min=1, help="documents per engine write (1,000 measured fastest for Qdrant Edge: "
                    "bench/scripts/bench_index.py)")] = 1000,
    field: Annotated[list[str] | None, typer.Option(
        "--field", help="rename a column to a schema field: FILE_NAME=SCHEMA_NAME, e.g. "
                        "body=text (=id: an "
                        "unnamed column, such as a pandas index); repeatable")
    ] = None,
    corpus_format: Annotated[str | None, typer.Option(
        "--format", metavar="FORMAT",
        help=f"the corpus format ({', '.join(FORMATS)}; default: told from the extension, "
             "or a BEIR folder): for a file whose extension says none, e.g. notes.txt "
             "holding JSON lines")] = None,
    engine: EngineOption = None,
    qdrant_url: QdrantUrlOption = None,
    api_key_env: ApiKeyEnvOption = None,
    qdrant_path: QdrantPathOption = None,
    collection: Annotated[str | None, typer.Option(
        help="Qdrant collection for a new --engine qdrant index "
             "(default credrank-<index folder name>)")] = None,
    workers: Annotated[int, typer.Option(
        "--workers", min=0,
        help="embed on a local Dask cluster of N worker processes (0: in this process); "
             "needs the dask extra")] = 0,
    scheduler: Annotated[str | None, typer.Option(
        "--scheduler", metavar="ADDRESS",
        help="embed on the running Dask scheduler at ADDRESS, e.g. tcp://host:8786 "
             "(excludes --workers)")] = None,
    optimize: Annotated[bool, typer.Option(
        "--optimize/--no-optimize",
        help="build the search graph when the load ends (default); --no-optimize leaves the "
             "index searchable at once by exact search, and `credrank optimize --index DIR` "
             "builds the graph later (large corpora: docs/results.md)")] = True,
    score: Annotated[list[str] | None, typer.Option(
        "--score",
        help="index-time scores stored in each point's payload after the load (resumable; "
             "repeatable): machine-text (Fast-DetectGPT with SmolLM2, the lm extra; for an "
             "existing index: `credrank score machine-text --index DIR`)")] = None,
    credibility_model: Annotated[Path | None, typer.Option(
        "--credibility-model",
        help="a model file of `credrank credibility fit`: store each document's P(credible) "
             "in its payload after the load (resumable; for an existing index: `credrank "
             "score credibility --index DIR --model MODEL`), read by `credrank search "
             "--credibility-model`")] = None,
    quiet: QuietOption = False,
) -> None:
    """Index CORPUS into DIR (incremental; an interrupted run is completed by re-running).

    The run holds DIR's lock (DIR/.credrank.lock) throughout: a second `credrank index` or a
    `credrank search` on DIR meanwhile exits 2 saying which process writes it.

    At the end the engine builds its search graph (--no-optimize: later, with `credrank
    optimize`; until then searches are exact).

    With --workers N or --scheduler ADDRESS, provenance and embeddings are computed on Dask
    workers, partition by partition; this process still reads the corpus and is the one
    writer, in file order, so the index, the report and the rejects are those of a run
    without workers.
    """

    if not corpus.exists():
        fail(f"{corpus}: no such file or folder")
    fields: dict[str, str] = {}
    for item in field or []:
        old, sep, new = item.partition("=")
        if not sep or not new:  # FILE_NAME may be empty: an unnamed column (a pandas index)
            fail(f"--field: expected FILE_NAME=SCHEMA_NAME, got {item!r}")
        if new not in SCHEMA_NAMES:  # a misspelt name kept the column as metadata, silently
            close = difflib.get_close_matches(new, SCHEMA_NAMES, n=1)
            fail(f"--field {item}: expected a schema name ({', '.join(SCHEMA_NAMES)}), got "
                 f"{new!r}" + (f"; did you mean {old}={close[0]}?" if close else "")
                 + " (a column no --field names is kept as metadata as it is)")
        if fields.get(old, new) != new:  # the later one silently won
            fail(f"--field: expected one name for column {old!r}, got {old}={fields[old]} and "
                 f"{item}")
        fields[old] = new
    try:
        check_cluster_options(workers, scheduler)
        if wants_cluster(workers, scheduler):
            require_dask()
    except (ValueError, ClusterError) as exc:
        fail(str(exc))
    try:
        if assume_timezone is not None:
            timezone_value(assume_timezone, "--assume-timezone")
        date_order_value(date_order, "--date-order")
    except ValueError as exc:
        fail(str(exc))
    if strict and date_order is not None:
        fail(f"--date-order {date_order}: expected no declared order with --strict (strict "
             "reading takes ISO 8601 dates only); drop one of them")
    options = store_options(engine, qdrant_url, api_key_env, qdrant_path)
    check_index_option(index_dir)
    if score:  # the scores are checked (and the lm extra) before anything is indexed
        from credrank.cli.score import check_scores

        check_scores(score)
    if embedder is None:  # an existing index's own; a new one's default
        try:
            found = read_manifest(index_dir)
        except StoreError as exc:
            fail(str(exc))
        embedder = found.embedder if found is not None else "minilm"
    credibility = None
    if credibility_model is not None:  # the model file is checked before anything is indexed
        from credrank.cli.score import check_credibility_model

        credibility = check_credibility_model(credibility_model, embedder,
                                              option="--credibility-model")
    rejects_path = rejects or index_dir / "rejects.jsonl"
    problem = _unwritable(rejects_path) or _not_rejects(rejects_path, corpus, index_dir)
    if problem is not None:  # the option that named the path: --rejects, else --index
        fail(f"--rejects {rejects_path}: {problem}; nothing was indexed" if rejects is not None
             else f"--index {index_dir}: its rejects file {rejects_path}: {problem}; nothing "
                  "was indexed")
    # imported here: `search` and `serve` import this module for its options only
    from credrank.index.ingest import IndexReport, index_documents, window_of
    from credrank.index.parallel import TyperSettings, index_documents_parallel
    from credrank.provenance import SourceTyper

    try:  # the format and the header are told (or refused) before the index folder is created
        documents = iter_documents(corpus, fields=fields or None, strict=strict,
                                   assume_timezone=assume_timezone, date_order=date_order,
                                   format=corpus_format, words=option_words)
    except ValueError as exc:  # the library's format= is this command's --format
        fail(str(exc).replace("pass format=", "pass --format").replace(
            "format: expected one of", "--format: expected one of"))
    try:
        typer_ = SourceTyper(table or [], trust_declared=trust_declared)
        for message in typer_.unmatchable_warnings():  # rows no URL can match: not used
            warn(f"--table {message}")
        emb = get_embedder(embedder)
        chunking = None
        if chunk_tokens is not None or chunk_overlap is not None:
            chunking = check_chunking(chunk_tokens, chunk_overlap, window_of(emb),
                                      words=option_words)
        idx = open_store(index_dir, **options, collection=collection, embedder=emb.name,
                         dim=emb.dim, create=True, chunking=chunking)
    except (ValueError, StoreError, RuntimeError) as exc:
        if isinstance(exc, typer.Exit):  # a fail() inside: already said
            raise
        fail(str(exc))
    hint = reindex_hint(index_dir, idx.manifest)
    if hint is not None:
        warn(hint)
    total = _count_lines(corpus)
    report = IndexReport()  # filled as the load goes: what a failure leaves is still reported
    failure: str | None = None
    interrupted = False
    with idx, progress(show_progress(quiet)) as bar:
        task = bar.add_task(f"indexing {corpus.name}", total=total)
        records = _Guarded(documents)
        try:
            if wants_cluster(workers, scheduler):
                index_documents_parallel(
                    records, idx, emb.name,
                    TyperSettings.of(table or [], trust_declared=trust_declared),
                    client=scheduler, workers=workers, batch_size=batch_size,
                    on_batch=lambda n: bar.advance(task, n), report=report)
            else:
                index_documents(records, idx, emb, typer_, batch_size=batch_size,
                                on_batch=lambda n: bar.advance(task, n), report=report)
        except ClusterError as exc:  # before anything was written: the scheduler is not there
            fail(str(exc))
        except KeyboardInterrupt:  # Ctrl-C: what was written is whole (a batch at a time);
            interrupted = True  # said, with the rejects so far, as another stop is
            failure = (f"interrupted: {records.count} record(s) read, the index holds "
                       f"{_documents_in(idx)} documents; re-run the same command to complete "
                       "the index")
        except DiskFullError as exc:  # checked before each write: what was written is whole
            failure = (f"{exc}; {records.count} record(s) read, the index holds "
                       f"{_documents_in(idx)} documents; free disk space and re-run the same "
                       "command to complete the index")
        except StoreError as exc:  # the engine went away mid-run: re-running completes it
            failure = f"{exc}; re-run the same command to complete the index"
        except ValueError as exc:
            if not records.count:  # a file-level problem (header, format): nothing to index
                fail(str(exc))
            failure = (f"{exc}; {records.count} record(s) read; re-run the same command to "
                       "complete the index")
        if failure is None:
            failure = _after_load(idx, index_dir, corpus.name, bar, score=bool(score),
                                  credibility=credibility, credibility_model=credibility_model,
                                  optimize=optimize, quiet=quiet)
        size, points = _documents_in(idx), _points_in(idx)
        chunking = idx.manifest.chunking
        report.take_reading(documents)
        # still under the index's writer lock
        kept, unwritten = _save_rejects(report, rejects_path, rejects is not None, index_dir)
    _list_rejects(report, rejects_path, every=unwritten is not None)
    if report.conflicts:
        # a conflict with the URL's type, or a declared type a record without a URL left
        # unused: each said in its own words (both were said as conflicts with the URL)
        no_url = sum("has no URL" in c for _, c in report.conflicts)
        clash = len(report.conflicts) - no_url
        used = "declared type used (--trust-declared)" if trust_declared else "URL used"
        parts = ([f"{clash} declared source types conflict with the URL ({used})"]
                 if clash else [])
        if no_url:
            parts.append(f"{no_url} declared on records without a URL "
                         + ("(declared type used)" if trust_declared else "(not used)"))
        err.print(f"{'; '.join(parts)}, e.g. {report.conflicts[0][0]}: "
                  f"{report.conflicts[0][1]}")
    zones = (f"; {zones_summary(report.zones_assumed, report.assume_timezone)} "
             f"(--assume-timezone{'' if assume_timezone else ', default ' + DEFAULT_TIMEZONE})"
             if report.zones_assumed else "")
    if report.dates_ordered and report.date_order is not None:
        zones += (f"; {ordered_summary(report.dates_ordered, report.date_order)} "
                  f"(--date-order {report.date_order})")
    error = failure or unwritten
    if as_json:
        run = _run_document(corpus, index_dir, rejects_path, report, size, strict)
        run["passages"] = {"points": points, "chunk_tokens": chunking.tokens,
                           "chunk_overlap": chunking.overlap}
        if error is not None:
            run["error"] = error
        typer.echo(json.dumps(run, ensure_ascii=False))
    else:
        earlier = f" (the previous run's in {kept})" if kept is not None else ""
        split = (f" ({points} passages: long texts split at {chunking.tokens} tokens)"
                 if points is not None and points != size else "")
        held = f"index holds {size} documents" if size is not None else "index size unknown"
        where = (f"rejects in {rejects_path}{earlier}" if unwritten is None
                 else "rejects listed above (not written)")
        console.print(f"{report.summary()}{zones}; {held}{split}; {where}", soft_wrap=True)
    if error is not None:
        fail(error, code=130 if interrupted else 2)
    if records.error is not None:  # damaged input (e.g. truncated .gz): what came before is in
        fail(f"{records.error}; the records before it were indexed; re-run with a repaired "
             "file to complete the index")
    if report.indexed + report.unchanged == 0:  # every record rejected, or none at all
        came = (f"all {report.rejected} records were rejected (reasons in {rejects_path})"
                if report.rejected else "it holds no records")
        fail(f"{corpus}: nothing was indexed: {came}", code=1)
    if strict and report.rejected:
        raise typer.Exit(1)


def _after_load(idx: Any, index_dir: Path, label: str, bar: Any, *, score: bool,
                credibility: Any, credibility_model: Path | None, optimize: bool,
                quiet: bool) -> str | None:
    """What a run does once the documents are written, still under the writer lock: the
    index-time scores (``--score``, ``--credibility-model``), then the search graph
    (``--optimize``). The error of the step that failed (the documents stay indexed), or
    ``None``."""
    if score:
        from credrank.cli.score import score_machine_text, summary

        try:
            scored = score_machine_text(idx, bar=bar, label=label)
        except (ValueError, StoreError, RuntimeError) as exc:
            if isinstance(exc, typer.Exit):  # a fail() inside: already said
                raise
            return (f"{exc}; the documents are indexed, the scores written so far kept: "
                    f"complete them with `credrank score machine-text --index {index_dir}`")
        err.print(summary(scored, index_dir), soft_wrap=True, highlight=False)
    if credibility is not None:
        from credrank.cli.score import credibility_summary, score_credibility

        try:
            done = score_credibility(idx, credibility, bar=bar, label=label)
        except (ValueError, StoreError, RuntimeError) as exc:
            if isinstance(exc, typer.Exit):  # a fail() inside: already said
                raise
            return (f"{exc}; the documents are indexed, the scores written so far kept: "
                    f"complete them with `credrank score credibility --index {index_dir} "
                    f"--model {credibility_model}`")
        err.print(credibility_summary(done, index_dir, credibility), soft_wrap=True,
                  highlight=False)
    if optimize:  # merge segments, build the HNSW graph where the corpus is large
        from credrank.cli.optimize import build_graph

        try:
            build_graph(idx, label, show_progress(quiet))
        except StoreError as exc:  # a full disk (DiskFullError) or the engine
            free = "free disk space and " if isinstance(exc, DiskFullError) else ""
            return (f"{exc}; the documents are indexed and searchable (exact search); {free}"
                    f"run `credrank optimize --index {index_dir}`")
    return None


def _documents_in(idx: Any) -> int | None:
    """The documents the open index holds, ``None`` when the engine cannot say (it failed)."""
    try:
        return document_count(idx)
    except StoreError:
        return None


def _points_in(idx: Any) -> int | None:
    """The points (passages) the open index holds, ``None`` when the engine cannot say."""
    try:
        return len(idx)
    except StoreError:
        return None


def _save_rejects(report: IndexReport, path: Path, named: bool, index_dir: Path
                  ) -> tuple[Path | None, str | None]:
    """Write the run's rejects and dropped fields to ``path`` (an earlier run's kept aside,
    :func:`keep_earlier_rejects`): ``(where the earlier ones went, None)``, or ``(None, the
    error)`` when writing failed (a full disk, ``/dev/full``), in the words of the option
    that named ``path`` (``--rejects`` when ``named``, else ``--index``)."""
    try:
        kept = keep_earlier_rejects(path)
        write_rejects(report.rejects, path, report.dropped)
    except OSError as exc:
        option = f"--rejects {path}" if named else f"--index {index_dir}: its rejects file {path}"
        return None, (f"{option}: writing failed: {exc.strerror or exc}; the documents are "
                      "indexed; the rejects and dropped fields are listed above")
    return kept, None


def _list_rejects(report: IndexReport, path: Path, *, every: bool) -> None:
    """The rejects and dropped fields on stderr: the first 10 of each (the rest are in the
    rejects file ``path``), or ``every`` one of them (the file could not be written)."""
    shown = None if every else 10
    for r in report.rejects[:shown]:
        warn(r.message, label="rejected")
    if not every and report.rejected > 10:
        err.print(f"… {report.rejected - 10} more in {path}")
    for d in report.dropped[:shown]:
        warn(d.message)
    if not every and len(report.dropped) > 10:
        err.print(f"… {len(report.dropped) - 10} more dropped fields in {path}")


def _run_document(corpus: Path, index_dir: Path, rejects_path: Path, report: IndexReport,
                  size: int | None, strict: bool) -> dict[str, Any]:
    """The ``--json`` document of a run (docs/json.md, ``"credrank_index": 1``)."""
    return {"credrank_index": 1, "corpus": str(corpus), "index": str(index_dir),
            **report.counts(reject_row, dropped_row, strict=strict),
            "documents": size, "rejects_file": str(rejects_path)}


class _Guarded:
    """Records from a reader; a read error mid-file (a truncated ``.gz``) ends the stream
    and is kept in ``error`` so that what came before is still indexed and reported."""

    def __init__(self, records: Iterable[Document | Reject]) -> None:
        self._records = records
        self.count = 0
        self.error: ValueError | None = None

    def __iter__(self) -> Iterator[Document | Reject]:
        try:
            for record in self._records:
                self.count += 1
                yield record
        except ValueError as exc:  # CorpusError
            if self.count == 0:
                raise
            self.error = exc


def keep_earlier_rejects(path: Path) -> Path | None:
    """Keep the rejects of an earlier run before this run writes ``path``: a non-empty
    ``path`` is renamed ``<stem>.<its time, UTC>.<suffix>`` beside it (``-2``, ``-3``, … when
    that name is taken) and the new name returned; an empty or absent one is left to be
    overwritten (``None``). Every run's rejects and dropped fields are so kept, the newest
    always at ``path``."""
    from datetime import UTC, datetime

    try:
        stat = path.stat()
    except FileNotFoundError:
        return None
    if stat.st_size == 0 or not path.is_file():
        return None
    stamp = datetime.fromtimestamp(stat.st_mtime, UTC).strftime("%Y%m%dT%H%M%SZ")
    target = path.with_name(f"{path.stem}.{stamp}{path.suffix}")
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.stem}.{stamp}-{n}{path.suffix}")
    path.rename(target)
    return target


def _not_rejects(path: Path, corpus: Path, index_dir: Path) -> str | None:
    """Why ``path`` must not be the rejects file, which a run renames aside when it holds an
    earlier run's rejects and then replaces (:func:`keep_earlier_rejects`): the corpus itself,
    a file of the index folder other than its own ``rejects.jsonl`` (``manifest.json``: the
    index could no longer be opened), or an existing file that holds no reject records.
    ``None`` when it may be."""
    try:
        target = path.resolve()
        if corpus.is_file() and target == corpus.resolve():
            return "it is the corpus being indexed"
        inside = index_dir.resolve()
        if target.is_relative_to(inside) and target != inside / "rejects.jsonl":
            return (f"it is inside the index folder {index_dir}, whose files are the index's "
                    "(its own rejects file is rejects.jsonl there)")
        if target.is_file() and target.stat().st_size:
            with target.open("rb") as fh:
                first = fh.readline(1 << 16)
            try:
                record = json.loads(first)
            except ValueError:
                record = None
            if not (isinstance(record, dict) and "kind" in record):
                return ("an existing file that holds no reject records (a run renames the "
                        "earlier rejects aside and writes its own): choose another path")
    except OSError:
        return None  # _unwritable said what could be said
    return None


def _unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written as the rejects file, or ``None`` if it can."""
    if path.is_dir():
        return "expected a file path, got a directory"
    if path.exists():
        try:
            with path.open("a", encoding="utf-8"):
                pass
        except OSError as exc:
            return f"cannot write it ({exc.strerror or exc})"
        return None
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot create it: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot create it: {parent} is not writable"
    return None


def _count_lines(path: Path) -> int | None:
    """Records in a JSONL file (its non-blank lines), for the progress bar; else unknown."""
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        return None
    with path.open("rb") as f:
        return sum(1 for line in f if line.strip())
