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
the command's own help says. Each command's own ``--help`` is printed from
:mod:`credrank.cli.helptext` where no ``credrank.toml`` may change it (:func:`static_help`);
after changing a command's options or help, regenerate it with ``python -m
credrank.cli.helpgen`` (the same test file fails until then).

Other distributions add commands through the entry-point group :data:`COMMAND_GROUP`, each
entry naming a :class:`Command` (the bench distribution, ``bench/``, adds ``credrank bench``:
``bench = "credrank_bench.commands:BENCH"``); the product never imports them.
:func:`entry_points` reads the group from the installed distributions' metadata without
importing ``importlib.metadata`` (its import alone costs about three times ``credrank
--help``), so the root help lists them for the cost of a directory scan; a built-in command
is found without reading them.
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
    "serve": Command(
        "credrank.cli.serve", "serve",
        "Serve the index over HTTP: POST /search, /rerank, /context, /rerank/context, "
        "/index, /feedback, /priors/rollback; GET /priors, /healthz, /readyz, /openapi.json "
        "and the web page at /."),
    "context": Command(
        "credrank.cli.context", "context",
        "Print what the generator would see: the top-k passages with credibility tiers."),
    "advise": Command(
        "credrank.cli.advise", "advise",
        "Feasible credibility methods per content pool, their missing prerequisites and costs "
        "— never a ranking."),
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
        "Trust audit: profile, hard gates, radar, report.", group=True),
    "models": Command(
        "credrank.cli.models", "app",
        "Local model artifacts: the ONNX MiniLM of the torch-free query path.", group=True),
    "priors": Command(
        "credrank.cli.priors", "app",
        "Versioned, reversible prior updates from relevance feedback.", group=True),
}

#: the entry-point group of the commands other distributions add: ``name = "module:attribute"``
#: naming a :class:`Command` in a module that imports little (``credrank --help`` loads it)
COMMAND_GROUP = "credrank.commands"
#: the commands of credrank's own other distributions: what to tell a user who types one
#: that is not installed (exit 2)
NOT_INSTALLED: dict[str, str] = {
    "bench": "the benches are the bench distribution (credrank-bench, in the bench/ folder of "
             "a credrank checkout), which is not installed: run `pip install -e ./bench` in the "
             "checkout (`make install` does)",
}
_plugins: dict[str, Command] | None = None

#: the values that leave an on/off environment variable off (case-insensitive, spaces ignored)
ENV_OFF = ("", "0", "false", "no", "off")


def env_flag(name: str) -> bool:
    """Whether the environment variable ``name`` is set to something other than
    :data:`ENV_OFF`: one rule for every reader (``CREDRANK_NO_CONFIG=false`` turned
    discovery off, where any value but "" and "0" did)."""
    return os.environ.get(name, "").strip().lower() not in ENV_OFF


def entry_points(group: str) -> dict[str, str]:
    """``name → "module:attribute"`` of the entry points in ``group`` of the installed
    distributions: what ``importlib.metadata.entry_points(group=group)`` finds (the first
    distribution of a name on ``sys.path`` wins; a test checks that they agree), read from the
    ``entry_points.txt`` of each ``*.dist-info`` / ``*.egg-info`` folder on ``sys.path`` (about
    2 ms for 200 distributions, where importing ``importlib.metadata`` costs 40 ms)."""
    header = f"[{group}]"
    found: dict[str, str] = {}
    seen: set[str] = set()
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:  # a zip, a missing folder
            continue
        for name in names:
            stem, dot, suffix = name.rpartition(".")
            if not dot or suffix not in ("dist-info", "egg-info"):
                continue
            dist = _normalized(stem.partition("-")[0])
            if dist in seen:
                continue
            seen.add(dist)
            try:
                with open(os.path.join(entry or ".", name, "entry_points.txt"),
                          encoding="utf-8") as fh:
                    text = fh.read()
            except OSError:  # most distributions have none
                continue
            if header in text:
                for key, value in _section(text, header):
                    found.setdefault(key, value)
    return found


