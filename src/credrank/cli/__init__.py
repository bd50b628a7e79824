"""The ``credrank`` command line (typer + rich): one module per command group, each thin.
JSON outputs are documented in docs/json.md.

Each command's module is imported when that command runs (or when the help lists it), not
when the CLI starts: ``credrank search`` does not pay for the imports of ``bench``,
``reliability`` or ``cram`` (seconds of scipy, matplotlib, torch). :data:`COMMANDS` is the
table of commands; :class:`LazyGroup` turns an entry into its click command exactly as
``app.command()`` / ``app.add_typer()`` would, on first use.
"""

from __future__ import annotations

import atexit
import importlib
import os
import sys
from collections.abc import Iterator, MutableMapping
from typing import Any, NoReturn

import click
import typer
from typer.core import TyperGroup

# name → (module, attribute, help): a command function when help is None, else a Typer app
# added as a group with that help. The order is the order of `credrank --help`.
COMMANDS: dict[str, tuple[str, str, str | None]] = {
    "index": ("credrank.cli.index", "index", None),
    "search": ("credrank.cli.search", "search", None),
    "optimize": ("credrank.cli.optimize", "optimize", None),
    "pipeline": ("credrank.cli.pipeline", "app",
                 "Pipeline specs: the stage catalog, and checking a spec file."),
    "demo": ("credrank.cli.demo", "demo", None),
    "bench": ("credrank.cli.bench", "bench", None),
    "serve": ("credrank.cli.serve", "serve", None),
    "context": ("credrank.cli.context", "context", None),
    "advise": ("credrank.cli.advise", "advise", None),
    "reliability": ("credrank.cli.reliability", "app",
                    "Source reliability from cross-source agreement (RA-RAG)."),
    "credibility": ("credrank.cli.credibility", "app",
                    "A learned page-credibility prior: fit it on labelled pages."),
    "stance": ("credrank.cli.stance", "app",
               "The stance model of claim-style queries: fit it on labelled pairs."),
    "consensus": ("credrank.cli.consensus", "app",
                  "Label-free answer consensus: calibrate its contested threshold."),
    "provenance": ("credrank.cli.provenance", "app",
                   "Citation chains: which documents repeat older evidence (laundering)."),
    "cram": ("credrank.cli.cram", "app",
             "Credibility-aware attention (CrAM) for a local model: calibrate heads, answer."),
    "audit": ("credrank.cli.audit", "app",
              "Trust audit (chapter 35.1–35.2): profile, hard gates, radar, report."),
    "models": ("credrank.cli.models", "app",
               "Local model artifacts: the ONNX MiniLM of the torch-free query path."),
    "priors": ("credrank.cli.priors", "app",
               "Versioned, reversible prior updates from relevance feedback."),
}


def load_command(name: str) -> click.Command:
    """The click command of ``COMMANDS[name]``, built by typer as the eager app built it."""
    module, attribute, help_ = COMMANDS[name]
    target: Any = getattr(importlib.import_module(module), attribute)
    holder = typer.Typer(add_completion=False)
    if help_ is None:
        holder.command(name=name)(target)
    else:
        holder.add_typer(target, name=name, help=help_)
    return typer.main.get_group(holder).commands[name]


class _LazyCommands(MutableMapping[str, click.Command]):
    """The commands of :data:`COMMANDS`, each loaded on first access; names without imports."""

    def __init__(self, loaded: MutableMapping[str, click.Command]) -> None:
        self._loaded: dict[str, click.Command] = dict(loaded)

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            if name not in COMMANDS:
                raise KeyError(name)
            self._loaded[name] = load_command(name)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (n for n in self._loaded if n not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(1 for n in self._loaded if n not in COMMANDS)

    def __contains__(self, name: object) -> bool:
        return name in COMMANDS or name in self._loaded


class LazyGroup(TyperGroup):
    """The root group: its commands come from :data:`COMMANDS`, imported when used."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _LazyCommands(self.commands)


app = typer.Typer(cls=LazyGroup, add_completion=False, no_args_is_help=True,
                  help="Source credibility in the retrieval step of RAG.")


@app.callback()
def _root() -> None:
    # typer builds a group (not a single command) only for an app with a callback or
    # registered commands; the commands here are LazyGroup's. Nothing to do.
    pass


def run(args: list[str] | None = None) -> int:
    """Run the CLI on ``args`` (default ``sys.argv[1:]``) and return its exit code instead of
    raising ``SystemExit``: 0 done, 1 a failed check or an unexpected error (its traceback
    printed), 2 bad usage or bad input (``error: …``), 130 interrupted, 141 the reader of
    stdout went away (as a shell reports SIGPIPE)."""
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
        text = ctx.get_help()  # typer's rich help prints itself and returns ""
        if text:
            print(text)
        return code
    if ctx is not None:
        print(ctx.get_usage(), file=sys.stderr)
        print(f"Try '{ctx.command_path} --help' for help.\n", file=sys.stderr)
    message = getattr(exc, "format_message", lambda: str(exc))()
    print(f"error: {message}", file=sys.stderr)
    return code


def _code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # SystemExit("message"), as the interpreter would show it
    return 1


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


__all__ = ["COMMANDS", "app", "exit_process", "main", "run"]
