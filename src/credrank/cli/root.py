"""The root typer app of ``credrank``: :class:`LazyGroup` turns an entry of
:data:`credrank.cli.COMMANDS` (or a plugin's, :func:`credrank.cli.plugin_commands`) into its
click command exactly as ``app.command()`` / ``app.add_typer()`` would, on first use; the root
options ``--version`` and ``--config`` (:mod:`credrank.cli.config`: a ``credrank.toml`` of
defaults for the commands' options)."""

from __future__ import annotations

import importlib
import inspect
import sys
import warnings
from collections.abc import Iterator, MutableMapping
from contextvars import ContextVar
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from credrank.cli import (
    COMMANDS,
    DESCRIPTION,
    NOT_INSTALLED,
    all_commands,
    find_command,
    plugin_commands,
    root_help,
    version_line,
)


def load_command(name: str) -> Any:
    """The click command of the command ``name`` (:func:`credrank.cli.find_command`: a
    built-in or a plugin's), built by typer as the eager app built it; ``KeyError`` when there
    is none."""
    command = find_command(name)
    if command is None:
        raise KeyError(name)
    target: Any = getattr(importlib.import_module(command.module), command.attribute)
    holder = typer.Typer(add_completion=False, rich_markup_mode=HELP_MARKUP)
    if command.group:
        holder.add_typer(target, name=name, help=command.short)
    else:
        holder.command(name=name)(target)
    built = typer.main.get_group(holder).commands[name]
    _whole_short_help(built)
    return built


#: how typer lays out the help: click's plain layout (``None``), not rich's panels. Rich's
#: option table squeezed the option names to fit 80 columns and cut them ("--trust-declar…",
#: 64 lines of the commands' help), and kept the docstrings' line breaks, made for the source's
#: width; click wraps each paragraph to the terminal and gives an option's text a line of its
#: own when its names are long
HELP_MARKUP = None


def _whole_short_help(command: Any) -> None:
    """Give every subcommand of ``command`` (a group, at any depth) its help's first paragraph
    as its short help, where it has none: a group's help lists its subcommands with it, and
    click cuts a short help it derives itself to one line ("...")."""
    for sub in getattr(command, "commands", {}).values():
        if not sub.short_help and sub.help:
            first = inspect.cleandoc(sub.help).partition("\f")[0].split("\n\n")[0]
            sub.short_help = " ".join(first.split())
        _whole_short_help(sub)


class _LazyCommands(MutableMapping[str, Any]):
    """The commands of :data:`COMMANDS` and the plugins', each loaded on first access; names
    without imports (a built-in's without reading the plugins)."""

    def __init__(self, loaded: MutableMapping[str, Any]) -> None:
        self._loaded: dict[str, Any] = dict(loaded)

    def __getitem__(self, name: str) -> Any:
        if name not in self._loaded:
            self._loaded[name] = load_command(name)  # KeyError when there is none
        return self._loaded[name]

    def __setitem__(self, name: str, command: Any) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        known = all_commands()
        yield from known
        yield from (n for n in self._loaded if n not in known)

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, name: object) -> bool:
        return (name in COMMANDS or name in self._loaded
                or (isinstance(name, str) and name in plugin_commands()))


class LazyGroup(TyperGroup):
    """The root group: its commands come from :data:`COMMANDS`, imported when used; its help
    is :func:`credrank.cli.root_help` (the commands' lines without importing them)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _LazyCommands(self.commands)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        formatter.write(root_help())

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command ``cmd_name``; for a command of credrank's own other distributions
        that is not installed (:data:`credrank.cli.NOT_INSTALLED`), ``error: …`` saying how
        to install it, exit 2."""
        command = super().get_command(ctx, cmd_name)
        if command is None and cmd_name in NOT_INSTALLED:
            print(f"error: credrank {cmd_name}: {NOT_INSTALLED[cmd_name]}", file=sys.stderr)
            raise typer.Exit(2)
        return command


def _version(value: bool) -> None:
    if value:
        print(version_line())
        raise typer.Exit(0)


app = typer.Typer(cls=LazyGroup, add_completion=False, no_args_is_help=True,
                  rich_markup_mode=HELP_MARKUP, help=DESCRIPTION)


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option(
        "--version", is_eager=True, callback=_version,
        help="Show the version and exit.")] = False,
    config: Annotated[Path | None, typer.Option(
        "--config", envvar="CREDRANK_CONFIG", metavar="FILE",
        help="defaults for the commands' options (a credrank.toml, or a pyproject.toml with "
             "[tool.credrank]); default: the one in the current directory, else "
             "~/.config/credrank/credrank.toml (none with CREDRANK_NO_CONFIG=1)")
    ] = None,
) -> None:
    # The commands are LazyGroup's. The callback runs before the command's own options are
    # parsed, so the defaults of a credrank.toml are in place when they are.
    from credrank.cli.config import ConfigError, command_defaults, find_config, load_config

    try:
        found = (load_config(config, plugins=plugin_options) if config is not None
                 else find_config(Path.cwd(), plugins=plugin_options))
    except ConfigError as exc:
        if _asks_help():
            # the help a user reads to mend the file: without the file's defaults
            print(f"warning: {exc} (the help below shows no defaults from it)",
                  file=sys.stderr)
            return
        print(f"error: {exc}", file=sys.stderr)
        raise typer.Exit(2) from None
    if found is not None:
        # click declares default_map a MutableMapping but only reads it (.get, [key]); ours
        # is a read-only Mapping over the file's tables
        ctx.default_map = command_defaults(found, ctx.command)  # type: ignore[assignment]


