"""``credrank bench``'s inputs: every data file goes through the readers' one read path (a file
that is not UTF-8, or a folder, is an error naming it), ``--path``/``--corpus`` are a file or a
folder as the bench needs, and an option a bench does not use is refused when it is written on
the command line, whatever its value. Tiny synthetic inputs: every bench stops before it
embeds anything."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from credrank.cli import app
from credrank_bench.datasets import DatasetError, load_dataset, read_poisonedrag
from credrank_bench.experiments.benches import BenchOptions, run_bench
from test_bench_json import coaid_folder

runner = CliRunner()
LATIN = "caf\xe9".encode("latin-1")  # the byte 0xe9 is not UTF-8 here


def _flat(text: str) -> str:
    return " ".join(text.split())


def _bench(*args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["bench", *args])
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return res.exit_code, _flat(res.output)


def _latin1(path: Path, before: str, after: str = "\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(before.encode("utf-8") + LATIN + after.encode("utf-8"))
    return path


# -- item 1: one read path, the file named ------------------------------------------------------

#: per reader: the file name, the text before "caf\xe9", and the line and column of 0xe9
NOT_UTF8 = {
    "ramdocs": ("r.jsonl", '{"question": "', 1, 18),
    "cram-nq": ("c.jsonl", '{"id": 1}\n{"question": "', 2, 18),
    "newspolluted": ("n.json", '[{"question": "', 1, 19),
    "evotemp": ("e.json", '[\n {"question": "', 2, 19),
    "trec2019-hm": ("t.csv", "topic_id,doc_id\n1,", 2, 6),
}


@pytest.mark.parametrize("name", list(NOT_UTF8))
def test_a_file_that_is_not_utf8_is_named_with_line_and_column(name: str, tmp_path: Path
                                                                ) -> None:
    file, before, line, col = NOT_UTF8[name]
    path = _latin1(tmp_path / file, before, '"}\n')
    with pytest.raises(DatasetError, match=rf"^{path}: line {line}, column {col}: expected "
                                           r"UTF-8 text, got the byte 0xe9$"):
        load_dataset(name, path)


def test_realtimeqa_coaid_and_poisonedrag_files_are_named(tmp_path: Path) -> None:
    qa = _latin1(tmp_path / "rtq" / "20231201_qa.jsonl", '{"question_sentence": "')
    (tmp_path / "rtq" / "20231201_gcs.jsonl").write_text("", encoding="utf-8")
    with pytest.raises(DatasetError, match=rf"^{qa}: line 1, column 27: expected UTF-8"):
        load_dataset("realtimeqa", tmp_path / "rtq")
    coaid = _latin1(tmp_path / "coaid" / "05-01-2020" / "NewsRealCOVID-19.csv",
                    "news_url,title,content\nhttps://a.gov/1,")
    with pytest.raises(DatasetError, match=rf"^{coaid}: line 2, column 20: expected UTF-8"):
        load_dataset("coaid", tmp_path / "coaid")
    targets = _latin1(tmp_path / "nq.json", '{"a": {"question": "', '"}}')
    with pytest.raises(DatasetError, match=rf"^{targets}: line 1, column 24: expected UTF-8"):
        read_poisonedrag(targets)


def test_the_cli_names_the_file_exit_2(tmp_path: Path) -> None:
    """The tester's case: ``error: 'utf-8' codec can't decode …`` named no file."""
    path = _latin1(tmp_path / "latin1.jsonl", '{"question": "', '"}\n')
    code, out = _bench("ramdocs", "--path", str(path), "--embedder", "hashing", "--json",
                       "-q")
    assert code == 2
    assert f"error: --path {path}: line 1, column 18: expected UTF-8 text, got the byte " \
           "0xe9" in out
    # poisonedrag --corpus: the CrAM NQ file is read by the same path
    targets = tmp_path / "nq.json"
    targets.write_text(json.dumps({"1": {"id": "1", "question": "who", "correct answer": "a",
                                         "incorrect answer": "b", "adv_texts": ["x"]}}),
                       encoding="utf-8")
    code, out = _bench("poisonedrag", "--path", str(targets), "--corpus", str(path),
                       "--embedder", "hashing", "--json", "-q")
    assert code == 2 and f"error: --corpus {path}: line 1, column 18: expected UTF-8" in out


def test_a_utf16_file_and_a_nul_byte_are_named(tmp_path: Path) -> None:
    wide = tmp_path / "w.jsonl"
    wide.write_bytes('{"question": "q"}\n'.encode("utf-16"))
    with pytest.raises(DatasetError, match=rf"^{wide}: expected UTF-8 text, got UTF-16"):
        load_dataset("ramdocs", wide)
    nul = tmp_path / "n.jsonl"
    nul.write_bytes(b'{"question": "q"}\n{"a\x00')
    with pytest.raises(DatasetError, match=rf"^{nul}: line 2, column 4: expected text, got a "
                                           "NUL byte"):
        load_dataset("ramdocs", nul)


def test_goldengaze_reads_through_the_same_path(tmp_path: Path) -> None:
    from credrank_bench.experiments.goldengaze import load_goldengaze

    path = tmp_path / "g.csv.gz"
    path.write_bytes(gzip.compress(b"topic_id,correct_stance,host,helpful_probability\n"
                                   b"1,helpful,caf" + b"\xe9" + b".com,0.9\n"))
    with pytest.raises(ValueError, match=rf"^{path}: line 2, column 14: expected UTF-8 text, "
                                         r"got the byte 0xe9$"):
        load_goldengaze(path)


# -- item 2: a file where a file is needed, a folder where a folder is --------------------------

@pytest.mark.parametrize("name", ["ramdocs", "cram-nq", "newspolluted", "evotemp",
                                  "trec2019-hm", "poisonedrag", "goldengaze-hosts",
                                  "stress-cram"])
def test_a_folder_as_path_is_refused(name: str, tmp_path: Path) -> None:
    folder = tmp_path / "adir"
    folder.mkdir()
    code, out = _bench(name, "--path", str(folder), "--json", "-q")
    assert code == 2
    assert f"error: bench {name}: --path {folder}: expected a file, got a folder" in out


def test_coaid_needs_a_folder_and_corpus_a_file(tmp_path: Path) -> None:
    file = tmp_path / "NewsRealCOVID-19.csv"
    file.write_text("news_url,title,content\n", encoding="utf-8")
    code, out = _bench("coaid-priors", "--path", str(file), "--json", "-q")
    assert code == 2
    assert f"error: bench coaid-priors: --path {file}: expected a folder, got a file" in out
    targets = tmp_path / "nq.json"
    targets.write_text("{}", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"bench poisonedrag: --corpus {tmp_path}: expected a "
                                         "file, got a folder"):
        run_bench("poisonedrag", BenchOptions(targets, corpus=tmp_path))


def test_poisonedrag_names_a_bad_path_before_the_missing_default_corpus(tmp_path: Path
                                                                        ) -> None:
    bad = tmp_path / "a" / "b" / "nq.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("[1, 2]", encoding="utf-8")  # the default corpus beside it does not exist
    for name in ("poisonedrag", "stress-poisonedrag"):
        with pytest.raises(DatasetError, match=rf"{bad}: expected a JSON object"):
            run_bench(name, BenchOptions(bad, embedder="hashing"))


# -- items 3 and 8: an option the bench does not use is refused when written -------------------

def test_written_options_are_refused_whatever_their_value(tmp_path: Path) -> None:
    (tmp_path / "coaid").mkdir()
    missing = str(tmp_path / "none.jsonl")  # the option check comes before the path's
    cases = [
        (["coaid-priors", "--path", str(tmp_path / "coaid"), "--seed", "0"],
         "bench coaid-priors: --seed is not used by this bench (it draws nothing at random"),
        (["coaid-priors", "--path", str(tmp_path / "coaid"), "--embedder", "minilm"],
         "bench coaid-priors: --embedder is not used by this bench (it embeds no text)"),
        (["ramdocs", "--path", missing, "--generator", "extractive"],
         "bench ramdocs: --generator is only used by evotemp, realtimeqa"),
        (["cram-nq", "--path", missing, "--prefix", "none"],
         "bench cram-nq: --prefix is only used by poisonedrag; got --prefix none"),
        (["coaid-priors", "--path", str(tmp_path / "coaid"), "--force"],
         "error: --force is only used with --out or the default report.md (it overwrites a "
         "report already there); got --force with --json"),
    ]
    for args, message in cases:
        code, out = _bench(*args, "--json", "-q")
        assert code == 2 and message in out, (args, out)


def test_a_value_from_a_defaults_file_is_not_written(tmp_path: Path) -> None:
    """``embedder = "hashing"`` in a credrank.toml is a default for every command: a bench
    that embeds nothing ignores it (a value, not an option written)."""
    root = coaid_folder(tmp_path / "coaid")
    config = tmp_path / "credrank.toml"
    config.write_text('embedder = "hashing"\nseed = 3\n', encoding="utf-8")
    res = runner.invoke(app, ["--config", str(config), "bench", "coaid-priors", "--path",
                              str(root), "--json", "-q"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["bench"] == "coaid-priors" and "seed" not in doc["settings"]


def test_seed_is_refused_only_where_nothing_is_drawn() -> None:
    from credrank_bench.experiments.benches import BENCHES

    assert [n for n, b in BENCHES.items() if not b.draws] == ["coaid-priors"]
    with pytest.raises(ValueError, match="--seed is not used by this bench"):
        run_bench("coaid-priors", BenchOptions(Path("."), seed=1))
