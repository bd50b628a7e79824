"""``credrank provenance hosts``: the hosts of an index by document count, the source type
each got and what typed it (:mod:`credrank.provenance.inventory`), and a domain-table template
for the hosts left ``unknown``.

The provenance gap: on a real corpus most hosts match no built-in rule, so the source-type
priors change nothing until the user types the hosts that matter. This command lists them
(``--unknown``: only those), writes them as a domain table to fill in (``--template``), and
with ``--table`` shows how a filled-in table would type them before the corpus is indexed
again with ``credrank index CORPUS --index DIR --table FILE``.

``--json`` output is data all the way down, marked ``"credrank_provenance_hosts": 1``.
"""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.common import err, fail, index_rows, warn
from credrank.cli.config import from_file
from credrank.core.files import atomic_write_text
from credrank.index.manifest import MANIFEST
from credrank.provenance import DomainTableError, RulesError, SourceTyper
from credrank.provenance.inventory import HOST_FIELDS, HostCensus, host_counts, template_text


def _check_template(path: Path, force: bool) -> None:
    """Refuse a ``--template`` path that is no place for a new table: a directory, anything
    that exists and is not a regular file (a device, a FIFO, a socket, a symbolic link), a
    path inside a credrank index (a folder with ``manifest.json``, at any depth below it), an
    existing file without ``--force``, or a path whose folder does not exist (issue 37,
    N11)."""
    if path.is_symlink():
        fail(f"--template {path}: expected a regular file path, got a symbolic link; give "
             "the path of the file itself")
    if path.is_dir():
        fail(f"--template {path}: expected a file path, got a directory")
    if path.exists() and not path.is_file():
        fail(f"--template {path}: expected a regular file path, got {_kind(path)}; "
             "nothing was written")
    if not path.parent.is_dir():
        fail(f"--template {path}: the folder {path.parent} does not exist")
    index = _index_around(path.parent.resolve())
    if index is not None:
        fail(f"--template {path}: the path is inside the credrank index {index} "
             f"(it has {MANIFEST}); write the template outside the index")
    if path.name == MANIFEST and path.exists():
        fail(f"--template {path}: the file may be an index's {MANIFEST}; write the template "
             "under another name")
    if path.exists() and not force:
        fail(f"--template {path}: the file exists (a filled-in table?); choose another path "
             "or pass --force to overwrite it")


def _index_around(folder: Path) -> Path | None:
    """The credrank index ``folder`` is or lies in, at any depth (``DIR/shard``,
    ``DIR/shard/wal``): the nearest of ``folder`` and its parents whose ``manifest.json`` is a
    JSON object naming an ``embedder``; ``None`` when there is none (another program's
    ``manifest.json`` does not count)."""
    for above in (folder, *folder.parents):
        manifest = above / MANIFEST
        if not manifest.is_file():
            continue
        try:
            with manifest.open("rb") as fh:
                data = json.loads(fh.read(1_000_000))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(data, dict) and "embedder" in data:
            return above
    return None


