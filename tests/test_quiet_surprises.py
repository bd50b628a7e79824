"""Issue 9: ``bench --out`` on a path it cannot write, over an earlier report, and benches
on an evaluation set with nothing in it (each used to traceback or exit 0 quietly)."""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.evaluate.report import prepare_out_dir
from credrank.index.embed import get_embedder
from credrank_bench.experiments.benches import BenchOptions, run_bench

runner = CliRunner()
# the module, not the ``bench`` command function that credrank.cli exports under that name
bench_cli = importlib.import_module("credrank_bench.cli")


def _flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps long error lines


@pytest.fixture
def no_bench(monkeypatch):
    """The bench must not start: --out is checked first (benches can take minutes)."""
    def boom(*args, **kwargs):
        raise AssertionError("the bench ran before --out was checked")
    monkeypatch.setattr(bench_cli, "run_bench", boom)


def _bench(out: Path, *extra: str):
    return runner.invoke(app, ["bench", "demo", "--embedder", "hashing", "--json",
                               "--out", str(out), *extra])


def test_out_on_a_file_is_a_usage_error(tmp_path, no_bench):
    target = tmp_path / "report.txt"
    target.write_text("not a folder")
    res = _bench(target)
    assert res.exit_code == 2, res.output
    assert (f"error: --out {target}: expected a folder we can write, got a file"
            in _flat(res.output))
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert target.read_text() == "not a folder"


def test_out_under_a_file_is_a_usage_error(tmp_path, no_bench):
    target = tmp_path / "report.txt"
    target.write_text("x")
    res = _bench(target / "sub")
    assert res.exit_code == 2, res.output
    assert (f"--out {target / 'sub'}: expected a folder we can write, got a path under the "
            f"file {target}" in _flat(res.output))


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc")
def test_out_under_proc_is_a_usage_error(no_bench):
    res = _bench(Path("/proc/credrank-report"))
    assert res.exit_code == 2, res.output
    assert ("--out /proc/credrank-report: expected a folder we can write, got a folder that "
            "refuses writes" in _flat(res.output))


def test_out_refuses_to_overwrite_an_earlier_report(tmp_path, no_bench):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("earlier")
    res = _bench(out)
    assert res.exit_code == 2, res.output
    assert (f"error: --out {out} already holds a report; pass --force to overwrite"
            in _flat(res.output))
    assert (out / "report.md").read_text() == "earlier"


def test_force_overwrites_and_a_fresh_folder_is_created(tmp_path):
    get_embedder.cache_clear()
    out = tmp_path / "new" / "out"
    first = _bench(out)
    assert first.exit_code == 0, first.output
    assert (out / "report.md").is_file() and (out / "result.json").is_file()
    (out / "report.md").write_text("earlier")
    again = _bench(out, "--force")
    assert again.exit_code == 0, again.output
    assert (out / "report.md").read_text().startswith("# credrank bench demo")


def test_prepare_out_dir_accepts_a_folder_without_a_report_and_cleans_up(tmp_path):
    (tmp_path / "notes.txt").write_text("unrelated")
    assert prepare_out_dir(tmp_path) == []
    created = prepare_out_dir(tmp_path / "a" / "b")
    assert created == [tmp_path / "a", tmp_path / "a" / "b"]


def test_a_failing_bench_removes_the_folders_the_check_created(tmp_path):
    out = tmp_path / "a" / "b"
    res = runner.invoke(app, ["bench", "nosuch", "--out", str(out)])
    assert res.exit_code == 2
    assert not (tmp_path / "a").exists()


# -- 4. an evaluation set with nothing in it ---------------------------------------------------
@pytest.mark.parametrize(("name", "content"), [
    ("cram-nq", ""), ("cram-nq", '{"foo": 1}\n'), ("ramdocs", ""),
    ("ramdocs", '{"foo": 1}\n'), ("newspolluted", "[]"), ("evotemp", "[]"),
])
def test_an_empty_or_wrong_evaluation_set_is_refused(tmp_path, name, content):
    path = tmp_path / "data.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=rf"{path}: the {name} reader found 0 documents and "
                       r"0 queries .*is this the right file"):
        run_bench(name, BenchOptions(path, embedder="hashing"))


def test_cli_bench_on_an_empty_file_exits_2(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("")
    res = runner.invoke(app, ["bench", "cram-nq", "--path", str(path), "--embedder", "hashing",
                              "--json"])
    assert res.exit_code == 2, res.output
    assert "the cram-nq reader found 0 documents" in _flat(res.output)
    with pytest.raises(json.JSONDecodeError):
        json.loads(res.stdout)
