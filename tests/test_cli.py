"""The command line: index (progress, rejects, strict), search (--json), demo."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from credrank.cli import app

runner = CliRunner()


def write_corpus(path):
    rows = [
        {"id": "a", "text": "Vitamin D does not prevent COVID-19 in trials.",
         "url": "https://www.nejm.org/doi/a"},
        {"id": "b", "text": "CNN news: vitamin D cures COVID-19 overnight, doctors stunned.",
         "url": "https://truthnow.blogspot.com/post"},
        {"id": "c", "text": "Vitamin D supplements and COVID-19: what the evidence says.",
         "url": "https://www.cdc.gov/x", "source_type": "blog"},
    ]
    lines = [json.dumps(r) for r in rows]
    lines.insert(1, json.dumps({"id": "a", "text": "duplicate id"}))
    lines.append('{"id": "d", "text": "bad date", "published_at": "2023-13-45"}')
    path.write_text("\n".join(lines) + "\n")


@pytest.fixture(scope="session")
def small_index(tmp_path_factory):
    """The index of :func:`write_corpus`, built once per session for the tests that only
    search it or expect a usage error (exit 2) before anything is written."""
    root = tmp_path_factory.mktemp("cli-small")
    corpus, idx = root / "c.jsonl", root / "idx"
    write_corpus(corpus)
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                              "hashing"])
    assert res.exit_code == 0, res.output
    return idx


@pytest.fixture(scope="session")
def selector_index(tmp_path_factory):
    """24 documents of four source types, indexed once per session for the selector tests
    (which only search it)."""
    root = tmp_path_factory.mktemp("cli-selectors")
    corpus, idx = root / "c.jsonl", root / "idx"
    hosts = ["https://www.nejm.org/a{i}", "https://www.cdc.gov/p{i}",
             "https://x{i}.blogspot.com/p", "https://www.reddit.com/r/h/{i}"]
    words = "vitamin vaccine dose trial fever cold antibiotic sleep heart risk".split()
    corpus.write_text("\n".join(json.dumps(
        {"id": f"d{i}", "text": " ".join(words[(i + j) % 10] for j in range(5)),
         "url": hosts[i % 4].format(i=i)}) for i in range(24)) + "\n")
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                              "hashing"])
    assert res.exit_code == 0, res.output
    return idx


def test_index_search_json_and_strict(tmp_path):
    corpus, idx = tmp_path / "c.jsonl", tmp_path / "idx"
    write_corpus(corpus)
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx),
                              "--embedder", "hashing"])
    assert res.exit_code == 0, res.output
    # lenient reading: d is indexed without its unreadable date, the field reported
    assert "indexed 4, rejected 1; 1 field dropped in 1 record" in res.output
    rejects = [json.loads(r) for r in (idx / "rejects.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["line"]) for r in rejects] == [("rejected", 2), ("dropped", 5)]
    assert ":2:" in rejects[0]["message"]  # duplicate id on line 2
    assert "conflict" in res.output  # declared blog vs cdc.gov

    res = runner.invoke(app, ["search", "vitamin D covid", "--index", str(idx), "--json",
                              "--top-k", "3"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["credrank_search"] == 2 and out["settings"]["fetch_k"] == 9
    types = {h["doc_id"]: h["source_type"] for h in out["hits"]}
    # provenance decides: the "CNN news:" text on a blog host keeps the blog type,
    # and the declared "blog" on cdc.gov is not trusted by default
    assert types == {"a": "peer_reviewed", "b": "blog", "c": "government"}
    for h in out["hits"]:
        b = h["score_breakdown"]
        assert b["final"] == pytest.approx(max(b["retrieval_score"], 0) * b["prior"])

    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                              "hashing", "--strict"])
    assert res.exit_code == 1 and "indexed 0, rejected 2" in res.output


def test_search_pushdown_and_modes(small_index):
    idx = small_index
    outs = {}
    for extra in ([], ["--pushdown"], ["--no-pushdown"], ["--mode", "rrf"], ["--mode", "linear"],
                  ["--lexical"], ["--priors", "none"]):
        res = runner.invoke(app, ["search", "vitamin D covid", "--index", str(idx), "--json",
                                  *extra])
        assert res.exit_code == 0, res.output
        outs[" ".join(extra)] = [h["doc_id"] for h in json.loads(res.output)["hits"]]
    assert outs["--pushdown"] == outs[""] == outs["--no-pushdown"]


@pytest.mark.parametrize("args,message", [
    (["search", "q", "--index", "nowhere"], "no credrank index"),
    (["search", "q", "--index", "IDX", "--priors", "extreme"], "preset"),
    (["search", "q", "--index", "IDX", "--mode", "sum"], "--mode"),
    (["search", "q", "--index", "IDX", "--top-k", "10", "--fetch-k", "5"], "--fetch-k"),
    (["index", "missing.jsonl", "--index", "IDX"], "no such file"),
])
def test_errors_are_clear(tmp_path, small_index, args, message):
    idx = small_index
    args = [str(idx) if a == "IDX" else str(tmp_path / a) if a.endswith(".jsonl") else a
            for a in args]
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert message in " ".join(res.output.split())


@pytest.mark.slow
def test_demo_json_with_minilm():
    res = runner.invoke(app, ["demo", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output[res.output.index("{"):])
    assert out["credrank_demo"] == 1
    assert out["index"]["rejected"] == 0 and out["index"]["indexed"] >= 100
    base, cred = out["metrics"]["similarity only"], out["metrics"]["current priors"]
    assert set(base) == {"P@5", "nDCG@5", "RR", "harmful@5"}
    # on the demo corpus the priors must not raise the adversarial hit rate
    assert cred["harmful@5"] <= base["harmful@5"]
    ex = out["example"]
    assert len(ex["similarity_only"]) == 5 and len(ex["current_priors"]) == 5


@pytest.mark.parametrize("select,params,key", [
    ("mmr", ["diversity=0.7"], "ilad"),
    ("coverage", ["lambda_ilad=0.3", "lambda_coverage=0.5"], "coverage"),
    ("exposure", ["group_column=source_type", "rule=parity", "seed=3"], "groups"),
    ("fair", ["protected_column=source_type", "protected_value=blog", "p=0.3", "alpha=0.1"],
     "mtable"),
])
def test_search_with_selectors_reports_selection(selector_index, select, params, key):
    idx = selector_index
    args = ["search", "vitamin trial", "--index", str(idx), "--top-k", "5", "--json",
            "--select", select]
    for p in params:
        args += ["-P", p]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert len(out["hits"]) == 5 and key in out["info"]["select"]
    bad = runner.invoke(app, [*args[:-2], "--select", select, "-P", "bogus=1"])
    assert bad.exit_code == 2 and "unknown key" in " ".join(bad.output.split())


def _good_rows(n):
    words = "vitamin vaccine dose trial fever cold antibiotic sleep heart risk".split()
    return [{"id": f"g{i}", "text": f"{words[i % 10]} {words[(i + 3) % 10]} study {i}",
             "url": f"https://www.nejm.org/g{i}"} for i in range(n)]


def test_index_rejects_a_too_deep_field_and_the_index_still_opens(tmp_path):
    # before: the 200-level record was indexed (exit 0) and the Edge index then failed to
    # load (RecursionLimitExceeded reading its WAL); now it is a reject, the index answers
    corpus, idx = tmp_path / "c.jsonl", tmp_path / "idx"
    good = [json.dumps(r) for r in _good_rows(6)]
    evil = '{"id": "evil", "text": "hi vitamin", "meta": ' + "[" * 200 + "]" * 200 + "}"
    corpus.write_text("\n".join([*good[:3], evil, *good[3:]]) + "\n")
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx),
                              "--embedder", "hashing"])
    assert res.exit_code == 0, res.output
    assert "indexed 6, rejected 1" in res.output
    [rej] = [json.loads(x) for x in (idx / "rejects.jsonl").read_text().splitlines()]
    assert rej["message"] == (f"{corpus}:4: field 'meta': expected nesting at most 32 levels "
                              "deep, got deeper")
    res = runner.invoke(app, ["search", "vitamin study", "--index", str(idx), "--json",
                              "--top-k", "3"])
    assert res.exit_code == 0, res.output
    hits = json.loads(res.output)["hits"]
    assert len(hits) == 3 and "evil" not in {h["doc_id"] for h in hits}


def test_index_truncated_gzip_reports_progress_rejects_and_exits_2(tmp_path):
    # before: only "Aborted." (exit 1), no count, no rejects file, no file name
    import gzip

    corpus, idx = tmp_path / "c.jsonl.gz", tmp_path / "idx"
    rows = [json.dumps(r) for r in _good_rows(3000)]
    rows[1] = json.dumps({"id": "bad", "text": ""})
    data = gzip.compress(("\n".join(rows) + "\n").encode())
    corpus.write_bytes(data[: len(data) // 2])
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx),
                              "--embedder", "hashing"])
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "error:" in out and "c.jsonl.gz" in out and "truncated or corrupt" in out
    assert "rejected 1" in out and "index holds" in out
    rejects = (idx / "rejects.jsonl").read_text().splitlines()
    assert len(rejects) == 1 and ":2:" in json.loads(rejects[0])["message"]


def test_index_corrupt_gzip_header_is_a_clear_error(tmp_path):
    import gzip

    corpus, idx = tmp_path / "c.jsonl.gz", tmp_path / "idx"
    corpus.write_bytes(b"xx" + gzip.compress(b'{"id": "a", "text": "x"}\n')[2:])
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx),
                              "--embedder", "hashing"])
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "error:" in out and "c.jsonl.gz" in out and "after 0 records" in out
    assert res.exception is None or isinstance(res.exception, SystemExit)


@pytest.mark.parametrize("where", ["dir", "under_file"])
def test_index_unwritable_rejects_path_fails_before_indexing(tmp_path, where):
    corpus, idx = tmp_path / "c.jsonl", tmp_path / "idx"
    write_corpus(corpus)
    blocker = tmp_path / "blocker"
    if where == "dir":
        blocker.mkdir()
        target = blocker
    else:
        blocker.write_text("a file")
        target = blocker / "rejects.jsonl"
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx),
                              "--embedder", "hashing", "--rejects", str(target)])
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert "error:" in out and "--rejects" in out and "nothing was indexed" in out
    assert not idx.exists()


def test_index_no_optimize_then_optimize(tmp_path, monkeypatch):
    """A bulk load without the graph build is searchable at once (exact search), and
    `credrank optimize` builds the graph later without changing the answers."""
    corpus, idx = tmp_path / "c.jsonl", tmp_path / "idx"
    write_corpus(corpus)
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                              "hashing", "--no-optimize"])
    assert res.exit_code == 0, res.output
    assert "building the search graph" not in res.output
    search = ["search", "vitamin D covid", "--index", str(idx), "--json", "--top-k", "3"]
    before = runner.invoke(app, search)
    assert before.exit_code == 0, before.output
    res = runner.invoke(app, ["optimize", "--index", str(idx)])
    assert res.exit_code == 0, res.output
    # a quick build in a log (not a terminal) draws no spinner and prints no progress line
    assert "optimis" in res.output and "holds 4 documents" in res.output
    assert "\r" not in res.output and "building the search graph" not in res.output
    after = runner.invoke(app, search)
    assert [h["doc_id"] for h in json.loads(after.output)["hits"]] == \
        [h["doc_id"] for h in json.loads(before.output)["hits"]]
    # the default builds the graph at the end of the load, with its heartbeat (in a log: a
    # plain line at every report with $CREDRANK_PROGRESS_INTERVAL=0)
    monkeypatch.setenv("CREDRANK_PROGRESS_INTERVAL", "0")
    res = runner.invoke(app, ["index", str(corpus), "--index", str(tmp_path / "idx2"),
                              "--embedder", "hashing"])
    assert res.exit_code == 0 and "building the search graph" in res.output


def test_optimize_bad_index(tmp_path):
    res = runner.invoke(app, ["optimize", "--index", str(tmp_path / "missing")])
    assert res.exit_code == 2 and "no such index directory" in res.output
    (tmp_path / "empty").mkdir()
    res = runner.invoke(app, ["optimize", "--index", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "empty" in res.output
    assert not (tmp_path / "empty" / "manifest.json").exists()


def test_an_index_in_a_folder_that_cannot_be_written_names_index(tmp_path):
    """Without --rejects, the rejects file is the index's: its problem named --rejects, an
    option the user never wrote."""
    corpus = tmp_path / "c.jsonl"
    write_corpus(corpus)
    blocker = tmp_path / "blocker"
    blocker.write_text("a file")
    res = runner.invoke(app, ["index", str(corpus), "--index", str(blocker / "idx"),
                              "--embedder", "hashing"])
    out = " ".join(res.output.split())
    assert res.exit_code == 2, res.output
    assert f"error: --index {blocker / 'idx'}: its rejects file" in out
    assert "--rejects" not in out


def test_priors_errors_speak_the_commands_options(tmp_path):
    """The store's messages named library keywords: ``pass base= (a PriorTable …)``, ``feedback
    step:``, ``epsilon:``, ``version:``."""
    store = tmp_path / "ps"
    feedback = tmp_path / "fb.jsonl"
    feedback.write_text('{"source_type": "blog", "relevant": true}\n', encoding="utf-8")
    cases = [
        (["priors", "show", str(tmp_path / "none")],
         "no feedback store here; create one with `credrank priors init DIR`"),
        (["priors", "init", str(tmp_path / "p2"), "--epsilon", "0"], "error: --epsilon: "),
        (["priors", "init", str(store)], None),
        (["priors", "update", str(store), str(feedback), "--step", "0"], "error: --step: "),
        (["priors", "show", str(store), "--version", "5"], "error: --version: "),
        (["priors", "rollback", str(store), "9"], "error: VERSION: "),
    ]
    for args, said in cases:
        res = runner.invoke(app, args)
        if said is None:
            assert res.exit_code == 0, res.output
            continue
        assert res.exit_code == 2 and said in " ".join(res.output.split()), res.output


def test_index_warns_of_table_rows_no_url_can_match(tmp_path):
    """A --table row whose domain is no host name (an en dash: four such rows in the shared
    domain_ratings.csv) was silently never used by `credrank index`; it is a warning naming
    the file, line and cell, and the other rows type as before."""
    corpus, idx, table = tmp_path / "c.jsonl", tmp_path / "idx", tmp_path / "t.csv"
    write_corpus(corpus)
    table.write_text("domain,source_type\nexa\u2013mple.com,blog\n", encoding="utf-8")
    res = runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                              "hashing", "--table", str(table)])
    assert res.exit_code == 0, res.output
    assert (f"warning: --table {table}:2: field 'domain': expected a valid host name, got "
            "'exa\u2013mple.com'") in " ".join(res.output.split())
