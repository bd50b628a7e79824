"""ANSWERS and TRUTH files: parsing, abstentions and clear errors."""

from __future__ import annotations

import gzip
import json

import pytest

from credrank.reliability.answers import (
    AnswersFileError,
    AnswerTable,
    load_answers,
    load_truth,
)

CSV = """question_id,source_id,answer
q1,s1,Paris
q1,s2,I don't know
q2,s1,
q2,s3,Lyon
q3,s2,IDK
"""


def test_csv_answers_and_abstentions(write):
    table = load_answers(write("a.csv", CSV))
    assert table.source_ids == ("s1", "s2", "s3")
    assert table.question_ids == ("q1", "q2", "q3")
    m = table.to_mapping()
    assert m == {"s1": {"q1": "Paris"}, "s2": {}, "s3": {"q2": "Lyon"}}
    assert table.answers[0] == ("Paris", None, None)


def test_jsonl_answers_with_null_and_gzip(write):
    rows = [{"question_id": "q1", "source_id": "s1", "answer": "Paris"},
            {"question_id": 2, "source_id": "s2", "answer": None}]
    text = "\n".join(json.dumps(r) for r in rows) + "\n\n"
    table = load_answers(write("a.jsonl", text))
    assert table.question_ids == ("q1", "2")
    assert table.answers[1] == (None, None)
    gz = write("b.jsonl.gz", gzip.compress(text.encode()))
    assert load_answers(gz) == table


@pytest.mark.parametrize(("name", "content", "needle"), [
    ("a.csv", "question_id,source\nq1,s1\n", "a.csv:1: header"),
    ("a.csv", "question_id,source_id,answer\nq1,s1,x\nq1,s1,y\n",
     "a.csv:3: fields 'question_id','source_id': duplicate pair ('q1', 's1'), "
     "first seen on line 2"),
    ("a.csv", "question_id,source_id,answer\nq1,,x\n", "a.csv:2: field 'source_id'"),
    ("a.csv", "question_id,source_id,answer\nq1,s1,x,extra\n", "a.csv:2: row has more values"),
    # a row cut before its answer was a silent abstention: refused, naming the field
    ("a.csv", "question_id,source_id,answer\nq1,s1,x\nq2,s1\n",
     "a.csv:3: field 'answer': missing; the row ends after 2 of the header's 3 values"),
    ("a.csv", "answer,question_id,source_id\nx,q1\n", "a.csv:2: field 'source_id': missing"),
    ("a.jsonl", '{"question_id": "q1", "source_id": "s1"}\n', "a.jsonl:1: field 'answer': missing"),
    ("a.jsonl", '\n{"question_id": "q1", "source_id": "s1", "answer": [1]}\n',
     "a.jsonl:2: field 'answer': expected a string"),
    ("a.jsonl", "{not json}\n", "a.jsonl:1: column 2: expected JSON"),
    ("a.jsonl", "[1, 2]\n", "a.jsonl:1: expected a JSON object"),
    ("a.txt", "x", "unsupported file type '.txt'"),
    ("a.csv", "question_id,source_id,answer\n", "no answer rows"),
])
def test_answer_file_errors_name_file_line_and_field(write, name, content, needle):
    with pytest.raises(AnswersFileError) as err:
        load_answers(write(name, content))
    assert needle in str(err.value)


def test_missing_file(tmp_path):
    with pytest.raises(AnswersFileError, match="no such file"):
        load_answers(tmp_path / "nope.csv")


def test_an_empty_trailing_answer_is_still_an_abstention(write):
    """``q2,s1,`` (the value written, empty) abstains; only a row cut before it is refused."""
    table = load_answers(write("a.csv", "question_id,source_id,answer\nq1,s1,x\nq2,s1,\n"))
    assert table.answers[0] == ("x", None)


def test_a_truth_row_cut_before_its_answer_is_refused(write):
    with pytest.raises(AnswersFileError, match=r"t\.csv:3: field 'answer': missing"):
        load_truth(write("t.csv", "question_id,answer\nq1,Paris\nq2\n"))


def test_truth_file(write):
    truth = load_truth(write("t.csv", "question_id,answer\nq1,Paris\nq2,Lyon\n"))
    assert truth == {"q1": "Paris", "q2": "Lyon"}
    with pytest.raises(AnswersFileError, match=r"t2\.csv:3: field 'question_id': duplicate 'q1'"):
        load_truth(write("t2.csv", "question_id,answer\nq1,Paris\nq1,Lyon\n"))
    with pytest.raises(AnswersFileError, match=r"t3\.csv:2: field 'answer': expected a known"):
        load_truth(write("t3.csv", "question_id,answer\nq1,IDK\n"))


def test_table_from_records_rejects_duplicates():
    with pytest.raises(ValueError, match="duplicate answer"):
        AnswerTable.from_records([("q1", "s1", "a"), ("q1", "s1", "b")])


UNTERMINATED = ('question_id,source_id,answer\nq1,s1,Paris\nq1,s2,"Lyon\n'
                'q1,s3,Paris\nq2,s1,Rome\nq2,s2,Rome\n')


def test_csv_unterminated_quote_is_an_error_naming_its_line(write):
    # the old reader silently made rows 4-6 part of s2's answer to q1
    path = write("a.csv", UNTERMINATED)
    with pytest.raises(AnswersFileError, match=r"a\.csv:3: expected well-formed CSV.*"
                                               r"unterminated quote"):
        load_answers(path)
    truth = write("t.csv", 'question_id,answer\nq1,"Paris\nq2,Rome\n')
    with pytest.raises(AnswersFileError, match=r"t\.csv:2: .*unterminated quote"):
        load_truth(truth)


def test_csv_newline_inside_a_quoted_field_is_an_error(write):
    path = write("a.csv", 'question_id,source_id,answer\nq1,s1,"Pa\nris"\nq2,s1,Rome\n')
    with pytest.raises(AnswersFileError,
                       match=r"a\.csv:2: field 'answer': expected a value on one line"):
        load_answers(path)


def test_csv_quoted_fields_on_one_line_still_work(write):
    path = write("a.csv", 'question_id,source_id,answer\r\nq1,s1,"Paris, France"\r\n'
                          'q1,"s2",""\r\nq2,s1,x\r\n')
    table = load_answers(path)
    assert table.to_mapping() == {"s1": {"q1": "Paris, France", "q2": "x"}, "s2": {}}


def test_truncated_gzip_answers_is_an_error(write):
    data = gzip.compress(CSV.encode() * 50)
    with pytest.raises(AnswersFileError, match=r"a\.csv\.gz: expected a complete gzip"):
        load_answers(write("a.csv.gz", data[: len(data) // 2]))


def test_a_header_naming_a_column_twice_is_refused(tmp_path):
    # finding 7: the later 'question_id' silently won (the consensus was {"q2": "x"})
    path = tmp_path / "duphdr.csv"
    path.write_text("question_id,source_id,answer,question_id\nq1,A,x,q2\n", encoding="utf-8")
    with pytest.raises(AnswersFileError, match=r"duphdr\.csv:1: header: expected each column "
                                               r"named once, got 'question_id' twice"):
        load_answers(path)


def test_a_number_beyond_the_float_range_is_refused(tmp_path):
    # finding 8: 1e400 became the answer class "inf"
    path = tmp_path / "big.jsonl"
    path.write_text('{"question_id": "q1", "source_id": "A", "answer": 1e400}\n',
                    encoding="utf-8")
    with pytest.raises(AnswersFileError, match=r"big\.jsonl:1: column \d+: answer: expected a "
                                               r"finite number, got inf"):
        load_answers(path)
