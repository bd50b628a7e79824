"""Hostile inputs for every config-like file credrank reads (issue 23): audit configs, trust
profiles (TOML and JSON), advise profiles, freshness configs (TOML and YAML), prior files
(TOML and YAML), bench checkpoints, TREC runs and qrels.

Each reader goes through :mod:`credrank.core.structured` and a declared schema, so every bad
file is the reader's own ``ValueError`` subclass whose message starts with the file path (and
names the key path where there is one) — never an ``OverflowError``, ``TypeError``,
``RecursionError``, ``UnicodeDecodeError`` or ``MemoryError`` (``pytest.raises`` lets any
other exception through, failing the test). The last tests run the ``credrank`` command (in
process) and check exit 2 with ``error:`` and no traceback.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template

import pytest

from cli_inprocess import assert_clean_error, run_cli
from credrank.advise.pools import ProfileError
from credrank.advise.pools import load_profile as load_advise_profile
from credrank.audit.profile import AuditInputError
from credrank.audit.profile import load_profile as load_trust_profile
from credrank.audit.run import load_config
from credrank.core.errors import FileFormatError
from credrank.documents import read_qrels
from credrank.documents.readers import CorpusError
from credrank.evaluate.checkpoint import Checkpoint, CheckpointError
from credrank.evaluate.metrics import read_run
from credrank.freshness.config import FreshnessConfigError, load_freshness_config
from credrank.signals.prior import PriorFileError, load_priors

DEMO_CORPUS = Path(__file__).resolve().parents[1] / "src/credrank/data/demo/corpus.jsonl"

BIG = "1" + "0" * 400          # 1e400 written as an integer: 401 digits
HUGE = "7" * 5000              # past Python's 4,300-digit conversion limit
DEEP = 10_000                  # nesting levels
#: a ~500-byte "billion laughs": nested aliases that would expand to 9**10 strings
LAUGHS = "\n".join(
    [f'l0: &l0 [{", ".join(["lololol"] * 9)}]']
    + [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 10)]) + "\n"


@dataclass(frozen=True)
class Fmt:
    """A config format: a valid template (``$name`` placeholders with defaults), its reader
    and error class, and where its numbers, strings and nesting live."""

    name: str
    suffix: str
    template: str
    defaults: dict[str, str]
    load: Callable[[Path], object]
    error: type[Exception]
    numbers: dict[str, str] = field(default_factory=dict)   # placeholder -> key path
    strings: dict[str, str] = field(default_factory=dict)   # placeholder -> key path
    unknown: tuple[str, str, str] = ("", "", "end")          # (text, key path, where)
    nesting: str = ""                                        # text with $deep
    empty: str = ""                                          # what an empty file says
    syntax: str = "toml"

    def text(self, **literals: str) -> str:
        return Template(self.template).substitute({**self.defaults, **literals})


AUDIT = Fmt(
    "audit config", ".toml", """name = "t"
[system]
priors = $priors
top_k = $top_k
fetch_k = $fetch_k
[queries]
path = $path
[dimensions.robustness]
measure = "stress"
path = "stress.jsonl"
count = $count
limit = $limit
[dimensions.privacy]
measure = $measure
[dimensions.factuality]
measure = "harmful"
k = $k
[[gate]]
name = "g"
dimension = "privacy"
op = $op
threshold = $threshold
reason = "r"
""", {"priors": '"current"', "top_k": "5", "fetch_k": "15", "path": '"demo:queries.jsonl"',
      "count": "1", "limit": "8", "measure": '"pii"', "k": "5", "op": '"=="',
      "threshold": "0"},
    load_config, AuditInputError,
    numbers={"threshold": "gate[0].threshold", "top_k": "system.top_k",
             "fetch_k": "system.fetch_k", "k": "dimensions.factuality.k",
             "count": "dimensions.robustness.count", "limit": "dimensions.robustness.limit"},
    strings={"measure": "dimensions.privacy.measure", "op": "gate[0].op",
             "priors": "system.priors", "path": "queries.path"},
    unknown=("[dimensions.fairness]\nmeasure = \"exposure\"\ngroups = 3\n",
             "dimensions.fairness.groups", "end"),
    nesting="x = $deep\n",
    empty=r"queries: expected a \[queries\] table with at least path, got nothing")

_ENTRIES = "".join(f"""
[[entry]]
dimension = "{d}"
status = "not measured"
reason = "later"
""" for d in ("privacy", "fairness", "transparency", "factuality", "accountability"))
PROFILE_TOML = Fmt(
    "trust profile", ".toml", """name = "t"
