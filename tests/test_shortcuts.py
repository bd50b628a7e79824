"""The one shortcut table (issue 35): every front door has the same shortcuts under the same
names, makes the same spec of the same values, and says errors in its own words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from credrank.adapters._common import OPTIONS, CredrankScorer
from credrank.audit.run import SYSTEM_SCHEMA, AuditInputError, system_spec
from credrank.cli import app, load_command
from credrank.pipeline.shortcuts import (
    ADAPTER,
    AUDIT,
    CLI,
    HTTP_RERANK,
    HTTP_SEARCH,
    LIBRARY,
    SHORTCUTS,
    Shortcut,
    check_not_with_pipeline,
    spec_from_options,
)
from credrank.pipeline.spec import PipelineSpec
from credrank.searcher import Searcher
from credrank.serve.config import ServeConfig
from credrank.serve.limits import LimitError
from credrank.serve.models import RerankRequest, SearchRequest
from credrank.serve.work import ServiceState

runner = CliRunner()

#: one value for each kind of shortcut that needs no file
VALUES: dict[str, Any] = {
    "top_k": 4, "priors": "aggressive", "smoothing": True, "mode": "multiply", "select": "mmr",
    "select_params": {"diversity": 0.4}, "planted": True, "machine_text": True,
    "freshness": "half_life=30d,undated=penalty:0.5", "consensus": True,
    "consensus_params": {"threshold": 0.4},
}


def _cli_args(values: dict[str, Any]) -> list[str]:
    """``values`` as `credrank search` options."""
    args: list[str] = []
    for name, value in values.items():
        flag = CLI.say(name)
        if value is True:
            args.append(flag)
        elif isinstance(value, dict):
            for key, item in value.items():
                args += [flag, f"{key}={item}"]
        else:
            args += [flag, str(value)]
    return args


@pytest.mark.parametrize("command", ["search", "context"])
def test_every_cli_ranking_command_has_every_shortcut(command: str) -> None:
    params = {p.name: p for p in load_command(command).params}
    for s in CLI.shortcuts():
        assert s.name in params, (command, s.name)
        assert CLI.say(s.name) in params[s.name].opts
    calibrate = load_command("consensus").commands["calibrate"]  # type: ignore[attr-defined]
    assert {s.name for s in CLI.shortcuts()} <= {p.name for p in calibrate.params}


def test_every_door_has_its_shortcuts_under_the_same_names() -> None:
    retrieval = {s.name for s in SHORTCUTS.values() if s.retrieval}
    assert retrieval == {"fetch_k", "lexical", "pushdown", "unit"}
    everything = set(SHORTCUTS)
    assert set(SearchRequest.model_fields) >= everything
    assert set(RerankRequest.model_fields) >= everything - retrieval
    assert not set(RerankRequest.model_fields) & retrieval
    assert {n for n, o in OPTIONS.items() if o.shortcut} == everything - retrieval
    assert set(SYSTEM_SCHEMA.fields) - {"pipeline"} == everything
    assert {s.name for s in HTTP_RERANK.shortcuts()} == {s.name for s in ADAPTER.shortcuts()}


@pytest.fixture
def state(demo_index_hashing: Path) -> Iterator[ServiceState]:
    """The service's request handling over the demo index (no server: its ``plan``)."""
    with Searcher.open(demo_index_hashing) as searcher:
        yield ServiceState(searcher, ServeConfig())


def test_the_same_values_make_the_same_spec_at_every_door(
        demo_index_hashing: Path, tmp_path: Path, state: ServiceState) -> None:
    library = Searcher.spec(**VALUES)
    assert [s.name for s in library.stages] == [
        "prior", "smoothing", "planted", "machine_text", "freshness", "consensus", "combine",
        "mmr"]
    assert library == spec_from_options(door=LIBRARY, **VALUES)
    # HTTP (the fields a request sent)
    assert state.plan(SearchRequest(query="q", **VALUES)).spec == library
    # the adapters (candidates from elsewhere: machine_text, a score stored at index time,
    # is refused there, naming the pipeline stage that scores them)
    others = {k: v for k, v in VALUES.items() if k != "machine_text"}
    assert CredrankScorer(embedder="hashing", **others).spec == Searcher.spec(**others)
    with pytest.raises(ValueError, match="machine_text: candidates retrieved elsewhere"):
        CredrankScorer(embedder="hashing", **VALUES)
    # an audit's [system]
    assert system_spec(VALUES, "audit.toml", tmp_path)[0] == library


