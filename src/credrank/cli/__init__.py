"""The ``credrank`` command line (typer + rich): one module per command group, each thin.
JSON outputs are documented in docs/json.md.

Startup costs only what the command runs. :data:`COMMANDS` is the table of commands, with the
one line each shows in ``credrank --help``: that help (and ``--version``) is printed from this
table without importing typer, rich or any command module (:func:`run`'s fast path), and
typer's own root help prints the same text (:func:`root_help`). Each command's module is
imported when that command runs or shows its own ``--help``: ``credrank search`` does not pay
for the imports of ``bench``, ``reliability`` or ``cram`` (seconds of scipy, matplotlib,
torch). The typer app itself lives in :mod:`credrank.cli.root` and is imported on first use
(``from credrank.cli import app`` works as before).

Adding a command is one :class:`Command` line here (its module and the function or Typer app
in it, and its one-line help); ``tests/test_cli_startup.py`` checks that the line says what
the command's own help says.
"""

from __future__ import annotations

import atexit
import os
import sys

# The fast path imports nothing it can do without (typing, shutil, textwrap, re): the
# interpreter's own start is the yardstick of `credrank --help`.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, NoReturn

    from credrank.cli.root import LazyGroup, load_command

    app: Any  # the root typer.Typer (credrank.cli.root.app)


class Command:
    """One command of :data:`COMMANDS`: ``module`` defines it (imported when the command
    runs or shows its own --help) as ``attribute``, a command function or, with
    ``group=True``, a Typer app; ``short`` is its line in ``credrank --help`` (a group's
    help as well; a command function's help is its docstring, whose first paragraph this
    line repeats, as a test checks)."""

    __slots__ = ("attribute", "group", "module", "short")

    def __init__(self, module: str, attribute: str, short: str, group: bool = False) -> None:
        self.module, self.attribute, self.short, self.group = module, attribute, short, group

    def __repr__(self) -> str:
        return (f"Command({self.module!r}, {self.attribute!r}, {self.short!r}"
                f"{', group=True' if self.group else ''})")


#: name → command; the order is the order of ``credrank --help``
COMMANDS: dict[str, Command] = {
    "index": Command(
        "credrank.cli.index", "index",
        "Index CORPUS into DIR (incremental; an interrupted run is completed by re-running)."),
    "search": Command(
        "credrank.cli.search", "search",
        "Credibility-aware search: score = sim × λ(source type) over an expanded pool."),
    "optimize": Command(
        "credrank.cli.optimize", "optimize",
        "Build the search graph of DIR (after `credrank index --no-optimize`)."),
    "score": Command(
        "credrank.cli.score", "app",
        "Index-time scores, stored in the payload: machine-written text, learned credibility.",
        group=True),
    "pipeline": Command(
        "credrank.cli.pipeline", "app",
        "Pipeline specs: the stage catalog, and checking a spec file.", group=True),
    "demo": Command(
        "credrank.cli.demo", "demo",
        "Index the synthetic health corpus and compare similarity-only with source priors."),
    "bench": Command(
        "credrank.cli.bench", "bench",
        "Baseline vs credibility-aware systems on one data set, with intervals and tests."),
    "serve": Command(
        "credrank.cli.serve", "serve",
        "Serve the index over HTTP: POST /search, /rerank, /index, /feedback, "
        "/priors/rollback; GET /priors, /healthz, /readyz, /openapi.json and the web page "
        "at /."),
    "context": Command(
        "credrank.cli.context", "context",
        "Print what the generator would see: the top-k passages with credibility tiers."),
    "advise": Command(
        "credrank.cli.advise", "advise",
        "Feasible credibility methods per content pool, their missing prerequisites and costs "
        "(chapter 35.6) — never a ranking."),
    "reliability": Command(
        "credrank.cli.reliability", "app",
        "Source reliability from cross-source agreement (RA-RAG).", group=True),
    "credibility": Command(
        "credrank.cli.credibility", "app",
        "A learned page-credibility prior: fit it on labelled pages.", group=True),
    "stance": Command(
        "credrank.cli.stance", "app",
        "The stance model of claim-style queries: fit it on labelled pairs.", group=True),
    "consensus": Command(
        "credrank.cli.consensus", "app",
        "Label-free answer consensus: calibrate its contested threshold.", group=True),
    "provenance": Command(
        "credrank.cli.provenance", "app",
        "Citation chains (laundering) and the hosts of an index with the source types "
        "they got.", group=True),
    "cram": Command(
        "credrank.cli.cram", "app",
        "Credibility-aware attention (CrAM) for a local model: calibrate heads, answer.",
        group=True),
    "audit": Command(
        "credrank.cli.audit", "app",
        "Trust audit (chapter 35.1–35.2): profile, hard gates, radar, report.", group=True),
    "models": Command(
        "credrank.cli.models", "app",
        "Local model artifacts: the ONNX MiniLM of the torch-free query path.", group=True),
    "priors": Command(
        "credrank.cli.priors", "app",
        "Versioned, reversible prior updates from relevance feedback.", group=True),
}