[[entry]]
dimension = $dimension
status = $status
metric = "m"
unit = "u"
judge = "j"
denominator = "d"
value = $value
scale = [$scale_lo, 1.0]
interval = [0.4, $interval_hi]
higher_is_better = true
""" + _ENTRIES + """
[[gate]]
name = "g"
dimension = "robustness"
op = $op
threshold = $threshold
reason = "r"
""", {"dimension": '"robustness"', "status": '"measured"', "value": "0.5", "scale_lo": "0.0",
      "interval_hi": "0.6", "op": '">="', "threshold": "0.1"},
    load_trust_profile, AuditInputError,
    numbers={"value": "entry[0].value", "scale_lo": "entry[0].scale[0]",
             "interval_hi": "entry[0].interval[1]", "threshold": "gate[0].threshold"},
    strings={"dimension": "entry[0].dimension", "status": "entry[0].status",
             "op": "gate[0].op"},
    unknown=('colour = "red"\n', "colour", "start"),
    nesting="x = $deep\n",
    empty=r"entry: expected a list of at least 1 item\(s\), got nothing")

_JSON_ENTRIES = "".join(f""", {{"dimension": "{d}", "status": "not measured", "reason": "r"}}"""
                        for d in ("privacy", "fairness", "transparency", "factuality",
                                  "accountability"))
PROFILE_JSON = Fmt(
    "trust profile", ".json", """{"name": "t"$extra, "entry": [
  {"dimension": $dimension, "status": $status, "metric": "m", "unit": "u", "judge": "j",
   "denominator": "d", "value": $value, "scale": [$scale_lo, 1.0],
   "interval": [0.4, $interval_hi], "higher_is_better": true}""" + _JSON_ENTRIES + """],
 "gate": [{"name": "g", "dimension": "robustness", "op": $op, "threshold": $threshold,
           "reason": "r"}]}
""", {**PROFILE_TOML.defaults, "extra": ""},
    load_trust_profile, AuditInputError,
    numbers=PROFILE_TOML.numbers, strings=PROFILE_TOML.strings,
    unknown=(', "colour": "red"', "colour", "extra"),
    nesting='{"entry": $deep}', empty="expected JSON", syntax="json")

ADVISE = Fmt(
    "profile", ".toml", """name = "m"
[[pool]]
name = $name
sources = $sources
heads = $heads
selected_heads = $selected
seconds_per_pass = $spp
""", {"name": '"p"', "sources": "10", "heads": "1024", "selected": "[100, 300]",
      "spp": "0.05"},
    load_advise_profile, ProfileError,
    numbers={"sources": "pool[0].sources", "heads": "pool[0].heads",
             "selected": "pool[0].selected_heads", "spp": "pool[0].seconds_per_pass"},
    strings={"name": "pool[0].name"},
    unknown=("provenanse = true\n", "pool[0].provenanse", "end"),
    nesting="x = $deep\n",
    empty=r"pool: expected a list of at least 1 item\(s\), got nothing")

FRESH_TOML = Fmt(
    "freshness config", ".toml", """half_life = $half_life
