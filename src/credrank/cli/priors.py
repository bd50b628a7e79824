"""``credrank priors …``: the versioned feedback store of prior updates (seed 004's post-query
update, made bounded, logged and reversible)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from credrank.core.errors import FileFormatError
from credrank.core.schema import Field, Flag, Nullable, Table, Text
from credrank.core.structured import parse_json, read_text
from credrank.documents.schema import SOURCE_TYPES
from credrank.signals.feedback import (
    AUDIT_FILE,
    STORE_FILE,
    Feedback,
    FeedbackPriors,
    SourceTypeMismatch,
    source_types_of,
)

app = typer.Typer(add_completion=False, no_args_is_help=True)

T = TypeVar("T")


def _run(action: Callable[[], T], words: dict[str, str] | None = None) -> T:
    """Run ``action``; a bad input or an unreadable/unwritable store is ``error: …``, exit 2
    (``FeedbackStoreError`` is a ``ValueError``; ``OSError`` messages name the file). A
    message opening with a library keyword of ``words`` (``feedback step:``) says the
    command's option instead (``--step:``)."""
    try:
        return action()
    except (ValueError, OSError) as exc:
        message = str(exc)
        for keyword, option in (words or {}).items():
            if message.startswith(keyword + ":"):
                message = option + message[len(keyword):]
                break
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(2) from None


def _open(store: Path, base: str | None = None, **kw: Any) -> FeedbackPriors:
    def opened() -> FeedbackPriors:
        try:
            return FeedbackPriors(store, base, **kw)
        except ValueError as exc:  # the library's keywords, said as this command's options
            raise ValueError(_option_words(str(exc))) from None

    return _run(opened, {"epsilon": "--epsilon", "max_change": "--max-change", "base": "--base",
                         "priors": "--base"})


def _option_words(message: str) -> str:
    """A store's message with its keyword arguments said as ``priors init``'s options (and
    the command that creates a store, where the library says ``base=``)."""
    message = message.replace("without base=", "without --base")
    message = message.replace("pass base= (a PriorTable or preset name) to create one",
                              "create one with `credrank priors init DIR`")
    message = re.sub(r"the stored (?:epsilon|max_change)=", "the stored value ", message)
    for keyword, option in (("max_change=", "--max-change "), ("epsilon=", "--epsilon ")):
        message = message.replace(keyword, option)
    return message


#: one line of a feedback file
FEEDBACK_LINE = Table({
    "source_type": Field(Text(choices=SOURCE_TYPES)),
    "source_id": Field(Nullable(Text()), default=None),
    "relevant": Field(Flag()),
}, what="a JSON object {source_type, source_id, relevant}")


#: the most rejected lines a failed ``priors update`` lists (the rest are counted)
MAX_LISTED = 20


def read_feedback(path: Path) -> list[Feedback]:
    """The items of the feedback file ``path`` (:func:`read_feedback_lines`)."""
    return [item for _, item in read_feedback_lines(path)]


def read_feedback_lines(path: Path) -> list[tuple[int, Feedback]]:
    """``(line number, item)`` of each item of the feedback file ``path``: JSONL lines
    ``{"source_type": …, "source_id": … (optional), "relevant": true|false}``, read by the
    hardened reader (UTF-8, bounded JSON per line, a declared schema).

    Lines are split on ``\\n`` only, as JSONL is defined (a trailing ``\\r`` is dropped;
    U+2028, form feed and the like are characters of a line, not line ends); blank lines are
    skipped. All or nothing: when any line is bad, nothing is returned and one error lists
    every bad line as ``file:line: field: expected …, got …`` (the first
    :data:`MAX_LISTED`, then how many more)."""
    text = read_text(path, what="feedback file")
    items: list[tuple[int, Feedback]] = []
    problems: list[str] = []
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            row = FEEDBACK_LINE.check(parse_json(line, where), where)
        except FileFormatError as exc:  # SchemaError too
            problems.append(str(exc))
            continue
        items.append((number, (row["source_type"], row["source_id"], row["relevant"])))
    if len(problems) == 1:
        raise FileFormatError(f"{problems[0]} (nothing was applied)")
    if problems:
        listed = "\n".join(f"  {p}" for p in problems[:MAX_LISTED])
        more = len(problems) - MAX_LISTED
        raise FileFormatError(
            f"{path}: {len(problems)} lines rejected, nothing was applied:\n{listed}"
            + (f"\n  … and {more} more" if more > 0 else ""))
    return items