def _normalized(name: str) -> str:
    """A distribution name as ``importlib.metadata`` compares them (PEP 503, ``_`` for ``-``)."""
    out: list[str] = []
    for ch in name.lower():
        ch = "_" if ch in "-." else ch
        if not (ch == "_" and out and out[-1] == "_"):
            out.append(ch)
    return "".join(out)


def _section(text: str, header: str) -> list[tuple[str, str]]:
    """The ``name = value`` lines of the ``header`` section of an ``entry_points.txt``."""
    rows: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line[0] == "[":
            inside = line == header
        elif inside:
            key, sep, value = line.partition("=")
            if sep:
                rows.append((key.strip(), value.split("[")[0].strip()))  # extras: not used
    return rows


def load_entry_point(value: str) -> Any:
    """The object ``"module:attribute"`` names (``attribute`` may be dotted), imported."""
    module, _, attribute = value.partition(":")
    target: Any = __import__(module.strip(), fromlist=["_"])
    for part in attribute.strip().split(".") if attribute.strip() else ():
        target = getattr(target, part)
    return target


def plugin_commands() -> dict[str, Command]:
    """The commands other installed distributions add (:data:`COMMAND_GROUP`), read once per
    process. A built-in name is never replaced; an entry that fails to load, or names
    something other than a :class:`Command`, is left out with a warning on stderr."""
    global _plugins
    if _plugins is None:
        found: dict[str, Command] = {}
        for name, value in sorted(entry_points(COMMAND_GROUP).items()):
            problem = "its name is a built-in command" if name in COMMANDS else ""
            if not problem:
                try:
                    command = load_entry_point(value)
                except Exception as exc:  # a broken plugin must not break credrank
                    problem = f"it does not load ({type(exc).__name__}: {exc})"
                else:
                    if isinstance(command, Command):
                        found[name] = command
                    else:
                        problem = f"it names a {type(command).__name__}, not a Command"
            if problem:
                print(f"warning: credrank: entry point {name} = {value} of "
                      f"{COMMAND_GROUP} left out: {problem}", file=sys.stderr)
        _plugins = found
    return _plugins


def find_command(name: str) -> Command | None:
    """The built-in command ``name``, else an installed plugin's, else ``None`` (a built-in is
    found without reading the entry points)."""
    return COMMANDS.get(name) or plugin_commands().get(name)


def all_commands() -> dict[str, Command]:
    """Every command in the order of ``credrank --help``: the built-ins, then the plugins'."""
    return {**COMMANDS, **plugin_commands()}


#: the root help's description and options (``credrank.cli.root`` declares the same options)
DESCRIPTION = "Source credibility in the retrieval step of RAG."
ROOT_OPTIONS: tuple[tuple[str, str], ...] = (
    ("--version", "Show the version and exit."),
    ("--config FILE", "Defaults for the commands' options (default: credrank.toml or "
                      "pyproject.toml [tool.credrank] in the current directory, else "
                      "~/.config/credrank/credrank.toml; env CREDRANK_CONFIG; "
                      "CREDRANK_NO_CONFIG=1: none)."),
    ("--help", "Show this message and exit."),
)


def version_line() -> str:
    """``credrank X.Y.Z`` (the package's ``__version__``)."""
    from credrank import __version__

    return f"credrank {__version__}"


def help_width() -> int:
    """The terminal's width as the help sees it: ``TERMINAL_WIDTH``, else the terminal's (or
    ``COLUMNS``), else 80."""
    for name in ("TERMINAL_WIDTH", "COLUMNS"):
        given = os.environ.get(name, "")
        if given.isdigit() and int(given) > 0:
            return int(given)
    stdout = sys.__stdout__
    if stdout is None:  # no standard output at all
        return 80
    try:
        return os.get_terminal_size(stdout.fileno()).columns or 80
    except (AttributeError, OSError, ValueError):  # not a terminal
        return 80