[host]
"www.cdc.gov" = $host
[no_decay]
claim_class = [$cls]
field = $field
""", {"half_life": '"365d"', "host": '"2y"', "cls": '"historical"', "field": '"persistent"'},
    load_freshness_config, FreshnessConfigError,
    numbers={"half_life": "half_life", "host": "host.www.cdc.gov"},
    strings={"field": "no_decay.field", "cls": "no_decay.claim_class[0]"},
    unknown=("[source_types]\nblog = \"1y\"\n", "source_types", "end"),
    nesting="x = $deep\n",
    empty="half_life: expected a positive duration")

FRESH_YAML = Fmt(
    "freshness config", ".yaml", """half_life: $half_life
source_type:
  blog: $host
no_decay:
  claim_class: [$cls]
  field: $field
""", {"half_life": "365d", "host": "2y", "cls": "historical", "field": "persistent"},
    load_freshness_config, FreshnessConfigError,
    numbers={"half_life": "half_life", "host": "source_type.blog"},
    strings={"field": "no_decay.field", "cls": "no_decay.claim_class[0]"},
    unknown=("colour: red\n", "colour", "start"),
    nesting="half_life: $deep\n",
    empty="got an empty file", syntax="yaml")

PRIORS_TOML = Fmt(
    "prior file", ".toml", """base = $base
[priors]
blog = $blog
""", {"base": '"current"', "blog": "0.2"},
    load_priors, PriorFileError,
    numbers={"blog": "priors.blog"}, strings={"base": "base"},
    unknown=('colour = "red"\n', "colour", "start"),
    nesting="x = $deep\n",
    empty=r"\(top level\): expected a prior for every source type, missing source types")

PRIORS_YAML = Fmt(
    "prior file", ".yaml", """base: $base