def _version_number(text: str) -> int:
    """A VERSION given on the command line: a plain decimal integer (``1.0``, ``1_0``,
    ``+1`` and ``-1`` are refused, though Python's ``int`` reads some of them)."""
    if not re.fullmatch(r"[0-9]+", text):
        raise typer.BadParameter(f"expected a version number, a plain decimal integer such as "
                                 f"3, got {text!r}")
    if len(text) > 18:
        raise typer.BadParameter(f"expected a version number, got an integer of {len(text)} "
                                 "digits")
    return int(text)


#: the library's keywords for a write's options, said as the command's options
_WRITE_WORDS = {"author": "--author", "reason": "--reason", "request_id": "--request-id"}

#: ``--request-id``: a retry of a write with the same id does not apply it again
REQUEST_ID_HELP = ("an id for this write (1 to 200 printable characters): run again with the "
                   "same id and the same input, it is not applied twice (the store keeps the "
                   "ids of its last 10,000 writes); the same id with other input is an error")


def _write(action: Callable[[], tuple[int, bool]], words: dict[str, str]) -> tuple[int, bool]:
    """Run a store write (:func:`_run`), a reused request id said as ``--request-id``."""
    def run() -> tuple[int, bool]:
        try:
            return action()
        except ValueError as exc:
            message = str(exc)
            if message.startswith("request_id "):  # RequestIdReused: "request_id 'x': …"
                raise ValueError("--request-id" + message[len("request_id"):]) from None
            raise

    return _run(run, words)


def _said_at_line(exc: SourceTypeMismatch, feedback: Path, lines: list[int]) -> str:
    """Every item's source type refused by the store, each said at its line of the feedback
    file (as every other bad line is listed)."""
    said = [f"{feedback}:{lines[i]}: source_type: {m}" for i, m in exc.problems]
    return "\n".join(said) + " (nothing was applied)"


@app.command()
def init(store: Annotated[Path, typer.Argument(help="store folder")],
         base: Annotated[str | None, typer.Option(
             help="preset or prior file to start from (default current); given for an "
                  "existing store, it must be the store's base")] = None,
         epsilon: Annotated[float | None, typer.Option(
             help="floor ε of every prior, in (0, 1); default 0.01")] = None,
         max_change: Annotated[float | None, typer.Option(
             help="cap on one update's change of one prior, in (0, 1]; default 0.05")] = None
         ) -> None:
    """Create a store whose version 0 is BASE (an existing store is opened: as it is, or,
    with --base, if its base matches)."""
    if base is None and not (store / "priors.json").exists():
        base = "current"  # the default of a new store; an existing one keeps its own
    fp = _open(store, base, epsilon=epsilon, max_change=max_change)
    typer.echo(f"store {store}: version {fp.current}")


