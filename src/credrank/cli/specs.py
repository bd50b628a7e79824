"""The pipeline options every ranking command shares (``credrank search``, ``context``,
``consensus calibrate``): ``--pipeline FILE``, ``-S STAGE.PARAM=VALUE``, and the shortcut
options, generated from the one table (:data:`credrank.pipeline.shortcuts.SHORTCUTS`) by
:func:`shortcut_options`: a command declares a parameter ``shortcuts`` and is called with
their values as one mapping (``--select-param KEY=VALUE`` items already read into a mapping).
:func:`spec_of` makes the spec; no command lists the shortcuts itself."""

from __future__ import annotations

import functools
import inspect
import json
import re
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from credrank.cli.config import from_file
from credrank.core.hittext import TEXT_HELP
from credrank.pipeline.shortcuts import (
    CLI,
    SHORTCUTS,
    Shortcut,
    check_not_with_pipeline,
    in_words,
    spec_from_options,
    with_top,
    written_places,
)
from credrank.pipeline.spec import PipelineSpec, SpecError, spec_file_beside

PipelineOption = Annotated[Path | None, typer.Option(
    "--pipeline", help="the pipeline as a spec file (JSON, TOML or YAML; the \"pipeline\" "
                       "object of a --json output replays that run); the stage options are "
                       "shortcuts and cannot be mixed with it")]
#: ``--text full|snippet|none``: the one declaration (``credrank search``, ``credrank context``;
#: each command gives its default), checked by :func:`credrank.core.hittext.check_text`
TextOption = Annotated[str, typer.Option("--text", help=TEXT_HELP)]
SetOption = Annotated[list[str] | None, typer.Option(
    "--set", "-S", help="a spec value STAGE.PARAM=VALUE (e.g. consensus.threshold=0.4, "
                        "freshness.half_life=1y) or a top-level KEY=VALUE (top_k=5); "
                        "repeatable (one stage's are set together, so a stage with "
                        "two required parameters takes two -S); adds the stage when "
                        "absent; not with an option that sets the same value (--top-k "
                        "and -S top_k=…)")]


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
        # typer passes the click context here: which options the command line wrote
        params.append(inspect.Parameter(CONTEXT_PARAM, inspect.Parameter.KEYWORD_ONLY,
                                        annotation=typer.Context))
        names = [s.name for s in CLI.shortcuts()]

        @functools.wraps(command)
        def run(*args: Any, **kwargs: Any) -> Any:
            from credrank.cli.common import fail, parse_params

            ctx = kwargs.pop(CONTEXT_PARAM, None)
            values = Shortcuts()
            for name in names:
                value = kwargs.pop(name)
                if SHORTCUTS[name].value == "map":
                    try:
                        value = parse_params(value, CLI.say(name))
                    except ValueError as exc:
                        fail(str(exc))
                values[name] = value
            values.written = _written(ctx, names)
            values.sets_from_file = from_file("set_param")
            return command(*args, shortcuts=values, **kwargs)

        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params}
        return run

    return decorate


class Shortcuts(dict[str, Any]):
    """The shortcut options' values, and ``written``: those the command line (or its
    environment) set, even to their default (``None``: not known, a call from code);
    ``sets_from_file``: the ``-S`` items came from a ``credrank.toml`` (its ``set``)."""

    written: frozenset[str] | None = None
    sets_from_file: bool = False

    @classmethod
    def updated(cls, values: Mapping[str, Any] | None, **changes: Any) -> Shortcuts:
        """``values`` with ``changes`` (a command's own default), what the command line
        wrote and where the ``-S`` items came from kept (a copy as a plain dict lost them)."""
        out = cls({**(values or {}), **changes})
        out.written = getattr(values, "written", None)
        out.sets_from_file = getattr(values, "sets_from_file", False)
        return out


#: the hidden parameter of a :func:`shortcut_options` command that receives click's context
CONTEXT_PARAM = "shortcut_context"


def _written(ctx: Any, names: list[str]) -> frozenset[str] | None:
    """The options of ``names`` the command line or the environment gave this invocation
    (click's parameter source), not their defaults nor a configuration file's; ``None``
    without a context (a call from code)."""
    source = getattr(ctx, "get_parameter_source", None)  # click's (typer vendors its own)
    if not callable(source):
        return None
    given = ("COMMANDLINE", "ENVIRONMENT")
    return frozenset(n for n in names if getattr(source(n), "name", None) in given)


