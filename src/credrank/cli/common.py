"""What every command shares: the consoles, error exit, progress bar and KEY=VALUE params."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from rich.progress import Progress

# Console markup is off: what credrank prints holds user text (paths, ids, option values, source
# types) in which "[/x]" or "[red]" must appear as written, never be taken as a style tag. Styles
# are given as rich Text styles (:func:`labelled`), never as markup in a string.
console = Console(markup=False)
err = Console(stderr=True, markup=False)


def labelled(label: str, style: str, message: str) -> Text:
    """``label message`` with ``label`` styled (e.g. ``error:`` in red); ``message`` verbatim."""
    return Text.assemble((label, style), " ", message)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``. The message is never
    broken into lines by the console width (``soft_wrap``): a path or a quoted value stays
    whole for the reader and for tools that search the output."""
    err.print(labelled("error:", "red", message), soft_wrap=True)
    raise typer.Exit(code)


def index_rows(index_dir: Path, fields: Sequence[str]) -> list[dict[str, Any]]:
    """The payload ``fields`` of every document of the index ``index_dir``, opened read-only;
    a missing directory or an unreadable index exits 2 with an error naming ``--index``."""
    from credrank.index.opener import open_store  # lazy: only the commands that read one
    from credrank.index.store import StoreError

    if not index_dir.exists():
        fail(f"--index {index_dir}: no such directory; build an index with `credrank index "
             "CORPUS --index DIR`")
    try:
        with open_store(index_dir) as store:
            return store.read_payloads(None, fields=fields)
    except (StoreError, ValueError) as exc:
        message = str(exc)
        fail(message if message.startswith("--index") else f"--index {index_dir}: {message}")


def warn(message: str, label: str = "warning:") -> None:
    """Print ``warning: message`` (or another ``label``) on stderr, the message verbatim."""
    err.print(labelled(label, "yellow", message), soft_wrap=True)


def hit_cell(hit: dict[str, Any], query: str) -> Text:
    """A hit's title (bold) and, below it, the text it carries (``--text``), the query words
    in it highlighted — the last column of the ``credrank search`` table."""
    from credrank.core.hittext import highlights

    out = Text(str(hit.get("title") or hit.get("doc_id", "")), style="bold")
    body = hit.get("text")
    if body:
        passage = Text(str(body))
        for start, end in highlights(passage.plain, query):
            passage.stylize("bold yellow", start, end)
        out.append("\n")
        out.append_text(passage)
    return out


def progress(show: bool = True) -> Progress:
    """A rich progress display on stderr: description, bar, ``done/total``, time elapsed;
    ``show=False`` (see :func:`show_progress`) draws nothing."""
    from rich.progress import (  # lazy: only the commands that show a bar import it
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("{task.description}", style="bold", markup=False), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=False,
                    disable=not show)


#: ``--quiet/-q`` of every long command
QuietOption = Annotated[bool, typer.Option(
    "--quiet", "-q", help="no progress on stderr (it is shown only when stderr is a terminal)")]


def show_progress(quiet: bool, is_terminal: bool | None = None) -> bool:
    """Whether a command draws progress bars: never with ``--quiet``, and only when stderr
    (``is_terminal``, default: the stderr console's) is a terminal — a file, a pipe or a test
    runner gets nothing."""
    return not quiet and (err.is_terminal if is_terminal is None else is_terminal)


class Bars:
    """The progress bars of one command on stderr, one per step, fed by the library's
    callbacks (:mod:`credrank.core.progress`); with ``show`` off the callbacks are ``None``
    and nothing is drawn or imported::

        with Bars(show_progress(quiet)) as bars:
            run(..., on_progress=bars.steps())       # (done, total, label): a bar per label
            fit(..., on_progress=bars.counter("fits"))  # (done, total): the bar "fits"
    """

    def __init__(self, show: bool) -> None:
        self.bar = progress() if show else None
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> Bars:
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)  # type: ignore[arg-type]

    def update(self, done: int, total: int, label: str) -> None:
        """Set the bar ``label`` (made on its first report) to ``done`` of ``total``."""
        if self.bar is None:
            return
        if label not in self.tasks:
            self.tasks[label] = self.bar.add_task(label, total=total)
        self.bar.update(self.tasks[label], completed=done, total=total)

    def steps(self) -> Callable[[int, int, str], None] | None:
        """The ``on_progress(done, total, label)`` callback (``None`` when not shown)."""
        return None if self.bar is None else self.update

    def counter(self, label: str) -> Callable[[int, int], None] | None:
        """The ``on_progress(done, total)`` callback of the bar ``label`` (``None`` when not
        shown)."""
        if self.bar is None:
            return None
        return lambda done, total: self.update(done, total, label)


def parse_params(items: list[str] | None, option: str = "--select-param") -> dict[str, Any]:
    """``KEY=VALUE`` pairs of ``option``; values become int, float or bool where they parse
    as such."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{option}: expected KEY=VALUE, got {item!r}")
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