def _kind(path: Path) -> str:
    mode = path.stat().st_mode
    for test, name in ((stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "something that is not a regular file"


def _lines(census: HostCensus, index_dir: Path, tables: list[Path], why: str) -> list[str]:
    s = census.summary()
    docs, hosts = s["documents"], s["hosts"]
    by_kind, hosts_kind = s["documents_by_rule_kind"], s["hosts_by_rule_kind"]

    def share(n: int, of: int) -> str:
        return f"{n} ({100 * n / of:.1f}%)" if of else "0"

    how = (f"typed again with the built-in rules and --table {', '.join(map(str, tables))}"
           if census.retyped else "as stored in the index")
    out = [f"{index_dir}: {docs} documents from {hosts} hosts; source types {how}",
           f"typed: {share(s['typed_documents'], docs)} documents, "
           f"{share(s['typed_hosts'], hosts)} hosts; unknown: "
           f"{share(s['unknown_documents'], docs)} documents, "
           f"{share(s['unknown_hosts'], hosts)} hosts",
           "documents by rule: " + ", ".join(f"{k} {by_kind.get(k, 0)}" for k in
                                             ("builtin", "table", "declared", "none")),
           "hosts by rule: " + ", ".join(f"{k} {hosts_kind.get(k, 0)}" for k in
                                         ("builtin", "table", "declared", "none"))]
    if s["documents_without_host"]:
        out.append(f"documents without a host: {s['documents_without_host']}")
    if not census.shown:
        out.append("no host to list")
        return out
    width = max(4, *(len(r.host or f"({r.note})") for r in census.shown))
    out.append("")
    out.append(f"{'docs':>6}  {'host':<{width}}  {'source_type':<16}  rule")
    for r in census.shown:
        extra = ""
        if len(r.types) > 1:
            extra = "  [" + ", ".join(f"{t} {n}" for t, n in r.types.items()) + "]"
        out.append(f"{r.documents:>6}  {(r.host or f'({r.note})'):<{width}}  "
                   f"{r.source_type:<16}  {r.rule}{extra}")
    left = len(census.rows) - len(census.shown)
    if left:
        out.append(f"({left} more rows not shown: {why})")
    return out


def hosts_command(
    index_dir: Annotated[Path, typer.Option("--index", help="the index directory")],
    unknown: Annotated[bool, typer.Option(
        "--unknown", help="only hosts with documents typed 'unknown'")] = False,
    top: Annotated[int | None, typer.Option(
        "--top", help="at most N rows (most documents first); also the template's rows")
    ] = None,
    template: Annotated[Path | None, typer.Option(
        "--template", help="write a domain table (domain,source_type) of the unknown hosts "
                           "here, most documents first, every type 'unknown' for you to "
                           "fill in")] = None,
    table: Annotated[list[Path] | None, typer.Option(
        "--table", help="type the URLs again with the built-in rules and this domain table "
                        "CSV (what `credrank index --table` would store); repeatable")
    ] = None,
    force: Annotated[bool, typer.Option(
        "--force", help="overwrite an existing --template file")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="stable JSON output")] = False,
) -> None:
    """List the hosts of an index by document count with their source type and the rule that
    typed them; --template writes a domain table of the unknown hosts to fill in. A --table
    row whose domain is no valid host name (it can never match a URL) is named in a warning
    (file:line)."""
    if top is not None and top < 1:
        fail(f"--top: expected an integer >= 1, got {top}")
    if force and template is None and not from_file("force"):
        fail("--force: only with --template (it lets the template overwrite an existing "
             "file)")
    if template is not None:
        _check_template(template, force)
    tables = list(table or ())
    try:
        typer_ = SourceTyper(tables) if tables else None
    except (DomainTableError, RulesError) as exc:
        fail(f"--table: {exc}")
    if typer_ is not None:
        for message in typer_.unmatchable_warnings():
            warn(f"--table {message}")
    rows = index_rows(index_dir, HOST_FIELDS)
    try:
        census = host_counts(rows, typer_, unknown_only=unknown, top=top)
    except ValueError as exc:
        fail(f"--index {index_dir}: {exc}")
    if template is not None:
        chosen = census.unknown_hosts[:top] if top is not None else census.unknown_hosts
        try:
            atomic_write_text(template, template_text(chosen, source=f"the index {index_dir}",
                                                  total_unknown=len(census.unknown_hosts)))
        except OSError as exc:  # a full disk, an unwritable folder: a runtime failure
            fail(f"--template {template}: writing failed: {exc.strerror or exc}; nothing "
                 "was written", code=1)
    if as_json:
        doc: dict[str, Any] = {
            "credrank_provenance_hosts": 1, "index": str(index_dir),
            "tables": [str(t) for t in tables], "filter": {"unknown": unknown, "top": top},
            **census.summary(),
            "rows": [r.to_dict() for r in census.shown],
            "rows_not_shown": len(census.rows) - len(census.shown),
            "template": None if template is None else {
                "path": str(template),
                "hosts": len(census.unknown_hosts[:top] if top is not None
                             else census.unknown_hosts),
                "unknown_hosts": len(census.unknown_hosts)},
        }
        typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
    else:
        why = " and ".join(x for x in ("--unknown" if unknown else "",
                                       f"--top {top}" if top is not None else "") if x)
        typer.echo("\n".join(_lines(census, index_dir, tables, why)))
    if template is not None:
        n = len(census.unknown_hosts)
        written = min(n, top) if top is not None else n
        err.print(f"template written to {template}: {written} of {n} unknown hosts",
                  soft_wrap=True)
