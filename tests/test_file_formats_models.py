"""Hostile inputs to the model-side structured files (issue 23): the credibility model, the
stance model, the CrAM heads file, the reliability estimate, the labels CSV and the stance
pairs CSV.

Every reader must answer a broken file with its own ``ValueError`` subclass whose message
starts with the file's path and names the key path (JSON) or the line (CSV); nothing else may
escape (no ``OverflowError``, ``TypeError``, ``RecursionError``, ``UnicodeDecodeError``), and
the commands that read these files exit 2 with ``error:`` and no traceback.
"""

from __future__ import annotations

import codecs
import csv
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_inprocess import assert_clean_error, run_cli
from credrank.core.errors import FileFormatError
from credrank.cram.headsfile import HeadsFile, HeadsFileError, ModelInfo, load_heads
from credrank.credibility.features import CUE_NAMES, URL_NAMES, cue_patterns_hash
from credrank.credibility.labels import read_labels
from credrank.credibility.modelfile import ModelFileError
from credrank.credibility.modelfile import load_model as load_credibility_model
from credrank.reliability.prior import read_estimate
from credrank.signals.stance import StanceModelError, read_pairs
from credrank.signals.stance import load_model as load_stance_model
from credrank.signals.stance_model import lexicon_hash

BIG = 10**400  # a 401-digit integer: beyond the float range
HUGE = "7" * 5000  # a 5,000-digit integer literal: beyond Python's int conversion limit
_SENTINEL = "@@RAW@@"


# ---------------------------------------------------------------- valid documents


def credibility_doc() -> dict[str, Any]:
    """A valid credibility model (cues + url groups) written by hand."""
    width = len(CUE_NAMES) + len(URL_NAMES)
    return {"credrank_credibility_model": 1, "created_by": "credrank test",
            "features": {"groups": ["cues", "url"], "cues": list(CUE_NAMES),
                         "url": list(URL_NAMES), "head_words": 200,
                         "cue_patterns_sha256": cue_patterns_hash()},
            "config": {"groups": ["cues", "url"], "l2": 10.0},
            "logistic": {"weights": [0.1] * width, "bias": 0.0, "mean": [0.0] * width,
                         "scale": [1.0] * width, "l2": 10.0},
            "embedder": {"name": "hashing", "dim": 256},
            "training": {"sha256": "0" * 64, "n_pages": 10, "n_groups": 3, "group_by": "topic"},
            "metrics": {"cv_auc": 0.7}, "floor": 0.3}


def stance_doc() -> dict[str, Any]:
    """A valid stance model (lexical cues only) written by hand."""
    return {"credrank_stance_model": 1, "created_by": "credrank test",
            "features": {"k_sentences": 3, "max_words": 60, "use_embedding": False,
                         "use_interaction": False, "use_anchors": False, "use_cues": True,
                         "blocks": [["cues", 6]], "n_columns": 6,
                         "lexicon_sha256": lexicon_hash()},
            "settings": {"l2": 1.0, "interaction": False},
            "logistic": {"weights": [0.5] * 6, "bias": 0.0, "mean": [0.0] * 6,
                         "scale": [1.0] * 6, "l2": 1.0},
            "embedder": {"name": "hashing", "dim": 256},
            "training": {"sha256": "0" * 64, "n_pairs": 10, "n_topics": 3, "rows": {}},
            "metrics": {}}


#: the training provenance of a format-2 model file (credrank.learn.modelfile)
PROVENANCE = {"estimator": "logistic", "selection": "nested grouped CV, highest pooled "
              "out-of-fold AUC", "cv": "leave-one-group-out", "n_folds": 3, "group_by": "topic",
              "seed": 0, "n_boot": 2000, "configs": [{"groups": ["cues", "url"], "l2": 10.0}]}


def credibility_doc_v2() -> dict[str, Any]:
    """The valid credibility model in format 2 (format 1 and ``provenance``)."""
    return {**credibility_doc(), "credrank_credibility_model": 2,
            "provenance": json.loads(json.dumps(PROVENANCE))}


def stance_doc_v2() -> dict[str, Any]:
    """The valid stance model in format 2 (format 1 and ``provenance``)."""
    return {**stance_doc(), "credrank_stance_model": 2,
            "provenance": json.loads(json.dumps(PROVENANCE))}


