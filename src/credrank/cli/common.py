"""What every command shares: the consoles, error exit, progress bar and KEY=VALUE params."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console

if TYPE_CHECKING:
    from rich.progress import Progress

console = Console()
err = Console(stderr=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``. The message is never
    broken into lines by the console width (``soft_wrap``): a path or a quoted value stays
    whole for the reader and for tools that search the output."""
    err.print(f"[red]error:[/red] {message}", soft_wrap=True)
    raise typer.Exit(code)


def progress() -> Progress:
    from rich.progress import (  # lazy: only the commands that show a bar import it
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=err, transient=False)


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
