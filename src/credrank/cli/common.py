"""What every command shares: the consoles, error exit, progress bar and KEY=VALUE params."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

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


def progress() -> Progress:
    from rich.progress import (  # lazy: only the commands that show a bar import it
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("{task.description}", style="bold", markup=False), BarColumn(),
                    MofNCompleteColumn(), TimeElapsedColumn(), console=err, transient=False)


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
