"""Every code block of README.md and of the manual pages in docs/ that it links to runs as
written (issue 27, part 5; issue 35, item 8 moved the manual out of the README into
:data:`MANUAL`), and docs/json.md's ``credrank.toml`` example is what the real loader reads.

The files are :data:`DOCS` (README.md first, then the manual pages); their blocks are read
together, as one reader meets them, so a block of one page may use what another saves or
builds. Test ids name the file and the line (``usage.md-L12-bash``).

How each kind of fenced block is checked (:mod:`readme_blocks` reads them):

* ``bash`` / ``sh`` / ``shell`` / ``console``: run with ``bash`` (``set -euo pipefail``) in a
  copy of the prepared folder (below), ``credrank`` on ``PATH`` from this interpreter's
  environment. A command with optional parts in ``[brackets]`` (a synopsis) runs in its
  shortest form, without them; every ``credrank`` command's subcommand and options — the
  bracketed ones too, and those of skipped commands — must be ones the real CLI declares.
  Commands that cannot run in a test are in :data:`SKIP`, keyed by their exact text, with the
  reason; a test checks that each key is still a command of one of :data:`DOCS`, so the list
  cannot go stale. ``credrank serve`` is started as a real process (``tests/serving.py``
  ``running_server``) on a free port, ``localhost:8000`` in the block is pointed at it, and
  ``curl`` runs with ``--fail-with-body`` added (an HTTP error fails the block) and must answer
  the ``/search`` JSON document; without ``curl`` that block is skipped.
* ``python``: run with this interpreter in a copy of the prepared folder. A block that imports
  an optional framework (Haystack, LlamaIndex, LangChain) is skipped, naming the extra, when
  that framework is not installed.
* ``json`` / ``toml``: data shown for reading. A JSON block must parse; one with ``"stages"``
  is a pipeline spec and must pass :meth:`PipelineSpec.from_dict`. The TOML block is the
  ``credrank.toml`` example: :func:`credrank.cli.config.load_config` reads it, each key is an
  option of the commands it applies to, and ``credrank search`` run in a folder holding it
  takes its defaults. A block whose paragraph says "saved as `NAME`" is written to ``NAME`` in
  the prepared folder (the commands after it read it).
* a fence without a language: text shown for reading (program output, the source tree), not
  run. Any other language fails :func:`test_every_block_has_a_known_kind` until this file says
  how to check it.

The prepared folder (one per session): what a reader of these pages has before their
commands — their corpus ``corpus.jsonl``, domain table ``domains.csv``, queries ``queries.tsv``
and answers ``answers.csv`` (stand-ins: the packaged demo corpus, its table and queries, and a
small answers file written here), the files the pages say to save, and ``./idx`` built by the
first ``credrank index corpus.jsonl --index ./idx`` of :data:`DOCS` (the README's; its default
embedder, MiniLM).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from credrank.context.build import CONTEXT_FORMAT
from credrank.pipeline.document import SEARCH_FORMAT
from readme_blocks import SHELL, Block, commands, minimal, read_blocks, synopsis_words, words
from serving import running_server
from sparse_copy import sparse_copy

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: the manual: the pages of docs/ whose blocks a reader runs (docs/json.md and docs/results.md
#: are reference and measurements, not instructions; json.md's TOML example is checked below)
MANUAL = [ROOT / "docs" / f"{name}.md" for name in (
    "usage", "library", "service", "adapters", "operations", "architecture", "benchmarks",
    "development")]
DOCS = [README, *MANUAL]
JSON_MD = ROOT / "docs" / "json.md"
BIN = Path(sys.executable).parent
BLOCKS = [b for path in DOCS for b in read_blocks(path, str(path.relative_to(ROOT)))]

#: commands of :data:`DOCS` that a test does not run, by their exact text (continuation lines
#: joined, the trailing comment dropped), and why
SKIP: dict[str, str] = {
    "make demo": "creates .venv and installs packages (minutes, the package index); CI runs "
                 "`make install`, and `credrank demo` is tested in tests/test_demo_data.py",
    "make test": "runs the whole test suite, this file included",
    "pip install 'credrank[serve]'": "installs packages; this environment has the serve extra "
                                     "(`make install`)",
    "credrank bench trec2019-hm --path ../shared/data/trec2019_hm/trec2019_hm_dev.csv "
    "[--out DIR] [--report PATH] [--quiet] [--json]":
        "a whole real-data bench (71 s on the 2-core machine) that needs ../shared/data; the "
        "benches are tested in tests/test_bench*.py",
    "credrank priors init|update|rollback|show STORE …": "a summary of four subcommands, not "
                                                        "one command; tests/test_priors_cli.py "
                                                        "runs them",
    "credrank index corpus.jsonl --index idx --engine qdrant --qdrant-url "
    "https://qdrant.example.org:6333 --api-key-env QDRANT_API_KEY": "needs a Qdrant server "
        "(qdrant.example.org stands for yours); tests/test_store.py runs the same code on "
        "qdrant-client's local mode",
    "credrank search \"does vitamin d prevent covid\" --index idx --api-key-env QDRANT_API_KEY":
        "searches the Qdrant-server index of the command before it",
}

#: optional frameworks a python block may import: top-level module → extra
FRAMEWORKS = {"haystack": "haystack", "llama_index": "llamaindex", "langchain_core": "langchain"}
#: where ``credrank serve`` listens when no --port is given (what the service page's curl calls)
DEFAULT_SERVE = "localhost:8000"
#: the block run's time limit (a MiniLM load is a few seconds)
TIMEOUT_S = 300

ANSWERS_CSV = """question_id,source_id,answer
q1,s1,Paris
q1,s2,Paris
q1,s3,Lyon
q2,s1,4
q2,s2,4
q2,s3,four
q3,s1,blue
q3,s2,green
q3,s3,blue
"""


def block_id(block: Block) -> str:
    return f"{Path(block.source).name}-L{block.line}-{block.lang or 'text'}"


def blocks_of(*langs: str) -> list[Any]:
    """The blocks of :data:`DOCS` in ``langs``, as pytest params (the runs are ``slow``: MiniLM)."""
    return [pytest.param(b, id=block_id(b), marks=pytest.mark.slow)
            for b in BLOCKS if b.lang in langs]


def all_commands() -> list[tuple[Block, str]]:
    return [(b, c.text) for b in BLOCKS if b.lang in SHELL for c in commands(b)]


def saved_as(block: Block) -> str | None:
    """The file name the block's paragraph says it is saved as, if any."""
    m = re.search(r"saved as `([^`/]+)`", block.before)
    return m.group(1) if m else None


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if k != "CREDRANK_CONFIG"}
    out["PATH"] = f"{BIN}{os.pathsep}{out.get('PATH', '')}"
    return out