def heads_doc() -> dict[str, Any]:
    """A valid heads file of a 2-layer × 4-head model."""
    return HeadsFile(model=ModelInfo("tiny-llama", "llama", 2, 4),
                     prompt_template="credrank-cram-qa-v1", heads=((0, 1), (1, 2)),
                     ie=[[0.0, 0.5, 0.1, 0.2], [0.3, 0.0, 0.9, 0.1]],
                     ie_log=[[0.0, 0.1, 0.2, 0.3], [0.4, 0.5, 0.6, 0.7]],
                     validation_curve=[{"n_heads": 2, "mean_p_wrong": 0.1}], n_calib=2,
                     n_valid=2, data="slice.jsonl", data_sha256="0" * 64, floor=0.1, seed=0,
                     calibration_ids=("q0", "q1"), validation_ids=("q2", "q3"),
                     extra={"method": "exact"}).to_json()


def estimate_doc() -> dict[str, Any]:
    """A valid ``credrank reliability estimate --json`` document (the keys the prior reads)."""
    return {"answers": "a.csv", "n_sources": 2, "sources": [
        {"source_id": "s1", "known": True, "reliability": 0.8, "coverage": 5, "weight": 0.6},
        {"source_id": "s2", "known": False, "reliability": None, "coverage": 0}]}


#: format → (valid document, reader, its error class)
FORMATS: dict[str, tuple[Callable[[], dict[str, Any]], Callable[[Path], Any], type]] = {
    "credibility": (credibility_doc, load_credibility_model, ModelFileError),
    "stance": (stance_doc, load_stance_model, StanceModelError),
    "credibility-2": (credibility_doc_v2, load_credibility_model, ModelFileError),
    "stance-2": (stance_doc_v2, load_stance_model, StanceModelError),
    "heads": (heads_doc, load_heads, HeadsFileError),
    "estimate": (estimate_doc, read_estimate, FileFormatError),
}

#: format → its numeric fields, as key paths
NUMERIC = {
    "credibility": ["credrank_credibility_model", "floor", "config.l2", "logistic.bias",
                    "logistic.l2", "logistic.weights[0]", "logistic.mean[3]",
                    "logistic.scale[0]", "features.head_words", "embedder.dim",
                    "training.n_pages", "training.n_groups"],
    "stance": ["credrank_stance_model", "features.k_sentences", "features.max_words",
               "features.n_columns", "features.blocks[0][1]", "settings.l2",
               "logistic.weights[0]", "logistic.mean[5]", "logistic.scale[0]", "logistic.bias",
               "logistic.l2", "embedder.dim", "training.n_pairs", "training.n_topics"],
    "credibility-2": ["credrank_credibility_model", "provenance.n_folds", "provenance.seed",
                      "provenance.n_boot", "logistic.bias"],
    "stance-2": ["credrank_stance_model", "provenance.seed", "provenance.n_folds",
                 "provenance.n_boot", "settings.l2"],
    "heads": ["credrank_cram_heads", "model.n_layers", "model.n_heads", "heads[0][0]",
              "heads[1][1]", "ie[0][0]", "ie[1][3]", "ie_log[0][2]",
              "validation_curve[0].n_heads", "validation_curve[0].mean_p_wrong", "n_calib",
              "n_valid", "floor", "seed"],
    "estimate": ["sources[0].reliability", "sources[0].coverage"],
}

#: format → (key path, a list or table where a string is expected)
NOT_A_STRING = {
    "credibility": [("embedder.name", ["hashing"]), ("features.groups[0]", ["cues"]),
                    ("training.group_by", {"topic": 1}), ("created_by", {"a": 1})],
    "stance": [("embedder.name", ["hashing"]), ("features.lexicon_sha256", {"a": 1}),
               ("features.blocks[0][0]", ["cues"]), ("training.sha256", [])],
    "credibility-2": [("provenance.estimator", ["logistic"]), ("provenance.cv", {"a": 1}),
                      ("provenance.group_by", [])],
    "stance-2": [("provenance.selection", ["x"]), ("provenance.estimator", {"a": 1})],
    "heads": [("model.name", {"a": 1}), ("prompt_template", ["x"]), ("data", []),
              ("calibration_ids[0]", ["q0"])],
    "estimate": [("sources[0].source_id", ["s1"]), ("sources[1].source_id", {"id": "s2"})],
}

