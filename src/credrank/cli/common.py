"""What every command shares: the consoles, error exit, progress bar and KEY=VALUE params."""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeAlias, cast

import typer
from rich.console import Console
from rich.text import Text

from credrank.cli.pipe import reader_gone

if TYPE_CHECKING:
    from rich.progress import Progress, TaskID


class PipeConsole(Console):
    """A rich console that ends a command whose reader went away as
    :func:`credrank.cli.pipe.reader_gone` does (rich's own answer is exit 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        reader_gone()


# Console markup is off: what credrank prints holds user text (paths, ids, option values, source
# types) in which "[/x]" or "[red]" must appear as written, never be taken as a style tag. Styles
# are given as rich Text styles (:func:`labelled`), never as markup in a string.
#: how :data:`console` and :data:`err` are made (a test that runs the CLI in its own process
#: makes them again from these). stderr: a message is one line however long (a terminal wraps
#: it itself; a log or a pipe keeps it whole, never cut at 80 columns)
CONSOLE_OPTIONS: dict[str, Any] = {"markup": False}
ERR_OPTIONS: dict[str, Any] = {"stderr": True, "markup": False, "soft_wrap": True}
console = PipeConsole(**CONSOLE_OPTIONS)
err = PipeConsole(**ERR_OPTIONS)


#: the width of tables printed to a file or a pipe: a table takes only the width its cells need
#: (rich tables do not expand), so no cell is cropped or wrapped below this
PLAIN_TABLE_WIDTH = 1000


def table_console() -> Console:
    """Where a command prints its tables: :data:`console` in a terminal (its width); a file or
    a pipe gets a plain console :data:`PLAIN_TABLE_WIDTH` columns wide, so that no word of a
    cell is cut to fit 80 columns (a log keeps every word)."""
    if console.is_terminal:
        return console
    return PipeConsole(markup=False, highlight=False, width=PLAIN_TABLE_WIDTH)


def labelled(label: str, style: str, message: str) -> Text:
    """``label message`` with ``label`` styled (e.g. ``error:`` in red); ``message`` verbatim."""
    return Text.assemble((label, style), " ", message)


def check_text_argument(name: str, value: str) -> None:
    """Exit 2 unless ``value`` (a text argument: a query, a question) is non-empty UTF-8. A
    byte that is not UTF-8 reaches Python as a lone surrogate (``\\udcff``), which the JSON
    output then carried, and no strict JSON reader takes; a file argument is a path, which
    may hold any bytes, and is not checked here."""
    if not value.strip():
        fail(f"{name}: expected non-empty text")
    bad = next((c for c in value if "\udc80" <= c <= "\udcff"), None)
    if bad is not None:
        fail(f"{name}: expected UTF-8 text, got the byte 0x{ord(bad) - 0xdc00:02x} "
             f"at character {value.index(bad) + 1}")


def fail(message: str, code: int = 2) -> NoReturn:
    """Print ``error: message`` on stderr and exit with ``code``. The message is never
    broken into lines by the console width (``soft_wrap``): a path or a quoted value stays
    whole for the reader and for tools that search the output. A message about an option
    whose value came from a ``credrank.toml`` says where it is written
    (:func:`credrank.cli.config.value_origin`)."""
    from credrank.cli.config import value_origin

    err.print(labelled("error:", "red", message + value_origin(message)), soft_wrap=True)
    raise typer.Exit(code)


def check_index_option(index_dir: Path) -> None:
    """``--index`` must name a directory (or nothing yet): exit 2 for a regular file."""
    if index_dir.exists() and not index_dir.is_dir():
        fail(f"--index {index_dir}: expected an index directory, got a file")


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


#: the environment variable that sets the seconds between two progress lines on a stderr that
#: is not a terminal (default :data:`LOG_INTERVAL`; 0: a line at every report)
INTERVAL_VARIABLE = "CREDRANK_PROGRESS_INTERVAL"
#: the default seconds between two progress lines in a log
LOG_INTERVAL = 30.0


def log_interval() -> float:
    """The seconds between two progress lines in a log: ``$CREDRANK_PROGRESS_INTERVAL`` or
    :data:`LOG_INTERVAL`; a value that is not a number ≥ 0 exits 2 naming the variable."""
    raw = os.environ.get(INTERVAL_VARIABLE, "").strip()
    if not raw:
        return LOG_INTERVAL
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not math.isfinite(value) or value < 0:
        fail(f"${INTERVAL_VARIABLE}: expected seconds (a number >= 0), got {raw!r}")
    return value


def _clock_text(seconds: float) -> str:
    """``seconds`` as ``H:MM:SS`` (``M:SS`` under an hour)."""
    whole = round(max(0.0, seconds)) if math.isfinite(seconds) else 0
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class _LogTask:
    description: str
    total: float | None
    completed: float = 0.0
    started: float = 0.0
    printed_at: float = 0.0
    lines: int = 0
    finished: bool = False


class LogProgress:
    """Progress for a stderr that is not a terminal (a log file, a pipe): no bar, no spinner,
    no carriage return — one plain line per task every ``interval`` seconds (by ``clock``):
    ``label: done/total (pct), rate/s, ETA h:mm:ss`` (``done, rate/s`` when the total is
    unknown), and a last ``done`` line for a task that printed any. It takes the calls the
    commands make of a rich ``Progress`` (``add_task``, ``advance``, ``update``)."""

    def __init__(self, console: Console | None = None, interval: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.console = console if console is not None else err
        self.interval = log_interval() if interval is None else interval
        self.clock = clock
        self.tasks: dict[int, _LogTask] = {}

    def __enter__(self) -> LogProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        if exc and exc[0] is not None:
            return  # a failing command says why; no "done" line
        for task in self.tasks.values():
            if task.lines and not task.finished:
                self._line(task, done=True)

    def add_task(self, description: str, total: float | None = None, **_: Any) -> TaskID:
        now = self.clock()
        key = len(self.tasks)
        self.tasks[key] = _LogTask(description, total, started=now, printed_at=now)
        return cast("TaskID", key)  # rich's id type (an int), so callers take either

    def advance(self, task_id: int, advance: float = 1) -> None:
        task = self.tasks[task_id]
        self.update(task_id, completed=task.completed + advance)

    def update(self, task_id: int, *, completed: float | None = None,
               total: float | None = None, description: str | None = None,
               advance: float | None = None, **_: Any) -> None:
        task = self.tasks[task_id]
        if description is not None:
            task.description = description
        if total is not None:
            task.total = total
        if advance is not None:
            task.completed += advance
        if completed is not None:
            task.completed = completed
        if task.finished:
            return
        now = self.clock()
        if task.total is not None and task.completed >= task.total and task.lines:
            self._line(task, done=True)
        elif now - task.printed_at >= self.interval:
            self._line(task)

    def _line(self, task: _LogTask, done: bool = False) -> None:
        now = self.clock()
        task.printed_at, task.lines = now, task.lines + 1
        task.finished = done
        elapsed = now - task.started
        count = f"{task.completed:,.0f}"
        if task.total:
            count += f"/{task.total:,.0f} ({100 * task.completed / task.total:.0f}%)"
        parts = [f"{task.description}: {count}"]
        rate = task.completed / elapsed if elapsed > 0 else None
        if rate is not None and task.completed:
            parts.append(f"{rate:,.1f}/s")
        if done:
            parts.append(f"done in {_clock_text(elapsed)}")
        else:
            parts.append(f"elapsed {_clock_text(elapsed)}")
            if task.total and rate:
                left = max(task.total - task.completed, 0) / rate
                parts.append(f"ETA {_clock_text(left)}")
        self.console.print(", ".join(parts), soft_wrap=True, highlight=False)


#: what :func:`progress` returns: bars in a terminal, lines in a log
ProgressLike: TypeAlias = "Progress | LogProgress"


def progress(show: bool = True, is_terminal: bool | None = None) -> ProgressLike:
    """The progress of a command on stderr: in a terminal (``is_terminal``, default: the
    stderr console's) a rich display (description, bar, ``done/total``, time elapsed);
    elsewhere (a log, a pipe) periodic plain lines (:class:`LogProgress`); ``show=False``
    (``--quiet``, see :func:`show_progress`) draws nothing."""
    terminal = err.is_terminal if is_terminal is None else is_terminal
    if show and not terminal:
        return LogProgress()
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
    "--quiet", "-q", help="no progress on stderr (a terminal shows bars; a log or a pipe gets "
                          f"a plain line every {LOG_INTERVAL:g} s, ${INTERVAL_VARIABLE} sets "
                          "the seconds)")]


def show_progress(quiet: bool) -> bool:
    """Whether a command reports progress: unless ``--quiet``. :func:`progress` draws bars in
    a terminal and writes periodic plain lines elsewhere (never spinner frames in a file)."""
    return not quiet


class Bars:
    """The progress bars of one command on stderr, one per step, fed by the library's
    callbacks (:mod:`credrank.core.progress`); with ``show`` off the callbacks are ``None``
    and nothing is drawn or imported::

        with Bars(show_progress(quiet)) as bars:
            run(..., on_progress=bars.steps())       # (done, total, label): a bar per label
            fit(..., on_progress=bars.counter("fits"))  # (done, total): the bar "fits"
    """

    def __init__(self, show: bool) -> None:
        self.bar: ProgressLike | None = progress() if show else None
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
    """``KEY=VALUE`` pairs of ``option``, each value read as a ``-S`` value is
    (:func:`credrank.cli.specs.spec_value`: JSON where it parses — numbers, true/false, null,
    lists such as ``discounts=[1,0.5,0.3]`` or ``intent_set=["a","b"]`` — else text), and
    ``True``/``FALSE`` and numbers JSON does not write (``.5``, ``1.``) as bool and number;
    the stage's own validator then checks it, whichever option gave it."""
    from credrank.core.structured import MAX_NESTING, json_too_deep

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"{option}: expected KEY=VALUE, got {item!r}")
        name = key.strip().replace("-", "_")
        if json_too_deep(raw, MAX_NESTING):
            raise ValueError(f"{option} {name}: expected a value nested at most {MAX_NESTING} "
                             "levels deep, got deeper")
        out[name] = _param_value(raw, _json_or_text)
    return out


def _json_or_text(raw: str) -> Any:
    """``raw`` as JSON where it parses (depth checked before), else the text: what
    :func:`credrank.cli.specs.spec_value` reads a ``-S`` value as."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _param_value(raw: str, parse: Callable[[str], Any]) -> Any:
    """One ``KEY=VALUE`` value: a bool word in any case, JSON (``parse``), else a number
    Python reads (``.5``), else the text."""
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    value = parse(raw)
    if not isinstance(value, str):
        return value
    for number in (int, float):
        try:
            return number(raw)
        except ValueError:
            continue
    return value