@app.command()
def update(store: Annotated[Path, typer.Argument(help="store folder")],
           feedback: Annotated[Path, typer.Argument(help="feedback JSONL")],
           step: Annotated[float, typer.Option(help="step size η in (0, 0.5]")] = 0.1,
           author: Annotated[str, typer.Option()] = "cli",
           reason: Annotated[str, typer.Option()] = "",
           index: Annotated[Path | None, typer.Option(
               "--index", help="an index: an item whose source_id it holds must declare the "
                               "type its documents have by provenance, else it is refused "
                               "(file:line)")] = None,
           request_id: Annotated[str | None, typer.Option(
               "--request-id", help=REQUEST_ID_HELP)] = None) -> None:
    """Apply one round of relevance feedback as a new version.

    Each prior the items involve (their type's; their source's when source_id is given)
    moves once, from the state before the round:

    \b
        λ ← clip(λ + clamp((1 − (1 − η)^n) · (r̄ − λ), −c, c), ε, 1)

    where n is the number of items involving it, r̄ the share of them that are relevant, η
    the --step, c the store's max_change (default 0.05) and ε its epsilon (default 0.01;
    both fixed by priors init).

    A source's type is its documents' provenance type, never an item's word: a source seen
    for the first time is recorded with its item's type (with --index: the type the index
    gives it) and starts from that type's prior; its prior then applies only to documents of
    that type, and a later item declaring another type for it is refused.

    All or nothing: if any line of the feedback file is bad, nothing is applied and every
    bad line is listed (file:line: reason).
    """
    numbered = _run(lambda: read_feedback_lines(feedback))
    lines, items = [n for n, _ in numbered], [item for _, item in numbered]
    known = None
    if index is not None:
        from credrank.cli.common import index_rows

        known = source_types_of(index_rows(index, ("source_id", "source_type")))
    elif any(sid is not None for _, sid, _ in items):
        typer.echo("note: without --index, a source seen for the first time is recorded with "
                   "its item's declared source_type, a claim no index has checked (its prior "
                   "then applies only to documents of that type); give --index DIR to check "
                   "it against provenance", err=True)
    fp = _open(store)
    lost = fp.audit_log_lost()

    def apply() -> tuple[int, bool]:
        try:
            return fp.update_once(items, step, author=author, reason=reason,
                                  request_id=request_id, known_types=known)
        except SourceTypeMismatch as exc:
            raise ValueError(_said_at_line(exc, feedback, lines)) from None

    version, applied = _write(apply, {"feedback step": "--step", **_WRITE_WORDS})
    if not applied:
        typer.echo(f"store {store}: version {version} (--request-id {request_id} was already "
                   "applied by it; nothing was changed)")
        return
    _warn_new_log(store, lost, version)
    if not items:
        typer.echo(f"note: {feedback} holds no feedback items: version {version} records an "
                   "empty round", err=True)
    typer.echo(f"store {store}: version {version}")


def _warn_new_log(store: Path, lost: bool, version: int) -> None:
    """Say on stderr that a write started a new audit log (the old one was missing)."""
    if lost and version > 0:
        typer.echo(f"warning: {store / AUDIT_FILE} was missing or empty: a new audit log "
                   f"starts at version {version}; versions 0 to {version - 1} are recorded in "
                   f"{store / STORE_FILE} only", err=True)


@app.command()
def rollback(store: Annotated[Path, typer.Argument(help="store folder")],
             version: Annotated[int, typer.Argument(
                 help="version to restore (a plain decimal integer)", metavar="VERSION",
                 parser=_version_number)],
             author: Annotated[str, typer.Option()] = "cli",
             reason: Annotated[str, typer.Option()] = "",
             request_id: Annotated[str | None, typer.Option(
                 "--request-id", help=REQUEST_ID_HELP)] = None) -> None:
    """Restore an earlier version (recorded as a new version)."""
    fp = _open(store)
    lost = fp.audit_log_lost()
    new, applied = _write(lambda: fp.rollback_once(version, author=author, reason=reason,
                                                   request_id=request_id),
                          {"version": "VERSION", **_WRITE_WORDS})
    if not applied:
        typer.echo(f"store {store}: version {new} (--request-id {request_id} was already "
                   "applied by it; nothing was changed)")
        return
    _warn_new_log(store, lost, new)
    typer.echo(f"store {store}: version {new} (= version {version})")


@app.command()
def show(store: Annotated[Path, typer.Argument(help="store folder")],
         version: Annotated[int | None, typer.Option(
             help="default: current (a plain decimal integer)", parser=_version_number)] = None,
         history: Annotated[bool, typer.Option(help="print the audit log instead")] = False
         ) -> None:
    """Print a version's priors as JSON (or the audit log, one JSON line per entry)."""
    fp = _open(store)
    if history:
        for entry in _run(fp.audit):
            typer.echo(json.dumps({"credrank_priors_history": 1, **entry}, default=str))
        return
    record = _run(lambda: fp.record(version), {"version": "--version"})
    typer.echo(json.dumps({"credrank_priors_show": 1, "version": record["version"],
                           "types": dict(fp.table(record["version"]).values),
                           "sources": dict(record["sources"]),
                           "source_types": dict(record["source_types"])}, indent=2))