#: format → key paths where an unknown key is added
UNKNOWN_KEYS = {
    "credibility": ["bogus", "logistic.bogus", "features.bogus", "training.bogus"],
    "stance": ["bogus", "settings.bogus", "embedder.bogus", "features.bogus"],
    "credibility-2": ["bogus", "provenance.bogus", "training.bogus"],
    "stance-2": ["bogus", "provenance.bogus"],
    "heads": ["bogus", "model.bogus"],
}


# ---------------------------------------------------------------- helpers


def _keys(path: str) -> list[str | int]:
    return [int(k[1:-1]) if k.startswith("[") else k
            for k in re.findall(r"\[\d+\]|[^.\[\]]+", path)]


def _set(doc: Any, path: str, value: Any) -> Any:
    *parents, last = _keys(path)
    node = doc
    for k in parents:
        node = node[k]
    node[last] = value
    return doc


def _write_json(tmp_path: Path, doc: Any, raw: str | None = None, name: str = "f.json") -> Path:
    """``doc`` as JSON; the string :data:`_SENTINEL` in it is replaced by ``raw``."""
    text = json.dumps(doc)
    if raw is not None:
        text = text.replace(json.dumps(_SENTINEL), raw)
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _refused(reader: Callable[[Path], Any], path: Path, error: type, *needles: str) -> str:
    """The reader's error: of class ``error``, starting with the path, holding ``needles``."""
    with pytest.raises(error) as info:
        reader(path)
    message = str(info.value)
    assert message.startswith(str(path)), message
    for needle in needles:
        assert needle in message, (needle, message)
    return message


@pytest.fixture(autouse=True)
def default_csv_field_limit() -> Iterator[None]:
    """The csv module's default field limit (another module of the test process may have
    raised the process-wide limit)."""
    old = csv.field_size_limit(131072)
    yield
    csv.field_size_limit(old)


# ---------------------------------------------------------------- JSON formats


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_valid_document_loads_and_a_utf8_bom_is_accepted(tmp_path: Path, fmt: str) -> None:
    make, reader, _ = FORMATS[fmt]
    reader(_write_json(tmp_path, make()))
    bom = tmp_path / "bom.json"
    bom.write_bytes(codecs.BOM_UTF8 + json.dumps(make()).encode("utf-8"))
    reader(bom)


@pytest.mark.parametrize(("fmt", "key"), [(f, k) for f, keys in NUMERIC.items() for k in keys])
def test_a_401_digit_integer_names_the_key(tmp_path: Path, fmt: str, key: str) -> None:
    make, reader, error = FORMATS[fmt]
    path = _write_json(tmp_path, _set(make(), key, BIG))
    _refused(reader, path, error, f"{key}: expected ", "got an integer of 401 digits")


@pytest.mark.parametrize(("fmt", "key"), [(f, k) for f, keys in NUMERIC.items() for k in keys])
def test_a_5000_digit_integer_is_refused(tmp_path: Path, fmt: str, key: str) -> None:
    make, reader, error = FORMATS[fmt]
    path = _write_json(tmp_path, _set(make(), key, _SENTINEL), HUGE)
    _refused(reader, path, error, "expected a number of at most 4,300 digits")


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_nan_and_infinity_literals_are_refused(tmp_path: Path, fmt: str, literal: str) -> None:
    make, reader, error = FORMATS[fmt]
    key = NUMERIC[fmt][-1]
    path = _write_json(tmp_path, _set(make(), key, _SENTINEL), literal)
    _refused(reader, path, error, literal.lstrip("-"), "expected a finite number")


@pytest.mark.parametrize("fmt", ["credibility", "stance", "heads"])
def test_a_float_beyond_the_range_names_the_key(tmp_path: Path, fmt: str) -> None:
    make, reader, error = FORMATS[fmt]
    key = {"credibility": "logistic.bias", "stance": "logistic.bias", "heads": "ie[0][0]"}[fmt]
    path = _write_json(tmp_path, _set(make(), key, _SENTINEL), "1e400")
    _refused(reader, path, error, f"{key}: expected a finite number", "got inf")


@pytest.mark.parametrize(("fmt", "key", "value"),
                         [(f, k, v) for f, pairs in NOT_A_STRING.items() for k, v in pairs])