def read_spec_file(path: Path) -> Any:
    """The spec data of the file ``path`` (a whole ``credrank search --json`` output: its
    ``pipeline``), with each stage's relative path that names a file or folder beside the
    spec made absolute (the parameters that name files: ``priors``, ``model``, ``store``,
    ``estimate``, ``config``): a spec names its files as its own folder holds them (a spec's
    ``priors = "mine.toml"`` beside it was looked for in the current folder), as an audit
    config does; a path that is not there is read as given (from the current folder). The
    answer then echoes the absolute path, which replays from any folder."""
    from credrank.core.structured import read_structured

    data = read_structured(path, what="pipeline spec")
    if isinstance(data, dict) and "pipeline" in data and "stages" not in data:
        data = data["pipeline"]  # a whole --json output: its "pipeline" object
    base = path.parent
    if isinstance(data, dict) and isinstance(data.get("stages"), list):
        data = {**data, "stages": [_beside(stage, base) for stage in data["stages"]]}
    return data


def _beside(stage: Any, base: Path) -> Any:
    """``stage`` (a spec's stage entry) with the relative paths of its file parameters
    found in ``base`` absolute (:func:`~credrank.pipeline.spec.spec_file_beside`: a preset or a
    value of another parameter stays as written)."""
    if not isinstance(stage, dict):
        return stage
    out = dict(stage)
    for key, value in stage.items():
        found = spec_file_beside(key, value, base)
        if found is not None:
            out[key] = found
    return out


def spec_of(pipeline: Path | None, sets: list[str] | None,
            shortcuts: Mapping[str, Any] | None) -> PipelineSpec:
    """The spec of the run: ``--pipeline FILE`` (with ``--top-k`` / ``--fetch-k`` at most),
    else the shortcut options (:func:`shortcut_options`); then each ``-S``."""

    shortcuts = shortcuts or {}
    if pipeline is not None:
        written = getattr(shortcuts, "written", None)
        if written is None:
            check_not_with_pipeline(shortcuts, CLI, f"--pipeline {pipeline}")
        else:  # an option written at its default says something too ("--priors current")
            check_not_with_pipeline({n: shortcuts[n] for n in written}, CLI,
                                    f"--pipeline {pipeline}", present=True)
        spec = PipelineSpec.from_dict(read_spec_file(pipeline),
                                      where=f"--pipeline {pipeline}")
        try:
            spec = with_top(spec, shortcuts)
        except SpecError as exc:
            raise ValueError(f"--pipeline {pipeline}: {exc.key_path}: {exc.detail}") from None
    else:
        spec = spec_from_options(door=CLI, **shortcuts)
    sets = _check_not_both(sets or [], shortcuts)
    # every -S of one stage set at once (a stage added with two required parameters, given
    # in two -S, was refused after the first: "…lambda_coverage: got nothing"), the later of
    # two for one parameter winning; the top-level keys at once, after the stages
    by_stage: dict[str, tuple[dict[str, Any], list[str]]] = {}
    top: dict[str, Any] = {}
    top_items: list[str] = []
    for item in sets or []:
        key, sep, raw = item.partition("=")
        stage, dot, param = key.strip().partition(".")
        if not sep or not stage or (dot and not param):
            raise ValueError(f"-S: expected STAGE.PARAM=VALUE or KEY=VALUE, got {item!r}")
        value = spec_value(raw, item)
        if dot:
            params, items = by_stage.setdefault(stage, ({}, []))
            params[param] = value
            items.append(item)
        else:
            top[stage] = value
            top_items.append(item)
    for stage, (params, items) in by_stage.items():
        try:
            spec = spec.with_params(stage, params)
        except SpecError as exc:
            raise ValueError(f"{_said(items)}: {exc.key_path}: {exc.detail}") from None
    if top:
        try:
            spec = spec.replace_top(**top)
        except SpecError as exc:
            raise ValueError(f"{_said(top_items)}: {exc.key_path}: {exc.detail}") from None
    return spec


