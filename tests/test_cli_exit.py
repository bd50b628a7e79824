"""Every error path of every command, as a user meets it, on the default install (ONNX MiniLM
embedder, Qdrant Edge index).

Each bad invocation must end with exit 2, an ``error:`` line on stderr naming what was wrong,
and neither a Python traceback nor a native abort (``terminate called …``, exit 134): issue 23
found ``credrank search --priors nosuch`` aborting in 8 of 10 runs after the ONNX model had
started loading. The abort was a race at the exit of the process, so the reproductions run
several times each as the real ``credrank`` console script in a subprocess; the fuzz report
(``bench/scripts/fuzz_report.py --cli-repeats 20``) counts 20 runs of each.

The whole matrix runs in process (:mod:`cli_inprocess`: the same ``credrank.cli.run``, exit code
and stderr; the model loaded once), and again as a real process for one case of each way a
command refuses (:data:`PROCESS_CASES`: click's usage errors, ``fail()`` of a command, an
option checked after the model load started, a group command, the bench plugin), where the
exit code comes from the console script and a native abort at the exit could show.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import cli_process
from cli_inprocess import assert_clean_error, run_cli
from cli_process import CREDRANK

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "src" / "credrank" / "data" / "demo"

needs_script = pytest.mark.skipif(not CREDRANK.exists(),
                                  reason="the credrank console script is not installed")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with a 30-document MiniLM index (the default embedder) and bad input files."""
    where = tmp_path_factory.mktemp("cli-exit")
    lines = (DEMO / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    (where / "small.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_cli("index", "small.jsonl", "--index", "idx", cwd=where)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((where / "idx" / "manifest.json").read_text(encoding="utf-8"))
    if manifest["embedder"] != "minilm":  # pragma: no cover - the default install has it
        pytest.skip("the default embedder is not MiniLM here")
    (where / "bad.toml").write_text("current = [\n", encoding="utf-8")
    (where / "binary.json").write_bytes(b"\x00\xff\xfe garbage")
    (where / "notes.txt").write_text("hello\n", encoding="utf-8")
    (where / "empty.csv").write_text("", encoding="utf-8")
    (where / "queries.tsv").write_text("q1\tfever\n", encoding="utf-8")
    (where / "emptydir").mkdir()
    (where / "est.json").write_text('{"sources": [{"source_id": "nih.gov", "known": true, '
                                    '"reliability": 0.9, "coverage": 10}]}', encoding="utf-8")
    (where / "answers.csv").write_text('question_id,source_id,answer\nq1,s1,"open\n',
                                       encoding="utf-8")
    return where


# (name, arguments, text the error must contain). The three issue-23 reproductions come first.
SEARCH = ("search", "fever", "--index", "idx")
CASES: list[tuple[str, tuple[str, ...], str]] = [
    ("search-priors-nosuch", (*SEARCH, "--priors", "nosuch"), "priors: 'nosuch'"),
    ("search-mmr-no-diversity", (*SEARCH, "--select", "mmr"), "diversity"),
    ("search-coverage-no-params", (*SEARCH, "--select", "coverage"), "lambda"),
    # search
    ("search-no-index", ("search", "fever"), "--index"),
    ("search-missing-index", ("search", "fever", "--index", "nowhere"), "nowhere"),
    ("search-index-is-file", ("search", "fever", "--index", "notes.txt"), "notes.txt"),
    ("search-empty-index-dir", ("search", "fever", "--index", "emptydir"), "emptydir"),
    ("search-no-query", ("search", "--index", "idx"), "QUERY"),
    ("search-query-and-file", (*SEARCH, "--queries", "queries.tsv"), "one of them"),
    ("search-trec-run-alone", (*SEARCH, "--trec-run", "run.txt"), "--queries"),
    ("search-queries-missing", ("search", "--index", "idx", "--queries", "nope.tsv"),
     "nope.tsv"),
    ("search-top-k-zero", (*SEARCH, "--top-k", "0"), "--top-k"),
    ("search-top-k-huge", (*SEARCH, "--top-k", "100000000"), "top"),
    ("search-fetch-k-below-top-k", (*SEARCH, "--top-k", "10", "--fetch-k", "5"), "fetch"),
    ("search-mode-nosuch", (*SEARCH, "--mode", "nosuch"), "mode"),
    ("search-priors-bad-toml", (*SEARCH, "--priors", "bad.toml"), "bad.toml"),
    ("search-priors-binary", (*SEARCH, "--priors", "binary.json"), "binary.json"),
    ("search-priors-markup", (*SEARCH, "--priors", "in/[red]corp[/x]"), "in/[red]corp[/x]"),
    ("search-select-nosuch", (*SEARCH, "--select", "nosuch"), "nosuch"),
    ("search-select-param-no-equals", (*SEARCH, "--select", "mmr", "-P", "diversity"),
     "KEY=VALUE"),
    ("search-select-param-unknown", (*SEARCH, "--select", "mmr", "-P", "diversity=0.5",
                                     "-P", "nosuch=1"), "nosuch"),
    ("search-mmr-diversity-range", (*SEARCH, "--select", "mmr", "-P", "diversity=1.5"),
     "diversity"),
    ("search-exposure-no-params", (*SEARCH, "--select", "exposure"), "group_column"),
    ("search-fair-no-params", (*SEARCH, "--select", "fair"), "protected_column"),
    ("search-credibility-model-missing", (*SEARCH, "--credibility-model", "nope.json"),
     "nope.json"),
    ("search-credibility-model-binary", (*SEARCH, "--credibility-model", "binary.json"),
     "binary.json"),
    ("search-stance-model-missing", (*SEARCH, "--stance-model", "nope.json"), "nope.json"),
    ("search-stance-param-without-model", (*SEARCH, "--stance-param", "floor=0.1"), "stance"),
    ("search-consensus-param-unknown", (*SEARCH, "--consensus", "--consensus-param", "x=1"),
     "x"),
    ("search-freshness-bad", (*SEARCH, "--freshness", "half_life=soon"), "half_life"),
    ("search-freshness-config-missing", (*SEARCH, "--freshness", "half_life=365d,config=no.toml"),
     "no.toml"),
    ("search-source-reliability-missing", (*SEARCH, "--source-reliability", "nope.json"),
     "nope.json"),
    ("search-priors-store-missing", (*SEARCH, "--priors-store", "nostore"), "nostore"),
    ("search-engine-nosuch", (*SEARCH, "--engine", "nosuch"), "nosuch"),
    ("search-qdrant-without-url", (*SEARCH, "--engine", "qdrant"), "qdrant"),
    # index
    ("index-missing-corpus", ("index", "nope.jsonl", "--index", "new1"), "nope.jsonl"),
    ("index-unknown-suffix", ("index", "notes.txt", "--index", "new2"),
     "notes.txt: cannot tell the corpus format from the extension '.txt'; expected one of "),
    ("index-unknown-suffix-hint", ("index", "notes.txt", "--index", "new2"), "or pass --format"),
    ("index-format-bad", ("index", "small.jsonl", "--index", "new2", "--format", "xml"),
     "--format: expected one of jsonl, csv, tsv, parquet, beir, got 'xml'"),
    ("index-empty-csv", ("index", "empty.csv", "--index", "new3"), "empty.csv"),
    ("index-embedder-nosuch", ("index", "small.jsonl", "--index", "new4", "--embedder", "x"),
     "embedder"),
    ("index-embedder-mismatch", ("index", "small.jsonl", "--index", "idx", "--embedder",
                                 "hashing"), "idx"),
    ("index-batch-size-zero", ("index", "small.jsonl", "--index", "new5", "--batch-size", "0"),
     "batch-size"),
    ("index-field-no-equals", ("index", "small.jsonl", "--index", "new6", "--field", "x"),
     "--field"),
    # the later one silently won (every record then rejected for a missing id)
    ("index-field-twice", ("index", "small.jsonl", "--index", "new6", "--field", "body=text",
                           "--field", "body=title"),
     "--field: expected one name for column 'body', got body=text and body=title"),
    # a misspelt schema name kept every date as metadata, silently
    ("index-field-unknown-name", ("index", "small.jsonl", "--index", "new6", "--field",
                                  "published_at=publishd_at"),
     "--field published_at=publishd_at: expected a schema name (id, text, title, url, "
     "source_id, source_type, claim_class, persistent, observed_at, verified_at, "
     "published_at, modified_at, retrieved_at, cites), got 'publishd_at'; did you mean "
     "published_at=published_at?"),
    ("index-table-missing", ("index", "small.jsonl", "--index", "new7", "--table", "no.csv"),
     "no.csv"),
    ("index-table-binary", ("index", "small.jsonl", "--index", "new8", "--table",
                            "binary.json"), "binary.json"),
    ("index-into-a-file", ("index", "small.jsonl", "--index", "notes.txt"), "notes.txt"),
    ("index-workers-negative", ("index", "small.jsonl", "--index", "new9", "--workers", "-1"),
     "--workers"),
    ("search-pipeline-missing", (*SEARCH, "--pipeline", "nope.json"), "nope.json"),
    ("search-pipeline-with-shortcut", (*SEARCH, "--pipeline", "bad.toml", "--priors",
                                       "aggressive"), "--priors"),
    ("search-set-bad-syntax", (*SEARCH, "-S", "consensus"), "-S"),
    ("search-set-unknown-param", (*SEARCH, "-S", "consensus.treshold=0.5"), "treshold"),
    ("search-set-out-of-range", (*SEARCH, "-S", "consensus.threshold=1.5"), "threshold"),
    ("search-set-unknown-stage", (*SEARCH, "-S", "nosuch.x=1"), "nosuch"),
    ("pipeline-check-missing", ("pipeline", "check", "nope.json"), "nope.json"),
    ("pipeline-check-binary", ("pipeline", "check", "binary.json"), "binary.json"),
    # optimize, score, demo, context, bench, serve
    ("optimize-missing", ("optimize", "--index", "nowhere"), "nowhere"),
    ("score-missing-index", ("score", "machine-text", "--index", "nowhere"), "nowhere"),
    ("search-machine-text-unscored", (*SEARCH, "--machine-text"),
     "credrank score machine-text --index"),
    ("demo-embedder-nosuch", ("demo", "--embedder", "nosuch"), "nosuch"),
    ("context-format-nosuch", ("context", "fever", "--index", "idx", "--format", "x"), "format"),
    ("context-now-bad", ("context", "fever", "--index", "idx", "--now", "soon"), "--now"),
    ("context-now-overflow", ("context", "fever", "--index", "idx", "--now",
                              "0001-01-01T00:00:00+14:00"), "--now"),
    ("context-undated-bad", ("context", "fever", "--index", "idx", "--undated", "x"),
     "undated"),
    ("context-half-life-negative", ("context", "fever", "--index", "idx", "--half-life", "-1"),
     "half"),
    ("context-missing-index", ("context", "fever", "--index", "nowhere"), "nowhere"),
    # options accepted in a combination where they did nothing
    ("search-run-tag-without-run", (*SEARCH, "--run-tag", "x"), "--run-tag: only with"),
    ("search-top-k-not-a-number", (*SEARCH, "--top-k", "abc"),
     "Invalid value for '--top-k': Input should be a valid integer, unable to parse string "
     "as an integer, got 'abc'"),
    ("search-queries-an-index", ("search", "--queries", "idx", "--index", "idx"),
     "--queries idx: expected a queries file (or a BEIR folder holding queries.jsonl), got an "
     "index folder"),
    ("search-queries-missing", ("search", "--queries", "nope.txt", "--index", "idx"),
     "--queries nope.txt: cannot read nope.txt"),
    ("search-verbose-json", (*SEARCH, "--verbose", "--json"), "--verbose: only with"),
    # -S setting what an option on the same line sets: the -S won without a word
    ("search-set-and-option", (*SEARCH, "--top-k", "3", "-S", "top_k=2"),
     "-S top_k=2: --top-k on the same command line sets top_k too"),
    ("context-set-and-option", ("context", "fever", "--index", "idx", "--priors", "aggressive",
                                "-S", "prior.priors=compressed"),
     "-S prior.priors=compressed: --priors on the same command line sets prior.priors too"),
    ("search-set-and-items", (*SEARCH, "--freshness", "half_life=2y", "-S",
                              "freshness.half_life=1y"),
     "-S freshness.half_life=1y: --freshness on the same command line sets freshness.half_life"),
    ("search-set-and-params", (*SEARCH, "--select", "mmr", "--select-param", "diversity=0.5",
                               "-S", "mmr.diversity=0.2"),
     "--select-param on the same command line sets mmr.diversity too"),
    ("search-set-and-off", (*SEARCH, "--no-smoothing", "-S", "smoothing.m=3"),
     "-S smoothing.m=3: --no-smoothing on the same command line leaves the smoothing stage out"),
    ("search-set-and-no-prior", (*SEARCH, "--priors", "none", "-S", "prior.floor=0.5"),
     "--priors none on the same command line leaves the prior stage out"),
    ("search-set-and-reliability-prior", (*SEARCH, "--source-reliability", "est.json", "-S",
                                          "prior.floor=0.1"),
     "--source-reliability on the same command line leaves the prior stage out"),
    ("search-set-stages-whole", (*SEARCH, "-S", 'stages=[{"stage":"topk"}]'),
     "-S stages=[{\"stage\":\"topk\"}]: stages: expected a stage's parameters one by one"),
    ("search-set-other-selector", (*SEARCH, "--select", "mmr", "--select-param",
                                   "diversity=0.3", "-S", "coverage.lambda_ilad=1"),
     "--select mmr on the same command line leaves the coverage stage out"),
    # a byte that is not UTF-8 (argv decodes it as a lone surrogate): it reached the JSON
    ("search-query-not-utf8", (*SEARCH[:1], "vit\udcffamin", *SEARCH[2:]),
     "query: expected UTF-8 text, got the byte 0xff at character 4"),
    ("context-query-not-utf8", ("context", "vit\udcffamin", "--index", "idx"),
     "query: expected UTF-8 text, got the byte 0xff"),
    ("bench-unknown", ("bench", "nosuch"), "nosuch"),
    ("bench-seed-negative", ("bench", "ra-rag-simulation", "--seed", "-1"),
     "Invalid value for '--seed': Input should be greater than or equal to 0, got '-1'"),
    ("bench-path-missing", ("bench", "trec2019-hm", "--path", "nope.csv"), "nope.csv"),
    ("bench-checkpoint-without-model", ("bench", "demo", "--checkpoint", "c.jsonl"),
     "--checkpoint"),
    ("serve-missing-index", ("serve", "--index", "nowhere"), "nowhere"),
    ("serve-key-env-unset", ("serve", "--index", "idx", "--api-key-env", "CREDRANK_NO_SUCH_VAR"),
     "CREDRANK_NO_SUCH_VAR"),
    ("serve-timeout-zero", ("serve", "--index", "idx", "--timeout", "0"), "timeout"),
    # the command groups
    ("reliability-missing", ("reliability", "estimate", "nope.csv"), "nope.csv"),
    ("reliability-unterminated-quote", ("reliability", "estimate", "answers.csv"),
     "answers.csv:2"),
    ("credibility-fit-missing", ("credibility", "fit", "nope.csv", "--index", "idx", "--out",
                                 "m.json"), "nope.csv"),
    ("stance-fit-missing", ("stance", "fit", "nope.csv", "--index", "idx", "--out", "m.json"),
     "nope.csv"),
    ("provenance-missing-index", ("provenance", "audit", "--index", "nowhere"), "nowhere"),
    ("provenance-half-life-bad", ("provenance", "audit", "--index", "idx", "--half-life", "x"),
     "--half-life"),
    ("audit-check-missing", ("audit", "check", "nope.toml"), "nope.toml"),
    ("audit-check-binary", ("audit", "check", "binary.json"), "binary.json"),
    ("audit-radar-missing", ("audit", "radar", "nope.toml", "--out", "radar"), "nope.toml"),
    ("audit-run-config-missing", ("audit", "--index", "idx", "--config", "nope.toml",
                                  "--out", "aud"), "nope.toml"),
    ("consensus-calibrate-missing", ("consensus", "calibrate", "nope.jsonl", "--index", "idx"),
     "nope.jsonl"),
    ("advise-profile-missing", ("advise", "nope.toml"), "nope.toml"),
    ("cram-answer-heads-missing", ("cram", "answer", "fever", "--index", "idx", "--heads",
                                   "nope.json"), "nope.json"),
    ("priors-show-missing", ("priors", "show", "nostore"), "nostore"),
    ("priors-update-missing-file", ("priors", "update", "nostore", "nope.jsonl"), "no"),
]


#: the cases run as a real process too: one of each way a command refuses (the three issue-23
#: reproductions run there repeatedly, below)
PROCESS_CASES = ("search-no-index", "search-missing-index", "search-top-k-zero",
                 "index-missing-corpus", "index-embedder-mismatch", "serve-key-env-unset",
                 "reliability-unterminated-quote", "audit-check-binary", "bench-unknown")


@pytest.mark.parametrize("name,args,expected", CASES, ids=[c[0] for c in CASES])
def test_error_path_exits_2_cleanly(workdir: Path, name: str, args: tuple[str, ...],
                                    expected: str) -> None:
    assert_clean_error(run_cli(*args, cwd=workdir), expected)


@needs_script
@pytest.mark.slow
@pytest.mark.parametrize("name,args,expected", [c for c in CASES if c[0] in PROCESS_CASES],
                         ids=[c[0] for c in CASES if c[0] in PROCESS_CASES])
def test_error_path_exits_2_cleanly_as_a_process(workdir: Path, name: str,
                                                 args: tuple[str, ...], expected: str) -> None:
    assert_clean_error(cli_process.run_cli(*args, cwd=workdir), expected)


def test_the_process_cases_are_in_the_matrix() -> None:
    assert set(PROCESS_CASES) <= {c[0] for c in CASES}


@needs_script
@pytest.mark.slow
@pytest.mark.parametrize("name,args,expected", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_reproductions_exit_2_every_time(workdir: Path, name: str, args: tuple[str, ...],
                                         expected: str) -> None:
    """The race of issue 23 (a model load overtaken by the error) in repeated runs of the
    console script."""
    for _ in range(4):
        assert_clean_error(cli_process.run_cli(*args, cwd=workdir), expected)


def test_help_lists_every_command_the_matrix_covers() -> None:
    """A new command gets a row here: the matrix names every command of ``credrank``."""
    from credrank.cli import COMMANDS

    covered = {args[0] for _, args, _ in CASES}
    assert set(COMMANDS) - covered <= {"models"}, set(COMMANDS) - covered


def test_markup_in_user_text_is_printed_as_written(tmp_path: Path) -> None:
    """``[/x]`` in a record, a path or an option value is text, never a console style tag."""
    (tmp_path / "in").mkdir()
    corpus = tmp_path / "in" / "[red]corp.jsonl"
    corpus.write_text(json.dumps({"id": "a[/x]", "text": "fever", "source_type": "[/x]"})
                      + "\n" + json.dumps({"id": "b", "text": "fever two"}) + "\n",
                      encoding="utf-8")
    proc = run_cli("index", "in/[red]corp.jsonl", "--index", "idx", "--embedder", "hashing",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "MarkupError" not in proc.stderr and "Traceback" not in proc.stderr
    assert "in/[red]corp.jsonl:1: field 'source_type'" in proc.stderr
    assert "got '[/x]'" in proc.stderr
    shutil.rmtree(tmp_path / "idx")
