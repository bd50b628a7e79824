"""``reliability estimate`` command: table, stable JSON, truth accuracy, copies, errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from credrank.cli.reliability import app

runner = CliRunner()

# the hand-computed five-source case of test_reliability_estimate, plus a mute source
ROWS = {
    "A": ["1", "1", "1", "1", "y"],
    "B": ["1", "1", "1", "1", "y"],
    "C": ["1", "2", "2", "1", "x"],
    "D": ["2", "1", "3", "1", "x"],
    "E": ["3", "3", "1", "2", "x"],
    "M": ["IDK", "", "I don't know", "idk", "IDK"],
}


@pytest.fixture
def answers_csv(write):
    lines = ["question_id,source_id,answer"]
    for s, row in ROWS.items():
        lines += [f"Q{j + 1},{s},{a}" for j, a in enumerate(row)]
    return write("answers.csv", "\n".join(lines) + "\n")


@pytest.fixture
def truth_csv(write):
    return write("truth.csv", "question_id,answer\nQ1,1\nQ2,1\nQ3,1\nQ4,1\nQ5,y\n")


def test_json_document(answers_csv, truth_csv):
    res = runner.invoke(app, ["estimate", str(answers_csv), "--json", "--truth", str(truth_csv)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    # the marker first, as every credrank JSON document (docs/json.md); it had none
    assert list(doc)[:2] == ["credrank_reliability_estimate", "answers"]
    assert doc["credrank_reliability_estimate"] == 1
    by_id = {s["source_id"]: s for s in doc["sources"]}
    assert [s["source_id"] for s in doc["sources"]] == list(ROWS)
    # S = 6 sources here, so v = 6 r − 1
    assert by_id["A"]["reliability"] == 1.0 and by_id["A"]["weight"] == 5.0
    assert by_id["E"]["reliability"] == pytest.approx(0.2)
    assert by_id["M"]["known"] is False and by_id["M"]["reliability"] is None
    assert by_id["M"]["answered"] == 0 and by_id["M"]["truth_accuracy"] is None
    assert by_id["C"]["coverage"] == 5 and by_id["C"]["truth_accuracy"] == pytest.approx(0.4)
    assert doc["consensus"] == {"Q1": "1", "Q2": "1", "Q3": "1", "Q4": "1", "Q5": "y"}
    assert doc["truth"]["consensus_accuracy"] == 1.0
    assert doc["truth"]["majority_accuracy"] == pytest.approx(0.8)       # majority says x
    assert doc["converged"] and doc["n_iter"] >= 1
    assert set(doc) >= {"n_sources", "n_questions", "n_ballots", "clip", "collapse_copies",
                        "clusters", "dependence_pairs", "diagnostics", "equivalence"}


def test_clip_flag(answers_csv):
    doc = json.loads(runner.invoke(app, ["estimate", str(answers_csv), "--json", "--clip"]).stdout)
    assert doc["clip"] is True
    assert all(s["weight"] is None or s["weight"] >= 0 for s in doc["sources"])


def test_rich_table(answers_csv, truth_csv):
    res = runner.invoke(app, ["estimate", str(answers_csv), "--truth", str(truth_csv)])
    assert res.exit_code == 0, res.output
    for needle in ("Source reliability", "unknown", "against truth", "1.000"):
        assert needle in res.stdout


def test_collapse_copies(write):
    lines = ["question_id,source_id,answer"]
    for j in range(12):
        truth, fake = f"t{j}", ("fake" if j % 3 == 0 else f"t{j}")
        for i in range(3):
            lines.append(f"q{j},honest{i},{truth if (i + j) % 5 else 'w' + str(i)}")
        lines += [f"q{j},sybil{i},{fake}" for i in range(5)]
    path = write("attack.csv", "\n".join(lines) + "\n")
    plain = json.loads(runner.invoke(app, ["estimate", str(path), "--json"]).stdout)
    assert plain["clusters"] == [[f"sybil{i}" for i in range(5)]]
    assert plain["consensus"]["q0"] == "fake"
    # the farm found and not collapsed: the diagnostics said the consensus was trustworthy
    assert plain["diagnostics"]["trustworthy"] is False
    assert any("5 sources form 1 dependence cluster" in w and "--collapse-copies" in w
               for w in plain["diagnostics"]["warnings"])
    fixed = json.loads(runner.invoke(app, ["estimate", str(path), "--json",
                                           "--collapse-copies"]).stdout)
    assert fixed["n_ballots"] == 4 and fixed["consensus"]["q0"] == "t0"
    assert not any("dependence cluster" in w for w in fixed["diagnostics"]["warnings"])
    sybils = [s for s in fixed["sources"] if s["source_id"].startswith("sybil")]
    assert len({s["reliability"] for s in sybils}) == 1 and sybils[0]["cluster"] == 0


def test_aliases_option(write):
    path = write("a.csv", "question_id,source_id,answer\nq1,s1,NYC\nq1,s2,New York City\n"
                          "q1,s3,Boston\n")
    aliases = write("al.json", json.dumps({"New York City": ["NYC"]}))
    doc = json.loads(runner.invoke(app, ["estimate", str(path), "--json", "--aliases",
                                         str(aliases)]).stdout)
    assert doc["consensus"] == {"q1": "new york city"}


def test_errors_exit_2_with_location(write):
    bad = write("bad.csv", "question_id,source_id,answer\nq1,s1,x\nq1,s1,y\n")
    res = runner.invoke(app, ["estimate", str(bad)])
    assert res.exit_code == 2
    assert "bad.csv:3" in res.output and "duplicate pair" in res.output
    res = runner.invoke(app, ["estimate", str(bad.parent / "missing.csv")])
    assert res.exit_code == 2 and "no such file" in res.output


def test_unterminated_quote_exits_2_naming_file_and_line(write):
    # before: exit 0 with n_sources 1, the following rows absorbed into one answer
    path = write("bad.csv", 'question_id,source_id,answer\nQ1,A,"1\nQ1,B,1\nQ1,C,2\n'
                            'Q2,A,1\nQ2,B,1\n')
    res = runner.invoke(app, ["estimate", str(path), "--json"])
    assert res.exit_code == 2, res.output
    out = " ".join(res.output.split())
    assert "error:" in out and "bad.csv:2:" in out and "unterminated quote" in out


def test_one_source_is_not_trustworthy(write):
    # issue 9: a one-source file said trustworthy: true without a warning
    lines = ["question_id,source_id,answer"] + [f"q{j},only,a{j}" for j in range(6)]
    path = write("one.csv", "\n".join(lines) + "\n")
    res = runner.invoke(app, ["estimate", str(path), "--json"])
    assert res.exit_code == 0, res.output
    diag = json.loads(res.stdout)["diagnostics"]
    assert diag["trustworthy"] is False and diag["too_few_sources"] is True
    assert diag["n_sources"] == 1 and "need >= 3" in diag["warnings"][0]
    assert "warning:" in res.stderr and "not trustworthy" in res.stderr
    table = runner.invoke(app, ["estimate", str(path)])
    assert table.exit_code == 0 and "warning:" in table.stderr
    assert "no warning" not in table.stdout


def test_several_sources_print_no_source_count_warning(answers_csv):
    res = runner.invoke(app, ["estimate", str(answers_csv), "--json"])
    assert json.loads(res.stdout)["diagnostics"]["too_few_sources"] is False
    assert "need >= 3" not in res.stderr


def test_a_directory_is_not_reported_as_missing(tmp_path, answers_csv):
    # it said "error: DIR: no such file"
    res = runner.invoke(app, ["estimate", str(tmp_path)])
    assert res.exit_code == 2
    assert f"error: {tmp_path}: expected a file, got a directory" in " ".join(res.output.split())
    truth = runner.invoke(app, ["estimate", str(answers_csv), "--truth", str(tmp_path)])
    said = " ".join(truth.output.split())
    assert truth.exit_code == 2 and f"--truth {tmp_path}: expected a file, got a directory" in said
    (tmp_path / "t.csv").write_text("x\n", encoding="utf-8")
    header = runner.invoke(app, ["estimate", str(answers_csv), "--truth", str(tmp_path / "t.csv")])
    assert header.exit_code == 2 and f"--truth {tmp_path / 't.csv'}:1: header" in " ".join(
        header.output.split())


@pytest.mark.parametrize(("args", "message"), [
    (["--tol", "0"], "error: --tol: expected a finite number > 0, got 0.0"),
    (["--tol", "nan"], "error: --tol: expected a finite number > 0, got nan"),
    (["--max-iter", "0"], "error: --max-iter: expected an integer >= 1, got 0"),
    (["--start", "first"], "error: --start: expected one of majority, plurality, got"),
])
def test_bad_options_are_named_as_options(answers_csv, args, message):
    # they were named as the estimator's parameters: "error: tol: …", "max_iter:", "start:"
    res = runner.invoke(app, ["estimate", str(answers_csv), "--json", *args])
    assert res.exit_code == 2
    assert res.stdout == ""
    assert message in " ".join(res.output.split())


def _estimate_with_aliases(tmp_path: Path, aliases_json: str) -> tuple[Path, Any]:
    """``reliability estimate`` of a one-row answers file with ``aliases_json`` as
    ``--aliases``: the aliases file and the result."""
    answers = tmp_path / "ans.csv"
    answers.write_text("question_id,source_id,answer\nq1,s1,Paris\n", encoding="utf-8")
    aliases = tmp_path / "al.json"
    aliases.write_text(aliases_json, encoding="utf-8")
    return aliases, runner.invoke(app, ["estimate", str(answers), "--aliases", str(aliases)])


def test_an_alias_listed_under_two_answers_names_the_aliases_file(tmp_path):
    aliases, res = _estimate_with_aliases(tmp_path, '{"Paris": ["paris"], "London": ["paris"]}')
    assert res.exit_code == 2
    assert f"{aliases}: aliases: 'paris'" in " ".join(res.output.split())


def test_reads_labels_says_whether_a_truth_file_was_read(answers_csv, truth_csv):
    # finding 5: the document did not say that --truth reads evaluation labels
    plain = json.loads(runner.invoke(app, ["estimate", str(answers_csv), "--json"]).stdout)
    scored = json.loads(runner.invoke(app, ["estimate", str(answers_csv), "--json", "--truth",
                                            str(truth_csv)]).stdout)
    assert plain["reads_labels"] is False and "truth" not in plain
    assert scored["reads_labels"] is True and "truth" in scored
    # reading the truth scores only: the estimates are those of the run without it
    assert scored["consensus"] == plain["consensus"]
    assert [s["reliability"] for s in scored["sources"]] == \
        [s["reliability"] for s in plain["sources"]]


def test_aliases_errors_name_the_option(tmp_path):
    aliases, res = _estimate_with_aliases(tmp_path, '{"paris": "x"}')
    assert res.exit_code == 2
    said = " ".join(res.output.split())
    assert said.startswith(f"error: --aliases {aliases}:") and "expected a list" in said


def test_text_output_says_why_no_round_ran(write):
    path = write("split.csv", "question_id,source_id,answer\nq1,A,x\nq1,B,y\nq2,A,u\nq2,B,v\n")
    res = runner.invoke(app, ["estimate", str(path)])
    assert res.exit_code == 0
    said = " ".join(res.stdout.split())
    assert "IWMV: 0 rounds" in said and "no weighted round ran" in said


def test_rounds_that_do_not_converge_are_said(write):
    """Hitting --max-iter without converging said nothing (converged=false in the table's
    footer and the JSON only): the reliabilities are the last round's."""
    lines = ["question_id,source_id,answer"]
    for j in range(12):
        for i in range(4):
            lines.append(f"q{j},s{i},{'a' if (i + j) % 3 else 'b'}")
    path = write("slow.csv", "\n".join(lines) + "\n")
    once = runner.invoke(app, ["estimate", str(path), "--json", "--max-iter", "1",
                               "--tol", "1e-12"])
    assert json.loads(once.stdout)["converged"] is False
    assert "did not converge within --max-iter 1" in once.stderr
    enough = runner.invoke(app, ["estimate", str(path), "--json"])
    assert json.loads(enough.stdout)["converged"] and "did not converge" not in enough.stderr
