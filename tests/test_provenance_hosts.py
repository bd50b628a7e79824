"""``credrank provenance hosts``: the host inventory of an index (credrank.provenance.inventory),
its domain-table template, and the ``#`` comment lines the domain-table reader skips."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cli_inprocess import run_cli
from credrank.provenance import DomainTableError, SourceTyper, load_domain_table
from credrank.provenance.inventory import host_counts, rule_kind, template_text

#: (id, url): 3 pages of one unknown host (two with www.), 2 of another, a CDC page (built-in
#: rule), a blog subdomain (built-in label rule), a page without URL and one whose URL names
#: no host
PAGES = [
    ("c1", "https://www.clinic-example.com/a"),
    ("c2", "https://clinic-example.com/b"),
    ("c3", "https://www.clinic-example.com/blog/c"),
    ("s1", "https://shop-example.net/x"),
    ("s2", "https://shop-example.net/y"),
    ("g1", "https://www.cdc.gov/flu"),
    ("b1", "https://blog.writer-example.org/post"),
    ("n1", None),
    ("j1", "javascript:alert(1)"),
]


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hosts")
    corpus = root / "corpus.jsonl"
    with corpus.open("w", encoding="utf-8") as f:
        for doc_id, url in PAGES:
            record: dict[str, Any] = {"id": doc_id, "text": f"page {doc_id} about influenza"}
            if url is not None:
                record["url"] = url
            f.write(json.dumps(record) + "\n")
    where = root / "index"
    done = run_cli("index", str(corpus), "--index", str(where), "--embedder", "hashing")
    assert done.returncode == 0, done.stderr
    return where


def _hosts(index_dir: Path, *extra: str) -> dict[str, Any]:
    done = run_cli("provenance", "hosts", "--index", str(index_dir), "--json", *extra)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


# ---------------------------------------------------------------- pure logic

def _row(doc_id: str, url: str | None, stype: str = "unknown", rule: str = "none",
         host: str | None = None, registered: str | None = None) -> dict[str, Any]:
    return {"doc_id": doc_id, "url": url, "host": host, "registered_domain": registered,
            "source_type": stype, "declared_source_type": None, "provenance_rule": rule}


def test_rule_kinds() -> None:
    assert [rule_kind(r) for r in ("domain:nih.gov", "suffix:gov", "path:x.org/pmc",
                                   "host:a.org", "label:blog", "table:t.csv", "declared",
                                   "none", None)] == \
        ["builtin"] * 5 + ["table", "declared", "none", "none"]
    with pytest.raises(ValueError, match="provenance_rule"):
        rule_kind("guess:x")


def test_counts_group_bare_hosts_and_keep_hostless_documents() -> None:
    rows = [_row("a", "https://www.x.com/1", host="www.x.com", registered="x.com"),
            _row("b", "https://x.com/2", host="x.com", registered="x.com"),
            _row("c", "https://y.org/1", "government", "suffix:org", "y.org", "y.org"),
            _row("d", None), _row("e", "javascript:1")]
    census = host_counts(rows)
    assert [(r.host, r.documents, r.note) for r in census.rows] == [
        ("x.com", 2, None), ("y.org", 1, None), (None, 1, "URL names no host"),
        (None, 1, "no URL")]
    s = census.summary()
    assert (s["documents"], s["hosts"], s["typed_documents"], s["unknown_hosts"],
            s["documents_without_host"]) == (5, 2, 1, 1, 2)
    assert s["documents_by_rule_kind"] == {"builtin": 1, "none": 4}
    assert s["hosts_by_rule_kind"] == {"builtin": 1, "none": 1}
    # nothing dropped: the rows' documents add up to the total
    assert sum(r.documents for r in census.rows) == census.documents


def test_mixed_host_lists_every_type_and_filters() -> None:
    rows = [_row("a", "https://x.com/blog/1", "blog", "table:t.csv", "x.com", "x.com"),
            _row("b", "https://x.com/blog/2", "blog", "table:t.csv", "x.com", "x.com"),
            _row("c", "https://x.com/3", host="x.com", registered="x.com"),
            _row("d", "https://z.net/3", "government", "host:z.net", "z.net", "z.net")]
    census = host_counts(rows, unknown_only=True, top=5)
    (x,) = census.shown
    assert (x.host, x.source_type, x.rule_kind, x.unknown_documents) == ("x.com", "blog",
                                                                          "table", 1)
    assert x.types == {"blog": 2, "unknown": 1}
    assert len(host_counts(rows, top=1).shown) == 1
    with pytest.raises(ValueError, match="top"):
        host_counts(rows, top=0)
    with pytest.raises(ValueError, match="source_type"):
        host_counts([_row("a", "https://x.com", "commercial")])


def test_retyping_with_a_table(tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    table.write_text("# typed by hand\ndomain,source_type\nx.com,blog\n", encoding="utf-8")
    rows = [_row("a", "https://www.x.com/1", host="www.x.com", registered="x.com")]
    (row,) = host_counts(rows, SourceTyper([table])).rows
    assert (row.source_type, row.rule, row.rule_kind) == ("blog", "table:t.csv", "table")


def test_template_is_a_domain_table(tmp_path: Path) -> None:
    rows = [_row("a", "https://www.x.com/1", host="www.x.com", registered="x.com"),
            _row("b", "https://www.x.com/2", host="www.x.com", registered="x.com"),
            _row("c", "https://y.org/1", host="y.org", registered="y.org"), _row("d", None)]
    census = host_counts(rows)
    text = template_text(census.unknown_hosts, source="test", total_unknown=2)
    path = tmp_path / "template.csv"
    path.write_text(text, encoding="utf-8")
    table = load_domain_table(path)
    assert list(table.types) == ["x.com", "y.org"]  # most documents first
    assert set(table.types.values()) == {"unknown"}
    assert next(line for line in text.splitlines() if not line.startswith("#")) == \
        "domain,source_type"


def test_domain_table_comments_keep_line_numbers(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("# a note, with a comma\n  # indented\ndomain,source_type\n# R1\n"
                    "a.org,government\nb.org,commercial\n", encoding="utf-8")
    with pytest.raises(DomainTableError, match=r"t\.csv:6: field 'source_type'"):
        load_domain_table(path)
    path.write_text("# only\n# comments\n", encoding="utf-8")
    with pytest.raises(DomainTableError, match="empty file"):
        load_domain_table(path)
    path.write_text("# note\ndomain,kind\n", encoding="utf-8")
    with pytest.raises(DomainTableError, match=r"t\.csv:2: expected a 'source_type' column"):
        load_domain_table(path)


# ---------------------------------------------------------------- the command

def test_hosts_json_counts_every_document(index_dir: Path) -> None:
    doc = _hosts(index_dir)
    assert doc["credrank_provenance_hosts"] == 1
    assert (doc["documents"], doc["hosts"], doc["documents_without_host"]) == (9, 4, 2)
    by_host = {r["host"]: r for r in doc["rows"] if r["host"] is not None}
    assert by_host["clinic-example.com"]["documents"] == 3  # www. and bare host are one row
    assert by_host["clinic-example.com"]["rule_kind"] == "none"
    assert by_host["cdc.gov"]["source_type"] == "government"
    assert by_host["cdc.gov"]["rule_kind"] == "builtin"
    assert by_host["blog.writer-example.org"]["source_type"] == "blog"
    assert [r["host"] for r in doc["rows"]][:2] == ["clinic-example.com", "shop-example.net"]
    assert sorted(r["note"] for r in doc["rows"] if r["host"] is None) == [
        "URL names no host", "no URL"]
    assert doc["rows_not_shown"] == 0 and doc["template"] is None

    # data all the way down: no value is a rendered table or a multi-line string
    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, str):
            assert "\n" not in value and "|" not in value, value
        else:
            assert value is None or isinstance(value, (int, float, bool)), value
    walk(doc)


def test_unknown_and_top(index_dir: Path) -> None:
    doc = _hosts(index_dir, "--unknown")
    assert [r["host"] for r in doc["rows"]] == ["clinic-example.com", "shop-example.net",
                                                None, None]
    assert all(r["unknown_documents"] for r in doc["rows"])
    doc = _hosts(index_dir, "--unknown", "--top", "1")
    assert [r["host"] for r in doc["rows"]] == ["clinic-example.com"]
    assert doc["rows_not_shown"] == 5 and doc["filter"] == {"unknown": True, "top": 1}
    text = run_cli("provenance", "hosts", "--index", str(index_dir), "--top", "2")
    assert text.returncode == 0, text.stderr
    assert "9 documents from 4 hosts" in text.stdout
    assert "clinic-example.com" in text.stdout and "cdc.gov" not in text.stdout
    assert "more rows not shown: --top 2" in text.stdout


def test_template_fill_and_reindex(index_dir: Path, tmp_path: Path) -> None:
    template = tmp_path / "domains.csv"
    done = run_cli("provenance", "hosts", "--index", str(index_dir), "--template", str(template))
    assert done.returncode == 0, done.stderr
    table = load_domain_table(template)
    assert list(table.types) == ["clinic-example.com", "shop-example.net"]
    # a second run refuses to overwrite (a filled-in table), --force overwrites
    again = run_cli("provenance", "hosts", "--index", str(index_dir), "--template", str(template))
    assert again.returncode == 2 and "--force" in again.stderr
    assert again.stderr.startswith("error:")
    done = run_cli("provenance", "hosts", "--index", str(index_dir), "--template", str(template),
                   "--top", "1", "--force", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["template"] == {"path": str(template), "hosts": 1,
                                                   "unknown_hosts": 2}
    assert list(load_domain_table(template).types) == ["clinic-example.com"]
    # the user fills it in; --table previews the typing the index would get
    template.write_text(template.read_text(encoding="utf-8").replace(
        "clinic-example.com,unknown", "clinic-example.com,blog"), encoding="utf-8")
    doc = _hosts(index_dir, "--table", str(template))
    row = next(r for r in doc["rows"] if r["host"] == "clinic-example.com")
    assert (row["source_type"], row["rule"]) == ("blog", "table:domains.csv")
    assert doc["retyped"] is True and doc["tables"] == [str(template)]


def test_errors_exit_2(index_dir: Path, tmp_path: Path) -> None:
    missing = run_cli("provenance", "hosts", "--index", str(tmp_path / "absent"))
    assert missing.returncode == 2
    assert missing.stderr.startswith("error:") and "--index" in missing.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    not_index = run_cli("provenance", "hosts", "--index", str(empty))
    assert not_index.returncode == 2 and "--index" in not_index.stderr
    top = run_cli("provenance", "hosts", "--index", str(index_dir), "--top", "0")
    assert top.returncode == 2 and "--top" in top.stderr
    bad = tmp_path / "bad.csv"
    bad.write_text("domain,source_type\nx.com,commercial\n", encoding="utf-8")
    table = run_cli("provenance", "hosts", "--index", str(index_dir), "--table", str(bad))
    assert table.returncode == 2 and "--table" in table.stderr and "bad.csv:2" in table.stderr
    folder = run_cli("provenance", "hosts", "--index", str(index_dir), "--template",
                     str(tmp_path))
    assert folder.returncode == 2 and "--template" in folder.stderr


def test_force_is_refused_without_template(index_dir: Path) -> None:
    """``--force`` without ``--template`` was accepted and did nothing."""
    done = run_cli("provenance", "hosts", "--index", str(index_dir), "--force")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("error: --force: only with --template")


@pytest.mark.parametrize("depth", [("shard",), ("shard", "wal"), ("shard", "wal", "x", "y")])
def test_template_is_refused_anywhere_inside_an_index(index_dir: Path, tmp_path: Path,
                                                      depth: tuple[str, ...]) -> None:
    """Only the index folder and its direct subfolders were refused: ``DIR/shard/wal/todo.csv``
    was written into the engine's folders."""
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(index_dir, copy)
    folder = copy.joinpath(*depth)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "todo.csv"
    done = run_cli("provenance", "hosts", "--index", str(index_dir), "--template", str(target))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: --template {target}: the path is inside the "
                                  f"credrank index {copy}")
    assert not target.exists()


