"""The pipeline options every ranking command shares: ``--pipeline FILE`` and ``-S
STAGE.PARAM=VALUE`` on top of (or instead of) the stage shortcuts (issue 24)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from credrank.core.hittext import TEXT_HELP

if TYPE_CHECKING:
    from credrank.pipeline.spec import PipelineSpec

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
                        "repeatable; adds the stage when absent")]


def spec_of(pipeline: Path | None, sets: list[str] | None,
            shortcuts: Mapping[str, Any] | None) -> PipelineSpec:
    """The spec of the run: ``--pipeline FILE`` (with ``--top-k`` / ``--fetch-k`` at most),
    else the shortcut options (:mod:`credrank.cli.shortcuts`); then each ``-S``."""
    from credrank.core.structured import read_structured
    from credrank.pipeline.shortcuts import (
        CLI,
        check_not_with_pipeline,
        spec_from_options,
        with_top,
    )
    from credrank.pipeline.spec import PipelineSpec, SpecError

    shortcuts = shortcuts or {}
    if pipeline is not None:
        check_not_with_pipeline(shortcuts, CLI, f"--pipeline {pipeline}")
        data = read_structured(pipeline, what="pipeline spec")
        if isinstance(data, dict) and "pipeline" in data and "stages" not in data:
            data = data["pipeline"]  # a whole --json output: its "pipeline" object
        spec = PipelineSpec.from_dict(data, where=f"--pipeline {pipeline}")
        try:
            spec = with_top(spec, shortcuts)
        except SpecError as exc:
            raise ValueError(f"--pipeline {pipeline}: {exc.key_path}: {exc.detail}") from None
    else:
        spec = spec_from_options(door=CLI, **shortcuts)
    for item in sets or []:
        key, sep, raw = item.partition("=")
        stage, dot, param = key.strip().partition(".")
        if not sep or not stage or (dot and not param):
            raise ValueError(f"-S: expected STAGE.PARAM=VALUE or KEY=VALUE, got {item!r}")
        value = spec_value(raw)
        try:
            spec = (spec.with_params(stage, {param: value}) if dot
                    else spec.replace_top(**{stage: value}))
        except SpecError as exc:
            raise ValueError(f"-S {item}: {exc.key_path}: {exc.detail}") from None
    return spec


def spec_value(raw: str) -> Any:
    """A ``-S`` value: JSON where it parses (numbers, true/false, null, lists), else text."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def spec_words(exc: Any, spec: PipelineSpec, pipeline: Path | None,
                sets: list[str] | None) -> str:
    """A spec error found while building the stages, said as the user wrote the spec."""
    if pipeline is not None or sets:
        return f"{'--pipeline ' + str(pipeline) + ': ' if pipeline else ''}{exc}"
    from credrank.pipeline.shortcuts import CLI, in_words

    return in_words(exc, spec.to_dict(), CLI)

