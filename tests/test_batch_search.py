"""``credrank search --queries FILE``: a batch through one pipeline, JSON lines or a TREC run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.documents import read_queries
from credrank.documents.records import CorpusError

runner = CliRunner()


def _single(index: Path, query: str, *extra: str) -> dict:
    res = runner.invoke(app, ["search", query, "--index", str(index), "--json", *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


@pytest.mark.parametrize("fmt", ["txt", "tsv", "jsonl"])
def test_batch_json_lines_equal_single_queries(demo_index_hashing, tmp_path, fmt):
    texts = ["vitamin d covid", "melatonin for children", "does 5g spread covid"]
    path = tmp_path / f"q.{fmt}"
    if fmt == "txt":  # one query per line; blank lines skipped, ids are line numbers
        path.write_text(f"{texts[0]}\n\n{texts[1]}\n{texts[2]}\n", encoding="utf-8")
        ids = ["1", "3", "4"]
    elif fmt == "tsv":
        path.write_text("qid\tquery\n" + "".join(f"q{i}\t{t}\n" for i, t in enumerate(texts)),
                        encoding="utf-8")
        ids = ["q0", "q1", "q2"]
    else:
        path.write_text("".join(json.dumps({"id": f"j{i}", "query": t}) + "\n"
                                for i, t in enumerate(texts)), encoding="utf-8")
        ids = ["j0", "j1", "j2"]
    res = runner.invoke(app, ["search", "--index", str(demo_index_hashing), "--queries",
                              str(path), "--top-k", "4"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    assert [d["query_id"] for d in lines] == ids
    for doc, text in zip(lines, texts, strict=True):
        single = _single(demo_index_hashing, text, "--top-k", "4")
        assert doc["query"] == text and doc["credrank_search"] == 2
        assert doc["hits"] == single["hits"] and doc["settings"] == single["settings"]


def test_batch_trec_run(demo_index_hashing, tmp_path):
    queries = tmp_path / "q.tsv"
    queries.write_text("a\tvitamin d covid\nb\tmelatonin kids sleep\n", encoding="utf-8")
    run = tmp_path / "run.txt"
    res = runner.invoke(app, ["search", "--index", str(demo_index_hashing), "--queries",
                              str(queries), "--trec-run", str(run), "--top-k", "3",
                              "--run-tag", "cr1"])
    assert res.exit_code == 0, res.output
    rows = [line.split() for line in run.read_text(encoding="utf-8").splitlines()]
    assert [r[0] for r in rows] == ["a"] * 3 + ["b"] * 3
    assert all(r[1] == "Q0" and r[5] == "cr1" for r in rows)
    assert [int(r[3]) for r in rows] == [1, 2, 3, 1, 2, 3]
    single = _single(demo_index_hashing, "vitamin d covid", "--top-k", "3")
    assert [r[2] for r in rows[:3]] == [h["doc_id"] for h in single["hits"]]
    scores = [float(r[4]) for r in rows[:3]]
    assert scores == sorted(scores, reverse=True)
    assert not (tmp_path / "run.txt.partial").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["x", "--queries", "Q"], "either a QUERY or --queries"),
    ([], "either a QUERY or --queries"),
    (["x", "--trec-run", "R"], "--trec-run: only with --queries"),
    (["--queries", "Q", "--trec-run", "R", "--json"], "exclude each other"),
    (["--queries", "Q", "--run-tag", "a b"], "--run-tag"),
])
def test_batch_option_errors(demo_index_hashing, tmp_path, args, message):
    q = tmp_path / "q.txt"
    q.write_text("vitamin\n", encoding="utf-8")
    args = [str(q) if a == "Q" else str(tmp_path / "r.txt") if a == "R" else a for a in args]
    res = runner.invoke(app, ["search", "--index", str(demo_index_hashing), *args])
    assert res.exit_code == 2
    assert message in res.output


def test_batch_bad_query_file_names_line(demo_index_hashing, tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text('{"id": "a", "query": "ok"}\n{"id": "b"}\n', encoding="utf-8")
    res = runner.invoke(app, ["search", "--index", str(demo_index_hashing), "--queries", str(q)])
    assert res.exit_code == 2
    assert "q.jsonl:2" in res.output and "'text'" in res.output


def test_plain_text_queries_ids_are_line_numbers(tmp_path):
    q = tmp_path / "q.txt"
    q.write_bytes(b"\xef\xbb\xbffirst query\r\n\r\n  second  \r\n")
    got = [(x.id, x.text) for x in read_queries(q)]
    assert got == [("1", "first query"), ("3", "second")]


def test_txt_with_tabs_is_still_tsv(tmp_path):
    q = tmp_path / "q.txt"
    q.write_text("x1\tfirst\n", encoding="utf-8")
    assert [(x.id, x.text) for x in read_queries(q)] == [("x1", "first")]


@pytest.mark.parametrize(("name", "text"), [("empty.txt", ""), ("blank.txt", "\n  \n\n"),
                                            ("empty.jsonl", "")])
def test_a_file_of_no_queries_is_an_error(demo_index_hashing, tmp_path, name, text):
    # an empty --queries file made `credrank search` exit 0 silently
    from cli_inprocess import assert_clean_error, run_cli

    (tmp_path / name).write_text(text, encoding="utf-8")
    proc = run_cli("search", "--index", demo_index_hashing, "--queries", name, "--json",
                   cwd=tmp_path, timeout=600)
    assert proc.stdout == ""
    assert_clean_error(proc, f"error: --queries {name}: no queries: expected at least one",
                       "got none", starts=True)


@pytest.mark.parametrize("header", ["id\tquery", "ID\tQuery", " id \t QUERY "])
def test_tsv_documented_header_is_skipped(tmp_path, header):
    # the documented header `id<TAB>query` ran as a query: id "id", text "query"
    q = tmp_path / "q.tsv"
    q.write_text(f"{header}\nq1\tvitamin d covid\nq2\tfasting diabetes\n", encoding="utf-8")
    assert [(x.id, x.text) for x in read_queries(q)] == [("q1", "vitamin d covid"),
                                                         ("q2", "fasting diabetes")]


def test_tsv_header_only_on_the_first_line(tmp_path):
    q = tmp_path / "q.tsv"
    q.write_text("q1\tvitamin d covid\nid\tquery\n", encoding="utf-8")
    assert [(x.id, x.text) for x in read_queries(q)] == [("q1", "vitamin d covid"),
                                                         ("id", "query")]


def test_tsv_extra_fields_are_an_error_naming_file_and_line(demo_index_hashing, tmp_path):
    # a third field was glued into the query: q3 searched 'fasting diabetes\tEXTRA'
    q = tmp_path / "qs.tsv"
    q.write_text("id\tquery\nq1\tvitamin d covid\nq3\tfasting diabetes\tEXTRA\n",
                 encoding="utf-8")
    with pytest.raises(CorpusError) as info:
        read_queries(q)
    assert (f"{q}:3: expected two tab-separated fields 'id<TAB>query', got 3"
            in str(info.value))
    res = runner.invoke(app, ["search", "--index", str(demo_index_hashing), "--queries", str(q)])
    assert res.exit_code == 2 and res.stdout == ""
    out = " ".join(res.output.split())
    assert "qs.tsv:3: expected two tab-separated fields" in out and "got 3" in out


@pytest.mark.parametrize("trec", [False, True])
def test_ctrl_c_says_how_many_queries_ran(demo_index_hashing, tmp_path, monkeypatch, trec):
    """Ctrl-C exited 130 without a word (and with --trec-run threw the work away silently):
    it says how many queries ran and that no run was written; the lines written are whole."""
    from credrank.searcher import Searcher

    real = Searcher.search_many
    calls = [0]

    def interrupted(self, queries, spec=None, **kw):  # type: ignore[no-untyped-def]
        calls[0] += 1
        if calls[0] == 3:
            raise KeyboardInterrupt
        return real(self, queries, spec, **kw)

    monkeypatch.setattr(Searcher, "search_many", interrupted)
    queries = tmp_path / "q.tsv"
    queries.write_text("".join(f"q{i}\tvitamin d {i}\n" for i in range(5)), encoding="utf-8")
    run = tmp_path / "run.txt"
    res = runner.invoke(app, ["search", "--index", str(demo_index_hashing), "--queries",
                              str(queries), *(["--trec-run", str(run)] if trec else [])])
    assert res.exit_code == 130
    assert "interrupted after 2 of 5 queries" in res.stderr
    if trec:
        assert "no TREC run written" in res.stderr and not run.exists()
    else:
        assert [json.loads(line)["query_id"] for line in res.stdout.splitlines()] == \
            ["q0", "q1"]