def test_a_list_or_table_where_a_string_is_expected(tmp_path: Path, fmt: str, key: str,
                                                    value: Any) -> None:
    make, reader, error = FORMATS[fmt]
    path = _write_json(tmp_path, _set(make(), key, value))
    kind = "got a list" if isinstance(value, list) else "got a table"
    _refused(reader, path, error, f"{key}: expected ", kind)


@pytest.mark.parametrize(("fmt", "where"),
                         [(f, w) for f, paths in UNKNOWN_KEYS.items() for w in paths])
def test_unknown_keys_are_refused(tmp_path: Path, fmt: str, where: str) -> None:
    make, reader, error = FORMATS[fmt]
    path = _write_json(tmp_path, _set(make(), where, 1))
    _refused(reader, path, error, f"{where}: expected one of the known keys", "unknown key")


def test_the_estimate_ignores_the_keys_of_the_report(tmp_path: Path) -> None:
    """Declared: the estimate is another command's whole report; the prior reads four keys of
    each source and ignores the rest (a source's weight, cluster, …)."""
    doc = _set(_set(estimate_doc(), "bogus", 1), "sources[0].cluster", 3)
    assert read_estimate(_write_json(tmp_path, doc)) == {"s1": (0.8, 5), "s2": (0.0, 0)}


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize(("name", "content", "needle"), [
    ("binary", b"\x00\x01\x02\x03\xff\xfe binary", "expected "),
    ("utf16", codecs.BOM_UTF16_LE + '{"a": 1}'.encode("utf-16-le"), "got UTF-16"),
    ("latin1", '{"a": "caf\xe9"}'.encode("latin-1"), "expected UTF-8 text"),
    ("empty", b"", "expected JSON"),
    ("deep", b"[" * 10_000 + b"]" * 10_000, "levels deep"),
    ("truncated", b'{"a": [1, 2', "expected JSON"),
    ("duplicate", b'{"a": 1, "a": 2}', "'a' twice"),
    ("array", b"[1, 2]", "got a list of 2 item(s)"),
    ("number", b"3", "got 3"),
])
def test_broken_files_are_refused(tmp_path: Path, fmt: str, name: str, content: bytes,
                                  needle: str) -> None:
    _, reader, error = FORMATS[fmt]
    path = tmp_path / f"{name}.json"
    path.write_bytes(content)
    _refused(reader, path, error, needle)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_deep_nesting_inside_a_field_is_refused(tmp_path: Path, fmt: str) -> None:
    make, reader, error = FORMATS[fmt]
    key = NUMERIC[fmt][-1]
    path = _write_json(tmp_path, _set(make(), key, _SENTINEL), "[" * 10_000 + "]" * 10_000)
    _refused(reader, path, error, "levels deep")


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_a_directory_or_a_missing_file_is_refused(tmp_path: Path, fmt: str) -> None:
    _, reader, error = FORMATS[fmt]
    folder = tmp_path / "folder.json"
    folder.mkdir()
    _refused(reader, folder, error, "got a directory")
    _refused(reader, tmp_path / "missing.json", error, "does not exist")


def test_cross_field_checks_name_the_key(tmp_path: Path) -> None:
    doc = credibility_doc()
    doc["logistic"]["mean"].pop()
    _refused(load_credibility_model, _write_json(tmp_path, doc), ModelFileError,
             "logistic.mean: expected ")
    doc = _set(credibility_doc(), "features.groups", ["url"])
    _refused(load_credibility_model, _write_json(tmp_path, doc), ModelFileError,
             "features.groups: expected ['cues', 'url'] (the config's groups)")
    doc = stance_doc()
    doc["logistic"]["scale"].append(1.0)
    _refused(load_stance_model, _write_json(tmp_path, doc), StanceModelError,
             "logistic.scale: expected 6 numbers")
    doc = _set(heads_doc(), "ie", [[0.0] * 4])
    _refused(load_heads, _write_json(tmp_path, doc), HeadsFileError, "ie: expected 2 rows")
    doc = _set(heads_doc(), "ie_log[1]", [0.0] * 3)
    _refused(load_heads, _write_json(tmp_path, doc), HeadsFileError,
             "ie_log[1]: expected 4 numbers")
    doc = _set(heads_doc(), "heads[1]", [2, 0])
    _refused(load_heads, _write_json(tmp_path, doc), HeadsFileError,
             "heads[1]: expected a (layer, head) pair within 2 layers × 4 heads")
    doc = _set(heads_doc(), "heads[1]", [0, 1])
    _refused(load_heads, _write_json(tmp_path, doc), HeadsFileError,
             "heads[1]: expected distinct items")
    doc = _set(estimate_doc(), "sources[1].source_id", "s1")
    _refused(read_estimate, _write_json(tmp_path, doc), FileFormatError,
             "sources[1].source_id: expected a source listed once")
    doc = _set(estimate_doc(), "sources[0].reliability", None)
    _refused(read_estimate, _write_json(tmp_path, doc), FileFormatError,
             "sources[0].reliability: expected a finite number in [0, 1]")