def test_a_template_write_failure_exits_1(index_dir: Path, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A full disk while the template is written is a runtime failure (exit 1, it was 2):
    one line naming --template and the reason, nothing left behind."""
    import errno

    real_write_bytes = Path.write_bytes

    def write_bytes(self: Path, data: bytes) -> int:
        if self.name.startswith(".todo.csv."):  # the template's temporary file
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write_bytes(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    target = tmp_path / "todo.csv"
    done = run_cli("provenance", "hosts", "--index", str(index_dir), "--template", str(target))
    monkeypatch.undo()
    assert done.returncode == 1, done.stderr
    assert done.stderr == (f"error: --template {target}: writing failed: No space left on "
                           "device; nothing was written\n")
    assert list(tmp_path.iterdir()) == []


def test_table_rows_that_can_never_match_are_warned(index_dir: Path, tmp_path: Path) -> None:
    """A table row whose domain is no host name (an en dash) was kept and silently never
    matched (4 such rows in domain_ratings.csv): a warning names file, line and cell."""
    table = tmp_path / "t.csv"
    table.write_text("domain,source_type\nclinic-example.com,blog\nexa\u2013mple.com,blog\n"
                     "bad..host.org,government\n", encoding="utf-8")
    done = run_cli("provenance", "hosts", "--index", str(index_dir), "--table", str(table),
                   "--json")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith(f"warning: --table {table}:3: field 'domain': expected a valid "
                               "host name, got 'exa\u2013mple.com' (")
    assert lines[0].endswith("no URL can match it, so the row is not used")
    assert lines[1].startswith(f"warning: --table {table}:4: field 'domain': expected a valid "
                               "host name, got 'bad..host.org' (")
    row = next(r for r in json.loads(done.stdout)["rows"] if r["host"] == "clinic-example.com")
    assert row["source_type"] == "blog"  # the other rows are used as before


def test_front_ends_of_a_public_suffix_are_one_row() -> None:
    """``www.nhs.uk`` and ``nhs.uk`` were two rows (nhs.uk is a public suffix, so the list
    calls ``www.nhs.uk`` a registered domain of its own); ``m.nhs.uk`` stays a row of its own
    (under a public suffix ``m.`` is a registrant's name: :func:`bare_host`)."""
    rows = [_row("a", "https://www.nhs.uk/1", "government", "suffix:nhs.uk", "www.nhs.uk",
                 "www.nhs.uk"),
            _row("b", "https://nhs.uk/2", "government", "suffix:nhs.uk", "nhs.uk", None),
            _row("c", "https://m.nhs.uk/3", "government", "suffix:nhs.uk", "m.nhs.uk",
                 "m.nhs.uk"),
            _row("d", "https://www.police.uk/", host="www.police.uk",
                 registered="www.police.uk")]
    census = host_counts(rows)
    assert [(r.host, r.registered_domain, r.documents) for r in census.rows] == [
        ("nhs.uk", None, 2), ("m.nhs.uk", "m.nhs.uk", 1), ("police.uk", None, 1)]
    text = template_text(census.unknown_hosts, source="test", total_unknown=1)
    assert text.splitlines()[-1] == "police.uk,unknown"


# ---------------------------------------------------------------- the bench's --table

def _trec_csv() -> str:
    import csv
    import io

    columns = ["topic_id", "doc_id", "usefulness", "stance", "credibility", "query",
               "description", "correct_stance", "text", "timestamp", "url"]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=columns)
    writer.writeheader()
    for qid, desc in (("1", "Can zinc cure colds?"), ("2", "Does traction help back pain?"),
                      ("3", "Can melatonin reduce jet lag?")):
        for i in range(4):
            writer.writerow({"topic_id": qid, "doc_id": f"c{qid}-{i}", "usefulness": 1,
                             "stance": i % 2, "credibility": i % 2, "query": desc,
                             "description": desc, "correct_stance": "helpful",
                             "text": f"{desc} page {i} says {'yes' if i % 2 else 'no'}",
                             "timestamp": "2012-02-10T21:49:00",
                             "url": f"http://www.site{qid}{i}.com/p"})
    return buf.getvalue()


def test_trec_bench_types_urls_with_the_tables(tmp_path: Path) -> None:
    from credrank.index.embed import HashingEmbedder
    from credrank_bench.datasets import load_dataset
    from credrank_bench.experiments.trec_hm import build_corpus, run_trec_hm

    data = tmp_path / "tiny.csv"
    data.write_text(_trec_csv(), encoding="utf-8")
    table = tmp_path / "domains.csv"
    table.write_text("# by hand\ndomain,source_type\nsite10.com,government\n",
                     encoding="utf-8")
    evalset = load_dataset("trec2019-hm", data)
    corpus = build_corpus(evalset, HashingEmbedder(32), SourceTyper([table]))
    types = dict(zip(corpus.doc_ids, corpus.source_types, strict=True))
    assert types["c1-0"] == "government" and types["c1-1"] == "unknown"
    result = run_trec_hm(data, embedder=HashingEmbedder(32), fetch_k=6, top_k=5,
                         sharpness=2.0, floor=0.1, tables=[table])
    assert result["config"]["tables"] == [str(table)]
