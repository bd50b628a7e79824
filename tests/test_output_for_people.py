"""Output for people and for logs (issue 36, item 4): nothing cropped without a terminal, no
spinner frames in a file and periodic progress lines instead, a footer line per stage that
changed the ranking, the echoed spec's resolved ``now``, every run's rejects kept, no ``None``
host, context passages with their source. Deterministic: progress is driven by a fake clock or
by ``$CREDRANK_PROGRESS_INTERVAL=0`` (a line at every report), never by sleeping."""

from __future__ import annotations

import io
import json
import re
import sys
from datetime import datetime
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from cli_inprocess import run_cli
from cli_process import CREDRANK
from credrank.cli import app

runner = CliRunner()

#: what a spinner or a redrawn bar leaves in a file: carriage returns, cursor escapes, the
#: braille and other frame characters of rich's spinners and bars
SPINNER = re.compile("[\r\x1b\u2800-\u28ff\u2501\u2578\u257a\u25cf\u25d0-\u25d3]")

LONG_HOST = "www.healthline-and-wellness-information-portal.example"
LONG_TEXT = ("Randomised trials of vitamin D supplementation found no reduction in the risk of "
             "acute respiratory infection, including infection with the coronavirus, among "
             "adults whose blood levels were low; observational associations between "
             "deficiency and severe disease reflect confounding by age and chronic illness "
             "rather than a protective effect of the supplement itself.")
needs_script = pytest.mark.skipif(not CREDRANK.exists(), reason="credrank script not installed")


def _corpus(path: Path, n_fill: int = 0) -> Path:
    rows = [{"id": "long", "title": "Vitamin D and respiratory infection", "text": LONG_TEXT,
             "url": f"https://{LONG_HOST}/vitamin-d", "published_at": "2023-02-01"},
            {"id": "nourl", "text": "Vitamin D and colds: a note without any address."},
            {"id": "gov", "text": "Vitamin D guidance for adults in winter months.",
             "url": "https://www.nih.gov/vitamin-d", "published_at": "2022-12-20"}]
    rows += [{"id": f"f{i}", "text": f"Filler passage number {i} about sunlight and bones.",
              "url": f"https://example{i}.org/p"} for i in range(n_fill)]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


def _words(text: str) -> list[str]:
    return text.split()


# ------------------------------------------------------------------ progress in a log


def test_log_progress_prints_periodic_lines_with_rate_and_eta_by_its_clock() -> None:
    from credrank.cli.common import LogProgress

    now = [0.0]
    console = Console(file=(out := io.StringIO()), width=80, markup=False)
    with LogProgress(console, interval=10, clock=lambda: now[0]) as bar:
        task = bar.add_task("indexing x.jsonl", total=100)
        now[0] = 5.0
        bar.advance(task, 10)  # 5 s: under the interval, nothing
        assert out.getvalue() == ""
        now[0] = 10.0
        bar.advance(task, 10)  # 20 of 100 in 10 s: 2/s, 80 left: 40 s
        now[0] = 12.0
        bar.advance(task, 10)  # 2 s after the last line: nothing
        now[0] = 25.0
        bar.advance(task, 70)  # complete: the done line at once
    lines = out.getvalue().splitlines()
    assert lines == ["indexing x.jsonl: 20/100 (20%), 2.0/s, elapsed 0:10, ETA 0:40",
                     "indexing x.jsonl: 100/100 (100%), 4.0/s, done in 0:25"]
    assert not SPINNER.search(out.getvalue())


def test_log_progress_is_silent_for_a_short_run_and_counts_without_a_total() -> None:
    from credrank.cli.common import LogProgress

    now = [0.0]
    out = io.StringIO()
    with LogProgress(Console(file=out, markup=False), interval=30, clock=lambda: now[0]) as bar:
        quick = bar.add_task("quick", total=3)
        bar.advance(quick, 3)
        beat = bar.add_task("building the search graph")  # no total (optimize)
        now[0] = 31.0
        bar.update(beat, description="building the search graph (5 of 9 vectors indexed)")
    assert out.getvalue().splitlines() == [
        "building the search graph (5 of 9 vectors indexed): 0, elapsed 0:31",
        "building the search graph (5 of 9 vectors indexed): 0, done in 0:31"]


