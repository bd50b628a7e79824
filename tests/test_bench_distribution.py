"""The research wing is its own distribution (issue 35, item 5): ``credrank_bench`` (``bench/``)
holds the dataset readers, the experiments, ``credrank bench`` and the benchmark scripts; the
product ``credrank`` never imports it and finds its command and its audit stress runner through
entry points. The base install (no ``eval``, ``plots`` or ``parquet`` extra) indexes, searches
and serves; a feature whose extra is missing says which one to install."""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import subprocess
import sys
from pathlib import Path

import pytest

import credrank.cli as cli
from credrank.cli import COMMAND_GROUP, entry_points, plugin_commands, run
from credrank.core.extras import MissingExtraError

#: the optional dependencies that left the base install, and the bench distribution
OPTIONAL = ("matplotlib", "ir_measures", "pytrec_eval", "pyarrow", "credrank_bench")


@pytest.mark.parametrize("name", ["credrank.experiments", "credrank.datasets",
                                  "credrank.cli.bench"])
def test_the_wing_is_not_in_the_product(name: str) -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(name)


@pytest.mark.parametrize("group", [COMMAND_GROUP, "credrank.audit.robustness"])
def test_entry_points_agree_with_importlib_metadata(group: str) -> None:
    expected = {ep.name: ep.value for ep in importlib.metadata.entry_points(group=group)}
    assert entry_points(group) == expected
    assert expected  # make install installs the bench distribution


def test_bench_is_a_plugin_command() -> None:
    from credrank_bench.commands import BENCH

    assert "bench" not in cli.COMMANDS
    assert plugin_commands()["bench"] is BENCH
    assert cli.find_command("bench") is BENCH and list(cli.all_commands())[-1] == "bench"


@pytest.fixture
def no_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if no other distribution were installed."""
    monkeypatch.setattr(cli, "_plugins", None)
    monkeypatch.setattr(cli, "entry_points", lambda group: {})


@pytest.mark.usefixtures("no_plugins")
def test_bench_without_the_distribution_says_how_to_install(
        capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["bench", "demo"], ["bench", "--help"]):
        assert run(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: credrank bench: ") and "pip install -e ./bench" in err
    assert run(["--help"]) == 0
    assert "\n  bench " not in capsys.readouterr().out
    assert run(["no-such-command"]) == 2  # an unknown command stays click's usage error
    assert "No such command" in capsys.readouterr().err


def test_a_broken_plugin_is_left_out_with_a_warning(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "_plugins", None)
    monkeypatch.setattr(cli, "entry_points", lambda group: {
        "broken": "no_such_module_anywhere:COMMAND", "search": "credrank_bench.commands:BENCH",
        "other": "credrank_bench.cli:bench"})
    assert plugin_commands() == {}
    err = capsys.readouterr().err
    assert "broken = no_such_module_anywhere:COMMAND" in err and "does not load" in err
    assert "search = credrank_bench.commands:BENCH" in err and "built-in" in err
    assert "names a function, not a Command" in err


def test_the_audit_finds_the_stress_runner_or_says_why_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from credrank.audit.measures import AuditMeasureError
    from credrank.cli import audit
    from credrank_bench.experiments.robustness import stress_robustness

    assert audit.stress_runner() is stress_robustness
    monkeypatch.setattr(cli, "entry_points", lambda group: {})
    with pytest.raises(AuditMeasureError, match=r"not installed: run `pip install -e \./bench`"):
        audit.stress_runner()({"measure": "stress"}, on_progress=None)


# -- the base install -------------------------------------------------------------------------

_BLOCKED = """
import sys
BLOCKED = {blocked!r}

class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Blocker())
"""


def run_without_extras(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = _BLOCKED.format(blocked=OPTIONAL) + code
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)


def test_index_search_and_serve_need_no_extra(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(
        {"id": f"d{i}", "text": f"vitamin d trial {i}", "url": f"https://www.cdc.gov/{i}"}) + "\n"
        for i in range(6)), encoding="utf-8")
    code = f"""
import asyncio, contextlib, io, json
from credrank.cli import run
assert run(["index", {str(corpus)!r}, "--index", "idx", "--embedder", "hashing"]) == 0
out = io.StringIO()
with contextlib.redirect_stdout(out):
    assert run(["search", "vitamin d", "--index", "idx", "--json"]) == 0