def test_format_1_and_format_2_model_files_hold_the_same_model(tmp_path: Path) -> None:
    """Format 2 adds the training provenance; a format-1 file (credrank before it) still loads,
    a format-2 file without it (or with a provenance of the wrong shape) does not."""
    old = load_credibility_model(_write_json(tmp_path, credibility_doc(), name="c1.json"))
    new = load_credibility_model(_write_json(tmp_path, credibility_doc_v2(), name="c2.json"))
    assert (old.version, new.version) == (1, 2)
    texts, urls = ["A clinical trial.", "BUY NOW"], ["https://a.gov/x", None]
    assert list(old(texts, urls)) == list(new(texts, urls))
    s1 = load_stance_model(_write_json(tmp_path, stance_doc(), name="s1.json"))
    s2 = load_stance_model(_write_json(tmp_path, stance_doc_v2(), name="s2.json"))
    assert s2.document["provenance"]["n_boot"] == 2000 and "provenance" not in s1.document
    for make, reader, error in ((credibility_doc_v2, load_credibility_model, ModelFileError),
                                (stance_doc_v2, load_stance_model, StanceModelError)):
        doc = make()
        doc.pop("provenance")
        _refused(reader, _write_json(tmp_path, doc), error, "provenance: expected the training "
                 "provenance (a table), got nothing (the key is missing)")
        doc = _set(make(), "provenance.configs", [])
        _refused(reader, _write_json(tmp_path, doc), error,
                 "provenance.configs: expected a list of at least 1 item(s)")
        doc = _set(make(), "provenance.seed", -1)
        _refused(reader, _write_json(tmp_path, doc), error, "provenance.seed: expected an "
                 "integer >= 0, got -1")


def test_heads_null_effects_read_as_nan(tmp_path: Path) -> None:
    doc = _set(heads_doc(), "ie[0][1]", None)
    heads = load_heads(_write_json(tmp_path, doc))
    assert heads.ie[0][1] != heads.ie[0][1] and heads.ie[1][2] == 0.9


# ---------------------------------------------------------------- labels CSV

LABELS_HEADER = "doc_id,credible,topic\n"


def _labels(n: int) -> str:
    return LABELS_HEADER + "".join(f"d{i},{i % 2},t{i % 5}\n" for i in range(n))


def test_labels_accept_a_utf8_bom_and_crlf(write: Callable[[str, str | bytes], Path]) -> None:
    path = write("l.csv", codecs.BOM_UTF8 + _labels(4).replace("\n", "\r\n").encode())
    labels = read_labels(path)
    assert labels.by == "doc_id" and [r.line for r in labels.rows] == [2, 3, 4, 5]


@pytest.mark.parametrize(("content", "needles"), [
    # one stray quote: before, the rows after it were swallowed into one value (issue 23)
    (_labels(150) + 'd150,"1,t0\n' + _labels(149)[len(LABELS_HEADER):],
     (":152:", "unterminated quote")),
    (LABELS_HEADER + 'd0,1,"t0\nd1,0,t1\n', (":2:", "never closed")),
    (LABELS_HEADER + 'd0,1,t0\nd1,"0"x,t1\n', (":3:", "expected well-formed CSV")),
    (LABELS_HEADER + "d0,1,t0\n" + "x" * 200_000 + ",1,t1\n", (":3:", "field larger")),
    (LABELS_HEADER + "d0,1,t0,extra\n", (":2:", "more values than the 3 header columns")),
    (LABELS_HEADER + "d0,maybe,t0\n", (":2: credible: expected 0, 1, true or false",)),
    (LABELS_HEADER + ",1,t0\n", (":2: doc_id: expected a non-empty value",)),
    ("id,credible\nd0,1\n", ("header: expected a 'doc_id' or 'url' column",)),
    ("doc_id,label\nd0,1\n", (":1: header: expected columns ['credible']",)),
    (LABELS_HEADER, ("no data rows",)),
    ("", (":1: header", "got an empty labels file")),
    (codecs.BOM_UTF16_LE + LABELS_HEADER.encode("utf-16-le"), ("got UTF-16",)),
    (b"\x00\x01\x02\xff binary", ("expected ",)),
])
def test_broken_labels_files_name_the_line(write: Callable[[str, str | bytes], Path],
                                           content: str | bytes, needles: tuple[str, ...]
                                           ) -> None:
    _refused(read_labels, write("labels.csv", content), FileFormatError, *needles)