def test_log_interval_variable_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    import typer

    from credrank.cli.common import log_interval

    monkeypatch.setenv("CREDRANK_PROGRESS_INTERVAL", "2.5")
    assert log_interval() == 2.5
    monkeypatch.setenv("CREDRANK_PROGRESS_INTERVAL", "soon")
    with pytest.raises(typer.Exit):
        log_interval()


@needs_script
def test_redirected_index_log_has_progress_lines_and_no_spinner_frames(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl", n_fill=9)
    proc = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                   "--batch-size", "4", env={"CREDRANK_PROGRESS_INTERVAL": "0"})
    assert proc.returncode == 0, proc.stderr
    assert not SPINNER.search(proc.stderr), repr(proc.stderr)
    lines = [x for x in proc.stderr.splitlines() if x.startswith("indexing c.jsonl: ")]
    assert lines[0].startswith("indexing c.jsonl: 4/12 (33%)"), proc.stderr
    assert lines[-1].startswith("indexing c.jsonl: 12/12 (100%)") and "done in" in lines[-1]
    assert any("ETA" in x for x in lines)
    graph = [x for x in proc.stderr.splitlines() if "building the search graph" in x]
    assert graph and "done in" in graph[-1]
    quiet = run_cli("index", corpus, "--index", tmp_path / "idx2", "--embedder", "hashing",
                    "--batch-size", "4", "--quiet", env={"CREDRANK_PROGRESS_INTERVAL": "0"})
    assert quiet.returncode == 0 and quiet.stderr == "", quiet.stderr