def _asks_help() -> bool:
    """Whether the command line being run asks for a command's help (``--help`` before any
    ``--``): click has taken the words after the root's options out of the context when the
    root's callback runs, so they are read from what :func:`run_app` was given."""
    words = _ARGS.get()
    return "--help" in (words[:words.index("--")] if "--" in words else words)


#: the command line :func:`run_app` runs (for :func:`_asks_help`)
_ARGS: ContextVar[tuple[str, ...]] = ContextVar("credrank_args", default=())


def plugin_options() -> dict[str, frozenset[str]]:
    """The option names of the installed plugins' command paths
    (:func:`credrank.cli.config.command_options`), their commands loaded (a plugin's options are
    known only so): what a ``credrank.toml`` may set for them
    (:func:`credrank.cli.config.check_keys`)."""
    from credrank.cli.config import command_options

    found: dict[str, frozenset[str]] = {}
    for name in plugin_commands():
        found.update(command_options((name,), load_command(name)))
    return found


def run_app(args: list[str]) -> int:
    """:func:`credrank.cli.run` past its fast path: the typer app, its errors as exit codes;
    stdout guarded by :class:`~credrank.cli.pipe.PipeStdout` while it runs (a reader that
    went away: exit 141)."""
    from credrank.cli.pipe import PipeStdout

    stdout = sys.stdout
    sys.stdout = PipeStdout(stdout)
    try:
        with warnings.catch_warnings():  # restores the hook below (a run in a test process)
            warnings.showwarning = _warning_line(warnings.showwarning)
            return _run_app(args)
    finally:
        if isinstance(sys.stdout, PipeStdout):  # click may have replaced it (EPIPE)
            sys.stdout = stdout


def _warning_line(default: Any) -> Any:
    """``warnings.showwarning`` that says a warning of credrank's own (a library warning such
    as a credibility model's unscored candidates) as the CLI's other warnings, ``warning:
    MESSAGE`` on stderr, not as Python's ``FILE:LINE: Category: message`` with a source line;
    any other package's warning as ``default`` shows it."""
    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: Any = None, line: str | None = None) -> None:
        if category.__module__.partition(".")[0] != "credrank":
            default(message, category, filename, lineno, file, line)
            return
        from credrank.cli.common import warn

        warn(str(message))

    return show


def _run_app(args: list[str]) -> int:
    _ARGS.set(tuple(args))
    try:
        result = app(args=args, prog_name="credrank", standalone_mode=False)
    except typer.Abort:
        print("aborted", file=sys.stderr)
        return 1
    except typer.TyperException as exc:  # click's usage errors (typer vendors click)
        return _click_error(exc)
    except SystemExit as exc:
        return _code(exc.code)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader went away (`credrank … | head`): stop quietly
        return 141
    except Exception:  # a bug: its traceback, as the interpreter (or typer's hook) shows it
        sys.excepthook(*sys.exc_info())
        return 1
    return result if isinstance(result, int) else 0  # click returns an Exit's code


def _click_error(exc: Exception) -> int:
    """Report a usage error as every other credrank error (plain text, ``error: …``, exit 2);
    a command group called without a command prints its help, as click does."""
    ctx = getattr(exc, "ctx", None)
    code = int(getattr(exc, "exit_code", 2))
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
        text = ctx.get_help()  # click's layout (HELP_MARKUP): the text, printed here
        if text:
            print(text)
        return code
    if ctx is not None:
        print(ctx.get_usage(), file=sys.stderr)
        print(f"Try '{ctx.command_path} --help' for help.\n", file=sys.stderr)
    message = getattr(exc, "format_message", lambda: str(exc))()
    given = _given_value(getattr(exc, "param", None))
    if given is not None and given not in message:  # what came, as every error says it
        message += f", got {given!r}"
    print(f"error: {message}", file=sys.stderr)
    return code


def _given_value(param: Any) -> str | None:
    """The value the command line gave option ``param`` (``--top-k abc``, ``--top-k=abc``),
    for an error that did not say it (typer's integer check: "Input should be a valid
    integer"); ``None`` when it cannot be told."""
    opts = [o for o in getattr(param, "opts", ()) if o.startswith("-")]
    args = _ARGS.get(())
    for i, arg in enumerate(args):
        for opt in opts:
            if arg == opt and i + 1 < len(args):
                return str(args[i + 1])
            if arg.startswith(opt + "="):
                return arg[len(opt) + 1:]
    return None


def _code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # SystemExit("message"), as the interpreter would show it
    return 1


__all__ = ["LazyGroup", "app", "load_command", "run_app"]
