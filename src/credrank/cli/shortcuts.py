"""The pipeline shortcuts as CLI options, generated from the one table
(:data:`credrank.pipeline.shortcuts.SHORTCUTS`).

:func:`shortcut_options` adds an option per shortcut to a ranking command (``credrank
search``, ``context``, ``consensus calibrate``) where the command declares a parameter
``shortcuts``, and calls it with their values as one mapping (``--select-param KEY=VALUE``
items already read into a mapping). The command makes the spec with
:func:`credrank.cli.specs.spec_of`; no command lists the shortcuts itself.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.pipeline.shortcuts import CLI, SHORTCUTS, Shortcut

#: the Python type of each kind of value on the command line
_TYPES: dict[str, Any] = {"int": int | None, "number": float | None, "bool": bool,
                          "flag3": bool | None, "text": str | None, "path": Path | None,
                          "map": list[str] | None, "items": str | None}


def _option(s: Shortcut, default: Any, help_text: str | None) -> inspect.Parameter:
    flag = CLI.say(s.name)
    names = [f"{flag}/--no-{flag[2:]}"] if s.value in ("bool", "flag3") else [flag]
    if s.alias:
        names.append(s.alias)
    text = help_text or s.help
    if s.value == "map":
        text += " (KEY=VALUE, repeatable)"
    kind: Any = _TYPES[s.value]
    if s.value == "text" and default is not None:
        kind = str
    return inspect.Parameter(s.name, inspect.Parameter.POSITIONAL_OR_KEYWORD, default=default,
                             annotation=Annotated[kind, typer.Option(*names, help=text)])


def shortcut_options(defaults: dict[str, Any] | None = None,
                     helps: dict[str, str] | None = None
                     ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a command that takes ``shortcuts: dict[str, Any]``: its signature gets one
    option per shortcut in that place (``defaults`` / ``helps``: the command's own default or
    help of a shortcut, e.g. ``context``'s ``top_k`` 5)."""
    defaults, helps = defaults or {}, helps or {}

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(command, include_extras=True)
        signature = inspect.signature(command)
        params: list[inspect.Parameter] = []
        for p in signature.parameters.values():
            if p.name != "shortcuts":
                params.append(p.replace(annotation=hints.get(p.name, p.annotation)))
                continue
            params += [_option(s, defaults.get(s.name, s.default), helps.get(s.name))
                       for s in CLI.shortcuts()]
        names = [s.name for s in CLI.shortcuts()]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            from credrank.cli.common import fail, parse_params

            values: dict[str, Any] = {}
            for name in names:
                value = kwargs.pop(name)
                if SHORTCUTS[name].value == "map":
                    try:
                        value = parse_params(value, CLI.say(name))
                    except ValueError as exc:
                        fail(str(exc))
                values[name] = value
            return command(*args, shortcuts=values, **kwargs)

        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


__all__ = ["shortcut_options"]