def test_the_cli_options_make_the_librarys_spec(demo_index_hashing: Path) -> None:
    # end to end: the options generated from the table, the spec echoed in --json (the demo
    # index has no machine-text scores)
    values = {k: v for k, v in VALUES.items() if k != "machine_text"}
    library = Searcher.spec(**values)
    got = runner.invoke(app, ["search", "vaccine", "--index", str(demo_index_hashing),
                              "--json", *_cli_args(values)])
    assert got.exit_code == 0, got.output
    echoed = json.loads(got.stdout)["pipeline"]
    fresh = next(s for s in echoed["stages"] if s["stage"] == "freshness")
    # the echo records the evaluation time the answer read from the clock (issue 36): replaying
    # it gives the same scores; with the clock's reading taken out it is the library's spec
    assert fresh["now"] == json.loads(got.stdout)["info"]["freshness"]["now"]
    fresh["now"] = None
    assert PipelineSpec.from_dict(echoed).key == library.key


@pytest.mark.parametrize("door,expected", [
    (CLI, "--credibility-floor: only with --credibility-model"),
    (HTTP_SEARCH, "credibility_floor: only with credibility_model"),
    (ADAPTER, "credibility_floor: only with credibility_model"),
    (AUDIT, "system.credibility_floor: only with system.credibility_model"),
])
def test_requires_is_said_in_each_doors_words(door: Any, expected: str) -> None:
    with pytest.raises(ValueError) as caught:
        spec_from_options(door=door, credibility_floor=0.5)
    assert str(caught.value) == expected


def test_value_errors_are_said_in_each_doors_words(tmp_path: Path,
                                                   state: ServiceState) -> None:
    bad = {"select": "mmr", "select_params": {"diversity": 5}}
    detail = "expected a finite number in [0, 1], got 5"
    with pytest.raises(ValueError, match=r"^select_params\.diversity: expected"):
        Searcher.spec(**bad)
    with pytest.raises(ValueError) as caught:
        CredrankScorer(embedder="hashing", **bad)
    assert str(caught.value) == f"select_params.diversity: {detail}"
    with pytest.raises(AuditInputError) as audit:
        system_spec(bad, "audit.toml", tmp_path)
    assert str(audit.value) == f"audit.toml: system.select_params.diversity: {detail}"
    with pytest.raises(LimitError) as http:
        state.plan(SearchRequest(query="q", **bad))
    assert http.value.field == "select_params.diversity"
    got = runner.invoke(app, ["search", "q", "--index", str(tmp_path), "--select", "mmr",
                              "-P", "diversity=5"])
    assert got.exit_code == 2
    assert f"--select-param diversity: {detail}" in got.output


def test_excludes_and_not_with_a_pipeline() -> None:
    with pytest.raises(ValueError, match=r"^--priors-store: not with --source-reliability"):
        spec_from_options(door=CLI, priors_store="s", source_reliability="r")
    # the type prior the reliability estimates shrink toward: 'none' was replaced by
    # 'current' without a word
    with pytest.raises(ValueError, match=r"^--priors: expected a preset or a prior file with "
                                         r"--source-reliability \(it sets its type_priors\), "
                                         r"got 'none'"):
        spec_from_options(door=CLI, priors="none", source_reliability="r")
    with pytest.raises(ValueError, match=r"^domain_scores: only with priors other than 'none'"):
        spec_from_options(priors="none", domain_scores=True)
    # top_k and fetch_k may come with a pipeline; nothing else, not even at its default when
    # the door knows it was written (a JSON field, a TOML key)
    check_not_with_pipeline({"top_k": 3, "fetch_k": 9, "priors": "current"}, CLI, "--pipeline F")
    with pytest.raises(ValueError, match=r"^priors: not with pipeline \(the pipeline comes"):
        check_not_with_pipeline({"priors": "current"}, HTTP_SEARCH, "pipeline", present=True)
    with pytest.raises(ValueError, match=r"^--mode, --planted: not with --pipeline F"):
        check_not_with_pipeline({"planted": True, "mode": "rrf"}, CLI, "--pipeline F")


def test_a_wrong_table_line_fails_when_it_is_read() -> None:
    with pytest.raises(ValueError, match="no stage 'nope' in the catalog"):
        Shortcut("x", "on", "nope", None, "bool", False, "")
    with pytest.raises(ValueError, match="kind 'sometimes'"):
        Shortcut("x", "sometimes", "planted", None, "bool", False, "")
    with pytest.raises(ValueError, match="unknown option; expected some of"):
        spec_from_options(door=ADAPTER, fetch_k=5)  # the adapters do not retrieve
