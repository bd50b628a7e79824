"""Progress of the long commands (issue 27, part 3): library callbacks, the rule for showing
bars, ``--quiet`` on every long command and ``credrank bench``'s tables and ``--report``.

No test needs a terminal: the library callbacks are checked directly, the rule that decides
whether bars are drawn is a pure function, and the commands run in process with stderr no
terminal, as a pipe (:mod:`cli_inprocess`; no bar may appear)."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import pytest

from cli_inprocess import run_cli
from credrank.core.progress import Counter, counted, one_step, step


class Recorder:
    """``on_progress(done, total, label)`` that keeps every report, per label in order."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int, str]] = []

    def __call__(self, done: int, total: int, label: str) -> None:
        self.calls.append((done, total, label))

    def by_label(self) -> dict[str, list[tuple[int, int]]]:
        out: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for done, total, label in self.calls:
            out[label].append((done, total))
        return dict(out)

    def check_consistent(self) -> dict[str, list[tuple[int, int]]]:
        """Each step starts at 0, keeps its total, never goes back or past the total, and
        ends complete."""
        steps = self.by_label()
        assert steps, "no progress reported"
        for label, reports in steps.items():
            totals = {t for _, t in reports}
            assert len(totals) == 1, (label, totals)
            total = totals.pop()
            done = [d for d, _ in reports]
            assert done[0] == 0, (label, done[:3])
            assert done == sorted(done), label
            assert all(0 <= d <= total for d in done), label
            assert done[-1] == total, (label, done[-1], total)
        return steps


# ------------------------------------------------------------------ the helpers


def test_counted_one_step_step_and_counter() -> None:
    rec = Recorder()
    assert list(counted(["a", "b", "c"], rec, "items")) == ["a", "b", "c"]
    with one_step(rec, "once"):
        pass
    tick = step(rec, "ticks")
    assert tick is not None
    counter = Counter(tick, 2)
    counter.add()
    counter.add(5)  # capped at the total
    assert rec.by_label() == {"items": [(0, 3), (1, 3), (2, 3), (3, 3)],
                              "once": [(0, 1), (1, 1)], "ticks": [(0, 2), (1, 2), (2, 2)]}
    # nobody listening: nothing is called, the items pass through
    assert list(counted(range(3), None, "x")) == [0, 1, 2]
    assert step(None, "x") is None
    with one_step(None, "x"):
        pass
    Counter(None, 3).add()


def test_progress_is_shown_unless_quiet_bars_in_a_terminal_lines_elsewhere() -> None:
    from rich.progress import Progress

    from credrank.cli.common import Bars, LogProgress, progress, show_progress

    assert show_progress(False) is True
    assert show_progress(True) is False
    assert isinstance(progress(True, is_terminal=True), Progress)
    assert isinstance(progress(True, is_terminal=False), LogProgress)
    assert progress(False, is_terminal=False).disable  # --quiet: a bar that draws nothing
    with Bars(False) as bars:
        assert bars.steps() is None and bars.counter("fits") is None
        bars.update(1, 2, "ignored")  # a no-op
    with Bars(True) as bars:  # pytest's stderr is not a terminal: the log's lines
        on_progress = bars.steps()
        assert on_progress is not None
        on_progress(0, 4, "a")
        on_progress(4, 4, "a")
        fits = bars.counter("b")
        assert fits is not None
        fits(1, 3)
        assert isinstance(bars.bar, LogProgress)
        tasks = {t.description: (t.completed, t.total) for t in bars.bar.tasks.values()}
    assert tasks == {"a": (4, 4), "b": (1, 3)}


# ------------------------------------------------------------------ library callbacks


def test_run_experiment_counts_systems_times_pools() -> None:
    from credrank.evaluate.experiment import run_experiment
    from credrank.index.embed import get_embedder
    from credrank_bench.datasets import read_demo
    from credrank_bench.experiments.bench import baseline_system, pools_for, prepare, prior_system

    prepared = prepare(read_demo(), get_embedder("hashing"))
    pools = pools_for(prepared, 15)
    systems = {"base": baseline_system(5, 15), "prior": prior_system("current", 5, 15)}
    calls: list[tuple[int, int]] = []
    run_experiment(pools, systems, prepared.evalset.qrels, ["nDCG@5"], n_resamples=10,
                   on_progress=lambda d, t: calls.append((d, t)))
    total = 2 * len(pools)
    assert calls == [(i, total) for i in range(total + 1)]


