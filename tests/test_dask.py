"""``--workers N`` / ``--scheduler ADDRESS``: Dask gives the single-process result, exactly.

One module-scoped ``LocalCluster`` of 2 worker processes serves the library tests and the CLI
(``--scheduler``); the ``--workers 2`` tests start (and close) clusters of their own. The
``hashing`` embedder keeps every run model-free and deterministic.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank.core import cluster as cluster_mod
from credrank.documents import iter_documents
from credrank.index.embed import get_embedder
from credrank.index.ingest import index_documents
from credrank.index.memory import InMemoryIndex
from credrank.index.opener import open_store
from credrank.index.parallel import TyperSettings, index_documents_parallel
from credrank.provenance import SourceTyper
from credrank.reliability.dependence import detect_dependence
from credrank.reliability.estimate import encode_answers

distributed = pytest.importorskip("distributed")

runner = CliRunner()
EMB = get_embedder("hashing")

HOSTS = ["https://www.nejm.org/doi/{i}", "https://truthnow.blogspot.com/p{i}",
         "https://www.cdc.gov/x{i}", "https://example-news.com/a{i}", None]


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None, silence_logs=50,
                                  scheduler_kwargs={"dashboard_address": "127.0.0.1:0"}
                                  ) as cluster, \
            distributed.Client(cluster, set_as_default=False) as c:
        yield c


def write_corpus(path: Path, n: int = 57, *, changed: int | None = None) -> Path:
    """``n`` records with rejects (bad date, duplicate id, empty text), titles, declared
    types that conflict with the URL, and one record's text changed when asked."""
    rng = random.Random(3)
    lines = []
    for i in range(n):
        url = HOSTS[i % len(HOSTS)]
        row = {"id": f"d{i}", "text": f"doc {i} about vitamin {rng.choice('abcd')} and "
                                      f"covid {rng.randrange(100)}"
               + (" changed" if i == changed else "")}
        if url is not None:
            row["url"] = url.format(i=i)
        if i % 4 == 0:
            row["title"] = f"Title {i}"
        if i % 6 == 0:
            row["source_type"] = "blog"
        if i % 11 == 5:
            row["published_at"] = "2023-13-45"
        if i % 13 == 7:
            row["text"] = "  "
        lines.append(json.dumps(row))
        if i % 17 == 3:
            lines.append(json.dumps({"id": f"d{i}", "text": "duplicate id"}))
    lines.insert(10, "{not json")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def table(tmp_path: Path) -> Path:
    path = tmp_path / "domains.csv"
    path.write_text("domain,source_type\nexample-news.com,established_news\n", encoding="utf-8")
    return path


def snapshot(store) -> dict[str, tuple]:
    """Every stored document: its payload columns, vector and content hash."""
    n = len(store)
    got = store.search_dense("q", EMB.embed(["vitamin covid"])[0], n, with_vectors=True,
                             with_text=True, exact=True)
    assert len(got) == n
    hashes = store.existing_hashes(list(got.doc_ids))
    out = {}
    for k, doc_id in enumerate(got.doc_ids):
        meta = tuple((name, repr(col[k])) for name, col in sorted(got.meta.items()))
        out[doc_id] = (meta, got.vectors[k].tobytes(), hashes[doc_id])
    return out


def report_tuple(report) -> tuple:
    return (report.indexed, report.unchanged, report.rejects, report.conflicts)


# -- the library ----------------------------------------------------------------------------------

def test_index_documents_parallel_equals_single_process(tmp_path, client, table):
    corpus = write_corpus(tmp_path / "c.jsonl")
    typer_ = SourceTyper([table], trust_declared=False)
    single = InMemoryIndex.create(EMB.name, EMB.dim)
    expected = index_documents(iter_documents(corpus), single, EMB, typer_, batch_size=4)
    parallel = InMemoryIndex.create(EMB.name, EMB.dim)
    seen: list[int] = []
    got = index_documents_parallel(iter_documents(corpus), parallel, "hashing",
                                   TyperSettings.of([table]), client=client, batch_size=4,
                                   batches_per_partition=2, on_batch=seen.append)
    assert report_tuple(got) == report_tuple(expected)
    assert expected.indexed > 30 and expected.rejected >= 8 and expected.conflicts
    assert sum(seen) == expected.indexed + expected.rejected
    assert snapshot(parallel) == snapshot(single)

    # an unchanged re-run writes nothing and says so; one changed record is re-indexed
    again = index_documents_parallel(iter_documents(corpus), parallel, "hashing",
                                     TyperSettings.of([table]), client=client, batch_size=4)
    assert (again.indexed, again.unchanged) == (0, expected.indexed)
    assert again.rejects == expected.rejects and again.conflicts == []
    write_corpus(corpus, changed=21)
    once = index_documents(iter_documents(corpus), single, EMB, typer_, batch_size=4)
    twice = index_documents_parallel(iter_documents(corpus), parallel, "hashing",
                                     TyperSettings.of([table]), client=client, batch_size=4,
                                     batches_per_partition=3)
    assert report_tuple(twice) == report_tuple(once) and once.indexed == 1
    assert snapshot(parallel) == snapshot(single)


