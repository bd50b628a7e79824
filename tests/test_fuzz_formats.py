"""Fuzzing every structured file credrank reads (issue 23): model files, heads files, reliability
estimates, audit configs, trust profiles, advise profiles, freshness configs, prior files,
checkpoints, labels, stance pairs, answers, domain tables, feedback files, queries and qrels.

Each format has a valid document written as a template whose values are placeholders. A
generated input (hypothesis, derandomized: the same inputs every run) is that document with
hostile values put in (401- and 5,000-digit integers, NaN, infinities, lists and tables where a
scalar goes, nesting 50 or 5,000 deep, unterminated quotes, 200,000-character cells, YAML
aliases and tags), lines dropped or repeated, or its bytes damaged (truncated, a stray byte,
UTF-16, a UTF-8 byte-order mark, binary, empty). The property, for every input: the format's
reader either accepts it or raises its own ``ValueError`` whose message starts with the file's
path — never another exception (a traceback at the command line), never ``MemoryError``.

The check functions return outcomes instead of asserting so that ``bench/scripts/fuzz_report.py``
runs the same generators with larger budgets, counts them per format, and runs a sample of the
refused inputs through the real ``credrank`` command (exit 2, ``error:``, no traceback).
"""

from __future__ import annotations

import codecs
import json
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from string import Template
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from credrank.cli.config import load_config
from credrank.cli.priors import read_feedback
from credrank.cram.headsfile import load_heads
from credrank.credibility.labels import read_labels
from credrank.credibility.modelfile import load_model as load_credibility_model
from credrank.documents import read_qrels, read_queries
from credrank.evaluate.checkpoint import Checkpoint
from credrank.provenance.tables import load_domain_table
from credrank.reliability.answers import load_answers
from credrank.reliability.prior import read_estimate
from credrank.signals.stance import load_model as load_stance_model
from credrank.signals.stance import read_pairs
from test_file_formats_configs import FORMATS as CONFIG_FORMATS
from test_file_formats_models import credibility_doc, estimate_doc, heads_doc, stance_doc

BIG = "1" + "0" * 400          # 1e400 written as an integer: beyond the float range
HUGE = "7" * 5000              # beyond Python's 4,300-digit int conversion limit
DEEP = "[" * 50 + "1" + "]" * 50
DEEPER = "[" * 5000 + "1" + "]" * 5000
HEALTH = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

LITERALS: dict[str, list[str]] = {
    "json": [BIG, HUGE, "NaN", "-Infinity", "1e400", "true", "false", "null", '""', '"x"',
             '"[/x]"', "[]", "{}", DEEP, DEEPER, "-1", "0", "0.5", "1e-320", '"\\u0000"',
             '{"a": 1}', '["a", 1]', '"' + "y" * 5000 + '"'],
    "toml": [BIG, HUGE, "nan", "-inf", "1e400", "true", '""', '"x"', '"[/x]"', "[]", "{}",
             DEEP, DEEPER, "-1", "0", "0.5", "1e-320", '"\\u0000"', "{a = 1}", '["a", 1]',
             "1979-05-27T07:32:00Z", "'''\nmulti'''", "[[1]]"],
    "yaml": [BIG, HUGE, ".nan", "-.inf", "1e400", "true", "null", "~", '""', "x", "'[/x]'",
             "[]", "{}", DEEP, DEEPER, "-1", "0", "0.5", "*nope", "&a 1",
             "!!python/object/apply:os.system ['true']", "2020-01-01", "{a: 1}", "[a, 1]"],
    "csv": ["", "x", '"', '"open', 'a"b', '"two\nlines"', "z" * 200_000, "\ufeff", "1e400",
            "NaN", "-1", "0", "1", "true", "[/x]", '","', "\r", "\x00", BIG, "d0", "t0",
            "2020-01-01", "https://www.cdc.gov/x"],
}
LAUGHS = "".join(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9 if i else ["lol"] * 9) + "]\n"
                 for i in range(10))


@dataclass(frozen=True)
class FuzzFormat:
    """A file format: its valid document (``template`` with ``$name`` placeholders filled by
    ``defaults``), its reader, and the ``credrank`` arguments that read it (``{file}``; the
    working folder holds ``idx`` (an index), ``small.jsonl`` and ``store`` (a feedback store));
    an empty ``cli`` means the format is read only by benches, not by a command."""

    name: str
    suffix: str
    syntax: str
    template: str
    defaults: dict[str, str]
    load: Callable[[Path], object]
    cli: tuple[str, ...] = ()

    def text(self, values: dict[str, str] | None = None) -> str:
        return Template(self.template).substitute({**self.defaults, **(values or {})})