def test_labels_directory_is_refused(tmp_path: Path) -> None:
    _refused(read_labels, tmp_path, FileFormatError, "got a directory")


# ---------------------------------------------------------------- stance pairs CSV

PAIRS_HEADER = "topic,query,doc_id,stance,text\n"


def _pairs(n: int, start: int = 0) -> str:
    return "".join(f"T{i % 4},does zinc help colds?,d{i},{i % 2},zinc page {i}\n"
                   for i in range(start, start + n))


def test_pairs_accept_a_bom_and_multiline_page_text(write: Callable[[str, str | bytes], Path]
                                                     ) -> None:
    body = PAIRS_HEADER + _pairs(2) + 'T1,q,d9,1,"a page\nwith ""lines""\n"\n' + _pairs(2, 2)
    pairs = read_pairs(write("p.csv", codecs.BOM_UTF8 + body.encode()))
    assert pairs.rows == 5 and len(pairs.examples) == 5 and pairs.rejected == {}
    assert pairs.examples[2].text == 'a page\nwith "lines"\n'
    assert csv.field_size_limit() == 131072  # no process-wide side effect


def test_pairs_blank_rows_are_reported(write: Callable[[str, str | bytes], Path]) -> None:
    pairs = read_pairs(write("p.csv", PAIRS_HEADER + _pairs(2) + ",,,,\n\n" + _pairs(1, 2)))
    assert pairs.rows == 4 and len(pairs.examples) == 3
    assert pairs.rejected == {"blank row": 1} and pairs.rejected_lines["blank row"] == [4]


@pytest.mark.parametrize(("content", "needles"), [
    # one stray quote in a one-line column: before, 98 of 100 pairs vanished, "rejected 0"
    (PAIRS_HEADER + _pairs(2) + 'T0,"does zinc help?,d2,1,page\n' + _pairs(97, 3)
     + 'T0,q,d100,1,page"\n', (":4:", "field 'query'", "running on to line 102")),
    (PAIRS_HEADER + _pairs(2) + 'T0,"does zinc help?,d2,1,page\n' + _pairs(97, 3),
     (":4:", "never closed")),
    # a stray quote opening a page text: never closed
    (PAIRS_HEADER + _pairs(2) + 'T0,q,d2,1,"page\n' + _pairs(97, 3),
     (":4:", "unterminated quote")),
    # ... or closed by the next quoted page: strict CSV stops at once
    (PAIRS_HEADER + 'T0,q,d0,1,"page\n' + 'T0,q,d1,0,"other page"\n' + _pairs(3, 2),
     (":2:", "expected well-formed CSV")),
    (PAIRS_HEADER + "T0,q,d0,1," + "x" * 200_000 + "\n", (":2:", "field larger")),
    (PAIRS_HEADER + "T0,q,d0\n", (":2: expected 5 fields (the header's), got 3",)),
    (PAIRS_HEADER + "T0,q,d0,1,t,extra\n", (":2: row has more values than the 5 header columns",)),
    ("topic,query,doc_id,text\nT0,q,d0,t\n", ("missing column 'stance'",)),
    ("", (":1: header", "got an empty pairs file")),
    (codecs.BOM_UTF16_LE + PAIRS_HEADER.encode("utf-16-le"), ("got UTF-16",)),
    (b"\x00\x01\x02\xff binary", ("expected ",)),
])
def test_broken_pairs_files_name_the_line(write: Callable[[str, str | bytes], Path],
                                          content: str | bytes, needles: tuple[str, ...]
                                          ) -> None:
    _refused(read_pairs, write("pairs.csv", content), StanceModelError, *needles)