blog: $blog
""", {"base": "current", "blog": "0.2"},
    load_priors, PriorFileError,
    numbers={"blog": "blog"}, strings={"base": "base"},
    unknown=("colour: red\n", "colour", "start"),
    nesting="blog: $deep\n",
    empty="got an empty file", syntax="yaml")

FORMATS = [AUDIT, PROFILE_TOML, PROFILE_JSON, ADVISE, FRESH_TOML, FRESH_YAML, PRIORS_TOML,
           PRIORS_YAML]
_IDS = ["audit", "profile-toml", "profile-json", "advise", "fresh-toml", "fresh-yaml",
        "priors-toml", "priors-yaml"]


def _write(tmp_path: Path, fmt: Fmt, data: str | bytes) -> Path:
    path = tmp_path / f"hostile{fmt.suffix}"
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


def _refused(tmp_path: Path, fmt: Fmt, data: str | bytes, *fragments: str) -> str:
    """Load ``data`` as ``fmt``: its error, starting with the path, matching ``fragments``."""
    path = _write(tmp_path, fmt, data)
    with pytest.raises(fmt.error) as info:
        fmt.load(path)
    message = str(info.value)
    assert message.startswith(f"{path}: "), message
    for fragment in fragments:
        assert re.search(fragment, message), (fragment, message)
    assert len(message) < 2_000, "a message never carries a whole hostile value"
    return message


def _cases() -> list[tuple[Fmt, str, str, str]]:
    """(format, placeholder, literal, expected) for every number site of every format."""
    out = []
    for fmt in FORMATS:
        for name, at in fmt.numbers.items():
            out.append((fmt, name, BIG, rf"^\S+: {re.escape(at)}: expected .*, got an "
                                        r"integer of 401 digits"))
            out.append((fmt, name, HUGE, "at most 4,300 digits"))
    return out


@pytest.mark.parametrize(("fmt", "name", "literal", "expected"), _cases(),
                         ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None)
def test_huge_integers_in_numeric_fields(tmp_path: Path, fmt: Fmt, name: str, literal: str,
                                         expected: str) -> None:
    _refused(tmp_path, fmt, fmt.text(**{name: literal}), expected)


def _non_finite() -> list[tuple[Fmt, str, str, str]]:
    spellings = {"toml": ("nan", "inf", "-inf"), "yaml": (".nan", ".inf", "-.inf"),
                 "json": ("NaN", "Infinity", "-Infinity")}
    out = []
    for fmt in FORMATS:
        for name, at in fmt.numbers.items():
            for literal in spellings[fmt.syntax]:
                expected = (r"expected a finite number, got -?(NaN|Infinity) \(not JSON\)"
                            if fmt.syntax == "json" else
                            rf"{re.escape(at)}: expected .*, got -?(nan|inf)")
                out.append((fmt, name, literal, expected))
    return out


@pytest.mark.parametrize(("fmt", "name", "literal", "expected"), _non_finite(),
                         ids=lambda v: v if isinstance(v, str) and len(v) < 40 else None)
def test_nan_and_infinity(tmp_path: Path, fmt: Fmt, name: str, literal: str,
                          expected: str) -> None:
    _refused(tmp_path, fmt, fmt.text(**{name: literal}), expected)


def _containers(fmt: Fmt) -> tuple[tuple[str, str], ...]:
    if fmt.syntax == "json":
        return (('["x"]', r"a list of 1 item\(s\)"), ('{"a": 1}', "a table with key"))
    if fmt.syntax == "yaml":
        return (("[x]", r"a list of 1 item\(s\)"), ("{a: 1}", "a table with key"))
    return (('["x"]', r"a list of 1 item\(s\)"), ("{a = 1}", "a table with key"))


@pytest.mark.parametrize("fmt", FORMATS, ids=_IDS)
def test_a_list_or_table_where_a_string_is_expected(tmp_path: Path, fmt: Fmt) -> None:
    for name, at in fmt.strings.items():
        for literal, shown in _containers(fmt):
            _refused(tmp_path, fmt, fmt.text(**{name: literal}),
                     rf"{re.escape(at)}: expected .*, got {shown}")


@pytest.mark.parametrize("fmt", FORMATS, ids=_IDS)
def test_unknown_keys(tmp_path: Path, fmt: Fmt) -> None:
    extra, at, where = fmt.unknown
    text = {"start": extra + fmt.text(), "end": fmt.text() + extra,
            "extra": fmt.text(extra=extra)}[where]
    _refused(tmp_path, fmt, text, rf"{re.escape(at)}: expected one of the known keys")


@pytest.mark.parametrize("fmt", FORMATS, ids=_IDS)
def test_valid_file_and_utf8_bom_accepted(tmp_path: Path, fmt: Fmt) -> None:
    fmt.load(_write(tmp_path, fmt, fmt.text()))
    fmt.load(_write(tmp_path, fmt, codecs.BOM_UTF8 + fmt.text().encode("utf-8")))


@pytest.mark.parametrize("fmt", FORMATS, ids=_IDS)
def test_bytes_that_are_not_utf8(tmp_path: Path, fmt: Fmt) -> None:
    _refused(tmp_path, fmt, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff", "expected UTF-8 text")
    _refused(tmp_path, fmt, fmt.text().encode("utf-8") + b"\xff\xfe\n",
             r"line \d+, column \d+: expected UTF-8 text, got the byte 0xff")
    _refused(tmp_path, fmt, codecs.BOM_UTF16_LE + fmt.text().encode("utf-16-le"),
             r"expected UTF-8 text, got UTF-16 \(byte-order mark\)")
    _refused(tmp_path, fmt, "x = 1\n\x00\n", "got a NUL byte")


@pytest.mark.parametrize("fmt", FORMATS, ids=_IDS)
def test_nesting_ten_thousand_deep(tmp_path: Path, fmt: Fmt) -> None:
    deep = "[" * DEEP + "]" * DEEP
    _refused(tmp_path, fmt, Template(fmt.nesting).substitute(deep=deep),
             "expected nesting at most 32 levels deep")
    tables = "\n".join(f"{'  ' * i}k{i}:" for i in range(DEEP // 100)) + " 1\n"
    if fmt.syntax == "yaml":  # block nesting, no brackets
        _refused(tmp_path, fmt, tables, "expected nesting at most 32 levels deep")


@pytest.mark.parametrize("fmt", FORMATS, ids=_IDS)
def test_empty_file_and_directory(tmp_path: Path, fmt: Fmt) -> None:
    _refused(tmp_path, fmt, "", fmt.empty)
    folder = tmp_path / f"folder{fmt.suffix}"
    folder.mkdir()
    article = "an" if fmt.name[0] in "aeiou" else "a"  # "an audit config": it said "a audit"
    with pytest.raises(fmt.error, match=rf"^{re.escape(str(folder))}: expected {article} "
                                         rf"{fmt.name}, got a directory"):
        fmt.load(folder)


@pytest.mark.parametrize("fmt", [FRESH_YAML, PRIORS_YAML], ids=["fresh-yaml", "priors-yaml"])
def test_billion_laughs_is_refused(tmp_path: Path, fmt: Fmt) -> None:
    assert 400 <= len(LAUGHS.encode()) <= 600
    _refused(tmp_path, fmt, LAUGHS, r"line 2, column \d+: expected a plain value, got an "
                                    r"alias \(\*l0\): aliases are not accepted")


# ---------------------------------------------------------------- checkpoints (JSONL)

KEY = {"model": "m", "floor": 0.1}
HEADER = '{"checkpoint": "kind", "key": {"floor": 0.1, "model": "m"}}\n'


def _open_checkpoint(path: Path) -> Checkpoint:
    return Checkpoint.open(path, "kind", KEY)


@pytest.mark.parametrize(("body", "expected"), [
    (HEADER + '{"id": "q1", "n": ' + HUGE + "}\n",
     r"line 2: column \d+: expected a number of at most 4,300 digits"),
    (HEADER + '{"id": "q1", "x": NaN}\n', r"line 2: column \d+: expected a finite number, got NaN"),
    (HEADER + '{"id": "q1", "x": -Infinity}\n', r"line 2: column \d+: expected a finite number"),
    (HEADER + '{"id": ' + "[" * DEEP + "]" * DEEP + "}\n", "line 2: expected nesting"),
    (HEADER + '{"id": ["q1"]}\n', r"line 2: id: expected a string, got a list of 1 item"),
    (HEADER + '{"id": {"a": 1}}\n', r"line 2: id: expected a string, got a table"),
    (HEADER.replace('"kind"', '["kind"]'), r"line 1: checkpoint: expected .*got a list"),
    (HEADER.replace("}\n", ', "extra": 1}\n'), "line 1: extra: expected one of the known keys"),
    (HEADER.replace("0.1", BIG), r"line 1: key: written with other settings \(floor: file has "
                                 r"1000"),
    (HEADER.replace("0.1", HUGE), r"line 1: column \d+: expected a number of at most 4,300 digits"),
    (b"\x89PNG\r\n\x1a\n\xff\n", r"line 1: expected UTF-8 JSON lines"),
    (codecs.BOM_UTF16_LE + HEADER.encode("utf-16-le"), "got UTF-16 or UTF-32"),
])
def test_hostile_checkpoints(tmp_path: Path, body: str | bytes, expected: str) -> None:
    path = tmp_path / "run.jsonl"
    path.write_bytes(body if isinstance(body, bytes) else body.encode("utf-8"))
    with pytest.raises(CheckpointError) as info:
        _open_checkpoint(path)
    message = str(info.value)
    assert message.startswith(f"{path}"), message
    assert re.search(expected, message), message
    assert len(message) < 2_000


def test_checkpoint_declared_policies(tmp_path: Path) -> None:
    # a UTF-8 byte-order mark is accepted; appends and reopening keep working
    path = tmp_path / "bom.jsonl"
    path.write_bytes(codecs.BOM_UTF8 + (HEADER + '{"id": "q1"}\n').encode())
    ckpt = _open_checkpoint(path)
    assert list(ckpt.done) == ["q1"]
    ckpt.append({"id": "q2"})
    assert list(_open_checkpoint(path).done) == ["q1", "q2"]
    # a cut last line that does not parse (here: a number past the limit) is discarded
    path.write_bytes(path.read_bytes() + b'{"id": "q3", "n": ' + HUGE.encode())
    again = _open_checkpoint(path)
    assert again.discarded_tail and list(again.done) == ["q1", "q2"]
    # an empty file is a new checkpoint (it gets the header); a folder is an error
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    assert _open_checkpoint(empty).done == {} and empty.read_text().startswith('{"checkpoint"')
    with pytest.raises(CheckpointError, match=r"expected a checkpoint file, got a directory"):
        _open_checkpoint(tmp_path)


# ---------------------------------------------------------------- TREC runs and qrels


@pytest.mark.parametrize(("text", "expected"), [
    (f"q Q0 d 1 {BIG} tag\n", r":1: score '1000\d*… is not finite"),
    (f"q Q0 d 1 {HUGE} tag\n", r":1: score '7777\d*… is not finite"),
    ("q Q0 d 1 nan tag\n", ":1: score 'nan' is not finite"),
    ("q Q0 d 1 -inf tag\n", ":1: score '-inf' is not finite"),
    ("q Q0 d 1 0.5 tag " + "x" * 100_000 + "\n", ":1: expected 6 fields"),
    (b"\x89PNG\r\n\x1a\n\xff", "expected UTF-8 text"),
    (codecs.BOM_UTF16_LE + "q Q0 d 1 0.5 t\n".encode("utf-16-le"), "got UTF-16"),
])
def test_hostile_trec_runs(tmp_path: Path, text: str | bytes, expected: str) -> None:
    path = tmp_path / "run.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(FileFormatError) as info:
        read_run(path)
    assert str(info.value).startswith(f"{path}:"), str(info.value)
    assert re.search(expected, str(info.value)) and len(str(info.value)) < 2_000


def test_trec_run_bom_empty_and_directory(tmp_path: Path) -> None:
    path = tmp_path / "run.txt"
    path.write_bytes(codecs.BOM_UTF8 + b"q Q0 d 1 0.5 t\n")
    assert read_run(path) == {"q": {"d": 0.5}}
    path.write_bytes(b"")
    assert read_run(path) == {}  # a run with no line: no query answered
    with pytest.raises(FileFormatError, match="got a directory"):
        read_run(tmp_path)


@pytest.mark.parametrize(("text", "expected"), [
    (f"q 0 d {BIG}\n", r":1: field 'score': expected an integer relevance in "
                       r"\[-2147483648, 2147483647\], got an integer of 401 digits"),
    (f"q 0 d {HUGE}\n", "got an integer of 5000 digits"),
    ("q 0 d 4294967296\n", "got 4294967296"),
    ("q 0 d nan\n", "expected an integer relevance, got 'nan'"),
    (codecs.BOM_UTF16_LE + "q 0 d 1\n".encode("utf-16-le"), "expected UTF-8 text"),
    (b"\x89PNG\r\n\x1a\n\xff", "expected UTF-8 text"),
])
def test_hostile_qrels(tmp_path: Path, text: str | bytes, expected: str) -> None:
    path = tmp_path / "qrels.txt"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(CorpusError) as info:
        read_qrels(path)
    assert str(info.value).startswith(f"{path}:"), str(info.value)
    assert re.search(expected, str(info.value)) and len(str(info.value)) < 2_000


def test_qrels_bom_accepted(tmp_path: Path) -> None:
    path = tmp_path / "qrels.txt"
    path.write_bytes(codecs.BOM_UTF8 + b"q 0 d 2\n")
    assert read_qrels(path) == {"q": {"d": 2}}


def test_robustness_sources_match_the_stress_bench() -> None:
    from credrank.audit.robustness import POSITIONS, SOURCES
    from credrank_bench.experiments import stress

    assert SOURCES == stress.SOURCES and POSITIONS == stress.POSITIONS
    from credrank.audit.robustness import METRICS
    from credrank.evaluate.metrics import registered_measures

    table = {f"{stress.ADV_HIT}@k", stress.CORRECT_CLEAN, stress.CORRECT_CONTAMINATED,
             stress.FLIP_C2I, stress.FLIP_I2C, stress.MISLED}
    assert table <= {m.family for m in registered_measures()}
    assert set(METRICS) == table  # credrank.audit.robustness.METRICS: the stress table's


# ---------------------------------------------------------------- the credrank command


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five demo documents indexed with the hashing embedder by ``credrank index``."""
    folder = tmp_path_factory.mktemp("configs-index")
    corpus = folder / "corpus.jsonl"
    corpus.write_text("".join(DEMO_CORPUS.read_text(encoding="utf-8").splitlines(True)[:5]),
                      encoding="utf-8")
    done = run_cli("index", corpus, "--index", folder / "index", "--embedder", "hashing",
                   timeout=120)
    assert done.returncode == 0, done.stderr
    return folder / "index"