def test_a_long_stderr_message_is_one_line_in_a_log(tmp_path: Path) -> None:
    # "3 declared source types conflict with the URL …" was cut at 80 columns in a log
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"id": f"d{i}", "text": f"vitamin d {i}",
                                          "url": f"https://{LONG_HOST}/{i}",
                                          "source_type": "peer_reviewed"}) + "\n"
                              for i in range(3)), encoding="utf-8")
    proc = run_cli("index", corpus, "--index", tmp_path / "idx", "--embedder", "hashing",
                   env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    said = [x for x in proc.stderr.splitlines() if "declared source types conflict" in x]
    assert said and len(said[0]) > 80 and said[0].rstrip().endswith("not trusted)"), proc.stderr


# ------------------------------------------------------------------ tables without a terminal


@needs_script
def test_piped_search_keeps_every_word_of_every_cell(tmp_path: Path) -> None:
    """`credrank search … | cat` on the default install (MiniLM), an 80-column environment:
    the long text, the long host and the title all whole; a missing host is a dash."""
    corpus = _corpus(tmp_path / "c.jsonl")
    made = run_cli("index", corpus, "--index", tmp_path / "idx")
    assert made.returncode == 0, made.stderr
    proc = run_cli("search", "vitamin D respiratory infection", "--index", tmp_path / "idx",
                   "--text", "full", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    words = set(_words(out))
    assert all(w in words or f"{w}…" in words for w in _words(LONG_TEXT)), out
    assert LONG_HOST in words and "…" not in out.replace("text: …", "")
    assert "Vitamin D and respiratory infection" in out
    assert "None" not in out and "host —" in out
    assert not SPINNER.search(out)


@needs_script
def test_demo_to_a_file_keeps_every_word(tmp_path: Path, demo_index_hashing: Path) -> None:
    """`credrank demo > log`: every host of the example tables whole. On the hashing embedder:
    the tables are drawn by the same code whatever the embedder, and the demo with MiniLM runs
    in ``tests/test_cli.py`` (``--json``); this saves a second MiniLM indexing of the corpus
    (≈ 5 s of CPU)."""
    from credrank.demo import _example
    from credrank.demo_corpus import demo_dir, read_adversarial
    from credrank.documents import read_queries
    from credrank.index.embed import get_embedder
    from credrank.index.opener import open_store
    from credrank.searcher import Searcher

    log = tmp_path / "log"
    proc = run_cli("demo", "--embedder", "hashing", env={"COLUMNS": "80"})
    assert proc.returncode == 0, proc.stderr
    log.write_text(proc.stdout, encoding="utf-8")
    # the example the demo shows (its query and both top 5s), computed by the demo's own code
    # in the session's hashing demo index (the same corpus, embedder and indexing): what a
    # second run, `credrank demo --json`, printed, without indexing the corpus a second time
    emb = get_embedder("hashing")
    with open_store(demo_index_hashing) as index:
        example = _example(Searcher(index, emb), read_queries(demo_dir() / "queries.jsonl"),
                           read_adversarial(demo_dir() / "adversarial.tsv"), top_k=5)
    text = log.read_text(encoding="utf-8")
    for hit in example["similarity_only"] + example["current_priors"]:
        assert hit["host"] in text and hit["source_type"] in text, text
    assert example["query"] in " ".join(text.split())
    assert "…" not in text and not SPINNER.search(proc.stderr) and "\r" not in text


def _screen(monkeypatch: pytest.MonkeyPatch, module: object, width: int = 80,
            terminal: bool = True) -> io.StringIO:
    """``module.console`` replaced by a console ``width`` columns wide drawing into the
    returned buffer: a terminal (no colour), or a pipe (``terminal=False``, ``sys.stdout`` the
    buffer too: :func:`credrank.cli.common.table_console` draws on it)."""
    screen = io.StringIO()
    monkeypatch.setattr(module, "console", Console(
        file=screen, width=width, force_terminal=terminal, color_system=None, markup=False))
    if not terminal:
        monkeypatch.setattr(sys, "stdout", screen)
    return screen


def test_stage_catalog_keeps_every_word_piped_and_folds_in_a_terminal(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`credrank pipeline stages`: piped, every parameter whole ("use_domain_scores=False"
    was cut to "use_domain_scores=Fa…" at 80 columns); in an 80-column terminal a long word
    folds onto the next line, never cut to an ellipsis."""
    import credrank.cli.common as common
    from credrank.cli.pipeline import catalog_document

    piped = run_cli("pipeline", "stages", env={"COLUMNS": "80"})
    assert piped.returncode == 0, piped.stderr
    for stage in catalog_document()["stages"]:  # piped, a row is one line: every cell whole
        assert f" {stage['stage']} " in piped.stdout
        for param in stage["params"]:
            shown = param["name"] + ("" if param["required"] else f"={param.get('default')}")
            assert shown in piped.stdout, shown
    assert "…" not in piped.stdout
    screen = _screen(monkeypatch, common)
    assert runner.invoke(app, ["pipeline", "stages"]).exit_code == 0
    drawn = screen.getvalue()
    assert "use_domain_scores=Fal" in drawn and "…" not in drawn
    assert max(len(line) for line in drawn.splitlines()) <= 80


def test_reliability_table_keeps_a_long_source_id(monkeypatch: pytest.MonkeyPatch) -> None:
    """`credrank reliability estimate`'s table: a long source id whole in a pipe, folded (never
    cut to an ellipsis) in an 80-column terminal."""
    import credrank.cli.common as common
    from credrank.cli.reliability import _print

    source = "www.a-very-long-regional-health-news-source-name.example.org/section/daily"
    doc = {"n_sources": 1, "n_questions": 3, "n_iter": 4, "converged": True, "clip": 0.95,
           "collapse_copies": False, "clusters": [], "dependence_note": None,
           "diagnostics": {"trustworthy": True, "warnings": [], "too_few_sources": False},
           "sources": [{"source_id": source, "reliability": 0.8125, "weight": 1.2,
                        "coverage": 3, "answered": 3, "cluster": None}]}
    for terminal in (False, True):
        # a pipe: table_console() draws as wide as the cells, on its stdout
        screen = _screen(monkeypatch, common, terminal=terminal)
        _print(doc)
        drawn = screen.getvalue()
        assert "…" not in drawn and "0.812" in drawn, drawn
        if terminal:
            assert max(len(line) for line in drawn.splitlines()) <= 80
        else:
            assert source in drawn


def test_search_in_a_narrow_terminal_prints_records_not_a_cropped_table(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`credrank search` in a terminal: the table where it fits; in one narrower than the
    table's least width (80 columns), a record per hit wrapped to it. rich crops the lines of
    a table wider than the terminal: at 80 columns the titles and texts were cut after a
    dozen characters, the right border gone."""
    import credrank.cli.search as search

    doc = {"query": "vitamin d", "info": {}, "hits": [
        {"rank": i, "doc_id": f"d{i}", "source_type": "government", "host": LONG_HOST,
         "title": "Vitamin D and respiratory infection", "text": LONG_TEXT,
         "score_breakdown": {"retrieval_score": 0.5, "prior": 0.9, "final": 0.45}}
        for i in (1, 2)]}
    drawn = {}
    for width in (80, 200):
        screen = _screen(monkeypatch, search, width)
        search.print_answer(doc, terminal=True)
        drawn[width] = screen.getvalue()
        assert max(len(line) for line in drawn[width].splitlines()) <= width
    narrow, wide = drawn[80], drawn[200]
    assert "┃" not in narrow and "#1 d1 · source type government" in narrow
    assert set(_words(LONG_TEXT)) <= set(_words(narrow)), narrow  # every word whole
    assert LONG_HOST in narrow and "…" not in narrow
    table_rows = [line for line in wide.splitlines() if line.startswith("│")]
    assert "┃" in wide and table_rows and all(line.endswith("│") for line in table_rows)


def test_demo_tables_in_an_80_column_terminal_fold_hosts(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`credrank demo` in an 80-column terminal: the example tables fold a long host
    ("dailyhealthtruths.example") onto a second line instead of cutting it to
    "dailyhealthtru…"."""
    import credrank.cli.common as common

    screen = _screen(monkeypatch, common)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["demo", "--embedder", "hashing", "--index",
                                 str(tmp_path / "idx")])
    assert result.exit_code == 0, result.output
    drawn = screen.getvalue()
    assert "┃ host" in drawn and "…" not in drawn
    assert max(len(line) for line in drawn.splitlines()) <= 80


def test_records_and_table_helpers() -> None:
    from credrank.cli.search import hit_records, host_text

    doc = {"query": "q", "hits": [
        {"rank": 1, "doc_id": "d1", "source_type": None, "host": None, "title": None,
         "text": LONG_TEXT, "score_breakdown": {"retrieval_score": 0.5, "final": 0.5}}],
        "info": {}}
    lines = hit_records(doc, width=40)
    assert lines[1] == ("#1 d1 · source type — · host — · sim 0.5000 · prior 1.00 · "
                        "final 0.5000")
    assert " ".join(" ".join(lines[2:]).split()) == f"text: {LONG_TEXT}"
    assert all(len(x) <= 40 for x in lines[2:])
    assert host_text({"host": ""}) == "—" and host_text({"host": "a.b"}) == "a.b"


# ------------------------------------------------------------------ stage footers


def _hit(rank: int, **factors: float) -> dict[str, object]:
    return {"rank": rank, "doc_id": f"d{rank}", "source_type": "blog", "host": "h",
            "score_breakdown": {"retrieval_score": 0.5, **factors, "final": 0.5}}


def test_planted_and_machine_text_say_what_they_did() -> None:
    from credrank.cli.search import stage_footers

    hits = [_hit(i, planted=1.0, machine_text=0.9 if i == 1 else 1.0) for i in range(1, 6)]
    info = {"planted": {"mode": "planted", "floor": 0.05, "pool": 15, "applied": True,
                        "planted_estimate": None, "flagged": 5, "copies_joined": 0,
                        "spared_trusted": 1},
            "machine_text": {"n": 15, "unscorable": 2, "missing": 3, "scored_now": 0}}
    lines = stage_footers({"hits": hits, "info": info})
    assert lines[0] == ("planted: 5 of 15 candidates flagged as planted for this query "
                        "(factor down to 0.05); 0 of the 5 shown demoted; 1 spared (trusted "
                        "source type)")
    assert lines[1].startswith("machine-text: 15 candidates weighed")
    assert "1 of the 5 shown demoted" in lines[1] and "3 without a score" in lines[1]
    assert "2 too short to score" in lines[1]
    skipped = stage_footers({"hits": hits, "info": {"planted": {
        "applied": False, "reason": "pool of 2 < min_pool 4: no robust centre; factor 1"}}})
    assert skipped == ["planted: not applied (pool of 2 < min_pool 4: no robust centre; "
                       "factor 1); ranking unchanged"]


def test_consensus_is_one_line_and_details_with_verbose() -> None:
    from credrank.cli.search import stage_footers

    answers = [{"answer": f"fragment {i}", "share": 0.1, "voices": 1, "doc_ids": [f"d{i}"]}
               for i in range(20)]
    info = {"consensus": {"status": "contested", "share": 0.1, "threshold": 0.5,
                          "answer": None, "answers": answers}}
    doc = {"hits": [_hit(1, consensus=1.0)], "info": info}
    short = stage_footers(doc)
    assert short == ["consensus: contested (top share 0.10, threshold 0.50); 20 competing "
                     "answer(s), none reaches the threshold; --verbose lists the answers"]
    assert len(stage_footers(doc, verbose=True)) == 21


def test_cli_search_prints_the_planted_footer(demo_index_hashing: Path) -> None:
    res = runner.invoke(app, ["search", "Does vitamin D prevent COVID-19?", "--index",
                              str(demo_index_hashing), "--planted"])
    assert res.exit_code == 0, res.output
    assert re.search(r"^planted: \d+ of \d+ candidates flagged", res.stdout, re.M), res.stdout
    assert "query: Does vitamin D prevent COVID-19?" in res.stdout  # record-style in a pipe


# ------------------------------------------------------------------ the echoed spec's now


def test_echoed_spec_records_the_resolved_now_and_replays(demo_index_hashing: Path,
                                                          tmp_path: Path) -> None:
    args = ["search", "vitamin D winter", "--index", str(demo_index_hashing), "--json",
            "--freshness", "half_life=30d"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    stage = next(s for s in doc["pipeline"]["stages"] if s["stage"] == "freshness")
    assert stage["now"] == doc["info"]["freshness"]["now"] == doc["settings"]["freshness"]["now"]
    assert datetime.fromisoformat(stage["now"]).tzinfo is not None
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(doc["pipeline"]), encoding="utf-8")
    again = runner.invoke(app, ["search", "vitamin D winter", "--index",
                                str(demo_index_hashing), "--json", "--pipeline", str(spec)])
    assert again.exit_code == 0, again.output
    replay = json.loads(again.stdout)
    assert [(h["doc_id"], h["score"]) for h in replay["hits"]] == \
        [(h["doc_id"], h["score"]) for h in doc["hits"]]
    assert replay["pipeline"] == doc["pipeline"]


def test_resolved_now_is_per_answer_not_cached(demo_index_hashing: Path) -> None:
    from credrank.pipeline.shortcuts import spec_from_options
    from credrank.searcher import Searcher

    spec = spec_from_options(freshness="half_life=30d")
    with Searcher.open(demo_index_hashing) as searcher:
        first = searcher.search_json("vitamin D", spec)
        second = searcher.search_json("sunlight", spec)
        cached = searcher.compile(spec).settings
    for doc in (first, second):
        stage = next(s for s in doc["pipeline"]["stages"] if s["stage"] == "freshness")
        assert stage["now"] == doc["info"]["freshness"]["now"]
    # the compiled pipeline's settings still read the clock: nothing of an answer leaked in
    assert cached["freshness"]["now"] is None
    assert next(s for s in cached["pipeline"]["stages"] if s["stage"] == "freshness")[
        "now"] is None
    fixed = spec_from_options(freshness="half_life=30d,now=2024-01-01")
    with Searcher.open(demo_index_hashing) as searcher:
        doc = searcher.search_json("vitamin D", fixed)
    stage = next(s for s in doc["pipeline"]["stages"] if s["stage"] == "freshness")
    assert stage["now"].startswith("2024-01-01")


# ------------------------------------------------------------------ rejects of every run


def test_two_index_runs_keep_both_runs_rejects(tmp_path: Path) -> None:
    idx = tmp_path / "idx"
    first = tmp_path / "one.jsonl"
    first.write_text(json.dumps({"id": "a", "text": "Vitamin D."}) + "\n"
                     + json.dumps({"id": "x", "text": ""}) + "\n", encoding="utf-8")
    second = tmp_path / "two.jsonl"
    second.write_text(json.dumps({"id": "b", "text": "Sunlight."}) + "\n"
                      + json.dumps({"id": "y", "text": ""}) + "\n", encoding="utf-8")
    for corpus in (first, second):
        res = runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                                  "hashing"])
        assert res.exit_code == 0, res.output
    assert "(the previous run's in" in res.output
    kept = sorted(idx.glob("rejects*.jsonl"))
    assert len(kept) == 2
    rows = [json.loads(line) for f in kept for line in f.read_text().splitlines()]
    files = {Path(r["file"]).name for r in rows}
    assert files == {"one.jsonl", "two.jsonl"}
    newest = [json.loads(x) for x in (idx / "rejects.jsonl").read_text().splitlines()]
    assert {Path(r["file"]).name for r in newest} == {"two.jsonl"}


def test_empty_rejects_of_an_earlier_run_are_not_kept(tmp_path: Path) -> None:
    from credrank.cli.index import keep_earlier_rejects

    path = tmp_path / "rejects.jsonl"
    assert keep_earlier_rejects(path) is None
    path.write_text("")
    assert keep_earlier_rejects(path) is None and path.exists()
    path.write_text("{}\n")
    one = keep_earlier_rejects(path)
    path.write_text("{}\n")
    two = keep_earlier_rejects(path)
    assert one is not None and two is not None and one != two
    assert not path.exists() and one.exists() and two.exists()


# ------------------------------------------------------------------ context passages


def test_context_passages_carry_source_url_and_date(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "c.jsonl")
    idx = tmp_path / "idx"
    assert runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                               "hashing"]).exit_code == 0
    base = ["context", "vitamin D", "--index", str(idx), "--top-k", "3"]
    for fmt in ("cag", "plain"):
        res = runner.invoke(app, [*base, "--format", fmt])
        assert res.exit_code == 0, res.output
        line = next(x for x in res.stdout.splitlines() if "www.nih.gov" in x)
        assert ("(source: government; host: www.nih.gov; url: https://www.nih.gov/vitamin-d; "
                "date: 2022-12-20)") in line
        assert "(source: unknown)" in res.stdout  # the passage without a URL says so
        bare = runner.invoke(app, [*base, "--format", fmt, "--no-cite"])
        assert "(source:" not in bare.stdout
    res = runner.invoke(app, [*base, "--format", "json"])
    assert res.exit_code == 0, res.output
    passages = json.loads(res.stdout)
    gov = next(p for p in passages if p["doc_id"] == "gov")
    assert gov["inputs"]["source"]["source_type"] == "government"
    assert gov["inputs"]["source"]["url"] == "https://www.nih.gov/vitamin-d"
    assert gov["inputs"]["freshness"]["date"].startswith("2022-12-20")