def test_pairs_field_bound_holds_whatever_the_process_limit(
        write: Callable[[str, str | bytes], Path]) -> None:
    csv.field_size_limit(2**31 - 1)  # as another module may have set it
    path = write("pairs.csv", PAIRS_HEADER + _pairs(1) + 'T0,q,d1,1,"' + "x\n" * 70_000 + '"\n')
    _refused(read_pairs, path, StanceModelError, ":3: field 'text': expected at most 131,072 "
             "characters, got 140,000")


def test_pairs_directory_is_refused(tmp_path: Path) -> None:
    _refused(read_pairs, tmp_path, StanceModelError, "got a directory")


def test_pair_rows_are_used_or_rejected_never_dropped(write: Callable[[str, str | bytes], Path]
                                                      ) -> None:
    bad = ("T0,q,d50,2,page\n" "T0,q,d51,nan,page\n" "T0,q,d52," + "9" * 5000 + ",page\n"
           "T0,q,d53,1e400,page\n" ",q,d54,1,page\n")
    pairs = read_pairs(write("p.csv", PAIRS_HEADER + _pairs(50) + bad))
    assert pairs.rows == 55 and len(pairs.examples) + sum(pairs.rejected.values()) == 55
    assert pairs.rejected == {"topic empty": 1, "stance not 0 or 1": 4}


# ---------------------------------------------------------------- the commands


@pytest.fixture()
def empty_index(tmp_path: Path) -> Path:
    """An index folder the commands never open: the file options are read first."""
    folder = tmp_path / "index"
    folder.mkdir()
    return folder


@pytest.mark.parametrize(("option", "fmt", "key"), [
    ("--credibility-model", "credibility", "logistic.weights[0]"),
    ("--stance-model", "stance", "logistic.scale[0]"),
    ("--source-reliability", "estimate", "sources[0].coverage"),
])
def test_search_refuses_a_hostile_file(tmp_path: Path, empty_index: Path, option: str,
                                       fmt: str, key: str) -> None:
    path = _write_json(tmp_path, _set(FORMATS[fmt][0](), key, BIG))
    res = run_cli("search", "does zinc help?", "--index", str(empty_index), option, str(path),
                  timeout=120)
    assert_clean_error(res, f"{key}: expected", "an integer of 401 digits")


def test_cram_answer_refuses_a_hostile_heads_file(tmp_path: Path, empty_index: Path) -> None:
    path = tmp_path / "heads.json"
    path.write_bytes(codecs.BOM_UTF16_LE + json.dumps(heads_doc()).encode("utf-16-le"))
    res = run_cli("cram", "answer", "q", "--index", str(empty_index), "--heads", str(path),
                  timeout=120)
    assert_clean_error(res, "got UTF-16")


def test_credibility_fit_refuses_a_stray_quote(write: Callable[[str, str | bytes], Path],
                                               empty_index: Path, tmp_path: Path) -> None:
    path = write("labels.csv", _labels(3) + 'd9,"1,t0\n' + _labels(3)[len(LABELS_HEADER):])
    res = run_cli("credibility", "fit", str(path), "--index", str(empty_index), "--out",
                  str(tmp_path / "m.json"), timeout=120)
    assert_clean_error(res, "labels.csv:5:", "unterminated quote")


def test_stance_fit_refuses_a_huge_field(write: Callable[[str, str | bytes], Path],
                                         tmp_path: Path) -> None:
    path = write("pairs.csv", PAIRS_HEADER + _pairs(3) + "T0,q,d9,1," + "x" * 200_000 + "\n")
    res = run_cli("stance", "fit", str(path), "--out", str(tmp_path / "m.json"), "--embedder",
                  "hashing", timeout=120)
    assert_clean_error(res, "pairs.csv:5:", "field larger")


def test_reliability_estimate_refuses_hostile_aliases(write: Callable[[str, str | bytes], Path]
                                                      ) -> None:
    answers = write("a.csv", "question_id,source_id,answer\nq1,s1,a\nq1,s2,b\n")
    aliases = write("al.json", json.dumps({"New York": ["NYC", ["nested"]]}))
    res = run_cli("reliability", "estimate", str(answers), "--aliases", str(aliases),
                  timeout=120)
    assert_clean_error(res, "New York[1]: expected a string, got a list")