def test_cli_search_refuses_billion_laughs(small_index: Path, tmp_path: Path) -> None:
    laughs = tmp_path / "laughs.yaml"
    laughs.write_text(LAUGHS, encoding="utf-8")
    done = run_cli("search", "vitamin", "--index", small_index, "--priors", laughs, timeout=120)
    assert_clean_error(done, f"{laughs}: line 2", "aliases are not accepted", starts=True)
    done = run_cli("search", "vitamin", "--index", small_index, "--freshness",
                   f"half_life=365d,config={laughs}", timeout=120)
    assert_clean_error(done, f"{laughs}: line 2", "aliases are not accepted", starts=True)


def test_cli_search_refuses_hostile_priors_and_freshness(small_index: Path,
                                                         tmp_path: Path) -> None:
    priors = _write(tmp_path, PRIORS_TOML, PRIORS_TOML.text(blog=BIG))
    done = run_cli("search", "vitamin", "--index", small_index, "--priors", priors, timeout=120)
    assert_clean_error(done, f"{priors}: priors.blog: expected", "401 digits", starts=True)
    fresh = tmp_path / "deep.toml"
    fresh.write_text("half_life = " + "[" * DEEP + "]" * DEEP + "\n", encoding="utf-8")
    done = run_cli("search", "vitamin", "--index", small_index, "--freshness",
                   f"config={fresh}", timeout=120)
    assert_clean_error(done, f"{fresh}: expected nesting at most 32", starts=True)