def _template_from_doc(doc: Any) -> tuple[str, dict[str, str]]:
    """A JSON document as a template: every scalar leaf a placeholder ``$pN``."""
    defaults: dict[str, str] = {}

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [walk(x) for x in v]
        name = f"p{len(defaults)}"
        defaults[name] = json.dumps(v)
        return f"@@{name}@@"

    text = json.dumps(walk(doc), indent=1)
    for name in defaults:
        text = text.replace(f'"@@{name}@@"', f"${name}")
    return text, defaults


def _json_format(name: str, doc: dict[str, Any], load: Callable[[Path], object],
                 cli: tuple[str, ...]) -> FuzzFormat:
    template, defaults = _template_from_doc(doc)
    return FuzzFormat(name, ".json", "json", template, defaults, load, cli)


def _csv_format(name: str, suffix: str, header: str, rows: list[list[str]],
                load: Callable[[Path], object], cli: tuple[str, ...] = (),
                delimiter: str = ",") -> FuzzFormat:
    defaults: dict[str, str] = {}
    lines = [header]
    for row in rows:
        cells = []
        for cell in row:
            key = f"c{len(defaults)}"
            defaults[key] = cell
            cells.append(f"${key}")
        lines.append(delimiter.join(cells))
    return FuzzFormat(name, suffix, "csv", "\n".join(lines) + "\n", defaults, load, cli)


def _open_checkpoint(path: Path) -> Checkpoint:
    return Checkpoint.open(path, "kind", {"model": "m", "floor": 0.1})


SEARCH = ("search", "fever", "--index", "idx")
_CONFIG_CLI = {
    "audit config": ("audit", "--index", "idx", "--config", "{file}", "--out", "audit-out"),
    "trust profile": ("audit", "check", "{file}"),
    "profile": ("advise", "{file}"),
    "freshness config": (*SEARCH, "--freshness", "half_life=365d,config={file}"),
    "prior file": (*SEARCH, "--priors", "{file}"),
}


def _all_formats() -> list[FuzzFormat]:
    formats = [
        _json_format("credibility model", credibility_doc(), load_credibility_model,
                     (*SEARCH, "--credibility-model", "{file}")),
        _json_format("stance model", stance_doc(), load_stance_model,
                     (*SEARCH, "--stance-model", "{file}")),
        _json_format("CrAM heads file", heads_doc(), load_heads,
                     ("cram", "answer", "fever", "--index", "idx", "--heads", "{file}")),
        _json_format("reliability estimate", estimate_doc(), read_estimate,
                     (*SEARCH, "--source-reliability", "{file}")),
    ]
    for fmt in CONFIG_FORMATS:
        name = f"{fmt.name} ({fmt.suffix[1:]})"
        formats.append(FuzzFormat(name, fmt.suffix, fmt.syntax, fmt.template,
                                  dict(fmt.defaults), fmt.load, _CONFIG_CLI.get(fmt.name, ())))
    formats += [
        FuzzFormat("bench checkpoint", ".jsonl", "json",
                   '{"checkpoint": "kind", "key": {"floor": $f, "model": $m}}\n'
                   '{"id": $id, "x": $x}\n',
                   {"f": "0.1", "m": '"m"', "id": '"q1"', "x": "[1, 2]"}, _open_checkpoint),
        FuzzFormat("feedback file", ".jsonl", "json",
                   '{"source_type": $t, "source_id": $s, "relevant": $r}\n'
                   '{"source_type": "blog", "relevant": false}\n',
                   {"t": '"blog"', "s": '"a.com"', "r": "true"}, read_feedback,
                   ("priors", "update", "store", "{file}")),
        FuzzFormat("queries", ".jsonl", "json", '{"id": $i, "text": $t}\n{"_id": "q2", '
                   '"query": $q}\n', {"i": '"q1"', "t": '"fever"', "q": '"flu"'}, read_queries,
                   ("search", "--index", "idx", "--queries", "{file}")),
        _csv_format("labels", ".csv", "doc_id,credible,topic",
                    [["d0", "1", "t0"], ["d1", "0", "t1"], ["d2", "1", "t0"]], read_labels,
                    ("credibility", "fit", "{file}", "--index", "idx", "--out", "m.json")),
        _csv_format("stance pairs", ".csv", "topic,query,doc_id,stance,text",
                    [["T0", "does zinc help?", "d0", "1", "zinc page"],
                     ["T1", "does zinc help?", "d1", "0", "other page"]],
                    lambda p: read_pairs(p),
                    ("stance", "fit", "{file}", "--index", "idx", "--out", "m.json")),
        _csv_format("answers", ".csv", "question_id,source_id,answer",
                    [["q1", "s1", "Paris"], ["q1", "s2", "Rome"], ["q2", "s1", "Oslo"]],
                    load_answers, ("reliability", "estimate", "{file}")),
        _csv_format("domain table", ".csv", "domain,source_type",
                    [["cdc.gov", "government"], ["example.com", "blog"]], load_domain_table,
                    ("index", "small.jsonl", "--index", "new-idx", "--embedder", "hashing",
                     "--table", "{file}")),
        _csv_format("qrels", ".tsv", "query-id\tcorpus-id\tscore",
                    [["q1", "d1", "1"], ["q2", "d2", "0"]], read_qrels, delimiter="\t"),
        # issue 37: the files a round-4 hostile test broke (stage shapes, manifests, configs)
        _json_format("pipeline spec", PIPELINE_DOC, _load_pipeline,
                     (*SEARCH, "--pipeline", "{file}")),
        _json_format("index manifest", MANIFEST_DOC, _load_manifest, ()),
        FuzzFormat("credrank.toml", ".toml", "toml",
                   "[search]\ntop_k = $k\npriors = $p\nfreshness = $f\n"
                   "[index]\nchunk_tokens = $c\ndate_order = $d\n",
                   {"k": "5", "p": '"current"', "f": '"half_life=365d"', "c": "256",
                    "d": '"mdy"'}, lambda path: load_config(path),
                   (*SEARCH, "--config", "{file}")),
    ]
    return formats