#: the root help's description and options (``credrank.cli.root`` declares the same options)
DESCRIPTION = "Source credibility in the retrieval step of RAG."
ROOT_OPTIONS: tuple[tuple[str, str], ...] = (
    ("--version", "Show the version and exit."),
    ("--config FILE", "Defaults for the commands' options (default: the nearest credrank.toml "
                      "or pyproject.toml [tool.credrank] from the current directory up; "
                      "env CREDRANK_CONFIG)."),
    ("--help", "Show this message and exit."),
)


def version_line() -> str:
    """``credrank X.Y.Z`` (the package's ``__version__``)."""
    from credrank import __version__

    return f"credrank {__version__}"


def help_width() -> int:
    """The width typer's rich help would use: ``TERMINAL_WIDTH``, else the terminal's (or
    ``COLUMNS``), else 80."""
    for name in ("TERMINAL_WIDTH", "COLUMNS"):
        given = os.environ.get(name, "")
        if given.isdigit() and int(given) > 0:
            return int(given)
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):  # not a terminal
        return 80


def root_help(width: int | None = None) -> str:
    """The text of ``credrank --help``, from :data:`COMMANDS` alone (no import), laid out as
    typer's rich help lays it out: usage, description, an Options and a Commands panel."""
    width = max(40, width or help_width())
    lines = ["", " Usage: credrank [OPTIONS] COMMAND [ARGS]...", "", f" {DESCRIPTION}", ""]
    lines += _panel("Options", ROOT_OPTIONS, width)
    lines += _panel("Commands", [(name, c.short) for name, c in COMMANDS.items()], width)
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken at spaces only."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line]


def _panel(title: str, rows: Any, width: int) -> list[str]:
    tl, h, tr, v, bl, br = _box()
    inner = width - 4  # "│ " and " │"
    left = max(len(name) for name, _ in rows) + 2
    out = [f"{tl}{h} {title} " + h * max(0, width - len(title) - 5) + tr]
    for name, text in rows:
        for i, piece in enumerate(_wrap(text, max(10, inner - left))):
            cell = f"{name if i == 0 else '':<{left}}{piece}"
            out.append(f"{v} {cell:<{inner}} {v}")
    out.append(bl + h * (width - 2) + br)
    return out


def _box() -> str:
    """The panel's corners and rules; ASCII where stdout cannot encode the box characters
    (as rich falls back on a legacy terminal)."""
    box = "╭─╮│╰╯"
    try:
        box.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (LookupError, UnicodeEncodeError):
        return "+-+|++"
    return box


def run(args: list[str] | None = None) -> int:
    """Run the CLI on ``args`` (default ``sys.argv[1:]``) and return its exit code instead of
    raising ``SystemExit``: 0 done, 1 a failed check or an unexpected error (its traceback
    printed), 2 bad usage or bad input (``error: …``), 130 interrupted, 141 the reader of
    stdout went away (as a shell reports SIGPIPE).

    ``credrank``, ``credrank --help`` and ``credrank --version`` are answered here, before
    typer is imported (the first command a user types is the cheapest)."""
    argv = list(sys.argv[1:] if args is None else args)
    try:
        if argv in ([], ["--help"]):
            encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
            sys.stdout.write(root_help().encode(encoding, "replace").decode(encoding))
            return 0 if argv else 2  # as typer's no_args_is_help: the help, then usage exit
        if argv == ["--version"]:
            print(version_line())
            return 0
    except BrokenPipeError:
        return 141
    from credrank.cli.root import run_app

    return run_app(argv)


def exit_process(code: int) -> NoReturn:
    """Leave the process with ``code`` without finalising the interpreter.

    Native libraries keep threads of their own (onnxruntime's thread pools, a model load that a
    daemon thread started and an early error overtook, the engine's workers). When the
    interpreter finalises and the C++ runtime destroys its statics while such a thread is
    still running, the process aborts (``terminate called without an active exception``,
    exit 134) after the command has already finished. So the console script does what the
    interpreter's own exit does for Python — the ``atexit`` handlers run (they close files,
    stop Dask clusters, flush logs) and stdout/stderr are flushed — and then ends the process
    with ``os._exit``, which runs no C++ destructors.
    """
    try:
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe or stream: nothing left to say
                pass
        os._exit(code)


def main() -> NoReturn:
    """The ``credrank`` console script: :func:`run`, then :func:`exit_process`."""
    exit_process(run())


_ROOT_NAMES = ("app", "LazyGroup", "load_command")


def __getattr__(name: str) -> Any:
    # the typer app and its lazy group, imported on first use (PEP 562): `import credrank.cli`
    # and the fast path of `run` never import typer
    if name in _ROOT_NAMES:
        import credrank.cli.root as root

        return getattr(root, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "Command", "LazyGroup", "app", "exit_process", "load_command", "main",
           "root_help", "run"]
