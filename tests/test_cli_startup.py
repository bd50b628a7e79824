"""The first command a user types is the cheapest (issue 26): ``credrank --help`` and
``--version`` import neither typer nor any command module, ``COMMAND --help`` imports only
its own command, and a plain search imports none of the stage packages it does not run.
Imports are checked in fresh interpreters (``sys.modules`` after the command); times are
measured by ``bench/scripts/bench_cold_start.py``, not here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from credrank.cli import all_commands, root_help, run

#: never imported by `credrank --help` / `--version`
HEAVY = ("typer", "click", "rich", "numpy", "scipy", "torch", "onnxruntime", "matplotlib",
         "qdrant_edge")
#: the stage modules (and their kernel packages) a plain search does not run; it runs the
#: prior, credrank.stages.prior
STAGES = ("credrank.stages.feedback_prior", "credrank.stages.reliability_prior",
          "credrank.stages.smoothing", "credrank.stages.credibility", "credrank.stages.planted",
          "credrank.stages.machine_text", "credrank.stages.freshness", "credrank.stages.stance",
          "credrank.stages.consensus", "credrank.consensus", "credrank.credibility",
          "credrank.freshness", "credrank.reliability", "credrank.defences",
          "credrank.machine_text", "credrank.select.stages", "credrank.signals.stance",
          "credrank_bench", "credrank.evaluate")

_RUNNER = """
import contextlib, io, json, sys
from credrank.cli import run
out = io.StringIO()
codes = []
with contextlib.redirect_stdout(out):
    for args in json.loads(sys.argv[1]):
        codes.append(run(args))
print("@@" + json.dumps({"codes": codes, "out": out.getvalue(),
                         "modules": sorted(sys.modules)}))
"""


def run_fresh(*commands: list[str], cwd: Path | None = None) -> dict:
    """Run ``commands`` (each an argument list) through :func:`credrank.cli.run` in one new
    interpreter; their exit codes, their stdout and the modules imported at the end."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}  # the help's box characters
    proc = subprocess.run([sys.executable, "-c", _RUNNER, json.dumps(list(commands))],
                          capture_output=True, text=True, encoding="utf-8", timeout=300,
                          cwd=cwd, env=env)
    marker = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
    assert marker, proc.stdout + proc.stderr
    return json.loads(marker[-1][2:])


def loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return sorted({n for n in names for m in modules if m == n or m.startswith(n + ".")})


def test_root_help_and_version_import_no_command_and_no_typer() -> None:
    result = run_fresh(["--help"], ["--version"], [])
    assert result["codes"] == [0, 0, 2]  # no arguments: the help, and usage's exit code
    assert loaded(result["modules"], HEAVY) == []
    assert [m for m in result["modules"] if m.startswith("credrank.cli.")] == []
    assert [m for m in result["modules"] if m.startswith("credrank.")] == ["credrank.cli"]
    out = result["out"]
    assert out.count("Usage: credrank [OPTIONS] COMMAND [ARGS]...") == 2
    for name in all_commands():  # the bench distribution's `bench` too (make install has it)
        assert f"\n  {name} " in out
    assert "\n  bench " in out
    # a plugin's command is listed from its entry point and a module that imports nothing
    assert [m for m in result["modules"] if m.startswith("credrank_bench")] == [
        "credrank_bench", "credrank_bench.commands"]
    from credrank import __version__

    assert f"credrank {__version__}\n" in out