def run(args: list[str], cwd: Path, what: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(args, cwd=cwd, env=env(), capture_output=True, text=True,
                          timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, (f"{what} exited {proc.returncode}\n--- stdout\n"
                                  f"{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
    return proc


# --------------------------------------------------------------------------------------------
# the prepared folder
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def readme_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder a reader of :data:`DOCS` works in (module docstring), built once per
    session."""
    from credrank.demo_corpus import demo_dir
    from credrank.documents import read_queries

    work = tmp_path_factory.mktemp("readme") / "work"
    work.mkdir()
    demo = demo_dir()
    shutil.copy(demo / "corpus.jsonl", work / "corpus.jsonl")
    shutil.copy(demo / "domains.csv", work / "domains.csv")
    (work / "queries.tsv").write_text(
        "".join(f"{q.id}\t{q.text}\n" for q in read_queries(demo / "queries.jsonl")),
        encoding="utf-8")
    (work / "answers.csv").write_text(ANSWERS_CSV, encoding="utf-8")
    for block in BLOCKS:
        name = saved_as(block)
        if name is not None:
            (work / name).write_text(block.text, encoding="utf-8")
    build = next((minimal(c) for _, c in all_commands()
                  if words(minimal(c))[:2] == ["credrank", "index"]
                  and "./idx" in words(minimal(c))), None)
    assert build is not None, (f"none of {[str(p.relative_to(ROOT)) for p in DOCS]} builds "
                               "./idx with `credrank index … --index ./idx`")
    run(["bash", "-c", f"set -euo pipefail\n{build}"], work, f"the docs' {build!r}")
    assert (work / "idx" / "manifest.json").is_file()
    return work


@pytest.fixture
def workdir(readme_dir: Path, tmp_path: Path) -> Path:
    """A fresh copy of the prepared folder for one block (a block may write to it)."""
    return Path(shutil.copytree(readme_dir, tmp_path / "work", symlinks=True,
                                copy_function=sparse_copy))


# --------------------------------------------------------------------------------------------
# what every block is, and the skip list
# --------------------------------------------------------------------------------------------
HANDLED = SHELL | {"python", "json", "toml", ""}


def test_every_block_has_a_known_kind():
    assert BLOCKS, "README.md and the manual have no fenced code blocks"
    empty = [str(p.relative_to(ROOT)) for p in DOCS if not p.is_file()]
    assert not empty, f"{empty}: a manual page named in MANUAL is missing"
    unknown = [b.where for b in BLOCKS if b.lang not in HANDLED]
    assert not unknown, (f"{unknown}: tell tests/test_readme.py how to check these blocks "
                         f"(known: {sorted(HANDLED)})")


def test_skip_list_names_commands_of_the_docs():
    present = {c for _, c in all_commands()}
    stale = [c for c in SKIP if c not in present]
    assert not stale, f"SKIP names commands that README.md and the manual no longer have: {stale}"


def test_manual_pages_are_linked_from_the_readme():
    """Each page of :data:`MANUAL` is one the README links to (a reader finds it)."""
    text = README.read_text(encoding="utf-8")
    unlinked = [p.name for p in MANUAL if f"](docs/{p.name})" not in text]
    assert not unlinked, f"README.md links no manual page {unlinked}"


def _cli() -> Any:
    from typer.main import get_command

    from credrank.cli.root import app

    return get_command(app)


def _options(command: Any) -> set[str]:
    return {o for p in command.params for o in (*p.opts, *p.secondary_opts)} | {"--help"}


@pytest.mark.parametrize("command", [
    pytest.param(c.text, id=f"{Path(b.source).name}-L{c.line}-"
                           f"{'-'.join(words(minimal(c.text))[:3])}")
    for b in BLOCKS if b.lang in SHELL for c in commands(b) if c.text.startswith("credrank ")])
def test_credrank_commands_name_real_options(command: str):
    """Each ``credrank`` command of a shell block — skipped ones and the bracketed parts of a
    synopsis too — names a real subcommand and only options that subcommand declares."""
    ws = synopsis_words(command)[1:]
    node, path = _cli(), ["credrank"]
    while ws and hasattr(node, "commands") and not ws[0].startswith("-"):
        names = ws.pop(0).split("|")
        missing = [n for n in names if n not in node.commands]
        assert not missing, f"{command!r}: {' '.join(path)} has no subcommand {missing}"
        if len(names) > 1:  # alternatives: each exists; their options are not shown
            return
        node, path = node.commands[names[0]], [*path, names[0]]
    assert not hasattr(node, "commands"), f"{command!r}: {' '.join(path)} needs a subcommand"
    known = _options(node)
    used = {w.split("=", 1)[0] for w in ws if w.startswith("-") and len(w) > 1}
    assert used <= known, f"{command!r}: {' '.join(path)} has no option {sorted(used - known)}"


# --------------------------------------------------------------------------------------------
# shell blocks
# --------------------------------------------------------------------------------------------
def _script(block: Block, port: int | None) -> str:
    lines = ["set -euo pipefail",
             'curl() { command curl --fail-with-body "$@"; }']  # an HTTP error fails the block
    for command in commands(block):
        if command.text in SKIP:
            lines.append(f": skipped: {command.line}")
        elif words(minimal(command.text))[:2] == ["credrank", "serve"]:
            lines.append(f": started by the test: {command.line}")
        else:
            lines.append(minimal(command.text))
    script = "\n".join(lines) + "\n"
    if port is not None:
        assert DEFAULT_SERVE in script, (f"{block.where}: starts `credrank serve` but calls no "
                                         f"{DEFAULT_SERVE}")
        script = script.replace(DEFAULT_SERVE, f"127.0.0.1:{port}")
    return script


def _serve_args(block: Block, workdir: Path) -> tuple[Path, list[str]] | None:
    """The index and other arguments of the block's ``credrank serve`` (its shortest form)."""
    found = [words(minimal(c.text)) for c in commands(block)
             if words(minimal(c.text))[:2] == ["credrank", "serve"]]
    if not found:
        return None
    assert len(found) == 1, f"{block.where}: more than one `credrank serve`"
    args = found[0][2:]
    assert "--index" in args, f"{block.where}: `credrank serve` without --index"
    at = args.index("--index")
    index = workdir / args[at + 1]
    assert "--port" not in args, f"{block.where}: the test points curl at its own port"
    return index, args[:at] + args[at + 2:]


@pytest.mark.parametrize("block", blocks_of(*SHELL))
def test_shell_block_runs(block: Block, workdir: Path):
    serve = _serve_args(block, workdir)
    calls_curl = any(words(c.text)[:1] == ["curl"] for c in commands(block))
    if calls_curl and shutil.which("curl") is None:
        pytest.skip(f"{block.where} calls curl, which is not installed")
    if serve is None:
        proc = run(["bash", "-c", _script(block, None)], workdir, block.where)
    else:
        index, args = serve
        with running_server(index, *args) as server:
            proc = run(["bash", "-c", _script(block, server.port)], workdir, block.where)
    if calls_curl:  # a search's document, or a context's
        doc = json.loads(proc.stdout)
        assert ((doc.get("credrank_search") == SEARCH_FORMAT and doc["hits"])
                or (doc.get("credrank_context") == CONTEXT_FORMAT and doc["passages"])), \
            proc.stdout[:2000]


# --------------------------------------------------------------------------------------------
# python blocks
# --------------------------------------------------------------------------------------------
def _frameworks(block: Block) -> list[str]:
    found = re.findall(r"^\s*(?:from|import)\s+(\w+)", block.text, flags=re.MULTILINE)
    return [m for m in dict.fromkeys(found) if m in FRAMEWORKS]


@pytest.mark.parametrize("block", blocks_of("python"))
def test_python_block_runs(block: Block, workdir: Path):
    import importlib.util

    for module in _frameworks(block):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{block.where} needs {module}: the {FRAMEWORKS[module]} extra is not "
                        f"installed (pip install 'credrank[{FRAMEWORKS[module]}]')")
    snippet = workdir / "readme_snippet.py"
    snippet.write_text(block.text, encoding="utf-8")
    run([sys.executable, snippet.name], workdir, block.where)


# --------------------------------------------------------------------------------------------
# data blocks
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("block", [pytest.param(b, id=block_id(b))
                                   for b in BLOCKS if b.lang == "json"])
def test_json_block_parses(block: Block):
    from credrank.pipeline.spec import PipelineSpec

    data = json.loads(block.text)
    if isinstance(data, dict) and "stages" in data:
        PipelineSpec.from_dict(data, where=block.where)


def _config_blocks(blocks: list[Block]) -> list[Block]:
    return [b for b in blocks if b.lang == "toml" and "credrank.toml" in b.before]


def check_config_keys(table: dict[str, Any], where: str) -> None:
    """Each key of a ``credrank.toml`` table: a top-level one is an option of some command, a
    ``[command]`` table's an option of that command (as the loader reads them)."""
    from credrank.cli.config import _keys, _norm

    cli = _cli()

    def names(command: Any) -> set[str]:
        return {_norm(k) for p in command.params if p.param_type_name == "option"
                for k in _keys(p)}

    def walk(node: Any, path: list[str], section: dict[str, Any]) -> None:
        for key, value in section.items():
            if isinstance(value, dict):
                assert hasattr(node, "commands") and key in node.commands, (
                    f"{where}: [{'.'.join([*path, key])}] is no command")
                walk(node.commands[key], [*path, key], value)
            elif path:
                assert _norm(key) in names(node), (
                    f"{where}: [{'.'.join(path)}] {key!r} is no option of that command")
            else:
                assert any(_norm(key) in names(cli.commands[c]) for c in
                           ("index", "search", "context", "serve")), (
                    f"{where}: top-level {key!r} is no option of index, search, context or "
                    "serve")

    walk(cli, [], table)


def test_readme_config_example_is_read_by_the_loader(tmp_path: Path):
    from credrank.cli.config import load_config

    found = _config_blocks(BLOCKS)
    assert len(found) == 1, ("README.md and the manual: expected one ```toml credrank.toml "
                             f"example, found {[b.where for b in found]}")
    path = tmp_path / "credrank.toml"
    path.write_text(found[0].text, encoding="utf-8")
    config = load_config(path)
    assert config.table == tomllib.loads(found[0].text)
    check_config_keys(config.table, found[0].where)


@pytest.mark.slow
def test_readme_config_example_gives_search_its_defaults(workdir: Path):
    """``credrank search`` in a folder with the manual's ``credrank.toml`` and no options but
    the query takes the file's index, priors and ``[search]`` top-k (``table`` is for the
    commands that have ``--table``: index, serve)."""
    block = _config_blocks(BLOCKS)[0]
    (workdir / "credrank.toml").write_text(block.text, encoding="utf-8")
    config = tomllib.loads(block.text)
    proc = run([str(BIN / "credrank"), "search", "does vitamin d prevent covid", "--json"],
               workdir, f"credrank search with {block.where}")
    assert f"credrank: defaults from {workdir / 'credrank.toml'}" in proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["settings"]["top_k"] == config["search"]["top-k"] == len(doc["hits"])
    assert doc["settings"]["priors"]["name"] == config["priors"]


def test_json_md_config_example_is_read_by_the_loader(tmp_path: Path):
    """docs/json.md's ``credrank.toml`` section: its example is read by the real loader as a
    ``credrank.toml`` and, its tables under ``[tool.credrank]``, as a ``pyproject.toml``;
    every key is an option of the commands it applies to, and the commands get its values."""
    from credrank.cli.config import command_defaults, load_config

    text = JSON_MD.read_text(encoding="utf-8")
    head = text.index("## `credrank.toml`")
    end = text.find("\n## ", head + 1)
    section = text[head:end if end != -1 else len(text)]
    m = re.search(r"```toml\n(.*?)```", section, flags=re.DOTALL)
    assert m is not None, "docs/json.md: the credrank.toml section has no ```toml example"
    own = tmp_path / "credrank.toml"
    own.write_text(m.group(1), encoding="utf-8")
    config = load_config(own)
    check_config_keys(config.table, "docs/json.md")
    project = tmp_path / "project" / "pyproject.toml"
    project.parent.mkdir()
    project.write_text("[project]\nname = 'mine'\n\n[tool.credrank]\n" + re.sub(
        r"^\[([\w.-]+)\]", r"[tool.credrank.\1]", m.group(1), flags=re.MULTILINE),
        encoding="utf-8")
    assert load_config(project).table == config.table
    cli = _cli()
    defaults = command_defaults(config, cli)
    for command, table in config.table.items():  # each command's own table reaches it
        if isinstance(table, dict) and not any(isinstance(v, dict) for v in table.values()):
            got = defaults.get(command)
            for key, value in table.items():
                assert got.get(_param(cli.commands[command], key)) == value, (command, key)
    search = defaults.get("search")  # and the top level, where the command has the option
    for key, value in config.table.items():
        name = _param(cli.commands["search"], key)
        if isinstance(value, str) and name is not None and not value.startswith("."):
            assert search.get(name) == value, key


def _param(command: Any, key: str) -> str | None:
    """The name of ``command``'s option that a file's ``key`` sets (as the loader maps it)."""
    from credrank.cli.config import _keys, _norm

    return next((p.name for p in command.params if p.param_type_name == "option"
                 and _norm(key) in {_norm(k) for k in _keys(p)}), None)