def _check_not_both(sets: list[str], shortcuts: Mapping[str, Any]) -> list[str]:
    """The ``-S`` items to apply. One that sets what an option written on the command line
    says (``--top-k 3 -S top_k=2``, ``--freshness half_life=2y -S freshness.half_life=1y``,
    ``--no-smoothing -S smoothing.m=3``, ``--select mmr -S coverage.lambda_ilad=1``) is an
    error naming both when it was written there too (the ``-S`` won without a word); one a
    ``credrank.toml`` gave (its ``set``) yields to the written option, as every value of the
    file does (it is dropped). Where the options say it: :func:`~credrank.pipeline.shortcuts.
    written_places`; options written at their default count too, as with ``--pipeline``."""
    written = getattr(shortcuts, "written", None)
    if not written or not sets:
        return sets
    places = written_places(shortcuts, written, CLI)
    kept = []
    for item in sets:
        key = item.partition("=")[0].strip()
        stage = key.partition(".")[0]
        option = places.get(key) or (places.get(f"{stage}.*") if "." in key else None)
        if option is None:
            kept.append(item)
        elif not getattr(shortcuts, "sets_from_file", False):
            if option == places.get(key):
                raise ValueError(f"-S {item}: {CLI.say(option)} on the same command line sets "
                                 f"{key} too; give it once")
            raise ValueError(f"-S {item}: {_as_written(option, shortcuts)} on the same "
                             f"command line leaves the {stage} stage out; give one of them")
    return kept


def _as_written(name: str, shortcuts: Mapping[str, Any]) -> str:
    """Shortcut option ``name`` as the command line wrote it: ``--no-smoothing``, ``--priors
    none``, ``--select mmr``."""
    value = shortcuts.get(name)
    if value is False:
        return CLI.say(name).replace("--", "--no-", 1)
    return f"{CLI.say(name)} {value}" if isinstance(value, str) else CLI.say(name)


def _said(items: list[str]) -> str:
    """The ``-S`` items an error is about, as written: ``-S a.x=1 -S a.y=2``."""
    return " ".join(f"-S {item}" for item in items)


def spec_value(raw: str, item: str | None = None) -> Any:
    """A ``-S`` value: JSON where it parses (numbers, true/false, null, lists), else text;
    JSON nested deeper than :data:`~credrank.core.structured.MAX_NESTING` levels is a
    ``ValueError`` naming ``-S`` and the item (``item``, shortened), never a
    ``RecursionError``."""
    from credrank.core.structured import MAX_NESTING, json_too_deep

    said = item if item is not None else raw
    said = said if len(said) <= 60 else said[:57] + "…"
    deep = ValueError(f"-S {said}: expected a value nested at most {MAX_NESTING} levels deep, "
                      "got deeper")
    if json_too_deep(raw, MAX_NESTING):
        raise deep
    try:
        return json.loads(raw)
    except RecursionError:
        raise deep from None
    except ValueError:
        return raw


def spec_words(exc: Any, spec: PipelineSpec, pipeline: Path | None,
                sets: list[str] | None) -> str:
    """A spec error found while building the stages, said as the user wrote the spec: the
    ``-S`` item that set the parameter (``-S prior.priors=bogus: …``; it said
    ``stages[0].priors``, a path the user never wrote), else the ``--pipeline`` file's path,
    else the options' words."""
    said = _set_item(exc, spec, sets)
    if said is not None:
        return f"-S {said}: {getattr(exc, 'detail', exc)}"
    if pipeline is not None:
        return f"--pipeline {pipeline}: {exc}"
    return in_words(exc, spec, CLI)


def _set_item(exc: Any, spec: PipelineSpec, sets: list[str] | None) -> str | None:
    """The ``-S`` item that set the stage parameter ``exc`` is about, if one did."""
    match = re.fullmatch(r"stages\[(\d+)\]\.(\w+)", str(getattr(exc, "key_path", "")))
    if not sets or match is None or int(match[1]) >= len(spec.stages):
        return None
    key = f"{spec.stages[int(match[1])].name}.{match[2]}"
    return next((item for item in reversed(sets)
                 if item.partition("=")[0].strip() == key), None)