def text_width(width: int | None = None) -> int:
    """The columns a help text fills on a terminal ``width`` wide (default
    :func:`help_width`): click's rule, which every command's help follows — the terminal's
    width up to :data:`HELP_WIDTH`, less 2, at least 50."""
    return max(min(width or help_width(), HELP_WIDTH) - 2, 50)


def root_help(width: int | None = None) -> str:
    """The text of ``credrank --help``, from :data:`COMMANDS` alone (no import), laid out as
    click lays out every command's help (usage, description, the options, the commands; each
    description wrapped, never cut)."""
    fill = text_width(width)
    lines = ["Usage: credrank [OPTIONS] COMMAND [ARGS]...", ""]
    lines += [*_wrap(DESCRIPTION, fill, "  "), ""]
    lines += ["Options:", *_definitions(ROOT_OPTIONS, fill), ""]
    lines += ["Commands:",
              *_definitions([(name, c.short) for name, c in all_commands().items()], fill)]
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int, indent: str) -> list[str]:
    """``text`` in lines of at most ``width`` characters, each starting with ``indent``, broken
    at spaces only."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and len(indent) + len(line) + 1 + len(word) > width:
            lines.append(indent + line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, indent + line]


def _definitions(rows: Any, width: int) -> list[str]:
    """``rows`` of (term, text) as click writes a definition list: terms indented by 2, the
    texts in one column after the longest term (at most 30 characters, a longer term on its
    own line), wrapped."""
    column = min(max(len(term) for term, _ in rows), 30) + 4
    out: list[str] = []
    for term, text in rows:
        body = _wrap(text, width, " " * column)
        head = f"  {term}"
        if len(head) + 2 <= column:
            out.append(head.ljust(column) + body[0][column:])
            out += body[1:]
        else:
            out += [head, *body]
    return out


#: the width the commands' static help is laid out for (:mod:`credrank.cli.helptext`)
HELP_WIDTH = 80


def static_help(argv: list[str]) -> str | None:
    """The help of ``credrank COMMAND [SUBCOMMAND] --help`` from :mod:`credrank.cli.helptext`
    (typer's own text, generated by :mod:`credrank.cli.helpgen` and checked by a test),
    without importing typer or the command; ``None`` where typer must answer: an option
    before ``--help``, a command the table lacks (a plugin's), a terminal narrower than
    :data:`HELP_WIDTH` (on a wider one the text keeps its width, as the root's is not
    stretched past the terminal either), a stdout that cannot encode the text, or a
    ``credrank.toml`` that may be in force (``CREDRANK_CONFIG``, or a ``credrank.toml`` /
    ``pyproject.toml`` in the current folder or the user's file: its defaults and its checks
    are typer's). Cost: a few ``stat`` calls and the import of one generated module."""
    if len(argv) < 2 or argv[-1] != "--help" or argv[0] not in COMMANDS \
            or any(a.startswith("-") for a in argv[:-1]) or help_width() < HELP_WIDTH:
        return None
    if os.environ.get("CREDRANK_CONFIG") or os.environ.get("FORCE_COLOR"):
        return None
    if not env_flag("CREDRANK_NO_CONFIG"):
        base = os.environ.get("XDG_CONFIG_HOME", "")
        user = os.path.join(base if base and os.path.isabs(base)
                            else os.path.join(os.path.expanduser("~"), ".config"),
                            "credrank", "credrank.toml")
        if os.path.lexists("credrank.toml") or os.path.lexists(user) \
                or _may_configure("pyproject.toml"):
            return None
    from credrank.cli.helptext import HELP

    text = HELP.get(" ".join(argv[:-1]))
    try:
        if text is not None:
            text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")
    except (LookupError, UnicodeEncodeError):
        return None  # click writes what the terminal cannot show as it does
    return text


def _may_configure(pyproject: str) -> bool:
    """Whether ``pyproject`` may hold a ``[tool.credrank]`` table: it exists and names
    ``credrank`` (or escapes a character of a key) — else it cannot configure anything."""
    if not os.path.lexists(pyproject):
        return False
    try:
        with open(pyproject, "rb") as f:
            data = f.read(8 * 1024 * 1024 + 1)
    except OSError:
        return True  # typer's path reports what is wrong with it
    return b"credrank" in data or b"\\u" in data or b"\\U" in data or len(data) > 8 * 2 ** 20


def run(args: list[str] | None = None) -> int:
    """Run the CLI on ``args`` (default ``sys.argv[1:]``) and return its exit code instead of
    raising ``SystemExit``: 0 done, 1 a failed check or an unexpected error (its traceback
    printed), 2 bad usage or bad input (``error: …``), 130 interrupted, 141 the reader of
    stdout went away (as a shell reports SIGPIPE).

    ``credrank``, ``credrank --help``, ``credrank --version`` and, where it applies
    (:func:`static_help`), ``credrank COMMAND --help`` are answered here, before typer is
    imported (the first command a user types is the cheapest)."""
    argv = list(sys.argv[1:] if args is None else args)
    _closed_streams()
    try:
        if argv in ([], ["--help"]):
            encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
            sys.stdout.write(root_help().encode(encoding, "replace").decode(encoding))
            return 0 if argv else 2  # as typer's no_args_is_help: the help, then usage exit
        if argv == ["--version"]:
            print(version_line())
            return 0
        text = static_help(argv)
        if text is not None:
            sys.stdout.write(text)
            return 0
    except BrokenPipeError:
        return 141
    except OSError as exc:  # a full disk, a closed stdout
        from credrank.cli.pipe import say_write_failed

        say_write_failed(exc)
        return 1
    from credrank.cli.root import run_app

    return run_app(argv)


def _closed_streams() -> None:
    """A process started with stdout or stderr closed (``>&-``, ``2>&-``) has ``None`` for
    it, and the first write was an ``AttributeError`` traceback (exit 1, also for a usage
    error). A closed stderr then discards what it is given (the exit code still says how the
    command ended); a closed stdout refuses every write (:class:`~credrank.cli.pipe.
    ClosedStream`: ``error: stdout: …``, exit 1, where a command has output to give)."""
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # the process's, never closed
    if sys.stdout is None:  # imported only then: the fast path imports no command module
        from credrank.cli.pipe import ClosedStream

        sys.stdout = ClosedStream()


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


#: ``OPENBLAS_THREAD_TIMEOUT`` for the console script's process: numpy's OpenBLAS starts one
#: worker thread per core, and each spin-waits 2**28 cycles (its default, 28) after starting and
#: after every threaded call before it sleeps; 2**4 (its least) puts them to sleep at once, and
#: the next threaded call wakes them. A ``credrank search`` on 2 cores spent ≈ 0.1 s of its
#: 0.77 s of CPU in that spin (more with more cores), for no gain in wall time.
IDLE_BLAS_SPIN = "4"


def main() -> NoReturn:
    """The ``credrank`` console script: :func:`run`, then :func:`exit_process`. Before anything
    imports numpy, OpenBLAS's idle threads are told not to spin (:data:`IDLE_BLAS_SPIN`; a value
    the user set is kept); :func:`run` called from Python changes nothing of its process."""
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", IDLE_BLAS_SPIN)
    exit_process(run())


_ROOT_NAMES = ("app", "LazyGroup", "load_command")


def __getattr__(name: str) -> Any:
    # the typer app and its lazy group, imported on first use (PEP 562): `import credrank.cli`
    # and the fast path of `run` never import typer
    if name in _ROOT_NAMES:
        import credrank.cli.root as root

        return getattr(root, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["COMMANDS", "COMMAND_GROUP", "HELP_WIDTH", "IDLE_BLAS_SPIN", "NOT_INSTALLED", "Command",
           "LazyGroup", "all_commands", "app", "entry_points", "exit_process", "find_command",
           "load_command", "load_entry_point", "main", "plugin_commands", "root_help", "run",
           "static_help"]