def test_cli_audit_check_radar_and_run(small_index: Path, tmp_path: Path) -> None:
    profile = _write(tmp_path, PROFILE_TOML, PROFILE_TOML.text(threshold=BIG))
    assert_clean_error(run_cli("audit", "check", profile, timeout=120),
                       f"{profile}: gate[0].threshold: expected a finite number", starts=True)
    utf16 = tmp_path / "utf16.json"
    utf16.write_bytes(codecs.BOM_UTF16_LE + PROFILE_JSON.text().encode("utf-16-le"))
    assert_clean_error(run_cli("audit", "radar", utf16, "--out", tmp_path / "radar",
                               timeout=120),
                       f"{utf16}: expected UTF-8 text, got UTF-16", starts=True)
    config = _write(tmp_path, AUDIT, AUDIT.text(op='["=="]'))
    assert_clean_error(run_cli("audit", "--index", small_index, "--config", config, "--out",
                               tmp_path / "out", timeout=120),
                       f"{config}: gate[0].op: expected one of", starts=True)


def test_cli_advise_refuses_binary_and_huge(tmp_path: Path) -> None:
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\xff")
    assert_clean_error(run_cli("advise", binary, timeout=120),
                       f"{binary}: line 1, column 1: expected UTF-8", starts=True)
    huge = _write(tmp_path, ADVISE, ADVISE.text(sources=BIG))
    assert_clean_error(run_cli("advise", huge, timeout=120),
                       f"{huge}: pool[0].sources: expected an integer", starts=True)
