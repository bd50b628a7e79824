"""The JSONL checkpoint of long benches: resume, settings check, damaged files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from credrank.evaluate.checkpoint import Checkpoint, CheckpointError

KEY = {"model": "m", "heads": [[0, 1]], "floor": 0.1}


def test_new_file_gets_header_and_items_survive_reopen(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "run.jsonl"
    ckpt = Checkpoint.open(path, "kind", KEY)
    assert ckpt.done == {}
    ckpt.append({"id": "q1", "texts": {"a": "x"}})
    ckpt.append({"id": "q2", "texts": {"a": "y"}})
    lines = path.read_text(encoding="utf-8").splitlines()
    assert json.loads(lines[0]) == {"checkpoint": "kind", "key": KEY}
    again = Checkpoint.open(path, "kind", dict(KEY))
    assert list(again.done) == ["q1", "q2"] and again.done["q2"]["texts"] == {"a": "y"}
    assert again.lines == {"q1": 2, "q2": 3} and not again.discarded_tail
    again.append({"id": "q3"})
    assert Checkpoint.open(path, "kind", KEY).lines["q3"] == 4


def test_other_settings_are_refused_with_the_fields_that_differ(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    Checkpoint.open(path, "kind", KEY)
    with pytest.raises(CheckpointError, match=r"line 1: .*floor: file has 0.1, this run has 0.2"):
        Checkpoint.open(path, "kind", {**KEY, "floor": 0.2})
    with pytest.raises(CheckpointError, match="extra"):
        Checkpoint.open(path, "kind", {**KEY, "extra": 1})
    with pytest.raises(CheckpointError, match="for 'kind', not 'other'"):
        Checkpoint.open(path, "other", KEY)


def test_a_cut_last_line_is_discarded_and_reported(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    ckpt = Checkpoint.open(path, "kind", KEY)
    ckpt.append({"id": "q1"})
    with path.open("a", encoding="utf-8") as fh:
        fh.write('{"id": "q2", "tex')  # the write an interruption cut short
    again = Checkpoint.open(path, "kind", KEY)
    assert list(again.done) == ["q1"] and again.discarded_tail
    again.append({"id": "q2"})
    assert list(Checkpoint.open(path, "kind", KEY).done) == ["q1", "q2"]


def test_a_complete_last_line_without_newline_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    Checkpoint.open(path, "kind", KEY).append({"id": "q1"})
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n"), encoding="utf-8")
    again = Checkpoint.open(path, "kind", KEY)
    assert list(again.done) == ["q1"] and not again.discarded_tail
    again.append({"id": "q2"})
    assert list(Checkpoint.open(path, "kind", KEY).done) == ["q1", "q2"]


@pytest.mark.parametrize(("body", "match"), [
    ('{"id": "q1"}\nnot json\n{"id": "q2"}\n', "line 3: column 1: expected JSON"),
    ('{"id": "q1"}\n{"id": "q1"}\n', r"line 3: id: .*'q1' \(already on line 2\)"),
    ('{"texts": {}}\n', r"line 2: id: expected a string, got nothing \(the key is missing\)"),
    ('[1, 2]\n', r"line 2: \(top level\): expected an item \{\"id\": ID"),
    ('{"id": "q1"}\n{"id": "q2", "x": NaN}\n',
     r"line 3: column \d+: expected a finite number, got NaN"),
])
def test_damaged_middle_lines_are_errors_naming_the_line(tmp_path: Path, body: str,
                                                         match: str) -> None:
    path = tmp_path / "run.jsonl"
    Checkpoint.open(path, "kind", KEY)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(body)
    with pytest.raises(CheckpointError, match=match):
        Checkpoint.open(path, "kind", KEY)


def test_bad_header_and_duplicate_append(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text('{"id": "q1"}\n', encoding="utf-8")
    with pytest.raises(CheckpointError, match="line 1: checkpoint: expected the kind of the "
                                              "header"):
        Checkpoint.open(path, "kind", KEY)
    path.write_bytes(b'\xff\xfe\n')
    with pytest.raises(CheckpointError, match="UTF-8"):
        Checkpoint.open(path, "kind", KEY)
    ckpt = Checkpoint.open(tmp_path / "new.jsonl", "kind", KEY)
    ckpt.append({"id": "q1"})
    with pytest.raises(CheckpointError, match="already on line 2"):
        ckpt.append({"id": "q1"})
    with pytest.raises(CheckpointError, match="string 'id'"):
        ckpt.append({"id": 3})
    with pytest.raises(ValueError):
        ckpt.append({"id": "q9", "x": float("nan")})


def test_a_last_line_cut_inside_a_character_is_discarded(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    Checkpoint.open(path, "kind", KEY).append({"id": "q1", "text": "東京"})
    with path.open("ab") as fh:
        fh.write('{"id": "q2", "text": "東'.encode()[:-1])  # half of a 3-byte character
    again = Checkpoint.open(path, "kind", KEY)
    assert list(again.done) == ["q1"] and again.discarded_tail
    assert again.done["q1"]["text"] == "東京"
    again.append({"id": "q2"})
    assert list(Checkpoint.open(path, "kind", KEY).done) == ["q1", "q2"]