def test_demo_bench_reports_consistent_steps() -> None:
    from credrank_bench.experiments.benches import BenchOptions, run_bench

    rec = Recorder()
    result = run_bench("demo", BenchOptions(embedder="hashing", on_progress=rec))
    steps = rec.check_consistent()
    queries = result.summary["queries"]
    assert steps["candidate pools (queries)"][-1] == (queries, queries)
    systems = len(result.table("results").rows)
    assert steps["Results: systems × queries"][-1] == (systems * queries,) * 2
    assert any(label.startswith("embedding 120 documents") for label in steps)
    # the callback changes nothing: the same tables as a run without one
    plain = run_bench("demo", BenchOptions(embedder="hashing"))
    assert plain.to_json()["tables"] == result.to_json()["tables"]


def test_a_bench_that_does_not_count_its_steps_is_one_step() -> None:
    from credrank_bench.experiments.benches import BenchOptions, run_bench

    rec = Recorder()
    run_bench("ra-rag-simulation", BenchOptions(on_progress=rec))
    assert rec.check_consistent() == {"bench ra-rag-simulation": [(0, 1), (1, 1)]}


def test_stress_bench_counts_systems_times_questions(write) -> None:
    from credrank.index.embed import get_embedder
    from credrank_bench.experiments.stress import bench_stress

    rows = []
    for i in range(8):
        real = [f"The city number {i} was founded by answer{i} long ago.",
                f"Historians say answer{i} founded the city number {i}.",
                f"The city number {i} has a market.", f"Records of city number {i}."]
        docs = [{"text": t, "is_misinformation": False, "gpt_truthfulness_0_10": 9}
                for t in real]
        docs.insert(i % 5, {"text": f"News: the city number {i} was founded by wrong{i}.",
                            "is_misinformation": True, "gpt_truthfulness_0_10": 1})
        rows.append({"id": f"q{i}", "question": f"who founded the city number {i}",
                     "answers": [f"answer{i}"], "wrong_answer": f"wrong{i}", "docs": docs})
    path = write("cram.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    rec = Recorder()
    result = bench_stress("cram", path, get_embedder("hashing"), positions="first",
                          on_progress=rec)
    steps = rec.check_consistent()
    n = result.summary["evaluated_questions"]
    systems = len(result.table("first_n1").rows)
    assert steps["clean pools: systems × questions"][-1] == (systems * n,) * 2
    assert steps["1 contaminant(s) at first: systems × questions"][-1] == (systems * n,) * 2
    assert steps["fitting the label-free systems"] == [(0, 1), (1, 1)]


AUDIT_CONFIG = """
name = "demo"
[system]
priors = "current"
top_k = 5
[queries]
path = "demo:queries.jsonl"
qrels = "demo:qrels.tsv"
harmful = "demo:adversarial.tsv"
[dimensions.robustness]
measure = "not measured"
reason = "no stress data in this test"
[dimensions.privacy]
measure = "pii"
[dimensions.factuality]
measure = "harmful"
"""


def test_audit_reports_queries_and_dimensions(demo_index_hashing: Path, tmp_path: Path
                                              ) -> None:
    from credrank.audit.profile import DIMENSIONS
    from credrank.audit.run import audit_index, load_config

    config = tmp_path / "audit.toml"
    config.write_text(AUDIT_CONFIG, encoding="utf-8")
    rec = Recorder()
    run = audit_index(demo_index_hashing, load_config(config), on_progress=rec)
    steps = rec.check_consistent()
    assert list(steps) == ["audited system (queries)", "similarity pools (queries)",
                           "dimensions"]
    assert steps["audited system (queries)"][-1] == (10, 10)  # the demo's 10 queries
    assert steps["dimensions"][-1] == (len(DIMENSIONS), len(DIMENSIONS))
    assert run.measurements["privacy"] is not None


def test_audit_hands_the_stress_runner_its_progress(tmp_path: Path) -> None:
    from credrank.audit.measures import Measurement
    from credrank.audit.run import measure_dimensions, parse_config

    cfg = parse_config({"queries": {"path": "demo:queries.jsonl"}, "dimensions": {
        "robustness": {"measure": "stress", "path": "x.jsonl"}}}, "t.toml", tmp_path)
    def runner(spec, *, on_progress, pipeline=None):
        on_progress(0, 2, "step")
        on_progress(2, 2, "step")
        return Measurement("robustness", "m", 0.5, "share", (0.0, 1.0), False, "j", "n",
                           None, ("retrieval",))

    rec = Recorder()
    out, _ = measure_dimensions(cfg, {}, {}, {}, {}, robustness=runner, on_progress=rec)
    assert out["robustness"] is not None and out["robustness"].value == 0.5
    assert rec.check_consistent() == {"dimensions": [(i, 6) for i in range(7)],
                                      "stress test: step": [(0, 2), (2, 2)]}


# ------------------------------------------------------------------ the commands


@pytest.mark.parametrize("command", [
    ("audit",), ("bench",), ("provenance", "audit"), ("credibility", "fit"),
    ("stance", "fit"), ("cram", "calibrate"), ("score", "machine-text"),
])
def test_every_long_command_takes_quiet(command: tuple[str, ...]) -> None:
    res = run_cli(*command, "--help", timeout=600)
    assert res.returncode == 0, res.stderr
    assert "--quiet" in res.stdout and "-q" in res.stdout, res.stdout


def test_bench_prints_tables_and_writes_markdown_to_report(tmp_path: Path) -> None:
    report = tmp_path / "out.md"
    res = run_cli("bench", "demo", "--embedder", "hashing", "--report", str(report), "-q",
                  cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr
    text = report.read_text(encoding="utf-8")
    assert text.startswith("# credrank bench demo")
    assert "## Results" in text and "| system | harmful@5 ↓ |" in text and "<br>Δ" in text
    # stdout: plain-text tables, no Markdown, no colour codes
    assert "<br>" not in res.stdout and "|---" not in res.stdout and "## " not in res.stdout
    assert "\x1b[" not in res.stdout
    assert "Results" in res.stdout and "similarity only (baseline)" in res.stdout
    assert "harmful@5 ↓" in res.stdout and "Δ " in res.stdout
    assert f"Markdown report written to {report}" in res.stderr
    assert "systems × queries" not in res.stderr  # stderr is a pipe: no progress
    assert not (tmp_path / "report.md").exists()


def test_bench_report_defaults_to_report_md_but_not_with_json(tmp_path: Path) -> None:
    res = run_cli("bench", "ra-rag-simulation", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "report.md").read_text(encoding="utf-8").startswith(
        "# credrank bench ra-rag-simulation")
    assert "Markdown report written to report.md" in res.stderr
    (tmp_path / "report.md").unlink()
    res = run_cli("bench", "ra-rag-simulation", "--json", cwd=tmp_path, timeout=600)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["bench"] == "ra-rag-simulation"  # data only, as before
    assert not (tmp_path / "report.md").exists() and res.stderr == ""


def test_bench_report_on_a_folder_is_refused_before_the_bench_runs(tmp_path: Path) -> None:
    res = run_cli("bench", "demo", "--embedder", "hashing", "--report", str(tmp_path),
                  timeout=600)
    assert res.returncode == 2
    assert f"error: --report {tmp_path}: expected a file to write, got a folder" in res.stderr
    missing = tmp_path / "nope" / "r.md"
    res = run_cli("bench", "demo", "--embedder", "hashing", "--report", str(missing),
                  timeout=600)
    assert res.returncode == 2 and "does not exist" in res.stderr


def test_quiet_runs_and_stderr_stays_free_of_bars(demo_index_hashing: Path,
                                                  tmp_path: Path) -> None:
    res = run_cli("provenance", "audit", "--index", str(demo_index_hashing), "--now",
                  "2026-01-01", "--quiet", "--json", timeout=600)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["credrank_provenance_audit"] == 1 and res.stderr == ""
    config = tmp_path / "audit.toml"
    config.write_text(AUDIT_CONFIG, encoding="utf-8")
    for extra in ((), ("-q",)):
        res = run_cli("audit", "--index", str(demo_index_hashing), "--config", str(config),
                      "--out", str(tmp_path / "out"), "--json", *extra, timeout=600)
        assert res.returncode in (0, 1), res.stderr
        assert json.loads(res.stdout)["credrank_audit"] == 1 and res.stderr == ""