assert json.loads(out.getvalue())["hits"][0]["rank"] == 1
import httpx
from credrank.searcher import Searcher
from credrank.serve.app import create_app
with Searcher.open("idx") as searcher:
    app = create_app(searcher)
    async def ask():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app),
                                     base_url="http://app") as client:
            return await client.post("/search", json={{"query": "vitamin d"}})
    response = asyncio.run(ask())
    assert response.status_code == 200, response.text
    app.state.service.close()
print("@@", sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED))
"""
    proc = run_without_extras(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "@@ []" in proc.stdout


def test_a_missing_extra_is_named(tmp_path: Path) -> None:
    """Each feature of an extra raises an error naming the extra to install; the reliability
    answers reader falls back on its line-by-line path without pyarrow."""
    parquet = tmp_path / "corpus.parquet"
    parquet.write_bytes(b"PAR1")
    answers = tmp_path / "answers.csv"
    answers.write_text("question_id,source_id,answer\nq1,s1,Paris\nq1,s2,Lyon\n",
                       encoding="utf-8")
    code = f"""
from credrank.core.extras import MissingExtraError
from credrank.evaluate.metrics import evaluate
try:
    evaluate({{"q": {{"a": 1}}}}, {{"q": {{"a": 1.0}}}}, ["P@1"])
except MissingExtraError as exc:
    print("eval:", exc)
assert evaluate({{"q": {{"a": 1}}}}, {{"q": {{"a": 1.0}}}}, ["harmful@1"],
                bad={{"q": {{"a"}}}})["harmful@1"] == {{"q": 1.0}}
from credrank.audit import example_profile_path, load_profile
from credrank.audit.radar import draw_radar
try:
    draw_radar(load_profile(example_profile_path("model_a")), "radar")
except MissingExtraError as exc:
    print("plots:", exc)
from credrank.documents import read_corpus
try:
    read_corpus({str(parquet)!r})
except ValueError as exc:
    print("parquet:", exc)
from credrank.reliability.answers import load_answers
print("answers:", load_answers({str(answers)!r}).answers)
"""
    proc = run_without_extras(code, tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = dict(line.split(": ", 1) for line in proc.stdout.splitlines())
    assert said["eval"].endswith("needs the 'eval' extra (ir_measures is not installed): "
                                 "pip install 'credrank[eval]'")
    assert said["plots"].endswith("pip install 'credrank[plots]'")
    assert "reading Parquet needs the 'parquet' extra" in said["parquet"]
    assert said["parquet"].endswith("pip install 'credrank[parquet]'")
    assert said["answers"] == "(('Paris',), ('Lyon',))"


def test_missing_extra_error_is_a_runtime_error() -> None:
    """The commands report RuntimeError as ``error: …``, exit 2."""
    exc = MissingExtraError("the thing", "plots", "matplotlib")
    assert isinstance(exc, RuntimeError) and exc.extra == "plots"
    assert str(exc) == ("the thing needs the 'plots' extra (matplotlib is not installed): "
                        "pip install 'credrank[plots]'")


def test_the_install_files_agree() -> None:
    """``make install`` installs the bench distribution and every extra; the bench depends on
    the product's extras by name; the moved dependencies are not in the base install; the
    installed entry points are the ones bench/pyproject.toml declares."""
    import re
    import tomllib

    root = Path(__file__).resolve().parents[1]
    product = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    bench = tomllib.loads((root / "bench" / "pyproject.toml").read_text(encoding="utf-8"))
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    extras = re.search(r"^EXTRAS := (\S+)$", makefile, flags=re.M).group(1).split(",")
    assert {"eval", "plots", "parquet"} <= set(extras) <= set(product["optional-dependencies"])
    assert re.search(r'^\t\S+ -m pip install -q -e "\.\[\$\(EXTRAS\)\]" -e "\$\(BENCH\)" '
                     r'"\$\(TORCH\)"$', makefile, flags=re.M)
    assert re.search(r"^BENCH := \./bench(\[\w+(,\w+)*\])?$", makefile, flags=re.M)
    base = " ".join(product["dependencies"])
    assert not re.search(r"matplotlib|ir-measures|pytrec|pyarrow", base)
    (needs,) = [d for d in bench["project"]["dependencies"] if d.startswith("credrank[")]
    assert set(needs[len("credrank["):-1].split(",")) <= set(product["optional-dependencies"])
    for group, declared in bench["project"]["entry-points"].items():
        assert entry_points(group) == declared, group