PIPELINE_DOC = {"credrank_pipeline": 1, "top_k": 5, "fetch_k": 15, "retrieval": "dense",
                "unit": "document", "pushdown": None,
                "stages": [{"stage": "prior", "priors": "current"},
                           {"stage": "freshness", "half_life": 365.0},
                           {"stage": "mmr", "diversity": 0.5}]}
MANIFEST_DOC = {"embedder": "minilm", "dim": 384, "bm25": True, "format": 3, "engine": "edge",
                "point_ids": "u64", "chunk_tokens": 256, "chunk_overlap": 32, "split": False}


def _load_pipeline(path: Path) -> object:
    from credrank.core.structured import read_structured
    from credrank.pipeline.spec import PipelineSpec

    return PipelineSpec.from_dict(read_structured(path, what="pipeline spec"), where=str(path))


def _load_manifest(path: Path) -> object:
    """The manifest reader's refusal (a ``StoreError``, which every command turns into exit
    2) said as the ``ValueError`` the property expects; any other exception escapes."""
    from credrank.core.structured import read_structured
    from credrank.index.errors import StoreError
    from credrank.index.manifest import Manifest

    try:
        data = read_structured(path, what="index manifest", fmt="json", error=StoreError)
        return Manifest.from_dict(data, str(path))
    except StoreError as exc:
        raise ValueError(str(exc)) from None


FORMATS = _all_formats()
_IDS = [f.name for f in FORMATS]


# ---------------------------------------------------------------------------- generators