def test_repeated_ids_across_partitions_match_the_single_process_decisions(client):
    # records from a library caller may repeat an id (the file readers reject that): the
    # hash stored by an earlier partition decides, as in the single-process run
    from credrank.documents.schema import Document

    docs = [Document(id=f"x{i % 5}", text=f"text {i // 10}") for i in range(30)]
    single = InMemoryIndex.create(EMB.name, EMB.dim)
    expected = index_documents(docs, single, EMB, SourceTyper(), batch_size=3)
    parallel = InMemoryIndex.create(EMB.name, EMB.dim)
    got = index_documents_parallel(docs, parallel, "hashing", TyperSettings(), client=client,
                                   batch_size=3, batches_per_partition=1, max_in_flight=4)
    assert report_tuple(got) == report_tuple(expected)
    assert snapshot(parallel) == snapshot(single)


def test_a_worker_error_propagates_and_nothing_more_is_written(tmp_path, client):
    corpus = write_corpus(tmp_path / "c.jsonl")
    store = InMemoryIndex.create(EMB.name, EMB.dim)
    settings = TyperSettings.of([tmp_path / "no-such-table.csv"])
    with pytest.raises(Exception, match="no-such-table"):
        index_documents_parallel(iter_documents(corpus), store, "hashing", settings,
                                 client=client, batch_size=4)
    assert len(store) == 0


def answers_rows(n_sources: int = 60, n_questions: int = 40) -> list[str]:
    """Answers with honest sources of mixed reliability, copies and a Sybil ring."""
    rng = random.Random(11)
    truth = [f"t{q}" for q in range(n_questions)]
    lines = ["question_id,source_id,answer"]
    prev: dict[int, str] = {}
    for s in range(n_sources):
        if s % 9 == 8:  # a near copy of the previous source
            row = {q: (a if rng.random() < 0.95 else "zz") for q, a in prev.items()}
        elif s >= n_sources - 5:  # a ring answering "fake" on every third question
            row = {q: ("fake" if q % 3 == 0 else truth[q]) for q in range(n_questions)}
        else:
            r = rng.uniform(0.4, 0.95)
            row = {q: (truth[q] if rng.random() < r else f"w{rng.randrange(3)}")
                   for q in range(n_questions) if rng.random() < 0.7}
        lines += [f"q{q},s{s},{a}" for q, a in row.items()]
        prev = row
    return lines


