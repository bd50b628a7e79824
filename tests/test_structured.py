"""The hardened reader of structured files (core.structured) and declared schemas
(core.schema): every bad input is an error naming the file and key path, never a traceback."""

from __future__ import annotations

import codecs
import time
from pathlib import Path

import pytest

from credrank.core.errors import FileFormatError
from credrank.core.schema import (
    AnyOf,
    Field,
    Flag,
    Integer,
    ListOf,
    MapOf,
    Nullable,
    Number,
    SchemaError,
    Table,
    Text,
)
from credrank.core.structured import (
    MAX_NESTING,
    csv_rows,
    json_too_deep,
    nesting_exceeds,
    parse_json,
    read_structured,
    yaml_flow_too_deep,
)
from credrank.core.validation import check_real

BILLION_LAUGHS = """a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def _write(tmp_path: Path, name: str, data: bytes | str) -> Path:
    p = tmp_path / name
    p.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return p


# -- the reader ------------------------------------------------------------------------------
@pytest.mark.parametrize("name,text", [("a.json", '{"x": 1}'), ("a.toml", "x = 1\n"),
                                       ("a.yaml", "x: 1\n"), ("a.yml", "x: 1\n")])
def test_reads_each_format(tmp_path: Path, name: str, text: str) -> None:
    assert read_structured(_write(tmp_path, name, text)) == {"x": 1}


def test_utf8_bom_is_accepted(tmp_path: Path) -> None:
    p = _write(tmp_path, "a.toml", codecs.BOM_UTF8 + b"x = 1\n")
    assert read_structured(p) == {"x": 1}


@pytest.mark.parametrize("data,expected", [
    (codecs.BOM_UTF16_LE + "x = 1".encode("utf-16-le"), "got UTF-16"),
    (b"x = 1\ny = \"\xff\"\n", "line 2, column 6: expected UTF-8 text, got the byte 0xff"),
    (b"\x00\x01\x02binary", "got a NUL byte"),
])
def test_not_utf8_is_an_error_naming_where(tmp_path: Path, data: bytes, expected: str) -> None:
    p = _write(tmp_path, "a.toml", data)
    with pytest.raises(FileFormatError, match=expected) as info:
        read_structured(p)
    assert str(p) in str(info.value)


def test_missing_folder_and_suffix(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match="does not exist"):
        read_structured(tmp_path / "nope.json")
    with pytest.raises(FileFormatError, match="got a directory"):
        read_structured(tmp_path, fmt="json")
    with pytest.raises(FileFormatError, match=r"ending in \.json or \.toml, got '\.txt'"):
        read_structured(_write(tmp_path, "a.txt", "{}"), formats=("json", "toml"))


def test_size_bound(tmp_path: Path) -> None:
    p = _write(tmp_path, "a.json", "[" + "1," * 100 + "1]")
    with pytest.raises(FileFormatError, match="at most 50 bytes"):
        read_structured(p, max_bytes=50)


@pytest.mark.parametrize("name,text", [
    ("a.json", "[" * 5000 + "]" * 5000),
    ("a.json", '{"a": ' * 40 + "1" + "}" * 40),
    ("a.toml", "x = " + "[" * 5000 + "]" * 5000),
    ("a.toml", "x = " + "[" * 40 + "]" * 40),
    ("a.toml", ".".join(["k"] * 40) + " = 1"),
    ("a.yaml", "[" * 5000 + "]" * 5000),
    ("a.yaml", "".join("  " * i + f"k{i}:\n" for i in range(40)) + "  " * 40 + "1\n"),
])
def test_nesting_is_bounded(tmp_path: Path, name: str, text: str) -> None:
    with pytest.raises(FileFormatError, match=f"at most {MAX_NESTING} levels deep"):
        read_structured(_write(tmp_path, name, text))


@pytest.mark.parametrize("name,text", [("a.json", "1" * 5000), ("a.toml", "x = " + "1" * 5000),
                                       ("a.yaml", "x: " + "1" * 5000)])
def test_integers_past_the_conversion_limit(tmp_path: Path, name: str, text: str) -> None:
    with pytest.raises(FileFormatError, match="at most 4,300 digits"):
        read_structured(_write(tmp_path, name, text))


@pytest.mark.parametrize("text,expected", [
    ('{"x": NaN}', "NaN"), ('{"x": Infinity}', "Infinity"), ('{"x": 1, "x": 2}', "'x' twice"),
    ('{"x": ', "column 7: expected JSON"),
])
def test_json_refusals(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(FileFormatError, match=expected):
        read_structured(_write(tmp_path, "a.json", text))


@pytest.mark.parametrize("text,where,path,came", [
    ('{"answer": 1e400}', "column 12", "answer", "inf"),
    ('[1, -1E+999]', "column 5", r"\[1\]", "-inf"),
    ('{"a": 1.5,\n "b": {"c": 1' + "0" * 400 + '.0}}', "line 2, column 13", r"b\.c", "inf"),
])
def test_json_numbers_beyond_the_float_range_are_refused(text: str, where: str, path: str,
                                                         came: str) -> None:
    # finding 8: 1e400 became inf (and an answer class "inf")
    with pytest.raises(FileFormatError, match=f"^f.jsonl:3: {where}: {path}: expected a finite "
                                              f"number, got {came} .*beyond the float range"):
        parse_json(text, "f.jsonl:3")


def test_json_numbers_in_range_and_strings_that_look_like_numbers_are_kept() -> None:
    assert parse_json('[1.5, -2e300, 1e-400, "1e400"]', "f") == [1.5, -2e300, 0.0, "1e400"]


def test_a_csv_header_naming_a_column_twice_is_refused() -> None:
    # finding 7: the later value silently replaced the earlier one
    rows = csv_rows(["question_id,source_id,answer,question_id\n", "q1,A,x,q2\n"], "a.csv")
    with pytest.raises(FileFormatError, match=r"^a\.csv:1: header: expected each column named "
                                              r"once, got 'question_id' twice \(columns 1 "
                                              r"and 4\)"):
        list(rows)
    # unnamed columns (a spreadsheet's trailing empty ones) are read by no name
    sheet = csv_rows(["question_id,source_id,answer,,\n", "q1,A,x,,\n"], "b.csv")
    assert [r["answer"] for _, r in sheet] == ["x"]


def test_billion_laughs_is_refused_at_once(tmp_path: Path) -> None:
    p = _write(tmp_path, "laughs.yaml", BILLION_LAUGHS)
    assert len(p.read_bytes()) < 600
    start = time.process_time()  # CPU time of this process: what the expansion would cost
    with pytest.raises(FileFormatError, match=r"line 2, column \d+: .*alias \(\*a\)"):
        read_structured(p)
    assert time.process_time() - start < 1.0


def test_yaml_anchor_without_alias_is_fine(tmp_path: Path) -> None:
    assert read_structured(_write(tmp_path, "a.yaml", "x: &v 1\n")) == {"x": 1}


def test_a_yaml_key_given_twice_is_refused_as_in_json(tmp_path: Path) -> None:
    """PyYAML kept the last of two equal keys without a word (JSON and TOML refuse them)."""
    with pytest.raises(FileFormatError, match=r"line 2, column 1: expected unique keys, got "
                                              r"'top_k' twice \(first at line 1\)"):
        read_structured(_write(tmp_path, "s.yaml", "top_k: 3\ntop_k: 4\n"))
    nested = "stages:\n  - stage: prior\n    floor: 0.1\n    floor: 0.2\n"
    with pytest.raises(FileFormatError, match="expected unique keys, got 'floor' twice"):
        read_structured(_write(tmp_path, "n.yaml", nested))
    assert read_structured(_write(tmp_path, "ok.yaml", "a: {x: 1}\nb: {x: 2}\n")) == {
        "a": {"x": 1}, "b": {"x": 2}}


def test_scanners() -> None:
    assert yaml_flow_too_deep("a: " + "[" * 40, 32)
    for quoted in ('a: "' + "[" * 40 + '"', "a: '" + "[" * 40 + "'", "# " + "[" * 40):
        assert not yaml_flow_too_deep(quoted, 32)
    assert not json_too_deep('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', 3)
    assert json_too_deep("[[[[1]]]]", 3)
    assert nesting_exceeds([[[[1]]]], 3) and not nesting_exceeds([[[1]]], 3)


# -- schemas ---------------------------------------------------------------------------------
MODEL = Table({
    "floor": Field(Number(0, 1)),
    "config": Field(Table({"groups": Field(ListOf(Text(choices=("cues", "url")), min_len=1)),
                           "l2": Field(Number(0), default=1.0)})),
    "weights": Field(ListOf(Number(), length=2)),
    "n": Field(Integer(1)),
    "flag": Field(Flag(), required=False),
    "name": Field(Nullable(Text()), default=None),
    "table": Field(MapOf(Number(0, 1)), default={}),
    "either": Field(AnyOf((Integer(), Text(choices=("all",)))), default="all"),
})
GOOD = {"floor": 0.3, "config": {"groups": ["cues"]}, "weights": [1, 2.5], "n": 3}


def test_schema_cleans_and_fills_defaults() -> None:
    out = MODEL.check(GOOD, "m.json")
    assert out["floor"] == 0.3 and out["config"] == {"groups": ["cues"], "l2": 1.0}
    assert out["weights"] == [1.0, 2.5] and isinstance(out["weights"][0], float)
    assert out["name"] is None and out["table"] == {} and out["either"] == "all"
    assert "flag" not in out


@pytest.mark.parametrize("patch,expected", [
    ({"floor": 10**400}, "m.json: floor: expected a finite number in [0, 1], got an integer of "
                         "401 digits"),
    ({"floor": True}, "m.json: floor: expected a finite number in [0, 1], got True"),
    ({"floor": "0.3"}, "m.json: floor: expected a finite number in [0, 1], got '0.3'"),
    ({"weights": [1, float("nan")]}, "m.json: weights[1]: expected a finite number, got nan"),
    ({"weights": [1]}, "m.json: weights: expected a list of 2 item(s), got a list of 1 item(s)"),
    ({"config": {"groups": [["cues"]]}},
     "m.json: config.groups[0]: expected one of cues, url, got a list of 1 item(s)"),
    ({"config": {"groups": [{"a": 1}]}},
     "m.json: config.groups[0]: expected one of cues, url, got a table with key(s) 'a'"),
    ({"config": {"groups": ["cues"], "l3": 1}},
     "m.json: config.l3: expected one of the known keys (groups, l2), got the unknown key 'l3'"),
    ({"n": 2.0}, "m.json: n: expected an integer >= 1, got 2.0"),
    ({"n": 10**30}, "m.json: n: expected an integer >= 1 within ±2**63, got an integer of 31 "
                 "digits"),
    ({"flag": 1}, "m.json: flag: expected true or false, got 1"),
    ({"table": {"a": 2}}, "m.json: table.a: expected a finite number in [0, 1], got 2"),
    ({"either": "some"}, "m.json: either: expected an integer or one of all, got 'some'"),
])
def test_schema_errors_name_the_key_path(patch: dict, expected: str) -> None:
    with pytest.raises(SchemaError) as info:
        MODEL.check({**GOOD, **patch}, "m.json")
    assert str(info.value) == expected


def test_schema_missing_key_and_own_error() -> None:
    bad = {k: v for k, v in GOOD.items() if k != "n"}
    with pytest.raises(KeyError) as info:
        MODEL.check(bad, "m.json", error=KeyError)
    assert "m.json: n: expected an integer >= 1, got nothing (the key is missing)" in str(
        info.value)
    with pytest.raises(SchemaError, match=r"^m\.json: \(top level\): expected a table, got "
                                          r"a list"):
        MODEL.check([1], "m.json")


def test_check_real_refuses_integers_beyond_float_range() -> None:
    with pytest.raises(ValueError, match="x: expected a finite number, got an integer of 401"):
        check_real("x", 10**400)


@pytest.mark.parametrize(("text", "said"), [
    ('{"stages":[', "column 12: expected JSON (a value), got the end of the text (cut short?)"),
    ('{"a" 1}', "column 6: expected JSON (':' after the key), got '1}'"),
    ("{'a': 1}", "column 2: expected JSON (a key in double quotes), got \"'a': 1}\""),
    ('{"a": 1} x', "column 10: expected JSON (nothing after the value), got 'x'"),
])
def test_a_json_error_says_what_was_expected_and_what_came(text: str, said: str) -> None:
    """The decoder's own words came after ours: "expected JSON, got expecting value"."""
    from credrank.core.structured import parse_json

    with pytest.raises(ValueError) as info:
        parse_json(text, "spec.json")
    assert str(info.value) == f"spec.json: {said}"