@st.composite
def hostile_inputs(draw: st.DrawFn, fmt: FuzzFormat) -> bytes:
    """The valid document of ``fmt`` with hostile values, lines or bytes (module docstring)."""
    kind = draw(st.sampled_from(["values", "values", "values", "lines", "bytes", "special"]))
    values: dict[str, str] = {}
    if kind == "values" or draw(st.integers(0, 3)) == 0:
        names = draw(st.lists(st.sampled_from(sorted(fmt.defaults)), min_size=1, max_size=3,
                              unique=True))
        pool = LITERALS[fmt.syntax]
        values = {n: draw(st.sampled_from(pool)) for n in names}
    text = fmt.text(values)
    if kind == "lines":
        lines = text.splitlines(keepends=True)
        i = draw(st.integers(0, max(len(lines) - 1, 0)))
        op = draw(st.sampled_from(["drop", "repeat", "swap"]))
        if lines and op == "drop":
            del lines[i]
        elif lines and op == "repeat":
            lines.insert(i, lines[i])
        elif len(lines) > 1:
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        text = "".join(lines)
    if kind == "special":
        special = draw(st.sampled_from(["laughs", "deep", "empty", "blank"]))
        if special == "laughs":
            text = LAUGHS + text if fmt.syntax == "yaml" else LAUGHS
        elif special == "deep":
            text = DEEPER
        elif special == "empty":
            text = ""
        else:
            text = "\n \n"
    data = text.encode("utf-8", "surrogatepass")
    if kind == "bytes":
        op = draw(st.sampled_from(["truncate", "stray", "utf16", "bom", "binary", "cr"]))
        if op == "truncate":
            data = data[:draw(st.integers(0, len(data)))]
        elif op == "stray":
            at = draw(st.integers(0, len(data)))
            data = data[:at] + draw(st.sampled_from([b"\xff", b"\xc3", b"\x80", b"\x00",
                                                     b"\xed\xa0\x80"])) + data[at:]
        elif op == "utf16":
            data = codecs.BOM_UTF16_LE + text.encode("utf-16-le", "surrogatepass")
        elif op == "bom":
            data = codecs.BOM_UTF8 + data
        elif op == "binary":
            data = draw(st.binary(max_size=200))
        else:
            data = data.replace(b"\n", b"\r")
    return data


# ---------------------------------------------------------------------------- checks

@dataclass
class FormatOutcome:
    """What one input did: ``accepted``, ``refused`` (the reader's ``ValueError`` naming the
    file), or a failure: ``crash`` (any other exception), ``memory`` (``MemoryError``) or
    ``unnamed`` (a ``ValueError`` whose message does not start with the file)."""

    accepted: bool = False
    refused: bool = False
    crash: str | None = None
    memory: bool = False
    unnamed: str | None = None
    seconds: float = 0.0
    message: str = ""
    problems: list[str] = field(default_factory=list)

    def failures(self) -> list[str]:
        return [x for x in (self.crash, self.unnamed) if x] + (
            ["MemoryError"] if self.memory else [])


def check_format(fmt: FuzzFormat, data: bytes, where: Path | None = None) -> FormatOutcome:
    """Write ``data`` as a ``fmt`` file and read it (see :class:`FormatOutcome`)."""
    out = FormatOutcome()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(where or tmp) / f"input{fmt.suffix}"
        path.write_bytes(data)
        start = time.perf_counter()
        try:
            fmt.load(path)
            out.accepted = True
        except MemoryError:
            out.memory = True
        except ValueError as exc:
            out.message = str(exc)
            if out.message.startswith(str(path)):
                out.refused = True
            else:
                out.unnamed = f"{type(exc).__name__} without the file name: {out.message[:300]}"
        except Exception as exc:  # counting tracebacks is the point
            out.crash = f"{type(exc).__name__}: {str(exc)[:300]}"
        out.seconds = time.perf_counter() - start
    return out


# ---------------------------------------------------------------------------- tests

@pytest.mark.parametrize("fmt", FORMATS, ids=_IDS)
def test_the_valid_document_is_accepted_with_and_without_a_bom(fmt: FuzzFormat) -> None:
    for data in (fmt.text().encode(), codecs.BOM_UTF8 + fmt.text().encode()):
        out = check_format(fmt, data)
        assert out.accepted, out.crash or out.unnamed or out.message


@pytest.mark.parametrize("fmt", FORMATS, ids=_IDS)
def test_hostile_inputs_are_accepted_or_refused_naming_the_file(fmt: FuzzFormat) -> None:
    @settings(derandomize=True, max_examples=25, deadline=None, database=None,
              suppress_health_check=HEALTH)
    @given(hostile_inputs(fmt))
    def run(data: bytes) -> None:
        assert check_format(fmt, data).failures() == []

    run()


def test_the_generators_reach_the_interesting_cases() -> None:
    """A huge integer, a deep list and an alias are produced and refused where they land."""
    model = FORMATS[0]
    first = sorted(model.defaults)[0]
    for literal in (BIG, HUGE, "NaN", DEEPER):
        out = check_format(model, model.text({first: literal}).encode())
        assert out.refused, out.failures() or out.message
    yaml_fmt = next(f for f in FORMATS if f.syntax == "yaml")
    out = check_format(yaml_fmt, (LAUGHS + yaml_fmt.text()).encode())
    assert out.refused and "alias" in out.message