@pytest.fixture
def answers_csv(tmp_path: Path) -> Path:
    path = tmp_path / "answers.csv"
    path.write_text("\n".join(answers_rows()) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("blocks", [None, 1, 7])
def test_detect_dependence_parallel_equals_single_process(answers_csv, client, blocks):
    from credrank.reliability.answers import load_answers
    from credrank.reliability.parallel import detect_dependence_parallel

    enc = encode_answers(load_answers(answers_csv))
    documents = {"s1": ["the same press release about the vaccine trial results today"],
                 "s4": ["the same press release about the vaccine trial results today"]}
    for docs in (None, documents):
        expected = detect_dependence(enc, documents=docs)
        got = detect_dependence_parallel(enc, client=client, blocks=blocks, documents=docs)
        assert got == expected
        assert expected.pairs and expected.clusters


def test_run_estimate_json_identical_with_workers(answers_csv, client):
    from credrank.cli.reliability import run_estimate

    for collapse_copies in (False, True):
        plain = run_estimate(answers_csv, collapse_copies=collapse_copies)
        dask = run_estimate(answers_csv, collapse_copies=collapse_copies, scheduler=client)
        assert json.dumps(dask) == json.dumps(plain)
        assert plain["dependence_pairs"] and plain["clusters"]


# -- the command line -----------------------------------------------------------------------------

def index_cli(corpus: Path, idx: Path, *extra: str):
    return runner.invoke(app, ["index", str(corpus), "--index", str(idx), "--embedder",
                               "hashing", "--batch-size", "4", *extra])


def test_cli_index_with_scheduler_equals_single_process(tmp_path, client, table):
    corpus = write_corpus(tmp_path / "c.jsonl")
    plain = index_cli(corpus, tmp_path / "one", "--table", str(table))
    assert plain.exit_code == 0, plain.output
    dask = index_cli(corpus, tmp_path / "two", "--table", str(table), "--scheduler",
                     client.scheduler.address)
    assert dask.exit_code == 0, dask.output
    assert dask.stdout == plain.stdout.replace(str(tmp_path / "one"), str(tmp_path / "two"))
    assert "conflict" in dask.output
    assert ((tmp_path / "two" / "rejects.jsonl").read_bytes()
            == (tmp_path / "one" / "rejects.jsonl").read_bytes())
    with open_store(tmp_path / "one") as one, open_store(tmp_path / "two") as two:
        assert snapshot(two) == snapshot(one)

    again = index_cli(corpus, tmp_path / "two", "--table", str(table), "--scheduler",
                      client.scheduler.address)
    assert again.exit_code == 0, again.output
    first = plain.stdout.split("indexed ")[1].split(",")[0]
    assert "indexed 0, rejected" in again.stdout
    assert f"({first} already indexed, unchanged)" in again.stdout


def test_cli_index_file_error_is_the_same_with_a_scheduler(tmp_path, client):
    import gzip

    corpus = tmp_path / "c.jsonl.gz"
    corpus.write_bytes(b"xx" + gzip.compress(b'{"id": "a", "text": "x"}\n')[2:])
    plain = index_cli(corpus, tmp_path / "one")
    dask = index_cli(corpus, tmp_path / "two", "--scheduler", client.scheduler.address)
    assert plain.exit_code == dask.exit_code == 2
    assert "after 0 records" in " ".join(dask.output.split())
    assert dask.output == plain.output.replace(str(tmp_path / "one"), str(tmp_path / "two"))


def test_cli_reliability_json_identical_with_scheduler(answers_csv, client):
    plain = runner.invoke(app, ["reliability", "estimate", str(answers_csv), "--json",
                                "--collapse-copies"])
    dask = runner.invoke(app, ["reliability", "estimate", str(answers_csv), "--json",
                               "--collapse-copies", "--scheduler", client.scheduler.address])
    assert plain.exit_code == dask.exit_code == 0, dask.output
    assert dask.stdout == plain.stdout


@pytest.mark.parametrize("command", [["index", "c.jsonl", "--index", "idx"],
                                     ["reliability", "estimate", "a.csv"]])
def test_workers_and_scheduler_exclude_each_other(tmp_path, command, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c.jsonl").write_text('{"id": "a", "text": "x"}\n')
    (tmp_path / "a.csv").write_text("question_id,source_id,answer\nq,s,a\n")
    res = runner.invoke(app, [*command, "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"])
    assert res.exit_code == 2
    assert "--workers and --scheduler exclude each other" in " ".join(res.output.split())
    assert not (tmp_path / "idx").exists()


@pytest.mark.parametrize("command", [["index", "c.jsonl", "--index", "idx"],
                                     ["reliability", "estimate", "a.csv"]])
def test_without_the_extra_workers_is_a_clear_error(tmp_path, command, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(cluster_mod, "dask_available", lambda: False)
    (tmp_path / "c.jsonl").write_text('{"id": "a", "text": "x"}\n')
    (tmp_path / "a.csv").write_text("question_id,source_id,answer\nq,s,a\n")
    res = runner.invoke(app, [*command, "--workers", "2"])
    assert res.exit_code == 2
    assert ("--workers needs the dask extra: pip install 'credrank[dask]'"
            in " ".join(res.output.split()))
    assert not (tmp_path / "idx").exists()
    # --workers 0 is the single-process path and needs nothing
    assert runner.invoke(app, [*command, "--workers", "0"]).exit_code == 0


def test_an_unreachable_scheduler_is_a_clear_error(tmp_path):
    import dask

    corpus = write_corpus(tmp_path / "c.jsonl", n=5)
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        res = index_cli(corpus, tmp_path / "idx", "--scheduler", "tcp://127.0.0.1:9")
    assert res.exit_code == 2
    assert "cannot connect to a Dask scheduler" in " ".join(res.output.split())


@pytest.mark.slow
def test_cli_workers_2_starts_and_closes_a_local_cluster(tmp_path, answers_csv, table):
    corpus = write_corpus(tmp_path / "c.jsonl")
    plain = index_cli(corpus, tmp_path / "one", "--table", str(table))
    dask = index_cli(corpus, tmp_path / "two", "--table", str(table), "--workers", "2")
    assert plain.exit_code == dask.exit_code == 0, dask.output
    assert ((tmp_path / "two" / "rejects.jsonl").read_bytes()
            == (tmp_path / "one" / "rejects.jsonl").read_bytes())
    with open_store(tmp_path / "one") as one, open_store(tmp_path / "two") as two:
        assert snapshot(two) == snapshot(one)
    plain = runner.invoke(app, ["reliability", "estimate", str(answers_csv), "--json"])
    dask = runner.invoke(app, ["reliability", "estimate", str(answers_csv), "--json",
                               "--workers", "2"])
    assert plain.exit_code == dask.exit_code == 0, dask.output
    assert dask.stdout == plain.stdout