def test_typer_root_help_is_the_static_help(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through typer (CliRunner, `app`), the root help is the same text, commands unloaded."""
    from typer.testing import CliRunner

    from credrank.cli import app

    monkeypatch.setenv("TERMINAL_WIDTH", "100")
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert result.output.strip() == root_help(100).strip()
    assert app.registered_commands == []  # the group's commands come from COMMANDS alone


def test_every_command_help_imports_neither_scipy_nor_torch() -> None:
    names = list(all_commands())
    result = run_fresh(*([name, "--help"] for name in names))
    assert result["codes"] == [0] * len(names)
    assert loaded(result["modules"], ("scipy", "torch", "sentence_transformers",
                                      "transformers", "sklearn")) == []


def test_search_help_imports_only_its_own_command() -> None:
    result = run_fresh(["search", "--help"])
    assert result["codes"] == [0]
    commands = {m.split(".")[2] for m in result["modules"] if m.startswith("credrank.cli.")}
    # search shares the engine options of index; common/pipe/specs/root/config: not commands
    assert commands - {"common", "pipe", "specs", "root", "config"} == {"search", "index"}
    assert loaded(result["modules"], STAGES) == []


def test_short_help_repeats_each_command_help() -> None:
    """The static line of `credrank --help` is the first paragraph of the command's help."""
    from credrank.cli import load_command

    for name, command in all_commands().items():
        help_text = load_command(name).help or ""
        first = " ".join(help_text.split("\n\n")[0].split())
        assert command.short == first, name


def test_bench_names_are_the_registry() -> None:
    from credrank_bench.cli import BENCH_NAMES
    from credrank_bench.experiments.benches import BENCHES

    assert BENCH_NAMES == tuple(BENCHES)


def test_selectors_are_imported_only_when_used() -> None:
    code = ("import sys; import credrank.select.topk, credrank.searcher, credrank.rerank, "
            "credrank.pipeline.compile, credrank.pipeline.shortcuts, credrank.pipeline.document; "
            "before = 'credrank.select.stages' in sys.modules; "
            "from credrank.select import MMRSelect; "
            "print(before, 'credrank.select.stages' in sys.modules, MMRSelect.__name__)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert proc.stdout.split() == ["False", "True", "MMRSelect"], proc.stderr


def test_cold_search_imports_no_stage_it_does_not_run(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("\n".join(json.dumps(
        {"id": f"d{i}", "text": f"vitamin d trial {i}", "url": f"https://www.cdc.gov/{i}"})
        for i in range(6)) + "\n", encoding="utf-8")
    assert run(["index", str(corpus), "--index", str(tmp_path / "idx"),
                "--embedder", "hashing"]) == 0
    result = run_fresh(["search", "vitamin d", "--index", str(tmp_path / "idx"), "--json"])
    assert result["codes"] == [0]
    assert loaded(result["modules"], STAGES) == []
    assert loaded(result["modules"], ("scipy", "torch")) == []
    assert json.loads(result["out"])["hits"][0]["rank"] == 1
    # a stage named in the spec is imported when the pipeline is built
    result = run_fresh(["search", "vitamin d", "--index", str(tmp_path / "idx"), "--json",
                        "--select", "mmr", "-P", "diversity=0.3"])
    assert result["codes"] == [0]
    assert loaded(result["modules"], STAGES) == ["credrank.select.stages"]


def test_static_command_help_is_typers_help() -> None:
    """credrank.cli.helptext is what typer renders now (regenerate: python -m
    credrank.cli.helpgen), help and option names, and covers every built-in command."""
    from credrank.cli import COMMANDS
    from credrank.cli.helpgen import render
    from credrank.cli.helptext import HELP, OPTIONS

    rendered = render()
    assert set(HELP) == set(rendered.help), "run python -m credrank.cli.helpgen"
    for key, text in rendered.help.items():
        assert HELP[key] == text, f"{key}: run python -m credrank.cli.helpgen"
    assert set(COMMANDS) <= set(HELP)
    # the option names a credrank.toml may set (credrank.cli.config.check_keys)
    assert {k: sorted(v) for k, v in OPTIONS.items()} == rendered.options, \
        "run python -m credrank.cli.helpgen"
    assert set(HELP) <= set(OPTIONS)
    assert {"top_k", "index", "priors"} <= OPTIONS["search"]
    assert "index_dir" not in OPTIONS["search"]  # a Python name is no key of the file
    assert "table" in OPTIONS["serve"]


def words(text: str) -> str:
    return " ".join(text.split())


def test_no_help_text_cuts_an_option_or_a_description() -> None:
    """Every option name of every command appears whole in its help, every subcommand's first
    paragraph whole in its group's help, every command's whole in the root's; no line is wider
    than click's 78 columns at 80 (rich's panels cut names to fit: "--trust-declar…")."""
    import click

    from credrank.cli import load_command, root_help
    from credrank.cli.helptext import HELP

    def walk(path: tuple[str, ...], command: click.Command):
        yield path, command
        for name, sub in getattr(command, "commands", {}).items():
            yield from walk((*path, name), sub)

    checked = 0
    for name in HELP:
        if " " in name:
            continue
        for path, command in walk((name,), load_command(name)):
            if getattr(command, "hidden", False):
                continue
            text = HELP[" ".join(path)]
            assert max(len(line) for line in text.splitlines()) <= 78, path
            for param in command.params:
                for opt in (*param.opts, *param.secondary_opts):
                    if opt.startswith("-"):
                        assert opt in text, (path, opt)
                        checked += 1
            for sub_name, sub in getattr(command, "commands", {}).items():
                first = (sub.help or "").split("\n\n")[0]
                assert words(f"{sub_name} {first}") in words(text), (path, sub_name)
    assert checked > 100
    root = root_help(80)
    assert max(len(line) for line in root.splitlines()) <= 78
    for name, command in all_commands().items():
        assert words(f"{name} {command.short}") in words(root), name


def test_root_help_wraps_to_a_narrow_terminal_without_cutting() -> None:
    from credrank.cli import root_help

    narrow = root_help(60)
    assert max(len(line) for line in narrow.splitlines()) <= 58
    assert words(narrow) == words(root_help(80))  # the same words, wrapped differently


def test_command_help_imports_no_command_where_no_config_applies(tmp_path: Path) -> None:
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "COLUMNS": "80"}
    saved = {k: os.environ.get(k) for k in (*env, "CREDRANK_CONFIG", "TERMINAL_WIDTH")}
    os.environ.update(env)
    for k in ("CREDRANK_CONFIG", "TERMINAL_WIDTH"):
        os.environ.pop(k, None)
    try:
        (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n", encoding="utf-8")
        result = run_fresh(["search", "--help"], ["score", "machine-text", "--help"],
                           cwd=tmp_path)
        assert result["codes"] == [0, 0]
        assert loaded(result["modules"], HEAVY) == []
        assert [m for m in result["modules"] if m.startswith("credrank.cli.")] == [
            "credrank.cli.helptext"]
        from credrank.cli.helptext import HELP

        assert result["out"] == HELP["search"] + HELP["score machine-text"]
        # a pyproject.toml that may configure credrank: typer answers (the file's defaults)
        (tmp_path / "pyproject.toml").write_text("[tool.credrank]\ntop-k = 3\n",
                                                 encoding="utf-8")
        result = run_fresh(["search", "--help"], cwd=tmp_path)
        assert result["codes"] == [0]
        assert "credrank.cli.search" in result["modules"]
        assert "[default: 3]" in result["out"]  # the file's default, as typer shows it
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def test_static_help_is_not_used_where_typer_must_answer(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    from credrank.cli import static_help

    monkeypatch.setenv("CREDRANK_NO_CONFIG", "1")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.delenv("TERMINAL_WIDTH", raising=False)
    monkeypatch.delenv("CREDRANK_CONFIG", raising=False)
    assert static_help(["search", "--help"]) is not None
    assert static_help(["search", "--json", "--help"]) is None  # an option first
    assert static_help(["bench", "--help"]) is None  # a plugin's
    assert static_help(["search"]) is None
    monkeypatch.setenv("CREDRANK_CONFIG", "x.toml")
    assert static_help(["search", "--help"]) is None
    monkeypatch.delenv("CREDRANK_CONFIG")
    monkeypatch.setenv("COLUMNS", "60")  # narrower than the text
    assert static_help(["search", "--help"]) is None
